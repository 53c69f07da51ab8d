"""Solvers (public API): the Pegasos-style 1-slack structural SVM solver.

* :func:`fit_ssvm` — generic: any loss-augmented inference ``oracle``.
* :func:`fit_linear` — the jitted fit used by the estimators (``loss="ap"`` or
  ``"zero_one"``), ``vmap``-able over ``C``.
* :class:`FitResult`.
"""

from jaxrank._src.estimators import fit_linear
from jaxrank._src.solvers import FitResult, fit_ssvm

__all__ = ["FitResult", "fit_linear", "fit_ssvm"]
