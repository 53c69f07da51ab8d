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
    BinaryModel,
    HingeTerms,
    Intercept,
    ItemProblem,
    LinearFeatures,
    Model,
    design,
)
from jaxrank.solvers import Solver, fit


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_apsvm_objective_within_0p1_percent_of_exact_cutting_plane(page_blocks, C):
    X, y = page_blocks
    rng = np.random.default_rng(0)
    idx = np.r_[rng.choice(np.flatnonzero(y > 0), 25, replace=False),
                rng.choice(np.flatnonzero(y <= 0), 175, replace=False)]
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
    model = jaxrank.BinarySVM(C=C, pos_weight=1, tol=1e-4).fit(Xs, ys)
    assert model.converged_
    wm = np.r_[model.coef_[0], model.intercept_].astype(np.float64)
    f = 0.5 * wm @ wm + C * np.maximum(0, 1 - ypm * (Xs @ wm[:-1] + wm[-1])).sum()
    assert abs(f - f_ref) <= 1e-3 * f_ref
    assert model.dual_objective_ <= f_ref * (1 + 1e-5)


def test_balanced_binary_svm_is_liblinears_class_weighted_svm(page_blocks):
    """The default ``pos_weight="balanced"`` is scikit-learn's ``class_weight="balanced"``
    at ``C' = 2 C n_neg / n`` (its weights are ``n / (2 n_class)``), and the same fit as
    ``n_neg / n_pos`` given as ``pos_weight``."""
    X, y = page_blocks
    Xs, ys = X[:1500], y[:1500] > 0
    n_pos, n_neg = int(ys.sum()), int((~ys).sum())
    assert n_neg > 3 * n_pos  # rare positives: the unweighted optimum differs
    C = 0.1
    ypm = np.where(ys, 1.0, -1.0)
    cw = np.where(ys, n_neg / n_pos, 1.0)
    ref = LinearSVC(C=2 * C * n_neg / len(ys), loss="hinge", tol=1e-10, max_iter=1_000_000,
                    class_weight="balanced").fit(Xs, ypm)

    def primal(w):
        return 0.5 * w @ w + C * (cw * np.maximum(0, 1 - ypm * (Xs @ w[:-1] + w[-1]))).sum()

    f_ref = primal(np.r_[ref.coef_[0], ref.intercept_])
    model = jaxrank.BinarySVM(C=C).fit(Xs, ys)
    assert model.pos_weight == "balanced" and model.converged_
    f = primal(np.r_[model.coef_[0], model.intercept_].astype(np.float64))
    assert abs(f - f_ref) <= 1e-3 * f_ref
    assert model.dual_objective_ <= f_ref * (1 + 1e-5)
    same = jaxrank.BinarySVM(C=C, pos_weight=n_neg / n_pos).fit(Xs, ys)
    np.testing.assert_allclose(model.coef_, same.coef_, rtol=1e-5, atol=1e-6)
    # Each fit counts its own samples: a subset gets its own ratio.
    sub = np.r_[np.flatnonzero(ys)[: n_pos // 2], np.flatnonzero(~ys)]
    part = jaxrank.BinarySVM(C=C, pos_weight="balanced").fit(Xs[sub], ys[sub])
    n_half = n_pos // 2
    ref_part = jaxrank.BinarySVM(C=C, pos_weight=n_neg / n_half).fit(Xs[sub], ys[sub])
    np.testing.assert_allclose(part.coef_, ref_part.coef_, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="pos_weight"):
        jaxrank.BinarySVM(pos_weight="equal").fit(Xs, ys)
    with pytest.raises(ValueError, match="pos_weight must be a number > 0 or 'balanced'"):
        BinaryModel(pos_weight="equal")


def test_vmap_of_the_single_driver_over_C_equals_single_fits(page_blocks):
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    data = design(X)
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    model = APModel(kp=int(y.sum()))
    run = jax.jit(lambda C: fit(model, data, prob, C=C, solver=Solver(tol=1e-4, max_iter=500)))
    Cs = jnp.array([1.0, 10.0, 100.0])
    batched = jax.vmap(run)(Cs)
    for i, C in enumerate(Cs):
        single = run(C)
        assert bool(single.converged) and bool(batched.converged[i])
        np.testing.assert_allclose(batched.objective[i], single.objective, rtol=2e-4)


@dataclasses.dataclass(frozen=True)
class WeightedHinge(Model):
    """A user-defined model: per-sample weighted hinges (liblinear's sample_weight)."""

    solver_defaults = {"cache": 1, "inner_steps": 0}

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
    res = jax.jit(lambda p: fit(model, data, p, C=C, solver=Solver(tol=1e-5, max_iter=20000)))(prob)
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
    The plane steps judge the dual with the multiplier of ``w_j <= 0`` at its
    optimum, so the constrained fit also takes about as many iterations as
    the fit without feature j (with the multiplier held fixed during a step,
    one of these fits took 156 iterations against 58).
    """
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    run = jax.jit(fit, static_argnames=("model",))
    free = run(APModel(kp=int(y.sum())), design(X), prob, C=100.0,
               solver=Solver(tol=1e-5, max_iter=3000))
    w_free = np.asarray(free.w)
    for j in np.argsort(-w_free)[:3]:  # the three largest weights
        j = int(j)
        assert w_free[j] > 0.05
        con = run(APModel(kp=int(y.sum()), nonpositive=(j, j + 1)), design(X), prob, C=100.0,
                  solver=Solver(tol=1e-5, max_iter=3000))
        drop = run(APModel(kp=int(y.sum())), design(np.delete(X, j, axis=1)), prob, C=100.0,
                   solver=Solver(tol=1e-5, max_iter=3000))
        assert bool(con.converged) and bool(drop.converged)
        assert float(con.w[j]) <= 0
        np.testing.assert_allclose(float(con.objective), float(drop.objective), rtol=1e-4)
        assert float(con.dual) <= float(drop.objective) * (1 + 1e-5)
        assert int(con.num_steps) <= 1.5 * int(drop.num_steps)


def test_many_active_sign_constraints_reach_the_fit_without_their_features(page_blocks):
    """Every weight ``<= 0``: the constrained optimum is the free fit without
    the features whose weight the constraint pins to 0 (its active set A).

    The cached-plane Newton steps follow the piece of the dual where A is
    fixed, so the constrained fit takes about as many iterations as the fit
    without A (projected pairwise steps alone zig-zag between the pieces and
    took dozens of times as many).
    """
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    run = jax.jit(fit, static_argnames=("model",))
    con = run(APModel(kp=int(y.sum()), nonpositive=(0, 10)), design(X), prob, C=100.0,
              solver=Solver(tol=1e-5, max_iter=3000))
    w = np.asarray(con.w)
    assert bool(con.converged) and np.all(w <= 0)
    pinned = w == 0
    assert 2 <= pinned.sum() <= 9
    drop = run(APModel(kp=int(y.sum())), design(X[:, ~pinned]), prob, C=100.0,
               solver=Solver(tol=1e-5, max_iter=3000))
    assert bool(drop.converged) and np.all(np.asarray(drop.w) < 0)
    np.testing.assert_allclose(float(con.objective), float(drop.objective), rtol=2e-5)
    assert int(con.num_steps) <= 1.5 * int(drop.num_steps)


def test_sign_constraint_with_many_weights(page_blocks):
    """The cheaper plane steps of a wide sign-constrained model (``nu`` held
    fixed during a step) reach the same certified optimum."""
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    run = jax.jit(fit, static_argnames=("model",))
    narrow = run(APModel(kp=int(y.sum()), nonpositive=(1, 2)), design(X), prob, C=100.0,
                 solver=Solver(tol=1e-5, max_iter=3000))
    # 40,000 empty sparse columns: the optimum is the same, with zero weights there.
    wide_X = sp.hstack([sp.csr_matrix(X), sp.csr_matrix((400, 40_000), dtype=np.float32)])
    wide = run(APModel(kp=int(y.sum()), nonpositive=(1, 2)), design(wide_X.tocsr()), prob,
               C=100.0, solver=Solver(tol=1e-5, max_iter=3000))
    assert bool(narrow.converged) and bool(wide.converged)
    assert float(wide.w[1]) <= 0 and not np.any(np.asarray(wide.w)[10:])
    np.testing.assert_allclose(float(wide.objective), float(narrow.objective), rtol=2e-5)


def _ap_objective64(X, y, w, C):
    """F(w) in float64 by the literal Algorithm 1 (tests/reference.py)."""
    w = np.asarray(w, np.float64)
    b, a = reference.ap_oracle_literal(X, y)(w)
    return 0.5 * w @ w + C * max(0.0, b - a @ w)


def test_warm_start_is_the_first_evaluated_point(page_blocks):
    """``w0``: one iteration returns ``w0`` itself with ``F(w0)`` (float64 reference)."""
    X, y = page_blocks[0][:300], page_blocks[1][:300] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(300, bool))
    model = APModel(kp=int(y.sum()))
    w0 = np.random.default_rng(3).normal(scale=0.05, size=10).astype(np.float32)
    run = jax.jit(fit, static_argnames=("model",))
    one = run(model, design(X), prob, C=10.0, solver=Solver(tol=1e-4, max_iter=1),
              w0=jnp.asarray(w0))
    np.testing.assert_array_equal(np.asarray(one.w), w0)
    f0 = _ap_objective64(X, y, w0, 10.0)
    np.testing.assert_allclose(float(one.objective), f0, rtol=1e-5)
    # A few iterations never return anything worse than the start.
    few = run(model, design(X), prob, C=10.0, solver=Solver(tol=1e-4, max_iter=5),
              w0=jnp.asarray(w0))
    assert _ap_objective64(X, y, few.w, 10.0) <= f0 * (1 + 1e-6)


@pytest.mark.parametrize("C", [1.0, 100.0])
def test_warm_start_at_the_optimum_converges_to_the_same_objective_sooner(page_blocks, C):
    X, y = page_blocks[0][:400], page_blocks[1][:400] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(400, bool))
    model = APModel(kp=int(y.sum()))
    run = jax.jit(fit, static_argnames=("model",))
    cold = run(model, design(X), prob, C=C, solver=Solver(tol=1e-4, max_iter=3000))
    assert bool(cold.converged)
    warm = run(model, design(X), prob, C=C, solver=Solver(tol=1e-4, max_iter=3000), w0=cold.w)
    assert bool(warm.converged)
    # Certified: both objectives are within tol of the optimum, hence of each other.
    np.testing.assert_allclose(float(warm.objective), float(cold.objective), rtol=2e-4)
    assert float(warm.objective) <= _ap_objective64(X, y, cold.w, C) * (1 + 1e-5)
    assert int(warm.num_steps) <= int(cold.num_steps)


def test_warm_start_of_fit_many_equals_single_warm_fits(page_blocks):
    X, y = page_blocks[0][:300], page_blocks[1][:300] > 0
    data = design(X)
    model = APModel(kp=int(y.sum()))
    prob = ItemProblem(jnp.asarray(y), jnp.ones(300, bool))
    Cs = jnp.asarray([0.3, 3.0, 30.0], jnp.float32)
    w0 = jnp.asarray(np.random.default_rng(4).normal(scale=0.05, size=(3, 10)), jnp.float32)
    probs = jax.tree_util.tree_map(lambda a: jnp.stack([a] * 3), prob)
    many = jaxrank.solvers.fit_many(model, data, probs, Cs, solver=Solver(tol=1e-4, max_iter=400),
                                    batch_size=2, w0=w0)
    for k in range(3):
        one = fit(model, data, prob, C=Cs[k], solver=Solver(tol=1e-4, max_iter=400), w0=w0[k])
        assert bool(one.converged) and bool(many.converged[k])
        np.testing.assert_allclose(float(many.objective[k]), float(one.objective), rtol=2e-4)
    # Each problem gets its own start (through the queue's reordering by C).
    for devices in (None, tuple(jax.devices()[:2])):
        first = jaxrank.solvers.fit_many(model, data, probs, Cs, solver=Solver(max_iter=1),
                                         batch_size=2,
                                         w0=w0, devices=devices)
        np.testing.assert_array_equal(np.asarray(first.w), np.asarray(w0))


def test_warm_start_is_projected_onto_the_sign_constraint(page_blocks):
    X, y = page_blocks[0][:300], page_blocks[1][:300] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(300, bool))
    w0 = jnp.full((10,), 0.1, jnp.float32)
    res = fit(APModel(kp=int(y.sum()), nonpositive=(2, 4)), design(X), prob, C=1.0,
              solver=Solver(max_iter=1), w0=w0)
    np.testing.assert_array_equal(np.asarray(res.w), np.r_[0.1, 0.1, 0, 0, [0.1] * 6]
                                  .astype(np.float32))


def test_warm_start_of_the_wrong_shape_or_dtype_is_refused(page_blocks):
    X, y = page_blocks[0][:100], page_blocks[1][:100] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(100, bool))
    model = APModel(kp=int(y.sum()))
    with pytest.raises(ValueError, match="w0 must have shape"):
        fit(model, design(X), prob, C=1.0, w0=jnp.zeros(9))
    with pytest.raises(TypeError, match="w0 must be a float"):
        fit(model, design(X), prob, C=1.0, w0=jnp.zeros(10, jnp.int32))
    with pytest.raises(ValueError, match="w0 must have shape"):
        jaxrank.solvers.fit_many(model, design(X), jax.tree_util.tree_map(
            lambda a: a[None], prob), jnp.ones(1), w0=jnp.zeros(10))


@dataclasses.dataclass(frozen=True)
class _CountingSearch(APModel):
    """An exact oracle dressed as a warm-started search: ``aux`` = its start + 1."""

    def search_start(self, problem):
        return 100 * jnp.sum(problem.where).astype(jnp.int32)

    def oracle(self, S, problem, start=None):
        r = super().oracle(S, problem)
        return r._replace(aux=start + 1)


def test_warm_started_search_gets_its_start_then_the_previous_aux(page_blocks):
    """``search_start`` at the first call, then the previous call's ``aux`` (types item 4)."""
    X, y = page_blocks[0][:300], page_blocks[1][:300] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(300, bool))
    model = _CountingSearch(kp=int(y.sum()))
    data = design(X)
    state = jaxrank.solvers.init_state(10, jnp.float32, jaxrank.solvers.plane_cache_size(32, 10),
                                       search=model.search_start(prob))
    run = jax.jit(jaxrank.solvers.step, static_argnames=("model",))
    for k in range(1, 6):
        state = run(state, model, data, prob, 1.0, solver=Solver(tol=0.0, max_iter=100))
        assert int(state.search) == 300 * 100 + k
    # A fresh problem restarts from its own search_start, in the queue too;
    # the fits equal those of the same exact oracle without a search.
    probs = ItemProblem(jnp.stack([prob.positive] * 2), jnp.stack([prob.where] * 2))
    Cs = jnp.asarray([1.0, 30.0], jnp.float32)
    plain = jaxrank.solvers.fit_many(APModel(kp=int(y.sum())), data, probs, Cs,
                                     solver=Solver(max_iter=100),
                                     batch_size=1)
    searched = jaxrank.solvers.fit_many(model, data, probs, Cs, solver=Solver(max_iter=100),
                                        batch_size=1)
    np.testing.assert_array_equal(np.asarray(searched.w), np.asarray(plain.w))
    np.testing.assert_array_equal(np.asarray(searched.num_steps), np.asarray(plain.num_steps))
    one = fit(model, data, prob, C=30.0, solver=Solver(max_iter=100))
    ref = fit(APModel(kp=int(y.sum())), data, prob, C=30.0, solver=Solver(max_iter=100))
    np.testing.assert_array_equal(np.asarray(one.w), np.asarray(ref.w))


def test_fit_status_tells_converged_max_iter_and_non_finite_apart(page_blocks):
    from jaxrank.solvers import FitResult, FitStatus

    obj = np.array([1.0, 1.0, np.inf, np.nan, 2.0], np.float32)
    conv = np.array([True, False, False, False, False])
    want = [FitStatus.CONVERGED, FitStatus.MAX_ITER, FitStatus.NONFINITE, FitStatus.NONFINITE,
            FitStatus.MAX_ITER]
    host = FitResult(None, obj, None, None, conv).status
    traced = jax.jit(lambda o, c: FitResult(None, o, None, None, c).status)(obj, conv)
    assert host.tolist() == np.asarray(traced).tolist() == [int(s) for s in want]
    # A fit cut short stops at max_iter; the same fit run long enough converges.
    X, y = page_blocks
    short = jaxrank.APSVM(C=10.0, max_iter=3)
    with pytest.warns(Warning, match="max_iter"):
        short.fit(X, y)
    assert not short.converged_ and short.fit_status_ == FitStatus.MAX_ITER.label
    full = jaxrank.APSVM(C=10.0).fit(X, y)
    assert full.converged_ and full.fit_status_ == "converged"


def test_solver_settings_take_the_models_suggestions_and_are_checked():
    """``Solver``: a field given wins over the model's ``solver_defaults``, which win
    over the defaults; bad values and models with the former fields are refused."""
    from jaxrank.models import AppxModel

    assert Solver().for_model(APModel()).static() == (2000, 32, 32, 5, 0)
    assert Solver().for_model(AppxModel()).static() == (2000, 64, 128, 5, 0)
    assert Solver(cache=8, hinge_visits=2).for_model(AppxModel()).static() == (
        2000, 8, 128, 2, 0)
    for bad, err in [(dict(max_iter=0), ValueError), (dict(tol=-1.0), ValueError),
                     (dict(tol=float("nan")), ValueError), (dict(tol="1e-4"), TypeError),
                     (dict(tol=np.float32(-1e-4)), ValueError),
                     (dict(cache=1.5), TypeError), (dict(inner_steps=-1), ValueError),
                     (dict(hinge_visits=0), ValueError), (dict(max_iter=True), TypeError)]:
        with pytest.raises(err, match="Solver"):
            Solver(**bad)

    @dataclasses.dataclass(frozen=True)
    class OldStyle(APModel):
        cache: int = 64

    with pytest.raises(TypeError, match="solver_defaults"):
        Solver().for_model(OldStyle())

    @dataclasses.dataclass(frozen=True)
    class Typo(APModel):
        solver_defaults = {"caches": 64}

    with pytest.raises(ValueError, match="unknown key"):
        Solver().for_model(Typo())


def test_solver_settings_reach_the_fit_and_tol_is_traced(page_blocks):
    """Other plane-cache settings take another path to the same certified optimum;
    a new ``tol`` reuses the compiled fit, a new ``max_iter`` compiles another."""
    X, y = page_blocks[0][:300], page_blocks[1][:300] > 0
    prob = ItemProblem(jnp.asarray(y), jnp.ones(300, bool))
    model, data = APModel(kp=int(y.sum())), design(X)
    run = jax.jit(fit, static_argnames=("model",))
    a = run(model, data, prob, C=100.0, solver=Solver(tol=1e-4, max_iter=3000))
    b = run(model, data, prob, C=100.0, solver=Solver(tol=1e-4, max_iter=3000, inner_steps=0,
                                                      cache=4))
    assert bool(a.converged) and bool(b.converged)
    assert int(a.num_steps) != int(b.num_steps)
    np.testing.assert_allclose(float(b.objective), float(a.objective), rtol=2e-4)
    # Counted relative to the two programs above (the absolute size of the
    # jit cache also depends on what ran before in the process).
    before = run._cache_size()
    run(model, data, prob, C=100.0, solver=Solver(tol=1e-3, max_iter=3000))
    assert run._cache_size() == before
    run(model, data, prob, C=100.0, solver=Solver(tol=1e-3, max_iter=2999))
    assert run._cache_size() > before
