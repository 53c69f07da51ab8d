r"""AP-SVM-APPX: the two-stage approximation of AP-SVM (§3.3, problem (10)).

Mohapatra, Jawahar, Kumar, "Efficient optimization for average precision
SVM", NIPS 2014, §3.3. Write ``s(v) = w^T x + b`` for the scores of weights
``v = [w, b]`` (``b`` is a regularised offset, :class:`Intercept`; with
``fit_intercept=False`` there is no ``b``) and ``y_i = +-1``.

1. A binary SVM ``v0 = [w0, b0]`` (``1/2 ||v0||^2 + C_binary sum_i max(0, 1
   - y_i s_i(v0))``, 0-1 loss surrogate, fast inference) is trained on all
   training samples. A sample is *easy* if its margin ``y_i s_i(v0)`` is
   strictly above 1 (the paper's Table 1: "classified with margin > 1"), and
   *difficult* otherwise. Numerically the test is ``y_i s_i(v0) > 1 +
   MARGIN_TOL`` (``1e-3``): the margin support vectors of ``v0`` sit at
   ``y_i s_i(v0) = 1`` up to float rounding, and the tolerance puts all of
   them on the difficult side (rounding of ``v0``, e.g. a batched vs a single
   fit, does not decide); it also makes ``2 v0`` a Slater point (below).
2. Only the top ``k`` fraction of the easy set is kept as easy, per class:
   the ``ceil(k |E+|)`` easy positives with the highest scores and the
   ``ceil(k |E-|)`` easy negatives with the lowest (ties by index); the rest
   of the easy set joins the difficult set ``D``.
3. Problem (10)::

       min_v F(v) = 1/2 ||v||^2 + C xi_AP(w; D)   s.t.  y_i s_i(v) >= 1  (i in E_kept)

   where ``xi_AP(w; D) = max_R Delta(R*_D, R) - w^T (Psi(X_D, R*_D) - Psi(X_D, R))``
   is the 1-slack AP loss of eq. (3) restricted to the difficult samples
   (``b`` cancels in ``Psi``: the offset only serves the constraints).

**Constraints by an exact penalty.** The hard constraints are moved into the
objective as an ``l1`` exact penalty::

    F_mu(v) = F(v) + C mu sum_{i in E_kept} max(0, 1 - y_i s_i(v))

The AP term keeps its 1-slack form (loss-augmented inference: the AP
most-violated ranking of ``D``); the penalty is the model's per-sample hinge
terms (weight ``C mu`` on the kept easy samples) with one dual variable
``alpha_i`` in ``[0, C mu]`` per constraint, which :func:`jaxrank.solvers.fit`
updates by dual coordinate ascent at every iteration (:class:`AppxModel`).
(Folding the penalty into the 1-slack loss instead, with one plane per
iteration for the set of violated constraints, gives the same problem but
converges far more slowly; ``docs/design_notes.md``,
``jaxrank/_src/models/appx.py``.) The returned
``dual`` is a lower bound on the optimum of the penalised problem, so the
usual certificate ``objective - dual`` holds.

**Centring.** With the offset, both stages fit the rows centred on their
mean ``m`` (the training rows of the fit; in :func:`jaxrank.sweep`, every row
it is given): ``s(v) = w^T (x - m) + b``, and the weights are reported for the
rows as given (``intercept_ = b - w^T m``, likewise ``w0_intercept_``). The
regularised offset then costs ``b^2 / 2`` for the mean training score, not
for the score at the origin, and no direction of ``w`` shifts every training
score at once, so the fit does not depend on where the origin of the
features lies (``X + c`` gives the same fit). With the offset regularised at
the origin instead (rows not centred), on features far from it
(non-negative ones: 0/1 indicators, counts, tf-idf), both stages go wrong
at small trade-offs. In the first stage nearly every hinge is active, so
``[w0, b0]`` is close to ``C_binary sum_i y_i [x_i, 1]``,
in which the majority class dominates (``sum_i y_i x_i = |P| mean_P - |N|
mean_N``): every sample scores below 0, and the easy set is the negatives
with the most active features. The second stage meets their constraints
``w^T x_i + b <= -1`` most cheaply with negative weights on the features
they share, at the expense of the AP term: the model ranks the samples by
how few features they have, below chance where the positives have more. On
centred rows ``sum_i y_i (x_i - m) = (2 |P| |N| / n) (mean_P - mean_N)``,
the difference of the class means, and the easy set comes from both classes.
Standardised features are already centred: there centring changes nothing.
A sparse ``X`` is centred into a dense copy (``n x d`` floats) inside the
fit. ``fit_intercept=False`` fits the rows as given (problem (10) as
written).

**Choice of mu.** ``F_mu`` has the same minimiser and minimum ``F*`` as (10)
when ``C mu`` exceeds every Lagrange multiplier ``lambda_i >= 0`` of the
constraints (exact-penalty theorem, e.g. Nocedal & Wright, Thm 17.3; the
problem is convex). The first stage gives a Slater point: at ``v_bar = 2
v0`` every kept constraint holds with slack ``y_i s_i(v_bar) - 1 > 2 (1 +
MARGIN_TOL) - 1 > 1`` (the scores are linear in ``v``), so for optimal
multipliers ``F* = min_v [F(v) - sum_i lambda_i (y_i s_i(v) - 1)] <= F(v_bar)
- sum_i lambda_i``, i.e. (``F* >= 0``)::

    sum_i lambda_i <= F(v_bar) - F* <= F(2 v0) = 2 ||v0||^2 + C xi_AP(2 w0; D)

We set::

    mu = 1 + 2 F(2 v0) / C        (so C mu > 2 F(2 v0) >= 2 sum_i lambda_i)

computed inside the jitted fit from one extra exact oracle call. Because
``C mu / 2`` is still an exact penalty, ``F_mu(v) = F_{mu/2}(v) + (C mu / 2)
V(v) >= F* + (C mu / 2) V(v)`` with ``V(v) = sum_{E_kept} max(0, 1 - y_i
s_i(v))``, and ``min F_mu = F* >= dual``: the returned iterate satisfies the
certified bound (``gap = objective - dual``)::

    V(v) <= 2 gap / (C mu)

so every kept easy sample has ``y_i s_i(v) >= 1 - 2 gap / (C mu)``; with the
stopping rule ``gap <= tol * objective`` and ``objective <= F* + gap <=
F(2 v0) + gap < C mu / 2 + gap`` this is ``>= 1 - tol / (1 - tol)`` (plus
float32 rounding of the scores).

**Defaults.** A regularised offset in both stages (``fit_intercept=True``),
``C_binary = C / n`` (the binary SVM's mean hinge at the same ``C``) and
``k = 0.5``, with these reasons:

* *The offset.* AP is translation invariant, but the constraints ``y_i w^T
  x_i >= 1`` are not: without ``b`` they pin the absolute level of the scores
  (every kept easy negative below -1, every kept easy positive above +1),
  which ``w`` alone reaches only by turning towards directions that shift
  all scores, at the expense of the ranking. A regularised offset costs
  ``b^2 / 2`` and leaves the AP term alone.
* *The second stage's solver.* The planes move ``w`` between two calls of
  the hinge block's dual coordinate ascent (:mod:`jaxrank._src.solvers.ssvm`),
  so a constraint shrunk while it was slack can be violated at the next
  call, and liblinear's pass tolerance, lowered 10x whenever a call meets
  it, would fall below float32 resolution. For a model with an oracle the
  solver therefore starts every hinge-block call from a fresh shrinking
  state and floors the pass tolerance; more cached planes and cached-plane
  steps (:class:`AppxModel`'s ``solver_defaults``: ``cache = 64``,
  ``inner_steps = 128``) cut the iterations of fits at large ``C``.
* *``C_binary`` and ``k``.* Larger ``C_binary`` give a first stage of
  larger norm than the second and more easy samples whose constraints bind,
  and larger AP shortfalls; ``k = 0.5`` (the paper's middle setting) had a
  smaller worst shortfall than ``k = 0.25``.

The comparison with APSVM behind these choices (AP shortfalls per data set,
the stalled fits, the values of ``C_binary`` and ``k`` tried) is in
``docs/design_notes.md``, ``jaxrank/_src/models/appx.py``, and
``bench/results/appx_defaults.md``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrank._src.models.base import Model
from jaxrank._src.oracles.ap import ap_oracle
from jaxrank._src.types import HingeTerms

# A margin must exceed 1 by more than this to count as easy (module docstring).
MARGIN_TOL = 1e-3


def appx_split(scores0, positive, valid, k):
    """Easy/difficult split of §3.3 from the binary-SVM scores.

    Easy: ``y s0 > 1 + MARGIN_TOL`` (strictly beyond the margin; module
    docstring: the margin support vectors, at 1 up to rounding, are
    difficult).

    Args:
        scores0: ``[n]`` float scores ``s0 = w0^T x + b0`` of the binary SVM
            (``b0 = 0`` without an offset).
        positive: ``[n]`` bool labels.
        valid: ``[n]`` bool, the training samples (others are in neither set).
        k: ``[]`` float in ``(0, 1]`` (may be traced): fraction of the easy set
            kept, per class; ``ceil(k |E+|)`` positives with the highest
            scores and ``ceil(k |E-|)`` negatives with the lowest (ties broken
            by index).

    Returns:
        ``(easy [n] bool, difficult [n] bool)``: disjoint, union = ``valid``.
    """
    dtype = scores0.dtype
    y = jnp.where(positive, 1, -1).astype(dtype)
    margin = y * scores0
    easy_all = valid & (margin > 1 + MARGIN_TOL)
    kept = jnp.zeros_like(valid)
    for cls in (positive, ~positive):
        e = easy_all & cls
        m = jnp.ceil(jnp.asarray(k, dtype) * jnp.sum(e).astype(dtype) - 1e-6).astype(jnp.int32)
        key = jnp.where(e, margin, -jnp.inf)
        order = jnp.argsort(-key, stable=True)
        rank = jnp.zeros(key.shape, jnp.int32).at[order].set(jnp.arange(key.shape[0]))
        kept = kept | (e & (rank < m))
    return kept, valid & ~kept


class AppxProblem(NamedTuple):
    """One fit of problem (10): ``positive``, ``difficult``, ``easy`` ``[n]`` bool, ``mu []``."""

    positive: jax.Array
    difficult: jax.Array
    easy: jax.Array
    mu: jax.Array


@dataclasses.dataclass(frozen=True)
class AppxModel(Model):
    """Problem (10) as a structured model: AP term on ``D`` plus hinge constraints.

    The oracle is the AP most-violated ranking (eq. (4), Alg. 1-3) of the
    difficult samples only (the easy ones get coefficient 0); the kept easy
    samples are per-sample hinge terms with weight ``C mu`` (the exact
    penalty of their constraints ``y_i s_i >= 1``, ``s = model.scores(w,
    data)``). Problems are :class:`AppxProblem`.

    Attributes:
        kp: static bound on the positives of ``D``.
        method: static AP inference method.

    The solver settings it suggests (``solver_defaults``,
    :meth:`jaxrank.solvers.Solver.for_model`) are larger than the defaults
    (64 planes and 128 cached-plane steps instead of 32 and 32): the planes
    and the hinge block are coupled through the constraints, and more
    cached-plane steps per oracle call cut the iterations
    (``bench/results/appx_defaults.md``).
    """

    kp: int = 1
    method: str = "select"

    solver_defaults = {"cache": 64, "inner_steps": 128}

    def oracle(self, S, problem):
        """AP most-violated ranking of the difficult samples."""
        return ap_oracle(S, problem.positive, problem.difficult, kp=self.kp, method=self.method)

    def hinge_terms(self, data, problem, C):
        """The constraints of (10) as the exact penalty ``C mu max(0, 1 - y w^T x)``."""
        rows, bias = self.features.hinge_rows(data)
        dtype = jnp.result_type(C)
        y = jnp.where(problem.positive, 1, -1).astype(dtype)
        u = jnp.where(problem.easy, C * problem.mu, 0).astype(dtype)
        return HingeTerms(rows, bias, y, u)
