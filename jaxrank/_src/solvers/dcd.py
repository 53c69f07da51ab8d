r"""Dual coordinate descent (DCD) epochs for sums of per-sample hinges.

The ``n``-slack dual of ``sum_i u_i max(0, 1 - y_i z_i^T w)`` added to
``1/2 ||w||^2`` (plus parts of ``w`` held fixed, e.g. the planes of a 1-slack
structural SVM) is solved by coordinate descent on the box-constrained dual
(Hsieh, Chang, Lin, Keerthi and Sundararajan, ICML 2008, Algorithm 1; the
solver of liblinear ``-s 3``)::

    max_alpha  sum_i alpha_i - 1/2 ||w||^2,   0 <= alpha_i <= u_i,
    w = w_other + sum_i alpha_i y_i z_i.

One coordinate step at sample ``i`` (:func:`dcd_epoch` runs them in a given
order)::

    G = y_i z_i^T w - 1
    alpha_i' = clip(alpha_i - G / Q_ii, 0, u_i),   Q_ii = ||z_i||^2
    w += (alpha_i' - alpha_i) y_i z_i

so ``w_out - w_in = sum_i (alpha_out_i - alpha_in_i) y_i z_i`` holds for any
``w_in`` (the kernel never needs ``w_other``).

**Two implementations, same iterates.** On CPU the passes run as native code
(``dcd.c``, built into ``jaxrank/_src/native/_kernels*.so`` by ``setup.py``), called as
an XLA FFI custom call (``jax.ffi.ffi_call``): XLA hands the kernel its own
buffers, so the rows are never copied, and a call inside a jitted loop has
a small fixed cost. (A ``jax.pure_callback`` copies every operand on every
call, which dominates for large matrices; see ``bench/results/dcd.md``.) On
other platforms, and on CPU when the library is missing (a warning says why,
once), the same algorithm runs as XLA ``lax`` loops: the same iterates up to
rounding, several times slower per coordinate on CPU (figures:
``docs/design_notes.md``). The C kernel accumulates each
``z_i^T w`` in float64 and holds ``w`` and ``alpha`` in float64 within a call
(rounded to float32 once at its end, ``w`` taking the rounding of each
``alpha_i``); the XLA loops keep them in float32, where at large ``u_i``
``w`` drifts from ``sum_i alpha_i y_i z_i`` and steps below the resolution of
``alpha_i`` are lost (``docs/solver.md``). The choice is made by
``lax.platform_dependent``.

**Solver loop.** :func:`dcd_epoch` with ``active`` runs liblinear's outer loop
(reshuffle every pass, shrinking, reactivation) for at most ``n_epochs``
passes or ``max_visits`` coordinate visits; the caller draws a fresh
``order`` per call (:func:`random_order`) and checks the duality gap between
calls, ``(P - D) / P`` with ``P = 1/2 ||w||^2 + sum_i u_i max(0, 1 - y_i
z_i^T w)`` (:func:`row_dots`) and ``D = sum_i alpha_i - 1/2 ||w||^2``,
lowering ``pg_tol`` 10x when a call ``converged`` but the gap did not.
``bench/dcd.py`` is this loop as one jitted ``lax.while_loop`` and compares
it with liblinear and with plain passes without shrinking (results:
``bench/results/dcd.md``, ``docs/design_notes.md``).

**Composition.** All functions are pure and compose with ``jit``,
``lax.while_loop``, ``vmap`` (batched ``w``/``alpha``/``labels``/``upper``/
``order``, shared or batched rows; the whole batch goes to one native call)
and ``shard_map`` (one problem per device with the default ``check_vma``;
``vmap`` inside ``shard_map`` needs ``check_vma=False``, because the XLA
branch that ``platform_dependent`` also traces trips a JAX varying-axes
check). Pass large rows to ``jit`` as arguments: a closed-over array becomes
a constant of the program and is copied.

Example (BinarySVM's objective ``1/2 ||[w, b]||^2 + C sum_i max(0, 1 - y_i
(w^T x_i + b))``, the intercept as a constant feature)::

    >>> import numpy as np, jax, jax.numpy as jnp
    >>> from jaxrank._src.solvers.dcd import hinge_rows, sq_norms, dcd_epoch, random_order, row_dots
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)).astype(np.float32)
    >>> y = np.where(X[:, 0] + 0.3 * rng.standard_normal(200) > 0, 1., -1.).astype(np.float32)
    >>> rows = hinge_rows(X, bias=1.0)
    >>> q, u = sq_norms(rows), jnp.full(200, 1.0, jnp.float32)   # C = 1
    >>> w, alpha = jnp.zeros(6, jnp.float32), jnp.zeros(200, jnp.float32)
    >>> for t in range(50):
    ...     order = random_order(jax.random.key(t), 200)
    ...     w, alpha = dcd_epoch(w, alpha, rows, y, u, order, sq_norms=q)
    >>> primal = 0.5 * w @ w + jnp.sum(u * jnp.maximum(0, 1 - y * row_dots(rows, w)))
    >>> dual = jnp.sum(alpha) - 0.5 * w @ w
    >>> bool((primal - dual) / primal < 1e-3)
    True
"""

from __future__ import annotations

import functools
import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src import native
from jaxrank._src.solvers.dcd_xla import (
    _F32,
    _I32,
    _xla_dots,
    _xla_epoch,
    _xla_order,
    _xla_sq_norms,
)

__all__ = [
    "ActiveSet",
    "DCDStats",
    "HingeRows",
    "all_active",
    "dcd_epoch",
    "hinge_rows",
    "native_available",
    "random_order",
    "row_dots",
    "sq_norms",
]


class HingeRows(NamedTuple):
    """The rows ``z_i`` of the hinge terms (a pytree; build with :func:`hinge_rows`).

    Exactly one layout is set: dense ``X``, or CSR ``indptr``/``indices``/
    ``values`` (the other fields are ``None``). Row ``i`` is ``z_i = [x_i,
    bias]`` if ``bias != 0`` (an implicit constant last feature: the weight of
    column ``n_cols`` of ``w``), else ``x_i``.

    Attributes:
        X: ``[m, d]`` float32 dense rows, or ``None``.
        indptr: ``[m + 1]`` int32 CSR row pointers, or ``None``.
        indices: ``[nnz]`` int32 CSR column indices in ``[0, n_cols)``, or ``None``.
        values: ``[nnz]`` float32 CSR values, or ``None``.
        bias: ``[]`` float32 value of the implicit last feature; 0 = none.
        n_cols: ``[]`` int32 number of stored columns ``d`` (``X.shape[1]`` if dense).
    """

    X: jax.Array | None
    indptr: jax.Array | None
    indices: jax.Array | None
    values: jax.Array | None
    bias: jax.Array
    n_cols: jax.Array

    @property
    def is_sparse(self) -> bool:
        """True for the CSR layout."""
        return self.X is None

    @property
    def n_rows(self) -> int:
        """Number of rows ``m`` (static)."""
        return self.X.shape[-2] if self.X is not None else self.indptr.shape[-1] - 1


def hinge_rows(X, *, bias: float = 0.0) -> HingeRows:
    """Rows for :func:`dcd_epoch` from a dense array, a scipy.sparse matrix or a BCOO.

    Args:
        X: ``[m, d]`` real matrix: a NumPy/JAX array (kept dense), a
            ``scipy.sparse`` matrix (stored as CSR; explicit zeros kept), or a
            2-D ``jax.experimental.sparse.BCOO`` (converted to CSR; works under
            ``jit``; padding entries are dropped). Values are converted to
            float32, indices to int32.
        bias: value of the implicit constant last feature (the intercept
            column; 1.0 for an intercept as a regularised feature, 0 = none).
            May be a traced scalar.

    Returns:
        A :class:`HingeRows`; ``w`` then has ``d + 1`` entries if ``bias != 0``
        (the intercept weight last), else ``d``.

    Raises:
        TypeError: If ``X`` is not a real (bool/int/float) matrix.
        ValueError: If ``X`` is not 2-D, has more than 2**31 - 1 stored
            entries or columns (int32 indices), or ``bias`` is not a scalar.
    """
    bias_arr = jnp.asarray(bias, _F32)
    if jnp.ndim(bias_arr) != 0:
        raise ValueError(f"bias must be a scalar; got shape {jnp.shape(bias_arr)}.")
    try:
        from jax.experimental import sparse as jsparse
    except ImportError:  # pragma: no cover
        jsparse = None
    if jsparse is not None and isinstance(X, jsparse.BCOO):
        return _rows_from_bcoo(X, bias_arr)
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):  # scipy.sparse
        A = X.tocsr()
        if A.ndim != 2:
            raise ValueError(f"X must be 2-D; got {A.ndim}-D.")
        _check_real_dtype(A.dtype)
        d = A.shape[1]
        if A.nnz > np.iinfo(np.int32).max or d > np.iinfo(np.int32).max:
            raise ValueError(
                f"X is too large for int32 indices (nnz {A.nnz}, {d} columns)."
            )
        return HingeRows(
            X=None,
            indptr=jnp.asarray(A.indptr.astype(np.int32)),
            indices=jnp.asarray(A.indices.astype(np.int32)),
            values=jnp.asarray(A.data.astype(np.float32)),
            bias=bias_arr,
            n_cols=jnp.asarray(d, _I32),
        )
    if not hasattr(X, "shape") or not hasattr(X, "dtype"):
        X = np.asarray(X)
    _check_real_dtype(X.dtype)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [m, d]; got shape {tuple(X.shape)}.")
    Xd = jnp.asarray(X, _F32)
    return HingeRows(
        X=Xd,
        indptr=None,
        indices=None,
        values=None,
        bias=bias_arr,
        n_cols=jnp.asarray(Xd.shape[1], _I32),
    )


def _check_real_dtype(dtype):
    dt = np.dtype(dtype)
    if not (
        np.issubdtype(dt, np.floating) or np.issubdtype(dt, np.integer) or dt.kind == "b"
    ):
        raise TypeError(
            f"X must be a real (bool, int or float) matrix; got dtype {dt}."
        )


def _rows_from_bcoo(A, bias_arr) -> HingeRows:
    if A.ndim != 2 or A.n_batch != 0 or A.n_dense != 0:
        raise ValueError(
            "X must be a 2-D BCOO without batch or dense axes; got shape "
            f"{A.shape}, n_batch={A.n_batch}, n_dense={A.n_dense}."
        )
    _check_real_dtype(A.dtype)
    m, d = A.shape
    r, c = A.indices[:, 0].astype(_I32), A.indices[:, 1].astype(_I32)
    valid = (r >= 0) & (r < m) & (c >= 0) & (c < d)
    r = jnp.where(valid, r, m)  # padding sorts last, beyond indptr[m]
    perm = jnp.argsort(r, stable=True)
    counts = jax.ops.segment_sum(jnp.ones_like(r), r, num_segments=m)
    indptr = jnp.concatenate([jnp.zeros(1, _I32), jnp.cumsum(counts, dtype=_I32)])
    return HingeRows(
        X=None,
        indptr=indptr,
        indices=jnp.where(valid, c, 0)[perm],
        values=jnp.where(valid, A.data, 0).astype(_F32)[perm],
        bias=bias_arr,
        n_cols=jnp.asarray(d, _I32),
    )


def sq_norms(rows: HingeRows) -> jax.Array:
    """``[m]`` float32 squared norms ``Q_ii = ||z_i||^2``, including ``bias^2``.

    Args:
        rows: a :class:`HingeRows`.

    Returns:
        ``[m]`` float32 (native path: float64 accumulation; XLA: float32).

    Raises:
        TypeError: If ``rows`` is not a :class:`HingeRows`.
    """
    _check_rows(rows)
    return _dispatch(_native_sq_norms, _xla_sq_norms, rows)


def _native_sq_norms(rows):
    target = "jaxrank_sq_norms_csr" if rows.is_sparse else "jaxrank_sq_norms_dense"
    out = jax.ShapeDtypeStruct((rows.n_rows,), _F32)
    ops = (*_rows_operands(rows), rows.bias)
    return native.call(target, out, *ops)


def _load_native():
    """The native library (:func:`jaxrank._src.native.load`), or None."""
    return native.load()


def native_available() -> bool:
    """True if the native CPU kernel is loaded (it is then used on CPU).

    Loads it on first call; if it cannot be loaded, warns once (with the
    reason) and returns False.
    """
    return _load_native() is not None


def _dispatch(native_fn, xla_fn, *args):
    """``native_fn`` on CPU when the library is loaded, else ``xla_fn``.

    Only ``native_fn`` is traced where the CPU is JAX's only backend
    (:func:`jaxrank._src.native.dispatch`).
    """
    if _load_native() is None:
        return xla_fn(*args)
    if native._cpu_only():
        return native_fn(*args)
    return lax.platform_dependent(*args, cpu=native_fn, default=xla_fn)


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _check_rows(rows):
    if not isinstance(rows, HingeRows):
        raise TypeError(
            f"rows must be a HingeRows (see hinge_rows); got {type(rows).__name__}."
        )
    dense = rows.X is not None
    csr = [f is not None for f in (rows.indptr, rows.indices, rows.values)]
    if dense == any(csr) or (not dense and not all(csr)):
        raise ValueError("rows must set either X or all of indptr, indices, values.")
    _check_array("rows.bias", rows.bias, (), _F32)
    _check_array("rows.n_cols", rows.n_cols, (), _I32)
    if dense:
        if jnp.ndim(rows.X) != 2:
            raise ValueError(
                f"rows.X must be 2-D [m, d]; got shape {jnp.shape(rows.X)}."
            )
        _check_array("rows.X", rows.X, jnp.shape(rows.X), _F32)
    else:
        if jnp.ndim(rows.indptr) != 1 or jnp.shape(rows.indptr)[0] < 1:
            raise ValueError(
                f"rows.indptr must be [m + 1]; got shape {jnp.shape(rows.indptr)}."
            )
        nnz = jnp.shape(rows.values)
        if len(nnz) != 1 or jnp.shape(rows.indices) != nnz:
            raise ValueError(
                "rows.indices and rows.values must be 1-D of equal length; got shapes "
                f"{jnp.shape(rows.indices)} and {nnz}."
            )
        _check_array("rows.indptr", rows.indptr, jnp.shape(rows.indptr), _I32)
        _check_array("rows.indices", rows.indices, nnz, _I32)
        _check_array("rows.values", rows.values, nnz, _F32)


def _check_array(name, x, shape, dtype):
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise TypeError(
            f"{name} must be a {jnp.dtype(dtype).name} array; got {type(x).__name__}."
        )
    if tuple(x.shape) != tuple(shape):
        raise ValueError(
            f"{name} must have shape {tuple(shape)}; got {tuple(x.shape)}."
        )
    if jnp.dtype(x.dtype) != jnp.dtype(dtype):
        raise TypeError(
            f"{name} must have dtype {jnp.dtype(dtype).name}; got {jnp.dtype(x.dtype).name}."
        )


def _check_w(w, rows):
    if not hasattr(w, "shape") or jnp.ndim(w) != 1:
        raise ValueError(f"w must be 1-D [dim]; got shape {jnp.shape(w)}.")
    _check_array("w", w, jnp.shape(w), _F32)
    dim = w.shape[0]
    if not rows.is_sparse:
        d = rows.X.shape[1]
        if dim not in (d, d + 1):
            raise ValueError(
                f"w must have d = {d} or d + 1 = {d + 1} entries; got {dim}."
            )
    if _is_concrete(rows.n_cols):
        d = int(rows.n_cols)
        if dim not in (d, d + 1):
            raise ValueError(
                f"w must have n_cols = {d} or n_cols + 1 entries; got {dim}."
            )
        if _is_concrete(rows.bias) and float(rows.bias) != 0 and dim != d + 1:
            raise ValueError(
                f"rows.bias = {float(rows.bias)} != 0 needs w with n_cols + 1 = {d + 1} "
                f"entries (the bias weight last); got {dim}."
            )


class ActiveSet(NamedTuple):
    """Shrinking state carried between calls of :func:`dcd_epoch` (liblinear).

    Attributes:
        mask: ``[m]`` bool; False = shrunk (skipped until reactivated).
        pg_max: ``[]`` float32 ``PGmax_old``: a sample at ``alpha_i = 0`` with
            ``G > pg_max`` is shrunk (``+inf``: none).
        pg_min: ``[]`` float32 ``PGmin_old``: a sample at ``alpha_i = u_i``
            with ``G < pg_min`` is shrunk (``-inf``: none).
    """

    mask: jax.Array
    pg_max: jax.Array
    pg_min: jax.Array


class DCDStats(NamedTuple):
    """What a :func:`dcd_epoch` call with ``active`` did.

    Attributes:
        pg_max: ``[]`` float32 max projected gradient over the coordinates
            visited in the last pass (``-inf`` if none).
        pg_min: ``[]`` float32 min of them (``+inf`` if none).
        n_epochs: ``[]`` int32 passes done (``<= n_epochs``).
        n_visits: ``[]`` int32 coordinates visited over all passes
            (saturates at 2**31 - 1).
        converged: ``[]`` bool: the call stopped after a pass over all terms
            with ``pg_max - pg_min <= pg_tol`` (liblinear's stopping test).
    """

    pg_max: jax.Array
    pg_min: jax.Array
    n_epochs: jax.Array
    n_visits: jax.Array
    converged: jax.Array


def all_active(m: int) -> ActiveSet:
    """A fresh :class:`ActiveSet`: every sample active, no shrinking bounds.

    Args:
        m: number of rows (static int).
    """
    m = operator.index(m)
    return ActiveSet(
        jnp.ones((m,), bool), jnp.asarray(jnp.inf, _F32), jnp.asarray(-jnp.inf, _F32)
    )


_DEFAULT_PG_TOL = 0.1  # liblinear's default eps for -s 3


def dcd_epoch(
    w,
    alpha,
    rows: HingeRows,
    labels,
    upper,
    order,
    *,
    sq_norms,
    n_epochs: int = 1,
    active: ActiveSet | None = None,
    pg_tol=None,
    max_visits=None,
):
    """Dual coordinate descent passes (Hsieh et al. 2008, Alg. 1; liblinear ``-s 3``).

    Visits the samples with ``upper[i] > 0`` (others are absent terms: their
    ``alpha`` is returned unchanged, so pass 0) and at each takes the exact
    coordinate step of the module docstring, if its projected gradient
    exceeds ``1e-12`` in magnitude (as liblinear). The first pass visits them
    in the order of ``order``; each further pass of the same call (``n_epochs
    > 1``) first reshuffles them (Fisher-Yates with a counter-based hash
    seeded from ``order``, identical on both paths), as liblinear reshuffles
    every pass.

    Without ``active``: exactly ``n_epochs`` passes. With ``active``:
    liblinear's outer loop (``solve_l2r_l1l2_svc``) for at most ``n_epochs``
    passes: a sample at ``alpha_i = 0`` with ``G > active.pg_max``, or at
    ``alpha_i = u_i`` with ``G < active.pg_min``, is shrunk (skipped); after
    each pass the bounds become that pass's max/min projected gradient
    (``+-inf`` if ``<= 0`` / ``>= 0``); after a pass with ``pg_max - pg_min
    <= pg_tol`` the shrunk samples are reactivated, or, if none was shrunk,
    the call stops early with ``stats.converged``; it also stops after the
    pass in which the coordinate visits of the call reach ``max_visits``.
    The duality gap is the caller's stopping test (e.g. check it after every
    call, and lower ``pg_tol`` when a call converged but the gap is too big).

    Args:
        w: ``[dim]`` float32 current total weights, ``dim = d + 1`` if
            ``rows.bias != 0`` (intercept weight last) else ``d`` (``d + 1``
            with ``bias = 0`` is allowed: the last entry is left alone).
        alpha: ``[m]`` float32 dual variables, ``0 <= alpha_i <= upper_i``.
        rows: :class:`HingeRows` from :func:`hinge_rows`.
        labels: ``[m]`` float32 ``y_i`` in ``{-1, +1}`` (not checked).
        upper: ``[m]`` float32 ``u_i >= 0`` (``u_i = 0``: no term).
        order: ``[m]`` int32 permutation of ``range(m)``, e.g.
            :func:`random_order`. Entries outside ``[0, m)`` raise at run time
            on the native path (undefined on the XLA path).
        sq_norms: ``[m]`` float32 ``||z_i||^2`` from :func:`sq_norms`.
        n_epochs: passes per call (static int >= 1; a maximum with ``active``).
        active: optional :class:`ActiveSet` (enables shrinking).
        pg_tol: with ``active`` only: float32 scalar (may be traced), default
            0.1 (liblinear's ``eps``).
        max_visits: with ``active`` only: int32 scalar (may be traced), work
            budget of the call in coordinate visits; default none.

    Returns:
        ``(w, alpha)``, or ``(w, alpha, active, stats)`` when ``active`` is
        given (:class:`ActiveSet`, :class:`DCDStats`).
        ``w_out - w_in = sum_i (alpha_out_i - alpha_in_i) y_i z_i``.

    Raises:
        TypeError: on wrong dtypes (float32 data, int32 indices, bool mask) or
            a ``rows`` that is not a :class:`HingeRows`.
        ValueError: on wrong shapes, ``n_epochs < 1``, ``pg_tol`` or
            ``max_visits`` without ``active``, or ``bias != 0`` with
            ``len(w) == d`` (checked when the values are concrete). On the native path, out-of-range
            ``order``/CSR entries raise an ``XlaRuntimeError`` when the
            computation runs.

    References:
        Hsieh, Chang, Lin, Keerthi, Sundararajan, "A dual coordinate descent
        method for large-scale linear SVM", ICML 2008 (Algorithm 1; random
        permutation: Section 3.1; shrinking: Section 3.2). liblinear
        ``solve_l2r_l1l2_svc``.
    """
    _check_rows(rows)
    m = rows.n_rows
    _check_w(w, rows)
    for name, x, dt in (
        ("alpha", alpha, _F32),
        ("labels", labels, _F32),
        ("upper", upper, _F32),
        ("order", order, _I32),
        ("sq_norms", sq_norms, _F32),
    ):
        _check_array(name, x, (m,), dt)
    w, alpha, labels, upper, order, sq_norms = map(
        jnp.asarray, (w, alpha, labels, upper, order, sq_norms)
    )
    n_epochs = operator.index(n_epochs)
    if n_epochs < 1:
        raise ValueError(f"n_epochs must be >= 1; got {n_epochs}.")
    if active is None:
        if pg_tol is not None or max_visits is not None:
            raise ValueError(
                "pg_tol and max_visits apply only with shrinking; pass active=all_active(m) too."
            )
    else:
        if not isinstance(active, ActiveSet):
            raise TypeError(
                f"active must be an ActiveSet (see all_active); got {type(active).__name__}."
            )
        _check_array("active.mask", active.mask, (m,), jnp.bool_)
        _check_array("active.pg_max", active.pg_max, (), _F32)
        _check_array("active.pg_min", active.pg_min, (), _F32)
        pg_tol = jnp.asarray(_DEFAULT_PG_TOL if pg_tol is None else pg_tol, _F32)
        if jnp.ndim(pg_tol) != 0:
            raise ValueError(f"pg_tol must be a scalar; got shape {jnp.shape(pg_tol)}.")
        max_visits = jnp.asarray(0 if max_visits is None else max_visits, _I32)
        if jnp.ndim(max_visits) != 0:
            raise ValueError(
                f"max_visits must be a scalar; got shape {jnp.shape(max_visits)}."
            )
        active = (active, pg_tol, max_visits)
    args = (w, alpha, rows, labels, upper, order, sq_norms, active)
    out = _dispatch(
        functools.partial(_native_epoch, n_epochs=n_epochs),
        functools.partial(_xla_epoch, n_epochs=n_epochs),
        *args,
    )
    if active is None:
        return out[0], out[1]
    w, alpha, mask, pg_old, pg_new, counts, conv = out
    return (
        w,
        alpha,
        ActiveSet(mask, pg_old[0], pg_old[1]),
        DCDStats(pg_new[0], pg_new[1], counts[0], counts[1], conv),
    )


def _rows_operands(rows):
    if rows.is_sparse:
        return (rows.indptr, rows.indices, rows.values, rows.n_cols)
    return (rows.X,)


def _native_epoch(w, alpha, rows, labels, upper, order, sqn, driver, *, n_epochs):
    m = alpha.shape[0]
    ops = (w, alpha, *_rows_operands(rows), rows.bias, sqn, labels, upper, order)
    outs = [
        jax.ShapeDtypeStruct(w.shape, _F32),
        jax.ShapeDtypeStruct((m,), _F32),
        jax.ShapeDtypeStruct((2 * m,), _I32),  # workspace
    ]
    active = None if driver is None else driver[0]
    if active is not None:
        _, pg_tol, max_visits = driver
        ops += (
            active.mask,
            jnp.stack([active.pg_max, active.pg_min]),
            pg_tol,
            max_visits,
        )
        outs += [
            jax.ShapeDtypeStruct((m,), jnp.bool_),
            jax.ShapeDtypeStruct((2,), _F32),
            jax.ShapeDtypeStruct((2,), _F32),
            jax.ShapeDtypeStruct((2,), _I32),
            jax.ShapeDtypeStruct((), jnp.bool_),
        ]
    target = "jaxrank_dcd_epoch_csr" if rows.is_sparse else "jaxrank_dcd_epoch_dense"
    res = native.call(target, outs, *ops, n_epochs=np.int64(n_epochs))
    if active is None:
        return res[0], res[1], None, None, None, None, None
    return res[0], res[1], res[3], res[4], res[5], res[6], res[7]


def row_dots(rows: HingeRows, w) -> jax.Array:
    """``[m]`` float32 ``z_i^T w`` for all rows (margins before the labels).

    Args:
        rows: :class:`HingeRows`.
        w: ``[dim]`` float32 weights, as in :func:`dcd_epoch`.

    Returns:
        ``[m]`` float32 (native path: float64 accumulation; XLA: float32).

    Raises:
        TypeError, ValueError: as :func:`dcd_epoch` for ``rows`` and ``w``.
    """
    _check_rows(rows)
    _check_w(w, rows)
    return _dispatch(_native_dots, _xla_dots, rows, jnp.asarray(w))


def _native_dots(rows, w):
    target = "jaxrank_row_dots_csr" if rows.is_sparse else "jaxrank_row_dots_dense"
    out = jax.ShapeDtypeStruct((rows.n_rows,), _F32)
    ops = (w, *_rows_operands(rows), rows.bias)
    return native.call(target, out, *ops)


def random_order(key, m: int) -> jax.Array:
    """``[m]`` int32 uniformly random permutation of ``range(m)``, cheap on CPU.

    On CPU with the native library: an inside-out Fisher-Yates shuffle seeded
    with 64 bits drawn from ``key`` (``jax.random.bits``), O(m);
    elsewhere ``jax.random.permutation(key, m)`` (XLA's sort-based shuffle,
    far slower on CPU; ``docs/design_notes.md``). The two give different
    permutations.

    Args:
        key: a JAX PRNG key (typed or raw uint32).
        m: length (static int).

    Returns:
        ``[m]`` int32.
    """
    m = operator.index(m)
    return _dispatch(
        functools.partial(_native_order, m=m), functools.partial(_xla_order, m=m), key
    )


def _native_order(key, *, m):
    seed = jax.random.bits(key, (2,), jnp.uint32)
    out = jax.ShapeDtypeStruct((m,), _I32)
    return native.call("jaxrank_random_order", out, seed)
