r"""SVM-perf's other losses as scikit-learn estimators: F1, PRBEP, Prec@k, Rec@k.

Joachims, "A support vector method for multivariate performance measures",
ICML 2005: the 1-slack structural SVM

.. math::
    \min_{w, b} \tfrac12 \|[w, b]\|^2 + C \xi, \quad
    \xi = \max_{y} \Delta(y^*, y) - [w, b]^\top(\Psi(y^*) - \Psi(y)),

with ``Psi(y) = 1/(2n) sum_i y_i [x_i, 1]`` and the contingency-table losses of
:mod:`jaxrank._src.oracles.contingency` (exact inference, Algorithm 2). The
constant feature is SVM-perf's bias feature (``--b 1``); ``C`` relates to
SVM-perf's ``-c`` by ``C = 100 c`` (same features, same ``w``), so SVM-perf's
default ``-c 0.01`` is ``C = 1``. ``score`` is each estimator's own measure.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval

from jaxrank._src.estimators.base import StructuredSVM
from jaxrank._src.estimators.checks import DEVICES_CONSTRAINT
from jaxrank._src.models.contingency import ContingencyModel, ContingencyProblem
from jaxrank._src.oracles.contingency import (
    f1_at_zero,
    k_from_fraction,
    prbep,
    precision_at_k,
    recall_at_k,
)
from jaxrank._src.solvers.run import _to_device


class _ContingencySVM(StructuredSVM):
    """Base of the contingency-table estimators (the class docstrings of the four)."""

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "fit_intercept": ["boolean"],
        **DEVICES_CONSTRAINT,
    }
    # SVM-perf's -c 0.001 .. 10 (C = 100 c).
    _default_Cs = (0.1, 1.0, 10.0, 100.0, 1000.0)
    _learns_intercept = True
    _loss = None  # ContingencyModel.loss
    _measure = None  # the estimator's own measure (score)

    def __init__(self, C=1.0, *, fit_intercept=True, max_iter=2000, tol=1e-4, verbose=False,
                 devices=None, pos_label=None):
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _model(self, static):
        return ContingencyModel(features=self._features(), loss=self._loss)

    def _k(self, n_positive):
        """``[M]`` int32 ``k`` of each fit (unused by F1 and PRBEP)."""
        return np.ones(np.shape(n_positive), np.int32)

    def _problems(self, data, positive, where, groups):
        positive = np.asarray(positive, bool)
        where = np.asarray(where, bool)
        k = np.asarray(self._k(np.sum(positive & where, axis=-1)), np.int32)
        return ContingencyProblem(_to_device(positive), _to_device(where), _to_device(k)), {}

    @property
    def _scoring(self):
        return self._loss  # each loss is named after its measure

    def _score_one(self, s, positive):
        return float(self._measure(s, positive))

    def score(self, X, y, sample_weight=None):
        """The estimator's own measure of :meth:`decision_function` on ``(X, y)``.

        For a model fitted on a 2-D ``y``, the mean over the task columns.

        Raises:
            ValueError: ``sample_weight`` given; labels that are not this
                model's ``classes_``; a task column count other than the fit's.
        """
        if sample_weight is not None:
            raise ValueError(f"sample_weight is not supported by {type(self).__name__}.score.")
        s, positive = self._scored_tasks(X, y)
        return float(np.mean([self._score_one(s[:, t], positive[t])
                              for t in range(positive.shape[0])]))


_ARGS = """
    Args:
        C: trade-off ``> 0`` (``100 *`` SVM-perf's ``-c``; default 1, SVM-perf's
            default ``-c 0.01``).
        fit_intercept: learn ``b``, a regularised constant feature (SVM-perf's
            ``--b 1``).{k}
        max_iter: maximum calls of the inference oracle.
        tol: relative duality gap at which the solver stops.
        verbose: print progress.
        devices: ``None``, an int or a list of ``jax.Device`` (as
            :class:`jaxrank.StructuredSVM`).
        pos_label: the label of the positive class; ``None``: the larger label.

    Attributes:
        coef_, intercept_, classes_, n_iter_, objective_, dual_objective_,
        converged_, n_features_in_: as :class:`jaxrank.APSVM`.

    Raises:
        ValueError: bad hyperparameters and the inputs of ``fit``.

    References:
        Joachims, "A support vector method for multivariate performance
        measures", ICML 2005 (Algorithm 2); SVM-perf ``-l {flag}``.
"""

_K_ARG = """
        k: the ``k`` of {name} (a count of items, ``>= 1``), or ``None``
            (default): SVM-perf's default, ``max(1, floor({p} P))`` with ``P`` the
            positives of the fit (of the scored data in ``score``)."""


class F1SVM(_ContingencySVM):
    """SVM-perf's F1 loss (``-l 1``): maximises F1 of the predictions ``decision_function > 0``.

    ``score`` is that F1 (:func:`jaxrank.metrics.f1_at_zero`; 0 without a true positive).
    """

    _loss = "f1"
    _measure = staticmethod(f1_at_zero)


class PRBEPSVM(_ContingencySVM):
    """SVM-perf's precision/recall break-even loss (``-l 3``).

    ``score`` is the PRBEP of the ranking: the precision of the top ``P``
    items (:func:`jaxrank.metrics.prbep`; ties averaged over their orders).
    """

    _loss = "prbep"
    _measure = staticmethod(prbep)


class _AtKSVM(_ContingencySVM):
    _parameter_constraints = {
        **_ContingencySVM._parameter_constraints,
        "k": [None, Interval(Integral, 1, None, closed="left")],
    }
    _fraction = None  # SVM-perf's default --p

    def __init__(self, C=1.0, *, k=None, fit_intercept=True, max_iter=2000, tol=1e-4,
                 verbose=False, devices=None, pos_label=None):
        super().__init__(C, fit_intercept=fit_intercept, max_iter=max_iter, tol=tol,
                         verbose=verbose, devices=devices, pos_label=pos_label)
        self.k = k

    def _k(self, n_positive):
        if self.k is None:
            return np.asarray(k_from_fraction(np.asarray(n_positive), self._fraction))
        return np.full(np.shape(n_positive), int(self.k), np.int32)

    def _score_one(self, s, positive):
        k = int(self._k(np.sum(positive)))
        return float(self._measure(s, positive, k=k))


class PrecisionAtKSVM(_AtKSVM):
    """SVM-perf's Prec@k loss (``-l 4``): the precision of the ``k`` highest-scoring items.

    ``score`` is Prec@k of the ranking (:func:`jaxrank.metrics.precision_at_k`).
    """

    _loss = "precision_at_k"
    _measure = staticmethod(precision_at_k)
    _fraction = 0.5


class RecallAtKSVM(_AtKSVM):
    """SVM-perf's Rec@k loss (``-l 5``): the recall of the ``k`` highest-scoring items.

    ``score`` is Rec@k of the ranking (:func:`jaxrank.metrics.recall_at_k`).
    """

    _loss = "recall_at_k"
    _measure = staticmethod(recall_at_k)
    _fraction = 2.0


F1SVM.__doc__ += _ARGS.format(k="", flag=1)
PRBEPSVM.__doc__ += _ARGS.format(k="", flag=3)
PrecisionAtKSVM.__doc__ += _ARGS.format(
    k=_K_ARG.format(name="Prec@k", p="0.5"), flag=4)
RecallAtKSVM.__doc__ += _ARGS.format(k=_K_ARG.format(name="Rec@k", p="2"), flag=5)
