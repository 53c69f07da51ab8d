"""scikit-learn style estimators on top of the jitted kernels."""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax.experimental import sparse as jsparse
from sklearn.base import BaseEstimator, ClassifierMixin

from jaxrank._src import inference, validation
from jaxrank._src.metrics import average_precision
from jaxrank._src.solvers import fit_ssvm, fit_ssvm_many

# ---------------------------------------------------------------------------
# Data conversion (host side).
# ---------------------------------------------------------------------------


def as_features(X, name="X", dtype=np.float32):
    """Validate ``X`` and convert it to a JAX array or a BCOO sparse matrix.

    Dense input becomes a ``[n, d]`` float32 ``jax.Array``. ``scipy.sparse``
    input becomes a ``jax.experimental.sparse.BCOO`` matrix with the same
    non-zeros (never densified): memory is about 12 bytes per stored entry
    (float32 value + two int32 indices) instead of ``4 n d`` bytes.

    Raises:
        TypeError: ``X`` is not numeric.
        ValueError: ``X`` is not 2-D, is empty, or holds NaN/inf.
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"{name} must be a non-empty 2-D matrix; got shape {X.shape}.")
        if not np.issubdtype(X.dtype, np.number):
            raise TypeError(f"{name} must be numeric; got dtype {X.dtype}.")
        if not np.all(np.isfinite(X.data)):
            raise ValueError(f"{name} contains NaN or infinite values.")
        X = X.astype(dtype)
        X.sum_duplicates()
        return jsparse.BCOO.from_scipy_sparse(X)
    if isinstance(X, jsparse.BCOO):
        return X
    arr = np.asarray(X)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or arr.dtype == bool
    ):
        raise TypeError(f"{name} must be a numeric array; got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D [n_samples, n_features]; got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return jnp.asarray(arr, dtype)


def as_labels(y, n, name="y"):
    """Validate binary labels of length ``n``; return (bool positives, classes)."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"X and {name} have mismatched lengths: {n} and {arr.shape[0]}.")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty.")
    positive = validation.binary_labels(arr, name)
    classes = np.unique(arr)
    if classes.shape[0] != 2:
        raise ValueError(
            f"{name} must contain two classes (positives and negatives); got only "
            f"{classes.tolist()}."
        )
    return positive, classes


def as_label_matrix(Y, n, name="y"):
    """Validate 1-D binary labels or a 2-D ``[n, T]`` matrix of binary tasks.

    Returns:
        ``(positive [T, n] bool, classes [2], multi_output)``; ``multi_output``
        is True for 2-D input (one ranker per column).

    Raises:
        ValueError: not 1-D/2-D, length mismatch, empty, non-binary labels,
            a column with a single class, or columns with different label
            sets (e.g. ``{0, 1}`` and ``{-1, 1}``).
    """
    arr = np.asarray(Y)
    if arr.ndim == 1:
        positive, classes = as_labels(arr, n, name)
        return positive[None], classes, False
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1-D or 2-D [n_samples, n_tasks]; got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"X and {name} have mismatched lengths: {n} and {arr.shape[0]}.")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no task columns; got shape {arr.shape}.")
    positive, classes = [], None
    for t in range(arr.shape[1]):
        try:
            pos, cls = as_labels(arr[:, t], n, f"{name}[:, {t}]")
        except ValueError as e:
            raise ValueError(f"task column {t}: {e}") from None
        if classes is not None and not np.array_equal(cls, classes):
            raise ValueError(
                f"all task columns of {name} must use the same two label values; column "
                f"0 has {classes.tolist()} and column {t} has {cls.tolist()}."
            )
        classes = cls
        positive.append(pos)
    return np.stack(positive), classes, True


def check_C(C, name="C"):
    if isinstance(C, bool) or not isinstance(C, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number; got {type(C).__name__}.")
    if not np.isfinite(C) or C <= 0:
        raise ValueError(f"{name} must be a finite number > 0; got {C!r}.")


# ---------------------------------------------------------------------------
# The one jitted fit.
# ---------------------------------------------------------------------------

# Plane cache of the solver by loss: (cached planes, pairwise steps per oracle
# call). The binary SVM's sum of per-sample hinges needs many planes at the
# optimum, and with 32/32 the cached-plane QP is solved too loosely (20
# Newsgroups, 1000 posts, C=10: 20000 oracle calls unconverged vs 237 with
# 128/512); AP-SVM needed the same number of oracle calls either way and 32/32
# is faster per call. APPX's constraints are a HingeBlock (not planes), so its
# planes are AP planes only.
PLANE_CACHE = {"ap": (32, 32), "zero_one": (128, 512), "appx": (32, 32)}


def plane_cache(loss, cache=None, inner_steps=None):
    """``(cache, inner_steps)`` for ``loss``: the given values or the defaults.

    Raises:
        ValueError: unknown ``loss``.
    """
    if loss not in PLANE_CACHE:
        raise ValueError(f"loss must be one of {tuple(PLANE_CACHE)}; got {loss!r}.")
    c, i = PLANE_CACHE[loss]
    return (c if cache is None else int(cache), i if inner_steps is None else int(inner_steps))


# Slots per device of the batched kernels: 32 was the fastest of 8/16/32 in
# bench/sweep.py on 2 CPU cores; the plane caches of the slots (``(cache + 1)
# * dim`` floats each) are kept under this many bytes per device.
DEFAULT_BATCH_SIZE = 32
_SLOT_CACHE_BYTES = 2**28



def _progress(it, obj, dual):
    it = int(it)
    if it == 1 or it % 25 == 0:
        gap = float(obj) - float(dual)
        print(
            f"  iter {it:5d}  objective {float(obj):.6g}  dual {float(dual):.6g}  "
            f"gap {gap / max(abs(float(obj)), 1e-30):.2e}",
            flush=True,
        )


def make_oracle(loss, positive, valid, *, kp, method, pos_weight):
    """Loss-augmented inference for fixed labels: ``scores -> MostViolated``.

    ``loss`` (static) is ``"ap"`` (AP-SVM, eq. (4)) or ``"zero_one"`` (binary
    SVM hinge).
    """
    if loss == "ap":
        return lambda s: inference.ap_most_violated_masked(
            s, positive & valid, ~positive & valid, kp=kp, method=method
        )
    if loss == "zero_one":
        return lambda s: inference.zero_one_core(s, positive, valid, pos_weight)
    raise ValueError(f"loss must be 'ap' or 'zero_one'; got {loss!r}.")


@functools.partial(
    jax.jit,
    static_argnames=(
        "loss",
        "kp",
        "method",
        "pos_weight",
        "max_iter",
        "fit_intercept",
        "verbose",
        "cache",
        "inner_steps",
    ),
)
def fit_linear(
    X,
    positive,
    valid,
    C,
    tol,
    *,
    loss,
    kp,
    method="select",
    pos_weight=1.0,
    max_iter=1000,
    fit_intercept=False,
    verbose=False,
    cache=None,
    inner_steps=None,
):
    """One jitted fit of a linear structural SVM (the path every model uses).

    Args:
        X: ``[n, d]`` float array or BCOO matrix.
        positive: ``[n]`` bool, True for positives.
        valid: ``[n]`` bool, the samples used (e.g. a CV training fold).
        C: ``[]`` float ``> 0`` (traced: ``vmap`` over it for a grid).
        tol: ``[]`` relative duality gap to stop at.
        loss: static ``"ap"`` or ``"zero_one"``.
        kp: static upper bound on the number of valid positives.
        method: static AP inference method.
        pos_weight: static weight of positives for the hinge loss.
        max_iter: static bound on calls of loss-augmented inference.
        fit_intercept: static, add a regularised constant feature.
        verbose: static, print progress every 25 iterations.
        cache: static number of cached planes of :func:`fit_ssvm` (``None``:
            ``PLANE_CACHE[loss]``, 32 for ``"ap"``, 128 for ``"zero_one"``).
        inner_steps: static cached-plane steps per oracle call (``None``: 32
            for ``"ap"``, 512 for ``"zero_one"``).

    Returns:
        :class:`jaxrank.solvers.FitResult`.
    """
    cache, inner_steps = plane_cache(loss, cache, inner_steps)
    oracle = make_oracle(loss, positive, valid, kp=kp, method=method, pos_weight=pos_weight)
    return fit_ssvm(
        oracle,
        X,
        C=C,
        tol=tol,
        max_iter=max_iter,
        fit_intercept=fit_intercept,
        callback=_progress if verbose else None,
        cache=cache,
        inner_steps=inner_steps,
    )


@functools.partial(
    jax.jit,
    static_argnames=("loss", "kp", "method", "pos_weight", "max_iter", "fit_intercept",
                     "cache", "inner_steps", "batch_size", "devices", "progress"),
)
def fit_linear_many(
    X,
    positive,
    valid,
    C,
    tol,
    *,
    loss,
    kp,
    method="select",
    pos_weight=1.0,
    max_iter=1000,
    fit_intercept=False,
    cache=None,
    inner_steps=None,
    batch_size=DEFAULT_BATCH_SIZE,
    devices=None,
    progress=False,
):
    """``M`` fits of :func:`fit_linear` in one jitted call (work queues).

    Runs :func:`jaxrank.solvers.fit_ssvm_many`: ``batch_size`` fits at a time
    per device, ``vmap``-ed, each slot refilled with the next problem as soon
    as its fit stops; every fit equals :func:`fit_linear` run alone (up to
    float rounding of batched products).

    Args:
        X: ``[n, d]`` float array or BCOO matrix, shared by all fits.
        positive: ``[M, n]`` bool labels, one row per fit (e.g. per task).
        valid: ``[M, n]`` bool masks of the samples used (e.g. CV training folds).
        C: ``[M]`` float, one trade-off per fit.
        tol: ``[]`` relative duality gap.
        loss, kp, method, pos_weight, max_iter, fit_intercept, cache,
            inner_steps: static, as in :func:`fit_linear`; ``kp`` bounds the
            positives of every fit.
        batch_size: static number of fits stepped together per device.
        devices: static tuple of devices to shard the fits over (``None``:
            the default device).
        progress: static; report stopped fits to :func:`progress_hook`.

    Returns:
        :class:`jaxrank.solvers.FitResult` with a leading ``[M]`` axis.
    """

    cache, inner_steps = plane_cache(loss, cache, inner_steps)

    def oracle(prob, s):
        pos, val = prob
        return make_oracle(loss, pos, val, kp=kp, method=method, pos_weight=pos_weight)(s)

    return fit_ssvm_many(
        oracle, X, (positive, valid), C, tol=tol, max_iter=max_iter,
        batch_size=batch_size, devices=devices, fit_intercept=fit_intercept, cache=cache,
        inner_steps=inner_steps, callback=report_progress if progress else None,
    )


# Host-side progress of batched fits: the jitted kernels call the static
# function ``report_progress`` (so a new hook never recompiles them), which
# forwards to the hook installed by ``progress_hook``.
_PROGRESS_HOOKS = []


def report_progress(n_stopped):
    """Forward ``n_stopped`` finished fits to the innermost :func:`progress_hook`."""
    if _PROGRESS_HOOKS:
        _PROGRESS_HOOKS[-1](int(n_stopped))


class progress_hook:
    """Context manager: ``hook(n)`` is called as batches of fits stop.

    Used with the ``progress=True`` kernels (:func:`fit_linear_many`,
    :func:`jaxrank.sweep`), e.g. to advance a ``tqdm`` bar by ``n``.
    """

    def __init__(self, hook):
        self.hook = hook

    def __enter__(self):
        _PROGRESS_HOOKS.append(self.hook)
        return self

    def __exit__(self, *exc):
        _PROGRESS_HOOKS.remove(self.hook)
        return False


def resolve_devices(devices):
    """Static device tuple for the batched kernels.

    ``None`` means every local device of the default backend (on a CPU
    these are ``jax_num_cpu_devices`` virtual devices, one by default).

    Raises:
        TypeError: ``devices`` is not ``None`` or a sequence of devices.
        ValueError: an empty sequence.
    """
    if devices is None:
        return tuple(jax.local_devices())
    if isinstance(devices, jax.Device):
        return (devices,)
    try:
        devs = tuple(devices)
    except TypeError:
        raise TypeError(
            f"devices must be None or a sequence of jax devices; got {type(devices).__name__}."
        ) from None
    if not devs:
        raise ValueError("devices is empty; pass None for the default devices.")
    if not all(isinstance(d, jax.Device) for d in devs):
        raise TypeError("devices must contain jax.Device objects (e.g. jax.devices()).")
    return devs


def choose_batch_size(batch_size, n_fits, dim, n_devices, cache=128):
    """Validate ``batch_size``, or choose it (``None``) for the batched kernels.

    ``None`` gives ``DEFAULT_BATCH_SIZE`` slots per device, fewer when the
    ``n_fits`` fits do not fill them (``ceil(n_fits / n_devices)``) or when
    the slots' plane caches (``batch_size * (cache + 1) * dim * 4`` bytes)
    would exceed 256 MB per device (high-dimensional ``X``).

    Returns:
        int ``>= 1``.

    Raises:
        TypeError: ``batch_size`` is not ``None`` or an int.
        ValueError: ``batch_size < 1``.
    """
    if batch_size is None:
        per_device = -(-int(n_fits) // max(int(n_devices), 1))
        memory = _SLOT_CACHE_BYTES // (4 * (cache + 1) * max(int(dim), 1))
        return int(max(1, min(DEFAULT_BATCH_SIZE, per_device, memory)))
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError(
            f"batch_size must be None or an int >= 1; got {type(batch_size).__name__}."
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be None or an int >= 1; got {batch_size}.")
    return int(batch_size)


# ---------------------------------------------------------------------------
# Estimators.
# ---------------------------------------------------------------------------


class _LinearRanker(ClassifierMixin, BaseEstimator):
    """Shared fit/predict logic of the linear structural SVMs."""

    _loss = None  # "ap" or "zero_one"

    def _fit_options(self):
        raise NotImplementedError

    def _validate_params(self):
        check_C(self.C)
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"max_iter must be an int >= 1; got {self.max_iter!r}.")
        if not np.isfinite(self.tol) or self.tol < 0:
            raise ValueError(f"tol must be a finite number >= 0; got {self.tol!r}.")

    def _fit_batch(self, Xj, positive, opts):
        """Fit one model per row of ``positive`` ``[T, n]``; returns FitResult [T]."""
        kp = max(int(positive.sum(axis=1).max()), 1) if self._loss == "ap" else 1
        common = dict(loss=self._loss, kp=kp, max_iter=int(self.max_iter), **opts)
        C = jnp.asarray(self.C, jnp.float32)
        tol = jnp.asarray(self.tol, jnp.float32)
        if positive.shape[0] == 1:
            res = fit_linear(
                Xj, jnp.asarray(positive[0]), jnp.ones(positive.shape[1:], bool), C, tol,
                verbose=bool(self.verbose), **common,
            )
            return jax.tree_util.tree_map(lambda a: a[None], res)
        T = positive.shape[0]
        devices = resolve_devices(None)
        return fit_linear_many(
            Xj, jnp.asarray(positive), jnp.ones(positive.shape, bool),
            jnp.full((T,), C), tol, devices=devices,
            batch_size=choose_batch_size(None, T, Xj.shape[1] + 1, len(devices),
                                     plane_cache(self._loss)[0]), **common,
        )

    def fit(self, X, y):
        """Fit the model; with a 2-D ``y``, one ranker per column (one call).

        Args:
            X: ``[n_samples, n_features]`` dense array or ``scipy.sparse``
                matrix (kept sparse; see :func:`as_features`).
            y: ``[n_samples]`` binary labels, ``{0,1}``, ``{-1,1}`` or bool; or
                ``[n_samples, n_tasks]`` with one binary task per column (all
                columns with the same two label values). The ``T`` fits run
                vmapped in one jitted call (``kp`` = most positives of a task).

        Returns:
            self

        Raises:
            ValueError: bad ``C``/``max_iter``/``tol``, NaN/inf or empty ``X``,
                mismatched lengths, non-binary or single-class ``y`` (or a
                single-class task column).
            TypeError: non-numeric ``X`` or ``y``.
        """
        self._validate_params()
        Xj = as_features(X)
        positive, classes, multi = as_label_matrix(y, Xj.shape[0])
        opts = self._fit_options()
        t0 = time.perf_counter()
        if self.verbose:
            print(
                f"{type(self).__name__}: n={Xj.shape[0]} d={Xj.shape[1]} "
                f"tasks={positive.shape[0]} positives={positive.sum(axis=1).tolist()} "
                f"C={self.C}",
                flush=True,
            )
        res = self._fit_batch(Xj, positive, opts)
        self._set_fitted(res, classes, multi, Xj.shape[1], opts.get("fit_intercept", False))
        self.fit_time_ = time.perf_counter() - t0
        if self.verbose:
            print(
                f"{type(self).__name__}: {self.n_iter_} iterations, objective "
                f"{self.objective_}, converged={self.converged_}, "
                f"{self.fit_time_:.2f} s",
                flush=True,
            )
        return self

    def _set_fitted(self, res, classes, multi, n_features, fit_intercept):
        """Set the fitted attributes from a FitResult with a leading [T] axis."""
        w = np.asarray(res.w)
        if fit_intercept:
            self.coef_, self.intercept_ = w[:, :-1], np.asarray(w[:, -1])
        else:
            self.coef_, self.intercept_ = w, np.zeros(w.shape[0], w.dtype)
        self.classes_ = classes
        self.n_features_in_ = n_features
        self.multi_output_ = bool(multi)
        pick = (lambda a: np.asarray(a)) if multi else (lambda a: np.asarray(a)[0])
        self.n_iter_ = pick(res.num_steps).astype(int) if multi else int(pick(res.num_steps))
        self.objective_ = pick(res.objective) if multi else float(pick(res.objective))
        self.dual_objective_ = pick(res.dual) if multi else float(pick(res.dual))
        self.converged_ = pick(res.converged) if multi else bool(pick(res.converged))
        return self

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit first."
            )

    def decision_function(self, X):
        """Scores ``X w (+ b)``; higher ranks first.

        Returns:
            ``[n_samples]`` float32, or ``[n_samples, n_tasks]`` for a model
            fitted on a 2-D ``y``.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: wrong number of features, NaN/inf or empty ``X``.
        """
        self._check_fitted()
        Xj = as_features(X)
        if Xj.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {Xj.shape[1]} features, but {type(self).__name__} was fitted "
                f"with {self.n_features_in_}."
            )
        W = jnp.asarray(self.coef_)
        s = np.asarray(Xj @ W.T + jnp.asarray(self.intercept_)[None, :])
        if getattr(self, "multi_output_", False):
            return s
        return s[:, 0]

    def predict(self, X):
        """Class labels by thresholding :meth:`decision_function` at 0."""
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def score(self, X, y, sample_weight=None):
        """Average precision of :meth:`decision_function` on ``(X, y)``.

        For a model fitted on a 2-D ``y``, the mean AP over the task columns.
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        positive, _, multi = as_label_matrix(y, np.shape(X)[0])
        s = self.decision_function(X)
        if not multi:
            return float(average_precision(s, positive[0]))
        if s.ndim != 2 or s.shape[1] != positive.shape[0]:
            raise ValueError(
                f"y has {positive.shape[0]} task columns; the model was fitted with "
                f"{np.shape(self.coef_)[0]}."
            )
        return float(np.mean([average_precision(s[:, t], positive[t])
                              for t in range(positive.shape[0])]))


class APSVM(_LinearRanker):
    r"""AP-SVM (Yue et al. 2007) trained with exact fast loss-augmented inference.

    Minimises eq. (3) of Mohapatra et al. (2014), no intercept (it cancels in
    the joint feature vector)::

        1/2 ||w||^2 + C xi,   xi = max_R Delta(R*, R) - w^T (Psi(X,R*) - Psi(X,R))

    with ``Delta = 1 - AP`` and ``Psi`` normalised by ``1/(|P||N|)`` (eq. (1)),
    by the Pegasos-style solver :func:`jaxrank.solvers.fit_ssvm` (one jitted
    call); ``objective_`` is certified within ``tol`` (relative duality gap)
    of the exact optimum when ``converged_``.

    Relation to SVM-perf / SVM-map's ``-c``: those programs measure the loss in
    percent (``100 Delta``); with the same ``Psi`` their ``-c`` equals
    ``100 * C`` here (and their ``w`` is ``100 w``, the same ranking).

    Args:
        C: regularisation trade-off ``> 0`` of eq. (3).
        inference: ``"select"`` (Algorithm 3, default), ``"search"``
            (Algorithm 2) or ``"greedy"`` (Algorithm 1): all exact.
        max_iter: maximum calls of loss-augmented inference.
        tol: relative duality gap at which to stop (``1e-4``: within 0.01 %).
        verbose: print progress.

    Attributes:
        coef_: ``[1, n_features]`` float32 weights (``[T, n_features]`` after
            ``fit(X, Y)`` with a 2-D ``Y`` of ``T`` task columns; then
            ``n_iter_``, ``objective_``, ``dual_objective_``, ``converged_``
            are ``[T]`` arrays and ``decision_function`` returns ``[n, T]``).
        intercept_: ``[1]`` (``[T]``) zeros (scores are translation invariant for AP).
        classes_: the two label values seen in ``fit``.
        n_iter_: calls of loss-augmented inference.
        objective_: primal objective of eq. (3) at ``coef_``.
        dual_objective_: certified lower bound on the optimum.
        converged_: whether the duality gap reached ``tol``.

    Raises:
        ValueError: in ``fit``, for ``C <= 0``, an unknown ``inference`` and
            the bad inputs listed in :meth:`fit`.

    Examples:
        >>> import jaxrank
        >>> X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
        >>> model = jaxrank.APSVM(C=1.0).fit(X[:500], y[:500])
        >>> 0 <= model.score(X[500:1000], y[500:1000]) <= 1
        True
    """

    _loss = "ap"

    def __init__(self, C=1.0, *, inference="select", max_iter=1000, tol=1e-4, verbose=False):
        self.C = C
        self.inference = inference
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose

    def _fit_options(self):
        if self.inference not in inference.METHODS:
            raise ValueError(
                f"inference must be one of {inference.METHODS}; got {self.inference!r}."
            )
        return {"method": self.inference, "fit_intercept": False}


class BinarySVM(_LinearRanker):
    r"""Linear binary SVM with the hinge loss (the paper's baseline).

    Minimises the objective of ``sklearn.svm.LinearSVC(loss="hinge")``::

        1/2 ||[w, b]||^2 + C sum_i c_i max(0, 1 - y_i (w^T x_i + b))

    (the intercept is a regularised constant feature, as in liblinear;
    ``c_i = pos_weight`` for positives, 1 for negatives), by the same
    Pegasos-style solver as :class:`APSVM` on the 1-slack form.

    Args:
        C: trade-off ``> 0`` (same meaning as in ``LinearSVC``).
        fit_intercept: learn ``b`` (regularised, as liblinear does).
        pos_weight: weight of positives, ``> 0``.
        max_iter: maximum solver iterations (calls of inference).
        tol: relative duality gap at which to stop.
        verbose: print progress.

    Attributes:
        coef_, intercept_, classes_, n_iter_, objective_, dual_objective_,
        converged_: as :class:`APSVM`.

    Raises:
        ValueError: bad ``C``, ``pos_weight`` and the inputs of :meth:`fit`.
    """

    _loss = "zero_one"

    def __init__(
        self,
        C=1.0,
        *,
        fit_intercept=True,
        pos_weight=1.0,
        max_iter=5000,
        tol=1e-4,
        verbose=False,
    ):
        self.C = C
        self.fit_intercept = fit_intercept
        self.pos_weight = pos_weight
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose

    def _fit_options(self):
        check_C(self.pos_weight, "pos_weight")
        return {
            "method": "select",
            "pos_weight": float(self.pos_weight),
            "fit_intercept": bool(self.fit_intercept),
        }
