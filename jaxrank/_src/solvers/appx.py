r"""AP-SVM-APPX's two stages (Mohapatra et al., NIPS 2014, §3.3): binary SVM, then problem (10)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrank._src.features import Intercept
from jaxrank._src.layout import Design
from jaxrank._src.models.appx import AppxProblem, appx_split
from jaxrank._src.models.binary import BinaryModel
from jaxrank._src.oracles.ap import ap_oracle
from jaxrank._src.solvers import ssvm


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

    fit: ssvm.FitResult
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


@functools.partial(jax.jit, static_argnames=("centred",))
def _first_stage_setup(data, problems, C, C_binary, *, centred):
    """``(data, centre, C_binary [M])`` of the first stage: the design centred on
    the rows some fit trains on (``centre = None`` when not ``centred``) and
    each fit's first-stage trade-off (NaN ``C_binary``: :func:`auto_C_binary`)."""
    centre = None
    if centred:
        data, centre = centre_design(data, jnp.any(problems.where, axis=0))
    auto = jax.vmap(auto_C_binary)(C, problems.positive, problems.where)
    return data, centre, jnp.where(jnp.isnan(C_binary), auto, C_binary).astype(data.dtype)


@functools.partial(jax.jit, static_argnames=("model",))
def _second_stage_problems(data, w0, problems, C, k, *, model):
    """The :class:`AppxProblem` of every fit from its first stage ``w0 [M, dim]``."""
    split = functools.partial(_second_stage, model, data)
    easy, difficult, mu = jax.vmap(split, in_axes=(0, 0, 0, 0, None))(
        w0, problems.positive, problems.where, C, k)
    return AppxProblem(problems.positive, difficult, easy, mu)


@functools.partial(jax.jit, static_argnames=("model",))
def _appx_result(data, centre, res0, res, problems, Cb, *, model):
    y = jnp.where(problems.positive, 1, -1).astype(data.dtype)
    S = jax.vmap(lambda w: model.scores(w, data))(res.w)
    violation = jnp.sum(jnp.where(problems.easy, jnp.maximum(0, 1 - y * S), 0), axis=-1)
    w0 = res0.w
    if centre is not None:
        res, w0 = res._replace(w=uncentre(res.w, centre)), uncentre(w0, centre)
    return AppxResult(res, w0, Cb, res0.num_steps, res0.converged, problems.easy,
                      problems.difficult, problems.mu, violation)


def fit_appx(data, problems, C, C_binary, k, *, model, solve):
    """Both stages of ``M`` AP-SVM-APPX fits, each through the solver's one dispatch.

    Stage 1 (the binary SVMs at ``C_binary``, with ``model.features``: an
    intercept or none) and stage 2 (problem (10), ``model``) are each one
    call of ``solve`` (:func:`jaxrank._src.solvers.run.solve` with the
    estimator's settings: a single fit or the work queue); the split and
    ``mu`` are computed in between, ``vmap``-ed. With an intercept both
    stages fit ``data`` centred on the mean of the rows some fit trains on
    (:func:`centre_design`; module docstring, *Centring*), and the returned
    weights are :func:`uncentre`-d: scores on ``data`` as given.

    Args:
        data: :class:`jaxrank.models.Design` shared by the fits.
        problems: :class:`jaxrank.models.ItemProblem` with a leading ``[M]``.
        C: ``[M]`` trade-offs of problem (10).
        C_binary: ``[]`` float first-stage trade-off; NaN means
            :func:`auto_C_binary` of each fit.
        k: ``[]`` float.
        model: static :class:`AppxModel` (its ``features`` serve both stages).
        solve: ``(model, data, problems, C, stage) -> FitResult [M]``, the
            fits of one stage (``stage`` 1 or 2).

    Returns:
        :class:`AppxResult`.
    """
    centred = isinstance(model.features, Intercept)
    data, centre, Cb = _first_stage_setup(data, problems, C, C_binary, centred=centred)
    res0 = solve(BinaryModel(features=model.features), data, problems, Cb, 1)
    second = _second_stage_problems(data, res0.w, problems, C, k, model=model)
    res = solve(model, data, second, C, 2)
    return _appx_result(data, centre, res0, res, second, Cb, model=model)
