"""Sorting at the floor: order-preserving keys and the host/XLA dispatch of integer stages.

Scores are sorted as order-preserving
integer keys, never as floats, and on CPU the integer stages of the AP
oracle (sorting the positives, selecting and sorting the candidate
negatives, expanding per-positive cuts into per-negative ranks) run as host
kernels chosen by ``lax.platform_dependent``: jaxrank's native kernels
(``rank.c``: radix sorts, XLA FFI calls on XLA's own buffers) when its
compiled library is loaded (:mod:`jaxrank._src.native`), else NumPy through
a JAX callback. GPU/TPU programs keep the pure-XLA path. The float
arithmetic stays in XLA on every path and the host kernels return the XLA
path's integers, so the results are bitwise identical
(tests/internals/test_sort_floor.py). Lists shorter than :func:`_host_min_len`
(``_NATIVE_MIN_LEN``, or ``_HOST_MIN_LEN`` for the NumPy callbacks, which
also keep a program out of JAX's persistent compilation cache) take the XLA
path.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src import native
from jaxrank._src.metrics import _sort_key

Array = jax.Array


# "auto": the host sort on CPU for sorts of at least _HOST_MIN_LEN entries,
# XLA otherwise (and on every other platform); "xla" or "host": forced (tests
# and benchmarks only: use :func:`sort_path`, which clears JAX's caches).
_SORT_PATH = "auto"


# Below this length the XLA path costs less than a host round trip, and a
# program without host callbacks can be kept in JAX's persistent compilation
# cache (programs with a host callback are not). The length is the crossover
# of AP select between the NumPy host path and XLA (bench/results/inference.md,
# "Host vs XLA path by size"; docs/design_notes.md); the ROC-area oracle has
# its own, in oracles/auc.py.
_HOST_MIN_LEN = 8192


# With the native kernels (rank.c; an FFI call has a small fixed cost and no
# copies) the host path is faster than XLA's from a few hundred entries
# (bench/results/inference.md, "Host vs XLA path by size"; docs/design_notes.md).
# Both oracles use this length.
_NATIVE_MIN_LEN = 512


# vmap of a host kernel: one callback for the whole batch (the kernels loop
# over the rows in NumPy), rather than one callback per row ("sequential").
_VMAP_METHOD = "broadcast_all"


_RADIX_MIN_LEN = 256


# The callback API of the host kernels: "pure" (jax.pure_callback, the
# default) or "buffer" (jax.experimental.buffer_callback: XLA's buffers read
# and written in place, no copies; bench/inference.py --design). "buffer" is
# opt-in: the API is experimental, and long processes that used it have
# crashed with a segmentation fault inside JAX's persistent compilation
# cache, for a cause not established (docs/design_notes.md).
try:
    from jax.experimental.buffer_callback import buffer_callback as _buffer_callback
except ImportError:  # pragma: no cover - older JAX
    _buffer_callback = None


_CALLBACK = "pure"


@contextlib.contextmanager
def sort_path(path):
    """Context manager: which implementation runs the sorts of the oracles.

    Every sort of the AP oracles (Algorithms 1-3 of Mohapatra et al. 2014)
    and of the ROC-area oracle sorts order-preserving int32 keys of the
    scores. ``"auto"`` (the default outside this context): on a CPU backend,
    the integer stages of lists of at least a few thousand entries run as
    host kernels (XLA's CPU sort is several times slower than a radix sort):
    jaxrank's native kernels (``rank.c``, XLA FFI calls on XLA's own
    buffers) when its compiled library is present, else NumPy through
    ``jax.pure_callback``; shorter lists and every other platform use XLA's
    ``lax.sort``. ``"xla"``: XLA everywhere (programs without host
    callbacks, which JAX's persistent compilation cache can keep);
    ``"host"``: the host kernels on every platform; ``"numpy"``: the NumPy
    host kernels even when the native ones are present (a reference for
    tests and benchmarks). The results are bitwise identical on every path;
    only speed and cacheability differ.

    The choice is read when a program is traced, so JAX's in-memory caches
    are cleared on entry and on exit (programs compile again). Not
    thread-safe.

    Args:
        path: ``"auto"``, ``"xla"``, ``"host"`` or ``"numpy"`` (str).

    Raises:
        ValueError: an unknown ``path``.

    Example::

        with jaxrank.inference.sort_path("xla"):
            model = jaxrank.APSVM(C=10.0).fit(X, y)
    """
    global _SORT_PATH
    if path not in ("auto", "xla", "host", "numpy"):
        raise ValueError(f"path must be 'auto', 'xla', 'host' or 'numpy'; got {path!r}.")
    old = _SORT_PATH
    _SORT_PATH = path
    jax.clear_caches()
    try:
        yield
    finally:
        _SORT_PATH = old
        jax.clear_caches()


# Inside _cacheable_programs(), without the native kernels: the host path only
# from this length. A program with a host callback is never kept in JAX's
# persistent compilation cache or the CLI's program store, so a repeated
# command would compile it again; below 2^16 entries a fit's host sorts save
# less time than that compilation costs (docs/design_notes.md).
_CACHEABLE_HOST_MIN_LEN = 1 << 16


_host_min_floor = 0


@contextlib.contextmanager
def _cacheable_programs():
    """Prefer programs that can be cached on disk (the CLI, with its caches on).

    Without the native kernels (whose FFI calls can be stored, unlike the
    NumPy callbacks), sorts shorter than ``_CACHEABLE_HOST_MIN_LEN`` take the
    XLA path on every platform while the context is active. The results do not depend on the
    path (bitwise identical), so programs traced outside the context stay
    valid. Read at trace time; not thread-safe.
    """
    global _host_min_floor
    old = _host_min_floor
    _host_min_floor = _CACHEABLE_HOST_MIN_LEN
    try:
        yield
    finally:
        _host_min_floor = old


def _host_min_len(min_len=None):
    """Shortest list that takes the host path on CPU (read at trace time).

    ``_NATIVE_MIN_LEN`` with the native kernels (their FFI calls can also be
    stored by the compilation caches); else the NumPy callbacks' ``min_len``
    (default ``_HOST_MIN_LEN``), at least ``_CACHEABLE_HOST_MIN_LEN`` inside
    :func:`_cacheable_programs`.
    """
    if _native_host():
        return _NATIVE_MIN_LEN
    return max(_HOST_MIN_LEN if min_len is None else min_len, _host_min_floor)


def _dispatch(host_fn, xla_fn, length, *args, min_len=None):
    """``host_fn(*args)`` on CPU for ``length >= _host_min_len(min_len)``, else ``xla_fn(*args)``.

    The choice is static (trace time) except for the platform, which
    ``lax.platform_dependent`` resolves when the program is lowered. 64-bit
    operands (float64 scores, int64 keys: test references only) always take
    the XLA path: the native kernels take int32 keys, and a host callback's
    results are canonicalised on a thread that does not see a
    ``jax.enable_x64`` context.
    """
    path = _SORT_PATH
    wide = any(jnp.dtype(a.dtype).itemsize > 4 for a in args)
    min_len = _host_min_len(min_len)
    if path == "xla" or wide or (path == "auto" and length < min_len):
        return xla_fn(*args)
    if path in ("host", "numpy"):
        return host_fn(*args)
    return lax.platform_dependent(*args, cpu=host_fn, default=xla_fn)


def _native_host():
    """True if the host path runs the native kernels (``rank.c``), not NumPy.

    Read at trace time: the library is loaded (:mod:`jaxrank._src.native`)
    and :func:`sort_path` is not ``"numpy"``.
    """
    return _SORT_PATH != "numpy" and native.load() is not None


def _key_max(dtype):
    return jnp.array(jnp.iinfo(dtype).max, dtype)


def _desc_keys(scores, valid):
    """Integer keys whose ascending order is the descending order of ``scores``.

    ``key(-s)`` (:func:`jaxrank._src.metrics._sort_key`): ``[m]`` int32 for
    float32 scores (int64 for float64). Both zeros tie; a NaN score sorts
    after every number (after ``-inf``); entries with ``valid`` False get the
    largest integer, so they sort last.
    """
    key = _sort_key(-scores)
    return jnp.where(valid, key, _key_max(key.dtype))


def _desc_scores(keys, dtype):
    """Inverse of :func:`_desc_keys` (``-0.0`` for a zero; 0 for the sentinel)."""
    ity = keys.dtype
    fty = jnp.float64 if ity == jnp.int64 else jnp.float32
    top = _key_max(ity)
    bits = jnp.where(keys < 0, keys ^ top, keys)
    vals = -lax.bitcast_convert_type(bits, fty)
    return jnp.where(keys == top, 0, vals).astype(dtype)


def _np_argsort(keys):
    """Stable ascending argsort of a 1-D int32/int64 NumPy array (ties in index order).

    int32 keys of at least ``_RADIX_MIN_LEN`` entries: LSD radix sort by two
    stable 16-bit passes (NumPy's ``kind="stable"`` is a radix sort for 16-bit
    types), about 1.2x ``np.sort`` of float32; otherwise ``kind="stable"``.
    Returns int64 (``intp``) indices.
    """
    if keys.dtype == np.int32 and keys.shape[0] >= _RADIX_MIN_LEN:
        u = keys.view(np.uint32) ^ np.uint32(0x80000000)
        p1 = np.argsort((u & np.uint32(0xFFFF)).astype(np.uint16), kind="stable")
        p2 = np.argsort((u[p1] >> np.uint32(16)).astype(np.uint16), kind="stable")
        return p1[p2]
    return np.argsort(keys, kind="stable")


def _np_kth_smallest(d, k):
    """The ``k``-th smallest entry (1-based) of a 1-D NumPy array, exactly.

    For ``k << n``: an upper bound ``q`` from a strided sample, checked by one
    count (``#{d <= q} >= k``), then ``np.partition`` of the few entries
    ``<= q`` only; otherwise (or if the check fails) ``np.partition`` of all.
    """
    n = d.shape[0]
    if n >= 8192 and 16 * k <= n:
        step = 8
        sample = d[::step]
        r = min(sample.shape[0] - 1, 2 * (k * sample.shape[0]) // n + 8)
        q = np.partition(sample, r)[r]
        sub = d[d <= q]
        if sub.shape[0] >= k:
            return np.partition(sub, k - 1)[k - 1]
    return np.partition(d, k - 1)[k - 1]


def _host_call(host, out_shapes, *args):
    """Run the NumPy kernel ``host(outs, *arrays)`` as a host callback.

    ``host`` fills every entry of ``outs`` (writable arrays of the shapes
    ``out_shapes``, with the leading batch axes of the arguments under
    ``vmap``). ``jax.pure_callback`` by default; with ``_CALLBACK =
    "buffer"`` (and a JAX that has it) ``jax.experimental.buffer_callback``,
    whose kernel reads XLA's input buffers and writes its output buffers in
    place, where ``jax.pure_callback`` copies every input to a new
    ``jax.Array`` and every result back (timings of an identity kernel:
    ``docs/design_notes.md``). Both are pure for JAX (no side effects) and
    batch with ``vmap_method=_VMAP_METHOD``.
    """
    out_shapes = tuple(out_shapes)
    if _CALLBACK == "buffer" and _buffer_callback is not None:

        def run(ctx, out, *bufs):
            host([np.asarray(o) for o in out], *(np.asarray(b) for b in bufs))

        return tuple(_buffer_callback(run, out_shapes, vmap_method=_VMAP_METHOD)(*args))
    nd0 = np.ndim(args[0])

    def pure(*arrays):
        batch = np.shape(arrays[0])[: np.ndim(arrays[0]) - nd0]
        outs = [np.empty(batch + o.shape, o.dtype) for o in out_shapes]
        host(outs, *(np.asarray(a) for a in arrays))
        return tuple(outs)

    return jax.pure_callback(pure, out_shapes, *args, vmap_method=_VMAP_METHOD)


def _out_view(a, shape):
    """``a`` reshaped without a copy (raises rather than silently copying an output)."""
    v = a.view()
    v.shape = shape
    return v


def _stable_sort_xla(keys):
    """Stable ascending sort of integer ``keys [..., m]``: ``(sorted keys, perm)``.

    ``perm`` int32, ties in index order (``lax.sort`` with ``is_stable=True``
    and the index as payload: an integer sort, never a float one).
    """
    idx = lax.broadcasted_iota(jnp.int32, keys.shape, keys.ndim - 1)
    return lax.sort((keys, idx), dimension=keys.ndim - 1, num_keys=1, is_stable=True)
