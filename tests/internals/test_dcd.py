"""Tests of the DCD epoch kernel (jaxrank/_src/solvers/dcd.py, dcd.c).

References: a literal NumPy (float64) transcription of Algorithm 1 of Hsieh
et al. (2008) with liblinear's shrinking test; the XLA path vs the native C
path (same iterates up to float32 rounding); the invariant w_out - w_in =
Z^T ((alpha_out - alpha_in) * y); scikit-learn's LinearSVC (liblinear) for the
optimum of the full problem.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax import lax
from jax.experimental import sparse as jsparse
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from jaxrank._src.solvers import dcd  # no public name yet (see the module docstring)
from jaxrank._src import native as native_lib

F32 = np.float32


# --------------------------------------------------------------------------
# Fixtures and references
# --------------------------------------------------------------------------


@pytest.fixture
def native():
    """The native path; fails in CI (where setup.py builds it), else skips."""
    if not dcd.native_available():
        if os.environ.get("CI") == "true":
            pytest.fail(f"native DCD kernel not loaded: {native_lib.reason()}")
        pytest.skip(f"native DCD kernel not loaded: {native_lib.reason()}")


@pytest.fixture
def xla_path(monkeypatch):
    """Run the public functions on the XLA (lax loop) path."""
    monkeypatch.setattr(dcd, "_load_native", lambda: None)


def problem(m=60, d=7, *, seed=0, density=0.6, frac_absent=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d)).astype(F32)
    X[rng.random((m, d)) > density] = 0
    X[3] = 0  # an empty row (Q_ii = 0 without bias)
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(m) > 0, 1, -1).astype(F32)
    u = rng.uniform(0.2, 2.0, m).astype(F32)
    u[rng.random(m) < frac_absent] = 0
    return X, y, u


def design(X, bias):
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    X = X.astype(np.float64)
    return np.hstack([X, np.full((X.shape[0], 1), bias)]) if bias else X


def literal_pass(w, alpha, Z, y, u, order, mask=None, pg_old=(np.inf, -np.inf)):
    """One pass of Algorithm 1 (Hsieh et al. 2008) + liblinear's shrinking test, float64."""
    w, alpha = np.array(w, np.float64), np.array(alpha, np.float64)
    mask = None if mask is None else np.array(mask)
    pg_max, pg_min = -np.inf, np.inf
    for i in order:
        if u[i] <= 0 or (mask is not None and not mask[i]):
            continue
        G = y[i] * (Z[i] @ w) - 1
        if alpha[i] <= 0:
            if G > pg_old[0]:
                mask[i] = False
                continue
            PG = min(G, 0.0)
        elif alpha[i] >= u[i]:
            if G < pg_old[1]:
                mask[i] = False
                continue
            PG = max(G, 0.0)
        else:
            PG = G
        pg_max, pg_min = max(pg_max, PG), min(pg_min, PG)
        if abs(PG) > 1e-12:
            q = Z[i] @ Z[i]
            new = (
                np.clip(alpha[i] - G / q, 0, u[i])
                if q > 0
                else (u[i] if G < 0 else 0.0)
            )
            w += (new - alpha[i]) * y[i] * Z[i]
            alpha[i] = new
    return w, alpha, mask, (pg_max, pg_min)


def rows_of(kind, X, bias):
    if kind == "dense":
        return dcd.hinge_rows(X, bias=bias)
    if kind == "csr":
        return dcd.hinge_rows(sp.csr_matrix(X), bias=bias)
    return dcd.hinge_rows(jsparse.BCOO.fromdense(jnp.asarray(X)), bias=bias)


def close(a, b, atol=2e-5, rtol=2e-5):
    np.testing.assert_allclose(
        np.asarray(a, np.float64), np.asarray(b, np.float64), atol=atol, rtol=rtol
    )


KINDS = ["dense", "csr"]
BIASES = [0.0, 1.0]


# --------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dense", "csr", "bcoo"])
@pytest.mark.parametrize("bias", [0.0, 1.0, 2.5])
def test_rows_give_squared_norms_and_dot_products_of_the_design_matrix(kind, bias):
    X, _, _ = problem()
    rows = rows_of(kind, X, bias)
    Z = design(X, bias)
    w = np.random.default_rng(1).standard_normal(Z.shape[1]).astype(F32)
    close(dcd.sq_norms(rows), (Z * Z).sum(1))
    close(dcd.row_dots(rows, jnp.asarray(w)), Z @ w)
    assert rows.n_rows == X.shape[0] and int(rows.n_cols) == X.shape[1]


def test_bcoo_rows_can_be_built_under_jit():
    X, _, _ = problem()
    A = jsparse.BCOO.fromdense(
        jnp.asarray(X), nse=int((X != 0).sum()) + 5
    )  # with padding
    q = jax.jit(lambda A: dcd.sq_norms(dcd.hinge_rows(A, bias=1.0)))(A)
    close(q, (design(X, 1.0) ** 2).sum(1))


def test_random_order_is_a_permutation_that_depends_on_the_key():
    a = np.asarray(dcd.random_order(jax.random.key(0), 1000))
    b = np.asarray(dcd.random_order(jax.random.key(1), 1000))
    assert a.dtype == np.int32
    np.testing.assert_array_equal(np.sort(a), np.arange(1000))
    np.testing.assert_array_equal(np.sort(b), np.arange(1000))
    assert (a != b).mean() > 0.9
    batch = jax.vmap(lambda k: dcd.random_order(k, 1000))(
        jax.random.split(jax.random.key(0), 3)
    )
    assert batch.shape == (3, 1000)
    assert all(sorted(r) == list(range(1000)) for r in np.asarray(batch).tolist())


# --------------------------------------------------------------------------
# One pass against the literal algorithm, C path == XLA path
# --------------------------------------------------------------------------


def run_epoch(rows, w, alpha, y, u, order, **kw):
    q = dcd.sq_norms(rows)
    f = jax.jit(
        lambda w, a: dcd.dcd_epoch(
            w,
            a,
            rows,
            jnp.asarray(y),
            jnp.asarray(u),
            jnp.asarray(order),
            sq_norms=q,
            **kw,
        )
    )
    return f(jnp.asarray(w), jnp.asarray(alpha))


@pytest.mark.parametrize("path", ["native", "xla_path"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", BIASES)
def test_one_pass_matches_literal_algorithm_1(path, kind, bias, request):
    request.getfixturevalue(path)
    X, y, u = problem()
    Z = design(X, bias)
    rng = np.random.default_rng(2)
    order = rng.permutation(len(y)).astype(np.int32)
    w0 = (0.1 * rng.standard_normal(Z.shape[1])).astype(F32)  # a w_other part
    w, alpha = run_epoch(rows_of(kind, X, bias), w0, np.zeros(len(y), F32), y, u, order)
    w_ref, a_ref, _, _ = literal_pass(w0, np.zeros(len(y)), Z, y, u, order)
    close(alpha, a_ref)
    close(w, w_ref)


@pytest.mark.parametrize("path", ["native", "xla_path"])
@pytest.mark.parametrize("kind", KINDS)
def test_shrinking_pass_matches_literal_liblinear_test(path, kind, request):
    request.getfixturevalue(path)
    X, y, u = problem(m=80)
    Z = design(X, 1.0)
    rng = np.random.default_rng(3)
    rows = rows_of(kind, X, 1.0)
    # warm start with many alphas at their bounds
    w, alpha = run_epoch(
        rows,
        np.zeros(Z.shape[1], F32),
        np.zeros(len(y), F32),
        y,
        u,
        rng.permutation(len(y)).astype(np.int32),
        n_epochs=4,
    )
    mask = rng.random(len(y)) < 0.8
    order = rng.permutation(len(y)).astype(np.int32)
    active = dcd.ActiveSet(jnp.asarray(mask), jnp.float32(0.3), jnp.float32(-0.2))
    w1, a1, act1, st = run_epoch(
        rows, w, alpha, y, u, order, active=active, pg_tol=-1.0
    )
    w_ref, a_ref, m_ref, (pmax, pmin) = literal_pass(
        w, alpha, Z, y, u, order, mask, (0.3, -0.2)
    )
    assert (~m_ref & mask).sum() > 0, "the test needs some shrinking"
    np.testing.assert_array_equal(np.asarray(act1.mask), m_ref)
    close(a1, a_ref)
    close(w1, w_ref)
    close([st.pg_max, st.pg_min], [pmax, pmin])
    assert float(act1.pg_max) == pytest.approx(pmax if pmax > 0 else np.inf, rel=1e-5)
    assert float(act1.pg_min) == pytest.approx(pmin if pmin < 0 else -np.inf, rel=1e-5)
    assert int(st.n_epochs) == 1 and int(st.n_visits) == ((u > 0) & mask).sum()
    assert not bool(st.converged)


def both_paths(fn, monkeypatch):
    """fn() on the native path and on the XLA path (a fresh trace each)."""
    out_c = jax.block_until_ready(fn())
    with monkeypatch.context() as mp:
        mp.setattr(dcd, "_load_native", lambda: None)
        out_x = jax.block_until_ready(fn())
    return out_c, out_x


def assert_tree_close(a, b, **kw):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, z in zip(la, lb):
        if np.asarray(x).dtype == bool or np.issubdtype(
            np.asarray(x).dtype, np.integer
        ):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(z))
        else:
            close(x, z, **kw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", BIASES)
@pytest.mark.parametrize("shrink", [False, True])
def test_native_and_xla_paths_give_the_same_iterates(
    native, monkeypatch, kind, bias, shrink
):
    X, y, u = problem(m=70, seed=4)
    rows = rows_of(kind, X, bias)
    dim = X.shape[1] + (bias != 0)
    order = np.asarray(dcd.random_order(jax.random.key(5), len(y)))
    kw = {"active": dcd.all_active(len(y)), "pg_tol": 0.05} if shrink else {}

    def fn():
        return run_epoch(
            rows,
            np.zeros(dim, F32),
            np.zeros(len(y), F32),
            y,
            u,
            order,
            n_epochs=6,
            **kw,
        )

    out_c, out_x = both_paths(fn, monkeypatch)
    assert_tree_close(out_c, out_x, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_paths_agree_inside_a_jitted_while_loop(native, monkeypatch, kind):
    X, y, u = problem(m=50, seed=6)
    rows = rows_of(kind, X, 1.0)
    q = dcd.sq_norms(rows)
    m = len(y)

    @jax.jit
    def loop(key):
        def body(c):
            w, a, act, key, k = c
            key, sub = jax.random.split(key)
            order = jax.random.permutation(sub, m).astype(jnp.int32)
            w, a, act, _ = dcd.dcd_epoch(
                w,
                a,
                rows,
                jnp.asarray(y),
                jnp.asarray(u),
                order,
                sq_norms=q,
                n_epochs=2,
                active=act,
            )
            return w, a, act, key, k + 1

        init = (
            jnp.zeros(X.shape[1] + 1, jnp.float32),
            jnp.zeros(m, jnp.float32),
            dcd.all_active(m),
            key,
            jnp.int32(0),
        )
        return lax.while_loop(lambda c: c[4] < 5, body, init)[:3]

    out_c, out_x = both_paths(lambda: loop(jax.random.key(0)), monkeypatch)
    assert_tree_close(out_c, out_x, atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------------
# Invariants and properties
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", BIASES)
def test_weight_change_equals_alpha_change_times_rows(kind, bias):
    X, y, u = problem(seed=7)
    Z = design(X, bias)
    rng = np.random.default_rng(8)
    w0 = rng.standard_normal(Z.shape[1]).astype(F32)  # arbitrary w_other
    a0 = (rng.random(len(y)) * u).astype(F32)
    a0[u == 0] = 0
    order = rng.permutation(len(y)).astype(np.int32)
    w, a = run_epoch(rows_of(kind, X, bias), w0, a0, y, u, order, n_epochs=3)
    close(
        np.asarray(w, np.float64) - w0,
        Z.T @ ((np.asarray(a, np.float64) - a0) * y),
        atol=1e-4,
    )
    a = np.asarray(a)
    assert np.all(a >= 0) and np.all(a <= u)
    np.testing.assert_array_equal(a[u == 0], 0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", BIASES)
def test_native_weights_stay_the_combination_of_alpha_at_large_upper_bounds(
    native, kind, bias
):
    # Few positives with u = 300 against many negatives with u = 1 (a latent
    # SVM's class weights): 200,000 visits of float32 updates w += delta z_i
    # drifted from sum_i alpha_i y_i z_i by about 1e-5 of ||w||; the kernel
    # holds w and alpha in double within a call and w takes the rounding of
    # the stored alpha, so w is that sum up to its own rounding.
    rng = np.random.default_rng(0)
    m, d = 4000, 9
    X = rng.standard_normal((m, d)).astype(F32)
    y = np.where(rng.random(m) < 0.02, 1, -1).astype(F32)
    u = np.where(y > 0, 300.0, 1.0).astype(F32)
    Z = design(X, bias)
    order = rng.permutation(m).astype(np.int32)
    w, a = run_epoch(
        rows_of(kind, X, bias), np.zeros(Z.shape[1], F32), np.zeros(m, F32), y, u, order,
        n_epochs=50,
    )
    ref = Z.T @ (np.asarray(a, np.float64) * y)
    err = np.linalg.norm(np.asarray(w, np.float64) - ref) / np.linalg.norm(ref)
    assert err < 1e-6


def test_absent_terms_are_skipped():
    X, y, u = problem(seed=9, frac_absent=0.0)
    rows = dcd.hinge_rows(X, bias=1.0)
    order = np.random.default_rng(0).permutation(len(y)).astype(np.int32)
    w0, a0 = np.zeros(X.shape[1] + 1, F32), np.zeros(len(y), F32)
    keep = np.arange(len(y)) % 2 == 0
    w, a = run_epoch(rows, w0, a0, y, np.where(keep, u, 0).astype(F32), order)
    # same as the problem with only the kept rows, visited in the same relative order
    sub = dcd.hinge_rows(X[keep], bias=1.0)
    pos = np.cumsum(keep) - 1
    order_sub = pos[order[keep[order]]].astype(np.int32)
    w_s, a_s = run_epoch(sub, w0, a0[keep], y[keep], u[keep], order_sub)
    close(w, w_s)
    close(np.asarray(a)[keep], a_s)
    np.testing.assert_array_equal(np.asarray(a)[~keep], 0)


def test_dual_objective_never_decreases():
    X, y, u = problem(m=100, seed=10)
    rows = dcd.hinge_rows(X, bias=1.0)
    w, a = jnp.zeros(X.shape[1] + 1, jnp.float32), jnp.zeros(len(y), jnp.float32)
    dual = []
    for t in range(5):
        w, a = run_epoch(
            rows, w, a, y, u, np.asarray(dcd.random_order(jax.random.key(t), len(y)))
        )
        dual.append(float(jnp.sum(a) - 0.5 * w @ w))
    assert all(b >= c - 1e-4 for c, b in itertools.pairwise(dual))


# --------------------------------------------------------------------------
# Batching
# --------------------------------------------------------------------------


def batch(B=3, m=60, seed=11):
    X, y, u = problem(m=m, seed=seed)
    rng = np.random.default_rng(seed)
    ys = np.stack([np.where(rng.random(m) < 0.1, -y, y) for _ in range(B)]).astype(F32)
    us = (u[None] * rng.uniform(0.5, 2.0, (B, 1))).astype(F32)
    orders = np.stack([rng.permutation(m) for _ in range(B)]).astype(np.int32)
    return X, ys, us, orders


@pytest.mark.parametrize("path", ["native", "xla_path"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shrink", [False, True])
def test_vmap_with_shared_rows_matches_a_loop(path, kind, shrink, request):
    request.getfixturevalue(path)
    X, ys, us, orders = batch()
    B, m = ys.shape
    rows = rows_of(kind, X, 1.0)
    q = dcd.sq_norms(rows)
    kw = {"active": dcd.all_active(m), "pg_tol": 0.01} if shrink else {}

    def one(y, u, o):
        return dcd.dcd_epoch(
            jnp.zeros(X.shape[1] + 1, jnp.float32),
            jnp.zeros(m, jnp.float32),
            rows,
            y,
            u,
            o,
            sq_norms=q,
            n_epochs=3,
            **kw,
        )

    got = jax.jit(jax.vmap(one))(ys, us, orders)
    one_jit = jax.jit(one)  # compiled once for the loop
    for b in range(B):
        assert_tree_close(
            jax.tree.map(lambda x: x[b], got), one_jit(ys[b], us[b], orders[b])
        )


@pytest.mark.parametrize("path", ["native", "xla_path"])
@pytest.mark.parametrize("kind", KINDS)
def test_vmap_over_rows_matches_a_loop(path, kind, request):
    request.getfixturevalue(path)
    X, ys, us, orders = batch(B=2)
    m = X.shape[0]
    scale = np.array([1.0, -0.5], F32)
    rows_list = [rows_of(kind, X * s, b) for s, b in zip(scale, (1.0, 2.0))]
    rows_b = jax.tree.map(lambda *r: jnp.stack(r), *rows_list)

    def one(rows, y, u, o):
        q = dcd.sq_norms(rows)
        return dcd.dcd_epoch(
            jnp.zeros(X.shape[1] + 1, jnp.float32),
            jnp.zeros(m, jnp.float32),
            rows,
            y,
            u,
            o,
            sq_norms=q,
            n_epochs=2,
        )

    got = jax.jit(jax.vmap(one))(rows_b, ys, us, orders)
    one_jit = jax.jit(one)  # compiled once for the loop
    for b in range(2):
        assert_tree_close(
            jax.tree.map(lambda x: x[b], got),
            one_jit(rows_list[b], ys[b], us[b], orders[b]),
        )


def test_nested_vmap_with_partly_shared_operands(native):
    X, ys, us, orders = batch(B=3)
    m = X.shape[0]
    rows = dcd.hinge_rows(X, bias=1.0)
    q = dcd.sq_norms(rows)
    y0 = ys[0]

    def one(u, o):
        return dcd.dcd_epoch(
            jnp.zeros(X.shape[1] + 1, jnp.float32),
            jnp.zeros(m, jnp.float32),
            rows,
            jnp.asarray(y0),
            u,
            o,
            sq_norms=q,
        )

    got = jax.vmap(jax.vmap(one, in_axes=(0, None)), in_axes=(None, 0))(
        us, orders
    )  # [orders, us]
    assert got[0].shape == (3, 3, X.shape[1] + 1)
    for i in range(3):
        for j in range(3):
            assert_tree_close(
                jax.tree.map(lambda x: x[i, j], got), one(us[j], orders[i])
            )


@pytest.mark.parametrize("per_device", ["one problem", "vmap"])
def test_shard_map_over_two_devices_matches_vmap(native, per_device):
    if len(jax.devices()) < 2:
        pytest.skip("needs 2 devices")
    X, ys, us, orders = batch(B=2 if per_device == "one problem" else 4)
    m = X.shape[0]
    rows = dcd.hinge_rows(X, bias=1.0)
    q = dcd.sq_norms(rows)

    def one(rows, y, u, o):
        w, a, act, _ = dcd.dcd_epoch(
            jnp.zeros(X.shape[1] + 1, jnp.float32),
            jnp.zeros(m, jnp.float32),
            rows,
            y,
            u,
            o,
            sq_norms=q,
            n_epochs=3,
            active=dcd.all_active(m),
        )
        return w, a, act.mask

    many = jax.vmap(one, in_axes=(None, 0, 0, 0))
    if per_device == "one problem":  # with the default check_vma=True
        local, kw = (
            (
                lambda r, y, u, o: jax.tree.map(
                    lambda t: t[None], one(r, y[0], u[0], o[0])
                )
            ),
            {},
        )
    else:  # vmap inside shard_map: the XLA branch needs check_vma=False (module docstring)
        local, kw = many, {"check_vma": False}
    mesh = Mesh(np.asarray(jax.devices()[:2]), ("b",))
    f = jax.jit(
        jax.shard_map(
            local,
            mesh=mesh,
            in_specs=(P(), P("b"), P("b"), P("b")),
            out_specs=P("b"),
            **kw,
        )
    )
    got = f(rows, ys, us, orders)
    assert_tree_close(got, many(rows, ys, us, orders), atol=0, rtol=0)


# --------------------------------------------------------------------------
# Full solve vs liblinear
# --------------------------------------------------------------------------


def solve(rows, y, u, dim, *, tol=1e-4, max_calls=20_000):
    """Loop of kernel calls until (P - D) / P <= tol (the bench/dcd.py prototype, small)."""
    m = y.shape[0]
    q = dcd.sq_norms(rows)

    @jax.jit
    def run(key):
        def body(c):
            w, a, act, key, pg_tol, gap, n = c
            key, sub = jax.random.split(key)
            w, a, act, st = dcd.dcd_epoch(
                w,
                a,
                rows,
                y,
                u,
                dcd.random_order(sub, m),
                sq_norms=q,
                n_epochs=1000,
                active=act,
                pg_tol=pg_tol,
                max_visits=5 * m,
            )
            ww = w @ w
            p = 0.5 * ww + jnp.sum(u * jnp.maximum(0, 1 - y * dcd.row_dots(rows, w)))
            gap = (p - (jnp.sum(a) - 0.5 * ww)) / p
            pg_tol = jnp.where(st.converged & (gap > tol), 0.1 * pg_tol, pg_tol)
            return w, a, act, key, pg_tol, gap, n + 1

        init = (
            jnp.zeros(dim, jnp.float32),
            jnp.zeros(m, jnp.float32),
            dcd.all_active(m),
            key,
            jnp.float32(1.0),
            jnp.float32(jnp.inf),
            jnp.int32(0),
        )
        return lax.while_loop(lambda c: (c[5] > tol) & (c[6] < max_calls), body, init)

    w, a, _, _, _, gap, _ = run(jax.random.key(0))
    return np.asarray(w, np.float64), np.asarray(a, np.float64), float(gap)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_solve_reaches_liblinear_objective_on_page_blocks(
    page_blocks, fit_intercept, C
):
    X, labels = page_blocks
    y = np.where(labels > 0, 1.0, -1.0)
    bias = 1.0 if fit_intercept else 0.0
    Z = design(X, bias)
    w, a, gap = solve(
        dcd.hinge_rows(X, bias=bias),
        jnp.asarray(y, jnp.float32),
        jnp.full(y.shape, C, jnp.float32),
        Z.shape[1],
    )
    assert gap <= 1e-4
    primal = 0.5 * w @ w + C * np.maximum(0, 1 - y * (Z @ w)).sum()
    wa = Z.T @ (a * y)  # a feasible dual point, certified in float64
    assert np.all(a >= 0) and np.all(a <= C * (1 + 1e-6))
    dual = a.sum() - 0.5 * wa @ wa
    assert (primal - dual) / primal <= 1.05e-4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = LinearSVC(
            C=C,
            loss="hinge",
            dual=True,
            tol=1e-7,
            max_iter=1_000_000,
            fit_intercept=fit_intercept,
            intercept_scaling=1.0,
        ).fit(X, labels)
    w_ref = np.r_[ref.coef_[0], ref.intercept_[0]] if fit_intercept else ref.coef_[0]
    f_ref = 0.5 * w_ref @ w_ref + C * np.maximum(0, 1 - y * (Z @ w_ref)).sum()
    assert abs(primal - f_ref) <= 1e-3 * f_ref
    assert dual <= f_ref * (1 + 1e-6)  # the dual bound is a true lower bound


# --------------------------------------------------------------------------
# Native library: zero copy, run-time errors, fallback
# --------------------------------------------------------------------------


def test_native_kernel_reads_the_jax_buffer_without_a_copy(native):
    X, y, u = problem()
    rows = dcd.hinge_rows(X, bias=1.0)
    q = dcd.sq_norms(rows)
    # rows passed as a jit argument (a closed-over array becomes a constant of the program)
    f = jax.jit(
        lambda rows, w, a: dcd.dcd_epoch(
            w, a, rows, y, u, np.arange(len(y), dtype=np.int32), sq_norms=q
        )
    )
    jax.block_until_ready(
        f(rows, jnp.zeros(X.shape[1] + 1, jnp.float32), jnp.zeros(len(y), jnp.float32))
    )
    lib = dcd._load_native()
    lib.jaxrank_dcd_last_rows_ptr.restype = ctypes.c_void_p
    assert lib.jaxrank_dcd_last_rows_ptr() == rows.X.unsafe_buffer_pointer()


def test_native_kernel_rejects_out_of_range_order(native):
    X, y, u = problem()
    order = np.arange(len(y), dtype=np.int32)
    order[5] = len(y)
    with pytest.raises(Exception, match="order\\[5\\]"):
        run_epoch(
            dcd.hinge_rows(X),
            np.zeros(X.shape[1], F32),
            np.zeros(len(y), F32),
            y,
            u,
            order,
        )


def test_missing_library_warns_once_and_falls_back_to_xla(monkeypatch):
    monkeypatch.setattr(native_lib, "_STATE", {})
    monkeypatch.setenv("JAXRANK_NATIVE_LIBRARY", "/nonexistent/_kernels.so")
    X, y, u = problem(m=30)
    with pytest.warns(RuntimeWarning, match="nonexistent"):
        assert not dcd.native_available()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        w, a = run_epoch(
            dcd.hinge_rows(X, bias=1.0),
            np.zeros(X.shape[1] + 1, F32),
            np.zeros(30, F32),
            y,
            u,
            np.arange(30, dtype=np.int32),
        )
    w_ref, a_ref, _, _ = literal_pass(
        np.zeros(X.shape[1] + 1), np.zeros(30), design(X, 1.0), y, u, np.arange(30)
    )
    close(a, a_ref)
    close(w, w_ref)


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


def test_bad_input_raises_clear_errors():
    X, y, u = problem(m=20)
    rows = dcd.hinge_rows(X, bias=1.0)
    q = dcd.sq_norms(rows)
    w, a, o = (
        jnp.zeros(8, jnp.float32),
        jnp.zeros(20, jnp.float32),
        jnp.arange(20, dtype=jnp.int32),
    )
    y, u = jnp.asarray(y), jnp.asarray(u)

    def call(**over):
        args = {"w": w, "alpha": a, "rows": rows, "labels": y, "upper": u, "order": o}
        kw = {"sq_norms": q}
        for k, v in over.items():
            (args if k in args else kw)[k] = v
        return dcd.dcd_epoch(*args.values(), **kw)

    with pytest.raises(
        ValueError, match="w must have d = 7 or d \\+ 1 = 8 entries; got 9"
    ):
        call(w=jnp.zeros(9, jnp.float32))
    with pytest.raises(
        ValueError, match="bias = 1.0 != 0 needs w with n_cols \\+ 1 = 8"
    ):
        call(w=jnp.zeros(7, jnp.float32))
    with pytest.raises(
        ValueError, match="alpha must have shape \\(20,\\); got \\(19,\\)"
    ):
        call(alpha=jnp.zeros(19, jnp.float32))
    with pytest.raises(TypeError, match="order must have dtype int32; got float32"):
        call(order=o.astype(jnp.float32))
    with pytest.raises(TypeError, match="labels must have dtype float32; got int32"):
        call(labels=y.astype(jnp.int32))
    with pytest.raises(ValueError, match="sq_norms must have shape"):
        call(sq_norms=q[:5])
    with pytest.raises(TypeError, match="rows must be a HingeRows"):
        call(rows=jnp.asarray(X))
    with pytest.raises(ValueError, match="n_epochs must be >= 1"):
        call(n_epochs=0)
    with pytest.raises(
        ValueError, match="pg_tol and max_visits apply only with shrinking"
    ):
        call(pg_tol=0.1)
    with pytest.raises(TypeError, match="active must be an ActiveSet"):
        call(active=jnp.ones(20, bool))
    with pytest.raises(TypeError, match="active.mask must have dtype bool"):
        call(
            active=dcd.ActiveSet(
                jnp.ones(20, jnp.int32), jnp.float32(1), jnp.float32(-1)
            )
        )
    with pytest.raises(ValueError, match="X must be 2-D"):
        dcd.hinge_rows(np.zeros(5))
    with pytest.raises(TypeError, match="X must be a real"):
        dcd.hinge_rows(np.zeros((3, 2), complex))
    with pytest.raises(ValueError, match="bias must be a scalar"):
        dcd.hinge_rows(X, bias=np.ones(2))
