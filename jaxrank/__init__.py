"""jaxrank: rankers that optimise Average Precision, NDCG and ROC-AUC, in JAX.

* Estimators (scikit-learn style): :class:`APSVM` (also query-grouped,
  SVM-map), :class:`NDCGSVM`, :class:`APSVMApprox`, :class:`BinarySVM`, :class:`AUCSVM`,
  :class:`KernelRank`; weak supervision (bags of candidates, CCCP):
  :class:`LatentAPSVM`, :class:`LatentSVM`, :class:`LatentSSVM`; high-order
  (samples with a graph of similar pairs): :class:`HOBSVM`,
  :class:`HOAPSVM`; SVM-perf's other losses: :class:`F1SVM`,
  :class:`PRBEPSVM`, :class:`PrecisionAtKSVM`, :class:`RecallAtKSVM`; every
  structured SVM derives from :class:`StructuredSVM`. :data:`ESTIMATORS` is
  the registry (CLI names), :func:`register_estimator` adds to it; each
  class declares the per-sample side input its ``fit`` takes (query ids, bag
  ids, the sample graph, descriptor masks) as ``side_input``, a
  :class:`SideInput` that ``sweep``, the CLI and cross-validation read.
* :func:`sweep` — every (task, C, fold) fit of a grid search in one compiled
  call (also in :mod:`jaxrank.model_selection`).
* :mod:`jaxrank.models` — the structured-model interface (feature maps,
  problems, the built-in models); :mod:`jaxrank.solvers` — the one
  single-fit driver :func:`jaxrank.solvers.fit` and the one batched driver
  :func:`jaxrank.solvers.fit_many`.
* :mod:`jaxrank.graph` — max-marginals of pairwise supermodular scores
  (enumeration, graph cuts).
* :mod:`jaxrank.inference` — loss-augmented inference oracles and
  :class:`jaxrank.inference.Violation`; :mod:`jaxrank.losses`;
  :mod:`jaxrank.metrics`.
* :func:`save`, :func:`load`; data :mod:`jaxrank.datasets`, :func:`load_data`.
* :func:`use_compilation_cache` — JAX's persistent compilation cache in the
  user's cache folder, which the estimators turn on at their first fit (opt
  out with ``use_compilation_cache(enabled=False)`` or ``$JAXRANK_NO_CACHE``).

All kernels are pure and compose with ``jit``/``vmap``/``grad``.
"""

import importlib as _importlib

from jaxrank._src.estimators import registry as _registry

# Public names -> the module that defines them; every registered estimator
# class under its class name (the registry is the one list). Imported on first access
# (PEP 562), so ``import jaxrank`` and the command line load only what a run uses.
_SUBMODULES = ("datasets", "graph", "inference", "losses", "metrics",
               "model_selection", "models", "solvers")
_ATTRIBUTES = {
    "StructuredSVM": "jaxrank._src.estimators.base",
    "load_data": "jaxrank._src.data",
    "load": "jaxrank._src.io",
    "save": "jaxrank._src.io",
    "ESTIMATORS": "jaxrank._src.estimators.registry",
    "register_estimator": "jaxrank._src.estimators.registry",
    "SideInput": "jaxrank._src.estimators.side",
    "SweepResult": "jaxrank._src.estimators.sweep",
    "sweep": "jaxrank._src.estimators.sweep",
    "use_compilation_cache": "jaxrank._src.cache",
    **_registry.class_modules(),
}


def __getattr__(name):
    if name == "__version__":
        from importlib import metadata

        try:
            value = metadata.version("jaxrank")
        except metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
            value = "0+unknown"
    elif name in _SUBMODULES:
        value = _importlib.import_module("jaxrank." + name)
    elif name in _ATTRIBUTES:
        value = getattr(_importlib.import_module(_ATTRIBUTES[name]), name)
    else:
        raise AttributeError(f"module 'jaxrank' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


__all__ = sorted({*_ATTRIBUTES, *_SUBMODULES})
