"""Work-queue batching of the solver: fit_ssvm_queue / fit_ssvm_many.

Every fit of a queue must be the fit run alone (fit_ssvm). The Frank-Wolfe
path itself depends on float rounding (batched reductions round differently,
and the pairwise steps' argmax picks amplify it), so the test is what the
solver certifies: each fit's objective is >= the other's dual bound, both
gaps are <= tol, and the weights are within the strong-convexity bound.
Real data: the bundled page-blocks set.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrank._src.estimators import make_oracle
from jaxrank.solvers import fit_linear, fit_linear_many, fit_ssvm, fit_ssvm_many, fit_ssvm_queue

N = 240


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
    return jnp.asarray(X), jnp.asarray(pos), jnp.asarray(valid), jnp.asarray(C), kp


def _ap_oracle(kp):
    def oracle(prob, s):
        pos, valid = prob
        return make_oracle("ap", pos, valid, kp=kp, method="select", pos_weight=1.0)(s)

    return oracle


def _single(X, pos, valid, C, kp, tol, max_iter):
    """Each problem fitted alone: fit_linear = fit_ssvm with the same oracle, jitted once."""
    return [fit_linear(X, pos[i], valid[i], C[i], tol, loss="ap", kp=kp, max_iter=max_iter)
            for i in range(C.shape[0])]


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
    X, pos, valid, C, kp = _problems(page_blocks, np.float64)
    tol, max_iter = 1e-6, 400
    alone = _single(X, pos, valid, C, kp, tol, max_iter)
    q = fit_ssvm_queue(_ap_oracle(kp), X, (pos, valid), C, tol=tol, max_iter=max_iter,
                       batch_size=batch_size)
    assert q.w.dtype == jnp.float64
    for i, r in enumerate(alone):
        _assert_same_fit(jax.tree_util.tree_map(lambda a: a[i], q), r, tol)


def test_queue_padding_is_never_fitted(page_blocks):
    X, pos, valid, C, kp = _problems(page_blocks, np.float32)
    q = fit_ssvm_queue(_ap_oracle(kp), X, (pos, valid), C, max_iter=200, batch_size=4,
                       num_problems=9)
    assert np.all(np.asarray(q.num_steps[:9]) >= 1)
    assert np.all(np.asarray(q.num_steps[9:]) == 0)
    assert not np.any(np.asarray(q.converged[9:]))
    assert np.all(np.asarray(q.w[9:]) == 0)


@pytest.mark.parametrize("devices", [1, 2])
def test_sharded_queues_equal_single_fits(page_blocks, devices):
    assert len(jax.devices()) >= 2, "conftest sets two CPU devices"
    X, pos, valid, C, kp = _problems(page_blocks, np.float32)
    tol, max_iter = 1e-4, 300
    devs = tuple(jax.devices()[:devices])
    res = fit_linear_many(X, pos, valid, C, tol, loss="ap", kp=kp, max_iter=max_iter,
                          batch_size=3, devices=devs)
    for i, r in enumerate(_single(X, pos, valid, C, kp, tol, max_iter)):
        _assert_same_fit(jax.tree_util.tree_map(lambda a: a[i], res), r, tol)


def test_fit_ssvm_many_returns_results_in_problem_order(page_blocks, x64):
    X, pos, valid, C, kp = _problems(page_blocks, np.float64)
    perm = np.random.default_rng(1).permutation(C.shape[0])
    tol = 1e-6
    kw = dict(tol=tol, max_iter=400, batch_size=4)
    a = fit_ssvm_many(_ap_oracle(kp), X, (pos, valid), C, **kw)
    b = fit_ssvm_many(_ap_oracle(kp), X, (pos[perm], valid[perm]), C[perm], **kw)
    for i, j in enumerate(perm):
        _assert_same_fit(jax.tree_util.tree_map(lambda r: r[i], b),
                         jax.tree_util.tree_map(lambda r: r[j], a), tol)


def test_progress_callback_counts_every_fit_and_kernel_traces_once(page_blocks):
    X, pos, valid, C, kp = _problems(page_blocks, np.float32)
    seen = []

    def report(n):
        seen.append(int(n))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(X, pos, valid, C):
        return fit_ssvm_many(_ap_oracle(kp), X, (pos, valid), C, max_iter=200,
                             batch_size=5, devices=tuple(jax.devices()[:2]),
                             callback=report)

    jax.block_until_ready(run(X, pos, valid, C))
    jax.effects_barrier()
    assert sum(seen) == C.shape[0] and all(n > 0 for n in seen)
    seen.clear()
    jax.block_until_ready(run(X * 2, ~pos, valid, C * 3))  # equal shapes: no retrace
    jax.effects_barrier()
    assert sum(seen) == C.shape[0]


def test_queue_rejects_bad_arguments(page_blocks):
    X, pos, valid, C, kp = _problems(page_blocks, np.float32)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        fit_ssvm_queue(_ap_oracle(kp), X, (pos, valid), C, batch_size=0)
    with pytest.raises(ValueError, match="leading axis"):
        fit_ssvm_queue(_ap_oracle(kp), X, (pos[:5], valid[:5]), C)
    with pytest.raises(ValueError, match="max_iter must be >= 1"):
        fit_ssvm(lambda s: _ap_oracle(kp)((pos[0], valid[0]), s), X, C=1.0, max_iter=0)
    with pytest.raises(ValueError, match="non-empty"):
        fit_ssvm_many(_ap_oracle(kp), X, (pos, valid), C[:0])
