"""jaxrank: rankers that optimise Average Precision and ROC-AUC, in JAX.

* Estimators (scikit-learn style): :class:`APSVM` (also query-grouped,
  SVM-map), :class:`APSVMApprox`, :class:`BinarySVM`, :class:`AUCSVM`,
  :class:`KernelRank`; weak supervision (bags of candidates, CCCP):
  :class:`LatentAPSVM`, :class:`LatentSVM`, :class:`LatentSSVM`; high-order
  (samples with a graph of similar pairs): :class:`HOBSVM`,
  :class:`HOAPSVM`; every
  structured SVM derives from :class:`StructuredSVM`. :data:`ESTIMATORS` is
  the registry (CLI names).
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

All kernels are pure and compose with ``jit``/``vmap``/``grad``.
"""

from jaxrank import (
    datasets,
    graph,
    inference,
    losses,
    metrics,
    model_selection,
    models,
    solvers,
)
from jaxrank._src.apsvm import APSVM
from jaxrank._src.appx import APSVMApprox
from jaxrank._src.aucsvm import AUCSVM
from jaxrank._src.base import StructuredSVM
from jaxrank._src.binary import BinarySVM
from jaxrank._src.data import load_data
from jaxrank._src.high_order import HOAPSVM, HOBSVM
from jaxrank._src.io import load, save
from jaxrank._src.kernelrank import KernelRank
from jaxrank._src.latent import LatentAPSVM, LatentSSVM, LatentSVM
from jaxrank._src.registry import ESTIMATORS
from jaxrank._src.sweep import SweepResult, sweep

__version__ = "0.2.0"

__all__ = [
    "APSVM",
    "APSVMApprox",
    "AUCSVM",
    "BinarySVM",
    "ESTIMATORS",
    "HOAPSVM",
    "HOBSVM",
    "KernelRank",
    "LatentAPSVM",
    "LatentSSVM",
    "LatentSVM",
    "StructuredSVM",
    "SweepResult",
    "datasets",
    "graph",
    "inference",
    "load",
    "load_data",
    "losses",
    "metrics",
    "model_selection",
    "models",
    "save",
    "solvers",
    "sweep",
]
