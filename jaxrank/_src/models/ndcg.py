r"""The NDCG structural SVM as a structured model: AP-SVM's feature map, the NDCG oracle.

``S = X w``, AP-SVM's joint feature vector (eq. (1) of Mohapatra et al.
2014) and ``Delta = 1 - NDCG`` (binary gains, no cut-off), with the exact
loss-augmented inference of Mohapatra et al. (CVPR 2018)
(:func:`jaxrank.inference.ndcg_oracle`); over queries, the mean of the
per-query losses, as :class:`jaxrank.models.APModel`.
"""

from __future__ import annotations

import dataclasses

from jaxrank._src.models.ap import APModel
from jaxrank._src.oracles.ndcg import ndcg_oracle
from jaxrank._src.types import Violation


@dataclasses.dataclass(frozen=True)
class NDCGModel(APModel):
    """NDCG structural SVM as a structured model (see module docstring).

    Attributes:
        kp: static bound on the relevant items of a list (of a query with
            ``grouped``).
        grouped: static; problems are :class:`jaxrank.models.QueryProblem`
            (mean of the per-query NDCG losses) instead of
            :class:`jaxrank.models.ItemProblem`.
        method: unused (AP's inference method; NDCG has one exact method).
    """

    def list_oracle(self, scores, positive, where) -> Violation:
        """:func:`jaxrank.inference.ndcg_oracle` on one list."""
        return ndcg_oracle(scores, positive, where, kp=self.kp)
