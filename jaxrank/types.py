"""Public types of the structured-model interface (see :mod:`jaxrank.models`)."""

from jaxrank._src.types import FeatureMap, HingeTerms, StructuredModel, Violation

__all__ = ["FeatureMap", "HingeTerms", "StructuredModel", "Violation"]
