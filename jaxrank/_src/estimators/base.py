"""The estimator layer: one scikit-learn base class for every structured SVM.

:class:`StructuredSVM` is written once against the structured-model
interface: a subclass declares its hyperparameters (``__init__`` and
``_parameter_constraints``), its default ``C`` grid and how to build its
model (``_model``) and problems (``_problems``); fitting (one problem or one
per label column), batched sweeps (:func:`jaxrank.sweep`), the CLI and
``save``/``load`` use only these hooks. :class:`RankerMixin` holds what every
ranker shares (labels, ``decision_function``, ``predict``, ``score``).

**Labels** (one rule for every estimator and the CLI, scikit-learn's):
``y`` ``[n]`` holds exactly two distinct values (numbers, strings or bool),
``classes_`` is their sorted array and ``classes_[1]`` is the positive class
(so ``{0, 1}``, ``{-1, 1}`` and ``{False, True}`` all make the larger value
positive); a 2-D ``Y`` ``[n, T]`` holds ``T`` binary tasks with the same two
values in every column, one ranker per column.
"""

from __future__ import annotations

import time
from numbers import Integral, Real

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from jaxrank._src import validation
from jaxrank._src.cache import auto_enable
from jaxrank._src.estimators.checks import (
    check_feature_scale,
    check_positive_float32,
    warn_tied_scores,
    warn_unconverged,
)
from jaxrank._src.estimators.labels import labels_to_tasks, positive_class_text
from jaxrank._src.features import Intercept, LinearFeatures
from jaxrank._src.layout import (
    PAD_MIN_ROWS,
    Design,
    bucket_size,
    design,
    fit_buckets,
    max_row_norm,
)
from jaxrank._src.metrics import average_precision
from jaxrank._src.models.base import ItemProblem, Model
from jaxrank._src.solvers.run import (
    _to_device,
    design_matmul,
    device_grid,
    is_device_grid,
    resolve_devices,
    shard_rows,
    solve,
    training_scores,
)
from jaxrank._src.solvers.settings import Solver
from jaxrank._src.solvers.ssvm import FitResult, FitStatus


def _unpad_extras(extras, T, T_pad, d, d_pad):
    """Drop the padding tasks (leading ``[T_pad]`` axis) of ``_train``'s extras.

    Extras named like fitted attributes (``"w0_"``) that are ``[T, d_pad]``
    arrays are per-task weight vectors: their padding columns are dropped too.
    """
    def tasks(a):
        a = np.asarray(a)
        return a[:T] if T_pad != T and a.ndim >= 1 and a.shape[0] == T_pad else a

    out = {}
    for k, v in extras.items():
        v = jax.tree_util.tree_map(tasks, v)
        if (d_pad != d and k.endswith("_") and isinstance(v, np.ndarray) and v.ndim == 2
                and v.shape[1] == d_pad):
            v = v[:, :d]
        out[k] = v
    return out


class RankerMixin:
    """What every jaxrank ranker shares: labels, scores, predictions, AP score.

    Subclasses set ``coef_ [T, d]``, ``intercept_ [T]``, ``classes_`` and
    ``multi_output_`` in ``fit``; ``decision_function`` is ``X @ coef_.T +
    intercept_``.
    """

    def __getattr__(self, name):
        # Called only when normal lookup fails. A fitted attribute (``coef_``,
        # ``classes_``, ...) of an unfitted estimator is scikit-learn's
        # NotFittedError (an AttributeError: hasattr/getattr defaults still
        # work), so every method that reads one before fit says "call fit".
        if name.endswith("_") and not name.startswith("__") and not any(
                k.endswith("_") and not k.startswith("__") for k in vars(self)):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet (no attribute "
                f"{name!r}). Call 'fit' with appropriate arguments before using this "
                "estimator.")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _validate_X(self, X):
        check_is_fitted(self)
        # X keeps its dtype (no copy of float32 input); design() casts to float32.
        X = validation.check_features(X)
        return validate_data(self, X, accept_sparse="csr", dtype="numeric", reset=False)

    def decision_function(self, X):
        """Scores ``X w + b``; higher ranks first.

        Args:
            X: ``[n_samples, n_features]`` dense array or ``scipy.sparse``
                matrix.

        Returns:
            ``[n_samples]`` float32 scores, or ``[n_samples, n_tasks]`` for a
            model fitted on a 2-D ``y``.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: wrong number of features, NaN/inf or empty ``X``.
        """
        X = self._validate_X(X)
        s = np.asarray(design_matmul(design(X, in_place=True),
                                     _to_device(self.coef_.T, np.float32)))
        s = s + np.asarray(self.intercept_, np.float32)[None, :]
        return s if self.multi_output_ else s[:, 0]

    def predict(self, X):
        """Labels ``classes_[1]`` where :meth:`decision_function` ``> 0``, else ``classes_[0]``.

        For rankers without a learned intercept, ``intercept_`` puts the
        threshold at the midpoint of the two classes' mean training scores.
        """
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def _scored_tasks(self, X, y):
        """``(scores [n, T] float32, positive [T, n] bool)`` of ``(X, y)`` for ``score``.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: labels that are not this model's ``classes_``; a number
                of task columns other than the fit's.
        """
        check_is_fitted(self)
        Y = np.asarray(y)
        Y2 = Y[:, None] if Y.ndim == 1 else Y
        unknown = np.setdiff1d(np.unique(Y2), self.classes_)
        if unknown.size:
            raise ValueError(
                f"y has labels {unknown.tolist()[:6]} that are not among the model's classes_ "
                f"{self.classes_.tolist()}.")
        positive = (Y2 == self.classes_[1]).T  # [T, n]
        s = np.asarray(self.decision_function(X), np.float32)
        s = s[:, None] if s.ndim == 1 else s
        if s.shape[1] != positive.shape[0]:
            raise ValueError(
                f"y has {positive.shape[0]} task column(s); the model was fitted with "
                f"{s.shape[1]}.")
        return s, positive

    def score(self, X, y, sample_weight=None, *, groups=None):
        """Average precision of :meth:`decision_function` on ``(X, y)``.

        With ``groups`` (one query id per sample), the mean over queries of the
        per-query AP (MAP; queries without a positive or without a negative
        are left out). For a model fitted on a 2-D ``y``, the mean AP over
        the task columns.

        Raises:
            ValueError: ``sample_weight`` given, labels that are not this
                model's ``classes_``, no query with both classes.
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        s, positive = self._scored_tasks(X, y)
        if groups is not None:
            return float(np.mean([self._score_queries(s[:, t], positive[t], groups)
                                  for t in range(positive.shape[0])]))
        return float(np.mean([self._score_one(s[:, t], positive[t])
                              for t in range(positive.shape[0])]))

    def _score_one(self, s, positive):
        """The estimator's own measure of scores ``s [n]`` for relevance ``positive [n]``
        (``score`` of one task; ``sweep``'s validation score): AP here."""
        return float(average_precision(s, positive))

    def _score_queries(self, s, positive, groups):
        """The estimator's own measure over queries: the mean over the queries of
        ``groups [n]`` with both classes (``score(..., groups=)``; ``sweep``'s
        validation score with ``groups``): MAP here (:func:`map_score`)."""
        return map_score(s, positive, groups)


def map_score(scores, positive, groups):
    """Mean AP over the queries that have a positive and a negative (MAP), host side.

    Args:
        scores: ``[n]`` float scores.
        positive: ``[n]`` bool relevance.
        groups: ``[n]`` integer query ids.

    Returns:
        float MAP.

    Raises:
        ValueError: no query has both a positive and a negative.
    """
    groups = check_groups(groups, np.shape(scores)[0])
    positive = np.asarray(positive, bool)
    _, inv = np.unique(groups, return_inverse=True)
    has_pos = np.bincount(inv, weights=positive) > 0
    has_neg = np.bincount(inv, weights=~positive) > 0
    ok = (has_pos & has_neg)[inv]
    if not ok.any():
        raise ValueError("no query of groups has both a positive and a negative sample.")
    return float(average_precision(np.asarray(scores, np.float32), positive, where=ok,
                                   segments=inv.astype(np.int32)))


def check_groups(groups, n, name="groups"):
    """``[n]`` integer query ids (one per sample), validated."""
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} query ids (one per sample); "
                         f"got shape {g.shape}.")
    if g.dtype.kind not in "iu":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integer query ids; got dtype {g.dtype}.")
    return g


# The fitted attributes of every estimator that runs CCCP (persisted as
# StructuredSVM._persist says).
CCCP_ATTRIBUTES = {
    "cccp_objectives_": ("trace", "1d", None),
    "cccp_gaps_": ("trace", "1d", None),
    "n_cccp_iter_": ("count", "T?", None),
    "cccp_converged_": ("flag", "T?", None),
}


class StructuredSVM(RankerMixin, ClassifierMixin, BaseEstimator):
    """Base class of the structured SVM estimators (one fit path for all).

    A subclass defines ``__init__`` (hyperparameters only, no logic),
    ``_parameter_constraints``, ``_default_Cs`` (its grid on its own ``C``
    scale), optionally ``_default_param_grid`` (a dict: other parameters that
    :func:`jaxrank.sweep` cross-validates with ``C`` by default, each mapped to
    a tuple of values, the class default first) and the hooks

    * ``_model(static)``: the frozen structured model, from the static
      facts of the problems (e.g. the most positives of a task);
    * ``_problems(data, positive [M, n], where [M, n], groups)``: the
      ``problem`` pytree (leading ``[M]`` axis) and the static facts;
    * optionally ``_train`` (several solver calls, e.g. the two stages of
      AP-SVM-APPX) and ``_fitted_extras`` (extra fitted attributes).

    Subclasses with a ``devices`` parameter (``None``, an int ``k``: the
    first ``k`` local devices, or a list of ``jax.Device``): with two or more
    devices, a single-task fit shards its samples over them (data parallel:
    rows padded to a multiple of the device count and masked; dense ``X``
    without ``groups``, else ``ValueError``) and a multi-task fit its tasks;
    with fewer tasks than devices (dense ``X``, no ``groups``) the devices
    form a ``problems x samples`` grid: the task axis gets the largest
    divisor of the device count that is at most the number of tasks, the
    sample axis the rest (4 devices, 2 tasks: 2 x 2; 3 tasks: 1 x 4), each
    grid row a queue of tasks on rows sharded over its devices.
    ``None``: one device for a single task, every local device for several.

    Fitted attributes (every subclass): ``coef_ [T, d]``, ``intercept_ [T]``
    (``T = 1`` for a 1-D ``y``), ``classes_``, ``objective_``,
    ``dual_objective_``, ``n_iter_``, ``converged_`` (scalars for a 1-D ``y``,
    ``[T]`` arrays for a 2-D ``Y``), ``n_features_in_``, ``fit_time_``; the
    property ``fit_status_`` (``"converged"``, ``"max_iter"`` or
    ``"non-finite"``).
    """

    _parameter_constraints = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "verbose": ["boolean"],
        "pos_label": "no_validation",  # checked against the labels by fit
    }
    _default_Cs = (0.01, 0.1, 1.0, 10.0)
    _default_param_grid = {}
    # The per-sample side input fit takes besides (X, y), declared once
    # (jaxrank._src.estimators.side): None, or a SideInput that fit, score,
    # sweep, the CLI and the tests read.
    side_input = None
    _learns_intercept = False
    # The name of ``score``'s measure (``_score_one``), as ``sweep`` reports it.
    _scoring = "average_precision"
    # Whether the model's programs call back to the host (graph cuts): such
    # programs are not kept in the command line's program store.
    _host_callbacks = False
    # The fitted attributes jaxrank.save writes besides intercept_, classes_ and
    # n_features_in_, each with what jaxrank.load checks: (kind, shape, sign).
    # Kinds: "weights" (float arrays finite in float32), "count" (integers
    # >= 0), "flag" (bool), "value" (finite floats), "trace" (floats that may
    # hold NaN or inf), "arrays" (a dict of finite float arrays, e.g. a
    # mixture's parameters); shapes: "()", "T" ([T]), "Td" ([T, d]), "T?" ([]
    # or [T]), "1d" (any 1-D), None (any); signs a fit keeps: None, "<= 0",
    # "> 0". A subclass extends the dict with its own attributes; an
    # attribute a fit did not set (e.g. of another scorer) is not written.
    _persist = {
        "coef_": ("weights", "Td", None),
        "multi_output_": ("flag", "()", None),
        "n_iter_": ("count", "T?", None),
        "objective_": ("trace", "T?", None),
        "dual_objective_": ("trace", "T?", None),
        "converged_": ("flag", "T?", None),
    }

    # -- hooks --------------------------------------------------------------

    def _features(self):
        if self._learns_intercept and getattr(self, "fit_intercept", False):
            return Intercept()
        return LinearFeatures()

    def _model(self, static):
        raise NotImplementedError

    def _problems(self, data, positive, where, groups):
        # The bound on the positives is bucketed too (a static shape of the
        # AP kernels): any true upper bound is exact.
        max_pos = int(np.max(np.sum(positive & where, axis=-1)))
        return ItemProblem(_to_device(positive), _to_device(where)), {
            "max_pos": min(max(data.shape[0], 1), bucket_size(max_pos, PAD_MIN_ROWS))}

    def _train(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None):
        """Run the fits; returns ``(FitResult [M], extras dict of [M] arrays)``.

        One convex problem per fit (:meth:`_solve`); the latent and high-order
        estimators run CCCP around :meth:`_solve` instead.
        """
        return self._solve(model, data, problems, C, single=single, batch_size=batch_size,
                           devices=devices, progress=progress), {}

    def _solve(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None, w0=None, solver=None):
        """``FitResult [M]`` of the solver's fits with ``solver`` (default: this
        estimator's :meth:`_solver`)."""
        if not single:
            devices = self._queue_devices(data, devices)
        # A program store given to this instance (the command line's start-up
        # cache: ``_program_store``, not a parameter) runs a single fit, unless
        # the model's programs call back to the host (not storable).
        store = None if self._host_callbacks else getattr(self, "_program_store", None)
        if solver is None:
            solver = self._solver()
        return solve(model, data, problems, C, solver=solver, single=single,
                     batch_size=batch_size, devices=devices, w0=w0, verbose=self.verbose,
                     progress=progress, store=store)

    def _queue_devices(self, data, devices):
        """The devices of the work queue of a batch of fits (``devices``: the parameter)."""
        return devices if is_device_grid(devices) else resolve_devices(devices)

    def _required_attributes(self):
        """The fitted attributes a saved model must hold (besides intercept_, classes_)."""
        return ("coef_",)

    def _solver(self, **changes):
        """The :class:`jaxrank.solvers.Solver` of this estimator's fits (``tol``, ``max_iter``)."""
        settings = {"tol": np.float32(self.tol), "max_iter": int(self.max_iter)}
        settings.update(changes)
        return Solver(**settings)

    def _fitted_extras(self, extras, pick):
        """Set model-specific fitted attributes from ``extras`` (``pick`` per task)."""

    # -- checks ---------------------------------------------------------------

    def _check_params(self):
        # First thing of every fit: JAX's persistent compilation cache (unless
        # opted out), before the input checks compile their first programs.
        auto_enable()
        self._validate_params()
        check_positive_float32(self.C, "C")
        if not np.float32(self.tol) >= 0 or not np.isfinite(np.float32(self.tol)):
            raise ValueError(f"tol must be a finite number >= 0 in float32; got {self.tol!r}.")

    def _prepare(self, X, y, groups, reset=True):
        """Validate; return ``(data, positive [T, n], classes, multi, groups)``.

        The third argument is the value of the class's side input
        (``side_input``): query ids here, bag ids or the graph in subclasses.
        """
        side = self.side_input
        if groups is not None and (side is None or side.kind != "queries"):
            raise ValueError(
                f"{type(self).__name__} does not take groups (query ids); APSVM does "
                "(mean AP over queries).")
        # dtype="numeric": X keeps its dtype here (float32 C-contiguous input is
        # not copied); design() makes the one float32 copy that other input needs.
        X = validation.check_features(X)
        X, Y = validate_data(self, X, y, accept_sparse="csr", dtype="numeric",
                             multi_output=True, reset=reset, y_numeric=False)
        positive, classes, multi = labels_to_tasks(Y, pos_label=getattr(self, "pos_label", None))
        if groups is not None:
            groups = check_groups(groups, X.shape[0])
        # The float32 range of the features (C is checked by fit; jaxrank.sweep
        # fits through this hook too).
        R = max_row_norm(X)
        check_feature_scale(R)
        return design(X, in_place=True).remember_row_norm(R), positive, classes, multi, groups

    # -- fit ------------------------------------------------------------------

    def fit(self, X, y):
        """Fit the model; with a 2-D ``y``, one ranker per column (one call).

        Args:
            X: ``[n_samples, n_features]`` dense array or ``scipy.sparse``
                matrix (kept sparse), any real dtype (cast to float32).
                Memory: a C-contiguous float32 array (also ``np.memmap``,
                e.g. ``np.load(path, mmap_mode="r")``) is not copied on a CPU
                backend: used as is when 64-byte aligned (memmaps of ``.npy``
                files), and from 2^26 entries (256 MB) up also when not (a
                shifted-row view, :class:`jaxrank.models.Design`; models
                with per-sample hinge terms, such as :class:`BinarySVM`,
                copy that view once); other dense input is converted into
                one float32 copy, in chunks.
                Dense designs of 2^26 entries or more are not padded to a
                shape bucket (:func:`fit_buckets`).
            y: ``[n_samples]`` labels with two distinct values (the larger is
                the positive class, module docstring), or ``[n_samples,
                n_tasks]`` with one binary task per column.

        A subclass with a side input (``side_input``, e.g. :class:`APSVM`'s
        query ids) takes it as a keyword of its own ``fit``.

        Returns:
            self

        Raises:
            ValueError: bad hyperparameters (also out of float32 range), NaN,
                inf or empty ``X``, complex ``X``, mismatched lengths, a ``y``
                (or task column) without exactly two classes; rows of ``X`` whose norm (or
                times ``C``) is outside the float32 range of the solver
                (:func:`check_feature_scale`: about ``8.9e-16 <= R`` and ``R,
                C R <= 5.8e17``).
            TypeError: non-numeric ``X``, hyperparameters of the wrong type.

        Warns:
            ConvergenceWarning: a fit stopped at ``max_iter`` before reaching
                ``tol`` (the message gives the gap, ``C max_i ||x_i||^2`` and
                advice: standardise ``X``, a smaller ``C``, more ``max_iter``).
            UserWarning: every training sample of a task gets the same score
                (e.g. ``coef_ = 0``): the model does not rank.

        Scale of ``X``: ``C`` is in units of ``1 / ||x||^2`` (``X / s`` with
        ``C s^2`` is the same problem, weights ``s w``), so the default ``C``
        suits standardised features; the solver's work grows with ``C
        max_i ||x_i||^2``. Rescaling is not automatic: it would not change
        that product (docs/ap_svm.md, "Pitfalls").
        """
        return self._fit(X, y, None)

    def _fit(self, X, y, groups):
        """:meth:`fit` with the side input's value ``groups`` (``_prepare``)."""
        self._check_params()
        t0 = time.perf_counter()
        devices = self._fit_devices()
        data, positive, classes, multi, groups = self._prepare(X, y, groups)
        (n, d), T = data.shape, positive.shape[0]
        # devices= on a single task: its samples are sharded over the devices;
        # on fewer tasks than devices: a problems x samples grid (device_grid).
        shard = devices is not None and len(devices) > 1 and T == 1
        grid = None
        if devices is not None and T > 1 and not data.sparse and groups is None:
            grid = device_grid(devices, T)
        if shard and (data.sparse or groups is not None):
            raise ValueError(
                f"devices={self.devices!r} shards the samples of a single-task fit, which "
                "needs dense X without groups; got "
                f"{'sparse X' if data.sparse else 'groups'}. Pass devices=None (one device), "
                "or X.toarray() for sparse X.")
        if groups is None:  # query layouts are not padded
            n_pad, d_pad, T_pad = fit_buckets(n, d, T, dense=not data.sparse)
        else:
            n_pad, d_pad, T_pad = n, d, T
        R = data.max_row_norm()
        check_feature_scale(R, float(self.C))
        self._fit_scale = (R, float(self.C))
        if shard or grid is not None:
            # Rows padded to a multiple of the sample axis (masked out by `where`).
            k = len(devices) if shard else len(grid[0])
            n_pad = -(-n_pad // k) * k
            data = shard_rows(data.materialized().padded(n_pad, d_pad),
                              devices if shard else grid)
        else:
            data = data.padded(n_pad, d_pad)
        where = np.zeros((T_pad, n_pad), bool)
        where[:T, :n] = True
        positive = np.pad(positive, ((0, T_pad - T), (0, n_pad - n)))
        problems, static = self._problems(data, positive, where, groups)
        model = self._model(static)
        if type(model).hinge_terms is not Model.hinge_terms:
            # The per-sample hinge block reads rows directly: a design used in
            # place (features.ShiftedRows) is copied to plain storage first.
            data = data.materialized()
        if self.verbose:
            print(f"{type(self).__name__}: n={n} d={d} tasks={T} "
                  f"positives={positive[:T].sum(axis=1).tolist()} C={self.C}; "
                  f"{positive_class_text(self, classes, grouped=groups is not None)}", flush=True)
        C = np.full((T_pad,), self.C, np.float32)
        res, extras = self._train(model, data, problems, C, single=(T_pad == 1),
                                  devices=None if shard else (grid or devices))
        res = jax.tree_util.tree_map(lambda a: np.asarray(a)[:T], res)
        extras = _unpad_extras(extras, T, T_pad, d, d_pad)
        self._set_fitted(res, extras, classes, multi, data, positive[:T], where[:T],
                         n_features=d)
        self.fit_time_ = time.perf_counter() - t0
        warn_unconverged(self, res)
        if self.verbose:
            print(f"{type(self).__name__}: {self.n_iter_} iterations, objective "
                  f"{self.objective_}, converged={self.converged_}, {self.fit_time_:.2f} s",
                  flush=True)
        return self

    def _set_solver_attributes(self, res, extras, classes, multi, n_features):
        """The attributes every estimator shares, from a FitResult with a leading [T] axis.

        ``classes_``, ``multi_output_``, ``n_features_in_``, ``n_iter_``,
        ``objective_``, ``dual_objective_``, ``converged_`` (scalars for a
        single task, ``[T]`` arrays otherwise), then the estimator's own
        ``_fitted_extras``.
        """
        self.classes_ = classes
        self.multi_output_ = bool(multi)
        self.n_features_in_ = int(n_features)

        def pick(a, cast=float):
            a = np.asarray(a)
            return a.copy() if multi else cast(a[0])

        self.n_iter_ = pick(res.num_steps, int)
        self.objective_ = pick(res.objective)
        self.dual_objective_ = pick(res.dual)
        self.converged_ = pick(res.converged, bool)
        self._fitted_extras(extras, pick)

    @property
    def fit_status_(self):
        """Why the (last convex) fit stopped: ``"converged"``, ``"max_iter"`` or
        ``"non-finite"`` (:class:`jaxrank.solvers.FitStatus`), from
        ``converged_`` and ``objective_``: a ``str``, or a ``[T]`` str array
        for a 2-D ``y``. Raises ``NotFittedError`` before ``fit``."""
        code = FitResult(None, np.asarray(self.objective_), None, None,
                         np.asarray(self.converged_)).status
        labels = np.array([s.label for s in FitStatus])[code]
        return str(labels) if labels.ndim == 0 else labels

    def _set_fitted(self, res, extras, classes, multi, data, positive, where=None, *,
                    n_features=None):
        """Fitted attributes from a FitResult with a leading [T] axis.

        ``where [T, n]`` (default all) marks each task's training samples;
        ``n_features`` (default ``data.shape[1]``) is the number of real
        features when ``data`` has padding columns (their weights are 0 and
        are dropped). Warns (:func:`warn_tied_scores`) when a task's training
        scores, as ``decision_function`` computes them, are all equal.
        """
        if where is None:
            where = np.ones(positive.shape, bool)
        d = data.shape[1] if n_features is None else int(n_features)
        W = np.asarray(res.w, np.float32)
        Wx = W[:, : data.shape[1]]  # weights of the columns of data (padding included)
        S = training_scores(data, Wx.T)  # [n, T] scores, no intercept
        if isinstance(self._features(), Intercept):
            self.coef_, self.intercept_ = W[:, :d].copy(), W[:, -1].copy()
        else:
            self.coef_ = W[:, :d].copy()
            # No learned intercept: threshold predict at the midpoint of the
            # classes' mean training scores (scores are shift invariant).
            mid = [0.5 * (S[positive[t] & where[t], t].mean()
                          + S[~positive[t] & where[t], t].mean()) for t in range(W.shape[0])]
            self.intercept_ = -np.asarray(mid, np.float32)
        self._set_solver_attributes(res, extras, classes, multi, d)
        # Scores as decision_function computes them (float32, intercept
        # included): a model whose training scores all tie does not rank.
        S = S.astype(np.float32) + np.asarray(self.intercept_, np.float32)[None, :]
        if any(np.any(where[t]) and np.ptp(S[where[t], t]) == 0 for t in range(S.shape[1])):
            scale = getattr(self, "_fit_scale", None)
            if scale is None:  # e.g. estimators with their own fit: R of the data's rows
                R = self._row_norm(data)
                scale = (R, None if R is None else float(self.C))
            warn_tied_scores(self, S, where, *scale)
        return self

    def _fit_devices(self):
        """The devices of the ``devices`` parameter (a tuple), or ``None`` when unset."""
        devices = getattr(self, "devices", None)
        return None if devices is None else resolve_devices(devices)

    @staticmethod
    def _row_norm(data):
        """``max_i ||x_i||`` over the feature rows of ``data`` (a design, or data with a
        design ``.X``: candidates, graph nodes); ``None`` for other data."""
        rows = data.X if isinstance(getattr(data, "X", None), Design) else data
        return rows.max_row_norm() if isinstance(rows, Design) else None

    def _scores(self, W, data):
        """``[n, M]`` training-set scores of weights ``W [M, dim]`` (for validation)."""
        feats = self._features()
        return jax.vmap(lambda w: feats(w, data), out_axes=1)(jnp.asarray(W))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = True
        # Binary rankers: a 1-D y has two classes (no one-vs-rest); a 2-D Y
        # is one binary task per column (multilabel indicator).
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.multi_label = True
        return tags
