"""Base class of the built-in structured models (see :mod:`jaxrank._src.types`)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax

from jaxrank._src.features import LinearFeatures


class ItemProblem(NamedTuple):
    """One ranking (or labelling) of items: ``positive [n]`` and ``where [n]`` bool.

    ``where=False`` removes an item from the fit (e.g. a validation fold).
    """

    positive: jax.Array
    where: jax.Array


class QueryProblem(NamedTuple):
    """Rankings per query: ``positive [n]``, ``where [n]`` and ``layout [Q, L]`` int32.

    ``layout[q]`` holds the item indices of query ``q``, padded with ``n``.
    """

    positive: jax.Array
    where: jax.Array
    layout: jax.Array


@dataclasses.dataclass(frozen=True)
class Model:
    """A structured model with a feature map and suggested solver settings.

    Subclasses are frozen dataclasses that add their static configuration
    (e.g. the capacity ``kp`` and method of AP inference) and define
    ``oracle(S, problem)`` and/or ``hinge_terms(data, problem, C)``. Every
    field must be hashable: a model is a static argument of the jitted
    drivers, and two equal models share one compiled program.

    Attributes:
        features: the feature map (default :class:`LinearFeatures`, ``S = X w``).
        nonpositive: static ``(start, stop)`` or ``None``: the solver keeps
            ``w[start:stop] <= 0`` (sign constraints, e.g. HOB-SVM's pairwise
            weights).
    """

    features: Any = LinearFeatures()
    nonpositive: Any = None

    # The solver settings this model suggests (a class attribute, not a field):
    # any of ``cache``, ``inner_steps``, ``hinge_visits``; a
    # :class:`jaxrank.solvers.Solver` fills its unset fields from it
    # (:meth:`jaxrank.solvers.Solver.for_model`), else from its defaults.
    solver_defaults = {}

    oracle = None  # (S, problem) -> Violation; None: no 1-slack structured term

    def dim(self, data) -> int:
        """Static number of weights of the feature map."""
        return self.features.dim(data)

    def scores(self, w, data):
        """The feature map ``S = features(w, data)``."""
        return self.features(w, data)

    def hinge_terms(self, data, problem, C):
        """Per-sample hinge terms of the objective (``None``: none)."""
        return None

    def search_start(self, problem):
        """Start of a warm-started local-search oracle (``None``: the oracle is not one).

        A model whose oracle is a local search returns a pytree of arrays
        here (no batch axis); the solver then calls ``oracle(S, problem,
        start=...)`` with this start at a fit's first iteration and with the
        previous call's ``Violation.aux`` afterwards (:mod:`jaxrank._src.types`).
        """
        return None
