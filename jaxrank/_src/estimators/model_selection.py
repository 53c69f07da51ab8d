"""Cross-validation of C by masks: many fits in one compiled call."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedKFold


def stratified_fold_masks(positive, n_folds, *, random_state=0):
    """Boolean ``[n_folds, n]`` validation masks of stratified folds.

    Uses ``sklearn.model_selection.StratifiedKFold`` (shuffled).

    Raises:
        ValueError: ``n_folds < 2`` or a class with fewer than ``n_folds``
            samples (a fold would have no positive).
    """
    positive = np.asarray(positive, bool)
    if not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"cv must be an int >= 2; got {n_folds!r}.")
    n_min = int(min(positive.sum(), (~positive).sum()))
    if n_min < n_folds:
        raise ValueError(
            f"cv={n_folds} folds need at least {n_folds} samples of each class; "
            f"the smaller class has {n_min}."
        )
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=random_state)
    masks = np.zeros((n_folds, positive.shape[0]), bool)
    for f, (_, val) in enumerate(skf.split(np.zeros(positive.shape[0]), positive)):
        masks[f, val] = True
    return masks


def group_fold_masks(groups, n_folds):
    """Boolean ``[n_folds, n]`` validation masks of folds of whole queries.

    Uses ``sklearn.model_selection.GroupKFold`` (balanced fold sizes): every
    query falls in exactly one validation fold.

    Raises:
        ValueError: ``n_folds < 2`` or fewer queries than folds.
    """
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(groups)
    if not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"cv must be an int >= 2; got {n_folds!r}.")
    if np.unique(groups).size < n_folds:
        raise ValueError(f"cv={n_folds} folds need at least {n_folds} queries; got "
                         f"{np.unique(groups).size}.")
    masks = np.zeros((n_folds, groups.shape[0]), bool)
    for f, (_, val) in enumerate(GroupKFold(n_splits=n_folds).split(groups, groups=groups)):
        masks[f, val] = True
    return masks


def ap_scorer(estimator, X, y):
    """Average precision of ``estimator.decision_function(X)`` (a scikit-learn scorer).

    Usable as ``GridSearchCV(APSVM(), {"C": [...]}, scoring=ap_scorer, cv=...)``
    or ``cross_val_score(..., scoring=ap_scorer)``. Computes the same AP as
    the validation AP of :func:`jaxrank.sweep` (ties handled as one
    threshold per block of tied scores, see :func:`jaxrank.metrics.average_precision`).

    Args:
        estimator: a fitted estimator with ``decision_function``.
        X: ``[n, d]`` validation features.
        y: ``[n]`` binary labels (both classes present).

    Returns:
        float AP in ``[0, 1]``; higher is better.

    Raises:
        ValueError: single-class or non-binary ``y``.
    """
    from jaxrank._src.metrics import average_precision
    from jaxrank._src.validation import binary_labels

    scores = np.asarray(estimator.decision_function(X), np.float32)
    return float(average_precision(scores, binary_labels(np.asarray(y), "y")))
