"""The Pegasos-style solver reaches the exact optimum (within 0.1 %)."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from sklearn.svm import LinearSVC

import jaxrank
from jaxrank.inference import ap_most_violated
from jaxrank.solvers import fit_linear


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


def test_no_recompilation_on_repeated_fits_with_equal_shapes(page_blocks):
    X, y = page_blocks[0][:300], page_blocks[1][:300]
    jaxrank.APSVM(C=1.0).fit(X, y)
    size = fit_linear._cache_size()
    jaxrank.APSVM(C=3.0).fit(X + 0.5, y)
    jaxrank.APSVM(C=0.2, tol=1e-3).fit(X * 2, y)
    assert fit_linear._cache_size() == size


def test_inference_kernel_traces_once():
    labels = np.array([1, 0, 0, 1, 0, 0], bool)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def f(s):
        return ap_most_violated(s, labels).hinge

    f(jnp.arange(6.0))
    f(jnp.ones(6))
    f(-jnp.arange(6.0))


def test_vmap_over_C_equals_single_fits(page_blocks):
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    Xj, pj, vj = jnp.asarray(X), jnp.asarray(y), jnp.ones(400, bool)
    Cs = jnp.array([0.1, 1.0, 10.0])
    kw = dict(loss="ap", kp=int(y.sum()), max_iter=500)
    batched = jax.vmap(lambda C: fit_linear(Xj, pj, vj, C, 1e-4, **kw))(Cs)
    for i, C in enumerate(Cs):
        single = fit_linear(Xj, pj, vj, C, 1e-4, **kw)
        np.testing.assert_allclose(batched.objective[i], single.objective, rtol=1e-3)


@pytest.mark.parametrize("sparse", [False, True])
def test_hinge_block_is_a_weighted_binary_svm(page_blocks, sparse):
    """A HingeBlock with a null 1-slack loss is liblinear's sample-weighted SVM.

    ``1/2 ||w||^2 + sum_i u_i max(0, 1 - y_i (w^T x_i + b))`` with ``u_i = C
    s_i`` is ``LinearSVC(C, loss="hinge").fit(X, y, sample_weight=s)``
    (liblinear regularises its intercept the same way). Weights 0 drop a
    sample; dense and BCOO ``X`` give the same fit.
    """
    from jax.experimental import sparse as jsparse

    from jaxrank.inference import MostViolated
    from jaxrank.solvers import HingeBlock, fit_ssvm

    X, y = page_blocks
    Xs, ys = X[:800], np.where(y[:800] > 0, 1.0, -1.0)
    sw = np.random.default_rng(0).choice([0.0, 1.0, 2.0], size=len(ys))
    C = 0.5
    ref = LinearSVC(C=C, loss="hinge", tol=1e-10, max_iter=1_000_000).fit(Xs, ys, sample_weight=sw)
    wb = np.r_[ref.coef_[0], ref.intercept_]

    def primal(w):
        return 0.5 * w @ w + C * (sw * np.maximum(0, 1 - ys * (Xs @ w[:-1] + w[-1]))).sum()

    def null_oracle(s):  # the 1-slack loss is identically 0
        z = jnp.zeros((), s.dtype)
        return MostViolated(z, jnp.zeros_like(s), z, jnp.zeros(s.shape, jnp.int32))

    Xj = jsparse.BCOO.fromdense(jnp.asarray(Xs)) if sparse else jnp.asarray(Xs)
    hinge = HingeBlock(jnp.asarray(C * sw, jnp.float32), jnp.asarray(ys, jnp.float32))
    res = jax.jit(lambda h: fit_ssvm(null_oracle, Xj, C=1.0, tol=1e-5, max_iter=5000,
                                     fit_intercept=True, hinge=h))(hinge)
    assert bool(res.converged)
    w = np.asarray(res.w, np.float64)
    f, f_ref = primal(w), primal(wb)
    np.testing.assert_allclose(float(res.objective), f, rtol=1e-4)  # reported = re-evaluated
    assert abs(f - f_ref) <= 1e-4 * f_ref
    assert float(res.dual) <= f_ref * (1 + 1e-5)  # a valid lower bound


def test_hinge_block_rejects_wrong_shapes(page_blocks):
    from jaxrank.inference import MostViolated
    from jaxrank.solvers import HingeBlock, fit_ssvm

    X = jnp.asarray(page_blocks[0][:50])

    def null_oracle(s):
        z = jnp.zeros((), s.dtype)
        return MostViolated(z, jnp.zeros_like(s), z, jnp.zeros(s.shape, jnp.int32))

    with pytest.raises(ValueError, match="hinge must be a HingeBlock"):
        fit_ssvm(null_oracle, X, C=1.0, hinge=HingeBlock(jnp.ones(49), jnp.ones(49)))
