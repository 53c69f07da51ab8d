"""Training benchmark: APSVM and BinarySVM vs scikit-learn LinearSVC on real data.

For each dataset and C: fit time (median of repeats, compile excluded and
reported separately), objective and certified relative duality gap of our
solver, the relative objective gap of BinarySVM to liblinear
(``LinearSVC(loss="hinge", dual=True)``, the same objective, run at
``tol=1e-6``), and test AP / ROC-AUC.

**BinarySVM vs liblinear at equal objective.** Issue 13 asks BinarySVM to
converge to ``tol`` at every C in {0.01, 0.1, 1, 10, 100} within 3x the time
of ``LinearSVC(loss="hinge", dual=True)`` at equal objective (+-0.1 %). For
each BinarySVM row, liblinear is run with ``tol`` = 1e-1, 1e-2, ... 1e-6
(loosest first) and the loosest ``tol`` whose objective is within 0.1 % of
our *certified* optimum is kept: ``f_lib <= (1 + 1e-3) * dual``, where
``dual`` is BinarySVM's certified lower bound on the optimum (so ``f_lib`` is
then provably within 0.1 % of the exact optimum). The row prints that
``tol``, liblinear's median time at it, the ratio ``ours / liblinear`` and
liblinear's objective gap ``(f_lib - dual) / dual`` (an upper bound on its
relative suboptimality). If no ``tol`` qualifies (our fit stopped
unconverged, so ``dual`` is loose, or liblinear stopped at its ``max_iter``),
the ratio is against the ``tol=1e-6`` run and the row says "no match". Our
rows are reported whether converged or not (column ``converged``).

    python bench/training.py            # all datasets, C in 0.01 ... 100
    python bench/training.py --quick    # page-blocks only

Datasets (``../shared/data``): page-blocks0 (bundled with jaxrank), Reuters
money-fx (sparse tf-idf), w8a (sparse binary), KEEL satimage (class 4 vs
rest); optionally a census set (e.g. LIBSVM a9a, 32,561 sparse samples) with
``--census PATH`` or at ``../shared/data/a9a/a9a`` (not there at the time of
writing).
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
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

import jaxrank

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATASETS = ("page-blocks", "reuters", "w8a", "satimage", "census")
LIB_TOLS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
LIB_MAX_ITER = 100_000
MATCH = 1e-3  # equal objective: within 0.1 %


def _csr32(X):
    """CSR with int32 indices (liblinear rejects int64 indices)."""
    X = X.tocsr()
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def load_datasets(names, census=None):
    out = []
    if "page-blocks" in names:
        X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        sc = StandardScaler().fit(Xtr)
        out.append(("page-blocks0 (bundled)", sc.transform(Xtr), ytr, sc.transform(Xte), yte))
    p = DATA / "reuters_moneyfx"
    if "reuters" in names and p.exists():
        Xtr, ytr = load_svmlight_file(str(p / "reuters.trn.bz2"))
        Xte, yte = load_svmlight_file(str(p / "reuters.tst.bz2"), n_features=Xtr.shape[1])
        out.append(("reuters money-fx (sparse tf-idf)", _csr32(Xtr), ytr, _csr32(Xte), yte))
    p = DATA / "w8a" / "w8a"
    if "w8a" in names and p.exists():
        X, y = load_svmlight_file(str(p))
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        out.append(("w8a (sparse binary)", _csr32(Xtr), ytr, _csr32(Xte), yte))
    p = DATA / "keel" / "satimage"
    if "satimage" in names and p.exists():
        tr = np.loadtxt(p / "sat.trn.txt")
        te = np.loadtxt(p / "sat.tst.txt")
        # KEEL satimage: class 4 ("damp grey soil") vs rest, 9.7 % positives.
        sc = StandardScaler().fit(tr[:, :-1])
        out.append(("satimage (class 4 vs rest)", sc.transform(tr[:, :-1]),
                    np.where(tr[:, -1] == 4, 1, -1), sc.transform(te[:, :-1]),
                    np.where(te[:, -1] == 4, 1, -1)))
    p = Path(census) if census else DATA / "a9a" / "a9a"
    if "census" in names:
        if p.exists():
            X, y = load_svmlight_file(str(p))
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y,
                                                  random_state=0)
            out.append((f"census {p.name} (sparse)", _csr32(Xtr), ytr, _csr32(Xte), yte))
        elif census:
            raise SystemExit(f"--census {census}: file not found")
        else:
            print(f"(no census set at {p}; skipped)\n")
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
    """``1/2 ||[w, b]||^2 + C sum_i max(0, 1 - y_i (w^T x_i + b))`` in float64."""
    ypm = np.where(y > 0, 1.0, -1.0)
    s = np.asarray(X @ w).ravel() + b
    return 0.5 * (w @ w + b * b) + C * np.maximum(0, 1 - ypm * s).sum()


def liblinear(X, y, C, tol):
    """``LinearSVC(loss="hinge", dual=True)``: (model, seconds, objective, hit max_iter)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        m = LinearSVC(C=C, loss="hinge", dual=True, tol=tol, max_iter=LIB_MAX_ITER).fit(X, y)
        dt = time.perf_counter() - t0
    hit = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    f = objective_hinge(m.coef_[0].astype(np.float64), float(m.intercept_[0]), X, y, C)
    return m, dt, f, hit


def match_liblinear(X, y, C, dual, repeats):
    """Loosest liblinear ``tol`` with objective ``<= (1 + MATCH) * dual``.

    Returns a dict: ``tol``, ``seconds`` (median of ``repeats`` runs),
    ``objective``, ``gap`` (``(f - dual) / dual``), ``matched``, ``max_iter``
    (liblinear hit its ``max_iter``), and ``ref`` = (model, seconds,
    objective, hit) of the ``tol=1e-6`` run (the reference row).
    """
    runs = {}
    found = None
    for tol in LIB_TOLS:
        runs[tol] = liblinear(X, y, C, tol)
        if runs[tol][2] <= (1 + MATCH) * dual:
            found = tol
            break
    ref = runs.get(LIB_TOLS[-1]) or liblinear(X, y, C, LIB_TOLS[-1])
    tol = found if found is not None else LIB_TOLS[-1]
    _, dt, f, hit = runs.get(tol, ref)
    ts = [dt] + [liblinear(X, y, C, tol)[1] for _ in range(max(repeats, 1) - 1)]
    return {"tol": tol, "seconds": float(np.median(ts)), "objective": f,
            "gap": (f - dual) / dual, "matched": found is not None, "max_iter": hit,
            "ref": ref}


HEADER = ("| dataset | n train (pos) | model | C | fit s | first call s | iters | objective | gap "
          "| vs liblinear | test AP | test ROC-AUC | converged | liblinear tol (equal obj.) "
          "| liblinear s (equal obj.) | ours / liblinear | liblinear gap <= |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="bundled dataset only")
    ap.add_argument("--datasets", default=",".join(DATASETS),
                    help=f"comma-separated subset of {','.join(DATASETS)}")
    ap.add_argument("--Cs", default="0.01,0.1,1,10,100", help="comma-separated C values")
    ap.add_argument("--models", default="APSVM,BinarySVM",
                    help="comma-separated subset of APSVM,BinarySVM")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed fits after the first (compiling) one; median reported")
    ap.add_argument("--lib-repeats", type=int, default=2,
                    help="liblinear runs at the matched tol (median)")
    ap.add_argument("--census", default=None, help="SVMlight file of a census set (a9a)")
    args = ap.parse_args(argv)
    Cs = [float(c) for c in args.Cs.split(",")]
    names = ["page-blocks"] if args.quick else [d.strip() for d in args.datasets.split(",")]
    for d in names:
        if d not in DATASETS:
            ap.error(f"unknown dataset {d!r}; choose from {DATASETS}")
    models = [m.strip() for m in args.models.split(",")]
    for m in models:
        if m not in ("APSVM", "BinarySVM"):
            ap.error(f"unknown model {m!r}")
    t_all = time.perf_counter()
    datasets = load_datasets(names, args.census)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d')}")
    print("fit time = median of repeats after a first (compiling) call; gap = certified "
          "relative duality gap; vs liblinear = (ours - liblinear) / liblinear objective "
          f"(LinearSVC tol=1e-6, max_iter={LIB_MAX_ITER}); equal obj. = loosest liblinear "
          f"tol in {list(LIB_TOLS)} with objective <= (1 + {MATCH:g}) x our certified dual "
          "bound; liblinear gap = (liblinear - our dual) / our dual\n")
    print(HEADER)
    print("|---" * HEADER.count(" | ") + "|---|")
    ratios = []
    for name, Xtr, ytr, Xte, yte in datasets:
        npos = int((ytr > 0).sum())
        for C in Cs:
            for label in models:
                cls = {"APSVM": jaxrank.APSVM, "BinarySVM": jaxrank.BinarySVM}[label]
                # BinarySVM at liblinear's unweighted objective (pos_weight=1)
                kw = {"pos_weight": 1.0} if label == "BinarySVM" else {}
                fit = lambda cls=cls, C=C, X=Xtr, y=ytr, kw=kw: cls(C=C, **kw).fit(X, y)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    m, first, med = timed(fit, args.repeats)
                s = m.decision_function(Xte)
                gap = (m.objective_ - m.dual_objective_) / m.objective_
                vs, extra = "", " | | | |"
                if label == "BinarySVM":
                    w = m.coef_[0].astype(np.float64)
                    f_ours = objective_hinge(w, float(m.intercept_[0]), Xtr, ytr, C)
                    lib = match_liblinear(Xtr, ytr, C, float(m.dual_objective_),
                                          args.lib_repeats)
                    ref, t_ref, f_ref, hit_ref = lib["ref"]
                    vs = f"{(f_ours - f_ref) / f_ref:+.2e}"
                    ratio = med / lib["seconds"]
                    note = "" if lib["matched"] else " (no match)"
                    note += " (max_iter)" if lib["max_iter"] else ""
                    extra = (f" {lib['tol']:g}{note} | {lib['seconds']:.3f} | {ratio:.2f}x | "
                             f"{lib['gap']:+.1e} |")
                    ratios.append((name, C, ratio, bool(m.converged_), lib["matched"]))
                print(f"| {name} | {Xtr.shape[0]} ({npos}) | {label} | {C:g} | {med:.3f} | "
                      f"{first:.2f} | {m.n_iter_} | {m.objective_:.5g} | {gap:.1e} | {vs} | "
                      f"{average_precision_score(yte, s):.4f} | {roc_auc_score(yte, s):.4f} | "
                      f"{'yes' if m.converged_ else 'no'} |{extra}", flush=True)
                if label == "BinarySVM":
                    sref = ref.decision_function(Xte)
                    lib_note = " (liblinear: max_iter reached)" if hit_ref else ""
                    print(f"| {name} | {Xtr.shape[0]} ({npos}) | LinearSVC{lib_note} | {C:g} | "
                          f"{t_ref:.2f} | | | {f_ref:.5g} | | 0 | "
                          f"{average_precision_score(yte, sref):.4f} | "
                          f"{roc_auc_score(yte, sref):.4f} | | | | | |", flush=True)
    if ratios:
        ok = [r for r in ratios if r[3] and r[4] and r[2] <= 3]
        print()
        print(f"BinarySVM: {sum(r[3] for r in ratios)}/{len(ratios)} fits converged; "
              f"{len(ok)}/{len(ratios)} converged and within 3x of liblinear at equal "
              f"objective (issue 13 target: all). Worst ratio "
              f"{max(r[2] for r in ratios):.2f}x ({', '.join(f'{r[0]} C={r[1]:g}' for r in ratios if r[2] == max(q[2] for q in ratios))}).")
    print(f"\nTotal runtime: {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
