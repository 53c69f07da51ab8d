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
converges far more slowly: on 20 Newsgroups, 2000 iterations unconverged
against 40 for the block at ``C = 30``, 174 at ``C = 300``.) The returned
``dual`` is a lower bound on the optimum of the penalised problem, so the
usual certificate ``objective - dual`` holds.

**Centring.** With the offset, both stages fit the rows centred on their
mean ``m`` (the training rows of the fit; in :func:`jaxrank.sweep`, every row
it is given): ``s(v) = w^T (x - m) + b``, and the weights are reported for the
rows as given (``intercept_ = b - w^T m``, likewise ``w0_intercept_``). The
regularised offset then costs ``b^2 / 2`` for the mean training score, not
for the score at the origin, and no direction of ``w`` shifts every training
score at once, so the fit does not depend on where the origin of the
features lies (``X + c`` gives the same fit). Measured at the origin, on
features far from it (non-negative ones: 0/1 indicators, counts, tf-idf),
both stages go wrong at small trade-offs. In the first stage nearly every
hinge is active, so ``[w0, b0]`` is close to ``C_binary sum_i y_i [x_i, 1]``,
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

**Defaults (issue 13).** With the former defaults (no offset in either
stage, ``C_binary = C / n``, ``k = 0.5``) APPX fell up to 17.9 AP points
below APSVM at APSVM's cross-validated ``C`` on the 10 tasks of
``bench/table1.py`` (mean 4.7), 3.3 and 4.1 points on satimage and
page-blocks0, and 4.7 points on w8a at ``C = 100``; the current defaults
stay within 0.77 points of APSVM on the 12 cross-validated tasks
(``bench/results/appx_defaults.md``). Two causes, ``C_binary = C / n`` not
being one of them:

* *No offset.* AP is translation invariant, but the constraints ``y_i w^T
  x_i >= 1`` are not: without ``b`` they pin the absolute level of the scores
  (every kept easy negative below -1, every kept easy positive above +1),
  which ``w`` alone reaches only by turning towards directions that shift
  all scores, at the expense of the ranking (page-blocks0, standardised,
  converged: 4.1 points below APSVM). A regularised offset in both stages
  (``fit_intercept=True``, the default) costs ``b^2 / 2`` and leaves the AP
  term alone.
* *A stalled second stage.* The shrinking state of the solver's dual
  coordinate ascent on the hinge block (:mod:`jaxrank._src.solvers.ssvm`) is
  carried from one iteration to the next while the planes move ``w``, and
  liblinear's pass tolerance is lowered 10x whenever a call meets it, down
  to below float32 resolution; a constraint shrunk while it was slack is then
  never revisited once the planes make it violated, and the fit stops at
  ``max_iter`` with a relative gap of 3e-4 to 4e-2 (7 of 13 former-default
  fits, 6 of 13 current-default ones), at many times APSVM's time. On w8a
  the stalled former-default fit was far from its optimum: run to
  convergence (solver changed as below, locally), the former defaults were
  0.6 points above APSVM there. More cached planes and cached-plane steps
  (:class:`AppxModel`: ``cache = 64``, ``inner_steps = 128``) cut the
  iterations of converging fits at large ``C`` but do not prevent the
  stall; that needs a change of the solver (a fresh shrinking state for each
  hinge-block call when the model has an oracle, and a floor on the pass
  tolerance).

``C_binary = C / n`` (the binary SVM's mean hinge at the same ``C``) is kept:
larger values give a first stage of larger norm than the second, more easy
samples whose constraints bind, and larger shortfalls on the 20 Newsgroups
tasks (``C n / (|P| |N|)``: up to 7.1 AP points; ``1``: up to 15.7), though
higher test AP on w8a at ``C = 100``. ``k = 0.25`` had a larger worst
shortfall (1.5 points) than ``k = 0.5``.
"""

from __future__ import annotations

import dataclasses
import functools
from numbers import Integral, Real
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from jaxrank._src.solvers import ssvm as solver
from jaxrank._src.estimators.base import (
    DEVICES_CONSTRAINT,
    StructuredSVM,
    check_positive_float32,
)
from jaxrank._src.solvers.run import choose_batch_size, report_progress
from jaxrank._src.models.binary import BinaryModel
from jaxrank._src.features import Design, Intercept
from jaxrank._src.oracles.ap import METHODS, ap_oracle
from jaxrank._src.models.base import Model
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
        cache, inner_steps: as :class:`jaxrank.models.Model`, larger defaults
            (64 and 128 instead of 32 and 32): the planes and the hinge block
            are coupled through the constraints, and more cached-plane steps
            per oracle call cut the iterations (e.g. 581 to 149 on a
            20 Newsgroups task at ``C = 1000``, ``bench/results/appx_defaults.md``).
    """

    kp: int = 1
    method: str = "select"
    cache: int = 64
    inner_steps: int = 128

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


class AppxResult(NamedTuple):
    """Both stages of AP-SVM-APPX (arrays with a leading ``[M]`` axis).

    Attributes:
        fit: :class:`jaxrank.solvers.FitResult` of the second stage.
        w0: ``[M, dim]`` first-stage binary SVMs (with the feature map of the
            model: ``[w0, b0]`` with an intercept).
        C_binary: ``[M]`` trade-offs of the first stage.
        binary_fit_steps: ``[M]`` iterations of the first stage.
        binary_converged: ``[M]`` bool, the first stage reached ``tol``.
        easy: ``[M, n]`` the kept easy samples (constraints).
        difficult: ``[M, n]`` the samples of the AP term.
        mu: ``[M]`` exact-penalty weights.
        violation: ``[M]`` ``sum_{E_kept} max(0, 1 - y s_i)`` at ``fit.w``.
    """

    fit: solver.FitResult
    w0: jax.Array
    C_binary: jax.Array
    binary_fit_steps: jax.Array
    binary_converged: jax.Array
    easy: jax.Array
    difficult: jax.Array
    mu: jax.Array
    violation: jax.Array


def auto_C_binary(C, positive, valid):
    """The default first-stage trade-off: ``C / n`` (``n`` training samples).

    Args:
        C: ``[]`` float trade-off of problem (10).
        positive, valid: ``[n]`` bool labels and training samples.

    Returns:
        ``[]`` float ``C_binary`` (module docstring, *Defaults*).
    """
    n = jnp.maximum(jnp.sum(valid), 1).astype(jnp.result_type(C))
    return C / n


def centre_design(data, rows):
    """The design centred on the mean of its rows ``rows``, and that mean.

    Args:
        data: :class:`jaxrank.models.Design` ``[n, d]`` (dense or sparse).
        rows: ``[n]`` bool, the rows the fits train on (the mean is theirs).

    Returns:
        ``(Design, m)``: the dense design with rows ``x_i - m`` (``0`` for
        rows outside ``rows``) and ``m [d]``. Weights ``[w, b]`` of the
        :class:`Intercept` map on it are :func:`uncentre`-d to the same
        scores on ``data``.
    """
    r = rows.astype(data.dtype)
    m = data.rmatvec(r) / jnp.maximum(jnp.sum(r), 1)
    X = data.materialized().X
    X = X.todense() if data.sparse else X
    return Design(jnp.where(rows[:, None], X - m, 0).astype(data.dtype)), m


def uncentre(v, m):
    """Weights ``[w, b]`` on centred rows ``x - m`` as ``[w, b - w^T m]`` on rows ``x``.

    Args:
        v: ``[..., d + 1]`` weights with the offset last.
        m: ``[d]`` centre of the rows.

    Returns:
        ``[..., d + 1]``: the same scores ``w^T (x - m) + b = w^T x + (b - w^T m)``.
    """
    return v.at[..., -1].add(-(v[..., :-1] @ m))


def _second_stage(model, data, w0, positive, valid, C, k):
    """Split of §3.3 and exact-penalty weight ``mu`` from the first stage ``w0``."""
    s0 = model.scores(w0, data)
    easy, difficult = appx_split(s0, positive, valid, k)
    # Slater point 2 w0 (with its offset): every kept constraint holds with
    # slack > 1 + 2 MARGIN_TOL > 1 there, so F(2 w0) bounds the sum of the
    # multipliers (module docstring, *Choice of mu*).
    ap2 = ap_oracle(2 * s0, positive, difficult, kp=model.kp, method=model.method)
    f_bar = 2 * jnp.dot(w0, w0) + C * jnp.maximum(ap2.hinge, 0)
    return easy, difficult, 1 + 2 * f_bar / C


@functools.partial(jax.jit, static_argnames=(
    "model", "max_iter", "binary_max_iter", "batch_size", "progress", "single"))
def fit_appx(data, problems, C, C_binary, k, tol, *, model, max_iter, binary_max_iter,
             batch_size, progress, single):
    """Both stages of ``M`` AP-SVM-APPX fits in one jitted call.

    Stage 1 (the binary SVMs at ``C_binary``, with ``model.features``: an
    intercept or none) and stage 2 (problem (10), ``model``) each run through
    :func:`jaxrank.solvers.fit` (``single``, ``M = 1``) or the work queue of
    :func:`jaxrank.solvers.fit_many` on one device; the split and ``mu`` are
    computed in between, ``vmap``-ed. With an intercept both stages fit
    ``data`` centred on the mean of the rows some fit trains on
    (:func:`centre_design`; module docstring, *Centring*), and the returned
    weights are :func:`uncentre`-d: scores on ``data`` as given.

    Args:
        data: :class:`jaxrank.models.Design` shared by the fits.
        problems: :class:`jaxrank.models.ItemProblem` with a leading ``[M]``.
        C: ``[M]`` trade-offs of problem (10).
        C_binary: ``[]`` float first-stage trade-off; NaN means
            :func:`auto_C_binary` of each fit.
        k, tol: ``[]`` floats.
        model: static :class:`AppxModel` (its ``features`` serve both stages).
        max_iter, binary_max_iter, batch_size, progress, single: static.

    Returns:
        :class:`AppxResult`.
    """
    dtype = data.dtype
    # With an offset, both stages see the rows centred on their mean (module
    # docstring, *Centring*); the weights are returned for the rows as given.
    centred = isinstance(model.features, Intercept)
    if centred:
        data, centre = centre_design(data, jnp.any(problems.where, axis=0))
    auto = jax.vmap(auto_C_binary)(C, problems.positive, problems.where)
    Cb = jnp.where(jnp.isnan(C_binary), auto, C_binary).astype(dtype)
    bmodel = BinaryModel(features=model.features)
    cb = report_progress if progress else None

    def run(m, probs, Cs, iters):
        if single:
            r = solver.fit(m, data, jax.tree_util.tree_map(lambda a: a[0], probs),
                           C=Cs[0], tol=tol, max_iter=iters)
            return jax.tree_util.tree_map(lambda a: a[None], r)
        return solver.fit_many(m, data, probs, Cs, tol=tol, max_iter=iters,
                               batch_size=batch_size, devices=None, callback=cb)

    res0 = run(bmodel, problems, Cb, binary_max_iter)
    split = functools.partial(_second_stage, model, data)
    easy, difficult, mu = jax.vmap(split, in_axes=(0, 0, 0, 0, None))(
        res0.w, problems.positive, problems.where, C, k)
    res = run(model, AppxProblem(problems.positive, difficult, easy, mu), C, max_iter)
    y = jnp.where(problems.positive, 1, -1).astype(dtype)
    S = jax.vmap(lambda w: model.scores(w, data))(res.w)
    violation = jnp.sum(jnp.where(easy, jnp.maximum(0, 1 - y * S), 0), axis=-1)
    w0 = res0.w
    if centred:
        res, w0 = res._replace(w=uncentre(res.w, centre)), uncentre(w0, centre)
    return AppxResult(res, w0, Cb, res0.num_steps, res0.converged, easy, difficult, mu,
                      violation)


class APSVMApprox(StructuredSVM):
    r"""AP-SVM-APPX: AP loss on difficult samples, easy samples constrained (§3.3).

    Two stages, both by the solver of :class:`APSVM` inside one jitted call
    (:func:`fit_appx`): a binary SVM ``s0 = w0^T x + b0`` (trade-off
    ``C_binary``) splits the training set into easy (margin ``y s0 > 1``,
    numerically ``> 1 + 1e-3``: the margin support vectors are difficult) and
    difficult samples; the top ``k`` fraction of the easy samples of each
    class (positives with the highest ``s0``, negatives with the lowest) stay
    easy, the others become difficult; then problem (10) is solved::

        min 1/2 ||w||^2 + 1/2 b^2 + C xi_AP(w; difficult)  s.t.  y_i (w^T x_i + b) >= 1 (kept easy)

    with the constraints as an exact ``l1`` penalty ``C mu sum_i max(0, 1 -
    y_i (w^T x_i + b))``, ``mu = 1 + 2 F(2 [w0, b0]) / C`` (``F`` the objective
    of (10); module :mod:`jaxrank._src.appx` docstring: ``2 [w0, b0]`` is a
    Slater point, so this ``mu`` makes the penalty exact), solved as
    per-sample hinge terms next to the 1-slack AP term (:class:`AppxModel`).
    At the solution every kept easy sample satisfies ``y (w^T x + b) >= 1 -
    2 gap / (C mu)`` (``>= 1 - tol / (1 - tol)`` when ``converged_``).
    ``k = 1`` keeps the whole easy set (the paper's (10) without the top-k
    rule); smaller ``k`` moves more samples into the AP term (closer to
    AP-SVM).

    The offset ``b`` (regularised, as :class:`BinarySVM`'s) only serves the
    constraints: AP is translation invariant, but ``y w^T x >= 1`` without
    ``b`` pins the absolute level of the scores. With it, both stages fit
    the training rows centred on their mean (the offset is regularised at
    the mean training score, not at the origin of the features), so the fit
    does not depend on a translation of ``X``; ``coef_`` and ``intercept_``
    are for ``X`` as given. A sparse ``X`` is centred into a dense copy
    inside the fit. ``fit_intercept=False`` drops the offset from both
    stages and fits ``X`` as given (the paper's (10) as written; then the
    fit depends on the origin of the features, which should be centred,
    e.g. standardised).

    **Defaults.** At :class:`APSVM`'s ``C`` (5-fold CV), ``APSVMApprox(C)``
    was within 0.77 AP points of ``APSVM(C)`` (test AP) on the 10 tasks of
    ``bench/table1.py`` and on two dense KEEL sets (satimage, page-blocks0);
    the former defaults (no offset) fell up to 17.9 points below
    (``bench/results/appx_defaults.md``; module docstring, *Defaults*).
    ``C_binary = C / n`` is kept: larger first-stage trade-offs gave larger
    shortfalls. APPX saves no training time in this package: AP
    loss-augmented inference (Alg. 2-3) is cheap, and :class:`APSVM` trained
    faster on 12 of the benchmark's 13 tasks (with w8a); 6 of the 13 second
    stages stopped unconverged at ``max_iter`` (a solver issue, module
    docstring).

    Args:
        C: trade-off ``> 0`` of problem (10) (same scale as :class:`APSVM`;
            default 100, default grid ``1``-``10^4``).
        k: fraction of the easy set kept as constraints, in ``(0, 1]``
            (the paper's k = 25 %, 50 %, 75 % are ``0.25, 0.5, 0.75``).
        C_binary: trade-off ``> 0`` of the first-stage binary SVM
            (``1/2||[w0, b0]||^2 + C_binary sum_i hinge_i``, the ``LinearSVC``
            scale); ``None`` (default) uses ``C / n_samples``.
        fit_intercept: a regularised offset ``b`` in both stages, on the
            training rows centred on their mean (default); ``False``: none,
            rows as given (the constraints read ``y w^T x >= 1``).
        inference: AP inference method (``"select"``, ``"search"``,
            ``"greedy"``; all exact).
        max_iter: maximum iterations of the second stage.
        binary_max_iter: maximum iterations of the first stage.
        tol: relative duality gap at which both stages stop.
        verbose: print a summary.
        devices: ``None``, an int or a list of ``jax.Device``: where the fit
            runs (data parallel for one task), as in :class:`StructuredSVM`.
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        coef_: ``[1, n_features]`` (``[T, n_features]`` for a 2-D ``y``).
        intercept_: ``[T]`` the offset ``b`` (``fit_intercept=False``: the
            midpoint of the classes' mean training scores, negated, as
            :class:`APSVM`).
        w0_: ``[T, n_features]`` first-stage weights; ``w0_intercept_``:
            ``[T]`` its offset ``b0`` (zeros with ``fit_intercept=False``).
        C_binary_: first-stage trade-off used, per task.
        binary_n_iter_, binary_converged_: iterations and convergence of the
            first stage, per task.
        n_easy_: number of kept easy samples (constraints) per task.
        mu_: exact-penalty weight per task.
        constraint_violation_: ``sum max(0, 1 - y (w^T x + b))`` over the kept
            easy samples at ``coef_, intercept_``.
        classes_, n_iter_, objective_, dual_objective_, converged_: as
            :class:`APSVM` (objective of problem (10), penalised; ``n_iter_``
            and ``converged_`` of the second stage).

    Raises:
        ValueError: in ``fit``, for ``C <= 0``, ``C_binary <= 0``, ``k``
            outside ``(0, 1]``, an unknown ``inference``, and the bad inputs
            of :meth:`APSVM.fit`.
        TypeError: ``fit_intercept`` not a bool, and as :meth:`APSVM.fit`.

    References:
        Mohapatra, Jawahar, Kumar, NIPS 2014, §3.3, problem (10), Table 1.
    """

    _parameter_constraints = {
        **StructuredSVM._parameter_constraints,
        "k": [Interval(Real, 0, 1, closed="right")],
        "C_binary": [None, Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "inference": [StrOptions(set(METHODS))],
        "binary_max_iter": [Interval(Integral, 1, None, closed="left")],
        **DEVICES_CONSTRAINT,
    }
    _default_Cs = (1.0, 10.0, 100.0, 1000.0, 10000.0)
    # jaxrank.sweep's progress: every fit runs two solver stages, each reporting its fits.
    _progress_stages = 2
    _learns_intercept = True
    _persist = ("w0_", "w0_intercept_", "C_binary_", "binary_n_iter_", "binary_converged_",
                "n_easy_", "mu_", "constraint_violation_")

    def __init__(self, C=100.0, *, k=0.5, C_binary=None, fit_intercept=True, inference="select",
                 max_iter=1000, binary_max_iter=2000, tol=1e-4, verbose=False, devices=None,
                 pos_label=None):
        self.C = C
        self.k = k
        self.C_binary = C_binary
        self.fit_intercept = fit_intercept
        self.inference = inference
        self.max_iter = max_iter
        self.binary_max_iter = binary_max_iter
        self.tol = tol
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    def _check_params(self):
        super()._check_params()
        if self.C_binary is not None:
            check_positive_float32(self.C_binary, "C_binary")

    def _model(self, static):
        return AppxModel(features=self._features(), kp=max(int(static["max_pos"]), 1),
                         method=self.inference)

    def _train(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None):
        # Both stages run as work queues on the default device, whatever
        # ``devices`` says: with the stages sharded over 2 XLA CPU devices in
        # one program (jax 0.10.2), some second-stage fits returned a dual
        # above their objective, while each stage sharded in a program of its
        # own, and both stages on one device, were correct.
        M = C.shape[0]
        cb = np.nan if self.C_binary is None else float(self.C_binary)
        batch_size = choose_batch_size(batch_size, M, model.dim(data), 1, model.cache)
        r = fit_appx(data, problems, C, jnp.float32(cb), jnp.float32(self.k),
                     jnp.float32(self.tol), model=model,
                     max_iter=int(self.max_iter), binary_max_iter=int(self.binary_max_iter),
                     batch_size=batch_size, progress=bool(progress), single=bool(single))
        extras = {"w0_": r.w0, "C_binary_": r.C_binary, "binary_n_iter_": r.binary_fit_steps,
                  "binary_converged_": r.binary_converged, "n_easy_": jnp.sum(r.easy, axis=-1),
                  "mu_": r.mu, "constraint_violation_": r.violation, "_appx": r}
        return r.fit, extras

    def _fitted_extras(self, extras, pick):
        # ``w0_`` is ``[T, dim]`` on the (possibly column-padded) design of
        # the fit: the real features are the first ``n_features_in_``
        # columns (set by ``_set_fitted`` before this hook), the offset (with
        # an intercept) the last; padding columns in between are dropped.
        W0 = np.asarray(extras["w0_"], np.float32)
        d = int(self.n_features_in_)
        self.w0_ = W0[:, :d].copy()
        if isinstance(self._features(), Intercept):
            self.w0_intercept_ = W0[:, -1].copy()
        else:
            self.w0_intercept_ = np.zeros(W0.shape[0], np.float32)
        self.C_binary_ = pick(extras["C_binary_"])
        self.binary_n_iter_ = pick(extras["binary_n_iter_"], int)
        self.binary_converged_ = pick(extras["binary_converged_"], bool)
        self.n_easy_ = pick(extras["n_easy_"], int)
        self.mu_ = pick(extras["mu_"])
        self.constraint_violation_ = pick(extras["constraint_violation_"])
