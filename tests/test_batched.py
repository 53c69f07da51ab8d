"""The batched driver (work queues sharded over devices): every fit of a batch is the fit run alone.

The Frank-Wolfe path itself depends on float rounding (batched reductions
round differently, and the pairwise steps' argmax picks amplify it), so the
test is what the solver certifies: each fit's objective is >= the other's
dual bound, both gaps are <= tol, and the weights are within the
strong-convexity bound. Real data: the bundled page-blocks set.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.models import APModel, BinaryModel, Intercept, ItemProblem, design
from jaxrank.solvers import Solver, fit, fit_many

N = 240
fit_jit = jax.jit(fit, static_argnames=("model", "callback"))
many_jit = jax.jit(fit_many, static_argnames=("model", "batch_size", "devices", "callback"))


def _problems(page_blocks, dtype):
    """Four label sets (two tasks x two training masks) x three C: 12 problems."""
    X, y = page_blocks
    X = X[:N].astype(dtype)
    pos0 = y[:N] > 0
    pos1 = X[:, 0] > np.median(X[:, 0])  # a second real ranking task on the same X
    rng = np.random.default_rng(0)
    half = rng.random(N) < 0.6
    labels = [(pos0, np.ones(N, bool)), (pos0, half), (pos1, np.ones(N, bool)), (pos1, ~half)]
    Cs = [0.1, 1.0, 10.0]
    pos = np.stack([p for p, _ in labels for _ in Cs])
    valid = np.stack([v for _, v in labels for _ in Cs])
    C = np.array([c for _ in labels for c in Cs], dtype)
    kp = int(max((p & v).sum() for p, v in labels))
    probs = ItemProblem(jnp.asarray(pos), jnp.asarray(valid))
    return design(X, dtype=dtype), probs, jnp.asarray(C), kp


def _one(probs, i):
    return jax.tree_util.tree_map(lambda a: a[i], probs)


def _assert_same_fit(q, r, tol):
    """Two certified fits of one problem agree as the solver guarantees.

    Each primal objective is >= the other's dual bound (both bound the same
    optimum F*), both relative gaps are <= tol, and since F is 1-strongly
    convex, ||w - w*|| <= sqrt(2 gap): the weights are within the sum.
    """
    fq, dq, fr, dr = (float(v) for v in (q.objective, q.dual, r.objective, r.dual))
    assert bool(q.converged) and bool(r.converged)
    assert fq - dq <= tol * fq and fr - dr <= tol * fr
    slack = 1e-12 * max(fq, fr) if q.w.dtype == jnp.float64 else 1e-5 * max(fq, fr)
    assert fq >= dr - slack and fr >= dq - slack
    bound = np.sqrt(2 * max(fq - dq, 0)) + np.sqrt(2 * max(fr - dr, 0))
    assert np.linalg.norm(np.asarray(q.w) - np.asarray(r.w)) <= bound + slack


@pytest.mark.parametrize("batch_size", [1, 5, 12])
def test_queue_fits_equal_single_fits_float64(page_blocks, x64, batch_size):
    data, probs, C, kp = _problems(page_blocks, np.float64)
    model, tol, max_iter = APModel(kp=kp), 1e-6, 400
    q = many_jit(model, data, probs, C, solver=Solver(tol=tol, max_iter=max_iter),
                 batch_size=batch_size)
    assert q.w.dtype == jnp.float64
    for i in range(C.shape[0]):
        r = fit_jit(model, data, _one(probs, i), C=C[i], solver=Solver(tol=tol, max_iter=max_iter))
        _assert_same_fit(jax.tree_util.tree_map(lambda a: a[i], q), r, tol)


@pytest.mark.parametrize("devices", [1, 2])
def test_sharded_queues_equal_single_fits(page_blocks, devices):
    assert len(jax.devices()) >= 2, "conftest sets two CPU devices"
    data, probs, C, kp = _problems(page_blocks, np.float32)
    model, tol, max_iter = APModel(kp=kp), 1e-4, 300
    res = many_jit(model, data, probs, C, solver=Solver(tol=tol, max_iter=max_iter),
                   batch_size=3, devices=tuple(jax.devices()[:devices]))
    for i in range(C.shape[0]):
        r = fit_jit(model, data, _one(probs, i), C=C[i], solver=Solver(tol=tol, max_iter=max_iter))
        _assert_same_fit(jax.tree_util.tree_map(lambda a: a[i], res), r, tol)


def test_hinge_block_batches_equal_single_fits(page_blocks):
    """The n-slack hinge block (binary SVM) in queues of 2 devices equals single fits."""
    data, probs, C, _ = _problems(page_blocks, np.float32)
    model, tol = BinaryModel(features=Intercept()), 1e-4
    res = many_jit(model, data, probs, C, solver=Solver(tol=tol, max_iter=5000), batch_size=4,
                   devices=tuple(jax.devices()[:2]))
    for i in range(C.shape[0]):
        r = fit_jit(model, data, _one(probs, i), C=C[i], solver=Solver(tol=tol, max_iter=5000))
        _assert_same_fit(jax.tree_util.tree_map(lambda a: a[i], res), r, tol)


def test_results_come_back_in_problem_order_with_an_odd_count(page_blocks, x64):
    data, probs, C, kp = _problems(page_blocks, np.float64)
    keep = np.arange(11)  # 11 problems over 2 devices: one padded slot
    perm = np.random.default_rng(1).permutation(keep.size)
    kw = dict(solver=Solver(tol=1e-6, max_iter=400), batch_size=4,
              devices=tuple(jax.devices()[:2]))
    model = APModel(kp=kp)
    a = many_jit(model, data, _one(probs, keep), C[keep], **kw)
    b = many_jit(model, data, _one(probs, keep[perm]), C[keep[perm]], **kw)
    for i, j in enumerate(perm):
        _assert_same_fit(jax.tree_util.tree_map(lambda r: r[i], b),
                         jax.tree_util.tree_map(lambda r: r[j], a), 1e-6)


def test_progress_callback_counts_every_fit(page_blocks):
    data, probs, C, kp = _problems(page_blocks, np.float32)
    seen = []

    def report(n):
        seen.append(int(n))

    kw = dict(solver=Solver(max_iter=200), batch_size=5, devices=tuple(jax.devices()[:2]),
              callback=report)
    jax.block_until_ready(many_jit(APModel(kp=kp), data, probs, C, **kw))
    jax.effects_barrier()
    assert sum(seen) == C.shape[0] and all(n > 0 for n in seen)


def test_repeated_estimator_fits_with_equal_shapes_compile_nothing(page_blocks, caplog):
    """The real risk: any jitted kernel (solver, inference buckets, metrics) recompiling.

    A second fit with other values, C and tol but equal shapes must not
    compile anything, eager glue included.
    """
    X, y = page_blocks[0][:300], page_blocks[1][:300]
    for est in (jaxrank.APSVM(C=1.0), jaxrank.BinarySVM(C=0.1)):
        est.fit(X, y)
        est.score(X, y)
        with jax.log_compiles(True), caplog.at_level(logging.WARNING):
            caplog.clear()
            est.set_params(C=3.0, tol=1e-3).fit(X * 2 + 0.5, y)
            est.score(X * 2, y)
        compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
        assert compiled == [], compiled


def test_driver_rejects_bad_arguments(page_blocks):
    data, probs, C, kp = _problems(page_blocks, np.float32)
    model = APModel(kp=kp)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        fit_many(model, data, probs, C, batch_size=0)
    with pytest.raises(ValueError, match="leading axis"):
        fit_many(model, data, _one(probs, np.arange(5)), C)
    with pytest.raises(ValueError, match="max_iter must be >= 1"):
        fit(model, data, _one(probs, 0), C=1.0, solver=Solver(max_iter=0))
    with pytest.raises(TypeError, match="solver must be"):
        fit(model, data, _one(probs, 0), C=1.0, solver={"tol": 1e-3})
    with pytest.raises(ValueError, match="non-empty"):
        fit_many(model, data, probs, C[:0])
    with pytest.raises(ValueError, match="nothing to fit"):
        fit(jaxrank.models.Model(), data, _one(probs, 0), C=1.0)
