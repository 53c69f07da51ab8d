"""Loss-augmented inference (public API).

* :func:`ap_most_violated` — AP-SVM, Algorithms 1-3 of Mohapatra et al. 2014.
* :func:`zero_one_most_violated` — binary SVM (hinge / 0-1 loss).
* :func:`auc_most_violated` — ROC-area loss (Joachims 2005, SVM-perf ``-l 10``).
* :class:`MostViolated` — the result: ``loss``, ``coef``, ``hinge``,
  ``interleaving_rank``.

The subgradient of the structured hinge in a linear model ``s = X w`` is
``-X^T coef``::

    >>> import jax.numpy as jnp
    >>> from jaxrank.inference import ap_most_violated
    >>> X = jnp.array([[1., 0.], [0., 1.], [1., 1.]]); y = jnp.array([1, 0, 0])
    >>> r = ap_most_violated(X @ jnp.zeros(2), y)
    >>> float(r.loss), float(r.hinge)
    (0.6666666..., 0.6666666...)
"""

from jaxrank._src.kernelrank import auc_most_violated
from jaxrank._src.inference import (
    METHODS,
    MostViolated,
    ap_most_violated,
    zero_one_most_violated,
)

__all__ = [
    "METHODS",
    "MostViolated",
    "ap_most_violated",
    "auc_most_violated",
    "zero_one_most_violated",
]
