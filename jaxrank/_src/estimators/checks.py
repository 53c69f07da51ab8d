"""Input checks and fit diagnostics of the estimators: float32 ranges of C and
of the features, and the warnings of an unconverged or non-ranking fit."""

from __future__ import annotations

import math
import os
import sys
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval

_F32_MAX = float(np.finfo(np.float32).max)


_F32_TINY = float(np.finfo(np.float32).tiny)


def check_positive_float32(value, name):
    """Raise unless ``value`` is a real number that is finite and ``> 0`` in float32.

    Checked after the cast to float32 (the dtype of every fit): ``1e39``
    overflows and ``1e-50`` underflows to 0 there.

    Raises:
        TypeError: not a real number.
        ValueError: not finite and positive in float32.
    """
    if isinstance(value, bool) or not isinstance(value, (Real, np.number)) or isinstance(
            value, complex) or np.iscomplexobj(value):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}.")
    v = float(value)
    with np.errstate(over="ignore", under="ignore"):
        v32 = np.float32(v)
    if not (np.isfinite(v32) and v32 >= _F32_TINY):
        raise ValueError(
            f"{name} must be a finite number > 0 representable in float32 (between "
            f"{_F32_TINY:.3g} and {_F32_MAX:.3g}); got {value!r}."
        )
    return v


# The ``devices`` parameter of the estimators that shard a fit over devices.
DEVICES_CONSTRAINT = {"devices": [None, Interval(Integral, 1, None, closed="left"), list, tuple]}


# Feature scales the float32 solver can work with (see :func:`check_feature_scale`).
_SCALE_MAX = math.sqrt(_F32_MAX / 1024)  # about 5.8e17: squares and C-weighted planes fit


_SCALE_MIN = 2.0**-50  # about 8.9e-16: squares (1e-30) stay normal float32 numbers


_HARD_MARGIN = 1e6  # C * max ||x||^2 above this: many iterations (close to hard margin)


def check_feature_scale(R, C=None, name="X"):
    """Raise unless rows of norm up to ``R`` (and ``C``) fit the float32 solver.

    The solver computes squared row norms (``R^2``), ``C``-weighted planes
    ``C J^T coef`` (norm up to about ``C R``) and their inner products in
    float32: beyond about ``5.8e17`` these overflow (the fit would return
    ``w = 0`` or NaN); below about ``8.9e-16`` the squares lose their
    precision (and vanish below ``1e-19``). Rescaling ``X`` by a constant
    ``1/s`` and ``C`` by ``s^2`` is the same problem (weights ``s w``), so a
    rescaled ``X`` with a matching ``C`` fits; see :func:`warn_unconverged`
    for the scale-free conditioning ``C R^2``.

    Args:
        R: float, ``max_i ||x_i||`` (:func:`max_row_norm`).
        C: optional float, the trade-off (``C R`` is checked too).
        name: argument name for the message.

    Raises:
        ValueError: ``R`` or ``C R`` outside ``[8.9e-16, 5.8e17]`` (the
            message names the range and the fix).
    """
    if R == 0:
        return
    too_big = R > _SCALE_MAX or (C is not None and C * R > _SCALE_MAX)
    if too_big or R < _SCALE_MIN:
        c = "" if C is None else f" and C = {C:.3g}"
        cr = "" if C is None else f" and C * R <= {_SCALE_MAX:.1e}"
        raise ValueError(
            f"{name} has rows of norm up to R = {R:.3g}{c}, too {'large' if too_big else 'small'}"
            f": jaxrank fits in float32, which "
            f"needs {_SCALE_MIN:.1e} <= R <= {_SCALE_MAX:.1e}{cr} (squared norms and "
            "C-weighted sums of rows must neither overflow nor lose their precision). "
            f"Rescale {name} (e.g. sklearn.preprocessing.StandardScaler, or divide {name} by "
            "a constant s and multiply C by s**2: the same problem, with weights s times "
            "larger).")


def _scale_hint(R, C):
    """Words about ``kappa = C R^2``, the scale-free conditioning of a fit."""
    kappa = C * R * R
    hint = f" C * max_i ||x_i||^2 = {kappa:.2g}"
    if kappa > _HARD_MARGIN:
        return hint + (
            " is large: the problem is close to a hard-margin SVM, which needs many iterations "
            "whatever the units of X (rescaling X and C together does not change it): "
            "standardise X or use a smaller C.")
    if kappa < 1 / _HARD_MARGIN:
        return hint + (
            " is tiny: the regulariser dominates and the weights are nearly 0: standardise X "
            "or use a larger C.")
    return hint + "."


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def user_stacklevel():
    """``stacklevel`` for a ``warnings.warn`` made by the caller of this function
    that points at the first frame outside the ``jaxrank`` package (the user's
    call, however many estimator layers lie between)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def warn_tied_scores(est, S, where, R=None, C=None, *, stacklevel=None):
    """``UserWarning`` for tasks whose training scores are all equal (the model does not rank).

    Args:
        est: the estimator (its class name is in the message).
        S: ``[n, T]`` training scores as ``decision_function`` computes them
            (float32, intercept included: a tiny ``X w`` added to an
            intercept rounds to the intercept).
        where: ``[T, n]`` bool, each task's training samples.
        R, C: optional largest row norm of ``X`` and trade-off: the message
            then says whether ``X`` is outside the float32 range of the
            solver (:func:`check_feature_scale`) or ``C R^2`` tiny (the
            regulariser dominates).
        stacklevel: as in :func:`warnings.warn`; ``None``: the user's call
            (:func:`user_stacklevel`).
    """
    S = np.asarray(S)
    tied = [t for t in range(S.shape[1])
            if np.any(where[t]) and np.ptp(S[where[t], t]) == 0]
    if not tied:
        return
    why = ("The features may not separate the classes (e.g. constant features), or be "
           "too small for this C.")
    if R is not None:
        try:
            check_feature_scale(R, C)
            if C is not None and C * R * R < 1 / _HARD_MARGIN:
                why = f"Rows of X have norm up to {R:.3g}:{_scale_hint(R, C)}"
        except ValueError as e:
            why = str(e)
    warnings.warn(
        f"{type(est).__name__}: every training sample gets the same score for "
        f"{len(tied)} of {S.shape[1]} task(s) (e.g. coef_ = 0): the model does not rank. "
        f"{why}",
        UserWarning,
        stacklevel=user_stacklevel() if stacklevel is None else stacklevel,
    )


def warn_unconverged(est, res, where=""):
    """Emit ``ConvergenceWarning`` for fits of ``res`` that stopped unconverged.

    The message says what was measured (the worst relative duality gap, the
    iterations, ``C * max_i ||x_i||^2`` when ``est`` records ``_fit_scale =
    (R, C)``, set by :meth:`StructuredSVM.fit`) and the one change most
    likely to help, chosen from those measurements:

    * a non-finite objective (float32 overflow): rescale ``X``;
    * ``C R^2`` above ``1e6`` (close to a hard-margin SVM, whose iterations
      grow with ``C R^2`` whatever the units of ``X``): a smaller ``C``;
    * ``C R^2`` below ``1e-6`` (the weights are nearly 0): a larger ``C`` or
      standardised ``X``;
    * a gap within 10x of ``tol``: ``max_iter`` doubled;
    * otherwise (a gap far from ``tol`` at moderate ``C R^2``, the sign of
      badly scaled features): standardised features, or ``max_iter`` raised.
    """
    conv = np.atleast_1d(np.asarray(res.converged))
    if conv.all():
        return
    obj = np.atleast_1d(np.asarray(res.objective, np.float64))
    dual = np.atleast_1d(np.asarray(res.dual, np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        gap = (obj - dual) / np.maximum(np.abs(obj), 1e-30)
    bad = np.flatnonzero(~conv)
    finite = np.isfinite(gap[bad])
    worst = bad[np.argmax(np.where(finite, gap[bad], np.inf))]
    steps = np.atleast_1d(np.asarray(getattr(res, "num_steps", est.max_iter)))
    n_steps = int(steps[worst]) if steps.size > worst else int(steps[0])
    scale = getattr(est, "_fit_scale", None)
    kappa = None if scale is None else float(scale[1]) * float(scale[0]) ** 2
    measured = (f"worst relative duality gap {gap[worst]:.2e} after {n_steps} iterations "
                f"(tol={est.tol:g}, max_iter={est.max_iter}")
    measured += ")" if kappa is None else f", C * max_i ||x_i||^2 = {kappa:.2g})"
    if not np.isfinite(gap[worst]):
        advice = ("The objective is not finite (a float32 overflow): rescale X, e.g. with "
                  "sklearn.preprocessing.StandardScaler.")
    elif kappa is not None and kappa > _HARD_MARGIN:
        advice = ("C * max_i ||x_i||^2 is large (close to a hard-margin SVM, slow whatever "
                  "the units of X): use a smaller C.")
    elif kappa is not None and kappa < 1 / _HARD_MARGIN:
        advice = ("C * max_i ||x_i||^2 is tiny (the weights are nearly 0): use a larger C or "
                  "standardise X.")
    elif gap[worst] <= 10 * est.tol:
        advice = f"The gap is close to tol: max_iter={2 * int(est.max_iter)} should reach it."
    else:
        advice = ("Standardise the features (e.g. sklearn.preprocessing.StandardScaler) if "
                  f"their scales differ; else raise max_iter (now {est.max_iter}).")
    warnings.warn(
        f"{type(est).__name__}{where}: {bad.size} of {conv.size} fit(s) stopped at max_iter "
        f"before the relative duality gap reached tol: {measured}; the objective may be up "
        f"to that fraction above the optimum. {advice}",
        ConvergenceWarning,
        stacklevel=user_stacklevel(),
    )
