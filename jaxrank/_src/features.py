r"""Feature maps: the part of a structured model that is linear in ``w``.

A *feature map* turns weights ``w [dim]`` and the data into the scores ``S``
that loss-augmented inference consumes: ``S = scores(w, data)``. It must be
linear in ``w`` (so that the joint feature vector of an output is the
transpose of the map applied to the oracle's ``coef``; the solver gets it from
``jax.vjp``), and ``S`` may be any pytree: ``[n]`` item scores, ``[bags, T]``
candidate scores, or a unary ``[n]`` part plus a pairwise ``[E]`` part.

This module holds the design-matrix container :class:`Design` (dense or
sparse rows, with row access for the per-sample hinge block) and the linear
maps every built-in model uses: :class:`LinearFeatures` (``S = X w``) and the
wrapper :class:`Intercept` (``S = f(w[:-1]) + w[-1]``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax.experimental import sparse as jsparse


@jax.tree_util.register_pytree_node_class
class Design:
    """A design matrix ``X [n, d]``: dense, or sparse rows (BCOO plus CSR offsets).

    A pytree (its arrays are leaves; ``n`` and ``d`` are static), so it can be
    passed to jitted functions and shared by the fits of a batch. ``X @ w`` and
    ``X.T @ g`` work for both layouts; the per-sample hinge block also needs
    row access (:meth:`row_layout`).

    Attributes:
        X: ``[n, d]`` float ``jax.Array`` or ``jax.experimental.sparse.BCOO``
            (row-major sorted, no duplicates).
        indptr: ``[n + 1]`` int32 CSR row offsets into ``X.data`` (sparse
            only, else ``None``).
        shape: static ``(n, d)``.
    """

    def __init__(self, X, indptr=None):
        self.X = X
        self.indptr = indptr
        self.shape = tuple(int(s) for s in X.shape)

    def tree_flatten(self):
        return (self.X, self.indptr), self.shape

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.X, obj.indptr = children
        obj.shape = aux
        return obj

    @property
    def sparse(self) -> bool:
        """True for the BCOO layout."""
        return isinstance(self.X, jsparse.BCOO)

    @property
    def dtype(self):
        return self.X.dtype

    def __matmul__(self, w):
        return self.X @ w

    def rmatvec(self, g):
        """``X.T @ g`` for ``g [n]``: ``[d]``."""
        return self.X.T @ g

    def row_sq_norms(self):
        """``[n]`` squared row norms ``||x_i||^2``."""
        if self.sparse:
            return jax.ops.segment_sum(self.X.data * self.X.data, self.X.indices[:, 0],
                                       num_segments=self.shape[0])
        return jnp.sum(self.X * self.X, axis=1)

    def __repr__(self):
        kind = "sparse" if self.sparse else "dense"
        return f"Design({kind}, shape={self.shape}, dtype={self.dtype})"


def design(X, *, dtype=np.float32) -> Design:
    """Wrap validated features as a :class:`Design` (no validation here).

    Args:
        X: ``[n, d]`` numeric NumPy/JAX array, ``scipy.sparse`` matrix (kept
            sparse: about 12 bytes per stored entry), a BCOO matrix or a
            :class:`Design` (returned as is).
        dtype: float dtype of the values (float32 by default).

    Returns:
        :class:`Design`.
    """
    if isinstance(X, Design):
        return X
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=dtype)
        X.sum_duplicates()
        X.sort_indices()
        indptr = jnp.asarray(X.indptr, jnp.int32)
        return Design(jsparse.BCOO.from_scipy_sparse(X), indptr)
    if isinstance(X, jsparse.BCOO):
        Xs = sp.csr_matrix(
            (np.asarray(X.data), (np.asarray(X.indices[:, 0]), np.asarray(X.indices[:, 1]))),
            shape=X.shape, dtype=dtype)
        return design(Xs, dtype=dtype)
    return Design(jnp.asarray(X, dtype))


@dataclasses.dataclass(frozen=True)
class LinearFeatures:
    """``S = X w``: one score per row of a :class:`Design` (items ``[n]``).

    Static (hashable) configuration; the data is the :class:`Design`.
    """

    def dim(self, data: Design) -> int:
        """Number of weights: ``d``."""
        return data.shape[1]

    def __call__(self, w, data: Design):
        return data @ w

    def hinge_rows(self, data: Design):
        """The rows ``z_i`` of per-sample hinges on ``S``: ``(data, bias=0)``."""
        return data, 0.0


@dataclasses.dataclass(frozen=True)
class Intercept:
    """Feature-map wrapper adding a (regularised) constant feature.

    ``S = base(w[:-1], data) + w[-1]`` on every leaf of ``S``; ``dim`` is one
    more than the base map's. The intercept is penalised like any weight (as
    in liblinear), which keeps every objective strongly convex.

    Attributes:
        base: the wrapped feature map.
    """

    base: Any = LinearFeatures()

    def dim(self, data) -> int:
        return self.base.dim(data) + 1

    def __call__(self, w, data):
        S = self.base(w[:-1], data)
        return jax.tree_util.tree_map(lambda s: s + w[-1], S)

    def hinge_rows(self, data):
        rows, bias = self.base.hinge_rows(data)
        if bias:
            raise ValueError("Intercept cannot wrap a feature map that already has one.")
        return rows, 1.0
