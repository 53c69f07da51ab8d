r"""Weak supervision: the structured models of latent AP-SVM and its baselines.

Behl, Jawahar, Kumar, "Optimizing Average Precision using Weakly Supervised
Data", CVPR 2014. Each sample is a *bag* of candidates ``Phi_i(h)``, ``h = 1..
T_i`` (the boxes of an image, the instances of a multiple-instance bag); only
the bag label is known (optionally also the correct candidate of some bags,
``known``).

**Layout.** The candidates are the rows of one design matrix ``X
[n_instances, d]``; a bag's candidates are listed in a padded index table
``layout [B, T_max]`` (padding ``n_instances``) with a mask, as
:func:`jaxrank.models.query_layout` does for queries (:class:`BagData`). The
feature map (:class:`CandidateFeatures`) scores every candidate by one matrix
product ``X w`` and gathers the scores into ``S [B, T_max]`` (padding 0): it is
linear in ``w``, so the solver's planes are ``X^T`` of a scatter of the
oracle's ``coef [B, T_max]``. Shapes are static: fits ``jit``, ``vmap`` and run
in the work queues of :func:`jaxrank.solvers.fit_many`.

**Prediction** (every model here, eqs. (6)-(7)): a bag's score is its best
candidate's ``max_h w^T Phi_i(h)``; bags are ranked by sorting these scores.

**Models** (each a structured model of :mod:`jaxrank.models`):

* :class:`LatentAPModel`, problem (11): positives' candidates fixed to the
  imputed ``h*_i``; the oracle maximises every negative over its candidates
  (Proposition 3, eq. (13)) and then runs the exact AP loss-augmented
  inference (:func:`jaxrank.inference.ap_oracle`). Its ``impute`` is
  Proposition 2 (eq. (10)).
* :class:`LatentSVMModel`: the latent SVM as per-sample hinge terms over the
  candidate rows (imputed positive candidate with weight ``C J``, every kept
  negative candidate with weight ``C``), the robustness fraction ``c`` leaving
  out the most confusing negative candidates.
* :class:`LatentSSVMModel`, problem (5): the latent structural SVM with the AP
  loss; its loss-augmented inference is approximate (class docstring).

**CCCP** (Algorithm 1): :func:`jaxrank._src.solvers.cccp.latent_cccp`.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src.layout import design, query_layout
from jaxrank._src.models.base import Model
from jaxrank._src.oracles.ap import ap_oracle
from jaxrank._src.types import HingeTerms, Violation

# Rounds of block-coordinate ascent of LatentSSVMModel's approximate inference.
SSVM_ROUNDS = 3


def _positions(layout, mask):
    """``[n]`` flat slot index of every instance of a bag table (host side)."""
    n = int(mask.sum())
    position = np.zeros(n, np.int32)
    position[layout[mask]] = np.flatnonzero(mask.ravel()).astype(np.int32)
    return position


@jax.custom_vjp
def _gather_slots(s, layout, mask, position):
    """``where(mask, s[layout], 0)``: ``[B, T_max, ...]`` from ``s [n, ...]``."""
    v = s.at[layout].get(mode="fill", fill_value=0)
    return jnp.where(mask.reshape(mask.shape + (1,) * (v.ndim - 2)), v, 0)


def _gather_slots_fwd(s, layout, mask, position):
    return _gather_slots(s, layout, mask, position), position


def _gather_slots_bwd(position, g):
    # Each instance fills exactly one real slot and padding slots hold no
    # instance, so the transpose of the gather is the gather at ``position``.
    return g.reshape((-1,) + g.shape[2:])[position], None, None, None


_gather_slots.defvjp(_gather_slots_fwd, _gather_slots_bwd)


@jax.tree_util.register_pytree_node_class
class BagData:
    """Candidates of ``B`` bags: instance rows plus a padded ``[B, T_max]`` table.

    A pytree (arrays are leaves), shared by every fit of a batch.

    Attributes:
        X: :class:`jaxrank.models.Design` ``[n_instances, d]``, one row per
            candidate.
        layout: ``[B, T_max]`` int32 row of ``X`` of each candidate slot of each
            bag (bags in sorted bag-id order, candidates in input order),
            padded with ``n_instances``.
        mask: ``[B, T_max]`` bool, real candidate slots.
        allowed: ``[B, T_max]`` bool, the candidates training may choose: the
            real ones, restricted to the ``known`` ones in bags that have any
            and to ``where`` (``allowed <= mask``). Prediction uses ``mask``.
        position: ``[n_instances]`` int32, the flat index ``b * T_max + t`` of
            each instance's slot in ``layout`` (every instance has exactly
            one); computed from ``layout`` when not given. The transpose of
            :meth:`gather` (the solver's planes) is a gather at these
            positions instead of a scatter-add (faster on CPU;
            ``docs/design_notes.md``).
    """

    def __init__(self, X, layout, mask, allowed=None, position=None):
        self.X = X
        self.layout = layout
        self.mask = mask
        self.allowed = mask if allowed is None else allowed
        if position is None:
            position = jnp.asarray(_positions(np.asarray(layout), np.asarray(mask)))
        self.position = position

    def tree_flatten(self):
        return (self.X, self.layout, self.mask, self.allowed, self.position), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        self = object.__new__(cls)  # leaves may be tracers or placeholders: no checks
        self.X, self.layout, self.mask, self.allowed, self.position = children
        return self

    @property
    def shape(self):
        """``(n_instances, d)`` of the candidate rows."""
        return self.X.shape

    @property
    def dtype(self):
        return self.X.dtype

    @property
    def n_bags(self):
        return int(self.layout.shape[0])

    def gather(self, s):
        """Candidate values ``[B, T_max, ...]`` of per-instance values ``s [n, ...]`` (pads 0)."""
        return _gather_slots(jnp.asarray(s), self.layout, self.mask, self.position)

    def __matmul__(self, w):
        """Bag scores ``max_h x_h^T w``: ``[B]`` for ``w [d]``, ``[B, k]`` for ``w [d, k]``.

        The prediction rule (6)-(7) (what ``data @ w`` means for the
        estimator base: scores of the ranked samples, here the bags).
        """
        S = self.gather(self.X @ w)
        m = self.mask.reshape(self.mask.shape + (1,) * (S.ndim - 2))
        return jnp.max(jnp.where(m, S, -jnp.inf), axis=1)

    def __repr__(self):
        return (f"BagData(bags={self.layout.shape[0]}, max_candidates={self.layout.shape[1]}, "
                f"X={self.X!r})")


def bag_data(X, bags, *, known=None, where=None) -> BagData:
    """Build :class:`BagData` from validated inputs (host side, no checks).

    Args:
        X: ``[n, d]`` features (array, ``scipy.sparse`` or a
            :class:`jaxrank.models.Design`).
        bags: ``[n]`` integer bag ids.
        known: optional ``[n]`` bool, candidates given as correct.
        where: optional ``[n]`` bool, candidates that take part in training.

    Returns:
        ``(BagData, bag_ids [B])``: bags in sorted id order.
    """
    Xd = design(X)
    n = Xd.shape[0]
    layout, ids = query_layout(np.asarray(bags), n)
    mask = layout < n
    allowed = mask.copy()
    pad = lambda a: np.r_[np.asarray(a, bool), False][layout]  # noqa: E731
    if where is not None:
        allowed &= pad(where)
    if known is not None:
        k = pad(known) & allowed
        has = k.any(axis=1)
        allowed = np.where(has[:, None], k, allowed)
    return BagData(Xd, jnp.asarray(layout, jnp.int32), jnp.asarray(mask),
                   jnp.asarray(allowed)), ids


@dataclasses.dataclass(frozen=True)
class CandidateFeatures:
    """``S = gather(X w)``: candidate scores ``[B, T_max]`` (padding 0), linear in ``w``.

    One matrix product over the instance rows, then a gather into the bag
    table of :class:`BagData` (the transpose, used by the solver, is a
    scatter-add then ``X^T``).
    """

    def dim(self, data: BagData) -> int:
        """Number of weights: ``d``."""
        return data.X.shape[1]

    def __call__(self, w, data: BagData):
        return data.gather(data.X @ w)

    def hinge_rows(self, data: BagData):
        """Per-candidate hinge rows: the instance design ``X`` (``bias = 0``)."""
        return data.X, 0.0


class LatentProblem(NamedTuple):
    """One latent fit (a leading ``[M]`` axis when batched).

    Attributes:
        positive: ``[B]`` bool bag labels.
        where: ``[B]`` bool, the bags of this fit (e.g. a CV training fold).
        cand: ``[B, T_max]`` bool, the candidates the fit may choose
            (:attr:`BagData.allowed`: real, and the ``known`` ones where given).
        chosen: ``[B]`` int32 slot (column of ``BagData.layout``) of the
            imputed candidate: ``h*_i`` of the positive bags (every model);
            the latent SSVM also imputes the negatives' (their lowest-scoring
            candidate, the maximiser of ``w^T Psi(X, Y*, H)``).
        ignore: ``[B, T_max]`` bool, negative candidates left out by the latent
            SVM's robustness fraction ``c`` (unused by the other models).
        J: ``[]`` float, the latent SVM's positive weight (unused by the others).
        c: ``[]`` float in ``[0, 1)``, the latent SVM's robustness fraction.
    """

    positive: jax.Array
    where: jax.Array
    cand: jax.Array
    chosen: jax.Array
    ignore: jax.Array
    J: jax.Array
    c: jax.Array


def _masked_arg(S, allowed, largest=True):
    """Slot ``[B]`` int32 and value ``[B]`` of the best allowed candidate of each bag.

    ``largest=False`` gives the smallest. Ties go to the first slot.
    """
    inf = jnp.asarray(jnp.inf, S.dtype)
    key = jnp.where(allowed, S if largest else -S, -inf)
    slot = jnp.argmax(key, axis=1).astype(jnp.int32)
    return slot, _at(S, slot)


def _at(S, slot):
    """``S[b, slot[b]]`` for every bag: ``[B]``."""
    return jnp.take_along_axis(S, slot[:, None], axis=1)[:, 0]


def _one_hot(slot, T, dtype):
    return (jnp.arange(T, dtype=jnp.int32)[None, :] == slot[:, None]).astype(dtype)


@dataclasses.dataclass(frozen=True)
class LatentAPModel(Model):
    """Latent AP-SVM's convex step, problem (11), as a structured model.

    Data :class:`BagData`, problems :class:`LatentProblem`. The positive bags'
    candidates are fixed to ``problem.chosen`` (``h*_i``). The most-violated
    (ranking, negative candidates) of eq. (12) is found exactly in two steps
    (Proposition 3): every negative bag takes its highest-scoring candidate
    (eq. (13)), then the exact AP loss-augmented inference of Mohapatra et al.
    (2014) ranks the bag scores (:func:`jaxrank.inference.ap_oracle`). The
    solver then minimises ``1/2 ||w||^2 + C xi`` of problem (11).

    Attributes:
        features: the feature map (default :class:`CandidateFeatures`).
        kp: static bound on the positive bags of a fit.
        method: static AP inference method (``"select"``, ``"search"``,
            ``"greedy"``; all exact).
    """

    features: object = CandidateFeatures()
    kp: int = 1
    method: str = "select"

    def bag_scores(self, S, problem):
        """Bag scores of problem (11): ``s_i(h*_i)`` (positives), ``max_h s_j(h)`` (negatives).

        Args:
            S: ``[B, T_max]`` candidate scores.
            problem: :class:`LatentProblem`.

        Returns:
            ``(scores [B], slots [B] int32)``: the candidate of every bag.
        """
        neg_slot, _ = _masked_arg(S, problem.cand)
        slot = jnp.where(problem.positive, problem.chosen, neg_slot)
        return _at(S, slot), slot

    def oracle(self, S, problem) -> Violation:
        """Most-violated ``(Y, H_N)`` of eq. (12) by Proposition 3; ``aux`` = candidate slots."""
        s, slot = self.bag_scores(S, problem)
        r = ap_oracle(s, problem.positive, problem.where, kp=self.kp, method=self.method)
        coef = r.coef[:, None] * _one_hot(slot, S.shape[1], S.dtype)
        return Violation(loss=r.loss, coef=coef, aux=slot, hinge=r.hinge)

    def impute(self, S, problem):
        """Proposition 2 (eq. (10)): every positive bag takes its best allowed candidate.

        The minimiser over ``H_P`` of the objective of (8) at fixed ``w``
        (output-consistent inference, eq. (9)).

        Args:
            S: ``[B, T_max]`` candidate scores at the current ``w``.
            problem: :class:`LatentProblem`.

        Returns:
            The problem with the new ``chosen``.
        """
        slot, _ = _masked_arg(S, problem.cand)
        return problem._replace(chosen=jnp.where(problem.positive, slot, problem.chosen))


@dataclasses.dataclass(frozen=True)
class LatentSSVMModel(Model):
    r"""The latent structural SVM of problem (5) with the AP loss (convex step).

    With the latent variables of the ground truth imputed (``problem.chosen``:
    each positive bag its highest-scoring candidate, each negative bag its
    lowest-scoring one; this maximises ``w^T Psi(X, Y*, H)`` exactly, because
    ``Psi(Y*)`` weights each positive by ``+1/|P|`` and each negative by
    ``-1/|N|``), the convex step is ``1/2 ||w||^2 + C xi`` with

    .. math::
        \xi = \max_{Y, H} \Delta(Y^*, Y) + w^\top \Psi(X, Y, H)
              - w^\top \Psi(X, Y^*, \hat H).

    **Approximate loss-augmented inference.** Maximising jointly over the
    ranking ``Y`` and *all* candidates ``H`` has no known exact efficient
    algorithm (the paper, §4.1 and its Appendix C, which this repository does
    not have; this is our own approximation). For a fixed ``H`` the maximum
    over ``Y`` is exact (AP inference on the bag scores ``s_k(h_k)``); for a
    fixed ``Y`` the maximum over ``H`` is exact and separable (bag ``k``'s
    score enters ``w^T Psi(X, Y, H)`` with the coefficient ``c_k(Y)`` of eq.
    (1), ``sum_j Y_kj / (|P||N|)`` for a positive and ``-sum_i Y_ik / (|P||N|)``
    for a negative: it takes its highest candidate if ``c_k > 0``, its lowest
    if ``c_k < 0``). The oracle alternates the two exact steps
    (block-coordinate ascent: ``SSVM_ROUNDS = 3`` rounds and a last ``Y``
    step) from three starts (``H = problem.chosen``; positives lowest and
    negatives highest; every bag highest), and in the solver from a fourth:
    the ``H`` of its previous call (:meth:`search_start`; a warm-started
    search, so the returned constraint is never less violated than the last
    one re-scored at the new ``w``), and keeps the most violated ``(Y, H)``
    pair visited (its value is exact). Each step can only increase the
    loss-augmented score, and the first start guarantees ``xi >= 0``, but the
    result is a local maximum: the returned constraint is a valid
    constraint of (5) that may not be the most violated one, so the slack,
    the solver's ``objective`` and its duality gap are those of the
    constraints found (a lower bound on the exact objective of (5)).

    Attributes:
        features: the feature map (default :class:`CandidateFeatures`).
        kp: static bound on the positive bags of a fit.
        method: static AP inference method.
    """

    features: object = CandidateFeatures()
    kp: int = 1
    method: str = "select"

    def _psi_star(self, problem, dtype):
        pos = problem.positive & problem.where
        neg = ~problem.positive & problem.where
        P = jnp.sum(pos).astype(dtype)
        N = jnp.sum(neg).astype(dtype)
        ok = (P > 0) & (N > 0)
        psi = jnp.where(pos, 1 / jnp.maximum(P, 1), jnp.where(neg, -1 / jnp.maximum(N, 1), 0))
        return jnp.where(ok, psi, 0).astype(dtype)

    def search_start(self, problem):
        """Start of the warm-started search: the imputed ``problem.chosen`` (``[B]`` int32)."""
        return problem.chosen

    def oracle(self, S, problem, start=None) -> Violation:
        """Approximately most-violated ``(Y, H)`` of problem (5) (class docstring).

        Args:
            S: ``[B, T_max]`` candidate scores.
            problem: :class:`LatentProblem`.
            start: optional ``[B]`` int32 candidate slots ``H`` of a fourth
                start (the solver passes the previous call's ``aux``).

        Returns:
            :class:`Violation` with ``aux`` = the ``[B]`` int32 slots ``H``.
        """
        dtype = S.dtype
        psi = self._psi_star(problem, dtype)
        hi, _ = _masked_arg(S, problem.cand, True)
        lo, _ = _masked_arg(S, problem.cand, False)

        starts = [problem.chosen, jnp.where(problem.positive, lo, hi), hi]
        if start is not None:
            # Only allowed candidates (a start from another problem's fit is
            # replaced by the imputed one).
            start = start.astype(jnp.int32)
            starts.append(jnp.where(_at(problem.cand, start), start, problem.chosen))
        starts = jnp.stack(starts)
        n_starts = starts.shape[0]
        length = n_starts * (SSVM_ROUNDS + 1)
        restart = jnp.arange(length) % (SSVM_ROUNDS + 1) == 0
        which = jnp.arange(length) // (SSVM_ROUNDS + 1)

        def step(h, x):
            # From a start (or the previous H): a Y step (exact AP inference
            # at fixed H), then an H step (exact at fixed Y). Every (Y, H) pair
            # visited is a valid constraint; its value is exact.
            new_start, k = x
            h = jnp.where(new_start, starts[k], h)
            s = _at(S, h)
            r = ap_oracle(s, problem.positive, problem.where, kp=self.kp, method=self.method)
            c = psi - r.coef  # coefficient of s_k(h_k) in w^T Psi(Y, H)
            value = r.loss + jnp.sum(c * s)
            return jnp.where(c > 0, hi, jnp.where(c < 0, lo, h)), (h, r, value)

        # One scan over every start's rounds: a single traced AP inference.
        _, (hs, rs, values) = lax.scan(step, starts[0], (restart, which))
        k = jnp.argmax(values)
        h = hs[k]
        r = jax.tree_util.tree_map(lambda a: a[k], rs)
        T = S.shape[1]
        c = psi - r.coef
        coef = (psi[:, None] * _one_hot(problem.chosen, T, dtype)
                - c[:, None] * _one_hot(h, T, dtype))
        hinge = values[k] - jnp.sum(psi * _at(S, problem.chosen))
        return Violation(loss=r.loss, coef=coef, aux=h, hinge=hinge)

    def impute(self, S, problem):
        """``H^ = argmax_H w^T Psi(X, Y*, H)``: positives' highest, negatives' lowest candidate."""
        hi, _ = _masked_arg(S, problem.cand, True)
        lo, _ = _masked_arg(S, problem.cand, False)
        chosen = jnp.where(problem.where, jnp.where(problem.positive, hi, lo), problem.chosen)
        return problem._replace(chosen=chosen)


@dataclasses.dataclass(frozen=True)
class LatentSVMModel(Model):
    r"""The latent SVM (the paper's baseline, §5) as per-candidate hinge terms.

    With the positive bags' candidates imputed (``problem.chosen``) and the
    ignored negative candidates fixed (``problem.ignore``), the convex step is

    .. math::
        \tfrac12 \|[w, b]\|^2 + C J \sum_{i \in P} \max(0, 1 - (w^\top x_{i, h_i} + b))
        + C \sum_{j \in N} \sum_{h \notin I_j} \max(0, 1 + w^\top x_{j, h} + b)

    (every kept candidate of a negative bag is a negative example, as in
    Felzenszwalb et al.'s latent SVM; the intercept is a regularised constant
    feature when ``features`` is an :class:`jaxrank.models.Intercept`). The
    solver runs dual coordinate ascent on these terms (rows of the instance
    design matrix). ``impute`` minimises the objective over the latent
    variables at fixed ``w`` exactly: each positive bag's highest-scoring
    candidate (the hinge ``max(0, 1 - s)`` is smallest there), and the
    ignored set of the robustness fraction ``c``: the ``floor(c n_neg)``
    highest-scoring negative candidates (``n_neg`` = the negative candidates
    of the fit), never a bag's lowest-scoring one (at least one candidate per
    negative bag is kept, so at most ``n_neg`` minus the number of negative
    bags are ignored). The kept-candidate sum is then smallest (greedy is
    optimal on this partition matroid), so CCCP never increases the objective.

    Attributes:
        features: :class:`CandidateFeatures`, or ``Intercept(CandidateFeatures())``.
    """

    features: object = CandidateFeatures()

    # Hinge terms only: one cached plane, no plane steps (Solver.for_model).
    solver_defaults = {"cache": 1, "inner_steps": 0}

    def hinge_terms(self, data, problem, C):
        """Per-candidate hinges: ``C J`` on imputed positives, ``C`` on kept negative candidates."""
        rows, bias = self.features.hinge_rows(data)
        dtype = jnp.result_type(C)
        n = rows.shape[0]
        T = problem.cand.shape[1]
        pos_bag = problem.positive & problem.where
        neg_bag = ~problem.positive & problem.where
        pos_bt = (_one_hot(problem.chosen, T, jnp.int32) > 0) & problem.cand & pos_bag[:, None]
        neg_bt = problem.cand & ~problem.ignore & neg_bag[:, None]
        up = jnp.where(pos_bt, C * problem.J.astype(dtype), jnp.where(neg_bt, C, 0)).astype(dtype)
        lab = jnp.broadcast_to(jnp.where(problem.positive, 1, -1)[:, None], up.shape).astype(dtype)
        upper = jnp.zeros((n,), dtype).at[data.layout].set(up, mode="drop")
        labels = jnp.full((n,), -1, dtype).at[data.layout].set(lab, mode="drop")
        return HingeTerms(rows, bias, labels, upper)

    def impute(self, S, problem):
        """Exact minimisation over (positive candidates, ignored negatives) at fixed ``w``."""
        hi, _ = _masked_arg(S, problem.cand, True)
        lo, _ = _masked_arg(S, problem.cand, False)
        B, T = S.shape
        chosen = jnp.where(problem.positive, hi, problem.chosen)
        neg = problem.cand & (~problem.positive & problem.where)[:, None]
        ignorable = neg & ~(_one_hot(lo, T, jnp.int32) > 0)
        n_neg = jnp.sum(neg).astype(jnp.float32)
        K = jnp.floor(problem.c.astype(jnp.float32) * n_neg + 1e-4).astype(jnp.int32)
        key = jnp.where(ignorable, S, -jnp.inf).reshape(-1)
        order = jnp.argsort(-key, stable=True)
        rank = jnp.zeros((B * T,), jnp.int32).at[order].set(jnp.arange(B * T, dtype=jnp.int32))
        ignore = ignorable & (rank.reshape(B, T) < K)
        return problem._replace(chosen=chosen, ignore=ignore)
