"""Pegasos-style subgradient solver for 1-slack structural SVMs (jit-pure).

Problem (eq. (3) of Mohapatra et al. 2014, and the binary SVM in the same
form)::

    min_w  F(w) = 1/2 ||w||^2 + C xi(w),   xi(w) = max_y [Delta(y) - w^T a_y]

where for an output ``y`` returned by loss-augmented inference at ``w``,
``a_y = X^T g_y`` (``g`` = ``MostViolated.coef``) and ``Delta(y)`` =
``MostViolated.loss``. The subgradient of ``F`` at ``w`` is ``w - C a_y``.

Pegasos (Shalev-Shwartz et al. 2007) steps ``w <- w - eta_t (w - C a_y)``
with ``eta_t = 1/t``. Here ``eta_t`` is chosen by exact line search on the
dual of the 1-slack problem (the Frank-Wolfe view of Pegasos, Lacoste-Julien
et al. 2013), which keeps a dual lower bound ``D`` for free:

    D = ell - 1/2 ||w||^2,   w = sum_y alpha_y C a_y,  ell = sum_y alpha_y C Delta(y)

with ``alpha`` in the simplex. The duality gap ``F(w) - D >= F(w) - F*``
bounds the suboptimality, so the stopping rule ``F(w_best) - D <=
tol * F(w_best)`` certifies that the returned objective is within ``tol``
(relative) of the true optimum. Besides the plane of the current step, the
solver keeps a small cache of recent planes (``cache`` of them, older ones
merged into one aggregate corner) and, between two calls of the oracle, takes
cheap pairwise (away/toward) line-searched steps among the cached planes (the
multi-plane Frank-Wolfe of Shah et al. 2015): far fewer calls to inference.

The whole loop is one ``lax.while_loop``: one jitted call per fit, and the
state holds only arrays, so fits ``vmap`` over ``C`` or over label sets.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


class FitResult(NamedTuple):
    """Result of :func:`fit_ssvm` (all arrays; batched under ``vmap``).

    Attributes:
        w: ``[d]`` (``[d+1]`` with an intercept, last entry) weights.
        objective: ``[]`` primal objective ``F(w)`` at the returned ``w``.
        dual: ``[]`` best dual lower bound on ``min F``.
        num_steps: ``[]`` int32 number of calls to loss-augmented inference.
        converged: ``[]`` bool, ``objective - dual <= tol * objective``.
    """

    w: jax.Array
    objective: jax.Array
    dual: jax.Array
    num_steps: jax.Array
    converged: jax.Array


class _State(NamedTuple):
    w: jax.Array  # current iterate = sum_k beta_k corner_k
    ell: jax.Array  # sum_k beta_k level_k
    best_w: jax.Array
    best_obj: jax.Array
    best_dual: jax.Array
    corners: jax.Array  # [cache + 1, d]: cached planes C a_y; last = aggregate
    levels: jax.Array  # [cache + 1]: C Delta(y)
    beta: jax.Array  # [cache + 1] convex weights
    gram: jax.Array  # [cache + 1, cache + 1] corners @ corners.T
    it: jax.Array


def _matvec(X, w, fit_intercept):
    if fit_intercept:
        return X @ w[:-1] + w[-1]
    return X @ w


def _rmatvec(X, g, fit_intercept):
    a = X.T @ g
    if fit_intercept:
        a = jnp.concatenate([a, jnp.sum(g, keepdims=True)])
    return a


def _pairwise_step(beta, ell, gram, levels):
    """One pairwise Frank-Wolfe step on the cached corners (exact line search).

    Moves weight from the "away" corner (least violated among those in use) to
    the "toward" corner (most violated); ``gamma`` maximises the dual
    ``ell - 1/2 ||w||^2`` along that segment, clipped to the away weight.
    Works in the weights: ``w = beta @ corners``, so ``corners @ w = gram @
    beta`` and a step costs O(cache^2), not O(cache * d).
    """
    viol = levels - gram @ beta
    t = jnp.argmax(viol)
    a = jnp.argmin(jnp.where(beta > 0, viol, jnp.inf))
    denom = gram[t, t] - 2 * gram[t, a] + gram[a, a]
    gamma = (viol[t] - viol[a]) / jnp.where(denom > 0, denom, 1)
    gamma = jnp.clip(jnp.where(denom > 0, gamma, 0), 0, beta[a])
    ell = ell + gamma * (levels[t] - levels[a])
    beta = beta.at[a].add(-gamma).at[t].add(gamma)
    return beta, ell


def fit_ssvm(
    oracle: Callable,
    X,
    *,
    C,
    tol=1e-4,
    max_iter: int = 2000,
    fit_intercept: bool = False,
    cache: int = 32,
    inner_steps: int = 32,
    callback: Callable | None = None,
) -> FitResult:
    r"""Minimise ``1/2 ||w||^2 + C xi(w)`` by Pegasos-style subgradient steps.

    Args:
        oracle: pure function ``scores [n] -> MostViolated`` (loss-augmented
            inference for fixed labels), e.g. a closure over
            :func:`jaxrank.inference.ap_most_violated`'s kernel. Static.
        X: ``[n, d]`` float array or ``jax.experimental.sparse.BCOO`` matrix.
            Sparse input stays sparse: only ``X @ w`` and ``X.T @ g`` are used.
        C: scalar (may be traced; ``vmap`` over it for a grid) ``> 0``.
        tol: relative duality gap at which to stop (``>= 0``). The returned
            objective is within ``tol`` (relative) of the exact optimum when
            ``converged`` is True.
        max_iter: static bound on the calls of ``oracle``.
        fit_intercept: static; add a regularised constant feature (intercept).
        cache: static number of cached planes (``>= 1``).
        inner_steps: static number of cheap cached-plane steps per oracle call.
        callback: optional host function ``(it, objective, dual) -> None``
            called through ``jax.debug.callback`` at every oracle call
            (progress output). Static.

    Returns:
        :class:`FitResult`.

    References:
        Shalev-Shwartz, Singer, Srebro, "Pegasos", ICML 2007;
        Lacoste-Julien, Jaggi, Schmidt, Pletscher, "Block-coordinate
        Frank-Wolfe optimization for structural SVMs", ICML 2013;
        Shah, Kolmogorov, Lampert, "A multi-plane block-coordinate Frank-Wolfe
        algorithm for training structural SVMs", CVPR 2015.
    """
    n, d = X.shape
    dim = d + 1 if fit_intercept else d
    dtype = X.dtype
    C = jnp.asarray(C, dtype)
    w_init = jnp.zeros((dim,), dtype)
    inf = jnp.asarray(jnp.inf, dtype)

    def evaluate(w):
        r = oracle(_matvec(X, w, fit_intercept))
        a = _rmatvec(X, r.coef.astype(dtype), fit_intercept)
        obj = 0.5 * jnp.dot(w, w) + C * r.hinge
        return obj, C * a, C * r.loss

    def cond(s):
        gap_ok = s.best_obj - s.best_dual <= tol * jnp.abs(s.best_obj)
        return (s.it < max_iter) & ~(gap_ok & jnp.isfinite(s.best_obj))

    def body(s):
        obj, ws, ls = evaluate(s.w)
        better = obj < s.best_obj
        best_w = jnp.where(better, s.w, s.best_w)
        best_obj = jnp.where(better, obj, s.best_obj)
        # Retire the oldest cached plane into the aggregate corner, then store
        # the new plane in its slot.
        slot = s.it % cache
        agg = cache
        b_old, b_agg = s.beta[slot], s.beta[agg]
        mass = b_old + b_agg
        mix = jnp.where(mass > 0, b_old / jnp.where(mass > 0, mass, 1), 0)
        corners = s.corners.at[agg].set(
            (1 - mix) * s.corners[agg] + mix * s.corners[slot]
        )
        levels = s.levels.at[agg].set((1 - mix) * s.levels[agg] + mix * s.levels[slot])
        beta = s.beta.at[agg].set(mass).at[slot].set(0)
        corners = corners.at[slot].set(ws)
        levels = levels.at[slot].set(ls)
        # Pegasos / Frank-Wolfe step towards the new plane (line search).
        d = s.w - ws
        gap = jnp.dot(s.w, d) - s.ell + ls
        denom = jnp.dot(d, d)
        gamma = jnp.clip(gap / jnp.where(denom > 0, denom, 1), 0, 1)
        gamma = jnp.where(denom > 0, gamma, 0)
        w = s.w - gamma * d
        ell = s.ell + gamma * (ls - s.ell)
        beta = (1 - gamma) * beta
        beta = beta.at[slot].add(gamma)
        # Refresh the two changed rows / columns of the Gram matrix.
        r_slot = corners @ corners[slot]
        r_agg = corners @ corners[agg]
        gram = s.gram.at[slot].set(r_slot).at[:, slot].set(r_slot)
        gram = gram.at[agg].set(r_agg).at[:, agg].set(r_agg)

        def inner(_, carry):
            return _pairwise_step(*carry, gram, levels)

        if inner_steps > 0:
            beta, ell = lax.fori_loop(0, inner_steps, inner, (beta, ell))
            w = beta @ corners
        dual = jnp.maximum(s.best_dual, ell - 0.5 * jnp.dot(w, w))
        if callback is not None:
            jax.debug.callback(callback, s.it + 1, best_obj, dual)
        return _State(
            w, ell, best_w, best_obj, dual, corners, levels, beta, gram, s.it + 1
        )

    state = _State(
        w=w_init,
        ell=jnp.asarray(0, dtype),
        best_w=w_init,
        best_obj=inf,
        best_dual=jnp.asarray(0, dtype),
        corners=jnp.zeros((cache + 1, dim), dtype),
        levels=jnp.zeros((cache + 1,), dtype),
        beta=jnp.zeros((cache + 1,), dtype).at[cache].set(1),
        gram=jnp.zeros((cache + 1, cache + 1), dtype),
        it=jnp.asarray(0, jnp.int32),
    )
    state = lax.while_loop(cond, body, state)
    # Evaluate the last iterate too (the loop only scores iterates it steps from).
    obj, _, _ = evaluate(state.w)
    better = obj < state.best_obj
    best_w = jnp.where(better, state.w, state.best_w)
    best_obj = jnp.minimum(obj, state.best_obj)
    converged = best_obj - state.best_dual <= tol * jnp.abs(best_obj)
    return FitResult(best_w, best_obj, state.best_dual, state.it, converged)
