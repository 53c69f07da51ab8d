"""Pair counts beyond int32 and long float32 sums (issue 9 #1) against float64 references.

``|P| |N|`` exceeds ``2^31`` from about ``10^5`` balanced samples: there the
ROC-area oracle, ``kernel_auc`` and the AUC SVM returned NaN, values far above
1, or zero weights with ``converged_=True`` before their pair counts and
normalisers were computed in the float dtype. The metrics at these sizes are
in ``test_metrics_large.py``; the AP kernels' int32 products in
``test_inference_adversarial.py`` (x64) and here in float32.
"""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from sklearn.metrics import roc_auc_score

import jaxrank
import reference
from jaxrank import inference, losses

with warnings.catch_warnings():
    # `slow` is selected with `-m slow` / deselected with `-m "not slow"`.
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    slow = pytest.mark.slow


def _auc_counts64(s, y):
    """Swapped pairs per positive (c) and per negative (d) of the ROC-area oracle, float64."""
    s = np.asarray(s, np.float64)
    sn, sp_ = np.sort(s[~y]), np.sort(s[y])
    c = (~y).sum() - np.searchsorted(sn, s[y] - 0.5, side="right")
    d = np.searchsorted(sp_, s[~y] + 0.5, side="left")
    return c, d


def _auc_violation64(s, y):
    """(loss, coef, hinge) of auc_most_violated in float64, O(n log n)."""
    s = np.asarray(s, np.float64)
    P, Nn = int(y.sum()), int((~y).sum())
    c, d = _auc_counts64(s, y)
    loss = c.sum() / (P * Nn)
    coef = np.zeros(len(s))
    coef[y] = 2 * c / (P * Nn)
    coef[~y] = -2 * d / (P * Nn)
    return loss, coef, loss - s @ coef


@pytest.mark.parametrize("n,rate", [
    (10**5, 0.5), (10**6, 0.03), pytest.param(10**7, 0.03, marks=slow)])
def test_auc_most_violated_matches_float64_counts(n, rate):
    """The issue's regime: |P||N| from 2.5e9 (10^5 balanced) to 3e12 (10^7, 3 % positives)."""
    rng = np.random.default_rng(n)
    y = rng.random(n) < rate
    assert y.sum() * (~y).sum() > 2**31
    s = rng.normal(size=n).astype(np.float32) + y
    r = inference.auc_most_violated(s, y)
    loss, coef, hinge = _auc_violation64(s, y)
    assert abs(float(r.loss) - loss) <= 1e-5 * loss
    got = np.asarray(r.coef, np.float64)
    np.testing.assert_allclose(got[y].sum(), coef[y].sum(), rtol=1e-4)
    np.testing.assert_allclose(got[~y].sum(), coef[~y].sum(), rtol=1e-4)
    np.testing.assert_allclose(got, coef, rtol=1e-4, atol=1e-6 * np.abs(coef).max())
    np.testing.assert_allclose(float(r.hinge), hinge, rtol=1e-4)


def test_aucsvm_fit_beyond_int32_pair_counts():
    """AUCSVM at 10^5 balanced samples: a real model (it returned w = 0, converged_=True).

    objective_ is recomputed in float64 from coef_ (no intercept: the
    ROC-area loss is shift invariant), and the ranking's AUC matches a
    least-squares direction's within 0.01.
    """
    n = 10**5
    rng = np.random.default_rng(3)
    y = rng.random(n) < 0.5
    X = rng.normal(size=(n, 2)) + np.outer(y, [1.0, -0.5])
    m = jaxrank.AUCSVM(C=1.0).fit(X, y)
    w = m.coef_[0].astype(np.float64)
    assert np.linalg.norm(w) > 0.1 and m.converged_
    s = X @ w
    _, _, hinge = _auc_violation64(s, y)
    np.testing.assert_allclose(m.objective_, 0.5 * w @ w + m.C * hinge, rtol=1e-3)
    ls = np.linalg.lstsq(np.c_[X, np.ones(n)], np.where(y, 1.0, -1.0), rcond=None)[0][:2]
    assert roc_auc_score(y, m.decision_function(X)) >= roc_auc_score(y, X @ ls) - 0.01


def test_ap_most_violated_at_1e5_samples_float32():
    """(j + k)(j + k - 1) reaches 1e10 for 10^5 negatives: the float32 hinge is Algorithm 1's."""
    n, P = 10**5, 24
    rng = np.random.default_rng(4)
    y = np.zeros(n, bool)
    y[rng.choice(n, P, replace=False)] = True
    s = (rng.normal(size=n) + 2.0 * y).astype(np.float32)
    r = inference.ap_most_violated(s, y)
    opt, pos, neg = reference.literal_algorithm1(s, y)  # float64, sorted orders
    s64 = s.astype(np.float64)
    Nn = n - P
    n_above = np.array([(opt <= a).sum() for a in range(1, P + 1)])
    a = np.arange(1, P + 1)
    loss = 1 - np.mean(a / (a + n_above))
    coef = np.zeros(n)
    coef[pos] = 2 * n_above / (P * Nn)
    coef[neg] = -2 * (P + 1 - opt) / (P * Nn)
    np.testing.assert_allclose(float(r.loss), loss, rtol=1e-5)
    np.testing.assert_allclose(float(r.hinge), loss - s64 @ coef, rtol=1e-4)


def test_kernel_auc_gradient_at_1e5_samples_matches_float64():
    """10^7 pairs summed in float32 blocks: value and gradient within float32 rounding."""
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


@slow
def test_kernel_auc_beyond_int32_pair_counts():
    """|P| |N| > 2^31 (2.2e9 pairs, the fewest evaluations that get there): equal to
    scikit-learn's AUC (float64).

    Integer scores and a tiny bandwidth make ``Phi`` exactly 0, 1/2 or 1, so
    ``U`` is the AUC with ties counted 1/2 (it was 0 with a zero gradient).
    """
    n, P = 10_000_000, 216
    assert P * (n - P) > 2**31
    rng = np.random.default_rng(0)
    y = np.zeros(n, np.int8)
    y[rng.choice(n, P, replace=False)] = 1
    s = (rng.integers(0, 1000, n) + 3 * y).astype(np.float32)
    want = roc_auc_score(y, s)
    u, g = jax.value_and_grad(
        lambda s: losses.kernel_auc(s, y, kernel="sigmoid", bandwidth=1e-3, block_size=8))(
        jnp.asarray(s))
    assert abs(float(u) - want) < 1e-5, (float(u), want)
    g = np.asarray(g, np.float64)
    # Tied (positive, negative) pairs have Phi' = 1/(4h): a nonzero, finite
    # gradient whose entries sum to 0 (U is shift invariant).
    assert np.all(np.isfinite(g)) and np.any(g != 0)
    assert abs(g.sum()) <= 1e-4 * np.abs(g).sum()
