"""NDCG loss-augmented inference, hinge and estimator against independent references.

References: brute force over every ranking (n <= 7, ties included), a literal
dynamic programme over monotone interleaving ranks (O(N P), no monotonicity
argument), scikit-learn's ``ndcg_score``, float32 against float64, jit against
eager, the XLA sort path against the CPU kernels.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import ndcg_score

import jaxrank
from jaxrank.inference import ndcg_most_violated, ndcg_oracle, sort_path
from jaxrank.losses import ndcg_hinge_loss


def _D(p):
    return 1.0 / np.log2(1.0 + p)


def _brute_force(s, rel):
    """max_R 1 - NDCG(R) + (1/PN) sum_{p,n} (R_pn - 1)(s_p - s_n) over every ranking."""
    n = len(s)
    P, N = int(rel.sum()), int((~rel).sum())
    Z = sum(_D(a) for a in range(1, P + 1))
    perms = np.array(list(itertools.permutations(range(n))))  # [n!, n]: item at each place
    pos = np.empty_like(perms)
    np.put_along_axis(pos, perms, np.arange(1, n + 1)[None], axis=1)  # place of each item
    ndcg = np.sum(np.where(rel[None], _D(pos), 0), axis=1) / Z
    pi, ni = np.flatnonzero(rel), np.flatnonzero(~rel)
    above = pos[:, pi][:, :, None] < pos[:, ni][:, None, :]  # [n!, P, N]
    diff = s[pi][:, None] - s[ni][None, :]
    v = np.sum(np.where(above, 0.0, -2.0) * diff[None], axis=(1, 2))
    return float(np.max(1 - ndcg + v / (P * N)))


def _dp_reference(s, rel):
    """Literal O(N P) dynamic programme: negatives in score order take non-decreasing
    numbers r_j of positives above them; maximise sum_j delta_j(r_j) + score terms."""
    sp = np.sort(s[rel])[::-1]
    sn = np.sort(s[~rel])[::-1]
    P, N = len(sp), len(sn)
    Z = sum(_D(a) for a in range(1, P + 1))
    tail = np.concatenate([np.cumsum(sp[::-1])[::-1], [0.0]])  # tail[r] = sum_{t > r} s+_t
    r = np.arange(P + 1)
    best = np.zeros(P + 1)  # best value of the first j negatives with r_j <= r (cummax)
    for j in range(1, N + 1):
        f = (_D(r + j) - _D(P + j)) / Z - 2 * (tail - (P - r) * sn[j - 1]) / (P * N)
        best = np.maximum.accumulate(best + f)
    return best[-1]


def _ranking_ndcg(s, rel, opt):
    """1 - NDCG of the ranking described by the interleaving ranks ``opt`` (1-based)."""
    pi = np.flatnonzero(rel)[np.argsort(-s[rel], kind="stable")]
    ni = np.flatnonzero(~rel)
    ni = ni[np.argsort(-s[~rel], kind="stable")]
    # Negative j sits just above positive opt_j: position of positive a is a + #{j: opt_j <= a}.
    opt_sorted = opt[ni]
    P = len(pi)
    pos = [a + np.sum(opt_sorted <= a) for a in range(1, P + 1)]
    Z = sum(_D(a) for a in range(1, P + 1))
    return 1 - sum(_D(p) for p in pos) / Z


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def _lists(rng, count, n_max):
    for trial in range(count):
        n = int(rng.integers(2, n_max + 1))
        rel = rng.integers(0, 2, n).astype(bool)
        if rel.all() or not rel.any():
            rel[0], rel[-1] = True, False
        s = rng.normal(size=n) * rng.choice([0.01, 0.1, 1.0, 10.0])
        if trial % 3 == 0:
            s = np.round(s * 2) / 2  # ties, within and across classes
        yield s, rel


def test_exact_against_brute_force_over_all_rankings(x64):
    rng = np.random.default_rng(0)
    for s, rel in _lists(rng, 80, 7):
        r = ndcg_most_violated(jnp.asarray(s), jnp.asarray(rel.astype(int)))
        assert float(r.hinge) == pytest.approx(_brute_force(s, rel), abs=1e-10)
        # loss is 1 - NDCG of the ranking the interleaving ranks describe
        assert float(r.loss) == pytest.approx(
            _ranking_ndcg(s, rel, np.asarray(r.interleaving_rank)), abs=1e-12)


def test_exact_against_dynamic_programme(x64):
    rng = np.random.default_rng(1)
    for n, frac in ((50, 0.3), (400, 0.05), (1500, 0.2)):
        for scale in (0.01, 1.0, 100.0):
            rel = rng.random(n) < frac
            rel[0], rel[1] = True, False
            s = rng.normal(size=n) * scale + 2.0 * rel * scale
            r = ndcg_most_violated(jnp.asarray(s), jnp.asarray(rel))
            assert float(r.hinge) == pytest.approx(_dp_reference(s, rel), rel=1e-10, abs=1e-12)


def test_float32_against_float64():
    rng = np.random.default_rng(2)
    rel = rng.random(3000) < 0.1
    s = rng.normal(size=3000) + rel
    r32 = ndcg_most_violated(jnp.asarray(s, jnp.float32), jnp.asarray(rel))
    with jax.enable_x64(True):
        r64 = ndcg_most_violated(jnp.asarray(s, jnp.float64), jnp.asarray(rel))
    ref = _dp_reference(s, rel)
    assert float(r64.hinge) == pytest.approx(ref, rel=1e-10)
    assert float(r32.hinge) == pytest.approx(ref, rel=1e-5)
    assert r32.coef.dtype == jnp.float32


def test_jit_vmap_and_sort_paths_agree():
    rng = np.random.default_rng(3)
    S = jnp.asarray(rng.normal(size=(3, 600)), jnp.float32)
    Y = jnp.asarray(rng.random((3, 600)) < 0.2)
    batched = ndcg_most_violated(S, Y)
    for b in range(3):
        one = ndcg_most_violated(S[b], Y[b])
        np.testing.assert_array_equal(np.asarray(one.coef), np.asarray(batched.coef[b]))
    jitted = jax.jit(lambda s, y: ndcg_oracle(s, y, jnp.ones_like(y), kp=256))(S[0], Y[0])
    eager = ndcg_oracle(S[0], Y[0], jnp.ones_like(Y[0]), kp=256)
    np.testing.assert_array_equal(np.asarray(jitted.coef), np.asarray(eager.coef))
    for path in ("xla", "numpy"):
        with sort_path(path):
            other = ndcg_oracle(S[0], Y[0], jnp.ones_like(Y[0]), kp=256)
        np.testing.assert_array_equal(np.asarray(other.aux), np.asarray(eager.aux))
        np.testing.assert_array_equal(np.asarray(other.coef), np.asarray(eager.coef))


def test_hinge_gradient_is_minus_coef_and_bounds_the_loss():
    rng = np.random.default_rng(4)
    s = jnp.asarray(rng.normal(size=200), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 200))  # grades: > 0 is relevant
    r = ndcg_most_violated(s, y)
    np.testing.assert_allclose(jax.grad(ndcg_hinge_loss)(s, y), -r.coef, atol=1e-7)
    # the hinge bounds 1 - NDCG of the ranking by the scores (no ties here)
    ndcg = ndcg_score((np.asarray(y) > 0)[None].astype(float), np.asarray(s)[None])
    assert float(ndcg_hinge_loss(s, y)) >= 1 - ndcg - 1e-6


def test_segments_average_the_queries():
    rng = np.random.default_rng(5)
    n = 90
    seg = np.repeat(np.arange(6), 15)
    s = jnp.asarray(rng.normal(size=n), jnp.float32)
    y = rng.integers(0, 2, n)
    y[seg == 2] = 0  # a query without a relevant item takes no part
    per = [float(ndcg_hinge_loss(s[seg == q], y[seg == q])) for q in range(6) if q != 2]
    assert float(ndcg_hinge_loss(s, y, segments=seg)) == pytest.approx(np.mean(per), rel=1e-6)
    g = jax.grad(lambda s: ndcg_hinge_loss(s, y, segments=seg))(s)
    assert np.all(np.asarray(g)[seg == 2] == 0)
    with pytest.raises(TypeError, match="segments must be concrete"):
        jax.jit(lambda s, q: ndcg_hinge_loss(s, y, segments=q))(s, seg)
    with pytest.raises(ValueError, match="segments"):
        ndcg_hinge_loss(s, y, segments=seg[:-1])


def test_list_without_relevant_item_is_zero_with_zero_gradient():
    s = jnp.asarray([0.3, -1.0, 2.0])
    for y in ([0, 0, 0], [1, 2, 1]):
        assert float(ndcg_hinge_loss(s, jnp.asarray(y))) == 0.0
        assert not np.any(np.asarray(jax.grad(ndcg_hinge_loss)(s, jnp.asarray(y))))


@pytest.mark.parametrize("labels, match", [([1, 0, -1], ">= 0"), ([1, 0, 0.5], "integers"),
                                           ([1, 0, np.nan], "NaN")])
def test_bad_gains_are_refused_eagerly_and_nan_under_jit(labels, match):
    s = jnp.asarray([0.3, -1.0, 2.0])
    y = jnp.asarray(labels, jnp.float32)
    with pytest.raises(ValueError, match=match):
        ndcg_hinge_loss(s, y)
    with pytest.raises(ValueError, match=match):
        ndcg_most_violated(s, y)
    assert np.isnan(float(jax.jit(ndcg_hinge_loss)(s, y)))
    assert np.all(np.isnan(np.asarray(jax.jit(jax.grad(ndcg_hinge_loss))(s, y))))


def test_bad_scores_are_refused():
    with pytest.raises(TypeError, match="scores"):
        ndcg_most_violated(jnp.asarray([1, 2, 3]), jnp.asarray([1, 0, 0]))
    with pytest.raises(ValueError, match="scores"):
        ndcg_most_violated(jnp.asarray([1.0, np.nan, 3.0]), jnp.asarray([1, 0, 0]))


def _queries(rng, Q=24, L=12, d=6):
    w = rng.normal(size=d)
    X = rng.normal(size=(Q * L, d)).astype(np.float32)
    grade = np.digitize(X @ w + rng.normal(size=Q * L), [0.8, 1.8])
    return X, grade, np.repeat(np.arange(Q), L)


def test_ndcgsvm_reaches_its_certified_optimum_over_queries():
    X, y, qid = _queries(np.random.default_rng(6))
    C = 10.0
    m = jaxrank.NDCGSVM(C=C).fit(X, y, groups=qid)
    assert m.fit_status_ == "converged"
    assert m.dual_objective_ <= m.objective_ <= m.dual_objective_ * (1 + 1e-4) + 1e-7

    def primal(w):  # the objective of the class docstring, by the loss function
        s = jnp.asarray(X @ np.asarray(w, np.float64).ravel(), jnp.float32)
        return 0.5 * float(np.sum(np.square(w))) + C * float(
            ndcg_hinge_loss(s, (y >= 1).astype(int), segments=qid))

    assert primal(m.coef_) == pytest.approx(m.objective_, rel=1e-4)
    # no other weight vector does better: AP-SVM's optimum, and perturbations of ours
    ap = jaxrank.APSVM(C=C).fit(X, y, groups=qid)
    assert primal(m.coef_) <= primal(ap.coef_) * (1 + 2e-4)
    rng = np.random.default_rng(7)
    for _ in range(5):
        assert primal(m.coef_) <= primal(m.coef_ + 0.05 * rng.normal(size=m.coef_.shape)) * (
            1 + 2e-4)
    # score is scikit-learn's NDCG (0/1 gains), averaged over the queries
    s = m.decision_function(X)
    want = np.mean([ndcg_score((y[qid == q] >= 1)[None].astype(float), s[qid == q][None])
                    for q in np.unique(qid) if 0 < np.sum(y[qid == q] >= 1) < 12])
    assert m.score(X, y, groups=qid) == pytest.approx(want, rel=1e-9)


def test_ndcgsvm_sweep_scores_by_ndcg_and_saves(tmp_path):
    X, y, qid = _queries(np.random.default_rng(8))
    res = jaxrank.sweep(X, y, model="ndcg-svm", Cs=[1.0, 100.0], cv=2, groups=qid)
    assert res.scoring == "ndcg"
    best = res.best_estimators[0]
    jaxrank.save(best, tmp_path / "ndcg.npz")
    again = jaxrank.load(tmp_path / "ndcg.npz")
    assert again.score(X, y, groups=qid) == best.score(X, y, groups=qid)
    fold = res.val_masks[0, 0]
    fit = jaxrank.NDCGSVM(C=float(res.Cs[0])).fit(X[~fold], y[~fold], groups=qid[~fold])
    assert res.val_score[0, 0, 0] == pytest.approx(
        fit.score(X[fold], y[fold], groups=qid[fold]), abs=2e-3)


@pytest.mark.parametrize("loss", [jaxrank.losses.ap_hinge_loss, ndcg_hinge_loss])
def test_max_positives_bounds_the_tables_under_jit(loss):
    rng = np.random.default_rng(9)
    y = jnp.asarray((rng.random(700) < 0.1).astype(np.int32))
    s = jnp.asarray(rng.normal(size=700), jnp.float32) + 0.5 * y
    want = jax.value_and_grad(loss)(s, y)  # concrete labels: the tight bound
    bounded = jax.jit(jax.value_and_grad(lambda s, y: loss(s, y, max_positives=100)))(s, y)
    unbounded = jax.jit(jax.value_and_grad(loss))(s, y)  # traced: tables for n positives
    for got in (bounded, unbounded):
        assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-6)
        np.testing.assert_allclose(got[1], want[1], atol=1e-7)
    # more positives than the bound: NaN under jit, an error for concrete labels
    assert np.isnan(float(jax.jit(lambda s, y: loss(s, y, max_positives=8))(s, y)))
    with pytest.raises(ValueError, match="max_positives"):
        loss(s, y, max_positives=8)
    with pytest.raises(TypeError, match="max_positives"):
        loss(s, y, max_positives=2.5)
    with pytest.raises(ValueError, match="max_positives"):
        loss(s, y, max_positives=0)
