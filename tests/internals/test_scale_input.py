"""The estimators' input path at scale: no copy of X, exact products, shape buckets.

References are independent: NumPy float64 products, JAX autodiff of a plain
array / BCOO product, and the fit of the same data stored another way.
Memory properties are asserted structurally (``np.shares_memory``, the peak of
``tracemalloc`` relative to the size of ``X``), never as wall-clock limits.
"""

from __future__ import annotations

import logging
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import jaxrank
from jaxrank._src import arrays, layout
from jaxrank._src.cli import store as cli_store
from jaxrank.models import APModel, ItemProblem, design


def _aligned(shape, dtype=np.float32, gap=0):
    """A C-contiguous array starting ``gap`` bytes before a 64-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + (64 - gap if gap else 0)
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _problem(n, d, seed=0, out=None):
    rng = np.random.default_rng(seed)
    X = np.empty((n, d), np.float32) if out is None else out
    X[...] = rng.standard_normal((n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.standard_normal(n) > 1.3).astype(np.int8)
    return X, y


@pytest.fixture
def in_place_everywhere(monkeypatch):
    """Use the in-place layouts (and skip padding) for every dense size."""
    monkeypatch.setattr(arrays, "IN_PLACE_MIN_ENTRIES", 0)
    monkeypatch.setattr(layout, "PAD_MAX_DENSE_ENTRIES", 0)


# ---------------------------------------------------------------------------
# No copy of X.
# ---------------------------------------------------------------------------


def test_aligned_float32_and_npy_memmap_are_used_in_place(tmp_path):
    X, _ = _problem(300, 7, out=_aligned((300, 7)))
    assert np.shares_memory(np.asarray(design(X).X), X)
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    D = design(Xm)
    assert np.shares_memory(np.asarray(D.X), Xm)
    np.testing.assert_array_equal(np.asarray(D.X), X)
    # Another dtype is converted: one float32 array, not an alias.
    D64 = design(X.astype(np.float64))
    assert D64.dtype == jnp.float32 and not np.shares_memory(np.asarray(D64.X), X)


@pytest.mark.parametrize("gap", [16, 48, 60])
def test_unaligned_float32_is_used_in_place_as_shifted_rows(gap, in_place_everywhere):
    X, _ = _problem(50, 20, out=_aligned((50, 20), gap=gap))
    assert X.ctypes.data % 64 == 64 - gap
    D = design(X, in_place=True)
    assert isinstance(D.X, arrays.ShiftedRows) and D.X.offset == gap // 4
    assert np.shares_memory(np.asarray(D.X.body), X)
    np.testing.assert_array_equal(np.asarray(D.X), X)
    np.testing.assert_array_equal(np.asarray(D.materialized().X), X)
    traced = jax.jit(lambda D: D.materialized().X)(D)  # the in-program copy
    np.testing.assert_array_equal(np.asarray(traced), X)
    # Without in_place (the default), or below the size threshold: a plain array.
    assert not isinstance(design(X).X, arrays.ShiftedRows)


def test_fit_keeps_float32_input_in_place_and_copies_float64_once(in_place_everywhere):
    """tracemalloc sees NumPy's allocations: a float32 fit allocates far less
    than X on the host; a float64 fit exactly one float32 copy (half of X)."""
    n, d = 1 << 14, 256  # 16 MB, 16-byte aligned like NumPy's own buffers
    X, y = _problem(n, d, out=_aligned((n, d), gap=48))
    est = jaxrank.APSVM(C=10.0, max_iter=3)
    data = est._prepare(X, y, None)[0]
    assert isinstance(data.X, arrays.ShiftedRows)
    assert np.shares_memory(np.asarray(data.X.body), X)
    del data
    est.fit(X, y)  # compile outside of the measurement
    X64 = X.astype(np.float64)
    est.fit(X64, y)
    for A, lo, hi in ((X, 0.0, 0.1), (X64, 0.5, 0.6)):
        tracemalloc.start()
        est.fit(A, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert lo * A.nbytes <= peak <= hi * A.nbytes, (A.dtype, peak / A.nbytes)


def test_fit_on_in_place_data_equals_fit_on_a_copy(in_place_everywhere):
    """Both fits are certified within tol of the same optimum, so (the objective
    being 1-strongly convex) ||w1 - w2||^2 <= 2 (F(w1) - F*) + 2 (F(w2) - F*)."""
    X, y = _problem(4000, 20, seed=3, out=_aligned((4000, 20), gap=48))
    tol = 1e-6
    shifted = jaxrank.APSVM(C=10.0, tol=tol).fit(X, y)  # used in place (ShiftedRows)
    copied = jaxrank.APSVM(C=10.0, tol=tol).fit(X.astype(np.float64), y)  # one aligned copy
    assert shifted.converged_ and copied.converged_
    F = max(shifted.objective_, copied.objective_)
    assert abs(shifted.objective_ - copied.objective_) <= 2 * tol * F
    dw = np.linalg.norm(shifted.coef_ - copied.coef_)
    assert dw <= np.sqrt(4 * 2 * tol * F), dw  # 2 tol: float32 slack on the gap


def test_fit_on_npy_memmap(tmp_path):
    X, y = _problem(600, 5, seed=1)
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    a = jaxrank.APSVM(C=10.0).fit(Xm, y)
    b = jaxrank.APSVM(C=10.0).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6)


def test_memmap_with_bad_dtype_is_refused(tmp_path):
    np.save(tmp_path / "c.npy", np.ones((10, 3), np.complex64))
    with pytest.raises(ValueError, match="[Cc]omplex"):
        jaxrank.APSVM().fit(np.load(tmp_path / "c.npy", mmap_mode="r"), np.arange(10) % 2)
    rec = np.zeros(10, dtype=[("a", "f4"), ("b", "f4")])
    np.save(tmp_path / "r.npy", rec)
    with pytest.raises((ValueError, TypeError)):
        jaxrank.APSVM().fit(np.load(tmp_path / "r.npy", mmap_mode="r"), np.arange(10) % 2)


def test_max_row_norm_reads_chunks_and_handles_extreme_scales():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 9)).astype(np.float32)
    ref = np.sqrt((X.astype(np.float64) ** 2).sum(1).max())
    assert layout.max_row_norm(X) == pytest.approx(ref, rel=1e-6)
    assert layout.max_row_norm(sp.csr_matrix(X)) == pytest.approx(ref, rel=1e-6)
    for scale in (1e-25, 1e30, 1e200):  # squares under- or overflow float32 (float64)
        Z = (X.astype(np.float64) * scale).astype(X.dtype if scale < 1e38 else np.float64)
        assert layout.max_row_norm(Z) == pytest.approx(
            ref * scale, rel=1e-5 if scale < 1e38 else 1e-12)
    assert layout.max_row_norm(np.zeros((4, 3), np.float32)) == 0.0


# ---------------------------------------------------------------------------
# Products: X @ w and its transpose (what the solver's vjp calls).
# ---------------------------------------------------------------------------


def _check_products(D, X, rng):
    n, d = X.shape
    X64 = X.astype(np.float64)
    w = rng.standard_normal(d).astype(np.float32)
    W = rng.standard_normal((d, 3)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    tol = dict(rtol=1e-4, atol=1e-4)
    S, vjp = jax.vjp(lambda v: D @ v, jnp.asarray(w))
    np.testing.assert_allclose(S, X64 @ w, **tol)
    np.testing.assert_allclose(vjp(jnp.asarray(c))[0], X64.T @ c, **tol)
    np.testing.assert_allclose(D @ jnp.asarray(W), X64 @ W, **tol)
    np.testing.assert_allclose(D.rmatvec(jnp.asarray(c)), X64.T @ c, **tol)
    np.testing.assert_allclose(D.rmatvec(jnp.asarray(np.c_[c, 2 * c])),
                               X64.T @ np.c_[c, 2 * c], **tol)
    # jit + vmap over weights (the batched drivers), and a nonlinear gradient.
    f = jax.jit(jax.vmap(lambda v: jax.grad(lambda u: jnp.sum(jnp.sin(D @ u)))(v)))
    Ws = np.stack([w, -w])
    ref = np.stack([X64.T @ np.cos(X64 @ v) for v in Ws])
    np.testing.assert_allclose(f(jnp.asarray(Ws)), ref, **tol)


@pytest.mark.parametrize("n", [1024, 997, 40, 1031, 31])  # divisor / primes: blocks + rest / small
def test_dense_products(n):
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 11)).astype(np.float32)
    _check_products(design(X), X, rng)


@pytest.mark.parametrize("n,d,gap", [(50, 20, 48), (33, 13, 4), (2, 16, 60)])
def test_shifted_rows_products_and_cotangents(n, d, gap, in_place_everywhere):
    rng = np.random.default_rng(d)
    X, _ = _problem(n, d, out=_aligned((n, d), gap=gap))
    D = design(X, in_place=True)
    assert isinstance(D.X, arrays.ShiftedRows)
    _check_products(D, X, rng)
    np.testing.assert_allclose(D.row_sq_norms(), (X.astype(np.float64) ** 2).sum(1),
                               rtol=1e-5)
    # Cotangents of the stored parts: against autodiff of the plain formula.
    sh, w = D.X, jnp.asarray(rng.standard_normal(d), jnp.float32)
    args = (sh.body, sh.head, sh.tail)
    got = jax.grad(lambda *a: jnp.sum(jnp.sin(arrays._shifted_matmul(*a, w))),
                   argnums=(0, 1, 2))(*args)
    ref = jax.grad(lambda *a: jnp.sum(jnp.sin(arrays._shifted_forward(*a, w))),
                   argnums=(0, 1, 2))(*args)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_sparse_products_and_data_cotangent():
    rng = np.random.default_rng(7)
    X = sp.random(300, 40, density=0.1, format="csr", random_state=7, dtype=np.float32)
    D = design(X)
    _check_products(D, X.toarray(), rng)
    # d(sum sin(X w))/d(data) against JAX's own BCOO product.
    B = jsparse.BCOO.from_scipy_sparse(X)
    w = jnp.asarray(rng.standard_normal(40), jnp.float32)
    got = jax.grad(lambda v: jnp.sum(jnp.sin(
        arrays._sparse_matmul(v, D.X.indices, w, 300))))(D.X.data)
    ref = jax.grad(lambda v: jnp.sum(jnp.sin(jsparse.BCOO((v, B.indices), shape=B.shape) @ w)))(
        B.data)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# Shape buckets: padding is exact, nearby sizes share programs, large is kept.
# ---------------------------------------------------------------------------


def test_padded_fit_equals_unpadded_solver_fit():
    X, y = _problem(300, 5, seed=2)  # padded to 320 x 32 by fit
    assert layout.fit_buckets(300, 5, 1) == (320, 32, 1)
    est = jaxrank.APSVM(C=10.0, tol=1e-6, max_iter=2000).fit(X, y)
    res = jaxrank.solvers.fit(APModel(kp=int(y.sum())), design(X),
                              ItemProblem(jnp.asarray(y > 0), jnp.ones(300, bool)),
                              C=10.0, solver=jaxrank.solvers.Solver(tol=1e-6, max_iter=2000))
    assert est.converged_ and bool(res.converged)
    F = max(est.objective_, float(res.objective))
    assert abs(est.objective_ - float(res.objective)) <= 2e-6 * F
    # both within tol of the one optimum of a 1-strongly convex objective
    assert np.linalg.norm(est.coef_[0] - np.asarray(res.w)) <= np.sqrt(8e-6 * F)


def test_nearby_sizes_compile_nothing(caplog):
    X, y = _problem(310, 5, seed=4)
    est = jaxrank.APSVM(C=10.0, max_iter=20)
    est.fit(X[:300], y[:300])
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        caplog.clear()
        est.fit(X, y)  # 310 rows: the same 320-row bucket
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert compiled == [], compiled


def test_large_dense_designs_are_not_padded():
    big = layout.PAD_MAX_DENSE_ENTRIES
    n = big // 100 + 7
    assert layout.fit_buckets(n, 100, 1) == (n, 100, 1)
    assert layout.fit_buckets(n, 100, 1, dense=False)[0] > n  # sparse: padded without a copy
    assert layout.fit_buckets(1000, 100, 1)[0] == 1024


# ---------------------------------------------------------------------------
# Compiled single fits kept across processes (the CLI's program store).
# ---------------------------------------------------------------------------


@pytest.fixture
def no_jax_cache():
    """JAX's persistent cache off (conftest turns it on): the store keeps only
    executables compiled in the process."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    was = bool(jax.config.jax_enable_compilation_cache)
    jax.config.update("jax_enable_compilation_cache", False)
    cc.reset_cache()
    yield
    jax.config.update("jax_enable_compilation_cache", was)
    cc.reset_cache()


def test_program_store_reuses_compiled_fits(tmp_path, no_jax_cache):
    # A shape of its own: an executable JAX loaded from its persistent cache
    # earlier in the process would not serialise (ProgramStore.run).
    X, y = _problem(700, 3, seed=5)
    plain = jaxrank.APSVM(C=10.0).fit(X, y)

    def stored(store, **params):
        est = jaxrank.APSVM(**({"C": 10.0} | params))
        est._program_store = store  # as the command line does
        return est

    store = cli_store.ProgramStore(tmp_path)
    first = stored(store).fit(X, y)
    assert (store.misses, store.hits) == (1, 0)
    files = list(tmp_path.glob("*.jaxexe"))
    assert len(files) == 1
    store = cli_store.ProgramStore(tmp_path)  # as in a new process
    stored(store, tol=1e-3).fit(X * 2, y)  # values differ, program same
    again = stored(store).fit(X, y)
    assert (store.misses, store.hits) == (0, 1)  # one read from disk, then from memory
    stored(store, max_iter=7).fit(X, y)  # another static argument: another program
    assert store.misses == 1
    files[0].write_bytes(b"not an executable")  # damaged: compiled again, no error
    store = cli_store.ProgramStore(tmp_path)
    damaged = stored(store).fit(X, y)
    assert (store.misses, store.hits) == (1, 0)
    for est in (first, again, damaged):
        np.testing.assert_allclose(est.coef_, plain.coef_, rtol=1e-6, atol=1e-7)
        assert est.n_iter_ == plain.n_iter_
