"""The one registry of estimator classes (used by sweep, the CLI and save/load).

Adding a model family is one module (its model and estimator) plus one entry
here. The key is the model's name on the command line (``--model``) and in
:func:`jaxrank.sweep`; ``save``/``load`` store the class name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

# name -> (module, class name). Modules are imported on first use, so that a
# command line run of one model does not import every model family.
_ENTRIES = {
    "apsvm": ("jaxrank._src.estimators.ap", "APSVM"),
    "svm": ("jaxrank._src.estimators.binary", "BinarySVM"),
    "apsvm-appx": ("jaxrank._src.estimators.appx", "APSVMApprox"),
    "auc-svm": ("jaxrank._src.estimators.auc", "AUCSVM"),
    "kernelrank": ("jaxrank._src.estimators.kernelrank", "KernelRank"),
    "latent-apsvm": ("jaxrank._src.estimators.latent", "LatentAPSVM"),
    "latent-svm": ("jaxrank._src.estimators.latent", "LatentSVM"),
    "latent-ssvm": ("jaxrank._src.estimators.latent", "LatentSSVM"),
    "hob-svm": ("jaxrank._src.estimators.high_order", "HOBSVM"),
    "hoap-svm": ("jaxrank._src.estimators.high_order", "HOAPSVM"),
}


def _load(entry):
    module, cls = entry
    return getattr(importlib.import_module(module), cls)


class _Registry(Mapping):
    """Read-only ``{name: estimator class}`` whose classes are imported on first access."""

    def __getitem__(self, name):
        return _load(_ENTRIES[name])

    def __iter__(self):
        return iter(_ENTRIES)

    def __len__(self):
        return len(_ENTRIES)

    def __repr__(self):
        return "ESTIMATORS(" + ", ".join(f"{k!r}: {c}" for k, (_, c) in _ENTRIES.items()) + ")"


ESTIMATORS = _Registry()


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
    for k, entry in _ENTRIES.items():
        if entry[1] == cls.__name__ and _load(entry) is cls:
            return k
    return None


def class_names():
    """Sorted class names of the registered estimators (no import)."""
    return sorted({c for _, c in _ENTRIES.values()})


def class_named(name):
    """The registered estimator class whose class name is ``name`` (for ``save``/``load``).

    Imports only that class's module; ``None`` if no registered class has that name.
    """
    for entry in _ENTRIES.values():
        if entry[1] == name:
            return _load(entry)
    return None
