"""The XLA twin of the native DCD passes (``dcd.c``): the same visiting orders, for GPU/TPU."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank._src.native import _vary, _varying_zero

_F32 = jnp.float32


_I32 = jnp.int32


def _row_ids(rows):
    """``[nnz]`` row of each stored CSR entry (``m`` beyond ``indptr[m]``)."""
    nnz = rows.values.shape[-1]
    starts = jnp.zeros((nnz,), _I32).at[rows.indptr[1:]].add(1, mode="drop")
    return jnp.cumsum(starts, dtype=_I32)


def _xla_sq_norms(rows):
    b2 = rows.bias.astype(_F32) ** 2
    if not rows.is_sparse:
        return jnp.sum(rows.X * rows.X, axis=-1) + b2
    m = rows.n_rows
    q = jax.ops.segment_sum(rows.values * rows.values, _row_ids(rows), num_segments=m)
    return q + b2


def _xla_row_access(rows, dim):
    """(dot(i, w), axpy(i, a, w)) for one row, as XLA ops."""
    bias = rows.bias
    if not rows.is_sparse:
        X = rows.X
        d = X.shape[1]

        def dot(i, w):
            # multiply + reduce: fused by XLA (a dot op becomes a library call per step)
            s = jnp.sum(lax.dynamic_index_in_dim(X, i, keepdims=False) * w[:d])
            return s + bias * w[d] if dim > d else s

        def axpy(i, a, w):
            x = lax.dynamic_index_in_dim(X, i, keepdims=False)
            if dim > d:
                return w.at[:d].add(a * x).at[d].add(a * bias)
            return w + a * x

        return dot, axpy

    indptr, indices, values, bcol = rows.indptr, rows.indices, rows.values, rows.n_cols

    def dot(i, w):
        s = lax.fori_loop(
            indptr[i],
            indptr[i + 1],
            lambda k, s: s + values[k] * w[indices[k]],
            jnp.zeros((), _F32),
        )
        # bias column n_cols (absent if dim == n_cols: fill 0; then bias == 0 anyway)
        return s + bias * jnp.take(w, bcol, mode="fill", fill_value=0)

    def axpy(i, a, w):
        w = lax.fori_loop(
            indptr[i],
            indptr[i + 1],
            lambda k, w: w.at[indices[k]].add(a * values[k]),
            w,
        )
        return w.at[bcol].add(a * bias, mode="drop")

    return dot, axpy


_U32 = jnp.uint32


def _hash32(x):
    """lowbias32 (as ``hash32`` in dcd.c), uint32 arithmetic."""
    x = x ^ (x >> 16)
    x = x * _U32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * _U32(0x846CA68B)
    return x ^ (x >> 16)


def _below(r, n):
    """High 32 bits of ``r * n`` for uint32 ``r, n`` (``below`` in dcd.c)."""
    mask = _U32(0xFFFF)
    a0, a1, b0, b1 = r & mask, r >> 16, n & mask, n >> 16
    p00, p10, p01, p11 = a0 * b0, a1 * b0, a0 * b1, a1 * b1
    cross = (p00 >> 16) + (p10 & mask) + (p01 & mask)
    return p11 + (p10 >> 16) + (p01 >> 16) + (cross >> 16)


def _xla_epoch(w, alpha, rows, labels, upper, order, sqn, driver, *, n_epochs):
    """``run_passes`` of dcd.c as XLA loops (same visiting orders, float32)."""
    m = alpha.shape[0]
    zero = _varying_zero(w, alpha, rows, labels, upper, order, sqn, driver)
    w, alpha = _vary(w, zero), _vary(alpha, zero)
    active, pg_tol, max_visits = (None, None, None) if driver is None else driver
    dot, axpy = _xla_row_access(rows, w.shape[0])
    shrink = active is not None
    inf = jnp.asarray(jnp.inf, _F32)
    imax = jnp.iinfo(jnp.int32).max
    # list: active samples (u > 0) in `order`, then the shrunk ones
    valid = upper[order] > 0
    on = valid & active.mask[order] if shrink else valid
    off = valid & ~on
    nf = jnp.sum(on, dtype=_I32)
    n = nf + jnp.sum(off, dtype=_I32)
    pos = jnp.where(
        on,
        jnp.cumsum(on, dtype=_I32) - 1,
        jnp.where(off, nf + jnp.cumsum(off, dtype=_I32) - 1, m),
    )
    lst = _vary(jnp.zeros((m,), _I32).at[pos].set(order, mode="drop"), zero)
    if m > 0:
        seed = _hash32(
            _hash32(order[0].astype(_U32))
            ^ _hash32(order[m - 1].astype(_U32) ^ _U32(m))
        )
    else:
        seed = _U32(0)
    golden = _U32(0x9E3779B9)

    def shuffle(lst, act, ctr):
        def swap(k, c):
            lst, ctr = c
            j = k + _below(_hash32(seed + ctr * golden), (act - k).astype(_U32)).astype(
                _I32
            )
            lk, lj = lst[k], lst[j]
            return lst.at[k].set(lj).at[j].set(lk), ctr + _U32(1)

        return lax.fori_loop(0, jnp.maximum(act - 1, 0), swap, (lst, ctr))

    def no_shuffle(lst, act, ctr):
        return lst, ctr

    def visit(lst, s, c):
        w, alpha, pending, dropped, pg_old, pg_new, visits = c
        # In-place updates: lst is only read here (the shrunk samples are
        # compacted after the pass), and the new alpha_i is written at the
        # start of the next step (`pending`), so no fusion reads alpha while
        # another writes it (XLA would copy alpha for every coordinate).
        alpha = alpha.at[pending[0]].set(pending[1])
        i = lst[s]
        ui, yi, a, q = upper[i], labels[i], alpha[i], sqn[i]
        G = yi * dot(i, w) - 1
        at_lo, at_hi = a <= 0, a >= ui
        drop = (at_lo & (G > pg_old[0])) | (~at_lo & at_hi & (G < pg_old[1]))
        PG = jnp.where(at_lo, jnp.minimum(G, 0), jnp.where(at_hi, jnp.maximum(G, 0), G))
        keep = ~drop
        pg_new = (
            jnp.where(keep, jnp.maximum(pg_new[0], PG), pg_new[0]),
            jnp.where(keep, jnp.minimum(pg_new[1], PG), pg_new[1]),
        )
        a_new = jnp.where(
            q > 0,
            jnp.clip(a - G / jnp.where(q > 0, q, 1), 0, ui),
            jnp.where(G < 0, ui, 0),
        )
        a_new = jnp.where(keep & (jnp.abs(PG) > 1e-12), a_new, a)
        delta = (a_new - a) * yi
        w = lax.cond(delta != 0, lambda w: axpy(i, delta, w), lambda w: w, w)
        dropped = dropped.at[s].set(drop)
        visits = jnp.where(visits < imax, visits + 1, visits)
        return w, alpha, (i, a_new), dropped, pg_old, pg_new, visits

    def compact(lst, act, dropped):
        """Kept samples of lst[:act] first, then the shrunk ones (both in order)."""
        pos = jnp.arange(m, dtype=_I32)
        in_pass = pos < act
        keep, out = in_pass & ~dropped, in_pass & dropped
        kept = jnp.sum(keep, dtype=_I32)
        dest = jnp.where(
            keep,
            jnp.cumsum(keep, dtype=_I32) - 1,
            jnp.where(out, kept + jnp.cumsum(out, dtype=_I32) - 1, pos),
        )
        return jnp.zeros_like(lst).at[dest].set(lst), kept

    def one_pass(c):
        ep, act, w, alpha, lst, ctr, pg_old, pg_new, visits, conv, _ = c
        lst, ctr = lax.cond(ep > 0, shuffle, no_shuffle, lst, act, ctr)
        fresh = (_vary(-inf, zero), _vary(inf, zero))
        dropped = _vary(jnp.zeros((m,), bool), zero)
        pending = (_vary(jnp.zeros((), _I32), zero), alpha[0])  # a no-op write
        w, alpha, pending, dropped, _, pg_new, visits = lax.fori_loop(
            0,
            act,
            functools.partial(visit, lst),
            (w, alpha, pending, dropped, pg_old, fresh, visits),
        )
        alpha = alpha.at[pending[0]].set(pending[1])
        lst, act = compact(lst, act, dropped)
        if shrink:
            small = pg_new[0] - pg_new[1] <= pg_tol
            conv = small & (act == n)
            react = small & (act != n)
            act = jnp.where(react, n, act)
            nxt = (
                jnp.where(pg_new[0] <= 0, inf, pg_new[0]),
                jnp.where(pg_new[1] >= 0, -inf, pg_new[1]),
            )
            pg_old = (
                jnp.where(react, inf, jnp.where(conv, pg_old[0], nxt[0])),
                jnp.where(react, -inf, jnp.where(conv, pg_old[1], nxt[1])),
            )
            stop = conv | ((max_visits > 0) & (visits >= max_visits))
        else:
            stop = jnp.zeros((), bool)
        return ep + 1, act, w, alpha, lst, ctr, pg_old, pg_new, visits, conv, stop

    pg_old = (active.pg_max, active.pg_min) if shrink else (inf, -inf)
    init = (
        jnp.zeros((), _I32),
        nf,
        w,
        alpha,
        lst,
        _U32(0),
        pg_old,
        (-inf, inf),
        jnp.zeros((), _I32),
        jnp.zeros((), bool),
        jnp.zeros((), bool),
    )
    init = jax.tree.map(lambda x: _vary(jnp.asarray(x), zero), init)
    ep, act, w, alpha, lst, _, pg_old, pg_new, visits, conv, _ = lax.while_loop(
        lambda c: (c[0] < n_epochs) & ~c[10], one_pass, init
    )
    if not shrink:
        return w, alpha, None, None, None, None, None
    idx = jnp.arange(m, dtype=_I32)
    mask = active.mask.at[jnp.where(idx < n, lst, m)].set(idx < act, mode="drop")
    return (
        w,
        alpha,
        mask,
        jnp.stack(pg_old),
        jnp.stack(pg_new),
        jnp.stack([ep, visits]),
        conv,
    )


def _xla_dots(rows, w):
    dim = w.shape[0]
    if not rows.is_sparse:
        d = rows.X.shape[1]
        s = rows.X @ w[:d]
        return s + rows.bias * w[d] if dim > d else s
    m = rows.n_rows
    s = jax.ops.segment_sum(
        rows.values * w[rows.indices], _row_ids(rows), num_segments=m
    )
    return s + rows.bias * jnp.take(w, rows.n_cols, mode="fill", fill_value=0)


def _xla_order(key, *, m):
    return jax.random.permutation(key, m).astype(_I32)
