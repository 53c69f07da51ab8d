"""CCCP (Yuille & Rangarajan 2003), the outer loop of the latent and high-order models."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src.solvers import ssvm
from jaxrank._src.solvers.run import resolve_devices, solve

# CCCP (the latent models, HOAPSVM) applies its stopping rule only after a convex
# step that reached ``tol``: that step certifies the point returned. A step that
# stopped at ``max_iter`` where the rule would stop is continued instead, warm-started
# at its best iterate, at most this many times per run.
CCCP_RESOLVES = 1


def defer_uncertified_stop(stop, converged, resolves):
    """CCCP's stop, deferred after a convex step that did not reach ``tol``.

    Args:
        stop: ``[K]`` bool, runs whose stopping rule fired at this step.
        converged: ``[K]`` bool, whether this step of each run reached ``tol``.
        resolves: ``[K]`` int64, the deferrals each run has had; updated in place.

    Returns:
        ``[K]`` bool: the runs that stop. A run whose rule fired after an
        unconverged step continues instead while it has had fewer than
        ``CCCP_RESOLVES`` deferrals (see the comment above).
    """
    again = stop & ~converged & (resolves < CCCP_RESOLVES)
    resolves += again
    return stop & ~again


def latent_objective(model, data, problem, w, C):
    """The solver's objective ``F(w)`` of ``model`` with the latent variables of ``problem``.

    ``1/2 ||w||^2 + C * slack(oracle) + sum hinge terms``, exactly as
    :func:`jaxrank.solvers.fit` evaluates it at its first iteration (a
    warm-started search, :meth:`LatentSSVMModel.search_start`, runs here
    from its fixed starts only). With the imputation of
    ``model.impute`` at the same ``w`` this is the non-convex objective (of
    (8) for :class:`LatentAPModel`, by Proposition 2).

    Args:
        model: a latent model (static).
        data: :class:`BagData`.
        problem: :class:`LatentProblem` (no batch axis).
        w: ``[dim]`` weights.
        C: ``[]`` trade-off.

    Returns:
        ``[]`` float objective.
    """
    dtype = w.dtype
    C = jnp.asarray(C, dtype)
    obj = 0.5 * jnp.dot(w, w)
    S = model.scores(w, data)
    if model.oracle is not None:
        r = model.oracle(S, problem)
        slack = r.hinge if r.hinge is not None else r.loss - jnp.vdot(S, r.coef)
        obj = obj + C * slack
    h = model.hinge_terms(data, problem, C)
    if h is not None:
        d = h.rows.shape[1]
        m = h.rows @ w[:d]
        if h.bias:
            m = m + h.bias * w[d]
        obj = obj + jnp.sum(h.upper * jnp.maximum(0, 1 - h.labels * m))
    return obj


@functools.partial(jax.jit, static_argnames=("model",))
def cccp_update(model, data, problems, W, C):
    """Step 3 of Algorithm 1 for ``K`` fits: impute at ``W`` and evaluate the objective.

    Args:
        model: a model with an ``impute(S, problem) -> problem`` hook (static).
        data: the model's data.
        problems: the model's problems with a leading ``[K]`` axis.
        W: ``[K, dim]`` weights.
        C: ``[K]`` trade-offs.

    Returns:
        ``(problems [K], objective [K], changed [K] bool)``: the re-imputed
        problems, the non-convex objective at ``W`` (with that imputation) and
        whether any latent variable changed (any leaf of the problem).
    """

    def one(p, w, c):
        new = model.impute(model.scores(w, data), p)
        obj = latent_objective(model, data, new, w, c)
        diffs = jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda a, b: jnp.any(a != b),
                                                                 new, p))
        changed = functools.reduce(jnp.logical_or, diffs, jnp.zeros((), bool))
        return new, obj, changed

    return jax.vmap(one)(problems, W, C)


def centroid_weights(data, positive, where, dim):
    """``[M, dim]`` difference of the class means of the bag-mean features.

    ``w_m = mean_{positive bags} xbar_b - mean_{negative bags} xbar_b`` over the
    bags of ``where[m]``, with ``xbar_b`` the mean of bag ``b``'s allowed
    candidates (:attr:`BagData.allowed`): a start for CCCP that ranks bags
    like a nearest-centroid classifier of their means (weights past ``d``,
    e.g. an intercept, are 0). One product ``X^T G``.

    Args:
        data: :class:`BagData`.
        positive, where: ``[M, B]`` bool.
        dim: number of weights (``>= d``).

    Returns:
        ``[M, dim]`` float32 NumPy array.
    """
    allowed = np.asarray(data.allowed)
    layout = np.asarray(data.layout)
    pos = np.asarray(positive, bool) & np.asarray(where, bool)
    neg = ~np.asarray(positive, bool) & np.asarray(where, bool)
    size = np.maximum(allowed.sum(axis=1), 1)  # [B]
    n_pos = np.maximum(pos.sum(axis=1, keepdims=True), 1)
    n_neg = np.maximum(neg.sum(axis=1, keepdims=True), 1)
    bag_w = (pos / n_pos - neg / n_neg) / size[None, :]  # [M, B]
    n = data.X.shape[0]
    G = np.zeros((n + 1, pos.shape[0]), np.float32)
    rows = np.where(allowed, layout, n)  # [B, T]; padding -> the dropped row n
    np.add.at(G, rows.reshape(-1), np.repeat(bag_w.T, rows.shape[1], axis=0))
    d = data.X.shape[1]
    W = np.zeros((pos.shape[0], dim), np.float32)
    W[:, :d] = np.asarray(data.X.rmatvec(jnp.asarray(G[:n]))).T
    return W


def _take(tree, idx):
    return jax.tree_util.tree_map(lambda a: a[idx], tree)


def _select(mask, a, b):
    """Leafwise ``where(mask[k], a[k], b[k])`` over the leading axis ``[K]``."""
    return jax.tree_util.tree_map(
        lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y), a, b)


class CCCPTrace(NamedTuple):
    """The course of CCCP for ``K`` runs (host arrays; :func:`cccp`).

    Attributes:
        w: ``[K, dim]`` the iterate of lowest objective of each run.
        objective: ``[K]`` float64, that objective (the non-convex one).
        dual: ``[K]`` float64, the dual bound of the convex step that produced ``w``.
        num_steps: ``[K]`` int, solver iterations summed over the convex steps.
        n_iter: ``[K]`` int, CCCP iterations (convex steps) made.
        objectives: ``[K, T]`` float64, the objective after each step (NaN past ``n_iter``).
        gaps: ``[K, T]`` float64, the certified duality gap of each step (NaN past ``n_iter``).
        last: :class:`jaxrank.solvers.FitResult` ``[K]`` of each run's last convex step.
        last_step_converged: ``[K]`` bool, that step reached ``tol``.
        hit_max_iter: ``[K]`` bool, the run stopped at ``cccp_max_iter``, not by its rule.
    """

    w: np.ndarray
    objective: np.ndarray
    dual: np.ndarray
    num_steps: np.ndarray
    n_iter: np.ndarray
    objectives: np.ndarray
    gaps: np.ndarray
    last: Any
    last_step_converged: np.ndarray
    hit_max_iter: np.ndarray


def cccp(model, data, problems, C, w0, *, solve, cccp_max_iter, cccp_tol, initial_objective=None,
         stop_unchanged=True, schedule=None, verbose=None):
    """CCCP (Yuille & Rangarajan 2003) for ``K`` runs: the one outer loop of jaxrank.

    Each iteration solves the convex problems of all active runs in one call of
    ``solve`` (warm-started at each run's current iterate; a run that has
    stopped gets an empty problem, ``where`` all False), then one compiled call
    of :func:`cccp_update` imputes the latent variables at the new iterates
    (``model.impute``) and evaluates the non-convex objective there
    (:func:`latent_objective`). A run stops when its objective decreased by less
    than ``cccp_tol`` (relative) or, with ``stop_unchanged``, its imputation did
    not change, but only after a convex step that reached ``tol``
    (:func:`defer_uncertified_stop`), or at ``cccp_max_iter``.

    Args:
        model: a structured model with ``impute(S, problem) -> problem`` (static).
        data: the model's data.
        problems: ``[K]`` problems, imputed for the first convex step.
        C: ``[K]`` float trade-offs.
        w0: ``[K, dim]`` float32 warm start of the first convex step.
        solve: ``solve(problems [K], C [K], w0 [K, dim]) ->`` :class:`jaxrank.solvers.FitResult`
            ``[K]``, the convex steps.
        cccp_max_iter: maximum convex steps per run (``>= 1``).
        cccp_tol: relative decrease of the objective below which a run stops (``>= 0``).
        initial_objective: optional ``[K]`` objective at ``w0`` (the first step's
            decrease is taken from it; ``None``: the first step never stops a run
            by the decrease rule).
        stop_unchanged: stop a run whose imputation did not change.
        schedule: optional ``schedule(t, W [K, dim], problems [K]) -> (problems, may_stop)``:
            the problems of convex step ``t`` (from 0) and whether the stopping rule
            may fire after it (e.g. self-paced learning, which grows the training set);
            the objective is always that of ``problems``.
        verbose: ``None`` or the name to print progress under.

    Returns:
        :class:`CCCPTrace`.

    References:
        Yuille & Rangarajan, "The concave-convex procedure", Neural Computation 2003;
        Yu & Joachims, ICML 2009 (latent structural SVM); Behl et al., CVPR 2014,
        Algorithm 1; Dokania et al., ECCV 2014, Algorithm 1.
    """
    K = int(C.shape[0])
    T_out = int(cccp_max_iter)
    dim = int(np.shape(w0)[1])
    hist = np.full((K, T_out), np.nan)
    gaps = np.full((K, T_out), np.nan)
    active = np.ones(K, bool)
    best_obj = (np.full(K, np.inf) if initial_objective is None
                else np.asarray(initial_objective, np.float64).copy())
    best_w = np.asarray(w0, np.float32).copy()
    best_dual = np.zeros(K)
    steps = np.zeros(K, np.int64)
    conv = np.ones(K, bool)
    n_outer = np.zeros(K, np.int64)
    hit_max = np.zeros(K, bool)
    resolves = np.zeros(K, np.int64)
    last = None
    probs = problems
    w_prev = np.asarray(w0, np.float32).reshape(K, dim)
    for t in range(T_out):
        run = probs
        if not active.all():
            run = probs._replace(where=jnp.where(
                jnp.asarray(active).reshape((K,) + (1,) * (probs.where.ndim - 1)),
                probs.where, False))
        may_stop = True
        if schedule is not None:
            run, may_stop = schedule(t, w_prev, run)
        res = solve(run, C, np.where(active[:, None], w_prev, 0))
        res_np = jax.tree_util.tree_map(np.asarray, res)
        a = active
        last = res_np if last is None else jax.tree_util.tree_map(
            lambda old, new: np.where(a.reshape((K,) + (1,) * (new.ndim - 1)), new, old),
            last, res_np)
        w_prev = np.where(a[:, None], np.asarray(res_np.w, np.float32), w_prev)
        new, obj, changed = cccp_update(model, data, probs, jnp.asarray(w_prev), C)
        obj, changed = np.asarray(obj, np.float64), np.asarray(changed)
        W, dual = w_prev, np.asarray(res_np.dual, np.float64)
        hist[a, t] = obj[a]
        gaps[a, t] = np.asarray(res_np.objective, np.float64)[a] - dual[a]
        steps[a] += np.asarray(res_np.num_steps)[a]
        step_conv = np.asarray(res_np.converged, bool)
        if verbose and not step_conv[a].all():
            print(f"{verbose}: CCCP iteration {t + 1}: "
                  f"{int((~step_conv[a]).sum())} convex step(s) stopped at max_iter "
                  "(only the last step of a run must reach tol)", flush=True)
        conv[a] = step_conv[a]
        n_outer[a] = t + 1
        better = a & (obj < best_obj)
        prev = best_obj.copy()
        best_obj[better], best_w[better], best_dual[better] = (
            obj[better], W[better], dual[better])
        small = np.isfinite(prev) & (prev - obj < cccp_tol * np.abs(prev))
        stop = a & (small | (~changed if stop_unchanged else False)) & bool(may_stop)
        # The stop rule certifies a fit only after a converged convex step
        # (``converged_``): a last step that stopped at ``max_iter`` is
        # continued instead, warm-started at its best iterate.
        stop = defer_uncertified_stop(stop, step_conv, resolves)
        keep = a & ~stop
        if t == T_out - 1:
            hit_max |= keep
        if verbose:
            print(f"{verbose}: CCCP iteration {t + 1}: objective "
                  f"{np.min(obj[a]):.6g}..{np.max(obj[a]):.6g} over {int(a.sum())} "
                  f"run(s), {int(stop.sum())} stopped", flush=True)
        probs = _select(jnp.asarray(keep), new, probs)
        active = keep
        if not active.any():
            break
    return CCCPTrace(w=best_w, objective=best_obj, dual=best_dual, num_steps=steps,
                     n_iter=n_outer, objectives=hist, gaps=gaps, last=last,
                     last_step_converged=conv, hit_max_iter=hit_max)


class CCCPResult(NamedTuple):
    """The outcome of CCCP for ``M`` fits of a latent model (host arrays).

    Attributes:
        result: :class:`jaxrank.solvers.FitResult` ``[M]`` of the best iterate
            (its objective is the non-convex one; ``converged``: the last convex
            step reached ``tol`` and CCCP stopped by its own rule).
        n_iter: ``[M]`` int, CCCP iterations made.
        objectives: ``[M, T]`` float64 objective after each iteration (NaN past ``n_iter``).
        gaps: ``[M, T]`` float64 certified duality gap of each convex step.
        init_objectives: ``[M, n_init]`` best objective of each initialisation.
        hit_max_iter: ``[M]`` bool, stopped at the iteration limit.
        last_step_converged: ``[M]`` bool, the last convex step reached ``tol``.
    """

    result: Any
    n_iter: np.ndarray
    objectives: np.ndarray
    gaps: np.ndarray
    init_objectives: np.ndarray
    hit_max_iter: np.ndarray
    last_step_converged: np.ndarray


def _convex_steps(model, data, problems, C, K, batch_size, devices, w0, *, solver, verbose):
    """One convex step of every run, warm-started at its previous iterate ``w0 [K, dim]``.

    The first solver iteration evaluates the convex upper bound at ``w0``,
    where it equals the non-convex objective (8) (the imputation was made
    there), so the step's result never has a higher objective than ``w0``:
    CCCP's objective decreases even when a step stops at ``max_iter``.
    """
    return solve(model, data, problems, C, solver=solver, single=K == 1,
                 batch_size=batch_size, devices=devices, w0=w0, verbose=bool(verbose))


def latent_cccp(model, data, problems, C, *, n_init, init, rng, cccp_max_iter, cccp_tol,
                solver, batch_size=None, devices=None, verbose=None):
    """CCCP (Algorithm 1) for ``M`` fits times ``n_init`` initialisations (:func:`cccp`).

    Every run starts at ``w = 0`` from a random imputation of the positive bags'
    candidates or, for the first initialisation of every fit with
    ``init="centroid"``, from the imputation at :func:`centroid_weights`.

    Args:
        model: a latent model (static; ``impute`` and the structured-model interface).
        data: :class:`jaxrank.models.BagData`.
        problems: :class:`jaxrank.models.LatentProblem` with a leading ``[M]`` axis.
        C: ``[M]`` float trade-offs.
        n_init: initialisations per fit (``>= 1``); the run of lowest objective is kept.
        init: ``"centroid"`` or ``"random"``.
        rng: ``numpy.random.RandomState`` of the random imputations.
        cccp_max_iter: maximum CCCP iterations per run.
        cccp_tol: relative objective decrease below which CCCP stops.
        solver: :class:`jaxrank.solvers.Solver` of each convex step.
        batch_size, devices: of the work queue (:func:`jaxrank._src.solvers.run.solve`).
        verbose: ``None`` or the name to print progress under.

    Returns:
        :class:`CCCPResult`: per fit, the run (initialisation) with the lowest
        objective, its best iterate ``w``, that objective (of the non-convex
        problem), the dual bound of the convex problem that produced ``w``,
        the solver iterations summed over its outer iterations and whether it
        converged: its last convex step reached ``tol`` and CCCP stopped by
        its own rule, not at ``cccp_max_iter``.

    References:
        Behl et al., CVPR 2014, Algorithm 1; Yuille & Rangarajan 2003.
    """
    M = int(C.shape[0])
    R = int(n_init)
    K = M * R
    probs = _take(problems, jnp.repeat(jnp.arange(M), R))
    cand = np.asarray(probs.cand)
    u = rng.random_sample(cand.shape)
    start = np.argmax(np.where(cand, u, -1.0), axis=-1).astype(np.int32)
    probs = probs._replace(chosen=jnp.asarray(start))
    Ck = jnp.repeat(jnp.asarray(C, jnp.float32), R)
    dim = model.dim(data)
    if init == "centroid":
        # The first initialisation of every fit imputes at the difference of
        # the class centroids of the bag means (the rest stay random).
        first = np.arange(K) % R == 0
        W0 = np.zeros((K, dim), np.float32)
        W0[first] = centroid_weights(data, problems.positive, problems.where, dim)
        new, _, _ = cccp_update(model, data, probs, jnp.asarray(W0), Ck)
        probs = _select(jnp.asarray(first), new, probs)
    if K > 1:
        devices = resolve_devices(devices)

    def step(run, Cs, w0):
        return _convex_steps(model, data, run, Cs, K, batch_size, devices, w0, solver=solver,
                             verbose=verbose)

    tr = cccp(model, data, probs, Ck, np.zeros((K, dim), np.float32), solve=step,
              cccp_max_iter=cccp_max_iter, cccp_tol=cccp_tol, verbose=verbose)
    best_obj_m = tr.objective.reshape(M, R)
    pick = np.argmin(best_obj_m, axis=1)
    idx = np.arange(M) * R + pick
    res = ssvm.FitResult(
        w=jnp.asarray(tr.w[idx]), objective=jnp.asarray(tr.objective[idx], jnp.float32),
        dual=jnp.asarray(tr.dual[idx], jnp.float32),
        num_steps=jnp.asarray(tr.num_steps[idx], jnp.int32),
        converged=jnp.asarray(tr.last_step_converged[idx]))
    return CCCPResult(result=res, n_iter=tr.n_iter[idx], objectives=tr.objectives[idx],
                      gaps=tr.gaps[idx], init_objectives=best_obj_m,
                      hit_max_iter=tr.hit_max_iter[idx],
                      last_step_converged=tr.last_step_converged[idx])
