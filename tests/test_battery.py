"""A rax-style battery: every public ranking function and estimator on the same hard inputs.

Functions (``FUNCS``): ``jaxrank.metrics.average_precision`` / ``roc_auc``, the
public inference wrappers (``ap_most_violated``, ``zero_one_most_violated``,
``auc_most_violated``), the losses (``ap_hinge_loss``, ``hinge_loss``,
``kernel_auc`` (Gaussian and sigmoid-like kernels), ``kernel_auc_loss``,
``smoothed_step``) and ``structured_hinge``
of the three built-in oracles. Each function is called a few times on batches
of lists (one compile per call form, shared by all the tests, see
:func:`results`):

* hard lists: random, one positive, ties, all tied, extreme (``1e30``) and
  nearly tied scores; masked items with NaN/inf/``-1e30`` under the mask;
* under ``jit`` also degenerate lists: all items masked, one class only, a NaN
  score (of a positive, of a negative);
* eagerly (one list; two batch axes) and under ``jit`` (one batch axis), in
  float32 and (under ``jit``) float64; values against independent float64 NumPy references
  (``reference.py``, scikit-learn, brute force), gradients against
  references or finite differences.

Estimators (``jaxrank.ESTIMATORS``, tiny data, fitted models reused): the
label rule, bad labels and features (complex, NaN, beyond float32),
``NotFittedError``, one positive, float32 vs float64 vs sparse ``X``,
constant and badly scaled features (an error or a warning, never a silent
``w = 0``), unconverged fits (``ConvergenceWarning`` with the scale), and
``objective_`` recomputed from ``coef_`` on the unpadded data.

Large-``n`` checks (pair counts beyond int32) are in ``test_large_pairs.py``.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
import scipy.sparse as sp
import scipy.special
from estimator_settings import fast_params, needs_side_input
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import roc_auc_score

import jaxrank
from jaxrank import inference, losses, metrics

N = 7  # items per list (small: brute force over 7! rankings is the AP reference)


# ---------------------------------------------------------------------------
# Float64 NumPy references on the valid items of one list.
# ---------------------------------------------------------------------------


def ref_ap(s, y):
    return {"value": reference.average_precision_ties(s, y)}


def ref_auc(s, y):
    return {"value": roc_auc_score(y, s)}


def ref_ap_violation(s, y):
    opt, pos, neg = reference.literal_algorithm1(s, y)
    loss, coef, hinge = reference.outputs_from_interleaving(s, y, opt, pos, neg)
    return {"loss": loss, "coef": coef, "hinge": hinge}


def ref_zero_one(s, y):
    s = np.asarray(s, np.float64)
    yy = np.where(y, 1.0, -1.0)
    margin = 1 - yy * s
    c = margin > 0
    return {"loss": c.sum(), "coef": np.where(c, yy, 0.0),
            "hinge": np.maximum(margin, 0).sum()}


def ref_auc_violation(s, y):
    """Pairs (i in P, j in N) swapped iff 1 - 2 (s_i - s_j) > 0 (Joachims 2005)."""
    s = np.asarray(s, np.float64)
    y = np.asarray(y, bool)
    P, Nn = y.sum(), (~y).sum()
    z = s[y][:, None] - s[~y][None, :]
    swap = 1 - 2 * z > 0
    coef = np.zeros(len(s))
    coef[y] = 2 * swap.sum(1) / (P * Nn)
    coef[~y] = -2 * swap.sum(0) / (P * Nn)
    return {"loss": swap.mean(), "coef": coef,
            "hinge": np.maximum(0, 1 - 2 * z).sum() / (P * Nn)}


def _phi64(u, kernel):
    u = np.asarray(u, np.float64)
    if kernel == "gaussian":
        return scipy.special.ndtr(u / math.sqrt(2))
    if kernel == "sigmoid":
        return scipy.special.expit(u)
    # Sigmoid-like, eq. (14) of Gao & Sun as printed (alpha = 1, x = e^u):
    # Phi = x/(x-1) - x ln(x)/(x-1)^2, evaluated at -|u| (x <= 1: no overflow)
    # and reflected, Phi(u) = 1 - Phi(-u); Phi(u) ~ 1/2 + u/6 near the
    # removable singularity u = 0.
    a = np.maximum(np.abs(u), 1e-3)
    x = np.exp(-a)
    lower = x / (x - 1) - x * (-a) / (x - 1) ** 2
    out = np.where(u < 0, lower, 1 - lower)
    return np.where(np.abs(u) < 1e-3, 0.5 + u / 6 - u**3 / 180, out)


def ref_kernel_auc(kernel, h):
    def ref(s, y):
        s = np.asarray(s, np.float64)
        y = np.asarray(y, bool)
        u = (s[y][:, None] - s[~y][None, :]) / h
        return {"value": _phi64(u, kernel).mean()}
    return ref


def ref_grad_fd(ref_value, eps=1e-6):
    """Central finite differences of a float64 reference value."""
    def grad(s, y):
        s = np.asarray(s, np.float64)
        g = np.zeros_like(s)
        for i in range(len(s)):
            e = np.zeros_like(s)
            e[i] = eps
            g[i] = (ref_value(s + e, y)["value"] - ref_value(s - e, y)["value"]) / (2 * eps)
        return g
    return grad


# ---------------------------------------------------------------------------
# The functions of the battery. Every ``call(s, y, where)`` takes ``[..., n]``
# arrays (``where`` may be None) and returns a dict of outputs.
# ---------------------------------------------------------------------------


def _violation(r):
    return {"loss": r.loss, "coef": r.coef, "hinge": r.hinge}


def _sh(oracle):
    """structured_hinge of a built-in oracle form, on (positive, where) problems."""
    return losses.structured_hinge(lambda S, p: oracle(S, p[0], p[1]))


_SH = {
    "ap": _sh(lambda S, pos, w: inference.ap_oracle(S, pos, w, kp=max(S.shape[-1:] or (1,)))),
    "zero_one": _sh(inference.zero_one_oracle),
    "auc": _sh(inference.auc_oracle),
}


def _sh_value(kind):
    """structured_hinge on one list, vmapped over leading batch axes."""
    def value(s, y, where):
        s = jnp.asarray(s)
        w = jnp.ones(s.shape, bool) if where is None else jnp.asarray(where)
        f = lambda s, y, w: _SH[kind](s, (y > 0, w))  # noqa: E731
        for _ in range(s.ndim - 1):
            f = jax.vmap(f)
        return f(s, jnp.asarray(y), w)
    return value


@dataclass(frozen=True)
class Fn:
    """One public function: how to call it and what to expect.

    ``call(s, y, where) -> dict`` of outputs; ``ref(s, y) -> dict`` on the valid
    items (float64); ``value``: the scalar function for ``jax.grad`` (None: not
    for gradients); ``grad_ref``; ``empty``: value under jit of a list without
    a (positive, negative) pair; ``one_class``: True if a one-class list is
    well defined (then eager calls accept it and it matches ``ref``);
    ``masked_garbage``: masked scores may be NaN/inf (False for
    structured_hinge, which is NaN for any NaN in S, by its contract);
    ``validated``: eager calls check their inputs (structured_hinge is an
    unvalidated combinator for jitted training loops); ``full=False``: a
    function built on another one of the battery (``ap_hinge_loss`` and
    ``structured_hinge`` on the oracles of the ``*_most_violated`` wrappers,
    ``kernel_auc_loss = 1 - kernel_auc``) runs without the eager batch and
    float64 compiles (see :func:`results`); ``any_real_scores``: integer and
    half-precision scores are accepted (compared exactly: the metrics),
    else only float32/float64; ``binary_labels``: labels must be in
    ``{0, 1}`` or ``{-1, 1}`` (else any real label, ``label > 0`` positive).
    """

    name: str
    call: Callable
    ref: Callable
    value: Callable | None = None
    grad_ref: Callable | None = None
    empty: float = 0.0
    one_class: bool = False
    masked_garbage: bool = True
    validated: bool = True
    full: bool = True
    rtol: float = 2e-5
    any_real_scores: bool = False
    binary_labels: bool = True


def _value_fn(f):
    return lambda s, y, where: {"value": f(s, y, where)}


_KH = {"gaussian": 0.7, "sigmoid_like": 0.5, "sigmoid": 0.3}
# kernel_auc runs with the Gaussian and the sigmoid-like kernel (the one with a
# removable singularity at ties); the plain sigmoid's Phi is checked by
# test_smoothed_step_extremes_nan_and_bandwidth and tests/test_kernelrank.py.
_KAUC = ("gaussian", "sigmoid_like")
_kauc = {k: (lambda s, y, where, k=k, h=h: losses.kernel_auc(s, y, where=where, kernel=k,
                                                             bandwidth=h))
         for k, h in _KH.items()}


def _ap_hinge(s, y, where):
    return losses.ap_hinge_loss(s, y, where=where)


def _hinge(s, y, where):
    return losses.hinge_loss(s, y, where=where)


def _kloss(s, y, where):
    return losses.kernel_auc_loss(s, y, where=where, kernel="gaussian", bandwidth=0.7)


FUNCS = [
    Fn("average_precision", _value_fn(lambda s, y, w: metrics.average_precision(s, y, where=w)),
       ref_ap, empty=float("nan"), any_real_scores=True),
    Fn("roc_auc", _value_fn(lambda s, y, w: metrics.roc_auc(s, y, where=w)), ref_auc,
       empty=float("nan"), any_real_scores=True),
    Fn("ap_most_violated", lambda s, y, w: _violation(inference.ap_most_violated(s, y, where=w)),
       ref_ap_violation),
    Fn("zero_one_most_violated",
       lambda s, y, w: _violation(inference.zero_one_most_violated(s, y, where=w)),
       ref_zero_one, one_class=True),
    Fn("auc_most_violated",
       lambda s, y, w: _violation(inference.auc_most_violated(s, y, where=w)),
       ref_auc_violation),
    Fn("ap_hinge_loss", _value_fn(_ap_hinge),
       lambda s, y: {"value": ref_ap_violation(s, y)["hinge"]},
       value=_ap_hinge, grad_ref=lambda s, y: -ref_ap_violation(s, y)["coef"], full=False),
    Fn("hinge_loss", _value_fn(_hinge), lambda s, y: {"value": ref_zero_one(s, y)["hinge"]},
       value=_hinge, grad_ref=lambda s, y: -ref_zero_one(s, y)["coef"], one_class=True),
    *[Fn(f"kernel_auc[{k}]", _value_fn(_kauc[k]), ref_kernel_auc(k, _KH[k]), value=_kauc[k],
         grad_ref=ref_grad_fd(ref_kernel_auc(k, _KH[k])), rtol=1e-4, binary_labels=False)
      for k in _KAUC],
    Fn("kernel_auc_loss", _value_fn(_kloss),
       lambda s, y: {"value": 1 - ref_kernel_auc("gaussian", 0.7)(s, y)["value"]}, value=_kloss,
       grad_ref=lambda s, y: -ref_grad_fd(ref_kernel_auc("gaussian", 0.7))(s, y), rtol=1e-4,
       full=False, binary_labels=False),
    *[Fn(f"structured_hinge[{k}]", _value_fn(_sh_value(k)), r, value=_sh_value(k), grad_ref=g,
         one_class=(k == "zero_one"), masked_garbage=False, validated=False, full=False)
      for k, r, g in (
          ("ap", lambda s, y: {"value": ref_ap_violation(s, y)["hinge"]},
           lambda s, y: -ref_ap_violation(s, y)["coef"]),
          ("zero_one", lambda s, y: {"value": ref_zero_one(s, y)["hinge"]},
           lambda s, y: -ref_zero_one(s, y)["coef"]),
          ("auc", lambda s, y: {"value": ref_auc_violation(s, y)["hinge"]},
           lambda s, y: -ref_auc_violation(s, y)["coef"]))],
]
BY_NAME = {f.name: f for f in FUNCS}
IDS = list(BY_NAME)
DIFFERENTIABLE = [f.name for f in FUNCS if f.value is not None]
VALIDATED = [f.name for f in FUNCS if f.validated]


# ---------------------------------------------------------------------------
# The lists.
# ---------------------------------------------------------------------------


def _labels():
    y = np.zeros(N, np.int32)
    y[[0, 3, 5]] = 1
    return y


def _case(name, seed=0):
    """``(scores float32 [N], labels [N])`` of a named hard case."""
    rng = np.random.default_rng(seed)
    y = _labels()
    s = rng.normal(size=N)
    if name == "one_positive":
        y = np.zeros(N, np.int32)
        y[2] = 1
    elif name == "ties":
        s = np.round(s)  # a few values: ties within and across classes
    elif name == "all_tied":
        s = np.full(N, 0.25)
    elif name == "extreme":
        s = s * 1e30
    elif name == "nearly_tied":
        s = 1 + rng.permutation(N) * 2.0**-20  # distinct in float32, 1e-6 apart
    return s.astype(np.float32), y


# Rows of the batches: HARD (all items valid), MASKED (items 1 and 3, a
# positive and a negative, masked; garbage scores under the mask), then
# under jit only DEGENERATE rows.
HARD = ["random", "one_positive", "ties", "all_tied", "extreme", "nearly_tied",
        "random1", "random2", "random3"]
KINKS = {"ties", "all_tied", "nearly_tied"}  # margins of exactly 1: any subgradient
MASK = np.ones(N, bool)
MASK[[1, 3]] = False
GARBAGE = {True: (np.nan, np.inf, -1e30), False: (0.0, 5.0, -3.0)}
DEGENERATE = ["all_masked", "all_positive", "all_negative", "nan_positive", "nan_negative"]
H, M = len(HARD), len(GARBAGE[True])
ROWS = H + M  # rows of the eager batch


def _hard_rows():
    rows = [_case(c) if not c.startswith("random") or c == "random"
            else _case("random", int(c[-1])) for c in HARD]
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _masked_rows(fn):
    S, Y = [], []
    for i, g in enumerate(GARBAGE[fn.masked_garbage]):
        s, y = _case("random", 4 + i)
        s[~MASK] = g
        S.append(s)
        Y.append(y)
    return np.stack(S), np.stack(Y), np.broadcast_to(MASK, (M, N)).copy()


def _degenerate_rows():
    s, y = _case("random")
    S = np.stack([s] * 5)
    Y = np.stack([y, np.ones(N, np.int32), np.zeros(N, np.int32), y, y])
    W = np.ones((5, N), bool)
    W[0] = False
    S[3, 0] = np.nan  # a positive
    S[4, 1] = np.nan  # a negative
    return S, Y, W


def _np(d):
    return {k: np.asarray(v, np.float64) for k, v in d.items()}


def _jit_outputs_and_grad(fn):
    """One jitted program: the outputs and (if differentiable) the gradient of their sum."""
    def f(s, y, w):
        out = dict(fn.call(s, y, w))
        if fn.value is not None:
            out["grad"] = jax.grad(lambda s: fn.value(s, y, w).sum())(s)
        return out
    return jax.jit(f)


@functools.lru_cache(maxsize=None)
def results(name):
    """Every output the tests check, computed once per function.

    Four compiled call forms per validated function: the eager batch (two
    batch axes, with ``where``), one eager list (``where=None``), and the
    jitted outputs-and-gradient program in float32 (with the degenerate rows)
    and in float64; for ``full=False`` the two float32 ones (the jitted one
    only for ``structured_hinge``, which has no eager code of its own).
    """
    fn = BY_NAME[name]
    Sh, Yh = _hard_rows()
    Sm, Ym, Wm = _masked_rows(fn)
    Sd, Yd, Wd = _degenerate_rows()
    Se, Ye = np.concatenate([Sh, Sm]), np.concatenate([Yh, Ym])
    We = np.concatenate([np.ones((H, N), bool), Wm])
    Sj, Yj, Wj = (np.concatenate(a) for a in ((Se, Sd), (Ye, Yd), (We, Wd)))
    jitted = _jit_outputs_and_grad(fn)(jnp.asarray(Sj), Yj, jnp.asarray(Wj))
    out = {
        "S": Sj, "Y": Yj, "W": Wj,
        "jit": _np({k: v for k, v in jitted.items() if k != "grad"}),
        "grad": np.asarray(jitted["grad"], np.float64) if "grad" in jitted else None,
    }
    if fn.validated and fn.full:
        # The eager batch has two batch axes [3, 4, N] (one compile covers the
        # batch code of every wrapper); its rows are compared flattened.
        eager = {k: jnp.reshape(v, (ROWS,) + v.shape[2:]) for k, v in fn.call(
            Se.reshape(3, 4, N), Ye.reshape(3, 4, N), We.reshape(3, 4, N)).items()}
        out["one_eager"] = _np(fn.call(Sh[0], Yh[0], None))
    else:
        # structured_hinge has no eager code of its own (no validation): its
        # eager call is the same trace as the jitted one. Functions built on
        # another one of the battery check their own eager code on one list.
        eager = {k: v[:ROWS] for k, v in jitted.items() if k != "grad"}
        out["one_eager"] = (_np(fn.call(Sh[0], Yh[0], None)) if fn.validated
                            else _np({k: v[0] for k, v in eager.items()}))
    out["eager"] = _np(eager)
    out["f32_dtypes"] = {k: jnp.asarray(v).dtype for k, v in eager.items()}
    if not fn.full:
        return out
    with jax.enable_x64(True):
        S64 = jnp.asarray(Sh, jnp.float64)
        r64 = _jit_outputs_and_grad(fn)(S64, Yh, jnp.ones((H, N), bool))
        out["f64_dtypes"] = {k: jnp.asarray(v).dtype for k, v in r64.items()}
        r64 = _np(r64)
    out["grad64"] = r64.pop("grad", None)
    out["f64"] = r64
    return out


def _scale(s):
    return max(1.0, float(np.max(np.abs(np.where(np.isfinite(s), s, 0)))))


def _row_ref(fn, s, y, w):
    """Reference outputs of one row: ``ref`` on the valid items, coef scattered back."""
    ref = fn.ref(s[w].astype(np.float64), y[w] > 0)
    if "coef" in ref:
        coef = np.zeros(N)
        coef[w] = ref["coef"]
        ref = {**ref, "coef": coef}
    return ref


def _close(got, want, rtol, atol, what):
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=rtol, atol=atol, err_msg=f"{what}: {k}")


def _row(d, i):
    return {k: v[i] for k, v in d.items()}


# ---------------------------------------------------------------------------
# Function battery.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", IDS)
def test_values_match_float64_references(name):
    """Hard lists and masked items (NaN/inf/-1e30 under the mask) against float64 references."""
    fn, r = BY_NAME[name], results(name)
    for i in range(ROWS):
        s, y, w = r["S"][i], r["Y"][i], r["W"][i]
        got = _row(r["eager"], i)
        _close(got, _row_ref(fn, s, y, w), fn.rtol, fn.rtol * _scale(s[w]), f"{name} row {i}")
        for k, v in got.items():
            assert np.all(np.isfinite(v)), f"{name} row {i}: non-finite {k}"
            if k == "coef":
                assert np.all(v[~w] == 0), f"{name} row {i}: coef of masked items"


def test_ap_reference_is_the_brute_force_maximum():
    """The literal Algorithm 1 reference equals the max over all 7! rankings."""
    for case in ("random", "ties", "one_positive"):
        s, y = _case(case)
        np.testing.assert_allclose(ref_ap_violation(s, y > 0)["hinge"],
                                   reference.brute_force_ap_violation(s, y > 0), rtol=1e-12)


@pytest.mark.parametrize("name", IDS)
def test_jit_batch_axes_and_one_list_agree(name):
    """jit (one batch axis) vs eager (two batch axes), one list vs a batch row."""
    r = results(name)
    for i in range(ROWS):
        atol = 1e-6 * _scale(r["S"][i][r["W"][i]])
        _close(_row(r["jit"], i), _row(r["eager"], i), 1e-6, atol, f"{name} jit row {i}")
    _close(r["one_eager"], _row(r["eager"], 0), 1e-6, 1e-6, f"{name} one list")


@pytest.mark.parametrize("name", IDS)
def test_degenerate_lists_under_jit(name):
    """All masked / one class: the documented empty value; a NaN score: NaN, never a number."""
    fn, r = BY_NAME[name], results(name)
    for j, case in enumerate(DEGENERATE):
        i = ROWS + j
        got = _row(r["jit"], i)
        if case.startswith("nan"):
            for k, v in got.items():
                assert np.all(np.isnan(v)), f"{name}/{case}: {k} = {v}"
            continue
        one_class = case != "all_masked"
        if one_class and fn.one_class:
            _close(got, _row_ref(fn, r["S"][i], r["Y"][i], r["W"][i]), fn.rtol, fn.rtol,
                   f"{name}/{case}")
            continue
        for k, v in got.items():
            if k == "coef":
                assert np.all(v == 0), f"{name}/{case}: coef {v}"
            elif name == "average_precision" and case == "all_positive":
                assert v == 1.0  # documented: a list of positives only has AP 1
            elif math.isnan(fn.empty):
                assert np.isnan(v), f"{name}/{case}: {k} = {v}"
            else:
                assert v == fn.empty, f"{name}/{case}: {k} = {v}"
    # The NaN rows did not leak into the other lists of the batch.
    for k, v in r["jit"].items():
        assert np.all(np.isfinite(v[:ROWS])), f"{name}: {k}"


@pytest.mark.parametrize("name", VALIDATED)
def test_eager_calls_reject_what_jit_cannot_check(name):
    fn = BY_NAME[name]
    s, y = _case("random")
    for i in (0, 1):  # a positive, a negative
        sn = s.copy()
        sn[i] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            fn.call(sn, y, None)
    with pytest.raises(ValueError):
        fn.call(s, y, np.zeros(N, bool))  # every item masked
    with pytest.raises(TypeError, match="real"):
        fn.call(s + 1j, y, None)  # complex scores are refused, not cast (issue 9 #7)
    for label in (0, 1):
        yc = np.full(N, label)
        if fn.one_class:  # a sum over items: one class is fine
            _close(_np(fn.call(s, yc, None)), fn.ref(s, yc > 0), fn.rtol, fn.rtol, name)
        else:
            with pytest.raises(ValueError, match="positive|negative|class"):
                fn.call(s, yc, None)


@pytest.mark.parametrize("name", [f.name for f in FUNCS if f.full])
def test_float32_matches_float64(name):
    fn, r = BY_NAME[name], results(name)
    assert set(r["f32_dtypes"].values()) == {np.dtype(np.float32)}, r["f32_dtypes"]
    assert set(r["f64_dtypes"].values()) == {np.dtype(np.float64)}, r["f64_dtypes"]
    for i in range(H):
        s, y = r["S"][i], r["Y"][i]
        want = _row_ref(fn, s, y, np.ones(N, bool))
        _close(_row(r["f64"], i), want, 1e-9, 1e-9 * _scale(s), f"{name} f64 row {i}")
        _close(_row(r["eager"], i), _row(r["f64"], i), fn.rtol, fn.rtol * _scale(s),
               f"{name} f32 vs f64 row {i}")


def _grad_checked(name, case):
    if name.startswith("kernel"):
        # Finite differences of width 1e-6 are meaningless at 1e30 and
        # between float32 scores 1e-6 apart.
        return case not in ("extreme", "nearly_tied")
    return case not in KINKS


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients(name):
    """Finite and equal to the reference; 0 on masked items; NaN exactly where the value is."""
    fn, r = BY_NAME[name], results(name)
    g, S, Y, W = r["grad"], r["S"], r["Y"], r["W"]
    for i in range(ROWS):
        assert np.all(np.isfinite(g[i])), f"{name} row {i}: {g[i]}"
        assert np.all(g[i][~W[i]] == 0), f"{name} row {i}: gradient of masked items"
        case = HARD[i] if i < H else "masked"
        if not _grad_checked(name, case):
            continue
        want = np.zeros(N)
        want[W[i]] = fn.grad_ref(S[i][W[i]].astype(np.float64), Y[i][W[i]] > 0)
        np.testing.assert_allclose(g[i], want, rtol=1e-3, atol=1e-5, err_msg=f"{name} row {i}")
        if i < H and fn.full:
            np.testing.assert_allclose(r["grad64"][i], want, rtol=1e-5, atol=1e-7,
                                       err_msg=f"{name} float64 row {i}")
    for j, case in enumerate(DEGENERATE):
        gi = g[ROWS + j]
        if case.startswith("nan"):
            assert np.all(np.isnan(gi)), f"{name}/{case}: gradient {gi} where the value is NaN"
        elif case != "all_masked" and fn.one_class:
            want = fn.grad_ref(S[ROWS + j].astype(np.float64), Y[ROWS + j] > 0)
            np.testing.assert_allclose(gi, want, rtol=1e-3, atol=1e-5, err_msg=f"{name}/{case}")
        else:
            assert np.all(gi == 0), f"{name}/{case}: gradient {gi}"


def test_ap_hinge_gradient_is_minus_the_coefficients():
    """Issue 9 #4: grad(ap_hinge_loss) is -coef of ap_most_violated, NaN where the loss is."""
    g = results("ap_hinge_loss")["grad"]
    coef = results("ap_most_violated")["jit"]["coef"]
    np.testing.assert_array_equal(g[:ROWS], -coef[:ROWS])


@pytest.mark.parametrize("kernel", sorted(_KH))
def test_smoothed_step_extremes_nan_and_bandwidth(kernel):
    z = np.array([-1e30, -50.0, -1.0, -1e-4, 0.0, 1e-4, 1.0, 50.0, 1e30, np.nan], np.float32)
    h = _KH[kernel]
    phi = np.asarray(losses.smoothed_step(z, kernel=kernel, bandwidth=h), np.float64)
    np.testing.assert_allclose(phi[:-1], _phi64(z[:-1].astype(np.float64) / h, kernel),
                               rtol=1e-5, atol=1e-7)
    assert np.isnan(phi[-1])
    g = jax.jit(jax.vmap(jax.grad(
        lambda t: losses.smoothed_step(t, kernel=kernel, bandwidth=h))))(jnp.asarray(z))
    assert np.all(np.isfinite(np.asarray(g)[:-1])) and np.isnan(np.asarray(g)[-1])
    for bad in (0.0, -1.0, 1e-50, 1e39, np.nan):  # 1e-50 and 1e39 are 0 and inf in float32
        with pytest.raises(ValueError, match="bandwidth"):
            losses.smoothed_step(z, kernel=kernel, bandwidth=bad)


# ---------------------------------------------------------------------------
# Bad inputs, eagerly and under jit: a clear error eagerly; under jit a
# trace-time error where the shape or dtype shows the problem, NaN where
# only the values do (never a plausible number).
# ---------------------------------------------------------------------------

_BIG = np.array([2**40, 2**40 + 1, 5, 2**33, 7, 3, 1], np.int64)  # beyond int32


def _dtype_cases():
    """``{case: (scores, labels, where)}`` whose shape or dtype is the problem
    (or, for the metrics, a dtype they compute with exactly)."""
    s, y = _case("random")
    return {
        "complex scores": (s + 1j, y, None),
        "bool scores": (s > 0, y, None),
        "string scores": (s.astype(str), y, None),
        "int32 scores": (np.round(s * 10).astype(np.int32), y, None),
        "int64 scores beyond int32": (_BIG, y, None),
        "float16 scores": (s.astype(np.float16), y, None),
        "bfloat16 scores": (jnp.asarray(s, jnp.bfloat16), y, None),
        "complex labels": (s, y + 0j, None),
        "float where": (s, y, np.ones(N)),
        "labels of another shape": (s, y[:-1], None),
        "scalar scores": (s[0], y[0], None),
    }


def _dtype_expectation(fn, case):
    """``None`` (accepted: the value of the float64 reference) or ``(error, match)``;
    ``"n/a"`` for a case that is not an input of ``fn``."""
    if case in ("int32 scores", "int64 scores beyond int32", "float16 scores",
                "bfloat16 scores"):
        if fn.any_real_scores:
            return None
        what = case.split()[0]
        if "float" in what:
            return TypeError, f"{what} is not supported.*pass float32"
        # structured_hinge's custom_vjp gets the array from JAX (int32 already).
        return TypeError, f"integer dtype {what if fn.validated else 'int'}"
    if case == "complex scores":
        return TypeError, "complex dtype.*imaginary part"
    if case == "bool scores":
        return TypeError, "dtype bool"
    if case == "string scores":
        # Under jit (and for structured_hinge's custom_vjp) JAX refuses the
        # argument itself before any jaxrank code runs.
        return TypeError, "dtype <U" if fn.validated else None
    if not fn.validated:  # structured_hinge: S only (the problem is the oracle's)
        return "n/a"
    if case == "complex labels":
        return TypeError, "labels must be bool, integer or real floating.*complex"
    if case == "float where":
        return TypeError, "where must be a bool array"
    if case == "labels of another shape":
        return ValueError, "same shape"
    if case == "scalar scores":
        return ValueError, "at least one axis"
    raise AssertionError(case)


@pytest.mark.parametrize("name", IDS)
def test_bad_dtypes_and_shapes_fail_the_same_eagerly_and_at_trace_time(name):
    """Complex scores used to lose their imaginary part under jit (kernel_auc),
    bool and integer scores were cast there, int64 was reported as int32,
    float16 met JAX's own dtype error inside kernel_auc."""
    fn = BY_NAME[name]
    for case, (s, y, w) in _dtype_cases().items():
        want = _dtype_expectation(fn, case)
        if want == "n/a":
            continue
        eager = lambda s, y, w=w: fn.call(s, y, w)  # noqa: E731
        traced = jax.jit(lambda s, y, w=w: fn.call(s, y, w))
        if want is None:  # accepted: the exact value on the given numbers
            ref = fn.ref(np.asarray(s, np.float64) if case != "bfloat16 scores"
                         else np.asarray(s.astype(jnp.float32), np.float64), y > 0)
            _close(_np(eager(s, y)), ref, fn.rtol, 0, f"{name}/{case} eager")
            if case == "int64 scores beyond int32":
                # JAX narrows int64 to int32 at the jit boundary (x64 off) before
                # any function sees it: documented, see the next test.
                continue
            _close(_np(traced(s, y)), ref, fn.rtol, 0, f"{name}/{case} jit")
            continue
        error, match = want
        with pytest.raises(error, match=match):
            eager(s, y)
        if case == "int64 scores beyond int32" and match:
            match = match.replace("int64", "int32")  # what jit hands the function
        with pytest.raises(error, match=match if case != "string scores" else None):
            traced(s, y)


def test_metrics_document_that_jit_narrows_64_bit_numpy_scores():
    """Under jit (x64 off) NumPy int64 scores are wrapped to int32 before the
    metric sees them: the docstrings say so and give the remedy, which works."""
    _, y = _case("random")
    want = ref_ap(_BIG.astype(np.float64), y > 0)["value"]
    assert metrics.average_precision(_BIG, y) == pytest.approx(want, rel=1e-6)  # eager: exact
    ranks = np.unique(_BIG, return_inverse=True)[1].astype(np.int32)
    assert float(jax.jit(metrics.average_precision)(ranks, y)) == pytest.approx(want, rel=1e-6)
    for f in (metrics.average_precision, metrics.roc_auc):
        doc = " ".join(f.__doc__.split())
        assert "``jax.jit``" in doc and "narrowed to 32 bits" in doc, f.__name__


def _value_rows():
    """One list per row whose labels are bad only by value (float32 labels):
    a NaN label, a label 2, labels -1, 0 and 1 in one list."""
    s, y = _case("random")
    Y = np.stack([y, y, y]).astype(np.float32)
    Y[0, 2] = np.nan
    Y[1, 0] = 2.0
    Y[2, 1] = -1.0
    return np.stack([s, s, s]), Y


@pytest.mark.parametrize("name", VALIDATED)
def test_bad_label_values_are_errors_eagerly_and_nan_under_jit(name):
    """Under jit a NaN or non-binary label used to give a plausible number
    (NaN > 0 is a negative; 2 > 0 a positive) where eager calls refuse it."""
    fn = BY_NAME[name]
    S, Y = _value_rows()
    out = _jit_outputs_and_grad(fn)(jnp.asarray(S), Y, None)
    for i, case in enumerate(("NaN label", "label 2", "labels -1, 0, 1")):
        refused = fn.binary_labels or case == "NaN label"
        if refused:
            with pytest.raises(ValueError, match="NaN|binary"):
                fn.call(S[i], Y[i], None)
            for k, v in out.items():
                assert np.all(np.isnan(np.asarray(v[i]))), f"{name}/{case}: {k} = {v[i]}"
        else:  # any real label, label > 0 positive: the same value both ways
            ref = fn.ref(S[i].astype(np.float64), Y[i] > 0)
            _close(_np(fn.call(S[i], Y[i], None)), ref, fn.rtol, 0, f"{name}/{case} eager")
            _close(_np({k: v[i] for k, v in out.items() if k != "grad"}), ref, fn.rtol, 0,
                   f"{name}/{case} jit")


_BAD_BANDWIDTHS = (0.0, -1.0, np.nan, np.inf, 1e-50)  # 1e-50 is 0 in float32


@pytest.mark.parametrize("name", ["kernel_auc[gaussian]", "kernel_auc[sigmoid_like]",
                                  "kernel_auc_loss"])
def test_kernel_auc_bad_bandwidth_eager_error_jit_nan(name):
    """A negative bandwidth under jit used to give 0.59 for an AUC of 0.17."""
    kernel = name[11:-1] if "[" in name else "gaussian"
    f = losses.kernel_auc_loss if name == "kernel_auc_loss" else losses.kernel_auc
    s, y = _case("random")
    S, Y = jnp.asarray(np.stack([s, s])), np.stack([y, y])
    call = lambda s, h: f(s, Y, kernel=kernel, bandwidth=h)  # noqa: E731
    value_and_grads = jax.jit(jax.value_and_grad(lambda s, h: call(s, h).sum(), argnums=(0, 1)))
    for h in _BAD_BANDWIDTHS:
        with pytest.raises(ValueError, match="bandwidth"):
            call(S, h)  # eagerly
        with pytest.raises(ValueError, match="bandwidth"):
            jax.jit(lambda s: call(s, h))(S)  # a constant under jit: at trace time
        v, (gs, gh) = value_and_grads(S, jnp.float32(h))  # traced: NaN, never a number
        assert np.isnan(v) and np.all(np.isnan(gs)) and np.isnan(gh), (h, v, gs, gh)
    v = jax.jit(call)(S, jnp.float32(0.7))
    np.testing.assert_allclose(v, call(S, 0.7), rtol=1e-6)
    with pytest.raises(TypeError, match="bandwidth must be a real number; got complex"):
        jax.jit(call)(S, jnp.complex64(0.7))


def test_smoothed_step_bad_bandwidth_and_dtypes_eager_and_jit():
    z = jnp.linspace(-2, 2, 5)
    f = jax.jit(lambda z, h: losses.smoothed_step(z, kernel="gaussian", bandwidth=h))
    for h in _BAD_BANDWIDTHS:
        assert np.all(np.isnan(f(z, jnp.float32(h)))), h
    for bad, match in ((z + 1j, "complex"), (z > 0, "bool"), (z.astype(jnp.float16), "float16"),
                       (jnp.arange(3), "integer")):
        with pytest.raises(TypeError, match=match):
            losses.smoothed_step(bad, kernel="gaussian", bandwidth=1.0)
        with pytest.raises(TypeError, match=match):
            f(bad, 1.0)


# ---------------------------------------------------------------------------
# Estimator battery.
# ---------------------------------------------------------------------------

FAST = {name: fast_params(name) for name in jaxrank.ESTIMATORS}
EST = sorted(FAST)
PLAIN = sorted(k for k, c in jaxrank.ESTIMATORS.items() if not needs_side_input(c))  # fit(X, y)
SVMS = [k for k in PLAIN if issubclass(jaxrank.ESTIMATORS[k], jaxrank.StructuredSVM)]
# One estimator of each family with its own fit (bags: CCCP; edges: graphs):
# they share the estimator base's _set_fitted / warn_unconverged.
FIT_OTHERS = ["latent-svm", "hob-svm"]


def make(name, **kw):
    return jaxrank.ESTIMATORS[name](**{**FAST[name], **kw})


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 4 == 0).astype(int)
    X = rng.normal(size=(n, d)) + 1.5 * y[:, None] * np.r_[1.0, -0.5, 0.0, np.zeros(d)][:d]
    return X, y


def _extra(name, n=40):
    """The extra fit/decision_function arguments of a model (bags of 2 rows, or edges)."""
    if name.startswith("latent"):
        return {"bags": np.arange(n) // 2}
    if name.startswith("ho"):
        return {"edges": np.array([(i, i + 1) for i in range(0, n - 1, 2)])}
    return {}


def _y(name, y):
    """Labels as the model takes them (latent: one per bag of rows 2i, 2i+1)."""
    return y[::2] if name.startswith("latent") else y


def _fit(name, X, y, **kw):
    return make(name, **kw).fit(X, _y(name, y), **_extra(name, X.shape[0]))


def _scores(name, m, X):
    return m.decision_function(X, **_extra(name, X.shape[0]))


_FITTED = {}


def fitted(name):
    """The model fitted on ``_data()``, once per process."""
    if name not in _FITTED:
        X, y = _data()
        _FITTED[name] = _fit(name, X, y)
    return _FITTED[name]


@pytest.mark.parametrize("name", PLAIN + FIT_OTHERS)
def test_one_label_rule(name):
    """Any two label values, the larger positive: identical models (scikit-learn classes_)."""
    X, y = _data()
    base = fitted(name)
    enc = np.where(y > 0, "pos", "neg")  # sorted: "neg" < "pos"
    m = _fit(name, X, enc)
    np.testing.assert_array_equal(m.coef_, base.coef_)
    assert list(m.classes_) == ["neg", "pos"]
    assert set(np.unique(m.predict(X, **_extra(name)))) <= {"neg", "pos"}


@pytest.mark.parametrize("name", PLAIN + FIT_OTHERS)
def test_pos_label_chooses_the_relevant_class(name, capsys):
    """String labels "has3"/"no3": the larger label ("no3") was always the
    positive class, so the minority class "has3" was silently ranked last."""
    X, y = _data()
    enc = np.where(y > 0, "has3", "no3")  # sorted: "has3" < "no3"
    m = _fit(name, X, enc, pos_label="has3", verbose=name == "apsvm")
    if name == "apsvm":  # the fit's summary says which class is relevant
        assert "positive (relevant) class: 'has3' (pos_label)" in capsys.readouterr().out
    np.testing.assert_array_equal(m.coef_, fitted(name).coef_)  # the task of y > 0
    assert list(m.classes_) == ["no3", "has3"]
    relevant = _y(name, y) > 0
    ap = float(metrics.average_precision(_scores(name, m, X), relevant))
    default = _fit(name, X, enc)
    assert default.classes_[1] == "no3"
    assert float(metrics.average_precision(_scores(name, default, X), relevant)) < 0.5 < ap
    if name in PLAIN:  # score (each estimator's own measure) of the relevant class
        assert m.score(X, enc) == pytest.approx(fitted(name).score(X, y))
        if "average precision" in (type(m).score.__doc__ or "").lower():
            assert m.score(X, enc) == pytest.approx(ap)
    with pytest.raises(ValueError, match="pos_label='has4' is not one of the two labels"):
        _fit(name, X, enc, pos_label="has4")


@pytest.mark.parametrize("name", PLAIN)
def test_half_precision_X_and_dataframes(name):
    """float16/bfloat16 X were refused as "not numeric" (widened exactly now); a
    DataFrame's string column is named, not reported as sklearn's parse or
    feature-name error."""
    import pandas as pd

    X, y = _data()
    for half in (jnp.float16, jnp.bfloat16):
        Xh = np.asarray(jnp.asarray(X, half))
        X32 = np.asarray(Xh, np.float32)  # the same values
        m = make(name).fit(Xh, y)
        np.testing.assert_array_equal(m.coef_, make(name).fit(X32, y).coef_)
        np.testing.assert_array_equal(m.decision_function(Xh), m.decision_function(X32))
    df = pd.DataFrame(X)  # integer column names
    df["colour"] = np.where(y > 0, "red", "blue")
    with pytest.raises(ValueError, match="X column 'colour' has dtype .*numeric"):
        make(name).fit(df, y)
    named = pd.DataFrame(X, columns=["a", "b", "c"]).assign(city="Oslo")
    with pytest.raises(ValueError, match="X column 'city'"):
        make(name).fit(named, y)


def test_label_encodings_give_the_same_tasks():
    """The one rule (jaxrank._src.estimators.labels.labels_to_tasks, used by every estimator)."""
    from jaxrank._src.estimators.labels import labels_to_tasks

    _, y = _data()
    want, classes, multi = labels_to_tasks(y)
    assert not multi and list(classes) == [0, 1]
    for enc in (np.where(y > 0, 1, -1), y + 1, y.astype(bool), np.where(y > 0, "b", "a"),
                y.astype(float), y[:, None]):
        got, classes, multi = labels_to_tasks(enc)
        np.testing.assert_array_equal(got, want)
        assert classes[1] == np.ravel(enc)[y > 0][0] and not multi


@pytest.mark.parametrize("name", EST)
def test_bad_labels_are_errors(name):
    X, y = _data()
    cases = [
        (np.zeros(40), "1 class"),
        (np.arange(40) % 3, "Only binary"),
        (np.where(y > 0, 0.5, 1.7), "Unknown label type: continuous"),
        (np.where(y > 0, np.nan, 0.0), "NaN"),
    ]
    for bad, match in cases:
        with pytest.raises(ValueError, match=match):
            make(name).fit(X, _y(name, bad), **_extra(name))


@pytest.mark.parametrize("name", EST)
def test_bad_features_are_errors(name):
    """NaN, inf, beyond float32 (1e39) and complex X (issue 9 #5, #7); NotFittedError."""
    X, y = _data()
    for bad in (np.nan, np.inf, 1e39):
        Xb = X.copy()
        Xb[3, 1] = bad
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # overflow in the float32 cast
            # 1e39: the float32 cast's infinity, or the float32 range check of
            # the rows (whichever the estimator's input path meets first).
            with pytest.raises(ValueError, match="NaN|infinity|too large|float32.*Rescale X"):
                make(name).fit(Xb, _y(name, y), **_extra(name))
    with pytest.raises(ValueError, match="[Cc]omplex"):
        make(name).fit(X + 1j, _y(name, y), **_extra(name))
    with pytest.raises(NotFittedError):
        make(name).predict(X, **_extra(name))
    with pytest.raises(NotFittedError):
        make(name).decision_function(X, **_extra(name))


FLOAT_PARAMS = ("C", "bandwidth", "learning_rate", "pos_weight", "C_binary", "J")


@pytest.mark.parametrize("name", EST)
def test_hyperparameters_are_checked_after_the_float32_cast(name):
    """Issue 9 #5: C = 1e39 or 1e-50 (inf or 0 in float32) passed and gave inf/NaN/zero models."""
    X, y = _data()
    params = set(jaxrank.ESTIMATORS[name]().get_params()) & set(FLOAT_PARAMS)
    assert params
    for p in sorted(params):
        for v in (1e39, 1e-50):
            with pytest.raises(ValueError, match="float32"):
                make(name, **{p: v}).fit(X, _y(name, y), **_extra(name))


def test_function_parameters_are_checked_after_the_float32_cast():
    s, y = _case("random")
    for v in (1e39, 1e-50):
        with pytest.raises(ValueError, match="float32"):
            losses.kernel_auc(s, y, bandwidth=v)
        with pytest.raises(ValueError, match="float32"):
            losses.hinge_loss(s, y, pos_weight=v)
        with pytest.raises(ValueError, match="float32"):
            inference.zero_one_most_violated(s, y, pos_weight=v)


@pytest.mark.parametrize("name", PLAIN)
def test_one_positive_is_ranked_first(name):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3))
    y = np.zeros(40, int)
    y[7] = 1
    X[7] = [6.0, -3.0, 0.0]  # far from every negative
    m = make(name).fit(X, y)
    s = m.decision_function(X)
    assert np.argmax(s) == 7 and float(metrics.average_precision(s, y)) == 1.0
    if "average precision" in (type(m).score.__doc__ or "").lower():
        assert m.score(X, y) == 1.0


@pytest.mark.parametrize("name", PLAIN)
def test_float32_float64_and_sparse_X_give_the_same_model(name):
    X, y = _data()
    m64 = fitted(name)
    m32 = make(name).fit(X.astype(np.float32), y)
    msp = make(name).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(m32.coef_, m64.coef_)
    if name == "kernelrank":  # its LDA start is computed by scipy.sparse on the host
        np.testing.assert_allclose(msp.coef_, m64.coef_, rtol=1e-4, atol=1e-6)
        return
    # Small sparse inputs are densified (same program): bitwise equal too.
    np.testing.assert_array_equal(msp.coef_, m64.coef_)
    np.testing.assert_allclose(msp.decision_function(sp.csr_matrix(X)), m64.decision_function(X),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", PLAIN + ["latent-svm"])
def test_constant_features_warn_instead_of_a_silent_non_ranking(name):
    X = np.ones((40, 3))
    _, y = _data()
    with pytest.warns(UserWarning, match="does not rank"):
        _fit(name, X, y)


@pytest.mark.parametrize("name", SVMS)
@pytest.mark.parametrize("scale", [1e30, 1e-20])
def test_features_outside_the_float32_range_are_errors(name, scale):
    """Issue 9 #6: features near 1e30 gave w = 0 (and 1e-20 a tie) without a word."""
    X, y = _data()
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        make(name).fit(X * scale, y)
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        jaxrank.sweep(X * scale, y, model=name, Cs=[1.0], cv=2)
    # C is part of the range: C R beyond it is the same error.
    with pytest.raises(ValueError, match=r"C \* R <="):
        make(name, C=1e30).fit(X, y)


@pytest.mark.parametrize("fmt", ["csr", "coo", "csc"])
def test_sparse_row_norms_see_every_stored_entry(fmt):
    """The range check reads every row of sparse X: one huge entry in the last
    non-empty row, with empty rows around it (CSR row norms are segment sums)."""
    X, y = _data()
    X[-4:] = 0  # trailing empty rows
    X[5] = 0  # and one inside
    X[-5, -1] = 1e30  # the last stored entry
    Xs = sp.csr_matrix(X).asformat(fmt)
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        make("apsvm").fit(Xs, y)
    X[-5, -1] = 1.0  # in range: the same rows fit
    assert make("apsvm").fit(sp.csr_matrix(X).asformat(fmt), y).coef_.shape == (1, X.shape[1])


@pytest.mark.parametrize("name", SVMS + FIT_OTHERS)
def test_tiny_C_times_norms_warn_that_the_model_does_not_rank(name):
    """C max||x||^2 = 1e-19: the exact optimum's scores are below float32 resolution.

    BinarySVM's tiny ``X w`` vanished next to its intercept and the others
    returned ``w = 0``: a warning names the cause (or, for the estimators
    with their own fit, the non-ranking model).
    """
    X, y = _data()
    with pytest.warns((UserWarning, ConvergenceWarning)) as rec:
        _fit(name, X * 1e-10, y)
    text = " ".join(str(w.message) for w in rec)
    assert "does not rank" in text or "stopped at max_iter" in text, text
    if name in SVMS:
        assert "is tiny: the regulariser dominates" in text, text


@pytest.mark.parametrize("name", FIT_OTHERS)
def test_overflowing_features_are_refused_before_the_other_fits(name):
    """Latent and graph models (own fits): the range check of every structured SVM.

    Latent models used to run a whole (wasted) CCCP fit to w = 0 first.
    """
    X, y = _data()
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        _fit(name, X * 1e30, y)
    with pytest.raises(ValueError, match=r"C \* R <="):
        _fit(name, X, y, C=1e30)


def test_sweep_checks_c_times_r_at_every_c_of_the_grid():
    """A grid whose largest C overflows the float32 planes is refused (not its first C only)."""
    X, y = _data()
    with pytest.raises(ValueError, match=r"C = 1e\+30.*C \* R <="):
        jaxrank.sweep(X, y, model="apsvm", Cs=[1.0, 1e30], cv=2)
    groups = np.arange(X.shape[0]) // 10  # the grouped (MAP) path too
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        make("apsvm").fit(X * 1e30, y, groups=groups)
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        jaxrank.sweep(X * 1e30, y, model="apsvm", Cs=[1.0], cv=2, groups=groups)


@pytest.mark.parametrize("scale", [1e30, 2.0**-60])
def test_kernelrank_is_scale_covariant(scale):
    """KernelRank fits X / f (f a power of two): the units of X do not matter.

    Before, X * 1e30 gave coef_ = 0 and X * 1e-20 no ascent at all (U stayed
    at its start), without a word.
    """
    X, y = _data(n=200, d=3, seed=1)
    ref = make("kernelrank").fit(X, y)
    m = make("kernelrank").fit(X * scale, y)
    assert m.feature_scale_ != ref.feature_scale_
    assert m.objective_ > m.objective_history_[0]  # the ascent made progress
    auc = roc_auc_score(y, m.decision_function(X * scale))
    assert auc >= roc_auc_score(y, ref.decision_function(X)) - 0.01
    if math.log2(scale).is_integer():  # X / f is the same array: the same fit
        np.testing.assert_array_equal(m.objective_history_, ref.objective_history_)
        np.testing.assert_allclose(m.coef_ * scale, ref.coef_, rtol=1e-6)


@pytest.mark.parametrize("name", SVMS)
def test_unconverged_fit_warns_with_the_scale(name):
    """Issue 9 #6: badly scaled features stop at max_iter with a warning, never silently."""
    X, y = _data()
    X = X * np.array([1e4, 1.0, 1e-2])
    with pytest.warns(ConvergenceWarning, match=r"C \* max_i \|\|x_i\|\|\^2 = .* is large"):
        m = make(name, C=1e4).fit(X, y)
    assert not m.converged_


def _primal(name, m, X, y):
    """Objective of the fitted model recomputed in float64 from coef_ on the real data."""
    w = m.coef_[0].astype(np.float64)
    s = X @ w
    C = m.C
    if name == "svm":
        b = float(m.intercept_[0])
        yy = np.where(y > 0, 1.0, -1.0)
        pw = m.pos_weight
        if pw == "balanced":
            pw = np.sum(y <= 0) / np.sum(y > 0)
        c = np.where(y > 0, pw, 1.0)
        return 0.5 * (w @ w + b * b) + C * (c * np.maximum(0, 1 - yy * (s + b))).sum()
    if name == "apsvm":
        return 0.5 * w @ w + C * ref_ap_violation(s, y > 0)["hinge"]
    if name == "auc-svm":
        return 0.5 * w @ w + C * ref_auc_violation(s, y > 0)["hinge"]
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["apsvm", "svm", "auc-svm"])
def test_objective_is_that_of_coef_on_the_unpadded_data(name):
    """Padding rows, columns and tasks take no part: objective_ = F(coef_) on X."""
    X, y = _data(n=37, d=5)
    m = make(name).fit(X, y)
    assert m.dual_objective_ <= m.objective_ * (1 + 1e-6)
    np.testing.assert_allclose(m.objective_, _primal(name, m, X, y), rtol=1e-4)
    if name != "svm":
        return  # the batched driver's compile is costly: checked on the cheapest model
    # Several tasks (the batched driver, tasks padded to 8): the same for each.
    Y = np.stack([y, np.roll(y, 1), np.roll(y, 2)], 1)
    mm = make(name).fit(X, Y)
    assert mm.coef_.shape == (3, 5) and mm.objective_.shape == (3,)
    for t in range(3):
        one = jaxrank.ESTIMATORS[name](**FAST[name])
        one.coef_, one.intercept_ = mm.coef_[t : t + 1], mm.intercept_[t : t + 1]
        np.testing.assert_allclose(mm.objective_[t], _primal(name, one, X, Y[:, t]), rtol=1e-4)


@pytest.mark.parametrize("name", PLAIN + FIT_OTHERS)
def test_save_load_round_trip(name, tmp_path):
    X, _ = _data()
    m = fitted(name)
    jaxrank.save(m, tmp_path / "m.npz")
    back = jaxrank.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(_scores(name, back, X), _scores(name, m, X))
    with pytest.raises(FileExistsError):  # nothing a user gave is overwritten unasked
        jaxrank.save(m, tmp_path / "m.npz")


def test_column_y_saves_and_tampered_files_are_value_errors(tmp_path):
    """Issue 9 tracebacks: y of shape (n, 1) (ndarray in the JSON metadata) and metadata
    of the wrong JSON types (AttributeError) instead of the documented ValueError."""
    import json

    X, y = _data()
    m = make("svm").fit(X, y[:, None])
    path = tmp_path / "col.npz"
    jaxrank.save(m, path)
    np.testing.assert_array_equal(jaxrank.load(path).decision_function(X),
                                  m.decision_function(X))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("metadata")))
    bad_meta = [["a list"], meta | {"params": ["C", 1.0]}, meta | {"attributes": [1, 2]},
                meta | {"attributes": "coef_"}, meta | {"estimator": ["BinarySVM"]}]
    for i, bad in enumerate(bad_meta):
        p = tmp_path / f"bad{i}.npz"
        np.savez(p, metadata=np.array(json.dumps(bad)), **arrays)
        with pytest.raises(ValueError):
            jaxrank.load(p)
    p = tmp_path / "complex.npz"
    np.savez(p, metadata=np.array(json.dumps(meta)), **(arrays | {"coef_": arrays["coef_"] + 1j}))
    with pytest.raises(ValueError, match="complex|float"):
        jaxrank.load(p)
