"""AP-SVM-APPX (§3.3, problem (10)): split, hard constraints, mu, limits, errors, save/load.

Real data: 300 samples of MULAN "scene" (label 0, "Beach"), 294 features (the
fit pads them to 320 columns: ``w0_`` must drop the padding, not the offset).
Binary (0/1) features, where the origin is far from the data: a seeded sample
in which ten features are more often on for the positives.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.svm import LinearSVC

import jaxrank
from conftest import shared_data
from jaxrank import APSVMApprox
from reference import literal_algorithm1, outputs_from_interleaving

C = 2.0
K = 0.5
TOL = 1e-4
SOLVER = jaxrank.solvers.Solver(tol=TOL, max_iter=1500)
MARGIN_TOL = 1e-3  # the documented easy test: y s0 > 1 + 1e-3
FLOAT_SLACK = 1e-4  # float32 rounding of the scores y (w^T x + b) (|s| <~ 10 here)


@pytest.fixture(scope="module")
def scene():
    path = shared_data("scene", "scene-train.arff")
    a = np.loadtxt(path, delimiter=",", comments=["@", "%"])
    rng = np.random.RandomState(1)
    idx = np.sort(rng.permutation(a.shape[0])[:300])
    return a[idx, :294].astype(np.float32), a[idx, 294].astype(np.int64)


@pytest.fixture(scope="module")
def fitted(scene):
    """The defaults (offset in both stages, C_binary = C / n) at k = 0.5."""
    X, y = scene
    return APSVMApprox(C=C, k=K, tol=TOL, max_iter=1500).fit(X, y)


def _signs(y):
    return np.where(y > 0, 1.0, -1.0)


def _centred(X):
    """The training rows centred on their mean (both stages fit these with an offset)."""
    return X - X.mean(axis=0, dtype=np.float64).astype(np.float32)


def _centred_offset(X, w, b):
    """The offset of ``[w, b]`` (scores on ``X``) as the offset on :func:`_centred` rows."""
    return float(b) + float(X.mean(axis=0, dtype=np.float64) @ w.astype(np.float64))


def _kept_easy(X, y, w0, b0, k):
    """Independent NumPy re-implementation of the §3.3 split (float64)."""
    m = _signs(y) * (X.astype(np.float64) @ w0.astype(np.float64) + float(b0))
    kept = np.zeros(len(y), bool)
    for cls in (y > 0, y <= 0):
        e = np.flatnonzero(cls & (m > 1 + MARGIN_TOL))  # strictly beyond the margin
        n_keep = math.ceil(k * len(e) - 1e-6)
        kept[e[np.argsort(-m[e], kind="stable")[:n_keep]]] = True
    return kept


def _ap_slack(scores, y):
    """xi_AP at ``scores`` from the literal Algorithm 1 (tests/reference.py)."""
    labels = y > 0
    opt, pos, neg = literal_algorithm1(scores, labels)
    return outputs_from_interleaving(scores, labels, opt, pos, neg)[2]


@dataclasses.dataclass(frozen=True)
class PenalisedAppx(jaxrank.models.Model):
    """Reference formulation of problem (10): the exact penalty folded into the 1-slack loss.

    A user-defined model: the most violated output is the AP most-violated
    ranking of the difficult samples plus the set of violated easy
    constraints (loss ``Delta_AP + mu #violated``, coefficient ``mu y_i`` on
    them): the same objective as APSVMApprox's hinge terms, solved by
    1-slack planes only.
    """

    kp: int = 1

    solver_defaults = {"cache": 128, "inner_steps": 512}

    def oracle(self, s, problem):
        positive, easy, difficult, mu = problem
        ap = jaxrank.inference.ap_oracle(s, positive, difficult, kp=self.kp)
        y = jnp.where(positive, 1.0, -1.0).astype(s.dtype)
        viol = easy & (y * s < 1)
        return jaxrank.inference.Violation(
            ap.loss + mu * jnp.sum(viol), ap.coef + jnp.where(viol, mu * y, 0), None,
            ap.hinge + mu * jnp.sum(jnp.where(viol, 1 - y * s, 0)))


def test_first_stage_is_the_binary_svm_with_offset(scene, fitted):
    X, y = scene
    n = len(y)
    assert fitted.C_binary_ == pytest.approx(C / n, rel=1e-6)  # the default C_binary
    assert fitted.w0_.shape == (1, X.shape[1]) and fitted.w0_intercept_.shape == (1,)
    w0 = fitted.w0_[0].astype(np.float64)
    b0 = _centred_offset(X, w0, fitted.w0_intercept_[0])
    Xc = _centred(X)

    def objective(w, b):
        return 0.5 * (w @ w + b * b) + C / n * np.maximum(0, 1 - _signs(y) * (Xc @ w + b)).sum()

    # liblinear's dual solver, same objective on the centred rows (regularised
    # intercept, scaling 1)
    ref = LinearSVC(loss="hinge", C=C / n, dual=True, tol=1e-8, max_iter=100_000,
                    intercept_scaling=1.0).fit(Xc, y)
    f_ref = objective(ref.coef_[0].astype(np.float64), float(ref.intercept_[0]))
    assert fitted.binary_converged_
    assert objective(w0, b0) <= f_ref * (1 + 1e-3)
    assert objective(w0, b0) >= f_ref * (1 - 1e-3)


def test_kept_easy_samples_satisfy_the_hard_constraints(scene, fitted):
    X, y = scene
    kept = _kept_easy(X, y, fitted.w0_[0], fitted.w0_intercept_[0], K)
    assert fitted.n_easy_ == kept.sum() > 0
    margins = _signs(y) * (X @ fitted.coef_[0] + fitted.intercept_[0])
    gap = fitted.objective_ - fitted.dual_objective_
    # certified bound of the exact penalty: sum of violations <= 2 gap / (C mu)
    bound = 2 * max(gap, 0) / (C * fitted.mu_)
    assert margins[kept].min() >= 1 - bound - FLOAT_SLACK
    assert np.maximum(0, 1 - margins[kept]).sum() <= bound + FLOAT_SLACK * kept.sum()
    np.testing.assert_allclose(fitted.constraint_violation_,
                               np.maximum(0, 1 - margins[kept]).sum(), atol=1e-3)
    # the stated tolerance: once converged, every margin is >= 1 - tol / (1 - tol)
    assert fitted.converged_
    assert bound <= TOL / (1 - TOL)
    # the constraints bind: problem (10) without them is AP-SVM on the
    # difficult samples, whose optimum is below (10)'s certified lower bound
    free = jaxrank.APSVM(C=C, tol=TOL).fit(X[~kept], y[~kept])
    assert free.converged_ and fitted.dual_objective_ > free.objective_ * (1 + 1e-3)


def test_mu_is_the_slater_bound(scene, fitted):
    """mu = 1 + 2 F(2 v0) / C with xi_AP(2 w0; D) from the literal Algorithm 1."""
    X, y = scene
    w0, b0 = fitted.w0_[0].astype(np.float64), float(fitted.w0_intercept_[0])
    kept = _kept_easy(X, y, w0, b0, K)
    s2 = 2 * (X.astype(np.float64) @ w0 + b0)
    # 2 v0 is strictly feasible: slack > 1 on every kept constraint
    assert (_signs(y)[kept] * s2[kept] - 1).min() > 1
    bc = _centred_offset(X, w0, b0)  # the regularised offset is the one at the centre
    f_bar = 2 * (w0 @ w0 + bc * bc) + C * max(_ap_slack(s2[~kept], y[~kept]), 0.0)
    np.testing.assert_allclose(fitted.mu_, 1 + 2 * f_bar / C, rtol=1e-4)


def test_penalty_is_exact(scene, fitted):
    """min F_mu = min F_{10 mu}: a larger penalty finds no better constrained point."""
    X, y = scene
    kept = _kept_easy(X, y, fitted.w0_[0], fitted.w0_intercept_[0], K)
    pos = jnp.asarray(y > 0)
    model = jaxrank.models.AppxModel(features=jaxrank.models.Intercept(),
                                     kp=int((y > 0).sum()))
    prob = jaxrank.models.AppxProblem(pos, jnp.asarray(~kept), jnp.asarray(kept),
                                      jnp.float32(10 * fitted.mu_))
    big = jax.jit(lambda p: jaxrank.solvers.fit(model, jaxrank.models.design(_centred(X)), p,
                                                C=C, solver=SOLVER))(prob)
    assert bool(big.converged) and fitted.converged_
    f10, d10 = float(big.objective), float(big.dual)
    # F_mu <= F_{10 mu} pointwise, and both minima are F* when mu is exact
    assert d10 <= fitted.objective_ * (1 + 1e-6)
    assert f10 - fitted.dual_objective_ <= 2 * TOL * f10


def test_without_easy_samples_appx_is_ap_svm(scene):
    X, y = scene
    # a tiny first-stage C gives w0, b0 ~ 0: no sample has margin > 1
    appx = APSVMApprox(C=C, k=K, C_binary=1e-6, tol=TOL, max_iter=1500).fit(X, y)
    ap = jaxrank.APSVM(C=C, tol=TOL).fit(X, y)
    assert appx.n_easy_ == 0
    np.testing.assert_allclose(appx.objective_, ap.objective_, rtol=1e-3)
    np.testing.assert_allclose(appx.score(X, y), ap.score(X, y), atol=1e-3)


def test_smaller_k_keeps_fewer_constraints(scene, fitted):
    X, y = scene
    w0, b0 = fitted.w0_[0], fitted.w0_intercept_[0]
    full = _kept_easy(X, y, w0, b0, 1.0)
    quarter = _kept_easy(X, y, w0, b0, 0.25)
    assert quarter.sum() <= fitted.n_easy_ <= full.sum()
    assert np.all(full[quarter])


def test_without_offset_both_stages_are_offset_free(scene):
    X, y = scene
    m = APSVMApprox(C=C, k=K, C_binary=0.5, fit_intercept=False, tol=TOL,
                    max_iter=1500).fit(X, y)
    assert np.all(m.w0_intercept_ == 0)
    w0 = m.w0_[0].astype(np.float64)
    obj = 0.5 * w0 @ w0 + 0.5 * np.maximum(0, 1 - _signs(y) * (X @ w0)).sum()
    ref = LinearSVC(loss="hinge", C=0.5, dual=True, fit_intercept=False, tol=1e-8,
                    max_iter=100_000).fit(X, y)
    r = ref.coef_[0].astype(np.float64)
    f_ref = 0.5 * r @ r + 0.5 * np.maximum(0, 1 - _signs(y) * (X @ r)).sum()
    np.testing.assert_allclose(obj, f_ref, rtol=1e-3)
    kept = _kept_easy(X, y, w0, 0.0, K)
    assert m.n_easy_ == kept.sum() > 0
    # the constraints hold without an offset: y w^T x >= 1 - 2 gap / (C mu)
    margins = _signs(y) * (X @ m.coef_[0])
    bound = 2 * max(m.objective_ - m.dual_objective_, 0) / (C * m.mu_)
    assert margins[kept].min() >= 1 - bound - FLOAT_SLACK


@pytest.fixture(scope="module")
def binary_features():
    """600 samples, 20 features in {0, 1}, 20 % positives; features 0-9 are on with
    probability 0.5 for a positive and 0.3 for a negative, features 10-19 with 0.3."""
    rng = np.random.default_rng(0)
    y = (rng.random(600) < 0.2).astype(int)
    p = np.full((600, 20), 0.3)
    p[y == 1, :10] = 0.5
    return (rng.random(p.shape) < p).astype(np.float32), y


@pytest.mark.parametrize("appx_C", [1.0, 100.0])
def test_binary_features_rank_as_ap_svm_does(binary_features, appx_C):
    """Non-negative features: the first stage's offset is not a reason to rank by the
    number of active features. (Measured at the origin, the regularised offsets made
    the easy set the negatives with the most active features, and the second stage met
    their constraints with negative weights on every feature: below chance.)"""
    X, y = binary_features
    appx = APSVMApprox(C=appx_C).fit(X, y)
    ap = jaxrank.APSVM(C=appx_C).fit(X, y)
    assert appx.converged_ and ap.converged_
    base = y.mean()
    assert ap.score(X, y) > base + 0.3  # the data rank well
    assert appx.score(X, y) >= ap.score(X, y) - 0.02
    # the informative features get positive weights, the others smaller ones
    assert np.all(appx.coef_[0, :10] > 0)
    assert appx.coef_[0, :10].mean() > 2 * np.abs(appx.coef_[0, 10:]).mean()


def test_fit_is_invariant_to_translating_the_features(binary_features):
    """With the offset, the fit does not depend on the origin of the features: for X
    and X + 5 the same split and the same problem (10), so both certified solutions
    lie within their gaps of the one optimum."""
    X, y = binary_features
    a = APSVMApprox(C=100.0).fit(X, y)
    b = APSVMApprox(C=100.0).fit(X + 5, y)
    assert a.converged_ and b.converged_
    assert a.n_easy_ == b.n_easy_ > 0
    np.testing.assert_allclose(b.w0_, a.w0_, rtol=1e-3, atol=1e-3 * np.abs(a.w0_).max())
    gap_a, gap_b = (m.objective_ - m.dual_objective_ for m in (a, b))
    assert abs(a.objective_ - b.objective_) <= gap_a + gap_b + 1e-5 * a.objective_
    # F is 1-strongly convex in [w, offset at the centre]: ||v - v*|| <= sqrt(2 gap)
    va = np.r_[a.coef_[0], _centred_offset(X, a.coef_[0], a.intercept_[0])]
    vb = np.r_[b.coef_[0], _centred_offset(X + 5, b.coef_[0], b.intercept_[0])]
    bound = np.sqrt(2 * max(gap_a, 0)) + np.sqrt(2 * max(gap_b, 0))
    assert np.linalg.norm(va - vb) <= bound + 1e-3 * np.linalg.norm(va)
    # and so the same ranking of the training samples, up to that distance
    sa, sb = a.decision_function(X), b.decision_function(X + 5)
    assert np.abs(sa - sb).max() <= bound * np.sqrt((_centred(X) ** 2).sum(1).max() + 1) + 1e-3


@pytest.mark.parametrize("k", [0, 0.0, -0.5, 1.01, float("nan"), float("inf")])
def test_rejects_k_outside_unit_interval(scene, k):
    X, y = scene
    with pytest.raises(ValueError, match=r"'k' parameter"):
        APSVMApprox(k=k).fit(X, y)


def test_rejects_bad_parameters_and_single_class(scene):
    X, y = scene
    with pytest.raises(ValueError, match="'C' parameter"):
        APSVMApprox(C=0.0).fit(X, y)
    with pytest.raises(ValueError, match="'C_binary' parameter"):
        APSVMApprox(C_binary=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="'fit_intercept' parameter"):
        APSVMApprox(fit_intercept="yes").fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        APSVMApprox().fit(X, np.zeros_like(y))


def test_save_load_roundtrip(fitted, scene, tmp_path):
    X, _ = scene
    path = tmp_path / "appx.npz"
    jaxrank.save(fitted, path)
    back = jaxrank.load(path)
    assert type(back).__name__ == "APSVMApprox" and back.get_params() == fitted.get_params()
    np.testing.assert_array_equal(back.decision_function(X), fitted.decision_function(X))
    for name in ("w0_", "w0_intercept_", "C_binary_", "n_easy_", "mu_"):
        np.testing.assert_array_equal(np.asarray(getattr(back, name)),
                                      np.asarray(getattr(fitted, name)))


def test_hinge_block_equals_the_penalty_as_planes(scene, fitted):
    """Problem (10) on the fixture's split, solved as 1-slack planes only (a
    different formulation, :class:`PenalisedAppx`): the same optimum."""
    X, y = scene
    kept = _kept_easy(X, y, fitted.w0_[0], fitted.w0_intercept_[0], K)
    prob = (jnp.asarray(y > 0), jnp.asarray(kept), jnp.asarray(~kept), jnp.float32(fitted.mu_))
    model = PenalisedAppx(features=jaxrank.models.Intercept(), kp=int((y > 0).sum()))
    ref = jax.jit(lambda p: jaxrank.solvers.fit(model, jaxrank.models.design(_centred(X)), p,
                                                C=C, solver=SOLVER))(prob)
    fr, dr = float(ref.objective), float(ref.dual)
    assert fitted.converged_
    assert fr - dr <= 1e-3 * fr  # the planes converge slowly; close enough to compare
    # each objective is >= the other fit's certified lower bound: the two
    # formulations have the same optimum within the sum of their gaps
    assert fitted.objective_ >= dr * (1 - 1e-6)
    assert fr >= fitted.dual_objective_ * (1 - 1e-6)


def test_batched_appx_equals_independent_fits(scene):
    """A 2-D ``Y`` (both stages through the work queues) vs independent fits.

    Three labels of scene. The split is a discontinuous function of ``v0`` (a
    margin near 1, or a near tie at the top-k cut, flips with rounding-level
    changes of ``v0``), so two fits of the first stage certified within tol
    may split differently. Stage by stage: the batched first stage is the
    binary SVM fitted alone (objective within tol), the batched split is the
    NumPy reference split of the batched ``v0``, and the batched second stage
    is problem (10) on that split fitted alone by ``jaxrank.solvers.fit``.
    """
    X, _ = scene
    a = np.loadtxt(shared_data("scene", "scene-train.arff"), delimiter=",",
                   comments=["@", "%"])
    idx = np.sort(np.random.RandomState(1).permutation(a.shape[0])[:300])
    Y = a[idx, 294:297].astype(int)
    C_bin, max_iter = 0.5, 1500
    many = APSVMApprox(C=C, k=K, C_binary=C_bin, tol=TOL, max_iter=max_iter,
                       binary_max_iter=max_iter).fit(X, Y)
    Xc = _centred(X)
    data = jaxrank.models.design(Xc)
    # one compiled program for the three references: kp bounds every task's positives
    model = jaxrank.models.AppxModel(features=jaxrank.models.Intercept(),
                                     kp=int(Y.sum(axis=0).max()))
    single = jax.jit(lambda p: jaxrank.solvers.fit(
        model, data, p, C=C, solver=jaxrank.solvers.Solver(tol=TOL, max_iter=max_iter)))
    for t in range(Y.shape[1]):
        yt = Y[:, t]
        yy = _signs(yt)
        # stage 1: the binary SVM (regularised offset) on the centred rows alone
        # (both converged: within tol)
        ref0 = jaxrank.BinarySVM(C=C_bin, pos_weight=1, tol=TOL, max_iter=max_iter).fit(Xc, yt)
        w0, b0 = many.w0_[t], float(many.w0_intercept_[t])
        bc = _centred_offset(X, w0, b0)
        f0 = 0.5 * (w0 @ w0 + bc * bc) + C_bin * np.maximum(0, 1 - yy * (Xc @ w0 + bc)).sum()
        assert ref0.converged_ and many.binary_converged_[t]
        np.testing.assert_allclose(f0, ref0.objective_, rtol=2 * TOL)
        # the split of the batched v0: the independent NumPy reference
        easy = _kept_easy(X, yt, w0, b0, K)
        assert many.n_easy_[t] == easy.sum() > 0
        # stage 2 on that split, fitted alone
        prob = jaxrank.models.AppxProblem(jnp.asarray(yt > 0), jnp.asarray(~easy),
                                          jnp.asarray(easy), jnp.float32(many.mu_[t]))
        ref = single(prob)
        fm, dm = float(many.objective_[t]), float(many.dual_objective_[t])
        # each objective is >= the other fit's certified lower bound
        assert fm >= float(ref.dual) * (1 - 1e-6) and float(ref.objective) >= dm * (1 - 1e-6)
        assert bool(ref.converged) and bool(many.converged_[t])
        np.testing.assert_allclose(fm, float(ref.objective), rtol=2 * TOL)
        # and the batched fit's constraints hold with its own certified bound
        bound = 2 * max(fm - dm, 0) / (C * float(many.mu_[t]))
        assert float(many.constraint_violation_[t]) <= bound + FLOAT_SLACK * int(easy.sum())
