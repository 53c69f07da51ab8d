"""The one registry of estimator classes (sweep, the CLI, save/load, re-exports, tests).

Adding a model family is its modules (oracle, model, estimator) plus one entry
here, or a call of :func:`register_estimator` for a class defined elsewhere.
The key is the model's name on the command line (``--model``) and in
:func:`jaxrank.sweep`; ``save``/``load`` store the class name; ``jaxrank``
re-exports every registered class under its class name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

# name -> (module, class name). Modules are imported on first use, so that a
# command line run of one model does not import every model family.
_ENTRIES = {
    "apsvm": ("jaxrank._src.estimators.ap", "APSVM"),
    "ndcg-svm": ("jaxrank._src.estimators.ndcg", "NDCGSVM"),
    "svm": ("jaxrank._src.estimators.binary", "BinarySVM"),
    "apsvm-appx": ("jaxrank._src.estimators.appx", "APSVMApprox"),
    "auc-svm": ("jaxrank._src.estimators.auc", "AUCSVM"),
    "kernelrank": ("jaxrank._src.estimators.kernelrank", "KernelRank"),
    "latent-apsvm": ("jaxrank._src.estimators.latent", "LatentAPSVM"),
    "latent-svm": ("jaxrank._src.estimators.latent", "LatentSVM"),
    "latent-ssvm": ("jaxrank._src.estimators.latent", "LatentSSVM"),
    "hob-svm": ("jaxrank._src.estimators.high_order", "HOBSVM"),
    "hoap-svm": ("jaxrank._src.estimators.high_order", "HOAPSVM"),
    "f1-svm": ("jaxrank._src.estimators.contingency", "F1SVM"),
    "prbep-svm": ("jaxrank._src.estimators.contingency", "PRBEPSVM"),
    "prec-at-k-svm": ("jaxrank._src.estimators.contingency", "PrecisionAtKSVM"),
    "rec-at-k-svm": ("jaxrank._src.estimators.contingency", "RecallAtKSVM"),
}


def register_estimator(name, cls):
    """Register an estimator class under ``name``.

    The class then works in :func:`jaxrank.sweep` (``model=name``), the command
    line (``jaxrank train --model name``) and :func:`jaxrank.save` /
    :func:`jaxrank.load`, like the built-in ones. It should derive from
    :class:`jaxrank.StructuredSVM` (hooks ``_model``, ``_problems``; see its
    docstring).

    Args:
        name: ``str``, the registry name (letters, digits and ``-``).
        cls: the estimator class.

    Raises:
        TypeError: ``cls`` is not a class or ``name`` not a string.
        ValueError: ``name`` malformed or taken, or another registered class
            has the same class name (model files store class names).
        TypeError: a ``side_input`` (:class:`jaxrank.SideInput`) that does not
            match the signatures of ``fit``/``score``/``decision_function``.
    """
    if not isinstance(name, str) or not isinstance(cls, type):
        raise TypeError(f"register_estimator needs a name (str) and a class; got "
                        f"{type(name).__name__} and {type(cls).__name__}.")
    if not name or not all(c.isalnum() or c == "-" for c in name):
        raise ValueError(f"name must be letters, digits and '-'; got {name!r}.")
    if name in _ENTRIES:
        raise ValueError(f"an estimator is already registered as {name!r}.")
    if cls.__name__ in class_names():
        raise ValueError(f"a registered estimator is already named {cls.__name__}.")
    from jaxrank._src.estimators.side import check_side_input

    check_side_input(cls)
    _ENTRIES[name] = (cls.__module__, cls.__name__)
    _CLASSES[(cls.__module__, cls.__name__)] = cls


# Classes registered with register_estimator (their modules need not be importable by name).
_CLASSES = {}


def _load(entry):
    if entry in _CLASSES:
        return _CLASSES[entry]
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


def class_modules():
    """``{class name: module}`` of the registered estimators (no import)."""
    return {c: m for m, c in _ENTRIES.values()}


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
