r"""AP-SVM (Yue et al. 2007) and SVM-map over queries: the estimator :class:`APSVM`."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from sklearn.utils._param_validation import Interval, Real, StrOptions
from sklearn.utils.validation import check_is_fitted

from jaxrank._src import validation
from jaxrank._src.estimators.base import StructuredSVM, check_groups
from jaxrank._src.estimators.checks import DEVICES_CONSTRAINT, check_feature_scale
from jaxrank._src.estimators.side import SideInput
from jaxrank._src.layout import max_row_norm, query_layout
from jaxrank._src.models.ap import APModel
from jaxrank._src.models.base import QueryProblem
from jaxrank._src.oracles.ap import METHODS


class APSVM(StructuredSVM):
    r"""AP-SVM (Yue et al. 2007) trained with exact fast loss-augmented inference.

    Minimises eq. (3) of Mohapatra et al. (2014), no intercept (it cancels in
    the joint feature vector)::

        1/2 ||w||^2 + C xi,   xi = max_R Delta(R*, R) - w^T (Psi(X,R*) - Psi(X,R))

    with ``Delta = 1 - AP`` and ``Psi`` normalised by ``1/(|P||N|)`` (eq. (1)),
    by the solver of :func:`jaxrank.solvers.fit` (one jitted call);
    ``objective_`` is certified within ``tol`` (relative duality gap) of the
    exact optimum when ``converged_``. Because ``Psi`` is normalised, the
    useful ``C`` is large: typically ``10^2``-``10^4`` where a binary SVM's is
    ``10^-2``-``1`` (default grid ``_default_Cs``).

    **Queries (SVM-map).** ``fit(X, y, groups=qid)`` optimises the mean AP over
    queries: ``1/2 ||w||^2 + (C/Q) sum_q xi_q``, one AP slack per query (module
    docstring). ``y`` then holds relevance grades: an item is relevant iff
    ``y >= min_relevance`` (default 1, LETOR's convention for grades 0/1/2).
    Queries without a relevant or without an irrelevant item are left out
    (``n_queries_`` / ``n_dropped_queries_``; printed with ``verbose``).
    ``score(X, y, groups=qid)`` is the MAP.

    Relation to SVM-perf's ``-c``: SVM-perf measures the loss in percent
    (``100 Delta``) and its AP joint feature vector (``-l 11``) is not
    normalised by ``1/(|P||N|)``, so its ``-c`` equals ``100 C / (|P||N|)^2``
    here and its ``w`` is ``100 / (|P||N|)`` times this ``w`` (the same
    ranking); ``bench/convergence.py --svmperf`` checks the conversion
    against SVM-perf's own solution.

    Args:
        C: regularisation trade-off ``> 0`` of eq. (3) (default 100; the
            default grid ``_default_Cs`` spans ``1``-``10^4``).
        inference: ``"select"`` (Algorithm 3, default), ``"search"``
            (Algorithm 2) or ``"greedy"`` (Algorithm 1): all exact.
        min_relevance: with ``groups``, the smallest grade that counts as
            relevant.
        max_iter: maximum calls of loss-augmented inference.
        tol: relative duality gap at which to stop (``1e-4``: within 0.01 %).
        verbose: print progress.
        devices: ``None``, an int or a list of ``jax.Device``: where the fit
            runs (data parallel for one task), as in :class:`StructuredSVM`.
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        coef_: ``[1, n_features]`` float32 weights (``[T, n_features]`` after
            ``fit(X, Y)`` with a 2-D ``Y`` of ``T`` task columns; then
            ``n_iter_``, ``objective_``, ``dual_objective_``, ``converged_``
            are ``[T]`` arrays and ``decision_function`` returns ``[n, T]``).
        intercept_: ``[1]`` (``[T]``): minus the midpoint of the two classes'
            mean training scores (used only by ``predict``; AP ignores it).
        classes_: the two label values (``[0, 1]`` = irrelevant/relevant with
            ``groups``).
        n_iter_: calls of loss-augmented inference.
        objective_: primal objective of eq. (3) at ``coef_``.
        dual_objective_: certified lower bound on the optimum.
        converged_: whether the duality gap reached ``tol``.
        n_queries_, n_dropped_queries_: with ``groups``.

    Raises:
        ValueError: in ``fit``, for ``C <= 0``, an unknown ``inference`` and
            the bad inputs listed in :meth:`StructuredSVM.fit`.

    References:
        Yue, Finley, Radlinski, Joachims, SIGIR 2007; Mohapatra, Jawahar,
        Kumar, NIPS 2014 (eqs. (1)-(5), Algorithms 1-3).

    Examples:
        >>> import jaxrank
        >>> X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
        >>> model = jaxrank.APSVM(C=100.0).fit(X[:500] / X[:500].std(0), y[:500])
        >>> 0 <= model.score(X[500:1000] / X[:500].std(0), y[500:1000]) <= 1
        True
    """

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "inference": [StrOptions(set(METHODS))],
        "min_relevance": [Interval(Real, None, None, closed="neither")],
        **DEVICES_CONSTRAINT,
    }
    _default_Cs = (1.0, 10.0, 100.0, 1000.0, 10000.0)
    side_input = SideInput("groups", "queries")
    # Saved by jaxrank.save: a model fitted on queries keeps reading grades
    # (``y >= min_relevance``) in ``jaxrank evaluate``.
    _persist = {**StructuredSVM._persist, "n_queries_": ("count", "T?", None),
                "n_dropped_queries_": ("count", "T?", None)}

    def __init__(self, C=100.0, *, inference="select", min_relevance=1, max_iter=1000,
                 tol=1e-4, verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.inference = inference
        self.min_relevance = min_relevance
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _prepare(self, X, y, groups, reset=True):
        if groups is None:
            return super()._prepare(X, y, None, reset)
        if self.pos_label is not None:
            raise ValueError(
                f"pos_label={self.pos_label!r} does not apply with groups: y then holds "
                "relevance grades and min_relevance sets the relevant ones.")
        from sklearn.utils.validation import validate_data

        from jaxrank._src.layout import design

        X, y = validate_data(self, validation.check_features(X), y, accept_sparse="csr",
                             dtype=np.float32,
                             reset=reset, y_numeric=True)
        if y.ndim != 1:
            raise ValueError(f"with groups, y must be 1-D relevance grades; got shape {y.shape}.")
        groups = check_groups(groups, X.shape[0])
        check_feature_scale(max_row_norm(X))  # as the ungrouped path (C R: in fit / sweep)
        positive = np.asarray(y) >= self.min_relevance
        if positive.all() or not positive.any():
            raise ValueError(
                f"with groups, y needs relevant (y >= min_relevance={self.min_relevance}) and "
                "irrelevant items; got only one kind.")
        return design(X), positive[None], np.array([0, 1]), False, groups

    def _problems(self, data, positive, where, groups):
        if groups is None:
            return super()._problems(data, positive, where, groups)
        layout, _ = query_layout(groups, data.shape[0])
        M = positive.shape[0]
        n = data.shape[0]
        lay_pos = np.concatenate([positive, np.zeros((M, 1), bool)], axis=1)[:, layout]
        lay_use = np.concatenate([where, np.zeros((M, 1), bool)], axis=1)[:, layout]
        kq = int(np.max(np.sum(lay_pos & lay_use, axis=-1)))
        ok = np.any(lay_pos & lay_use, -1) & np.any(~lay_pos & lay_use, -1)  # [M, Q]
        if not ok.any(axis=1).all():
            raise ValueError("no query has both a relevant and an irrelevant item.")
        self._query_counts = (layout.shape[0], layout.shape[0] - ok.sum(axis=1))
        del n
        lay = jnp.broadcast_to(jnp.asarray(layout), (M,) + layout.shape)
        return QueryProblem(jnp.asarray(positive), jnp.asarray(where), lay), {
            "max_pos": max(kq, 1), "grouped": True}

    def _model(self, static):
        return APModel(kp=max(int(static["max_pos"]), 1), method=self.inference,
                       grouped=bool(static.get("grouped", False)))

    def _train(self, model, data, problems, C, **kw):
        res, extras = super()._train(model, data, problems, C, **kw)
        counts = getattr(self, "_query_counts", None)
        if isinstance(problems, QueryProblem) and counts is not None:
            # per fit, so that the estimators that jaxrank.sweep refits get them too
            Q, dropped = counts
            extras = {**extras, "n_queries": np.full(C.shape[0], Q),
                      "n_dropped_queries": np.asarray(dropped)}
        return res, extras

    def _fitted_extras(self, extras, pick):
        if "n_queries" in extras:
            self.n_queries_ = pick(extras["n_queries"], int)
            self.n_dropped_queries_ = pick(extras["n_dropped_queries"], int)

    def fit(self, X, y, *, groups=None):
        """Fit AP-SVM; with ``groups`` (query ids), the mean AP over queries.

        See :meth:`jaxrank.base.StructuredSVM.fit` for ``X``, ``y`` and the
        errors; with ``groups``, ``y`` holds relevance grades (class docstring).
        """
        self._query_counts = None
        for name in ("n_queries_", "n_dropped_queries_"):  # from an earlier grouped fit
            self.__dict__.pop(name, None)
        self._fit(X, y, groups)
        self._query_counts = None
        if self.verbose and getattr(self, "n_queries_", None) is not None:
            print(f"APSVM: {self.n_queries_} queries, {self.n_dropped_queries_} dropped (no "
                  "relevant or no irrelevant item)", flush=True)
        return self

    def score(self, X, y, sample_weight=None, *, groups=None):
        """Average precision of :meth:`decision_function`; MAP over ``groups``.

        With ``groups``, for a model fitted with ``groups``, ``y`` holds
        grades and relevant means ``y >= min_relevance``; for a model fitted
        without them (one pooled ranking), ``y`` holds its two ``classes_``
        (as :meth:`RankerMixin.score`). Queries without a relevant or without
        an irrelevant item are left out of the mean.
        """
        if groups is None or getattr(self, "n_queries_", None) is None:
            return super().score(X, y, sample_weight, groups=groups)
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        check_is_fitted(self)
        s = np.asarray(self.decision_function(X), np.float32)
        if s.ndim != 1:
            raise ValueError("groups are supported only for a model fitted on a 1-D y.")
        return self._score_queries(s, np.asarray(y) >= self.min_relevance, groups)


