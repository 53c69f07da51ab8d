"""jaxrank's native CPU kernels: loading the library and registering its FFI targets.

One shared library, ``jaxrank/_src/native/_kernels<EXT_SUFFIX>`` (built by ``setup.py``
from ``dcd.c``, ``rank.c`` and ``qp.c``; plain C, no Python API), holds every
native kernel: the dual coordinate descent passes of :mod:`jaxrank._src.solvers.dcd`,
the integer stages of the ranking oracles (sorts, selective-ranking
candidates, swap counts) of :mod:`jaxrank._src.oracles.ap` and the ROC-area
SVM, and the solver's cached-plane QP and products with its plane cache
(:mod:`jaxrank._src.solvers.ssvm`). It is
loaded with ``ctypes`` on first use and its XLA FFI targets are registered for
the CPU platform; :func:`load` returns it, or ``None`` (with one
``RuntimeWarning`` giving the reason) when it is missing, was built for
another ABI version, or ``JAXRANK_DISABLE_NATIVE`` is set. Callers then take
their XLA (or NumPy) path, which computes the same results.

``JAXRANK_NATIVE_LIBRARY`` overrides the library path (tests).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
import warnings

import jax
import jax.numpy as jnp

_TARGETS = (
    "jaxrank_dcd_epoch_dense",
    "jaxrank_dcd_epoch_csr",
    "jaxrank_row_dots_dense",
    "jaxrank_row_dots_csr",
    "jaxrank_sq_norms_dense",
    "jaxrank_sq_norms_csr",
    "jaxrank_random_order",
    "jaxrank_ap_layout",
    "jaxrank_ap_expand",
    "jaxrank_auc_counts",
    "jaxrank_cached_qp",
    "jaxrank_cache_rows",
    "jaxrank_cache_combine",
)
_ABI_VERSION = 3
_LOCK = threading.Lock()
_STATE: dict = {}


def _library_path():
    here = os.path.dirname(os.path.abspath(__file__))
    hits = sorted(
        glob.glob(os.path.join(here, "_kernels*.so"))
        + glob.glob(os.path.join(here, "_kernels*.pyd"))
        + glob.glob(os.path.join(here, "_kernels*.dylib"))
    )
    return hits[0] if hits else None


def load():
    """Loads the library and registers its FFI targets; returns it or None."""
    with _LOCK:
        if "lib" in _STATE:
            return _STATE["lib"]
        lib, reason = None, None
        path = os.environ.get("JAXRANK_NATIVE_LIBRARY") or _library_path()
        if os.environ.get("JAXRANK_DISABLE_NATIVE", "") not in ("", "0"):
            reason = "JAXRANK_DISABLE_NATIVE is set"
        elif path is None:
            reason = (
                "the compiled kernel jaxrank/_src/native/_kernels*.so is missing (build it with "
                "`pip install .`, or `python setup.py build_ext --inplace` in a checkout)"
            )
        else:
            try:
                cand = ctypes.CDLL(path)
                cand.jaxrank_dcd_abi_version.restype = ctypes.c_int
                version = cand.jaxrank_dcd_abi_version()
                if version != _ABI_VERSION:
                    raise OSError(f"ABI version {version}, expected {_ABI_VERSION}")
                for name in _TARGETS:
                    jax.ffi.register_ffi_target(
                        name, jax.ffi.pycapsule(getattr(cand, name)), platform="cpu"
                    )
                lib = cand
            except Exception as e:  # noqa: BLE001 - any failure: use the XLA path
                reason = f"loading {path} failed: {type(e).__name__}: {e}"
        if lib is None:
            warnings.warn(
                f"jaxrank: native CPU kernel unavailable ({reason}); using the XLA "
                "and NumPy paths (DCD: the XLA lax loop path, 4-30x slower per "
                "coordinate; oracle sorts: NumPy host kernels).",
                RuntimeWarning,
                stacklevel=3,
            )
        _STATE["lib"] = lib
        _STATE["reason"] = reason
        return lib


def available() -> bool:
    """True if the native CPU library is loaded (loads it on first call)."""
    return load() is not None


def reason():
    """Why the library is not loaded (``None`` if it is, or was not tried yet)."""
    return _STATE.get("reason")


def dispatch(native_fn, xla_fn, *args):
    """``native_fn(*args)`` on CPU when the library is loaded, else ``xla_fn(*args)``.

    The choice is ``lax.platform_dependent`` (only the branch of the platform
    a program is compiled for is lowered); both functions must return the
    same shapes and dtypes. Where JAX has no backend but the CPU, only
    ``native_fn`` is traced (``platform_dependent`` traces both branches,
    and the XLA forms of the solver's kernels cost more to trace and lower
    than the rest of a fit).
    """
    if load() is None:
        return xla_fn(*args)
    if _cpu_only():
        return native_fn(*args)
    return jax.lax.platform_dependent(*args, cpu=native_fn, default=xla_fn)


def _cpu_only() -> bool:
    """True if the CPU is JAX's only backend (every program is compiled for it)."""
    try:
        import jax.extend.backend as jeb

        return set(jeb.backends()) == {"cpu"}
    except Exception:  # an older JAX without ``backends()``: keep both branches
        return False


def _varying_zero(*trees):
    """A float32 zero that depends on every leaf (for loop carries under ``shard_map``).

    Inside ``shard_map`` (with ``check_vma``) every loop carry must vary over the
    same mesh axes as the values the loop body mixes into it; deriving all
    initial carries from this zero gives them the union of the inputs' axes.
    XLA folds it away.
    """
    z = jnp.zeros((), jnp.float32)
    for leaf in jax.tree.leaves(trees):
        if jnp.size(leaf):
            z = z + jnp.where(False, jnp.ravel(leaf)[0], 0).astype(jnp.float32)
    return z


def _vary_results(results, operands):
    """FFI results with the varying mesh axes of the operands (``ffi_call`` drops them)."""
    zero = _varying_zero(operands)
    return jax.tree.map(lambda r: _vary(r, zero), results)


def _vary(x, zero):
    """``x`` with the varying axes of ``zero`` (value unchanged)."""
    if x.dtype == jnp.bool_:
        return x | (zero != 0)
    return x + zero.astype(x.dtype)


def call(target, result_shapes, *operands, **attrs):
    """Call the registered FFI ``target`` of the library on ``operands``.

    ``jax.ffi.ffi_call`` with ``vmap_method="expand_dims"`` (a batch is one
    call: the kernels loop over the leading batch axes, broadcasting axes of
    size 1), and results given the varying mesh axes of the operands
    (``ffi_call`` drops them inside ``shard_map``). ``attrs``: scalar
    attributes (``np.int64``). Returns what ``ffi_call`` returns for
    ``result_shapes`` (one array or a list).
    """
    res = jax.ffi.ffi_call(target, result_shapes, vmap_method="expand_dims")(*operands, **attrs)
    return _vary_results(res, operands)

