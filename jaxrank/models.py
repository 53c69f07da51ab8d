"""The structured-model interface (public API).

A structured model is a frozen dataclass with a feature map ``scores(w,
data)`` (linear in ``w``), an optional loss-augmented inference oracle
``oracle(S, problem) -> Violation`` and optional per-sample hinge terms
``hinge_terms(data, problem, C) -> HingeTerms``; :func:`jaxrank.solvers.fit`
and :func:`jaxrank.solvers.fit_many` train any of them. See the worked
example of a user-defined model in docs/interface.md.

* Base and protocols: :class:`Model`, :class:`StructuredModel`,
  :class:`FeatureMap`, :class:`HingeTerms`, :class:`jaxrank.inference.Violation`.
* Data and feature maps: :class:`Design` / :func:`design` (dense or sparse
  design matrix), :class:`LinearFeatures` (``S = X w``), :class:`Intercept`.
* Problems: :class:`ItemProblem`, :class:`QueryProblem`.
* Built-in models: :class:`APModel`, :class:`NDCGModel`, :class:`BinaryModel`,
  :class:`AUCModel`, :class:`AppxModel`.
* Weak supervision (bags of candidates): :class:`BagData` / :func:`bag_data`
  (padded ``[bags, T_max]`` candidate table), :class:`CandidateFeatures`,
  :class:`LatentProblem`, :class:`LatentAPModel`, :class:`LatentSVMModel`,
  :class:`LatentSSVMModel` (each with ``impute`` for CCCP), and the CCCP
  pieces :func:`latent_objective`, :func:`cccp_update`.
* High-order (samples with a graph of similar pairs): :class:`HOBModel` and
  :class:`HOAPModel`, feature map :class:`HighOrderFeatures` on
  :class:`GraphData`, problems :class:`HOBProblem`, :class:`HOAPProblem`.
"""

from jaxrank._src.features import Intercept, LinearFeatures
from jaxrank._src.layout import Design, design, query_layout
from jaxrank._src.models.ap import APModel
from jaxrank._src.models.appx import AppxModel, AppxProblem
from jaxrank._src.models.auc import AUCModel
from jaxrank._src.models.base import ItemProblem, Model, QueryProblem
from jaxrank._src.models.binary import BinaryModel
from jaxrank._src.models.contingency import ContingencyModel, ContingencyProblem
from jaxrank._src.models.high_order import (
    GraphData,
    HighOrderFeatures,
    HOAPModel,
    HOAPProblem,
    HOBModel,
    HOBProblem,
    pairwise_design,
)
from jaxrank._src.models.latent import (
    BagData,
    CandidateFeatures,
    LatentAPModel,
    LatentProblem,
    LatentSSVMModel,
    LatentSVMModel,
    bag_data,
)
from jaxrank._src.models.ndcg import NDCGModel
from jaxrank._src.solvers.cccp import cccp_update, latent_objective
from jaxrank._src.types import FeatureMap, HingeTerms, StructuredModel

__all__ = [
    "APModel",
    "AUCModel",
    "AppxModel",
    "AppxProblem",
    "BagData",
    "BinaryModel",
    "CandidateFeatures",
    "ContingencyModel",
    "ContingencyProblem",
    "Design",
    "GraphData",
    "HOAPModel",
    "HOAPProblem",
    "HOBModel",
    "HOBProblem",
    "HighOrderFeatures",
    "FeatureMap",
    "HingeTerms",
    "Intercept",
    "ItemProblem",
    "LatentAPModel",
    "LatentProblem",
    "LatentSSVMModel",
    "LatentSVMModel",
    "LinearFeatures",
    "Model",
    "NDCGModel",
    "QueryProblem",
    "StructuredModel",
    "bag_data",
    "cccp_update",
    "design",
    "latent_objective",
    "pairwise_design",
    "query_layout",
]
