"""CCCP start of the latent models: ``init="centroid"`` vs ``init="random"``.

On digit bags without instance labels (``make_bags`` of ``bench/latent.py``:
100 bags of 10 of scikit-learn's bundled ``load_digits``; targets 3 and 8,
bag seeds 0 and 1), fits LatentAPSVM (C = 100 and 10), LatentSSVM (C = 100)
and LatentSVM (C = 1) with ``n_init=3``, ``cccp_max_iter=10``, ``tol=1e-3``,
``max_iter=1000``, ``random_state=0`` under both starts and prints, per
setting, the norm of the kept ``coef_`` (0: CCCP stalled at ``w = 0``), the
training AP, the kept objective, the final objective of every
initialisation and the fit time. Writes ``bench/results/latent_init.md``.

    python bench/latent_init.py          # about 3 min on 2 idle cores
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score

import jaxrank

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import device_line  # noqa: E402
from latent import load_digit_features, make_bags  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "latent_init.md"
SETTINGS = ((jaxrank.LatentAPSVM, 100.0), (jaxrank.LatentAPSVM, 10.0),
            (jaxrank.LatentSSVM, 100.0), (jaxrank.LatentSVM, 1.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", default=str(OUT),
                    help=f"results file (default {OUT.relative_to(OUT.parents[2])})")
    args = ap.parse_args()
    print(device_line(), flush=True)
    X, labels, _ = load_digit_features()
    lines = ["| target | bag seed | model | C | init | kept norm of coef_ | training AP | "
             "kept objective | objective per initialisation | fit s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    stalls = {"random": 0, "centroid": 0}
    cmp = {"lower": 0, "equal": 0, "higher": 0}
    for target in (3, 8):
        for seed in (0, 1):
            idx, bags, y, _ = make_bags(labels, target, 100, 10, seed=seed)
            Xb = X[idx]
            for cls, C in SETTINGS:
                kept = {}
                for init in ("random", "centroid"):
                    kw = {} if cls is jaxrank.LatentSVM else {"inference": "greedy"}
                    m = cls(C=C, n_init=3, init=init, cccp_max_iter=10, tol=1e-3,
                            max_iter=1000, random_state=0, **kw)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        m.fit(Xb, y, bags=bags)
                    dt = time.perf_counter() - t0
                    norm = float(np.linalg.norm(m.coef_))
                    stalls[init] += norm == 0
                    kept[init] = float(m.objective_)
                    ap = average_precision_score(y, m.decision_function(Xb, bags=bags))
                    row = (f"| {target} | {seed} | {cls.__name__} | {C:g} | {init} | {norm:.3f} | "
                           f"{ap:.3f} | {m.objective_:.4g} | "
                           f"{', '.join(f'{v:.4g}' for v in m.init_objectives_)} | {dt:.1f} |")
                    print(row, flush=True)
                    lines.append(row)
                a, b = kept["centroid"], kept["random"]
                cmp["equal" if abs(a - b) <= 1e-4 * abs(b) else "lower" if a < b else "higher"] += 1
    n = 4 * len(SETTINGS)
    summary = (f"Kept model at w = 0: random {stalls['random']} of {n}, centroid "
               f"{stalls['centroid']} of {n}. Kept objective with the centroid start: lower in "
               f"{cmp['lower']}, equal in {cmp['equal']}, higher in {cmp['higher']}.")
    print(summary)
    Path(args.output).write_text("# CCCP start: centroid vs random (`python bench/latent_init.py`)\n\n"
                   + device_line() + "\n\n" + "\n".join(lines) + "\n\n" + summary + "\n")


if __name__ == "__main__":
    main()
