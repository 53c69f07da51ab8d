"""Max-marginals (jaxrank.graph): every back-end against brute force, and each other."""

import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.graph import graph_layout, has_c_extension, layout_max_marginals, max_marginals

N_SMALL, M_SMALL = 7, 9  # one shape for every small graph: one compile per method


def brute_force(unary, edges, pairwise):
    """Max-marginals and scores of every labeling, by enumeration (float64)."""
    n = unary.shape[0]
    Y = np.array(list(itertools.product([0, 1], repeat=n)))
    S = np.where(Y == 1, unary[:, 1], unary[:, 0]).sum(1)
    if len(edges):
        S = S + ((Y[:, edges[:, 0]] != Y[:, edges[:, 1]]) * pairwise).sum(1)
    mm = np.array([[S[Y[:, k] == l].max() for l in (0, 1)] for k in range(n)])
    return mm


def score_of(unary, edges, pairwise, y):
    y = np.asarray(y, int)
    s = np.where(y == 1, unary[:, 1], unary[:, 0]).sum()
    return s + ((y[edges[:, 0]] != y[edges[:, 1]]) * pairwise).sum() if len(edges) else s


def small_graphs(seed, count=6):
    """Random graphs with N_SMALL nodes and M_SMALL edges (repeats, both orientations,
    several components, ties from rounded weights)."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(count):
        e = rng.integers(0, N_SMALL, size=(3 * M_SMALL, 2))
        e = e[e[:, 0] != e[:, 1]][:M_SMALL]
        u = rng.normal(size=(N_SMALL, 2))
        p = -np.abs(rng.normal(size=M_SMALL)) * (3.0 if c % 2 else 0.3)
        if c == 2:  # ties
            u, p = np.round(u), np.round(p)
        out.append((u, e, p))
    return out


CUT_METHODS = ["bk", "bk-fresh", "python"]


def require_c_extension():
    """Skip without the compiled ``_maxflow`` extension; fail under ``CI=true`` (setup.py
    builds it there, and without it ``"bk"`` would silently test the Python port)."""
    if has_c_extension():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("jaxrank._src.native._maxflow was not built (CI=true: setup.py builds it)")
    pytest.skip("C extension not built in this checkout")


@pytest.mark.parametrize("method", ["auto", "enumerate"] + CUT_METHODS)
def test_max_marginals_equal_brute_force(method, x64):
    if method in ("bk", "bk-fresh"):
        require_c_extension()
    for u, e, p in small_graphs(0):
        ref = brute_force(u, e, p)
        mm, lab = max_marginals(u, e, p, method=method, max_enum=3, return_labelings=True)
        np.testing.assert_allclose(np.asarray(mm), ref, rtol=0, atol=1e-10)
        for i in range(N_SMALL):
            for lbl in (0, 1):
                assert lab[i, lbl, i] == lbl
                assert abs(score_of(u, e, p, lab[i, lbl]) - ref[i, lbl]) < 1e-10


@pytest.mark.parametrize("method", ["ortools", "pymaxflow"])
def test_optional_back_ends_equal_brute_force(method, x64):
    pytest.importorskip("ortools" if method == "ortools" else "maxflow")
    for u, e, p in small_graphs(1, count=3):
        mm = max_marginals(u, e, p, method=method)
        np.testing.assert_allclose(np.asarray(mm), brute_force(u, e, p), rtol=0, atol=1e-9)


def random_connected(n, m, seed, strength=1.0):
    rng = np.random.default_rng(seed)
    tree = np.stack([np.arange(1, n), rng.integers(0, np.arange(1, n))], axis=1)
    extra = rng.integers(0, n, size=(m, 2))
    e = np.concatenate([tree, extra[extra[:, 0] != extra[:, 1]]])
    u = rng.normal(size=(n, 2))
    p = -strength * rng.random(e.shape[0])
    return u, e, p


@pytest.mark.parametrize("strength", [0.3, 2.0])
def test_graph_cut_back_ends_agree_on_a_large_component(strength, x64):
    # 150 nodes in one component: only graph cuts apply; every back-end is exact,
    # so all max-marginals agree (float64 sums of the same terms).
    require_c_extension()
    u, e, p = random_connected(150, 150, seed=3, strength=strength)
    methods = ["bk", "python", "bk-fresh"]
    for opt, mod in (("ortools", "ortools"), ("pymaxflow", "maxflow")):
        try:
            __import__(mod)
            methods.append(opt)
        except ImportError:
            pass
    ref = np.asarray(max_marginals(u, e, p, method=methods[0]))
    for method in methods[1:]:
        np.testing.assert_allclose(np.asarray(max_marginals(u, e, p, method=method)), ref,
                                   rtol=1e-12, atol=1e-9, err_msg=method)
    # The MAP score is the larger max-marginal of every node.
    assert np.allclose(ref.max(axis=1), ref.max(), atol=1e-9)


def test_auto_mixes_enumeration_and_cuts(x64):
    # Components of 1..20 nodes: "auto" enumerates those <= max_enum and cuts the
    # others, in one call; it must equal graph cuts for all.
    rng = np.random.default_rng(5)
    off, edges = 0, []
    for size in [1, 1, 2, 3, 5, 8, 13]:
        if size > 1:
            u_, e_, _ = random_connected(size, size, seed=size)
            edges.append(e_ + off)
        off += size
    e = np.concatenate(edges)
    u = rng.normal(size=(off, 2))
    p = -rng.random(e.shape[0])
    lay = graph_layout(off, e, max_enum=8)
    assert lay.n_cut == 13 and set(lay.bucket_sizes) == {1, 2, 4, 6, 8}
    mm_auto = np.asarray(max_marginals(u, e, p, method="auto", max_enum=8))
    mm_cut = np.asarray(max_marginals(u, e, p, method="bk"))
    np.testing.assert_allclose(mm_auto, mm_cut, atol=1e-9)


def test_duplicate_edges_add_their_weights(x64):
    u, e, p = small_graphs(2, count=1)[0]
    e2 = np.concatenate([e, e[:, ::-1]])
    p2 = np.concatenate([0.25 * p, 0.75 * p])
    np.testing.assert_allclose(np.asarray(max_marginals(u, e2, p2)), brute_force(u, e, p),
                               atol=1e-10)


def test_layout_kernel_jit_vmap_and_float32():
    # The jittable kernel: jit == eager, vmap over unaries == loop, float32 close to
    # the float64 brute force.
    u, e, p = random_connected(30, 20, seed=7)
    lay = graph_layout(30, e, max_enum=12)
    pm = jax.ops.segment_sum(jnp.asarray(p, jnp.float32), lay.merge, num_segments=lay.m)
    U = jnp.asarray(np.stack([u, -u, 2 * u]), jnp.float32)
    f = jax.jit(lambda uu: layout_max_marginals(lay, uu, pm).scores())
    batched = jax.vmap(f)(U)
    for k in range(3):
        np.testing.assert_allclose(np.asarray(batched[k]), np.asarray(f(U[k])), atol=1e-5)
    eager = layout_max_marginals(lay, U[1], pm).scores()
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(eager), atol=1e-5)
    ref = brute_force_cut(np.asarray(U[0], np.float64), e, p)
    np.testing.assert_allclose(np.asarray(batched[0]), ref[:, 1] - ref[:, 0], atol=1e-4)


def brute_force_cut(u, e, p):
    with jax.enable_x64(True):
        return np.asarray(max_marginals(u, e, p, method="bk"))


def test_bad_inputs():
    u = np.zeros((4, 2))
    e = np.array([[0, 1], [1, 2]])
    p = -np.ones(2)
    with pytest.raises(ValueError, match="names a node outside"):
        max_marginals(u, np.array([[0, 4]]), -np.ones(1))
    with pytest.raises(ValueError, match="names a node outside"):
        max_marginals(u, np.array([[-1, 2]]), -np.ones(1))
    with pytest.raises(ValueError, match="self-loop"):
        max_marginals(u, np.array([[2, 2]]), -np.ones(1))
    with pytest.raises(ValueError, match="supermodular"):
        max_marginals(u, e, np.array([-1.0, 0.5]))
    with pytest.raises(ValueError, match="unary contains NaN"):
        max_marginals(np.array([[0.0, np.nan]] * 4), e, p)
    with pytest.raises(ValueError, match="pairwise contains NaN"):
        max_marginals(u, e, np.array([-1.0, np.nan]))
    with pytest.raises(ValueError, match=r"unary must have shape \[n, 2\]"):
        max_marginals(np.zeros((4, 3)), e, p)
    with pytest.raises(ValueError, match=r"pairwise must have shape \[m\]"):
        max_marginals(u, e, -np.ones(3))
    with pytest.raises(ValueError, match=r"edges must have shape \[m, 2\]"):
        max_marginals(u, np.array([0, 1, 2]), p)
    with pytest.raises(TypeError, match="integer node indices"):
        max_marginals(u, np.array([[0.5, 1.0]]), -np.ones(1))
    with pytest.raises(ValueError, match="method must be one of"):
        max_marginals(u, e, p, method="push-relabel")
    with pytest.raises(ValueError, match="max_enum"):
        max_marginals(u, e, p, max_enum=17)
    big = np.stack([np.arange(19), np.arange(1, 20)], 1)
    with pytest.raises(ValueError, match="at most 16 nodes"):
        max_marginals(np.zeros((20, 2)), big, -np.ones(19), method="enumerate")


def test_c_extension_is_built_in_ci():
    # CI installs the package with its C extension; elsewhere the pure-Python port
    # is the fallback (and is checked against brute force above).
    require_c_extension()
    assert "bk" in jaxrank.graph.METHODS
