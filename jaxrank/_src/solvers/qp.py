"""The cached-plane QP of the 1-slack dual: Newton, projected and interior-point steps."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jax import lax

from jaxrank._src import native
from jaxrank._src.solvers.planes import _size_branch, _support_sizes


def _pairwise_step(beta, ell, v, gram, levels):
    """One pairwise Frank-Wolfe step on the cached corners (exact line search).

    Moves weight from the "away" corner (least violated among those in use) to
    the "toward" corner (most violated); ``gamma`` maximises the dual
    ``ell - 1/2 ||w||^2`` along that segment, clipped to the away weight.
    ``v = corners @ w`` is updated by two columns of ``gram``: O(cache).
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


# The QP over the cached planes is solved until its Frank-Wolfe gap is at most
# this fraction of max(tol * F(w_best), F(w_best) - D).
_INNER_ACCURACY = 0.1


# Ridge of the Newton systems on the support, relative to the largest
# diagonal entry of the Gram matrix (the step itself is an exact line search
# of the true dual, so the ridge only shapes the direction).
_NEWTON_RIDGE = 1e-6


# Where a Newton system's Cholesky factorisation fails (non-finite: G_SS +
# ridge I not positive definite in float32), that round takes its pairwise
# step only and the later rounds of the same solve use this many times the
# ridge, up to _NEWTON_RIDGE_MAX of the largest diagonal entry.
_NEWTON_RIDGE_GROWTH = 100.0


_NEWTON_RIDGE_MAX = 1e-2


def _fw_gap(beta, viol):
    """Frank-Wolfe gap ``max_t viol_t - beta . viol`` of the cached-plane dual."""
    return jnp.max(viol) - jnp.dot(beta, viol)


def _support_system(gram, rhs, on, ridge, m):
    """The support's system gathered at size ``m``: ``(A, b, idx, sel)``.

    ``A = G_SS + ridge I`` on the first ``|S|`` rows and columns (the
    identity elsewhere), ``b = rhs_S`` (zero elsewhere); ``idx`` maps them
    back to the cache and ``sel`` marks the rows of ``S``.
    """
    k = gram.shape[0]
    dtype = gram.dtype
    n_on = jnp.sum(on.astype(jnp.int32))
    pos = jnp.cumsum(on.astype(jnp.int32)) - 1
    idx = jnp.zeros((m,), jnp.int32).at[jnp.where(on, pos, m)].set(
        jnp.arange(k, dtype=jnp.int32), mode="drop")
    sel = jnp.arange(m) < n_on
    A = jnp.where(sel[:, None] & sel[None, :], gram[idx[:, None], idx[None, :]], 0)
    A = A + jnp.diag(jnp.where(sel, ridge, 1).astype(dtype))
    return A, jnp.where(sel, rhs[idx], 0), idx, sel


def _bordered_solve(A, b, ones):
    """``x`` of the KKT system ``A x + mu ones = b``, ``ones . x = 1``.

    ``A`` (``[m, m]``, symmetric positive definite up to rounding) is
    factorised by Cholesky and the border eliminated: ``x = x_b - mu x_1``
    with ``A x_b = b``, ``A x_1 = ones``, ``mu = (ones . x_b - 1) / (ones .
    x_1)``.

    Args:
        A: ``[m, m]`` matrix; ``b``: ``[m]``; ``ones``: ``[m]`` 0/1 border.

    Returns:
        ``[m]`` ``x``, non-finite where the factorisation fails (``A`` not
        positive definite in floating point).
    """
    xs = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(A), True), jnp.stack([b, ones], -1))
    x_b, x_1 = xs[:, 0], xs[:, 1]
    return x_b - (jnp.dot(ones, x_b) - 1) / jnp.dot(ones, x_1) * x_1


def _scatter_support(xs, idx, sel, k):
    return jnp.zeros((k,), xs.dtype).at[jnp.where(sel, idx, k)].set(xs[:idx.shape[0]],
                                                                    mode="drop")


def _sequential_under_vmap(fn):
    """``fn`` whose batched form solves the batch's elements one after the other.

    Under ``vmap`` the wrapped function runs as ``lax.map`` of ``fn`` over the
    batch instead of as one batched program. For the inner QP solves over
    the cached planes this matters twice: each fit of a batch then takes its
    own number of rounds (a batched ``lax.while_loop`` runs every fit for as
    many rounds as the slowest one needs), and its Newton systems are
    unbatched LAPACK calls (a batched LAPACK call inside a
    ``lax.while_loop`` deadlocks XLA's CPU thread pool in jaxlib 0.10, which
    would hang :func:`fit_many` and ``sweep``).

    Args:
        fn: a function of arrays only (bind static arguments first).

    Returns:
        The wrapped function (same signature and results).
    """
    wrapped = jax.custom_batching.custom_vmap(fn)

    @wrapped.def_vmap
    def rule(axis_size, in_batched, *args):
        args = tuple(a if batched else jnp.broadcast_to(a, (axis_size,) + jnp.shape(a))
                     for a, batched in zip(args, in_batched))
        if axis_size == 1:
            out = jax.tree_util.tree_map(lambda o: o[None], wrapped(*[a[0] for a in args]))
        else:
            out = lax.map(lambda xs: wrapped(*xs), args)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return wrapped


@_sequential_under_vmap
def _support_kkt_solve(gram, rhs, on, ridge):
    """Newton point of the simplex-constrained QP on a support set.

    Solves the KKT system ``(G_SS + ridge I) x_S + mu 1 = rhs_S``, ``sum(x_S)
    = 1`` of the support ``S = on`` (size ``|S| + 1``), gathered onto ``S``
    and solved at the smallest of ``_SUPPORT_SIZES`` (else the cache's size)
    that holds it by Cholesky (:func:`_bordered_solve`; a dense factorisation
    costs O(size^3)). Sequential under ``vmap``
    (:func:`_sequential_under_vmap`). Where the factorisation fails the
    result is not finite; :func:`_solve_cached_rounds` then raises the ridge.

    Args:
        gram: ``[k, k]`` Gram matrix ``G``.
        rhs: ``[k]`` right-hand side.
        on: ``[k]`` bool, the support ``S``.
        ridge: ``[]`` ridge ``> 0`` on the diagonal of ``G_SS``.

    Returns:
        ``[k]`` ``x``, zero off ``S`` (non-finite where the factorisation
        fails, e.g. an empty ``S`` or ``G_SS + ridge I`` not positive definite
        in floating point).
    """
    k = gram.shape[0]
    sizes = _support_sizes(k)

    def at_size(m):
        def solve(_):
            A, b, idx, sel = _support_system(gram, rhs, on, ridge, m)
            return _scatter_support(_bordered_solve(A, b, sel.astype(A.dtype)), idx, sel, k)
        return solve

    branch = _size_branch(jnp.sum(on.astype(jnp.int32)), sizes)
    return lax.switch(branch, [at_size(m) for m in sizes], None)


@_sequential_under_vmap
def _full_kkt_solve(gram, rhs, on, ridge):
    """:func:`_support_kkt_solve` at the cache's size (identity rows off ``S``).

    The projected Newton steps (:func:`_newton_step_projected`) use it: on
    the piecewise dual of a sign-constrained model the rounding of the
    float32 solve steers which piece the steps follow, and this form gave
    the fewest iterations (``docs/solver.md``).
    """
    k = gram.shape[0]
    A = jnp.where(on[:, None] & on[None, :], gram, 0) + jnp.diag(jnp.where(on, ridge, 1))
    ones = on.astype(gram.dtype)
    kkt = jnp.block([[A, ones[:, None]], [ones[None, :], jnp.zeros((1, 1), gram.dtype)]])
    b = jnp.concatenate([jnp.where(on, rhs, 0), jnp.ones((1,), gram.dtype)])
    return jnp.linalg.solve(kkt, b)[:k]


def _newton_direction(beta, viol, gram, solve=_support_kkt_solve, g_beta=None, ridge=None):
    """Active-set Newton direction of the cached-plane QP on the support of ``beta``.

    The dual restricted to the cached planes is the simplex-constrained QP
    ``max_beta beta . b - 1/2 beta^T G beta`` (``G = gram``, ``viol = b - G
    beta``). On the support ``S = {beta > 0}`` the Newton point ``x``
    maximises the quadratic on the affine hull ``sum(x_S) = 1`` (the KKT
    system of size ``|S| + 1``, with a small ridge where ``G_SS`` is
    singular; :func:`_support_kkt_solve`).

    Args:
        beta: ``[k]`` point of the simplex.
        viol: ``[k]`` gradient ``b - G beta`` at ``beta``.
        gram: ``[k, k]`` Gram matrix of the cached planes.
        solve: the KKT solve (:func:`_support_kkt_solve` or
            :func:`_full_kkt_solve`).
        g_beta: optional ``[k]`` ``G beta`` (computed if ``None``).
        ridge: optional ``[]`` ridge of the system (default
            :func:`_newton_ridge`).

    Returns:
        ``(d [k], t_max [], ok [])``: the direction ``x - beta`` (zero off
        ``S``, summing to 0; zero where the solve failed), the largest step
        that keeps ``beta + t d >= 0`` (the ratio test of an active-set
        method; ``0`` when ``d = 0``), and whether the solve gave a finite
        Newton point.
    """
    on = beta > 0
    # Newton point of the local model viol.(x - beta) - 1/2 (x - beta)^T G (x - beta)
    # on sum(x_S) = 1, i.e. G_SS x_S + mu 1 = (viol + G beta)_S.
    x = solve(gram, viol + (gram @ beta if g_beta is None else g_beta), on,
              _newton_ridge(gram) if ridge is None else ridge)
    return _direction_to(beta, x, on) + (jnp.all(jnp.isfinite(x)),)


def _newton_ridge(gram):
    scale = jnp.max(jnp.abs(jnp.diagonal(gram)))
    return _NEWTON_RIDGE * jnp.where(scale > 0, scale, 1)


def _direction_to(beta, x, on):
    """``(d, t_max)`` of :func:`_newton_direction` towards the Newton point ``x``."""
    ones = on.astype(beta.dtype)
    d = jnp.where(on, x - beta, 0)
    d = d - ones * (jnp.sum(d) / jnp.maximum(jnp.sum(ones), 1))  # stay on sum(beta) = 1
    d = jnp.where(jnp.isfinite(d), d, 0)
    dec = d < 0
    t_max = jnp.min(jnp.where(dec, beta / jnp.where(dec, -d, 1), jnp.inf))
    return d, jnp.where(jnp.isfinite(t_max), t_max, 0)


def _simplex_move(beta, d, t, t_max):
    """``beta + t d`` on the simplex; at ``t = t_max`` the blocking weight is set to 0."""
    dec = d < 0
    ratio = jnp.where(dec, beta / jnp.where(dec, -d, 1), jnp.inf)
    new = jnp.where(dec & (ratio <= t) & (t >= t_max), 0, jnp.maximum(beta + t * d, 0))
    total = jnp.sum(new)
    return jnp.where(total > 0, new / jnp.where(total > 0, total, 1), beta)


def _newton_step(beta, viol, gram, g_beta=None, ridge=None):
    """One active-set Newton step of the cached-plane QP (:func:`_newton_direction`).

    Moves towards the Newton point by exact line search of the true dual,
    stopped at the first weight that reaches 0 (that plane leaves the
    support). The dual never decreases.

    Args:
        beta: ``[k]`` point of the simplex; ``viol``: ``[k]`` the gradient
            ``b - G beta``; ``gram``: ``[k, k]`` ``G``.
        g_beta: optional ``[k]`` ``G beta`` (computed if ``None``).
        ridge: optional ``[]`` ridge of the Newton system.

    Returns:
        ``(beta [k], ok [])``: the next point of the simplex (``beta``
        itself where the Newton system's factorisation failed) and whether
        it did not.
    """
    d, t_max, ok = _newton_direction(beta, viol, gram, g_beta=g_beta, ridge=ridge)
    d, t_max = jnp.where(ok, d, 0), jnp.where(ok, t_max, 0)
    slope = jnp.dot(viol, d)
    curv = jnp.dot(d, gram @ d)
    t_ls = jnp.where(curv > 0, slope / jnp.where(curv > 0, curv, 1), jnp.inf)
    t = jnp.where(slope > 0, jnp.minimum(t_ls, t_max), 0)
    moved = _simplex_move(beta, d, jnp.where(jnp.isfinite(t), t, 0), t_max)
    return jnp.where(ok, moved, beta), ok


@functools.lru_cache(maxsize=None)
def _with_rounds(rounds, max_steps):
    """``rounds`` with its static ``max_steps`` fixed, sequential under ``vmap``."""

    def solve(*args):
        return rounds(*args, max_steps=max_steps)

    return _sequential_under_vmap(solve)


def _solve_cached_projected(beta, corners, levels, gram, z_other, on, max_steps, eps):
    """:func:`_solve_cached` for a model with sign constraints ``w[J] <= 0``.

    The dual with the multipliers of the constraints maximised out is
    ``beta . levels - 1/2 ||Pi(z)||^2``, ``z = beta @ corners + z_other``
    (``Pi`` clamps ``z[J]`` to ``<= 0``): piecewise quadratic. Each round is
    a projected pairwise step (:func:`_pairwise_step_projected`, exact line
    search; it brings the most violated plane into the support) and a Newton
    step on the current piece (:func:`_newton_step_projected`), O(cache^2 *
    dim) per round, until the Frank-Wolfe gap is ``<= eps`` or ``max_steps``
    rounds.

    Args:
        beta: ``[k]`` convex weights of the cached planes.
        corners: ``[k, dim]`` the planes.
        levels: ``[k]`` their offsets.
        gram: ``[k, k]`` their Gram matrix.
        z_other: ``[dim]`` the fixed part of ``z`` (``w_other + nu``).
        on: ``[dim]`` bool, the sign-constrained entries.
        max_steps: static bound on the rounds.
        eps: ``[]`` target Frank-Wolfe gap.

    Returns:
        ``(beta, ell)``.
    """
    return _with_rounds(_solve_cached_projected_rounds, max_steps)(
        beta, corners, levels, gram, z_other, on, eps)


def _solve_cached_projected_rounds(beta, corners, levels, gram, z_other, on, eps, *,
                                   max_steps):
    """Rounds of :func:`_solve_cached_projected` (``max_steps`` bound)."""

    def cond(c):
        k, beta, _, z = c
        w = jnp.where(on, jnp.minimum(z, 0), z)
        return (k < max_steps) & (_fw_gap(beta, levels - corners @ w) > eps)

    def body(c):
        k, beta, ell, z = c
        beta, ell, z = _pairwise_step_projected(beta, ell, z, corners, levels, on)
        beta, z = _newton_step_projected(beta, z, corners, levels, gram, on)
        return k + 1, beta, ell, z

    z0 = beta @ corners + z_other
    _, beta, _, _ = lax.while_loop(cond, body, (jnp.asarray(0, jnp.int32), beta,
                                                jnp.zeros((), beta.dtype), z0))
    return beta, jnp.dot(beta, levels)


def _solve_cached(beta, gram, levels, v_other, max_steps, eps):
    """Solve the dual over the cached planes to Frank-Wolfe gap ``<= eps``.

    Each round is one pairwise Frank-Wolfe step (it brings the most violated
    plane into the support; :func:`_pairwise_step`) and one active-set
    Newton step on the support (:func:`_newton_step`), at most
    ``max_steps`` rounds (:func:`_solve_cached_rounds`). On CPU, when the
    native library is loaded, the same algorithm runs as the native kernel
    ``qp.c`` in float64 (one FFI call per solve, the problems of a batch in
    parallel on XLA's CPU thread pool); elsewhere as the XLA loop in the
    dtype of the inputs.

    Args:
        beta: ``[k]`` convex weights of the cached planes.
        gram: ``[k, k]`` their Gram matrix.
        levels: ``[k]`` their offsets ``C Delta``.
        v_other: ``[k]`` ``corners @ w_other`` (the fixed part of ``w``).
        max_steps: static bound on the rounds.
        eps: ``[]`` target Frank-Wolfe gap (the restricted dual is then
            within ``eps`` of its maximum).

    Returns:
        ``(beta, ell)``: the new weights and ``ell = beta . levels``.
    """
    beta = native.dispatch(functools.partial(_native_cached_qp, max_steps=max_steps),
                           _with_rounds(_solve_cached_rounds, max_steps),
                           beta, gram, levels, v_other, eps.astype(beta.dtype))
    return beta, jnp.dot(beta, levels)


def _native_cached_qp(beta, gram, levels, v_other, eps, *, max_steps):
    """:func:`_solve_cached_rounds` as the native kernel (``qp.c``)."""
    out = jax.ShapeDtypeStruct(beta.shape, beta.dtype)
    return native.call("jaxrank_cached_qp", out, beta, gram, levels, v_other, eps,
                       max_steps=np.int64(max_steps),
                       ip_steps=np.int64(_INTERIOR_POINT_STEPS),
                       ridge=np.float64(_NEWTON_RIDGE),
                       ridge_growth=np.float64(_NEWTON_RIDGE_GROWTH),
                       ridge_max=np.float64(_NEWTON_RIDGE_MAX))


def _solve_cached_rounds(beta, gram, levels, v_other, eps, *, max_steps):
    """Rounds of :func:`_solve_cached` (``max_steps`` bound): the new ``beta``.

    When the rounds stop above ``eps`` with every cached plane (the aggregate
    included) in the support, where the Gram block is singular or
    ill-conditioned and each active-set round is a one-plane pivot, the QP
    is solved again from their point by interior-point steps
    (:func:`_interior_point_qp`), whose result is kept if its dual is
    higher.
    """

    # The carry holds v = G beta + v_other (one product with G per round) and
    # the ridge of the Newton systems (raised after a failed factorisation).
    def cond(c):
        k, beta, v, _ = c
        return (k < max_steps) & (_fw_gap(beta, levels - v) > eps)

    def body(c):
        k, beta, v, ridge = c
        beta, _, v = _pairwise_step(beta, jnp.zeros((), beta.dtype), v, gram, levels)
        beta, ok = _newton_step(beta, levels - v, gram, v - v_other, ridge)
        ridge = jnp.where(ok, ridge, jnp.minimum(_NEWTON_RIDGE_GROWTH * ridge, ridge_max))
        return k + 1, beta, gram @ beta + v_other, ridge

    ridge = _newton_ridge(gram)
    ridge_max = ridge * (_NEWTON_RIDGE_MAX / _NEWTON_RIDGE)
    _, beta, v, _ = lax.while_loop(cond, body, (jnp.asarray(0, jnp.int32), beta,
                                                gram @ beta + v_other, ridge))
    if _INTERIOR_POINT_STEPS > 0:
        lin = levels - v_other

        def polish(beta):
            x = _interior_point_qp(gram, lin, beta, eps, _INTERIOR_POINT_STEPS)
            better = _qp_value(gram, lin, x) > _qp_value(gram, lin, beta)
            return jnp.where(better, x, beta)

        stalled = (_fw_gap(beta, levels - v) > eps) & jnp.all(beta > 0)
        beta = lax.cond(stalled, polish, lambda b: b, beta)
    return beta


# At most this many interior-point steps polish a cached-plane QP whose
# support fills the cache and that the active-set rounds left above its
# target (0: none).
_INTERIOR_POINT_STEPS = 20


def _qp_value(gram, lin, beta):
    """``lin . beta - 1/2 beta^T G beta``: the cached-plane dual up to a constant."""
    return jnp.dot(lin, beta) - 0.5 * jnp.dot(beta, gram @ beta)


def _interior_point_qp(gram, lin, beta0, eps, max_steps):
    """Maximise ``lin . beta - 1/2 beta^T G beta`` over the simplex by interior-point steps.

    A primal-dual path-following method with Mehrotra's predictor-corrector
    (Nocedal & Wright, Numerical Optimization, 2nd ed., Alg. 16.4, for the
    convex QP ``min 1/2 b^T G b - lin . b``, ``b >= 0``, ``sum(b) = 1``,
    multipliers ``s >= 0`` of ``b >= 0`` and ``y`` of the sum). Each step
    factorises ``G + diag(s / b)`` (Cholesky, O(k^3)) and eliminates ``y``
    by its Schur complement. Unlike active-set steps, its rate does not
    depend on the support: a singular ``G`` (more cached planes than weights
    span) costs no extra steps. It starts from ``beta0`` mixed half-and-half
    with the uniform point (strictly inside) and ``s`` from the gradient
    there (dual feasible), and stops when the Frank-Wolfe gap of the
    normalised iterate is ``<= eps``, after ``max_steps`` steps, or at a step
    whose result would leave the interior or is not finite (the last
    interior iterate is kept).

    Args:
        gram: ``[k, k]`` Gram matrix ``G`` (positive semi-definite).
        lin: ``[k]`` linear term.
        beta0: ``[k]`` point of the simplex to start from.
        eps: ``[]`` target Frank-Wolfe gap.
        max_steps: static bound on the steps.

    Returns:
        ``[k]`` point of the simplex (every entry ``> 0``).
    """
    k = gram.shape[0]
    dtype = gram.dtype
    ones = jnp.ones((k,), dtype)

    def normalised(b):
        b = jnp.maximum(b, 0)
        return b / jnp.sum(b)

    def fw_gap(b):
        b = normalised(b)
        return _fw_gap(b, lin - gram @ b)

    def step_length(x, dx):
        neg = dx < 0
        return jnp.minimum(1, jnp.min(jnp.where(neg, -x / jnp.where(neg, dx, -1), jnp.inf)))

    def cond(c):
        i, b, _, _, ok = c
        return (i < max_steps) & ok & (fw_gap(b) > eps)

    def body(c):
        i, b, y, s, _ = c
        r_dual = gram @ b - lin - y - s
        r_sum = jnp.sum(b) - 1
        mu = jnp.dot(b, s) / k
        chol = jnp.linalg.cholesky(gram + jnp.diag(s / b))
        m_ones = jax.scipy.linalg.cho_solve((chol, True), ones)

        def direction(r_comp):
            # (G + S/B) db - dy 1 = -r_dual - r_comp / b,  sum(db) = -r_sum,
            # ds = -(r_comp + s db) / b.
            m_r = jax.scipy.linalg.cho_solve((chol, True), -r_dual - r_comp / b)
            dy = (-r_sum - jnp.sum(m_r)) / jnp.sum(m_ones)
            db = m_r + dy * m_ones
            return db, dy, -(r_comp + s * db) / b

        db, dy, ds = direction(b * s)  # affine-scaling predictor
        t = jnp.minimum(step_length(b, db), step_length(s, ds))
        sigma = (jnp.dot(b + t * db, s + t * ds) / k / mu) ** 3
        db, dy, ds = direction(b * s + db * ds - sigma * mu)  # corrector
        t = 0.99 * jnp.minimum(step_length(b, db), step_length(s, ds))
        nb, ny, ns = b + t * db, y + t * dy, s + t * ds
        ok = (jnp.all(jnp.isfinite(nb)) & jnp.all(nb > 0) & jnp.all(ns > 0)
              & jnp.isfinite(ny))
        return (i + 1, jnp.where(ok, nb, b), jnp.where(ok, ny, y), jnp.where(ok, ns, s), ok)

    b = 0.5 * beta0 + 0.5 / k
    g = gram @ b - lin
    y = jnp.min(g) - jnp.maximum(jnp.max(g) - jnp.min(g), jnp.finfo(dtype).tiny)
    _, b, _, _, _ = lax.while_loop(
        cond, body, (jnp.asarray(0, jnp.int32), b, y, g - y, jnp.asarray(True)))
    return normalised(b)


# Bisection steps of the projected line search (each halves the bracket; a
# Newton step on the last piece then makes the step exact).
_LINE_SEARCH_BISECTIONS = 32


# Largest (cache + 1) * inner_steps * dim for which the plane steps of a
# sign-constrained model take the projected dual (the pairwise part of a round
# costs O(cache * dim) instead of O(cache); its Newton part
# O(cache^2 * dim)). Above it (e.g. sparse tf-idf features) the cheaper steps
# with ``nu`` held fixed are taken (docs/solver.md).
_PROJECTED_MAX_WORK = 2 ** 25


def _bounded_mask(w, bounds):
    """``[dim]`` bool: the entries ``start <= k < stop`` kept ``<= 0`` (``bounds``)."""
    start, stop = bounds
    k = jnp.arange(w.shape[-1])
    return (k >= start) & (k < stop)


def _projected_line_search(z, e, c0, on, gmax):
    """Exact line search of the dual with the sign multipliers at their optimum.

    With ``nu`` maximised out, the dual along ``z + gamma e`` is ``phi(gamma)
    = c0 gamma - 1/2 ||Pi(z + gamma e)||^2 + const``, where ``Pi`` clamps the
    entries of ``on`` to ``min(0, .)`` (the projection onto ``w[J] <= 0``).
    ``phi`` is concave and its derivative ``c0 - <Pi(z + gamma e), e>`` is
    continuous, piecewise linear and non-increasing, so its root in ``[0,
    gmax]`` is bracketed by bisection and then solved exactly on the last
    linear piece.

    Args:
        z: ``[dim]`` unprojected point ``w + nu``.
        e: ``[dim]`` direction.
        c0: ``[]`` slope of the linear part of the dual along ``e``.
        on: ``[dim]`` bool, the sign-constrained entries.
        gmax: ``[]`` largest step (``>= 0``).

    Returns:
        ``[]`` the maximiser ``gamma`` in ``[0, gmax]``.
    """

    def slope(g):
        x = z + g * e
        return c0 - jnp.dot(jnp.where(on, jnp.minimum(x, 0), x), e)

    def halve(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        up = slope(mid) > 0
        return jnp.where(up, mid, lo), jnp.where(up, hi, mid)

    lo, hi = lax.fori_loop(0, _LINE_SEARCH_BISECTIONS, halve,
                           (jnp.zeros_like(gmax), gmax))
    # On [lo, hi] the active set is (almost surely) fixed: one Newton step.
    x = z + 0.5 * (lo + hi) * e
    curv = jnp.sum(jnp.where(on & (x > 0), 0, e * e))
    g = lo + slope(lo) / jnp.where(curv > 0, curv, 1)
    g = jnp.where(curv > 0, jnp.clip(g, lo, hi), hi)
    g = jnp.where(slope(jnp.zeros_like(gmax)) <= 0, 0, g)
    return jnp.where(slope(gmax) >= 0, gmax, g)


def _pairwise_step_projected(beta, ell, z, corners, levels, on):
    """:func:`_pairwise_step` for a model with sign constraints.

    The dual is taken with the multipliers ``nu`` of ``w[J] <= 0`` at their
    optimum for every ``beta`` (so ``w = Pi(z)``, ``z = w + nu``): the
    violations use the projected ``w`` and the step's line search is
    :func:`_projected_line_search`. Without this, a step that pushes ``w[J]``
    above 0 is judged as if ``nu`` stayed fixed, and is too short (more
    iterations to converge; ``docs/design_notes.md`` and the module docstring
    of :mod:`jaxrank._src.solvers.ssvm`). O(cache * dim) per step.
    """
    w = jnp.where(on, jnp.minimum(z, 0), z)
    viol = levels - corners @ w
    t = jnp.argmax(viol)
    a = jnp.argmin(jnp.where(beta > 0, viol, jnp.inf))
    e = corners[t] - corners[a]
    gamma = _projected_line_search(z, e, levels[t] - levels[a], on, beta[a])
    ell = ell + gamma * (levels[t] - levels[a])
    beta = beta.at[a].add(-gamma).at[t].add(gamma)
    return beta, ell, z + gamma * e


def _newton_step_projected(beta, z, corners, levels, gram, on):
    """:func:`_newton_step` for a model with sign constraints ``w[J] <= 0``.

    On the piece of the dual where the clamped set ``A = {j in J: z_j > 0}``
    is fixed, ``w = Pi(z)`` zeroes ``z_A``, so the dual is the quadratic with
    Gram matrix ``G - C_A C_A^T`` (``C_A`` the cached planes' columns of
    ``A``); the active-set Newton direction of that quadratic
    (:func:`_newton_direction`) is then followed by the exact line search of
    the piecewise dual (:func:`_projected_line_search`), which may cross into
    other pieces, stopped by the ratio test. The dual never decreases.
    O(cache^2 * dim) per step.

    Args:
        beta: ``[k]`` convex weights of the cached planes.
        z: ``[dim]`` the unprojected point ``beta @ corners + z_other``.
        corners: ``[k, dim]`` the planes; ``levels``: ``[k]`` their offsets.
        gram: ``[k, k]`` their Gram matrix.
        on: ``[dim]`` bool, the sign-constrained entries.

    Returns:
        ``(beta, z)`` after the step.
    """
    w = jnp.where(on, jnp.minimum(z, 0), z)
    viol = levels - corners @ w
    clamped = jnp.where(on & (z > 0), corners, 0)
    d, t_max, _ = _newton_direction(beta, viol, gram - clamped @ clamped.T, _full_kkt_solve)
    e = d @ corners
    t = _projected_line_search(z, e, jnp.dot(d, levels), on, t_max)
    t = jnp.where(jnp.isfinite(t), t, 0)
    return _simplex_move(beta, d, t, t_max), z + t * e
