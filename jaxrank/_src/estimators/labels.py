"""Labels of the estimators: one rule for every estimator and the CLI (scikit-learn's)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import type_of_target


def labels_to_tasks(Y, name="y", pos_label=None):
    """Binary tasks from labels, by scikit-learn's ``classes_`` convention.

    The one label rule of every jaxrank estimator and of the CLI: ``y`` holds
    exactly two distinct values (numbers, strings or bool); ``classes_`` is
    their sorted array and ``classes_[1]`` (the larger value) is the positive
    class, unless ``pos_label`` names the positive class (the relevant
    items; the name of scikit-learn's metrics): then ``classes_`` is
    ``[the other label, pos_label]``, so ``classes_[1]`` is always the
    positive class. Continuous targets (non-integer floats) are rejected as
    by every scikit-learn classifier (``check_classification_targets``).

    Args:
        Y: ``[n]`` labels with exactly two distinct values, or ``[n, T]``
            with the same two values in every column (``[n, 1]`` is one task).
        name: argument name for messages.
        pos_label: ``None`` (the larger label is positive) or the label of
            the positive class (one of the two values, compared with ``==``).

    Returns:
        ``(positive [T, n] bool, classes [2], multi_output bool)``;
        ``positive = (Y == classes[1])``.

    Raises:
        ValueError: not 1-D/2-D, no sample or no task column, continuous
            (non-integer float) labels, NaN or infinite labels, a column (or
            ``y``) without exactly two classes, columns with different label
            sets, a ``pos_label`` that is not one of the two labels.
        TypeError: complex labels.
    """
    arr = np.asarray(Y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D [n_samples, n_tasks]; got shape {arr.shape}.")
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real or categorical labels; got complex dtype.")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite labels.")
    cols = arr[:, None] if arr.ndim == 1 else arr
    if cols.shape[0] == 0:
        raise ValueError(f"{name} is empty; got shape {arr.shape}.")
    if cols.shape[1] == 0:
        raise ValueError(f"{name} has no task columns; got shape {arr.shape}.")
    try:
        kind = type_of_target(arr, input_name=name)
    except ValueError:
        kind = None  # e.g. mixed types: reported below by np.unique
    if kind in ("continuous", "continuous-multioutput"):
        raise ValueError(
            f"Unknown label type: {kind}. {name} must hold two discrete classes (the "
            "larger value is the positive class); got non-integer float values "
            f"{np.unique(arr).tolist()[:6]}.")
    classes = None
    positive = []
    for t in range(cols.shape[1]):
        cls = np.unique(cols[:, t])
        where = name if arr.ndim == 1 else f"{name}[:, {t}] (task column {t})"
        if cls.shape[0] != 2:
            raise ValueError(
                ("Only binary classification is supported (one binary task per column "
                 "of a 2-D y). " if cls.shape[0] > 2 else "")
                + f"{where} must contain exactly two classes (positives and negatives); got "
                f"{cls.shape[0]} class{'es' if cls.shape[0] != 1 else ''}: "
                f"{cls.tolist()[:6]}. The positive class is the larger label value."
            )
        if classes is not None and not np.array_equal(cls, classes):
            raise ValueError(
                f"all task columns of {name} must use the same two label values; column 0 "
                f"has {classes.tolist()} and column {t} has {cls.tolist()}."
            )
        classes = cls
    if pos_label is not None:
        classes = _order_classes(classes, pos_label, name)
    for t in range(cols.shape[1]):
        positive.append(cols[:, t] == classes[1])
    return np.stack(positive), classes, arr.ndim == 2


def positive_class_text(est, classes, *, grouped=False):
    """One line saying which class a fit took as relevant (for summaries).

    Args:
        est: the estimator (its ``pos_label`` and, with ``grouped``,
            ``min_relevance`` are read).
        classes: the fit's ``classes_`` (``classes[1]`` is positive).
        grouped: a fit on query groups (relevance grades).

    Returns:
        e.g. ``"positive (relevant) class: 'has3' (pos_label)"`` or ``...:
        1 (the larger label; pos_label chooses another)``.
    """
    if grouped:
        return (f"relevant items: grade >= min_relevance="
                f"{getattr(est, 'min_relevance', 1)!r}")
    pos = classes[1].item() if isinstance(classes[1], np.generic) else classes[1]
    if isinstance(pos, float) and pos.is_integer():  # labels read from files are floats
        pos = int(pos)
    how = ("pos_label" if getattr(est, "pos_label", None) is not None
           else "the larger label; pos_label chooses the other")
    return f"positive (relevant) class: {pos!r} ({how})"


def _order_classes(classes, pos_label, name="y"):
    """``[other, pos_label]`` from the two sorted ``classes`` (``ValueError`` if absent)."""
    # Python equality (no cast: 0.5 is not the label 0, "1" is not 1).
    want = pos_label.item() if isinstance(pos_label, np.generic) else pos_label
    hit = np.array([bool(c == want) for c in classes.tolist()], bool)
    if hit.sum() != 1:
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the two labels of {name}: "
            f"{classes.tolist()}. Pass one of them (the positive, relevant class), or "
            "pos_label=None for the larger one.")
    return classes[::-1].copy() if hit[0] else classes
