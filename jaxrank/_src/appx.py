r"""AP-SVM-APPX: the two-stage approximation of AP-SVM (§3.3, problem (10)).

Mohapatra, Jawahar, Kumar, "Efficient optimization for average precision
SVM", NIPS 2014, §3.3:

1. A binary SVM ``w0`` (0-1 loss surrogate, fast inference) is trained on all
   training samples. A sample is *easy* if ``y_i w0^T x_i >= 1`` and
   *difficult* otherwise. Numerically the test is ``y_i w0^T x_i >= 1 -
   MARGIN_TOL`` (``1e-3``): the margin support vectors of an SVM sit at
   exactly ``y_i w0^T x_i = 1``, so without a tolerance float rounding of
   ``w0`` (e.g. a batched vs a single fit) would decide which of them are easy;
   for the same reason, margins within ``MARGIN_TOL`` of 1 are tied in the
   top-``k`` cut of step 2 (ordered by index).
2. Only the top ``k`` fraction of the easy set is kept as easy, per class:
   the ``ceil(k |E+|)`` easy positives with the highest ``w0`` scores and the
   ``ceil(k |E-|)`` easy negatives with the lowest; the rest of the easy set
   is pushed into the difficult set ``D``.
3. Problem (10)::

       min_w 1/2 ||w||^2 + C xi_AP(w; D)   s.t.  y_i w^T x_i >= 1  (i in E_kept)

   where ``xi_AP(w; D) = max_R Delta(R*_D, R) - w^T (Psi(X_D, R*_D) - Psi(X_D, R))``
   is the 1-slack AP loss of eq. (3) restricted to the difficult samples.

**Constraints by an exact penalty.** The hard constraints are moved into the
objective as an ``l1`` exact penalty::

    F(w) = 1/2 ||w||^2 + C xi_AP(w; D) + C mu sum_{i in E_kept} max(0, 1 - y_i w^T x_i)

The AP term keeps its 1-slack form (loss-augmented inference
:func:`appx_oracle` = the AP most-violated ranking of ``D``); the penalty is a
per-sample hinge block (:class:`jaxrank.solvers.HingeBlock` with weight ``C
mu`` on the kept easy samples, :func:`appx_constraints`) with one dual
variable ``alpha_i`` in ``[0, C mu]`` per constraint, which
:func:`jaxrank.solvers.fit_ssvm` updates by a projected-gradient step with
line search at every iteration. (Folding the penalty into the 1-slack loss
instead, with one plane per iteration for the set of violated constraints,
gives the same problem but converges far more slowly: on 20 Newsgroups, 2000
iterations unconverged against 40 for the block at ``C = 30``, 174 at ``C = 300``.) The returned
``dual`` is a lower bound on the optimum of the penalised problem, so the
usual certificate ``objective - dual`` holds.

**Choice of mu.** The penalised problem has the same minimiser as (10) when
``C mu`` exceeds the largest Lagrange multiplier ``lambda_i`` of the
constraints (exact-penalty theorem, e.g. Nocedal & Wright, Thm 17.3). The
binary SVM gives a Slater point: ``w_bar = 2 w0`` satisfies every kept
constraint with slack ``y_i w_bar^T x_i - 1 >= s = 1 - 2 MARGIN_TOL``, so (weak
duality, and ``F* >= 0``) ``s sum_i lambda_i <= F(w_bar) = 2 ||w0||^2 + C
xi_AP(2 w0; D)``. We set::

    mu = 1 + 2 F(2 w0) / (s C)     (i.e. C mu > 2 F(2 w0) / s >= 2 sum_i lambda_i)

computed inside the jitted fit from one extra oracle call. Because ``C mu / 2``
is still an exact penalty, the returned iterate satisfies the certified bound
(``gap = objective - dual``)::

    sum_{i in E_kept} max(0, 1 - y_i w^T x_i) <= 2 gap / (C mu)

so every kept easy sample has ``y_i w^T x_i >= 1 - 2 gap / (C mu)``; with the
stopping rule ``gap <= tol * objective`` and ``objective <= F(2 w0) < C mu / 2``
this is ``>= 1 - tol`` (plus float32 rounding of the scores).

**No intercept.** AP-SVM has no intercept (it cancels in ``Psi``), so the
constraints ``y_i w^T x_i >= 1`` of (10) are intercept free too; for the
easy/difficult split to mean the same thing in both stages, ``w0`` is an
intercept-free binary SVM as well (``fit_intercept=False``). Append a constant
feature to ``X`` to get an (equally regularised) offset in both stages.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src import inference
from jaxrank._src.estimators import (
    DEFAULT_BATCH_SIZE,
    _LinearRanker,
    choose_batch_size,
    plane_cache,
    check_C,
    fit_linear,
    fit_linear_many,
    report_progress,
)
from jaxrank._src.solvers import FitResult, HingeBlock, fit_ssvm, fit_ssvm_many


class AppxResult(NamedTuple):
    """Result of :func:`fit_appx` (arrays; batched under ``vmap``).

    Attributes:
        fit: :class:`jaxrank.solvers.FitResult` of the second stage (problem
            (10) with the exact penalty); ``fit.w`` is ``[d]``.
        w0: ``[d]`` the first-stage binary SVM (no intercept).
        binary_fit_steps: ``[]`` int32 iterations of the first stage.
        easy: ``[n]`` bool, the kept easy samples ``E_kept`` (constraints).
        difficult: ``[n]`` bool, the samples of the AP term ``D``.
        mu: ``[]`` exact-penalty weight (see the module docstring).
        violation: ``[]`` ``sum_{E_kept} max(0, 1 - y w^T x)`` at ``fit.w``.
    """

    fit: FitResult
    w0: jax.Array
    binary_fit_steps: jax.Array
    easy: jax.Array
    difficult: jax.Array
    mu: jax.Array
    violation: jax.Array


# Margins within this of 1 count as easy (module docstring).
MARGIN_TOL = 1e-3


def check_k(k):
    """Raise unless ``k`` is a number in ``(0, 1]``."""
    if isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating)):
        raise TypeError(f"k must be a number in (0, 1]; got {type(k).__name__}.")
    if not (np.isfinite(k) and 0 < k <= 1):
        raise ValueError(f"k must be in (0, 1] (fraction of the easy set kept); got {k!r}.")


def appx_split(scores0, positive, valid, k):
    """Easy/difficult split of §3.3 from the binary-SVM scores.

    Easy: ``y w0^T x >= 1 - MARGIN_TOL`` (module docstring: margin support
    vectors sit at exactly 1).

    Args:
        scores0: ``[n]`` float scores ``w0^T x`` of the binary SVM.
        positive: ``[n]`` bool labels.
        valid: ``[n]`` bool, the training samples (others are in neither set).
        k: ``[]`` float in ``(0, 1]`` (may be traced): fraction of the easy set
            kept, per class; ``ceil(k |E+|)`` positives with the highest
            scores and ``ceil(k |E-|)`` negatives with the lowest (margins
            within ``MARGIN_TOL`` of 1 count as tied; ties broken by index).

    Returns:
        ``(easy [n] bool, difficult [n] bool)``: disjoint, union = ``valid``.
    """
    dtype = scores0.dtype
    y = jnp.where(positive, 1, -1).astype(dtype)
    margin = y * scores0
    easy_all = valid & (margin >= 1 - MARGIN_TOL)
    kept = jnp.zeros_like(valid)
    for cls in (positive, ~positive):
        e = easy_all & cls
        m = jnp.ceil(jnp.asarray(k, dtype) * jnp.sum(e).astype(dtype) - 1e-6).astype(jnp.int32)
        # Margins within MARGIN_TOL of 1 (the margin SVs) are tied, in index order.
        on_margin = jnp.abs(margin - 1) <= MARGIN_TOL
        key = jnp.where(e, jnp.where(on_margin, 1, margin), -jnp.inf)
        order = jnp.argsort(-key, stable=True)
        rank = jnp.zeros(key.shape, jnp.int32).at[order].set(jnp.arange(key.shape[0]))
        kept = kept | (e & (rank < m))
    return kept, valid & ~kept


def appx_oracle(positive, difficult, *, kp, method="select"):
    """Loss-augmented inference of problem (10)'s AP term: ``scores -> MostViolated``.

    The AP most-violated ranking (eq. (4), Alg. 1-3) of the difficult samples
    only; the easy samples get coefficient 0 (their constraints are the
    hinge block of :func:`appx_constraints`).

    Args:
        positive: ``[n]`` bool labels.
        difficult: ``[n]`` bool samples of the AP term ``D``.
        kp: static bound on the positives of ``difficult``.
        method: static AP inference method.

    Returns:
        A function ``scores [n] -> MostViolated``.
    """

    def oracle(s):
        return inference.ap_most_violated_masked(
            s, positive & difficult, ~positive & difficult, kp=kp, method=method
        )

    return oracle


def appx_constraints(positive, easy, C, mu):
    """The constraints of problem (10) as an exact-penalty :class:`HingeBlock`.

    Args:
        positive: ``[n]`` bool labels.
        easy: ``[n]`` bool kept easy samples (constraints ``y_i w^T x_i >= 1``).
        C: ``[]`` float trade-off of problem (10).
        mu: ``[]`` float exact-penalty weight (module docstring).

    Returns:
        ``HingeBlock(weights [n] = C mu on the easy samples, else 0; labels
        [n] = +1 / -1)``, dtype of ``mu``.
    """
    mu = jnp.asarray(mu)
    y = jnp.where(positive, 1, -1).astype(mu.dtype)
    return HingeBlock(jnp.where(easy, C * mu, 0).astype(mu.dtype), y)


def _binary_C(C, C_binary, valid, dtype):
    """First-stage trade-off: ``C_binary``, or ``C / n_valid`` where it is NaN."""
    n_valid = jnp.maximum(jnp.sum(valid, axis=-1), 1).astype(dtype)
    C_binary = jnp.asarray(C_binary, dtype)
    return jnp.where(jnp.isnan(C_binary), jnp.asarray(C, dtype) / n_valid, C_binary)


def _second_stage(X, w0, positive, valid, C, k, *, kp, method):
    """Split of §3.3 and exact-penalty weight ``mu`` from the first stage ``w0``."""
    s0 = X @ w0
    easy, difficult = appx_split(s0, positive, valid, k)
    # Slater point 2 w0: F(2 w0) bounds the sum of the Lagrange multipliers.
    ap2 = inference.ap_most_violated_masked(
        2 * s0, positive & difficult, ~positive & difficult, kp=kp, method=method
    )
    f_bar = 2 * jnp.dot(w0, w0) + C * jnp.maximum(ap2.hinge, 0)
    return easy, difficult, 1 + 2 * f_bar / ((1 - 2 * MARGIN_TOL) * C)


def _violation(X, w, positive, easy):
    y = jnp.where(positive, 1, -1).astype(X.dtype)
    return jnp.sum(jnp.where(easy, jnp.maximum(0, 1 - y * (X @ w)), 0))


@functools.partial(
    jax.jit,
    static_argnames=("kp", "method", "max_iter", "binary_max_iter", "cache", "inner_steps"),
)
def fit_appx(
    X,
    positive,
    valid,
    C,
    C_binary,
    k,
    tol,
    *,
    kp,
    method="select",
    max_iter=1000,
    binary_max_iter=2000,
    cache=None,
    inner_steps=None,
):
    """One jitted AP-SVM-APPX fit (both stages); ``vmap``-able over every array.

    Args:
        X: ``[n, d]`` float array or BCOO matrix.
        positive: ``[n]`` bool labels.
        valid: ``[n]`` bool training samples (e.g. a CV training fold).
        C: ``[]`` float ``> 0``, trade-off of problem (10).
        C_binary: ``[]`` float, trade-off of the first-stage binary SVM
            (``1/2||w0||^2 + C_binary sum_i hinge_i``); ``NaN`` means
            ``C / n_valid`` (the hinge averaged over samples, the scale of the
            AP loss in ``[0, 1]``).
        k: ``[]`` float in ``(0, 1]``, fraction of the easy set kept.
        tol: ``[]`` relative duality gap for both stages.
        kp: static bound on the number of valid positives.
        method: static AP inference method.
        max_iter: static bound on the iterations of the second stage.
        binary_max_iter: static bound on the iterations of the first stage.
        cache, inner_steps: static plane-cache settings of :func:`fit_ssvm`
            for the second stage (``None``: ``PLANE_CACHE["appx"]``, 32 and
            32); the first stage uses the binary SVM's defaults.

    Returns:
        :class:`AppxResult`.
    """
    dtype = X.dtype
    C = jnp.asarray(C, dtype)
    res0 = fit_linear(
        X, positive, valid, _binary_C(C, C_binary, valid, dtype), tol, loss="zero_one",
        kp=1, max_iter=binary_max_iter, fit_intercept=False,
    )
    cache, inner_steps = plane_cache("appx", cache, inner_steps)
    easy, difficult, mu = _second_stage(X, res0.w, positive, valid, C, k, kp=kp,
                                        method=method)
    oracle = appx_oracle(positive, difficult, kp=kp, method=method)
    res = fit_ssvm(oracle, X, C=C, tol=tol, max_iter=max_iter, fit_intercept=False,
                   cache=cache, inner_steps=inner_steps,
                   hinge=appx_constraints(positive, easy, C, mu))
    violation = _violation(X, res.w, positive, easy)
    return AppxResult(res, res0.w, res0.num_steps, easy, difficult, mu, violation)


@functools.partial(
    jax.jit,
    static_argnames=("kp", "method", "max_iter", "binary_max_iter", "cache", "inner_steps",
                     "batch_size", "devices", "progress"),
)
def fit_appx_many(
    X, positive, valid, C, C_binary, k, tol, *, kp, method="select", max_iter=1000,
    binary_max_iter=2000, cache=None, inner_steps=None, batch_size=DEFAULT_BATCH_SIZE,
    devices=None,
    progress=False,
):
    """``M`` AP-SVM-APPX fits in one jitted call: each stage is one batch of work queues.

    Stage 1 (the binary SVMs) runs all ``M`` fits through
    :func:`jaxrank.solvers.fit_ssvm_many`, the split and ``mu`` are computed
    ``vmap``-ed, then stage 2 runs through the queues again. Each fit equals
    :func:`fit_appx` alone (up to float rounding of batched products).

    Args:
        X: ``[n, d]`` float array or BCOO matrix, shared by all fits.
        positive: ``[M, n]`` bool labels.
        valid: ``[M, n]`` bool training samples.
        C: ``[M]`` float trade-offs of problem (10).
        C_binary, k, tol: ``[]`` as in :func:`fit_appx` (shared).
        kp, method, max_iter, binary_max_iter, cache, inner_steps: static, as
            in :func:`fit_appx`.
        batch_size, progress: static, as in
            :func:`jaxrank.solvers.fit_linear_many` (progress counts each
            stage of a fit as one fit).
        devices: static, accepted for a uniform signature but not used: both
            stages run on the default device (see the comment in the code:
            sharding them in one program gave invalid dual bounds on XLA CPU).

    Returns:
        :class:`AppxResult` with a leading ``[M]`` axis.
    """
    # Both stages run as one work queue on the default device, whatever
    # ``devices`` says: with the stages sharded over 2 XLA CPU devices in one
    # program (jax 0.10.2), some second-stage fits returned a dual above their
    # objective (20 Newsgroups, 20 fits, 8 slots), while each stage sharded in
    # a program of its own, and both stages on one device, were correct.
    del devices
    dtype = X.dtype
    C = jnp.asarray(C, dtype)
    res0 = fit_linear_many(
        X, positive, valid, _binary_C(C, C_binary, valid, dtype), tol, loss="zero_one",
        kp=1, max_iter=binary_max_iter, fit_intercept=False, batch_size=batch_size,
        devices=None, progress=progress,
    )
    cache, inner_steps = plane_cache("appx", cache, inner_steps)
    split = functools.partial(_second_stage, kp=kp, method=method)
    easy, difficult, mu = jax.vmap(split, in_axes=(None, 0, 0, 0, 0, None))(
        X, res0.w, positive, valid, C, k
    )

    def oracle(prob, s):
        return appx_oracle(prob[0], prob[2], kp=kp, method=method)(s)

    res = fit_ssvm_many(
        oracle, X, (positive, easy, difficult, C * mu), C, tol=tol, max_iter=max_iter,
        batch_size=batch_size, devices=None, cache=cache, inner_steps=inner_steps,
        callback=report_progress if progress else None,
        hinge=lambda prob: appx_constraints(prob[0], prob[1], 1, prob[3]),
    )
    violation = jax.vmap(_violation, in_axes=(None, 0, 0, 0))(X, res.w, positive, easy)
    return AppxResult(res, res0.w, res0.num_steps, easy, difficult, mu, violation)


class APSVMApprox(_LinearRanker):
    r"""AP-SVM-APPX: AP loss on difficult samples, easy samples constrained (§3.3).

    Two stages, both by the solver of :class:`APSVM` inside one jitted call
    (:func:`fit_appx`): an intercept-free binary SVM ``w0`` splits the training
    set into easy (``y w0^T x >= 1``) and difficult samples; the top ``k``
    fraction of the easy samples of each class (positives with the highest
    ``w0`` scores, negatives with the lowest) stay easy, the others become
    difficult (margins within ``MARGIN_TOL = 1e-3`` of 1, i.e. the margin
    support vectors of ``w0``, count as easy); then problem (10) is solved::

        min_w 1/2 ||w||^2 + C xi_AP(w; difficult)  s.t.  y_i w^T x_i >= 1 (kept easy)

    with the constraints as an exact ``l1`` penalty ``C mu sum_i max(0, 1 -
    y_i w^T x_i)``, ``mu = 1 + 2 F(2 w0) / ((1 - 2e-3) C)`` (module
    :mod:`jaxrank._src.appx` docstring: why this ``mu`` makes the penalty
    exact), solved as a per-sample hinge block
    (:class:`jaxrank.solvers.HingeBlock`) next to the 1-slack AP term. At the
    solution every kept easy sample satisfies ``y w^T x >= 1 - 2 gap / (C
    mu)`` (``>= 1 - tol`` when ``converged_``).
    ``k = 1`` keeps the whole easy set (the paper's (10) without the top-k
    rule); smaller ``k`` moves more samples into the AP term (closer to
    AP-SVM, slower).

    No intercept in either stage (AP is translation invariant, and the
    constraints of (10) are written without one); add a constant feature to
    ``X`` for an offset.

    Args:
        C: trade-off ``> 0`` of problem (10) (same scale as :class:`APSVM`).
        k: fraction of the easy set kept as constraints, in ``(0, 1]``
            (the paper's k = 25 %, 50 %, 75 % are ``0.25, 0.5, 0.75``).
        C_binary: trade-off ``> 0`` of the first-stage binary SVM
            (``1/2||w0||^2 + C_binary sum_i hinge_i``, the ``LinearSVC`` scale);
            ``None`` (default) uses ``C / n_samples``.
        inference: AP inference method (``"select"``, ``"search"``,
            ``"greedy"``).
        max_iter: maximum iterations of the second stage.
        binary_max_iter: maximum iterations of the first stage.
        tol: relative duality gap at which both stages stop.
        verbose: print a summary.

    Attributes:
        coef_: ``[1, n_features]`` (``[T, n_features]`` for a 2-D ``y``).
        intercept_: zeros.
        w0_: the first-stage weights, same shape as ``coef_``.
        n_easy_: number of kept easy samples (constraints) per task.
        mu_: exact-penalty weight per task.
        constraint_violation_: ``sum max(0, 1 - y w^T x)`` over the kept easy
            samples at ``coef_``.
        classes_, n_iter_, objective_, dual_objective_, converged_: as
            :class:`APSVM` (objective of problem (10), penalised).

    Raises:
        ValueError: in ``fit``, for ``C <= 0``, ``C_binary <= 0``, ``k``
            outside ``(0, 1]``, an unknown ``inference``, and the bad inputs
            of :meth:`APSVM.fit`.

    References:
        Mohapatra, Jawahar, Kumar, NIPS 2014, §3.3, problem (10), Table 1.
    """

    _loss = "ap"

    def __init__(
        self,
        C=1.0,
        *,
        k=0.5,
        C_binary=None,
        inference="select",
        max_iter=1000,
        binary_max_iter=2000,
        tol=1e-4,
        verbose=False,
    ):
        self.C = C
        self.k = k
        self.C_binary = C_binary
        self.inference = inference
        self.max_iter = max_iter
        self.binary_max_iter = binary_max_iter
        self.tol = tol
        self.verbose = verbose

    def _validate_params(self):
        super()._validate_params()
        check_k(self.k)
        if self.C_binary is not None:
            check_C(self.C_binary, "C_binary")
        if not isinstance(self.binary_max_iter, (int, np.integer)) or self.binary_max_iter < 1:
            raise ValueError(
                f"binary_max_iter must be an int >= 1; got {self.binary_max_iter!r}."
            )

    def _fit_options(self):
        if self.inference not in inference.METHODS:
            raise ValueError(
                f"inference must be one of {inference.METHODS}; got {self.inference!r}."
            )
        return {"method": self.inference, "fit_intercept": False}

    def _fit_batch(self, Xj, positive, opts):
        kp = max(int(positive.sum(axis=1).max()), 1)
        T = positive.shape[0]
        cb = np.nan if self.C_binary is None else float(self.C_binary)
        r = fit_appx_many(
            Xj, jnp.asarray(positive), jnp.ones(positive.shape, bool),
            jnp.full((T,), float(self.C), jnp.float32), jnp.float32(cb),
            jnp.float32(self.k), jnp.float32(self.tol), kp=kp, method=opts["method"],
            max_iter=int(self.max_iter), binary_max_iter=int(self.binary_max_iter),
            batch_size=choose_batch_size(None, T, Xj.shape[1], 1, plane_cache("zero_one")[0]),
        )
        self._appx = r
        return r.fit

    def _set_fitted(self, res, classes, multi, n_features, fit_intercept):
        super()._set_fitted(res, classes, multi, n_features, fit_intercept)
        r = self.__dict__.pop("_appx")
        pick = (lambda a: np.asarray(a)) if multi else (lambda a: np.asarray(a)[0].item())
        self.w0_ = np.asarray(r.w0)
        self.n_easy_ = pick(np.asarray(r.easy).sum(axis=1))
        self.mu_ = pick(r.mu)
        self.constraint_violation_ = pick(r.violation)
        return self
