"""Input layout shared by the oracles' public wrappers (eager checks, masks, NaN policy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src import validation

Array = jax.Array


def _layout(scores, labels, where, name, *, both_classes=True):
    """Validate (eagerly when possible) and return (scores, positive, valid, kp).

    ``both_classes``: every list needs a positive and a negative (ranking
    losses); else (the binary hinge, a sum over items) a list needs only one
    item of ``where``.
    """
    validation.check_same_shape("scores", scores, "labels", labels)
    if where is not None:
        validation.check_same_shape("scores", scores, "where", where)
    if np.ndim(scores) == 0:
        raise ValueError(f"{name}: scores must have at least one axis [..., n]; got a scalar.")
    # Dtypes first (the same error eagerly and at trace time, with the dtype
    # as given: NumPy int64 is not reported as the int32 of jnp.asarray).
    validation.check_dtype(scores, "scores", integers=False, half=False, fn=name)
    validation.check_label_dtype(labels, fn=name)
    n = np.shape(scores)[-1] if np.ndim(scores) else 0
    if validation.is_concrete(scores, labels, where):
        valid = validation.check_where(where, np.shape(scores))
        arr = np.asarray(scores)
        # Items outside ``where`` take no part: their scores may be anything.
        validation.check_scores(np.where(valid, arr, np.zeros((), arr.dtype)) if arr.ndim
                                else arr)
        positive = validation.binary_labels(labels)
        if both_classes:
            validation.check_both_classes(positive, valid)
        elif np.any(np.sum(valid, axis=-1) == 0):
            raise ValueError(f"{name}: where removes every item of a list.")
        # Static bound on the positives, rounded up to a power of two so that
        # calls with slightly different numbers of positives share a compile.
        n_pos = max(int(np.max(np.sum(positive & valid, axis=-1))), 1)
        kp = min(n, 1 << (n_pos - 1).bit_length())
        positive, valid = jnp.asarray(positive), jnp.asarray(valid)
    else:
        if where is not None and validation.dtype_of(where) != bool:
            raise TypeError(f"where must be a bool array; got dtype {validation.dtype_of(where)}.")
        positive = jnp.asarray(labels) > 0
        valid = jnp.ones(jnp.shape(scores), bool) if where is None else where
        kp = max(n, 1)
        # What the eager checks refuse (NaN or non-binary labels) gives NaN: a
        # NaN added to the list's valid scores takes the NaN path of every
        # output (values and gradients).
        bad = validation.label_defects(labels, valid)
        scores = jnp.asarray(scores)
        scores = scores + jnp.where(bad[..., None] & valid, jnp.nan, 0).astype(scores.dtype)
    scores = jnp.asarray(scores)
    return scores, positive, valid, kp


def _masked_scores(scores, valid):
    """Scores with the items outside ``where`` set to 0 (a masked NaN or inf must not
    reach the kernels, where ``0 * NaN`` in a dot product would poison the list)."""
    return jnp.where(valid, scores, jnp.zeros((), scores.dtype))


@jax.jit
def _nan_if_nan_scores(r, scores, valid):
    """The rax rule under ``jit``: a list with a NaN score among its items gives NaN.

    ``loss``, ``hinge`` and every ``coef`` of such a list are NaN (never a
    plausible number); items outside ``where`` do not count. (Eagerly, NaN
    scores are a ``ValueError`` before this point.)
    """
    bad = jnp.any(jnp.isnan(scores) & valid, axis=-1)
    nan = jnp.asarray(jnp.nan, scores.dtype)
    return r._replace(
        loss=jnp.where(bad, nan, r.loss),
        coef=jnp.where(bad[..., None], nan, r.coef),
        hinge=None if r.hinge is None else jnp.where(bad, nan, r.hinge),
    )


def _check_pos_weight(pos_weight):
    """``pos_weight``: a real number, finite and ``> 0`` in float32 (checked after the cast)."""
    if (isinstance(pos_weight, bool) or not np.isscalar(pos_weight)
            or not np.issubdtype(np.asarray(pos_weight).dtype, np.number)
            or np.iscomplexobj(pos_weight)):
        raise ValueError(f"pos_weight must be a positive number; got {pos_weight!r}.")
    with np.errstate(over="ignore", under="ignore"):
        p32 = np.float32(pos_weight)
    if not (np.isfinite(p32) and p32 >= np.finfo(np.float32).tiny):
        raise ValueError(
            "pos_weight must be a positive number, finite and > 0 in float32; got "
            f"{pos_weight!r}.")
