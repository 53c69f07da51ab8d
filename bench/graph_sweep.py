"""Cross-validating a graph model: ``jaxrank.sweep(edges=...)`` vs a loop of single fits.

HOB-SVM on the 20 Newsgroups threads (``bench/high_order.py``'s data: five
groups, one ranking task per group, posts linked when their normalised
subject lines match; many small components): every (task, C, fold) fit of
a 2-fold CV over a C grid, twice:

* **sweep**: ``jaxrank.sweep(X, Y, model="hob-svm", edges=E, cv=2,
  refit=False)``, all fits in one compiled call; its folds keep each thread
  (connected component) whole;
* **loop**: the same folds (``SweepResult.val_masks``), one
  ``HOBSVM(C).fit(X[tr], y[tr], edges=side.take(E, tr))`` per (task, C,
  fold) on the fold's own subgraph, scored on the validation posts and their
  subgraph (what a user would write without ``sweep``).

Reported: wall time of each (first run, compilation included, and the
median of the repeats after it), the largest difference of validation AP and
of the relative objective between the two. Each fit stops at ``tol =
1e-4`` or ``max_iter``.

Run: ``python bench/graph_sweep.py [--repeats 2] [--tasks 5]`` (needs
``../shared/data/20newsgroups``); writes ``bench/results/graph_sweep.md``.
"""

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jaxrank  # noqa: E402
from _machine import device_line  # noqa: E402
from high_order import load_threads  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "graph_sweep.md"
CS = [1e-4, 1e-3, 1e-2]
PARAMS = {"eta": 1.0, "max_iter": 1000}


def run_sweep(X, Y, E):
    t0 = time.perf_counter()
    res = jaxrank.sweep(X, Y, model="hob-svm", edges=E, Cs=CS, cv=2, refit=False, **PARAMS)
    return res, time.perf_counter() - t0


def run_loop(X, Y, E, masks):
    side, n = jaxrank.HOBSVM.side_input, X.shape[0]
    T, F = masks.shape[:2]
    ap = np.zeros((T, len(CS), F))
    obj = np.zeros_like(ap)
    t0 = time.perf_counter()
    for t in range(T):
        for g, C in enumerate(CS):
            for f in range(F):
                val = masks[t, f]
                est = jaxrank.HOBSVM(C=C, **PARAMS).fit(
                    X[~val], Y[~val, t], edges=side.take(E, ~val, n))
                obj[t, g, f] = est.objective_
                ap[t, g, f] = est.score(X[val], Y[val, t], edges=side.take(E, val, n))
    return ap, obj, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2, help="timed runs after the first")
    ap.add_argument("--tasks", type=int, default=5, help="groups ranked (1-5)")
    ap.add_argument("--output", default=str(OUT))
    args = ap.parse_args()
    print(device_line(), flush=True)
    X, y, E = load_threads()["train"]
    Y = (y[:, None] == np.arange(args.tasks)[None, :]).astype(int)
    print(f"{X.shape[0]} posts, {len(E)} edges, {Y.shape[1]} tasks, C grid {CS}", flush=True)
    sweeps, loops = [], []
    for r in range(1 + args.repeats):
        res, ts = run_sweep(X, Y, E)
        l_ap, l_obj, tl = run_loop(X, Y, E, res.val_masks)
        sweeps.append(ts)
        loops.append(tl)
        print(f"run {r}: sweep {ts:.1f} s, loop {tl:.1f} s", flush=True)
    d_ap = float(np.max(np.abs(res.val_score - l_ap)))
    d_obj = float(np.max(np.abs(res.objective / l_obj - 1)))
    warm_s, warm_l = statistics.median(sweeps[1:]), statistics.median(loops[1:])
    lines = [
        "# Cross-validating HOB-SVM: `sweep(edges=...)` vs a loop of fits",
        "",
        f"`python bench/graph_sweep.py --repeats {args.repeats} --tasks {args.tasks}`; "
        f"{device_line()}; {platform.processor() or platform.machine()}.",
        "",
        f"20 Newsgroups threads (train split): {X.shape[0]} posts, {len(E)} edges; "
        f"{Y.shape[1]} one-vs-rest tasks x {len(CS)} C ({CS}) x 2 folds = "
        f"{res.n_fits} fits; eta = {PARAMS['eta']}, max_iter = {PARAMS['max_iter']}.",
        "",
        "| | sweep (one call) | loop of fits | loop / sweep |",
        "| --- | ---: | ---: | ---: |",
        f"| first run (compiles) | {sweeps[0]:.1f} s | {loops[0]:.1f} s | "
        f"{loops[0] / sweeps[0]:.2f} |",
        f"| median of {args.repeats} more | {warm_s:.1f} s | {warm_l:.1f} s | "
        f"{warm_l / warm_s:.2f} |",
        "",
        f"Largest difference, sweep vs loop: validation AP {d_ap:.2e}, relative objective "
        f"{d_obj:.2e}; {int(res.converged.sum())}/{res.converged.size} sweep fits converged.",
        "",
    ]
    Path(args.output).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
