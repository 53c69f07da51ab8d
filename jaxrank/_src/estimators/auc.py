r"""The ROC-area SVM (Joachims 2005; SVM-perf ``-l 10``) as a scikit-learn estimator."""

from __future__ import annotations

from jaxrank._src.estimators.base import StructuredSVM
from jaxrank._src.estimators.checks import DEVICES_CONSTRAINT
from jaxrank._src.models.auc import AUCModel


class AUCSVM(StructuredSVM):
    r"""ROC-area SVM (Joachims 2005; SVM-perf ``-l 10``), 1-slack form.

    .. math::
        \min_w \tfrac12 \|w\|^2 + C \xi, \quad
        \xi = \max_{y} \Delta(y^*, y) - w^\top(\Psi(X, y^*) - \Psi(X, y)),

    with ``Psi``, ``Delta`` normalised by ``1/(PN)`` (module docstring; so
    ``xi`` is in AUC units and, as for :class:`jaxrank.APSVM`, useful ``C``
    values are large). No intercept (AUC ignores it). Solved by
    :func:`jaxrank.solvers.fit` with the O(n log n) oracle, in one jitted
    call. Dense or scipy.sparse ``X`` (kept sparse).

    Args:
        C: trade-off ``> 0`` (default 100; the default grid
            ``_default_Cs`` spans ``1``-``10^4``).
        max_iter: maximum calls of the inference oracle.
        tol: relative duality gap at which the solver stops.
        verbose: print progress.
        devices: ``None``, an int or a list of ``jax.Device``: where the fit
            runs (data parallel for one task), as in :class:`StructuredSVM`.
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        coef_, intercept_, classes_, n_iter_, objective_, dual_objective_,
        converged_, n_features_in_: as :class:`jaxrank.APSVM`.

    Raises:
        ValueError: bad hyperparameters and the inputs of ``fit``.

    References:
        Joachims, "A support vector method for multivariate performance
        measures", ICML 2005.
    """

    _parameter_constraints = {**StructuredSVM._parameter_constraints, **DEVICES_CONSTRAINT}
    _default_Cs = (1.0, 10.0, 100.0, 1000.0, 10000.0)

    def __init__(self, C=100.0, *, max_iter=2000, tol=1e-4, verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _model(self, static):
        return AUCModel()
