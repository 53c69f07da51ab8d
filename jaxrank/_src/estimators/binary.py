r"""The binary SVM (liblinear's objective, the papers' baseline) as a scikit-learn estimator."""

from __future__ import annotations

from sklearn.utils._param_validation import Interval, Real, StrOptions

from jaxrank._src.estimators.base import StructuredSVM
from jaxrank._src.estimators.checks import DEVICES_CONSTRAINT, check_positive_float32
from jaxrank._src.models.binary import BinaryModel


class BinarySVM(StructuredSVM):
    r"""Linear binary SVM with the hinge loss (the papers' baseline).

    Minimises the objective of ``sklearn.svm.LinearSVC(loss="hinge")``::

        1/2 ||[w, b]||^2 + C sum_i c_i max(0, 1 - y_i (w^T x_i + b))

    (the intercept is a regularised constant feature, as in liblinear;
    ``c_i = pos_weight`` for positives, 1 for negatives: ``LinearSVC``'s
    ``class_weight={positive: pos_weight, negative: 1}``; by default the
    classes weigh the same: ``LinearSVC(C=2 C n_neg / n,
    class_weight="balanced")``), by dual coordinate
    ascent (Hsieh et al. 2008) inside :func:`jaxrank.solvers.fit`, stopped at
    a certified relative duality gap ``tol``.

    Args:
        C: trade-off ``> 0`` (same meaning as in ``LinearSVC``).
        fit_intercept: learn ``b`` (regularised, as liblinear does).
        pos_weight: ``"balanced"`` (default): ``n_neg / n_pos`` of the
            training samples (of each fold and task in :func:`jaxrank.sweep`;
            1 where there is no positive), so that both classes weigh the
            same; or a number ``> 0``. ``pos_weight=1`` is ``LinearSVC``'s
            unweighted objective, whose optimum on rare positives can be
            ``coef_ = 0`` (every sample scored ``intercept_``, nothing ranked):
            the hinge sum prefers to give up on the positives.
        max_iter: maximum solver iterations (epochs of coordinate ascent).
        tol: relative duality gap at which to stop.
        verbose: print progress.
        devices: ``None``, an int or a list of ``jax.Device``: where the fit
            runs (data parallel for one task), as in :class:`StructuredSVM`.
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        coef_, intercept_, classes_, n_iter_, objective_, dual_objective_,
        converged_: as :class:`jaxrank.APSVM` (``intercept_`` is the learned
        ``b``).

    Raises:
        ValueError: bad ``C``, ``pos_weight`` (a number ``<= 0``, or a string
            other than ``"balanced"``) and the inputs of ``fit``.

    References:
        Cortes & Vapnik 1995; Hsieh, Chang, Lin, Keerthi, Sundararajan, ICML
        2008 (dual coordinate descent); the baseline of Mohapatra et al. 2014.
    """

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "fit_intercept": ["boolean"],
        "pos_weight": [Interval(Real, 0, None, closed="neither"), StrOptions({"balanced"})],
        **DEVICES_CONSTRAINT,
    }
    _default_Cs = (0.001, 0.01, 0.1, 1.0, 10.0)
    _learns_intercept = True

    def __init__(self, C=1.0, *, fit_intercept=True, pos_weight="balanced", max_iter=5000,
                 tol=1e-4, verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.fit_intercept = fit_intercept
        self.pos_weight = pos_weight
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _check_params(self):
        super()._check_params()
        if not isinstance(self.pos_weight, str):
            check_positive_float32(self.pos_weight, "pos_weight")

    def _model(self, static):
        pw = self.pos_weight if isinstance(self.pos_weight, str) else float(self.pos_weight)
        return BinaryModel(features=self._features(), pos_weight=pw)
