"""scikit-learn's estimator checks on every registered estimator."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import jaxrank

ESTIMATORS = [
    jaxrank.APSVM(C=10.0, max_iter=30),
    jaxrank.BinarySVM(C=1.0, max_iter=30),
    jaxrank.APSVMApprox(C=10.0, max_iter=30),
    jaxrank.AUCSVM(C=10.0, max_iter=30),
    jaxrank.KernelRank(max_iter=10),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
