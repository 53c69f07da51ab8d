"""Model selection: fold masks, an AP scorer and batched sweeps.

* :func:`sweep` / :class:`SweepResult` — every (task, C, fold) fit in one
  compiled call, for any structured SVM; estimators without ``C``
  (KernelRank) by a loop of fits (also ``jaxrank.sweep``).
* :func:`stratified_fold_masks` — ``[F, n]`` bool validation masks;
  :func:`group_fold_masks` — folds of whole queries.
* :func:`ap_scorer` — scikit-learn scorer (``GridSearchCV(..., scoring=ap_scorer)``).
"""

from jaxrank._src.estimators.model_selection import ap_scorer, group_fold_masks, stratified_fold_masks
from jaxrank._src.estimators.sweep import SweepResult, sweep

__all__ = ["SweepResult", "ap_scorer", "group_fold_masks", "stratified_fold_masks", "sweep"]
