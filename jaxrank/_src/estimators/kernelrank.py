r"""KernelRank (Gao & Sun 2007), a scikit-learn estimator: smoothed-AUC ascent of a scorer."""

from __future__ import annotations

import math
import time
from numbers import Integral, Real

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from jaxrank._src import validation
from jaxrank._src.estimators.labels import positive_class_text
from jaxrank._src.estimators.side import SideInput
from jaxrank._src.oracles.smoothing import _DEFAULT_BLOCK, KERNELS, _check_kernel
from jaxrank._src.solvers.kernelrank import _fit_gmm, _fit_linear, _gmm_scores_jit, _lda_init

Array = jax.Array


def _binary_y(y, pos_label=None):
    """``(classes_, y01 bool)`` by the label rule of every estimator.

    :func:`jaxrank._src.estimators.base.labels_to_tasks`: exactly two classes,
    ``classes_[1]`` (``pos_label``, else the larger value) is positive; KernelRank fits one task,
    so ``y`` must be 1-D (a column vector is raveled with scikit-learn's
    ``DataConversionWarning`` by ``validate_data``).
    """
    from jaxrank._src.estimators.labels import labels_to_tasks

    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (KernelRank fits one binary task); got shape {y.shape}.")
    positive, classes, _ = labels_to_tasks(y, pos_label=pos_label)
    return classes, positive[0]


def _check_bandwidth(bandwidth):
    """``None`` for ``"auto"``, else the bandwidth, validated after the float32 cast."""
    from jaxrank._src.estimators.checks import check_positive_float32

    if isinstance(bandwidth, str):
        if bandwidth != "auto":
            raise ValueError(
                f"bandwidth must be 'auto' or a number > 0; got {bandwidth!r}."
            )
        return None
    return check_positive_float32(bandwidth, "bandwidth")


def _check_bandwidths(h):
    """The bandwidth(s) actually used (base x multiplier), as float32, validated.

    Raises:
        ValueError: a bandwidth that is not finite and > 0 in float32 (e.g. a
            huge ``bandwidth_grid`` multiplier).
    """
    with np.errstate(over="ignore", under="ignore"):
        h32 = np.asarray(h, np.float32)
    bad = ~(np.isfinite(h32) & (h32 >= np.finfo(np.float32).tiny))
    if np.any(bad):
        raise ValueError(
            "the bandwidth used (the base bandwidth times the bandwidth_grid multiplier) "
            f"must be a finite number > 0 in float32; got {np.asarray(h)[bad].tolist()[:4]}."
        )
    return jnp.asarray(h32)


def _check_grid(grid):
    if grid is None:
        return None
    g = np.asarray(grid, np.float64).ravel()
    if g.size == 0 or not np.all(np.isfinite(g) & (g > 0)):
        raise ValueError(
            f"bandwidth_grid must be a non-empty sequence of multipliers > 0; got {grid!r}."
        )
    return g


def _auto_bandwidth(scores, y01, kernel):
    """Default bandwidth of §V-C (Gao & Sun) from the initial model's scores.

    Gaussian: ``sigma`` = standard deviation of the pair margins
    ``s_i - s_j`` over all (positive, negative) pairs, which equals
    ``sqrt(var(s+) + var(s-))`` (no pairs formed). Sigmoid-like and sigmoid:
    ``alpha = 1 / mean |s|``, so ``h = mean |s|``.
    """
    s = np.asarray(scores, np.float64)
    if kernel == "gaussian":
        h = math.sqrt(np.var(s[y01]) + np.var(s[~y01]))
    else:
        h = float(np.mean(np.abs(s)))
    return h if np.isfinite(h) and h > 0 else 1.0


def _feature_scale(X):
    """Power of two nearest the RMS of the stored values of ``X`` (1 if all zero).

    Computed without overflow (values are divided by ``max |X|`` first).
    """
    import scipy.sparse as sp

    vals = np.asarray(X.data if sp.issparse(X) else X).ravel()
    vals = vals[vals != 0]
    if vals.size == 0:
        return 1.0
    m = float(np.max(np.abs(vals)))
    rms = m * math.sqrt(float(np.mean(np.square(vals / np.float32(m), dtype=np.float64))))
    return float(2.0 ** round(math.log2(rms)))


def _scaled(X, factor):
    """``X * factor`` in float32 (``factor`` a power of two: exact barring under/overflow)."""
    import scipy.sparse as sp

    if sp.issparse(X):
        X = X.astype(np.float64) * factor
        return X.astype(np.float32)
    return (np.asarray(X, np.float64) * factor).astype(np.float32)


def _split_train_val(y01, frac, rng):
    """Stratified split: boolean mask of the validation items."""
    val = np.zeros(len(y01), bool)
    for cls in (True, False):
        idx = np.flatnonzero(y01 == cls)
        k = max(1, int(round(frac * len(idx))))
        if len(idx) - k < 1:
            raise ValueError(
                "bandwidth_grid needs at least 2 samples of each class in y "
                "(one to fit, one to validate)."
            )
        val[rng.choice(idx, k, replace=False)] = True
    return val


def _as_matrix(X, shape=None):
    """scipy.sparse -> BCOO (never densified); dense -> jnp float32 array.

    ``shape`` (``>= X.shape``) pads with zero rows and columns. Small sparse
    matrices (at most 2^16 padded entries) are densified, as in the
    structured SVMs' ``fit`` (:meth:`jaxrank._src.layout.Design.padded`).
    """
    import scipy.sparse as sp

    shape = tuple(X.shape) if shape is None else tuple(shape)
    if sp.issparse(X) and shape[0] * shape[1] <= 2**16:
        X = X.toarray()  # small: dense is faster and shares the dense program
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32)
        X.sum_duplicates()
        B = jsparse.BCOO.from_scipy_sparse(X)
        return jsparse.BCOO((B.data, B.indices), shape=shape)
    X = jnp.asarray(X, jnp.float32)
    return jnp.pad(X, [(0, shape[0] - X.shape[0]), (0, shape[1] - X.shape[1])])


def _linear_problem(X, y01, w0, devices=None):
    """``(X, pos, neg, w0)`` for :func:`_fit_linear`, padded to shape buckets.

    Rows and columns are padded as in the structured SVMs' ``fit``
    (:func:`jaxrank._src.layout.fit_buckets`), so that fits of nearby sizes
    share one compiled program: padding rows are in neither ``pos`` nor
    ``neg``, padding columns are zero (their weights get a zero gradient and
    stay 0). With ``devices`` (a tuple of several, dense ``X``) the rows are
    also padded to a multiple of their number and sharded over them
    (:func:`jaxrank._src.solvers.run.shard_rows`).
    """
    from jaxrank._src.layout import Design, fit_buckets
    from jaxrank._src.solvers.run import shard_rows

    n, d = X.shape
    n_pad, d_pad, _ = fit_buckets(n, d, 1)
    if devices is not None:
        n_pad = -(-n_pad // len(devices)) * len(devices)
    pos = np.zeros(n_pad, bool)
    pos[:n] = y01
    neg = np.zeros(n_pad, bool)
    neg[:n] = ~y01
    w0 = np.pad(np.asarray(w0, np.float32), (0, d_pad - d))
    Xm = _as_matrix(X, (n_pad, d_pad))
    if devices is not None:
        Xm = shard_rows(Design(Xm), devices).X
    return Xm, jnp.asarray(pos), jnp.asarray(neg), jnp.asarray(w0)


def _hierarchical_init(Z, K, seed):
    """Hierarchical k-means splitting of §V-B: 1 -> 2 -> ... -> K clusters.

    Start from one cluster; at each stage split the cluster with the largest
    within-cluster sum of squares into two (centre +- 0.5 std), and run
    standard k-means from these centres. Returns weights ``[K]``, means
    ``[K, D]`` and variances ``[K, D]`` of the final partition.
    """
    from sklearn.cluster import KMeans

    centres = Z.mean(0, keepdims=True)
    labels = np.zeros(len(Z), int)
    while len(centres) < K:
        sse = np.array(
            [((Z[labels == k] - centres[k]) ** 2).sum() for k in range(len(centres))]
        )
        c = int(np.argmax(sse))
        members = Z[labels == c]
        eps = 0.5 * members.std(0) + 1e-6
        new = np.vstack(
            [np.delete(centres, c, axis=0), centres[c] + eps, centres[c] - eps]
        )
        km = KMeans(len(new), init=new, n_init=1, random_state=seed).fit(Z)
        centres, labels = km.cluster_centers_, km.labels_
    weights = np.array([max(np.mean(labels == k), 1e-3) for k in range(K)])
    var = np.stack(
        [
            Z[labels == k].var(0) if np.sum(labels == k) > 1 else Z.var(0)
            for k in range(K)
        ]
    )
    return weights / weights.sum(), centres, var


def _gmm_ml(Z, K, seed, reg):
    """ML diagonal GMM by EM from the hierarchical split init."""
    from sklearn.mixture import GaussianMixture

    w, m, v = _hierarchical_init(Z, K, seed)
    gm = GaussianMixture(
        K,
        covariance_type="diag",
        weights_init=w,
        means_init=m,
        precisions_init=1 / (v + reg),
        reg_covar=reg,
        max_iter=100,
        random_state=seed,
    ).fit(Z)
    return gm.weights_, gm.means_, gm.covariances_


def _ap(scores, y01):
    from sklearn.metrics import average_precision_score

    return float(average_precision_score(y01, scores))


def _auc(scores, y01):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y01, scores))


# The fitted attributes of each scorer (a fit with the other scorer removes
# them); those a model file must hold are the ones ``_persist`` saves.
_SCORER_ATTRIBUTES = {"linear": ("coef_", "init_coef_", "feature_scale_"),
                      "gmm": ("params_", "ml_params_", "desc_mean_", "desc_scale_")}


class KernelRank(ClassifierMixin, BaseEstimator):
    r"""KernelRank (Gao & Sun 2007): maximise the kernel-smoothed AUC of eq. (11).

    Two scorers:

    * ``scorer="linear"``: the linear discriminant function (LDF) of eq. (19),
      ``f(x) = w^T x``, on ``X [n, d]`` (dense, or scipy.sparse such as tf-idf:
      kept sparse as a ``jax.experimental.sparse.BCOO`` matrix). Started from
      the least-squares / Fisher LDA direction (rescaled so that the pair
      margins have unit standard deviation), then Adam ascent on ``U``.
    * ``scorer="gmm"``: each sample is a set of ``L`` local descriptors of
      dimension ``D``, ``X [n, L, D]`` padded, with ``mask [n, L]``
      (``True`` = real descriptor). ``f`` = average log-likelihood ratio
      (eq. (20)) of a positive and a negative diagonal GMM (eq. (21),
      ``n_components`` = K mixtures), each first fitted by EM (ML) from the
      hierarchical k-means split init of §V-B, then Adam ascent on ``U`` over
      means, log-variances and mixing logits. Descriptors are standardised
      per feature (statistics of the training descriptors) first.

    The whole ascent is one jitted ``lax.scan`` of ``max_iter`` steps. The
    bandwidth (score units; ``sigma`` for the Gaussian kernel, ``1/alpha``
    for the sigmoid-like kernel and the sigmoid) is ``"auto"``: the default
    of §V-C computed from the initial model's training scores (std of the
    pair margins for the Gaussian; mean ``|s|`` for the sigmoid kernels),
    or a number. With ``bandwidth_grid`` (multipliers, e.g. ``[0.1, 0.3, 1,
    3, 10]``, the paper's 0.1-10x range), a stratified 25 % validation split
    picks the multiplier with the best validation AUC (all grid points are
    fitted in one ``vmap``-ed call for the linear scorer), then the model is
    refitted on all the data.

    Args:
        scorer: ``"linear"`` or ``"gmm"``.
        kernel: ``"gaussian"``, ``"sigmoid_like"`` or ``"sigmoid"``.
        bandwidth: ``"auto"`` or a float ``> 0`` (score units).
        bandwidth_grid: ``None`` or a sequence of multipliers ``> 0`` of the
            base bandwidth.
        max_iter: number of Adam steps (int ``>= 0``).
        learning_rate: Adam step size (parameter units per step).
        n_components: mixtures K per class (GMM scorer only).
        init_ridge: LSQR damping (in units of ``X / feature_scale_``) of the
            least-squares / Fisher LDA start of the linear scorer; ``>= 0``.
        block_size: positives per block in the pair sums (memory
            ``O(block_size * n)``).
        random_state: seed for the validation split, k-means and EM.
        verbose: print the bandwidth chosen and the objective.
        devices: ``None`` (one device), an int (the first k local devices)
            or a list of ``jax.Device``: the linear scorer's rows (dense
            ``X``) are padded to a multiple of the device count (padding rows
            are neither positive nor negative) and sharded over the devices;
            XLA splits ``X w`` and ``X^T g`` by rows and gathers the ``[n]``
            scores for the pair sums (docs/multi_device.md). The
            same ascent as on one device, up to float32 summation order.
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        classes_: ``[2]`` the labels; ``classes_[1]`` is the positive class.
        coef_: ``[1, d]`` float32 weights (linear scorer).
        params_: dict of ``mu [2, K, D]``, ``logvar [2, K, D]``, ``logit
            [2, K]`` (GMM scorer; index 0 = positive model, in standardised
            descriptor units).
        ml_params_: the ML (EM) parameters the ascent started from (GMM).
        intercept_: ``[1]`` float, minus the midpoint of the two classes' mean
            training scores: ``predict`` thresholds ``decision_function`` at 0.
        bandwidth_: float, the bandwidth used for the final fit.
        bandwidth_multiplier_: float, the grid multiplier chosen (1.0 without
            a grid).
        init_coef_: ``[1, d]`` the least-squares / LDA start (linear scorer).
        feature_scale_: float, a power of two near the RMS of the stored
            values of ``X`` (linear scorer): the ascent runs on ``X /
            feature_scale_`` (exact in floating point) and ``coef_`` is
            rescaled back, so the fit does not depend on the units of ``X``
            (the same scores for ``X`` and ``2**k X``).
        objective_: float, smoothed training AUC ``U`` at the last step.
        objective_history_: ``[max_iter]`` ``U`` before each step.
        n_iter_: int, number of ascent steps.
        n_features_in_: int, ``d`` (linear) or ``D`` (GMM).

    Raises (in ``fit``):
        ValueError: bad hyperparameters (``bandwidth <= 0``, unknown
            ``kernel``/``scorer``, bad grid); ``X`` with NaN (``X``
            descriptors); ``y`` without exactly two classes; ``mask`` of the
            wrong shape or with an empty bag; ``n_components`` larger than the
            number of descriptors of a class (GMM); a fitted scorer with
            non-finite training scores (float32 overflow); ``devices`` with
            more than one device and sparse ``X`` or ``scorer="gmm"``, or
            devices that :func:`jaxrank._src.solvers.run.resolve_devices` rejects.

    Warns (in ``fit``):
        UserWarning: every training sample gets the same score (the model
            does not rank, e.g. constant features).

    References:
        Gao & Sun, IEEE Trans. Multimedia 2007, eqs. (11), (15)-(21), §V.
    """

    side_input = SideInput("mask", "descriptor_mask", at_predict=True)
    _parameter_constraints = {
        "scorer": [StrOptions({"linear", "gmm"})],
        "kernel": [StrOptions(set(KERNELS))],
        "bandwidth": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "bandwidth_grid": [None, "array-like"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "init_ridge": [Interval(Real, 0, None, closed="left")],
        "block_size": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["boolean"],
        "devices": [None, Interval(Integral, 1, None, closed="left"), list, tuple],
        "pos_label": "no_validation",  # checked against the labels by fit
    }
    # Saved by jaxrank.save besides intercept_, classes_ and n_features_in_
    # (kinds as StructuredSVM._persist): the linear scorer's weights, or the
    # GMM scorer's mixtures and descriptor standardisation.
    _persist = {
        "coef_": ("weights", "Td", None),
        "params_": ("arrays", None, None),
        "ml_params_": ("arrays", None, None),
        "desc_mean_": ("value", "1d", None),
        "desc_scale_": ("value", "1d", "> 0"),
        "bandwidth_": ("value", "T?", "> 0"),
        "objective_": ("trace", "T?", None),
        "n_iter_": ("count", "T?", None),
    }

    def __init__(
        self,
        scorer="linear",
        *,
        kernel="gaussian",
        bandwidth="auto",
        bandwidth_grid=None,
        max_iter=200,
        learning_rate=0.01,
        n_components=4,
        init_ridge=1.0,
        block_size=_DEFAULT_BLOCK,
        random_state=None,
        verbose=False,
        devices=None,
        pos_label=None,
    ):
        self.scorer = scorer
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.bandwidth_grid = bandwidth_grid
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.n_components = n_components
        self.init_ridge = init_ridge
        self.block_size = block_size
        self.random_state = random_state
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    # -- validation ---------------------------------------------------------

    def _check_params(self):
        from jaxrank._src.estimators.checks import check_positive_float32

        self._validate_params()
        if self.scorer not in ("linear", "gmm"):
            raise ValueError(f"scorer must be 'linear' or 'gmm'; got {self.scorer!r}.")
        _check_kernel(self.kernel)
        bw = _check_bandwidth(self.bandwidth)
        grid = _check_grid(self.bandwidth_grid)
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 0:
            raise ValueError(f"max_iter must be an int >= 0; got {self.max_iter!r}.")
        lr = check_positive_float32(self.learning_rate, "learning_rate")
        if not isinstance(self.block_size, (int, np.integer)) or self.block_size < 1:
            raise ValueError(
                f"block_size must be an int >= 1; got {self.block_size!r}."
            )
        r = float(self.init_ridge)
        if not (np.isfinite(r) and r >= 0):
            raise ValueError(f"init_ridge must be >= 0; got {self.init_ridge!r}.")
        if self.scorer == "gmm" and (
            not isinstance(self.n_components, (int, np.integer))
            or self.n_components < 1
        ):
            raise ValueError(
                f"n_components must be an int >= 1; got {self.n_components!r}."
            )
        return bw, grid, lr

    # -- fit ------------------------------------------------------------------

    def fit(self, X, y, *, mask=None):
        """Fit the scorer by maximising the smoothed AUC (eq. (11)).

        Args:
            X: linear: ``[n, d]`` array or scipy.sparse matrix; GMM: ``[n, L,
                D]`` padded descriptors.
            y: ``[n]`` binary labels (any two values; the larger is positive).
            mask: GMM only: optional ``[n, L]`` bool, ``True`` for real
                descriptors (default all ``True``).

        Returns:
            self.

        Raises:
            ValueError: see the class docstring.
        """
        from jaxrank._src.cache import auto_enable

        auto_enable()  # JAX's persistent compilation cache, unless opted out
        t0 = time.perf_counter()
        bw, grid, lr = self._check_params()
        for k in _SCORER_ATTRIBUTES["linear"] + _SCORER_ATTRIBUTES["gmm"]:
            self.__dict__.pop(k, None)  # a refit with the other scorer keeps none of these
        seed = check_random_state(self.random_state).randint(2**31 - 1)
        devices = self._sample_devices(X)
        if self.scorer == "linear":
            if mask is not None:
                raise ValueError("mask is only used with scorer='gmm'; got a mask.")
            X, y = validate_data(
                self,
                validation.check_features(X),
                y,
                accept_sparse=("csr", "csc"),
                dtype=np.float32,
                ensure_all_finite=True,
            )
            self.classes_, y01 = _binary_y(y, self.pos_label)
            # Scale covariance: the fit runs on X / f (f a power of two, the
            # RMS of the stored values: exact in floating point) with weights
            # f w, so Adam's steps and float32 ranges do not depend on the
            # units of X (features near 1e30 or 1e-20 fit like standardised
            # ones); f = 1 for standardised or 0/1 features.
            f = _feature_scale(X)
            self.feature_scale_ = f
            w, bw_used, hist = self._fit_linear_all(_scaled(X, 1 / f), y01, bw, grid, lr, seed,
                                                    devices)
            self.coef_ = _scaled(w[None, :], 1 / f)
            self.init_coef_ = _scaled(self.init_coef_, 1 / f)
            s = self._linear_scores(X)
        else:
            Xd, maskd = self._check_bags(X, mask, reset=True)
            if len(y) != len(Xd):
                raise ValueError(
                    f"X and y must have the same number of samples; got {len(Xd)} "
                    f"and {len(y)}."
                )
            self.classes_, y01 = _binary_y(y, self.pos_label)
            self._check_components(Xd, maskd, y01)
            p, bw_used, hist = self._fit_gmm_all(Xd, maskd, y01, bw, grid, lr, seed)
            self.params_ = {k: np.asarray(v) for k, v in p.items()}
            s = self._gmm_raw_scores(Xd, maskd)
        if not np.all(np.isfinite(s)):
            raise ValueError(
                "KernelRank: the fitted scorer gives non-finite training scores (overflow in "
                "float32); rescale X (e.g. sklearn.preprocessing.StandardScaler) or lower "
                "learning_rate.")
        from jaxrank._src.estimators.checks import warn_tied_scores

        warn_tied_scores(self, s[:, None], np.ones((1, s.shape[0]), bool))
        self.intercept_ = np.array(
            [-0.5 * (s[y01].mean() + s[~y01].mean())], np.float32
        )
        self.bandwidth_ = float(bw_used)
        self.objective_history_ = np.asarray(hist)
        self.objective_ = float(hist[-1]) if len(hist) else float("nan")
        self.n_iter_ = int(self.max_iter)
        self.fit_time_ = time.perf_counter() - t0
        if self.verbose:
            print(
                f"KernelRank[{self.scorer}, {self.kernel}] bandwidth={self.bandwidth_:.4g} "
                f"U: {hist[0] if len(hist) else float('nan'):.4f} -> {self.objective_:.4f} "
                f"({self.fit_time_:.1f}s); "
                f"{positive_class_text(self, self.classes_)}"
            )
        return self

    # linear scorer ----------------------------------------------------------

    def _sample_devices(self, X):
        """The devices to shard the linear scorer's rows over, or ``None`` (one device)."""
        if self.devices is None:
            return None
        from jaxrank._src.solvers.run import resolve_devices

        devices = resolve_devices(self.devices)
        if len(devices) == 1:
            return None
        import scipy.sparse as sp

        if self.scorer != "linear" or sp.issparse(X):
            raise ValueError(
                f"devices={self.devices!r} shards the rows of the linear scorer on dense X; got "
                f"{'scorer=' + repr(self.scorer) if self.scorer != 'linear' else 'sparse X'}. "
                "Pass devices=None (one device).")
        return devices

    def _fit_linear_all(self, X, y01, bw, grid, lr, seed, devices=None):
        rng = np.random.RandomState(seed)
        kw = dict(
            kernel=self.kernel,
            max_iter=int(self.max_iter),
            block_size=int(self.block_size),
        )

        def base_bw(Xs, y, w0):
            if bw is not None:
                return bw
            s0 = np.asarray(Xs @ w0).ravel()
            # The LDF has no bias and AUC is shift-invariant: centre the scores
            # before taking mean |s| (otherwise the offset sets alpha).
            return _auto_bandwidth(s0 - s0.mean(), y, self.kernel)

        if grid is not None and len(grid) > 1:
            val = _split_train_val(y01, 0.25, rng)
            Xt, yt, Xv, yv = X[~val], y01[~val], X[val], y01[val]
            w0 = _lda_init(Xt, yt, ridge=float(self.init_ridge))
            h = base_bw(Xt, yt, w0) * grid
            Xm, pos, neg, w0m = _linear_problem(Xt, yt, w0, devices)
            Wt, _ = jax.vmap(
                lambda hh: _fit_linear(Xm, pos, neg, w0m, hh, lr, **kw)
            )(_check_bandwidths(h))
            Wt = np.asarray(Wt, np.float64)[:, : X.shape[1]]
            sv = np.asarray(Xv @ Wt.T)
            aucs = [_auc(sv[:, k], yv) for k in range(len(grid))]
            mult = float(grid[int(np.argmax(aucs))])
            if self.verbose:
                print(
                    "validation AUC per multiplier:",
                    dict(zip(grid.tolist(), np.round(aucs, 4))),
                )
        else:
            mult = float(grid[0]) if grid is not None else 1.0
        w0 = _lda_init(X, y01, ridge=float(self.init_ridge))
        h = base_bw(X, y01, w0) * mult
        Xm, pos, neg, w0m = _linear_problem(X, y01, w0, devices)
        w, hist = _fit_linear(Xm, pos, neg, w0m, _check_bandwidths(h), lr, **kw)
        self.init_coef_ = np.asarray(w0, np.float32)[None, :]
        self.bandwidth_multiplier_ = mult
        return np.asarray(w, np.float32)[: X.shape[1]], h, hist

    def _linear_scores(self, X):
        return np.asarray(X @ self.coef_[0].astype(np.float64)).ravel()

    # GMM scorer -------------------------------------------------------------

    def _check_bags(self, X, mask, reset):
        X = check_array(validation.check_features(X), allow_nd=True, dtype=np.float32,
                        ensure_all_finite=False)
        if X.ndim != 3:
            raise ValueError(
                f"X must be [n_bags, n_descriptors, n_features] for scorer='gmm'; "
                f"got shape {X.shape}."
            )
        if mask is None:
            mask = np.ones(X.shape[:2], bool)
        mask = np.asarray(mask)
        if mask.shape != X.shape[:2]:
            raise ValueError(f"mask must have shape {X.shape[:2]}; got {mask.shape}.")
        mask = mask.astype(bool)
        if np.any(~np.isfinite(X[mask])):
            bad = int(np.sum(~np.isfinite(X[mask])))
            raise ValueError(
                f"X (descriptors) contains {bad} NaN or infinite value(s)."
            )
        if np.any(mask.sum(1) == 0):
            raise ValueError(
                "mask: every bag needs at least one descriptor; got an empty bag."
            )
        X = np.where(mask[..., None], X, 0).astype(np.float32)
        if reset:
            self.n_features_in_ = X.shape[2]
            Z = X[mask]
            self.desc_mean_ = Z.mean(0)
            self.desc_scale_ = Z.std(0) + 1e-6
        elif X.shape[2] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[2]} descriptor features, but KernelRank was fitted "
                f"with {self.n_features_in_}."
            )
        X = np.where(mask[..., None], (X - self.desc_mean_) / self.desc_scale_, 0)
        return X.astype(np.float32), mask

    def _check_components(self, X, mask, y01):
        K = int(self.n_components)
        for name, cls in (("positive", y01), ("negative", ~y01)):
            count = int(mask[cls].sum())
            if K > count:
                raise ValueError(
                    f"n_components={K} is larger than the {count} descriptors of the "
                    f"{name} class in X (from {int(cls.sum())} bags); each class GMM "
                    "needs at least n_components descriptors."
                )

    def _fit_gmm_all(self, X, mask, y01, bw, grid, lr, seed):
        rng = np.random.RandomState(seed)
        K = int(self.n_components)
        kw = dict(
            kernel=self.kernel,
            max_iter=int(self.max_iter),
            block_size=int(self.block_size),
        )

        def ml(Xs, ms, y):
            comps = [
                _gmm_ml(Xs[ms & y[:, None]], K, seed, 1e-2),
                _gmm_ml(Xs[ms & ~y[:, None]], K, seed, 1e-2),
            ]
            return {
                "mu": jnp.asarray(np.stack([c[1] for c in comps]), jnp.float32),
                "logvar": jnp.asarray(
                    np.log(np.stack([c[2] for c in comps])), jnp.float32
                ),
                "logit": jnp.asarray(
                    np.log(np.stack([c[0] for c in comps])), jnp.float32
                ),
            }

        def base_bw(p, Xs, ms, y):
            if bw is not None:
                return bw
            return _auto_bandwidth(
                np.asarray(_gmm_scores_jit(p, Xs, ms)), y, self.kernel
            )

        if grid is not None and len(grid) > 1:
            val = _split_train_val(y01, 0.25, rng)
            p0 = ml(X[~val], mask[~val], y01[~val])
            h0 = base_bw(p0, X[~val], mask[~val], y01[~val])
            aucs = []
            for m in grid:
                p, _ = _fit_gmm(jnp.asarray(X[~val]), jnp.asarray(mask[~val]),
                                jnp.asarray(y01[~val]), p0, _check_bandwidths(h0 * m), lr, **kw)
                aucs.append(
                    _auc(np.asarray(_gmm_scores_jit(p, X[val], mask[val])), y01[val])
                )
            mult = float(grid[int(np.argmax(aucs))])
            if self.verbose:
                print(
                    "validation AUC per multiplier:",
                    dict(zip(grid.tolist(), np.round(aucs, 4))),
                )
        else:
            mult = float(grid[0]) if grid is not None else 1.0
        p0 = ml(X, mask, y01)
        self.ml_params_ = {k: np.asarray(v) for k, v in p0.items()}
        h = base_bw(p0, X, mask, y01) * mult
        p, hist = _fit_gmm(jnp.asarray(X), jnp.asarray(mask), jnp.asarray(y01), p0,
                           _check_bandwidths(h), lr, **kw)
        self.bandwidth_multiplier_ = mult
        return p, h, hist

    def _gmm_raw_scores(self, X, mask, params=None):
        p = self.params_ if params is None else params
        return np.asarray(
            _gmm_scores_jit({k: jnp.asarray(v) for k, v in p.items()}, X, mask)
        )

    # -- predict --------------------------------------------------------------

    def _required_attributes(self):
        return tuple(k for k in _SCORER_ATTRIBUTES[self.scorer] if k in self._persist)

    def _check_loaded(self, d):
        """Raise ``ValueError`` unless the loaded GMM state fits ``d`` descriptor features."""
        if self.scorer != "gmm":
            return
        K = int(self.n_components)
        want = {"mu": (2, K, d), "logvar": (2, K, d), "logit": (2, K)}
        for name in ("params_", "ml_params_"):
            p = getattr(self, name)
            got = {k: tuple(np.shape(v)) for k, v in p.items()}
            if got != want:
                raise ValueError(f"{name} must hold {want} for n_components={K}; got {got}.")
        for name in ("desc_mean_", "desc_scale_"):
            if np.shape(getattr(self, name)) != (d,):
                raise ValueError(f"{name} must have shape ({d},); got "
                                 f"{np.shape(getattr(self, name))}.")

    def decision_function(self, X, *, mask=None):
        """Ranking scores ``f(x) + intercept_`` (eq. (19) or (20)).

        Args:
            X: as in :meth:`fit`.
            mask: GMM scorer only, as in :meth:`fit`.

        Returns:
            ``[n]`` float64 array; higher = more likely positive.
        """
        check_is_fitted(self)
        if self.scorer == "linear":
            X = validate_data(
                self, validation.check_features(X), accept_sparse=("csr", "csc"),
                dtype=np.float32, reset=False
            )
            s = self._linear_scores(X)
        else:
            Xd, m = self._check_bags(X, mask, reset=False)
            s = self._gmm_raw_scores(Xd, m).astype(np.float64)
        return s + float(self.intercept_[0])

    def ml_decision_function(self, X, *, mask=None):
        """GMM scorer: scores of the ML (EM) starting model (the paper's baseline).

        Returns:
            ``[n]`` float64 average log-likelihood ratios of eq. (20).
        """
        check_is_fitted(self, "ml_params_")
        Xd, m = self._check_bags(X, mask, reset=False)
        return self._gmm_raw_scores(Xd, m, self.ml_params_).astype(np.float64)

    def predict(self, X, *, mask=None):
        """Labels: ``classes_[1]`` where ``decision_function > 0``."""
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X, mask=mask) > 0).astype(int)]

    def score(self, X, y, *, mask=None):
        """Average precision of ``decision_function`` (positive = ``classes_[1]``).

        Returns:
            float in ``[0, 1]``.
        """
        y = np.asarray(y)
        return _ap(self.decision_function(X, mask=mask), y == self.classes_[1])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Linear scorer: scipy.sparse X is kept sparse. One binary task: a
        # 1-D y with two classes (no multiclass, no multi-output).
        tags.input_tags.sparse = self.scorer == "linear"
        tags.input_tags.two_d_array = self.scorer == "linear"
        tags.input_tags.three_d_array = self.scorer == "gmm"
        tags.classifier_tags.multi_class = False
        tags.target_tags.multi_output = False
        return tags
