r"""AP-SVM-APPX (Mohapatra et al., NIPS 2014, §3.3) as a scikit-learn estimator."""

from __future__ import annotations

from numbers import Integral, Real

import jax.numpy as jnp
import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from jaxrank._src.estimators.base import StructuredSVM
from jaxrank._src.estimators.checks import DEVICES_CONSTRAINT, check_positive_float32
from jaxrank._src.features import Intercept
from jaxrank._src.models.appx import AppxModel
from jaxrank._src.oracles.ap import METHODS
from jaxrank._src.solvers.appx import fit_appx


class APSVMApprox(StructuredSVM):
    r"""AP-SVM-APPX: AP loss on difficult samples, easy samples constrained (§3.3).

    Two stages, both by the solver of :class:`APSVM`, each one jitted call of
    the solver's dispatch (:func:`fit_appx`): a binary SVM ``s0 = w0^T x + b0`` (trade-off
    ``C_binary``) splits the training set into easy (margin ``y s0 > 1``,
    numerically ``> 1 + 1e-3``: the margin support vectors are difficult) and
    difficult samples; the top ``k`` fraction of the easy samples of each
    class (positives with the highest ``s0``, negatives with the lowest) stay
    easy, the others become difficult; then problem (10) is solved::

        min 1/2 ||w||^2 + 1/2 b^2 + C xi_AP(w; difficult)  s.t.  y_i (w^T x_i + b) >= 1 (kept easy)

    with the constraints as an exact ``l1`` penalty ``C mu sum_i max(0, 1 -
    y_i (w^T x_i + b))``, ``mu = 1 + 2 F(2 [w0, b0]) / C`` (``F`` the objective
    of (10); module :mod:`jaxrank._src.models.appx` docstring: ``2 [w0, b0]`` is a
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

    **Defaults.** The defaults (a regularised offset, ``C_binary = C / n``,
    ``k = 0.5``) were chosen against :class:`APSVM` at its cross-validated
    ``C`` (test AP); without the offset APPX falls well below APSVM, and
    larger first-stage trade-offs give larger shortfalls (module docstring
    of :mod:`jaxrank._src.models.appx`, *Defaults*). APPX saves no training
    time in this package: AP loss-augmented inference (Alg. 2-3) is cheap,
    so :class:`APSVM` is usually the faster fit. The figures are in
    ``docs/design_notes.md`` (``jaxrank/_src/estimators/appx.py``) and
    ``bench/results/appx_defaults.md``.

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
    _persist = {
        **StructuredSVM._persist,
        "w0_": ("weights", "Td", None),
        "w0_intercept_": ("weights", "T", None),
        "C_binary_": ("value", "T?", "> 0"),
        "binary_n_iter_": ("count", "T?", None),
        "binary_converged_": ("flag", "T?", None),
        "n_easy_": ("count", "T?", None),
        "mu_": ("value", "T?", None),
        "constraint_violation_": ("value", "T?", None),
    }

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
        # Two stages, each one call of the solver's dispatch (a program of its
        # own: both stages sharded over several devices in one program gave a
        # dual above the objective for some fits; docs/design_notes.md).
        cb = np.nan if self.C_binary is None else float(self.C_binary)
        binary = self._solver(max_iter=int(self.binary_max_iter))

        def solve(m, d, probs, Cs, stage):
            return self._solve(m, d, probs, Cs, single=single, batch_size=batch_size,
                               devices=devices, progress=progress,
                               solver=binary if stage == 1 else None)

        r = fit_appx(data, problems, C, jnp.float32(cb), jnp.float32(self.k), model=model,
                     solve=solve)
        extras = {"w0_": r.w0, "C_binary_": r.C_binary, "binary_n_iter_": r.binary_fit_steps,
                  "binary_converged_": r.binary_converged, "n_easy_": jnp.sum(r.easy, axis=-1),
                  "mu_": r.mu, "constraint_violation_": r.violation}
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
