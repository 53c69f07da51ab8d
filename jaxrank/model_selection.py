"""Model selection: stratified fold masks, an AP scorer and batched sweeps.

* :func:`stratified_fold_masks` — ``[F, n]`` bool validation masks.
* :func:`ap_scorer` — scikit-learn scorer (``GridSearchCV(..., scoring=ap_scorer)``).
* :func:`sweep` / :class:`SweepResult` — every (task, C, fold) fit in one jitted
  call (also ``jaxrank.sweep``).
* :func:`cv_grid` — the (fold x C) kernel for one task.
"""

from jaxrank._src.model_selection import ap_scorer, cv_grid, stratified_fold_masks
from jaxrank._src.sweep import SweepResult, sweep, sweep_kernel

__all__ = [
    "SweepResult",
    "ap_scorer",
    "cv_grid",
    "stratified_fold_masks",
    "sweep",
    "sweep_kernel",
]
