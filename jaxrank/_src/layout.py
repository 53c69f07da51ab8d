"""The layout of a design matrix: shape buckets and padding, row norms (host side)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src.features import (
    IN_PLACE_MIN_ENTRIES,
    Design,
    aligned_empty,
    device_dense,
)

# Shape buckets of ``fit`` (see :func:`bucket_size`): every jitted fit is one
# XLA program per static shape (seconds to compile, far more than a small
# fit), so fits of nearby sizes are padded to a shared shape. Small problems
# all share one bucket: at least this many rows (padding rows take no part:
# ``where=False``), columns (zero features get zero weight) and tasks (empty
# problems stop at once).
PAD_MIN_ROWS = 256


PAD_MIN_COLS = 32


PAD_MIN_TASKS = 8


PAD_MIN_ENTRIES = 1024  # stored entries of a sparse design (see pad_design)


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


def pad_design(data, n_rows, n_cols):
    """A :class:`Design` padded with zero rows and zero columns to ``[n_rows, n_cols]``.

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
        from jax.experimental import sparse as jsparse

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


def _pad_sparse_host(data, n_rows, n_cols):
    """Sparse :func:`pad_design` on the host, stored entries padded to a bucket too.

    The number of stored entries is a static shape of every program that
    reads the design: it is padded to :func:`bucket_size` (minimum
    :data:`PAD_MIN_ENTRIES`) with zero values in the last row, so that data
    sets of nearby sizes share programs. The CSR offsets end at the real
    entries (the per-sample hinge block never reads the padding; the
    products add zeros).
    """
    from jax.experimental import sparse as jsparse

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
    their entries (:func:`pad_design`).
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
        (:func:`remember_row_norm`), so the data is read once.
    """
    import scipy.sparse as sp

    if isinstance(X, Design):
        known = X.known_max_row_norm
        if known is not None:
            return known
        if X.sparse:
            vals = np.asarray(X.X.data)
            rows = np.asarray(X.X.indices[:, 0])
            return _sparse_row_norm(vals, rows, X.shape[0])
        X = np.asarray(X.X)  # a view of the device buffer on a CPU backend
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


def remember_row_norm(data, R):
    """Record ``R = max_row_norm(X)`` on the :class:`Design` ``data`` made from ``X``."""
    data.known_max_row_norm = float(R)
    return data


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
