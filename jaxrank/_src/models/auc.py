r"""The ROC-area SVM (Joachims 2005) as a structured model: ``S = X w`` and :func:`auc_oracle`."""

from __future__ import annotations

import dataclasses

from jaxrank._src.models.base import Model
from jaxrank._src.oracles.auc import auc_oracle


@dataclasses.dataclass(frozen=True)
class AUCModel(Model):
    """The ROC-area SVM as a structured model: ``S = X w``, :func:`auc_oracle`.

    Problems are :class:`jaxrank.models.ItemProblem`.
    """

    def oracle(self, S, problem):
        """Most-violated pair labelling."""
        return auc_oracle(S, problem.positive, problem.where)
