"""Quick settings of every registered estimator, for the tests (derived from the registry)."""

import jaxrank

# Small, fast settings shared by test_battery.py and test_sklearn_checks.py (same static
# arguments: one compiled program per estimator and shape bucket). Every
# registered estimator gets them from its parameters; the dict below only
# keeps the C values these tests were written with.
C_OF = {"apsvm": 10.0, "svm": 1.0, "apsvm-appx": 10.0, "auc-svm": 10.0, "latent-apsvm": 10.0,
        "latent-svm": 1.0, "latent-ssvm": 10.0, "hob-svm": 1.0, "hoap-svm": 1.0}


def fast_params(name):
    """Few iterations of every loop the estimator has (from its ``get_params``)."""
    params = jaxrank.ESTIMATORS[name]().get_params()
    out = {"max_iter": 10 if name == "kernelrank" else 30}
    if name in C_OF:
        out["C"] = C_OF[name]
    if "n_init" in params:
        out["n_init"] = 1
    if "cccp_max_iter" in params:
        out["cccp_max_iter"] = 2 if name == "hoap-svm" else 3
    if "random_state" in params:
        out["random_state"] = 0
    return out


def needs_side_input(cls):
    """Whether ``fit`` needs a side input (``bags=``, ``edges=``: its ``side_input``)."""
    return cls.side_input is not None and cls.side_input.required


