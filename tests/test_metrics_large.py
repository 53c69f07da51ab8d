"""Metrics at 1e5-1e7 items against scikit-learn (float64).

Regime: |P||N| > 2^31 (int32 overflow of the pair count) and sums of up to 1e7
float32 terms. Tolerance, from the error analysis in jaxrank._src.metrics:
each positive's term has relative error <= 5 eps (int->float conversions and
one division), the fan-in-8 pairwise sum adds <= 7 eps per level over
L = ceil(log8 n) levels, and the final division by |P| 2 eps:
rtol = (7 + 7 L) eps with eps = 2^-24 (2.9e-6 at 1e5, 3.8e-6 at 1e7).
Segmented sums (prefix scan) add 2 ceil(log2 n) eps.
The float64 reference's own error (~n * 1e-16) is negligible.
"""

import math
import warnings

import jax
import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from jaxrank.metrics import average_precision, roc_auc

EPS = 2.0**-24

with warnings.catch_warnings():
    # `slow` is not registered in pyproject (no conftest change); select it
    # with `-m slow` / deselect with `-m "not slow"`. It runs by default.
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    slow = pytest.mark.slow


def _rtol(n, segmented=False):
    levels = math.ceil(math.log(n, 8))
    extra = 2 * math.ceil(math.log2(n)) if segmented else 0
    return (7 + 7 * levels + extra) * EPS


def _data(n, rate, ties, seed):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < rate
    noise = rng.normal(size=n)
    # Informative scores (AUC ~ 0.76); "ties": about 13 distinct score levels.
    s = y + (np.round(2 * noise) if ties else noise)
    return s.astype(np.float32), y


CASES = [
    pytest.param(
        n,
        rate,
        ties,
        marks=[slow] if n >= 10**7 else [],
        id=f"n{n:.0e}-pos{rate:.0%}-{'ties' if ties else 'distinct'}",
    )
    for n in (10**5, 10**6, 10**7)
    for rate in (0.03, 0.5)
    for ties in (False, True)
]


@pytest.mark.parametrize("n,rate,ties", CASES)
def test_large_lists_equal_sklearn(n, rate, ties):
    s, y = _data(n, rate, ties, seed=n % 997 + int(100 * rate) + ties)
    n_pos = int(y.sum())
    if n >= 10**6 or rate == 0.5:
        assert n_pos * (n - n_pos) > 2**31  # the regime that overflowed int32
    rtol = _rtol(n)
    ap = float(jax.jit(average_precision)(s, y))
    np.testing.assert_allclose(ap, average_precision_score(y, s), rtol=rtol, atol=0)
    auc = float(jax.jit(roc_auc)(s, y))
    np.testing.assert_allclose(auc, roc_auc_score(y, s), rtol=rtol, atol=0)


def _map_loop(s, y, q):
    aps, aucs = [], []
    order = np.argsort(q, kind="stable")
    bounds = np.flatnonzero(np.diff(q[order])) + 1
    for idx in np.split(order, bounds):
        if y[idx].any():
            aps.append(average_precision_score(y[idx], s[idx]))
            if not y[idx].all():
                aucs.append(roc_auc_score(y[idx], s[idx]))
    return np.mean(aps), np.mean(aucs)


@slow
def test_large_segmented_equals_a_loop_over_queries():
    # 1e6 items: one query of 2e5 items and ~1600 small ones (LETOR-like,
    # many without a positive), shuffled, ids not contiguous.
    rng = np.random.default_rng(42)
    n = 10**6
    sizes = np.r_[200_000, rng.integers(1, 1000, 1600)]
    sizes = sizes[np.cumsum(sizes) <= n]
    sizes = np.r_[sizes, n - sizes.sum()]
    q = np.repeat(rng.permutation(10**7)[: len(sizes)], sizes).astype(np.int32)
    rate = np.repeat(
        rng.random(len(sizes)) * 0.1 * (rng.random(len(sizes)) < 0.8), sizes
    )
    y = rng.random(n) < rate
    s = (y + np.round(2 * rng.normal(size=n))).astype(np.float32)
    perm = rng.permutation(n)
    s, y, q = s[perm], y[perm], q[perm]
    ref_map, ref_auc = _map_loop(s, y, q)
    rtol = _rtol(n, segmented=True)
    np.testing.assert_allclose(
        jax.jit(average_precision)(s, y, segments=q), ref_map, rtol=rtol
    )
    np.testing.assert_allclose(jax.jit(roc_auc)(s, y, segments=q), ref_auc, rtol=rtol)
    # One segment holding everything: the segmented path at full size.
    one = np.zeros(n, np.int32)
    np.testing.assert_allclose(
        jax.jit(roc_auc)(s, y, segments=one), roc_auc_score(y, s), rtol=rtol
    )
    np.testing.assert_allclose(
        jax.jit(average_precision)(s, y, segments=one),
        average_precision_score(y, s),
        rtol=rtol,
    )
