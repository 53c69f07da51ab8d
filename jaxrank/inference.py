"""Loss-augmented inference (public API): oracles and their result type.

* :func:`ap_most_violated` — AP-SVM, Algorithms 1-3 of Mohapatra et al. 2014.
* :func:`ndcg_most_violated` — NDCG (binary gains), the divide and conquer of
  Mohapatra et al. 2018.
* :func:`zero_one_most_violated` — binary SVM (hinge / 0-1 loss).
* :func:`auc_most_violated` — ROC-area loss (Joachims 2005, SVM-perf ``-l 10``).
* :func:`ap_oracle`, :func:`ndcg_oracle`, :func:`zero_one_oracle`, :func:`auc_oracle` — the same
  kernels in oracle form ``(scores [n], positive [n], where [n]) ->
  Violation``, pure and unvalidated, for models of your own.
* :func:`sort_path` — which implementation runs the oracles' sorts (CPU
  host kernels or XLA); results are bitwise identical on every path.
* :class:`Violation` — the result: ``loss``, ``coef``, ``aux`` (e.g. the
  interleaving ranks), ``hinge``.

The subgradient of the structured hinge in a linear model ``s = X w`` is
``-X^T coef``::

    >>> import jax.numpy as jnp
    >>> from jaxrank.inference import ap_most_violated
    >>> X = jnp.array([[1., 0.], [0., 1.], [1., 1.]]); y = jnp.array([1, 0, 0])
    >>> r = ap_most_violated(X @ jnp.zeros(2), y)
    >>> float(r.loss), float(r.hinge)
    (0.6666666..., 0.6666666...)
"""

from jaxrank._src.oracles.ap import METHODS, ap_most_violated, ap_oracle
from jaxrank._src.oracles.auc import auc_most_violated, auc_oracle
from jaxrank._src.oracles.contingency import (
    f1_oracle,
    k_from_fraction,
    prbep_oracle,
    precision_at_k_oracle,
    recall_at_k_oracle,
)
from jaxrank._src.oracles.ndcg import ndcg_most_violated, ndcg_oracle
from jaxrank._src.oracles.sorting import sort_path
from jaxrank._src.oracles.zero_one import zero_one_most_violated, zero_one_oracle
from jaxrank._src.types import Violation

__all__ = [
    "METHODS",
    "Violation",
    "ap_most_violated",
    "ap_oracle",
    "auc_most_violated",
    "auc_oracle",
    "f1_oracle",
    "k_from_fraction",
    "ndcg_most_violated",
    "ndcg_oracle",
    "prbep_oracle",
    "precision_at_k_oracle",
    "recall_at_k_oracle",
    "sort_path",
    "zero_one_most_violated",
    "zero_one_oracle",
]
