"""Self-paced learning (self_paced=True) vs plain CCCP for HOAP-SVM on Cora.

Every C of ``HOAPSVM._default_Cs``, defaults otherwise (HOB-SVM start), Cora as
``bench/convergence.py`` loads it (the training half, its citation edges, task
Neural_Networks). Prints one row per (C, mode): the kept objective (16) (the
lowest of ``cccp_objectives_``), CCCP steps, whether every convex step
converged, training AP, whether all scores tie, and the fit time (the first
fit of each mode includes compilation, so a warm-up fit runs first).

Usage (repository root):
    python bench/results/self_paced_hoap_measure.py [--Cs 0.05,0.5]
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--Cs", default=None)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, "bench"))
    from sklearn.metrics import average_precision_score

    import jaxrank
    from convergence import load_cora

    d = load_cora(Path(HERE).parent / "shared" / "data", ["Neural_Networks"])
    X, y, edges = d.X, d.y, d.extra["edges"]
    Cs = ([float(c) for c in args.Cs.split(",")] if args.Cs
          else list(jaxrank.HOAPSVM._default_Cs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for spl in (False, True):  # warm-up: compile both modes
            jaxrank.HOAPSVM(C=Cs[0], self_paced=spl, cccp_max_iter=1,
                            max_iter=10).fit(X, y, edges=edges)
    print("| C | self-paced | kept objective (16) | CCCP steps | all steps converged | "
          "training AP | tied | time (s) |")
    print("|---:|---|---:|---:|---|---:|---|---:|")
    for C in Cs:
        for spl in (False, True):
            est = jaxrank.HOAPSVM(C=C, self_paced=spl)
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                est.fit(X, y, edges=edges)
            wall = time.perf_counter() - t0
            s = np.asarray(est.decision_function(X, edges=edges), np.float64)
            kept = float(np.min(np.asarray(est.cccp_objectives_)))
            tied = bool(np.ptp(s) == 0)
            print(f"| {C:g} | {'yes' if spl else 'no'} | {kept:.6g} | "
                  f"{int(np.ravel(est.n_cccp_iter_)[0])} | "
                  f"{'yes' if np.all(est.converged_) else 'NO'} | "
                  f"{average_precision_score(y, s):.4f} | {'yes' if tied else 'no'} | "
                  f"{wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
