"""Host buffers and matrix-product kernels of a design matrix.

Aligned host buffers that a CPU backend uses without a copy, dense float32
rows used in place (:class:`ShiftedRows`), and the dense, sparse and shifted
products ``X @ w`` / ``X.T @ g`` with their custom VJPs (the data of
:class:`jaxrank._src.layout.Design`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

# XLA's CPU client uses a host buffer in place (no copy) when it is aligned to
# this many bytes (xla::cpu::MinAlign()); NumPy's own allocations are only
# 16-byte aligned.
_DEVICE_ALIGN = 64


_CHUNK_BYTES = 1 << 24  # rows per chunk of a host-side conversion: about 16 MB


def aligned_empty(shape, dtype=np.float32):
    """An uninitialised C-contiguous NumPy array whose buffer is 64-byte aligned.

    Such an array of the fit's dtype is used by :func:`design` without a
    copy on a CPU backend (fill it in place, e.g. ``rng.standard_normal(out=X)``).

    Args:
        shape: tuple of ints.
        dtype: NumPy dtype.

    Returns:
        ``np.ndarray`` of ``shape`` and ``dtype`` (a view of a slightly larger
        uint8 buffer, which it keeps alive).
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + _DEVICE_ALIGN, np.uint8)
    start = (-raw.ctypes.data) % _DEVICE_ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def shares_host_buffer(X, dtype=np.float32) -> bool:
    """True if :func:`design` uses the NumPy array ``X`` in place (no copy).

    That is the case on a CPU backend for a C-contiguous ``dtype`` array
    whose buffer is 64-byte aligned: an :func:`aligned_empty` array, or a
    ``.npy`` file opened with ``np.load(path, mmap_mode="r")`` (NumPy pads
    the header so the data starts 64-byte aligned).
    """
    return (isinstance(X, np.ndarray) and X.dtype == np.dtype(dtype)
            and X.flags.c_contiguous and X.ctypes.data % _DEVICE_ALIGN == 0
            and jax.default_backend() == "cpu")


def device_dense(X, dtype=np.float32):
    """A dense ``[n, d]`` array as a ``dtype`` ``jax.Array``, with at most one copy.

    * NumPy input for which :func:`shares_host_buffer` holds is put on the
      device without a copy (the result aliases ``X``: do not write to ``X``
      while it is in use).
    * Other NumPy input (another dtype, not C-contiguous, not 64-byte
      aligned, a read-only memmap of a ``.npy`` file with the wrong dtype) is
      converted in chunks of about 16 MB into one new aligned array, which is
      then used in place: one copy, no full-size temporary (``jnp.asarray``
      of an unaligned array makes two).
    * ``jax.Array`` input is cast only if its dtype differs.
    """
    if isinstance(X, jax.Array):
        return X if X.dtype == dtype else X.astype(dtype)
    X = np.asarray(X)
    if not shares_host_buffer(X, dtype):
        out = aligned_empty(X.shape, dtype)
        if X.ndim == 0 or X.shape[0] == 0:
            out[...] = X
        else:
            step = max(1, _CHUNK_BYTES // max(1, out[0].nbytes, X[0].nbytes))
            for i in range(0, X.shape[0], step):
                out[i:i + step] = X[i:i + step]
        X = out
    return jax.device_put(X)


# Dense designs of at least this many entries (256 MB in float32) may be used
# in place as ShiftedRows (design(in_place=True)); fit does not pad them.
IN_PLACE_MIN_ENTRIES = 2**26


@jax.tree_util.register_pytree_node_class
class ShiftedRows:
    r"""A dense ``[n, d]`` array used in place although its buffer is not 64-byte aligned.

    XLA's CPU client uses a host buffer without a copy only if it is 64-byte
    aligned; NumPy aligns its arrays to 16 bytes. For a C-contiguous array
    whose buffer starts ``o`` entries before a 64-byte boundary (``0 < o <
    d``), ``body [n - 1, d]`` is the aligned part of the buffer read as rows,
    ``body[i] = (x_i[o:], x_{i+1}[:o])`` (no copy), and the ``o`` entries
    before it (``head = x_0[:o]``) and the ``d - o`` after it (``tail =
    x_{n-1}[o:]``) are small copies. Products recombine the shifted rows in
    one pass over ``body``::

        U = body @ [[w[o:], 0], [0, w[:o]]]               # [n - 1, 2]
        X w = [U[:, 0], tail . w[o:]] + [head . w[:o], U[:, 1]]

    and ``X^T c`` likewise from ``body^T [c[:-1], c[1:]]`` (blocked, as
    for plain dense designs).

    Attributes:
        body: ``[n - 1, d]`` ``jax.Array`` (aliases the NumPy buffer).
        head: ``[o]`` and ``tail``: ``[d - o]`` ``jax.Array``.
        shape: static ``(n, d)``.
    """

    def __init__(self, body, head, tail, shape):
        self.body, self.head, self.tail = body, head, tail
        self.shape = tuple(int(v) for v in shape)

    def tree_flatten(self):
        return (self.body, self.head, self.tail), self.shape

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, aux)

    @classmethod
    def of(cls, X, dtype=np.float32):
        """The in-place layout of NumPy ``X``, or ``None`` where it does not apply.

        It applies on a CPU backend to a C-contiguous ``dtype`` array of at
        least :data:`IN_PLACE_MIN_ENTRIES` entries and ``n >= 2`` rows that
        is not 64-byte aligned but whose misalignment is a whole number ``o <
        d`` of entries.
        """
        if not isinstance(X, np.ndarray) or X.ndim != 2 or jax.default_backend() != "cpu":
            return None
        n, d = X.shape
        dtype = np.dtype(dtype)
        if (X.dtype != dtype or not X.flags.c_contiguous or n < 2 or X.size < IN_PLACE_MIN_ENTRIES):
            return None
        gap = (-X.ctypes.data) % _DEVICE_ALIGN
        if gap == 0 or gap % dtype.itemsize:
            return None
        o = gap // dtype.itemsize
        if o >= d:
            return None
        flat = X.reshape(-1)
        body = flat[o:o + (n - 1) * d].reshape(n - 1, d)  # 64-byte aligned: no copy
        return cls(jax.device_put(body), jax.device_put(flat[:o].copy()),
                   jax.device_put(flat[o + (n - 1) * d:].copy()), (n, d))

    @property
    def offset(self) -> int:
        return int(self.head.shape[0])

    @property
    def dtype(self):
        return self.body.dtype

    @property
    def ndim(self):
        return 2

    def materialize(self):
        """The ``[n, d]`` array (a copy; on the host when the parts are concrete)."""
        n, d = self.shape
        o = self.offset
        parts = (self.body, self.head, self.tail)
        if not any(isinstance(p, jax.core.Tracer) for p in parts):
            out = aligned_empty(self.shape, self.dtype)
            flat = out.reshape(-1)
            flat[:o] = np.asarray(self.head)
            flat[o:o + (n - 1) * d] = np.asarray(self.body).reshape(-1)
            flat[o + (n - 1) * d:] = np.asarray(self.tail)
            return device_dense(out, self.dtype)
        # Under a trace: rows from the shifted rows (a 2-D concatenation; XLA's
        # CPU concatenation of one long 1-D array is far slower;
        # docs/design_notes.md).
        body, head, tail = parts
        first = jnp.concatenate([head, body[0, : d - o]])[None]
        mid = jnp.concatenate([body[:-1, d - o:], body[1:, : d - o]], axis=1)
        last = jnp.concatenate([body[-1, d - o:], tail])[None]
        return jnp.concatenate([first, mid, last], axis=0)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.materialize(), dtype=dtype)

    def __matmul__(self, w):
        return _shifted_matmul(self.body, self.head, self.tail, w)

    def rmatmul(self, g):
        """``X.T @ g``."""
        return _shifted_rmatmul(self.body, self.head, self.tail, g)

    def __repr__(self):
        return f"ShiftedRows(shape={self.shape}, offset={self.offset}, dtype={self.dtype})"


def _split_w(w, o):
    """``[[w[o:], 0], [0, w[:o]]]``: ``[d, 2 T]`` for ``w [d]`` or ``[d, T]``."""
    W = w.reshape(w.shape[0], -1)
    top = jnp.concatenate([W[o:], jnp.zeros_like(W[o:])], axis=1)
    low = jnp.concatenate([jnp.zeros_like(W[:o]), W[:o]], axis=1)
    return jnp.concatenate([top, low], axis=0)


def _shifted_forward(body, head, tail, w):
    o = head.shape[0]
    W = w.reshape(w.shape[0], -1)  # [d, T]
    T = W.shape[1]
    U = body @ _split_w(w, o)  # [n - 1, 2 T]
    first = jnp.concatenate([U[:, :T], (tail @ W[o:])[None]], axis=0)
    second = jnp.concatenate([(head @ W[:o])[None], U[:, T:]], axis=0)
    return (first + second).reshape((body.shape[0] + 1,) + w.shape[1:])


def _shifted_rmatmul(body, head, tail, g):
    o = head.shape[0]
    n1, d = body.shape
    Gt = g.reshape(n1 + 1, -1).T  # [T, n]
    T = Gt.shape[0]
    P = _blocked_rmatmul(body, jnp.concatenate([Gt[:, :-1], Gt[:, 1:]], axis=0))  # [2T, d]
    low = P[T:, d - o:] + Gt[:, :1] * head[None, :]  # entries 0..o-1
    top = P[:T, : d - o] + Gt[:, -1:] * tail[None, :]  # entries o..d-1
    return jnp.concatenate([low, top], axis=1).T.reshape((d,) + g.shape[1:])


@jax.custom_vjp
def _shifted_matmul(body, head, tail, w):
    return _shifted_forward(body, head, tail, w)


def _shifted_matmul_fwd(body, head, tail, w):
    return _shifted_forward(body, head, tail, w), (body, head, tail, w)


def _shifted_matmul_bwd(res, g):
    body, head, tail, w = res
    o = head.shape[0]
    W = w.reshape(w.shape[0], -1)
    G = g.reshape(body.shape[0] + 1, -1)
    # Cotangents of the stored parts (unused by the solver: removed under jit).
    C2 = jnp.concatenate([G[:-1], G[1:]], axis=1)
    g_body = C2 @ _split_w(w, o).T
    g_head = W[:o] @ G[0]
    g_tail = W[o:] @ G[-1]
    return g_body, g_head, g_tail, _shifted_rmatmul(body, head, tail, g).astype(w.dtype)


_shifted_matmul.defvjp(_shifted_matmul_fwd, _shifted_matmul_bwd)


_MAX_BLOCK = 1024  # rows per block of the blocked X.T @ g


_MIN_BLOCK = 32


_SPLIT_MAX_ENTRIES = 2**24  # X without a block divisor: split into blocks + rest up to this


def _row_block(n):
    """Largest divisor of ``n`` in ``[_MIN_BLOCK, _MAX_BLOCK]`` (0: none)."""
    for b in range(min(_MAX_BLOCK, n), _MIN_BLOCK - 1, -1):
        if n % b == 0:
            return b
    return 0


def _blocked_rmatmul(X, Gt):
    """``(X.T @ Gt.T).T`` for ``X [n, d]``, ``Gt [T, n]``: ``[T, d]``, by row blocks.

    Each block of ``b`` rows is reduced by one small dot, then the ``n / b``
    partial sums are added: memory-bound like ``X @ w`` and a two-level
    summation (relative error about 1e-7 at 10^7 rows). ``n`` without a
    divisor in ``[32, 1024]`` takes the blocks of the first ``b * (n // b)``
    rows (``b = 1024``, or 32 below 1024 rows) and one fused
    multiply-and-reduce of the remaining ``< b`` rows, when ``X`` has at
    most ``2^24`` entries (so a slice that XLA may copy stays small); larger
    ones use one fused multiply-and-reduce over all rows. The blocks exist
    because that single fused reduction is slow for small ``X`` inside the
    solver's loop (XLA's CPU backend repacks ``X`` on every call;
    measurements in ``bench/results/latent.notes.md``). The task axis comes
    first (a ``[k, b, T]`` operand made XLA's batched dot slower).
    """
    n, d = X.shape
    b = _row_block(n)
    if b == 0:
        if n * d > _SPLIT_MAX_ENTRIES:
            return jnp.sum(X[None, :, :] * Gt[:, :, None], axis=1)
        b = _MAX_BLOCK if n >= _MAX_BLOCK else _MIN_BLOCK
        m = b * (n // b)
        tail = jnp.sum(X[None, m:, :] * Gt[:, m:, None], axis=1)
        if m == 0:
            return tail
        return _blocked_rmatmul(X[:m], Gt[:, :m]) + tail
    k = n // b
    part = jnp.einsum("kbd,tkb->tkd", X.reshape(k, b, d), Gt.reshape(-1, k, b))
    return jnp.sum(part, axis=1)


def _dense_rmatmul(X, g):
    """``X.T @ g`` for ``X [n, d]``, ``g [n]`` or ``[n, T]`` (see :func:`_blocked_rmatmul`)."""
    n, d = X.shape
    out = _blocked_rmatmul(X, g.reshape(n, -1).T)
    return out.T.reshape((d,) + g.shape[1:])


@jax.custom_vjp
def _dense_matmul(X, w):
    return X @ w


def _dense_matmul_fwd(X, w):
    return X @ w, (X, w)


def _dense_matmul_bwd(res, g):
    X, w = res
    gX = g[:, None] * w[None, :] if w.ndim == 1 else g @ w.T  # unused by the solver: DCE
    return gX, _dense_rmatmul(X, g).astype(w.dtype)


_dense_matmul.defvjp(_dense_matmul_fwd, _dense_matmul_bwd)


def _sparse_rmatmul(data, indices, g, d):
    """``X.T @ g`` of BCOO entries (``data [nnz]``, ``indices [nnz, 2]``)."""
    v = data.reshape((-1,) + (1,) * (g.ndim - 1)) * g[indices[:, 0]]
    return jax.ops.segment_sum(v, indices[:, 1], num_segments=d)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _sparse_matmul(data, indices, w, n):
    v = data.reshape((-1,) + (1,) * (w.ndim - 1)) * w[indices[:, 1]]
    # BCOO entries of a Design are sorted by row (design() sorts them).
    return jax.ops.segment_sum(v, indices[:, 0], num_segments=n, indices_are_sorted=True)


def _sparse_matmul_fwd(data, indices, w, n):
    return _sparse_matmul(data, indices, w, n), (data, indices, w)


def _sparse_matmul_bwd(n, res, g):
    data, indices, w = res
    gw = _sparse_rmatmul(data, indices, g, w.shape[0]).astype(w.dtype)
    gi = np.zeros(indices.shape, jax.dtypes.float0)
    if w.ndim == 1:
        gdata = g[indices[:, 0]] * w[indices[:, 1]]
    else:
        gdata = jnp.sum(g[indices[:, 0]] * w[indices[:, 1]], axis=-1)
    return gdata.astype(data.dtype), gi, gw


_sparse_matmul.defvjp(_sparse_matmul_fwd, _sparse_matmul_bwd)
