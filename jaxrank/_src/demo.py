"""``jaxrank demo``: the mission on bundled real data, sized for about a minute on 2 CPU cores.

On each demo dataset of :data:`jaxrank.datasets.DEMO_DATASETS` (small real
imbalanced KEEL/UCI sets chosen by a rule fixed before any model was run,
see ``jaxrank/datasets/data/README.md``): a stratified 70/30 split and
features standardised on the training part. The binary SVM, AP-SVM and the
ROC-area SVM choose ``C`` by ``cv``-fold cross-validation (validation AP) on
their own default grids (``Cs="auto"``), one :func:`jaxrank.sweep` per
model and dataset; every dataset is zero-padded to one shape (the largest
training part, the widest feature set; padding rows are excluded by
``where``), so each model compiles once for all datasets. KernelRank picks
its bandwidth on its validation split.
The table gives the test AP per dataset and model and each model's number of
wins (ties shared).
"""

from __future__ import annotations

import time

import numpy as np


def _prepare(names, seed):
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from jaxrank import datasets

    parts = []
    for name in names:
        X, y = datasets.load_keel(name, return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y,
                                              random_state=seed)
        sc = StandardScaler().fit(Xtr)
        parts.append((name, sc.transform(Xtr).astype(np.float32), ytr > 0,
                      sc.transform(Xte).astype(np.float32), yte > 0))
    return parts


def _padded(Xtr, ytr, shape):
    """One dataset's training part zero-padded to ``shape``; ``where [1, n]`` marks its rows."""
    n, d = shape
    X = np.zeros((n, d), np.float32)
    X[: Xtr.shape[0], : Xtr.shape[1]] = Xtr
    Y = np.zeros((n, 1), np.int8)
    Y[: len(ytr), 0] = ytr
    where = np.zeros((1, n), bool)
    where[0, : len(ytr)] = True
    return X, Y, where


def run_demo(*, seed=0, cv=3, devices=None, quiet=False, datasets=None, out=print):
    """Run the demo and print its table; returns the exit status 0.

    Args:
        seed: split and fold seed.
        cv: folds of the C search.
        devices: devices to shard the sweeps over (``None``: all local ones).
        quiet: print the table only: no progress bars (one bar per model over
            the datasets otherwise) and no summary lines (datasets, fits and
            times).
        datasets: comma-separated subset of the demo datasets (default all).
        out: print function.

    Raises:
        ValueError: an unknown dataset name.
    """
    from tqdm.auto import tqdm

    import jaxrank
    from jaxrank.metrics import average_precision

    t_start = time.perf_counter()
    names = list(jaxrank.datasets.DEMO_DATASETS)
    if datasets:
        chosen = [s.strip() for s in str(datasets).split(",") if s.strip()]
        bad = [s for s in chosen if s not in names]
        if bad:
            raise ValueError(f"--datasets: unknown {bad}; the demo datasets are {names}.")
        names = chosen
    parts = _prepare(names, seed)
    say = (lambda *a, **k: None) if quiet else out
    shape = (max(p[1].shape[0] for p in parts), max(p[1].shape[1] for p in parts))
    say(f"{len(parts)} bundled real datasets (KEEL/UCI, CC BY 4.0), 70/30 stratified split, "
        f"features standardised; C by {cv}-fold CV (validation AP) on each model's own grid:")
    for name, Xtr, ytr, Xte, yte in parts:
        say(f"  {name:34s} train {len(ytr):5d} ({int(ytr.sum()):3d} pos)  test {len(yte):4d} "
            f"({int(yte.sum()):3d} pos)  {Xtr.shape[1]:2d} features")
    models = [("svm", "BinarySVM"), ("apsvm", "APSVM"), ("auc-svm", "AUCSVM")]
    test_ap = {}
    timing = {}
    for key, label in models:
        t0 = time.perf_counter()
        chosen, n_fits = [], 0
        for name, Xtr, ytr, Xte, yte in tqdm(parts, desc=label, unit="dataset", leave=False,
                                             disable=quiet):
            X, Y, where = _padded(Xtr, ytr, shape)
            res = jaxrank.sweep(X, Y, model=key, cv=cv, where=where, random_state=seed,
                                refit="joint", devices=devices, progress=False)
            est = res.best_estimators[0]
            Xp = np.zeros((Xte.shape[0], shape[1]), np.float32)
            Xp[:, : Xte.shape[1]] = Xte
            test_ap[name, label] = float(average_precision(est.decision_function(Xp), yte))
            chosen.append(float(res.best_C[0]))
            n_fits += res.n_fits
        timing[label] = time.perf_counter() - t0
        say(f"  {label:9s} {n_fits} CV fits + {len(parts)} refits in {timing[label]:.1f} s; "
            f"C chosen per dataset: {', '.join(f'{c:g}' for c in chosen)}")
    t0 = time.perf_counter()
    for name, Xtr, ytr, Xte, yte in tqdm(parts, desc="KernelRank", unit="dataset", leave=False,
                                         disable=quiet):
        kr = jaxrank.KernelRank(kernel="sigmoid", bandwidth_grid=[0.3, 1.0, 3.0],
                                random_state=seed).fit(Xtr, ytr)
        test_ap[name, "KernelRank"] = float(average_precision(kr.decision_function(Xte), yte))
    timing["KernelRank"] = time.perf_counter() - t0
    say(f"  KernelRank bandwidth by validation split, {len(parts)} fits in "
        f"{timing['KernelRank']:.1f} s")
    labels = [m[1] for m in models] + ["KernelRank"]
    wins = {m: 0.0 for m in labels}
    out("")
    out("| dataset | " + " | ".join(labels) + " |")
    out("|---|" + "---|" * len(labels))
    for name, *_ in parts:
        row = [test_ap[name, m] for m in labels]
        best = max(row)
        winners = [m for m, v in zip(labels, row) if v >= best - 1e-9]
        for m in winners:
            wins[m] += 1.0 / len(winners)
        cells = [f"**{v:.3f}**" if m in winners else f"{v:.3f}" for m, v in zip(labels, row)]
        out(f"| {name} | " + " | ".join(cells) + " |")
    means = [np.mean([test_ap[p[0], m] for p in parts]) for m in labels]
    out("| mean test AP | " + " | ".join(f"{v:.3f}" for v in means) + " |")
    out("| wins | " + " | ".join(f"{wins[m]:g}" for m in labels) + " |")
    say(f"\ntest AP (bold: best on the dataset); total {time.perf_counter() - t_start:.1f} s "
        "including JIT compilation.")
    return 0
