"""Running fits: one fit (``fit_one``) or a batch on a work queue (``fit_batch``).

The single-vs-batched dispatch of the solver (:func:`jaxrank.solvers.fit`,
:func:`jaxrank.solvers.fit_many`), the device list and mesh of a fit, the
batch size of the work queue, progress reporting, and the training scores of
fitted weights.
"""

from __future__ import annotations

import dataclasses
import logging
from numbers import Integral

import jax
import numpy as np

from jaxrank._src.layout import Design
from jaxrank._src.solvers import batch, dcd, planes
from jaxrank._src.solvers import ssvm
from jaxrank._src.solvers.settings import DEFAULTS, Solver, as_solver

# Slots per device of the batched drivers (the fastest of the sizes tried in
# bench/sweep.py; docs/design_notes.md); the plane caches of the slots
# (``(cache + 1) * dim`` floats each) are kept under _SLOT_CACHE_BYTES per device.
DEFAULT_BATCH_SIZE = 32


# On CPU a vmapped batch of fits costs about the sum of its slots at every
# step, and slots whose fits have stopped keep computing while the queue
# drains, so one long fit (large C) makes its whole batch pay for its steps;
# wide batches pay off only when there are many fits to keep the slots busy
# (small sweeps are faster with one slot, large ones with many:
# bench/results/sweep.md, docs/design_notes.md). Hence on CPU one slot per
# CPU_FITS_PER_SLOT fits (per device), at most DEFAULT_BATCH_SIZE.
CPU_FITS_PER_SLOT = 16


_SLOT_CACHE_BYTES = 2**28


DEFAULTS_CACHE = DEFAULTS["cache"]


def shard_rows(data, devices):
    """A dense :class:`Design` with its rows sharded over ``devices`` (data parallel).

    ``devices``: a tuple of at least one ``jax.Device``; the number of rows of
    ``data`` must be a multiple of ``len(devices)``. The solver's products
    then run on every device's rows and XLA sums the partial planes across
    devices (docs/multi_device.md).

    A 2-D grid (tuple of tuples, :func:`device_grid`) shards the rows over
    its second axis and replicates them over its first (problems).

    Raises:
        ValueError: sparse ``data``, or rows not divisible by the devices.
    """
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if data.sparse:
        raise ValueError("shard_rows needs a dense design; got a sparse one.")
    grid = is_device_grid(devices)  # problems x samples: rows replicated over the first axis
    k = len(devices[0]) if grid else len(devices)  # devices the rows are split over
    if data.shape[0] % k:
        raise ValueError(f"{data.shape[0]} rows do not divide over {k} devices.")
    mesh = (Mesh(np.asarray(devices, dtype=object), ("devices", "samples")) if grid
            else Mesh(np.asarray(devices), ("samples",)))
    return Design(jax.device_put(data.X, NamedSharding(mesh, PartitionSpec("samples", None))))


def is_device_grid(devices):
    """Whether ``devices`` is a ``problems x samples`` grid (a tuple of device tuples)."""
    return isinstance(devices, tuple) and bool(devices) and isinstance(devices[0], tuple)


def device_grid(devices, n_problems):
    """The ``problems x samples`` grid of a batched fit on ``devices`` (or ``None``).

    Problems first (their queues need no communication): the problem axis
    gets the largest divisor ``D_p`` of ``len(devices)`` that is at most
    ``n_problems``, the sample axis the rest, ``D_s = len(devices) / D_p``.
    Returns ``None`` when ``D_s == 1`` (problems only: a flat device tuple
    does), else a tuple of ``D_p`` tuples of ``D_s`` devices (hashable, for
    the static ``devices`` of :func:`jaxrank.solvers.fit_many`). E.g. 4
    devices and 2 tasks: 2 x 2; 4 devices and 3 tasks: 1 x 4 (3 does not
    divide 4); 2 devices and 2 tasks: problems only.
    """
    n = len(devices)
    Dp = max(k for k in range(1, n + 1) if n % k == 0 and k <= max(int(n_problems), 1))
    Ds = n // Dp
    if Ds == 1:
        return None
    return tuple(tuple(devices[i * Ds:(i + 1) * Ds]) for i in range(Dp))


def resolve_devices(devices):
    """Static device tuple for the batched drivers.

    ``None`` means every local device of the default backend (on a CPU these
    are ``jax_num_cpu_devices`` virtual devices, one by default).

    Raises:
        TypeError: ``devices`` is not ``None``, an int or a sequence of devices.
        ValueError: an empty sequence, an int outside ``1..len(local devices)``,
            a device of another process (multi-controller runs), or a device
            listed twice.
    """
    local = tuple(jax.local_devices())
    if devices is None:
        return local
    if isinstance(devices, jax.Device):
        return (devices,)
    if isinstance(devices, (Integral, np.integer)) and not isinstance(devices, bool):
        if not 1 <= int(devices) <= len(local):
            raise ValueError(
                f"devices must be between 1 and the {len(local)} local device(s); got {devices}.")
        return local[: int(devices)]
    try:
        devs = tuple(devices)
    except TypeError:
        raise TypeError(
            "devices must be None, an int or a sequence of jax devices; got "
            f"{type(devices).__name__}."
        ) from None
    if not devs:
        raise ValueError("devices is empty; pass None for the default devices.")
    if not all(isinstance(d, jax.Device) for d in devs):
        raise TypeError("devices must contain jax.Device objects (e.g. jax.devices()).")
    me = jax.process_index()
    other = [d for d in devs if d.process_index != me]
    if other:
        raise ValueError(
            f"devices must be local to this process (process {me} of "
            f"{jax.process_count()}); {other[0]} belongs to process "
            f"{other[0].process_index}. An estimator shards a host array over this "
            "process's devices only (jax.local_devices()); for a fit across processes, "
            "build the global array with jax.make_array_from_process_local_data and call "
            "jaxrank.solvers.fit (the multi-device guide, docs/multi_device.md).")
    if len(set(devs)) != len(devs):
        raise ValueError(f"devices lists a device twice: {list(devs)}.")
    return devs


def choose_batch_size(batch_size, n_fits, dim, n_devices, cache=DEFAULTS_CACHE):
    """Validate ``batch_size``, or choose it (``None``) for the batched driver.

    ``None`` gives ``DEFAULT_BATCH_SIZE`` slots per device (on a CPU
    backend one slot per ``CPU_FITS_PER_SLOT`` fits of a device, at least
    one), fewer when the ``n_fits`` fits do not fill them (``ceil(n_fits / n_devices)``) or when
    the slots' plane caches (``batch_size * (cache + 1) * dim * 4`` bytes)
    would exceed 256 MB per device (high-dimensional ``X``). ``cache``: the
    fits' ``Solver.cache`` (completed for the model).


    Raises:
        TypeError: ``batch_size`` is not ``None`` or an int.
        ValueError: ``batch_size < 1``.
    """
    if batch_size is None:
        per_device = -(-int(n_fits) // max(int(n_devices), 1))
        cache = planes.plane_cache_size(cache, dim)
        memory = _SLOT_CACHE_BYTES // (4 * (cache + 1) * max(int(dim), 1))
        width = DEFAULT_BATCH_SIZE
        if jax.default_backend() == "cpu":
            width = max(1, min(width, per_device // CPU_FITS_PER_SLOT))
        return int(max(1, min(width, per_device, memory)))
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise TypeError(
            f"batch_size must be None or an int >= 1; got {type(batch_size).__name__}."
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be None or an int >= 1; got {batch_size}.")
    return int(batch_size)


# Host-side progress of batched fits, through the standard logging system:
# the jitted drivers call the one static function ``report_progress`` (so
# following the progress never recompiles them), which logs an INFO record
# on this logger with the count in ``record.n_stopped``. A caller who wants
# the progress attaches a handler (``jaxrank.sweep(progress=...)`` does).
PROGRESS_LOGGER = "jaxrank.progress"
_progress_log = logging.getLogger(PROGRESS_LOGGER)


def report_progress(n_stopped):
    """Log ``n_stopped`` finished fits (int) on the ``jaxrank.progress`` logger."""
    if _progress_log.isEnabledFor(logging.INFO):
        n = int(n_stopped)
        _progress_log.info("%d fit(s) stopped", n, extra={"n_stopped": n})


def _print_progress(it, obj, dual):
    it = int(it)
    if it == 1 or it % 25 == 0:
        gap = float(obj) - float(dual)
        print(
            f"  iter {it:5d}  objective {float(obj):.6g}  dual {float(dual):.6g}  "
            f"gap {gap / max(abs(float(obj)), 1e-30):.2e}",
            flush=True,
        )


def _to_device(a, dtype=None):
    """A host array on the default device: ``jax.device_put`` (``jnp.asarray`` of a
    NumPy array runs a copy program, compiled once per shape and process)."""
    a = np.asarray(a, dtype)
    # (np.ascontiguousarray makes 0-d arrays 1-d: scalar leaves stay scalars.)
    return jax.device_put(np.ascontiguousarray(a) if a.ndim else a)


# ``data @ W`` as one program (an eager product dispatches each of its
# primitives as a program of its own, each compiled once per process).
design_matmul = jax.jit(lambda data, W: data @ W)


@jax.jit
def _sparse_scores(data, W):
    """``data @ W`` (``[n, T]``) for a sparse float32 design, by the hinge block's
    native CSR row kernel (on CPU faster than XLA's segment sum; docs/design_notes.md)."""
    rows = ssvm.design_rows(data)
    return jax.vmap(lambda w: dcd.row_dots(rows, w), in_axes=1, out_axes=1)(W)


def training_scores(data, W):
    """``[n, T]`` scores ``data @ W`` of a fitted ``W [d, T]`` (host array)."""
    if (getattr(data, "sparse", False) and getattr(data, "indptr", None) is not None
            and data.dtype == np.float32):
        return np.asarray(_sparse_scores(data, _to_device(W, np.float32)))
    return np.asarray(design_matmul(data, _to_device(W)))


# One jitted program per (model, shapes, static solver fields): C and the
# solver's tol are traced.
fit_one = jax.jit(ssvm.fit, static_argnames=("model", "callback"))


# The result structure of every single fit (stored programs keep no pytrees).
_FIT_RESULT_TREE = jax.tree_util.tree_structure(ssvm.FitResult(*(0,) * 5))


def run_fit_one(model, data, problem, *, C, solver: Solver, callback=None, w0=None,
                store=None):
    """:data:`fit_one`, through ``store`` when given.

    ``solver``: a :class:`Solver`. ``store``: an object with ``run(lower,
    static, args, kwargs, *, out_tree)`` that returns the outputs of the
    lowered program (the command line's program store,
    :mod:`jaxrank._src.cli.store`, keeps compiled fits across processes);
    ``None``: the jitted call. A fit with a ``callback`` or a warm start
    ``w0`` is always the jitted call (programs with host callbacks cannot be
    stored; warm starts are not a command-line fit).
    """
    if store is None or callback is not None or w0 is not None:
        return fit_one(model, data, problem, C=C, solver=solver, callback=callback, w0=w0)
    # NumPy scalars: jnp.asarray of host values runs (and compiles) a program.
    C = np.float32(np.asarray(C))
    solver = dataclasses.replace(solver, tol=np.float32(np.asarray(solver.tol)))
    return store.run(
        lambda: fit_one.lower(model, data, problem, C=C, solver=solver),
        ("fit_one", repr(model), solver.static()), (data, problem),
        {"C": C, "solver": solver}, out_tree=_FIT_RESULT_TREE)


fit_batch = jax.jit(
    batch.fit_many, static_argnames=("model", "batch_size", "devices", "callback"))


def solve(model, data, problems, C, *, solver: Solver, single: bool, batch_size=None, devices=None,
          w0=None, verbose=False, progress=False, store=None):
    """``M`` fits of one model, each one jitted call: the one dispatch of every estimator.

    ``single``: the one fit of ``problems`` (``M = 1``) by :data:`fit_one`
    (through ``store`` when given, :func:`run_fit_one`); else the work queue
    :data:`fit_batch` on ``devices`` (``None``: one queue on the default
    device; a tuple of devices or a problems x samples grid, as
    :func:`jaxrank.solvers.fit_many` takes them) with ``batch_size`` slots
    per device (``None``: :func:`choose_batch_size`).

    Args:
        model: a structured model (static).
        data: the model's data, shared by every fit.
        problems: pytree of arrays with a leading ``[M]`` axis.
        C: ``[M]`` float32 trade-offs.
        solver: :class:`Solver` of every fit.
        single: bool, run the one fit of ``M = 1`` as a single fit.
        batch_size, devices: of the work queue (above).
        w0: optional ``[M, dim]`` warm starts.
        verbose: print the single fit's progress every 25 iterations.
        progress: report the queue's stopped fits on the ``jaxrank.progress``
            logger (:func:`report_progress`).
        store: the command line's program store (single fits only).

    Returns:
        :class:`FitResult` with a leading ``[M]`` axis (host arrays for a
        single fit).
    """
    solver = as_solver(solver).for_model(model)
    solver = dataclasses.replace(solver, tol=np.float32(np.asarray(solver.tol)))
    if w0 is not None:
        w0 = _to_device(w0, np.float32)
    if single:
        # (Indexing a device array eagerly is a program per shape; on a CPU
        # backend the host view of the array is free.)
        cpu = jax.default_backend() == "cpu"
        one = jax.tree_util.tree_map(
            lambda a: _to_device(np.asarray(a)[0]) if cpu else a[0], problems)
        res = run_fit_one(model, data, one, C=C[0], solver=solver,
                          callback=_print_progress if verbose else None,
                          w0=None if w0 is None else w0[0], store=store)
        return jax.tree_util.tree_map(lambda a: np.asarray(a)[None], res)
    n_devices = 1 if devices is None else len(devices)
    batch_size = choose_batch_size(batch_size, C.shape[0], model.dim(data), n_devices,
                                   solver.cache)
    return fit_batch(model, data, problems, C, solver=solver, batch_size=batch_size,
                     devices=devices, callback=report_progress if progress else None, w0=w0)

