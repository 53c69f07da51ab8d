r"""Weak supervision: latent AP-SVM (CCCP) and the latent SVM / latent SSVM baselines.

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

**CCCP** (Algorithm 1) lives in the estimators' ``_train``: from a random
imputation, repeat (i) one compiled solver call (:func:`jaxrank.solvers.
fit_many` over all tasks, ``C`` values, folds and initialisations) for the
convex problem with the latent variables fixed, (ii) one compiled call that
imputes the latent variables at the new ``w`` (``model.impute``) and evaluates
the non-convex objective there; until the imputation no longer changes or the
objective decreases by less than ``tol`` (relative).
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from jaxrank._src import validation
from jaxrank._src.solvers import ssvm as solver
from jaxrank._src.models.ap import query_layout
from jaxrank._src.estimators.base import (
    DEVICES_CONSTRAINT,
    StructuredSVM,
    check_feature_scale,
    labels_to_tasks,
    positive_class_text,
    warn_unconverged,
)
from jaxrank._src.solvers.run import (
    _print_progress,
    choose_batch_size,
    fit_batch,
    fit_one,
    resolve_devices,
)
from jaxrank._src.solvers.cccp import defer_uncertified_stop
from jaxrank._src.layout import max_row_norm
from jaxrank._src.features import Intercept, design
from jaxrank._src.oracles.ap import METHODS, ap_oracle
from jaxrank._src.metrics import average_precision
from jaxrank._src.models.base import Model
from jaxrank._src.types import HingeTerms, Violation

# Rounds of block-coordinate ascent of LatentSSVMModel's approximate inference.
SSVM_ROUNDS = 3


# ---------------------------------------------------------------------------
# Data: candidates of bags.
# ---------------------------------------------------------------------------


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
            positions instead of a scatter-add (with ``X^T``: 1.5 -> 0.5 ms
            per call on musk2's 102 x 1,044 table, CPU).
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


# ---------------------------------------------------------------------------
# Feature map, problems, models.
# ---------------------------------------------------------------------------


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
    cache: int = 1
    inner_steps: int = 0

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


# ---------------------------------------------------------------------------
# CCCP pieces (jitted, vmapped over fits).
# ---------------------------------------------------------------------------


def latent_objective(model, data, problem, w, C):
    """The solver's objective ``F(w)`` of ``model`` with the latent variables of ``problem``.

    ``1/2 ||w||^2 + C * slack(oracle) + sum hinge terms``, exactly as
    :func:`jaxrank.solvers.fit` evaluates it at its first iteration (a
    warm-started search, :meth:`LatentSSVMModel.search_start`, runs here
    from its fixed starts only). With the imputation of
    ``model.impute`` at the same ``w`` this is the non-convex objective (of
    (8) for :class:`LatentAPModel`, by Proposition 2).

    Args:
        model: a latent model (static).
        data: :class:`BagData`.
        problem: :class:`LatentProblem` (no batch axis).
        w: ``[dim]`` weights.
        C: ``[]`` trade-off.

    Returns:
        ``[]`` float objective.
    """
    dtype = w.dtype
    C = jnp.asarray(C, dtype)
    obj = 0.5 * jnp.dot(w, w)
    S = model.scores(w, data)
    if model.oracle is not None:
        r = model.oracle(S, problem)
        slack = r.hinge if r.hinge is not None else r.loss - jnp.vdot(S, r.coef)
        obj = obj + C * slack
    h = model.hinge_terms(data, problem, C)
    if h is not None:
        d = h.rows.shape[1]
        m = h.rows @ w[:d]
        if h.bias:
            m = m + h.bias * w[d]
        obj = obj + jnp.sum(h.upper * jnp.maximum(0, 1 - h.labels * m))
    return obj


@functools.partial(jax.jit, static_argnames=("model",))
def cccp_update(model, data, problems, W, C):
    """Step 3 of Algorithm 1 for ``K`` fits: impute at ``W`` and evaluate the objective.

    Args:
        model: a latent model (static).
        data: :class:`BagData`.
        problems: :class:`LatentProblem` with a leading ``[K]`` axis.
        W: ``[K, dim]`` weights.
        C: ``[K]`` trade-offs.

    Returns:
        ``(problems [K], objective [K], changed [K] bool)``: the re-imputed
        problems, the non-convex objective at ``W`` (with that imputation) and
        whether any latent variable changed.
    """

    def one(p, w, c):
        new = model.impute(model.scores(w, data), p)
        obj = latent_objective(model, data, new, w, c)
        changed = jnp.any(new.chosen != p.chosen) | jnp.any(new.ignore != p.ignore)
        return new, obj, changed

    return jax.vmap(one)(problems, W, C)


def centroid_weights(data, positive, where, dim):
    """``[M, dim]`` difference of the class means of the bag-mean features.

    ``w_m = mean_{positive bags} xbar_b - mean_{negative bags} xbar_b`` over the
    bags of ``where[m]``, with ``xbar_b`` the mean of bag ``b``'s allowed
    candidates (:attr:`BagData.allowed`): a start for CCCP that ranks bags
    like a nearest-centroid classifier of their means (weights past ``d``,
    e.g. an intercept, are 0). One product ``X^T G``.

    Args:
        data: :class:`BagData`.
        positive, where: ``[M, B]`` bool.
        dim: number of weights (``>= d``).

    Returns:
        ``[M, dim]`` float32 NumPy array.
    """
    allowed = np.asarray(data.allowed)
    layout = np.asarray(data.layout)
    pos = np.asarray(positive, bool) & np.asarray(where, bool)
    neg = ~np.asarray(positive, bool) & np.asarray(where, bool)
    size = np.maximum(allowed.sum(axis=1), 1)  # [B]
    n_pos = np.maximum(pos.sum(axis=1, keepdims=True), 1)
    n_neg = np.maximum(neg.sum(axis=1, keepdims=True), 1)
    bag_w = (pos / n_pos - neg / n_neg) / size[None, :]  # [M, B]
    n = data.X.shape[0]
    G = np.zeros((n + 1, pos.shape[0]), np.float32)
    rows = np.where(allowed, layout, n)  # [B, T]; padding -> the dropped row n
    np.add.at(G, rows.reshape(-1), np.repeat(bag_w.T, rows.shape[1], axis=0))
    d = data.X.shape[1]
    W = np.zeros((pos.shape[0], dim), np.float32)
    W[:, :d] = np.asarray(data.X.rmatvec(jnp.asarray(G[:n]))).T
    return W


def _take(tree, idx):
    return jax.tree_util.tree_map(lambda a: a[idx], tree)


def _select(mask, a, b):
    """Leafwise ``where(mask[k], a[k], b[k])`` over the leading axis ``[K]``."""
    return jax.tree_util.tree_map(
        lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y), a, b)


# ---------------------------------------------------------------------------
# Host-side validation.
# ---------------------------------------------------------------------------


def check_bags(bags, n, name="bags"):
    """``[n]`` bag ids of any hashable type, validated, as int64 codes.

    Integer ids (and integral floats) are kept as they are; other ids
    (strings, fractional floats, bool, tuples, any hashable object) are
    replaced by their rank among the distinct ids (sorted order when the ids
    can be sorted, else order of first appearance), so "sorted bag-id order"
    is the order of the ids themselves.

    Args:
        bags: ``[n]`` ids, one per instance row.
        n: the number of rows.
        name: argument name for messages.

    Returns:
        ``[n]`` int64 ids.

    Raises:
        ValueError: not 1-D of length ``n``; NaN or ``None`` ids (no bag
            can be told by them).
        TypeError: unhashable ids (e.g. lists).
    """
    b = np.asarray(bags) if isinstance(bags, np.ndarray) else None
    if b is None:
        try:
            b = np.asarray(bags)
        except ValueError:  # ragged sequences (e.g. tuples of different lengths)
            b = None
        if (b is None or b.ndim != 1) and hasattr(bags, "__len__") and len(bags) == n:
            b = np.empty(n, object)
            b[:] = list(bags)
    if b is None or b.ndim != 1 or b.shape[0] != n:
        shape = None if b is None else b.shape
        raise ValueError(f"{name} must be a 1-D array of {n} bag ids (one per instance row of "
                         f"X); got shape {shape}.")
    if b.dtype.kind in "iu":
        return b.astype(np.int64)
    if b.dtype.kind == "f":
        if not np.all(np.isfinite(b)):
            raise ValueError(f"{name} holds NaN or infinite bag ids; every row needs a bag id.")
        if np.all(b == np.round(b)) and np.all(np.abs(b) < 2.0**62):
            return b.astype(np.int64)
    if b.dtype.kind == "O":
        for v in b:
            if v is None or (isinstance(v, float) and not np.isfinite(v)):
                raise ValueError(f"{name} holds a {v!r} bag id; every row needs a bag id.")
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"{name} must hold hashable bag ids (numbers, strings, "
                                f"tuples, ...); got {type(v).__name__} {v!r}.") from None
    try:
        return np.unique(b, return_inverse=True)[1].reshape(-1).astype(np.int64)
    except TypeError:  # ids that cannot be sorted together: order of first appearance
        codes = {}
        return np.array([codes.setdefault(v, len(codes)) for v in b.tolist()], np.int64)


def _given_id(given, i):
    """The bag id of row ``i`` as the user gave it (``check_bags`` may have coded it)."""
    v = list(given)[i]
    return v.item() if isinstance(v, np.generic) else v


def _check_instance_mask(a, n, name):
    if a is None:
        return None
    arr = np.asarray(a)
    if arr.dtype != bool:
        raise TypeError(f"{name} must be a bool array (one flag per instance); got dtype "
                        f"{arr.dtype}.")
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one flag per instance row of X); "
                         f"got {arr.shape}.")
    return arr


def per_bag_labels(y, bags, name="y"):
    """Per-bag labels from per-instance labels (constant within each bag).

    Args:
        y: ``[n]`` labels, one per instance.
        bags: ``[n]`` integer bag ids.

    Returns:
        ``[B]`` labels in sorted bag-id order.

    Raises:
        ValueError: a bag whose instances carry different labels, bad shapes.
    """
    y = np.asarray(y)
    given = bags
    bags = check_bags(bags, y.shape[0] if y.ndim == 1 else -1)
    ids, first, inv = np.unique(bags, return_index=True, return_inverse=True)
    lab = y[first]
    bad = np.flatnonzero(y != lab[inv])
    if bad.size:
        b = ids[inv[bad[0]]]
        shown = _given_id(given, int(bad[0]))
        raise ValueError(f"{name}: the instances of bag {shown!r} carry different labels "
                         f"({np.unique(y[bags == b]).tolist()[:4]}); a bag has one label.")
    return lab


# ---------------------------------------------------------------------------
# Estimators.
# ---------------------------------------------------------------------------


class LatentEstimator(StructuredSVM):
    """Base of the weakly supervised estimators (bags of candidates, CCCP).

    Not used directly: see :class:`LatentAPSVM`, :class:`LatentSVM`,
    :class:`LatentSSVM`. Subclasses define ``_model``.
    """

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "max_outer_iter": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"centroid", "random"})],
        "random_state": ["random_state"],
        **DEVICES_CONSTRAINT,
    }
    _groups_param = "bags"
    _groups_required = True
    _groups_at_predict = True
    _persist = ("n_outer_iter_", "cccp_objectives_", "cccp_gaps_", "init_objectives_")

    def _features(self):
        return CandidateFeatures()

    # -- inputs -------------------------------------------------------------

    def _prepare_bags(self, X, y, bags, known=None, where=None, reset=True):
        X = validate_data(self, validation.check_features(X), accept_sparse="csr",
                          dtype=np.float32, reset=reset)
        # The float32 range of the candidate rows, before any fit (C R: in fit / sweep).
        check_feature_scale(max_row_norm(X))
        n = X.shape[0]
        given, bags = bags, check_bags(bags, n)
        known = _check_instance_mask(known, n, "known")
        where = _check_instance_mask(where, n, "where")
        ids = np.unique(bags)
        B = ids.shape[0]
        yy = np.asarray(y)
        if yy.ndim == 2 and yy.shape[1] == 1:
            yy = yy[:, 0]
        if yy.ndim != 1:
            raise ValueError(f"y must be 1-D (one label per bag); got shape {yy.shape}.")
        if yy.shape[0] == B:
            yb = yy
        elif yy.shape[0] == n:
            yb = per_bag_labels(yy, given)
        else:
            missing = None
            if ids[0] >= 0 and yy.shape[0] == ids[-1] + 1:
                missing = np.setdiff1d(np.arange(yy.shape[0]), ids)
            if missing is not None and missing.size:
                raise ValueError(
                    f"bag id(s) {missing[:10].tolist()} have no instance: y holds "
                    f"{yy.shape[0]} labels (bag ids 0..{yy.shape[0] - 1}) but bags holds only "
                    f"{B} distinct ids.")
            raise ValueError(
                f"y must hold one label per bag ({B} bags, in sorted bag-id order) or one per "
                f"instance ({n}); got {yy.shape[0]} labels.")
        positive, classes, _ = labels_to_tasks(yb, pos_label=getattr(self, "pos_label", None))
        data, ids = bag_data(X, bags, known=known, where=where)
        empty = ~np.asarray(data.allowed).any(axis=1)
        if empty.any():
            k = int(np.flatnonzero(empty)[0])
            kind = "positive" if positive[0, k] else "negative"
            shown = _given_id(given, int(np.flatnonzero(bags == ids[k])[0]))
            raise ValueError(
                f"{kind} bag {shown!r} has all its candidates masked (where=False for every "
                f"instance{' it has' if known is None else ', or for every known one'}); a "
                "bag needs a candidate to be scored.")
        self._bag_ids = ids
        return data, positive, classes

    def _prepare(self, X, y, groups, reset=True):
        """The registry/sweep hook: ``groups`` are the bag ids; samples are bags."""
        if groups is None:
            raise ValueError(f"{type(self).__name__} needs bags=[n_instances] bag ids (the "
                             "CLI: qid: columns).")
        data, positive, classes = self._prepare_bags(X, y, groups, reset=reset)
        return data, positive, classes, False, None

    @staticmethod
    def _per_group_labels(y, groups):
        """Per-bag labels (sorted bag-id order) from per-line labels (CLI evaluate)."""
        return per_bag_labels(y, groups)

    def _positive_weight(self, n_pos, n_neg_kept):
        """``[M]`` weight ``J`` of the positive bags' hinges (1 without a ``J``).

        ``"balanced"`` is the paper's unit ``(|P| + |N|) / |P|`` with ``N``
        counted in the examples that carry a negative hinge: the kept negative
        candidates ``n_neg_kept [M]`` of each fit, so the positive bags' total
        weight ``J |P|`` equals the negative candidates' (not the negative
        bags'); ``"balanced*f"`` is ``f`` times that unit.
        """
        J = getattr(self, "J", 1.0)
        if isinstance(J, str):
            return balanced_factor(J) * (n_pos + n_neg_kept) / np.maximum(n_pos, 1)
        return np.full(n_pos.shape, float(J))

    def _kept_negative_candidates(self, data, positive, where):
        """``[M]`` negative candidates that carry a hinge after the robustness
        fraction ``c`` (the count :meth:`LatentSVMModel.impute` keeps)."""
        per_bag = np.asarray(data.allowed).sum(axis=1)  # [B]
        neg = ~positive & where
        n_cand = (neg * per_bag[None, :]).sum(axis=1)
        n_bags = (neg & (per_bag[None, :] > 0)).sum(axis=1)
        c = float(getattr(self, "c", 0.0))
        ignored = np.minimum(np.floor(c * n_cand + 1e-4), n_cand - n_bags)
        return n_cand - ignored

    def _problems(self, data, positive, where, groups):
        positive = np.asarray(positive, bool)
        where = np.asarray(where, bool)
        M, B = positive.shape
        n_pos = np.sum(positive & where, axis=1)
        n_neg = np.sum(~positive & where, axis=1)
        if np.any(n_pos == 0) or np.any(n_neg == 0):
            raise ValueError(
                "every fit needs a positive and a negative bag; got "
                f"{int(n_pos.min())} positive and {int(n_neg.min())} negative bag(s) in the "
                "worst one.")
        T = data.layout.shape[1]
        cand = jnp.broadcast_to(data.allowed, (M, B, T))
        f32 = lambda v: jnp.full((M,), v, jnp.float32)  # noqa: E731
        problems = LatentProblem(
            positive=jnp.asarray(positive), where=jnp.asarray(where), cand=cand,
            chosen=jnp.zeros((M, B), jnp.int32), ignore=jnp.zeros((M, B, T), bool),
            J=jnp.asarray(self._positive_weight(
                n_pos, self._kept_negative_candidates(data, positive, where)), jnp.float32),
            c=f32(float(getattr(self, "c", 0.0))))
        # kp bounds the positive bags of every fit by the positive bags of the
        # data (not of ``where``), so CV folds and refits share one compiled model.
        return problems, {"max_pos": int(max(positive.sum(axis=1).max(), 1))}

    # -- CCCP -----------------------------------------------------------------

    def _solve(self, model, data, problems, C, K, batch_size, devices, w0):
        """One convex step of every run, warm-started at its previous iterate ``w0 [K, dim]``.

        The first solver iteration evaluates the convex upper bound at ``w0``,
        where it equals the non-convex objective (8) (the imputation was made
        there), so the step's result never has a higher objective than ``w0``:
        CCCP's objective decreases even when a step stops at ``max_iter``.
        """
        tol = jnp.float32(self.tol)
        w0 = jnp.asarray(w0, jnp.float32)
        if K == 1:
            res = fit_one(model, data, _take(problems, 0), C=C[0], tol=tol,
                          max_iter=int(self.max_iter),
                          callback=_print_progress if self.verbose else None, w0=w0[0])
            return jax.tree_util.tree_map(lambda a: a[None], res)
        return fit_batch(model, data, problems, C, tol=tol, max_iter=int(self.max_iter),
                         batch_size=batch_size, devices=devices, callback=None, w0=w0)

    def _train(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None):
        """CCCP (Algorithm 1) for ``M`` fits times ``n_init`` initialisations.

        Each outer iteration is one compiled solver call over all ``M *
        n_init`` convex problems (runs that have stopped get an empty problem,
        which stops at once) and one compiled imputation/evaluation call.

        Returns:
            ``(FitResult [M], extras)``: per fit, the run (initialisation)
            with the lowest objective, its best iterate ``w``, that objective
            (of the non-convex problem), the dual bound of the convex problem
            that produced ``w``, the solver iterations summed over its outer
            iterations and whether it converged: its last convex step reached
            ``tol`` and CCCP stopped by its own rule, not at
            ``max_outer_iter`` (``converged_`` of the estimators).
        """
        M = int(C.shape[0])
        R = int(self.n_init)
        K = M * R
        rng = check_random_state(self.random_state)
        probs = _take(problems, jnp.repeat(jnp.arange(M), R))
        cand = np.asarray(probs.cand)
        u = rng.random_sample(cand.shape)
        init = np.argmax(np.where(cand, u, -1.0), axis=-1).astype(np.int32)
        probs = probs._replace(chosen=jnp.asarray(init))
        Ck = jnp.repeat(jnp.asarray(C, jnp.float32), R)
        if self.init == "centroid":
            # The first initialisation of every fit imputes at the difference of
            # the class centroids of the bag means (the rest stay random).
            first = np.arange(K) % R == 0
            W0 = np.zeros((K, model.dim(data)), np.float32)
            W0[first] = centroid_weights(data, problems.positive, problems.where,
                                         model.dim(data))
            new, _, _ = cccp_update(model, data, probs, jnp.asarray(W0), Ck)
            probs = _select(jnp.asarray(first), new, probs)
        if K > 1:
            devices = resolve_devices(devices)
            batch_size = choose_batch_size(batch_size, K, model.dim(data), len(devices),
                                           model.cache)
        T_out = int(self.max_outer_iter)
        tol = float(self.tol)
        hist = np.full((K, T_out), np.nan)
        gaps = np.full((K, T_out), np.nan)
        active = np.ones(K, bool)
        best_obj = np.full(K, np.inf)
        best_w = np.zeros((K, model.dim(data)), np.float32)
        best_dual = np.zeros(K)
        steps = np.zeros(K, np.int64)
        conv = np.ones(K, bool)
        n_outer = np.zeros(K, np.int64)
        hit_max = np.zeros(K, bool)
        resolves = np.zeros(K, np.int64)
        w_prev = np.zeros((K, model.dim(data)), np.float32)  # w = 0 at the first step
        for t in range(T_out):
            run = probs
            if not active.all():
                run = probs._replace(where=jnp.where(jnp.asarray(active)[:, None], probs.where,
                                                     False))
            res = self._solve(model, data, run, Ck, K, batch_size, devices,
                              np.where(active[:, None], w_prev, 0))
            w_prev = np.asarray(res.w, np.float32)
            new, obj, changed = cccp_update(model, data, probs, res.w, Ck)
            obj, changed = np.asarray(obj, np.float64), np.asarray(changed)
            W, dual = np.asarray(res.w), np.asarray(res.dual, np.float64)
            a = active
            hist[a, t] = obj[a]
            gaps[a, t] = np.asarray(res.objective, np.float64)[a] - dual[a]
            steps[a] += np.asarray(res.num_steps)[a]
            step_conv = np.asarray(res.converged)
            if self.verbose and not step_conv[a].all():
                print(f"{type(self).__name__}: CCCP iteration {t + 1}: "
                      f"{int((~step_conv[a]).sum())} convex step(s) stopped at max_iter "
                      "(only the last step of a run must reach tol)", flush=True)
            conv[a] = step_conv[a]
            n_outer[a] = t + 1
            better = a & (obj < best_obj)
            prev = best_obj.copy()
            best_obj[better], best_w[better], best_dual[better] = (
                obj[better], W[better], dual[better])
            small = np.isfinite(prev) & (prev - obj < tol * np.abs(prev))
            stop = a & (~changed | small)
            # The stop rule certifies a fit only after a converged convex step
            # (``converged_``): a last step that stopped at ``max_iter`` is
            # continued instead, warm-started at its best iterate.
            stop = defer_uncertified_stop(stop, step_conv, resolves)
            keep = a & ~stop
            if t == T_out - 1:
                hit_max |= keep
            if self.verbose:
                print(f"{type(self).__name__}: CCCP iteration {t + 1}: objective "
                      f"{np.min(obj[a]):.6g}..{np.max(obj[a]):.6g} over {int(a.sum())} "
                      f"run(s), {int(stop.sum())} stopped", flush=True)
            probs = _select(jnp.asarray(keep), new, probs)
            active = keep
            if not active.any():
                break
        best_obj_m = best_obj.reshape(M, R)
        pick = np.argmin(best_obj_m, axis=1)
        idx = np.arange(M) * R + pick
        res = solver.FitResult(
            w=jnp.asarray(best_w[idx]), objective=jnp.asarray(best_obj[idx], jnp.float32),
            dual=jnp.asarray(best_dual[idx], jnp.float32),
            num_steps=jnp.asarray(steps[idx], jnp.int32),
            converged=jnp.asarray(conv[idx] & ~hit_max[idx]))
        extras = {"n_outer_iter_": n_outer[idx], "cccp_objectives_": hist[idx],
                  "cccp_gaps_": gaps[idx], "init_objectives_": best_obj_m,
                  "_hit_max_outer": hit_max[idx], "_last_step_converged": conv[idx]}
        return res, extras

    def _fitted_extras(self, extras, pick):
        self.n_outer_iter_ = int(np.asarray(extras["n_outer_iter_"])[0])
        h = np.asarray(extras["cccp_objectives_"], np.float64)[0]
        self.cccp_objectives_ = h[: self.n_outer_iter_].copy()
        g = np.asarray(extras["cccp_gaps_"], np.float64)[0]
        self.cccp_gaps_ = g[: self.n_outer_iter_].copy()
        self.init_objectives_ = np.asarray(extras["init_objectives_"], np.float64)[0].copy()

    def _scores(self, W, data):
        """``[B, M]`` training bag scores (max over candidates) of weights ``W [M, dim]``."""
        feats = self._features()

        def one(w):
            S = feats(w, data)
            return jnp.max(jnp.where(data.mask, S, -jnp.inf), axis=1)

        return jax.vmap(one, out_axes=1)(jnp.asarray(W))

    # -- fit / predict --------------------------------------------------------

    def fit(self, X, y, *, bags, known=None, where=None):
        """Fit by CCCP (Algorithm 1) from ``n_init`` initial imputations (``init``).

        Args:
            X: ``[n_instances, d]`` candidate features, one row per candidate
                (dense or ``scipy.sparse``; cast to float32).
            y: ``[n_bags]`` bag labels with two distinct values (the larger is
                positive), in the order of the sorted unique bag ids; or
                ``[n_instances]`` per-instance labels constant within each bag
                (the CLI's SVMlight form; used when ``n_instances != n_bags``).
            bags: ``[n_instances]`` bag ids (any hashable values: ints, strings, ...).
            known: optional ``[n_instances]`` bool: candidates given as correct.
                In a bag with any known candidate, training chooses only among
                them (the supervised bags of Figure 1).
            where: optional ``[n_instances]`` bool: candidates that take part in
                training (default all).

        Returns:
            self

        Raises:
            ValueError: bad hyperparameters; NaN/inf, empty or complex ``X``;
                ``bags`` not 1-D integer ids of length ``n_instances``; ``y``
                not one label per bag (naming missing bag ids when ``y`` is
                indexed by ids ``0..max``), a bag whose instances carry
                different labels, ``y`` without exactly two classes; a bag
                with all its candidates masked by ``where`` (named).
            TypeError: ``known`` / ``where`` not bool.

        Warns:
            ConvergenceWarning: the last convex step stopped at ``max_iter``
                before its duality gap reached ``tol``, or CCCP stopped at
                ``max_outer_iter``.
        """
        self._check_params()
        t0 = time.perf_counter()
        data, positive, classes = self._prepare_bags(X, y, bags, known, where)
        R = max_row_norm(data.X)
        check_feature_scale(R, float(self.C))
        self._fit_scale = (R, float(self.C))
        where_b = np.ones(positive.shape, bool)
        problems, static = self._problems(data, positive, where_b, None)
        model = self._model(static)
        if self.verbose:
            print(f"{type(self).__name__}: {data.shape[0]} candidates in {data.n_bags} bags "
                  f"(at most {data.layout.shape[1]} per bag), d={data.shape[1]}, "
                  f"{int(positive.sum())} positive bags, C={self.C}, n_init={self.n_init}; "
                  f"{positive_class_text(self, classes)}", flush=True)
        C = jnp.full((1,), self.C, jnp.float32)
        res, extras = self._train(model, data, problems, C, single=True,
                                  devices=self.devices)
        res = jax.tree_util.tree_map(np.asarray, res)
        self._set_fitted(res, extras, classes, False, data, positive)
        self.fit_time_ = time.perf_counter() - t0
        if not bool(np.asarray(extras["_last_step_converged"])[0]):
            # The gap of the last convex step (not of the non-convex objective).
            last = float(self.cccp_gaps_[-1])
            step = res._replace(objective=np.asarray(res.dual) + last)
            warn_unconverged(self, step, " (the last convex CCCP step, latent variables fixed)")
        if bool(np.asarray(extras["_hit_max_outer"])[0]):
            warnings.warn(
                f"{type(self).__name__}: CCCP stopped at max_outer_iter={self.max_outer_iter} "
                "while the objective was still decreasing by more than tol.",
                ConvergenceWarning, stacklevel=2)
        return self

    def _candidate_scores(self, X, bags):
        check_is_fitted(self)
        X = validate_data(self, validation.check_features(X), accept_sparse="csr",
                          dtype=np.float32, reset=False)
        bags = check_bags(bags, X.shape[0])
        layout, _ = query_layout(bags, X.shape[0])
        s = np.asarray(X @ self.coef_[0].astype(np.float32)).reshape(-1)
        S = np.r_[s, -np.inf][layout]
        return S, layout

    def decision_function(self, X, *, bags):
        """Bag scores ``max_h w^T Phi(h) + intercept_`` (eq. (6)); rank by sorting them (eq. (7)).

        Args:
            X: ``[n_instances, d]`` candidate features.
            bags: ``[n_instances]`` bag ids (any hashable values: ints, strings, ...).

        Returns:
            ``[n_bags]`` float32 scores in sorted bag-id order.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: wrong number of features, NaN/inf ``X``, bad ``bags``.
        """
        S, _ = self._candidate_scores(X, bags)
        b = np.float32(np.asarray(self.intercept_).reshape(-1)[0])
        return (S.max(axis=1) + b).astype(np.float32)

    def predict_candidates(self, X, *, bags):
        """The chosen candidate of every bag: ``argmax_h w^T Phi(h)`` (eq. (6)).

        Args:
            X: ``[n_instances, d]`` candidate features.
            bags: ``[n_instances]`` bag ids (any hashable values: ints, strings, ...).

        Returns:
            ``[n_bags]`` int64 row index into ``X`` of each bag's best
            candidate (first on ties), bags in sorted bag-id order.
        """
        S, layout = self._candidate_scores(X, bags)
        return layout[np.arange(layout.shape[0]), np.argmax(S, axis=1)].astype(np.int64)

    def predict(self, X, *, bags):
        """Bag labels: ``classes_[1]`` where :meth:`decision_function` ``> 0``."""
        return self.classes_[(self.decision_function(X, bags=bags) > 0).astype(int)]

    def score(self, X, y, sample_weight=None, *, bags):
        """Average precision of the bag ranking (:meth:`decision_function`).

        ``y`` as in :meth:`fit` (per bag, or per instance constant in each bag).
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        check_is_fitted(self)
        s = self.decision_function(X, bags=bags)
        yy = np.asarray(y)
        if yy.shape[0] != s.shape[0]:
            yy = per_bag_labels(yy, bags)
        unknown = np.setdiff1d(np.unique(yy), self.classes_)
        if unknown.size:
            raise ValueError(f"y has labels {unknown.tolist()[:6]} that are not among the "
                             f"model's classes_ {self.classes_.tolist()}.")
        return float(average_precision(s, yy == self.classes_[1]))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags


_COMMON_ARGS = """
        max_outer_iter: maximum CCCP iterations (solver calls) per initialisation.
        tol: relative duality gap of every convex step, and the relative
            decrease of the objective below which CCCP stops.
        n_init: initialisations (imputations of the positive bags'
            candidates); the one with the lowest final objective is kept (the
            paper uses 3-5).
        init: ``"centroid"`` (default): the first initialisation imputes
            ``argmax_h w0^T Phi_i(h)`` at ``w0`` = the difference of the class
            means of the bags' mean candidates (:func:`centroid_weights`), the
            others uniformly at random among the allowed candidates;
            ``"random"``: all at random. On 10-digit bags at ``C = 100`` (no
            instance labels) every random start of LatentAPSVM / LatentSSVM
            could stall at ``w = 0`` while the centroid start did not (README,
            "Latent AP-SVM").
        random_state: seed (``None``, an int or a ``RandomState``) of the
            random initial imputations.
        max_iter: maximum solver iterations per convex step (a step stops
            earlier once its certified relative gap is ``<= tol``).
        verbose: print progress.
        devices: ``None`` (every local device), an int (the first ``k``
            local devices) or a list of ``jax.Device``: the ``n_init``
            initialisations are one batch of convex problems per CCCP
            iteration, dealt to one work queue per device (on a CPU, ``k``
            devices are ``k`` cores: ``jax_num_cpu_devices``). One
            initialisation runs on one device: the candidate rows are not
            sharded.
        pos_label: the label of the positive (relevant) class, one of the
            two values of the bag labels ``y``; ``None`` (default): the
            larger label in sort order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.
"""

def _attrs(intercept, objective):
    return _COMMON_ATTRS.replace("{INTERCEPT}", intercept).replace("{OBJECTIVE}", objective)


_COMMON_ATTRS = """
        coef_: ``[1, n_features]`` float32 weights.
        intercept_: ``[1]``; {INTERCEPT}
        classes_: the two bag label values (``classes_[1]`` positive).
        objective_: the non-convex objective at ``coef_`` ({OBJECTIVE}), the lowest over
            the outer iterations and initialisations.
        dual_objective_: the certified lower bound of the convex step that
            produced ``coef_`` (its latent variables fixed; not a bound on the
            non-convex problem).
        n_iter_: solver iterations summed over the outer iterations of the kept run.
        converged_: whether CCCP's stopping certificate holds for the kept
            run: its last convex step reached ``tol`` and CCCP stopped by its
            own rule, not at ``max_outer_iter``. If the imputation did not
            change, the last step's gap certifies ``coef_`` on the convex bound
            tight at it; if the objective decreased by less than ``tol``
            (relative), the bound tight at the iterate before the last step
            has its minimum within ``tol`` relative plus that gap below the
            iterate's objective (an approximate fixed point of Algorithm 1),
            and ``coef_`` is the lower of the two iterates. Earlier steps that
            stopped at ``max_iter`` change the path, not this certificate
            (their gaps are in ``cccp_gaps_``), as for :class:`HOAPSVM`. Where
            the rule would stop after a step that stopped at ``max_iter``,
            CCCP makes one more step instead (once per run), warm-started at
            that step's best iterate.
        n_outer_iter_: CCCP iterations of the kept run.
        cccp_objectives_: ``[n_outer_iter_]`` float64, the objective after every
            outer iteration of the kept run. Non-increasing (up to float32
            rounding), converged steps or not: every convex step is
            warm-started at the previous iterate, where its upper bound equals
            this objective, and never returns a point above its start.
        cccp_gaps_: ``[n_outer_iter_]`` float64, certified duality gap
            (objective minus dual bound) of every convex step.
        init_objectives_: ``[n_init]`` final objective of every initialisation.
        fit_time_: seconds."""


class _APLatentEstimator(LatentEstimator):
    """Parameters shared by the AP-loss latent models (:class:`LatentAPSVM`, :class:`LatentSSVM`)."""

    _parameter_constraints = {
        **LatentEstimator._parameter_constraints,
        "inference": [StrOptions(set(METHODS))],
    }
    _default_Cs = (1.0, 10.0, 100.0, 1000.0)

    def __init__(self, C=100.0, *, inference="select", max_outer_iter=30, tol=1e-4, n_init=3,
                 init="centroid", random_state=None, max_iter=5000, verbose=False,
                 devices=None, pos_label=None):
        self.C = C
        self.inference = inference
        self.max_outer_iter = max_outer_iter
        self.tol = tol
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.max_iter = max_iter
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label


class LatentAPSVM(_APLatentEstimator):
    __doc__ = r"""Latent AP-SVM (Behl et al. 2014): AP-SVM over bags of candidates, by CCCP.

    Prediction (eqs. (6)-(7)): each bag is scored by its best candidate,
    ``max_h w^T Phi_i(h)``, and bags are ranked by sorting these scores.
    Training minimises the tighter bound (8) on the AP loss::

        1/2 ||w||^2 + C xi,  xi = max_{Y, H_N} min_{H_P} Delta(Y*, Y)
                                  - w^T (Psi(X, Y*, {H_P, H_N}) - Psi(X, Y, {H_P, H_N}))

    by CCCP (Algorithm 1): impute ``h*_i = argmax_h w^T Phi_i(h)`` for every
    positive bag (Proposition 2; among the ``known`` candidates of a
    supervised bag), then solve the convex problem (11) with
    :func:`jaxrank.solvers.fit_many` (:class:`LatentAPModel`: each negative is
    maximised over its candidates, Proposition 3, then exact AP inference),
    repeat; stop when the imputation no longer changes or the objective of
    (8) decreases by less than ``tol`` (relative). ``Psi`` is normalised by
    ``1/(|P||N|)`` as in :class:`jaxrank.APSVM`, so the useful ``C`` is large
    (``1``-``10^3``); with every bag of size 1 this is exactly
    :class:`jaxrank.APSVM`.

    CCCP is a local method and its start matters. From a random imputation
    the first convex step's optimum can be ``w = 0`` or within a small
    fraction of its objective (no direction ranks one random candidate per
    positive bag above every negative bag's best candidate): measured on the
    ``protein`` MIL set (about 140 candidates per bag) at every ``C``. If
    that step stops at ``max_iter`` before ``tol`` (large ``C``), the solver's
    best iterate can be ``w = 0`` itself (seen on 10-digit bags at ``C =
    100``; ``C = 10`` converges and CCCP proceeds); then all bags tie, the
    objective does not decrease and CCCP stops with ``coef_ = 0``. The
    default ``init="centroid"`` starts one initialisation from the imputation
    at the bag-mean class centroids, which escaped that stall in every case
    measured (README, "Latent AP-SVM"); other remedies: a smaller ``C``, a
    larger ``max_iter``, more initialisations (``n_init``) or ``known``
    candidates.

    Input: one row of ``X`` per candidate, ``bags`` the bag id of each row
    (:meth:`fit`). On the command line (``jaxrank train --model
    latent-apsvm``): an SVMlight file with one line per candidate, ``qid:`` =
    bag id and the bag label on every line of the bag.

    Args:
        C: trade-off ``> 0`` of problem (8) (default 100, default grid
            ``1``-``10^3``, on the :class:`APSVM` scale).
        inference: AP inference method (``"select"``, ``"search"``,
            ``"greedy"``; all exact).{_COMMON_ARGS}

    Attributes:{ATTRS}

    Raises:
        ValueError: in ``fit``, bad hyperparameters and the bad inputs listed
            in :meth:`LatentEstimator.fit`.

    References:
        Behl, Jawahar, Kumar, "Optimizing Average Precision using Weakly
        Supervised Data", CVPR 2014 (eqs. (6)-(13), Algorithm 1,
        Propositions 2-3); Yuille & Rangarajan 2003 (CCCP); Mohapatra et al.,
        NIPS 2014 (AP inference).

    Examples:
        >>> import numpy as np, jaxrank
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(60, 5)).astype(np.float32)
        >>> bags = np.repeat(np.arange(20), 3)
        >>> y = np.arange(20) % 2                # bags 1, 3, 5, ... are positive
        >>> X[3 * np.flatnonzero(y)] += 2.0      # their first candidate is the witness
        >>> m = jaxrank.LatentAPSVM(C=10.0, n_init=1, random_state=0).fit(X, y, bags=bags)
        >>> m.decision_function(X, bags=bags).shape, m.score(X, y, bags=bags)
        ((20,), 1.0)
        >>> bool(np.all(m.predict_candidates(X, bags=bags)[y == 1] % 3 == 0))  # witnesses
        True
    """.replace("{_COMMON_ARGS}", _COMMON_ARGS).replace("{ATTRS}", _attrs(
        "minus the midpoint of the two classes' mean training bag scores (used "
        "only by ``predict``; AP ignores it).", "problem (8)"))

    def _model(self, static):
        return LatentAPModel(kp=int(static["max_pos"]), method=self.inference)


class LatentSSVM(_APLatentEstimator):
    __doc__ = r"""Latent structural SVM with the AP loss (problem (5); the paper's baseline).

    Minimises::

        1/2 ||w||^2 + C xi,  xi = max_{Y, H} [Delta(Y*, Y) + w^T Psi(X, Y, H)]
                                  - max_H^ w^T Psi(X, Y*, H^)

    by CCCP: impute ``H^`` (each positive bag's highest-scoring candidate,
    each negative bag's lowest-scoring one: exact), solve the convex step
    (:class:`LatentSSVMModel`), repeat. **What is approximate**: the
    loss-augmented inference ``max_{Y, H}`` of the convex step, which is
    block-coordinate ascent over ``Y`` (exact AP inference at fixed ``H``)
    and ``H`` (exact at fixed ``Y``), ``SSVM_ROUNDS = 3`` rounds from three
    starts and from the previous solver iteration's ``H``
    (:class:`LatentSSVMModel`); the constraint it returns is valid but
    may not be the most violated, so ``objective_`` and ``cccp_objectives_``
    are those of the constraints found (lower bounds on the exact objective
    of (5)), and CCCP's monotonicity is not guaranteed. Prediction uses the
    two-step rule (6)-(7) of the latent AP-SVM (rule (4) needs the labels of
    the ranked bags, through ``Psi``), so the models compare on one rule.

    Args:
        C: trade-off ``> 0`` of problem (5) (the :class:`LatentAPSVM` scale).
        inference: AP inference method of the ``Y`` steps.{_COMMON_ARGS}

    Attributes:{ATTRS}

    References:
        Yu & Joachims, ICML 2009 (latent structural SVM); Behl, Jawahar,
        Kumar, CVPR 2014, §4.1 (problem (5)), §5.
    """.replace("{_COMMON_ARGS}", _COMMON_ARGS).replace("{ATTRS}", _attrs(
        "minus the midpoint of the two classes' mean training bag scores.",
        "problem (5) with the approximate inference"))

    def _model(self, static):
        return LatentSSVMModel(kp=int(static["max_pos"]), method=self.inference)


def balanced_factor(J):
    """The factor ``f`` of a ``J`` given as ``"balanced"`` (1) or ``"balanced*f"``.

    Args:
        J: a str, ``"balanced"`` or ``"balanced*f"`` with ``f`` a number
            ``> 0`` that is finite in float32 (e.g. ``"balanced*0.1"``).

    Returns:
        ``f`` as a Python float.

    Raises:
        ValueError: any other string, or ``f`` not ``> 0`` and finite.
    """
    if J == "balanced":
        return 1.0
    head, sep, tail = J.partition("*")
    try:
        f = float(tail) if head.strip() == "balanced" and sep else None
    except ValueError:
        f = None
    if f is None or not (np.isfinite(np.float32(f)) and np.float32(f) > 0):
        raise ValueError(f"J must be a number > 0, 'balanced' or 'balanced*f' with a number "
                         f"f > 0 (f times the balanced weight); got {J!r}.")
    return f


class LatentSVM(LatentEstimator):
    __doc__ = r"""Latent SVM with positive weight ``J`` and robustness fraction ``c`` (§5 baseline).

    Minimises, over ``w``, ``b``, the positive bags' candidates ``h_i`` and
    the ignored negative candidates ``I``::

        1/2 ||[w, b]||^2 + C J sum_{i in P} max(0, 1 - (w^T x_{i,h_i} + b))
                         + C sum_{j in N} sum_{h not in I_j} max(0, 1 + w^T x_{j,h} + b)

    where ``I`` holds ``floor(c n_neg)`` negative candidates (``n_neg``: all
    negative candidates; fewer if that would empty a bag) and leaves at least
    one candidate of every negative bag: "the most confusing c %% of the negative candidates" are ignored
    (``c = 0`` is the plain latent SVM). Trained by CCCP: impute the highest
    scoring candidate of each positive bag and the ignored set (the
    highest-scoring negative candidates other than each bag's lowest; both
    exact minimisers at fixed ``w``), then solve the convex hinge-sum problem
    (:class:`LatentSVMModel`, dual coordinate ascent in
    :func:`jaxrank.solvers.fit_many`). ``C`` is on the ``LinearSVC`` scale
    (sum of hinges). The paper's grids are ``C in 10^-3..10^4``, ``J in
    (|P| + |N|) / |P| x 10^-4..10`` and ``c in 0, 0.1, ..., 0.9``;
    :func:`jaxrank.sweep` tunes ``J in {"balanced", "balanced*0.3",
    "balanced*0.1"}`` and ``c in {0, 0.1}`` with ``C`` by default
    (``_default_param_grid``).

    Args:
        C: trade-off ``> 0``; the default grid (``_default_Cs``, used by
            :func:`jaxrank.sweep`) spans ``10^-4``-``1``: with the balanced
            ``J`` a positive bag's hinge weighs ``C J``, ``C`` times one plus
            the negative candidates per positive bag.
        J: weight ``> 0`` of the positive bags' hinges, ``"balanced"``
            (default): ``(|P| + |N|) / |P|``, the unit of the paper's grid,
            or ``"balanced*f"``: ``f > 0`` times that unit (e.g.
            ``"balanced*0.1"``; the default sweep grid's other values),
            with ``|P|`` the positive bags and ``|N|`` the negative
            candidates that carry a hinge (all but the ignored fraction
            ``c``) of each fit, so both classes weigh the same in the hinge
            sum. Counting negative *bags* instead, or ``J = 1``, lets bags of
            many candidates outweigh the positives, and the fit can end at
            ``coef_ = 0``.
        c: robustness fraction in ``[0, 1)``. With ``c > 0`` the ignored set
            moves between CCCP iterations and CCCP takes more of them, hence
            the default ``max_outer_iter=100`` (30 for the other latent models).
        fit_intercept: learn ``b`` (a regularised constant feature).{_COMMON_ARGS}

    Attributes:{ATTRS}

    Raises:
        ValueError: in ``fit``, ``J <= 0`` or a string other than
            ``"balanced"`` / ``"balanced*f"`` (``f > 0``), ``c`` outside ``[0, 1)`` and the
            bad inputs listed in :meth:`LatentEstimator.fit`.

    References:
        Felzenszwalb, Girshick, McAllester, Ramanan, PAMI 2010 (latent SVM);
        Andrews, Tsochantaridis, Hofmann, NIPS 2002 (MI-SVM); Behl,
        Jawahar, Kumar, CVPR 2014, §5 (``J``, ``c``).
    """.replace("{_COMMON_ARGS}", _COMMON_ARGS).replace("{ATTRS}", _attrs(
        "the learned ``b``.", "the latent SVM objective above")).replace("%%", "%")

    _parameter_constraints = {
        **LatentEstimator._parameter_constraints,
        "J": [Interval(Real, 0, None, closed="neither"), str],
        "c": [Interval(Real, 0, 1, closed="left")],
        "fit_intercept": ["boolean"],
    }
    _default_Cs = (0.0001, 0.001, 0.01, 0.1, 1.0)
    _default_param_grid = {"J": ("balanced", "balanced*0.3", "balanced*0.1"), "c": (0.0, 0.1)}
    _learns_intercept = True

    def __init__(self, C=1.0, *, J="balanced", c=0.0, fit_intercept=True, max_outer_iter=100,
                 tol=1e-4, n_init=3, init="centroid", random_state=None, max_iter=5000,
                 verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.J = J
        self.c = c
        self.fit_intercept = fit_intercept
        self.max_outer_iter = max_outer_iter
        self.tol = tol
        self.n_init = n_init
        self.init = init
        self.random_state = random_state
        self.max_iter = max_iter
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _check_params(self):
        super()._check_params()
        from jaxrank._src.estimators.base import check_positive_float32

        if isinstance(self.J, str):
            balanced_factor(self.J)
        else:
            check_positive_float32(self.J, "J")

    def _features(self):
        if self.fit_intercept:
            return Intercept(CandidateFeatures())
        return CandidateFeatures()

    def _model(self, static):
        return LatentSVMModel(features=self._features())


__all__ = [
    "BagData",
    "CandidateFeatures",
    "LatentAPModel",
    "LatentAPSVM",
    "LatentEstimator",
    "LatentProblem",
    "LatentSSVM",
    "LatentSSVMModel",
    "LatentSVM",
    "LatentSVMModel",
    "bag_data",
    "cccp_update",
    "latent_objective",
]
