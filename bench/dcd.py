"""DCD kernel benchmark: a jitted dual coordinate descent solver vs liblinear.

Problem: BinarySVM's objective (= ``LinearSVC(loss="hinge", dual=True)``
with ``intercept_scaling=1``: the intercept is a regularised constant feature)

    F(w) = 1/2 ||w||^2 + C sum_i max(0, 1 - y_i z_i^T w),   z_i = [x_i, 1]

solved by a prototype loop around ``jaxrank._src.solvers.dcd.dcd_epoch``: the whole
solve is one jitted ``lax.while_loop``; every iteration draws a fresh random
order (``random_order``), runs one kernel call (liblinear's shrinking loop,
at most ``--budget`` x m coordinate visits, pass tolerance ``pg_tol``), then
checks the duality gap ``(P_best - D) / P_best`` (``P`` at the current ``w``,
``D = sum alpha - 1/2 ||w||^2``); it stops at ``gap <= 1e-4``. ``pg_tol``
starts at 1 and drops 10x whenever a call ends with liblinear's own test
satisfied but the gap is still too big.

Reported per dataset and C (medians over ``--repeats`` runs with different
keys, interleaved with liblinear):

* ours: time of the jitted solve (rows already on the device) and end to end
  from the NumPy/SciPy matrix (``hinge_rows`` + solve); passes; objective and
  gap certified in float64 (``P(w)`` and the dual at the returned ``alpha``
  with ``w(alpha)`` recomputed in float64); the same solve without shrinking.
* liblinear: ``LinearSVC(loss="hinge", dual=True, intercept_scaling=1)`` at
  the largest ``tol`` in 1e-1, 3e-2, ..., 1e-6 whose objective is within
  0.1 % of the optimum (checked against our certified lower bound, so it is
  within 0.1 % of the true optimum); its time (``fit``), iterations and
  objective; time ratio ours / liblinear.
* per-coordinate cost of the C kernel vs the XLA ``lax.fori_loop`` path, and
  the per-call overhead of the FFI custom call vs a ``jax.pure_callback`` for
  X of 4e5 x 100 float32.

    python bench/dcd.py                 # all datasets, C in 0.01..100 (~10 min)
    python bench/dcd.py --quick         # page-blocks only
    python bench/dcd.py --out bench/results/dcd.md
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax import lax
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training import load_datasets

from jaxrank._src.solvers import dcd

TOL = 1e-4
CS = (0.01, 0.1, 1.0, 10.0, 100.0)
LIB_TOLS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 1e-6)


# --------------------------------------------------------------------------
# The prototype solver
# --------------------------------------------------------------------------


class SolveState(NamedTuple):
    w: jax.Array
    alpha: jax.Array
    active: dcd.ActiveSet
    key: jax.Array
    pg_tol: jax.Array
    p_best: jax.Array
    w_best: jax.Array
    gap: jax.Array
    epochs: jax.Array
    calls: jax.Array
    done: jax.Array


@functools.partial(jax.jit, static_argnames=("dim", "shrink", "budget"))
def solve(rows, labels, upper, key, *, dim, shrink=True, budget=5, max_calls=100_000):
    """min 1/2||w||^2 + sum_i u_i max(0, 1 - y_i z_i^T w) to relative gap TOL."""
    m = labels.shape[0]
    q = dcd.sq_norms(rows)

    def body(s):
        key, sub = jax.random.split(s.key)
        order = dcd.random_order(sub, m)
        if shrink:
            w, alpha, active, st = dcd.dcd_epoch(
                s.w,
                s.alpha,
                rows,
                labels,
                upper,
                order,
                sq_norms=q,
                n_epochs=10_000,
                active=s.active,
                pg_tol=s.pg_tol,
                max_visits=budget * m,
            )
            passes, conv = st.n_epochs, st.converged
        else:
            w, alpha = dcd.dcd_epoch(
                s.w, s.alpha, rows, labels, upper, order, sq_norms=q, n_epochs=budget
            )
            active, passes, conv = s.active, jnp.int32(budget), jnp.bool_(False)
        ww = w @ w
        p = 0.5 * ww + jnp.sum(
            upper * jnp.maximum(0, 1 - labels * dcd.row_dots(rows, w))
        )
        d = jnp.sum(alpha) - 0.5 * ww
        better = p < s.p_best
        p_best = jnp.where(better, p, s.p_best)
        w_best = jnp.where(better, w, s.w_best)
        gap = (p_best - d) / p_best
        done = gap <= TOL
        pg_tol = jnp.where(conv & ~done, 0.1 * s.pg_tol, s.pg_tol)
        return SolveState(
            w,
            alpha,
            active,
            key,
            pg_tol,
            p_best,
            w_best,
            gap,
            s.epochs + passes,
            s.calls + 1,
            done,
        )

    zeros = jnp.zeros((dim,), jnp.float32)
    inf = jnp.float32(jnp.inf)
    s0 = SolveState(
        zeros,
        jnp.zeros((m,), jnp.float32),
        dcd.all_active(m),
        key,
        jnp.float32(1.0),
        inf,
        zeros,
        inf,
        jnp.int32(0),
        jnp.int32(0),
        jnp.bool_(False),
    )
    return lax.while_loop(lambda s: ~s.done & (s.calls < max_calls), body, s0)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def with_bias(X):
    if sp.issparse(X):
        return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr").astype(np.float64)
    return np.hstack([X, np.ones((X.shape[0], 1))]).astype(np.float64)


def primal64(Z, y, C, w):
    return 0.5 * w @ w + C * np.maximum(0, 1 - y * (Z @ w)).sum()


def dual64(Z, y, C, alpha):
    a = np.clip(np.asarray(alpha, np.float64), 0, C)  # feasible point
    wa = Z.T @ (a * y)
    return a.sum() - 0.5 * wa @ wa


def lib_fit(X, y, C, tol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LinearSVC(
            C=C,
            loss="hinge",
            dual=True,
            tol=tol,
            max_iter=1_000_000,
            intercept_scaling=1.0,
        ).fit(X, y)


def lib_objective(clf, Z, y, C):
    return primal64(Z, y, C, np.r_[clf.coef_[0], clf.intercept_[0]])


def timeit(fn):
    t0 = time.perf_counter()
    out = fn()
    jax.block_until_ready(out)
    return time.perf_counter() - t0, out


def header():
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            check=False,
            text=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except OSError:
        commit = "?"
    return [
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; commit {commit}",
        f"- command: `python bench/dcd.py {' '.join(sys.argv[1:])}`",
        f"- jax {jax.__version__}, numpy {np.__version__}, python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs ({platform.machine()}), load average at start "
        f"{os.getloadavg()[0]:.1f} (shared VM: compare ratios within this run)",
        f"- native kernel loaded: {dcd.native_available()}",
    ]


# --------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------


def bench_solver(datasets, Cs, repeats, budget, lines):
    lines += [
        "## Solve to relative duality gap <= 1e-4 vs liblinear at 0.1 % of the optimum",
        "",
        "ours = jitted solve (rows on device); e2e = from the NumPy/SciPy matrix (hinge_rows + "
        "solve); liblinear = `LinearSVC(...).fit` at the tol in the table (the largest whose "
        "objective is within 0.1 % of the optimum). Objective and gap of ours certified in float64 "
        "(gap = (P(w) - D(alpha)) / P(w)). Ratio = ours e2e / liblinear. Medians of "
        f"{repeats} interleaved runs. No shrinking: the same loop with `active=None` (exactly "
        "`--budget` passes per kernel call), one run, stopped at ~5x the time with shrinking "
        "('>': not converged by then).",
        "",
        "| dataset | C | ours s | e2e s | passes | objective | gap (f64) | no shrinking: s (passes) "
        "| lib tol | lib s | lib iters | lib objective | lib vs opt | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines[-6:]), flush=True)
    for name, X, ytr, _, _ in datasets:
        y = np.where(ytr > 0, 1.0, -1.0)
        Z = with_bias(X)
        dim = X.shape[1] + 1
        y32 = jnp.asarray(y, jnp.float32)
        rows = dcd.hinge_rows(X, bias=1.0)
        for C in Cs:
            u = jnp.full(y.shape, C, jnp.float32)

            def ours(k, shrink=True, max_calls=100_000):
                return solve(
                    rows,
                    y32,
                    u,
                    jax.random.key(k),
                    dim=dim,
                    shrink=shrink,
                    budget=budget,
                    max_calls=max_calls,
                )

            def e2e(k):
                r = dcd.hinge_rows(X, bias=1.0)
                yy = jnp.asarray(np.where(ytr > 0, 1.0, -1.0), jnp.float32)
                return solve(
                    r,
                    yy,
                    jnp.full(yy.shape, C, jnp.float32),
                    jax.random.key(k),
                    dim=dim,
                    budget=budget,
                )

            jax.block_until_ready(ours(0))  # compile
            res = ours(0)
            # certified optimum bracket from a solve
            d_ours = dual64(Z, y, C, res.alpha)
            # liblinear tolerance: the largest within 0.1 % of the optimum (>= d_ours)
            lib_tol, f_lib, clf = None, None, None
            for t in LIB_TOLS:
                clf = lib_fit(X, ytr, C, t)
                f_lib = lib_objective(clf, Z, y, C)
                if f_lib <= (1 + 1e-3) * d_ours:
                    lib_tol = t
                    break
            t_o, t_e, t_l, passes, gaps, objs, iters, duals = ([] for _ in range(8))
            for r in range(repeats):
                dt, out = timeit(lambda: ours(r + 1))
                t_o.append(dt)
                passes.append(int(out.epochs))
                w = np.asarray(out.w_best, np.float64)
                p = primal64(Z, y, C, w)
                objs.append(p)
                duals.append(dual64(Z, y, C, out.alpha))
                gaps.append((p - duals[-1]) / p)
                t_e.append(timeit(lambda: e2e(r + 1))[0])
                if lib_tol is not None:
                    dt, clf = timeit(lambda: lib_fit(X, ytr, C, lib_tol))
                    t_l.append(dt)
                    iters.append(int(clf.n_iter_))
            med = lambda v: float(np.median(v))
            # without shrinking: one run, capped at ~5x the time with shrinking
            jax.block_until_ready(ours(0, False, 3))
            per_call = timeit(lambda: ours(0, False, 3))[0] / 3
            cap = max(3, int(5 * med(t_o) / per_call))
            t_n, out = timeit(lambda: ours(1, False, cap))
            no_shrink = (
                f"{t_n:.4f} ({int(out.epochs)})"
                if bool(out.done)
                else (f"> {t_n:.2f} (gap {float(out.gap):.0e} after {int(out.epochs)})")
            )
            opt_lo = max([d_ours] + duals)  # certified lower bound on the optimum
            if lib_tol is None:
                lib_cells = "none reached | | | | |"
                ratio = ""
            else:
                lib_cells = (
                    f"{lib_tol:g} | {med(t_l):.4f} | {med(iters):.0f} | {f_lib:.6g} | "
                    f"{(f_lib - opt_lo) / opt_lo:+.1e} |"
                )
                ratio = f"{med(t_e) / med(t_l):.2f}x"
            row = (
                f"| {name.split(' (')[0]} | {C:g} | {med(t_o):.4f} | {med(t_e):.4f} | "
                f"{med(passes):.0f} | {med(objs):.6g} | {max(gaps):.2e} | "
                f"{no_shrink} | {lib_cells} {ratio} |"
            )
            lines.append(row)
            print(row, flush=True)
    lines.append("")


def bench_per_coordinate(datasets, lines):
    lines += [
        "## Per-coordinate cost: C kernel vs XLA `lax.fori_loop` path",
        "",
        "One call of `dcd_epoch` (no shrinking, C = 1, from alpha = 0 then warm), jitted; ns per "
        "coordinate visit (dot product + update when the step is nonzero). C: 5 passes per call, "
        "median of 5 calls; XLA: 1 pass (`_xla_epoch`, what non-CPU platforms run), median of 3. "
        "All operands are arguments of the jitted function.",
        "",
        "| dataset | m | nnz / row | C ns / coord | XLA ns / coord | XLA / C |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, X, ytr, _, _ in datasets:
        m = X.shape[0]
        rows = dcd.hinge_rows(X, bias=1.0)
        q = dcd.sq_norms(rows)
        y = jnp.asarray(np.where(ytr > 0, 1.0, -1.0), jnp.float32)
        u = jnp.ones((m,), jnp.float32)
        w = jnp.zeros((X.shape[1] + 1,), jnp.float32)
        a = jnp.zeros((m,), jnp.float32)
        order = dcd.random_order(jax.random.key(0), m)
        # every operand is a jit argument (closed-over arrays would be constants
        # that XLA specialises the loop on)
        f_c = jax.jit(
            lambda r, w, a, y, u, o, q: dcd.dcd_epoch(
                w, a, r, y, u, o, sq_norms=q, n_epochs=5
            )
        )
        f_x = jax.jit(
            lambda r, w, a, y, u, o, q: dcd._xla_epoch(
                w, a, r, y, u, o, q, None, n_epochs=1
            )[:2]
        )
        ops = (y, u, order, q)
        w1, a1 = jax.block_until_ready(f_c(rows, w, a, *ops))
        ts = [timeit(lambda: f_c(rows, w1, a1, *ops))[0] for _ in range(5)]
        c_ns = np.median(ts) / (5 * m) * 1e9
        jax.block_until_ready(f_x(rows, w1, a1, *ops))
        ts = [timeit(lambda: f_x(rows, w1, a1, *ops))[0] for _ in range(3)]
        x_ns = np.median(ts) / m * 1e9
        nnz = X.nnz / m if sp.issparse(X) else X.shape[1]
        row = (
            f"| {name.split(' (')[0]} | {m} | {nnz:.1f} | {c_ns:.1f} | {x_ns:.0f} | "
            f"{x_ns / c_ns:.0f}x |"
        )
        lines.append(row)
        print(row, flush=True)
    lines.append("")


def bench_call_overhead(lines, m=400_000, d=100):
    lines += [
        f"## Per-call overhead for X of {m:g} x {d} float32 ({m * d * 4 / 1e6:.0f} MB)",
        "",
        "Median of 10 jitted calls, rows already on the device. `pure_callback` no-op: a "
        "`jax.pure_callback` receiving (X, w) and returning w (what a ctypes call behind a "
        "pure_callback would pay before doing any work). FFI, no terms: `dcd_epoch` with all "
        "upper = 0 (the kernel only scans `order`). FFI, one pass: a full DCD pass (C = 1).",
        "",
        "| call | ms / call |",
        "|---|---:|",
    ]
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.standard_normal((m, d), dtype=np.float32))
    rows = dcd.hinge_rows(X, bias=1.0)
    w = jnp.zeros((d + 1,), jnp.float32)
    a = jnp.zeros((m,), jnp.float32)
    y = jnp.asarray(np.where(rng.random(m) < 0.5, 1.0, -1.0), jnp.float32)
    q = dcd.sq_norms(rows)
    order = dcd.random_order(jax.random.key(0), m)

    def noop(X, w):
        return np.asarray(w)

    f_cb = jax.jit(
        lambda X, w: jax.pure_callback(
            noop,
            jax.ShapeDtypeStruct(w.shape, w.dtype),
            X,
            w,
            vmap_method="expand_dims",
        )
    )
    # rows are jit arguments: a closed-over array would become a constant of the program
    f_0 = jax.jit(
        lambda rows, w, a: dcd.dcd_epoch(
            w, a, rows, y, jnp.zeros_like(a), order, sq_norms=q
        )
    )
    f_1 = jax.jit(
        lambda rows, w, a: dcd.dcd_epoch(
            w, a, rows, y, jnp.ones_like(a), order, sq_norms=q
        )
    )
    for label, f, args in [
        ("pure_callback no-op (copies its operands)", f_cb, (X, w)),
        ("FFI `dcd_epoch`, no terms", f_0, (rows, w, a)),
        ("FFI `dcd_epoch`, one pass", f_1, (rows, w, a)),
    ]:
        jax.block_until_ready(f(*args))
        ts = [timeit(lambda: f(*args))[0] for _ in range(10)]
        lines.append(f"| {label} | {np.median(ts) * 1e3:.2f} |")
        print(lines[-1], flush=True)
    lib = dcd._load_native()
    if lib is not None:
        lib.jaxrank_dcd_last_rows_ptr.restype = ctypes.c_void_p
        same = lib.jaxrank_dcd_last_rows_ptr() == rows.X.unsafe_buffer_pointer()
        lines.append("")
        lines.append(
            f"Zero copy: the kernel saw X at the address of the JAX array: {same}."
        )
    lines.append("")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="page-blocks only")
    ap.add_argument("--Cs", default=",".join(f"{c:g}" for c in CS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--budget", type=int, default=5, help="coordinate visits per kernel call / m"
    )
    ap.add_argument("--out", default=None, help="also write the markdown here")
    ap.add_argument(
        "--sections",
        default="solver,coord,overhead",
        help="comma-separated subset to run",
    )
    args = ap.parse_args(argv)
    Cs = [float(c) for c in args.Cs.split(",")]
    lines = ["# DCD kernel vs liblinear (bench/dcd.py)", ""] + header() + [""]
    print("\n".join(lines), flush=True)
    datasets = load_datasets(args.quick)
    sections = args.sections.split(",")
    if "solver" in sections:
        bench_solver(datasets, Cs, args.repeats, args.budget, lines)
    if "coord" in sections:
        bench_per_coordinate(datasets, lines)
    if "overhead" in sections:
        bench_call_overhead(lines)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    main()
