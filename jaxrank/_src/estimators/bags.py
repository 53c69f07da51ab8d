"""Bags of candidates as estimator inputs: bag ids, per-bag labels, candidate masks."""

from __future__ import annotations

import numpy as np


def check_bags(bags, n, name="bags"):
    """``[n]`` bag ids of any hashable type, validated, as int64 codes.

    Integer ids (and integral floats) are kept as they are; other ids
    (strings, fractional floats, bool, tuples, any hashable object) are
    replaced by their rank among the distinct ids (sorted order when the ids
    can be sorted, else order of first appearance), so "sorted bag-id order"
    is the order of the ids themselves.

    Args:
        bags: ``[n]`` ids, one per instance row.
        n: the number of rows.
        name: argument name for messages.

    Returns:
        ``[n]`` int64 ids.

    Raises:
        ValueError: not 1-D of length ``n``; NaN or ``None`` ids (no bag
            can be told by them).
        TypeError: unhashable ids (e.g. lists).
    """
    b = np.asarray(bags) if isinstance(bags, np.ndarray) else None
    if b is None:
        try:
            b = np.asarray(bags)
        except ValueError:  # ragged sequences (e.g. tuples of different lengths)
            b = None
        if (b is None or b.ndim != 1) and hasattr(bags, "__len__") and len(bags) == n:
            b = np.empty(n, object)
            b[:] = list(bags)
    if b is None or b.ndim != 1 or b.shape[0] != n:
        shape = None if b is None else b.shape
        raise ValueError(f"{name} must be a 1-D array of {n} bag ids (one per instance row of "
                         f"X); got shape {shape}.")
    if b.dtype.kind in "iu":
        return b.astype(np.int64)
    if b.dtype.kind == "f":
        if not np.all(np.isfinite(b)):
            raise ValueError(f"{name} holds NaN or infinite bag ids; every row needs a bag id.")
        if np.all(b == np.round(b)) and np.all(np.abs(b) < 2.0**62):
            return b.astype(np.int64)
    if b.dtype.kind == "O":
        for v in b:
            if v is None or (isinstance(v, float) and not np.isfinite(v)):
                raise ValueError(f"{name} holds a {v!r} bag id; every row needs a bag id.")
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"{name} must hold hashable bag ids (numbers, strings, "
                                f"tuples, ...); got {type(v).__name__} {v!r}.") from None
    try:
        return np.unique(b, return_inverse=True)[1].reshape(-1).astype(np.int64)
    except TypeError:  # ids that cannot be sorted together: order of first appearance
        codes = {}
        return np.array([codes.setdefault(v, len(codes)) for v in b.tolist()], np.int64)


def _given_id(given, i):
    """The bag id of row ``i`` as the user gave it (``check_bags`` may have coded it)."""
    v = list(given)[i]
    return v.item() if isinstance(v, np.generic) else v


def _check_instance_mask(a, n, name):
    if a is None:
        return None
    arr = np.asarray(a)
    if arr.dtype != bool:
        raise TypeError(f"{name} must be a bool array (one flag per instance); got dtype "
                        f"{arr.dtype}.")
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one flag per instance row of X); "
                         f"got {arr.shape}.")
    return arr


def per_bag_labels(y, bags, name="y"):
    """Per-bag labels from per-instance labels (constant within each bag).

    Args:
        y: ``[n]`` labels, one per instance.
        bags: ``[n]`` integer bag ids.

    Returns:
        ``[B]`` labels in sorted bag-id order.

    Raises:
        ValueError: a bag whose instances carry different labels, bad shapes.
    """
    y = np.asarray(y)
    given = bags
    bags = check_bags(bags, y.shape[0] if y.ndim == 1 else -1)
    ids, first, inv = np.unique(bags, return_index=True, return_inverse=True)
    lab = y[first]
    bad = np.flatnonzero(y != lab[inv])
    if bad.size:
        b = ids[inv[bad[0]]]
        shown = _given_id(given, int(bad[0]))
        raise ValueError(f"{name}: the instances of bag {shown!r} carry different labels "
                         f"({np.unique(y[bags == b]).tolist()[:4]}); a bag has one label.")
    return lab
