"""Fits converge at the defaults: every C of the default grid, certified against float64."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import reference
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

import jaxrank
from jaxrank.inference import ap_oracle


@pytest.fixture(scope="module")
def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


@pytest.mark.parametrize("C", jaxrank.APSVM._default_Cs)
def test_apsvm_converges_at_every_default_C_and_its_objective_is_exact(breast_cancer, C):
    X, y = breast_cancer
    model = jaxrank.APSVM(C=C).fit(X, y)
    assert model.converged_
    # The primal re-evaluated independently in float64 (literal Algorithm 1).
    w = model.coef_[0].astype(np.float64)
    b, a = reference.ap_oracle_literal(X, y == 1)(w)
    f = 0.5 * w @ w + C * max(0.0, b - a @ w)
    assert abs(model.objective_ - f) <= 2e-6 * f
    # The dual bound stays below the primal, and the certified gap is real.
    assert model.dual_objective_ <= f * (1 + 2e-6)
    assert f - model.dual_objective_ <= 1.1e-4 * f


@pytest.mark.parametrize("cls", [jaxrank.AUCSVM, jaxrank.APSVMApprox])
def test_large_C_estimators_converge_at_every_default_C(breast_cancer, cls):
    X, y = breast_cancer
    for C in cls._default_Cs:
        model = cls(C=C).fit(X, y)
        assert np.all(model.converged_), C
        assert model.dual_objective_ <= model.objective_ * (1 + 2e-6)


# One APSVM fit per C given on the command line, with the solver's functional
# API; prints whether the compiled program calls the native cached-plane QP and
# (converged, objective, dual) per C.
_QP_FITS = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler
from jaxrank.models import APModel, ItemProblem, design
from jaxrank.solvers import Solver, fit

X, y = load_breast_cancer(return_X_y=True)
X = StandardScaler().fit_transform(X).astype(np.float32)
pos = jnp.asarray(y == 1)
problem = ItemProblem(pos, jnp.ones(len(y), bool))
model = APModel(kp=int(pos.sum()))
run = jax.jit(lambda C: fit(model, design(X), problem, C=C,
                            solver=Solver(tol=1e-4, max_iter=1000)))
out = {"native_qp": "jaxrank_cached_qp" in run.lower(jnp.float32(1)).as_text(), "fits": []}
for C in sys.argv[1:]:
    r = run(jnp.float32(float(C)))
    out["fits"].append([bool(r.converged), float(r.objective), float(r.dual)])
print(json.dumps(out))
"""


def _qp_fits(Cs, disable_native):
    env = dict(os.environ)
    env.pop("JAXRANK_DISABLE_NATIVE", None)
    if disable_native:
        env["JAXRANK_DISABLE_NATIVE"] = "1"
    proc = subprocess.run([sys.executable, "-c", _QP_FITS, *map(str, Cs)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cached_plane_qp_native_and_xla_forms_certify_each_other():
    # On CPU the cached-plane QP runs natively (float64); on GPU/TPU, and where
    # the library is missing, as XLA loops. Both must reach the certified
    # optimum, and each one's dual bound must lie below the other's objective.
    Cs = (100.0, 10000.0)
    native = _qp_fits(Cs, disable_native=False)
    xla = _qp_fits(Cs, disable_native=True)
    assert not xla["native_qp"]
    if not native["native_qp"]:
        if os.environ.get("CI") == "true":
            pytest.fail("the native cached-plane QP is not in the compiled fit")
        pytest.skip("native library not built")
    for (ok_n, f_n, d_n), (ok_x, f_x, d_x), C in zip(native["fits"], xla["fits"], Cs):
        assert ok_n and ok_x, C
        assert f_n - d_n <= 1.1e-4 * f_n and f_x - d_x <= 1.1e-4 * f_x, C
        assert d_n <= f_x * (1 + 2e-6) and d_x <= f_n * (1 + 2e-6), C


def test_default_C_lies_in_the_default_grid():
    for cls in (jaxrank.APSVM, jaxrank.AUCSVM, jaxrank.APSVMApprox, jaxrank.BinarySVM,
                jaxrank.LatentAPSVM, jaxrank.LatentSVM, jaxrank.LatentSSVM, jaxrank.HOBSVM,
                jaxrank.HOAPSVM):
        C = cls().C
        grid = cls._default_Cs
        assert min(grid) <= C <= max(grid), (cls.__name__, C, grid)


def test_ap_loss_keeps_its_digits_near_a_perfect_ranking():
    # One swapped pair among 3000 items: 1 - AP ~ 1e-6, below float32's
    # resolution of numbers near 1, so the loss must not be formed as 1 - AP.
    n_pos, n_neg = 1000, 2000
    s = np.r_[np.linspace(10, 5, n_pos), np.linspace(4, -5, n_neg)].astype(np.float32)
    s[n_pos - 1], s[n_pos] = s[n_pos], s[n_pos - 1]  # last positive below the first negative
    s = s * 10  # margins >= 1: the most-violated ranking is the true one
    positive = np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)]
    r = ap_oracle(s, positive, np.ones_like(positive), kp=n_pos)
    # float64 literal reference
    opt, pos, neg = reference.literal_algorithm1(s.astype(np.float64), positive)
    loss64, _, _ = reference.outputs_from_interleaving(s.astype(np.float64), positive, opt,
                                                       pos, neg)
    assert loss64 > 0
    assert abs(float(r.loss) - loss64) <= 1e-5 * loss64


def test_latent_svm_default_weight_does_not_collapse_on_unbalanced_bags():
    # 6 positive bags of 40 whose instances are shifted along feature 0: with
    # J = 1 the negatives outweigh them and the fit ends at coef_ = 0 (every
    # bag tied); the default J="balanced" weighs the classes equally.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)).astype(np.float32)
    bags = np.repeat(np.arange(40), 5)
    y = (np.arange(40) < 6).astype(int)
    X[bags < 6, 0] += 2
    collapsed = jaxrank.LatentSVM(C=0.1, J=1.0).fit(X, y, bags=bags)
    assert np.abs(collapsed.coef_).max() < 1e-4  # coef_ = 0 up to the solver tolerance
    model = jaxrank.LatentSVM(C=0.1).fit(X, y, bags=bags)
    assert model.J == "balanced"
    assert model.coef_[0, 0] > 0.1
    assert model.score(X, y, bags=bags) > 0.9


def test_latent_svm_default_weight_balances_candidates_not_bags():
    # 6 positive bags of 5 among 34 negative bags of 40 (1,360 negative
    # candidates, each a hinge): weighing the positive bags by the bag ratio
    # (|P| + |N|) / |P| leaves them outweighed 34:1 and the fit ends at
    # coef_ = 0; the default weighs them against the negative candidates.
    rng = np.random.default_rng(0)
    sizes = np.r_[np.full(6, 5), np.full(34, 40)]
    bags = np.repeat(np.arange(40), sizes)
    X = rng.normal(size=(len(bags), 5)).astype(np.float32)
    y = (np.arange(40) < 6).astype(int)
    X[bags < 6, 0] += 2
    # coef_ = 0 up to the solver tolerance (exactly tied scores, and so the
    # "same score" warning, only where the native DCD kernel runs).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*every training sample gets the same score")
        by_bags = jaxrank.LatentSVM(C=0.001, J=(6 + 34) / 6).fit(X, y, bags=bags)
    assert np.abs(by_bags.coef_).max() < 1e-4
    model = jaxrank.LatentSVM(C=0.001, random_state=0).fit(X, y, bags=bags)
    assert model.converged_
    assert model.coef_[0, 0] > 0.1
    # The balanced weight is the explicit J = (|P| + negative candidates) / |P|.
    explicit = jaxrank.LatentSVM(C=0.001, J=(6 + 34 * 40) / 6, random_state=0)
    explicit.fit(X, y, bags=bags)
    np.testing.assert_allclose(model.coef_, explicit.coef_, rtol=1e-5, atol=1e-6)
    assert model.score(X, y, bags=bags) > 0.7
    # With a robustness fraction c, only the kept negative candidates count:
    # floor(0.5 * 1,360) = 680 of them are ignored.
    robust = jaxrank.LatentSVM(C=0.001, c=0.5, random_state=0).fit(X, y, bags=bags)
    explicit = jaxrank.LatentSVM(C=0.001, c=0.5, J=(6 + 680) / 6, random_state=0)
    explicit.fit(X, y, bags=bags)
    np.testing.assert_allclose(robust.coef_, explicit.coef_, rtol=1e-5, atol=1e-6)
