r"""The binary SVM (the papers' baseline) as a structured model: a sum of hinges.

``1/2 ||[w, b]||^2 + C sum_i c_i max(0, 1 - y_i (w^T x_i + b))`` is the
objective of ``sklearn.svm.LinearSVC(loss="hinge")`` (liblinear ``-s 3``,
the intercept a regularised constant feature). As a structured model it has
no 1-slack oracle, only per-sample hinge terms (:class:`BinaryModel`), so the
solver runs dual coordinate ascent on them (Hsieh et al. 2008), liblinear's
algorithm, with the same certified duality gap as every other model.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from jaxrank._src.models.base import Model
from jaxrank._src.types import HingeTerms


@dataclasses.dataclass(frozen=True)
class BinaryModel(Model):
    """Per-sample hinges ``C c_i max(0, 1 - y_i s_i)`` of the binary SVM.

    Problems are :class:`jaxrank.models.ItemProblem` (``positive``, ``where``;
    items outside ``where`` have no term).

    Attributes:
        pos_weight: static weight ``c_i`` of the positives (negatives 1), or
            ``"balanced"``: ``n_neg / n_pos`` of each problem's items in
            ``where`` (traced, so folds and tasks of one batch each get their
            own; 1 when a problem has no positive), so that the positives'
            total weight equals the negatives'.

    Raises:
        ValueError: ``pos_weight`` a string other than ``"balanced"``.
    """

    pos_weight: float | str = 1.0

    # Hinge terms only: one cached plane, no plane steps (Solver.for_model).
    solver_defaults = {"cache": 1, "inner_steps": 0}

    def __post_init__(self):
        if isinstance(self.pos_weight, str) and self.pos_weight != "balanced":
            raise ValueError(
                f"pos_weight must be a number > 0 or 'balanced'; got {self.pos_weight!r}.")

    def hinge_terms(self, data, problem, C):
        """``HingeTerms`` with ``upper_i = C c_i`` on the items of ``where``."""
        rows, bias = self.features.hinge_rows(data)
        dtype = jnp.result_type(C)
        y = jnp.where(problem.positive, 1, -1).astype(dtype)
        if isinstance(self.pos_weight, str):
            n_pos = jnp.sum(problem.positive & problem.where).astype(dtype)
            n_neg = jnp.sum(~problem.positive & problem.where).astype(dtype)
            pw = jnp.where(n_pos > 0, n_neg / jnp.maximum(n_pos, 1), 1)
        else:
            pw = jnp.asarray(self.pos_weight, dtype)
        c = jnp.where(problem.positive, pw, 1).astype(dtype)
        return HingeTerms(rows, bias, y, jnp.where(problem.where, C * c, 0).astype(dtype))
