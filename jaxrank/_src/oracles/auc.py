r"""The ROC-area SVM (Joachims 2005; SVM-perf ``-l 10``): loss-augmented inference.

The output is a labelling ``y_ij in {+1, -1}`` of every (positive ``i``,
negative ``j``) pair, with the normalised joint feature map and loss

.. math::
    \Psi(X, y) = \frac{1}{PN} \sum_{i \in P, j \in N} y_{ij} (x_i - x_j),
    \qquad \Delta(y^*, y) = \frac{1}{PN} \#\{(i, j): y_{ij} = -1\},

(``y* = +1`` for all pairs). Loss-augmented inference decomposes over pairs
and is computed by sorting and binary search in O(n log n) time and O(n)
memory, never forming the ``P x N`` pairs (:func:`auc_oracle`). Counts are
summed in the float dtype (``P N`` exceeds int32 beyond ``2^31`` pairs).

Scores are compared through order-preserving integer keys
(:func:`jaxrank._src.metrics._sort_key`), so the sorts are integer sorts; on
CPU the counting runs as a host kernel (native ``rank.c`` from 512 items, or
NumPy from ``_HOST_MIN_LEN``) that sorts only the negatives that can be
swapped with some positive (see :mod:`jaxrank._src.oracles.ap`, "Sorting at
the floor").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src import native, validation
from jaxrank._src.metrics import _sort_key
from jaxrank._src.oracles.inputs import _layout, _masked_scores, _nan_if_nan_scores
from jaxrank._src.oracles.sorting import (
    _dispatch,
    _host_call,
    _native_host,
    _np_argsort,
    _out_view,
)
from jaxrank._src.types import Violation

# Without the native kernels, lists shorter than this use the XLA path on CPU
# too: its two single-operand integer sorts need no index payload and beat a
# NumPy callback on short lists (bench/inference.py --design, "Host vs XLA
# path by size"; docs/design_notes.md).
_HOST_MIN_LEN = 16384


@jax.jit
def auc_oracle(scores, positive, where):
    """ROC-area loss-augmented inference on one list (oracle form, jit-pure).

    Args:
        scores: ``[n]`` float scores.
        positive: ``[n]`` bool labels.
        where: ``[n]`` bool, the items that take part.

    Returns:
        :class:`jaxrank.inference.Violation` (``aux=None``); zeros for a list
        without both classes. See :func:`auc_most_violated`.

    Raises:
        ValueError / TypeError: (at trace time) ``scores`` not ``[n]`` float32 or
            float64, ``positive`` or ``where`` of another shape.

    The counts are integer-key sorts and searches (``_auc_counts``): on CPU
    a host kernel (native ``rank.c`` through XLA FFI, or NumPy through
    ``jax.pure_callback`` without the compiled library), elsewhere XLA; all
    give the same integers, so the result is bitwise the same.

    References:
        Joachims, ICML 2005, Algorithm 3 (ROCArea).
    """
    validation.check_oracle_args("auc_oracle", scores, positive, where)
    pos, neg = positive & where, ~positive & where
    dtype = scores.dtype
    P = jnp.sum(pos, dtype=jnp.int32)
    N = jnp.sum(neg, dtype=jnp.int32)
    half = jnp.asarray(0.5, dtype)
    # Pair (i, j) is swapped iff 1 - 2 (s_i - s_j) > 0, i.e. s_j > s_i - 1/2:
    # c_i = #{j : s_j > s_i - 1/2}, d_j = #{i : s_i < s_j + 1/2}, compared
    # through order-preserving integer keys (exact, both zeros equal).
    c, d = _auc_counts(_sort_key(scores), _sort_key(scores - half), _sort_key(scores + half),
                       pos, neg)
    Pf, Nf = P.astype(dtype), N.astype(dtype)
    ok = (P > 0) & (N > 0)
    # c_i <= N and d_j <= P: per-item fractions, then float sums (no int32
    # overflow of the pair count, no large integers in float32).
    loss = jnp.where(ok, jnp.sum(c.astype(dtype) / jnp.maximum(Nf, 1)) / jnp.maximum(Pf, 1), 0)
    inv = jnp.where(ok, 1 / (jnp.maximum(Pf, 1) * jnp.maximum(Nf, 1)), 0)
    coef = 2 * (c - d).astype(dtype) * inv
    # sum(coef) = 0: centre the scores to reduce cancellation.
    active = coef != 0
    ref = jnp.sum(jnp.where(active, scores, 0)) / jnp.maximum(jnp.sum(active), 1)
    hinge = jnp.maximum(loss - jnp.dot(scores - ref, coef), 0)
    return Violation(loss=loss, coef=coef, aux=None, hinge=hinge)


def _auc_counts(key, qm, qp, pos, neg):
    """Swap counts of the ROC-area oracle from integer keys.

    Args:
        key, qm, qp: ``[n]`` int keys (:func:`jaxrank._src.metrics._sort_key`)
            of ``s``, ``s - 1/2`` and ``s + 1/2``.
        pos, neg: ``[n]`` bool, the positives and negatives taking part.

    Returns:
        ``(c, d)``, ``[n]`` int32: ``c_i = #{neg j : key_j > qm_i}`` for a
        positive ``i`` and ``d_j = #{pos i : key_i < qp_j}`` for a negative
        ``j``; 0 elsewhere. Identical on the host and XLA paths.
    """
    return _dispatch(_auc_counts_host, _auc_counts_xla, key.shape[-1], key, qm, qp, pos, neg,
                     min_len=_HOST_MIN_LEN)


def _auc_counts_xla(key, qm, qp, pos, neg):
    """XLA path of :func:`_auc_counts`: two single-operand integer sorts."""
    top = jnp.array(jnp.iinfo(key.dtype).max, key.dtype)
    N = jnp.sum(neg, dtype=jnp.int32)
    sn = jnp.sort(jnp.where(neg, key, top))  # valid negatives first
    sp = jnp.sort(jnp.where(pos, key, top))
    c = N - jnp.searchsorted(sn, qm, side="right").astype(jnp.int32)
    d = jnp.searchsorted(sp, qp, side="left").astype(jnp.int32)
    return jnp.where(pos, c, 0), jnp.where(neg, d, 0)


def _np_searchsorted(table, queries, side):
    """``np.searchsorted`` with many unsorted queries sorted first (cache-friendly)."""
    if queries.shape[0] <= 4096:
        return np.searchsorted(table, queries, side=side)
    order = _np_argsort(queries)
    out = np.empty(queries.shape[0], np.int64)
    out[order] = np.searchsorted(table, queries[order], side=side)
    return out


def _auc_counts_rows(outs, key, qm, qp, pos, neg):
    """Host path of :func:`_auc_counts` on NumPy rows ``[B, n]``; fills ``outs = (c, d)``.

    Only negatives that can be swapped with some positive are sorted: ``d_j >
    0`` needs ``qp_j > min key_pos``, and a negative counts in some ``c_i``
    only if ``key_j > min qm_pos``; the rest are a bottom set with ``d = 0``
    that no ``c_i`` counts. So the trained regime (few swapped pairs) costs
    O(n) plus a small sort.
    """
    c, d = outs
    c[...] = 0
    d[...] = 0
    for b in range(key.shape[0]):
        pi, ni = np.flatnonzero(pos[b]), np.flatnonzero(neg[b])
        if pi.shape[0] == 0 or ni.shape[0] == 0:
            continue
        k, qmb, qpb = key[b], qm[b], qp[b]
        sp = np.sort(k[pi])
        qm_pos = qmb[pi]
        kn = k[ni]
        act = (qpb[ni] > sp[0]) | (kn > qm_pos.min())
        ai = ni if act.all() else ni[act]
        ka = k[ai]
        perm = _np_argsort(ka)
        src = ai[perm]
        ska = ka[perm]
        # In key order, s + 1/2 is non-decreasing: sorted queries.
        d[b, src] = np.searchsorted(sp, qpb[src], side="left")
        c[b, pi] = ai.shape[0] - _np_searchsorted(ska, qm_pos, "right")


def _auc_counts_host(key, qm, qp, pos, neg):
    """Host path of :func:`_auc_counts` (any batch axes).

    The native kernel ``jaxrank_auc_counts`` (``rank.c``, an XLA FFI call on
    XLA's own buffers) when the library is loaded, else a NumPy host callback
    (:func:`_auc_counts_rows`); both give the integers of the XLA path.
    """
    n = key.shape[-1]
    if _native_host():
        shapes = (jax.ShapeDtypeStruct((n,), jnp.int32),) * 2
        return tuple(native.call("jaxrank_auc_counts", shapes, key, qm, qp, pos, neg))

    def host(outs, *args):
        B = int(np.prod(args[0].shape[:-1]))
        _auc_counts_rows([_out_view(o, (B, n)) for o in outs], *(a.reshape(B, n) for a in args))

    shapes = (jax.ShapeDtypeStruct(key.shape, jnp.int32),) * 2
    return _host_call(host, shapes, key, qm, qp, pos, neg)


def auc_most_violated(scores, labels, *, where=None):
    r"""Most-violated pair labelling of the ROC-area SVM (SVM-perf ``-l 10``).

    ``max_y Delta + w^T(Psi(y) - Psi(y*))`` decomposes over pairs (module
    docstring): ``y_ij = -1`` iff ``1 - 2(s_i - s_j) > 0`` (Joachims' sort with
    ``s_i -+ 1/4``); ties at exactly ``1/2`` are not swapped. Counting by
    sorting and binary search: O(n log n) time, O(n) memory, no ``P x N``
    array.

    Args:
        scores: ``[..., n]`` float array ``s = X w``.
        labels: ``[..., n]``; ``label > 0`` marks positives (``{0, 1}``,
            ``{-1, 1}`` or bool).
        where: optional ``[..., n]`` bool mask; ``False`` items take no part.

    Returns:
        :class:`jaxrank.inference.Violation` with ``loss [...]`` = fraction
        of swapped pairs in ``[0, 1]``, ``coef [..., n]`` = ``g`` with
        ``Psi(X, y*) - Psi(X, y_hat) = sum_k g_k x_k`` (``g_i = 2 c_i/(PN)``
        for a positive swapped with ``c_i`` negatives, ``g_j = -2 d_j/(PN)``
        for a negative swapped with ``d_j`` positives), ``hinge [...] = loss -
        scores @ coef >= 0`` and ``aux=None``. Under ``jit`` a list without
        both classes gives zeros, and a list with a NaN score or a NaN or
        non-binary label (among the items of ``where``) gives NaN ``loss``,
        ``hinge`` and ``coef``.

    Raises:
        ValueError: mismatched shapes or scalar scores; for concrete inputs,
            empty or non-finite scores, non-binary labels, a single-class list.
        TypeError: (eagerly and at trace time) scores that are not float32
            or float64, complex or non-numeric labels, a non-bool ``where``.

    References:
        Joachims, "A support vector method for multivariate performance
        measures", ICML 2005 (Algorithm 3, ROCArea).
    """
    s, positive, valid, _ = _layout(scores, labels, where, "auc_most_violated")
    fn = auc_oracle
    for _ in range(s.ndim - 1):
        fn = jax.vmap(fn)
    valid = jnp.broadcast_to(valid, s.shape)
    return _nan_if_nan_scores(fn(_masked_scores(s, valid), positive, valid), s, valid)
