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
shrinking, a fresh random order every pass, at most ``solver.hinge_visits * m``
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
0, enough to keep a HOAP-SVM step from converging within ``max_iter``
(``docs/design_notes.md``).

**Certificate.** ``F(w_best) - D >= F(w_best) - min F``: the fit stops when
``F(w_best) - D <= tol * F(w_best)`` (relative duality gap) or after
``max_iter`` iterations, and ``converged`` says which.

:func:`fit` runs one fit as one ``lax.while_loop`` of :func:`step`;
:func:`fit_many` runs ``M`` fits as work queues (``batch_size`` ``vmap``-ed
slots, each refilled with the next problem as soon as its fit stops) sharded
over devices.
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jax import lax

from jaxrank._src.solvers import dcd
from jaxrank._src.solvers.planes import (
    _cache_combine,
    _cache_matvec,
    _cache_rows,
    _filled_rows,
    plane_cache_size,
)
from jaxrank._src.solvers.qp import (
    _INNER_ACCURACY,
    _PROJECTED_MAX_WORK,
    _bounded_mask,
    _projected_line_search,
    _solve_cached,
    _solve_cached_projected,
)
from jaxrank._src.solvers.settings import Solver, as_solver
from jaxrank._src.types import HingeTerms


class FitStatus(enum.IntEnum):
    """Why a fit stopped (:attr:`FitResult.status`; optimistix's ``RESULTS`` in spirit).

    ``CONVERGED``: the certified relative duality gap reached ``tol``;
    ``MAX_ITER``: ``max_iter`` iterations with a finite objective above it;
    ``NONFINITE``: the objective is NaN or infinite (a float32 overflow:
    rescale the features), so no gap can be certified.
    """

    CONVERGED = 0
    MAX_ITER = 1
    NONFINITE = 2

    @property
    def label(self):
        """``"converged"``, ``"max_iter"`` or ``"non-finite"``."""
        return ("converged", "max_iter", "non-finite")[self.value]


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

    @property
    def status(self):
        """``[]`` int32 :class:`FitStatus` code (``[M]`` for batched results).

        A fit stops when it converges or at ``max_iter``; one that did not
        converge is ``NONFINITE`` when its objective is NaN or infinite, else
        ``MAX_ITER``. Works on traced and on host (NumPy) results.
        """
        xp = jnp if isinstance(self.converged, jax.Array) else np
        bad = ~xp.isfinite(xp.asarray(self.objective))
        code = xp.where(xp.asarray(self.converged), FitStatus.CONVERGED.value,
                        xp.where(bad, FitStatus.NONFINITE.value, FitStatus.MAX_ITER.value))
        return code.astype(xp.int32)


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
        # built): on sparse rows faster than XLA's gather + segment sum
        # (docs/design_notes.md).
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


def step(state: SolverState, model, data, problem, C, *, solver: Solver | None = None,
         sq_norms=None, key=None, w0=None) -> SolverState:
    """One iteration of the solver: one call of loss-augmented inference.

    Evaluates ``F`` at ``state.w`` (the oracle gives the most-violated output
    ``y``, its plane ``(C a_y, C Delta(y))`` and the slack; the hinge terms
    their sum), keeps the best iterate, sets ``done`` if the certified relative
    gap ``(F(w_best) - D) / F(w_best)`` is ``<= tol`` or ``max_iter``
    iterations were made, then takes the Pegasos / Frank-Wolfe step towards
    the new plane with exact line search, ``solver.inner_steps`` pairwise steps
    among the cached planes, and a call of dual coordinate ascent on the hinge
    block (at most ``solver.hinge_visits * m`` visits), and raises the dual
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
        solver: :class:`jaxrank.solvers.Solver` (its ``tol`` may be traced;
            ``None``: the defaults), completed by the model's suggestions
            (:meth:`Solver.for_model`).
        sq_norms: ``[m]`` squared row norms of the hinge terms (computed here
            if ``None``).
        key: PRNG key of the visiting orders (only with hinge terms;
            default ``jax.random.key(solver.seed)``).
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
    solver = as_solver(solver).for_model(model)
    tol, max_iter = solver.tol, solver.max_iter
    inner_steps = int(solver.inner_steps)
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
        (cache + 1) * inner_steps * s.w.shape[0] <= _PROJECTED_MAX_WORK)
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
        if inner_steps > 0:
            eps = _INNER_ACCURACY * jnp.maximum(tol * jnp.abs(best_obj),
                                                best_obj - s.best_dual)
            # A fit that had stopped before this step (a slot of a batch that
            # runs on until its last fit stops) skips the QP: its result is
            # already final.
            eps = jnp.where(s.done, jnp.inf, eps)
            if projected:
                beta, ell = _solve_cached_projected(beta, corners, levels, gram, w_other + nu,
                                                    _bounded_mask(w, bounds),
                                                    inner_steps, eps)
            else:
                v_other = (jnp.zeros_like(levels) if planes_only
                           else _cache_matvec(n_filled, corners, w_other))
                beta, ell = _solve_cached(beta, gram, levels, v_other, inner_steps, eps)
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
            key = jax.random.key(solver.seed)
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
            max_visits=jnp.asarray(int(solver.hinge_visits) * m, jnp.int32))
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
    solver: Solver | None = None,
    callback: Callable | None = None,
    w0=None,
) -> FitResult:
    r"""Minimise ``F(w)`` (module docstring) for one problem: one ``lax.while_loop``.

    From ``w = 0`` (or the warm start ``w0``) until the certified relative
    duality gap is ``<= solver.tol`` or ``solver.max_iter`` iterations.

    Args:
        model: a structured model (static; frozen dataclass with ``scores``,
            ``oracle``, ``hinge_terms``, ``dim`` and optionally
            ``solver_defaults``; see :mod:`jaxrank._src.types` and the
            worked example in docs/interface.md).
        data: the model's data, shared by every fit of a batch (e.g. a
            :class:`jaxrank.models.Design`).
        problem: pytree of arrays of this fit (e.g. labels and ``where``).
        C: scalar ``> 0`` (may be traced; ``vmap`` over it for a grid).
        solver: :class:`jaxrank.solvers.Solver`, the stopping rule and the
            solver's tuning (``None``: ``Solver()``); its ``None`` fields
            take the model's suggestions (:meth:`Solver.for_model`). Its
            ``tol`` is traced, the other fields are static.
        callback: optional host function ``(it, objective, dual) -> None``
            called through ``jax.debug.callback`` after every iteration
            (progress output). Static.
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
        TypeError: ``solver`` is not a :class:`Solver` or ``None``, or a
            model that defines the tuning fields itself
            (:meth:`Solver.for_model`).
        ValueError: bad ``model.solver_defaults``, a model with neither an
            oracle nor hinge terms, ``w0`` not of shape ``[dim]``.

    Data-parallel fits: when the design's rows (and optionally the
    problem's per-sample arrays) are a ``jax.Array`` sharded over a mesh
    axis, the same call runs on every device of that mesh: XLA's SPMD
    partitioner splits ``X w`` and ``X^T c`` by rows (the partial planes are
    all-reduced) and gathers the ``[n]`` scores for the inference, which
    runs replicated. Across hosts, start JAX's multi-controller runtime
    (``jax.distributed.initialize``) and build the global array with
    ``jax.make_array_from_process_local_data`` (docs/multi_device.md). The result is replicated.

    References:
        Shalev-Shwartz, Singer, Srebro, "Pegasos", ICML 2007;
        Lacoste-Julien, Jaggi, Schmidt, Pletscher, "Block-coordinate
        Frank-Wolfe optimization for structural SVMs", ICML 2013;
        Shah, Kolmogorov, Lampert, CVPR 2015; Hsieh, Chang, Lin, Keerthi,
        Sundararajan, "A dual coordinate descent method for large-scale
        linear SVM", ICML 2008.
    """
    solver = as_solver(solver).for_model(model)
    dtype = _dtype(data)
    dim = model.dim(data)
    key = jax.random.key(solver.seed)
    m, sq = _hinge_setup(model, data, problem, C, dtype)
    if w0 is not None:
        w0 = _check_w0(w0, (dim,), dtype)
    run = functools.partial(step, model=model, data=data, problem=problem, C=C, solver=solver,
                            sq_norms=sq, key=key, w0=w0)

    def body(s):
        s = run(s)
        if callback is not None:
            jax.debug.callback(callback, s.it, s.best_obj, s.best_dual)
        return s

    state = lax.while_loop(lambda s: ~s.done, body,
                           init_state(dim, dtype, _cache(model, solver, dim), m,
                                      _search_start(model, problem)))
    return state_result(state, solver.tol)


def _search_start(model, problem):
    """``model.search_start(problem)`` of a model with an oracle, else ``None``.

    The method is optional (:mod:`jaxrank._src.types`): models without it
    have an oracle that is not a warm-started search.
    """
    start = getattr(model, "search_start", None)
    if model.oracle is None or start is None:
        return None
    return start(problem)


def _cache(model, solver, dim):
    """The plane cache of a fit (:func:`plane_cache_size`; as given without an oracle).

    ``solver``: a :class:`Solver` completed for ``model`` (:meth:`Solver.for_model`).
    """
    if model.oracle is None:
        return int(solver.cache)
    return plane_cache_size(solver.cache, dim)


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
