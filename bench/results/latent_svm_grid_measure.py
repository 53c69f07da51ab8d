"""Which ``J`` and ``c`` the inner CV of ``LatentSVM`` picks on the MIL sets.

For each MIL set of ``../shared/data`` (instances standardised, as
``bench/convergence.py`` loads them), one ``jaxrank.sweep`` over
``LatentSVM._default_Cs`` and the settings ``J`` in {balanced, balanced*0.3,
balanced*0.1} x ``c`` in {0, 0.1, 0.3} (3-fold stratified CV over bags, fold
seed 0, ``LatentSVM(random_state=0, max_outer_iter=100)``, no refit). Prints,
per set, the best mean validation AP over bags of each setting (over ``C``),
the chosen (``C``, setting), the unconverged fits, and a tally: how often each
setting is the best or within 0.01 of the best. Writes a markdown table
(``--out``, default ``bench/results/latent_svm_grid.md``).

Usage (repository root):
    python bench/results/latent_svm_grid_measure.py [--sets mil:musk1,animals:fox]
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[2]
SETS = ["mil:musk1", "mil:musk2", "mil:elephant", "mil:protein", "mil:ucsb_breast_cancer",
        "mil:corel_dogs", "mil:birds_brown_creeper", "animals:fox", "animals:tiger",
        "animals:elephant"]
GRID = {"J": ["balanced", "balanced*0.3", "balanced*0.1"], "c": [0.0, 0.1, 0.3]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--out", default=str(HERE / "bench" / "results" / "latent_svm_grid.md"))
    args = ap.parse_args()
    sys.path.insert(0, str(HERE / "bench"))
    import jaxrank
    from convergence import load_dataset, machine_lines

    settings = [(J, c) for J in GRID["J"] for c in GRID["c"]]
    head = ["set"] + [f"J={J}, c={c:g}" for J, c in settings] + ["chosen (C, J, c)",
                                                                   "unconverged", "s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    best_count = np.zeros(len(settings), int)
    near_count = np.zeros(len(settings), int)
    t_all = time.perf_counter()
    for name in args.sets.split(","):
        d = load_dataset(name, HERE.parent / "shared" / "data", None)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = jaxrank.sweep(d.X, d.y, bags=d.extra["bags"], cv=3, random_state=0,
                              model=jaxrank.LatentSVM(random_state=0, max_outer_iter=100),
                              param_grid=GRID, refit=False)
        dt = time.perf_counter() - t0
        mean = r.mean_val_score[0].reshape(len(settings), -1)  # [S, G]
        per = mean.max(axis=1)
        b = int(np.argmax(r.mean_val_score[0]))
        best_count[int(np.argmax(per))] += 1
        near_count += per >= per.max() - 0.01
        p = r.best_params[0]
        unconv = int((~r.converged).sum())
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in per)
                     + f" | ({r.Cs[b]:g}, {p['J']}, {p['c']:g}) | {unconv}/{r.converged.size}"
                     f" | {dt:.0f} |")
        print(lines[-1], flush=True)
    lines.append("| best on (sets) | " + " | ".join(map(str, best_count)) + " | | | |")
    lines.append("| within 0.01 of the best (sets) | " + " | ".join(map(str, near_count))
                 + " | | | |")
    text = ["# LatentSVM: J and c chosen by inner CV on the MIL sets", "",
            *[f"- {h}" for h in machine_lines()],
            f"- Command: `python bench/results/latent_svm_grid_measure.py "
            f"{' '.join(sys.argv[1:])}`; total {time.perf_counter() - t_all:.0f} s",
            "- Cells: mean validation AP over bags (3-fold CV over bags, seed 0), the best "
            f"over C in {list(jaxrank.LatentSVM._default_Cs)}; instances standardised; "
            "`LatentSVM(random_state=0, max_outer_iter=100)`.", "", *lines, ""]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(lines[-2:]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
