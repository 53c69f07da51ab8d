"""Spread of a fit's iteration count and time over row orders of the same data.

A fit that ends by coordinate ascent (``BinarySVM``'s hinge block, and the hinge
block of any model with per-sample hinge terms) visits the samples in a random
order drawn from a fixed key, so the same data with its rows permuted follows
another trajectory and stops after another number of iterations. One fit per
case therefore says little about whether one version of jaxrank is faster than
another: this script fits each case on ``--orders`` row orders (order 0 is
the file's own), and reports per case the iterations and fit times of every
order and their medians. Run it once per version (``PYTHONPATH=<other tree>``
selects the other version) and compare the medians; ``bench/compare.py``'s
single-order figures are the first column.

Cases (``bench/training.py``'s data and splits): ``page-blocks`` (bundled,
standardised), ``reuters`` (``../shared/data/reuters_moneyfx``), each with the
estimators and C of ``--cases``.

    python bench/order_spread.py
    PYTHONPATH=/path/to/other/checkout python bench/order_spread.py --out /tmp/old.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import jaxrank  # noqa: E402
from _machine import device_line  # noqa: E402
from convergence import cpu_name  # noqa: E402
from training import load_datasets  # noqa: E402

DEFAULT_CASES = "reuters:BinarySVM:100,page-blocks:BinarySVM:10,reuters:APSVM:0.01"
DATASET_NAMES = {"page-blocks": "page-blocks0 (bundled)",
                 "reuters": "reuters money-fx (sparse tf-idf)"}


def parse_cases(text):
    """``"dataset:Estimator:C,..."`` -> list of ``(dataset, estimator, C)``."""
    out = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3 or parts[0] not in DATASET_NAMES:
            raise SystemExit(f"--cases: expected dataset:Estimator:C with dataset in "
                             f"{sorted(DATASET_NAMES)}, got {item!r}")
        if not hasattr(jaxrank, parts[1]):
            raise SystemExit(f"--cases: jaxrank has no estimator {parts[1]!r}")
        out.append((parts[0], parts[1], float(parts[2])))
    return out


def commit_of(path):
    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=DEFAULT_CASES,
                   help=f"dataset:Estimator:C, comma-separated (default {DEFAULT_CASES})")
    p.add_argument("--orders", type=int, default=10, help="row orders per case (default 10)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed fits per order after the first (default 3; the median is kept)")
    p.add_argument("--out", help="write the results as JSON here (refuses an existing file)")
    args = p.parse_args(argv)
    if args.orders < 1 or args.repeats < 1:
        raise SystemExit("--orders and --repeats must be >= 1")
    if args.out and Path(args.out).exists():
        raise SystemExit(f"--out {args.out}: file exists; give another path")
    cases = parse_cases(args.cases)
    data = {name: (X, y) for name, X, y, _, _ in
            load_datasets({c[0] for c in cases})}
    tree = Path(jaxrank.__file__).resolve().parent.parent
    machine = f"CPU: {cpu_name()}; {device_line()}"
    print(f"jaxrank from {tree} at {commit_of(tree)}\n{machine}")
    results = []
    for dataset, est_name, C in cases:
        key = DATASET_NAMES[dataset]
        if key not in data:
            raise SystemExit(f"dataset {dataset!r} not found (../shared/data)")
        X, y = data[key]
        iters, times = [], []
        for k in range(args.orders):
            perm = (np.arange(X.shape[0]) if k == 0
                    else np.random.default_rng(k).permutation(X.shape[0]))
            Xk, yk = X[perm], y[perm]
            # BinarySVM at liblinear's objective, as in training.py (every version has it)
            kw = {"pos_weight": 1.0} if est_name == "BinarySVM" else {}
            est = getattr(jaxrank, est_name)(C=C, **kw)
            est.fit(Xk, yk)  # compiles on the first order
            ts = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                est.fit(Xk, yk)
                ts.append(time.perf_counter() - t0)
            iters.append(int(np.max(est.n_iter_)))
            times.append(float(np.median(ts)))
        row = dict(dataset=key, estimator=est_name, C=C, iterations=iters, fit_s=times,
                   median_iterations=float(np.median(iters)),
                   median_fit_s=float(np.median(times)))
        results.append(row)
        print(f"{key} {est_name} C={C:g}: iterations {iters} (median {np.median(iters):g}); "
              f"fit ms {[round(1e3 * t, 1) for t in times]} (median "
              f"{1e3 * np.median(times):.1f})", flush=True)
    if args.out:
        out = dict(tree=str(tree), commit=commit_of(tree), machine=machine, orders=args.orders,
                   cases=results)
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
