r"""The NDCG structural SVM, over one ranking or over queries, as a scikit-learn estimator."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import ndcg_score
from sklearn.utils._param_validation import Interval, Real

from jaxrank._src.estimators.ap import APSVM
from jaxrank._src.estimators.base import StructuredSVM, check_groups
from jaxrank._src.estimators.checks import DEVICES_CONSTRAINT
from jaxrank._src.models.ndcg import NDCGModel


def ndcg_binary(scores, relevant):
    """NDCG of one ranking with binary gains and no cut-off (host side).

    Args:
        scores: ``[n]`` float scores.
        relevant: ``[n]`` bool.

    Returns:
        float in ``[0, 1]`` (scikit-learn's ``ndcg_score`` of the 0/1 gains:
        tied scores share their discounts).

    Raises:
        ValueError: no relevant item.
    """
    relevant = np.asarray(relevant, bool)
    if not relevant.any():
        raise ValueError("NDCG needs a relevant item; the list has none.")
    return float(ndcg_score(relevant[None].astype(np.float64),
                            np.asarray(scores, np.float64)[None]))


def mean_ndcg(scores, relevant, groups):
    """Mean NDCG (binary gains, no cut-off) over the queries with a relevant and an
    irrelevant item.

    Args:
        scores: ``[n]`` float scores.
        relevant: ``[n]`` bool.
        groups: ``[n]`` integer query ids.

    Returns:
        float.

    Raises:
        ValueError: no query has both a relevant and an irrelevant item.
    """
    groups = check_groups(groups, np.shape(scores)[0])
    relevant = np.asarray(relevant, bool)
    scores = np.asarray(scores)
    values = []
    for q in np.unique(groups):
        m = groups == q
        if relevant[m].any() and not relevant[m].all():
            values.append(ndcg_binary(scores[m], relevant[m]))
    if not values:
        raise ValueError("no query of groups has both a relevant and an irrelevant item.")
    return float(np.mean(values))


class NDCGSVM(APSVM):
    r"""Structural SVM for NDCG, trained with exact loss-augmented inference.

    Minimises, as :class:`jaxrank.APSVM` but with the NDCG loss::

        1/2 ||w||^2 + C xi,   xi = max_R Delta(R*, R) - w^T (Psi(X,R*) - Psi(X,R))

    with ``Delta = 1 - NDCG`` (binary gains, no cut-off; see
    :mod:`jaxrank._src.oracles.ndcg`) and AP-SVM's joint feature vector
    ``Psi`` normalised by ``1/(|P||N|)``; inference is the exact divide and
    conquer of Mohapatra et al. (CVPR 2018)
    (:func:`jaxrank.inference.ndcg_oracle`). ``objective_`` is certified
    within ``tol`` (relative duality gap) of the optimum when ``converged_``.

    **Queries.** ``fit(X, y, groups=qid)`` optimises the mean NDCG over
    queries, ``1/2 ||w||^2 + (C/Q) sum_q xi_q``; ``y`` then holds relevance
    grades, an item is relevant iff ``y >= min_relevance`` (default 1), and
    queries without a relevant or without an irrelevant item are left out
    (``n_queries_`` / ``n_dropped_queries_``). ``score(X, y, groups=qid)`` is
    the mean NDCG over queries.

    Args:
        C: regularisation trade-off ``> 0`` (default 100; the default grid
            ``_default_Cs`` spans ``1``-``10^4``, as AP-SVM's: the same
            normalised joint feature vector).
        min_relevance: with ``groups``, the smallest grade that counts as
            relevant.
        max_iter: maximum calls of loss-augmented inference.
        tol: relative duality gap at which to stop.
        verbose: print progress.
        devices: ``None``, an int or a list of ``jax.Device``: where the fit
            runs, as in :class:`jaxrank.StructuredSVM`.
        pos_label: without ``groups``, the label of the relevant class, one
            of the two values of ``y``; ``None``: the larger label.

    Attributes:
        coef_, intercept_, classes_, n_iter_, objective_, dual_objective_,
        converged_, n_queries_, n_dropped_queries_, n_features_in_: as
        :class:`jaxrank.APSVM`.

    Raises:
        ValueError: in ``fit``, for ``C <= 0`` and the bad inputs listed in
            :meth:`jaxrank.StructuredSVM.fit`.

    References:
        Mohapatra, Rolinek, Jawahar, Kolmogorov, Kumar, "Efficient
        optimization for rank-based loss functions", CVPR 2018; Chakrabarti,
        Khanna, Sawant, Bhattacharyya, "Structured learning for non-smooth
        ranking losses", KDD 2008 (the NDCG structural SVM).

    Examples:
        >>> import numpy as np, jaxrank
        >>> X, y = jaxrank.datasets.load_keel("yeast3", return_X_y=True)
        >>> X = (X - X.mean(0)) / X.std(0)
        >>> qid = np.arange(X.shape[0]) % 20          # 20 toy queries
        >>> model = jaxrank.NDCGSVM(C=100.0).fit(X, y, groups=qid)
        >>> 0 <= model.score(X, y, groups=qid) <= 1
        True
    """

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "min_relevance": [Interval(Real, None, None, closed="neither")],
        **DEVICES_CONSTRAINT,
    }
    _scoring = "ndcg"

    def __init__(self, C=100.0, *, min_relevance=1, max_iter=1000, tol=1e-4, verbose=False,
                 devices=None, pos_label=None):
        self.C = C
        self.min_relevance = min_relevance
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _model(self, static):
        return NDCGModel(kp=max(int(static["max_pos"]), 1),
                         grouped=bool(static.get("grouped", False)))

    def _score_one(self, s, positive):
        return ndcg_binary(s, positive)

    def _score_queries(self, s, positive, groups):
        return mean_ndcg(s, positive, groups)

    def fit(self, X, y, *, groups=None):
        """Fit the NDCG structural SVM; with ``groups`` (query ids), the mean over queries.

        See :meth:`jaxrank.StructuredSVM.fit` for ``X``, ``y`` and the errors;
        with ``groups``, ``y`` holds relevance grades (class docstring).
        """
        return super().fit(X, y, groups=groups)

    def score(self, X, y, sample_weight=None, *, groups=None):
        """NDCG (binary gains, no cut-off) of :meth:`decision_function`; the mean over
        ``groups``.

        With ``groups``, for a model fitted with ``groups``, ``y`` holds
        grades and relevant means ``y >= min_relevance``; otherwise ``y``
        holds the two ``classes_``. Queries without a relevant or without an
        irrelevant item are left out of the mean.

        Raises:
            ValueError: ``sample_weight`` given; labels that are not this
                model's ``classes_``; no query with both kinds of item.
        """
        return super().score(X, y, sample_weight, groups=groups)
