"""scikit-learn's estimator checks on every registered estimator.

Every registered estimator runs every check of ``parametrize_with_checks``.
Those whose ``fit(X, y)`` takes the data alone pass them all (none is
expected to fail). The weakly supervised and graph estimators (whose class
declares a required ``bags=`` or ``edges=``) need that input in ``fit``,
``decision_function``, ``predict`` and ``score``, which scikit-learn's checks
cannot pass: each check that fits is listed as an expected failure with that
reason (:func:`expected_failures`); the checks without fit (construction,
parameters, cloning, tags, repr) must pass. Their fit-time conventions (the
label rule, NaN/inf/complex ``X``, ``NotFittedError``, save/load) are in
``test_battery.py``.
"""

from estimator_settings import fast_params, needs_side_input
from sklearn.utils import estimator_checks as ec
from sklearn.utils.estimator_checks import parametrize_with_checks

import jaxrank

ESTIMATORS = [jaxrank.ESTIMATORS[k](**fast_params(k)) for k in sorted(jaxrank.ESTIMATORS)]

# The checks of scikit-learn that need no fit: every estimator passes them (the
# expected failures are strict: a listed check that passes is an error).
NO_FIT_CHECKS = {
    "check_parameters_default_constructible",
    "check_no_attributes_set_in_init",
    "check_get_params_invariance",
    "check_set_params",
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_valid_tag_types",
    "check_estimator_tags_renamed",
    # These pass too without a fit that needs bags= or edges= (no partial_fit,
    # no predict_proba; sample_weight is refused).
    "check_estimators_partial_fit_n_features",
    "check_decision_proba_consistency",
    "check_classifiers_one_label_sample_weights",
}


def expected_failures(estimator):
    """``{check name: reason}`` of the checks an estimator cannot pass."""
    if not needs_side_input(type(estimator)):
        return {}
    side = estimator.side_input.name
    reason = (f"{type(estimator).__name__} needs {side}= in fit and predict, which "
              "scikit-learn's checks do not pass")
    return {getattr(c, "func", c).__name__: reason
            for c in ec._yield_all_checks(estimator, legacy=True)
            if getattr(c, "func", c).__name__ not in NO_FIT_CHECKS}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failures, xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    check(estimator)
