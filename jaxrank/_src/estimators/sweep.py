r"""Batched training: every (task, C, fold) fit of a grid search in one compiled call.

:func:`sweep` cross-validates ``C`` for ``T`` ranking tasks that share one
feature matrix (e.g. the one-vs-rest tasks of a multi-class set), for any
estimator of the registry that is a structured SVM, with the side input the
estimator declares (``side_input``: query ids, bag ids or the sample graph)
by the estimator's own keyword. Each of the ``M = T * G *
F`` fits is one problem of the batched driver
(:func:`jaxrank.solvers.fit_many`): CV folds are ``where`` masks (fold ``f``
trains on ``~val[f]`` and is scored on ``val[f]``), ``C`` is a traced
argument, tasks are rows of the labels. The estimator builds the model and
the problems (its static facts, e.g. the most positives of any task, bound
every fit), so every fit has the same shapes and all of them run in one
compiled call: ``batch_size`` fits at a time per device are stepped together
and a slot whose fit stops takes the next fit at once. Every fit returns what
it would return alone (up to float rounding of batched matrix products). The
best ``C`` of each task (highest mean validation score, first on ties, as
``GridSearchCV``; the score is the estimator's own measure, that of its
``score``: AP for the ranking SVMs, F1, PRBEP, Prec@k or Rec@k for SVM-perf's
losses) is then refit on all samples, again in one call.

**Grids on each model's scale.** ``Cs=None`` takes the estimator's default
grid (``type(est)._default_Cs``: ``10^-3 .. 10`` for the binary SVM,
``1 .. 10^4`` for AP-SVM and the ROC-area SVM, whose joint feature vectors
are normalised by the number of pairs). ``Cs="auto"`` starts from that grid
and, while the best ``C`` of some task sits at an edge of the grid (its mean
validation score there strictly above that of every other ``C``: a tie is no
edge), adds two more values beyond that edge (same log spacing) and fits only
the new ones,
at most ``max_extensions`` times (default 3) and never beyond ``[1e-6,
1e8]``.

**Other parameters.** ``param_grid`` (a dict of estimator parameters, each
with a list of values) cross-validates them together with ``C``: every
setting of their product is one more compiled call over the ``C`` grid (one
compilation when the setting changes only traced problem data, as ``J`` and
``c`` of :class:`~jaxrank.LatentSVM`), and the grid axis of the result runs
over (setting, ``C``), setting-major. ``param_grid=None`` takes the
estimator's default (``type(est)._default_param_grid``; empty but for the
latent SVM) for the parameters left at their class defaults; ``{}`` tunes
``C`` only. ``Cs="auto"`` extends ``C`` for every setting at once, at the
edge where the best (setting, ``C``) of a task sits.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import clone

from jaxrank._src.estimators.base import StructuredSVM
from jaxrank._src.estimators.checks import (
    _SCALE_MAX,
    check_feature_scale,
    check_positive_float32,
)
from jaxrank._src.estimators.model_selection import fold_masks, task_names_and_where
from jaxrank._src.estimators.registry import get_estimator, name_of
from jaxrank._src.estimators.sweep_loop import sweep_by_loop
from jaxrank._src.estimators.sweep_result import SweepResult, _Progress, _say
from jaxrank._src.metrics import average_precision
from jaxrank._src.solvers.run import (
    PROGRESS_LOGGER,
    is_device_grid,
    resolve_devices,
    shard_rows,
)

_C_RANGE = (1e-6, 1e8)


def _check_Cs(Cs):
    arr = np.atleast_1d(np.asarray(Cs))
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        raise ValueError(f"Cs must be None, 'auto' or a 1-D grid of numbers; got {Cs!r}.")
    if arr.size == 0:
        raise ValueError("Cs is empty; expected at least one value of C.")
    for c in arr:
        check_positive_float32(float(c), "every C in Cs")
    return arr.astype(np.float64)


class _ProgressHandler(logging.Handler):
    """Calls ``fn(n)`` for each record of the solvers' progress logger."""

    def __init__(self, fn):
        super().__init__(logging.INFO)
        self.fn = fn

    def emit(self, record):
        n = getattr(record, "n_stopped", None)
        if n is not None:
            self.fn(int(n))


@contextlib.contextmanager
def _following_progress(fn):
    """Within the block, ``fn(n)`` as batches of fits stop (the ``jaxrank.progress``
    logger at INFO, not propagated to other handlers meanwhile)."""
    log = logging.getLogger(PROGRESS_LOGGER)
    handler = _ProgressHandler(fn)
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def _resolve(model, params):
    if isinstance(model, str):
        est = get_estimator(model)(**params)
    elif isinstance(model, type):
        est = model(**params)
    elif hasattr(model, "get_params"):
        est = clone(model).set_params(**params) if params else clone(model)
    else:
        from jaxrank._src.estimators.registry import ESTIMATORS

        raise TypeError(
            "model must be a registry name (one of "
            f"{sorted(ESTIMATORS)}), an estimator class or an unfitted estimator; got "
            f"{model!r}.")
    if not hasattr(type(est), "side_input"):  # every registered class declares it
        raise TypeError(f"model must be a jaxrank estimator (jaxrank.ESTIMATORS, or a class "
                        f"registered with jaxrank.register_estimator); got {type(est).__name__}.")
    return est


def _side_in_params(model, params):
    """Pop the value of a side input that ``sweep`` has no keyword for (KernelRank's
    ``mask``) from ``params``: ``(value or None, params)``."""
    cls = (get_estimator(model) if isinstance(model, str) else model
           if isinstance(model, type) else type(model))
    side = getattr(cls, "side_input", None)
    if side is None or side.name in ("groups", "bags", "edges") or side.name not in params:
        return None, params
    params = dict(params)
    return params.pop(side.name), params


def _val_scores(est, S, positive, val, groups):
    """Validation score of every fit, ``[M]``: the estimator's own measure
    (``_score_one``; AP, MAP over queries with ``groups``), NaN where it is
    undefined."""
    own = type(est)._score_one is not StructuredSVM._score_one
    if groups is None and not own:
        return np.asarray(jax.vmap(lambda s, p, v: average_precision(s, p, where=v))(
            jnp.asarray(S.T), jnp.asarray(positive), jnp.asarray(val)))
    out = np.empty(S.shape[1])
    for m in range(S.shape[1]):
        v = val[m]
        try:
            out[m] = (est._score_queries(S[v, m], positive[m][v], groups[v])
                      if groups is not None
                      else est._score_one(S[v, m], positive[m][v]))
        except ValueError:
            out[m] = np.nan
    return out


def _run(est, data, positive, where, masks, Cs, groups, batch_size, devices, progress,
         verbose):
    """All (task, C, fold) fits for the grid ``Cs``: arrays ``[T, G, F]``."""
    T, F, n = masks.shape
    G = Cs.shape[0]
    t, g, f = (a.reshape(-1) for a in np.meshgrid(np.arange(T), np.arange(G), np.arange(F),
                                                   indexing="ij"))
    pos, train, val = positive[t], where[t] & ~masks[t, f], masks[t, f]
    problems, static = est._problems(data, pos, train, groups)
    model = est._model(static)
    M = T * G * F
    data, devices = _grid_for(data, devices, M)
    _say(verbose, f"compiling and running {M} fits ({T} tasks x {G} C x {F} folds, "
                  f"{type(est).__name__}) in one call ...")
    # Estimators whose fits run in stages (APSVMApprox: a binary SVM, then
    # problem (10)) report every stage's fits.
    stages = int(getattr(est, "_progress_stages", 1))
    bar = _Progress(progress, M * stages,
                    f"{M} fits" + (f" x {stages} stages" if stages > 1 else ""))
    t0 = time.perf_counter()
    try:
        with _following_progress(bar):
            res, extras = est._train(model, data, problems, jnp.asarray(Cs[g], jnp.float32),
                                     single=False, batch_size=batch_size, devices=devices,
                                     progress=bool(progress))
            res = jax.block_until_ready(res)
            jax.effects_barrier()
    finally:
        bar.close()
    S = np.asarray(est._scores(res.w, data))  # [n, M]
    val_score = _val_scores(est, S, pos, val, groups)
    out = [val_score, res.objective, res.dual, res.num_steps, res.converged, res.w]
    out = [np.asarray(a).reshape((T, G, F) + np.shape(a)[1:]) for a in out]
    extras = {k: np.asarray(v).reshape((T, G, F) + np.shape(v)[1:])
              for k, v in extras.items() if not k.startswith("_")}
    dt = time.perf_counter() - t0
    _say(verbose, f"  done in {dt:.1f} s ({int(out[4].sum())}/{M} converged)")
    return out + [extras], dt


def sweep(
    X,
    Y,
    *,
    Cs=None,
    model="apsvm",
    cv=5,
    groups=None,
    bags=None,
    edges=None,
    where=None,
    random_state=0,
    refit=True,
    task_names=None,
    batch_size=None,
    devices=None,
    progress=False,
    verbose=False,
    max_extensions=3,
    return_weights=False,
    param_grid=None,
    **params,
):
    r"""Cross-validate ``C`` of a structured SVM for one or many tasks, batched.

    Every (task, C, fold) fit runs in a single compiled call (work queues of
    ``batch_size`` ``vmap``-ed fits per device, module docstring; one call per
    setting of ``param_grid``), then the best ``C`` (and setting) of each task
    is refit on all samples in a second call.

    Args:
        X: ``[n, d]`` dense array or ``scipy.sparse`` matrix (kept sparse).
        Y: ``[n]`` labels (two values) or ``[n, T]`` binary task columns (e.g.
            one-vs-rest labels of a multi-class set); with ``groups``, ``[n]``
            relevance grades.
        Cs: ``None`` (the estimator's default grid on its own ``C`` scale),
            ``"auto"`` (that grid, extended at an edge where the best ``C``
            sits; module docstring) or a 1-D grid of trade-offs ``> 0``.
        model: a registry name (``"apsvm"``, ``"svm"``, ``"apsvm-appx"``,
            ``"auc-svm"``, the latent models with ``bags``, the graph models
            with ``edges``, ...), an estimator class or an unfitted estimator
            whose other parameters are used. An estimator without ``C``
            (KernelRank) is cross-validated over its ``param_grid`` by one
            fit per (task, setting, fold) (``Cs`` must be ``None``; its
            side input, KernelRank's ``mask``, is passed by name in
            ``**params``; ``batch_size``, ``devices``, ``max_extensions`` and
            ``return_weights`` do not apply).
        cv: number of stratified folds, an int ``>= 2`` (per task, shuffled
            with ``random_state``, as ``StratifiedKFold``; with ``groups``,
            folds of whole queries; with ``edges``, stratified folds of whole
            connected components, as ``StratifiedGroupKFold``); a
            scikit-learn splitter (an object with ``split(X, y, groups)``,
            e.g. ``StratifiedKFold(5)``: it splits each task's samples, with
            the task's labels as ``y`` and the query ids or component ids as
            ``groups``); or bool validation masks ``[F, n]`` (same for all
            tasks) or ``[T, F, n]``.
        groups: optional ``[n]`` query ids (estimators with query grouping:
            validation MAP over queries).
        bags: ``[n]`` bag ids (any hashable values), required by the latent
            (multiple-instance) models (``groups=`` is taken as the bag ids
            there too) and refused by the others; ``Y`` then holds one label
            per bag (sorted bag-id order) or per row, and the validation score
            is the AP over bags.
        edges: ``[m, 2]`` sample pairs or an ``[n, n]`` adjacency, required by
            the graph models (``"hob-svm"``, ``"hoap-svm"``) and refused by the
            others. Each fit sees its training samples' graph (validation
            samples are masked out of it and isolated); the validation
            samples are scored by max-marginals on the whole graph, which a
            fold of whole components (``cv`` an int) keeps to their own
            components. The graph's fits run on one device.
        where: optional ``[n]`` or ``[T, n]`` bool: the samples of each task
            (default all). Samples outside it take part in no fit and no
            validation (e.g. several datasets stacked as tasks).
        random_state: fold shuffling seed.
        refit: ``True``: refit the best ``C`` of each task on all samples (a
            second compiled call); ``"joint"``: fit every ``C`` on all samples
            inside the CV call (``T (G - 1)`` extra fits, no second compilation:
            faster for small data); ``False``: no refit.
        task_names: optional ``T`` names, for reports.
        batch_size: fits stepped together per device (int ``>= 1``), or
            ``None``: 32, fewer if the fits do not fill the slots or their
            plane caches would exceed 256 MB per device.
        devices: ``None`` (every local device), an int (the first ones) or a
            sequence of ``jax.Device`` to shard the fits over; or a
            ``problems x samples`` grid: a sequence of ``D_p`` equally long
            sequences of ``D_s`` devices (e.g. ``[jax.devices()[:2],
            jax.devices()[2:4]]``), where the fits are dealt to the ``D_p``
            rows and each fit's samples are split over the ``D_s`` devices
            of its row (dense ``X`` without ``groups``; the rows of ``X`` are
            padded to a multiple of ``D_s`` with masked-out rows). On a CPU
            each core can be a device: ``jax.config.update(
            "jax_num_cpu_devices", k)`` before JAX's first computation (the
            ``jaxrank`` command does this).
        progress: ``True`` shows a ``tqdm`` bar over the fits; a callable is
            called with the number of fits that stopped while the compiled
            call runs.
        verbose: print a line before and after each compiled call.
        max_extensions: with ``Cs="auto"``, the most grid extensions.
        return_weights: also return the weights of every CV fit
            (``SweepResult.weights``).
        param_grid: other estimator parameters to cross-validate with ``C``:
            a dict mapping each name to a list of values (every setting of
            their product is fitted over the ``C`` grid; module docstring);
            ``None`` (default): the estimator's ``_default_param_grid`` (the
            latent SVM's ``J`` and ``c``; none for the other models) for the
            parameters left at their class defaults (a parameter given in
            ``**params`` or set away from its default on a ``model``
            instance stays fixed); ``{}``: ``C`` only.
        **params: other parameters of the estimator (e.g. ``k=0.25`` for
            ``"apsvm-appx"``, ``tol``, ``max_iter``, ``pos_label``: the
            label of the positive class of a two-label ``Y``; default the
            larger label).

    Returns:
        :class:`SweepResult`.

    Raises:
        ValueError: empty ``Cs`` or a ``C`` not positive and finite in
            float32, unknown model or parameter, non-binary labels or a task
            column with a single class, a fold whose training or validation
            part lacks a positive or a negative (so no validation score is ever
            NaN), bad ``X``, ``batch_size < 1``, empty ``devices``, a
            ``devices`` grid that is ragged, repeats a device, or is used
            with sparse ``X``, ``groups`` or ``edges``; a side input the
            model does not take (``groups``, ``bags``, ``edges``: its
            ``side_input``) or a missing required one (``bags`` of a latent
            model, ``edges`` of a graph model); ``cv < 2``, or more folds
            than connected components; a ``pos_label`` that is not one of
            the labels; a ``param_grid`` with ``C``, an unknown parameter,
            an empty list or a value the estimator refuses; ``Cs`` given
            for an estimator without ``C``.
        TypeError: a model that is not an estimator (e.g. ``None``), a
            ``cv`` that is neither an int, a splitter nor bool masks,
            non-numeric input, a non-int ``batch_size``, a ``param_grid``
            that is not a dict of lists.
    """
    own_side, params = _side_in_params(model, params)
    est = _resolve(model, params)
    if refit not in (True, False, "joint"):
        raise ValueError(f"refit must be True, False or 'joint'; got {refit!r}.")
    if not isinstance(est, StructuredSVM):  # no C, no batched problems: a loop of fits
        if Cs is not None:
            raise ValueError(f"{type(est).__name__} has no C; leave Cs=None and pass the "
                             "grids of its parameters as param_grid.")
        side, value = _side_value(est, groups, bags, edges)
        return sweep_by_loop(
            est, X, Y, side=side, value=own_side if own_side is not None else value,
            settings=_param_settings(est, param_grid, params), cv=cv, where=where,
            random_state=random_state, refit=bool(refit), task_names=task_names,
            progress=progress, verbose=verbose)
    est._check_params()
    settings = _param_settings(est, param_grid, params)
    ests = [clone(est).set_params(**p) if p else est for p in settings]
    for e in ests:
        e._check_params()
    auto = isinstance(Cs, str)
    if auto and Cs != "auto":
        raise ValueError(f"Cs must be None, 'auto' or a grid of numbers; got {Cs!r}.")
    grid = _check_Cs(type(est)._default_Cs if Cs is None or auto else Cs)
    side, value = _side_value(est, groups, bags, edges)
    data, positive, classes, multi, groups = est._prepare(X, Y, value)
    devices = _check_grid(devices)
    # Units every fold keeps whole besides queries: the graph's components.
    units = side.units(value, data.shape[0]) if side is not None and side.kind == "edges" \
        else None
    if units is not None and is_device_grid(devices):
        raise ValueError(
            "a problems x samples devices grid shards the samples of dense X; the graph "
            f"models ({type(est).__name__}) run their fits on one device. Pass a flat "
            "sequence of devices or None.")
    # C-weighted planes (norm about C R) must fit float32 at every C of the grid.
    R = est._row_norm(data)
    if R is not None:
        check_feature_scale(R, float(np.max(grid)))
    T = positive.shape[0]
    names, where = task_names_and_where(positive, task_names, where)
    masks = fold_masks(cv, positive, random_state, groups, where, units)
    joint = refit == "joint"
    # With refit="joint" every C is also fitted on all samples of each task
    # (an extra "fold" with an empty validation part) in the same compiled call.
    run_masks = np.concatenate([masks, np.zeros_like(masks[:, :1])], axis=1) if joint \
        else masks
    # The training view: with a devices grid, rows padded to a multiple of the
    # sample axis (masked out everywhere) and sharded; `data` stays as given
    # for the fitted estimators.
    run = (data, positive, where, run_masks)
    if is_device_grid(devices):
        run = _grid_layout(data, positive, where, run_masks, groups, devices)

    def run_all(Cs):
        """Every setting's fits over ``Cs``: arrays ``[T, S, G, F, ...]``."""
        outs, total = [], 0.0
        for e, p in zip(ests, settings):
            if p:
                _say(verbose, "setting " + ", ".join(f"{k}={v!r}" for k, v in p.items()))
            o, dt = _run(e, *run, Cs, groups, batch_size, devices, progress, verbose)
            outs.append(o)
            total += dt
        stacked = [np.stack([o[i] for o in outs], axis=1) for i in range(len(outs[0]) - 1)]
        return stacked + [{k: np.stack([o[-1][k] for o in outs], axis=1)
                           for k in outs[0][-1]}], total

    out, cv_time = run_all(grid)
    extensions = 0
    while auto and extensions < int(max_extensions):
        mean = out[0].mean(axis=-1)  # [T, S, G]
        high, low = _at_edges(np.where(np.isnan(mean), -np.inf, mean).max(axis=1))
        step = np.log10(grid[1] / grid[0]) if grid.size > 1 else 1.0
        new = []
        if np.any(high):
            new = [grid[-1] * 10 ** (step * k) for k in (1, 2)]
            new = [c for c in new if c <= _C_RANGE[1]]
            place = "high"
        elif np.any(low):
            new = [grid[0] * 10 ** (-step * k) for k in (2, 1)]
            new = [c for c in new if c >= _C_RANGE[0]]
            place = "low"
        if R is not None:  # C R of the extension: stop at the float32 range instead
            new = [c for c in new if c * R <= _SCALE_MAX]
        if not new:
            break
        more, dt = run_all(np.asarray(new))
        cv_time += dt
        cat = (lambda a, b: np.concatenate([a, b], axis=2)) if place == "high" else (
            lambda a, b: np.concatenate([b, a], axis=2))
        grid = np.r_[grid, new] if place == "high" else np.r_[new, grid]
        out = [cat(a, b) for a, b in zip(out[:-1], more[:-1])] + [
            {k: cat(out[-1][k], more[-1][k]) for k in out[-1]}]
        extensions += 1
    # Flatten (setting, C) into one grid axis, setting-major.
    S, G = len(settings), grid.size
    flat = lambda a: a.reshape((T, S * G) + a.shape[3:])  # noqa: E731
    out = [flat(a) for a in out[:-1]] + [{k: flat(v) for k, v in out[-1].items()}]
    Cs_flat = np.tile(grid, S)
    params_flat = [dict(p) for p in settings for _ in range(G)]
    val_score, obj, dual, steps, conv, W, extras = out
    full = None
    if joint:  # split off the fits on all samples
        full = [a[:, :, -1] for a in (obj, dual, steps, conv, W)], {
            k: v[:, :, -1] for k, v in extras.items()}
        val_score, obj, dual, steps, conv, W = (a[:, :, :-1] for a in (val_score, obj, dual,
                                                                        steps, conv, W))
    best = np.argmax(val_score.mean(axis=-1), axis=1)
    best_C = Cs_flat[best]
    best_params = [dict(params_flat[b]) for b in best]
    estimators, refit_time = [], 0.0
    if joint:
        (f_obj, f_dual, f_steps, f_conv, f_W), f_extras = full
        tt = np.arange(T)
        from jaxrank._src.solvers.ssvm import FitResult

        res = FitResult(f_W[tt, best], f_obj[tt, best], f_dual[tt, best], f_steps[tt, best],
                        f_conv[tt, best])
        estimators = _estimators(est, data, positive, where, classes, best_C, res,
                                 {k: v[tt, best] for k, v in f_extras.items()}, best_params)
    elif refit:
        _say(verbose, f"refitting the best C of {T} task(s) in one call per setting ...")
        t0 = time.perf_counter()
        estimators = [None] * T
        for s in np.unique(best // G):  # the tasks whose best setting is s
            idx = np.flatnonzero(best // G == s)
            sub = (run[0], run[1][idx], run[2][idx])
            for t, e in zip(idx, _refit(ests[s], data, positive[idx], where[idx], classes,
                                        best_C[idx], groups, batch_size, devices, sub)):
                estimators[t] = e
        refit_time = time.perf_counter() - t0
        _say(verbose, f"  done in {refit_time:.1f} s")
    return SweepResult(
        model=name_of(est), Cs=Cs_flat, val_score=val_score, objective=obj, dual=dual,
        num_steps=steps, converged=conv, val_masks=masks, best_index=best, best_C=best_C,
        best_estimators=estimators, cv_time=cv_time, refit_time=refit_time,
        task_names=names, extensions=extensions, weights=W if return_weights else None,
        params=params_flat, best_params=best_params, scoring=est._scoring,
    )


def _param_settings(est, param_grid, given):
    """The settings (dicts) of the parameters ``sweep`` tunes besides ``C``.

    ``param_grid=None``: the estimator's ``_default_param_grid``, without the
    parameters the user set: those in ``given`` (``**params``) and those of
    ``est`` away from the class default. Returns ``[{}]`` when only ``C`` is
    tuned.

    Raises:
        TypeError: ``param_grid`` not a dict, or a value list that is a string
            or not a sequence.
        ValueError: an unknown parameter, ``C`` (use ``Cs``), or an empty list.
    """
    if param_grid is None:
        default = type(est)().get_params(deep=False)
        current = est.get_params(deep=False)
        param_grid = {k: list(v) for k, v in getattr(type(est), "_default_param_grid",
                                                     {}).items()
                      if k not in given and type(current[k]) is type(default[k])
                      and current[k] == default[k]}
    if not isinstance(param_grid, dict):
        raise TypeError("param_grid must be a dict mapping estimator parameters to lists of "
                        f"values, or None; got {type(param_grid).__name__}.")
    names = est.get_params(deep=False)
    for k, v in param_grid.items():
        if k == "C":
            raise ValueError("param_grid must not hold 'C'; pass its grid as Cs=.")
        if k not in names:
            raise ValueError(f"param_grid: {type(est).__name__} has no parameter {k!r}; it has "
                             f"{sorted(n for n in names if n != 'C')}.")
        if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple, np.ndarray)):
            raise TypeError(f"param_grid[{k!r}] must be a list of values; got {v!r}.")
        if len(v) == 0:
            raise ValueError(f"param_grid[{k!r}] is empty; expected at least one value.")
    keys = list(param_grid)
    plain = lambda v: v.item() if isinstance(v, np.generic) else v  # noqa: E731
    return [dict(zip(keys, map(plain, combo))) for combo in itertools.product(
        *(list(param_grid[k]) for k in keys))]


def _side_value(est, groups, bags, edges):
    """``(SideInput or None, value)``: the side input ``est`` declares, as given.

    Each estimator takes its own keyword (``side_input.name``): query ids as
    ``groups``, bag ids as ``bags`` (the latent models also take them as
    ``groups``, the CLI's ``qid:`` spelling), the graph as ``edges``.

    Raises:
        ValueError: a side input the estimator does not take, or a missing
            required one.
    """
    name = type(est).__name__
    side = est.side_input
    given = {k: v for k, v in (("groups", groups), ("bags", bags), ("edges", edges))
             if v is not None}
    if side is not None and side.kind == "bags" and "groups" in given:
        if "bags" in given:
            raise ValueError(f"{name} takes bags= (the bag id of each row of X); got both "
                             "bags= and groups=.")
        given["bags"] = given.pop("groups")  # the CLI's spelling: qid: = bag id
    for k in given:
        if side is None or k != side.name:
            takes = "no side input" if side is None else f"{side.name}= ({side.kind})"
            raise ValueError(f"{k}= does not apply to {name}, which takes {takes}.")
    if side is None:
        return None, None
    if side.required and side.name not in given:
        what = {"bags": "the bag id of each row of X; Y holds one label per bag, or per "
                        "row, equal within a bag",
                "edges": "[m, 2] pairs of similar samples, or an [n, n] adjacency"}.get(
                    side.kind, side.kind)
        raise ValueError(f"sweep(model={name_of(est) or name!r}) needs {side.name}= ({what}).")
    return side, given.get(side.name)


def _at_edges(mean):
    """``(high [T], low [T])``: tasks whose best mean validation score is at the last
    (first) C of the grid and strictly above every other C's.

    A tie is no edge: a task with the same AP at every C (or at the edge and
    inside) gives no reason to look beyond the grid. NaN counts as lowest.
    """
    m = np.where(np.isnan(mean), -np.inf, mean)
    if m.shape[1] == 1:
        return np.ones(m.shape[0], bool), np.zeros(m.shape[0], bool)
    return m[:, -1] > m[:, :-1].max(axis=1), m[:, 0] > m[:, 1:].max(axis=1)


def _refit(est, data, positive, where, classes, best_C, groups, batch_size, devices, run):
    """Refit every task at its own C in one call; return fitted estimators.

    ``run``: ``(data, positive, where)`` as trained on (padded and sharded for
    a devices grid); the estimators keep ``data`` as given.
    """
    problems, static = est._problems(*run, groups)
    model = est._model(static)
    train_data, devices = _grid_for(run[0], devices, positive.shape[0])
    res, extras = est._train(model, train_data, problems, jnp.asarray(best_C, jnp.float32),
                             single=False, batch_size=batch_size, devices=devices)
    res = jax.tree_util.tree_map(np.asarray, res)
    return _estimators(est, data, positive, where, classes, best_C, res, extras)


def _check_grid(devices):
    """``devices`` as given, or a grid (nested sequences) as a tuple of device tuples.

    Raises:
        ValueError: a ragged or empty grid, a repeated device, a device of
            another process.
        TypeError: a grid entry that is not a ``jax.Device``.
    """
    if isinstance(devices, (str, bytes)) or not isinstance(devices, (list, tuple)):
        return devices
    if not devices or isinstance(devices[0], jax.Device):
        return devices
    try:
        rows = tuple(tuple(r) for r in devices)
    except TypeError:
        raise TypeError("devices must be a sequence of jax devices, or a sequence of "
                        "equally long sequences of them (a problems x samples grid).") from None
    if len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ValueError(f"a devices grid needs rows of one positive length; got row lengths "
                         f"{[len(r) for r in rows]}.")
    resolve_devices([d for r in rows for d in r])  # types, locality, no repeats
    return rows


def _grid_for(data, devices, n_problems):
    """``(data, devices)`` for a call of ``n_problems`` fits.

    A grid with more problem rows than fits keeps its first ``n_problems``
    rows (the rows of ``data`` are placed again on that smaller mesh); other
    ``devices`` are returned unchanged.
    """
    if not is_device_grid(devices) or n_problems >= len(devices):
        return data, devices
    sub = devices[:max(int(n_problems), 1)]
    return shard_rows(data, sub), sub


def _grid_layout(data, positive, where, masks, groups, grid):
    """Rows padded to a multiple of the grid's sample axis and sharded over it.

    Returns ``(data, positive, where, masks)`` with ``n_pad`` rows; the padded
    rows are False in every mask, so no fit sees them.
    """
    if data.sparse or groups is not None:
        raise ValueError(
            "a problems x samples devices grid shards the samples of dense X without "
            f"groups; got {'sparse X' if data.sparse else 'groups'}. Pass a flat sequence of "
            "devices (problems only).")
    n, d = data.shape
    k = len(grid[0])
    n_pad = -(-n // k) * k

    def pad(a):
        return np.concatenate([a, np.zeros(a.shape[:-1] + (n_pad - n,), bool)], axis=-1)

    return (shard_rows(data.materialized().padded(n_pad, d), grid), pad(positive),
            pad(np.asarray(where)), pad(masks))


def _estimators(est, data, positive, where, classes, best_C, res, extras, best_params=None):
    """One fitted estimator per task from ``[T]`` fit results (with the
    ``param_grid`` setting ``best_params[t]`` when given)."""
    T = positive.shape[0]
    out = []
    for t in range(T):
        one = clone(est).set_params(C=float(best_C[t]),
                                    **(best_params[t] if best_params else {}))
        sl = lambda a, t=t: np.asarray(a)[t : t + 1]  # noqa: E731
        one._set_fitted(jax.tree_util.tree_map(sl, res),
                        {k: sl(v) for k, v in extras.items() if not k.startswith("_")},
                        classes, False, data, positive[t : t + 1], where[t : t + 1])
        one.n_features_in_ = data.shape[1]
        out.append(one)
    return out
