r"""Max-marginals of a binary pairwise (supermodular) score: enumeration and graph cuts.

For labels ``y in {0, 1}^n``, unary scores ``unary [n, 2]`` and edges ``E``
with weights ``pairwise [m] <= 0``, the score

.. math::
    S(y) = \sum_i \mathrm{unary}[i, y_i] + \sum_{e=(i,j)} \mathrm{pairwise}[e] [y_i \ne y_j]

is supermodular (it rewards agreement), so its maximum is a minimum s-t cut
(Kolmogorov & Zabih, PAMI 2004), and its max-marginals

.. math::
    m[i, l] = \max_{y : y_i = l} S(y)

are the ``2n`` cuts with one node clamped (Kohli & Torr, ECCV 2006). These
are the scores of HOB-SVM / HOAP-SVM (Dokania et al., ECCV 2014, eqs. (9)-(11):
``s_i = m[i, 1] - m[i, 0]``) and their maximising labelings are what
Proposition 4 linearises.

**Work per connected component.** Components do not interact: ``m[i, l]`` is
the component's own max-marginal plus the maxima of all other components.
One of ``m[i, 0], m[i, 1]`` is the component's MAP score; only the *flipped*
max-marginal (node ``i`` clamped to the label it does not take in the MAP)
needs work: ``delta_i = max_{y_i != map_i} S_C(y) - max S_C(y) <= 0``.

**Back-ends** (``method``), all exact:

* ``"enumerate"`` — every labeling of a component (``2^K`` for ``K`` nodes) in
  one ``vmap``-ed XLA kernel per size bucket (components padded to ``K`` in
  ``1, 2, 4, 6, 8, 10, 12, 14, 16``); for many small components (persons in
  one image, posts of one thread). ``S`` of all labelings is ``Y (d + r) -
  Y^T W Y`` with the component's weight matrix ``W``.
* ``"bk"`` — Boykov-Kolmogorov max-flow written here in C
  (``jaxrank/_src/native/_maxflow.c``, MIT) on one graph holding every component of
  the call; each of the ``n`` clamped cuts continues from the residual graph
  and search trees of the MAP flow and is then undone from a journal of first
  writes (dynamic graph cuts: Kohli & Torr 2006/2007), so a clamp costs the
  region it touches, far less than the same cuts from scratch on a large
  component (``bench/results/high_order.md``; ``docs/design_notes.md``).
  Capacities are float64 (no integer scaling); values are exact score
  differences of the returned labelings (sums over the nodes that changed),
  not differences of flow values.
* ``"bk-fresh"`` — the same C code, every clamped cut from scratch (no flow or
  tree reuse): the baseline for ``"bk"``'s timings.
* ``"python"`` — a line-by-line port of the C code in Python (the fallback when
  the C extension was not built; slow on large graphs).
* ``"ortools"`` — OR-tools ``SimpleMaxFlow`` (Apache-2.0; optional, ``pip
  install ortools``), one push-relabel solve per clamped cut on int64
  capacities ``round(c * 2^k)`` with ``2^k`` the largest power of two keeping
  the sum of all capacities below ``2^60``; a rounded cut differs from the
  exact one by at most ``(n + m) / 2^(k+1)`` in score units, so the returned
  labelings are optimal within ``(n + m) 2^-k`` (below ``1e-12`` of the total
  capacity for graphs of a million arcs). Values are recomputed exactly from
  the labelings.
* ``"pymaxflow"`` — PyMaxflow (GPL: never a dependency of jaxrank; ``pip
  install PyMaxflow`` on purpose; never imported unless asked for), one fresh graph per
  clamped cut (it has no capacity edits to restore a clamp).
* ``"auto"`` (default) — enumeration for components of at most ``max_enum``
  nodes, ``"bk"`` (or ``"python"`` without the C extension) for the larger
  ones, in one call.

Graph-cut back-ends run on the host: inside ``jit`` they are called through
``jax.pure_callback`` with fixed output shapes (``vmap`` runs them one after
the other).

**Duplicate edges.** :func:`max_marginals` sums the weights of repeated pairs
(``(i, j)`` and ``(j, i)`` are the same pair), as the formula for ``S`` does.

Examples:
    >>> import numpy as np
    >>> from jaxrank.graph import max_marginals
    >>> unary = np.array([[0.0, 1.0], [0.0, -0.5], [0.0, -2.0]])
    >>> mm = max_marginals(unary, np.array([[0, 1], [1, 2]]), np.array([-1.0, -0.1]))
    >>> np.asarray(mm, np.float64).round(2).tolist()  # y = (1, 1, 0) scores 0.4
    [[0.0, 0.4], [0.0, 0.4], [0.4, -1.5]]
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from jaxrank._src.oracles.maxflow_backends import (
    _cut_ortools,
    _cut_pymaxflow,
    _cut_python,
)

try:  # the C extension (built by setup.py; optional; a leaf: it imports nothing)
    _cext = importlib.import_module("jaxrank._src.native._maxflow")
except ImportError:  # pragma: no cover - depends on the build
    _cext = None


METHODS = ("auto", "enumerate", "bk", "bk-fresh", "python", "ortools", "pymaxflow")


GRAPH_CUT_METHODS = ("bk", "bk-fresh", "python", "ortools", "pymaxflow")


# Padded component sizes of the enumeration buckets.
_BUCKETS = (1, 2, 4, 6, 8, 10, 12, 14, 16)


MAX_ENUM = 16


def has_c_extension() -> bool:
    """Whether the C back-end (``method="bk"``) was built."""
    return _cext is not None


class Bucket(NamedTuple):
    """Components of at most ``K`` nodes, padded to ``K`` (enumeration).

    Attributes:
        nodes: ``[Q, K]`` int32 node indices, padded with ``n``.
        edges: ``[Q, E, 2]`` int32 local end points (``0..K-1``), padded with 0.
        edge_ids: ``[Q, E]`` int32 indices into the merged edges, padded with ``m``.
    """

    nodes: Any
    edges: Any
    edge_ids: Any


class CutPart(NamedTuple):
    """The components solved by graph cuts, all in one graph.

    Attributes:
        nodes: ``[nL]`` int32 node indices.
        tails, heads: ``[mL]`` int32 local end points (``0..nL-1``).
        edge_ids: ``[mL]`` int32 indices into the merged edges.
        comp: ``[nL]`` int32 component id of each node (local numbering).
    """

    nodes: Any
    tails: Any
    heads: Any
    edge_ids: Any
    comp: Any


@jax.tree_util.register_pytree_node_class
class GraphLayout:
    """A graph prepared for max-marginals: merged edges, components, buckets.

    A pytree (arrays are leaves; sizes are static), built once on the host by
    :func:`graph_layout` and passed to the jittable kernels
    (:func:`layout_max_marginals`, :func:`layout_map`).

    Attributes:
        n: static number of nodes.
        m: static number of merged (distinct, undirected) edges.
        edges: ``[m, 2]`` int32 merged edges ``(i, j)``, ``i < j``.
        merge: ``[m_in]`` int32 merged edge of each input edge.
        buckets: tuple of :class:`Bucket` (enumeration), by size.
        cut: :class:`CutPart` or ``None`` (components solved by graph cuts).
        component: ``[n]`` int32 connected-component id of each node.
    """

    def __init__(self, n, m, edges, merge, buckets, cut, component):
        self.n, self.m = int(n), int(m)
        self.edges, self.merge = edges, merge
        self.buckets, self.cut, self.component = tuple(buckets), cut, component

    def tree_flatten(self):
        return (self.edges, self.merge, self.buckets, self.cut, self.component), (self.n, self.m)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(aux[0], aux[1], *children)

    @property
    def bucket_sizes(self):
        """Static ``K`` of each enumeration bucket."""
        return tuple(int(b.nodes.shape[1]) for b in self.buckets)

    @property
    def n_cut(self):
        """Static number of nodes solved by graph cuts."""
        return 0 if self.cut is None else int(self.cut.nodes.shape[0])

    def __repr__(self):
        q = [int(b.nodes.shape[0]) for b in self.buckets]
        return (f"GraphLayout(n={self.n}, m={self.m}, enumeration buckets "
                f"{dict(zip(self.bucket_sizes, q))}, graph-cut nodes {self.n_cut})")


def check_edges(edges, n, name="edges", *, adjacency=True):
    """``[m, 2]`` int64 edges, validated (host side).

    Args:
        edges: ``[m, 2]`` integer node pairs, or (``adjacency``) a
            ``scipy.sparse`` ``[n, n]`` adjacency matrix (0/1; each stored
            non-zero ``(i, j)`` is the edge ``{i, j}``; a symmetric matrix
            names each edge twice, which is the same edge).
        n: number of nodes.
        name: argument name for messages.
        adjacency: accept a sparse adjacency matrix.

    Raises:
        TypeError: non-integer edges, or traced (abstract) edges; a sparse
            matrix where ``adjacency`` is False.
        ValueError: not ``[m, 2]``, an index outside ``0..n-1`` (a missing
            node), a self-loop; an adjacency matrix that is not ``[n, n]``
            or holds values other than 0 and 1.
    """
    if isinstance(edges, jax.core.Tracer):
        raise TypeError(f"{name} must be concrete (a NumPy array), not traced: build a "
                        "GraphLayout with jaxrank.graph.graph_layout outside jit.")
    if hasattr(edges, "tocoo") and hasattr(edges, "nnz"):  # scipy.sparse
        if not adjacency:
            raise TypeError(f"{name} must be an [m, 2] array of node pairs here (aligned "
                            "with the per-edge weights); got a scipy.sparse matrix.")
        edges = _adjacency_edges(edges, n, name)
    e = np.asarray(edges)
    if e.size == 0:
        return np.zeros((0, 2), np.int64)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"{name} must have shape [m, 2] (pairs of node indices); got {e.shape}.")
    if e.dtype.kind not in "iu" and not (
            e.dtype.kind == "f" and np.all(np.isfinite(e)) and np.all(e == np.round(e))):
        raise TypeError(f"{name} must hold integer node indices; got dtype {e.dtype}.")
    # The range check on the values as given (a cast to int64 first would wrap
    # uint64 indices from 2^63 up and large floats to negative numbers).
    bad = (e < 0) | (e >= n)
    if bad.any():
        r = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"{name}[{r}] = {[int(v) for v in e[r]]} names a node outside "
                         f"0..{n - 1} (there are {n} nodes).")
    e = e.astype(np.int64)
    loops = e[:, 0] == e[:, 1]
    if loops.any():
        r = int(np.flatnonzero(loops)[0])
        raise ValueError(f"{name}[{r}] = {e[r].tolist()} is a self-loop; edges join two "
                         "different nodes.")
    return e


def _adjacency_edges(A, n, name):
    """``[m, 2]`` pairs ``i < j`` of a sparse 0/1 adjacency matrix ``A [n, n]``."""
    if A.shape != (n, n):
        raise ValueError(f"{name} as an adjacency matrix must have shape [n, n] = [{n}, {n}] "
                         f"(one row and column per node); got {A.shape}.")
    coo = A.tocoo()
    keep = coo.data != 0  # explicitly stored zeros are no edge
    rows, cols, vals = coo.row[keep], coo.col[keep], coo.data[keep]
    if np.any(vals != 1):
        k = int(np.flatnonzero(vals != 1)[0])
        raise ValueError(
            f"{name} as an adjacency matrix must hold 0 and 1 (the models take unweighted "
            f"edges); got {vals[k].item()!r} at ({int(rows[k])}, {int(cols[k])}).")
    loops = rows == cols
    if np.any(loops):
        i = int(rows[np.flatnonzero(loops)[0]])
        raise ValueError(f"{name} as an adjacency matrix has a non-zero diagonal entry at "
                         f"({i}, {i}): a self-loop; edges join two different nodes.")
    pairs = np.stack([np.minimum(rows, cols), np.maximum(rows, cols)], axis=1).astype(np.int64)
    return np.unique(pairs, axis=0) if pairs.size else np.zeros((0, 2), np.int64)


def graph_layout(n, edges, *, max_enum=12, method="auto") -> GraphLayout:
    """Prepare a graph for the max-marginal kernels (host side, once per graph).

    Merges repeated pairs (``(i, j)`` = ``(j, i)``), finds the connected
    components (``scipy.sparse.csgraph``) and assigns each to an enumeration
    bucket (at most ``max_enum`` nodes, with ``method`` ``"auto"`` or
    ``"enumerate"``) or to the graph-cut part.

    Args:
        n: number of nodes (``>= 1``).
        edges: ``[m, 2]`` integer node pairs, or a ``scipy.sparse`` ``[n, n]``
            0/1 adjacency matrix (validated by :func:`check_edges`).
        max_enum: largest component enumerated (``1..16``; ``2^K`` labelings).
        method: ``"auto"`` (enumerate small components, cut the others),
            ``"enumerate"`` (every component; a component larger than 16 nodes
            is an error) or a graph-cut method (every component of 2 or more
            nodes is cut; single nodes are trivial).

    Returns:
        :class:`GraphLayout`.

    Raises:
        ValueError: bad ``n``, ``edges``, ``max_enum`` or ``method``; a
            component too large to enumerate with ``method="enumerate"``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an int >= 1; got {n!r}.")
    if isinstance(max_enum, bool) or not isinstance(max_enum, (int, np.integer)) or not (
            1 <= max_enum <= MAX_ENUM):
        raise ValueError(f"max_enum must be an int in 1..{MAX_ENUM}; got {max_enum!r}.")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
    e = check_edges(edges, n)
    lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    key = lo * n + hi
    uniq, merge = np.unique(key, return_inverse=True)
    E = np.stack([uniq // n, uniq % n], axis=1).astype(np.int64)
    m = E.shape[0]
    A = sp.coo_matrix((np.ones(m), (E[:, 0], E[:, 1])), shape=(n, n))
    ncomp, comp = connected_components(A, directed=False)
    sizes = np.bincount(comp, minlength=ncomp)
    if method == "enumerate" and sizes.max() > MAX_ENUM:
        raise ValueError(f"method='enumerate' handles components of at most {MAX_ENUM} nodes; "
                         f"the largest component has {int(sizes.max())}. Use method='auto'.")
    limit = MAX_ENUM if method == "enumerate" else (max_enum if method == "auto" else 1)
    edge_comp = comp[E[:, 0]] if m else np.zeros(0, np.int64)
    # Position of each node inside its component (order of node index).
    order = np.argsort(comp, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n) - starts[comp[order]]
    buckets = []
    prev = 0
    for K in _BUCKETS:
        if prev >= limit:
            break
        K = min(K, limit)
        cs = np.flatnonzero((sizes > prev) & (sizes <= K))
        prev = K
        if cs.size == 0:
            continue
        Q = cs.size
        slot = np.full(ncomp, -1, np.int64)
        slot[cs] = np.arange(Q)
        nodes = np.full((Q, K), n, np.int32)
        inb = slot[comp] >= 0
        nodes[slot[comp[inb]], pos[inb]] = np.flatnonzero(inb)
        ein = slot[edge_comp] >= 0 if m else np.zeros(0, bool)
        ecount = np.bincount(slot[edge_comp[ein]], minlength=Q) if ein.any() else np.zeros(Q, int)
        Emax = max(int(ecount.max()) if Q else 0, 1)
        ledges = np.zeros((Q, Emax, 2), np.int32)
        eids = np.full((Q, Emax), m, np.int32)
        if ein.any():
            ids = np.flatnonzero(ein)
            s = slot[edge_comp[ids]]
            o = np.argsort(s, kind="stable")
            ids, s = ids[o], s[o]
            estart = np.r_[0, np.cumsum(ecount)[:-1]]
            col = np.arange(ids.size) - estart[s]
            ledges[s, col, 0] = pos[E[ids, 0]]
            ledges[s, col, 1] = pos[E[ids, 1]]
            eids[s, col] = ids
        buckets.append(Bucket(jnp.asarray(nodes), jnp.asarray(ledges), jnp.asarray(eids)))
    big = np.flatnonzero(sizes > limit)
    cut = None
    if big.size:
        isbig = np.isin(comp, big)
        nodes = np.flatnonzero(isbig)
        local = np.full(n, -1, np.int64)
        local[nodes] = np.arange(nodes.size)
        ids = np.flatnonzero(isbig[E[:, 0]]) if m else np.zeros(0, np.int64)
        _, lcomp = np.unique(comp[nodes], return_inverse=True)
        cut = CutPart(jnp.asarray(nodes, jnp.int32), jnp.asarray(local[E[ids, 0]], jnp.int32),
                      jnp.asarray(local[E[ids, 1]], jnp.int32), jnp.asarray(ids, jnp.int32),
                      jnp.asarray(lcomp, jnp.int32))
    return GraphLayout(n, m, jnp.asarray(E, jnp.int32), jnp.asarray(merge, jnp.int32),
                       buckets, cut, jnp.asarray(comp, jnp.int32))


@functools.lru_cache(maxsize=None)
def _labelings(K):
    """``[2^K, K]`` every labeling of ``K`` nodes (row ``t``: bits of ``t``)."""
    t = np.arange(2**K)[:, None]
    return ((t >> np.arange(K)[None, :]) & 1).astype(np.int8)


def _enum_bucket(b: Bucket, d, p, *, flips: bool):
    """MAP, flipped max-marginals (and flipped labelings) of a bucket's components.

    ``d [n + 1]`` unary differences ``u1 - u0`` (last entry 0: padding), ``p
    [m + 1]`` pairwise weights (last 0). Returns ``(map [Q, K] int8, delta [Q,
    K], flip [Q, K, K] int8 or None)``.
    """
    Q, K = b.nodes.shape
    dtype = d.dtype
    D = d[b.nodes]  # [Q, K]
    if K == 1:
        lab = (D > 0).astype(jnp.int8)
        delta = -jnp.abs(D)
        return lab, delta, (1 - lab)[..., None] if flips else None
    P = p[b.edge_ids]  # [Q, E]
    qi = jnp.arange(Q)[:, None]
    W = jnp.zeros((Q, K, K), dtype)
    W = W.at[qi, b.edges[..., 0], b.edges[..., 1]].add(P)
    W = W.at[qi, b.edges[..., 1], b.edges[..., 0]].add(P)
    Y = jnp.asarray(_labelings(K), dtype)  # [T, K]
    # sum_e P_e [y_a != y_b] = y . (W 1) - y^T W y  (W symmetric, P on both triangles)
    lin = D + jnp.sum(W, axis=2)  # [Q, K]
    YW = jnp.einsum("tk,qkj->qtj", Y, W)
    S = Y @ lin.T  # [T, Q]
    S = S.T - jnp.sum(YW * Y[None], axis=2)  # [Q, T]
    best = jnp.argmax(S, axis=1)
    smax = jnp.max(S, axis=1)
    Yi = jnp.asarray(_labelings(K))
    lab = Yi[best]  # [Q, K]
    other = Yi.T[None, :, :] != lab[:, :, None]  # [Q, K, T]
    Sf = jnp.where(other, S[:, None, :], -jnp.inf)
    delta = jnp.max(Sf, axis=2) - smax[:, None]
    flip = Yi[jnp.argmax(Sf, axis=2)] if flips else None  # [Q, K, K]
    return lab, delta, flip


def _enum_map(b: Bucket, d, p):
    """MAP labeling ``[Q, K]`` of a bucket's components (no max-marginals)."""
    Q, K = b.nodes.shape
    D = d[b.nodes]
    if K == 1:
        return (D > 0).astype(jnp.int8)
    P = p[b.edge_ids]
    qi = jnp.arange(Q)[:, None]
    W = jnp.zeros((Q, K, K), d.dtype)
    W = W.at[qi, b.edges[..., 0], b.edges[..., 1]].add(P)
    W = W.at[qi, b.edges[..., 1], b.edges[..., 0]].add(P)
    Y = jnp.asarray(_labelings(K), d.dtype)
    lin = D + jnp.sum(W, axis=2)
    S = (Y @ lin.T).T - jnp.sum(jnp.einsum("tk,qkj->qtj", Y, W) * Y[None], axis=2)
    return jnp.asarray(_labelings(K))[jnp.argmax(S, axis=1)]


def _cut_c(d, tails, heads, w, mode, want_labels):
    n = d.shape[0]
    mp = np.zeros(n, np.int8)
    delta = np.zeros(n if mode else 0, np.float64)
    labs = np.zeros(n * n if (mode and want_labels) else 0, np.int8)
    _cext.max_marginals(np.ascontiguousarray(d, np.float64), np.ascontiguousarray(tails, np.int32),
                        np.ascontiguousarray(heads, np.int32), np.ascontiguousarray(w, np.float64),
                        mp, delta, labs, mode)
    return mp, delta, labs.reshape(n, n) if labs.size else None


_WARNED = []


def resolve_cut_method(method):
    """The graph-cut back-end of ``method`` (``"auto"`` -> ``"bk"``, or ``"python"``)."""
    if method in ("auto", "enumerate", "bk"):
        if _cext is None:
            if not _WARNED:
                warnings.warn("jaxrank's C max-flow extension is not built; large components "
                              "use the slow pure-Python port (reinstall jaxrank with a C "
                              "compiler).", RuntimeWarning, stacklevel=3)
                _WARNED.append(True)
            return "python"
        return "bk"
    if method == "bk-fresh" and _cext is None:
        raise ImportError("method='bk-fresh' needs jaxrank's C extension (not built).")
    return method


def host_cut(d, tails, heads, w, *, method, mode, want_labels):
    """One graph-cut call on the host (NumPy in, NumPy out).

    Args:
        d: ``[n]`` float unary differences ``u1 - u0``.
        tails, heads: ``[m]`` int edge end points.
        w: ``[m]`` float weights ``>= 0`` (``-pairwise``).
        method: a graph-cut back-end of :data:`GRAPH_CUT_METHODS` (or
            ``"auto"``).
        mode: 0 MAP only; 1 MAP and every flipped max-marginal.
        want_labels: also return the flipped labelings.

    Returns:
        ``(map [n] int8, delta [n] float64 (mode 1), labels [n, n] int8 or None)``.
    """
    method = resolve_cut_method(method)
    d = np.asarray(d, np.float64)
    w = np.maximum(np.asarray(w, np.float64), 0.0)
    tails = np.asarray(tails, np.int32)
    heads = np.asarray(heads, np.int32)
    if method in ("bk", "bk-fresh"):
        cmode = 0 if mode == 0 else (1 if method == "bk" else 2)
        return _cut_c(d, tails, heads, w, cmode, want_labels)
    fn = {"python": _cut_python, "ortools": _cut_ortools, "pymaxflow": _cut_pymaxflow}[method]
    return fn(d, tails, heads, w, mode, want_labels)


def _split(x):
    """``x`` as two float32 parts ``hi + lo`` (exact to ~48 bits for float64 ``x``)."""
    hi = x.astype(jnp.float32)
    return hi, (x - hi.astype(x.dtype)).astype(jnp.float32)


def _join(hi, lo):
    return np.asarray(hi, np.float64) + np.asarray(lo, np.float64)


def _cut_callback(cut: CutPart, d, p, *, method, flips: bool, map_only: bool):
    """``pure_callback`` into :func:`host_cut` for the graph-cut part.

    Floats cross the callback as float32 pairs ``hi + lo``: the callback may run on
    an XLA thread without the caller's ``jax.enable_x64`` context, where float64
    inputs and outputs would be rounded to float32.
    """
    nL = cut.nodes.shape[0]
    dtype = d.dtype
    dh, dlo = _split(d[cut.nodes])
    wh, wlo = _split(-p[cut.edge_ids])
    if map_only:
        shapes = jax.ShapeDtypeStruct((nL,), jnp.int8)

        def host(dh, dlo, wh, wlo, t, h):
            return host_cut(_join(dh, dlo), t, h, _join(wh, wlo), method=method, mode=0,
                            want_labels=False)[0]

        return jax.pure_callback(host, shapes, dh, dlo, wh, wlo, cut.tails, cut.heads,
                                 vmap_method="sequential")
    f32 = jax.ShapeDtypeStruct((nL,), jnp.float32)
    shapes = (jax.ShapeDtypeStruct((nL,), jnp.int8), f32, f32)
    if flips:
        shapes = shapes + (jax.ShapeDtypeStruct((nL, nL), jnp.int8),)

    def host(dh, dlo, wh, wlo, t, h):
        mp, delta, labs = host_cut(_join(dh, dlo), t, h, _join(wh, wlo), method=method, mode=1,
                                   want_labels=flips)
        hi = delta.astype(np.float32)
        lo = (delta - hi.astype(np.float64)).astype(np.float32)
        out = (mp, hi, lo)
        return out + (labs,) if flips else out

    out = jax.pure_callback(host, shapes, dh, dlo, wh, wlo, cut.tails, cut.heads,
                            vmap_method="sequential")
    delta = out[1].astype(dtype) + out[2].astype(dtype)
    return (out[0], delta) + tuple(out[3:])


class Marginals(NamedTuple):
    """Max-marginals of a layout, component by component.

    Attributes:
        label: ``[n]`` int8 a MAP labeling.
        delta: ``[n]`` float ``<= 0``: ``S(best labeling with node i flipped)
            - S(MAP)`` (the flipped max-marginal minus the maximum).
        flips: ``None``, or one ``[Q, K, K]`` int8 array per enumeration
            bucket (row ``k``: the component's labeling with its node ``k``
            flipped), then ``[nL, nL]`` for the graph-cut part (row ``k``: all
            cut nodes, node ``k`` flipped; other components at the MAP).
        maps: ``None``, or the MAP labelings in the same layout: ``[Q, K]``
            per bucket, then ``[nL]``.
    """

    label: Any
    delta: Any
    flips: Any = None
    maps: Any = None

    def scores(self):
        """``[n]`` max-marginal differences ``m[i, 1] - m[i, 0]`` (eq. (11))."""
        return jnp.where(self.label == 1, -self.delta, self.delta)


def _padded(x, fill=0):
    return jnp.concatenate([x, jnp.full((1,) + x.shape[1:], fill, x.dtype)])


def layout_max_marginals(layout: GraphLayout, unary, pairwise, *, method="auto",
                         flips=False) -> Marginals:
    """Max-marginals of ``S`` on a prepared graph (jittable; graph cuts by callback).

    Args:
        layout: :class:`GraphLayout` from :func:`graph_layout`.
        unary: ``[n, 2]`` float unary scores (only ``unary[:, 1] - unary[:,
            0]`` matters for the max-marginal differences).
        pairwise: ``[m]`` float weights ``<= 0`` of the *merged* edges
            ``layout.edges`` (positive entries are clipped to 0 by the
            graph-cut back-ends; not checked here).
        method: static graph-cut back-end of the layout's graph-cut part
            (``"auto"``: ``"bk"``).
        flips: static; also return the flipped labelings (:class:`Marginals`).

    Returns:
        :class:`Marginals`.
    """
    n = layout.n
    d = _padded(unary[:, 1] - unary[:, 0])
    p = _padded(pairwise)
    label = jnp.zeros((n,), jnp.int8)
    delta = jnp.zeros((n,), d.dtype)
    fl, mp = [], []
    for b in layout.buckets:
        lab, dl, f = _enum_bucket(b, d, p, flips=flips)
        idx = b.nodes.reshape(-1)
        label = label.at[idx].set(lab.reshape(-1), mode="drop")
        delta = delta.at[idx].set(dl.reshape(-1), mode="drop")
        fl.append(f)
        mp.append(lab)
    if layout.cut is not None:
        out = _cut_callback(layout.cut, d[:-1], p[:-1], method=method, flips=flips,
                            map_only=False)
        label = label.at[layout.cut.nodes].set(out[0])
        delta = delta.at[layout.cut.nodes].set(out[1])
        if flips:
            fl.append(out[2])
            mp.append(out[0])
    if not flips:
        return Marginals(label, delta)
    return Marginals(label, delta, tuple(fl), tuple(mp))


def layout_map(layout: GraphLayout, unary, pairwise, *, method="auto"):
    """A MAP labeling ``[n]`` int8 of ``S`` on a prepared graph (jittable).

    One enumeration per small component and one graph cut for the others
    (loss-augmented inference of HOB-SVM). Arguments as
    :func:`layout_max_marginals`.
    """
    n = layout.n
    d = _padded(unary[:, 1] - unary[:, 0])
    p = _padded(pairwise)
    label = jnp.zeros((n,), jnp.int8)
    for b in layout.buckets:
        label = label.at[b.nodes.reshape(-1)].set(_enum_map(b, d, p).reshape(-1), mode="drop")
    if layout.cut is not None:
        lab = _cut_callback(layout.cut, d[:-1], p[:-1], method=method, flips=False,
                            map_only=True)
        label = label.at[layout.cut.nodes].set(lab)
    return label


def score(layout: GraphLayout, unary, pairwise, labels):
    """``S(y)`` of labelings ``labels [..., n]`` (merged-edge ``pairwise [m]``)."""
    y = labels.astype(jnp.int32)
    u = jnp.where(y == 1, unary[:, 1], unary[:, 0]).sum(-1)
    cut = y[..., layout.edges[:, 0]] != y[..., layout.edges[:, 1]]
    return u + jnp.sum(jnp.where(cut, pairwise, 0), axis=-1)


@functools.partial(jax.jit, static_argnames=("method", "flips"))
def _mm_jit(layout, unary, pairwise, *, method, flips):
    return layout_max_marginals(layout, unary, pairwise, method=method, flips=flips)


def max_marginals(unary, edges, pairwise, *, method="auto", max_enum=12,
                  return_labelings=False):
    r"""Max-marginals ``m[i, l] = max_{y: y_i = l} S(y)`` of a supermodular pairwise score.

    ``S(y) = sum_i unary[i, y_i] + sum_e pairwise[e] [y_i != y_j]`` over
    ``y in {0, 1}^n`` with ``pairwise <= 0`` (module docstring). Exact for
    every ``method``.

    Args:
        unary: ``[n, 2]`` float unary scores (finite).
        edges: ``[m, 2]`` integer node pairs (undirected; repeated pairs add
            their weights). Concrete (host) array.
        pairwise: ``[m]`` float weights ``<= 0`` (finite).
        method: ``"auto"`` (default: enumeration for components of at most
            ``max_enum`` nodes, graph cuts for larger ones), ``"enumerate"``,
            or a graph-cut back-end for every component: ``"bk"`` (C, search
            trees reused between the clamped cuts), ``"bk-fresh"`` (C, every
            cut from scratch), ``"python"``, ``"ortools"`` (optional
            dependency), ``"pymaxflow"`` (optional GPL extra).
        max_enum: largest component enumerated by ``"auto"`` (``1..16``).
        return_labelings: also return maximising labelings ``[n, 2, n]``
            bool (``O(n^2)`` memory): row ``[i, l]`` attains ``m[i, l]``.

    Returns:
        ``[n, 2]`` max-marginals (dtype of ``unary``, float32 by default), and
        the labelings if asked for.

    Raises:
        ValueError: ``unary`` not ``[n, 2]`` or with NaN/inf; ``edges`` naming
            a missing node, with self-loops or not ``[m, 2]``; ``pairwise``
            not ``[m]``, NaN/inf, or positive (the score would not be
            supermodular and graph cuts would not apply); a bad ``method`` or
            ``max_enum``; a component of more than 16 nodes with
            ``method="enumerate"``.
        TypeError: non-numeric inputs, traced ``edges``.
        ImportError: ``"ortools"`` / ``"pymaxflow"`` not installed.

    References:
        Kolmogorov & Zabih, PAMI 2004; Boykov & Kolmogorov, PAMI 2004; Kohli &
        Torr, ECCV 2006 (min-marginals by dynamic graph cuts); Dokania et
        al., ECCV 2014, eqs. (9)-(11).
    """
    u = jnp.asarray(unary)
    if u.ndim != 2 or u.shape[1] != 2 or u.shape[0] < 1:
        raise ValueError(f"unary must have shape [n, 2] with n >= 1; got {u.shape}.")
    if not jnp.issubdtype(u.dtype, jnp.floating):
        if jnp.issubdtype(u.dtype, jnp.integer) or u.dtype == jnp.bool_:
            u = u.astype(jnp.float32)
        else:
            raise TypeError(f"unary must be real; got dtype {u.dtype}.")
    n = u.shape[0]
    e = check_edges(edges, n, adjacency=False)
    p = jnp.asarray(pairwise, u.dtype) if np.size(pairwise) else jnp.zeros((0,), u.dtype)
    if p.shape != (e.shape[0],):
        raise ValueError(f"pairwise must have shape [m] = [{e.shape[0]}] (one weight per edge); "
                         f"got {p.shape}.")
    if not isinstance(u, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(u))):
        raise ValueError("unary contains NaN or infinite scores.")
    if not isinstance(p, jax.core.Tracer):
        if not bool(jnp.all(jnp.isfinite(p))):
            raise ValueError("pairwise contains NaN or infinite weights.")
        if bool(jnp.any(p > 0)):
            raise ValueError("pairwise must be <= 0 (a positive weight rewards disagreement: "
                             "the score is then not supermodular and graph cuts do not "
                             "apply).")
    layout = graph_layout(n, e, max_enum=max_enum, method=method)
    pm = jax.ops.segment_sum(p, layout.merge, num_segments=layout.m) if layout.m else p[:0]
    cut_method = method if method in GRAPH_CUT_METHODS else "auto"
    mg = _mm_jit(layout, u, pm, method=cut_method, flips=bool(return_labelings))
    best = score(layout, u, pm, mg.label)
    flipped = best + mg.delta
    lab1 = mg.label == 1
    mm = jnp.stack([jnp.where(lab1, flipped, best), jnp.where(lab1, best, flipped)], axis=1)
    if not return_labelings:
        return mm
    return mm, _dense_labelings(layout, mg)


def _dense_labelings(layout, mg: Marginals):
    """``[n, 2, n]`` bool maximising labelings from :class:`Marginals` (host side)."""
    n = layout.n
    base = np.asarray(mg.label, np.int8)
    out = np.repeat(np.repeat(base[None, None, :], n, axis=0), 2, axis=1)
    flips = [np.asarray(f) for f in mg.flips]
    for b, f in zip(layout.buckets, flips):
        nodes = np.asarray(b.nodes)
        Q, K = nodes.shape
        for q in range(Q):
            valid = nodes[q] < n
            idx = nodes[q][valid]
            for k in np.flatnonzero(valid):
                i = nodes[q, k]
                out[i, 1 - base[i]][idx] = f[q, k][valid]
    if layout.cut is not None:
        f = flips[-1]
        nodes = np.asarray(layout.cut.nodes)
        comp = np.asarray(layout.cut.comp)
        for k, i in enumerate(nodes):
            same = comp == comp[k]
            out[i, 1 - base[i]][nodes[same]] = f[k][same]
    return out.astype(bool)


__all__ = [
    "GRAPH_CUT_METHODS",
    "METHODS",
    "GraphLayout",
    "Marginals",
    "graph_layout",
    "has_c_extension",
    "layout_map",
    "layout_max_marginals",
    "max_marginals",
]
