"""Tests of KernelRank (Gao & Sun 2007) and the ROC-area SVM (Joachims 2005).

References are independent: literal double loops over eq. (11) with the
kernels written from eqs. (10), (14) and the sigmoid; brute force over all
pair labellings for the ROC-area inference; a box-constrained QP (the
pairwise-hinge dual, solved by scipy) for the AUC-SVM optimum.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, stats
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from jaxrank import AUCSVM, KernelRank
from conftest import shared_data
from jaxrank.inference import Violation, auc_most_violated
from jaxrank.losses import kernel_auc, kernel_auc_loss, smoothed_step

KERNELS = ("gaussian", "sigmoid_like", "sigmoid")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


# ---------------------------------------------------------------------------
# Independent NumPy references.
# ---------------------------------------------------------------------------


def phi_reference(z, kernel, h):
    """Smoothed indicator written from the paper's formulas (float64)."""
    if kernel == "gaussian":  # eq. (10): N(0, 2 sigma^2) CDF
        return stats.norm.cdf(z, scale=math.sqrt(2) * h)
    alpha = 1.0 / h
    if kernel == "sigmoid":
        return 1.0 / (1.0 + math.exp(-alpha * z))
    x = math.exp(alpha * z)  # eq. (14)
    if abs(x - 1) < 1e-12:
        return 0.5
    return x / (x - 1) - x / (x - 1) ** 2 * math.log(x)


def kernel_auc_reference(scores, labels, kernel, h):
    """Direct double loop of eq. (11)."""
    pos = [s for s, y in zip(scores, labels) if y > 0]
    neg = [s for s, y in zip(scores, labels) if y <= 0]
    total = 0.0
    for si in pos:
        for sj in neg:
            total += phi_reference(si - sj, kernel, h)
    return total / (len(pos) * len(neg))


def roc_violation_brute_force(scores, labels):
    """max over all 2^(PN) pair labellings of Delta + w^T (Psi(y) - Psi(y*)).

    Psi(X, y) = 1/(PN) sum y_ij (x_i - x_j), Delta = 1/(PN) #{y_ij = -1};
    returns (value, loss, coef) of the argmax (first one on ties).
    """
    scores = np.asarray(scores, np.float64)
    pos = np.flatnonzero(np.asarray(labels) > 0)
    neg = np.flatnonzero(np.asarray(labels) <= 0)
    pairs = [(i, j) for i in pos for j in neg]
    PN = len(pairs)
    best = None
    for lab in itertools.product([1, -1], repeat=PN):
        delta = sum(1 for v in lab if v == -1) / PN
        # w^T Psi(y) - w^T Psi(y*) with y* = +1 everywhere.
        gain = (
            sum((v - 1) * (scores[i] - scores[j]) for v, (i, j) in zip(lab, pairs)) / PN
        )
        val = delta + gain
        if best is None or val > best[0] + 1e-12:
            coef = np.zeros(len(scores))
            for v, (i, j) in zip(lab, pairs):  # Psi(y*) - Psi(y)
                coef[i] += (1 - v) / PN
                coef[j] -= (1 - v) / PN
            best = (val, delta, coef)
    return best


def pairwise_hinge(w, X, y):
    """xi(w) = 1/(PN) sum_pairs max(0, 1 - 2 w^T (x_i - x_j)) (float64)."""
    s = X @ w
    d = s[y][:, None] - s[~y][None, :]
    return np.mean(np.maximum(0, 1 - 2 * d))


def aucsvm_exact(X, y, C):
    """Exact min 1/2||w||^2 + C xi(w) via the dual of the pairwise QP.

    The 1-slack ROC-area hinge equals the mean pairwise hinge, so the problem
    is min 1/2||w||^2 + c sum_p max(0, 1 - 2 w^T d_p), c = C/(PN), whose dual
    is max sum a - 1/2 ||sum 2 a_p d_p||^2 over the box 0 <= a <= c.
    """
    D = (X[y][:, None, :] - X[~y][None, :, :]).reshape(-1, X.shape[1]) * 2
    c = C / len(D)

    def negdual(a):
        v = D.T @ a
        return 0.5 * v @ v - a.sum(), D @ v - 1

    res = optimize.minimize(
        negdual,
        np.full(len(D), c / 2),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0, c)] * len(D),
        options=dict(ftol=1e-15, gtol=1e-12, maxiter=5000),
    )
    w = D.T @ res.x
    primal = 0.5 * w @ w + C * pairwise_hinge(w, X, y)
    dual = -res.fun
    return primal, dual


# ---------------------------------------------------------------------------
# Smoothed AUC.
# ---------------------------------------------------------------------------


def _data(n=17, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    y = (rng.random(n) < 0.4).astype(np.int32)
    y[:2] = [1, 0]
    return s, y


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("h", [0.3, 2.0])
def test_matches_double_loop_of_eq11(kernel, h, x64):
    s, y = _data()
    got = kernel_auc(jnp.asarray(s), y, kernel=kernel, bandwidth=h)
    np.testing.assert_allclose(
        float(got), kernel_auc_reference(s, y, kernel, h), rtol=1e-10
    )
    loss = kernel_auc_loss(jnp.asarray(s), y, kernel=kernel, bandwidth=h)
    np.testing.assert_allclose(float(loss), 1 - float(got), rtol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_value_matches_reference(kernel):
    s, y = _data(seed=3)
    got = kernel_auc(jnp.asarray(s, jnp.float32), y, kernel=kernel, bandwidth=0.7)
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(
        float(got), kernel_auc_reference(s, y, kernel, 0.7), rtol=2e-6
    )


@pytest.mark.parametrize("kernel", KERNELS)
def test_grad_matches_central_differences(kernel, x64):
    s, y = _data(seed=1)
    s = jnp.asarray(s)
    f = lambda s, h: kernel_auc(s, y, kernel=kernel, bandwidth=h)
    gs, gh = jax.grad(f, argnums=(0, 1))(s, 0.8)
    eps = 1e-6
    fd = [
        (f(s.at[k].add(eps), 0.8) - f(s.at[k].add(-eps), 0.8)) / (2 * eps)
        for k in range(len(s))
    ]
    np.testing.assert_allclose(gs, np.array(fd), rtol=1e-6, atol=1e-9)
    fdh = (f(s, 0.8 + eps) - f(s, 0.8 - eps)) / (2 * eps)
    np.testing.assert_allclose(float(gh), float(fdh), rtol=1e-6)


def test_sigmoid_like_is_smooth_through_the_removable_singularity(x64):
    # Phi(0) = 1/2 and Phi'(0) = alpha/6 (eq. (17) at z = 0), and the series
    # branch joins the closed form: compare with eq. (14) at small |z|.
    h = 0.5
    f = jax.jit(lambda z: smoothed_step(z, kernel="sigmoid_like", bandwidth=h))
    df = jax.jit(jax.vmap(jax.grad(f)))
    assert float(f(jnp.float64(0.0))) == 0.5
    np.testing.assert_allclose(float(df(jnp.zeros(1))[0]), 1 / (6 * h), rtol=1e-12)
    z = np.array([1e-3, -1e-3, 0.3, -0.49, 0.5, 0.51, -2.0, 7.0])
    ref = [phi_reference(v, "sigmoid_like", h) for v in z]
    np.testing.assert_allclose(np.asarray(f(jnp.asarray(z))), ref, rtol=1e-9)
    fd = [
        (
            phi_reference(v + 1e-6, "sigmoid_like", h)
            - phi_reference(v - 1e-6, "sigmoid_like", h)
        )
        / 2e-6
        for v in z
    ]
    np.testing.assert_allclose(np.asarray(df(jnp.asarray(z))), fd, rtol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_ties_between_classes_give_finite_gradients_float32(kernel):
    # Every (positive, negative) pair at z = 0, the x = 1 point of eq. (14).
    _, y = _data()
    s = jnp.zeros(len(y), jnp.float32)
    u = kernel_auc(s, y, kernel=kernel, bandwidth=1.0)
    g = jax.grad(lambda s: kernel_auc(s, y, kernel=kernel, bandwidth=1.0))(s)
    assert float(u) == pytest.approx(0.5, abs=1e-7)
    assert np.all(np.isfinite(g))
    # d U / d s_i = (1/MN) sum_j Phi'(0) = Phi'(0)/M for a positive.
    dphi = float(
        jax.grad(lambda z: smoothed_step(z, kernel=kernel, bandwidth=1.0))(0.0)
    )
    M = int(np.sum(y == 1))
    np.testing.assert_allclose(np.asarray(g)[y == 1], dphi / M, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g)[y == 0], -dphi / (len(y) - M), rtol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("scale", [1e4, 1e30])
def test_huge_scores_give_finite_values_and_gradients(kernel, scale):
    s, y = _data(seed=2)
    s = jnp.asarray(s * scale, jnp.float32)
    u = kernel_auc(s, y, kernel=kernel, bandwidth=1.0)
    g = jax.grad(lambda s: kernel_auc(s, y, kernel=kernel, bandwidth=1.0))(s)
    assert np.all(np.isfinite(g))
    # All margins are huge: the smoothed AUC is the hard AUC.
    np.testing.assert_allclose(float(u), roc_auc_score(y, np.asarray(s)), atol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_blocked_equals_unblocked(kernel):
    # block_size=2 loops over ceil(M/2) blocks (the last one padded); the
    # default block holds all the pairs at once.
    s, y = _data(seed=2)
    s = jnp.asarray(s, jnp.float32)
    assert np.sum(y == 1) % 2 == 1
    f = lambda s, b: kernel_auc(s, y, kernel=kernel, bandwidth=0.5, block_size=b)
    np.testing.assert_allclose(f(s, 2), f(s, 128), rtol=1e-6)
    np.testing.assert_allclose(
        jax.grad(f)(s, 2), jax.grad(f)(s, 128), rtol=1e-5, atol=1e-8
    )


def test_where_matches_dropping_items_and_batch_matches_loop():
    s, y = _data(seed=5)
    where = np.ones(len(y), bool)
    where[[3, 7]] = False
    a = kernel_auc(jnp.asarray(s), y, bandwidth=0.5, where=where)
    b = kernel_auc(jnp.asarray(s[where]), y[where], bandwidth=0.5)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    S = np.stack([s, s[::-1], s * 2])
    Y = np.stack([y, y, y])
    batched = kernel_auc(jnp.asarray(S), Y, kernel="sigmoid", bandwidth=0.5)
    loop = [
        kernel_auc(jnp.asarray(S[k]), Y[k], kernel="sigmoid", bandwidth=0.5)
        for k in range(3)
    ]
    np.testing.assert_allclose(batched, np.array(loop), rtol=1e-6)


def test_jit_matches_eager_and_skips_value_checks():
    s, y = _data(seed=6)
    s = jnp.asarray(s, jnp.float32)
    f = jax.jit(lambda s, y, h: kernel_auc(s, y, kernel="sigmoid_like", bandwidth=h))
    np.testing.assert_allclose(
        f(s, y, 0.5), kernel_auc(s, y, kernel="sigmoid_like", bandwidth=0.5), rtol=1e-6
    )
    # Under jit a list without pairs gives 0 and a finite (zero) gradient.
    y0 = jnp.zeros_like(y)
    assert float(f(s, y0, 0.5)) == 0.0
    g = jax.grad(
        lambda s: jax.jit(kernel_auc_loss, static_argnames="kernel")(
            s, y0, kernel="gaussian", bandwidth=1.0
        )
    )(s)
    assert np.all(g == 0)


def test_bad_inputs_raise_naming_the_argument():
    s, y = _data()
    with pytest.raises(ValueError, match="bandwidth"):
        kernel_auc(s, y, bandwidth=0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        kernel_auc(s, y, bandwidth=-1.0)
    with pytest.raises(ValueError, match="scores"):
        kernel_auc(np.where(np.arange(len(s)) == 2, np.nan, s), y, bandwidth=1.0)
    with pytest.raises(ValueError, match="labels"):
        kernel_auc(s, np.ones_like(y), bandwidth=1.0)
    with pytest.raises(ValueError, match="scores and labels"):
        kernel_auc(s, y[:-1], bandwidth=1.0)
    with pytest.raises(ValueError, match="where"):
        kernel_auc(s, y, bandwidth=1.0, where=np.ones(3, bool))
    with pytest.raises(ValueError, match="kernel"):
        kernel_auc(s, y, kernel="epanechnikov", bandwidth=1.0)
    with pytest.raises(ValueError, match="block_size"):
        kernel_auc(s, y, bandwidth=1.0, block_size=0)


# ---------------------------------------------------------------------------
# ROC-area loss-augmented inference.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_auc_inference_matches_brute_force_over_pair_labellings(seed, x64):
    rng = np.random.default_rng(seed)
    n = 6
    y = np.array([1, 0, 0] + list(rng.integers(0, 2, n - 3)))
    rng.shuffle(y)
    s = rng.normal(scale=0.6, size=n)
    value, loss, coef = roc_violation_brute_force(s, y)
    r = auc_most_violated(jnp.asarray(s), y)
    assert isinstance(r, Violation) and r.interleaving_rank is None
    np.testing.assert_allclose(float(r.hinge), value, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(r.loss), loss, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(r.coef), coef, atol=1e-12)
    np.testing.assert_allclose(
        float(r.loss - jnp.asarray(s) @ r.coef), float(r.hinge), atol=1e-12
    )


def test_auc_inference_larger_lists_match_pairwise_formula():
    rng = np.random.default_rng(7)
    s = rng.normal(size=(3, 300)).astype(np.float32)
    y = (rng.random((3, 300)) < 0.1).astype(np.int32)
    y[:, 0] = 1
    r = auc_most_violated(jnp.asarray(s), y)
    for k in range(3):
        d = s[k][y[k] == 1][:, None].astype(np.float64) - s[k][y[k] == 0][None, :]
        swapped = 1 - 2 * d > 0
        np.testing.assert_allclose(float(r.loss[k]), swapped.mean(), rtol=1e-6)
        np.testing.assert_allclose(
            float(r.hinge[k]), np.mean(np.maximum(0, 1 - 2 * d)), rtol=1e-5
        )
        assert float(r.hinge[k]) >= 0


def test_auc_inference_rejects_single_class():
    with pytest.raises(ValueError, match="both classes"):
        auc_most_violated(jnp.array([0.1, 0.2]), np.array([1, 1]))


# ---------------------------------------------------------------------------
# AUC-SVM.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("C", [0.5, 10.0])
def test_aucsvm_objective_within_0p1_percent_of_exact_qp(C, x64):
    rng = np.random.default_rng(0)
    n, d = 24, 3
    X = rng.normal(size=(n, d))
    y = rng.random(n) < 0.35
    X[y] += 0.7
    primal, dual = aucsvm_exact(X, y, C)
    assert primal - dual <= 1e-6 * primal  # the reference is exact
    est = AUCSVM(C=C, tol=1e-5, max_iter=5000).fit(X.astype(np.float32), y)
    w = est.coef_[0].astype(np.float64)
    f_est = 0.5 * w @ w + C * pairwise_hinge(
        w, X.astype(np.float32).astype(np.float64), y
    )
    assert f_est <= primal * (1 + 1e-3)
    np.testing.assert_allclose(est.objective_, primal, rtol=1e-3)


def test_aucsvm_accepts_sparse_and_matches_dense():
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    X = sp.random(60, 30, density=0.2, random_state=1, format="csr", dtype=np.float32)
    y = rng.random(60) < 0.3
    a = AUCSVM(C=5.0).fit(X, y)
    b = AUCSVM(C=5.0).fit(X.toarray(), y)
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-4)
    assert a.score(X, y) == pytest.approx(b.score(X.toarray(), y), abs=1e-6)


def test_estimators_reject_bad_input_and_clone():
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.array([0, 1] * 10)
    with pytest.raises(ValueError, match="C"):
        AUCSVM(C=0).fit(X, y)
    with pytest.raises(ValueError, match="exactly two classes"):
        AUCSVM().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="y must contain exactly two classes"):
        KernelRank(max_iter=2).fit(X, np.zeros(20))
    with pytest.raises(ValueError, match="bandwidth"):
        KernelRank(bandwidth=0.0).fit(X, y)
    with pytest.raises(ValueError, match="bandwidth"):
        KernelRank(bandwidth=-2).fit(X, y)
    with pytest.raises(ValueError, match="bandwidth_grid"):
        KernelRank(bandwidth_grid=[1.0, -1.0]).fit(X, y)
    with pytest.raises(ValueError, match="kernel"):
        KernelRank(kernel="box").fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        KernelRank().fit(np.where(X > 1.5, np.nan, X), y)
    est = KernelRank(kernel="sigmoid", max_iter=3, random_state=0)
    assert clone(est).get_params() == est.get_params()


def test_gmm_scorer_rejects_bad_input():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3, 2)).astype(np.float32)
    y = np.array([0, 1] * 4)
    mask = np.ones((8, 3), bool)
    mask[1::2, 1:] = False  # each positive bag has one descriptor: 4 in all
    with pytest.raises(
        ValueError, match="n_components=5 .* 4 descriptors of the positive"
    ):
        KernelRank(scorer="gmm", n_components=5).fit(X, y, mask=mask)
    Xn = X.copy()
    Xn[2, 0, 1] = np.nan
    with pytest.raises(ValueError, match="X \\(descriptors\\) contains 1 NaN"):
        KernelRank(scorer="gmm", n_components=2).fit(Xn, y)
    with pytest.raises(ValueError, match="y must contain exactly two classes"):
        KernelRank(scorer="gmm", n_components=2).fit(X, np.ones(8))
    with pytest.raises(ValueError, match="bandwidth"):
        KernelRank(scorer="gmm", bandwidth=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="mask must have shape"):
        KernelRank(scorer="gmm").fit(X, y, mask=np.ones((8, 2), bool))


# ---------------------------------------------------------------------------
# KernelRank on real data (small subsets).
# ---------------------------------------------------------------------------


def test_kernelrank_linear_on_sparse_reuters_beats_chance():
    path = shared_data("reuters_moneyfx", "reuters.tst.bz2")
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=8315, dtype=np.float32)
    y = y > 0
    rng = np.random.default_rng(0)
    perm = rng.permutation(X.shape[0])
    tr, te = perm[:1500], perm[1500:2700]
    est = KernelRank(kernel="gaussian", max_iter=40, learning_rate=0.01, random_state=0)
    est.fit(X[tr], y[tr])  # scipy.sparse CSR in, kept sparse (BCOO)
    h = est.objective_history_
    assert h[-1] >= h[0] - 1e-6  # ascent on the smoothed AUC
    auc = roc_auc_score(y[te], est.decision_function(X[te]))
    assert auc > 0.8, auc
    assert 0 < est.score(X[te], y[te]) <= 1
    assert est.coef_.shape == (1, 8315) and est.n_iter_ == 40


def _load_bags(name):
    import scipy.io as sio

    d = sio.loadmat(str(DATA / "mil_animals" / f"{name}.mat"))
    feats, bags, labels = (
        d["Data"].astype(np.float32),
        d["bags"].ravel(),
        d["labels"].ravel(),
    )
    nb, L = len(labels), np.bincount(bags).max()
    X = np.zeros((nb, L, feats.shape[1]), np.float32)
    mask = np.zeros((nb, L), bool)
    count = np.zeros(nb, int)
    for row, b in zip(feats, bags):
        X[b, count[b]] = row
        mask[b, count[b]] = True
        count[b] += 1
    return X, mask, labels


def test_kernelrank_gmm_on_mil_tiger_beats_chance():
    shared_data("mil_animals", "tiger.mat")
    from sklearn.decomposition import PCA

    X, mask, y = _load_bags("tiger")
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    tr, te = perm[:140], perm[140:]
    pca = PCA(8, random_state=0).fit(X[tr][mask[tr]])
    Xp = np.zeros(X.shape[:2] + (8,), np.float32)
    Xp[mask] = pca.transform(X[mask])
    est = KernelRank(scorer="gmm", kernel="sigmoid_like", max_iter=60, random_state=0)
    est.fit(Xp[tr], y[tr], mask=mask[tr])
    h = est.objective_history_
    assert h[-1] > h[0]  # KernelRank improves the ML start on the training set
    auc = roc_auc_score(y[te], est.decision_function(Xp[te], mask=mask[te]))
    assert auc > 0.6, auc
    assert est.params_["mu"].shape == (2, 4, 8)


def _gmm_data(seed=0, n=48, L=5, D=3):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3 == 0
    X = (rng.normal(size=(n, L, D)) + 0.9 * y[:, None, None]).astype(np.float32)
    mask = rng.random((n, L)) < 0.8
    mask[:, 0] = True
    return X, y.astype(int), mask


def test_gmm_scorer_saves_and_loads(tmp_path):
    """The GMM scorer's mixtures (a dict attribute) round-trip through jaxrank.save."""
    import jaxrank

    X, y, mask = _gmm_data()
    m = KernelRank(scorer="gmm", n_components=2, max_iter=10, random_state=0).fit(
        X, y, mask=mask)
    jaxrank.save(m, tmp_path / "g.npz")
    back = jaxrank.load(tmp_path / "g.npz")
    np.testing.assert_array_equal(back.decision_function(X, mask=mask),
                                  m.decision_function(X, mask=mask))
    np.testing.assert_array_equal(back.ml_decision_function(X, mask=mask),
                                  m.ml_decision_function(X, mask=mask))
    assert back.n_features_in_ == 3 and sorted(back.params_) == sorted(m.params_)
    # A mixture entry that is not finite is refused, naming the attribute.
    with np.load(tmp_path / "g.npz") as z:
        arrays = {k: z[k] for k in z.files}
    bad = dict(arrays, **{"params_::mu": arrays["params_::mu"] * np.nan})
    np.savez(tmp_path / "bad.npz", **bad)
    with pytest.raises(ValueError, match="params_"):
        jaxrank.load(tmp_path / "bad.npz")
    # So is a file without an attribute the GMM scorer needs, or with a mixture
    # of another size than the model's n_components.
    import json

    meta = json.loads(str(arrays["metadata"]))
    meta["attributes"].remove("desc_scale_")
    short = {k: v for k, v in arrays.items() if k != "desc_scale_"}
    np.savez(tmp_path / "short.npz", **dict(short, metadata=np.array(json.dumps(meta))))
    with pytest.raises(ValueError, match="desc_scale_"):
        jaxrank.load(tmp_path / "short.npz")
    wide = dict(arrays, **{k: np.concatenate([v, v], axis=1) for k, v in arrays.items()
                           if k.startswith("params_::")})
    np.savez(tmp_path / "wide.npz", **wide)
    with pytest.raises(ValueError, match="n_components=2"):
        jaxrank.load(tmp_path / "wide.npz")
    # A linear model refitted with the GMM scorer keeps no weights of the first.
    Xl = X.reshape(len(y), -1)
    m = KernelRank(max_iter=5).fit(Xl, y).set_params(scorer="gmm", n_components=2)
    m.fit(X, y, mask=mask)
    assert not hasattr(m, "coef_")
    jaxrank.save(m, tmp_path / "refit.npz")
    np.testing.assert_array_equal(jaxrank.load(tmp_path / "refit.npz").decision_function(
        X, mask=mask), m.decision_function(X, mask=mask))


def test_sweep_of_kernelrank_equals_fits_on_its_folds(page_blocks):
    """``sweep`` of an estimator without C: each (setting, fold) fit is KernelRank
    fitted on that fold's training rows, scored by scikit-learn's AP on its
    validation rows; the refit is the best setting fitted on all rows."""
    import jaxrank
    from sklearn.metrics import average_precision_score

    X, y = page_blocks[0][:300], page_blocks[1][:300]
    grid = {"learning_rate": [0.003, 0.03]}
    res = jaxrank.sweep(X, y, model="kernelrank", cv=3, param_grid=grid, max_iter=20)
    assert res.val_score.shape == (1, 2, 3) and np.all(np.isnan(res.Cs))
    assert res.scoring == "average_precision" and res.params == [
        {"learning_rate": 0.003}, {"learning_rate": 0.03}]
    for g, p in enumerate(res.params):
        for f in range(3):
            val = res.val_masks[0, f]
            one = KernelRank(max_iter=20, **p).fit(X[~val], y[~val])
            ref = average_precision_score(y[val], one.decision_function(X[val]))
            np.testing.assert_allclose(res.val_score[0, g, f], ref, rtol=1e-6)
    best = res.params[int(np.argmax(res.mean_val_score[0]))]
    assert res.best_params == [best]
    alone = KernelRank(max_iter=20, **best).fit(X, y)
    np.testing.assert_array_equal(res.best_estimators[0].coef_, alone.coef_)
    with pytest.raises(ValueError, match="has no C"):
        jaxrank.sweep(X, y, model="kernelrank", Cs=[1.0])
    with pytest.raises(ValueError, match="groups= does not apply to KernelRank"):
        jaxrank.sweep(X, y, model="kernelrank", groups=np.arange(len(y)) // 10)


def test_sweep_of_the_gmm_scorer_passes_the_mask_by_name():
    import jaxrank

    X, y, mask = _gmm_data(seed=1)
    kw = dict(scorer="gmm", n_components=2, max_iter=5, random_state=0)
    res = jaxrank.sweep(X, y, model="kernelrank", cv=2, mask=mask, **kw)
    for f in range(2):
        val = res.val_masks[0, f]
        one = KernelRank(**kw).fit(X[~val], y[~val], mask=mask[~val])
        np.testing.assert_allclose(res.val_score[0, 0, f],
                                   one.score(X[val], y[val], mask=mask[val]), rtol=1e-6)
