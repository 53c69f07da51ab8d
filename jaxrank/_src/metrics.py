r"""Ranking metrics: average precision and ROC-AUC (jit/vmap-able, exact at any n).

Numerics (why the values stay exact at ``n = 10^7`` in float32):

* Scores are compared through an integer sort key (the IEEE-754 bit pattern
  mapped to a monotone signed integer; ``-0.0`` is first mapped to ``+0.0``),
  so ties are exact and integer scores are never rounded to float32.
* Every count (``tp``, ``fp``, ``|P|``, ``|N|``, items below / tied with a
  positive) is an int32 ``<= n``; no product such as ``|P| |N|`` is ever formed
  in integers. Each positive's term is normalised to ``[0, 1]`` (or to
  ``[0, 1/|P_q|]`` inside a segment) *before* summing, and the sums are
  pairwise (fan-in 8). With float32 ``eps = 2^-24`` and ``L = ceil(log8 n)``
  tree levels, the relative error of a list's value is at most about
  ``(7 + 7 L) eps`` to first order: ``2.9e-6`` at ``n = 10^5``, ``3.3e-6`` at
  ``10^6``, ``3.8e-6`` at ``10^7``; typically ``1e-7``. Per-segment sums use
  a parallel prefix scan (``<= 2 ceil(log2 n)`` additions per value, never a
  difference of two large prefix sums), adding ``2 ceil(log2 n) eps``.
* A NaN score among the valid items of a list makes that list's value NaN
  under ``jit``/``vmap``; masked-out items are never read.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import checkify

from jaxrank._src import validation

_FLAG_POS, _FLAG_NEG, _FLAG_NAN = 1, 2, 4
_FAN_IN = 8  # pairwise-sum fan-in: error <= (_FAN_IN - 1) eps per level


# ----------------------------------------------------------------------------
# input handling (trace-time checks always; value checks only when concrete)
# ----------------------------------------------------------------------------


def _dtype(x):
    return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def _check_dtypes(scores, labels, where, segments):
    # Any real precision: scores are compared through an exact integer key
    # (float16 / bfloat16 are widened exactly), never rounded.
    validation.check_dtype(scores, "scores", integers=True, half=True)
    validation.check_label_dtype(labels)
    if where is not None and _dtype(where) != bool:
        raise TypeError(f"where must be a bool array; got dtype {_dtype(where)}.")
    if segments is not None and not jnp.issubdtype(_dtype(segments), jnp.integer):
        raise TypeError(
            "segments must be an integer array of segment (query) ids; got dtype "
            f"{_dtype(segments)}."
        )


def _check_segment_reduce_fn(fn):
    if fn is not None and not callable(fn):
        raise TypeError(
            "segment_reduce_fn must be jnp.mean, jnp.sum, another callable "
            f"fn(values, where=mask), or None; got {fn!r}."
        )


def _prepare(scores, labels, where, segments, segment_reduce_fn, metric):
    validation.check_same_shape("scores", scores, "labels", labels)
    if where is not None:
        validation.check_same_shape("scores", scores, "where", where)
    if segments is not None:
        validation.check_same_shape("scores", scores, "segments", segments)
    if np.ndim(scores) == 0:
        raise ValueError("scores must have at least one axis; got a scalar.")
    _check_dtypes(scores, labels, where, segments)
    _check_segment_reduce_fn(segment_reduce_fn)
    if validation.is_concrete(scores, labels, where, segments):
        valid = validation.check_where(where, np.shape(scores))
        arr = np.asarray(scores)
        # Masked-out items are never inspected (as under jit).
        validation.check_scores(np.where(valid, arr, np.zeros((), arr.dtype)))
        positive = validation.binary_labels(labels)
        validation.check_both_classes(positive, valid)
        if segments is not None and metric == "roc_auc":
            _check_some_segment_has_both_classes(positive, valid, np.asarray(segments))
        positive, valid = jnp.asarray(positive), jnp.asarray(valid)
        if _narrowed_by_jax(arr.dtype):
            scores = _exact_ranks(arr)
        if segments is not None and _narrowed_by_jax(np.asarray(segments).dtype):
            segments = _exact_ranks(np.asarray(segments))
        bad_labels = None
    else:
        positive = jnp.asarray(labels) > 0
        valid = jnp.ones(jnp.shape(scores), bool) if where is None else where
        # What the eager checks refuse (NaN or non-binary labels) gives NaN.
        bad_labels = validation.label_defects(labels, valid)
    scores = jnp.asarray(scores)
    if segments is not None:
        segments = jnp.asarray(segments)
    return scores, positive, jnp.asarray(valid), segments, bad_labels


def _narrowed_by_jax(dtype):
    """True if ``jnp.asarray`` would narrow ``dtype`` (64-bit, x64 mode off)."""
    return jax.dtypes.canonicalize_dtype(dtype) != dtype


def _exact_ranks(arr):
    """Dense ranks of a NumPy array (ties kept), as int32.

    Replaces 64-bit data that ``jnp.asarray`` would round (float64 -> float32
    creates ties) or wrap (int64 -> int32). The metrics depend only on order
    and equality, so the ranks are an exact replacement.
    """
    return np.unique(arr, return_inverse=True)[1].reshape(arr.shape).astype(np.int32)


def _check_some_segment_has_both_classes(positive, valid, segments):
    pos2 = (positive & valid).reshape(-1, positive.shape[-1])
    neg2 = (~positive & valid).reshape(-1, positive.shape[-1])
    seg2 = segments.reshape(-1, positive.shape[-1])
    for b in range(seg2.shape[0]):
        both = set(seg2[b][pos2[b]].tolist()) & set(seg2[b][neg2[b]].tolist())
        if not both:
            raise ValueError(
                "segments: every list needs a segment with both a positive and a "
                f"negative for roc_auc; list {b} (flattened batch index) has none."
            )


# ----------------------------------------------------------------------------
# numerical building blocks (per list: 1-D arrays; batched by jnp.vectorize)
# ----------------------------------------------------------------------------


def _out_dtype(scores):
    return jnp.float64 if scores.dtype == jnp.float64 else jnp.float32


def _sort_key(scores):
    """Signed-integer key with ``key(a) < key(b)`` iff ``a < b`` (exact ties).

    The one order-preserving key of the package (the metrics here and the
    sorts of loss-augmented inference, :mod:`jaxrank._src.oracles.ap` and
    :mod:`jaxrank._src.oracles.auc`, use it, so every sort is an integer sort).

    Args:
        scores: ``[...]`` array of any real dtype or bool.

    Returns:
        ``[...]`` int32 key (int64 for float64 and 64-bit integers; float16
        and bfloat16 are widened to float32 first; bool -> 0/1).

    Floats: the IEEE-754 bit pattern, the bits of negative numbers mirrored
    (``bits ^ INT_MAX``), so that integer order is numeric order for every
    non-NaN value, ``-inf`` and subnormals included (computed with integer
    operations only, so subnormals keep their order although XLA's float
    comparisons flush them to zero); ``-0.0`` is mapped to ``+0.0``'s key,
    so the two zeros tie. Every NaN (either sign, any payload)
    gets one key, that of the canonical quiet NaN ``+0x7FC00000`` (float64
    ``+0x7FF8000000000000``): above ``+inf`` and below the largest integer
    (which callers use as a sentinel for masked entries). Integers: the value
    itself (unsigned 32/64-bit shifted by ``2^(bits-1)``).
    """
    dt = scores.dtype
    if dt == jnp.bool_:
        return scores.astype(jnp.int32)
    if jnp.issubdtype(dt, jnp.integer):
        info = jnp.iinfo(dt)
        if info.bits < 32 or (info.bits == 32 and info.min < 0):
            return scores.astype(jnp.int32)
        ity = jnp.int32 if info.bits == 32 else jnp.int64
        if info.min < 0:  # int64
            return scores
        flip = jnp.array(jnp.iinfo(ity).min, ity)
        return lax.bitcast_convert_type(scores, ity) ^ flip
    if jnp.finfo(dt).bits < 32:
        scores = scores.astype(jnp.float32)
    f64 = scores.dtype == jnp.float64
    ity = jnp.int64 if f64 else jnp.int32
    top = jnp.array(jnp.iinfo(ity).max, ity)
    inf_bits = jnp.array(0x7FF0000000000000 if f64 else 0x7F800000, ity)
    nan_key = jnp.array(0x7FF8000000000000 if f64 else 0x7FC00000, ity)
    # Integer operations only: XLA's float compares flush subnormals to zero.
    bits = lax.bitcast_convert_type(scores, ity)
    mag = bits & top
    key = jnp.where(bits < 0, bits ^ top, bits)
    key = jnp.where(mag == 0, jnp.zeros_like(key), key)  # -0 -> +0
    return jnp.where(mag > inf_bits, nan_key, key)


def _pairwise_sum(x):
    """Sum of a 1-D array by a tree of fan-in ``_FAN_IN`` (error O(log n eps))."""
    while x.shape[0] > 1:
        m = -(-x.shape[0] // _FAN_IN)
        x = jnp.pad(x, (0, m * _FAN_IN - x.shape[0])).reshape(m, _FAN_IN).sum(-1)
    return x.reshape(()) if x.shape[0] == 1 else jnp.zeros((), x.dtype)


def _segmented_cumsum(starts, x):
    """Inclusive cumulative sum restarting where ``starts`` is True.

    A parallel prefix scan, so each value is a tree sum of its own segment
    (error O(log n eps) relative to that segment's sum), never a difference
    of two large prefix sums.
    """

    def combine(a, b):
        fa, va = a
        fb, vb = b
        return fa | fb, jnp.where(fb, vb, va + vb)

    return lax.associative_scan(combine, (starts, x))[1]


def _shift_ne(a, first_value):
    """``out[0] = first_value; out[k] = a[k] != a[k-1]`` (boundaries)."""
    return jnp.concatenate([jnp.full((1,), first_value), a[1:] != a[:-1]])


def _unsegmented(metric, scores, positive, valid):
    """One list ``[n]`` -> (value, defined, has_nan) by two integer sorts.

    Sort the keys of the positives and of the negatives separately (the
    single-operand integer sort is XLA CPU's fast path), then count, for each
    positive, the negatives above (AP) or below/tied (AUC) by binary search.
    """
    n = scores.shape[0]
    ft = _out_dtype(scores)
    pos, neg = positive & valid, ~positive & valid
    has_nan = (
        jnp.any(jnp.isnan(scores) & valid)
        if jnp.issubdtype(scores.dtype, jnp.floating)
        else jnp.zeros((), bool)
    )
    n_pos = jnp.sum(pos, dtype=jnp.int32)
    n_neg = jnp.sum(neg, dtype=jnp.int32)
    defined = (n_pos > 0) if metric == "ap" else (n_pos > 0) & (n_neg > 0)
    if n == 0:
        return jnp.zeros((), ft), defined, has_nan
    key = _sort_key(scores)
    top = jnp.array(jnp.iinfo(key.dtype).max, key.dtype)  # sentinel, sorts last
    pk = jnp.sort(jnp.where(pos, key, top))  # positives first, ascending
    nk = jnp.sort(jnp.where(neg, key, top))
    idx = jnp.arange(n, dtype=jnp.int32)
    is_pos = idx < n_pos  # the real positives in pk (sentinels after them)
    neg_below = jnp.searchsorted(nk, pk, side="left").astype(jnp.int32)
    if metric == "ap":
        # Precision at the last rank of the positive's block of tied scores:
        # tp = #positives with score >= s, fp = #negatives with score >= s.
        block_start = lax.cummax(jnp.where(_shift_ne(pk, True), idx, 0))
        tp = n_pos - block_start
        fp = n_neg - neg_below
        term = tp.astype(ft) / jnp.maximum(tp + fp, 1).astype(ft)
    else:
        # Wins + ties/2 over the negatives, as a fraction of |N| (in [0, 1]).
        neg_le = jnp.minimum(
            jnp.searchsorted(nk, pk, side="right").astype(jnp.int32), n_neg
        )
        term = (neg_below.astype(ft) + neg_le.astype(ft)) / (
            2 * jnp.maximum(n_neg, 1).astype(ft)
        )
    total = _pairwise_sum(jnp.where(is_pos, term, jnp.zeros((), ft)))
    value = total / jnp.maximum(n_pos, 1).astype(ft)
    return value, defined, has_nan


def _segmented(metric, scores, positive, valid, segments):
    """One list ``[n]`` with segment ids -> per-item results in sorted order.

    Sorts by (segment, score key), then gets every count from integer prefix
    sums read at segment and tie-block boundaries. Returns
    ``(seg_sorted, seg_value, seg_last, defined, seg_nan)``, all ``[n]``;
    ``seg_value``/``defined``/``seg_nan`` hold the item's segment values.
    """
    n = scores.shape[0]
    ft = _out_dtype(scores)
    flags = (
        jnp.where(positive & valid, _FLAG_POS, 0)
        | jnp.where(~positive & valid, _FLAG_NEG, 0)
    ).astype(jnp.int8)
    if jnp.issubdtype(scores.dtype, jnp.floating):
        flags = flags | jnp.where(jnp.isnan(scores) & valid, _FLAG_NAN, 0).astype(
            jnp.int8
        )
    seg, key, flags = lax.sort(
        (segments, _sort_key(scores), flags), num_keys=2, is_stable=False
    )
    idx = jnp.arange(n, dtype=jnp.int32)
    seg_first = _shift_ne(seg, True)
    seg_last = jnp.concatenate([seg_first[1:], jnp.ones((1,), bool)])
    blk_first = seg_first | _shift_ne(key, True)
    blk_last = jnp.concatenate([blk_first[1:], jnp.ones((1,), bool)])
    s0 = lax.cummax(jnp.where(seg_first, idx, 0))  # segment start
    s1 = lax.cummin(jnp.where(seg_last, idx, n - 1), reverse=True)  # end
    b0 = lax.cummax(jnp.where(blk_first, idx, 0))  # tie-block start
    b1 = lax.cummin(jnp.where(blk_last, idx, n - 1), reverse=True)  # end

    def counts(bit):
        x = ((flags & bit) != 0).astype(jnp.int32)
        incl = jnp.cumsum(x, dtype=jnp.int32)
        return incl, incl - x  # items at or before k / strictly before k

    cp, ep = counts(_FLAG_POS)
    cn, en = counts(_FLAG_NEG)
    cz, ez = counts(_FLAG_NAN)
    n_pos = cp[s1] - ep[s0]
    n_neg = cn[s1] - en[s0]
    seg_nan = (cz[s1] - ez[s0]) > 0
    is_pos = (flags & _FLAG_POS) != 0
    if metric == "ap":
        tp = cp[s1] - ep[b0]  # positives of the segment ranked at or above
        fp = cn[s1] - en[b0]
        prec = tp.astype(ft) / jnp.maximum(tp + fp, 1).astype(ft)
        term = prec / jnp.maximum(n_pos, 1).astype(ft)
        defined = n_pos > 0
    else:
        below = en[b0] - en[s0]
        le = cn[b1] - en[s0]
        frac = (below.astype(ft) + le.astype(ft)) / (
            2 * jnp.maximum(n_neg, 1).astype(ft)
        )
        term = frac / jnp.maximum(n_pos, 1).astype(ft)
        defined = (n_pos > 0) & (n_neg > 0)
    sums = _segmented_cumsum(seg_first, jnp.where(is_pos, term, jnp.zeros((), ft)))
    seg_value = sums[s1]
    return seg, seg_value, seg_last, defined, seg_nan


def _reduce(fn, values, mask):
    """Combine per-segment ``values`` [m] selected by ``mask`` with ``fn``."""
    zero = jnp.zeros((), values.dtype)
    if fn is jnp.mean or fn is jnp.sum:
        total = _pairwise_sum(jnp.where(mask, values, zero))
        if fn is jnp.sum:
            return total
        count = jnp.sum(mask, dtype=jnp.int32)
        return jnp.where(
            count > 0,
            total / jnp.maximum(count, 1).astype(values.dtype),
            jnp.full((), jnp.nan, values.dtype),
        )
    return jnp.asarray(fn(jnp.where(mask, values, zero), where=mask), values.dtype)


def _list_metric(metric, reduce_fn, scores, positive, valid, segments):
    """One list -> (value ``[]`` or ``[n]``, n_defined ``[]``, has_nan ``[]``)."""
    ft = _out_dtype(scores)
    nan = jnp.full((), jnp.nan, ft)
    if scores.shape[0] == 0:  # empty lists (only under jit): undefined
        out = jnp.full((0,), nan) if reduce_fn is None else nan
        return out, jnp.zeros((), jnp.int32), jnp.zeros((), bool)
    if segments is None:
        value, defined, has_nan = _unsegmented(metric, scores, positive, valid)
        n_defined = defined.astype(jnp.int32)
        if reduce_fn is None:
            out = jnp.where(valid & defined & ~has_nan, value, nan)
        else:
            out = _reduce(reduce_fn, value[None], defined[None])
            out = jnp.where(has_nan, nan, out)
        return out, n_defined, has_nan
    seg, seg_value, seg_last, defined, seg_nan = _segmented(
        metric, scores, positive, valid, segments
    )
    has_nan = jnp.any(seg_nan)
    n_defined = jnp.sum(seg_last & defined, dtype=jnp.int32)
    if reduce_fn is None:
        # Item-aligned: item i gets the value of its own segment.
        at = jnp.searchsorted(seg, segments, side="left")
        ok = defined[at] & ~seg_nan[at] & valid
        out = jnp.where(ok, seg_value[at], nan)
    else:
        out = _reduce(reduce_fn, seg_value, seg_last & defined & ~seg_nan)
        out = jnp.where(has_nan, nan, out)
    return out, n_defined, has_nan


@functools.cache
def _kernel(metric, segmented, reduce_fn):
    """Jitted, batched kernel for a (metric, segmented, reduce_fn) triple."""
    out_sig = "()" if reduce_fn is not None else "(n)"
    if segmented:

        def one(s, p, v, g):
            return _list_metric(metric, reduce_fn, s, p, v, g)

        sig = f"(n),(n),(n),(n)->{out_sig},(),()"
    else:

        def one(s, p, v):
            return _list_metric(metric, reduce_fn, s, p, v, None)

        sig = f"(n),(n),(n)->{out_sig},(),()"
    return jax.jit(jnp.vectorize(one, signature=sig))


@jax.jit
@functools.partial(jnp.vectorize, signature="(n),(n),(n)->()")
def _ap_kernel(scores, positive, valid):
    """AP of each list (NaN if no positive or a valid NaN score). Private API
    kept for :func:`jaxrank.sweep` (``jax.vmap(_ap_kernel)(S, pos, valid)``)."""
    value, defined, has_nan = _unsegmented("ap", scores, positive, valid)
    return jnp.where(defined & ~has_nan, value, jnp.full((), jnp.nan, value.dtype))


def _run(metric, name, scores, labels, where, segments, segment_reduce_fn):
    s, positive, valid, segments, bad_labels = _prepare(
        scores, labels, where, segments, segment_reduce_fn, metric
    )
    kernel = _kernel(metric, segments is not None, segment_reduce_fn)
    args = (s, positive, valid) if segments is None else (s, positive, valid, segments)
    out, n_defined, has_nan = kernel(*args)
    if bad_labels is not None:
        bad = bad_labels if segment_reduce_fn is not None else bad_labels[..., None]
        out = jnp.where(bad, jnp.full((), jnp.nan, out.dtype), out)
        checkify.debug_check(
            ~jnp.any(bad_labels),
            f"{name}: {{}} list(s) have labels outside {{{{0, 1}}}} / {{{{-1, 1}}}} or NaN.",
            jnp.sum(bad_labels),
        )
    # No-ops unless the caller wraps the function with checkify.checkify.
    checkify.debug_check(
        ~jnp.any(has_nan),
        f"{name}: {{}} list(s) have a NaN score among their valid items.",
        jnp.sum(has_nan),
    )
    what = "a positive" if metric == "ap" else "a positive and a negative"
    checkify.debug_check(
        jnp.all(n_defined > 0),
        f"{name}: {{}} list(s) have no segment with {what}; the value is NaN.",
        jnp.sum(n_defined == 0),
    )
    return out


# ----------------------------------------------------------------------------
# public functions
# ----------------------------------------------------------------------------


def average_precision(
    scores, labels, *, where=None, segments=None, segment_reduce_fn=jnp.mean
):
    r"""Average precision of a ranking by ``scores`` (scikit-learn convention).

    .. math::
        \mathrm{AP} = \frac{1}{|P|} \sum_{i \in P}
            \frac{\#\{k \in P : s_k \ge s_i\}}{\#\{k : s_k \ge s_i\}}

    A block of tied scores is one threshold: every item of the block counts as
    ranked above every other, so ties never help. This equals
    ``sklearn.metrics.average_precision_score``, tied scores included, at any
    ``n`` (tested to ``n = 10^7``; relative error below ``4e-6``, see the
    module notes). Cost O(n log n) per list, memory O(n).

    **Segments (queries).** With ``segments``, each segment (e.g. a query id)
    is ranked on its own and gets its own AP (``P`` and the counts above run
    over the segment only). By default the list's value is the **mean AP over
    the segments that contain a valid positive** (MAP over queries, as in
    LETOR evaluation). Segments without a positive have no AP and are
    dropped, not counted as 0 (rax's ``ap_metric`` counts them as 0). A
    segment with positives but no negative has AP 1. Segment ids are any
    integers (only equality matters; they need not be sorted, contiguous or
    ``< n``). Without ``segments`` a list is one segment.

    Args:
        scores: ``[..., n]`` float (any precision, float16 and bfloat16
            included) or int array; higher ranks first. Units arbitrary.
            Compared exactly: integer scores are never rounded. In eager
            calls, 64-bit NumPy scores (with JAX's x64 mode off) are replaced
            by their exact ranks on the host rather than rounded or wrapped
            to 32 bits. Under ``jax.jit`` (x64 off) this cannot be done:
            JAX converts 64-bit NumPy arguments at the ``jit`` boundary,
            before this function sees them, so int64 scores beyond int32 are
            narrowed to 32 bits (wrapped) and float64 scores are rounded to
            float32 (new ties); the result is that of the narrowed scores.
            Pass exact ranks instead (``np.unique(s, return_inverse=True)[1]``
            as int32), or enable x64 (``jax.config.update("jax_enable_x64",
            True)``).
        labels: ``[..., n]`` array; items with ``label > 0`` are positives
            (``{0, 1}``, ``{-1, 1}`` or bool).
        where: optional ``[..., n]`` bool mask; ``False`` items are ignored
            (never inspected, even when NaN).
        segments: optional ``[..., n]`` int array of segment (query) ids.
        segment_reduce_fn: how the segment values of one list are combined.
            Static. ``jnp.mean`` (default): mean over the segments with a
            positive (MAP); NaN if there is none. ``jnp.sum``: their sum (0 if
            none). Any ``fn(values, where=mask)`` reducing a 1-D array.
            ``None``: no reduction; returns ``[..., n]`` where item ``i``
            holds the AP of its own segment (NaN for masked items and for
            segments without a positive). Reductions are over the segments of
            one list, never over batch axes (use ``jax.vmap`` / ``jnp.mean``
            on the result for that).

    Returns:
        ``[...]`` array of AP (or MAP) values in ``[0, 1]``, or ``[..., n]``
        if ``segment_reduce_fn is None``; float32 (float64 for float64
        scores). Under ``jit``/``vmap`` no value is checked: a list without a
        positive gives NaN, and a NaN score among the valid items of a list
        gives NaN for that list (for its segment with
        ``segment_reduce_fn=None``), never a number; so does a valid label
        that eager calls refuse (NaN, or outside ``{0, 1}`` / ``{-1, 1}``).
        To get an error instead, wrap the call with
        ``jax.experimental.checkify.checkify`` (default
        ``errors=checkify.user_checks``): these cases then raise a
        ``JaxRuntimeError`` on ``err.throw()``. ``+-inf`` scores rank as
        extreme values under ``jit``.

    Raises:
        ValueError: mismatched shapes or scalar inputs (always); and, when
            the inputs are concrete (not traced), empty or non-finite scores
            among the valid items, non-binary labels, or a list without a
            positive or a negative.
        TypeError: (eagerly and at trace time) complex, bool or non-numeric
            scores; complex or non-numeric labels; a non-bool ``where``;
            non-integer ``segments``; a non-callable ``segment_reduce_fn``.

    References:
        Yue et al., "A support vector method for optimizing average precision",
        SIGIR 2007 (AP as used by AP-SVM); MAP over queries: Qin et al.,
        "LETOR: A benchmark collection for research on learning to rank for
        information retrieval", Information Retrieval 13, 2010.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxrank.metrics import average_precision
        >>> float(average_precision(jnp.array([3., 2., 1.]), jnp.array([1, 0, 1])))
        0.8333333...

        MAP over two queries (ids 7 and 3); query 3 has AP 1/2:

        >>> s = jnp.array([3., 2., 1., 0.5, 0.2])
        >>> y = jnp.array([1, 0, 1, 0, 1])
        >>> q = jnp.array([7, 7, 7, 3, 3])
        >>> float(average_precision(s, y, segments=q))  # (5/6 + 1/2) / 2
        0.6666666...
        >>> average_precision(s, y, segments=q, segment_reduce_fn=None)
        Array([0.8333334, 0.8333334, 0.8333334, 0.5      , 0.5      ], dtype=float32)

        Under ``jit`` a NaN score gives NaN; ``checkify`` turns it into an
        error:

        >>> s_nan = jnp.array([3., jnp.nan, 1.])
        >>> float(jax.jit(average_precision)(s_nan, jnp.array([1, 0, 1])))
        nan
        >>> from jax.experimental import checkify
        >>> err, _ = checkify.checkify(jax.jit(average_precision))(
        ...     s_nan, jnp.array([1, 0, 1]))
        >>> print(err.get())  # doctest: +ELLIPSIS
        average_precision: 1 list(s) have a NaN score among their valid items...
    """
    return _run(
        "ap", "average_precision", scores, labels, where, segments, segment_reduce_fn
    )


def roc_auc(scores, labels, *, where=None, segments=None, segment_reduce_fn=jnp.mean):
    r"""Area under the ROC curve (Mann-Whitney U), ties counted as 1/2.

    .. math::
        \mathrm{AUC} = \frac{1}{|P||N|} \sum_{i \in P} \sum_{j \in N}
            \big(1[s_i > s_j] + \tfrac12 1[s_i = s_j]\big)

    Equals ``sklearn.metrics.roc_auc_score``, tied scores included, at any
    ``n`` (tested to ``n = 10^7``, ``|P||N| > 2^31``). Cost O(n log n) per
    list (sorting and binary search), no ``n^2`` pairs and no integer
    ``|P||N|``.

    **Segments (queries).** With ``segments``, pairs are formed only within a
    segment: each segment gets its own AUC, and by default the list's value
    is the **mean AUC over the segments that contain both a valid positive
    and a valid negative** (the others have no pair and are dropped). For the
    pooled fraction of correctly ordered within-segment pairs, weight the
    per-segment values (``segment_reduce_fn=None``) by ``|P_q||N_q|``.

    Args:
        scores: ``[..., n]`` float or int array. Units arbitrary. Compared
            exactly, as for :func:`average_precision` (with the same limit:
            under ``jax.jit`` with x64 off, 64-bit NumPy scores are narrowed
            to 32 bits at the ``jit`` boundary, before this function sees
            them; pass exact ranks or enable x64).
        labels: ``[..., n]`` array; items with ``label > 0`` are positives.
        where: optional ``[..., n]`` bool mask; ``False`` items are ignored.
        segments: optional ``[..., n]`` int segment (query) ids.
        segment_reduce_fn: as :func:`average_precision`: ``jnp.mean``
            (default, over the segments with both classes), ``jnp.sum``, a
            callable ``fn(values, where=mask)``, or ``None`` for ``[..., n]``
            item-aligned per-segment values (NaN for masked items and for
            segments without both classes). Static.

    Returns:
        ``[...]`` float array in ``[0, 1]`` (``[..., n]`` if
        ``segment_reduce_fn is None``); under ``jit`` NaN for a list in which
        no segment has both classes, with a NaN score among its valid items,
        or with a NaN or non-binary valid label; ``checkify`` turns these
        into errors, as for :func:`average_precision`.

    Raises:
        ValueError / TypeError: as :func:`average_precision`; with
            ``segments`` and concrete inputs, also a list in which no segment
            has both classes.

    References:
        Hanley & McNeil, Radiology 1982 (AUC as the Mann-Whitney statistic).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxrank.metrics import roc_auc
        >>> float(roc_auc(jnp.array([3., 2., 2.]), jnp.array([1, 1, 0])))
        0.75

        Two queries: AUC 0.75 in query 0 and 0 in query 1 (pairs only
        within a query), mean 0.375:

        >>> s = jnp.array([3., 2., 2., 1., 5.])
        >>> y = jnp.array([1, 1, 0, 1, 0])
        >>> float(roc_auc(s, y, segments=jnp.array([0, 0, 0, 1, 1])))
        0.375
    """
    return _run(
        "roc_auc", "roc_auc", scores, labels, where, segments, segment_reduce_fn
    )
