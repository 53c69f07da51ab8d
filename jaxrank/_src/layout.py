"""The design matrix and its layout: :class:`Design` (dense or sparse rows),
its shape buckets, padding and row norms (host side)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

from jaxrank._src.arrays import (
    IN_PLACE_MIN_ENTRIES,
    ShiftedRows,
    _dense_matmul,
    _dense_rmatmul,
    _sparse_matmul,
    _sparse_rmatmul,
    aligned_empty,
    device_dense,
)


@jax.tree_util.register_pytree_node_class
class Design:
    """A design matrix ``X [n, d]``: dense, or sparse rows (BCOO plus CSR offsets).

    A pytree (its arrays are leaves; ``n`` and ``d`` are static), so it can be
    passed to jitted functions and shared by the fits of a batch. ``X @ w`` and
    ``X.T @ g`` work for both layouts; the per-sample hinge block also needs
    row access (:meth:`row_layout`).

    Attributes:
        X: ``[n, d]`` float ``jax.Array``, ``jax.experimental.sparse.BCOO``
            (row-major sorted, no duplicates) or :class:`ShiftedRows` (a
            large float32 NumPy array used in place, see :func:`design`).
        indptr: ``[n + 1]`` int32 CSR row offsets into ``X.data`` (sparse
            only, else ``None``).
        shape: static ``(n, d)``.
        known_max_row_norm: ``max_i ||x_i||`` of the data it was made from, when
            recorded (:meth:`remember_row_norm`), else ``None``;
            not a pytree leaf (a transformed design forgets it).
    """

    def __init__(self, X, indptr=None):
        self.X = X
        self.indptr = indptr
        self.shape = tuple(int(s) for s in X.shape)
        self.known_max_row_norm = None

    def tree_flatten(self):
        return (self.X, self.indptr), self.shape

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.X, obj.indptr = children
        obj.shape = aux
        obj.known_max_row_norm = None
        return obj

    @property
    def sparse(self) -> bool:
        """True for the BCOO layout."""
        return isinstance(self.X, jsparse.BCOO)

    @property
    def dtype(self):
        return self.X.dtype

    def __matmul__(self, w):
        """``X @ w`` for ``w [d]`` or ``[d, T]`` (its transpose is :meth:`rmatvec`)."""
        if self.sparse:
            return _sparse_matmul(self.X.data, self.X.indices, w, self.shape[0])
        if isinstance(self.X, ShiftedRows):
            return self.X @ w
        return _dense_matmul(self.X, w)

    def rmatvec(self, g):
        """``X.T @ g`` for ``g [n]`` (or ``[n, T]``): ``[d]`` (``[d, T]``)."""
        if self.sparse:
            return _sparse_rmatmul(self.X.data, self.X.indices, g, self.shape[1])
        if isinstance(self.X, ShiftedRows):
            return self.X.rmatmul(g)
        return _dense_rmatmul(self.X, g)

    def row_sq_norms(self):
        """``[n]`` squared row norms ``||x_i||^2``."""
        if self.sparse:
            return jax.ops.segment_sum(self.X.data * self.X.data, self.X.indices[:, 0],
                                       num_segments=self.shape[0])
        X = self.X.materialize() if isinstance(self.X, ShiftedRows) else self.X
        return jnp.sum(X * X, axis=1)

    def materialized(self):
        """This design with plain array storage (a copy if ``X`` is :class:`ShiftedRows`).

        For code that needs ``X`` as one ``[n, d]`` array (e.g. the per-sample
        hinge block's native kernel).
        """
        if isinstance(self.X, ShiftedRows):
            return Design(self.X.materialize())
        return self

    def padded(self, n_rows, n_cols):
        """This design padded with zero rows and zero columns to ``[n_rows, n_cols]``.

        Dense data is copied into the larger array (:func:`fit_buckets` does not
        pad large dense designs, which are used in place). Sparse data keeps its stored
        entries (only the shape and the CSR row offsets grow; on a CPU backend the
        entries are padded to a bucket too, see :func:`_pad_sparse_host`), except a small
        padded design (at most 2^16 entries, 256 KB in float32), which is
        densified: the same values, faster kernels at that size, and the same
        compiled program as dense input. On a CPU backend the padding is done by
        NumPy on the host (no XLA program per input shape: fits of nearby sizes
        compile nothing).
        """
        data = self
        n, d = data.shape
        host = jax.default_backend() == "cpu" and not any(
            isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(data))
        if data.sparse and n_rows * n_cols <= _PAD_SMALL_ENTRIES:
            if host:
                out = np.zeros((n_rows, n_cols), np.dtype(data.dtype))
                idx = np.asarray(data.X.indices)
                np.add.at(out, (idx[:, 0], idx[:, 1]), np.asarray(data.X.data))
                return Design(device_dense(out, out.dtype))
            data = Design(data.X.todense())
        if data.sparse and host:
            return _pad_sparse_host(data, n_rows, n_cols)
        if (n, d) == (n_rows, n_cols):
            return data
        data = data.materialized()
        if data.sparse:
            X = jsparse.BCOO((data.X.data, data.X.indices), shape=(n_rows, n_cols),
                             indices_sorted=data.X.indices_sorted,
                             unique_indices=data.X.unique_indices)
            indptr = jnp.concatenate(
                [data.indptr, jnp.broadcast_to(data.indptr[-1:], (n_rows - n,))])
            return Design(X, indptr)
        if host:
            out = aligned_empty((n_rows, n_cols), np.dtype(data.dtype))
            out[:n, :d] = np.asarray(data.X)
            out[:n, d:] = 0
            out[n:] = 0
            return Design(device_dense(out, out.dtype))
        return Design(jnp.pad(data.X, ((0, n_rows - n), (0, n_cols - d))))

    def max_row_norm(self):
        """``R = max_i ||x_i||`` (float) on the host, without overflow
        (:func:`max_row_norm`); the recorded value when there is one."""
        if self.known_max_row_norm is not None:
            return self.known_max_row_norm
        if self.sparse:
            vals = np.asarray(self.X.data)
            rows = np.asarray(self.X.indices[:, 0])
            return _sparse_row_norm(vals, rows, self.shape[0])
        return max_row_norm(np.asarray(self.X))  # a view of the device buffer on a CPU backend

    def remember_row_norm(self, R):
        """Record ``R = max_row_norm(X)`` of the data this design was made from; returns self."""
        self.known_max_row_norm = float(R)
        return self

    def __repr__(self):
        kind = "sparse" if self.sparse else "dense"
        return f"Design({kind}, shape={self.shape}, dtype={self.dtype})"


def design(X, *, dtype=np.float32, in_place=False) -> Design:
    """Wrap validated features as a :class:`Design` (no validation here).

    Dense input is placed on the device with at most one copy
    (:func:`device_dense`): a NumPy array (or ``np.memmap``, e.g.
    ``np.load(path, mmap_mode="r")``) that is already ``dtype``,
    C-contiguous and 64-byte aligned is used as is on a CPU backend (the
    :class:`Design` shares its memory); any other is converted into one new
    ``dtype`` array in chunks of rows, without a full-size temporary. With
    ``in_place=True``, a large (more than :data:`IN_PLACE_MIN_ENTRIES`
    entries) C-contiguous ``dtype`` array that is not 64-byte aligned (NumPy
    aligns to 16 bytes) is used in place too, as :class:`ShiftedRows`.

    Args:
        X: ``[n, d]`` numeric NumPy/JAX array, ``scipy.sparse`` matrix (kept
            sparse: about 12 bytes per stored entry), a BCOO matrix or a
            :class:`Design` (returned as is).
        dtype: float dtype of the values (float32 by default).
        in_place: allow the :class:`ShiftedRows` layout (for designs used
            only through ``@``, :meth:`Design.rmatvec` and the feature maps
            of this module, as the estimators' fits do).

    Returns:
        :class:`Design`.
    """
    if isinstance(X, Design):
        return X
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=dtype)
        X.sum_duplicates()
        X.sort_indices()
        # Built on the host (BCOO.from_scipy_sparse runs a dozen eager JAX
        # programs, each compiled once per process and per number of entries).
        rows = np.repeat(np.arange(X.shape[0], dtype=np.int32), np.diff(X.indptr))
        idx = np.stack([rows, X.indices.astype(np.int32, copy=False)], axis=1)
        B = jsparse.BCOO((jax.device_put(X.data), jax.device_put(idx)), shape=X.shape,
                         indices_sorted=True, unique_indices=True)
        return Design(B, jax.device_put(X.indptr.astype(np.int32)))
    if isinstance(X, jsparse.BCOO):
        Xs = sp.csr_matrix(
            (np.asarray(X.data), (np.asarray(X.indices[:, 0]), np.asarray(X.indices[:, 1]))),
            shape=X.shape, dtype=dtype)
        return design(Xs, dtype=dtype)
    if in_place:
        shifted = ShiftedRows.of(X, dtype)
        if shifted is not None:
            return Design(shifted)
    return Design(device_dense(X, dtype))

# Shape buckets of ``fit`` (see :func:`bucket_size`): every jitted fit is one
# XLA program per static shape (seconds to compile, far more than a small
# fit), so fits of nearby sizes are padded to a shared shape. Small problems
# all share one bucket: at least this many rows (padding rows take no part:
# ``where=False``), columns (zero features get zero weight) and tasks (empty
# problems stop at once).
PAD_MIN_ROWS = 256


PAD_MIN_COLS = 32


PAD_MIN_TASKS = 8


PAD_MIN_ENTRIES = 1024  # stored entries of a sparse design (see Design.padded)


_PAD_SMALL_ENTRIES = 2**16  # the column minimum applies to designs up to this size


# Dense designs above this many entries are not padded (see fit_buckets); the
# same size from which fit uses float32 input in place (features.ShiftedRows).
PAD_MAX_DENSE_ENTRIES = IN_PLACE_MIN_ENTRIES


def bucket_size(k, minimum=1):
    """The static size a dimension of size ``k`` is padded to by ``fit``.

    ``minimum`` for ``k <= minimum``; above it, ``k`` rounded up to a multiple
    of 1/8 of its power of two (at most 12.5 % padding), so that fits of
    nearby sizes (cross-validation folds, the shapes of scikit-learn's
    checks, batches of tasks) share one compiled program.

    Args:
        k: int ``>= 0``.
        minimum: int ``>= 1``, the smallest bucket.

    Returns:
        int ``>= max(k, minimum)``.
    """
    k, minimum = int(k), int(minimum)
    if k <= minimum:
        return minimum
    step = 1 << max((k - 1).bit_length() - 4, 0)
    return -(-k // step) * step


def _pad_sparse_host(data, n_rows, n_cols):
    """Sparse :meth:`Design.padded` on the host, stored entries padded to a bucket too.

    The number of stored entries is a static shape of every program that
    reads the design: it is padded to :func:`bucket_size` (minimum
    :data:`PAD_MIN_ENTRIES`) with zero values in the last row, so that data
    sets of nearby sizes share programs. The CSR offsets end at the real
    entries (the per-sample hinge block never reads the padding; the
    products add zeros).
    """
    n = data.shape[0]
    vals = np.asarray(data.X.data)
    idx = np.asarray(data.X.indices)
    nnz = vals.shape[0]
    nnz_pad = bucket_size(nnz, PAD_MIN_ENTRIES)
    if nnz_pad > nnz:
        vals = np.concatenate([vals, np.zeros(nnz_pad - nnz, vals.dtype)])
        fill = np.broadcast_to(np.array([[n_rows - 1, 0]], idx.dtype), (nnz_pad - nnz, 2))
        idx = np.concatenate([idx, fill])
    ip = np.asarray(data.indptr)
    indptr = np.concatenate([ip, np.full(n_rows - n, ip[-1], ip.dtype)])
    X = jsparse.BCOO((jax.device_put(vals), jax.device_put(np.ascontiguousarray(idx))),
                     shape=(n_rows, n_cols),
                     indices_sorted=True, unique_indices=nnz_pad == nnz)
    return Design(X, jax.device_put(indptr))


def fit_buckets(n, d, T, *, dense=True):
    """Padded ``(rows, columns, tasks)`` of a fit on ``[n, d]`` data with ``T`` tasks.

    Rows: :func:`bucket_size` with minimum :data:`PAD_MIN_ROWS`. Columns:
    minimum :data:`PAD_MIN_COLS` for small designs (at most 2^16 padded
    entries; large dense designs are not widened more than 12.5 %). Tasks:
    1 for a single task, else minimum :data:`PAD_MIN_TASKS`.

    A ``dense`` design of more than :data:`PAD_MAX_DENSE_ENTRIES` entries
    (256 MB in float32) keeps its shape: padding it would copy the data
    (twice its memory at the peak), and compiling its own program (seconds)
    is small next to its fit. Sparse designs are padded without copying
    their entries (:meth:`Design.padded`).
    """
    T_pad = 1 if T == 1 else bucket_size(T, PAD_MIN_TASKS)
    if dense and n * d > PAD_MAX_DENSE_ENTRIES:
        return n, d, T_pad
    n_pad = bucket_size(n, PAD_MIN_ROWS)
    small = n_pad * PAD_MIN_COLS <= _PAD_SMALL_ENTRIES
    d_pad = bucket_size(d, PAD_MIN_COLS if small else 1)
    return n_pad, d_pad, T_pad


_CHUNK_ENTRIES = 1 << 22  # entries per chunk of the host-side row norms (32 MB in float64)


# Squared row norms summed in float32 are trusted in this range (max_row_norm).
_SQ_EXACT = (2.0**-90, 1e35)


def max_row_norm(X):
    """``R = max_i ||x_i||`` of a feature matrix, on the host, without overflow.

    Args:
        X: ``[n, d]`` NumPy array (or ``np.memmap``), ``scipy.sparse`` matrix
            or :class:`jaxrank.models.Design` (dense or sparse).

    Returns:
        float; 0 for an empty or all-zero ``X``. Dense float32/float64 data is
        read once in chunks of rows (no temporary larger than a chunk, 32 MB)
        and the squared norms are summed in the data's own precision
        (relative error about ``d`` float32 roundings); where that sum could
        overflow or lose precision (squared norms above ``1e35`` or below
        ``2^-90``), ``R`` is recomputed on ``X / max|x_ij|`` in float64. The
        value of a :class:`Design` made by ``fit`` is remembered
        (:meth:`Design.remember_row_norm`), so the data is read once.
    """
    import scipy.sparse as sp

    if isinstance(X, Design):
        return X.max_row_norm()
    if sp.issparse(X):
        if X.format == "csr":
            return _sparse_row_norm(np.asarray(X.data), indptr=np.asarray(X.indptr))
        X = X.tocoo()
        return _sparse_row_norm(np.asarray(X.data), np.asarray(X.row), X.shape[0])
    X = np.asarray(X)
    if X.size == 0:
        return 0.0
    step = max(1, _CHUNK_ENTRIES // max(X.shape[1], 1))
    q = 0.0
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for i in range(0, X.shape[0], step):
            c = X[i : i + step]
            if c.dtype not in (np.float32, np.float64):
                c = c.astype(np.float64)
            q = max(q, float(np.max(np.einsum("ij,ij->i", c, c))))
    if _SQ_EXACT[0] <= q <= _SQ_EXACT[1]:
        return math.sqrt(q)
    return _scaled_row_norm(X, step)


def _scaled_row_norm(X, step):
    """:func:`max_row_norm` of dense ``X`` computed on ``X / max|x_ij|`` in float64."""
    m = 0.0
    for i in range(0, X.shape[0], step):
        c = X[i : i + step]
        m = max(m, float(np.max(c)), -float(np.min(c)))
    if not m > 0:
        return 0.0
    q = 0.0
    for i in range(0, X.shape[0], step):
        c = X[i : i + step].astype(np.float64)
        c /= m
        q = max(q, float(np.max(np.einsum("ij,ij->i", c, c))))
    return m * math.sqrt(q)


def _sparse_row_norm(vals, rows=None, n=0, *, indptr=None):
    """``max_i ||x_i||`` of stored entries ``vals`` with row ids ``rows`` (``n`` rows), or
    of CSR rows (``indptr``: segment sums, no row ids); float64 on ``vals / max|vals|``."""
    if vals.size == 0:
        return 0.0
    m = float(np.max(np.abs(vals)))
    if not m > 0:
        return 0.0
    v = vals.astype(np.float64) / m
    if indptr is None:
        sq = np.bincount(rows, weights=v * v, minlength=n)
    else:
        starts = indptr[:-1][indptr[:-1] < indptr[1:]]  # non-empty rows: contiguous entries
        sq = np.add.reduceat(v * v, starts)
    return m * math.sqrt(float(np.max(sq)))


def query_layout(groups, n_items=None):
    """Padded ``[Q, L]`` item-index table of the queries (host side).

    Args:
        groups: ``[n]`` integer query ids.
        n_items: the padding index (default ``n``).

    Returns:
        ``(layout [Q, L] int32, query_ids [Q])``, queries in sorted id order,
        items of a query in input order.
    """
    groups = np.asarray(groups)
    n = groups.shape[0] if n_items is None else n_items
    ids, inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
    L = int(counts.max())
    order = np.argsort(inv, kind="stable")
    start = np.r_[0, np.cumsum(counts)[:-1]]
    col = np.arange(order.shape[0]) - start[inv[order]]
    layout = np.full((ids.shape[0], L), n, np.int32)
    layout[inv[order], col] = order
    return layout, ids
