r"""NDCG loss-augmented inference: the most-violated ranking of the NDCG structural hinge.

The joint feature vector is AP-SVM's (eq. (1) of Mohapatra et al. 2014),
``Psi(X, R) = 1/(PN) sum_{i in P, j in N} R_ij (x_i - x_j)``, and the loss is
``Delta(R*, R) = 1 - NDCG(R)`` with **binary gains** and **no cut-off**:

.. math::
    \mathrm{NDCG}(R) = \frac{1}{Z} \sum_{i \in P} D(\pi_i), \qquad
    D(p) = \frac{1}{\log_2(1 + p)}, \qquad Z = \sum_{a=1}^{P} D(a),

where ``pi_i`` is the 1-based position of relevant item ``i`` in ``R`` (the
``DCG`` of Järvelin and Kekäläinen 2002 with gain 1 per relevant item,
normalised by the ideal ``DCG``). Graded labels count as relevant when
positive; their grade is not used.

**Inference** (Mohapatra, Rolinek, Jawahar, Kolmogorov, Kumar, CVPR 2018:
NDCG is a "QS-suitable" loss). Sort the positives ``s+_1 >= ... >= s+_P`` and
the negatives ``s-_1 >= ... >= s-_N``; a ranking that respects the scores
within each class is given by the interleaving rank ``opt_j in {1..P+1}`` of
every negative (it sits just above positive ``opt_j``). Telescoping the DCG
over the negatives above each positive gives a *negative-decomposable* loss,

.. math::
    \Delta = \sum_{j=1}^{N} \delta_j(\mathrm{opt}_j), \qquad
    \delta_j(k) = \frac{D(k - 1 + j) - D(P + j)}{Z},

so ``max_R Delta + w^T (Psi(R) - Psi(R*))`` separates into one maximisation
per negative, with the increment (value of rank ``k`` minus that of ``k + 1``)

.. math::
    t_k(j) = \frac{D(k + j - 1) - D(k + j)}{Z} - \frac{2 (s^+_k - s^-_j)}{PN}.

``D`` is convex and decreasing, so ``t_k(j)`` is non-increasing in ``j`` for
every ``k`` (and ``s-_j`` decreases): the smallest maximiser ``opt_j`` is
non-decreasing in ``j``, the per-negative maximisations together form a valid
ranking, and a divide and conquer over the negatives (solve the middle row on
its range, recurse on both halves with the ranges it splits) finds every
``opt_j`` exactly in ``O((P + N) log N)`` after sorting: the quicksort-flavoured
scheme of the CVPR 2018 paper, run level by level on static shapes
(:func:`jaxrank._src.oracles.ap._opt_head_monotone`).

A cut-off (NDCG@k) is not offered: its ``D`` drops to 0 after position
``k``, so ``D(p) - D(p + 1)`` is not monotone at ``k``, the maximisers need
not be monotone, and the divide and conquer would not be exact.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src import validation
from jaxrank._src.metrics import _sort_key
from jaxrank._src.oracles.ap import _finish, _list_counts, _opt_head_monotone
from jaxrank._src.oracles.ap_select import _ap_layout, _counts_above
from jaxrank._src.oracles.inputs import _layout, _masked_scores, _nan_if_nan_scores
from jaxrank._src.oracles.sorting import _desc_scores

_LN2 = float(np.log(2.0))


def _log2_1p(p):
    """``log2(1 + p)`` for ``p >= 0`` (float)."""
    return jnp.log1p(p) / _LN2


def _discount_gap(a, m):
    """``D(a) - D(a + m)`` for ``a >= 1``, ``m >= 0`` (float), without cancellation.

    ``log2(1 + a + m) - log2(1 + a) = log1p(m / (1 + a)) / ln 2``.
    """
    la = _log2_1p(a)
    lb = _log2_1p(a + m)
    return (jnp.log1p(m / (1 + a)) / _LN2) / (la * lb)


def _ideal_dcg(P, kp, dtype):
    """``Z = sum_{a=1}^{P} D(a)`` (``P`` traced, ``<= kp``); 1 when ``P = 0``."""
    a = jnp.arange(1, kp + 1, dtype=dtype)
    z = jnp.sum(jnp.where(jnp.arange(1, kp + 1) <= P, 1 / _log2_1p(a), 0))
    return jnp.where(P > 0, z, 1).astype(dtype)


def _ndcg_increment(Z):
    """``t_k(j)`` of the module docstring, for :func:`_opt_head_monotone`."""

    def increment(k, j, sp_k, sn_j, P, N):
        dtype = sp_k.dtype
        pos = (k + j - 1).astype(dtype)  # >= 1
        first = _discount_gap(pos, jnp.ones((), dtype)) / Z
        second = 2 * (sp_k - sn_j) / (P.astype(dtype) * N.astype(dtype))
        return first - second

    return increment


def _ndcg_core(scores, pos_valid, neg_valid, kp):
    """NDCG loss-augmented inference with a static capacity ``kp`` for the positives.

    Returns ``(loss, coef [n], opt [n])`` as :func:`jaxrank._src.oracles.ap._ap_core`;
    zeros when the list lacks a positive or a negative.
    """
    dtype = scores.dtype
    n = scores.shape[0]
    P, N, P_, Pf, Nf, ok = _list_counts(pos_valid, neg_valid, dtype)
    tkd = jnp.zeros((1,), _sort_key(scores[:1]).dtype)  # no selection: every negative
    psk, psrc, _, sk, src = _ap_layout(scores, pos_valid, neg_valid, tkd, P_, N, kp=kp,
                                       caps=(n,), kh=min(kp - 1, n))
    sp = _desc_scores(psk, dtype)
    sn = _desc_scores(sk, dtype)
    Z = _ideal_dcg(P, kp, dtype)
    opt_sorted = _opt_head_monotone(sp, P_, jnp.maximum(N, 1), sn, N,
                                    increment=_ndcg_increment(Z), unrolled=True)
    dest = jnp.where(jnp.arange(n) < N, src, n)
    opt = jnp.zeros((n,), jnp.int32).at[dest].set(opt_sorted, mode="drop")
    opt = jnp.where(neg_valid & ok, opt, 0)
    n_above = jnp.where(ok, _counts_above(opt, neg_valid, kp), 0)
    # 1 - NDCG = sum_a (D(a) - D(a + n_a)) / Z: positive a sits at a + n_a.
    a = jnp.arange(1, kp + 1, dtype=dtype)
    valid_a = jnp.arange(1, kp + 1) <= P
    loss = jnp.sum(jnp.where(valid_a, _discount_gap(a, n_above.astype(dtype)), 0)) / Z
    g_pos = jnp.where(valid_a, 2 * n_above.astype(dtype) / (Pf * Nf), 0)
    coef = jnp.where(neg_valid, -2 * (P + 1 - opt).astype(dtype) / (Pf * Nf), 0)
    pdest = jnp.where(jnp.arange(kp) < P, psrc, n)
    coef = jnp.where(ok, coef.at[pdest].add(g_pos, mode="drop"), 0)
    return jnp.where(ok, loss, 0).astype(dtype), coef, opt


@functools.partial(jax.jit, static_argnames=("kp",))
def ndcg_oracle(scores, positive, where, *, kp):
    r"""NDCG loss-augmented inference on one list: the oracle of :class:`jaxrank.NDCGSVM`.

    The pure, unvalidated kernel behind :func:`ndcg_most_violated`, in the
    oracle form of the structured-model interface (module docstring: binary
    gains, no cut-off).

    Args:
        scores: ``[n]`` float32 or float64 scores ``s_k = w^T psi(x_k)``.
        positive: ``[n]`` bool, True for the relevant items.
        where: ``[n]`` bool, the items that take part.
        kp: static int, an upper bound on the number of relevant items with
            ``where``; relevant items beyond it are dropped, so pass a true
            bound.

    Returns:
        :class:`jaxrank.inference.Violation`: ``loss = 1 - NDCG`` of the
        most-violated ranking, ``coef [n]`` (``Psi(R*) - Psi(R_hat) = sum_k
        coef_k x_k``), ``hinge = loss - scores @ coef`` and ``aux`` = the
        interleaving ranks ``[n]`` int32 (``opt_j`` for a negative, 0
        elsewhere). A list without a relevant or without an irrelevant item
        gives zeros.

    Raises:
        ValueError / TypeError: (at trace time) ``scores`` not ``[n]`` float32
            or float64, ``positive`` or ``where`` of another shape.

    References:
        Mohapatra, Rolinek, Jawahar, Kolmogorov, Kumar, "Efficient
        optimization for rank-based loss functions", CVPR 2018 (NDCG is
        QS-suitable; the divide and conquer over negatives); the joint
        feature vector of Yue et al., SIGIR 2007.
    """
    validation.check_oracle_args("ndcg_oracle", scores, positive, where)
    loss, coef, opt = _ndcg_core(scores, positive & where, ~positive & where, kp)
    return _finish(loss, coef, scores, opt)


def _gain_labels(labels, where, name):
    """Relevance gains -> (bool relevant, labels for :func:`_layout`).

    Eagerly: ``labels`` must be finite, integer-valued and ``>= 0`` (the
    items outside ``where`` are not read). Traced: a list with such a label
    among its items gets NaN (as the other oracles' non-binary labels).
    Returns ``(relevant, defect)``: ``defect`` is ``None`` eagerly, else the
    ``[...]`` bool of lists with a bad label.
    """
    validation.check_label_dtype(labels, fn=name)
    if validation.is_concrete(labels, where):
        arr = np.asarray(labels)
        valid = validation.check_where(where, arr.shape)
        if arr.dtype == bool:
            return arr, None
        if np.issubdtype(arr.dtype, np.floating) and arr.dtype.itemsize < 4:
            arr = arr.astype(np.float32)
        vals = arr[valid]
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(vals)):
            raise ValueError(f"{name}: labels (gains) contain NaN or infinite values.")
        if np.any(vals < 0):
            raise ValueError(
                f"{name}: labels are relevance gains and must be >= 0; got "
                f"{sorted(set(vals[vals < 0].tolist()))[:6]}.")
        if np.any(vals != np.round(vals)):
            raise ValueError(
                f"{name}: labels are relevance gains and must be integers; got "
                f"{sorted(set(vals[vals != np.round(vals)].tolist()))[:6]}.")
        return arr > 0, None
    lab = jnp.asarray(labels)
    if lab.dtype == bool:
        return lab, jnp.zeros(lab.shape[:-1], bool)
    valid = jnp.ones(lab.shape, bool) if where is None else jnp.asarray(where)
    bad = (lab < 0) | (lab != jnp.round(lab))
    if jnp.issubdtype(lab.dtype, jnp.floating):
        bad = bad | ~jnp.isfinite(lab)
    return lab > 0, jnp.any(bad & valid, axis=-1)


def _ndcg_layout(scores, labels, where, name):
    """Validated ``(scores, relevant, valid, kp)``; NaN scores for lists with bad gains."""
    relevant, defect = _gain_labels(labels, where, name)
    if defect is None:
        relevant = np.asarray(relevant)
    s, positive, valid, kp = _layout(scores, relevant, where, name, both_classes=False)
    if defect is not None:
        s = s + jnp.where(defect[..., None] & valid, jnp.nan, 0).astype(s.dtype)
    return s, positive, valid, kp


def ndcg_most_violated(scores, labels, *, where=None):
    r"""Most-violated ranking of the NDCG structural hinge (NDCG loss-augmented inference).

    Solves :math:`\hat R = \arg\max_R \Delta(R^*, R) + w^\top \Psi(X, R)` with
    ``Delta = 1 - NDCG`` (binary gains, no cut-off; module docstring) and
    AP-SVM's joint feature vector, given the scores ``s_k = w^T psi(x_k)``,
    exactly, by the divide and conquer of Mohapatra et al. (CVPR 2018) in
    ``O(n log n)`` time and ``O(n)`` memory (no ``P x N`` array). Argmax ties go
    to the smallest interleaving rank.

    Args:
        scores: ``[..., n]`` float32 or float64 scores.
        labels: ``[..., n]`` relevance gains: bool, or integer-valued numbers
            ``>= 0``; an item is relevant iff its label is ``> 0`` (every
            relevant item gains 1).
        where: optional ``[..., n]`` bool mask; ``False`` items take no part.

    Returns:
        :class:`jaxrank.inference.Violation` with ``loss [...]`` (``1 - NDCG``
        of ``R_hat``, in ``[0, 1)``), ``coef [..., n]``, ``hinge [...]`` and
        ``interleaving_rank [..., n]`` int32. A list without a relevant or
        without an irrelevant item gives 0 and zero ``coef`` (its hinge is 0
        with a zero gradient). Under ``jit``, a list with a NaN score or a
        negative, non-integer or NaN label among its items gives NaN ``loss``,
        ``hinge`` and ``coef``.

    Raises:
        ValueError: mismatched shapes or scalar scores; for concrete inputs,
            empty or non-finite scores, ``where`` removing every item of a
            list, and labels that are negative, non-integer, NaN or infinite.
        TypeError: (eagerly and at trace time) scores that are not float32 or
            float64, complex or non-numeric labels, a non-bool ``where``.

    References:
        Mohapatra, Rolinek, Jawahar, Kolmogorov, Kumar, CVPR 2018;
        Järvelin and Kekäläinen, ACM TOIS 2002 (DCG).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxrank.inference import ndcg_most_violated
        >>> r = ndcg_most_violated(jnp.array([2., 0., 1.]), jnp.array([1, 1, 0]))
        >>> r.interleaving_rank.tolist()
        [0, 0, 2]
    """
    scores, positive, valid, kp = _ndcg_layout(scores, labels, where, "ndcg_most_violated")
    fn = functools.partial(ndcg_oracle, kp=kp)
    raw, scores = scores, _masked_scores(scores, valid)
    valid = jnp.broadcast_to(valid, scores.shape)
    positive = jnp.broadcast_to(positive, scores.shape)
    for _ in range(scores.ndim - 1):
        fn = jax.vmap(fn)
    return _nan_if_nan_scores(fn(scores, positive, valid), raw, valid)

