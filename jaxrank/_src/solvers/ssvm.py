r"""The structured SVM solver: one single-fit driver and one batched driver.

Written once against the structured-model interface (:mod:`jaxrank._src.types`):
a model supplies a feature map ``S = scores(w, data)`` (linear in ``w``), an
optional loss-augmented inference oracle and optional per-sample hinge terms.
The solver never sees ``X``: the plane of an output is the transpose of the
feature map applied to the oracle's ``coef`` (``jax.vjp``), so dense, BCOO,
candidate bags and pairwise features work alike.

Problem (eq. (3) of Mohapatra et al. 2014 in its general form)::

    min_w  F(w) = 1/2 ||w||^2 + C xi(w) + sum_i u_i max(0, 1 - y_i z_i^T w)
    xi(w) = max_y [Delta(y) - w^T a_y],   a_y = J^T coef_y

**1-slack part.** Pegasos (Shalev-Shwartz et al. 2007) steps ``w <- w -
eta (w - C a_y)`` towards the plane of the oracle's output; here ``eta`` is
chosen by exact line search on the dual of the 1-slack problem (the
Frank-Wolfe view, Lacoste-Julien et al. 2013), which keeps a dual lower bound
``D`` for free::

    D = ell + sum_i alpha_i - 1/2 ||w||^2,
    w = sum_y beta_y C a_y + sum_i alpha_i y_i z_i,   ell = sum_y beta_y C Delta(y)

with ``beta`` in the simplex. Besides the plane of the current step the
solver keeps ``cache`` recent planes (older ones merged into one aggregate
corner) and takes ``inner_steps`` cheap pairwise (away/toward) line-searched
steps among them between two oracle calls (multi-plane Frank-Wolfe, Shah et
al. 2015), in weight space with an incremental Gram matrix.

**Hinge block.** The per-sample hinges are an ``n``-slack block with dual
variables ``alpha_i`` in ``[0, u_i]``, updated every iteration by dual
coordinate ascent (Hsieh et al. 2008; liblinear's ``-s 3`` loop with
shrinking, a fresh random order every pass, at most ``model.hinge_visits * m``
coordinate visits; :mod:`jaxrank._src.solvers.dcd`, native code on CPU, XLA loops
elsewhere); every step is an exact maximisation of ``D`` along one
coordinate, so ``D`` never decreases. A model with hinge terms and no oracle
(the binary SVM) is liblinear's problem, with a certified gap.

**Sign constraints.** A model may constrain a slice of the weights to be
non-positive (``model.nonpositive = (start, stop)``: ``w[start:stop] <= 0``,
e.g. the pairwise weights of HOB-SVM, which keep its score supermodular).
Their multipliers ``nu >= 0`` enter the dual as ``w = sum_y beta_y C a_y +
sum_i alpha_i y_i z_i - nu``; after every iteration ``nu`` is set to its
exact maximiser (``w[J] = min(0, .)``), so every iterate is feasible and ``D``
stays a lower bound. The plane steps of such a model take ``nu`` at its
maximiser all along their segment: with ``z = w + nu`` the dual is ``ell +
sum_i alpha_i - 1/2 ||Pi(z)||^2`` (``Pi`` clamps ``z[J]`` to ``<= 0``), a
concave function whose exact line search is a root of a piecewise-linear
derivative, found by bisection (``_projected_line_search``). Each round on
the cached planes is then a projected pairwise step, O(cache * dim) instead of
O(cache), and an active-set Newton step on the piece of the dual where the
clamped set is fixed (``_newton_step_projected``, O(cache^2 * dim)); these
rounds are taken while ``(cache + 1) * inner_steps * dim <= 2**25`` (above
it, ``nu`` is held fixed during a step and re-set after it). A step
judged with ``nu`` held fixed is too short whenever it pushes ``w[J]`` above
0 (HOAP-SVM on Cora, C = 5, eta = 1: relative gap of the last CCCP step
3.6e-4 after 3,000 iterations with ``nu`` fixed, converged (1e-4) with it
re-optimised).

**Certificate.** ``F(w_best) - D >= F(w_best) - min F``: the fit stops when
``F(w_best) - D <= tol * F(w_best)`` (relative duality gap) or after
``max_iter`` iterations, and ``converged`` says which.

:func:`fit` runs one fit as one ``lax.while_loop`` of :func:`step`;
:func:`fit_many` runs ``M`` fits as work queues (``batch_size`` ``vmap``-ed
slots, each refilled with the next problem as soon as its fit stops) sharded
over devices.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jax import lax

from jaxrank._src import native
from jaxrank._src.solvers import dcd
from jaxrank._src.types import HingeTerms


class FitResult(NamedTuple):
    """Result of :func:`fit` (arrays; a leading ``[M]`` axis from :func:`fit_many`).

    Attributes:
        w: ``[dim]`` weights (with an :class:`Intercept` feature map, the
            last entry is the intercept).
        objective: ``[]`` primal objective ``F(w)`` at the returned ``w``.
        dual: ``[]`` best dual lower bound on ``min F``.
        num_steps: ``[]`` int32 solver iterations (calls of the oracle).
        converged: ``[]`` bool, ``objective - dual <= tol * objective``.
    """

    w: jax.Array
    objective: jax.Array
    dual: jax.Array
    num_steps: jax.Array
    converged: jax.Array


class SolverState(NamedTuple):
    """State of one fit between two iterations (see :func:`step`).

    Attributes:
        w: ``[dim]`` current iterate.
        ell: ``[]`` ``beta @ levels`` (linear part of the dual).
        best_w: ``[dim]`` iterate with the lowest primal objective so far.
        best_obj: ``[]`` that objective (``inf`` before the first call).
        best_dual: ``[]`` best dual value so far (a lower bound on ``min F``).
        corners: ``[cache + 1, dim]`` cached planes ``C a_y``; the last row is
            the aggregate of retired planes.
        levels: ``[cache + 1]`` their offsets ``C Delta(y)``.
        beta: ``[cache + 1]`` convex weights of the corners.
        gram: ``[cache + 1, cache + 1]`` ``corners @ corners.T``.
        it: ``[]`` int32 iterations so far.
        done: ``[]`` bool, the fit has stopped (converged or ``max_iter``).
        alpha: ``[m]`` dual variables of the hinge block (``[0]`` without).
        w_other: ``[dim]`` the part of ``w`` that is not the plane
            combination: ``sum_i alpha_i y_i z_i - nu``.
        nu: ``[dim]`` multipliers ``>= 0`` of the sign constraints
            ``w[start:stop] <= 0`` of ``model.nonpositive`` (zeros without).
        active: the shrinking state of the hinge block's dual coordinate
            ascent (:class:`jaxrank._src.solvers.dcd.ActiveSet`, ``[m]`` mask).
        pg_tol: ``[]`` liblinear's pass tolerance of the hinge block; lowered
            10x whenever a call met it before the duality gap met ``tol``
            (not below 1e-6 for models with an oracle, whose hinge block is
            also restarted from all coordinates active at every call).
        born: ``[cache + 1]`` int32 iteration at which each cached plane was
            stored (``-1``: empty; a new plane takes the oldest slot of
            weight 0).
        theta: ``[]`` weight of ``best_w`` in the next query point
            ``theta best_w + (1 - theta) w`` (0 after a mispriced query;
            larger after a query that found no better point).
        search: the ``aux`` of the last oracle call of a model whose oracle
            is a warm-started local search (``model.search_start(problem)``
            is not ``None``; :mod:`jaxrank._src.types`), the start of the next
            call's search; ``None`` for every other model.
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
    w_other: jax.Array
    nu: jax.Array
    active: Any
    pg_tol: jax.Array
    born: jax.Array
    theta: jax.Array
    search: Any = None


def init_state(dim: int, dtype, cache: int = 32, n_hinge: int = 0,
               search: Any = None) -> SolverState:
    """The state before the first iteration: ``w = 0``, empty plane cache.

    Args:
        dim: static number of weights.
        dtype: float dtype of the weights.
        cache: static number of cached planes (``>= 1``).
        n_hinge: static number of hinge terms ``m`` (0 without a hinge block).
        search: ``model.search_start(problem)`` (a pytree of arrays) for a
            model whose oracle is a warm-started local search, else ``None``;
            it fixes the shapes of :attr:`SolverState.search` (the first
            iteration starts from ``model.search_start`` of its own problem).

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
        w_other=zeros,
        nu=zeros,
        active=dcd.all_active(n_hinge),
        pg_tol=jnp.asarray(1.0, dtype),
        born=jnp.full((cache + 1,), -1, jnp.int32),
        theta=jnp.asarray(0, dtype),
        search=search,
    )


# ---------------------------------------------------------------------------
# Pieces of one iteration.
# ---------------------------------------------------------------------------


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




# The oracle is called at ``theta w_best + (1 - theta) w`` (``w`` the dual
# iterate): the stabilised ("in-out") query point of cutting-plane methods.
# ``theta`` is _QUERY_SMOOTHING_NEAR after a query that found no better point
# (a null step: the next query moves closer to the best iterate) and
# _QUERY_SMOOTHING after one that did.
_QUERY_SMOOTHING = 0.5
_QUERY_SMOOTHING_NEAR = 0.8

# A query whose iteration raised the dual by less than this fraction of the
# gap counts as mispriced: the next one is at the dual iterate.
_MISPRICED = 1e-3

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


# The plane cache grows with the number of weights (an optimal dual point
# needs at most dim + 1 planes, Caratheodory) up to this many planes, within
# this many bytes of float32 planes per fit.
_AUTO_CACHE_MAX = 128
_AUTO_CACHE_BYTES = 2 ** 25


def plane_cache_size(cache: int, dim: int) -> int:
    """Planes the solver caches for a model with ``cache`` planes and ``dim`` weights.

    ``model.cache`` is a floor: below ``_AUTO_CACHE_MAX`` planes the cache
    grows to ``dim + 2`` (room for the support of an optimal dual point, at
    most ``dim + 1`` planes), while ``(cache + 1) * dim`` float32 planes fit
    in ``_AUTO_CACHE_BYTES``. A cache smaller than the support merges planes
    in use into the aggregate corner, which stalls the dual bound.

    Args:
        cache: the model's ``cache`` (``>= 1``).
        dim: number of weights.

    Returns:
        int ``>= cache``.
    """
    dim = max(int(dim), 1)
    grow = min(dim + 2, _AUTO_CACHE_MAX, _AUTO_CACHE_BYTES // (4 * dim) - 1)
    return max(int(cache), grow)


def _retired_slot(beta, born):
    """The cache slot for a new plane: the oldest unused plane, else the lightest.

    Args:
        beta: ``[cache]`` convex weights of the cached planes (the aggregate
            corner excluded).
        born: ``[cache]`` int32 iteration at which each plane was stored
            (``-1``: empty).

    Returns:
        ``[]`` int32 slot. A plane with ``beta = 0`` is dropped without loss;
        only when every plane is in use is the lightest one merged into the
        aggregate corner (which restricts the dual least).
    """
    unused = beta <= 0
    oldest_unused = jnp.argmin(jnp.where(unused, born, jnp.iinfo(jnp.int32).max))
    return jnp.where(jnp.any(unused), oldest_unused, jnp.argmin(beta)).astype(jnp.int32)


def _fw_gap(beta, viol):
    """Frank-Wolfe gap ``max_t viol_t - beta . viol`` of the cached-plane dual."""
    return jnp.max(viol) - jnp.dot(beta, viol)


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


def _support_sizes(k):
    return [m for m in _SUPPORT_SIZES if m < k] + [k]


def _size_branch(n_on, sizes):
    return jnp.sum(n_on > jnp.asarray(sizes[:-1], jnp.int32)) if len(sizes) > 1 else 0


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
    above 0 is judged as if ``nu`` stayed fixed, and is too short (an AP-SVM
    fit with one active constraint: 156 iterations against 51; module
    docstring for HOAP-SVM). O(cache * dim) per step.
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


def _tree_vdot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a),
                                               jax.tree_util.tree_leaves(b)))


def _hinge_margins(h: HingeTerms, w):
    """``[m]`` ``z_i^T w`` (with the constant feature ``bias``)."""
    d = h.rows.shape[1]
    s = h.rows @ w[:d]
    if h.bias:
        s = s + h.bias * w[d]
    return s


def _hinge_objective(h: HingeTerms, w):
    if w.dtype == jnp.float32:
        # The hinge block's own row kernel (native CSR / dense loops where
        # built): on sparse rows about 7x faster than XLA's gather + segment
        # sum (Reuters money-fx, 340k entries: 0.2 vs 1.6 ms per call).
        m = dcd.row_dots(hinge_rows(h), w)
    else:
        m = _hinge_margins(h, w)
    return jnp.sum(h.upper * jnp.maximum(0, 1 - h.labels * m))


def design_rows(design, bias=0.0):
    """The :class:`jaxrank._src.solvers.dcd.HingeRows` of a :class:`Design`'s rows (no copy of
    float32 data; CSR offsets reused), with the constant feature ``bias``."""
    X = design.X
    bias = jnp.asarray(bias, jnp.float32)
    d = jnp.asarray(design.shape[1], jnp.int32)
    if design.sparse:
        return dcd.HingeRows(None, design.indptr, X.indices[:, 1].astype(jnp.int32),
                             X.data.astype(jnp.float32), bias, d)
    return dcd.HingeRows(X.astype(jnp.float32), None, None, None, bias, d)


def hinge_rows(h: HingeTerms):
    """The :class:`jaxrank._src.solvers.dcd.HingeRows` of hinge terms (no copy of the data)."""
    return design_rows(h.rows, h.bias)


def _hinge_sq_norms(h: HingeTerms):
    return dcd.sq_norms(hinge_rows(h))


# Passes of one hinge-block call are bounded by its visit budget; this static
# bound only sizes the kernel's loop.
_MAX_PASSES = 10_000


# Smallest pass tolerance of the hinge block of a model that also has an
# oracle (AP-SVM-APPX): below it float32 projected gradients are rounding
# noise and the block stalls (bench/results/appx_defaults.md, findings).
_PG_TOL_FLOOR = 1e-6


def _converged(best_obj, best_dual, tol):
    ok = best_obj - best_dual <= tol * jnp.abs(best_obj)
    return ok & jnp.isfinite(best_obj)


def step(state: SolverState, model, data, problem, C, *, tol, max_iter: int,
         sq_norms=None, key=None, w0=None) -> SolverState:
    """One iteration of the solver: one call of loss-augmented inference.

    Evaluates ``F`` at ``state.w`` (the oracle gives the most-violated output
    ``y``, its plane ``(C a_y, C Delta(y))`` and the slack; the hinge terms
    their sum), keeps the best iterate, sets ``done`` if the certified relative
    gap ``(F(w_best) - D) / F(w_best)`` is ``<= tol`` or ``max_iter``
    iterations were made, then takes the Pegasos / Frank-Wolfe step towards
    the new plane with exact line search, ``model.inner_steps`` pairwise steps
    among the cached planes, and a call of dual coordinate ascent on the hinge
    block (at most ``model.hinge_visits * m`` visits), and raises the dual
    bound ``D``. On a state that had already stopped (``state.done``: a slot
    of a batch that runs on until its last fit stops) the QP over the
    cached planes is skipped.
    Pure and shape-static: ``vmap`` it over states, problems and ``C``.

    Args:
        state: :class:`SolverState` (from :func:`init_state` or this function).
        model: a structured model (static; see :mod:`jaxrank._src.types`).
        data: the model's data (e.g. a :class:`jaxrank.models.Design`).
        problem: pytree of arrays of this fit (labels, masks, ...).
        C: ``[]`` float trade-off ``> 0``.
        tol: ``[]`` relative duality gap at which the fit stops.
        max_iter: static bound on the iterations of the fit.
        sq_norms: ``[m]`` squared row norms of the hinge terms (computed here
            if ``None``).
        key: PRNG key of the visiting orders (only with hinge terms;
            default ``jax.random.key(0)``).
        w0: optional ``[dim]`` warm start. At the first iteration
            (``state.it == 0``) the objective and the oracle are evaluated at
            ``w0`` (projected onto ``model.nonpositive``'s constraint) instead
            of at ``state.w``: ``w0`` becomes the best iterate so far and its
            plane the first cached plane; the dual state still starts from
            the empty cache, so the bound ``D`` stays certified.

    Returns:
        The next :class:`SolverState` (``it`` increased by one).

    References:
        Shalev-Shwartz et al., ICML 2007 (Pegasos); Lacoste-Julien et al.,
        ICML 2013 (Frank-Wolfe view, line search); Shah et al., CVPR 2015
        (multi-plane cache); Hsieh et al., ICML 2008 (dual coordinate descent).
    """
    s = state
    dtype = s.w.dtype
    C = jnp.asarray(C, dtype)
    cache = s.levels.shape[0] - 1
    hinge = model.hinge_terms(data, problem, C)
    has_oracle = model.oracle is not None
    bounds = getattr(model, "nonpositive", None)
    # Plane steps on the projected dual (sign constraints, small enough dim).
    # Without hinge terms and sign constraints, w_other stays 0.
    planes_only = hinge is None and bounds is None
    projected = bounds is not None and (
        (cache + 1) * int(model.inner_steps) * s.w.shape[0] <= _PROJECTED_MAX_WORK)
    # The point where F and the oracle are evaluated: between the best
    # iterate and the dual iterate (stabilised cutting planes: any point gives
    # a valid plane), or the warm start at the first iteration.
    query = s.w
    if has_oracle:
        query = s.theta * s.best_w + (1 - s.theta) * s.w
    at = query if w0 is None else jnp.where(s.it == 0, _feasible(model, w0.astype(dtype)), query)
    obj = 0.5 * jnp.dot(at, at)
    w, ell, beta, corners, levels, gram = s.w, s.ell, s.beta, s.corners, s.levels, s.gram
    alpha, w_other, nu = s.alpha, s.w_other, s.nu
    search = s.search
    if has_oracle:
        S, transpose = jax.vjp(lambda v: model.scores(v, data), at)
        start = _search_start(model, problem)
        if start is None:
            r = model.oracle(S, problem)
        else:
            # A warm-started local search: from the problem's own start at the
            # first iteration, then from the previous call's result.
            start = jax.tree_util.tree_map(lambda a, b: jnp.where(s.it == 0, a, b),
                                           start, s.search)
            r = model.oracle(S, problem, start=start)
            search = r.aux
        (a,) = transpose(jax.tree_util.tree_map(lambda c, x: c.astype(x.dtype), r.coef, S))
        a = a.astype(dtype)
        slack = r.hinge if r.hinge is not None else r.loss - _tree_vdot(S, r.coef)
        obj = obj + C * slack
        ws, ls = C * a, C * r.loss.astype(dtype)
    if hinge is not None:
        hinge = HingeTerms(hinge.rows, hinge.bias, hinge.labels.astype(dtype),
                           hinge.upper.astype(dtype))
        obj = obj + _hinge_objective(hinge, at)
    better = obj < s.best_obj
    best_w = jnp.where(better, at, s.best_w)
    best_obj = jnp.where(better, obj, s.best_obj)
    it = s.it + 1
    done = _converged(best_obj, s.best_dual, tol) | (it >= max_iter)
    if has_oracle:
        # Retire the oldest cached plane into the aggregate corner, then store
        # the new plane in its slot.
        born = s.born
        slot = _retired_slot(beta[:cache], born[:cache])
        born = born.at[slot].set(s.it)
        agg = cache
        b_old, b_agg = beta[slot], beta[agg]
        mass = b_old + b_agg
        mix = jnp.where(mass > 0, b_old / jnp.where(mass > 0, mass, 1), 0)
        corners = corners.at[agg].set((1 - mix) * corners[agg] + mix * corners[slot])
        levels = levels.at[agg].set((1 - mix) * levels[agg] + mix * levels[slot])
        beta = beta.at[agg].set(mass).at[slot].set(0)
        corners = corners.at[slot].set(ws)
        levels = levels.at[slot].set(ls)
        # Pegasos / Frank-Wolfe step towards the new plane (line search); only
        # the plane part w - w_other moves.
        d = (w - w_other) - ws
        if not projected:
            gap = jnp.dot(w, d) - ell + ls
            denom = jnp.dot(d, d)
            gamma = jnp.clip(gap / jnp.where(denom > 0, denom, 1), 0, 1)
            gamma = jnp.where(denom > 0, gamma, 0)
        else:
            # The line search with the sign multipliers nu re-optimised along
            # the segment (w = Pi(w + nu) at every point of it).
            gamma = _projected_line_search(w + nu, -d, ls - ell, _bounded_mask(w, bounds),
                                           jnp.asarray(1, dtype))
        w = w - gamma * d
        ell = ell + gamma * (ls - ell)
        beta = (1 - gamma) * beta
        beta = beta.at[slot].add(gamma)
        # Refresh the two changed rows / columns of the Gram matrix.
        n_filled = _filled_rows(born)
        # The projected steps keep the XLA products (float32 sums): their
        # iteration counts follow the rounding of the Gram matrix
        # (``_full_kkt_solve``), and float64 sums made some fits much longer.
        r_slot, r_agg = _cache_rows(n_filled, corners, jnp.stack([corners[slot], corners[agg]]),
                                    native_ok=not projected)
        gram = gram.at[slot].set(r_slot).at[:, slot].set(r_slot)
        gram = gram.at[agg].set(r_agg).at[:, agg].set(r_agg)
        if model.inner_steps > 0:
            eps = _INNER_ACCURACY * jnp.maximum(tol * jnp.abs(best_obj),
                                                best_obj - s.best_dual)
            # A fit that had stopped before this step (a slot of a batch that
            # runs on until its last fit stops) skips the QP: its result is
            # already final.
            eps = jnp.where(s.done, jnp.inf, eps)
            if projected:
                beta, ell = _solve_cached_projected(beta, corners, levels, gram, w_other + nu,
                                                    _bounded_mask(w, bounds),
                                                    model.inner_steps, eps)
            else:
                v_other = (jnp.zeros_like(levels) if planes_only
                           else _cache_matvec(n_filled, corners, w_other))
                beta, ell = _solve_cached(beta, gram, levels, v_other, model.inner_steps, eps)
            w = _cache_combine(n_filled, corners, beta, native_ok=not projected)
            w = w if planes_only else w + w_other
    active, pg_tol = s.active, s.pg_tol
    if hinge is not None:
        # Dual coordinate ascent on the hinge block (liblinear's shrinking
        # loop, at most hinge_visits * m coordinate visits, a fresh random
        # order), with the plane part of w fixed.
        rows = hinge_rows(hinge)
        if sq_norms is None:
            sq_norms = dcd.sq_norms(rows)
        if key is None:
            key = jax.random.key(0)
        m = hinge.labels.shape[0]
        order = dcd.random_order(jax.random.fold_in(key, s.it), m)
        w_plane = w - w_other
        if has_oracle:
            # The planes moved w since the last call: a coordinate shrunk
            # while its hinge was slack may be violated now, so the
            # subproblem starts from a fresh shrinking state (kept across
            # calls only for pure hinge sums, whose subproblem is fixed).
            active = dcd.all_active(m)
        w32, alpha32, active, stats = dcd.dcd_epoch(
            w.astype(jnp.float32), alpha.astype(jnp.float32), rows,
            hinge.labels.astype(jnp.float32), hinge.upper.astype(jnp.float32), order,
            sq_norms=sq_norms.astype(jnp.float32), n_epochs=_MAX_PASSES, active=active,
            pg_tol=pg_tol.astype(jnp.float32),
            max_visits=jnp.asarray(int(model.hinge_visits) * m, jnp.int32))
        w, alpha = w32.astype(dtype), alpha32.astype(dtype)
        lowered = 0.1 * pg_tol
        if has_oracle:  # a moving subproblem: no pass tolerance below float32 resolution
            lowered = jnp.maximum(lowered, jnp.asarray(_PG_TOL_FLOOR, dtype))
        pg_tol = jnp.where(stats.converged, lowered, pg_tol)
        w_other = w - w_plane
    if bounds is not None:
        # Exact maximisation of the dual over the multipliers of w[J] <= 0:
        # nu = max(0, w + nu_old) on J, so w = min(0, .) there (feasible).
        on = _bounded_mask(w, bounds)
        free = w + nu
        nu_new = jnp.where(on, jnp.maximum(free, 0), 0)
        w = free - nu_new
        w_other = w_other + nu - nu_new
        nu = nu_new
    dual_now = ell + jnp.sum(alpha) - 0.5 * jnp.dot(w, w)
    dual = jnp.maximum(s.best_dual, dual_now)
    # Smoothed queries while they pay, closer to the best iterate after a
    # null step; a query whose plane closed less than a small fraction of the
    # gap (a "mispriced" query point) is followed by one at the dual iterate
    # itself (Kelley's point), which always cuts.
    smoothing = jnp.where(better, _QUERY_SMOOTHING, _QUERY_SMOOTHING_NEAR)
    theta = jnp.where(dual_now - s.best_dual > _MISPRICED * (best_obj - s.best_dual),
                      smoothing, 0).astype(dtype)
    return SolverState(w, ell, best_w, best_obj, dual, corners, levels, beta, gram, it, done,
                       alpha, w_other, nu, active, pg_tol, born if has_oracle else s.born,
                       theta if has_oracle else s.theta, search)


def _feasible(model, w):
    """``w`` projected onto the sign constraints ``w[start:stop] <= 0``, if any."""
    bounds = getattr(model, "nonpositive", None)
    if bounds is None:
        return w
    return jnp.where(_bounded_mask(w, bounds), jnp.minimum(w, 0), w)


def state_result(state: SolverState, tol) -> FitResult:
    """The :class:`FitResult` of a (stopped) fit: its best iterate and bounds."""
    conv = _converged(state.best_obj, state.best_dual, tol)
    return FitResult(state.best_w, state.best_obj, state.best_dual, state.it, conv)


# ---------------------------------------------------------------------------
# Drivers.
# ---------------------------------------------------------------------------


def _check_static(model, max_iter):
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be >= 1; got {max_iter!r}.")
    if int(model.cache) < 1:
        raise ValueError(f"model.cache must be >= 1; got {model.cache!r}.")
    if int(model.inner_steps) < 0:
        raise ValueError(f"model.inner_steps must be >= 0; got {model.inner_steps!r}.")
    if int(getattr(model, "hinge_visits", 1)) < 1:
        raise ValueError(f"model.hinge_visits must be >= 1; got {model.hinge_visits!r}.")


def _hinge_setup(model, data, problem, C, dtype):
    """Size and row norms of the hinge block (``0, None`` without one)."""
    h = model.hinge_terms(data, problem, jnp.asarray(1.0, dtype))
    if h is None:
        if model.oracle is None:
            raise ValueError(
                f"{type(model).__name__} has neither an oracle nor hinge terms: nothing to fit.")
        return 0, None
    return h.labels.shape[-1], _hinge_sq_norms(h)


def fit(
    model,
    data,
    problem,
    *,
    C,
    tol=1e-4,
    max_iter: int = 2000,
    callback: Callable | None = None,
    seed: int = 0,
    w0=None,
) -> FitResult:
    r"""Minimise ``F(w)`` (module docstring) for one problem: one ``lax.while_loop``.

    From ``w = 0`` (or the warm start ``w0``) until the certified relative
    duality gap is ``<= tol`` or ``max_iter`` iterations.

    Args:
        model: a structured model (static; frozen dataclass with ``scores``,
            ``oracle``, ``hinge_terms``, ``dim``, ``cache``, ``inner_steps``;
            see :mod:`jaxrank._src.types` and the README's worked example).
        data: the model's data, shared by every fit of a batch (e.g. a
            :class:`jaxrank.models.Design`).
        problem: pytree of arrays of this fit (e.g. labels and ``where``).
        C: scalar ``> 0`` (may be traced; ``vmap`` over it for a grid).
        tol: relative duality gap at which to stop (``>= 0``): when
            ``converged``, ``objective`` is within ``tol`` (relative) of the
            exact optimum.
        max_iter: static bound on the iterations (``>= 1``).
        callback: optional host function ``(it, objective, dual) -> None``
            called through ``jax.debug.callback`` after every iteration
            (progress output). Static.
        seed: static seed of the hinge block's visiting order.
        w0: optional ``[dim]`` float warm start (e.g. the previous step of a
            CCCP loop, or a fit at a nearby ``C``). The first iteration
            evaluates ``F`` and the oracle at ``w0`` (projected onto
            ``model.nonpositive``'s constraint), so the returned objective is
            never above ``F(w0)`` and the first cached plane is ``w0``'s
            most-violated output. The dual starts from the empty cache as
            without ``w0``: the bound and ``converged`` stay certified.

    Returns:
        :class:`FitResult`.

    Raises:
        ValueError: ``max_iter < 1``, bad ``model.cache`` / ``inner_steps``,
            a model with neither an oracle nor hinge terms, ``w0`` not of
            shape ``[dim]``.

    Data-parallel fits: when the design's rows (and optionally the
    problem's per-sample arrays) are a ``jax.Array`` sharded over a mesh
    axis, the same call runs on every device of that mesh: XLA's SPMD
    partitioner splits ``X w`` and ``X^T c`` by rows (the partial planes are
    all-reduced) and gathers the ``[n]`` scores for the inference, which
    runs replicated. Across hosts, start JAX's multi-controller runtime
    (``jax.distributed.initialize``) and build the global array with
    ``jax.make_array_from_process_local_data`` (README, "Data-parallel
    fits"). The result is replicated.

    References:
        Shalev-Shwartz, Singer, Srebro, "Pegasos", ICML 2007;
        Lacoste-Julien, Jaggi, Schmidt, Pletscher, "Block-coordinate
        Frank-Wolfe optimization for structural SVMs", ICML 2013;
        Shah, Kolmogorov, Lampert, CVPR 2015; Hsieh, Chang, Lin, Keerthi,
        Sundararajan, "A dual coordinate descent method for large-scale
        linear SVM", ICML 2008.
    """
    _check_static(model, max_iter)
    dtype = _dtype(data)
    dim = model.dim(data)
    key = jax.random.key(seed)
    m, sq = _hinge_setup(model, data, problem, C, dtype)
    if w0 is not None:
        w0 = _check_w0(w0, (dim,), dtype)
    run = functools.partial(step, model=model, data=data, problem=problem, C=C, tol=tol,
                            max_iter=max_iter, sq_norms=sq, key=key, w0=w0)

    def body(s):
        s = run(s)
        if callback is not None:
            jax.debug.callback(callback, s.it, s.best_obj, s.best_dual)
        return s

    state = lax.while_loop(lambda s: ~s.done, body,
                           init_state(dim, dtype, _cache(model, dim), m,
                                      _search_start(model, problem)))
    return state_result(state, tol)


def _search_start(model, problem):
    """``model.search_start(problem)`` of a model with an oracle, else ``None``.

    The method is optional (:mod:`jaxrank._src.types`): models without it
    have an oracle that is not a warm-started search.
    """
    start = getattr(model, "search_start", None)
    if model.oracle is None or start is None:
        return None
    return start(problem)


def _cache(model, dim):
    """The plane cache of a fit (:func:`plane_cache_size`; as given without an oracle)."""
    if model.oracle is None:
        return int(model.cache)
    return plane_cache_size(model.cache, dim)


def _check_w0(w0, shape, dtype):
    if not jnp.issubdtype(jnp.result_type(w0), jnp.floating):
        raise TypeError(f"w0 must be a float array; got dtype {jnp.result_type(w0)}.")
    if jnp.shape(w0) != shape:
        raise ValueError(f"w0 must have shape {list(shape)}; got {list(jnp.shape(w0))}.")
    return jnp.asarray(w0, dtype)


def _dtype(data):
    leaves = [x for x in jax.tree_util.tree_leaves(data)
              if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.result_type(leaves[0]) if leaves else jnp.float32


class _Queue(NamedTuple):
    slots: SolverState  # [B] batched states
    pos: jax.Array  # [B] int32 problem of each slot; M = idle
    next: jax.Array  # [] int32 next problem to load
    out: FitResult  # [M] results
    restart: jax.Array  # [B] bool: the slot was refilled (start from the fresh state)


def _fit_queue(model, data, problems, C, *, tol, max_iter, batch_size, num_problems,
               callback, seed, w0=None):
    """``M`` fits in one ``lax.while_loop`` over ``batch_size`` slots (one device).

    A queue of one slot runs its fits one after the other (:func:`_fit_in_turn`).
    """
    dtype = _dtype(data)
    C = jnp.asarray(C, dtype)
    M = C.shape[0]
    B = min(int(batch_size), M)
    num = jnp.asarray(M if num_problems is None else num_problems, jnp.int32)
    if B == 1:
        return _fit_in_turn(model, data, problems, C, num, tol=tol, max_iter=max_iter,
                            callback=callback, seed=seed, w0=w0)
    dim = model.dim(data)
    key = jax.random.key(seed)
    first_prob = jax.tree_util.tree_map(lambda a: a[0], problems)
    m, sq = _hinge_setup(model, data, first_prob, C[0], dtype)
    one_fresh = init_state(dim, dtype, _cache(model, dim), m, _search_start(model, first_prob))
    fresh = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), one_fresh)

    def one(s, prob, c, start):
        return step(s, model, data, prob, c, tol=tol, max_iter=max_iter, sq_norms=sq, key=key,
                    w0=start)

    def body(q):
        slots = q.slots
        # Slots refilled by the previous body start their new fit from the
        # fresh state, written into those slots only, before this step reads
        # the plane cache (a select over all slots, or any write after the
        # step's reads of the cache, makes XLA copy every slot's cache at
        # every iteration), one slot at a time (a scatter into all slots at
        # once takes its updates as a full-size broadcast of the fresh state,
        # written anew at every iteration).
        rows = jnp.nonzero(q.restart, size=B, fill_value=0)[0]

        def restart(j, slots):
            return jax.tree_util.tree_map(
                lambda f, s: lax.dynamic_update_index_in_dim(s, f, rows[j], 0), one_fresh, slots)

        slots = lax.fori_loop(0, jnp.sum(q.restart, dtype=jnp.int32), restart, slots)
        idx = jnp.minimum(q.pos, M - 1)
        prob = jax.tree_util.tree_map(lambda a: a[idx], problems)
        slots = jax.vmap(one)(slots, prob, C[idx], None if w0 is None else w0[idx])
        stopped = slots.done & (q.pos < M)
        res = jax.vmap(lambda s: state_result(s, tol))(slots)
        dest = jnp.where(stopped, q.pos, M)
        out = jax.tree_util.tree_map(lambda o, r: o.at[dest].set(r, mode="drop"), q.out, res)
        # Refill the stopped slots with the next problems, in order.
        new = q.next + jnp.cumsum(stopped) - 1
        pos = jnp.where(stopped, jnp.where(new < num, new, M), q.pos)
        n_stopped = jnp.sum(stopped, dtype=jnp.int32)
        if callback is not None:
            lax.cond(n_stopped > 0, lambda k: jax.debug.callback(callback, k),
                     lambda k: None, n_stopped)
        return _Queue(slots, pos.astype(jnp.int32), q.next + n_stopped, out, stopped)

    first = jnp.arange(B, dtype=jnp.int32)
    empty = FitResult(
        w=jnp.zeros((M, dim), dtype),
        objective=jnp.zeros((M,), dtype),
        dual=jnp.zeros((M,), dtype),
        num_steps=jnp.zeros((M,), jnp.int32),
        converged=jnp.zeros((M,), bool),
    )
    q0 = _Queue(fresh, jnp.where(first < num, first, M), jnp.asarray(B, jnp.int32), empty,
                jnp.zeros((B,), bool))
    q = lax.while_loop(lambda q: jnp.any(q.pos < M), body, q0)
    return q.out


def _fit_in_turn(model, data, problems, C, num, *, tol, max_iter, callback, seed, w0):
    """A queue of one slot: the ``M`` fits one after the other, each its own :func:`fit`.

    Each fit is its own ``lax.while_loop`` inside a ``lax.map``, as in a
    loop of single fits; a queue's refill and result write at every
    iteration would copy the slot's state. Problems at or after ``num``
    are not fitted (zero results).
    """
    M = C.shape[0]
    dim = model.dim(data)
    dtype = _dtype(data)
    empty = FitResult(w=jnp.zeros((dim,), dtype), objective=jnp.zeros((), dtype),
                      dual=jnp.zeros((), dtype), num_steps=jnp.zeros((), jnp.int32),
                      converged=jnp.zeros((), bool))

    def one(i):
        def run(_):
            res = fit(model, data, jax.tree_util.tree_map(lambda a: a[i], problems), C=C[i],
                      tol=tol, max_iter=max_iter, seed=seed, w0=None if w0 is None else w0[i])
            res = FitResult(res.w.astype(dtype), res.objective.astype(dtype),
                            res.dual.astype(dtype), res.num_steps.astype(jnp.int32),
                            res.converged.astype(bool))
            if callback is not None:
                jax.debug.callback(callback, jnp.asarray(1, jnp.int32))
            return res

        return lax.cond(i < num, run, lambda _: empty, None)

    return lax.map(one, jnp.arange(M, dtype=jnp.int32))


def fit_many(
    model,
    data,
    problems: Any,
    C,
    *,
    tol=1e-4,
    max_iter: int = 2000,
    batch_size: int = 16,
    devices: tuple | None = None,
    callback: Callable | None = None,
    seed: int = 0,
    w0=None,
) -> FitResult:
    r"""``M`` independent fits of :func:`fit` in one call: work queues, one per device.

    A work queue ("continuous batching"): each loop iteration is one
    :func:`step` ``vmap``-ed over ``batch_size`` slots; a slot whose fit stops
    writes its :class:`FitResult` and loads the next problem from ``w = 0``.
    Each fit is the same sequence of iterates as :func:`fit` alone (up to
    float rounding of batched products); the cost is about ``sum(iterations)
    / batch_size`` batched steps, not ``max`` per batch as for a ``vmap`` of
    whole fits. The problems are ordered by decreasing ``C`` (iterations grow
    with ``C``: long fits first, so the queues end with short ones), dealt
    round-robin to ``devices`` and each device runs its own queue
    (``jax.shard_map``, no communication). On a CPU, ``k`` devices are ``k``
    cores: ``jax.config.update("jax_num_cpu_devices", k)`` before JAX's first
    computation.

    Args:
        model: a structured model (static), as in :func:`fit`.
        data: shared data of every fit (replicated on every device).
        problems: pytree of arrays with a leading axis ``[M]``.
        C: ``[M]`` float trade-offs ``> 0``.
        tol: ``[]`` relative duality gap of every fit.
        max_iter: static bound on the iterations of each fit.
        batch_size: static number of slots per device (``>= 1``; capped at
            the number of problems per device).
        devices: static tuple of devices to shard the problems over; ``None``
            or one device runs a single queue on the default device. A
            tuple of ``D_p`` tuples of ``D_s`` devices (a problems x samples
            grid): the problems are dealt to the ``D_p`` grid rows, and each
            row's queue runs on its ``D_s`` devices with ``data`` sharded
            over them (the caller shards the rows on ``Mesh(grid,
            ("devices", "samples"))``, ``PartitionSpec("samples", None)``;
            XLA partitions the products, the problem axis is manual).
        callback: optional static host function ``(n_stopped) -> None``,
            called through ``jax.debug.callback`` with the number of fits that
            stopped in a loop iteration (when it is ``> 0``).
        seed: static seed of the hinge block's visiting order.
        w0: optional ``[M, dim]`` float warm starts, one per problem (see
            :func:`fit`).

    Returns:
        :class:`FitResult` with a leading ``[M]`` axis, in problem order.

    Raises:
        ValueError: ``C`` not a non-empty ``[M]`` array, a leaf of
            ``problems`` without the leading ``[M]`` axis, ``batch_size < 1``,
            a device grid with more rows than problems,
            ``w0`` not of shape ``[M, dim]``, and the errors of :func:`fit`.
    """
    _check_static(model, max_iter)
    dtype = _dtype(data)
    C = jnp.asarray(C, dtype)
    if C.ndim != 1 or C.shape[0] < 1:
        raise ValueError(f"C must be a non-empty [M] array; got shape {C.shape}.")
    M = C.shape[0]
    for leaf in jax.tree_util.tree_leaves(problems):
        if jnp.shape(leaf)[:1] != (M,):
            raise ValueError(
                f"every leaf of problems must have the leading axis [M] = [{M}] of C; got a "
                f"leaf of shape {jnp.shape(leaf)}.")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size!r}.")
    if w0 is not None:
        w0 = _check_w0(w0, (M, model.dim(data)), dtype)
    order = jnp.argsort(-C, stable=True).astype(jnp.int32)
    kw = dict(tol=tol, max_iter=max_iter, callback=callback, seed=seed)
    grid = None if devices is None else np.asarray(devices, dtype=object)
    if grid is not None and grid.ndim == 2:
        # problems x samples: rows of the grid run separate queues, each row's
        # devices share the (sample-sharded) data of its fits.
        if grid.shape[0] > M:
            raise ValueError(f"a devices grid of {grid.shape[0]} problem rows needs at least "
                             f"as many problems; got M = {M}.")
        D = grid.shape[0]
    else:
        D = 1 if devices is None else min(len(devices), M)  # no idle devices
        grid = None
    if D <= 1 and grid is None:
        res = _fit_queue(model, data, jax.tree_util.tree_map(lambda a: a[order], problems),
                         C[order], batch_size=batch_size, num_problems=None,
                         w0=None if w0 is None else w0[order], **kw)
        return jax.tree_util.tree_map(lambda r: jnp.zeros_like(r).at[order].set(r), res)
    from jax.sharding import Mesh, PartitionSpec

    per = -(-M // D)  # problems per device (the last ones padding)
    slot = jnp.arange(per * D, dtype=jnp.int32)
    deal = jnp.where(slot < M, order[jnp.minimum(slot, M - 1)], 0)
    deal = deal.reshape(per, D).T  # [D, per]: device d gets order[d], order[d + D], ...
    count = jnp.sum((slot < M).reshape(per, D), axis=0).astype(jnp.int32)  # [D]
    local_problems = jax.tree_util.tree_map(lambda a: a[deal], problems)

    def local(probs, c, num, starts, data):
        res = _fit_queue(model, data, jax.tree_util.tree_map(lambda a: a[0], probs), c[0],
                         batch_size=batch_size, num_problems=num[0],
                         w0=None if starts is None else starts[0], **kw)
        return jax.tree_util.tree_map(lambda r: r[None], res)

    spec = PartitionSpec("devices")
    data_spec = jax.tree_util.tree_map(lambda _: PartitionSpec(), data)
    # Only the problem axis is manual; on a grid XLA partitions the samples axis.
    mesh = (Mesh(np.asarray(devices[:D]), ("devices",)) if grid is None
            else Mesh(grid, ("devices", "samples")))
    res = jax.shard_map(
        local, mesh=mesh, in_specs=(spec, spec, spec, spec, data_spec), out_specs=spec,
        axis_names={"devices"}, check_vma=False,
    )(local_problems, C[deal], count, None if w0 is None else w0[deal], data)
    dest = jnp.where(slot.reshape(per, D).T < M, deal, M).reshape(-1)
    return jax.tree_util.tree_map(
        lambda r: jnp.zeros((M,) + r.shape[2:], r.dtype)
        .at[dest].set(r.reshape((-1,) + r.shape[2:]), mode="drop"),
        res,
    )
