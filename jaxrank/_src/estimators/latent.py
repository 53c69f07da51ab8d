r"""Weak supervision as scikit-learn estimators (Behl et al., CVPR 2014).

:class:`LatentAPSVM`, and the baselines :class:`LatentSVM` and :class:`LatentSSVM`; CCCP
is :func:`jaxrank._src.solvers.cccp.latent_cccp`.
"""

from __future__ import annotations

import time
import warnings
from numbers import Integral, Real

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from jaxrank._src import validation
from jaxrank._src.estimators.bags import _check_instance_mask, _given_id, check_bags, per_bag_labels
from jaxrank._src.estimators.base import CCCP_ATTRIBUTES, StructuredSVM
from jaxrank._src.estimators.checks import (
    DEVICES_CONSTRAINT,
    check_feature_scale,
    warn_unconverged,
)
from jaxrank._src.estimators.labels import labels_to_tasks, positive_class_text
from jaxrank._src.estimators.side import SideInput
from jaxrank._src.features import Intercept
from jaxrank._src.layout import max_row_norm, query_layout
from jaxrank._src.metrics import average_precision
from jaxrank._src.models.latent import (
    CandidateFeatures,
    LatentAPModel,
    LatentProblem,
    LatentSSVMModel,
    LatentSVMModel,
    bag_data,
)
from jaxrank._src.oracles.ap import METHODS
from jaxrank._src.solvers.cccp import (
    latent_cccp,
)


class LatentEstimator(StructuredSVM):
    """Base of the weakly supervised estimators (bags of candidates, CCCP).

    Not used directly: see :class:`LatentAPSVM`, :class:`LatentSVM`,
    :class:`LatentSSVM`. Subclasses define ``_model``.
    """

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "cccp_max_iter": [Interval(Integral, 1, None, closed="left")],
        "cccp_tol": [Interval(Real, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"centroid", "random"})],
        "random_state": ["random_state"],
        **DEVICES_CONSTRAINT,
    }
    side_input = SideInput("bags", "bags", required=True, at_predict=True)
    _persist = {**StructuredSVM._persist, **CCCP_ATTRIBUTES,
                "init_objectives_": ("trace", "1d", None)}

    def _features(self):
        return CandidateFeatures()

    # -- inputs -------------------------------------------------------------

    def _prepare_bags(self, X, y, bags, known=None, where=None, reset=True):
        X = validate_data(self, validation.check_features(X), accept_sparse="csr",
                          dtype=np.float32, reset=reset)
        # The float32 range of the candidate rows, before any fit (C R: in fit / sweep).
        check_feature_scale(max_row_norm(X))
        n = X.shape[0]
        given, bags = bags, check_bags(bags, n)
        known = _check_instance_mask(known, n, "known")
        where = _check_instance_mask(where, n, "where")
        ids = np.unique(bags)
        B = ids.shape[0]
        yy = np.asarray(y)
        if yy.ndim == 2 and yy.shape[1] == 1:
            yy = yy[:, 0]
        if yy.ndim != 1:
            raise ValueError(f"y must be 1-D (one label per bag); got shape {yy.shape}.")
        if yy.shape[0] == B:
            yb = yy
        elif yy.shape[0] == n:
            yb = per_bag_labels(yy, given)
        else:
            missing = None
            if ids[0] >= 0 and yy.shape[0] == ids[-1] + 1:
                missing = np.setdiff1d(np.arange(yy.shape[0]), ids)
            if missing is not None and missing.size:
                raise ValueError(
                    f"bag id(s) {missing[:10].tolist()} have no instance: y holds "
                    f"{yy.shape[0]} labels (bag ids 0..{yy.shape[0] - 1}) but bags holds only "
                    f"{B} distinct ids.")
            raise ValueError(
                f"y must hold one label per bag ({B} bags, in sorted bag-id order) or one per "
                f"instance ({n}); got {yy.shape[0]} labels.")
        positive, classes, _ = labels_to_tasks(yb, pos_label=getattr(self, "pos_label", None))
        data, ids = bag_data(X, bags, known=known, where=where)
        empty = ~np.asarray(data.allowed).any(axis=1)
        if empty.any():
            k = int(np.flatnonzero(empty)[0])
            kind = "positive" if positive[0, k] else "negative"
            shown = _given_id(given, int(np.flatnonzero(bags == ids[k])[0]))
            raise ValueError(
                f"{kind} bag {shown!r} has all its candidates masked (where=False for every "
                f"instance{' it has' if known is None else ', or for every known one'}); a "
                "bag needs a candidate to be scored.")
        self._bag_ids = ids
        return data, positive, classes

    def _prepare(self, X, y, groups, reset=True):
        """The registry/sweep hook: ``groups`` are the bag ids; samples are bags."""
        if groups is None:
            raise ValueError(f"{type(self).__name__} needs bags=[n_instances] bag ids (the "
                             "CLI: qid: columns).")
        data, positive, classes = self._prepare_bags(X, y, groups, reset=reset)
        return data, positive, classes, False, None

    def _positive_weight(self, n_pos, n_neg_kept):
        """``[M]`` weight ``J`` of the positive bags' hinges (1 without a ``J``).

        ``"balanced"`` is the paper's unit ``(|P| + |N|) / |P|`` with ``N``
        counted in the examples that carry a negative hinge: the kept negative
        candidates ``n_neg_kept [M]`` of each fit, so the positive bags' total
        weight ``J |P|`` equals the negative candidates' (not the negative
        bags'); ``"balanced*f"`` is ``f`` times that unit.
        """
        J = getattr(self, "J", 1.0)
        if isinstance(J, str):
            return balanced_factor(J) * (n_pos + n_neg_kept) / np.maximum(n_pos, 1)
        return np.full(n_pos.shape, float(J))

    def _kept_negative_candidates(self, data, positive, where):
        """``[M]`` negative candidates that carry a hinge after the robustness
        fraction ``c`` (the count :meth:`LatentSVMModel.impute` keeps)."""
        per_bag = np.asarray(data.allowed).sum(axis=1)  # [B]
        neg = ~positive & where
        n_cand = (neg * per_bag[None, :]).sum(axis=1)
        n_bags = (neg & (per_bag[None, :] > 0)).sum(axis=1)
        c = float(getattr(self, "c", 0.0))
        ignored = np.minimum(np.floor(c * n_cand + 1e-4), n_cand - n_bags)
        return n_cand - ignored

    def _problems(self, data, positive, where, groups):
        positive = np.asarray(positive, bool)
        where = np.asarray(where, bool)
        M, B = positive.shape
        n_pos = np.sum(positive & where, axis=1)
        n_neg = np.sum(~positive & where, axis=1)
        if np.any(n_pos == 0) or np.any(n_neg == 0):
            raise ValueError(
                "every fit needs a positive and a negative bag; got "
                f"{int(n_pos.min())} positive and {int(n_neg.min())} negative bag(s) in the "
                "worst one.")
        T = data.layout.shape[1]
        cand = jnp.broadcast_to(data.allowed, (M, B, T))
        f32 = lambda v: jnp.full((M,), v, jnp.float32)  # noqa: E731
        problems = LatentProblem(
            positive=jnp.asarray(positive), where=jnp.asarray(where), cand=cand,
            chosen=jnp.zeros((M, B), jnp.int32), ignore=jnp.zeros((M, B, T), bool),
            J=jnp.asarray(self._positive_weight(
                n_pos, self._kept_negative_candidates(data, positive, where)), jnp.float32),
            c=f32(float(getattr(self, "c", 0.0))))
        # kp bounds the positive bags of every fit by the positive bags of the
        # data (not of ``where``), so CV folds and refits share one compiled model.
        return problems, {"max_pos": int(max(positive.sum(axis=1).max(), 1))}

    # -- CCCP -----------------------------------------------------------------

    def _train(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None):
        """CCCP (Algorithm 1) for ``M`` fits times ``n_init`` initialisations
        (:func:`jaxrank._src.solvers.cccp.latent_cccp`)."""
        out = latent_cccp(
            model, data, problems, C, n_init=int(self.n_init), init=self.init,
            rng=check_random_state(self.random_state), cccp_max_iter=int(self.cccp_max_iter),
            cccp_tol=float(self.cccp_tol), solver=self._solver(), batch_size=batch_size,
            devices=devices, verbose=type(self).__name__ if self.verbose else None)
        extras = {"n_cccp_iter_": out.n_iter, "cccp_objectives_": out.objectives,
                  "cccp_gaps_": out.gaps, "init_objectives_": out.init_objectives,
                  "cccp_converged_": ~np.asarray(out.hit_max_iter)}
        # (out.result.converged: the last convex step reached tol.)
        return out.result, extras

    def _fitted_extras(self, extras, pick):
        self.n_cccp_iter_ = int(np.asarray(extras["n_cccp_iter_"])[0])
        h = np.asarray(extras["cccp_objectives_"], np.float64)[0]
        self.cccp_objectives_ = h[: self.n_cccp_iter_].copy()
        g = np.asarray(extras["cccp_gaps_"], np.float64)[0]
        self.cccp_gaps_ = g[: self.n_cccp_iter_].copy()
        self.init_objectives_ = np.asarray(extras["init_objectives_"], np.float64)[0].copy()
        # converged_: the last convex step's certificate (set from the fit
        # result) and CCCP's own stop.
        self.cccp_converged_ = pick(extras["cccp_converged_"], bool)
        self.converged_ = self.converged_ & self.cccp_converged_

    def _scores(self, W, data):
        """``[B, M]`` training bag scores (max over candidates) of weights ``W [M, dim]``."""
        feats = self._features()

        def one(w):
            S = feats(w, data)
            return jnp.max(jnp.where(data.mask, S, -jnp.inf), axis=1)

        return jax.vmap(one, out_axes=1)(jnp.asarray(W))

    # -- fit / predict --------------------------------------------------------

    def fit(self, X, y, *, bags, known=None, where=None):
        """Fit by CCCP (Algorithm 1) from ``n_init`` initial imputations (``init``).

        Args:
            X: ``[n_instances, d]`` candidate features, one row per candidate
                (dense or ``scipy.sparse``; cast to float32).
            y: ``[n_bags]`` bag labels with two distinct values (the larger is
                positive), in the order of the sorted unique bag ids; or
                ``[n_instances]`` per-instance labels constant within each bag
                (the CLI's SVMlight form; used when ``n_instances != n_bags``).
            bags: ``[n_instances]`` bag ids (any hashable values: ints, strings, ...).
            known: optional ``[n_instances]`` bool: candidates given as correct.
                In a bag with any known candidate, training chooses only among
                them (the supervised bags of Figure 1).
            where: optional ``[n_instances]`` bool: candidates that take part in
                training (default all).

        Returns:
            self

        Raises:
            ValueError: bad hyperparameters; NaN/inf, empty or complex ``X``;
                ``bags`` not 1-D integer ids of length ``n_instances``; ``y``
                not one label per bag (naming missing bag ids when ``y`` is
                indexed by ids ``0..max``), a bag whose instances carry
                different labels, ``y`` without exactly two classes; a bag
                with all its candidates masked by ``where`` (named).
            TypeError: ``known`` / ``where`` not bool.

        Warns:
            ConvergenceWarning: the last convex step stopped at ``max_iter``
                before its duality gap reached ``tol``, or CCCP stopped at
                ``cccp_max_iter``.
        """
        self._check_params()
        t0 = time.perf_counter()
        data, positive, classes = self._prepare_bags(X, y, bags, known, where)
        R = data.X.max_row_norm()
        check_feature_scale(R, float(self.C))
        self._fit_scale = (R, float(self.C))
        where_b = np.ones(positive.shape, bool)
        problems, static = self._problems(data, positive, where_b, None)
        model = self._model(static)
        if self.verbose:
            print(f"{type(self).__name__}: {data.shape[0]} candidates in {data.n_bags} bags "
                  f"(at most {data.layout.shape[1]} per bag), d={data.shape[1]}, "
                  f"{int(positive.sum())} positive bags, C={self.C}, n_init={self.n_init}; "
                  f"{positive_class_text(self, classes)}", flush=True)
        C = jnp.full((1,), self.C, jnp.float32)
        res, extras = self._train(model, data, problems, C, single=True,
                                  devices=self.devices)
        res = jax.tree_util.tree_map(np.asarray, res)
        self._set_fitted(res, extras, classes, False, data, positive)
        self.fit_time_ = time.perf_counter() - t0
        if not bool(np.asarray(res.converged)[0]):
            # The gap of the last convex step (not of the non-convex objective).
            last = float(self.cccp_gaps_[-1])
            step = res._replace(objective=np.asarray(res.dual) + last)
            warn_unconverged(self, step, " (the last convex CCCP step, latent variables fixed)")
        if not self.cccp_converged_:
            warnings.warn(
                f"{type(self).__name__}: CCCP stopped at cccp_max_iter={self.cccp_max_iter} "
                "while the objective was still decreasing by more than cccp_tol.",
                ConvergenceWarning, stacklevel=2)
        return self

    def _candidate_scores(self, X, bags):
        check_is_fitted(self)
        X = validate_data(self, validation.check_features(X), accept_sparse="csr",
                          dtype=np.float32, reset=False)
        bags = check_bags(bags, X.shape[0])
        layout, _ = query_layout(bags, X.shape[0])
        s = np.asarray(X @ self.coef_[0].astype(np.float32)).reshape(-1)
        S = np.r_[s, -np.inf][layout]
        return S, layout

    def decision_function(self, X, *, bags):
        """Bag scores ``max_h w^T Phi(h) + intercept_`` (eq. (6)); rank by sorting them (eq. (7)).

        Args:
            X: ``[n_instances, d]`` candidate features.
            bags: ``[n_instances]`` bag ids (any hashable values: ints, strings, ...).

        Returns:
            ``[n_bags]`` float32 scores in sorted bag-id order.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: wrong number of features, NaN/inf ``X``, bad ``bags``.
        """
        S, _ = self._candidate_scores(X, bags)
        b = np.float32(np.asarray(self.intercept_).reshape(-1)[0])
        return (S.max(axis=1) + b).astype(np.float32)

    def predict_candidates(self, X, *, bags):
        """The chosen candidate of every bag: ``argmax_h w^T Phi(h)`` (eq. (6)).

        Args:
            X: ``[n_instances, d]`` candidate features.
            bags: ``[n_instances]`` bag ids (any hashable values: ints, strings, ...).

        Returns:
            ``[n_bags]`` int64 row index into ``X`` of each bag's best
            candidate (first on ties), bags in sorted bag-id order.
        """
        S, layout = self._candidate_scores(X, bags)
        return layout[np.arange(layout.shape[0]), np.argmax(S, axis=1)].astype(np.int64)

    def predict(self, X, *, bags):
        """Bag labels: ``classes_[1]`` where :meth:`decision_function` ``> 0``."""
        return self.classes_[(self.decision_function(X, bags=bags) > 0).astype(int)]

    def score(self, X, y, sample_weight=None, *, bags):
        """Average precision of the bag ranking (:meth:`decision_function`).

        ``y`` as in :meth:`fit` (per bag, or per instance constant in each bag).
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        check_is_fitted(self)
        s = self.decision_function(X, bags=bags)
        yy = np.asarray(y)
        if yy.shape[0] != s.shape[0]:
            yy = per_bag_labels(yy, bags)
        unknown = np.setdiff1d(np.unique(yy), self.classes_)
        if unknown.size:
            raise ValueError(f"y has labels {unknown.tolist()[:6]} that are not among the "
                             f"model's classes_ {self.classes_.tolist()}.")
        return float(average_precision(s, yy == self.classes_[1]))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags


_COMMON_ARGS = """
        cccp_max_iter: maximum CCCP iterations (solver calls) per initialisation.
        cccp_tol: relative decrease of the objective below which CCCP stops.
        tol: relative duality gap of every convex step.
        n_init: initialisations (imputations of the positive bags'
            candidates); the one with the lowest final objective is kept (the
            paper uses 3-5).
        init: ``"centroid"`` (default): the first initialisation imputes
            ``argmax_h w0^T Phi_i(h)`` at ``w0`` = the difference of the class
            means of the bags' mean candidates (:func:`centroid_weights`), the
            others uniformly at random among the allowed candidates;
            ``"random"``: all at random. A random start can stall at ``w =
            0`` where the centroid start does not (see below).
        random_state: seed (``None``, an int or a ``RandomState``) of the
            random initial imputations.
        max_iter: maximum solver iterations per convex step (a step stops
            earlier once its certified relative gap is ``<= tol``).
        verbose: print progress.
        devices: ``None`` (every local device), an int (the first ``k``
            local devices) or a list of ``jax.Device``: the ``n_init``
            initialisations are one batch of convex problems per CCCP
            iteration, dealt to one work queue per device (on a CPU, ``k``
            devices are ``k`` cores: ``jax_num_cpu_devices``). One
            initialisation runs on one device: the candidate rows are not
            sharded.
        pos_label: the label of the positive (relevant) class, one of the
            two values of the bag labels ``y``; ``None`` (default): the
            larger label in sort order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.
"""


def _attrs(intercept, objective):
    return _COMMON_ATTRS.replace("{INTERCEPT}", intercept).replace("{OBJECTIVE}", objective)


_COMMON_ATTRS = """
        coef_: ``[1, n_features]`` float32 weights.
        intercept_: ``[1]``; {INTERCEPT}
        classes_: the two bag label values (``classes_[1]`` positive).
        objective_: the non-convex objective at ``coef_`` ({OBJECTIVE}), the lowest over
            the outer iterations and initialisations.
        dual_objective_: the certified lower bound of the convex step that
            produced ``coef_`` (its latent variables fixed; not a bound on the
            non-convex problem).
        n_iter_: solver iterations summed over the outer iterations of the kept run.
        converged_: whether CCCP's stopping certificate holds for the kept
            run: its last convex step reached ``tol`` and CCCP stopped by its
            own rule, not at ``cccp_max_iter``. If the imputation did not
            change, the last step's gap certifies ``coef_`` on the convex bound
            tight at it; if the objective decreased by less than ``tol``
            (relative), the bound tight at the iterate before the last step
            has its minimum within ``tol`` relative plus that gap below the
            iterate's objective (an approximate fixed point of Algorithm 1),
            and ``coef_`` is the lower of the two iterates. Earlier steps that
            stopped at ``max_iter`` change the path, not this certificate
            (their gaps are in ``cccp_gaps_``), as for :class:`HOAPSVM`. Where
            the rule would stop after a step that stopped at ``max_iter``,
            CCCP makes one more step instead (once per run), warm-started at
            that step's best iterate.
        n_cccp_iter_: CCCP iterations of the kept run.
        cccp_converged_: CCCP stopped by its own rule, not at
            ``cccp_max_iter`` (bool).
        cccp_objectives_: ``[n_cccp_iter_]`` float64, the objective after every
            outer iteration of the kept run. Non-increasing (up to float32
            rounding), converged steps or not: every convex step is
            warm-started at the previous iterate, where its upper bound equals
            this objective, and never returns a point above its start.
        cccp_gaps_: ``[n_cccp_iter_]`` float64, certified duality gap
            (objective minus dual bound) of every convex step.
        init_objectives_: ``[n_init]`` final objective of every initialisation.
        fit_time_: seconds."""


class _APLatentEstimator(LatentEstimator):
    """Parameters shared by the AP-loss latent models (LatentAPSVM, LatentSSVM)."""

    _parameter_constraints = {
        **LatentEstimator._parameter_constraints,
        "inference": [StrOptions(set(METHODS))],
    }
    _default_Cs = (1.0, 10.0, 100.0, 1000.0)

    def __init__(self, C=100.0, *, inference="select", cccp_max_iter=30, cccp_tol=1e-4, tol=1e-4,
                 n_init=3,
                 init="centroid", random_state=None, max_iter=5000, verbose=False,
                 devices=None, pos_label=None):
        self.C = C
        self.inference = inference
        self.cccp_max_iter = cccp_max_iter
        self.cccp_tol = cccp_tol
        self.tol = tol
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.max_iter = max_iter
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label


class LatentAPSVM(_APLatentEstimator):
    __doc__ = r"""Latent AP-SVM (Behl et al. 2014): AP-SVM over bags of candidates, by CCCP.

    Prediction (eqs. (6)-(7)): each bag is scored by its best candidate,
    ``max_h w^T Phi_i(h)``, and bags are ranked by sorting these scores.
    Training minimises the tighter bound (8) on the AP loss::

        1/2 ||w||^2 + C xi,  xi = max_{Y, H_N} min_{H_P} Delta(Y*, Y)
                                  - w^T (Psi(X, Y*, {H_P, H_N}) - Psi(X, Y, {H_P, H_N}))

    by CCCP (Algorithm 1): impute ``h*_i = argmax_h w^T Phi_i(h)`` for every
    positive bag (Proposition 2; among the ``known`` candidates of a
    supervised bag), then solve the convex problem (11) with
    :func:`jaxrank.solvers.fit_many` (:class:`LatentAPModel`: each negative is
    maximised over its candidates, Proposition 3, then exact AP inference),
    repeat; stop when the imputation no longer changes or the objective of
    (8) decreases by less than ``tol`` (relative). ``Psi`` is normalised by
    ``1/(|P||N|)`` as in :class:`jaxrank.APSVM`, so the useful ``C`` is large
    (``1``-``10^3``); with every bag of size 1 this is exactly
    :class:`jaxrank.APSVM`.

    CCCP is a local method and its start matters. From a random imputation
    the first convex step's optimum can be ``w = 0`` or within a small
    fraction of its objective (no direction ranks one random candidate per
    positive bag above every negative bag's best candidate), notably on bags
    of many candidates. If that step stops at ``max_iter`` before ``tol``
    (large ``C``), the solver's best iterate can be ``w = 0`` itself; then
    all bags tie, the objective does not decrease and CCCP stops with
    ``coef_ = 0``. The default ``init="centroid"`` starts one initialisation
    from the imputation at the bag-mean class centroids, which avoided that
    stall in the cases behind this default (``docs/design_notes.md``); other
    remedies: a smaller ``C``, a larger ``max_iter``, more initialisations
    (``n_init``) or ``known`` candidates.

    Input: one row of ``X`` per candidate, ``bags`` the bag id of each row
    (:meth:`fit`). On the command line (``jaxrank train --model
    latent-apsvm``): an SVMlight file with one line per candidate, ``qid:`` =
    bag id and the bag label on every line of the bag.

    Args:
        C: trade-off ``> 0`` of problem (8) (default 100, default grid
            ``1``-``10^3``, on the :class:`APSVM` scale).
        inference: AP inference method (``"select"``, ``"search"``,
            ``"greedy"``; all exact).{_COMMON_ARGS}

    Attributes:{ATTRS}

    Raises:
        ValueError: in ``fit``, bad hyperparameters and the bad inputs listed
            in :meth:`LatentEstimator.fit`.

    References:
        Behl, Jawahar, Kumar, "Optimizing Average Precision using Weakly
        Supervised Data", CVPR 2014 (eqs. (6)-(13), Algorithm 1,
        Propositions 2-3); Yuille & Rangarajan 2003 (CCCP); Mohapatra et al.,
        NIPS 2014 (AP inference).

    Examples:
        >>> import numpy as np, jaxrank
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(60, 5)).astype(np.float32)
        >>> bags = np.repeat(np.arange(20), 3)
        >>> y = np.arange(20) % 2                # bags 1, 3, 5, ... are positive
        >>> X[3 * np.flatnonzero(y)] += 2.0      # their first candidate is the witness
        >>> m = jaxrank.LatentAPSVM(C=10.0, n_init=1, random_state=0).fit(X, y, bags=bags)
        >>> m.decision_function(X, bags=bags).shape, m.score(X, y, bags=bags)
        ((20,), 1.0)
        >>> bool(np.all(m.predict_candidates(X, bags=bags)[y == 1] % 3 == 0))  # witnesses
        True
    """.replace("{_COMMON_ARGS}", _COMMON_ARGS).replace("{ATTRS}", _attrs(
        "minus the midpoint of the two classes' mean training bag scores (used "
        "only by ``predict``; AP ignores it).", "problem (8)"))

    def _model(self, static):
        return LatentAPModel(kp=int(static["max_pos"]), method=self.inference)


class LatentSSVM(_APLatentEstimator):
    __doc__ = r"""Latent structural SVM with the AP loss (problem (5); the paper's baseline).

    Minimises::

        1/2 ||w||^2 + C xi,  xi = max_{Y, H} [Delta(Y*, Y) + w^T Psi(X, Y, H)]
                                  - max_H^ w^T Psi(X, Y*, H^)

    by CCCP: impute ``H^`` (each positive bag's highest-scoring candidate,
    each negative bag's lowest-scoring one: exact), solve the convex step
    (:class:`LatentSSVMModel`), repeat. **What is approximate**: the
    loss-augmented inference ``max_{Y, H}`` of the convex step, which is
    block-coordinate ascent over ``Y`` (exact AP inference at fixed ``H``)
    and ``H`` (exact at fixed ``Y``), ``SSVM_ROUNDS = 3`` rounds from three
    starts and from the previous solver iteration's ``H``
    (:class:`LatentSSVMModel`); the constraint it returns is valid but
    may not be the most violated, so ``objective_`` and ``cccp_objectives_``
    are those of the constraints found (lower bounds on the exact objective
    of (5)), and CCCP's monotonicity is not guaranteed. Prediction uses the
    two-step rule (6)-(7) of the latent AP-SVM (rule (4) needs the labels of
    the ranked bags, through ``Psi``), so the models compare on one rule.

    Args:
        C: trade-off ``> 0`` of problem (5) (the :class:`LatentAPSVM` scale).
        inference: AP inference method of the ``Y`` steps.{_COMMON_ARGS}

    Attributes:{ATTRS}

    References:
        Yu & Joachims, ICML 2009 (latent structural SVM); Behl, Jawahar,
        Kumar, CVPR 2014, §4.1 (problem (5)), §5.
    """.replace("{_COMMON_ARGS}", _COMMON_ARGS).replace("{ATTRS}", _attrs(
        "minus the midpoint of the two classes' mean training bag scores.",
        "problem (5) with the approximate inference"))

    def _model(self, static):
        return LatentSSVMModel(kp=int(static["max_pos"]), method=self.inference)


def balanced_factor(J):
    """The factor ``f`` of a ``J`` given as ``"balanced"`` (1) or ``"balanced*f"``.

    Args:
        J: a str, ``"balanced"`` or ``"balanced*f"`` with ``f`` a number
            ``> 0`` that is finite in float32 (e.g. ``"balanced*0.1"``).

    Returns:
        ``f`` as a Python float.

    Raises:
        ValueError: any other string, or ``f`` not ``> 0`` and finite.
    """
    if J == "balanced":
        return 1.0
    head, sep, tail = J.partition("*")
    try:
        f = float(tail) if head.strip() == "balanced" and sep else None
    except ValueError:
        f = None
    if f is None or not (np.isfinite(np.float32(f)) and np.float32(f) > 0):
        raise ValueError(f"J must be a number > 0, 'balanced' or 'balanced*f' with a number "
                         f"f > 0 (f times the balanced weight); got {J!r}.")
    return f


class LatentSVM(LatentEstimator):
    __doc__ = r"""Latent SVM with positive weight ``J`` and robustness fraction ``c`` (§5 baseline).

    Minimises, over ``w``, ``b``, the positive bags' candidates ``h_i`` and
    the ignored negative candidates ``I``::

        1/2 ||[w, b]||^2 + C J sum_{i in P} max(0, 1 - (w^T x_{i,h_i} + b))
                         + C sum_{j in N} sum_{h not in I_j} max(0, 1 + w^T x_{j,h} + b)

    where ``I`` holds ``floor(c n_neg)`` negative candidates (``n_neg``: all
    negative candidates; fewer if that would empty a bag) and leaves at least
    one candidate of every negative bag: "the most confusing c %% of the negative candidates" are ignored
    (``c = 0`` is the plain latent SVM). Trained by CCCP: impute the highest
    scoring candidate of each positive bag and the ignored set (the
    highest-scoring negative candidates other than each bag's lowest; both
    exact minimisers at fixed ``w``), then solve the convex hinge-sum problem
    (:class:`LatentSVMModel`, dual coordinate ascent in
    :func:`jaxrank.solvers.fit_many`). ``C`` is on the ``LinearSVC`` scale
    (sum of hinges). The paper's grids are ``C in 10^-3..10^4``, ``J in
    (|P| + |N|) / |P| x 10^-4..10`` and ``c in 0, 0.1, ..., 0.9``;
    :func:`jaxrank.sweep` tunes ``J in {"balanced", "balanced*0.3",
    "balanced*0.1"}`` and ``c in {0, 0.1}`` with ``C`` by default
    (``_default_param_grid``).

    Args:
        C: trade-off ``> 0``; the default grid (``_default_Cs``, used by
            :func:`jaxrank.sweep`) spans ``10^-4``-``1``: with the balanced
            ``J`` a positive bag's hinge weighs ``C J``, ``C`` times one plus
            the negative candidates per positive bag.
        J: weight ``> 0`` of the positive bags' hinges, ``"balanced"``
            (default): ``(|P| + |N|) / |P|``, the unit of the paper's grid,
            or ``"balanced*f"``: ``f > 0`` times that unit (e.g.
            ``"balanced*0.1"``; the default sweep grid's other values),
            with ``|P|`` the positive bags and ``|N|`` the negative
            candidates that carry a hinge (all but the ignored fraction
            ``c``) of each fit, so both classes weigh the same in the hinge
            sum. Counting negative *bags* instead, or ``J = 1``, lets bags of
            many candidates outweigh the positives, and the fit can end at
            ``coef_ = 0``.
        c: robustness fraction in ``[0, 1)``. With ``c > 0`` the ignored set
            moves between CCCP iterations and CCCP takes more of them, hence
            the default ``cccp_max_iter=100`` (30 for the other latent models).
        fit_intercept: learn ``b`` (a regularised constant feature).{_COMMON_ARGS}

    Attributes:{ATTRS}

    Raises:
        ValueError: in ``fit``, ``J <= 0`` or a string other than
            ``"balanced"`` / ``"balanced*f"`` (``f > 0``), ``c`` outside ``[0, 1)`` and the
            bad inputs listed in :meth:`LatentEstimator.fit`.

    References:
        Felzenszwalb, Girshick, McAllester, Ramanan, PAMI 2010 (latent SVM);
        Andrews, Tsochantaridis, Hofmann, NIPS 2002 (MI-SVM); Behl,
        Jawahar, Kumar, CVPR 2014, §5 (``J``, ``c``).
    """.replace("{_COMMON_ARGS}", _COMMON_ARGS).replace("{ATTRS}", _attrs(
        "the learned ``b``.", "the latent SVM objective above")).replace("%%", "%")

    _parameter_constraints = {
        **LatentEstimator._parameter_constraints,
        "J": [Interval(Real, 0, None, closed="neither"), str],
        "c": [Interval(Real, 0, 1, closed="left")],
        "fit_intercept": ["boolean"],
    }
    _default_Cs = (0.0001, 0.001, 0.01, 0.1, 1.0)
    _default_param_grid = {"J": ("balanced", "balanced*0.3", "balanced*0.1"), "c": (0.0, 0.1)}
    _learns_intercept = True

    def __init__(self, C=1.0, *, J="balanced", c=0.0, fit_intercept=True, cccp_max_iter=100,
                 cccp_tol=1e-4, tol=1e-4, n_init=3, init="centroid", random_state=None,
                 max_iter=5000,
                 verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.J = J
        self.c = c
        self.fit_intercept = fit_intercept
        self.cccp_max_iter = cccp_max_iter
        self.cccp_tol = cccp_tol
        self.tol = tol
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.max_iter = max_iter
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _check_params(self):
        super()._check_params()
        from jaxrank._src.estimators.checks import check_positive_float32

        if isinstance(self.J, str):
            balanced_factor(self.J)
        else:
            check_positive_float32(self.J, "J")

    def _features(self):
        if self.fit_intercept:
            return Intercept(CandidateFeatures())
        return CandidateFeatures()

    def _model(self, static):
        return LatentSVMModel(features=self._features())
