r"""Batched training: every (task, C, fold) fit of a grid search in one jitted call.

:func:`sweep` cross-validates ``C`` for ``T`` ranking tasks that share one
feature matrix (e.g. the one-vs-rest tasks of a multi-class set). Each of the
``M = T * G * F`` fits is one problem of the solver's work queue
(:func:`jaxrank.solvers.fit_ssvm_many`):

* CV folds are ``where``-style masks: fold ``f`` trains on ``~val[f]`` and is
  scored on ``val[f]`` (:func:`jaxrank.model_selection.stratified_fold_masks`);
* ``C`` is a traced argument of the solver;
* tasks are rows of ``positive [T, n]`` (and of the masks, since folds are
  stratified per task).

The static capacity ``kp`` of AP inference is the largest number of positives
of any task, a bound for every training fold, so every fit has the same
shapes and all of them run in one compiled call: ``batch_size`` fits at a
time per device are stepped together (one ``vmap``-ed solver iteration), and
a slot whose fit stops takes the next fit at once, so no slot waits for the
slowest fit of a batch. Fits are ordered by decreasing ``C`` (their
iterations grow with ``C``) and dealt to the devices (``shard_map``; APSVMApprox
runs on one device, see :func:`fit_appx_many`); every fit
returns what it would return alone (up to float rounding of batched matrix
products). The best ``C`` of each task (highest mean validation AP, first on
ties, as ``GridSearchCV``) is then refit on all samples, again in one call.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src.appx import APSVMApprox, check_k, fit_appx_many
from jaxrank._src.estimators import (
    APSVM,
    BinarySVM,
    as_features,
    as_label_matrix,
    DEFAULT_BATCH_SIZE,
    check_C,
    choose_batch_size,
    fit_linear_many,
    plane_cache,
    progress_hook,
    resolve_devices,
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


_STATIC = ("model", "kp", "method", "max_iter", "binary_max_iter", "pos_weight",
           "fit_intercept", "cache", "inner_steps", "batch_size", "devices", "progress",
           "return_weights")


@functools.partial(jax.jit, static_argnames=_STATIC)
def sweep_kernel(X, positive, val_masks, Cs, tol, k, C_binary, *, model, kp,
                 method="select", max_iter=1000, binary_max_iter=2000, pos_weight=1.0,
                 fit_intercept=False, cache=None, inner_steps=None,
                 batch_size=DEFAULT_BATCH_SIZE, devices=None, progress=False,
                 return_weights=False):
    """All (task, C, fold) fits in one jitted call.

    The ``M = T * G * F`` fits are problems of
    :func:`jaxrank.solvers.fit_ssvm_many` (rows ``positive[t]`` and training
    masks ``~val_masks[t, f]``, trade-off ``Cs[g]``): work queues of
    ``batch_size`` ``vmap``-ed slots per device, longest fits (largest ``C``)
    first. APSVMApprox runs its two stages as two such batches, on one device
    (``devices`` is not used for it; see :func:`fit_appx_many`).

    Args:
        X: ``[n, d]`` float32 array or BCOO matrix.
        positive: ``[T, n]`` bool labels.
        val_masks: ``[T, F, n]`` bool validation masks (train = complement).
        Cs: ``[G]`` float32 grid.
        tol: ``[]`` relative duality gap.
        k: ``[]`` APPX easy fraction (ignored by other models).
        C_binary: ``[]`` APPX first-stage C, NaN for ``C / n_train``.
        model, kp, method, max_iter, binary_max_iter, pos_weight,
            fit_intercept, cache, inner_steps, batch_size, devices, progress:
            static (see :func:`sweep`).
        return_weights: static; also return the weights of every fit.

    Returns:
        ``(val_ap, objective, dual, num_steps, converged)``, each ``[T, G, F]``,
        and with ``return_weights`` the weights ``[T, G, F, dim]`` (``dim = d
        + 1`` with an intercept, last).
    """
    T, F, n = val_masks.shape
    G = Cs.shape[0]
    t, g, f = (a.reshape(-1) for a in jnp.meshgrid(
        jnp.arange(T), jnp.arange(G), jnp.arange(F), indexing="ij"))
    pos, train, C = positive[t], ~val_masks[t, f], Cs[g]
    common = {"method": method, "max_iter": max_iter, "cache": cache,
              "inner_steps": inner_steps, "batch_size": batch_size, "devices": devices,
              "progress": progress}
    if model == "apsvm-appx":
        res = fit_appx_many(X, pos, train, C, C_binary, k, tol, kp=kp,
                            binary_max_iter=binary_max_iter, **common).fit
    else:
        loss = "ap" if model == "apsvm" else "zero_one"
        res = fit_linear_many(X, pos, train, C, tol, loss=loss,
                              kp=kp if loss == "ap" else 1, pos_weight=pos_weight,
                              fit_intercept=fit_intercept, **common)
    W = res.w
    S = X @ W[:, :-1].T + W[:, -1] if fit_intercept else X @ W.T  # [n, M]
    val_ap = jax.vmap(_ap_kernel)(S.T, pos, ~train)
    out = (val_ap, res.objective, res.dual, res.num_steps, res.converged)
    out = tuple(a.reshape(T, G, F) for a in out)
    if return_weights:
        out += (W.reshape(T, G, F, W.shape[-1]),)
    return out


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


class _Progress:
    """Host side of ``progress``: a tqdm bar over fits, or a user callable."""

    def __init__(self, progress, total, desc):
        self.bar, self.fn = None, None
        if callable(progress):
            self.fn = progress
        elif progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="fit", leave=False)

    def __call__(self, n):
        if self.bar is not None:
            self.bar.update(n)
        if self.fn is not None:
            self.fn(n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


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
    batch_size=None,
    devices=None,
    progress=False,
    verbose=False,
):
    r"""Cross-validate ``C`` for one or many ranking tasks in one jitted call.

    Every (task, C, fold) fit runs in a single compiled call
    (:func:`sweep_kernel`: work queues of ``batch_size`` ``vmap``-ed fits per
    device), then the best ``C`` of each task is refit on all samples in a
    second call.

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
        batch_size: fits stepped together per device (int ``>= 1``), or
            ``None``: 32 (the fastest of 8/16/32 in ``bench/sweep.py`` on 2
            CPU cores), fewer if the fits do not fill the slots or their plane
            caches would exceed 256 MB per device
            (:func:`jaxrank._src.estimators.choose_batch_size`). ``batch_size
            >= T * G * F`` on one device is a plain ``vmap`` of every fit.
        devices: sequence of ``jax.Device`` to shard the fits over; ``None``:
            every local device of the default backend. On a CPU each core can
            be a device: ``jax.config.update("jax_num_cpu_devices", k)`` before
            JAX's first computation (the ``jaxrank`` command does this).
        progress: ``True`` shows a ``tqdm`` bar over the fits; a callable is
            called with the number of fits that stopped (``progress(n)``)
            while the compiled call runs; ``False`` (default) neither.
        verbose: print a line before and after each compiled call.

    Returns:
        :class:`SweepResult`.

    Raises:
        ValueError: empty ``Cs`` or ``C <= 0``, unknown ``model``, ``k``
            outside ``(0, 1]``, non-binary labels or a task column with a
            single class, a fold whose training or validation part lacks a
            positive or a negative (so no validation AP is ever NaN), bad
            ``X``, ``batch_size < 1``, empty ``devices``.
        TypeError: non-numeric input, a non-int ``batch_size``, ``devices``
            that are not JAX devices.
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
    devices = resolve_devices(devices)
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
    dim = Xj.shape[1] + int(fit_icpt)
    # APPX: its first stage has the binary SVM's (larger) plane cache, and both
    # stages run on one device (fit_appx_many).
    cache = plane_cache({"apsvm": "ap", "svm": "zero_one", "apsvm-appx": "zero_one"}[model])[0]
    n_dev = 1 if model == "apsvm-appx" else len(devices)
    refit_batch = choose_batch_size(batch_size, T, dim, n_dev, cache)
    batch_size = choose_batch_size(batch_size, T * G * F, dim, n_dev, cache)
    static = {"model": model, "kp": kp, "method": inference, "max_iter": max_iter,
              "binary_max_iter": int(binary_max_iter), "pos_weight": float(pos_weight),
              "fit_intercept": fit_icpt, "batch_size": int(batch_size),
              "devices": devices, "progress": bool(progress)}
    cb = np.float32(np.nan if C_binary is None else C_binary)
    stages = 2 if model == "apsvm-appx" else 1
    M = T * G * F
    _say(verbose, f"compiling and running {M} fits ({T} tasks x {G} C x {F} folds, "
                  f"model {model}) in one call on {n_dev} device(s) ...")
    bar = _Progress(progress, stages * M, f"{M} fits" + (" x 2 stages" if stages > 1 else ""))
    t0 = time.perf_counter()
    try:
        with progress_hook(bar):
            out = sweep_kernel(
                Xj, jnp.asarray(positive), jnp.asarray(masks), jnp.asarray(Cs, jnp.float32),
                jnp.float32(tol), jnp.float32(k), jnp.asarray(cb), **static,
            )
            out = jax.block_until_ready(out)
            jax.effects_barrier()
    finally:
        bar.close()
    val_ap, obj, dual, steps, conv = (np.asarray(a) for a in out)
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
        estimators = _refit(Xj, positive, best_C, classes, model,
                            dict(static, batch_size=refit_batch), params, tol, k, cb)
        refit_time = time.perf_counter() - t0
        _say(verbose, f"  done in {refit_time:.1f} s")
    return SweepResult(
        model=model, Cs=Cs, val_ap=val_ap, objective=obj, dual=dual, num_steps=steps,
        converged=conv, val_masks=masks, best_index=best, best_C=best_C,
        best_estimators=estimators, cv_time=cv_time, refit_time=refit_time,
        task_names=names,
    )


def _refit(Xj, positive, best_C, classes, model, static, params, tol, k, cb):
    """Refit every task at its own C in one call (work queues); return estimators."""
    T = positive.shape[0]
    C = jnp.asarray(best_C, jnp.float32)
    valid = jnp.ones(positive.shape, bool)
    common = {"kp": static["kp"], "method": static["method"],
              "max_iter": static["max_iter"], "batch_size": static["batch_size"],
              "devices": static["devices"]}
    if model == "apsvm-appx":
        r = fit_appx_many(
            Xj, jnp.asarray(positive), valid, C, jnp.asarray(cb), jnp.float32(k),
            jnp.float32(tol), binary_max_iter=static["binary_max_iter"], **common,
        )
        res = r.fit
    else:
        loss = "ap" if model == "apsvm" else "zero_one"
        res = fit_linear_many(
            Xj, jnp.asarray(positive), valid, C, jnp.float32(tol), loss=loss,
            pos_weight=static["pos_weight"], fit_intercept=static["fit_intercept"],
            **common,
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
