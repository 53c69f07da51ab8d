"""Ranking metrics (public API): :func:`average_precision`, :func:`roc_auc`, and
SVM-perf's measures :func:`f1_at_zero`, :func:`prbep`, :func:`precision_at_k`, :func:`recall_at_k`.

The first two are pure, jit- and vmap-able over leading batch axes, and equal to
scikit-learn's ``average_precision_score`` / ``roc_auc_score`` with ties::

    >>> import jax, jax.numpy as jnp
    >>> from jaxrank.metrics import average_precision
    >>> s = jnp.array([[3., 2., 1.], [1., 2., 3.]])
    >>> y = jnp.array([[1, 0, 1], [1, 0, 1]])
    >>> jax.jit(average_precision)(s, y).round(4)
    Array([0.8333, 0.8333], dtype=float32)
"""

from jaxrank._src.metrics import average_precision, roc_auc
from jaxrank._src.oracles.contingency import f1_at_zero, prbep, precision_at_k, recall_at_k

__all__ = ["average_precision", "f1_at_zero", "prbep", "precision_at_k", "recall_at_k",
           "roc_auc"]
