"""Dual coordinate ascent epochs over per-sample hinge terms (pure XLA).

Temporary reference implementation (one ``lax.fori_loop`` step per
coordinate, Hsieh et al. 2008, Algorithm 1 without shrinking).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def dcd_epochs(h, w, alpha, order, sq_norms, n_epochs=1):
    """``n_epochs`` passes of dual coordinate ascent in the order ``order``.

    Args:
        h: :class:`jaxrank._src.types.HingeTerms` (rows, bias, labels, upper).
        w: ``[dim]`` current weights (all parts).
        alpha: ``[m]`` duals in ``[0, upper]``.
        order: ``[m]`` int32 permutation.
        sq_norms: ``[m]`` ``||z_i||^2`` (with the bias).
        n_epochs: static number of passes.

    Returns:
        ``(w, alpha)`` with ``w_out - w_in = sum_i (alpha_out - alpha_in)_i y_i z_i``.
    """
    rows = h.rows
    d = rows.shape[1]
    bias = h.bias
    y, u = h.labels, h.upper
    if rows.sparse:
        data, cols = rows.X.data, rows.X.indices[:, 1]
        indptr = rows.indptr

        def dot(i, w):
            def body(k, acc):
                return acc + data[k] * w[cols[k]]
            return lax.fori_loop(indptr[i], indptr[i + 1], body, jnp.zeros((), w.dtype))

        def axpy(i, w, a):
            def body(k, w):
                return w.at[cols[k]].add(a * data[k])
            return lax.fori_loop(indptr[i], indptr[i + 1], body, w)
    else:
        X = rows.X

        def dot(i, w):
            return jnp.dot(X[i], w[:d])

        def axpy(i, w, a):
            return w.at[:d].add(a * X[i])

    def coord(k, c):
        w, alpha = c
        i = order[k]
        g = y[i] * (dot(i, w) + (bias * w[d] if bias else 0)) - 1
        q = sq_norms[i]
        new = jnp.clip(alpha[i] - g / jnp.where(q > 0, q, 1), 0, u[i])
        new = jnp.where(q > 0, new, jnp.where(g < 0, u[i], 0))
        delta = new - alpha[i]
        w = axpy(i, w, delta * y[i])
        if bias:
            w = w.at[d].add(delta * y[i] * bias)
        return w, alpha.at[i].set(new)

    m = order.shape[0]

    def epoch(_, c):
        return lax.fori_loop(0, m, coord, c)

    return lax.fori_loop(0, n_epochs, epoch, (w, alpha))
