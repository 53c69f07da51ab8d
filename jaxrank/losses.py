"""Losses on scores (public API), differentiable with ``jax.grad``.

* :func:`ap_hinge_loss` — the AP-SVM structured hinge (exact inference inside).
* :func:`ndcg_hinge_loss` — the NDCG structured hinge (binary gains, exact inference).
* :func:`hinge_loss` — the binary SVM hinge (``LinearSVC(loss="hinge")``).
* :func:`structured_hinge` — the structured hinge of any oracle.
* :func:`kernel_auc`, :func:`kernel_auc_loss` — KernelRank's smoothed AUC
  (Gao & Sun, eq. (11)), with :func:`smoothed_step` the smoothing function.
"""

from jaxrank._src.oracles.smoothing import kernel_auc, kernel_auc_loss, smoothed_step
from jaxrank._src.losses import ap_hinge_loss, hinge_loss, ndcg_hinge_loss, structured_hinge

__all__ = [
    "ap_hinge_loss",
    "hinge_loss",
    "kernel_auc",
    "kernel_auc_loss",
    "ndcg_hinge_loss",
    "smoothed_step",
    "structured_hinge",
]
