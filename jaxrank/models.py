"""The structured-model interface (public API).

A structured model is a frozen dataclass with a feature map ``scores(w,
data)`` (linear in ``w``), an optional loss-augmented inference oracle
``oracle(S, problem) -> Violation`` and optional per-sample hinge terms
``hinge_terms(data, problem, C) -> HingeTerms``; :func:`jaxrank.solvers.fit`
and :func:`jaxrank.solvers.fit_many` train any of them. See the README's
worked example of a user-defined model.

* Base and protocols: :class:`Model`, :class:`StructuredModel`,
  :class:`FeatureMap`, :class:`HingeTerms`, :class:`jaxrank.inference.Violation`.
* Data and feature maps: :class:`Design` / :func:`design` (dense or sparse
  design matrix), :class:`LinearFeatures` (``S = X w``), :class:`Intercept`.
* Problems: :class:`ItemProblem`, :class:`QueryProblem`.
* Built-in models: :class:`APModel`, :class:`BinaryModel`, :class:`AUCModel`,
  :class:`AppxModel`, :class:`HOBModel` and :class:`HOAPModel` (high-order:
  feature map :class:`HighOrderFeatures` on :class:`GraphData`, problems
  :class:`HOBProblem`, :class:`HOAPProblem`).
"""

from jaxrank._src.apsvm import APModel, query_layout
from jaxrank._src.appx import AppxModel, AppxProblem
from jaxrank._src.aucsvm import AUCModel
from jaxrank._src.binary import BinaryModel
from jaxrank._src.features import Design, Intercept, LinearFeatures, design
from jaxrank._src.high_order import (
    GraphData,
    HighOrderFeatures,
    HOAPModel,
    HOAPProblem,
    HOBModel,
    HOBProblem,
    pairwise_design,
)
from jaxrank._src.models import ItemProblem, Model, QueryProblem
from jaxrank._src.types import FeatureMap, HingeTerms, StructuredModel

__all__ = [
    "APModel",
    "AUCModel",
    "AppxModel",
    "AppxProblem",
    "BinaryModel",
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
    "LinearFeatures",
    "Model",
    "QueryProblem",
    "StructuredModel",
    "design",
    "pairwise_design",
    "query_layout",
]
