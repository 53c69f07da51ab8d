"""Training benchmark: APSVM and BinarySVM vs scikit-learn LinearSVC on real data.

For each dataset and C: fit time (median of repeats, compile excluded and
reported separately), objective and certified relative duality gap of our
solver, the relative objective gap of BinarySVM to liblinear
(``LinearSVC(loss="hinge")``, the same objective), and test AP / ROC-AUC.

    python bench/training.py            # all datasets (a few minutes)
    python bench/training.py --quick    # page-blocks only
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

import jax
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

import jaxrank

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _csr32(X):
    """CSR with int32 indices (liblinear rejects int64 indices)."""
    X = X.tocsr()
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def load_datasets(quick):
    out = []
    X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    sc = StandardScaler().fit(Xtr)
    out.append(("page-blocks0 (bundled)", sc.transform(Xtr), ytr, sc.transform(Xte), yte))
    if quick:
        return out
    p = DATA / "reuters_moneyfx"
    if p.exists():
        Xtr, ytr = load_svmlight_file(str(p / "reuters.trn.bz2"))
        Xte, yte = load_svmlight_file(str(p / "reuters.tst.bz2"), n_features=Xtr.shape[1])
        out.append(("reuters money-fx (sparse tf-idf)", _csr32(Xtr), ytr, _csr32(Xte), yte))
    p = DATA / "w8a" / "w8a"
    if p.exists():
        X, y = load_svmlight_file(str(p))
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        out.append(("w8a (sparse binary)", _csr32(Xtr), ytr, _csr32(Xte), yte))
    p = DATA / "keel" / "satimage"
    if p.exists():
        tr = np.loadtxt(p / "sat.trn.txt")
        te = np.loadtxt(p / "sat.tst.txt")
        # KEEL satimage: class 4 ("damp grey soil") vs rest, 9.7 % positives.
        sc = StandardScaler().fit(tr[:, :-1])
        out.append(("satimage (class 4 vs rest)", sc.transform(tr[:, :-1]), np.where(tr[:, -1] == 4, 1, -1),
                    sc.transform(te[:, :-1]), np.where(te[:, -1] == 4, 1, -1)))
    return out


def timed(fn, repeats):
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return out, first, float(np.median(ts))


def objective_hinge(w, b, X, y, C):
    ypm = np.where(y > 0, 1.0, -1.0)
    s = np.asarray(X @ w).ravel() + b
    return 0.5 * (w @ w + b * b) + C * np.maximum(0, 1 - ypm * s).sum()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="bundled dataset only")
    ap.add_argument("--Cs", default="0.1,1,10", help="comma-separated C values")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    Cs = [float(c) for c in args.Cs.split(",")]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}")
    print("fit time = median of repeats after a first (compiling) call; gap = certified "
          "relative duality gap; vs liblinear = (ours - liblinear) / liblinear objective\n")
    print("| dataset | n train (pos) | model | C | fit s | first call s | iters | objective | gap | vs liblinear | test AP | test ROC-AUC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, Xtr, ytr, Xte, yte in load_datasets(args.quick):
        npos = int((ytr > 0).sum())
        for C in Cs:
            for label, make in [("APSVM", lambda: jaxrank.APSVM(C=C)),
                                ("BinarySVM", lambda: jaxrank.BinarySVM(C=C))]:
                m, first, med = timed(lambda: make().fit(Xtr, ytr), args.repeats)
                s = m.decision_function(Xte)
                gap = (m.objective_ - m.dual_objective_) / m.objective_
                vs = ""
                if label == "BinarySVM":
                    w = m.coef_[0].astype(np.float64)
                    f_ours = objective_hinge(w, float(m.intercept_[0]), Xtr, ytr, C)
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        ref, _, t_ref = timed(lambda: LinearSVC(C=C, loss="hinge", tol=1e-6, max_iter=100000).fit(Xtr, ytr), 1)
                    lib_note = " (liblinear: max_iter reached)" if caught else ""
                    f_ref = objective_hinge(ref.coef_[0], float(ref.intercept_[0]), Xtr, ytr, C)
                    vs = f"{(f_ours - f_ref) / f_ref:+.2e}"
                    sref = ref.decision_function(Xte)
                print(f"| {name} | {Xtr.shape[0]} ({npos}) | {label} | {C:g} | {med:.2f} | {first:.2f} | "
                      f"{m.n_iter_} | {m.objective_:.5g} | {gap:.1e} | {vs} | "
                      f"{average_precision_score(yte, s):.4f} | {roc_auc_score(yte, s):.4f} |", flush=True)
                if label == "BinarySVM":
                    print(f"| {name} | {Xtr.shape[0]} ({npos}) | LinearSVC{lib_note} | {C:g} | {t_ref:.2f} | | | "
                          f"{f_ref:.5g} | | 0 | {average_precision_score(yte, sref):.4f} | "
                          f"{roc_auc_score(yte, sref):.4f} |", flush=True)


if __name__ == "__main__":
    main()
