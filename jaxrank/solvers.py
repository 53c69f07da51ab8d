"""Solvers (public API): the Pegasos-style 1-slack structural SVM solver.

* :func:`fit_ssvm` — generic: any loss-augmented inference ``oracle``, one fit
  as one ``lax.while_loop`` of :func:`ssvm_step`.
* :func:`fit_ssvm_queue` — many fits in one ``lax.while_loop``: a work queue
  of ``vmap``-ed slots, each refilled with the next problem when its fit stops.
* :func:`fit_ssvm_many` — the queue sharded over devices, long fits first.
* :func:`fit_linear` / :func:`fit_linear_many` — the jitted fits used by the
  estimators (``loss="ap"`` or ``"zero_one"``).
* :class:`HingeBlock` — per-sample hinge terms added to the objective
  (solved as an ``n``-slack block; the constraints of AP-SVM-APPX).
* :func:`ssvm_step`, :func:`init_state`, :class:`SolverState`,
  :class:`FitResult`, :func:`row_sq_norms` — the pieces, for custom loops.
"""

from jaxrank._src.estimators import fit_linear, fit_linear_many
from jaxrank._src.solvers import (
    FitResult,
    HingeBlock,
    SolverState,
    fit_ssvm,
    fit_ssvm_many,
    fit_ssvm_queue,
    init_state,
    row_sq_norms,
    ssvm_step,
    state_result,
)

__all__ = [
    "FitResult",
    "HingeBlock",
    "SolverState",
    "fit_linear",
    "fit_linear_many",
    "fit_ssvm",
    "fit_ssvm_many",
    "fit_ssvm_queue",
    "init_state",
    "row_sq_norms",
    "ssvm_step",
    "state_result",
]
