"""Table 1 of Mohapatra et al. (2014) on real data: test AP of Binary SVM, AP-SVM, AP-SVM-APPX.

Data: 20 Newsgroups, 10 groups as 10 one-vs-rest ranking tasks on one feature
matrix (the paper: 10 PASCAL VOC action classes). Training: 800 posts of the
bydate train split; test: 2,000 posts of the bydate test split; tf-idf with
2,000 terms fitted on the training posts (dense float32). Same loader as
``bench/sweep.py``.

For every model, C is chosen per task by 5-fold stratified CV (validation AP)
with ``jaxrank.model_selection.sweep`` (all task x C x fold fits in one
compiled call), the best C refit on all training posts (one vmapped call),
and the test AP reported per task and as the mean.

* Binary SVM: ``BinarySVM(pos_weight=1)`` (hinge, unweighted, regularised intercept),
  C in 0.1, 1, 10,
  at most 300 iterations.
* AP-SVM: ``APSVM``, C in 1 ... 1000.
* AP-SVM-APPX: ``APSVMApprox`` with k = 25 %, 50 %, 75 % (paper's k), C in
  3, 30, 300, 3000, ``C_binary`` = the median CV-chosen C of the binary SVM (the
  first stage is that binary SVM without intercept, at most 300 iterations), at
  most ``max_iter=300`` second-stage iterations.

The iteration caps keep the run under 10 minutes on 2 cores; fits that stop at
a cap (the largest C of a grid, mostly) are counted in the converged column
(their certified gap is then above ``tol``). The APPX sweeps run on one core
(``APSVMApprox`` runs both stages on the default device, whatever ``devices``
says).

    python bench/table1.py           # about 5 minutes on 2 CPU cores
    python bench/table1.py --quick   # smoke run: 300 posts, 3 tasks, small grids
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import jax
import numpy as np
from sklearn.metrics import average_precision_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import load_news, one_vs_rest

from jaxrank.model_selection import sweep

OUT = Path(__file__).resolve().parent / "results" / "table1.md"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--output", default=None,
                   help=f"write the table here (default {OUT}; --quick: not written)")
    p.add_argument("--n-train", type=int, default=800)
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 300 training posts, 3 tasks, 2-3 C values per model, "
                   "APPX k = 50 %% only")
    args = p.parse_args()
    if args.output is None and not args.quick:
        args.output = str(OUT)
    t_all = time.perf_counter()
    n_train = 300 if args.quick else args.n_train
    Xtr, ytr, Xte, yte, names = load_news(n_train=n_train, n_test=2000)
    T = len(names)
    Ytr, Yte = one_vs_rest(ytr, T), one_vs_rest(yte, T)
    if args.quick:  # three tasks
        T, names = 3, names[:3]
        Ytr, Yte = Ytr[:, :T], Yte[:, :T]
    grids = {"svm": [0.1, 1, 10], "apsvm": [1, 3, 10, 30, 100, 300, 1000],
             "appx": [3, 30, 300, 3000], "k": (0.25, 0.5, 0.75)}
    if args.quick:
        grids = {"svm": [0.1, 1], "apsvm": [10, 100, 1000], "appx": [30, 300], "k": (0.5,)}
    print(f"20news: train {Xtr.shape}, test {Xte.shape}, {T} tasks", flush=True)

    runs = []  # (label, SweepResult, seconds)

    def run(label, **kw):
        t0 = time.perf_counter()
        res = sweep(Xtr, Ytr, cv=5, random_state=0, task_names=names, verbose=True, **kw)
        dt = time.perf_counter() - t0
        runs.append((label, res, dt))
        test = [average_precision_score(Yte[:, t], res.best_estimators[t].decision_function(Xte))
                for t in range(T)]
        print(f"{label}: chosen C {res.best_C.tolist()}, mean test AP {np.mean(test):.4f}, "
              f"{dt:.0f} s", flush=True)
        return res, test

    tests = {}
    svm, tests["Binary SVM"] = run("Binary SVM", model="svm", Cs=grids["svm"],
                                   pos_weight=1.0, max_iter=300)
    _, tests["AP-SVM"] = run("AP-SVM", model="apsvm", Cs=grids["apsvm"])
    c_binary = float(np.median(svm.best_C))
    easy = {}
    for k in grids["k"]:
        label = f"APPX k={int(k * 100)}%"
        res, tests[label] = run(label, model="apsvm-appx", Cs=grids["appx"], k=k,
                                C_binary=c_binary, max_iter=300, binary_max_iter=300)
        easy[label] = np.mean([e.n_easy_ for e in res.best_estimators])
    total = time.perf_counter() - t_all

    cols = list(tests)
    lines = [
        "# Table 1 shape on real data (`bench/table1.py`)",
        "",
        f"20 Newsgroups, {T} groups one-vs-rest ({T} ranking tasks on one feature matrix); "
        f"train {Xtr.shape[0]} posts (bydate train), test {Xte.shape[0]} posts (bydate "
        f"test), {Xtr.shape[1]} tf-idf terms. C per task by 5-fold stratified CV "
        f"(validation AP) with `jaxrank.model_selection.sweep`, refit on all training "
        f"posts. APPX: C_binary = {c_binary:g} (median CV-chosen C of the binary SVM), "
        "max_iter 300 (first stage 300); Binary SVM max_iter 300. Test AP in %.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU "
        f"cores, jax {jax.__version__}. Total time {total:.0f} s.",
        "",
        "| task | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for t, name in enumerate(names):
        lines.append(f"| {name} | " + " | ".join(f"{100 * tests[c][t]:.2f}" for c in cols)
                     + " |")
    lines.append("| **mean** | " + " | ".join(f"**{100 * np.mean(tests[c]):.2f}**"
                                              for c in cols) + " |")
    lines += [
        "",
        "| model | C grid | chosen C per task | CV fits | CV fits converged | "
        "sweep + refit time (s) | mean kept easy samples (constraints) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, res, dt in runs:
        lines.append(
            f"| {label} | {[float(f'{c:g}') for c in res.Cs]} | "
            f"{', '.join(f'{c:g}' for c in res.best_C)} | {res.n_fits} | "
            f"{int(res.converged.sum())}/{res.converged.size} | {dt:.0f} | "
            f"{easy.get(label, float('nan')):.0f} |".replace("| nan |", "| - |")
        )
    lines += ["", "Reproduce: `python bench/table1.py` (writes this file)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    main()
