r"""Feature maps: the part of a structured model that is linear in ``w``.

A *feature map* turns weights ``w [dim]`` and the data into the scores ``S``
that loss-augmented inference consumes: ``S = scores(w, data)``. It must be
linear in ``w`` (so that the joint feature vector of an output is the
transpose of the map applied to the oracle's ``coef``; the solver gets it from
``jax.vjp``), and ``S`` may be any pytree: ``[n]`` item scores, ``[bags, T]``
candidate scores, or a unary ``[n]`` part plus a pairwise ``[E]`` part.

The linear maps every built-in model uses: :class:`LinearFeatures` (``S = X
w`` on a :class:`jaxrank._src.layout.Design`) and the wrapper
:class:`Intercept` (``S = f(w[:-1]) + w[-1]``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from jaxrank._src.layout import Design


@dataclasses.dataclass(frozen=True)
class LinearFeatures:
    """``S = X w``: one score per row of a :class:`Design` (items ``[n]``).

    Static (hashable) configuration; the data is the :class:`Design`.
    """

    def dim(self, data: Design) -> int:
        """Number of weights: ``d``."""
        return data.shape[1]

    def __call__(self, w, data: Design):
        return data @ w

    def hinge_rows(self, data: Design):
        """The rows ``z_i`` of per-sample hinges on ``S``: ``(data, bias=0)``.

        A design stored as :class:`ShiftedRows` is materialised (one copy
        inside the compiled program): the hinge block reads rows directly.
        """
        return data.materialized(), 0.0


@dataclasses.dataclass(frozen=True)
class Intercept:
    """Feature-map wrapper adding a (regularised) constant feature.

    ``S = base(w[:-1], data) + w[-1]`` on every leaf of ``S``; ``dim`` is one
    more than the base map's. The intercept is penalised like any weight (as
    in liblinear), which keeps every objective strongly convex.

    Attributes:
        base: the wrapped feature map.
    """

    base: Any = LinearFeatures()

    def dim(self, data) -> int:
        return self.base.dim(data) + 1

    def __call__(self, w, data):
        S = self.base(w[:-1], data)
        return jax.tree_util.tree_map(lambda s: s + w[-1], S)

    def hinge_rows(self, data):
        rows, bias = self.base.hinge_rows(data)
        if bias:
            raise ValueError("Intercept cannot wrap a feature map that already has one.")
        return rows, 1.0
