"""Cross-validation of C by masks: many fits in one compiled call."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold


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


def task_names_and_where(positive, task_names, where):
    """``(names, where [T, n] bool)`` of ``sweep``'s tasks ``positive [T, n]``.

    ``task_names``: ``None`` (the column indices) or ``T`` names; ``where``:
    ``None`` (every sample), ``[n]`` or ``[T, n]`` bool.

    Raises:
        ValueError: ``task_names`` of another length than ``T``.
        TypeError: ``where`` that is not bool.
    """
    T = positive.shape[0]
    names = list(range(T)) if task_names is None else list(task_names)
    if len(names) != T:
        raise ValueError(f"task_names has {len(names)} names for {T} tasks.")
    where = np.ones(positive.shape, bool) if where is None else np.broadcast_to(
        np.asarray(where), positive.shape)
    if where.dtype != bool:
        raise TypeError(f"where must be a bool array; got dtype {where.dtype}.")
    return names, where


def fold_masks(cv, positive, random_state, groups=None, where=None, units=None):
    """``[T, F, n]`` validation masks (``sweep``'s ``cv``).

    ``groups``: query ids (folds of whole queries; a fold may lack a class in
    a query, which MAP skips). ``units``: ``[n]`` ids of other units kept
    whole (a graph's connected components): stratified group folds
    (``StratifiedGroupKFold``), each part needing both classes.
    """
    T, n = positive.shape
    if where is None:
        where = np.ones(positive.shape, bool)
    is_int = isinstance(cv, (int, np.integer)) and not isinstance(cv, (bool, np.bool_))
    if not is_int and (np.ndim(cv) == 0 and not hasattr(cv, "split")):
        raise TypeError(
            "cv must be an int >= 2 (stratified folds), a scikit-learn splitter (an object "
            "with split(X, y, groups), e.g. StratifiedKFold(5)) or bool validation masks "
            f"[F, n] / [T, F, n]; got {cv!r}.")
    if is_int and int(cv) < 2:
        raise ValueError(f"cv must be an int >= 2 (the number of folds); got {cv!r}.")
    if hasattr(cv, "split"):
        masks = splitter_masks(cv, positive, where, groups if units is None else units)
    elif units is not None and is_int:
        splitter = StratifiedGroupKFold(int(cv), shuffle=True, random_state=random_state)
        try:
            masks = splitter_masks(splitter, positive, where, units)
        except ValueError as err:  # fewer units than folds
            raise ValueError(f"cv={cv}: {err} (folds keep each connected component of "
                             "the graph whole).") from None
    elif groups is not None and is_int:
        masks = np.stack([group_fold_masks(groups, int(cv)) for _ in range(T)])
    elif is_int:
        masks = np.zeros((T, int(cv), n), bool)
        for t in range(T):
            masks[t][:, where[t]] = stratified_fold_masks(
                positive[t][where[t]], int(cv), random_state=random_state)
    else:
        masks = np.asarray(cv)
        if masks.dtype != bool:
            raise TypeError(
                "cv must be an int >= 2, a scikit-learn splitter or bool validation masks "
                f"[F, n] / [T, F, n]; got an array of dtype {masks.dtype}.")
        if masks.ndim == 2:
            masks = np.broadcast_to(masks, (T,) + masks.shape)
        if masks.ndim != 3 or masks.shape[0] != T or masks.shape[2] != n:
            raise ValueError(
                f"cv must be an int, [F, n] or [T, F, n] bool masks with n={n}, T={T}; "
                f"got shape {np.shape(cv)}."
            )
    if masks.shape[1] < 2:
        raise ValueError(f"cv needs at least 2 folds; got {masks.shape[1]}.")
    masks = masks & where[:, None, :]
    for t in range(T):
        for f in range(masks.shape[1]):
            val = masks[t, f]
            for part, m in (("validation", val), ("training", ~val & where[t])):
                n_pos = int((positive[t] & m).sum())
                n_neg = int((~positive[t] & m).sum())
                if (n_pos == 0 or n_neg == 0) and groups is None:
                    raise ValueError(
                        f"task {t}, fold {f}: the {part} part has {n_pos} positive(s) "
                        f"and {n_neg} negative(s); every fold needs both classes "
                        "(use fewer folds or stratified masks)."
                    )
    return np.ascontiguousarray(masks)


def splitter_masks(cv, positive, where, groups):
    """``[T, F, n]`` validation masks from a scikit-learn splitter, per task.

    Each task's samples (``where``) are split by ``cv.split(X, y, groups)``
    with ``y`` the task's labels (so stratified splitters stratify them);
    the validation part of split ``f`` is fold ``f``.
    """
    T, n = positive.shape
    per_task = []
    for t in range(T):
        idx = np.flatnonzero(where[t])
        g = None if groups is None else np.asarray(groups)[idx]
        folds = []
        for split in cv.split(np.zeros((idx.size, 1)), positive[t][idx].astype(int), g):
            m = np.zeros(n, bool)
            m[idx[np.asarray(split[1])]] = True
            folds.append(m)
        per_task.append(folds)
    F = {len(f) for f in per_task}
    if len(F) != 1:
        raise ValueError(
            f"cv: the splitter gave different numbers of folds per task: {sorted(F)}.")
    return np.asarray(per_task, bool).reshape(T, F.pop(), n)
