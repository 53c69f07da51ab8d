r"""High-order rankers' structured models: HOB-SVM and HOAP-SVM (Dokania et al., ECCV 2014).

Samples ``x_i`` come with a set ``E`` of pairs of *similar* samples that tend
to share a label (persons in one image, papers citing each other, posts of
one thread). Both models are structured models of the solver's interface
(:mod:`jaxrank._src.types`): a feature map with a unary and a pairwise part,
and an oracle.

**Feature map** (eqs. (4)-(6)). With ``psi(x) = [x, 1]`` (``fit_intercept``)
or ``x``, weights ``w = [w+, w-, w2]`` (``3 d'`` entries) and ``Phi(z_i, z_j)
= exp(-(z_i - z_j)^2)`` element-wise::

    S = (unary [n, 2], pairwise [m]),
    unary[i, 1] = w+ . psi(x_i),   unary[i, 0] = w- . psi(x_i),
    pairwise[e] = eta w2 . Phi(psi(x_i), psi(x_j))        (e = (i, j) in E)

so that ``w . Psi(X, Y) = sum_i unary[i, y_i] + sum_e pairwise[e] [y_i !=
y_j]``. ``Phi = 1 - G`` with ``G = 1 - exp(-(z_i - z_j)^2)``, which is as sparse
as ``z_i - z_j`` (``w2 . Phi = sum(w2) - G w2``), so sparse ``X`` stays sparse.
The solver keeps ``w2 <= 0`` (``Model.nonpositive``): ``pairwise <= 0`` and
the score is supermodular (graph cuts apply).

**HOB-SVM** (problem (8)). Loss (7), the weighted 0-1 loss ``Delta = (J
#{missed positives} + #{false positives}) / (J |P| + |N|)`` with ``J =
|N|/|P|`` by default, is unary, so loss-augmented inference is one MAP of
``S + Delta`` (:func:`jaxrank.graph.layout_map`: enumeration of small
components, one graph cut for the large ones). Ranking by the max-marginal
difference ``s_i = m_i^+ - m_i^-`` (eqs. (9)-(11)).

**HOAP-SVM** (problem (14), Algorithm 1). The score of a ranking is (12) with
``s_i(w)``; the problem is a difference of convex functions (Proposition 3),
solved by CCCP in :meth:`HOAPSVM._train`: at ``w_t`` the max-marginal
labelings at the true labels, ``Ybar_i^+`` (positives) and ``Ybar_j^-``
(negatives), linearise the concave part (Proposition 4); the convex problem
(17) is solved by :func:`jaxrank.solvers.fit` with :class:`HOAPModel`, whose
oracle is the exact AP most-violated ranking (Mohapatra et al. 2014) of the
scores of Proposition 5, ``sbar_i = mbar_i^+ - m_i^-`` (positives) and
``sbar_j = m_j^+ - mbar_j^-`` (negatives), with ``m`` the max-marginals at
the current ``w`` (their labelings give the plane) and ``mbar`` the fixed
labelings' scores. The objective (16) after every convex step is
``cccp_objectives_``; it is non-increasing (up to float32 rounding) even
when a step stops at ``max_iter``: each convex step is warm-started at the
current ``w``, where its bound (17) equals (16), and never returns a point
above its start.

**Per-component linearisation.** ``s_i`` depends only on ``i``'s connected
component (other components add the same maximum to ``m_i^+`` and
``m_i^-``), so ``m_i^+`` and ``m_i^-`` are taken over ``i``'s component (as
are the labelings): the same ``s_i`` and DC program, with a linearisation of
``g`` that is never looser than the paper's whole-graph one (both are tight
at ``w_t``; the paper's adds a non-negative term for every other
component's labels moving away from their MAP at ``w_t``). For isolated
samples (``eta = 0``) the linearisation is exact.

**Baselines** (§5: "SVM" and "AP-SVM" are ``w2 = 0``). ``w+`` and ``w-``
enter only as ``v = w+ - w-``, so at the optimum ``w+ = -w- = v/2`` and
``1/2(||w+||^2 + ||w-||^2) = ||v||^2/4``. With ``eta = 0``:

* HOB-SVM(``C``) solves ``1/4 ||v||^2 + C sum_k a_k max(0, 1 - y_k v . z_k)``
  with margins ``a_k = J/Z`` (positives), ``1/Z`` (negatives), ``Z = J|P| +
  |N|`` and ``z_k = psi(x_k)/a_k``: a binary SVM with positive weight ``J``,
  ``C' = 2 C / Z`` on the rows ``z_k`` (no separate intercept), objective
  halved (``tests/test_high_order.py`` checks this against
  :class:`jaxrank.BinarySVM`);
* HOAP-SVM(``C``) solves AP-SVM(``2 C``) (``v`` = its ``w``; the intercept
  cancels), objective halved.

**Edges.** ``edges [m, 2]`` integer sample indices; ``(i, j)`` and ``(j,
i)`` and repeats are one pair of ``E``; self-loops and indices outside
``0..n-1`` are errors. Samples removed from a fit (``where``) lose their
edges.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from jaxrank._src.layout import Design, design
from jaxrank._src.models.base import Model
from jaxrank._src.oracles import maxflow as G
from jaxrank._src.oracles.ap import ap_oracle
from jaxrank._src.types import Violation

GRAPH_METHODS = ("auto", "enumerate", "bk", "python", "ortools", "pymaxflow")


# Planes cached by the solver, and cached-plane steps per oracle call, that
# both high-order models suggest (``solver_defaults``; the solver's default is
# 32 / 32). Their losses are sums over many samples seen through one slack,
# so the optimum is a combination of many planes, and a larger cache lets
# fits on one large component (a citation graph) converge within max_iter
# (docs/design_notes.md).
PLANE_CACHE = 128


@jax.tree_util.register_pytree_node_class
class GraphData:
    """Samples and their graph: the shared ``data`` of the high-order models.

    Attributes:
        X: :class:`jaxrank.models.Design` ``[n, d]`` unary features.
        G: :class:`jaxrank.models.Design` ``[m, d]``: ``1 - exp(-(x_i -
            x_j)^2)`` per merged edge (``layout.edges`` order).
        layout: :class:`jaxrank.graph.GraphLayout` of the edges.
    """

    def __init__(self, X, Gd, layout):
        self.X, self.G, self.layout = X, Gd, layout

    def tree_flatten(self):
        return (self.X, self.G, self.layout), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    @property
    def shape(self):
        """``(n, d)`` of the unary features."""
        return self.X.shape

    @property
    def dtype(self):
        return self.X.dtype

    def __repr__(self):
        return f"GraphData(X={self.X}, m={self.G.shape[0]}, {self.layout})"


def pairwise_design(X, edges, *, dtype=np.float32) -> Design:
    """``G [m, d]`` with ``G[e] = 1 - exp(-(x_i - x_j)^2)`` for ``e = (i, j)`` (host side).

    Sparse ``X`` gives a sparse ``G`` (same support as ``x_i - x_j``).
    """
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    if sp.issparse(X):
        Xc = sp.csr_matrix(X, dtype=np.float64)
        D = (Xc[e[:, 0]] - Xc[e[:, 1]]).tocsr()
        D.data = -np.expm1(-D.data * D.data)
        D.eliminate_zeros()
        return design(D.astype(dtype), dtype=dtype)
    Xd = np.asarray(X, np.float64)
    return design(-np.expm1(-(Xd[e[:, 0]] - Xd[e[:, 1]]) ** 2), dtype=dtype)


@dataclasses.dataclass(frozen=True)
class HighOrderFeatures:
    """Feature map ``S = (unary [n, 2], pairwise [m])`` of eqs. (4)-(6) (module docstring).

    Attributes:
        eta: static trade-off ``>= 0`` of the pairwise part.
        intercept: static; ``psi(x) = [x, 1]`` (a regularised constant feature
            in every block; in ``Phi`` it is the constant 1: a learned uniform
            smoothing strength).
    """

    eta: float = 1.0
    intercept: bool = True

    def width(self, data) -> int:
        """``d'``: entries of each of the three blocks."""
        return data.X.shape[1] + int(self.intercept)

    def dim(self, data) -> int:
        """``3 d'``."""
        return 3 * self.width(data)

    def split(self, w, d):
        """``(w+, w-, w2)`` blocks of ``w``."""
        k = d + int(self.intercept)
        return w[:k], w[k:2 * k], w[2 * k:3 * k]

    def _lin(self, v, X):
        d = X.shape[1]
        s = X @ v[:d]
        return s + v[d] if self.intercept else s

    def __call__(self, w, data):
        d = data.X.shape[1]
        wp, wn, w2 = self.split(w, d)
        unary = jnp.stack([self._lin(wn, data.X), self._lin(wp, data.X)], axis=1)
        if data.G.shape[0] == 0:
            pair = jnp.zeros((0,), unary.dtype)
        else:
            pair = self.eta * (jnp.sum(w2) - data.G @ w2[:d])
        return unary, pair


class HOBProblem(NamedTuple):
    """One HOB-SVM fit: ``positive``, ``where`` ``[n]`` bool, ``J []``, the graph layout."""

    positive: jax.Array
    where: jax.Array
    J: jax.Array
    layout: Any


class HOAPProblem(NamedTuple):
    """One convex step (17) of HOAP-SVM.

    Attributes:
        positive, where: ``[n]`` bool.
        layout: :class:`jaxrank.graph.GraphLayout`.
        ybar: the labelings of Proposition 4 at ``w_t``, in the layout of
            :class:`jaxrank.graph.Marginals` ``flips`` (one ``[Q, K, K]`` int8
            per enumeration bucket, then ``[nL, nL]``): row ``k`` is the
            labeling of node ``k``'s component that attains its max-marginal
            at its true label.
    """

    positive: jax.Array
    where: jax.Array
    layout: Any
    ybar: Any


def _masked(S, layout, where):
    """Unary and pairwise scores of the samples in ``where`` (others isolated, zero)."""
    unary, pair = S
    unary = jnp.where(where[:, None], unary, 0)
    if layout.m:
        ew = where[layout.edges[:, 0]] & where[layout.edges[:, 1]]
        pair = jnp.where(ew, jnp.minimum(pair, 0), 0)
    return unary, pair


def _cut_edges(layout, y):
    """``[m]`` bool: edges cut by the labeling ``y [n]``."""
    if not layout.m:
        return jnp.zeros((0,), bool)
    return y[layout.edges[:, 0]] != y[layout.edges[:, 1]]


def hob_loss_weights(positive, where, J):
    """``[n]`` loss of flipping each sample under (7): ``J/Z`` (positives), ``1/Z`` (negatives)."""
    dtype = jnp.result_type(J)
    nP = jnp.sum(positive & where).astype(dtype)
    nN = jnp.sum(~positive & where).astype(dtype)
    Z = jnp.maximum(J * nP + nN, 1e-30)
    return jnp.where(where, jnp.where(positive, J, 1) / Z, 0).astype(dtype)


@dataclasses.dataclass(frozen=True)
class HOBModel(Model):
    """HOB-SVM (problem (8)) as a structured model (module docstring).

    Problems are :class:`HOBProblem`. The oracle is one MAP of ``S + Delta``
    (weighted 0-1 loss (7), unary) by :func:`jaxrank.graph.layout_map`.

    Attributes:
        graph_method: static graph-cut back-end for large components.

    Suggests the solver's plane cache and cached-plane steps
    (``solver_defaults``: :data:`PLANE_CACHE` each).
    """

    features: Any = HighOrderFeatures()
    graph_method: str = "auto"

    solver_defaults = {"cache": PLANE_CACHE, "inner_steps": PLANE_CACHE}

    def oracle(self, S, problem) -> Violation:
        """Most-violated labeling ``argmax_Y S(Y) + Delta(Y*, Y)`` (one cut)."""
        lay = problem.layout
        unary, pair = _masked(S, lay, problem.where)
        pos = problem.positive
        a = hob_loss_weights(pos, problem.where, problem.J.astype(unary.dtype))
        aug = unary + jnp.stack([jnp.where(pos, a, 0), jnp.where(pos, 0, a)], axis=1)
        y = G.layout_map(lay, aug, pair, method=self.graph_method) == 1
        y = y & problem.where
        star = pos & problem.where
        loss = jnp.sum(jnp.where(y != star, a, 0))
        du = (star.astype(unary.dtype) - y.astype(unary.dtype))
        cu = jnp.stack([-du, du], axis=1)
        cp = (_cut_edges(lay, star).astype(unary.dtype) - _cut_edges(lay, y).astype(unary.dtype))
        if lay.m:
            cp = jnp.where(problem.where[lay.edges[:, 0]] & problem.where[lay.edges[:, 1]], cp, 0)
        # hinge = loss - <S, coef> over the samples whose label differs (exact zeros elsewhere).
        hinge = loss - jnp.sum(unary * cu) - jnp.sum(pair * cp)
        return Violation(loss=loss, coef=(cu, cp), aux=y, hinge=hinge)


def _bucket_rows(layout):
    """Per part of :class:`Marginals` layout: ``(nodes [Q, K], local edges [Q, E, 2],
    edge ids [Q, E], same-component mask [Q, K, K] or None)``."""
    out = []
    for b in layout.buckets:
        out.append((b.nodes, b.edges, b.edge_ids, None))
    if layout.cut is not None:
        c = layout.cut
        le = jnp.stack([c.tails, c.heads], axis=1)
        same = c.comp[:, None] == c.comp[None, :]
        out.append((c.nodes[None], le[None], c.edge_ids[None], same[None]))
    return out


def truth_labelings(mg: G.Marginals, layout, positive):
    """Rows of :class:`Marginals` ``flips`` at each node's true label (Proposition 4).

    Returns one int8 array per part (``[Q, K, K]``, then ``[1, nL, nL]``): row
    ``k`` = the maximising labeling of node ``k``'s component with ``y_k`` =
    its true label (the MAP if it already has it, else the flipped labeling).
    """
    out = []
    for (nodes, _, _, _), f, mp in zip(_bucket_rows(layout), mg.flips, mg.maps):
        n = layout.n
        if f.ndim == 2:  # cut part
            f, mp = f[None], mp[None]
        truth = jnp.concatenate([positive, jnp.zeros((1,), bool)])[jnp.minimum(nodes, n)]
        keep = (mp == truth.astype(mp.dtype))[..., None]  # [Q, K, 1]
        out.append(jnp.where(keep, mp[:, None, :], f).astype(jnp.int8))
    return tuple(out)


def wrong_labelings(mg: G.Marginals, layout, positive):
    """As :func:`truth_labelings`, at the label opposite to the truth."""
    out = []
    for (nodes, _, _, _), f, mp in zip(_bucket_rows(layout), mg.flips, mg.maps):
        n = layout.n
        if f.ndim == 2:
            f, mp = f[None], mp[None]
        truth = jnp.concatenate([positive, jnp.zeros((1,), bool)])[jnp.minimum(nodes, n)]
        keep = (mp != truth.astype(mp.dtype))[..., None]
        out.append(jnp.where(keep, mp[:, None, :], f).astype(jnp.int8))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class HOAPModel(Model):
    """The convex problem (17) of HOAP-SVM as a structured model (module docstring).

    Problems are :class:`HOAPProblem` (with the labelings ``ybar`` of
    Proposition 4). The oracle computes the max-marginals at the current
    ``w`` at each sample's wrong label and their labelings
    (:func:`jaxrank.graph.layout_max_marginals`), the scores ``sbar`` of
    Proposition 5 and the exact AP most-violated ranking of ``sbar``
    (:func:`jaxrank.inference.ap_oracle`); the plane is ``sum_i c_i D_i``
    with ``sbar_i = <S, D_i>``.

    Attributes:
        kp: static bound on the positives of a ranking.
        method: static AP inference method.
        graph_method: static graph-cut back-end for large components.

    Suggests the solver's plane cache and cached-plane steps
    (``solver_defaults``: :data:`PLANE_CACHE` each).
    """

    features: Any = HighOrderFeatures()
    kp: int = 1
    method: str = "select"
    graph_method: str = "auto"

    solver_defaults = {"cache": PLANE_CACHE, "inner_steps": PLANE_CACHE}

    def oracle(self, S, problem) -> Violation:
        lay = problem.layout
        unary, pair = _masked(S, lay, problem.where)
        mg = G.layout_max_marginals(lay, unary, pair, method=self.graph_method, flips=True)
        wrong = wrong_labelings(mg, lay, problem.positive)
        n = lay.n
        du = jnp.concatenate([unary[:, 1] - unary[:, 0], jnp.zeros((1,), unary.dtype)])
        pp = jnp.concatenate([pair, jnp.zeros((1,), unary.dtype)])
        sign_all = jnp.where(problem.positive, 1, -1).astype(unary.dtype)
        sbar = jnp.zeros((n,), unary.dtype)
        parts = []
        for (nodes, le, eids, same), yb, yw in zip(_bucket_rows(lay), problem.ybar, wrong):
            diff = yb.astype(unary.dtype) - yw.astype(unary.dtype)  # [Q, K, K]
            if same is not None:
                diff = jnp.where(same, diff, 0)
            P = pp[eids]  # [Q, E]
            ga = jax.vmap(lambda y, e: y[:, e[:, 0]] != y[:, e[:, 1]])
            cb = ga(yb, le).astype(unary.dtype)  # [Q, K, E]
            cw = ga(yw, le).astype(unary.dtype)
            dcut = cb - cw
            if same is not None:
                ecomp = jax.vmap(lambda s, e: s[:, e[:, 0]])(same, le)  # [Q, K, E]
                dcut = jnp.where(ecomp, dcut, 0)
            val = jnp.einsum("qkj,qj->qk", diff, du[nodes]) + jnp.einsum("qke,qe->qk", dcut, P)
            sgn = jnp.concatenate([sign_all, jnp.zeros((1,), unary.dtype)])[nodes]
            sbar = sbar.at[nodes.reshape(-1)].set((sgn * val).reshape(-1), mode="drop")
            parts.append((nodes, eids, diff, dcut, sgn))
        r = ap_oracle(sbar, problem.positive, problem.where, kp=self.kp, method=self.method)
        cpad = jnp.concatenate([r.coef, jnp.zeros((1,), unary.dtype)])
        cu1 = jnp.zeros((n + 1,), unary.dtype)
        cp = jnp.zeros((lay.m + 1,), unary.dtype)
        for nodes, eids, diff, dcut, sgn in parts:
            a = cpad[nodes] * sgn  # [Q, K] weight of each row
            cu1 = cu1.at[nodes.reshape(-1)].add(jnp.einsum("qk,qkj->qj", a, diff).reshape(-1))
            cp = cp.at[eids.reshape(-1)].add(jnp.einsum("qk,qke->qe", a, dcut).reshape(-1))
        cu1 = jnp.where(problem.where, cu1[:n], 0)
        cu = jnp.stack([-cu1, cu1], axis=1)
        cp = cp[:lay.m]
        if lay.m:
            cp = jnp.where(problem.where[lay.edges[:, 0]] & problem.where[lay.edges[:, 1]], cp, 0)
        return Violation(loss=r.loss, coef=(cu, cp), aux=r.aux, hinge=r.hinge)

    def impute(self, S, problem):
        """CCCP's linearisation at the scores ``S``: the labelings ``Ybar`` of Proposition 4.

        Args:
            S: the scores of :class:`HighOrderFeatures` at the current ``w``.
            problem: :class:`HOAPProblem` (no batch axis).

        Returns:
            ``problem`` with ``ybar`` the labelings that attain each sample's
            max-marginal at its true label (Dokania et al., ECCV 2014, Prop. 4).
        """
        unary, pair = _masked(S, problem.layout, problem.where)
        mg = G.layout_max_marginals(problem.layout, unary, pair, method=self.graph_method,
                                    flips=True)
        return problem._replace(ybar=truth_labelings(mg, problem.layout, problem.positive))


@functools.partial(jax.jit, static_argnames=("features", "graph_method"))
def _linearise(W, data, positive, where, *, features, graph_method):
    """Labelings ``Ybar`` of Proposition 4 at ``W [M, dim]`` (one problem each)."""

    def one(w, pos, wh):
        unary, pair = _masked(features(w, data), data.layout, wh)
        mg = G.layout_max_marginals(data.layout, unary, pair, method=graph_method, flips=True)
        return truth_labelings(mg, data.layout, pos)

    return jax.vmap(one)(W, positive, where)


@functools.partial(jax.jit, static_argnames=("features", "graph_method"))
def _mm_scores(W, data, where, *, features, graph_method):
    """``[M, n]`` max-marginal differences ``s_i(w)`` (eq. (11)) for ``W [M, dim]``."""

    def one(w, wh):
        unary, pair = _masked(features(w, data), data.layout, wh)
        mg = G.layout_max_marginals(data.layout, unary, pair, method=graph_method)
        return mg.scores()

    return jax.vmap(one)(W, where)


def _easiest_positives(S, positive, where, fraction):
    """``[M, n]`` bool mask of a self-paced step: every sample but the hardest positives.

    Self-paced learning (Kumar, Packer, Koller, NIPS 2010, "easy samples
    first"): a positive is easier the higher its score, and the ``ceil(fraction
    |P|)`` highest-scoring positives of each fit are kept (ties: lower index
    first), with every negative.

    Args:
        S: ``[M, n]`` float scores (the max-marginal differences (11)).
        positive, where: ``[M, n]`` bool labels and samples of each fit.
        fraction: float in ``(0, 1]``, the share of positives kept.

    Returns:
        ``[M, n]`` bool numpy array, ``where`` without the hardest positives.
    """
    S = np.asarray(S, np.float64)
    where = np.asarray(where, bool)
    pos = np.asarray(positive, bool) & where
    key = np.where(pos, S, -np.inf)
    order = np.argsort(-key, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(order.shape[1])[None, :], axis=1)
    n_keep = np.ceil(fraction * pos.sum(axis=1)).astype(np.int64)
    return where & (~pos | (rank < n_keep[:, None]))
