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

**Hinge block.** A sum of per-sample hinges ``sum_i u_i max(0, 1 - y_i
w^T x_i)`` (e.g. the exact penalty of the constraints of AP-SVM-APPX) can be
written into the 1-slack loss too, but one plane per iteration converges
slowly on it (its planes are the ``2^n`` subsets of violated samples).
Instead, ``ssvm_step`` can keep it as an ``n``-slack block (Hsieh et al.
2008): dual variables ``alpha_i`` in ``[0, u_i]``, ``w = sum_y beta_y C a_y +
sum_i alpha_i y_i x_i``, dual ``D = ell + sum_i alpha_i - 1/2 ||w||^2``, and
every iteration, after the plane steps, one scaled projected-gradient step
on ``alpha`` (all coordinates at once, ``alpha_i - (y_i w^T x_i - 1) /
||x_i||^2`` clipped to the box, then exact line search along that
direction; costs one ``X @ w`` and one ``X.T @ g``). On AP-SVM-APPX (20
Newsgroups, 1000 posts, C = 300) this converges in 174 oracle calls; the
same step from the scores of the oracle call (no extra ``X @ w``) took 565,
and 2 or 4 steps per call 192 and 133 calls at more time per call.

One iteration is :func:`ssvm_step` (one call of the oracle). :func:`fit_ssvm`
runs one fit as one ``lax.while_loop`` of it; :func:`fit_ssvm_queue` runs
many fits in one ``lax.while_loop`` over a fixed batch of *slots* (the steps
of all slots are one ``vmap``-ed step), loading the next problem into a slot
as soon as its fit stops. A plain ``vmap`` of :func:`fit_ssvm` would run every
member until the slowest one stops; the queue keeps every slot busy, so ``M``
fits cost about ``sum(iterations) / slots`` batched steps.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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


class HingeBlock(NamedTuple):
    """Per-sample hinge terms ``sum_i weights_i max(0, 1 - labels_i w^T x_i)``.

    Added to the objective of :func:`fit_ssvm` and solved as an ``n``-slack
    block (module docstring). Samples with weight 0 are not in the block.

    Attributes:
        weights: ``[n]`` float ``>= 0``, in units of the objective (not
            multiplied by ``C``).
        labels: ``[n]`` float, ``+1`` / ``-1``.
    """

    weights: jax.Array
    labels: jax.Array


class SolverState(NamedTuple):
    """State of one fit between two calls of the oracle (see :func:`ssvm_step`).

    Attributes:
        w: ``[dim]`` current iterate ``= beta @ corners``.
        ell: ``[]`` ``beta @ levels`` (linear part of the dual).
        best_w: ``[dim]`` iterate with the lowest primal objective so far.
        best_obj: ``[]`` that objective (``inf`` before the first call).
        best_dual: ``[]`` best dual value so far (a lower bound on ``min F``).
        corners: ``[cache + 1, dim]`` cached planes ``C a_y``; the last row is
            the aggregate of retired planes.
        levels: ``[cache + 1]`` their offsets ``C Delta(y)``.
        beta: ``[cache + 1]`` convex weights of the corners.
        gram: ``[cache + 1, cache + 1]`` ``corners @ corners.T``.
        it: ``[]`` int32 calls of the oracle so far.
        done: ``[]`` bool, the fit has stopped (converged or ``max_iter``).
        alpha: ``[n_hinge]`` dual variables of the hinge block (``[0]``
            without one).
        w_hinge: ``[dim]`` ``sum_i alpha_i y_i x_i`` (part of ``w``).
    """

    w: jax.Array
    ell: jax.Array
    best_w: jax.Array
    best_obj: jax.Array
    best_dual: jax.Array
    corners: jax.Array
    levels: jax.Array
    beta: jax.Array
    gram: jax.Array
    it: jax.Array
    done: jax.Array
    alpha: jax.Array
    w_hinge: jax.Array


def _matvec(X, w, fit_intercept):
    if fit_intercept:
        return X @ w[:-1] + w[-1]
    return X @ w


def _rmatvec(X, g, fit_intercept):
    a = X.T @ g
    if fit_intercept:
        a = jnp.concatenate([a, jnp.sum(g, keepdims=True)])
    return a


def _pairwise_step(beta, ell, v, gram, levels):
    """One pairwise Frank-Wolfe step on the cached corners (exact line search).

    Moves weight from the "away" corner (least violated among those in use) to
    the "toward" corner (most violated); ``gamma`` maximises the dual
    ``ell - 1/2 ||w||^2`` along that segment, clipped to the away weight.
    Works in the weights: ``w = beta @ corners``, so ``corners @ w = gram @
    beta =: v``, and ``v`` is updated by two columns of ``gram``: a step costs
    O(cache), not O(cache * d).
    """
    viol = levels - v
    t = jnp.argmax(viol)
    a = jnp.argmin(jnp.where(beta > 0, viol, jnp.inf))
    denom = gram[t, t] - 2 * gram[t, a] + gram[a, a]
    gamma = (viol[t] - viol[a]) / jnp.where(denom > 0, denom, 1)
    gamma = jnp.clip(jnp.where(denom > 0, gamma, 0), 0, beta[a])
    ell = ell + gamma * (levels[t] - levels[a])
    beta = beta.at[a].add(-gamma).at[t].add(gamma)
    v = v + gamma * (gram[:, t] - gram[:, a])
    return beta, ell, v


def init_state(dim: int, dtype, cache: int = 32, n_hinge: int = 0) -> SolverState:
    """The state before the first oracle call: ``w = 0``, empty plane cache.

    Args:
        dim: static number of weights (``d``, or ``d + 1`` with an intercept).
        dtype: float dtype of the weights.
        cache: static number of cached planes (``>= 1``).
        n_hinge: static number of samples ``n`` with a :class:`HingeBlock`, 0
            without one.

    Returns:
        :class:`SolverState`.
    """
    zeros = jnp.zeros((dim,), dtype)
    return SolverState(
        w=zeros,
        ell=jnp.asarray(0, dtype),
        best_w=zeros,
        best_obj=jnp.asarray(jnp.inf, dtype),
        best_dual=jnp.asarray(0, dtype),
        corners=jnp.zeros((cache + 1, dim), dtype),
        levels=jnp.zeros((cache + 1,), dtype),
        beta=jnp.zeros((cache + 1,), dtype).at[cache].set(1),
        gram=jnp.zeros((cache + 1, cache + 1), dtype),
        it=jnp.asarray(0, jnp.int32),
        done=jnp.asarray(False),
        alpha=jnp.zeros((n_hinge,), dtype),
        w_hinge=zeros,
    )


def row_sq_norms(X, fit_intercept: bool = False):
    """``[n]`` squared norms ``||x_i||^2`` of the rows (``+ 1`` with an intercept).

    Args:
        X: ``[n, d]`` float array or 2-D BCOO matrix.
        fit_intercept: add the constant feature.
    """
    if isinstance(X, jnp.ndarray):
        q = jnp.sum(X * X, axis=1)
    else:  # BCOO: scatter the squared entries by row (padding indices drop)
        q = jnp.zeros((X.shape[0],), X.dtype).at[X.indices[:, 0]].add(
            X.data * X.data, mode="drop")
    return q + 1 if fit_intercept else q


def _hinge_step(alpha, w, w_hinge, scores, hinge, sq_norms, X, fit_intercept):
    """One scaled projected-gradient step with line search on the hinge block."""
    u, y = hinge.weights, hinge.labels
    grad = y * scores - 1  # -dD/dalpha_i
    scale = jnp.where(sq_norms > 0, sq_norms, 1)
    delta = jnp.clip(alpha - grad / scale, 0, u) - alpha
    dw = _rmatvec(X, delta * y, fit_intercept)
    num = jnp.sum(delta) - jnp.dot(w, dw)  # dD/dt at t = 0
    den = jnp.dot(dw, dw)
    t = jnp.where(den > 0, num / jnp.where(den > 0, den, 1), jnp.where(num > 0, 1, 0))
    t = jnp.clip(t, 0, 1)
    return alpha + t * delta, w + t * dw, w_hinge + t * dw


def _converged(best_obj, best_dual, tol):
    ok = best_obj - best_dual <= tol * jnp.abs(best_obj)
    return ok & jnp.isfinite(best_obj)


def ssvm_step(
    state: SolverState,
    oracle: Callable,
    X,
    C,
    *,
    tol,
    max_iter: int,
    fit_intercept: bool = False,
    inner_steps: int = 32,
    hinge: HingeBlock | None = None,
    sq_norms=None,
) -> SolverState:
    """One iteration of the solver: one call of loss-augmented inference.

    Evaluates ``F`` at ``state.w`` (the oracle gives the most-violated output
    ``y``, its plane ``(C a_y, C Delta(y))`` and the slack), keeps the best
    iterate, sets ``done`` if the certified relative gap ``(F(w_best) - D) /
    F(w_best)`` is ``<= tol`` or ``max_iter`` oracle calls were made, then
    takes the Pegasos / Frank-Wolfe step towards the new plane with exact line
    search and ``inner_steps`` pairwise steps among the cached planes, and
    raises the dual bound ``D``. Pure and shape-static: ``vmap`` it over
    states, problems and ``C``.

    Args:
        state: :class:`SolverState` (from :func:`init_state` or this function).
        oracle: ``scores [n] -> MostViolated`` (static under ``jit``).
        X: ``[n, d]`` float array or BCOO matrix.
        C: ``[]`` float trade-off ``> 0``.
        tol: ``[]`` relative duality gap at which the fit stops.
        max_iter: static bound on the oracle calls of the fit.
        fit_intercept: static; a regularised constant feature (last weight).
        inner_steps: static number of cached-plane steps after the oracle call.
        hinge: optional :class:`HingeBlock` added to the objective (the
            state must come from ``init_state(..., n_hinge=n)``); one
            projected-gradient step on its dual after the plane steps.
        sq_norms: ``[n]`` :func:`row_sq_norms` of ``X`` (computed here if
            ``None``; pass it to avoid recomputing it at every step).

    Returns:
        The next :class:`SolverState` (``it`` increased by one).

    References:
        Shalev-Shwartz et al., ICML 2007 (Pegasos); Lacoste-Julien et al.,
        ICML 2013 (Frank-Wolfe view, line search); Shah et al., CVPR 2015
        (multi-plane cache).
    """
    s = state
    dtype = s.w.dtype
    C = jnp.asarray(C, dtype)
    cache = s.levels.shape[0] - 1
    scores = _matvec(X, s.w, fit_intercept)
    r = oracle(scores)
    a = _rmatvec(X, r.coef.astype(dtype), fit_intercept)
    obj = 0.5 * jnp.dot(s.w, s.w) + C * r.hinge
    alpha, w_hinge = s.alpha, s.w_hinge
    if hinge is not None:
        hinge = HingeBlock(*(jnp.asarray(h, dtype) for h in hinge))
        obj = obj + jnp.sum(hinge.weights * jnp.maximum(0, 1 - hinge.labels * scores))
        if sq_norms is None:
            sq_norms = row_sq_norms(X, fit_intercept)
    ws, ls = C * a, C * r.loss
    better = obj < s.best_obj
    best_w = jnp.where(better, s.w, s.best_w)
    best_obj = jnp.where(better, obj, s.best_obj)
    it = s.it + 1
    done = _converged(best_obj, s.best_dual, tol) | (it >= max_iter)
    # Retire the oldest cached plane into the aggregate corner, then store
    # the new plane in its slot.
    slot = s.it % cache
    agg = cache
    b_old, b_agg = s.beta[slot], s.beta[agg]
    mass = b_old + b_agg
    mix = jnp.where(mass > 0, b_old / jnp.where(mass > 0, mass, 1), 0)
    corners = s.corners.at[agg].set((1 - mix) * s.corners[agg] + mix * s.corners[slot])
    levels = s.levels.at[agg].set((1 - mix) * s.levels[agg] + mix * s.levels[slot])
    beta = s.beta.at[agg].set(mass).at[slot].set(0)
    corners = corners.at[slot].set(ws)
    levels = levels.at[slot].set(ls)
    # Pegasos / Frank-Wolfe step towards the new plane (line search); only
    # the plane part w - w_hinge moves.
    d = (s.w - w_hinge) - ws
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
    if inner_steps > 0:
        beta, ell, _ = lax.fori_loop(
            0, inner_steps, lambda _, c: _pairwise_step(*c, gram, levels),
            (beta, ell, gram @ beta + (corners @ w_hinge if hinge is not None else 0)),
        )
        w = beta @ corners + w_hinge
    if hinge is not None:
        # One projected-gradient step on the hinge block at the new w.
        alpha, w, w_hinge = _hinge_step(alpha, w, w_hinge, _matvec(X, w, fit_intercept), hinge,
                                        sq_norms, X, fit_intercept)
    dual = jnp.maximum(s.best_dual, ell + jnp.sum(alpha) - 0.5 * jnp.dot(w, w))
    return SolverState(w, ell, best_w, best_obj, dual, corners, levels, beta, gram, it, done,
                       alpha, w_hinge)


def state_result(state: SolverState, tol) -> FitResult:
    """The :class:`FitResult` of a (stopped) fit: its best iterate and bounds."""
    conv = _converged(state.best_obj, state.best_dual, tol)
    return FitResult(state.best_w, state.best_obj, state.best_dual, state.it, conv)


def _check_hinge(hinge, X):
    n = X.shape[0]
    if len(hinge) != 2 or any(jnp.shape(h) != (n,) for h in hinge):
        raise ValueError(
            f"hinge must be a HingeBlock(weights [n], labels [n]) with n = {n} rows of X; "
            f"got shapes {[jnp.shape(h) for h in hinge]}."
        )
    return n


def _check_static(max_iter, cache, inner_steps):
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1; got {max_iter!r}.")
    if int(cache) < 1:
        raise ValueError(f"cache must be >= 1; got {cache!r}.")
    if int(inner_steps) < 0:
        raise ValueError(f"inner_steps must be >= 0; got {inner_steps!r}.")


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
    hinge: HingeBlock | None = None,
) -> FitResult:
    r"""Minimise ``1/2 ||w||^2 + C xi(w)`` by Pegasos-style subgradient steps.

    One ``lax.while_loop`` of :func:`ssvm_step`, from ``w = 0`` until the
    certified relative duality gap is ``<= tol`` or ``max_iter`` oracle calls.

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
        max_iter: static bound on the calls of ``oracle`` (``>= 1``).
        fit_intercept: static; add a regularised constant feature (intercept).
        cache: static number of cached planes (``>= 1``).
        inner_steps: static number of cheap cached-plane steps per oracle call.
        callback: optional host function ``(it, objective, dual) -> None``
            called through ``jax.debug.callback`` at every oracle call
            (progress output). Static.
        hinge: optional :class:`HingeBlock` ``([n], [n])``: the objective
            becomes ``1/2 ||w||^2 + C xi(w) + sum_i u_i max(0, 1 - y_i
            w^T x_i)``, the hinges solved as an ``n``-slack block (module
            docstring); ``objective`` and ``dual`` include it.

    Returns:
        :class:`FitResult`.

    Raises:
        ValueError: ``max_iter < 1``, ``cache < 1`` or ``inner_steps < 0``.

    References:
        Shalev-Shwartz, Singer, Srebro, "Pegasos", ICML 2007;
        Lacoste-Julien, Jaggi, Schmidt, Pletscher, "Block-coordinate
        Frank-Wolfe optimization for structural SVMs", ICML 2013;
        Shah, Kolmogorov, Lampert, "A multi-plane block-coordinate Frank-Wolfe
        algorithm for training structural SVMs", CVPR 2015.
    """
    _check_static(max_iter, cache, inner_steps)
    dim = X.shape[1] + (1 if fit_intercept else 0)
    n_hinge = 0 if hinge is None else _check_hinge(hinge, X)
    step = functools.partial(
        ssvm_step, oracle=oracle, X=X, C=C, tol=tol, max_iter=max_iter,
        fit_intercept=fit_intercept, inner_steps=inner_steps, hinge=hinge,
        sq_norms=None if hinge is None else row_sq_norms(X, fit_intercept),
    )

    def body(s):
        s = step(s)
        if callback is not None:
            jax.debug.callback(callback, s.it, s.best_obj, s.best_dual)
        return s

    state = lax.while_loop(lambda s: ~s.done, body, init_state(dim, X.dtype, cache, n_hinge))
    return state_result(state, tol)


class _Queue(NamedTuple):
    slots: SolverState  # [B] batched states
    pos: jax.Array  # [B] int32 problem of each slot; M = idle
    next: jax.Array  # [] int32 next problem to load
    out: FitResult  # [M] results


def fit_ssvm_queue(
    oracle: Callable,
    X,
    problems: Any,
    C,
    *,
    tol=1e-4,
    max_iter: int = 2000,
    batch_size: int = 16,
    num_problems=None,
    fit_intercept: bool = False,
    cache: int = 32,
    inner_steps: int = 32,
    callback: Callable | None = None,
    hinge: Callable | None = None,
) -> FitResult:
    r"""``M`` fits of :func:`fit_ssvm` in one ``lax.while_loop`` over ``batch_size`` slots.

    A work queue ("continuous batching"): each loop iteration is one
    :func:`ssvm_step` ``vmap``-ed over the slots; a slot whose fit stops
    writes its :class:`FitResult` and loads the next problem (in the order of
    ``problems``) from ``w = 0``. The loop ends when every problem has
    stopped. Each fit is the same sequence of iterates as :func:`fit_ssvm`
    alone (up to float rounding of batched products); the cost is about
    ``sum(iterations) / batch_size`` batched steps instead of ``max`` per
    batch for a ``vmap`` of whole fits. Put long fits (large ``C``) first:
    the loop ends with the slots draining.

    Args:
        oracle: static ``(problem, scores [n]) -> MostViolated``, where
            ``problem`` is one entry of ``problems`` (e.g. label and training
            masks, indices into arrays the oracle closes over).
        X: ``[n, d]`` float array or BCOO matrix, shared by all problems.
        problems: pytree of arrays with a leading axis ``[M]``.
        C: ``[M]`` float trade-offs ``> 0``.
        tol: ``[]`` relative duality gap of every fit.
        max_iter: static bound on the oracle calls of each fit.
        batch_size: static number of slots ``B`` (``>= 1``; capped at ``M``).
        num_problems: ``[]`` int (traced), only the first ``num_problems``
            problems are fitted (the rest is padding: results all zero,
            ``converged`` False). Default ``M``.
        fit_intercept, cache, inner_steps: static, as in :func:`fit_ssvm`.
        callback: optional static host function ``(n_stopped) -> None``,
            called through ``jax.debug.callback`` with the number of fits
            that stopped in a loop iteration (when it is ``> 0``).
        hinge: optional static ``problem -> HingeBlock`` (per-sample hinge
            terms of each fit, as in :func:`fit_ssvm`).

    Returns:
        :class:`FitResult` with a leading ``[M]`` axis, in problem order.

    Raises:
        ValueError: ``batch_size < 1``, ``C`` not ``[M]``, or the errors of
            :func:`fit_ssvm`.
    """
    _check_static(max_iter, cache, inner_steps)
    C = jnp.asarray(C, X.dtype)
    M = C.shape[0] if C.ndim == 1 else -1
    for leaf in jax.tree_util.tree_leaves(problems):
        if leaf.shape[:1] != (M,):
            raise ValueError(
                f"every leaf of problems and C must have the leading axis [M]; got C "
                f"{C.shape} and a leaf of shape {leaf.shape}."
            )
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size!r}.")
    B = min(int(batch_size), M)
    num = jnp.asarray(M if num_problems is None else num_problems, jnp.int32)
    dim = X.shape[1] + (1 if fit_intercept else 0)
    n_hinge = 0 if hinge is None else X.shape[0]
    sq_norms = None if hinge is None else row_sq_norms(X, fit_intercept)
    fresh = jax.tree_util.tree_map(
        lambda a: jnp.broadcast_to(a, (B,) + a.shape),
        init_state(dim, X.dtype, cache, n_hinge),
    )

    def step(s, prob, c):
        return ssvm_step(
            s, lambda scores: oracle(prob, scores), X, c, tol=tol, max_iter=max_iter,
            fit_intercept=fit_intercept, inner_steps=inner_steps,
            hinge=None if hinge is None else hinge(prob), sq_norms=sq_norms,
        )

    def body(q):
        idx = jnp.minimum(q.pos, M - 1)
        prob = jax.tree_util.tree_map(lambda a: a[idx], problems)
        slots = jax.vmap(step)(q.slots, prob, C[idx])
        stopped = slots.done & (q.pos < M)
        res = jax.vmap(state_result, in_axes=(0, None))(slots, tol)
        dest = jnp.where(stopped, q.pos, M)
        out = jax.tree_util.tree_map(
            lambda o, r: o.at[dest].set(r, mode="drop"), q.out, res
        )
        # Refill the stopped slots with the next problems, in order.
        new = q.next + jnp.cumsum(stopped) - 1
        pos = jnp.where(stopped, jnp.where(new < num, new, M), q.pos)
        slots = jax.tree_util.tree_map(
            lambda f, s: jnp.where(stopped.reshape((B,) + (1,) * (s.ndim - 1)), f, s),
            fresh, slots,
        )
        n_stopped = jnp.sum(stopped, dtype=jnp.int32)
        if callback is not None:
            lax.cond(
                n_stopped > 0,
                lambda k: jax.debug.callback(callback, k),
                lambda k: None,
                n_stopped,
            )
        return _Queue(slots, pos.astype(jnp.int32), q.next + n_stopped, out)

    first = jnp.arange(B, dtype=jnp.int32)
    empty = FitResult(
        w=jnp.zeros((M, dim), X.dtype),
        objective=jnp.zeros((M,), X.dtype),
        dual=jnp.zeros((M,), X.dtype),
        num_steps=jnp.zeros((M,), jnp.int32),
        converged=jnp.zeros((M,), bool),
    )
    q0 = _Queue(fresh, jnp.where(first < num, first, M), jnp.asarray(B, jnp.int32), empty)
    q = lax.while_loop(lambda q: jnp.any(q.pos < M), body, q0)
    return q.out


def fit_ssvm_many(
    oracle: Callable,
    X,
    problems: Any,
    C,
    *,
    tol=1e-4,
    max_iter: int = 2000,
    batch_size: int = 16,
    devices: tuple | None = None,
    fit_intercept: bool = False,
    cache: int = 32,
    inner_steps: int = 32,
    callback: Callable | None = None,
    hinge: Callable | None = None,
) -> FitResult:
    r"""``M`` independent fits in one compiled call: work queues, one per device.

    The problems are ordered by decreasing ``C`` (the iterations of a fit
    grow with ``C``: long fits first, so the queues end with short ones),
    dealt round-robin to ``devices`` and run by :func:`fit_ssvm_queue` on
    each device (``jax.shard_map``; every device has its own queue of
    ``batch_size`` slots, no communication). On a CPU, ``k`` devices are ``k``
    cores: start JAX with ``jax.config.update("jax_num_cpu_devices", k)``
    (before the first computation) to use them.

    Args:
        oracle, X, problems, C, tol, max_iter, fit_intercept, cache,
            inner_steps, callback, hinge: as in :func:`fit_ssvm_queue`.
        batch_size: static number of slots per device.
        devices: static tuple of devices to shard the problems over; ``None``
            or one device runs a single queue on the default device.

    Returns:
        :class:`FitResult` with a leading ``[M]`` axis, in problem order.

    Raises:
        ValueError: as :func:`fit_ssvm_queue`.
    """
    C = jnp.asarray(C, X.dtype)
    if C.ndim != 1 or C.shape[0] < 1:
        raise ValueError(f"C must be a non-empty [M] array; got shape {C.shape}.")
    M = C.shape[0]
    order = jnp.argsort(-C, stable=True).astype(jnp.int32)
    kw = dict(tol=tol, max_iter=max_iter, fit_intercept=fit_intercept, cache=cache,
              inner_steps=inner_steps, callback=callback, hinge=hinge)
    D = 1 if devices is None else min(len(devices), M)  # no idle devices
    if D <= 1:
        res = fit_ssvm_queue(
            oracle, X, jax.tree_util.tree_map(lambda a: a[order], problems), C[order],
            batch_size=batch_size, **kw,
        )
        return jax.tree_util.tree_map(lambda r: jnp.zeros_like(r).at[order].set(r), res)
    from jax.sharding import Mesh, PartitionSpec

    per = -(-M // D)  # problems per device (the last ones padding)
    slot = jnp.arange(per * D, dtype=jnp.int32)
    deal = jnp.where(slot < M, order[jnp.minimum(slot, M - 1)], 0)
    deal = deal.reshape(per, D).T  # [D, per]: device d gets order[d], order[d + D], ...
    count = jnp.sum((slot < M).reshape(per, D), axis=0).astype(jnp.int32)  # [D]
    local_problems = jax.tree_util.tree_map(lambda a: a[deal], problems)

    def local(probs, c, num, X):
        res = fit_ssvm_queue(
            oracle, X, jax.tree_util.tree_map(lambda a: a[0], probs), c[0],
            batch_size=batch_size, num_problems=num[0], **kw,
        )
        return jax.tree_util.tree_map(lambda r: r[None], res)

    spec = PartitionSpec("devices")
    # X is an explicit replicated argument (not a closed-over constant).
    res = jax.shard_map(
        local, mesh=Mesh(np.asarray(devices[:D]), ("devices",)),
        in_specs=(spec, spec, spec, PartitionSpec()), out_specs=spec, check_vma=False,
    )(local_problems, C[deal], count, X)
    dest = jnp.where(slot.reshape(per, D).T < M, deal, M).reshape(-1)
    return jax.tree_util.tree_map(
        lambda r: jnp.zeros((M,) + r.shape[2:], r.dtype)
        .at[dest].set(r.reshape((-1,) + r.shape[2:]), mode="drop"),
        res,
    )
