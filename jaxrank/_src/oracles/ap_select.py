"""The integer stages of selective AP inference: candidate negatives (layout) and per-negative ranks (expand).

Each on CPU as a host kernel (native ``rank.c`` or NumPy) or, elsewhere, as XLA; all
return the same integers (:mod:`jaxrank._src.oracles.sorting`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src import native
from jaxrank._src.metrics import _sort_key
from jaxrank._src.oracles.sorting import (
    _dispatch,
    _host_call,
    _key_max,
    _native_host,
    _np_argsort,
    _np_kth_smallest,
    _out_view,
    _stable_sort_xla,
)

# Capacities (fractions of the number of negatives) of the static buckets used
# by the selective ranking of Algorithm 3; the last bucket is the exact
# fallback that sorts every negative.
_SELECT_FRACTIONS = (1 / 32, 1 / 4)


# Cumulative sums of at least this many entries use a parallel prefix scan.
_SCAN_MIN_LEN = 8192


def _cumsum(x):
    """Inclusive cumulative sum of a 1-D array.

    From ``_SCAN_MIN_LEN`` entries a parallel prefix scan
    (``lax.associative_scan``: exact for integers; for floats a tree of
    additions, error O(log n eps) per entry), on XLA CPU faster than
    ``jnp.cumsum`` (a reduce-window) on long arrays. Shorter arrays use
    ``jnp.cumsum``: the same run time there, and the unrolled scan tree
    would add to the compile time of the AP oracle (``bench/inference.py``
    prints compile seconds; figures in ``docs/design_notes.md``).
    """
    if x.shape[0] < _SCAN_MIN_LEN:
        return jnp.cumsum(x)
    return lax.associative_scan(jnp.add, x)


def _num_bisections(m):
    return max(1, int(np.ceil(np.log2(max(m, 2)))) + 1)


def _expand_cuts(J, m):
    """``opt_j = 1 + #{a : J_a < j}`` for ``j = 1..m`` (histogram + cumsum), ``[m]`` int32."""
    below = _cumsum(jnp.zeros((m + 2,), jnp.int32).at[jnp.clip(J, 0, m + 1)].add(1))
    return (1 + below[:m]).astype(jnp.int32)


def _counts_above(opt, valid_rows, kp):
    """``n_a = #{j : opt_j <= a}`` for ``a = 1..kp`` (histogram + cumsum)."""
    hist = jnp.zeros((kp + 2,), jnp.int32).at[opt].add(valid_rows.astype(jnp.int32))
    return _cumsum(hist)[1 : kp + 1]


def _select_capacities(n):
    """Static bucket capacities for ``n`` negatives, the last one ``n``."""
    caps = sorted({int(np.ceil(f * n)) for f in _SELECT_FRACTIONS if f * n >= 1024})
    return [c for c in caps if c < n] + [n]


def _ap_layout(scores, pos_valid, neg_valid, tkd, P_, N, *, kp, caps, kh):
    """Sorted positives and sorted candidate negatives, as integer keys.

    Args:
        scores: ``[n]`` float scores.
        pos_valid, neg_valid: ``[n]`` bool masks.
        tkd: ``[n]`` int keys ``key(-tau_j)`` of the selection thresholds
            (:func:`_select_opt`); any shape if ``len(caps) == 1``.
        P_: ``[]`` int32 ``max(P, 1)``; N: ``[]`` int32 number of negatives.
        kp: static capacity of the positives (the first ``kp`` positives in
            input order are kept).
        caps: static bucket capacities, the last ``n``; ``(n,)``: every valid
            negative is a candidate (no selection).
        kh: static ``min(kp - 1, n)``.

    Returns:
        ``psk [kp]`` (keys ``key(-s)`` of the positives, ascending = scores
        descending, padding max), ``psrc [kp]`` int32 (their input positions),
        ``m`` (``[]`` int32, number of candidate negatives), ``sk [n]`` (their
        keys ascending, padding max) and ``src [n]`` int32 (their input
        positions). Ties in input order; entries past the valid count are
        undefined in ``psrc``/``src``. Integers only, the same on both paths.
    """
    ak = _sort_key(-scores)
    host = functools.partial(_ap_layout_host, kp=kp, caps=caps, kh=kh)
    xla = functools.partial(_ap_layout_xla, kp=kp, caps=caps, kh=kh)
    return _dispatch(host, xla, scores.shape[-1], ak, pos_valid, neg_valid, tkd,
                     P_.astype(jnp.int32), N.astype(jnp.int32))


def _ap_layout_xla(ak, pos_valid, neg_valid, tkd, P_, N, *, kp, caps, kh):
    """XLA path of :func:`_ap_layout` (one list)."""
    n = ak.shape[0]
    ity = ak.dtype
    top = _key_max(ity)
    imin = jnp.array(jnp.iinfo(ity).min, ity)
    P = jnp.sum(pos_valid, dtype=jnp.int32)
    (pidx,) = jnp.nonzero(pos_valid, size=kp, fill_value=0)
    psk, pperm = _stable_sort_xla(jnp.where(jnp.arange(kp) < P, ak[pidx], top))
    psrc = pidx[pperm].astype(jnp.int32)
    dk = jnp.where(neg_valid, ak, top)
    if len(caps) == 1:
        sel = neg_valid
    else:
        # Ranks j >= P: largest possibly active J by binary search (the test is
        # exact there). lo = P - 1 stands for "none".
        def body(_, carry):
            lo, hi = carry
            mid = (lo + hi + 1) // 2
            j = jnp.maximum(mid, 1)
            ok = jnp.sum(dk <= tkd[j - 1], dtype=jnp.int32) >= j
            return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)

        lo0 = jnp.minimum(P_ - 1, N)
        J, _ = lax.fori_loop(0, _num_bisections(n + 1), body, (lo0, N))
        thr = jnp.where(J >= P_, tkd[jnp.maximum(J, 1) - 1], imin)
        # Ranks j < P: delta_j is not unimodal there, so the first P - 1
        # negatives (the h smallest keys) are always candidates. Once some
        # J >= P is possibly active they are already within thr.
        if kh > 0:
            h = jnp.minimum(P_ - 1, N)

            def hth(_):
                return ~lax.top_k(~dk, kh)[0][jnp.clip(h - 1, 0, kh - 1)]

            need = (J < P_) & (h > 0)
            thr = jnp.maximum(thr, lax.cond(need, hth, lambda _: imin, None))
        sel = dk <= thr
    m = jnp.sum(sel, dtype=jnp.int32)

    def compact(cap):
        def run(_):
            if cap >= n:  # every negative fits: sort in place, no compaction
                sk, perm = _stable_sort_xla(jnp.where(sel, dk, top))
                return sk, perm.astype(jnp.int32)
            (idx,) = jnp.nonzero(sel, size=cap, fill_value=0)
            sk, perm = _stable_sort_xla(jnp.where(jnp.arange(cap) < m, dk[idx], top))
            return (jnp.concatenate([sk, jnp.full((n - cap,), top, ity)]),
                    jnp.concatenate([idx[perm].astype(jnp.int32),
                                     jnp.zeros((n - cap,), jnp.int32)]))

        return run

    if len(caps) == 1:
        sk, src = compact(n)(None)
    else:
        bucket = jnp.searchsorted(jnp.asarray(caps), m)
        sk, src = lax.switch(bucket, [compact(c) for c in caps], None)
    return psk, psrc, m, sk, src


def _ap_layout_rows(outs, ak, pos_valid, neg_valid, tkd, P_, N, *, kp, caps, kh):
    """Host path of :func:`_ap_layout` on NumPy rows ``[B, n]`` (the same integers).

    Fills ``outs = (psk [B, kp], psrc [B, kp], m [B], sk [B, n], src [B, n])``.
    The selection replays the XLA path's binary search step for step (its
    counts are exact), then compacts and radix-sorts only the candidates.
    """
    psk, psrc, m_out, sk, src = outs
    B, n = ak.shape
    top = np.iinfo(ak.dtype).max
    imin = np.iinfo(ak.dtype).min
    niter = _num_bisections(n + 1)
    for b in range(B):
        k = ak[b]
        pidx = np.flatnonzero(pos_valid[b])[:kp]
        perm = _np_argsort(k[pidx])
        np_ = pidx.shape[0]
        psk[b, :np_] = k[pidx][perm]
        psk[b, np_:] = top
        psrc[b, :np_] = pidx[perm]
        psrc[b, np_:] = 0
        neg = neg_valid[b]
        if len(caps) == 1:
            idx = np.flatnonzero(neg)
        else:
            d = np.where(neg, k, top)
            t = tkd[b]
            p_, nn = int(P_[b]), int(N[b])
            lo, hi = min(p_ - 1, nn), nn
            for _ in range(niter):  # the XLA path's binary search, step for step
                mid = (lo + hi + 1) // 2
                j = max(mid, 1)
                if np.count_nonzero(d <= t[j - 1]) >= j:
                    lo = mid
                else:
                    hi = mid - 1
            thr = t[max(lo, 1) - 1] if lo >= p_ else imin
            h = min(p_ - 1, nn)
            if kh > 0 and lo < p_ and h > 0:
                thr = max(thr, _np_kth_smallest(d, h))
            idx = np.flatnonzero(d <= thr)
        m = idx.shape[0]
        keys = k[idx]
        perm = _np_argsort(keys)
        m_out[b] = m
        np.take(keys, perm, out=sk[b, :m])
        sk[b, m:] = top
        np.take(idx, perm, out=src[b, :m])
        src[b, m:] = 0


def _ap_layout_host(ak, pos_valid, neg_valid, tkd, P_, N, *, kp, caps, kh):
    """Host path of :func:`_ap_layout` (any batch axes).

    The native kernel ``jaxrank_ap_layout`` (``rank.c``, an XLA FFI call on
    XLA's own buffers) when the library is loaded, else a NumPy host callback
    (:func:`_ap_layout_rows`); both give the integers of the XLA path.
    """
    n = ak.shape[-1]
    if _native_host():
        shapes = (jax.ShapeDtypeStruct((kp,), ak.dtype), jax.ShapeDtypeStruct((kp,), jnp.int32),
                  jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((n,), ak.dtype),
                  jax.ShapeDtypeStruct((n,), jnp.int32))
        return tuple(native.call("jaxrank_ap_layout", shapes, ak, pos_valid, neg_valid, tkd,
                                 P_, N, kh=np.int64(kh),
                                 select=np.int64(len(caps) > 1),
                                 niter=np.int64(_num_bisections(n + 1))))
    t_len = tkd.shape[-1]

    def host(outs, ak, pos_valid, neg_valid, tkd, P_, N):
        batch = ak.shape[:-1]
        B = int(np.prod(batch))
        outs = [_out_view(o, (B,) + o.shape[len(batch):]) for o in outs]
        _ap_layout_rows(outs, ak.reshape(B, n), pos_valid.reshape(B, n),
                        neg_valid.reshape(B, n), tkd.reshape(B, t_len), P_.reshape(B),
                        N.reshape(B), kp=kp, caps=caps, kh=kh)

    shapes = (jax.ShapeDtypeStruct((kp,), ak.dtype), jax.ShapeDtypeStruct((kp,), jnp.int32),
              jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((n,), ak.dtype),
              jax.ShapeDtypeStruct((n,), jnp.int32))
    return _host_call(host, shapes, ak, pos_valid, neg_valid, tkd, P_, N)


def _ap_expand(J, opt_head, m, src, neg_valid, P, N, *, kp):
    """Interleaving ranks in input order from the cuts of :func:`_tail_cuts`.

    Args:
        J: ``[kp]`` int32 cuts (``opt_j = 1 + #{a : J_a < j}`` for ``j >= P``).
        opt_head: ``[kh]`` int32, ``opt_j`` of the rows ``j < P``.
        m: ``[]`` int32 number of candidate rows; src: ``[n]`` int32 their
            input positions (:func:`_ap_layout`).
        neg_valid: ``[n]`` bool; P, N: ``[]`` int32.
        kp: static.

    Returns:
        ``opt [n]`` int32 (``P + 1`` for valid negatives that are not
        candidates, 0 for other items) and ``n_above [kp]`` int32
        (:func:`_counts_above` of ``opt``). The same on both paths.
    """
    host = functools.partial(_ap_expand_host, kp=kp)
    xla = functools.partial(_ap_expand_xla, kp=kp)
    return _dispatch(host, xla, src.shape[-1], J, opt_head, m, src, neg_valid, P, N)


def _ap_expand_xla(J, opt_head, m, src, neg_valid, P, N, *, kp):
    """XLA path of :func:`_ap_expand` (one list)."""
    n = src.shape[0]
    kh = opt_head.shape[0]
    j = jnp.arange(1, n + 1, dtype=jnp.int32)
    o = _expand_cuts(J, n)
    o = o.at[:kh].set(jnp.where(j[:kh] < P, opt_head, o[:kh]))
    out = jnp.where(neg_valid, P + 1, 0).astype(jnp.int32)
    out = out.at[jnp.where(j <= m, src, n)].set(o, mode="drop")
    return out, _counts_above(out, neg_valid, kp)


def _ap_expand_rows(outs, J, opt_head, m, src, neg_valid, P, N, *, kp):
    """Host path of :func:`_ap_expand` on NumPy rows.

    Fills ``outs = (opt [B, n], n_above [B, kp])``.
    """
    out, n_above = outs
    for b in range(src.shape[0]):
        mb, pb, nb = int(m[b]), int(P[b]), int(N[b])
        o = np.cumsum(np.bincount(np.clip(J[b], 0, mb + 1), minlength=mb + 2)[:mb])
        o += 1
        h = max(min(pb - 1, mb), 0)
        o[:h] = opt_head[b, :h]
        ob = out[b]
        np.multiply(neg_valid[b], pb + 1, out=ob, casting="unsafe")
        ob[src[b, :mb]] = o
        # As XLA's scatter-add: a negative rank counts from the end, one still
        # out of range is dropped (only after an overflow of the float stage).
        at = np.where(o < 0, o + kp + 2, o)
        hist = np.bincount(at[(at >= 0) & (at <= kp + 1)], minlength=kp + 2)
        hist[min(pb + 1, kp + 1)] += nb - mb  # the non-candidates
        n_above[b] = np.cumsum(hist[: kp + 1])[1:]


def _ap_expand_host(J, opt_head, m, src, neg_valid, P, N, *, kp):
    """Host path of :func:`_ap_expand` (any batch axes).

    The native kernel ``jaxrank_ap_expand`` (``rank.c``, an XLA FFI call)
    when the library is loaded, else a NumPy host callback
    (:func:`_ap_expand_rows`); both give the integers of the XLA path.
    """
    n = src.shape[-1]
    kh = opt_head.shape[-1]
    if _native_host():
        shapes = (jax.ShapeDtypeStruct((n,), jnp.int32), jax.ShapeDtypeStruct((kp,), jnp.int32))
        return tuple(native.call("jaxrank_ap_expand", shapes, J, opt_head, m, src, neg_valid,
                                 P, N))

    def host(outs, J, opt_head, m, src, neg_valid, P, N):
        batch = src.shape[:-1]
        B = int(np.prod(batch))
        outs = [_out_view(o, (B,) + o.shape[len(batch):]) for o in outs]
        _ap_expand_rows(outs, J.reshape(B, kp), opt_head.reshape(B, kh), m.reshape(B),
                        src.reshape(B, n), neg_valid.reshape(B, n), P.reshape(B),
                        N.reshape(B), kp=kp)

    shapes = (jax.ShapeDtypeStruct((n,), jnp.int32), jax.ShapeDtypeStruct((kp,), jnp.int32))
    return _host_call(host, shapes, J, opt_head, m, src, neg_valid, P, N)
