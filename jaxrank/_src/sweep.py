r"""Batched training: every (task, C, fold) fit of a grid search in one jitted call.

:func:`sweep` cross-validates ``C`` for ``T`` ranking tasks that share one
feature matrix (e.g. the one-vs-rest tasks of a multi-class set) by
``jax.vmap`` over three axes, innermost first:

* CV folds, as ``where``-style masks: fold ``f`` trains on ``~val[f]`` and is
  scored on ``val[f]`` (:func:`jaxrank.model_selection.stratified_fold_masks`);
* the ``C`` grid (``C`` is a traced argument of the solver);
* tasks: one row of ``positive [T, n]`` (and of the masks, since folds are
  stratified per task) per task.

The static capacity ``kp`` of AP inference is the largest number of positives
of any task, a bound for every training fold. All ``T * G * F`` fits run in
one compiled call; each axis is either vmapped or looped by ``lax.map`` inside
that call (``vmap_axes``). In a vmapped ``lax.while_loop``
(:func:`jaxrank.solvers.fit_ssvm`) a fit that has converged keeps its state
while the others continue, so every fit returns what it would return alone
(up to float rounding of batched matrix products).
The best ``C`` of each task (highest mean validation AP, first on ties, as
``GridSearchCV``) is then refit on all samples, again in one vmapped call
over tasks.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src.appx import APSVMApprox, check_k, fit_appx, fit_appx_many
from jaxrank._src.estimators import (
    APSVM,
    BinarySVM,
    as_features,
    as_label_matrix,
    check_C,
    fit_linear,
    fit_linear_many,
)
from jaxrank._src.metrics import _ap_kernel
from jaxrank._src.model_selection import stratified_fold_masks

MODELS = ("apsvm", "svm", "apsvm-appx")
_DEFAULT_MAX_ITER = {"apsvm": 1000, "svm": 5000, "apsvm-appx": 1000}


@dataclasses.dataclass
class SweepResult:
    """Result of :func:`sweep`. Arrays are NumPy; axes are (task, C, fold).

    Attributes:
        model: ``"apsvm"``, ``"svm"`` or ``"apsvm-appx"``.
        Cs: ``[G]`` float64 grid.
        val_ap: ``[T, G, F]`` validation AP of each fit.
        objective: ``[T, G, F]`` training objective at the returned weights.
        dual: ``[T, G, F]`` certified lower bound on the optimum.
        num_steps: ``[T, G, F]`` int, calls of loss-augmented inference.
        converged: ``[T, G, F]`` bool, relative duality gap ``<= tol``.
        val_masks: ``[T, F, n]`` bool validation masks.
        best_index: ``[T]`` int, argmax over ``C`` of the mean validation AP.
        best_C: ``[T]`` float, the chosen ``C`` per task.
        best_estimators: ``T`` fitted estimators (the model class with
            ``best_C[t]``, refit on all samples); empty if ``refit=False``.
        cv_time: seconds of the batched CV call (includes compilation).
        refit_time: seconds of the batched refit (includes compilation).
        task_names: ``T`` names (column indices unless given).
    """

    model: str
    Cs: np.ndarray
    val_ap: np.ndarray
    objective: np.ndarray
    dual: np.ndarray
    num_steps: np.ndarray
    converged: np.ndarray
    val_masks: np.ndarray
    best_index: np.ndarray
    best_C: np.ndarray
    best_estimators: list
    cv_time: float
    refit_time: float
    task_names: list

    @property
    def mean_val_ap(self):
        """``[T, G]`` mean validation AP over folds."""
        return self.val_ap.mean(axis=-1)

    @property
    def n_fits(self):
        """Number of CV fits ``T * G * F``."""
        return int(self.val_ap.size)

    def rows(self):
        """One dict per (task, C, fold) fit, for CSV output."""
        out = []
        T, G, F = self.val_ap.shape
        for t in range(T):
            for g in range(G):
                for f in range(F):
                    out.append({
                        "task": self.task_names[t], "C": float(self.Cs[g]), "fold": f,
                        "val_ap": float(self.val_ap[t, g, f]),
                        "objective": float(self.objective[t, g, f]),
                        "dual": float(self.dual[t, g, f]),
                        "iterations": int(self.num_steps[t, g, f]),
                        "converged": bool(self.converged[t, g, f]),
                    })
        return out


def _fit_one(X, pos, train, C, tol, k, C_binary, *, model, kp, method, max_iter,
             binary_max_iter, pos_weight, fit_intercept, cache, inner_steps):
    """One fit of ``model``; returns its FitResult."""
    if model == "apsvm-appx":
        return fit_appx(
            X, pos, train, C, C_binary, k, tol, kp=kp, method=method, max_iter=max_iter,
            binary_max_iter=binary_max_iter, cache=cache, inner_steps=inner_steps,
        ).fit
    loss = "ap" if model == "apsvm" else "zero_one"
    return fit_linear(
        X, pos, train, C, tol, loss=loss, kp=kp if loss == "ap" else 1, method=method,
        pos_weight=pos_weight, max_iter=max_iter, fit_intercept=fit_intercept,
        cache=cache, inner_steps=inner_steps,
    )


_STATIC = ("model", "kp", "method", "max_iter", "binary_max_iter", "pos_weight",
           "fit_intercept", "vmap_axes", "cache", "inner_steps")


@functools.partial(jax.jit, static_argnames=_STATIC)
def sweep_kernel(X, positive, val_masks, Cs, tol, k, C_binary, *, model, kp,
                 method="select", max_iter=1000, binary_max_iter=2000, pos_weight=1.0,
                 fit_intercept=False, vmap_axes=("task", "fold"), cache=32,
                 inner_steps=32):
    """All (task, C, fold) fits in one jitted call.

    Args:
        X: ``[n, d]`` float32 array or BCOO matrix.
        positive: ``[T, n]`` bool labels.
        val_masks: ``[T, F, n]`` bool validation masks (train = complement).
        Cs: ``[G]`` float32 grid.
        tol: ``[]`` relative duality gap.
        k: ``[]`` APPX easy fraction (ignored by other models).
        C_binary: ``[]`` APPX first-stage C, NaN for ``C / n_train``.
        model, kp, method, max_iter, binary_max_iter, pos_weight,
            fit_intercept, vmap_axes, cache, inner_steps: static (see
            :func:`sweep`).

    Returns:
        ``(val_ap, objective, dual, num_steps, converged)``, each ``[T, G, F]``.
    """
    opts = {"model": model, "kp": kp, "method": method, "max_iter": max_iter,
                "binary_max_iter": binary_max_iter, "pos_weight": pos_weight,
                "fit_intercept": fit_intercept, "cache": cache, "inner_steps": inner_steps}

    def one(pos, val, C):
        res = _fit_one(X, pos, ~val, C, tol, k, C_binary, **opts)
        w = res.w
        s = X @ w[:-1] + w[-1] if fit_intercept else X @ w
        ap = _ap_kernel(s, pos, val)
        return ap, res.objective, res.dual, res.num_steps, res.converged

    bad = set(vmap_axes) - {"task", "C", "fold"}
    if bad:
        raise ValueError(f"vmap_axes must be a subset of ('task', 'C', 'fold'); got {vmap_axes!r}.")

    def over_f(pos, val_f, C):  # val_f [F, n]
        if "fold" in vmap_axes:
            return jax.vmap(one, in_axes=(None, 0, None))(pos, val_f, C)
        return jax.lax.map(lambda v: one(pos, v, C), val_f)

    def over_g(pos, val_f, Cs):
        if "C" in vmap_axes:
            return jax.vmap(over_f, in_axes=(None, None, 0))(pos, val_f, Cs)
        return jax.lax.map(lambda c: over_f(pos, val_f, c), Cs)

    if "task" in vmap_axes:
        return jax.vmap(over_g, in_axes=(0, 0, None))(positive, val_masks, Cs)
    return jax.lax.map(lambda pv: over_g(pv[0], pv[1], Cs), (positive, val_masks))


def _check_Cs(Cs):
    arr = np.asarray(Cs, dtype=float) if not isinstance(Cs, (int, float)) else np.array([Cs], float)
    if arr.ndim != 1:
        raise ValueError(f"Cs must be a 1-D grid of numbers; got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError("Cs is empty; expected at least one value of C.")
    for c in arr:
        check_C(float(c), "every C in Cs")
    return arr


def _fold_masks(cv, positive, random_state):
    T, n = positive.shape
    if isinstance(cv, (int, np.integer)) and not isinstance(cv, bool):
        masks = np.stack([stratified_fold_masks(positive[t], int(cv),
                                                random_state=random_state)
                          for t in range(T)])
    else:
        masks = np.asarray(cv)
        if masks.dtype != bool:
            raise TypeError(f"cv masks must be bool; got dtype {masks.dtype}.")
        if masks.ndim == 2:
            masks = np.broadcast_to(masks, (T,) + masks.shape)
        if masks.ndim != 3 or masks.shape[0] != T or masks.shape[2] != n:
            raise ValueError(
                f"cv must be an int, [F, n] or [T, F, n] bool masks with n={n}, T={T}; "
                f"got shape {np.shape(cv)}."
            )
    if masks.shape[1] < 2:
        raise ValueError(f"cv needs at least 2 folds; got {masks.shape[1]}.")
    for t in range(T):
        for f in range(masks.shape[1]):
            val = masks[t, f]
            for part, m in (("validation", val), ("training", ~val)):
                n_pos = int((positive[t] & m).sum())
                n_neg = int((~positive[t] & m).sum())
                if n_pos == 0 or n_neg == 0:
                    raise ValueError(
                        f"task {t}, fold {f}: the {part} part has {n_pos} positive(s) "
                        f"and {n_neg} negative(s); every fold needs both classes "
                        "(use fewer folds or stratified masks)."
                    )
    return np.ascontiguousarray(masks)


def _estimator(model, C, params):
    if model == "apsvm":
        return APSVM(C=C, inference=params["inference"], max_iter=params["max_iter"],
                     tol=params["tol"])
    if model == "svm":
        return BinarySVM(C=C, fit_intercept=params["fit_intercept"],
                         pos_weight=params["pos_weight"], max_iter=params["max_iter"],
                         tol=params["tol"])
    return APSVMApprox(C=C, k=params["k"], C_binary=params["C_binary"],
                       inference=params["inference"], max_iter=params["max_iter"],
                       binary_max_iter=params["binary_max_iter"], tol=params["tol"])


def _say(verbose, msg):
    if verbose:
        print(msg, flush=True)


def sweep(
    X,
    Y,
    *,
    Cs,
    model="apsvm",
    cv=5,
    k=0.5,
    C_binary=None,
    inference="select",
    tol=1e-4,
    max_iter=None,
    binary_max_iter=2000,
    pos_weight=1.0,
    fit_intercept=True,
    random_state=0,
    refit=True,
    task_names=None,
    vmap_axes=("task", "fold"),
    verbose=False,
):
    r"""Cross-validate ``C`` for one or many ranking tasks in one jitted call.

    Every (task, C, fold) fit runs vmapped in a single compiled call
    (:func:`sweep_kernel`), then the best ``C`` of each task is refit on all
    samples in a second call (vmapped over tasks).

    Args:
        X: ``[n, d]`` dense array or ``scipy.sparse`` matrix (kept sparse).
        Y: ``[n]`` binary labels or ``[n, T]`` binary task columns (e.g.
            one-vs-rest labels of a multi-class set), ``{0,1}``/``{-1,1}``/bool.
        Cs: 1-D grid of trade-offs ``> 0`` (the ``C`` of the chosen model).
        model: ``"apsvm"`` (:class:`jaxrank.APSVM`), ``"svm"``
            (:class:`jaxrank.BinarySVM`) or ``"apsvm-appx"``
            (:class:`jaxrank.APSVMApprox`).
        cv: number of stratified folds (per task, shuffled with
            ``random_state``, as ``StratifiedKFold``), or bool validation masks
            ``[F, n]`` (same for all tasks) or ``[T, F, n]``.
        k, C_binary: APSVMApprox parameters (``C_binary=None``: ``C / n_train``).
        inference: AP inference method.
        tol: relative duality gap of every fit.
        max_iter: iteration bound (default 1000 for AP models, 5000 for svm).
        binary_max_iter: first-stage bound of APSVMApprox.
        pos_weight, fit_intercept: BinarySVM parameters (svm only).
        random_state: fold shuffling seed.
        refit: refit the best ``C`` of each task on all samples.
        task_names: optional ``T`` names, for reports.
        vmap_axes: which of the axes ``"task"``, ``"C"``, ``"fold"`` are
            ``jax.vmap``-ed; the others run as ``lax.map`` (a loop inside the
            same compiled call). Every choice gives the same fits in one call.
            Default ``("task", "fold")``: fastest in ``bench/sweep.py`` on 2 CPU cores
            (a vmapped ``while_loop`` runs until its slowest member stops, and
            the iterations grow with ``C``; large batches also push the
            solver's plane caches ``[batch, 33, d]`` out of the CPU cache).
            ``("task", "C", "fold")`` vmaps all fits at once.
        verbose: print progress before/after each compiled call.

    Returns:
        :class:`SweepResult`.

    Raises:
        ValueError: empty ``Cs`` or ``C <= 0``, unknown ``model``, ``k``
            outside ``(0, 1]``, non-binary labels or a task column with a
            single class, a fold whose training or validation part lacks a
            positive or a negative (so no validation AP is ever NaN), bad
            ``X``.
        TypeError: non-numeric input.
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}; got {model!r}.")
    Cs = _check_Cs(Cs)
    check_k(k)
    if C_binary is not None:
        check_C(C_binary, "C_binary")
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite number >= 0; got {tol!r}.")
    max_iter = _DEFAULT_MAX_ITER[model] if max_iter is None else int(max_iter)
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1; got {max_iter}.")
    Xj = as_features(X)
    positive, classes, _ = as_label_matrix(Y, Xj.shape[0], "Y")
    T = positive.shape[0]
    names = list(range(T)) if task_names is None else list(task_names)
    if len(names) != T:
        raise ValueError(f"task_names has {len(names)} names for {T} tasks.")
    masks = _fold_masks(cv, positive, random_state)
    F, G = masks.shape[1], Cs.shape[0]
    kp = max(int(positive.sum(axis=1).max()), 1) if model != "svm" else 1
    fit_icpt = bool(fit_intercept) and model == "svm"
    static = {"model": model, "kp": kp, "method": inference, "max_iter": max_iter,
                  "binary_max_iter": int(binary_max_iter), "pos_weight": float(pos_weight),
                  "fit_intercept": fit_icpt}
    vmap_axes = tuple(vmap_axes)
    cb = np.float32(np.nan if C_binary is None else C_binary)
    _say(verbose, f"compiling and running {T * G * F} fits ({T} tasks x {G} C x "
                  f"{F} folds, model {model}) in one call ...")
    t0 = time.perf_counter()
    out = sweep_kernel(
        Xj, jnp.asarray(positive), jnp.asarray(masks), jnp.asarray(Cs, jnp.float32),
        jnp.float32(tol), jnp.float32(k), jnp.asarray(cb), vmap_axes=vmap_axes, **static,
    )
    val_ap, obj, dual, steps, conv = (np.asarray(a) for a in jax.block_until_ready(out))
    cv_time = time.perf_counter() - t0
    _say(verbose, f"  done in {cv_time:.1f} s ({int(conv.sum())}/{conv.size} converged)")
    mean_ap = val_ap.mean(axis=-1)
    best = np.argmax(mean_ap, axis=1)
    best_C = Cs[best]
    params = {"inference": inference, "max_iter": max_iter, "tol": tol, "k": k,
                  "C_binary": C_binary, "binary_max_iter": int(binary_max_iter),
                  "pos_weight": pos_weight, "fit_intercept": fit_icpt}
    estimators, refit_time = [], 0.0
    if refit:
        _say(verbose, f"refitting the best C of {T} task(s) in one call ...")
        t0 = time.perf_counter()
        estimators = _refit(Xj, positive, best_C, classes, model, static, params,
                            tol, k, cb)
        refit_time = time.perf_counter() - t0
        _say(verbose, f"  done in {refit_time:.1f} s")
    return SweepResult(
        model=model, Cs=Cs, val_ap=val_ap, objective=obj, dual=dual, num_steps=steps,
        converged=conv, val_masks=masks, best_index=best, best_C=best_C,
        best_estimators=estimators, cv_time=cv_time, refit_time=refit_time,
        task_names=names,
    )


def _refit(Xj, positive, best_C, classes, model, static, params, tol, k, cb):
    """Refit every task at its own C, vmapped over tasks; return estimators."""
    T = positive.shape[0]
    C = jnp.asarray(best_C, jnp.float32)
    valid = jnp.ones(positive.shape, bool)
    if model == "apsvm-appx":
        r = fit_appx_many(
            Xj, jnp.asarray(positive), valid, C, jnp.asarray(cb), jnp.float32(k),
            jnp.float32(tol), kp=static["kp"], method=static["method"],
            max_iter=static["max_iter"], binary_max_iter=static["binary_max_iter"],
        )
        res = r.fit
    else:
        loss = "ap" if model == "apsvm" else "zero_one"
        res = fit_linear_many(
            Xj, jnp.asarray(positive), valid, C, jnp.float32(tol), loss=loss,
            kp=static["kp"], method=static["method"], pos_weight=static["pos_weight"],
            max_iter=static["max_iter"], fit_intercept=static["fit_intercept"],
        )
    res = jax.tree_util.tree_map(np.asarray, res)
    out = []
    for t in range(T):
        est = _estimator(model, float(best_C[t]), params)
        one = jax.tree_util.tree_map(lambda a, t=t: a[t : t + 1], res)
        if model == "apsvm-appx":
            est._appx = jax.tree_util.tree_map(lambda a, t=t: np.asarray(a)[t : t + 1], r)
        est._set_fitted(one, classes, False, Xj.shape[1], static["fit_intercept"])
        out.append(est)
    return out
