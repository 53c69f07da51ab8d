r"""AP-SVM (Yue et al. 2007) and its query-grouped form (SVM-map): the structured model.

The model (:class:`APModel`): item scores ``S = X w`` and the exact AP
loss-augmented inference of Mohapatra et al. (2014), Algorithms 1-3
(:func:`jaxrank.inference.ap_oracle`), one ranking per fit; with query
segments, one ranking per query, the losses averaged over queries (mean AP
over queries, the SVM-map objective of Yue et al. 2007)::

    1/2 ||w||^2 + C/Q sum_q xi_q,   xi_q = max_R Delta_q(R) - w^T (Psi_q(R*) - Psi_q(R))

which is solved in its 1-slack form (a joint output over all queries: the
maximum of the sum is the sum of the per-query maxima, so the most-violated
joint output is the per-query most-violated rankings; Joachims et al. 2009
show the 1-slack and n-slack problems have the same solution). Queries are
laid out in a padded ``[Q, L]`` index table so that the per-query inference
is one ``vmap`` with static shapes.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxrank._src.models.base import Model
from jaxrank._src.oracles.ap import ap_oracle
from jaxrank._src.types import Violation


@dataclasses.dataclass(frozen=True)
class APModel(Model):
    """AP-SVM as a structured model (see module docstring).

    Attributes:
        kp: static bound on the positives of a ranking (of a query with
            ``grouped``); the delta tables of inference are ``kp`` wide.
        method: static AP inference method (``"select"``, ``"search"``,
            ``"greedy"``; all exact).
        grouped: static; problems are :class:`QueryProblem` (mean of the
            per-query AP losses) instead of :class:`ItemProblem`.
    """

    kp: int = 1
    method: str = "select"
    grouped: bool = False

    def list_oracle(self, scores, positive, where) -> Violation:
        """Loss-augmented inference on one list (``[n]`` arrays): :func:`ap_oracle`.

        The one method a ranking loss on the same joint feature vector
        overrides (:class:`jaxrank.models.NDCGModel`); :meth:`oracle` applies it
        to the whole list or to every query.
        """
        return ap_oracle(scores, positive, where, kp=self.kp, method=self.method)

    def oracle(self, S, problem) -> Violation:
        """Most-violated ranking (per query with ``grouped``)."""
        if not self.grouped:
            return self.list_oracle(S, problem.positive, problem.where)
        n = S.shape[0]
        lay = problem.layout
        pad = lay >= n
        idx = jnp.minimum(lay, n - 1)
        pos = problem.positive[idx] & ~pad
        use = problem.where[idx] & ~pad
        r = jax.vmap(self.list_oracle)(S[idx], pos, use)
        ok = jnp.any(pos & use, axis=1) & jnp.any(~pos & use, axis=1)
        nq = jnp.maximum(jnp.sum(ok), 1).astype(S.dtype)
        coef = jnp.zeros((n,), S.dtype).at[idx.reshape(-1)].add(
            jnp.where(pad, 0, r.coef).reshape(-1) / nq)
        return Violation(loss=jnp.sum(r.loss) / nq, coef=coef, aux=r.aux,
                         hinge=jnp.sum(r.hinge) / nq)
