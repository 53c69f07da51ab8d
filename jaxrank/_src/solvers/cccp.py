"""CCCP (Yuille & Rangarajan 2003), the outer loop of the latent and high-order models."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src.solvers import ssvm as solver
from jaxrank._src.solvers.run import (
    _print_progress,
    choose_batch_size,
    fit_batch,
    fit_one,
    resolve_devices,
)

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
        model: a latent model (static).
        data: :class:`BagData`.
        problems: :class:`LatentProblem` with a leading ``[K]`` axis.
        W: ``[K, dim]`` weights.
        C: ``[K]`` trade-offs.

    Returns:
        ``(problems [K], objective [K], changed [K] bool)``: the re-imputed
        problems, the non-convex objective at ``W`` (with that imputation) and
        whether any latent variable changed.
    """

    def one(p, w, c):
        new = model.impute(model.scores(w, data), p)
        obj = latent_objective(model, data, new, w, c)
        changed = jnp.any(new.chosen != p.chosen) | jnp.any(new.ignore != p.ignore)
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


class CCCPResult(NamedTuple):
    """The outcome of CCCP for ``M`` fits (host arrays).

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


def _convex_steps(model, data, problems, C, K, batch_size, devices, w0, *, tol, max_iter,
              verbose):
    """One convex step of every run, warm-started at its previous iterate ``w0 [K, dim]``.

    The first solver iteration evaluates the convex upper bound at ``w0``,
    where it equals the non-convex objective (8) (the imputation was made
    there), so the step's result never has a higher objective than ``w0``:
    CCCP's objective decreases even when a step stops at ``max_iter``.
    """
    tol = jnp.float32(tol)
    w0 = jnp.asarray(w0, jnp.float32)
    if K == 1:
        res = fit_one(model, data, _take(problems, 0), C=C[0], tol=tol,
                      max_iter=int(max_iter),
                      callback=_print_progress if verbose else None, w0=w0[0])
        return jax.tree_util.tree_map(lambda a: a[None], res)
    return fit_batch(model, data, problems, C, tol=tol, max_iter=int(max_iter),
                     batch_size=batch_size, devices=devices, callback=None, w0=w0)


def latent_cccp(model, data, problems, C, *, n_init, init, rng, cccp_max_iter, cccp_tol, tol,
                max_iter, batch_size=None, devices=None, verbose=None):
    """CCCP (Algorithm 1) for ``M`` fits times ``n_init`` initialisations.

    Each outer iteration is one compiled solver call over all ``M *
    n_init`` convex problems (runs that have stopped get an empty problem,
    which stops at once) and one compiled imputation/evaluation call.

    Args:
        model: a latent model (static; ``impute`` and the structured-model interface).
        data: :class:`jaxrank.models.BagData`.
        problems: :class:`jaxrank.models.LatentProblem` with a leading ``[M]`` axis.
        C: ``[M]`` float trade-offs.
        n_init: initialisations per fit (``>= 1``); the run of lowest objective is kept.
        init: ``"centroid"`` (the first initialisation imputes at the difference of the
            class centroids of the bag means, :func:`centroid_weights`) or ``"random"``.
        rng: ``numpy.random.RandomState`` of the random imputations.
        cccp_max_iter: maximum CCCP iterations per run.
        cccp_tol: relative objective decrease below which CCCP stops.
        tol: the solver's relative duality gap of each convex step.
        max_iter: maximum solver iterations of each convex step.
        batch_size, devices: of the work queue (:func:`jaxrank._src.solvers.run.fit_batch`).
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
    if init == "centroid":
        # The first initialisation of every fit imputes at the difference of
        # the class centroids of the bag means (the rest stay random).
        first = np.arange(K) % R == 0
        W0 = np.zeros((K, model.dim(data)), np.float32)
        W0[first] = centroid_weights(data, problems.positive, problems.where,
                                     model.dim(data))
        new, _, _ = cccp_update(model, data, probs, jnp.asarray(W0), Ck)
        probs = _select(jnp.asarray(first), new, probs)
    if K > 1:
        devices = resolve_devices(devices)
        batch_size = choose_batch_size(batch_size, K, model.dim(data), len(devices),
                                       model.cache)
    T_out = int(cccp_max_iter)
    hist = np.full((K, T_out), np.nan)
    gaps = np.full((K, T_out), np.nan)
    active = np.ones(K, bool)
    best_obj = np.full(K, np.inf)
    best_w = np.zeros((K, model.dim(data)), np.float32)
    best_dual = np.zeros(K)
    steps = np.zeros(K, np.int64)
    conv = np.ones(K, bool)
    n_outer = np.zeros(K, np.int64)
    hit_max = np.zeros(K, bool)
    resolves = np.zeros(K, np.int64)
    w_prev = np.zeros((K, model.dim(data)), np.float32)  # w = 0 at the first step
    for t in range(T_out):
        run = probs
        if not active.all():
            run = probs._replace(where=jnp.where(jnp.asarray(active)[:, None], probs.where,
                                                 False))
        res = _convex_steps(model, data, run, Ck, K, batch_size, devices,
                          np.where(active[:, None], w_prev, 0),
                             tol=tol, max_iter=max_iter, verbose=verbose)
        w_prev = np.asarray(res.w, np.float32)
        new, obj, changed = cccp_update(model, data, probs, res.w, Ck)
        obj, changed = np.asarray(obj, np.float64), np.asarray(changed)
        W, dual = np.asarray(res.w), np.asarray(res.dual, np.float64)
        a = active
        hist[a, t] = obj[a]
        gaps[a, t] = np.asarray(res.objective, np.float64)[a] - dual[a]
        steps[a] += np.asarray(res.num_steps)[a]
        step_conv = np.asarray(res.converged)
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
        stop = a & (~changed | small)
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
    best_obj_m = best_obj.reshape(M, R)
    pick = np.argmin(best_obj_m, axis=1)
    idx = np.arange(M) * R + pick
    res = solver.FitResult(
        w=jnp.asarray(best_w[idx]), objective=jnp.asarray(best_obj[idx], jnp.float32),
        dual=jnp.asarray(best_dual[idx], jnp.float32),
        num_steps=jnp.asarray(steps[idx], jnp.int32),
        converged=jnp.asarray(conv[idx] & ~hit_max[idx]))
    return CCCPResult(result=res, n_iter=n_outer[idx], objectives=hist[idx], gaps=gaps[idx],
                      init_objectives=best_obj_m, hit_max_iter=hit_max[idx],
                      last_step_converged=conv[idx])

