"""Solvers (public API): the structured SVM solver, written once for every model.

* :func:`fit` — the single-fit driver: one ``lax.while_loop`` of
  :func:`step` for any structured model (:mod:`jaxrank.models`).
* :class:`Solver` — the solver's settings (``tol``, ``max_iter``, the plane
  cache, its inner steps, the hinge block's visit budget, the seed); a
  model suggests the tuning values through ``solver_defaults``.
* :func:`fit_many` — the batched driver: ``M`` fits as work queues of
  ``vmap``-ed slots, sharded over devices.
* :func:`step`, :func:`init_state`, :func:`state_result`,
  :class:`SolverState`, :class:`FitResult` (its ``status``, a
  :class:`FitStatus`: converged, max_iter or non-finite) — the pieces, for custom loops
  (:func:`plane_cache_size` gives the plane cache :func:`fit` uses).

The objective, with ``S = model.scores(w, data)``::

    1/2 ||w||^2 + C max_y [Delta(y) - <S, coef_y>] + sum_i u_i max(0, 1 - y_i z_i^T w)

(1-slack structured term from ``model.oracle``, per-sample hinges from
``model.hinge_terms``), stopped at a certified relative duality gap.
"""

from jaxrank._src.solvers.batch import fit_many
from jaxrank._src.solvers.planes import plane_cache_size
from jaxrank._src.solvers.settings import Solver
from jaxrank._src.solvers.ssvm import (
    FitResult,
    FitStatus,
    SolverState,
    fit,
    init_state,
    state_result,
    step,
)

__all__ = ["FitResult", "FitStatus", "Solver", "SolverState", "fit", "fit_many", "init_state",
           "plane_cache_size", "state_result", "step"]
