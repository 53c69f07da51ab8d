"""The 0-1 (hinge) loss of the binary SVM as a loss-augmented inference oracle.

The most-violated labelling of the per-sample hinge ``sum_i u_i max(0, 1 -
y_i s_i)`` (Joachims 2005, the 0-1 loss case): pure, shape-static and
jit/vmap-able.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrank._src import validation
from jaxrank._src.oracles.inputs import (
    _check_pos_weight,
    _layout,
    _masked_scores,
    _nan_if_nan_scores,
)
from jaxrank._src.types import Violation

Array = jax.Array


def zero_one_oracle(scores, positive, where, *, pos_weight=1.0):
    """Most-violated labelling of the (weighted) binary hinge loss, one list.

    The pure kernel behind :func:`zero_one_most_violated` (oracle form):
    ``loss = sum_i c_i w_i``, ``coef_i = c_i w_i y_i`` with ``y_i = +-1``,
    ``c_i = 1[y_i s_i < 1]``, ``w_i = pos_weight`` for positives and 1 for
    negatives; ``hinge = sum_i w_i max(0, 1 - y_i s_i)``. O(n).

    Args:
        scores: ``[n]`` float decision values.
        positive: ``[n]`` bool labels.
        where: ``[n]`` bool, the items that take part.
        pos_weight: ``[]`` float weight of the positives (may be traced).

    Returns:
        :class:`Violation` with ``aux=None``.

    Raises:
        ValueError / TypeError: (at trace time) ``scores`` not ``[n]`` float32 or
            float64, ``positive`` or ``where`` of another shape.

    References:
        Joachims, "Training linear SVMs in linear time", KDD 2006 (1-slack
        form of the binary SVM).
    """
    validation.check_oracle_args("zero_one_oracle", scores, positive, where)
    valid = where
    dtype = scores.dtype
    y = jnp.where(positive, 1, -1).astype(dtype)
    w = jnp.where(positive, jnp.asarray(pos_weight, dtype), 1).astype(dtype)
    w = jnp.where(valid, w, 0)
    margin = 1 - y * scores
    c = (margin > 0) & valid
    loss = jnp.sum(jnp.where(c, w, 0))
    coef = jnp.where(c, w * y, 0)
    hinge = jnp.sum(jnp.where(c, w * margin, 0))
    return Violation(loss=loss, coef=coef, aux=None, hinge=hinge)


def zero_one_most_violated(scores, labels, *, where=None, pos_weight=1.0):
    r"""Most-violated labelling of the binary SVM (0-1 loss, hinge slack).

    The 1-slack form of the binary SVM (Joachims 2006):
    :math:`\xi = \max_{c \in \{0,1\}^n} \sum_i c_i w_i (1 - y_i s_i)`, solved
    by :math:`c_i = 1[y_i s_i < 1]`. ``loss = sum_i c_i w_i`` (the weighted
    number of margin violations), ``coef_i = c_i w_i y_i`` (so the subgradient
    in ``w`` is ``-X^T coef``) and ``hinge = sum_i w_i max(0, 1 - y_i s_i)``,
    the objective term of ``LinearSVC(loss="hinge")``. O(n), no sort.

    Args:
        scores: ``[..., n]`` float array of decision values ``w^T x_i (+ b)``;
            leading axes are batch axes (one labelling per list, as in rax).
        labels: ``[..., n]`` array, ``label > 0`` positives (``y = +1``), else
            negatives (``y = -1``).
        where: optional ``[..., n]`` bool mask of items that take part.
        pos_weight: weight ``w_i`` of a positive (negatives weigh 1), > 0.

    Returns:
        :class:`Violation` with ``loss [...]``, ``coef [..., n]``, ``hinge
        [...]`` and ``aux=None``. Under ``jit`` a list with a NaN score or a
        NaN or non-binary label (among the items of ``where``) gives NaN
        ``loss``, ``hinge`` and ``coef``.

    Raises:
        ValueError: mismatched shapes or scalar scores, ``pos_weight <= 0``;
            for concrete inputs, empty or non-finite scores (in ``where``),
            non-binary labels, a list without any item in ``where`` (a list
            of one class is fine: the hinge is a sum over items).
        TypeError: (eagerly and at trace time) scores that are not float32
            or float64, complex or non-numeric labels, a non-bool ``where``.

    References:
        Mohapatra et al., NIPS 2014, §1 (``O(|P| + |N|)`` inference of the binary
        SVM); Joachims, "Training linear SVMs in linear time", KDD 2006.
    """
    _check_pos_weight(pos_weight)
    scores, positive, valid, _ = _layout(scores, labels, where, "zero_one_most_violated",
                                         both_classes=False)
    fn = _zero_one_jit
    for _ in range(scores.ndim - 1):  # batch axes: one labelling per list
        fn = jax.vmap(fn, in_axes=(0, 0, 0, None))
    out = fn(_masked_scores(scores, valid), positive, valid, pos_weight)
    return _nan_if_nan_scores(out, scores, jnp.broadcast_to(valid, scores.shape))


@jax.jit
def _zero_one_jit(scores, positive, valid, pos_weight):
    return zero_one_oracle(scores, positive, valid, pos_weight=pos_weight)
