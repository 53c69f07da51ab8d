"""The solver reaches the exact optimum (certified), for built-in and user-defined models."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
import scipy.sparse as sp
from sklearn.svm import LinearSVC

import jaxrank
from jaxrank.models import (
    APModel,
    HingeTerms,
    Intercept,
    ItemProblem,
    LinearFeatures,
    Model,
    design,
)
from jaxrank.solvers import fit


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_apsvm_objective_within_0p1_percent_of_exact_cutting_plane(page_blocks, C):
    X, y = page_blocks
    rng = np.random.default_rng(0)
    idx = np.r_[rng.choice(np.flatnonzero(y > 0), 25, replace=False),
                rng.choice(np.flatnonzero(y < 0), 175, replace=False)]
    Xs, ys = X[idx], y[idx] > 0
    _, primal, dual = reference.cutting_plane_ssvm(
        reference.ap_oracle_literal(Xs, ys), Xs.shape[1], C
    )
    assert primal - dual <= 1e-6 * primal  # the reference itself is exact
    model = jaxrank.APSVM(C=C, tol=1e-4).fit(Xs, ys)
    assert model.converged_
    # Objective re-evaluated independently (float64, literal Algorithm 1).
    w = model.coef_[0].astype(np.float64)
    b, a = reference.ap_oracle_literal(Xs, ys)(w)
    f = 0.5 * w @ w + C * max(0.0, b - a @ w)
    assert f <= primal * (1 + 1e-3)
    assert f >= dual - 1e-6
    assert model.dual_objective_ <= primal * (1 + 1e-5)


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_binary_svm_objective_matches_liblinear(page_blocks, C):
    X, y = page_blocks
    Xs, ys = X[:1500], y[:1500]
    ref = LinearSVC(C=C, loss="hinge", tol=1e-10, max_iter=1_000_000).fit(Xs, ys)
    wb = np.r_[ref.coef_[0], ref.intercept_]
    ypm = np.where(ys > 0, 1.0, -1.0)
    hinge = np.maximum(0, 1 - ypm * (Xs @ ref.coef_[0] + ref.intercept_[0])).sum()
    f_ref = 0.5 * wb @ wb + C * hinge
    model = jaxrank.BinarySVM(C=C, tol=1e-4).fit(Xs, ys)
    assert model.converged_
    wm = np.r_[model.coef_[0], model.intercept_].astype(np.float64)
    f = 0.5 * wm @ wm + C * np.maximum(0, 1 - ypm * (Xs @ wm[:-1] + wm[-1])).sum()
    assert abs(f - f_ref) <= 1e-3 * f_ref
    assert model.dual_objective_ <= f_ref * (1 + 1e-5)


def test_vmap_of_the_single_driver_over_C_equals_single_fits(page_blocks):
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    data = design(X)
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    model = APModel(kp=int(y.sum()))
    run = jax.jit(lambda C: fit(model, data, prob, C=C, tol=1e-4, max_iter=500))
    Cs = jnp.array([1.0, 10.0, 100.0])
    batched = jax.vmap(run)(Cs)
    for i, C in enumerate(Cs):
        single = run(C)
        assert bool(single.converged) and bool(batched.converged[i])
        np.testing.assert_allclose(batched.objective[i], single.objective, rtol=2e-4)


@dataclasses.dataclass(frozen=True)
class WeightedHinge(Model):
    """A user-defined model: per-sample weighted hinges (liblinear's sample_weight)."""

    cache: int = 1
    inner_steps: int = 0

    def hinge_terms(self, data, problem, C):
        y, weight = problem
        rows, bias = self.features.hinge_rows(data)
        return HingeTerms(rows, bias, y, C * weight)


@pytest.mark.parametrize("sparse", [False, True])
def test_hinge_terms_model_is_liblinears_sample_weighted_svm(page_blocks, sparse):
    """``1/2 ||w||^2 + C sum_i s_i max(0, 1 - y_i (w^T x_i + b))`` is
    ``LinearSVC(C, loss="hinge").fit(X, y, sample_weight=s)`` (liblinear
    regularises its intercept the same way). Weights 0 drop a sample; dense
    and sparse ``X`` give the same fit.
    """
    X, y = page_blocks
    Xs, ys = X[:800], np.where(y[:800] > 0, 1.0, -1.0)
    sw = np.random.default_rng(0).choice([0.0, 1.0, 2.0], size=len(ys))
    C = 0.5
    ref = LinearSVC(C=C, loss="hinge", tol=1e-10, max_iter=1_000_000).fit(Xs, ys, sample_weight=sw)
    wb = np.r_[ref.coef_[0], ref.intercept_]

    def primal(w):
        return 0.5 * w @ w + C * (sw * np.maximum(0, 1 - ys * (Xs @ w[:-1] + w[-1]))).sum()

    data = design(sp.csr_matrix(Xs) if sparse else Xs)
    model = WeightedHinge(features=Intercept())
    prob = (jnp.asarray(ys, jnp.float32), jnp.asarray(sw, jnp.float32))
    res = jax.jit(lambda p: fit(model, data, p, C=C, tol=1e-5, max_iter=20000))(prob)
    assert bool(res.converged)
    w = np.asarray(res.w, np.float64)
    f, f_ref = primal(w), primal(wb)
    np.testing.assert_allclose(float(res.objective), f, rtol=1e-4)  # reported = re-evaluated
    assert abs(f - f_ref) <= 1e-4 * f_ref
    assert float(res.dual) <= f_ref * (1 + 1e-5)  # a valid lower bound


@pytest.mark.parametrize("sparse", [False, True])
def test_planes_are_the_transpose_of_the_feature_map(page_blocks, sparse):
    """The solver's plane ``J^T coef`` (jax.vjp of the feature map) is ``X^T g`` (+ sum g)."""
    X = page_blocks[0][:50]
    g = np.random.default_rng(0).normal(size=50).astype(np.float32)
    data = design(sp.csr_matrix(X) if sparse else X)
    for feats, ref in ((LinearFeatures(), X.T @ g), (Intercept(), np.r_[X.T @ g, g.sum()])):
        w = jnp.zeros(feats.dim(data))
        _, vjp = jax.vjp(lambda v: feats(v, data), w)
        np.testing.assert_allclose(vjp(jnp.asarray(g))[0], ref, rtol=1e-5, atol=1e-5)
    w = np.random.default_rng(1).normal(size=11).astype(np.float32)
    np.testing.assert_allclose(Intercept()(jnp.asarray(w), data), X @ w[:-1] + w[-1],
                               rtol=1e-5, atol=1e-5)


def test_sign_constraint_pins_an_active_weight_to_zero(page_blocks):
    """``nonpositive``: with w_j <= 0 active, the optimum is the fit without feature j.

    (A convex problem whose unconstrained minimiser violates the one
    constraint has its constrained minimiser on the boundary ``w_j = 0``.)
    """
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    run = jax.jit(fit, static_argnames=("model", "max_iter"))
    free = run(APModel(kp=int(y.sum())), design(X), prob, C=100.0, tol=1e-5, max_iter=3000)
    j = int(np.argmax(np.asarray(free.w)))
    assert float(free.w[j]) > 0.05
    con = run(APModel(kp=int(y.sum()), nonpositive=(j, j + 1)), design(X), prob, C=100.0,
              tol=1e-5, max_iter=3000)
    drop = run(APModel(kp=int(y.sum())), design(np.delete(X, j, axis=1)), prob, C=100.0,
               tol=1e-5, max_iter=3000)
    assert bool(con.converged) and bool(drop.converged)
    assert float(con.w[j]) <= 0
    np.testing.assert_allclose(float(con.objective), float(drop.objective), rtol=1e-4)
    assert float(con.dual) <= float(drop.objective) * (1 + 1e-5)
