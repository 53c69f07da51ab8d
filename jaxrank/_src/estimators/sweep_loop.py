"""``sweep`` for estimators without a batched ``C`` grid: one fit per (task, setting, fold).

A registered estimator that is not a structured SVM (KernelRank: a smoothed-AUC
ascent with no ``C``) has no problem pytree for the batched driver, so
:func:`jaxrank.sweep` cross-validates its ``param_grid`` by fitting clones of
it fold by fold through its public ``fit`` and ``score``, with the same
folds (``cv``, ``where``, stratified per task) and the same result type as the
batched path. The grid axis runs over the ``param_grid`` settings; ``Cs`` of
the result are NaN.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from jaxrank._src.estimators.labels import labels_to_tasks
from jaxrank._src.estimators.model_selection import fold_masks, task_names_and_where
from jaxrank._src.estimators.registry import name_of
from jaxrank._src.estimators.sweep_result import SweepResult, _Progress, _say


def _rows(X, idx):
    """Rows ``idx`` of ``X`` (an array of any rank, a scipy.sparse matrix, a
    DataFrame or a list), by scikit-learn's row indexing."""
    return _safe_indexing(X, idx, axis=0)


def sweep_by_loop(est, X, Y, *, side, value, settings, cv, where, random_state, refit,
                  task_names, progress, verbose):
    """:func:`jaxrank.sweep` of an estimator without ``C`` (module docstring).

    Args:
        est: an unfitted estimator with ``fit(X, y, **side)``, ``score(X, y,
            **side)`` and ``get_params``.
        X: ``[n, ...]`` samples as ``est.fit`` takes them.
        Y: ``[n]`` or ``[n, T]`` labels (:func:`labels_to_tasks`).
        side: the estimator's :class:`jaxrank.SideInput` or ``None``;
            ``value``: its value for all ``n`` samples (or ``None``).
        settings: the ``param_grid`` settings (a list of dicts, ``[{}]`` for
            the estimator as given).
        cv, where, random_state, refit, task_names, progress, verbose: as
            :func:`jaxrank.sweep` takes them (``refit="joint"`` refits as
            ``True``).

    Returns:
        :class:`SweepResult` with ``Cs`` and ``best_C`` NaN, ``objective``
        the estimator's ``objective_`` (NaN without one), ``dual`` NaN,
        ``num_steps`` its ``n_iter_``, ``converged`` its ``converged_``
        (``True`` for an estimator that runs a fixed number of steps),
        ``weights`` ``None``.

    Raises:
        ValueError: labels, ``where``, ``cv`` or ``task_names`` as
            :func:`jaxrank.sweep` refuses them, and the estimator's own errors.
    """
    positive, classes, _ = labels_to_tasks(Y, "Y", getattr(est, "pos_label", None))
    T, n = positive.shape
    if _num_samples(X) != n:
        raise ValueError(f"X has {_num_samples(X)} samples but Y has {n}.")
    names, where = task_names_and_where(positive, task_names, where)
    units = side.units(value, n) if side is not None and value is not None else None
    masks = fold_masks(cv, positive, random_state, None, where, units)
    F, G = masks.shape[1], len(settings)
    shape = (T, G, F)
    val = np.full(shape, np.nan)
    obj, dual = np.full(shape, np.nan), np.full(shape, np.nan)
    steps, conv = np.zeros(shape, np.int64), np.ones(shape, bool)

    def fitted(params, t, rows):
        e = clone(est).set_params(**params)
        kw = {} if value is None else {side.name: side.take(value, rows, n)}
        y = classes[positive[t, rows].astype(int)]
        return e.fit(_rows(X, rows), y, **kw)

    _say(verbose, f"fitting {T * G * F} fits ({T} tasks x {G} settings x {F} folds, "
                  f"{type(est).__name__}) one by one ...")
    bar = _Progress(progress, T * G * F, f"{T * G * F} fits")
    t0 = time.perf_counter()
    try:
        for t in range(T):
            for g, params in enumerate(settings):
                for f in range(F):
                    train = np.flatnonzero(where[t] & ~masks[t, f])
                    held = np.flatnonzero(masks[t, f])
                    e = fitted(params, t, train)
                    kw = {} if value is None else {side.name: side.take(value, held, n)}
                    y = classes[positive[t, held].astype(int)]
                    val[t, g, f] = e.score(_rows(X, held), y, **kw)
                    obj[t, g, f] = float(np.ravel(getattr(e, "objective_", np.nan))[-1])
                    steps[t, g, f] = int(np.ravel(getattr(e, "n_iter_", 0))[-1])
                    conv[t, g, f] = bool(np.ravel(getattr(e, "converged_", True))[-1])
                    bar(1)
    finally:
        bar.close()
    cv_time = time.perf_counter() - t0
    _say(verbose, f"  done in {cv_time:.1f} s")
    best = np.argmax(np.where(np.isnan(val.mean(axis=-1)), -np.inf, val.mean(axis=-1)), axis=1)
    best_params = [dict(settings[b]) for b in best]
    estimators, refit_time = [], 0.0
    if refit:
        t0 = time.perf_counter()
        estimators = [fitted(best_params[t], t, np.flatnonzero(where[t])) for t in range(T)]
        refit_time = time.perf_counter() - t0
    return SweepResult(
        model=name_of(est), Cs=np.full(G, np.nan), val_score=val, objective=obj, dual=dual,
        num_steps=steps, converged=conv, val_masks=masks, best_index=best,
        best_C=np.full(T, np.nan), best_estimators=estimators, cv_time=cv_time,
        refit_time=refit_time, task_names=names, extensions=0, weights=None,
        params=[dict(p) for p in settings], best_params=best_params,
        scoring=getattr(est, "_scoring", "average_precision"))
