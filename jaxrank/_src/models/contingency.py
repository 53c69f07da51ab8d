r"""SVM-perf's contingency-table losses as structured models (Joachims, ICML 2005).

F1 (``svm_perf -l 1``), PRBEP (``-l 3``), Prec@k (``-l 4``) and Rec@k (``-l 5``):
a joint labelling of the items, ``Psi(X, y) = 1/(2n) sum_i y_i x_i``, and the
exact loss-augmented inference of :mod:`jaxrank._src.oracles.contingency`
(Algorithm 2 of the paper, O(n log n)). Scores ``S = X w`` (or ``X w + b``
with :class:`jaxrank.models.Intercept`, SVM-perf's bias feature ``--b 1``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax

from jaxrank._src.models.base import Model
from jaxrank._src.oracles.contingency import (
    f1_oracle,
    prbep_oracle,
    precision_at_k_oracle,
    recall_at_k_oracle,
)

LOSSES = ("f1", "prbep", "precision_at_k", "recall_at_k")


class ContingencyProblem(NamedTuple):
    """One fit of a contingency-table model.

    Attributes:
        positive: ``[n]`` bool labels.
        where: ``[n]`` bool, the items of the fit.
        k: ``[]`` int32, the ``k`` of Prec@k / Rec@k (a count of items; unused
            by F1 and PRBEP). Traced, so fits with different ``k`` (folds with
            different numbers of positives) share one program.
    """

    positive: jax.Array
    where: jax.Array
    k: jax.Array


@dataclasses.dataclass(frozen=True)
class ContingencyModel(Model):
    """A contingency-table loss of SVM-perf as a structured model.

    Attributes:
        loss: static, one of ``LOSSES``: ``"f1"``, ``"prbep"``,
            ``"precision_at_k"``, ``"recall_at_k"``.

    Problems are :class:`ContingencyProblem`.

    Raises:
        ValueError: an unknown ``loss``.
    """

    loss: str = "f1"

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}; got {self.loss!r}.")

    def oracle(self, S, problem):
        """Most-violated labelling (Joachims 2005, Algorithm 2)."""
        if self.loss == "f1":
            return f1_oracle(S, problem.positive, problem.where)
        if self.loss == "prbep":
            return prbep_oracle(S, problem.positive, problem.where)
        if self.loss == "precision_at_k":
            return precision_at_k_oracle(S, problem.positive, problem.where, problem.k)
        return recall_at_k_oracle(S, problem.positive, problem.where, problem.k)
