"""jaxrank: rankers that optimise Average Precision and ROC-AUC, in JAX.

* :mod:`jaxrank.metrics` — ``average_precision``, ``roc_auc``.
* :mod:`jaxrank.inference` — loss-augmented inference (``ap_most_violated``,
  ``zero_one_most_violated``).
* :mod:`jaxrank.losses` — ``ap_hinge_loss``, ``hinge_loss`` (``jax.grad``-able).
* :mod:`jaxrank.solvers` — the Pegasos-style solver ``fit_ssvm``.
* Estimators: :class:`APSVM`, :class:`APSVMApprox`, :class:`BinarySVM`,
  :class:`KernelRank`, :class:`AUCSVM`; batched training :func:`sweep` and
  :mod:`jaxrank.model_selection`; persistence :func:`save`,
  :func:`load`; data :mod:`jaxrank.datasets`, :func:`load_data`.

All kernels are pure and compose with ``jit``/``vmap``/``grad``.
"""

from jaxrank import datasets, inference, losses, metrics, model_selection, solvers
from jaxrank._src.appx import APSVMApprox
from jaxrank._src.estimators import APSVM, BinarySVM
from jaxrank._src.kernelrank import AUCSVM, KernelRank
from jaxrank._src.sweep import SweepResult, sweep
from jaxrank._src.io import load, load_data, save

__version__ = "0.1.0"

__all__ = [
    "APSVM",
    "APSVMApprox",
    "AUCSVM",
    "BinarySVM",
    "KernelRank",
    "datasets",
    "inference",
    "load",
    "load_data",
    "losses",
    "metrics",
    "model_selection",
    "save",
    "solvers",
    "sweep",
    "SweepResult",
]
