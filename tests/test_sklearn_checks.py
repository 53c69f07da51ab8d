"""scikit-learn's estimator checks on every registered estimator.

The ``fit(X, y)`` estimators run every check of
``parametrize_with_checks`` (none is expected to fail). The weakly supervised
and graph estimators (``LatentAPSVM``/``LatentSVM``/``LatentSSVM``,
``HOBSVM``/``HOAPSVM``) need ``bags=`` or ``edges=`` in ``fit``,
``decision_function``, ``predict`` and ``score``, which scikit-learn's checks
cannot pass: they run the checks that need no fit (construction, parameters,
cloning, tags, repr). Their fit-time conventions (the label rule, NaN/inf/
complex ``X``, ``NotFittedError``, save/load) are in ``test_battery.py``.
"""

import pytest
from estimator_settings import fast_params, needs_side_input
from sklearn.utils import estimator_checks as ec
from sklearn.utils.estimator_checks import parametrize_with_checks

import jaxrank

# Every registered estimator whose fit takes (X, y) runs every check; those
# whose fit needs bags= or edges= (declared by the class) run the checks without fit.
ESTIMATORS = [jaxrank.ESTIMATORS[k](**fast_params(k)) for k in sorted(jaxrank.ESTIMATORS)
              if not needs_side_input(jaxrank.ESTIMATORS[k])]
KEYWORD_FIT = sorted(k for k, c in jaxrank.ESTIMATORS.items() if needs_side_input(c))

# The checks of scikit-learn that need no fit.
NO_FIT_CHECKS = [
    ec.check_parameters_default_constructible,
    ec.check_no_attributes_set_in_init,
    ec.check_get_params_invariance,
    ec.check_set_params,
    ec.check_estimator_cloneable,
    ec.check_estimator_repr,
    ec.check_do_not_raise_errors_in_init_or_set_params,
    ec.check_mixin_order,
    ec.check_valid_tag_types,
    ec.check_estimator_tags_renamed,
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("check", NO_FIT_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", KEYWORD_FIT)
def test_keyword_fit_estimators_pass_the_checks_without_fit(name, check):
    cls = jaxrank.ESTIMATORS[name]
    check(cls.__name__, cls())
