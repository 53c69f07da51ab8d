r"""High-order rankers as scikit-learn estimators: HOBSVM, HOAPSVM (Dokania et al., ECCV 2014)."""

from __future__ import annotations

import dataclasses
import time
from numbers import Integral, Real

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from jaxrank._src import validation
from jaxrank._src.estimators.base import CCCP_ATTRIBUTES, StructuredSVM
from jaxrank._src.estimators.checks import (
    DEVICES_CONSTRAINT,
    check_feature_scale,
    check_positive_float32,
    warn_tied_scores,
    warn_unconverged,
)
from jaxrank._src.estimators.labels import labels_to_tasks, positive_class_text
from jaxrank._src.estimators.side import SideInput
from jaxrank._src.layout import design
from jaxrank._src.metrics import average_precision
from jaxrank._src.models.high_order import (
    GRAPH_METHODS,
    GraphData,
    HighOrderFeatures,
    HOAPModel,
    HOAPProblem,
    HOBModel,
    HOBProblem,
    _easiest_positives,
    _linearise,
    _mm_scores,
    pairwise_design,
)
from jaxrank._src.oracles import maxflow as G
from jaxrank._src.oracles.ap import METHODS as AP_METHODS
from jaxrank._src.solvers.cccp import cccp, cccp_update
from jaxrank._src.solvers.run import (
    resolve_devices,
    shard_rows,
)


class _HighOrderSVM(StructuredSVM):
    """What HOB-SVM and HOAP-SVM share: edges, data, fitted attributes, scores."""

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "eta": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
        "max_enum": [Interval(Integral, 1, G.MAX_ENUM, closed="both")],
        "graph_method": [StrOptions(set(GRAPH_METHODS))],
        **DEVICES_CONSTRAINT,
    }
    side_input = SideInput("edges", "edges", required=True, at_predict=True)
    _host_callbacks = True  # graph cuts through pure_callback
    _persist = {**StructuredSVM._persist, "pairwise_coef_": ("weights", "Td", "<= 0"),
                "pairwise_intercept_": ("weights", "T", "<= 0")}

    # -- checks and data ------------------------------------------------------

    def _check_params(self):
        if isinstance(self.eta, Real) and not isinstance(self.eta, bool) and self.eta < 0:
            raise ValueError(f"eta must be >= 0 (the weight of the pairwise part); got "
                             f"{self.eta!r}.")
        super()._check_params()
        if not np.isfinite(np.float32(self.eta)):
            raise ValueError(f"eta must be finite in float32; got {self.eta!r}.")

    def _features(self):
        return HighOrderFeatures(eta=float(self.eta), intercept=bool(self.fit_intercept))

    def _graph_data(self, X, edges, n):
        """``GraphData`` from validated ``X`` and raw ``edges`` (no edges when ``eta = 0``)."""
        e = G.check_edges(edges, n)
        if float(self.eta) == 0:
            e = e[:0]
        lay = G.graph_layout(n, e, max_enum=int(self.max_enum), method=self.graph_method)
        Gd = pairwise_design(X, np.asarray(lay.edges), dtype=np.float32)
        return GraphData(design(X), Gd, lay)

    def _prepare(self, X, y, edges, reset=True):
        """Validate ``(X, y, edges)``; the side input (``side_input``) is the graph."""
        if edges is None:
            raise TypeError(f"{type(self).__name__} needs edges=[m, 2] (pairs of similar "
                            "samples) or an [n, n] adjacency matrix.")
        X, Y = validate_data(self, validation.check_features(X), y, accept_sparse="csr",
                             dtype=np.float32,
                             multi_output=True, reset=reset, y_numeric=False)
        positive, classes, multi = labels_to_tasks(Y, pos_label=getattr(self, "pos_label", None))
        return self._graph_data(X, edges, X.shape[0]), positive, classes, multi, None

    def _width(self, data):
        return data.X.shape[1] + int(bool(self.fit_intercept))

    def _queue_devices(self, data, devices):
        """One queue: on the mesh of rows sharded by ``devices=`` (``_sharded``),
        else on one device (the graph cuts' host callbacks run one after the
        other anyway)."""
        rows = data.X.X
        sharded = isinstance(rows, jax.Array) and len(rows.sharding.device_set) > 1
        return None if sharded else resolve_devices(1)

    def _cut_method(self):
        return "auto" if self.graph_method in ("auto", "enumerate") else self.graph_method

    # -- fit ------------------------------------------------------------------

    def fit(self, X, y, *, edges):
        """Fit on samples ``X`` with the pairs of similar samples ``edges``.

        Args:
            X: ``[n, d]`` dense array or ``scipy.sparse`` matrix (kept sparse).
            y: ``[n]`` labels with two values (the larger is positive) or
                ``[n, T]`` binary task columns (one model per column).
            edges: ``[m, 2]`` integer sample indices (module docstring:
                undirected, repeats merged), or a ``scipy.sparse`` ``[n, n]``
                0/1 adjacency matrix of the samples.

        Returns:
            self

        Raises:
            ValueError: bad hyperparameters (``eta < 0``, ``C <= 0``, ...),
                bad ``X``/``y`` (as :meth:`jaxrank.StructuredSVM.fit`), edges
                naming a missing sample, self-loops, edges not ``[m, 2]``.
            TypeError: missing ``edges``, non-integer edges.
        """
        self._check_params()
        t0 = time.perf_counter()
        devices = self._fit_devices()
        data, positive, classes, multi, _ = self._prepare(X, y, edges)
        # The unary rows bound the float32 range as for every structured SVM
        # (the pairwise features exp(-(z_i - z_j)^2) lie in [0, 1]).
        R = data.X.max_row_norm()
        check_feature_scale(R, float(self.C))
        self._fit_scale = (R, float(self.C))
        where = np.ones(positive.shape, bool)
        train = data
        if devices is not None and len(devices) > 1:
            train, positive_t, where_t = self._sharded(data, positive, edges, devices)
        else:
            positive_t, where_t = positive, where
        problems, static = self._problems(train, positive_t, where_t, None)
        model = self._model(static)
        T = positive.shape[0]
        if self.verbose:
            print(f"{type(self).__name__}: n={data.shape[0]} d={data.shape[1]} "
                  f"edges={data.layout.m} tasks={T} {data.layout} C={self.C} eta={self.eta}; "
                  f"{positive_class_text(self, classes)}", flush=True)
        C = jnp.full((T,), self.C, jnp.float32)
        res, extras = self._train(model, train, problems, C, single=(T == 1))
        res = jax.tree_util.tree_map(np.asarray, res)
        self._set_fitted(res, extras, classes, multi, data, positive)
        self.fit_time_ = time.perf_counter() - t0
        warn_unconverged(self, res)
        if not np.any(self.pairwise_coef_):
            # No pairwise term: the ranking is the unary scores', so tied
            # unary training scores mean the model does not rank.
            S = np.asarray(data.X @ jnp.asarray(self.coef_.T), np.float32)
            S = S + np.asarray(self.intercept_, np.float32)[None, :]
            warn_tied_scores(self, S, where, R, float(self.C))
        return self

    def _sharded(self, data, positive, edges, devices):
        """``(data, positive, where)`` with the sample rows sharded over ``devices``.

        The ``n`` samples are padded to a multiple of ``len(devices)`` with
        zero rows that are isolated nodes of the graph and outside ``where``
        (no loss, no score in any ranking); the unary rows of ``X`` are sharded
        over the devices (XLA splits the products; the graph cuts run on the
        host on the gathered scores).

        Raises:
            ValueError: sparse ``X``.
        """
        if data.X.sparse:
            raise ValueError(
                f"devices={self.devices!r} shards the samples of dense X; got sparse X. Pass "
                "devices=None (one device), or X.toarray().")
        n, d = data.shape
        k = len(devices)
        n_pad = -(-n // k) * k
        X = np.zeros((n_pad, d), np.float32)
        X[:n] = np.asarray(data.X.X)
        padded = self._graph_data(X, edges, n_pad)
        padded = GraphData(shard_rows(padded.X, devices), padded.G, padded.layout)
        pos = np.zeros((positive.shape[0], n_pad), bool)
        pos[:, :n] = positive
        where = np.zeros_like(pos)
        where[:, :n] = True
        return padded, pos, where

    def _set_fitted(self, res, extras, classes, multi, data, positive, where=None):
        W = np.asarray(res.w, np.float32)
        d = data.shape[1]
        feats = self._features()
        k = d + int(feats.intercept)
        wp, wn, w2 = W[:, :k], W[:, k:2 * k], W[:, 2 * k:3 * k]
        v = wp - wn
        self.coef_ = v[:, :d].copy()
        self.intercept_ = (v[:, d] if feats.intercept else np.zeros(W.shape[0])).astype(
            np.float32)
        self.pairwise_coef_ = (feats.eta * w2[:, :d]).astype(np.float32)
        self.pairwise_intercept_ = (feats.eta * w2[:, d] if feats.intercept
                                    else np.zeros(W.shape[0])).astype(np.float32)
        self._set_solver_attributes(res, extras, classes, multi, d)
        return self

    def _scores(self, W, data):
        """``[n, M]`` max-marginal differences (eq. (11)) of weights ``W [M, dim]``.

        Every sample of the graph is scored, with every edge (a validation
        fold of whole connected components is scored on its own components).
        """
        W = jnp.asarray(W, jnp.float32)
        where = jnp.ones((W.shape[0], data.shape[0]), bool)
        return _mm_scores(W, data, where, features=self._features(),
                          graph_method=self._cut_method()).T

    # -- prediction -------------------------------------------------------------

    def _weights_as_w(self):
        """``[T, 3 d']`` weights whose max-marginal differences equal the fitted model's."""
        feats = self._features()
        T, d = self.coef_.shape
        k = d + int(feats.intercept)
        W = np.zeros((T, 3 * k), np.float32)
        W[:, :d] = self.coef_
        W[:, 2 * k:2 * k + d] = self.pairwise_coef_
        if feats.intercept:
            W[:, d] = self.intercept_
            W[:, 2 * k + d] = self.pairwise_intercept_
        return W, HighOrderFeatures(eta=1.0, intercept=feats.intercept)

    def decision_function(self, X, *, edges):
        """Max-marginal differences ``s_i = m_i^+ - m_i^-`` (eq. (11)); higher ranks first.

        Args:
            X: ``[n, d]`` samples (dense or ``scipy.sparse``).
            edges: ``[m, 2]`` pairs of similar samples among them (or a
                ``scipy.sparse`` ``[n, n]`` 0/1 adjacency matrix).

        Returns:
            ``[n]`` float32 (``[n, T]`` for a model fitted on a 2-D ``y``).
            Without intercept-free ties, ``s_i > 0`` iff the MAP labeling puts
            ``x_i`` in the positive class.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: bad ``X`` or ``edges`` (as in :meth:`fit`).
        """
        check_is_fitted(self)
        X = validate_data(self, validation.check_features(X), accept_sparse="csr",
                          dtype=np.float32, reset=False)
        data = self._graph_data(X, edges, X.shape[0])
        W, feats = self._weights_as_w()
        where = np.ones((W.shape[0], X.shape[0]), bool)
        s = np.asarray(_mm_scores(jnp.asarray(W), data, jnp.asarray(where), features=feats,
                                  graph_method=self._cut_method())).T
        return s if self.multi_output_ else s[:, 0]

    def predict(self, X, *, edges):
        """``classes_[1]`` where :meth:`decision_function` ``> 0`` (the MAP labeling)."""
        return self.classes_[(self.decision_function(X, edges=edges) > 0).astype(int)]

    def score(self, X, y, sample_weight=None, *, edges):
        """Average precision of :meth:`decision_function` (mean over task columns)."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        check_is_fitted(self)
        Y = np.asarray(y)
        Y2 = Y[:, None] if Y.ndim == 1 else Y
        unknown = np.setdiff1d(np.unique(Y2), self.classes_)
        if unknown.size:
            raise ValueError(f"y has labels {unknown.tolist()[:6]} that are not among the "
                             f"model's classes_ {self.classes_.tolist()}.")
        s = np.asarray(self.decision_function(X, edges=edges), np.float32)
        s = s[:, None] if s.ndim == 1 else s
        return float(np.mean([average_precision(s[:, t], Y2[:, t] == self.classes_[1])
                              for t in range(Y2.shape[1])]))


class HOBSVM(_HighOrderSVM):
    r"""High-order binary SVM (Dokania et al., ECCV 2014, §3, problem (8)).

    Minimises, with ``w2 <= 0`` (kept by the solver)::

        1/2 ||w||^2 + C max_Y [Delta(Y*, Y) - w . (Psi(X, Y*) - Psi(X, Y))]

    with the unary and pairwise joint feature vector (4)-(5) (module
    :mod:`jaxrank._src.models.high_order` docstring) and the weighted 0-1 loss (7).
    Loss-augmented inference is one MAP (enumeration of small components,
    one graph cut for the large ones, :mod:`jaxrank.graph`); samples are
    ranked by the difference of their max-marginals (eq. (11)).

    With ``eta = 0`` it is a binary SVM with positive weight ``J`` on the
    rows ``psi(x_k) / a_k`` (module docstring), the paper's "SVM" baseline.

    Args:
        C: trade-off ``> 0``. The joint feature vector sums over samples, so the
            useful ``C`` is small: with ``eta = 0`` and ``J = |N|/|P|`` this is a
            binary SVM on unit-scale rows with ``C_svm ~ 4 C |P|^2 / |N|``
            (module docstring). Default ``1e-3``; the default grid
            ``_default_Cs`` spans ``1e-5``-``1e-2``.
        eta: weight ``>= 0`` of the pairwise part (5); ``0`` ignores the edges.
        J: weight of a missed positive relative to a false positive in (7);
            ``None`` (default): ``|N| / |P|`` of each task.
        fit_intercept: add the constant feature to ``psi`` (unary offset and a
            uniform pairwise strength).
        max_enum: components of at most this many samples are solved by
            enumeration (``1..16``), larger ones by graph cuts.
        graph_method: ``"auto"`` (C graph cuts for large components),
            ``"enumerate"``, ``"bk"``, ``"python"``, ``"ortools"`` or
            ``"pymaxflow"`` (:func:`jaxrank.graph.max_marginals`).
        max_iter: maximum solver iterations.
        tol: relative duality gap at which to stop.
        verbose: print progress.
        devices: ``None`` (one device), an int (the first k local devices) or
            a list of ``jax.Device``: the samples (dense ``X``) are padded to
            a multiple of the device count with isolated, masked-out nodes
            and their rows are sharded over the devices; XLA splits the
            products, and the graph cuts run on the host on the gathered
            scores (they dominate a fit, so the gain is in memory more than
            time).
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        coef_: ``[1, n_features]`` unary ranking direction ``w+ - w-`` (``[T,
            n_features]`` for a 2-D ``y``).
        intercept_: ``[1]`` unary offset (``[T]``).
        pairwise_coef_: ``[1, n_features]`` ``eta w2 <= 0``: the weight of an
            edge is ``pairwise_intercept_ + pairwise_coef_ . Phi(x_i, x_j)``.
        pairwise_intercept_: ``[1]`` (``eta`` times the constant feature's
            ``w2``; 0 without ``fit_intercept``).
        classes_, n_iter_, objective_, dual_objective_, converged_: as
            :class:`jaxrank.APSVM`.

    Raises:
        ValueError: in ``fit``: ``eta < 0``, ``C <= 0``, ``J <= 0``, bad
            inputs or edges (:meth:`fit`).

    References:
        Dokania, Behl, Jawahar, Kumar, "Learning to rank using high-order
        information", ECCV 2014, eqs. (4)-(11).
    """

    _parameter_constraints = {
        **_HighOrderSVM._parameter_constraints,
        "J": [None, Interval(Real, 0, None, closed="neither")],
    }
    # Down to 1e-5: on the benchmark tasks validation often chose the lowest C
    # of a grid that started at 1e-4 (bench/results/high_order.md;
    # docs/design_notes.md).
    _default_Cs = (1e-5, 1e-4, 1e-3, 1e-2)

    def __init__(self, C=1e-3, *, eta=1.0, J=None, fit_intercept=True, max_enum=12,
                 graph_method="auto", max_iter=1000, tol=1e-4, verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.eta = eta
        self.J = J
        self.devices = devices
        self.pos_label = pos_label
        self.fit_intercept = fit_intercept
        self.max_enum = max_enum
        self.graph_method = graph_method
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose

    def _check_params(self):
        super()._check_params()
        if self.J is not None:
            check_positive_float32(self.J, "J")

    def _problems(self, data, positive, where, groups):
        M = positive.shape[0]
        if self.J is None:
            nP = np.sum(positive & where, axis=1)
            nN = np.sum(~positive & where, axis=1)
            J = nN / np.maximum(nP, 1)
        else:
            J = np.full(M, float(self.J))
        lay = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (M,) + a.shape),
                                     data.layout)
        return HOBProblem(jnp.asarray(positive), jnp.asarray(where),
                          jnp.asarray(J, jnp.float32), lay), {"width": self._width(data)}

    def _model(self, static):
        feats = self._features()
        return HOBModel(features=feats, graph_method=self._cut_method(),
                        nonpositive=_w2_block(feats, static))



def _w2_block(feats, static):
    """``nonpositive = (2 d', 3 d')``: the solver keeps ``w2 <= 0`` (none when ``eta = 0``)."""
    if feats.eta == 0:
        return None
    k = int(static["width"])
    return (2 * k, 3 * k)


class HOAPSVM(_HighOrderSVM):
    r"""High-order AP-SVM (Dokania et al., ECCV 2014, §4, problem (14), Algorithm 1).

    The score of a ranking is (12) with the max-marginal differences
    ``s_i(w)`` of (11); the AP loss is upper-bounded by the difference of
    convex functions (16), minimised by CCCP (module docstring): from ``w_0``
    (``init``), repeat: labelings of Proposition 4 at ``w_t``, then the convex
    problem (17) by :func:`jaxrank.solvers.fit` with :class:`HOAPModel`
    (exact AP inference on the scores of Proposition 5), until the objective
    (16) decreases by less than ``cccp_tol`` (relative) after a convex step
    that reached ``tol`` (after one that stopped at ``max_iter`` CCCP makes
    one more step instead, once per fit), or ``cccp_max_iter`` steps.
    ``w2 <= 0`` throughout.

    With ``eta = 0`` it is AP-SVM with ``2 C`` (module docstring), the paper's
    "AP-SVM" baseline.

    Args:
        C: trade-off ``> 0`` of (14) (AP loss in ``[0, 1]``; with ``eta = 0``
            it is :class:`jaxrank.APSVM` with ``2 C``; the values that
            cross-validation chose on the benchmark sets are in
            ``docs/design_notes.md``).
        eta: weight ``>= 0`` of the pairwise part.
        init: ``"hobsvm"`` (default, as in the paper: ``w_0`` is HOB-SVM with
            the same ``eta``), ``"apsvm"`` (``w_0`` minimises (16) with ``w2 =
            0``: AP-SVM(``2 C``) on ``v = w+ - w-``, solved without the sign
            constraint, which converges fast; the CCCP objectives then never
            exceed AP-SVM's) or ``"zero"``.
        init_C: ``C`` of the HOB-SVM initialisation (``> 0``); ``None``: the same
            ``C``. HOB-SVM's useful ``C`` is on another scale (its loss sums over
            samples; :class:`HOBSVM`), so set it to a good HOB-SVM ``C``.
        init_max_iter: solver iterations of the HOB-SVM initialisation;
            ``None``: ``max_iter``.
        fit_intercept, max_enum, graph_method: as :class:`HOBSVM`.
        inference: AP inference method (``"select"``, ``"search"``,
            ``"greedy"``; all exact).
        cccp_max_iter: maximum CCCP steps (``>= 1``).
        cccp_tol: relative decrease of (16) below which CCCP stops.
        max_iter: maximum solver iterations per convex problem (and of the
            HOB-SVM initialisation).
        tol: relative duality gap of every convex problem.
        verbose: print progress.
        devices: ``None`` (one device), an int (the first k local devices) or
            a list of ``jax.Device``: the samples (dense ``X``) are padded to
            a multiple of the device count with isolated, masked-out nodes
            and their rows are sharded over the devices; XLA splits the
            products, and the graph cuts run on the host on the gathered
            scores (they dominate a fit, so the gain is in memory more than
            time).
        pos_label: as :class:`HOBSVM` (the label of the positive class;
            ``None``: the larger label).
        self_paced: self-paced CCCP (Kumar, Packer, Koller, NIPS 2010, "easy
            samples first"; default ``False``). Convex step ``t`` (from 0) sees
            every negative and only the easiest ``ceil(0.5 * 1.3^t |P|)``
            positives, those with the highest max-marginal scores (11) at the
            current ``w`` (the others are isolated and masked for that step):
            50 %, 65 %, 84.5 %, then all from ``t = 3``. CCCP does not stop
            while the share grows. The objective recorded in
            ``cccp_objectives_`` is always the full problem's (16); it can
            rise during the self-paced steps, and ``coef_`` is the iterate of
            the lowest one.

    Convergence: on many small components (threads, images) the convex
    steps converge as AP-SVM does. On one large component (Cora's citation
    graph: 822 of ~1,350 training papers) a step needs far more solver
    iterations. Each score ``sbar_i`` of Proposition 5 carries, besides
    sample ``i``'s own term, a convex piecewise-linear term over every other
    node of its component (their labels in the fixed labeling against their
    best labels at ``w``). So the loss of a ranking is a sum of many kinks
    seen through one slack, and the optimum combines many planes: the
    relative gap falls fast at first, then slowly, over thousands of
    iterations (the convergence record is in ``docs/design_notes.md``). The
    plane cache of both high-order models (``PLANE_CACHE = 128`` planes and
    cached-plane steps) and the solver's line search with the sign
    multipliers re-optimised (:mod:`jaxrank._src.solvers.ssvm`) are set for
    this, and the default ``max_iter`` is 3000 per convex step (a step that
    stops there reports its certified gap in ``cccp_gaps_``).

    Attributes:
        coef_, intercept_, pairwise_coef_, pairwise_intercept_, classes_: as
            :class:`HOBSVM`.
        cccp_objectives_: objective (16) at ``w_0, w_1, ...`` (``[K]``; ``[T,
            K]`` for a 2-D ``y``, each row padded with its last value).
        n_cccp_iter_: CCCP steps made (int; ``[T]``).
        cccp_converged_: CCCP stopped by its own rule, not at
            ``cccp_max_iter`` (bool; ``[T]``).
        cccp_gaps_: certified duality gap (objective - dual) of each convex
            step. ``cccp_objectives_`` does not increase, converged steps or
            not (warm starts); the fitted weights are the iterate of lowest
            objective (16).
        objective_, dual_objective_, n_iter_, converged_: of the last convex
            problem (17).

    Raises:
        ValueError: in ``fit``: ``eta < 0``, ``C <= 0``, bad inputs or edges.

    References:
        Dokania et al., ECCV 2014, eqs. (12)-(17), Algorithm 1, Propositions
        4-5, Appendix A; Yuille & Rangarajan 2003 (CCCP); Mohapatra et al.,
        NIPS 2014 (AP inference).
    """

    _parameter_constraints = {
        **_HighOrderSVM._parameter_constraints,
        "init": [StrOptions({"hobsvm", "apsvm", "zero"})],
        "init_C": [None, Interval(Real, 0, None, closed="neither")],
        "init_max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "inference": [StrOptions(set(AP_METHODS))],
        "cccp_max_iter": [Interval(Integral, 1, None, closed="left")],
        "cccp_tol": [Interval(Real, 0, None, closed="left")],
        "self_paced": ["boolean"],
    }
    _default_Cs = (0.05, 0.5, 5.0, 50.0)
    # Self-paced CCCP (``self_paced=True``): convex step ``t`` keeps the easiest
    # ``SPL_START * SPL_MU**t`` of the positives (rounded up; all from t = 3).
    SPL_START = 0.5
    SPL_MU = 1.3
    _persist = {**_HighOrderSVM._persist, **CCCP_ATTRIBUTES}

    def __init__(self, C=1.0, *, eta=1.0, init="hobsvm", init_C=None, init_max_iter=None,
                 fit_intercept=True, max_enum=12, graph_method="auto", inference="select",
                 cccp_max_iter=10, cccp_tol=1e-3, max_iter=3000, tol=1e-4, verbose=False,
                 devices=None, pos_label=None, self_paced=False):
        self.C = C
        self.eta = eta
        self.self_paced = self_paced
        self.devices = devices
        self.pos_label = pos_label
        self.init = init
        self.init_C = init_C
        self.init_max_iter = init_max_iter
        self.fit_intercept = fit_intercept
        self.max_enum = max_enum
        self.graph_method = graph_method
        self.inference = inference
        self.cccp_max_iter = cccp_max_iter
        self.cccp_tol = cccp_tol
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose

    def _check_params(self):
        super()._check_params()
        if self.init_C is not None:
            check_positive_float32(self.init_C, "init_C")

    def _problems(self, data, positive, where, groups):
        M = positive.shape[0]
        lay = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (M,) + a.shape),
                                     data.layout)
        kp = max(int(np.max(np.sum(positive & where, axis=-1))), 1)
        return HOAPProblem(jnp.asarray(positive), jnp.asarray(where), lay, None), {
            "kp": kp, "width": self._width(data)}

    def _model(self, static):
        feats = self._features()
        return HOAPModel(features=feats, kp=int(static["kp"]), method=self.inference,
                         graph_method=self._cut_method(), nonpositive=_w2_block(feats, static))

    def _train(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None):
        feats = model.features
        M = C.shape[0]
        pos, where = problems.positive, problems.where
        gm = model.graph_method
        if self.init == "hobsvm":
            hob = HOBSVM(C=self.C if self.init_C is None else self.init_C, eta=self.eta,
                         fit_intercept=self.fit_intercept, max_enum=self.max_enum,
                         graph_method=self.graph_method, tol=self.tol,
                         max_iter=(self.max_iter if self.init_max_iter is None
                                   else self.init_max_iter))
            hprobs, hstatic = hob._problems(data, np.asarray(pos), np.asarray(where), None)
            hmodel = hob._model(hstatic)
            C0 = C if self.init_C is None else jnp.full_like(C, float(self.init_C))
            W = hob._solve(hmodel, data, hprobs, C0, single=single, batch_size=batch_size).w
        elif self.init == "apsvm":
            W = self._apsvm_init(model, data, problems, C, single=single,
                                 batch_size=batch_size)
        else:
            W = jnp.zeros((M, feats.dim(data)), jnp.float32)
        probs = problems._replace(
            ybar=_linearise(W, data, pos, where, features=feats, graph_method=gm))
        _, F0, _ = cccp_update(model, data, probs, jnp.asarray(W), C)

        def schedule(t, Wt, run):
            fraction = self.SPL_START * self.SPL_MU ** t
            if not self.self_paced or fraction >= 1:
                return run, True
            # Self-paced step: the hardest positives at W leave the convex step
            # (isolated and masked, as samples outside ``where``); CCCP does not
            # stop while the share grows.
            S = _mm_scores(jnp.asarray(Wt), data, where, features=feats, graph_method=gm)
            where_t = jnp.asarray(_easiest_positives(S, pos, where, fraction)) & run.where
            ybar = _linearise(jnp.asarray(Wt), data, pos, where_t, features=feats,
                              graph_method=gm)
            return run._replace(ybar=ybar, where=where_t), False

        def solve(run, Cs, w0):
            # Warm start at W, where the convex bound (17) is tight: the step
            # never returns a point above (16) at W, converged or not.
            return self._solve(model, data, run, Cs, single=single, batch_size=batch_size,
                               progress=progress, w0=w0)

        tr = cccp(model, data, probs, C, np.asarray(W, np.float32), solve=solve,
                  cccp_max_iter=int(self.cccp_max_iter), cccp_tol=float(self.cccp_tol),
                  initial_objective=np.asarray(F0, np.float64), stop_unchanged=False,
                  schedule=schedule, verbose="HOAPSVM" if self.verbose else None)
        # Objective (16) at w_0, w_1, ...: each row padded with its last value.
        hist = np.concatenate([np.asarray(F0, np.float64)[:, None], tr.objectives], axis=1)
        for k in range(1, hist.shape[1]):
            hist[:, k] = np.where(np.isnan(hist[:, k]), hist[:, k - 1], hist[:, k])
        hist = hist[:, : int(tr.n_iter.max()) + 1]
        gaps = np.nan_to_num(tr.gaps[:, : int(tr.n_iter.max())], nan=0.0)
        extras = {"cccp_objectives_": hist, "n_cccp_iter_": tr.n_iter, "cccp_gaps_": gaps,
                  "cccp_converged_": ~np.asarray(tr.hit_max_iter)}
        return tr.last._replace(w=tr.w), extras

    def _apsvm_init(self, model, data, problems, C, *, single, batch_size=None):
        """``[M, dim]`` minimisers of (16) with ``w2 = 0``: AP-SVM(``2 C``) (module docstring).

        One convex step (17) on the samples without their edges (isolated
        samples: the linearisation is exact and there is no sign constraint),
        with :attr:`max_iter` and :attr:`tol`; its ``w2`` block stays 0, so
        (16) at the result, with the edges, is its AP-SVM objective (halved).
        """
        n, d = data.shape
        lay0 = G.graph_layout(n, np.zeros((0, 2), np.int64), max_enum=int(self.max_enum),
                              method=self.graph_method)
        data0 = GraphData(data.X, pairwise_design(np.zeros((1, d), np.float32),
                                                  np.zeros((0, 2), np.int64)), lay0)
        feats0 = HighOrderFeatures(eta=0.0, intercept=model.features.intercept)
        model0 = dataclasses.replace(model, features=feats0, nonpositive=None)
        M = C.shape[0]
        lay = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (M,) + a.shape), lay0)
        W0 = jnp.zeros((M, feats0.dim(data0)), jnp.float32)
        ybar = _linearise(W0, data0, problems.positive, problems.where, features=feats0,
                          graph_method=model.graph_method)
        probs0 = HOAPProblem(problems.positive, problems.where, lay, ybar)
        return self._solve(model0, data0, probs0, C, single=single, batch_size=batch_size).w

    def _fitted_extras(self, extras, pick):
        hist = np.asarray(extras["cccp_objectives_"])
        steps = np.asarray(extras["n_cccp_iter_"])
        gaps = np.asarray(extras["cccp_gaps_"])
        if hist.shape[0] == 1:
            self.cccp_objectives_ = hist[0, :int(steps[0]) + 1].copy()
            self.cccp_gaps_ = gaps[0, :int(steps[0])].copy()
        else:
            self.cccp_objectives_ = hist.copy()
            self.cccp_gaps_ = gaps.copy()
        self.n_cccp_iter_ = pick(steps, int)
        self.cccp_converged_ = pick(extras["cccp_converged_"], bool)
