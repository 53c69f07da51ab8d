"""Contingency-table oracles (F1, PRBEP, Prec@k, Rec@k) and their metrics.

References are literal: every labelling of a short list (brute force), every
contingency table of a longer one, every tie order of a ranking, and
scikit-learn's precision / recall / F1.
"""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from jaxrank.inference import (
    f1_oracle,
    k_from_fraction,
    prbep_oracle,
    precision_at_k_oracle,
    recall_at_k_oracle,
)
from jaxrank.metrics import f1_at_zero, prbep, precision_at_k, recall_at_k

KINDS = ("f1", "prbep", "prec", "rec")


def call(kind, s, y, w, k=None):
    if kind == "f1":
        return f1_oracle(s, y, w)
    if kind == "prbep":
        return prbep_oracle(s, y, w)
    if kind == "prec":
        return precision_at_k_oracle(s, y, w, k)
    return recall_at_k_oracle(s, y, w, k)


def delta_table(kind, a, b, P, n, k):
    """Literal Delta and admissibility of tables (a, b) (module docstring)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if kind == "f1":
        f1 = np.where(a > 0, 2 * a / np.maximum(2 * a + b + (P - a), 1), 0.0)
        return 1 - f1, np.ones(a.shape, bool)
    if kind == "prbep":
        return 1 - a / P, a + b == P
    if kind == "prec":
        kk = min(max(k, 1), P)
        return 1 - a / np.maximum(a + b, 1), a + b >= kk
    kk = min(max(k, P), n)
    return 1 - a / P, a + b <= kk


def brute_force(kind, s, y, w, k):
    """max over all 2^m labellings of the valid items of Delta - <s, coef_y>."""
    idx = np.flatnonzero(w)
    m = idx.size
    Y = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(bool)
    yv, sv = y[idx], s[idx]
    P, n = int(yv.sum()), m
    a = (Y & yv).sum(1)
    b = (Y & ~yv).sum(1)
    delta, ok = delta_table(kind, a, b, P, n, k)
    coef = (np.where(yv, 1.0, -1.0) - np.where(Y, 1.0, -1.0)) / (2 * n)
    val = np.where(ok, delta - coef @ sv, -np.inf)
    return val.max()


def random_list(rng, n, ties=True):
    while True:
        # Several score scales, so that loss and score terms trade off.
        scale = rng.choice([0.03, 0.3, 1.0, 3.0])
        s = scale * (rng.integers(-3, 4, n) if ties else rng.normal(size=n))
        y = rng.random(n) < rng.uniform(0.2, 0.8)
        w = rng.random(n) < 0.85
        if (y & w).any() and (~y & w).any():
            return s, y, w


def sklearn_metric(kind, y_true, y_pred):
    if kind == "f1":
        return f1_score(y_true, y_pred, zero_division=0)
    if kind == "rec":
        return recall_score(y_true, y_pred, zero_division=0)
    return precision_score(y_true, y_pred, zero_division=0)  # prbep, prec


# --------------------------------------------------------------------------
# exactness
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_attains_the_brute_force_maximum(kind, x64):
    rng = np.random.default_rng(["f1", "prbep", "prec", "rec"].index(kind))
    for trial in range(40):
        n = 10
        s, y, w = random_list(rng, n, ties=trial % 4 != 3)
        P, m = int((y & w).sum()), int(w.sum())
        k = int(rng.integers(-1, m + 3))  # out-of-range values included
        v = call(kind, jnp.asarray(s), jnp.asarray(y), jnp.asarray(w), k)
        loss, coef, aux, hinge = (np.asarray(t) for t in v)
        best = brute_force(kind, s, y, w, k)
        np.testing.assert_allclose(hinge, best, atol=1e-12)
        np.testing.assert_allclose(loss - s @ coef, best, atol=1e-12)
        # aux is an admissible labelling, coef and loss are its own.
        assert not aux[~w].any() and not coef[~w].any()
        a, b = int((aux & y & w).sum()), int((aux & ~y & w).sum())
        delta, ok = delta_table(kind, a, b, P, m, k)
        assert ok
        np.testing.assert_allclose(loss, delta, atol=1e-15)
        want = (np.where(y, 1.0, -1.0) - np.where(aux, 1.0, -1.0)) / (2 * m)
        np.testing.assert_allclose(coef, np.where(w, want, 0.0), atol=1e-15)
        # The loss is 1 - the measure of the labelling (scikit-learn).
        np.testing.assert_allclose(loss, 1 - sklearn_metric(kind, y[w], aux[w]), atol=1e-12)


def grid_maximum(kind, s, y, k):
    """max over every contingency table (a, b) with top-a / top-b (Algorithm 2)."""
    sp = np.sort(s[y])[::-1]
    sn = np.sort(s[~y])[::-1]
    P, N = sp.size, sn.size
    n = P + N
    Sp = np.concatenate([[0], np.cumsum(sp)])
    Sn = np.concatenate([[0], np.cumsum(sn)])
    a, b = np.meshgrid(np.arange(P + 1), np.arange(N + 1), indexing="ij")
    delta, ok = delta_table(kind, a, b, P, n, k)
    val = delta + (Sn[b] - (Sp[P] - Sp[a])) / n
    return np.where(ok, val, -np.inf).max()


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_equals_the_full_table_scan_on_longer_lists(kind, x64):
    rng = np.random.default_rng(7)
    for trial in range(6):
        n = 400
        y = rng.random(n) < (0.05, 0.3, 0.6)[trial % 3]
        # Scores of the order n / P (where loss and score terms trade off and
        # the best tables are interior), on a grid of 1/4 (many ties).
        scale = (0.3, 1.0, 3.0)[trial % 3] * n / y.sum()
        s = np.round((rng.normal(size=n) + 1.5 * y - 0.5) * scale * 4) / 4
        k = int(rng.integers(1, n))
        v = call(kind, jnp.asarray(s), jnp.asarray(y), jnp.ones(n, bool), k)
        np.testing.assert_allclose(v.hinge, grid_maximum(kind, s, y, k), atol=1e-12)
        np.testing.assert_allclose(v.loss - s @ np.asarray(v.coef), v.hinge, atol=1e-12)


# --------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------


def tie_order_average(s, y, w, metric):
    """Average of metric(top-ordered labels) over every order of tied scores."""
    idx = np.flatnonzero(w)
    vals = []
    for perm in itertools.permutations(idx):
        if np.all(np.diff(s[list(perm)]) <= 0):
            vals.append(metric(y[list(perm)]))
    return np.mean(vals)


def test_metrics_equal_the_average_over_tie_orders(x64):
    rng = np.random.default_rng(3)
    for trial in range(30):
        n = 6
        s, y, w = random_list(rng, n, ties=True)
        P, m = int((y & w).sum()), int(w.sum())
        k = int(rng.integers(1, m + 1))
        args = (jnp.asarray(s), jnp.asarray(y), jnp.asarray(w))
        np.testing.assert_allclose(
            prbep(*args), tie_order_average(s, y, w, lambda r, P=P: r[:P].sum() / P), atol=1e-12)
        np.testing.assert_allclose(
            precision_at_k(*args, k=k), tie_order_average(s, y, w, lambda r, k=k: r[:k].sum() / k),
            atol=1e-12)
        np.testing.assert_allclose(
            recall_at_k(*args, k=k), tie_order_average(s, y, w, lambda r, k=k, P=P: r[:k].sum() / P),
            atol=1e-12)


def test_metrics_equal_sklearn_without_ties():
    rng = np.random.default_rng(4)
    for trial in range(20):
        n = 30
        s, y, w = random_list(rng, n, ties=False)
        s = s.astype(np.float32)
        sv, yv = s[w], y[w]
        P, m = int(yv.sum()), int(w.sum())
        k = int(rng.integers(1, m + 1))
        top = np.zeros(m, bool)
        top[np.argsort(-sv)[:k]] = True
        topP = np.zeros(m, bool)
        topP[np.argsort(-sv)[:P]] = True
        np.testing.assert_allclose(f1_at_zero(s, y, w), f1_score(yv, sv > 0, zero_division=0),
                                   rtol=1e-6)
        np.testing.assert_allclose(precision_at_k(s, y, w, k), precision_score(yv, top), rtol=1e-6)
        np.testing.assert_allclose(recall_at_k(s, y, w, k), recall_score(yv, top), rtol=1e-6)
        np.testing.assert_allclose(prbep(s, y, w), precision_score(yv, topP), rtol=1e-6)
        np.testing.assert_allclose(prbep(s, y, w), recall_score(yv, topP), rtol=1e-6)


def test_metric_edge_cases():
    s = jnp.array([0.5, 0.5, -1.0, 2.0])
    y = jnp.array([True, False, False, True])
    # k clipped to [1, #valid]
    assert float(precision_at_k(s, y, k=0)) == float(precision_at_k(s, y, k=1)) == 1.0
    assert float(precision_at_k(s, y, k=9)) == float(precision_at_k(s, y, k=4)) == 0.5
    assert float(recall_at_k(s, y, k=2)) == 0.75  # 2.0, then half of the tie at 0.5
    # no positives: 0 (zero denominators, as SVM-perf)
    none = jnp.zeros(4, bool)
    assert float(prbep(s, none)) == float(recall_at_k(s, none, k=2)) == 0.0
    assert float(f1_at_zero(s, none)) == 0.0
    assert float(f1_at_zero(-jnp.abs(s), y)) == 0.0
    # integer and masked scores
    w = jnp.array([True, True, True, False])
    assert float(precision_at_k(jnp.array([3, 3, 1, 9]), y, w, k=1)) == 0.5
    # jit and vmap
    S = jnp.stack([s, -s])
    K = jnp.array([1, 2])
    got = jax.jit(jax.vmap(lambda a, k: precision_at_k(a, y, None, k)))(S, K)
    np.testing.assert_allclose(got, [precision_at_k(s, y, k=1), precision_at_k(-s, y, k=2)])


# --------------------------------------------------------------------------
# transformations, dtypes, edge cases
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_jit_equals_eager_and_vmap_equals_loop(kind):
    rng = np.random.default_rng(11)
    B, n = 5, 16
    lists = [random_list(rng, n, ties=b % 2 == 0) for b in range(B)]
    S = jnp.asarray(np.stack([lst[0] for lst in lists]), jnp.float32)
    Y = jnp.asarray(np.stack([lst[1] for lst in lists]))
    W = jnp.asarray(np.stack([lst[2] for lst in lists]))
    K = jnp.asarray(rng.integers(1, 12, B), jnp.int32)
    batched = jax.vmap(lambda s, y, w, k: call(kind, s, y, w, k))(S, Y, W, K)
    for b in range(B):
        one = call(kind, S[b], Y[b], W[b], int(K[b]))
        pairs = [(one, jax.tree.map(lambda t, b=b: t[b], batched))]
        if b < 2:  # eager (un-jitted) runs are slow: two lists
            with jax.disable_jit():
                pairs.append((one, call(kind, S[b], Y[b], W[b], int(K[b]))))
        for x, zb in pairs:
            chex.assert_trees_all_equal(x.aux, zb.aux)
            chex.assert_trees_all_close((x.loss, x.coef), (zb.loss, zb.coef), rtol=1e-6)
            chex.assert_trees_all_close(x.hinge, zb.hinge, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_float32_agrees_with_float64(kind):
    rng = np.random.default_rng(5)
    n = 400  # the length of the table-scan test (compiled once in float64)
    s = rng.normal(size=n) * 0.5
    y = rng.random(n) < 0.3
    w = np.ones(n, bool)
    v32 = call(kind, jnp.asarray(s, jnp.float32), jnp.asarray(y), jnp.asarray(w), 60)
    with jax.enable_x64(True):
        v64 = call(kind, jnp.asarray(s, jnp.float64), jnp.asarray(y), jnp.asarray(w), 60)
        v64 = jax.tree.map(np.asarray, v64)
    assert v32.loss.dtype == jnp.float32 and v64.loss.dtype == np.float64
    np.testing.assert_allclose(v32.hinge, v64.hinge, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v32.loss, v64.loss, rtol=1e-5)
    np.testing.assert_array_equal(v32.aux, v64.aux)


@pytest.mark.parametrize("kind", KINDS)
def test_one_class_list_gives_zeros(kind):
    s = jnp.array([0.3, -1.0, 2.0, 0.1], jnp.float32)
    w = jnp.array([True, True, True, False])
    for y in (jnp.array([True, True, True, False]), jnp.array([False, False, False, True])):
        v = call(kind, s, y, w, 2)
        assert float(v.loss) == 0 and float(v.hinge) == 0
        assert not np.any(v.coef) and not np.any(v.aux)


def test_k_out_of_range_is_clipped():
    rng = np.random.default_rng(9)
    s, y, w = random_list(rng, 16, ties=True)  # the length of the vmap test
    s = jnp.asarray(s, jnp.float32)
    P, n = int((y & w).sum()), int(w.sum())

    def same(f, k1, k2):
        a, b = f(s, y, w, k1), f(s, y, w, k2)
        np.testing.assert_array_equal(a.aux, b.aux)
        assert float(a.hinge) == float(b.hinge) and float(a.loss) == float(b.loss)

    same(precision_at_k_oracle, 0, 1)
    same(precision_at_k_oracle, -5, 1)
    same(precision_at_k_oracle, P + 7, P)
    same(recall_at_k_oracle, 0, P)
    same(recall_at_k_oracle, n + 30, n)


def test_k_from_fraction_matches_svm_perf():
    assert int(k_from_fraction(7, 0.5)) == 3  # default --p for Prec@k
    assert int(k_from_fraction(1, 0.5)) == 1  # at least 1
    assert int(k_from_fraction(7, 2.0)) == 14  # default --p for Rec@k
    np.testing.assert_array_equal(jax.jit(lambda p: k_from_fraction(p, 0.5))(jnp.arange(5)),
                                  [1, 1, 1, 1, 2])
    with pytest.raises(ValueError):
        k_from_fraction(5, 0.0)


def test_argument_errors():
    s = jnp.zeros(4, jnp.float32)
    y = jnp.array([True, False, True, False])
    w = jnp.ones(4, bool)
    with pytest.raises(ValueError):
        f1_oracle(jnp.zeros((2, 4), jnp.float32), y, w)
    with pytest.raises(ValueError):
        prbep_oracle(s, y[:3], w)
    with pytest.raises(TypeError):
        f1_oracle(jnp.zeros(4, jnp.int32), y, w)
    with pytest.raises(TypeError):
        precision_at_k_oracle(s, y, w, 1.5)
    with pytest.raises(ValueError):
        recall_at_k_oracle(s, y, w, jnp.array([1, 2]))
    with pytest.raises(TypeError):
        precision_at_k(s, y.astype(jnp.int32), None, 1)
