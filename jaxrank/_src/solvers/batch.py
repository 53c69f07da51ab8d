"""The batched driver :func:`fit_many`: ``M`` fits as work queues of ``vmap``-ed slots."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jax import lax

from jaxrank._src.solvers.ssvm import (
    FitResult,
    SolverState,
    _cache,
    _check_w0,
    _dtype,
    _hinge_setup,
    _search_start,
    fit,
    init_state,
    state_result,
    step,
)
from jaxrank._src.solvers.settings import Solver, as_solver


class _Queue(NamedTuple):
    slots: SolverState  # [B] batched states
    pos: jax.Array  # [B] int32 problem of each slot; M = idle
    next: jax.Array  # [] int32 next problem to load
    out: FitResult  # [M] results
    restart: jax.Array  # [B] bool: the slot was refilled (start from the fresh state)


def _fit_queue(model, data, problems, C, *, solver, batch_size, num_problems, callback,
               w0=None):
    """``M`` fits in one ``lax.while_loop`` over ``batch_size`` slots (one device).

    A queue of one slot runs its fits one after the other (:func:`_fit_in_turn`).
    """
    dtype = _dtype(data)
    C = jnp.asarray(C, dtype)
    M = C.shape[0]
    B = min(int(batch_size), M)
    num = jnp.asarray(M if num_problems is None else num_problems, jnp.int32)
    if B == 1:
        return _fit_in_turn(model, data, problems, C, num, solver=solver, callback=callback,
                            w0=w0)
    dim = model.dim(data)
    key = jax.random.key(solver.seed)
    first_prob = jax.tree_util.tree_map(lambda a: a[0], problems)
    m, sq = _hinge_setup(model, data, first_prob, C[0], dtype)
    one_fresh = init_state(dim, dtype, _cache(model, solver, dim), m,
                           _search_start(model, first_prob))
    fresh = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), one_fresh)

    def one(s, prob, c, start):
        return step(s, model, data, prob, c, solver=solver, sq_norms=sq, key=key, w0=start)

    def body(q):
        slots = q.slots
        # Slots refilled by the previous body start their new fit from the
        # fresh state, written into those slots only, before this step reads
        # the plane cache (a select over all slots, or any write after the
        # step's reads of the cache, makes XLA copy every slot's cache at
        # every iteration), one slot at a time (a scatter into all slots at
        # once takes its updates as a full-size broadcast of the fresh state,
        # written anew at every iteration).
        rows = jnp.nonzero(q.restart, size=B, fill_value=0)[0]

        def restart(j, slots):
            return jax.tree_util.tree_map(
                lambda f, s: lax.dynamic_update_index_in_dim(s, f, rows[j], 0), one_fresh, slots)

        slots = lax.fori_loop(0, jnp.sum(q.restart, dtype=jnp.int32), restart, slots)
        idx = jnp.minimum(q.pos, M - 1)
        prob = jax.tree_util.tree_map(lambda a: a[idx], problems)
        slots = jax.vmap(one)(slots, prob, C[idx], None if w0 is None else w0[idx])
        stopped = slots.done & (q.pos < M)
        res = jax.vmap(lambda s: state_result(s, solver.tol))(slots)
        dest = jnp.where(stopped, q.pos, M)
        out = jax.tree_util.tree_map(lambda o, r: o.at[dest].set(r, mode="drop"), q.out, res)
        # Refill the stopped slots with the next problems, in order.
        new = q.next + jnp.cumsum(stopped) - 1
        pos = jnp.where(stopped, jnp.where(new < num, new, M), q.pos)
        n_stopped = jnp.sum(stopped, dtype=jnp.int32)
        if callback is not None:
            lax.cond(n_stopped > 0, lambda k: jax.debug.callback(callback, k),
                     lambda k: None, n_stopped)
        return _Queue(slots, pos.astype(jnp.int32), q.next + n_stopped, out, stopped)

    first = jnp.arange(B, dtype=jnp.int32)
    empty = FitResult(
        w=jnp.zeros((M, dim), dtype),
        objective=jnp.zeros((M,), dtype),
        dual=jnp.zeros((M,), dtype),
        num_steps=jnp.zeros((M,), jnp.int32),
        converged=jnp.zeros((M,), bool),
    )
    q0 = _Queue(fresh, jnp.where(first < num, first, M), jnp.asarray(B, jnp.int32), empty,
                jnp.zeros((B,), bool))
    q = lax.while_loop(lambda q: jnp.any(q.pos < M), body, q0)
    return q.out


def _fit_in_turn(model, data, problems, C, num, *, solver, callback, w0):
    """A queue of one slot: the ``M`` fits one after the other, each its own :func:`fit`.

    Each fit is its own ``lax.while_loop`` inside a ``lax.map``, as in a
    loop of single fits; a queue's refill and result write at every
    iteration would copy the slot's state. Problems at or after ``num``
    are not fitted (zero results).
    """
    M = C.shape[0]
    dim = model.dim(data)
    dtype = _dtype(data)
    empty = FitResult(w=jnp.zeros((dim,), dtype), objective=jnp.zeros((), dtype),
                      dual=jnp.zeros((), dtype), num_steps=jnp.zeros((), jnp.int32),
                      converged=jnp.zeros((), bool))

    def one(i):
        def run(_):
            res = fit(model, data, jax.tree_util.tree_map(lambda a: a[i], problems), C=C[i],
                      solver=solver, w0=None if w0 is None else w0[i])
            res = FitResult(res.w.astype(dtype), res.objective.astype(dtype),
                            res.dual.astype(dtype), res.num_steps.astype(jnp.int32),
                            res.converged.astype(bool))
            if callback is not None:
                jax.debug.callback(callback, jnp.asarray(1, jnp.int32))
            return res

        return lax.cond(i < num, run, lambda _: empty, None)

    return lax.map(one, jnp.arange(M, dtype=jnp.int32))


def fit_many(
    model,
    data,
    problems: Any,
    C,
    *,
    solver: Solver | None = None,
    batch_size: int = 16,
    devices: tuple | None = None,
    callback: Callable | None = None,
    w0=None,
) -> FitResult:
    r"""``M`` independent fits of :func:`fit` in one call: work queues, one per device.

    A work queue ("continuous batching"): each loop iteration is one
    :func:`step` ``vmap``-ed over ``batch_size`` slots; a slot whose fit stops
    writes its :class:`FitResult` and loads the next problem from ``w = 0``.
    Each fit is the same sequence of iterates as :func:`fit` alone (up to
    float rounding of batched products); the cost is about ``sum(iterations)
    / batch_size`` batched steps, not ``max`` per batch as for a ``vmap`` of
    whole fits. The problems are ordered by decreasing ``C`` (iterations grow
    with ``C``: long fits first, so the queues end with short ones), dealt
    round-robin to ``devices`` and each device runs its own queue
    (``jax.shard_map``, no communication). On a CPU, ``k`` devices are ``k``
    cores: ``jax.config.update("jax_num_cpu_devices", k)`` before JAX's first
    computation.

    Args:
        model: a structured model (static), as in :func:`fit`.
        data: shared data of every fit (replicated on every device).
        problems: pytree of arrays with a leading axis ``[M]``.
        C: ``[M]`` float trade-offs ``> 0``.
        solver: :class:`jaxrank.solvers.Solver` of every fit (``None``: the
            defaults), as in :func:`fit`.
        batch_size: static number of slots per device (``>= 1``; capped at
            the number of problems per device).
        devices: static tuple of devices to shard the problems over; ``None``
            or one device runs a single queue on the default device. A
            tuple of ``D_p`` tuples of ``D_s`` devices (a problems x samples
            grid): the problems are dealt to the ``D_p`` grid rows, and each
            row's queue runs on its ``D_s`` devices with ``data`` sharded
            over them (the caller shards the rows on ``Mesh(grid,
            ("devices", "samples"))``, ``PartitionSpec("samples", None)``;
            XLA partitions the products, the problem axis is manual). Call
            it under ``jax.jit`` then (with ``devices`` static), as the
            estimators do: eagerly, ``jax.shard_map`` refuses the sample-sharded
            data.
        callback: optional static host function ``(n_stopped) -> None``,
            called through ``jax.debug.callback`` with the number of fits that
            stopped in a loop iteration (when it is ``> 0``).
        w0: optional ``[M, dim]`` float warm starts, one per problem (see
            :func:`fit`).

    Returns:
        :class:`FitResult` with a leading ``[M]`` axis, in problem order.

    Raises:
        ValueError: ``C`` not a non-empty ``[M]`` array, a leaf of
            ``problems`` without the leading ``[M]`` axis, ``batch_size < 1``,
            a device grid with more rows than problems,
            ``w0`` not of shape ``[M, dim]``, and the errors of :func:`fit`.
    """
    solver = as_solver(solver).for_model(model)
    dtype = _dtype(data)
    C = jnp.asarray(C, dtype)
    if C.ndim != 1 or C.shape[0] < 1:
        raise ValueError(f"C must be a non-empty [M] array; got shape {C.shape}.")
    M = C.shape[0]
    for leaf in jax.tree_util.tree_leaves(problems):
        if jnp.shape(leaf)[:1] != (M,):
            raise ValueError(
                f"every leaf of problems must have the leading axis [M] = [{M}] of C; got a "
                f"leaf of shape {jnp.shape(leaf)}.")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size!r}.")
    if w0 is not None:
        w0 = _check_w0(w0, (M, model.dim(data)), dtype)
    order = jnp.argsort(-C, stable=True).astype(jnp.int32)
    kw = dict(solver=solver, callback=callback)
    grid = None if devices is None else np.asarray(devices, dtype=object)
    if grid is not None and grid.ndim == 2:
        # problems x samples: rows of the grid run separate queues, each row's
        # devices share the (sample-sharded) data of its fits.
        if grid.shape[0] > M:
            raise ValueError(f"a devices grid of {grid.shape[0]} problem rows needs at least "
                             f"as many problems; got M = {M}.")
        D = grid.shape[0]
    else:
        D = 1 if devices is None else min(len(devices), M)  # no idle devices
        grid = None
    if D <= 1 and grid is None:
        res = _fit_queue(model, data, jax.tree_util.tree_map(lambda a: a[order], problems),
                         C[order], batch_size=batch_size, num_problems=None,
                         w0=None if w0 is None else w0[order], **kw)
        return jax.tree_util.tree_map(lambda r: jnp.zeros_like(r).at[order].set(r), res)
    from jax.sharding import Mesh, PartitionSpec

    per = -(-M // D)  # problems per device (the last ones padding)
    slot = jnp.arange(per * D, dtype=jnp.int32)
    deal = jnp.where(slot < M, order[jnp.minimum(slot, M - 1)], 0)
    deal = deal.reshape(per, D).T  # [D, per]: device d gets order[d], order[d + D], ...
    count = jnp.sum((slot < M).reshape(per, D), axis=0).astype(jnp.int32)  # [D]
    local_problems = jax.tree_util.tree_map(lambda a: a[deal], problems)

    def local(probs, c, num, starts, data):
        res = _fit_queue(model, data, jax.tree_util.tree_map(lambda a: a[0], probs), c[0],
                         batch_size=batch_size, num_problems=num[0],
                         w0=None if starts is None else starts[0], **kw)
        return jax.tree_util.tree_map(lambda r: r[None], res)

    spec = PartitionSpec("devices")
    data_spec = jax.tree_util.tree_map(lambda _: PartitionSpec(), data)
    # Only the problem axis is manual; on a grid XLA partitions the samples axis.
    mesh = (Mesh(np.asarray(devices[:D]), ("devices",)) if grid is None
            else Mesh(grid, ("devices", "samples")))
    res = jax.shard_map(
        local, mesh=mesh, in_specs=(spec, spec, spec, spec, data_spec), out_specs=spec,
        axis_names={"devices"}, check_vma=False,
    )(local_problems, C[deal], count, None if w0 is None else w0[deal], data)
    dest = jnp.where(slot.reshape(per, D).T < M, deal, M).reshape(-1)
    return jax.tree_util.tree_map(
        lambda r: jnp.zeros((M,) + r.shape[2:], r.dtype)
        .at[dest].set(r.reshape((-1,) + r.shape[2:]), mode="drop"),
        res,
    )
