"""Losses on scores (public API), differentiable with ``jax.grad``.

* :func:`ap_hinge_loss` — the AP-SVM structured hinge (exact inference inside).
* :func:`hinge_loss` — the binary SVM hinge (``LinearSVC(loss="hinge")``).
"""

from jaxrank._src.losses import ap_hinge_loss, hinge_loss

__all__ = ["ap_hinge_loss", "hinge_loss"]
