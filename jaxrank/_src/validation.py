"""Eager input checks shared by the public functions (private).

Kernels cannot raise on values under ``jit``; these checks run only when the
arrays are concrete (not tracers), so the same public function validates in
eager use and stays traceable inside ``jit``/``vmap``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
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
    if not (jnp.issubdtype(arr.dtype, jnp.floating) or jnp.issubdtype(arr.dtype, jnp.integer)):
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
    check_label_dtype(arr, name)
    if jnp.issubdtype(arr.dtype, jnp.floating) and arr.dtype.itemsize < 4:
        arr = arr.astype(np.float32)  # float16 / bfloat16 labels: exact in float32
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
    pos = np.atleast_1d(np.sum(positive & valid, axis=-1)).reshape(-1)
    neg = np.atleast_1d(np.sum(~positive & valid, axis=-1)).reshape(-1)
    bad = np.flatnonzero((pos == 0) | (neg == 0))
    if bad.size:
        i = int(bad[0])
        where = f"list {i} (of {pos.size})" if pos.size > 1 else "the list"
        raise ValueError(
            f"{name} must contain both classes (a positive and a negative) in every "
            f"list; {where} has {int(pos[i])} positive(s) and {int(neg[i])} negative(s)"
            + (f", and {bad.size - 1} other list(s) lack a class too." if bad.size > 1
               else "."))


def check_where(where, shape):
    if where is None:
        return np.ones(shape, bool)
    arr = np.asarray(where)
    if arr.dtype != bool:
        raise TypeError(f"where must be a bool array; got dtype {arr.dtype}.")
    if arr.shape != tuple(shape):
        raise ValueError(f"where must have shape {tuple(shape)}; got {arr.shape}.")
    return arr


def dtype_of(x):
    """The dtype of an array, a tracer or anything ``np.asarray`` takes (before
    ``jnp.asarray`` narrows 64-bit NumPy input)."""
    dt = getattr(x, "dtype", None)
    return np.dtype(dt) if dt is not None else np.asarray(x).dtype


_HALF = ("float16", "bfloat16")


def check_dtype(x, name, *, integers, half, fn=None):
    """Raise ``TypeError`` unless ``x`` has a dtype the function computes with.

    A check on the dtype only, so it runs at trace time too (the same error
    eagerly and under ``jit``). Accepted: float32 and float64; integers if
    ``integers``; float16 and bfloat16 if ``half``. Never accepted: complex
    (its imaginary part would be dropped), bool and non-numeric dtypes.

    Args:
        x: array, tracer, or anything ``np.asarray`` takes.
        name: argument name for messages.
        integers: accept integer dtypes.
        half: accept float16 / bfloat16.
        fn: the public function's name, prefixed to messages.

    Returns:
        The dtype of ``x`` (as given: a NumPy int64 array is reported as
        int64, not as the int32 ``jnp.asarray`` would make of it).

    Raises:
        TypeError: any other dtype; the message names the argument, what is
            accepted, the dtype given and what to pass instead.
    """
    dt = dtype_of(x)
    where = f"{fn}: " if fn else ""
    want = ("a real numeric array (integer or floating)" if integers
            else "a real floating array (float32, or float64 with jax x64 enabled)")
    if dt.kind == "c":
        raise TypeError(
            f"{where}{name} must be {want}; got complex dtype {dt}. Complex values are "
            f"not cast (the imaginary part would be lost): pass jnp.real({name}) or "
            f"jnp.abs({name}) explicitly.")
    if dt == bool:
        raise TypeError(
            f"{where}{name} must be {want}; got dtype bool. Cast explicitly, e.g. "
            f"{name}.astype(jnp.float32).")
    if dt.name in _HALF:
        if half:
            return dt
        raise TypeError(
            f"{where}{name} of dtype {dt.name} is not supported (half precision is too "
            f"coarse for this computation); pass float32 ({name}.astype(jnp.float32)) or "
            "float64.")
    if jnp.issubdtype(dt, jnp.floating):
        return dt
    if jnp.issubdtype(dt, jnp.integer):
        if integers:
            return dt
        raise TypeError(
            f"{where}{name} must be {want}; got integer dtype {dt}. Cast explicitly, e.g. "
            f"{name}.astype(jnp.float32).")
    raise TypeError(f"{where}{name} must be {want}; got dtype {dt}.")


def check_label_dtype(labels, name="labels", fn=None):
    """Raise ``TypeError`` unless ``labels`` are bool, integer or real floating (any
    precision); a dtype check, so the same error eagerly and under ``jit``."""
    dt = dtype_of(labels)
    if dt == bool or jnp.issubdtype(dt, jnp.integer) or (
            dt.kind != "c" and jnp.issubdtype(dt, jnp.floating)):
        return dt
    where = f"{fn}: " if fn else ""
    what = "complex dtype" if dt.kind == "c" else "dtype"
    raise TypeError(
        f"{where}{name} must be bool, integer or real floating (values in {{0, 1}} or "
        f"{{-1, 1}}); got {what} {dt}.")


def label_defects(labels, valid, *, binary=True):
    """Per list (last axis), True where the labels of the valid items are bad.

    The traced counterpart of :func:`binary_labels` (which raises eagerly):
    a NaN label, or (``binary``) a value outside ``{0, 1}`` or ``{-1, 1}``
    (both ``-1`` and ``0`` in one list included). Items outside ``valid``
    are not read.

    Args:
        labels: ``[..., n]`` bool, integer or floating array (may be traced).
        valid: ``[..., n]`` bool.
        binary: also flag values outside the binary sets.

    Returns:
        ``[...]`` bool array.
    """
    lab = jnp.asarray(labels)
    valid = jnp.broadcast_to(jnp.asarray(valid, bool), lab.shape)
    if lab.dtype == bool:
        return jnp.zeros(lab.shape[:-1], bool)
    bad = jnp.zeros(lab.shape, bool)
    if jnp.issubdtype(lab.dtype, jnp.floating):
        bad = jnp.isnan(lab)
    if binary:
        zero, one, minus = (lab == 0), (lab == 1), (lab == -1)
        bad = bad | ~(zero | one | minus)
        mixed = jnp.any(zero & valid, axis=-1) & jnp.any(minus & valid, axis=-1)
        return jnp.any(bad & valid, axis=-1) | mixed
    return jnp.any(bad & valid, axis=-1)


def check_oracle_args(fn, scores, positive, where):
    """Trace-time checks of an oracle's one list: ``scores [n]`` float32/float64,
    ``positive`` and ``where`` of the same shape (``ValueError`` / ``TypeError``)."""
    if np.ndim(scores) != 1:
        raise ValueError(
            f"{fn}: scores must be one list of shape [n] (vmap the oracle over batch "
            f"axes); got shape {np.shape(scores)}.")
    check_dtype(scores, "scores", integers=False, half=False, fn=fn)
    for name, x in (("positive", positive), ("where", where)):
        if np.shape(x) != np.shape(scores):
            raise ValueError(
                f"{fn}: {name} must have the shape of scores {np.shape(scores)}; got "
                f"{np.shape(x)}.")


def check_features(X, name="X"):
    """Feature input before scikit-learn's ``validate_data``: clear errors, exact widening.

    * A pandas ``DataFrame`` with a non-numeric column (strings, objects,
      categories, dates) is a ``ValueError`` naming the column and its dtype
      (rather than scikit-learn's parse or feature-name errors).
    * float16 and bfloat16 arrays are widened to float32 (exact: every
      value is kept), the dtype every fit computes in.

    Args:
        X: the ``X`` a user passed (array, sparse matrix, DataFrame, list).
        name: argument name for messages.

    Returns:
        ``X`` unchanged, or a float32 copy of a half-precision array.

    Raises:
        ValueError: a DataFrame column that is not numeric or bool.
    """
    dtypes = getattr(X, "dtypes", None)
    columns = getattr(X, "columns", None)
    if dtypes is not None and columns is not None and hasattr(X, "iloc"):
        for col, dt in zip(columns, dtypes):
            kind = getattr(dt, "kind", "O")
            if kind not in "biuf":
                raise ValueError(
                    f"{name} column {col!r} has dtype {dt}: every feature must be numeric "
                    "(int, float or bool). Encode it (e.g. one-hot with pandas.get_dummies "
                    "or sklearn.preprocessing.OneHotEncoder) or drop it.")
        return X
    dt = getattr(X, "dtype", None)
    if dt is not None and np.dtype(dt).name in _HALF and not hasattr(X, "tocsr"):
        return np.asarray(X, np.float32)
    return X
