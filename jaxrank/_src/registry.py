"""The one registry of estimator classes (used by sweep, the CLI and save/load).

Adding a model family is one module (its model and estimator) plus one entry
here. The key is the model's name on the command line (``--model``) and in
:func:`jaxrank.sweep`; ``save``/``load`` store the class name.
"""

from __future__ import annotations

from jaxrank._src.apsvm import APSVM
from jaxrank._src.appx import APSVMApprox
from jaxrank._src.aucsvm import AUCSVM
from jaxrank._src.binary import BinarySVM
from jaxrank._src.high_order import HOAPSVM, HOBSVM
from jaxrank._src.kernelrank import KernelRank
from jaxrank._src.latent import LatentAPSVM, LatentSSVM, LatentSVM

ESTIMATORS = {
    "apsvm": APSVM,
    "svm": BinarySVM,
    "apsvm-appx": APSVMApprox,
    "auc-svm": AUCSVM,
    "kernelrank": KernelRank,
    "latent-apsvm": LatentAPSVM,
    "latent-svm": LatentSVM,
    "latent-ssvm": LatentSSVM,
    "hob-svm": HOBSVM,
    "hoap-svm": HOAPSVM,
}


def get_estimator(name):
    """The estimator class registered as ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    try:
        return ESTIMATORS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown model {name!r}; expected one of {sorted(ESTIMATORS)}.") from None


def name_of(estimator):
    """Registry name of an estimator class or instance (``None`` if unregistered)."""
    cls = estimator if isinstance(estimator, type) else type(estimator)
    for k, v in ESTIMATORS.items():
        if v is cls:
            return k
    return None


def by_class_name():
    """``{class name: class}`` of the registered estimators (for ``load``)."""
    return {cls.__name__: cls for cls in ESTIMATORS.values()}
