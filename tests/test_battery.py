"""A rax-style battery: every public function and estimator on the same hard inputs.

Functions (``FUNCS``): ``jaxrank.metrics.average_precision`` / ``roc_auc``, the
public inference wrappers (``ap_most_violated``, ``zero_one_most_violated``,
``auc_most_violated``), the losses (``ap_hinge_loss``, ``hinge_loss``,
``kernel_auc``, ``kernel_auc_loss`` with each kernel) and ``structured_hinge``
of the three built-in oracles. Each runs on: random lists, one positive, tied
and all-tied scores, extreme scores (``1e30``), nearly tied scores, masked
items (with garbage scores under the mask), all items masked, one class, a
NaN score; eagerly and under ``jit``, in float32 and float64, with batch axes;
values against independent float64 NumPy references (``reference.py``,
scikit-learn, brute force) and gradients against references or finite
differences.

Estimators (``jaxrank.ESTIMATORS``): the label rule, bad labels and features,
one positive, float32 vs float64 ``X``, sparse vs dense, constant and badly
scaled features (an error or a warning, never a silent ``w = 0``),
unconverged fits (``ConvergenceWarning``), and ``objective_`` recomputed from
``coef_`` on the unpadded data.

Large-``n`` tests (``slow``, run by default): kernel_auc beyond ``2^31``
(positive, negative) pairs against scikit-learn, auc_most_violated at ``10^7``
samples against a float64 NumPy count.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.special
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import roc_auc_score

import jaxrank
import reference
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
# The functions of the battery.
# ---------------------------------------------------------------------------


def _violation(r):
    return {"loss": r.loss, "coef": r.coef, "hinge": r.hinge}


def _sh(oracle):
    """structured_hinge of a built-in oracle form, on (positive, where) problems."""
    return losses.structured_hinge(lambda S, p: oracle(S, p[0], p[1]))


_SH = {
    "ap": _sh(lambda S, pos, w: inference.ap_oracle(S, pos, w, kp=S.shape[-1])),
    "zero_one": _sh(inference.zero_one_oracle),
    "auc": _sh(inference.auc_oracle),
}


def _sh_call(kind):
    def call(s, y, where):
        w = jnp.ones(s.shape, bool) if where is None else where
        return jnp.asarray(y) > 0, w

    def value(s, y, where):
        return _SH[kind](s, call(s, y, where))
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
    structured_hinge, which is NaN for any NaN in S, by its contract).
    """

    name: str
    call: Callable
    ref: Callable
    value: Callable | None = None
    grad_ref: Callable | None = None
    empty: float = 0.0
    one_class: bool = False
    masked_garbage: bool = True
    rtol: float = 2e-5


def _value_fn(f):
    return lambda s, y, where: {"value": f(s, y, where)}


_kauc = {k: (lambda s, y, where, k=k, h=h: losses.kernel_auc(s, y, where=where, kernel=k,
                                                             bandwidth=h))
         for k, h in (("gaussian", 0.7), ("sigmoid_like", 0.5), ("sigmoid", 0.3))}
_KH = {"gaussian": 0.7, "sigmoid_like": 0.5, "sigmoid": 0.3}


def _ap_hinge(s, y, where):
    return losses.ap_hinge_loss(s, y, where=where)


def _hinge(s, y, where):
    return losses.hinge_loss(s, y, where=where)


def _kloss(s, y, where):
    return losses.kernel_auc_loss(s, y, where=where, kernel="gaussian", bandwidth=0.7)


FUNCS = [
    Fn("average_precision", _value_fn(lambda s, y, w: metrics.average_precision(s, y, where=w)),
       ref_ap, empty=float("nan")),
    Fn("roc_auc", _value_fn(lambda s, y, w: metrics.roc_auc(s, y, where=w)), ref_auc,
       empty=float("nan")),
    Fn("ap_most_violated", lambda s, y, w: _violation(inference.ap_most_violated(s, y, where=w)),
       ref_ap_violation),
    Fn("zero_one_most_violated",
       lambda s, y, w: _violation(inference.zero_one_most_violated(s, y, where=w)),
       ref_zero_one, one_class=True),
    Fn("auc_most_violated",
       lambda s, y, w: _violation(inference.auc_most_violated(s, y, where=w)),
       ref_auc_violation),
    Fn("ap_hinge_loss", _value_fn(_ap_hinge), lambda s, y: {"value": ref_ap_violation(s, y)["hinge"]},
       value=_ap_hinge, grad_ref=lambda s, y: -ref_ap_violation(s, y)["coef"]),
    Fn("hinge_loss", _value_fn(_hinge), lambda s, y: {"value": ref_zero_one(s, y)["hinge"]},
       value=_hinge, grad_ref=lambda s, y: -ref_zero_one(s, y)["coef"], one_class=True),
    *[Fn(f"kernel_auc[{k}]", _value_fn(_kauc[k]), ref_kernel_auc(k, _KH[k]), value=_kauc[k],
         grad_ref=ref_grad_fd(ref_kernel_auc(k, _KH[k])), rtol=1e-4) for k in _KH],
    Fn("kernel_auc_loss", _value_fn(_kloss),
       lambda s, y: {"value": 1 - ref_kernel_auc("gaussian", 0.7)(s, y)["value"]}, value=_kloss,
       grad_ref=lambda s, y: -ref_grad_fd(ref_kernel_auc("gaussian", 0.7))(s, y), rtol=1e-4),
    *[Fn(f"structured_hinge[{k}]", _value_fn(_sh_call(k)), r, value=_sh_call(k), grad_ref=g,
         one_class=(k == "zero_one"), masked_garbage=False)
      for k, r, g in (
          ("ap", lambda s, y: {"value": ref_ap_violation(s, y)["hinge"]},
           lambda s, y: -ref_ap_violation(s, y)["coef"]),
          ("zero_one", lambda s, y: {"value": ref_zero_one(s, y)["hinge"]},
           lambda s, y: -ref_zero_one(s, y)["coef"]),
          ("auc", lambda s, y: {"value": ref_auc_violation(s, y)["hinge"]},
           lambda s, y: -ref_auc_violation(s, y)["coef"]))],
]
IDS = [f.name for f in FUNCS]
DIFFERENTIABLE = [f for f in FUNCS if f.value is not None]
DIFF_IDS = [f.name for f in DIFFERENTIABLE]
# structured_hinge and the loss wrappers validate nothing themselves beyond the
# wrappers they call; structured_hinge validates nothing at all (it is a
# combinator for jitted training loops).
VALIDATED = [f for f in FUNCS if not f.name.startswith("structured_hinge")]
VAL_IDS = [f.name for f in VALIDATED]


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


CASES = ["random", "one_positive", "ties", "all_tied", "extreme", "nearly_tied"]


def _out(fn, s, y, where=None, jit=False):
    f = jax.jit(fn.call) if jit else fn.call
    return {k: np.asarray(v, np.float64) for k, v in f(jnp.asarray(s), jnp.asarray(y), where).items()}


def _assert_close(got, want, rtol, scale=1.0, what=""):
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=rtol, atol=rtol * scale, err_msg=f"{what} {k}")


def _ref_scale(s):
    return max(1.0, float(np.max(np.abs(s))))


# ---------------------------------------------------------------------------
# Function battery.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_matches_float64_reference(fn, case):
    s, y = _case(case)
    want = fn.ref(s, y > 0)
    got = _out(fn, s, y)
    # Values built from s @ coef scale with |s| (hinges at 1e30).
    _assert_close(got, want, fn.rtol, _ref_scale(s), f"{fn.name}/{case}")
    for v in got.values():
        assert np.all(np.isfinite(v)), f"{fn.name}/{case}: non-finite output"


@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_brute_force_on_random_lists(fn):
    for seed in range(1, 4):
        s, y = _case("random", seed)
        _assert_close(_out(fn, s, y, jit=True), fn.ref(s, y > 0), fn.rtol, 1.0, fn.name)


def test_ap_reference_is_the_brute_force_maximum():
    """The literal Algorithm 1 reference equals the max over all 7! rankings."""
    for case in ("random", "ties", "one_positive"):
        s, y = _case(case)
        np.testing.assert_allclose(ref_ap_violation(s, y > 0)["hinge"],
                                   reference.brute_force_ap_violation(s, y > 0), rtol=1e-12)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_masked_items_are_removed(fn, jit):
    s, y = _case("random")
    where = np.ones(N, bool)
    where[[1, 3]] = False  # one negative and one positive out
    removed = _out(fn, s[where], y[where], jit=jit)
    for garbage in ((np.nan, np.inf, -1e30) if fn.masked_garbage else (0.0, 5.0)):
        sg = s.copy()
        sg[~where] = garbage
        got = _out(fn, sg, y, jnp.asarray(where), jit=jit)
        for k, v in removed.items():
            if k == "coef":
                np.testing.assert_allclose(got[k][where], v, rtol=1e-6, atol=1e-7)
                assert np.all(got[k][~where] == 0), f"{fn.name}: coef of masked items"
            else:
                np.testing.assert_allclose(got[k], v, rtol=1e-6, atol=1e-7, err_msg=fn.name)
        if fn.value is not None:
            g = np.asarray(jax.grad(fn.value)(jnp.asarray(sg), jnp.asarray(y), jnp.asarray(where)))
            assert np.all(np.isfinite(g)) and np.all(g[~where] == 0), f"{fn.name}: {g}"


@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_all_masked_under_jit(fn):
    s, y = _case("random")
    where = jnp.zeros(N, bool)
    got = _out(fn, s, y, where, jit=True)
    for k, v in got.items():
        if k == "coef":
            assert np.all(v == 0)
        elif math.isnan(fn.empty):
            assert np.isnan(v), f"{fn.name}.{k} = {v}"
        else:
            assert v == fn.empty, f"{fn.name}.{k} = {v}"
    if fn.value is not None:
        g = np.asarray(jax.jit(jax.grad(fn.value))(jnp.asarray(s), jnp.asarray(y), where))
        assert np.all(g == 0), f"{fn.name}: gradient {g}"


@pytest.mark.parametrize("fn", VALIDATED, ids=VAL_IDS)
def test_all_masked_eager_is_an_error(fn):
    s, y = _case("random")
    with pytest.raises(ValueError):
        fn.call(s, y, np.zeros(N, bool))


@pytest.mark.parametrize("positive", [True, False])
@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_one_class(fn, positive):
    s, _ = _case("random")
    y = np.full(N, int(positive))
    got = _out(fn, s, y, jit=True)
    if fn.one_class:
        _assert_close(got, fn.ref(s, y > 0), fn.rtol, 1.0, fn.name)
        if fn in VALIDATED:
            _assert_close(_out(fn, s, y), fn.ref(s, y > 0), fn.rtol, 1.0, fn.name)
        return
    for k, v in got.items():
        if fn.name == "average_precision" and positive:
            assert v == 1.0  # documented: a list of positives only has AP 1
        elif math.isnan(fn.empty):
            assert np.isnan(v)
        else:
            assert np.all(v == 0), f"{fn.name}.{k} = {v}"
    if fn in VALIDATED:
        with pytest.raises(ValueError, match="positive|negative|class"):
            fn.call(s, y, None)


@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_nan_score_gives_nan_under_jit_and_an_error_eagerly(fn):
    s, y = _case("random")
    for i in (0, 1):  # a positive, a negative
        sn = s.copy()
        sn[i] = np.nan
        got = _out(fn, sn, y, jit=True)
        for k, v in got.items():
            assert np.all(np.isnan(v)), f"{fn.name}.{k} = {v} with a NaN score"
        if fn.value is not None:
            g = np.asarray(jax.jit(jax.grad(fn.value))(jnp.asarray(sn), jnp.asarray(y), None))
            assert np.all(np.isnan(g)), f"{fn.name}: gradient {g} where the value is NaN"
        if fn in VALIDATED:
            with pytest.raises(ValueError, match="NaN"):
                fn.call(sn, y, None)
    # A batch: only the list with the NaN is NaN (vmap keeps lists apart).
    sb = np.stack([s, s])
    sb[1, 2] = np.nan
    got = {k: np.asarray(v) for k, v in jax.jit(fn.call)(jnp.asarray(sb), jnp.asarray(
        np.stack([y, y])), None).items()} if not fn.name.startswith("structured") else None
    if got is not None:
        for k, v in got.items():
            assert np.all(np.isfinite(v[0])) and np.all(np.isnan(v[1])), f"{fn.name}.{k}"


@pytest.mark.parametrize("case", ["random", "ties", "extreme"])
@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_jit_matches_eager(fn, case):
    s, y = _case(case)
    eager, jitted = _out(fn, s, y), _out(fn, s, y, jit=True)
    for k in eager:
        np.testing.assert_allclose(jitted[k], eager[k], rtol=1e-6, atol=1e-6 * _ref_scale(s))


@pytest.mark.parametrize("fn", FUNCS, ids=IDS)
def test_float32_matches_float64(fn, x64):
    for case in ("random", "ties", "one_positive"):
        s, y = _case(case)
        out32 = fn.call(jnp.asarray(s, jnp.float32), jnp.asarray(y), None)
        out64 = fn.call(jnp.asarray(s, jnp.float64), jnp.asarray(y), None)
        for k in out32:
            assert jnp.asarray(out32[k]).dtype == jnp.float32, f"{fn.name}.{k}"
            assert jnp.asarray(out64[k]).dtype == jnp.float64, f"{fn.name}.{k}"
            np.testing.assert_allclose(np.asarray(out32[k], np.float64), np.asarray(out64[k]),
                                       rtol=fn.rtol, atol=fn.rtol, err_msg=f"{fn.name}/{case}")
        # float64 is the reference precision: 1e-9.
        _assert_close({k: np.asarray(v) for k, v in out64.items()}, fn.ref(s, y > 0), 1e-9,
                      1.0, f"{fn.name}/{case} float64")


@pytest.mark.parametrize("fn", [f for f in FUNCS if not f.name.startswith("structured")],
                         ids=[f.name for f in FUNCS if not f.name.startswith("structured")])
def test_batch_axes_match_one_list_at_a_time(fn):
    rng = np.random.default_rng(3)
    S = rng.normal(size=(2, 3, N)).astype(np.float32)
    Y = np.broadcast_to(_labels(), S.shape).copy()
    W = np.ones(S.shape, bool)
    W[0, 1, [2, 5]] = False
    batched = {k: np.asarray(v) for k, v in fn.call(jnp.asarray(S), jnp.asarray(Y),
                                                     jnp.asarray(W)).items()}
    for i in range(2):
        for j in range(3):
            one = _out(fn, S[i, j], Y[i, j], jnp.asarray(W[i, j]))
            for k, v in one.items():
                np.testing.assert_allclose(batched[k][i, j], v, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fn", DIFFERENTIABLE, ids=DIFF_IDS)
def test_gradients_are_finite_and_match_the_reference(fn, case):
    s, y = _case(case)
    g = np.asarray(jax.jit(jax.grad(fn.value))(jnp.asarray(s), jnp.asarray(y), None))
    assert np.all(np.isfinite(g)), f"{fn.name}/{case}: {g}"
    if case in ("ties", "all_tied", "nearly_tied") and not fn.name.startswith("kernel"):
        return  # piecewise linear at a kink (a margin of exactly 1): any subgradient
    if fn.name.startswith("kernel") and case in ("extreme", "nearly_tied"):
        # Finite differences of width 1e-6 are meaningless at 1e30 and
        # between float32 scores 1e-6 apart; check the value only (above).
        return
    with jax.enable_x64(True):
        g64 = np.asarray(jax.grad(fn.value)(jnp.asarray(s, jnp.float64), jnp.asarray(y), None))
    want = fn.grad_ref(s.astype(np.float64), y > 0)
    np.testing.assert_allclose(g64, want, rtol=1e-5, atol=1e-7, err_msg=f"{fn.name}/{case}")
    np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-5, err_msg=f"{fn.name}/{case} f32")


def test_ap_hinge_gradient_is_minus_the_coefficients():
    """Issue 9 #4: jax.grad(ap_hinge_loss) is -coef where defined, NaN where the loss is."""
    s, y = _case("random")
    r = inference.ap_most_violated(s, y)
    np.testing.assert_array_equal(jax.grad(losses.ap_hinge_loss)(jnp.asarray(s), y), -r.coef)
    s[4] = np.nan
    g = jax.jit(jax.grad(losses.ap_hinge_loss))(jnp.asarray(s), y)
    assert np.all(np.isnan(np.asarray(g)))


# ---------------------------------------------------------------------------
# Large n (int32 pair counts, float32 accumulation).
# ---------------------------------------------------------------------------


@pytest.mark.slow
def test_kernel_auc_beyond_int32_pair_counts():
    """|P| |N| > 2^31 at 10^7 samples: equal to scikit-learn's AUC (float64).

    Integer scores and a tiny bandwidth make ``Phi`` exactly 0, 1/2 or 1, so
    ``U`` is the AUC with ties counted 1/2. 216 positives keep the pair loop
    (``P x n`` evaluations) at 2.2e9.
    """
    n, P = 10_000_000, 216
    assert P * (n - P) > 2**31
    rng = np.random.default_rng(0)
    y = np.zeros(n, np.int8)
    y[rng.choice(n, P, replace=False)] = 1
    s = (rng.integers(0, 1000, n) + 3 * y).astype(np.float32)
    want = roc_auc_score(y, s)
    u, g = jax.value_and_grad(
        lambda s: losses.kernel_auc(s, y, kernel="sigmoid", bandwidth=1e-3, block_size=2))(
        jnp.asarray(s))
    assert abs(float(u) - want) < 1e-5, (float(u), want)
    g = np.asarray(g, np.float64)
    # Tied (positive, negative) pairs have Phi' = 1/(4h): a nonzero, finite
    # gradient whose entries sum to 0 (U is shift invariant).
    assert np.all(np.isfinite(g)) and np.any(g != 0)
    assert abs(g.sum()) <= 1e-4 * np.abs(g).sum()


@pytest.mark.slow
def test_auc_most_violated_at_ten_million_samples():
    """The issue's case (10^7 samples, 3 % positives, |P||N| ~ 3e12) against float64 counts."""
    n = 10_000_000
    rng = np.random.default_rng(1)
    y = rng.random(n) < 0.03
    s = rng.normal(size=n).astype(np.float32) + y
    r = inference.auc_most_violated(s, y)
    s64 = s.astype(np.float64)
    sn, sp_ = np.sort(s64[~y]), np.sort(s64[y])
    P, Nn = y.sum(), (~y).sum()
    c = Nn - np.searchsorted(sn, s64[y] - 0.5, side="right")  # negatives swapped per positive
    d = np.searchsorted(sp_, s64[~y] + 0.5, side="left")  # positives swapped per negative
    loss = c.sum() / (P * Nn)
    assert abs(float(r.loss) - loss) <= 1e-5 * loss
    coef = np.asarray(r.coef, np.float64)
    np.testing.assert_allclose(coef[y].sum(), 2 * loss, rtol=1e-4)
    np.testing.assert_allclose(coef[~y].sum(), -2 * d.sum() / (P * Nn), rtol=1e-4)
    hinge = loss - (s64 - s64.mean()) @ coef
    np.testing.assert_allclose(float(r.hinge), hinge, rtol=1e-4)


def test_kernel_auc_gradient_at_1e5_samples_matches_float64():
    n, P, h = 100_000, 100, 0.5
    rng = np.random.default_rng(2)
    y = np.zeros(n, bool)
    y[rng.choice(n, P, replace=False)] = True
    s = (rng.normal(size=n) + 0.5 * y).astype(np.float32)
    u, g = jax.value_and_grad(
        lambda s: losses.kernel_auc(s, y, kernel="gaussian", bandwidth=h))(jnp.asarray(s))
    s64 = s.astype(np.float64)
    z = (s64[y][:, None] - s64[~y][None, :]) / h  # 1e7 pairs
    dphi = np.exp(-0.25 * z * z) / math.sqrt(4 * math.pi) / h / z.size
    want_g = np.zeros(n)
    want_g[y] = dphi.sum(1)
    want_g[~y] = -dphi.sum(0)
    np.testing.assert_allclose(float(u), scipy.special.ndtr(z / math.sqrt(2)).mean(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g), want_g, rtol=1e-3, atol=1e-6 * np.abs(want_g).max())


# ---------------------------------------------------------------------------
# Estimator battery.
# ---------------------------------------------------------------------------

# Small, fast settings shared with test_sklearn_checks.py (same static
# arguments: one compiled program per estimator and shape bucket).
FAST = {
    "apsvm": dict(C=10.0, max_iter=30),
    "svm": dict(C=1.0, max_iter=30),
    "apsvm-appx": dict(C=10.0, max_iter=30),
    "auc-svm": dict(C=10.0, max_iter=30),
    "kernelrank": dict(max_iter=10),
}
assert set(FAST) == set(jaxrank.ESTIMATORS), "a registered estimator has no FAST settings"
EST = sorted(FAST)
SVMS = [k for k in EST if issubclass(jaxrank.ESTIMATORS[k], jaxrank.StructuredSVM)]


def make(name, **kw):
    return jaxrank.ESTIMATORS[name](**{**FAST[name], **kw})


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 4 == 0).astype(int)
    X = rng.normal(size=(n, d)) + 1.5 * y[:, None] * np.array([1.0, -0.5, 0.0])[:d]
    return X, y


@pytest.mark.parametrize("name", EST)
def test_one_label_rule(name):
    """Any two label values, the larger positive: identical models (scikit-learn classes_)."""
    X, y = _data()
    base = make(name).fit(X, y)
    for enc in (np.where(y > 0, 1, -1), y + 1, y.astype(bool), np.where(y > 0, "pos", "neg"),
                y.astype(float)):
        m = make(name).fit(X, enc)
        np.testing.assert_array_equal(m.coef_, base.coef_)
        assert m.classes_[1] == enc[y > 0][0] and m.classes_[0] == enc[y == 0][0]
        assert set(np.unique(m.predict(X))) <= set(m.classes_)


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
            make(name).fit(X, bad)


@pytest.mark.parametrize("name", EST)
def test_bad_features_are_errors(name):
    X, y = _data()
    for bad in (np.nan, np.inf, 1e39):  # 1e39 overflows float32
        Xb = X.copy()
        Xb[3, 1] = bad
        with pytest.raises(ValueError, match="NaN|infinity|too large"):
            make(name).fit(Xb, y)
    with pytest.raises(NotFittedError):
        make(name).predict(X)
    with pytest.raises(NotFittedError):
        make(name).decision_function(X)


@pytest.mark.parametrize("name", EST)
def test_one_positive_is_ranked_first(name):
    X, y = _data()
    y = np.zeros(40, int)
    y[7] = 1
    X[7] = [4.0, -2.0, 0.0]
    m = make(name).fit(X, y)
    s = m.decision_function(X)
    assert np.argmax(s) == 7 and m.score(X, y) == 1.0


@pytest.mark.parametrize("name", EST)
def test_float32_float64_and_sparse_X_give_the_same_model(name):
    X, y = _data()
    m64 = make(name).fit(X, y)
    m32 = make(name).fit(X.astype(np.float32), y)
    msp = make(name).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(m32.coef_, m64.coef_)
    if name == "kernelrank":  # its LDA start is computed by scipy.sparse on the host
        np.testing.assert_allclose(msp.coef_, m64.coef_, rtol=1e-4, atol=1e-6)
        return
    # Small sparse inputs are densified (same program): bitwise equal too.
    np.testing.assert_array_equal(msp.coef_, m64.coef_)
    np.testing.assert_array_equal(msp.decision_function(sp.csr_matrix(X)), m64.decision_function(X))


@pytest.mark.parametrize("name", EST)
def test_constant_features_warn_instead_of_a_silent_non_ranking(name):
    X = np.ones((40, 3))
    y = (np.arange(40) % 4 == 0).astype(int)
    with pytest.warns(UserWarning, match="does not rank"):
        make(name).fit(X, y)


@pytest.mark.parametrize("name", SVMS)
@pytest.mark.parametrize("scale", [1e30, 1e-20])
def test_features_outside_the_float32_range_are_errors(name, scale):
    """Issue 9 #6: features near 1e30 gave w = 0 (and 1e-20 a tie) without a word."""
    X, y = _data()
    with pytest.raises(ValueError, match="float32.*Rescale X"):
        make(name).fit(X * scale, y)


@pytest.mark.parametrize("scale", [1e30, 1e-20, 2.0**40, 2.0**-60])
def test_kernelrank_is_scale_covariant(scale):
    """KernelRank fits X / f (f a power of two): the units of X do not matter.

    On main, X * 1e30 gave coef_ = 0 and X * 1e-20 no ascent at all (U stayed
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
        return 0.5 * (w @ w + b * b) + C * np.maximum(0, 1 - yy * (s + b)).sum()
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
    # Several tasks (the batched driver, tasks padded to 8): the same for each.
    Y = np.stack([y, np.roll(y, 1), np.roll(y, 2)], 1)
    mm = make(name).fit(X, Y)
    assert mm.coef_.shape == (3, 5) and mm.objective_.shape == (3,)
    for t in range(3):
        one = jaxrank.ESTIMATORS[name](**FAST[name])
        one.coef_, one.intercept_ = mm.coef_[t : t + 1], mm.intercept_[t : t + 1]
        np.testing.assert_allclose(mm.objective_[t], _primal(name, one, X, Y[:, t]), rtol=1e-4)
