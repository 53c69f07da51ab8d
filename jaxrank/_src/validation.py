"""Eager input checks shared by the public functions (private).

Kernels cannot raise on values under ``jit``; these checks run only when the
arrays are concrete (not tracers), so the same public function validates in
eager use and stays traceable inside ``jit``/``vmap``.
"""

from __future__ import annotations

import jax
import numpy as np


def is_concrete(*xs) -> bool:
    """True if no argument is a JAX tracer (values can be inspected)."""
    return not any(isinstance(x, jax.core.Tracer) for x in xs if x is not None)


def check_same_shape(name_a, a, name_b, b):
    if np.shape(a) != np.shape(b):
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape; got "
            f"{np.shape(a)} and {np.shape(b)}."
        )


def check_scores(scores, name="scores"):
    """Raise ValueError on empty, non-numeric or non-finite scores."""
    arr = np.asarray(scores)
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one axis; got a scalar.")
    if arr.shape[-1] == 0:
        raise ValueError(f"{name} is empty; expected at least 2 items per list.")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be a real numeric array; got dtype {arr.dtype}.")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s).")
    return arr


def binary_labels(labels, name="labels"):
    """Map labels in {0,1}, {-1,1} or bool to a bool array; raise otherwise."""
    arr = np.asarray(labels)
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must be numeric or bool; got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    values = set(np.unique(arr).tolist())
    if not (values <= {0, 1} or values <= {-1, 1}):
        shown = sorted(values)[:6]
        raise ValueError(
            f"{name} must be binary with values in {{0, 1}} or {{-1, 1}}; got {shown}."
        )
    return arr > 0


def check_both_classes(positive, valid, name="labels"):
    """Raise ValueError unless every list has a positive and a negative."""
    pos = np.sum(positive & valid, axis=-1)
    neg = np.sum(~positive & valid, axis=-1)
    if np.any(pos == 0) or np.any(neg == 0):
        raise ValueError(
            f"{name} must contain both classes (a positive and a negative) in every "
            f"list; got {int(np.min(pos))} positive(s) and {int(np.min(neg))} "
            "negative(s) in the worst list."
        )


def check_where(where, shape):
    if where is None:
        return np.ones(shape, bool)
    arr = np.asarray(where)
    if arr.dtype != bool:
        raise TypeError(f"where must be a bool array; got dtype {arr.dtype}.")
    if arr.shape != tuple(shape):
        raise ValueError(f"where must have shape {tuple(shape)}; got {arr.shape}.")
    return arr
