"""AP-SVM-APPX (§3.3, problem (10)): split, hard constraints, limits, errors, save/load.

Real data: 300 samples of MULAN "scene" (label 0, "Beach"), 294 features.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import jaxrank
from conftest import shared_data
from jaxrank import APSVMApprox

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
C = 2.0
K = 0.5
TOL = 1e-4
FLOAT_SLACK = 1e-4  # float32 rounding of the scores y w^T x (|w^T x| <~ 10 here)


@pytest.fixture(scope="module")
def scene():
    path = shared_data("scene", "scene-train.arff")
    a = np.loadtxt(path, delimiter=",", comments=["@", "%"])
    rng = np.random.RandomState(1)
    idx = np.sort(rng.permutation(a.shape[0])[:300])
    return a[idx, :294].astype(np.float32), a[idx, 294].astype(np.int64)


@pytest.fixture(scope="module")
def fitted(scene):
    X, y = scene
    return APSVMApprox(C=C, k=K, C_binary=0.5, tol=TOL, max_iter=1500).fit(X, y)


def _kept_easy(X, y, w0, k):
    """Independent NumPy re-implementation of the §3.3 split."""
    s = X.astype(np.float64) @ w0.astype(np.float64)
    yy = np.where(y > 0, 1.0, -1.0)
    m = yy * s
    kept = np.zeros(len(y), bool)
    for cls in (y > 0, y <= 0):
        e = np.flatnonzero(cls & (m >= 1 - 1e-3))  # margin SVs (at 1) are easy
        n_keep = math.ceil(k * len(e) - 1e-6)
        key = np.where(np.abs(m[e] - 1) <= 1e-3, 1.0, m[e])  # margin SVs tie, index order
        kept[e[np.argsort(-key, kind="stable")[:n_keep]]] = True
    return kept


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
    cache: int = 128
    inner_steps: int = 512

    def oracle(self, s, problem):
        import jax.numpy as jnp

        positive, easy, difficult, mu = problem
        ap = jaxrank.inference.ap_oracle(s, positive, difficult, kp=self.kp)
        y = jnp.where(positive, 1.0, -1.0).astype(s.dtype)
        viol = easy & (y * s < 1)
        return jaxrank.inference.Violation(
            ap.loss + mu * jnp.sum(viol), ap.coef + jnp.where(viol, mu * y, 0), None,
            ap.hinge + mu * jnp.sum(jnp.where(viol, 1 - y * s, 0)))


def test_first_stage_is_the_intercept_free_binary_svm(scene, fitted):
    X, y = scene
    ref = jaxrank.BinarySVM(C=0.5, fit_intercept=False, tol=TOL, max_iter=2000).fit(X, y)
    w0 = fitted.w0_[0]
    obj = 0.5 * w0 @ w0 + 0.5 * np.maximum(0, 1 - np.where(y > 0, 1, -1) * (X @ w0)).sum()
    np.testing.assert_allclose(obj, ref.objective_, rtol=1e-3)


def test_kept_easy_samples_satisfy_the_hard_constraints(scene, fitted):
    X, y = scene
    kept = _kept_easy(X, y, fitted.w0_[0], K)
    assert fitted.n_easy_ == kept.sum() > 0
    margins = np.where(y > 0, 1, -1) * (X @ fitted.coef_[0])
    gap = fitted.objective_ - fitted.dual_objective_
    # certified bound of the exact penalty: sum of violations <= 2 gap / (C mu)
    bound = 2 * max(gap, 0) / (C * fitted.mu_)
    assert margins[kept].min() >= 1 - bound - FLOAT_SLACK
    assert np.maximum(0, 1 - margins[kept]).sum() <= bound + FLOAT_SLACK * kept.sum()
    # the stated tolerance: once converged, the bound is below tol
    if fitted.converged_:
        assert bound <= TOL
    # the constraint binds: AP-SVM on the same data violates some of them
    ap = jaxrank.APSVM(C=C, tol=TOL).fit(X, y)
    ap_margins = np.where(y > 0, 1, -1) * (X @ ap.coef_[0])
    assert (ap_margins[kept] < 1 - 1e-3).any()


def test_without_easy_samples_appx_is_ap_svm(scene):
    X, y = scene
    # a tiny first-stage C gives w0 ~ 0: no sample has margin >= 1
    appx = APSVMApprox(C=C, k=K, C_binary=1e-6, tol=TOL, max_iter=1500).fit(X, y)
    ap = jaxrank.APSVM(C=C, tol=TOL).fit(X, y)
    assert appx.n_easy_ == 0
    np.testing.assert_allclose(appx.objective_, ap.objective_, rtol=1e-3)
    np.testing.assert_allclose(appx.score(X, y), ap.score(X, y), atol=1e-3)


def test_smaller_k_keeps_fewer_constraints(scene, fitted):
    X, y = scene
    full = _kept_easy(X, y, fitted.w0_[0], 1.0)
    quarter = _kept_easy(X, y, fitted.w0_[0], 0.25)
    assert quarter.sum() <= fitted.n_easy_ <= full.sum()
    assert np.all(full[quarter])


@pytest.mark.parametrize("k", [0, 0.0, -0.5, 1.01, float("nan"), float("inf")])
def test_rejects_k_outside_unit_interval(scene, k):
    X, y = scene
    with pytest.raises(ValueError, match=r"'k' parameter"):
        APSVMApprox(k=k).fit(X, y)


def test_rejects_bad_C_and_single_class(scene):
    X, y = scene
    with pytest.raises(ValueError, match="'C' parameter"):
        APSVMApprox(C=0.0).fit(X, y)
    with pytest.raises(ValueError, match="'C_binary' parameter"):
        APSVMApprox(C_binary=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        APSVMApprox().fit(X, np.zeros_like(y))


def test_save_load_roundtrip(fitted, scene, tmp_path):
    X, _ = scene
    path = tmp_path / "appx.npz"
    jaxrank.save(fitted, path)
    back = jaxrank.load(path)
    assert type(back).__name__ == "APSVMApprox" and back.get_params() == fitted.get_params()
    np.testing.assert_array_equal(back.decision_function(X), fitted.decision_function(X))


def test_batched_appx_equals_independent_fits(scene):
    """A 2-D ``Y`` (both stages through the work queues) vs independent fits.

    The split is a discontinuous function of w0 (a margin near 1, or a near
    tie at the top-k cut, flips with rounding-level changes of w0), so two
    fits of the first stage certified within tol may split differently.
    Stage by stage: the batched first stage is the binary SVM fitted alone
    (objective within tol), the batched split is the NumPy reference split
    of the batched w0, and the batched second stage is problem (10) on that
    split fitted alone (as 1-slack planes, a different formulation).
    """
    import jax
    import jax.numpy as jnp

    X, y = scene
    rng = np.random.default_rng(0)
    Y = np.stack([y > 0, (y > 0) ^ (rng.random(len(y)) < 0.05), X[:, 0] > np.median(X[:, 0])],
                 axis=1).astype(int)
    C_bin, max_iter = 0.5, 3000
    many = APSVMApprox(C=C, k=K, C_binary=C_bin, tol=TOL, max_iter=max_iter,
                       binary_max_iter=max_iter).fit(X, Y)
    data = jaxrank.models.design(X)
    for t in range(Y.shape[1]):
        yt = Y[:, t]
        yy = np.where(yt > 0, 1, -1)
        # stage 1: the intercept-free binary SVM alone (both converged: within tol)
        ref0 = jaxrank.BinarySVM(C=C_bin, fit_intercept=False, tol=TOL, max_iter=max_iter)
        ref0.fit(X, yt)
        w0 = many.w0_[t]
        f0 = 0.5 * w0 @ w0 + C_bin * np.maximum(0, 1 - yy * (X @ w0)).sum()
        assert ref0.converged_
        np.testing.assert_allclose(f0, ref0.objective_, rtol=2 * TOL)
        # the split of the batched w0: the independent NumPy reference
        easy = _kept_easy(X, yt, w0, K)
        assert many.n_easy_[t] == easy.sum()
        # stage 2 on that split, fitted alone with the penalty as 1-slack planes
        pos = jnp.asarray(yt > 0)
        prob = (pos, jnp.asarray(easy), jnp.asarray(~easy), jnp.float32(many.mu_[t]))
        model = PenalisedAppx(kp=int((yt > 0).sum()))
        ref = jax.jit(lambda p: jaxrank.solvers.fit(model, data, p, C=C, tol=TOL,
                                                    max_iter=max_iter))(prob)
        fm, dm = float(many.objective_[t]), float(many.dual_objective_[t])
        # each objective is >= the other fit's certified lower bound
        assert fm >= float(ref.dual) * (1 - 1e-5) and float(ref.objective) >= dm * (1 - 1e-5)
        if bool(ref.converged) and bool(many.converged_[t]):
            np.testing.assert_allclose(fm, float(ref.objective), rtol=1e-3)
        # and the batched fit's constraints hold with its own certified bound
        bound = 2 * max(fm - dm, 0) / (C * float(many.mu_[t]))
        assert float(many.constraint_violation_[t]) <= bound + FLOAT_SLACK * int(easy.sum())
