"""The solver's plane cache: Gram products and combinations (native ``qp.c`` on CPU)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg
from jax import lax

from jaxrank._src import native

# The plane cache grows with the number of weights (an optimal dual point
# needs at most dim + 1 planes, Caratheodory) up to this many planes, within
# this many bytes of float32 planes per fit.
_AUTO_CACHE_MAX = 128


_AUTO_CACHE_BYTES = 2 ** 25


def plane_cache_size(cache: int, dim: int) -> int:
    """Planes the solver caches for a model with ``cache`` planes and ``dim`` weights.

    ``Solver.cache`` is a floor: below ``_AUTO_CACHE_MAX`` planes the cache
    grows to ``dim + 2`` (room for the support of an optimal dual point, at
    most ``dim + 1`` planes), while ``(cache + 1) * dim`` float32 planes fit
    in ``_AUTO_CACHE_BYTES``. A cache smaller than the support merges planes
    in use into the aggregate corner, which stalls the dual bound.

    Args:
        cache: the fit's ``Solver.cache`` (``>= 1``).
        dim: number of weights.

    Returns:
        int ``>= cache``.
    """
    dim = max(int(dim), 1)
    grow = min(dim + 2, _AUTO_CACHE_MAX, _AUTO_CACHE_BYTES // (4 * dim) - 1)
    return max(int(cache), grow)


# Sizes at which the Newton systems are solved: the KKT system is gathered
# onto the support of ``beta`` and solved at the smallest of these sizes that
# holds it (else at the cache's size). A dense LU costs O(size^3), and the
# support is usually far smaller than the cache. The products with the plane
# cache read its filled rows at the same sizes (:func:`_over_filled_rows`).
_SUPPORT_SIZES = (8, 16, 32, 64)


def _filled_rows(born):
    """``[]`` int32 count of leading cache slots that may hold a plane.

    New planes go to the oldest unused slot and empty slots (``born = -1``)
    are the oldest, so the cache fills from slot 0 upwards; every slot at or
    above the count (the aggregate corner, the last slot, excluded) is zero.
    """
    k = born.shape[0] - 1
    return jnp.max(jnp.where(born[:k] >= 0, jnp.arange(1, k + 1, dtype=jnp.int32), 0))


def _over_filled_rows(at_size):
    """A product with the plane cache that, under ``vmap``, reads only its filled rows.

    ``at_size(m)`` is a function of ``(corners, *args)`` (any leading batch
    axes) that reads only the first ``m`` rows of ``corners`` and its last
    (aggregate) row. The returned function ``f(n, corners, *args)`` runs it
    at the cache's full size; under ``vmap`` it runs at the smallest of
    ``_SUPPORT_SIZES`` below a third of the cache (else the full size) that
    holds the batch's largest count ``n`` of filled rows
    (:func:`_filled_rows`): one batched product of that size (a
    ``lax.switch`` on a batched index would run every size). The batched
    product copies the rows it reads, so at a third of the cache or more
    reading all rows moves less memory. A single fit's cache is small
    enough to stay in the CPU caches, and a ``lax.switch`` there makes XLA
    copy the cache, so it reads all rows.
    """
    def rule_for(target):
        def rule(axis_size, in_batched, n, *args):
            n = jnp.max(n) if in_batched[0] else n
            args = tuple(a if batched else jnp.broadcast_to(a, (axis_size,) + jnp.shape(a))
                         for a, batched in zip(args, in_batched[1:]))
            out = target(n, *args)
            return out, jax.tree_util.tree_map(lambda _: True, out)
        return rule

    @jax.custom_batching.custom_vmap
    def batched(n, corners, *args):
        k = corners.shape[-2] - 1
        sizes = [m for m in _support_sizes(k) if 3 * m < k] + [k]
        return lax.switch(_size_branch(n, sizes), [at_size(m) for m in sizes], corners, *args)

    batched.def_vmap(rule_for(batched))

    @jax.custom_batching.custom_vmap
    def run(n, corners, *args):
        del n
        return at_size(corners.shape[-2] - 1)(corners, *args)

    run.def_vmap(rule_for(batched))
    return run


def _matvec_at(m):
    def f(corners, v):
        k = corners.shape[-2] - 1
        if m >= k:
            return jnp.einsum("...kd,...d->...k", corners, v)
        top = jnp.einsum("...kd,...d->...k", corners[..., :m, :], v)
        agg = jnp.einsum("...d,...d->...", corners[..., k, :], v)
        zeros = jnp.zeros(top.shape[:-1] + (k - m,), top.dtype)
        return jnp.concatenate([top, zeros, agg[..., None]], -1)
    return f


def _combine_at(m):
    def f(corners, beta):
        k = corners.shape[-2] - 1
        if m >= k:
            return jnp.einsum("...k,...kd->...d", beta, corners)
        return (jnp.einsum("...k,...kd->...d", beta[..., :m], corners[..., :m, :])
                + beta[..., k, None] * corners[..., k, :])
    return f


# XLA forms of ``corners @ v`` (``[k]``) and ``beta @ corners`` (``[dim]``), reading only
# the ``n`` filled rows and the aggregate under ``vmap``.
_xla_cache_matvec = _over_filled_rows(_matvec_at)


_xla_cache_combine = _over_filled_rows(_combine_at)


def _native_cache_rows(n, corners, vecs):
    out = jax.ShapeDtypeStruct(vecs.shape[:-2] + (vecs.shape[-2], corners.shape[-2]),
                               corners.dtype)
    return native.call("jaxrank_cache_rows", out, corners, vecs, n)


def _xla_cache_rows(n, corners, vecs):
    return jnp.stack([_xla_cache_matvec(n, corners, vecs[j]) for j in range(vecs.shape[0])])


def _cache_rows(n, corners, vecs, *, native_ok=True):
    """``[r, k + 1]`` products ``vecs @ corners.T`` with the plane cache.

    ``n``: ``[]`` int32 count of filled slots (:func:`_filled_rows`);
    ``corners``: ``[k + 1, dim]``; ``vecs``: ``[r, dim]``. Rows of the empty
    slots are zero. On CPU with the native library (and ``native_ok``), one
    pass over the filled rows and the aggregate (``qp.c``, float64 sums);
    else the XLA form (sums in the dtype of ``corners``).
    """
    if not native_ok:
        return _xla_cache_rows(n, corners, vecs)
    return native.dispatch(_native_cache_rows, _xla_cache_rows, n, corners, vecs)


def _cache_matvec(n, corners, v, *, native_ok=True):
    """``[k + 1]`` ``corners @ v`` (:func:`_cache_rows` of one vector)."""
    return _cache_rows(n, corners, v[None], native_ok=native_ok)[0]


def _native_cache_combine(n, corners, beta):
    del n
    out = jax.ShapeDtypeStruct(corners.shape[:-2] + corners.shape[-1:], corners.dtype)
    return native.call("jaxrank_cache_combine", out, corners, beta)


def _cache_combine(n, corners, beta, *, native_ok=True):
    """``[dim]`` ``beta @ corners``; the native form reads only rows of nonzero weight."""
    if not native_ok:
        return _xla_cache_combine(n, corners, beta)
    return native.dispatch(_native_cache_combine, _xla_cache_combine, n, corners, beta)


def _support_sizes(k):
    return [m for m in _SUPPORT_SIZES if m < k] + [k]


def _size_branch(n_on, sizes):
    return jnp.sum(n_on > jnp.asarray(sizes[:-1], jnp.int32)) if len(sizes) > 1 else 0
