"""Ranking metrics: average precision and ROC-AUC (jit/vmap-able)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxrank._src import validation


def _prepare(scores, labels, where, name):
    validation.check_same_shape("scores", scores, "labels", labels)
    if where is not None:
        validation.check_same_shape("scores", scores, "where", where)
    if validation.is_concrete(scores, labels, where):
        validation.check_scores(scores)
        positive = validation.binary_labels(labels)
        valid = validation.check_where(where, jnp.shape(scores))
        validation.check_both_classes(positive, valid)
        positive, valid = jnp.asarray(positive), jnp.asarray(valid)
    else:
        positive = jnp.asarray(labels) > 0
        valid = jnp.ones(jnp.shape(scores), bool) if where is None else where
    scores = jnp.asarray(scores)
    if not jnp.issubdtype(scores.dtype, jnp.floating):
        scores = scores.astype(jnp.float32)
    return scores, positive, valid


@jax.jit
@functools.partial(jnp.vectorize, signature="(n),(n),(n)->()")
def _ap_kernel(scores, positive, valid):
    pos = positive & valid
    neg = ~positive & valid
    s = jnp.where(valid, scores, -jnp.inf)
    order = jnp.argsort(-s, stable=True)
    s_sorted = s[order]
    tp = jnp.cumsum(pos[order], dtype=jnp.int32)
    fp = jnp.cumsum(neg[order], dtype=jnp.int32)
    # Last position of each block of tied scores (one threshold per block).
    end = jnp.searchsorted(-s_sorted, -s_sorted, side="right") - 1
    tp_end = tp[end].astype(scores.dtype)
    prec = tp_end / jnp.maximum(tp_end + fp[end].astype(scores.dtype), 1)
    n_pos = jnp.sum(pos)
    total = jnp.sum(jnp.where(pos[order], prec, 0))
    return jnp.where(n_pos > 0, total / jnp.maximum(n_pos, 1), jnp.nan)


@jax.jit
@functools.partial(jnp.vectorize, signature="(n),(n),(n)->()")
def _auc_kernel(scores, positive, valid):
    pos = positive & valid
    neg = ~positive & valid
    s = jnp.where(valid, scores, -jnp.inf)
    order = jnp.argsort(s, stable=True)
    s_sorted = s[order]
    cum_neg = jnp.concatenate(
        [jnp.zeros((1,), jnp.int32), jnp.cumsum(neg[order], dtype=jnp.int32)]
    )
    lo = jnp.searchsorted(s_sorted, s_sorted, side="left")
    hi = jnp.searchsorted(s_sorted, s_sorted, side="right")
    below = cum_neg[lo].astype(scores.dtype)
    equal = (cum_neg[hi] - cum_neg[lo]).astype(scores.dtype)
    wins = jnp.sum(jnp.where(pos[order], below + 0.5 * equal, 0))
    n_pos = jnp.sum(pos)
    n_neg = jnp.sum(neg)
    pairs = (n_pos * n_neg).astype(scores.dtype)
    return jnp.where(pairs > 0, wins / jnp.maximum(pairs, 1), jnp.nan)


def average_precision(scores, labels, *, where=None):
    r"""Average precision of a ranking by ``scores`` (scikit-learn convention).

    .. math::
        \mathrm{AP} = \frac{1}{|P|} \sum_{i \in P}
            \frac{\#\{k \in P : s_k \ge s_i\}}{\#\{k : s_k \ge s_i\}}

    A block of tied scores is one threshold: every item of the block counts as
    ranked above every other, so ties never help. This equals
    ``sklearn.metrics.average_precision_score``, tied scores included.

    Args:
        scores: ``[..., n]`` float array; higher ranks first. Units arbitrary.
        labels: ``[..., n]`` array; items with ``label > 0`` are positives
            (``{0, 1}``, ``{-1, 1}`` or bool).
        where: optional ``[..., n]`` bool mask; ``False`` items are ignored.

    Returns:
        ``[...]`` float array of AP values in ``[0, 1]``. Under ``jit`` a list
        without a positive gives NaN (the metric is undefined).

    Raises:
        ValueError: mismatched shapes (always); and, when the inputs are
            concrete (not traced), empty or non-finite scores, non-binary
            labels, or a list without a positive or a negative.
        TypeError: non-numeric scores or labels, or a non-bool ``where``.

    References:
        Yue et al., "A support vector method for optimizing average precision",
        SIGIR 2007 (AP as used by AP-SVM).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxrank.metrics import average_precision
        >>> float(average_precision(jnp.array([3., 2., 1.]), jnp.array([1, 0, 1])))
        0.8333333...
    """
    s, positive, valid = _prepare(scores, labels, where, "average_precision")
    return _ap_kernel(s, positive, valid)


def roc_auc(scores, labels, *, where=None):
    r"""Area under the ROC curve (Mann-Whitney U), ties counted as 1/2.

    .. math::
        \mathrm{AUC} = \frac{1}{|P||N|} \sum_{i \in P} \sum_{j \in N}
            \big(1[s_i > s_j] + \tfrac12 1[s_i = s_j]\big)

    Equals ``sklearn.metrics.roc_auc_score``, tied scores included. Cost
    O(n log n) per list (one sort), no ``n^2`` pairs.

    Args:
        scores: ``[..., n]`` float array. Units arbitrary.
        labels: ``[..., n]`` array; items with ``label > 0`` are positives.
        where: optional ``[..., n]`` bool mask; ``False`` items are ignored.

    Returns:
        ``[...]`` float array in ``[0, 1]``; NaN under ``jit`` for a list
        without both classes.

    Raises:
        ValueError / TypeError: as :func:`average_precision`.

    References:
        Hanley & McNeil, Radiology 1982 (AUC as the Mann-Whitney statistic).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxrank.metrics import roc_auc
        >>> float(roc_auc(jnp.array([3., 2., 2.]), jnp.array([1, 1, 0])))
        0.75
    """
    s, positive, valid = _prepare(scores, labels, where, "roc_auc")
    return _auc_kernel(s, positive, valid)
