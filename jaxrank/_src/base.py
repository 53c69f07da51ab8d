"""The estimator layer: one scikit-learn base class for every structured SVM.

:class:`StructuredSVM` is written once against the structured-model
interface: a subclass declares its hyperparameters (``__init__`` and
``_parameter_constraints``), its default ``C`` grid and how to build its
model (``_model``) and problems (``_problems``); fitting (one problem or one
per label column), batched sweeps (:func:`jaxrank.sweep`), the CLI and
``save``/``load`` use only these hooks. :class:`RankerMixin` holds what every
ranker shares (labels, ``decision_function``, ``predict``, ``score``).

**Labels** (one rule for every estimator and the CLI, scikit-learn's):
``y`` ``[n]`` holds exactly two distinct values (numbers, strings or bool),
``classes_`` is their sorted array and ``classes_[1]`` is the positive class
(so ``{0, 1}``, ``{-1, 1}`` and ``{False, True}`` all make the larger value
positive); a 2-D ``Y`` ``[n, T]`` holds ``T`` binary tasks with the same two
values in every column, one ranker per column.
"""

from __future__ import annotations

import math
import time
import warnings
import weakref
from numbers import Integral, Real

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from jaxrank._src import native, validation
from jaxrank._src.solvers import dcd
from jaxrank._src.solvers import ssvm as solver
from jaxrank._src.features import (
    IN_PLACE_MIN_ENTRIES,
    Design,
    Intercept,
    LinearFeatures,
    aligned_empty,
    design,
    device_dense,
)
from jaxrank._src.metrics import average_precision
from jaxrank._src.models.base import ItemProblem, Model

# Slots per device of the batched drivers: 32 was the fastest of 8/16/32 in
# bench/sweep.py on 2 CPU cores; the plane caches of the slots (``(cache + 1)
# * dim`` floats each) are kept under this many bytes per device.
DEFAULT_BATCH_SIZE = 32
# On CPU a vmapped batch of fits costs about the sum of its slots at every
# step, and slots whose fits have stopped keep computing while the queue
# drains, so one long fit (large C) makes its whole batch pay for its steps;
# wide batches pay off only when there are many fits to keep the slots busy.
# Measured (README, "Batched model selection"): `jaxrank demo`'s sweeps of 15
# fits ran about 3x faster with 1 slot than with 32; bench/sweep.py's 400
# fits 1.2x (one device) to 2x (two) faster with 32 slots than with 1
# (bench/results/sweep.md). Hence on CPU one slot per
# CPU_FITS_PER_SLOT fits (per device), at most DEFAULT_BATCH_SIZE.
CPU_FITS_PER_SLOT = 16
_SLOT_CACHE_BYTES = 2**28

_F32_MAX = float(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).tiny)

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


# ---------------------------------------------------------------------------
# Host-side helpers (validation, devices, progress).
# ---------------------------------------------------------------------------


def check_positive_float32(value, name):
    """Raise unless ``value`` is a real number that is finite and ``> 0`` in float32.

    Checked after the cast to float32 (the dtype of every fit): ``1e39``
    overflows and ``1e-50`` underflows to 0 there.

    Raises:
        TypeError: not a real number.
        ValueError: not finite and positive in float32.
    """
    if isinstance(value, bool) or not isinstance(value, (Real, np.number)) or isinstance(
            value, complex) or np.iscomplexobj(value):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}.")
    v = float(value)
    with np.errstate(over="ignore", under="ignore"):
        v32 = np.float32(v)
    if not (np.isfinite(v32) and v32 >= _F32_TINY):
        raise ValueError(
            f"{name} must be a finite number > 0 representable in float32 (between "
            f"{_F32_TINY:.3g} and {_F32_MAX:.3g}); got {value!r}."
        )
    return v


def labels_to_tasks(Y, name="y", pos_label=None):
    """Binary tasks from labels, by scikit-learn's ``classes_`` convention.

    The one label rule of every jaxrank estimator and of the CLI: ``y`` holds
    exactly two distinct values (numbers, strings or bool); ``classes_`` is
    their sorted array and ``classes_[1]`` (the larger value) is the positive
    class, unless ``pos_label`` names the positive class (the relevant
    items; the name of scikit-learn's metrics): then ``classes_`` is
    ``[the other label, pos_label]``, so ``classes_[1]`` is always the
    positive class. Continuous targets (non-integer floats) are rejected as
    by every scikit-learn classifier (``check_classification_targets``).

    Args:
        Y: ``[n]`` labels with exactly two distinct values, or ``[n, T]``
            with the same two values in every column (``[n, 1]`` is one task).
        name: argument name for messages.
        pos_label: ``None`` (the larger label is positive) or the label of
            the positive class (one of the two values, compared with ``==``).

    Returns:
        ``(positive [T, n] bool, classes [2], multi_output bool)``;
        ``positive = (Y == classes[1])``.

    Raises:
        ValueError: not 1-D/2-D, no sample or no task column, continuous
            (non-integer float) labels, NaN or infinite labels, a column (or
            ``y``) without exactly two classes, columns with different label
            sets, a ``pos_label`` that is not one of the two labels.
        TypeError: complex labels.
    """
    arr = np.asarray(Y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D [n_samples, n_tasks]; got shape {arr.shape}.")
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} must be real or categorical labels; got complex dtype.")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite labels.")
    cols = arr[:, None] if arr.ndim == 1 else arr
    if cols.shape[0] == 0:
        raise ValueError(f"{name} is empty; got shape {arr.shape}.")
    if cols.shape[1] == 0:
        raise ValueError(f"{name} has no task columns; got shape {arr.shape}.")
    try:
        kind = type_of_target(arr, input_name=name)
    except ValueError:
        kind = None  # e.g. mixed types: reported below by np.unique
    if kind in ("continuous", "continuous-multioutput"):
        raise ValueError(
            f"Unknown label type: {kind}. {name} must hold two discrete classes (the "
            "larger value is the positive class); got non-integer float values "
            f"{np.unique(arr).tolist()[:6]}.")
    classes = None
    positive = []
    for t in range(cols.shape[1]):
        cls = np.unique(cols[:, t])
        where = name if arr.ndim == 1 else f"{name}[:, {t}] (task column {t})"
        if cls.shape[0] != 2:
            raise ValueError(
                ("Only binary classification is supported (one binary task per column "
                 "of a 2-D y). " if cls.shape[0] > 2 else "")
                + f"{where} must contain exactly two classes (positives and negatives); got "
                f"{cls.shape[0]} class{'es' if cls.shape[0] != 1 else ''}: "
                f"{cls.tolist()[:6]}. The positive class is the larger label value."
            )
        if classes is not None and not np.array_equal(cls, classes):
            raise ValueError(
                f"all task columns of {name} must use the same two label values; column 0 "
                f"has {classes.tolist()} and column {t} has {cls.tolist()}."
            )
        classes = cls
    if pos_label is not None:
        classes = _order_classes(classes, pos_label, name)
    for t in range(cols.shape[1]):
        positive.append(cols[:, t] == classes[1])
    return np.stack(positive), classes, arr.ndim == 2


def positive_class_text(est, classes, *, grouped=False):
    """One line saying which class a fit took as relevant (for summaries).

    Args:
        est: the estimator (its ``pos_label`` and, with ``grouped``,
            ``min_relevance`` are read).
        classes: the fit's ``classes_`` (``classes[1]`` is positive).
        grouped: a fit on query groups (relevance grades).

    Returns:
        e.g. ``"positive (relevant) class: 'has3' (pos_label)"`` or ``...:
        1 (the larger label; pos_label chooses another)``.
    """
    if grouped:
        return (f"relevant items: grade >= min_relevance="
                f"{getattr(est, 'min_relevance', 1)!r}")
    pos = classes[1].item() if isinstance(classes[1], np.generic) else classes[1]
    if isinstance(pos, float) and pos.is_integer():  # labels read from files are floats
        pos = int(pos)
    how = ("pos_label" if getattr(est, "pos_label", None) is not None
           else "the larger label; pos_label chooses the other")
    return f"positive (relevant) class: {pos!r} ({how})"


def _order_classes(classes, pos_label, name="y"):
    """``[other, pos_label]`` from the two sorted ``classes`` (``ValueError`` if absent)."""
    # Python equality (no cast: 0.5 is not the label 0, "1" is not 1).
    want = pos_label.item() if isinstance(pos_label, np.generic) else pos_label
    hit = np.array([bool(c == want) for c in classes.tolist()], bool)
    if hit.sum() != 1:
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the two labels of {name}: "
            f"{classes.tolist()}. Pass one of them (the positive, relevant class), or "
            "pos_label=None for the larger one.")
    return classes[::-1].copy() if hit[0] else classes


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


# The ``devices`` parameter of the estimators that shard a fit over devices.
DEVICES_CONSTRAINT = {"devices": [None, Interval(Integral, 1, None, closed="left"), list, tuple]}


def shard_rows(data, devices):
    """A dense :class:`Design` with its rows sharded over ``devices`` (data parallel).

    ``devices``: a tuple of at least one ``jax.Device``; the number of rows of
    ``data`` must be a multiple of ``len(devices)``. The solver's products
    then run on every device's rows and XLA sums the partial planes across
    devices (README, "Data-parallel fits").

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
            "jaxrank.solvers.fit (README, 'Data-parallel fits').")
    if len(set(devs)) != len(devs):
        raise ValueError(f"devices lists a device twice: {list(devs)}.")
    return devs


def choose_batch_size(batch_size, n_fits, dim, n_devices, cache=128):
    """Validate ``batch_size``, or choose it (``None``) for the batched driver.

    ``None`` gives ``DEFAULT_BATCH_SIZE`` slots per device (on a CPU
    backend one slot per ``CPU_FITS_PER_SLOT`` fits of a device, at least
    one), fewer when the ``n_fits`` fits do not fill them (``ceil(n_fits / n_devices)``) or when
    the slots' plane caches (``batch_size * (cache + 1) * dim * 4`` bytes)
    would exceed 256 MB per device (high-dimensional ``X``).

    Raises:
        TypeError: ``batch_size`` is not ``None`` or an int.
        ValueError: ``batch_size < 1``.
    """
    if batch_size is None:
        per_device = -(-int(n_fits) // max(int(n_devices), 1))
        cache = solver.plane_cache_size(cache, dim)
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


# Host-side progress of batched fits: the jitted drivers call the static
# function ``report_progress`` (so a new hook never recompiles them), which
# forwards to the hook installed by ``progress_hook``.
_PROGRESS_HOOKS = []


def report_progress(n_stopped):
    """Forward ``n_stopped`` finished fits to the innermost :func:`progress_hook`."""
    if _PROGRESS_HOOKS:
        _PROGRESS_HOOKS[-1](int(n_stopped))


class progress_hook:
    """Context manager: ``hook(n)`` is called as batches of fits stop."""

    def __init__(self, hook):
        self.hook = hook

    def __enter__(self):
        _PROGRESS_HOOKS.append(self.hook)
        return self

    def __exit__(self, *exc):
        _PROGRESS_HOOKS.remove(self.hook)
        return False


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
    return jax.device_put(np.ascontiguousarray(a, dtype))


# ``data @ W`` as one program (an eager product dispatches each of its
# primitives as a program of its own, each compiled once per process).
design_matmul = jax.jit(lambda data, W: data @ W)


@jax.jit
def _sparse_scores(data, W):
    """``data @ W`` (``[n, T]``) for a sparse float32 design, by the hinge block's
    native CSR row kernel (about 7x faster than XLA's segment sum on CPU)."""
    rows = solver.design_rows(data)
    return jax.vmap(lambda w: dcd.row_dots(rows, w), in_axes=1, out_axes=1)(W)


def training_scores(data, W):
    """``[n, T]`` scores ``data @ W`` of a fitted ``W [d, T]`` (host array)."""
    if (getattr(data, "sparse", False) and getattr(data, "indptr", None) is not None
            and data.dtype == np.float32):
        return np.asarray(_sparse_scores(data, _to_device(W, np.float32)))
    return np.asarray(design_matmul(data, _to_device(W)))

# One jitted program per (model, shapes): C and tol are traced.
fit_one = jax.jit(solver.fit, static_argnames=("model", "max_iter", "callback", "seed"))


class ProgramStore:
    """Compiled single-fit programs kept on disk, keyed by their static facts.

    JAX's persistent compilation cache keys a program by its lowered module,
    so even a cache hit traces the solver in Python and lowers it to MLIR
    first: for a small fit in a fresh process (the CLI) that is most of the
    fit's wall time. This store keys the compiled executable of
    :data:`fit_one` by what determines it instead -- the model (a frozen
    dataclass, by ``repr``), ``max_iter``, the pytree structure, shapes and
    dtypes of the data and problem, the JAX/jaxlib versions, the backend and
    its devices, the CPU's feature flags, ``XLA_FLAGS`` and a digest of
    jaxrank's own source files -- and loads it without tracing, lowering or
    XLA compilation. Fits with a progress callback never use it (a program
    with a host callback cannot be serialised), nor do programs over several
    devices (they run, compiled in the process, without being stored).

    **File format (nothing is unpickled).** One file per program,
    ``<key>.jaxexe``: a magic line, the length of a JSON header, the JSON
    header (the input and output shapes and dtypes, the kept inputs, the
    device and the custom-call targets, checked field by field when read) and
    the executable's raw bytes
    as XLA serialises them (``Client.serialize_executable``). The call's
    pytrees are never stored: the input structure is that of the call's own
    arguments and the output structure is the one the caller gives
    (``out_tree``). A file that is not in this format (an older store's, a
    damaged or a planted one) is ignored and replaced by a new compilation.

    **Trust.** Loading a stored executable runs its code, as with JAX's own
    cache. The store therefore refuses (``PermissionError``) a directory
    that is not owned by the current user or that other users can write to
    (a group or other write bit), and reads only regular files owned by the
    current user that others cannot write to (checked on the open file).
    New files are created with ``O_EXCL`` and moved into place atomically.
    The checks use POSIX owners and modes; where there are none (Windows)
    they are skipped.

    Args:
        directory: path of a directory (created with mode ``0o700`` if
            missing).

    Raises:
        PermissionError: ``directory`` is not owned by the current user or is
            writable by other users.
        OSError: ``directory`` cannot be created.
    """

    _MAGIC = b"jaxrank-program 1\n"

    def __init__(self, directory):
        import os

        self.directory = os.fspath(directory)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        problem = untrusted_directory(self.directory)
        if problem:
            raise PermissionError(problem)
        self._loaded = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _environment():
        import hashlib
        import os
        import platform

        import jaxlib

        h = hashlib.sha256()
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for root, dirs, files in sorted(os.walk(pkg)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".py", ".c")):
                    path = os.path.join(root, f)
                    h.update(os.path.relpath(path, pkg).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
        flags = ""
        try:
            with open("/proc/cpuinfo") as fh:
                flags = next((line for line in fh if line.startswith("flags")), "")
        except OSError:
            flags = platform.processor()
        devs = jax.devices()
        h.update(repr((jax.__version__, getattr(jaxlib, "__version__", ""),
                       jax.default_backend(), devs[0].device_kind, len(devs),
                       bool(jax.config.jax_enable_x64), os.environ.get("XLA_FLAGS", ""),
                       platform.machine(), flags)).encode())
        return h.hexdigest()

    def key(self, static, args, kwargs):
        """Hex key of a program: ``static`` facts plus the avals of the arguments."""
        import hashlib

        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        avals = [(tuple(np.shape(x)), str(jnp.result_type(x)),
                  bool(getattr(x, "weak_type", False))) for x in leaves]
        env = getattr(ProgramStore, "_env", None)
        if env is None:
            env = ProgramStore._env = self._environment()
        devices = sorted({str(d) for x in leaves if isinstance(x, jax.Array)
                          for d in x.devices()})
        return hashlib.sha256(
            repr((env, static, str(tree), avals, devices)).encode()).hexdigest()

    def run(self, lower, static, args, kwargs, *, out_tree):
        """``compiled(*args, **kwargs)`` of the program ``lower()`` lowers.

        ``lower``: no-argument function returning the ``jax.stages.Lowered``
        program; ``static``: ``repr``-able facts that, with the arguments'
        avals, determine the program; ``out_tree``: the pytree structure of
        its result (a program whose result has another structure is not
        stored). A stored executable that cannot be loaded or run is
        replaced by a new compilation.
        """
        import os

        k = self.key(static, args, kwargs)
        path = os.path.join(self.directory, k + ".jaxexe")
        compiled = self._loaded.get(k)
        from_disk = compiled is None
        if from_disk:
            compiled = self._read(path, args, kwargs, out_tree)
        if compiled is not None:
            try:
                # (errors of a bad executable surface when its results are read)
                out = jax.block_until_ready(compiled(*args, **kwargs))
                self._loaded[k] = compiled
                return out
            except Exception:  # a damaged or foreign executable: compile instead
                self._loaded.pop(k, None)
                self.hits -= int(from_disk)
                try:
                    os.remove(path)
                except OSError:
                    pass
        self.misses += 1
        # Compiled with JAX's persistent cache off: an executable that JAX
        # loaded from its cache (or compiled again in a process that had
        # loaded it) does not serialise completely on CPU (jax 0.10.2: the
        # copy fails to run, "Function ... not found").
        compiled = _compile_without_jax_cache(lower)
        if compiled is None:
            compiled = lower().compile()
        else:
            self._write(path, compiled, out_tree)
        self._loaded[k] = compiled
        return compiled(*args, **kwargs)

    # -- the file format ----------------------------------------------------

    @staticmethod
    def _avals_json(avals):
        return [[list(a.shape), str(a.dtype), bool(a.weak_type)] for a in avals]

    @staticmethod
    def _avals_from_json(rows):
        from jax._src import core

        out = []
        for row in rows:
            shape, dtype, weak = row
            if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)
                    and isinstance(dtype, str) and isinstance(weak, bool)):
                raise ValueError("bad aval")
            out.append(core.ShapedArray(tuple(shape), np.dtype(dtype), weak_type=weak))
        return out

    def _header(self, compiled, out_tree):
        """The JSON header of a storable ``compiled`` (``None``: not storable)."""
        from jax._src.interpreters import pxla

        if compiled.out_tree != out_tree or compiled._params.const_args:
            return None
        u = getattr(compiled._executable, "_unloaded_executable", None)
        if not isinstance(u, pxla.UnloadedMeshExecutable):
            return None
        if (u.unordered_effects or u.ordered_effects or u.keepalive or u.host_callbacks
                or u.mut is not None or u.pgle_profiler is not None
                or len(u.device_list) != 1):
            return None
        device = u.device_list[0]
        shardings = list(u.input_shardings) + list(u.output_shardings)
        kinds = {getattr(s, "memory_kind", None) for s in shardings}
        if (not all(isinstance(s, jax.sharding.SingleDeviceSharding)
                    and s.device_set == {device} for s in shardings) or len(kinds) > 1
                or any(lay is not None for lay in u.dispatch_in_layouts)):
            return None
        infos = jax.tree_util.tree_leaves(compiled.args_info)
        if any(i.donated for i in infos) or u.all_args_info is None:
            return None
        calls = self._custom_calls(compiled)
        if calls is None:
            return None
        return {
            "custom_calls": calls,
            "name": str(u.name), "device": int(device.id),
            "memory_kind": kinds.pop() if kinds else None, "committed": bool(u.committed),
            "kept": sorted(int(i) for i in u.kept_var_idx),
            "all_in": self._avals_json(u.all_args_info.in_avals),
            "in": self._avals_json(u.input_avals), "out": self._avals_json(u.output_avals),
        }

    # Custom-call targets a stored program may hold: jaxrank's native kernels
    # (registered by native.load) and jaxlib's LAPACK kernels (set up by
    # _prepare_runtime). Tracing a program sets up what its custom calls need;
    # a stored program is not traced, so a program with any other target is
    # not stored (it might need a set-up this store does not know of).
    _CUSTOM_CALL_PREFIXES = ("jaxrank_", "lapack_")

    @classmethod
    def _custom_calls(cls, compiled):
        """Sorted custom-call targets of ``compiled`` (``None``: one is not allowed)."""
        import re

        text = compiled.as_text() or ""
        calls = sorted(set(re.findall(r'custom_call_target="([^"]+)"', text)))
        if not all(c.startswith(cls._CUSTOM_CALL_PREFIXES) for c in calls):
            return None
        return calls

    @staticmethod
    def _prepare_runtime(calls):
        """Set up what the custom calls ``calls`` of a stored program need to run."""
        if any(c.startswith("jaxrank_") for c in calls):
            native.load()
        if any(c.startswith("lapack_") for c in calls):
            # jaxlib fills its LAPACK function table when a LAPACK call is
            # lowered; without it the kernels call through null pointers.
            from jax._src.lib import lapack

            lapack.prepare_lapack_call("getrf", np.float32)

    def _write(self, path, compiled, out_tree):
        import json
        import os
        import tempfile

        try:
            header = self._header(compiled, out_tree)
            if header is None:
                return
            u = compiled._executable._unloaded_executable
            blob = u.backend.serialize_executable(u.xla_executable)
            head = json.dumps(header, sort_keys=True).encode()
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")  # O_EXCL, 0o600
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(self._MAGIC + len(head).to_bytes(8, "little") + head + bytes(blob))
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
                raise
        except Exception:  # not serialisable or not writable: keep it in memory only
            pass

    @staticmethod
    def _read_trusted(path):
        """Bytes of ``path`` if it is a regular file only the current user can write."""
        import os
        import stat

        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            if hasattr(os, "getuid") and (st.st_uid != os.getuid()
                                          or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
                return None
            return fh.read()

    def _read(self, path, args, kwargs, out_tree):
        import json

        from jax._src import core, stages
        from jax._src.interpreters import pxla
        from jax._src.lib import xla_client

        data = self._read_trusted(path)
        if data is None or not data.startswith(self._MAGIC):
            return None
        try:
            start = len(self._MAGIC) + 8
            n = int.from_bytes(data[len(self._MAGIC):start], "little")
            h = json.loads(data[start:start + n].decode())
            blob = data[start + n:]
            if not isinstance(h, dict) or not blob:
                return None
            all_in = self._avals_from_json(h["all_in"])
            in_avals = self._avals_from_json(h["in"])
            out_avals = self._avals_from_json(h["out"])
            kept, calls = h["kept"], h["custom_calls"]
            if not (isinstance(calls, list) and all(isinstance(c, str) for c in calls)
                    and all(c.startswith(self._CUSTOM_CALL_PREFIXES) for c in calls)):
                return None
            if not (isinstance(kept, list) and all(type(i) is int for i in kept)
                    and [all_in[i] for i in kept] == in_avals and len(set(kept)) == len(kept)
                    and isinstance(h["committed"], bool) and isinstance(h["name"], str)
                    and type(h["device"]) is int
                    and (h["memory_kind"] is None or isinstance(h["memory_kind"], str))):
                return None
            leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))
            if [core.shaped_abstractify(x) for x in leaves] != all_in:
                return None
            if out_tree.num_leaves != len(out_avals):
                return None
            device = {d.id: d for d in jax.devices()}[h["device"]]
            # Register / set up the targets of its custom calls before XLA
            # loads it (nothing is traced on a hit).
            self._prepare_runtime(calls)
            backend = device.client
            devices = xla_client.DeviceList((device,))
            xla_exe = backend.deserialize_executable(blob, executable_devices=devices)
            sharding = jax.sharding.SingleDeviceSharding(device, memory_kind=h["memory_kind"])
            in_shardings = [sharding] * len(in_avals)
            out_shardings = [sharding] * len(out_avals)
            xla_in, xla_out = pxla._get_layouts_from_executable(
                xla_exe, [None] * len(in_avals), [None] * len(out_avals), 0, in_avals,
                out_avals)
            names = tuple(f"arg{i}" for i in range(len(all_in)))
            unloaded = pxla.UnloadedMeshExecutable(
                xla_executable=xla_exe, device_list=devices, backend=backend,
                input_avals=in_avals, input_shardings=in_shardings,
                output_avals=out_avals, output_shardings=out_shardings,
                committed=h["committed"], name=h["name"], unordered_effects=[],
                ordered_effects=[], keepalive=[], host_callbacks=[], kept_var_idx=set(kept),
                mut=None, xla_in_layouts=xla_in,
                dispatch_in_layouts=pxla.get_dispatch_layouts(xla_in, in_shardings, in_avals),
                xla_out_layouts=xla_out,
                all_args_info=pxla.AllArgsInfo(
                    all_in, core.DebugInfo("jit", h["name"], names, None)),
                pgle_profiler=None)
            args_info = in_tree.unflatten([stages.ArgInfo(a, False) for a in all_in])
            compiled = stages.Compiled(unloaded.load(), [], args_info, out_tree,
                                       no_kwargs=False)
        except Exception:  # stale, foreign or damaged file
            return None
        self.hits += 1
        return compiled


def untrusted_directory(path):
    """Why ``path`` cannot hold programs that will be run (``""`` when it can).

    A directory qualifies when it is owned by the current user and no other
    user can write to it (no group or other write bit). POSIX only: where
    there are no owners and modes (Windows) every directory qualifies.

    Args:
        path: an existing directory.

    Returns:
        str: ``""``, or one sentence naming ``path``, its owner or mode and
        the fix.
    """
    import os
    import stat

    if not hasattr(os, "getuid"):
        return ""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot read {path}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.getuid():
        return (f"{path} is owned by another user (uid {st.st_uid}); stored programs "
                "are run, so the directory must be your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"{path} is writable by other users (mode {stat.filemode(st.st_mode)}); "
                f"stored programs are run, so make it private: chmod go-w {path}")
    return ""


def _compile_without_jax_cache(lower):
    """``lower().compile()`` with JAX's persistent cache off for that one compilation."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    was = bool(jax.config.jax_enable_compilation_cache)
    jax.config.update("jax_enable_compilation_cache", False)
    cc.reset_cache()
    try:
        return lower().compile()
    except Exception:
        return None
    finally:
        jax.config.update("jax_enable_compilation_cache", was)
        cc.reset_cache()


# The result structure of every single fit (stored programs keep no pytrees).
_FIT_RESULT_TREE = jax.tree_util.tree_structure(solver.FitResult(*(0,) * 5))

# Installed by use_program_store (the CLI does, next to JAX's compilation cache).
_PROGRAM_STORE = None


def use_program_store(store):
    """Install a :class:`ProgramStore` for single fits (``None`` removes it); returns the old one."""
    global _PROGRAM_STORE
    old, _PROGRAM_STORE = _PROGRAM_STORE, store
    return old


def run_fit_one(model, data, problem, *, C, tol, max_iter, callback=None):
    """:data:`fit_one`, through the installed :class:`ProgramStore` when there is one."""
    store = _PROGRAM_STORE
    if store is None or callback is not None:
        return fit_one(model, data, problem, C=C, tol=tol, max_iter=max_iter,
                       callback=callback)
    # NumPy scalars: jnp.asarray of host values runs (and compiles) a program.
    C, tol = np.float32(np.asarray(C)), np.float32(np.asarray(tol))
    return store.run(
        lambda: fit_one.lower(model, data, problem, C=C, tol=tol, max_iter=max_iter),
        ("fit_one", repr(model), int(max_iter)), (data, problem), {"C": C, "tol": tol},
        out_tree=_FIT_RESULT_TREE)
fit_batch = jax.jit(
    solver.fit_many,
    static_argnames=("model", "max_iter", "batch_size", "devices", "callback", "seed"),
)


# Feature scales the float32 solver can work with (see :func:`check_feature_scale`).
_SCALE_MAX = math.sqrt(_F32_MAX / 1024)  # about 5.8e17: squares and C-weighted planes fit
_SCALE_MIN = 2.0**-50  # about 8.9e-16: squares (1e-30) stay normal float32 numbers
_HARD_MARGIN = 1e6  # C * max ||x||^2 above this: many iterations (close to hard margin)
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
        known = _ROW_NORMS.get(X)
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


# R of the Designs that fit made (weak keys: forgotten with the Design).
_ROW_NORMS = weakref.WeakKeyDictionary()


def remember_row_norm(data, R):
    """Record ``R = max_row_norm(X)`` for the :class:`Design` ``data`` made from ``X``."""
    _ROW_NORMS[data] = float(R)
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


def check_feature_scale(R, C=None, name="X"):
    """Raise unless rows of norm up to ``R`` (and ``C``) fit the float32 solver.

    The solver computes squared row norms (``R^2``), ``C``-weighted planes
    ``C J^T coef`` (norm up to about ``C R``) and their inner products in
    float32: beyond about ``5.8e17`` these overflow (the fit would return
    ``w = 0`` or NaN); below about ``8.9e-16`` the squares lose their
    precision (and vanish below ``1e-19``). Rescaling ``X`` by a constant
    ``1/s`` and ``C`` by ``s^2`` is the same problem (weights ``s w``), so a
    rescaled ``X`` with a matching ``C`` fits; see :func:`warn_unconverged`
    for the scale-free conditioning ``C R^2``.

    Args:
        R: float, ``max_i ||x_i||`` (:func:`max_row_norm`).
        C: optional float, the trade-off (``C R`` is checked too).
        name: argument name for the message.

    Raises:
        ValueError: ``R`` or ``C R`` outside ``[8.9e-16, 5.8e17]`` (the
            message names the range and the fix).
    """
    if R == 0:
        return
    too_big = R > _SCALE_MAX or (C is not None and C * R > _SCALE_MAX)
    if too_big or R < _SCALE_MIN:
        c = "" if C is None else f" and C = {C:.3g}"
        cr = "" if C is None else f" and C * R <= {_SCALE_MAX:.1e}"
        raise ValueError(
            f"{name} has rows of norm up to R = {R:.3g}{c}, too {'large' if too_big else 'small'}"
            f": jaxrank fits in float32, which "
            f"needs {_SCALE_MIN:.1e} <= R <= {_SCALE_MAX:.1e}{cr} (squared norms and "
            "C-weighted sums of rows must neither overflow nor lose their precision). "
            f"Rescale {name} (e.g. sklearn.preprocessing.StandardScaler, or divide {name} by "
            "a constant s and multiply C by s**2: the same problem, with weights s times "
            "larger).")


def _scale_hint(R, C):
    """Words about ``kappa = C R^2``, the scale-free conditioning of a fit."""
    kappa = C * R * R
    hint = f" C * max_i ||x_i||^2 = {kappa:.2g}"
    if kappa > _HARD_MARGIN:
        return hint + (
            " is large: the problem is close to a hard-margin SVM, which needs many iterations "
            "whatever the units of X (rescaling X and C together does not change it): "
            "standardise X or use a smaller C.")
    if kappa < 1 / _HARD_MARGIN:
        return hint + (
            " is tiny: the regulariser dominates and the weights are nearly 0: standardise X "
            "or use a larger C.")
    return hint + "."


def warn_tied_scores(est, S, where, R=None, C=None, *, stacklevel=4):
    """``UserWarning`` for tasks whose training scores are all equal (the model does not rank).

    Args:
        est: the estimator (its class name is in the message).
        S: ``[n, T]`` training scores as ``decision_function`` computes them
            (float32, intercept included: a tiny ``X w`` added to an
            intercept rounds to the intercept).
        where: ``[T, n]`` bool, each task's training samples.
        R, C: optional largest row norm of ``X`` and trade-off: the message
            then says whether ``X`` is outside the float32 range of the
            solver (:func:`check_feature_scale`) or ``C R^2`` tiny (the
            regulariser dominates).
        stacklevel: as in :func:`warnings.warn`.
    """
    S = np.asarray(S)
    tied = [t for t in range(S.shape[1])
            if np.any(where[t]) and np.ptp(S[where[t], t]) == 0]
    if not tied:
        return
    why = ("The features may not separate the classes (e.g. constant features), or be "
           "too small for this C.")
    if R is not None:
        try:
            check_feature_scale(R, C)
            if C is not None and C * R * R < 1 / _HARD_MARGIN:
                why = f"Rows of X have norm up to {R:.3g}:{_scale_hint(R, C)}"
        except ValueError as e:
            why = str(e)
    warnings.warn(
        f"{type(est).__name__}: every training sample gets the same score for "
        f"{len(tied)} of {S.shape[1]} task(s) (e.g. coef_ = 0): the model does not rank. "
        f"{why}",
        UserWarning,
        stacklevel=stacklevel,
    )


# CCCP (the latent models, HOAPSVM) applies its stopping rule only after a convex
# step that reached ``tol``: that step certifies the point returned. A step that
# stopped at ``max_iter`` where the rule would stop is continued instead, warm-started
# at its best iterate, at most this many times per run.
CCCP_RESOLVES = 1


def defer_uncertified_stop(stop, converged, resolves):
    """CCCP's stop, deferred after a convex step that did not reach ``tol``.

    Args:
        stop: ``[K]`` bool, runs whose stopping rule fired at this step.
        converged: ``[K]`` bool, whether this step of each run reached ``tol``.
        resolves: ``[K]`` int64, the deferrals each run has had; updated in place.

    Returns:
        ``[K]`` bool: the runs that stop. A run whose rule fired after an
        unconverged step continues instead while it has had fewer than
        ``CCCP_RESOLVES`` deferrals (see the comment above).
    """
    again = stop & ~converged & (resolves < CCCP_RESOLVES)
    resolves += again
    return stop & ~again


def warn_unconverged(est, res, where=""):
    """Emit ``ConvergenceWarning`` for fits of ``res`` that stopped unconverged.

    The message says what was measured (the worst relative duality gap, the
    iterations, ``C * max_i ||x_i||^2`` when ``est`` records ``_fit_scale =
    (R, C)``, set by :meth:`StructuredSVM.fit`) and the one change most
    likely to help, chosen from those measurements:

    * a non-finite objective (float32 overflow): rescale ``X``;
    * ``C R^2`` above ``1e6`` (close to a hard-margin SVM, whose iterations
      grow with ``C R^2`` whatever the units of ``X``): a smaller ``C``;
    * ``C R^2`` below ``1e-6`` (the weights are nearly 0): a larger ``C`` or
      standardised ``X``;
    * a gap within 10x of ``tol``: ``max_iter`` doubled;
    * otherwise (a gap far from ``tol`` at moderate ``C R^2``, the sign of
      badly scaled features): standardised features, or ``max_iter`` raised.
    """
    conv = np.atleast_1d(np.asarray(res.converged))
    if conv.all():
        return
    obj = np.atleast_1d(np.asarray(res.objective, np.float64))
    dual = np.atleast_1d(np.asarray(res.dual, np.float64))
    with np.errstate(invalid="ignore", over="ignore"):
        gap = (obj - dual) / np.maximum(np.abs(obj), 1e-30)
    bad = np.flatnonzero(~conv)
    finite = np.isfinite(gap[bad])
    worst = bad[np.argmax(np.where(finite, gap[bad], np.inf))]
    steps = np.atleast_1d(np.asarray(getattr(res, "num_steps", est.max_iter)))
    n_steps = int(steps[worst]) if steps.size > worst else int(steps[0])
    scale = getattr(est, "_fit_scale", None)
    kappa = None if scale is None else float(scale[1]) * float(scale[0]) ** 2
    measured = (f"worst relative duality gap {gap[worst]:.2e} after {n_steps} iterations "
                f"(tol={est.tol:g}, max_iter={est.max_iter}")
    measured += ")" if kappa is None else f", C * max_i ||x_i||^2 = {kappa:.2g})"
    if not np.isfinite(gap[worst]):
        advice = ("The objective is not finite (a float32 overflow): rescale X, e.g. with "
                  "sklearn.preprocessing.StandardScaler.")
    elif kappa is not None and kappa > _HARD_MARGIN:
        advice = ("C * max_i ||x_i||^2 is large (close to a hard-margin SVM, slow whatever "
                  "the units of X): use a smaller C.")
    elif kappa is not None and kappa < 1 / _HARD_MARGIN:
        advice = ("C * max_i ||x_i||^2 is tiny (the weights are nearly 0): use a larger C or "
                  "standardise X.")
    elif gap[worst] <= 10 * est.tol:
        advice = f"The gap is close to tol: max_iter={2 * int(est.max_iter)} should reach it."
    else:
        advice = ("Standardise the features (e.g. sklearn.preprocessing.StandardScaler) if "
                  f"their scales differ; else raise max_iter (now {est.max_iter}).")
    warnings.warn(
        f"{type(est).__name__}{where}: {bad.size} of {conv.size} fit(s) stopped at max_iter "
        f"before the relative duality gap reached tol: {measured}; the objective may be up "
        f"to that fraction above the optimum. {advice}",
        ConvergenceWarning,
        stacklevel=3,
    )


def _unpad_extras(extras, T, T_pad, d, d_pad):
    """Drop the padding tasks (leading ``[T_pad]`` axis) of ``_train``'s extras.

    Extras named like fitted attributes (``"w0_"``) that are ``[T, d_pad]``
    arrays are per-task weight vectors: their padding columns are dropped too.
    """
    def tasks(a):
        a = np.asarray(a)
        return a[:T] if T_pad != T and a.ndim >= 1 and a.shape[0] == T_pad else a

    out = {}
    for k, v in extras.items():
        v = jax.tree_util.tree_map(tasks, v)
        if (d_pad != d and k.endswith("_") and isinstance(v, np.ndarray) and v.ndim == 2
                and v.shape[1] == d_pad):
            v = v[:, :d]
        out[k] = v
    return out


# ---------------------------------------------------------------------------
# Estimators.
# ---------------------------------------------------------------------------


class RankerMixin:
    """What every jaxrank ranker shares: labels, scores, predictions, AP score.

    Subclasses set ``coef_ [T, d]``, ``intercept_ [T]``, ``classes_`` and
    ``multi_output_`` in ``fit``; ``decision_function`` is ``X @ coef_.T +
    intercept_``.
    """

    def __getattr__(self, name):
        # Called only when normal lookup fails. A fitted attribute (``coef_``,
        # ``classes_``, ...) of an unfitted estimator is scikit-learn's
        # NotFittedError (an AttributeError: hasattr/getattr defaults still
        # work), so every method that reads one before fit says "call fit".
        if name.endswith("_") and not name.startswith("__") and not any(
                k.endswith("_") and not k.startswith("__") for k in vars(self)):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet (no attribute "
                f"{name!r}). Call 'fit' with appropriate arguments before using this "
                "estimator.")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _validate_X(self, X):
        check_is_fitted(self)
        # X keeps its dtype (no copy of float32 input); design() casts to float32.
        X = validation.check_features(X)
        return validate_data(self, X, accept_sparse="csr", dtype="numeric", reset=False)

    def decision_function(self, X):
        """Scores ``X w + b``; higher ranks first.

        Args:
            X: ``[n_samples, n_features]`` dense array or ``scipy.sparse``
                matrix.

        Returns:
            ``[n_samples]`` float32 scores, or ``[n_samples, n_tasks]`` for a
            model fitted on a 2-D ``y``.

        Raises:
            NotFittedError: before ``fit``.
            ValueError: wrong number of features, NaN/inf or empty ``X``.
        """
        X = self._validate_X(X)
        s = np.asarray(design_matmul(design(X, in_place=True),
                                     _to_device(self.coef_.T, np.float32)))
        s = s + np.asarray(self.intercept_, np.float32)[None, :]
        return s if self.multi_output_ else s[:, 0]

    def predict(self, X):
        """Labels ``classes_[1]`` where :meth:`decision_function` ``> 0``, else ``classes_[0]``.

        For rankers without a learned intercept, ``intercept_`` puts the
        threshold at the midpoint of the two classes' mean training scores.
        """
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def score(self, X, y, sample_weight=None, *, groups=None):
        """Average precision of :meth:`decision_function` on ``(X, y)``.

        With ``groups`` (one query id per sample), the mean over queries of the
        per-query AP (MAP; queries without a positive or without a negative
        are left out). For a model fitted on a 2-D ``y``, the mean AP over
        the task columns.

        Raises:
            ValueError: ``sample_weight`` given, labels that are not this
                model's ``classes_``, no query with both classes.
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the AP score.")
        check_is_fitted(self)
        Y = np.asarray(y)
        Y2 = Y[:, None] if Y.ndim == 1 else Y
        unknown = np.setdiff1d(np.unique(Y2), self.classes_)
        if unknown.size:
            raise ValueError(
                f"y has labels {unknown.tolist()[:6]} that are not among the model's classes_ "
                f"{self.classes_.tolist()}.")
        positive = (Y2 == self.classes_[1]).T  # [T, n]
        s = np.asarray(self.decision_function(X), np.float32)
        s = s[:, None] if s.ndim == 1 else s
        if s.shape[1] != positive.shape[0]:
            raise ValueError(
                f"y has {positive.shape[0]} task column(s); the model was fitted with "
                f"{s.shape[1]}.")
        if groups is not None:
            return float(np.mean([map_score(s[:, t], positive[t], groups)
                                  for t in range(positive.shape[0])]))
        return float(np.mean([average_precision(s[:, t], positive[t])
                              for t in range(positive.shape[0])]))


def map_score(scores, positive, groups):
    """Mean AP over the queries that have a positive and a negative (MAP), host side.

    Args:
        scores: ``[n]`` float scores.
        positive: ``[n]`` bool relevance.
        groups: ``[n]`` integer query ids.

    Returns:
        float MAP.

    Raises:
        ValueError: no query has both a positive and a negative.
    """
    groups = check_groups(groups, np.shape(scores)[0])
    positive = np.asarray(positive, bool)
    _, inv = np.unique(groups, return_inverse=True)
    has_pos = np.bincount(inv, weights=positive) > 0
    has_neg = np.bincount(inv, weights=~positive) > 0
    ok = (has_pos & has_neg)[inv]
    if not ok.any():
        raise ValueError("no query of groups has both a positive and a negative sample.")
    return float(average_precision(np.asarray(scores, np.float32), positive, where=ok,
                                   segments=inv.astype(np.int32)))


def check_groups(groups, n, name="groups"):
    """``[n]`` integer query ids (one per sample), validated."""
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} query ids (one per sample); "
                         f"got shape {g.shape}.")
    if g.dtype.kind not in "iu":
        if g.dtype.kind == "f" and np.all(np.isfinite(g)) and np.all(g == np.round(g)):
            g = g.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integer query ids; got dtype {g.dtype}.")
    return g


class StructuredSVM(RankerMixin, ClassifierMixin, BaseEstimator):
    """Base class of the structured SVM estimators (one fit path for all).

    A subclass defines ``__init__`` (hyperparameters only, no logic),
    ``_parameter_constraints``, ``_default_Cs`` (its grid on its own ``C``
    scale), optionally ``_default_param_grid`` (a dict: other parameters that
    :func:`jaxrank.sweep` cross-validates with ``C`` by default, each mapped to
    a tuple of values, the class default first) and the hooks

    * ``_model(static)``: the frozen structured model, from the static
      facts of the problems (e.g. the most positives of a task);
    * ``_problems(data, positive [M, n], where [M, n], groups)``: the
      ``problem`` pytree (leading ``[M]`` axis) and the static facts;
    * optionally ``_train`` (several solver calls, e.g. the two stages of
      AP-SVM-APPX) and ``_fitted_extras`` (extra fitted attributes).

    Subclasses with a ``devices`` parameter (``None``, an int ``k``: the
    first ``k`` local devices, or a list of ``jax.Device``): with two or more
    devices, a single-task fit shards its samples over them (data parallel:
    rows padded to a multiple of the device count and masked; dense ``X``
    without ``groups``, else ``ValueError``) and a multi-task fit its tasks;
    with fewer tasks than devices (dense ``X``, no ``groups``) the devices
    form a ``problems x samples`` grid: the task axis gets the largest
    divisor of the device count that is at most the number of tasks, the
    sample axis the rest (4 devices, 2 tasks: 2 x 2; 3 tasks: 1 x 4), each
    grid row a queue of tasks on rows sharded over its devices.
    ``None``: one device for a single task, every local device for several.

    Fitted attributes (every subclass): ``coef_ [T, d]``, ``intercept_ [T]``
    (``T = 1`` for a 1-D ``y``), ``classes_``, ``objective_``,
    ``dual_objective_``, ``n_iter_``, ``converged_`` (scalars for a 1-D ``y``,
    ``[T]`` arrays for a 2-D ``Y``), ``n_features_in_``, ``fit_time_``.
    """

    _parameter_constraints = {
        "C": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "verbose": ["boolean"],
        "pos_label": "no_validation",  # checked against the labels by fit
    }
    _default_Cs = (0.01, 0.1, 1.0, 10.0)
    _default_param_grid = {}
    _supports_groups = False
    # How the CLI feeds a data file's qid: column and --edges to this class:
    # ``_groups_param`` is the fit keyword that receives the qid column (None:
    # the class refuses qid files); ``_groups_required`` makes qid mandatory;
    # ``_groups_at_predict`` also passes it to decision_function (one score
    # per group, labels by ``_per_group_labels(y, groups)``); ``_needs_edges``
    # passes ``edges=[m, 2]`` to fit and decision_function.
    _groups_param = None
    _groups_required = False
    _groups_at_predict = False
    _needs_edges = False
    _learns_intercept = False
    _persist = ()  # extra fitted attributes (arrays) written by jaxrank.save

    # -- hooks --------------------------------------------------------------

    def _features(self):
        if self._learns_intercept and getattr(self, "fit_intercept", False):
            return Intercept()
        return LinearFeatures()

    def _model(self, static):
        raise NotImplementedError

    def _problems(self, data, positive, where, groups):
        # The bound on the positives is bucketed too (a static shape of the
        # AP kernels): any true upper bound is exact.
        max_pos = int(np.max(np.sum(positive & where, axis=-1)))
        return ItemProblem(_to_device(positive), _to_device(where)), {
            "max_pos": min(max(data.shape[0], 1), bucket_size(max_pos, PAD_MIN_ROWS))}

    def _train(self, model, data, problems, C, *, single, batch_size=None, devices=None,
               progress=None):
        """Run the fits; returns ``(FitResult [M], extras dict of [M] arrays)``."""
        tol = np.float32(self.tol)
        if single:
            # (Indexing a device array eagerly is a program per shape; on a CPU
            # backend the host view of the array is free.)
            cpu = jax.default_backend() == "cpu"
            one = jax.tree_util.tree_map(
                lambda a: _to_device(np.asarray(a)[0]) if cpu else a[0], problems)
            res = run_fit_one(model, data, one, C=C[0], tol=tol, max_iter=int(self.max_iter),
                              callback=_print_progress if self.verbose else None)
            return jax.tree_util.tree_map(lambda a: np.asarray(a)[None], res), {}
        if not is_device_grid(devices):  # a problems x samples grid is used as is
            devices = resolve_devices(devices)
        M = C.shape[0]
        batch_size = choose_batch_size(batch_size, M, model.dim(data), len(devices),
                                       model.cache)
        res = fit_batch(model, data, problems, C, tol=tol, max_iter=int(self.max_iter),
                        batch_size=batch_size, devices=devices,
                        callback=report_progress if progress else None)
        return res, {}

    def _fitted_extras(self, extras, pick):
        """Set model-specific fitted attributes from ``extras`` (``pick`` per task)."""

    # -- checks ---------------------------------------------------------------

    def _check_params(self):
        self._validate_params()
        check_positive_float32(self.C, "C")
        if not np.float32(self.tol) >= 0 or not np.isfinite(np.float32(self.tol)):
            raise ValueError(f"tol must be a finite number >= 0 in float32; got {self.tol!r}.")

    def _prepare(self, X, y, groups, reset=True):
        """Validate ``(X, y, groups)``; return ``(data, positive [T, n], classes, multi, groups)``."""
        if groups is not None and not self._supports_groups:
            raise ValueError(
                f"{type(self).__name__} does not take groups (query ids); APSVM does "
                "(mean AP over queries).")
        # dtype="numeric": X keeps its dtype here (float32 C-contiguous input is
        # not copied); design() makes the one float32 copy that other input needs.
        X = validation.check_features(X)
        X, Y = validate_data(self, X, y, accept_sparse="csr", dtype="numeric",
                             multi_output=True, reset=reset, y_numeric=False)
        positive, classes, multi = labels_to_tasks(Y, pos_label=getattr(self, "pos_label", None))
        if groups is not None:
            groups = check_groups(groups, X.shape[0])
        # The float32 range of the features (C is checked by fit; jaxrank.sweep
        # fits through this hook too).
        R = max_row_norm(X)
        check_feature_scale(R)
        return remember_row_norm(design(X, in_place=True), R), positive, classes, multi, groups

    # -- fit ------------------------------------------------------------------

    def fit(self, X, y, *, groups=None):
        """Fit the model; with a 2-D ``y``, one ranker per column (one call).

        Args:
            X: ``[n_samples, n_features]`` dense array or ``scipy.sparse``
                matrix (kept sparse), any real dtype (cast to float32).
                Memory: a C-contiguous float32 array (also ``np.memmap``,
                e.g. ``np.load(path, mmap_mode="r")``) is not copied on a CPU
                backend: used as is when 64-byte aligned (memmaps of ``.npy``
                files), and from 2^26 entries (256 MB) up also when not (a
                shifted-row view, :class:`jaxrank.models.Design`; models
                with per-sample hinge terms, such as :class:`BinarySVM`,
                copy that view once); other dense input is converted into
                one float32 copy, in chunks.
                Dense designs of 2^26 entries or more are not padded to a
                shape bucket (:func:`fit_buckets`).
            y: ``[n_samples]`` labels with two distinct values (the larger is
                the positive class, module docstring), or ``[n_samples,
                n_tasks]`` with one binary task per column.
            groups: optional ``[n_samples]`` integer query ids (models with
                query grouping only, e.g. :class:`APSVM`: mean AP over queries).

        Returns:
            self

        Raises:
            ValueError: bad hyperparameters (also out of float32 range), NaN,
                inf or empty ``X``, complex ``X``, mismatched lengths, a ``y``
                (or task column) without exactly two classes, ``groups`` on a
                model without query grouping; rows of ``X`` whose norm (or
                times ``C``) is outside the float32 range of the solver
                (:func:`check_feature_scale`: about ``8.9e-16 <= R`` and ``R,
                C R <= 5.8e17``).
            TypeError: non-numeric ``X``, hyperparameters of the wrong type.

        Warns:
            ConvergenceWarning: a fit stopped at ``max_iter`` before reaching
                ``tol`` (the message gives the gap, ``C max_i ||x_i||^2`` and
                advice: standardise ``X``, a smaller ``C``, more ``max_iter``).
            UserWarning: every training sample of a task gets the same score
                (e.g. ``coef_ = 0``): the model does not rank.

        Scale of ``X``: ``C`` is in units of ``1 / ||x||^2`` (``X / s`` with
        ``C s^2`` is the same problem, weights ``s w``), so the default ``C``
        suits standardised features; the solver's work grows with ``C
        max_i ||x_i||^2``. Rescaling is not automatic: it would not change
        that product (see the README's note on feature scale).
        """
        self._check_params()
        t0 = time.perf_counter()
        devices = self._fit_devices()
        data, positive, classes, multi, groups = self._prepare(X, y, groups)
        (n, d), T = data.shape, positive.shape[0]
        # devices= on a single task: its samples are sharded over the devices;
        # on fewer tasks than devices: a problems x samples grid (device_grid).
        shard = devices is not None and len(devices) > 1 and T == 1
        grid = None
        if devices is not None and T > 1 and not data.sparse and groups is None:
            grid = device_grid(devices, T)
        if shard and (data.sparse or groups is not None):
            raise ValueError(
                f"devices={self.devices!r} shards the samples of a single-task fit, which "
                "needs dense X without groups; got "
                f"{'sparse X' if data.sparse else 'groups'}. Pass devices=None (one device), "
                "or X.toarray() for sparse X.")
        if groups is None:  # query layouts are not padded
            n_pad, d_pad, T_pad = fit_buckets(n, d, T, dense=not data.sparse)
        else:
            n_pad, d_pad, T_pad = n, d, T
        R = max_row_norm(data)
        check_feature_scale(R, float(self.C))
        self._fit_scale = (R, float(self.C))
        if shard or grid is not None:
            # Rows padded to a multiple of the sample axis (masked out by `where`).
            k = len(devices) if shard else len(grid[0])
            n_pad = -(-n_pad // k) * k
            data = shard_rows(pad_design(data.materialized(), n_pad, d_pad),
                              devices if shard else grid)
        else:
            data = pad_design(data, n_pad, d_pad)
        where = np.zeros((T_pad, n_pad), bool)
        where[:T, :n] = True
        positive = np.pad(positive, ((0, T_pad - T), (0, n_pad - n)))
        problems, static = self._problems(data, positive, where, groups)
        model = self._model(static)
        if type(model).hinge_terms is not Model.hinge_terms:
            # The per-sample hinge block reads rows directly: a design used in
            # place (features.ShiftedRows) is copied to plain storage first.
            data = data.materialized()
        if self.verbose:
            print(f"{type(self).__name__}: n={n} d={d} tasks={T} "
                  f"positives={positive[:T].sum(axis=1).tolist()} C={self.C}; "
                  f"{positive_class_text(self, classes, grouped=groups is not None)}", flush=True)
        C = np.full((T_pad,), self.C, np.float32)
        res, extras = self._train(model, data, problems, C, single=(T_pad == 1),
                                  devices=None if shard else (grid or devices))
        res = jax.tree_util.tree_map(lambda a: np.asarray(a)[:T], res)
        extras = _unpad_extras(extras, T, T_pad, d, d_pad)
        self._set_fitted(res, extras, classes, multi, data, positive[:T], where[:T],
                         n_features=d)
        self.fit_time_ = time.perf_counter() - t0
        warn_unconverged(self, res)
        if self.verbose:
            print(f"{type(self).__name__}: {self.n_iter_} iterations, objective "
                  f"{self.objective_}, converged={self.converged_}, {self.fit_time_:.2f} s",
                  flush=True)
        return self

    def _set_solver_attributes(self, res, extras, classes, multi, n_features):
        """The attributes every estimator shares, from a FitResult with a leading [T] axis.

        ``classes_``, ``multi_output_``, ``n_features_in_``, ``n_iter_``,
        ``objective_``, ``dual_objective_``, ``converged_`` (scalars for a
        single task, ``[T]`` arrays otherwise), then the estimator's own
        ``_fitted_extras``.
        """
        self.classes_ = classes
        self.multi_output_ = bool(multi)
        self.n_features_in_ = int(n_features)

        def pick(a, cast=float):
            a = np.asarray(a)
            return a.copy() if multi else cast(a[0])

        self.n_iter_ = pick(res.num_steps, int)
        self.objective_ = pick(res.objective)
        self.dual_objective_ = pick(res.dual)
        self.converged_ = pick(res.converged, bool)
        self._fitted_extras(extras, pick)

    def _set_fitted(self, res, extras, classes, multi, data, positive, where=None, *,
                    n_features=None):
        """Fitted attributes from a FitResult with a leading [T] axis.

        ``where [T, n]`` (default all) marks each task's training samples;
        ``n_features`` (default ``data.shape[1]``) is the number of real
        features when ``data`` has padding columns (their weights are 0 and
        are dropped). Warns (:func:`warn_tied_scores`) when a task's training
        scores, as ``decision_function`` computes them, are all equal.
        """
        if where is None:
            where = np.ones(positive.shape, bool)
        d = data.shape[1] if n_features is None else int(n_features)
        W = np.asarray(res.w, np.float32)
        Wx = W[:, : data.shape[1]]  # weights of the columns of data (padding included)
        S = training_scores(data, Wx.T)  # [n, T] scores, no intercept
        if isinstance(self._features(), Intercept):
            self.coef_, self.intercept_ = W[:, :d].copy(), W[:, -1].copy()
        else:
            self.coef_ = W[:, :d].copy()
            # No learned intercept: threshold predict at the midpoint of the
            # classes' mean training scores (scores are shift invariant).
            mid = [0.5 * (S[positive[t] & where[t], t].mean()
                          + S[~positive[t] & where[t], t].mean()) for t in range(W.shape[0])]
            self.intercept_ = -np.asarray(mid, np.float32)
        self._set_solver_attributes(res, extras, classes, multi, d)
        # Scores as decision_function computes them (float32, intercept
        # included): a model whose training scores all tie does not rank.
        S = S.astype(np.float32) + np.asarray(self.intercept_, np.float32)[None, :]
        if any(np.any(where[t]) and np.ptp(S[where[t], t]) == 0 for t in range(S.shape[1])):
            scale = getattr(self, "_fit_scale", None)
            if scale is None:  # e.g. estimators with their own fit: R of the data's rows
                R = self._row_norm(data)
                scale = (R, None if R is None else float(self.C))
            warn_tied_scores(self, S, where, *scale)
        return self

    def _fit_devices(self):
        """The devices of the ``devices`` parameter (a tuple), or ``None`` when unset."""
        devices = getattr(self, "devices", None)
        return None if devices is None else resolve_devices(devices)

    @staticmethod
    def _row_norm(data):
        """``max_i ||x_i||`` over the feature rows of ``data`` (a design, or data with a
        design ``.X``: candidates, graph nodes); ``None`` for other data."""
        rows = data.X if isinstance(getattr(data, "X", None), Design) else data
        return max_row_norm(rows) if isinstance(rows, Design) else None

    def _scores(self, W, data):
        """``[n, M]`` training-set scores of weights ``W [M, dim]`` (for validation)."""
        feats = self._features()
        return jax.vmap(lambda w: feats(w, data), out_axes=1)(jnp.asarray(W))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = True
        # Binary rankers: a 1-D y has two classes (no one-vs-rest); a 2-D Y
        # is one binary task per column (multilabel indicator).
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.multi_label = True
        return tags
