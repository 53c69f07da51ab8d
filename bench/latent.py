"""Weak supervision (Behl et al., CVPR 2014): latent AP-SVM vs latent SVM vs latent SSVM.

Three parts (``--parts table,sweep,oracle``), written to ``bench/results/latent.md``
and ``bench/figures/latent_supervision.png``:

1. **MIL table** (the Table 1 / Figure 1 comparison at S = 0): 5-fold CV test
   AP (mean +- std over the outer folds, stratified by bag label) on the
   multiple-instance sets of ``../shared/data/mil`` and ``mil_animals`` (fox,
   tiger; its elephant is mil/elephant again), small sets first
   (``TABLE_ORDER``). In every outer fold the hyperparameters are chosen by an
   inner 3-fold CV on the training bags: one ``jaxrank.sweep`` call with
   ``where`` = the outer training bags and ``refit="joint"`` runs every (C,
   inner fold) fit and the refit of every C on all training bags in one
   compiled call per CCCP iteration (compiled once per dataset and method);
   the refit of the best C is scored on the test bags:

   * ``LatentAPSVM``: C in ``AP_CS``;
   * ``LatentSVM``: C in ``SVM_CS``, J in ``(|P| + |N|) / |P| x SVM_JS``, c in
     ``SVM_ROBUST`` (the paper's grids ``10^-3..10^4``, ``x 10^-4..10``,
     ``0..0.9``, shrunk to fit the time);
   * ``LatentSSVM``: C in ``SSVM_CS``;
   * ``APSVM`` on bag-mean features (one feature vector per bag): C in ``MEAN_CS``.

   Every latent model: ``SETTINGS`` (``--n-init`` initialisations, 3 by default
   (the paper's lower end; the lowest objective is kept), the first from the
   bag-mean centroids unless ``--init random`` (the recorded tables), at most 8 CCCP
   iterations, tol 1e-3) and ``inference="greedy"`` (exact). ``--inner-cv``
   changes the number of inner folds of every method alike (the recorded run:
   2, to fit the time). Features are
   standardised with the statistics of the outer training instances. Reported
   besides AP: CCCP iterations of the refits, time per outer fold, and the
   paired count of datasets on which latent AP-SVM is ahead.

2. **Supervision sweep** (Figure 1's shape): bags of ``T = 10`` real labelled
   instances, a positive bag holding exactly one instance of the target class
   (the paper's character-in-a-word setting): handwritten digits
   (``sklearn.datasets.load_digits``, 64 pixel features) and 20 Newsgroups posts
   (bydate train; tf-idf, 100-dimensional LSA), 100 bags per target (50
   positive); digit targets 3 and 8, newsgroup target sci.space. ``S`` % of the positive training bags get their
   correct candidate as known, ``S`` in 0, 25, 50, 75, 100. For each S: 5-fold
   CV (equal fold sizes, whole bags), test AP of every C of a small grid; the
   figure shows, per method, the mean test AP over targets at the best C (the
   paper's Figure 1 reports the best CV mean AP over hyperparameters, an
   optimistic protocol). The supervised bags are passed to training by
   replacing their other candidates with copies of the known one, which is the
   same training problem as ``fit(..., known=...)`` (the maximum over identical
   copies is the known candidate; checked below on one fit) and lets
   ``jaxrank.sweep`` batch all (C, fold) fits; test bags are scored on their
   original candidates.

3. **Oracle time vs number of candidates**: median time of one jitted
   loss-augmented inference of ``LatentAPModel`` (the candidate scores ``X w``
   as one matrix product, the gather into ``[bags, T]``, each negative bag's
   maximum (Proposition 3), exact AP inference) for 10^3 .. 10^6 candidate rows
   (bags of 20, d = 16, 10 % positive bags), against the AP oracle of
   ``APSVM`` on the bag-level scores (same number of bags) and the latent SSVM's
   approximate inference.

    python bench/latent.py                      # everything (hours on a shared 2-core VM)
    python bench/latent.py --quick              # 2 MIL sets, 1 target, small grids
    python bench/latent.py --parts oracle       # one part
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tarfile
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_num_cpu_devices", 2)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.metrics import average_precision_score  # noqa: E402
from sklearn.model_selection import StratifiedKFold  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank.inference import ap_oracle  # noqa: E402
from jaxrank.models import LatentAPModel, LatentProblem, LatentSSVMModel, bag_data  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "shared" / "data"
OUT = HERE / "results" / "latent.md"
FIG = HERE / "figures" / "latent_supervision.png"

MIL_SETS = ["musk1", "musk2", "elephant", "protein", "corel_dogs", "birds_brown_creeper",
            "ucsb_breast_cancer"]
# mil_animals' elephant.mat is mil/elephant.csv again (same 200 bags and bag sizes,
# features normalised slightly differently): not repeated in the table.
ANIMALS = ["fox", "tiger"]
# Default order of the table: small to large (a time-limited run gets the most sets).
TABLE_ORDER = ["musk1", "ucsb_breast_cancer", "animals:fox", "animals:tiger", "elephant",
               "musk2", "corel_dogs", "birds_brown_creeper", "protein"]
AP_CS = [1.0, 10.0, 100.0]
SSVM_CS = [10.0, 100.0, 1000.0]
SVM_CS = [0.01, 0.1, 1.0]
SVM_JS = [0.1, 1.0]
SVM_ROBUST = [0.0, 0.3]
MEAN_CS = [1.0, 10.0, 100.0, 1000.0]
INNER_CV = 3
# n_init=3 (the paper: 3-5 seeds, lowest objective kept), at most 8 CCCP iterations.
SETTINGS = dict(n_init=3, init="centroid", tol=1e-3, cccp_max_iter=8)
# inference="greedy": exact like "select" (same results), about half the compile time.
INFERENCE = "greedy"
AP_ITER, SVM_ITER = 1000, 1000
# Sets with more candidate rows than BIG: LatentSVM gets BIG_SVM_ITER iterations per
# convex step and 2 of the (J, c) pairs, (J_min, c_min) and (J_max, c_max).
BIG, BIG_SVM_ITER = 5000, 300
S_LEVELS = [0, 25, 50, 75, 100]
# Why the recorded run left LatentSSVM out of some sets (measured in that run).
SSVM_SKIP_NOTE = (
    "time budget of the recorded run (its approximate inference runs 12 AP inferences per "
    "oracle call and its convex steps at C >= 100 stop at max_iter=1000 unconverged; in the "
    "previous 1-initialisation run its first outer fold on animals:fox alone took 574 s, "
    "LatentAPSVM 124 s, LatentSVM 29 s, under load).")
METHODS = ["LatentAPSVM", "LatentSVM", "LatentSSVM"]


# ---------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------


def load_mil(name):
    """(X [n, d] float32, bags [n] int64, y [B] int, source) of a MIL benchmark."""
    if name.startswith("animals:"):
        from scipy.io import loadmat

        mat = loadmat(DATA / "mil_animals" / f"{name.split(':')[1]}.mat")
        X = np.asarray(mat["Data"], np.float64)
        bags = np.asarray(mat["bags"]).reshape(-1).astype(np.int64)
        y = np.asarray(mat["labels"]).reshape(-1).astype(int)
        return X, bags, y
    a = np.loadtxt(DATA / "mil" / f"{name}.csv", delimiter=",")
    bags = a[:, 1].astype(np.int64)
    _, first = np.unique(bags, return_index=True)
    return a[:, 2:], bags, a[first, 0].astype(int)


def standardise(X, rows):
    """X standardised with the statistics of ``rows`` (float32).

    ``sklearn.preprocessing.StandardScaler``: features that are constant on
    ``rows`` up to rounding keep scale 1. (The previous hand-written version
    only caught an exactly zero std: fox, tiger and elephant have features
    with std 1e-16..1e-13 on the training rows, which it scaled to values up
    to 1e18.)
    """
    from sklearn.preprocessing import StandardScaler

    return StandardScaler().fit(X[rows]).transform(X).astype(np.float32)


def make_bags(labels, target, n_bags=100, T=10, seed=0):
    """Bags of T instance indices: positive bags hold exactly one target instance.

    Returns (index [n_bags * T], bags [n_bags * T], y [n_bags], witness [n_bags * T]
    bool). Instances are drawn without replacement (no instance in two bags).
    """
    rng = np.random.default_rng(seed)
    tgt = rng.permutation(np.flatnonzero(labels == target))
    other = rng.permutation(np.flatnonzero(labels != target))
    n_pos = n_bags // 2
    y = np.r_[np.ones(n_pos, int), np.zeros(n_bags - n_pos, int)]
    index, witness = [], []
    o = 0
    for b in range(n_bags):
        if y[b]:
            rows = np.r_[tgt[b], other[o:o + T - 1]]
            o += T - 1
        else:
            rows = other[o:o + T]
            o += T
        perm = rng.permutation(T)
        index.append(rows[perm])
        witness.append((np.arange(T) == 0)[perm] & bool(y[b]))
    return (np.concatenate(index), np.repeat(np.arange(n_bags), T), y,
            np.concatenate(witness))


def load_digit_features():
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target, d.images


def load_news_features(n_dim=100):
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    path = DATA / "20newsgroups" / "20news-bydate.tar.gz"
    texts, groups, names = [], [], []
    with tarfile.open(path) as tf:
        for m in tf:
            if not m.isfile() or "train" not in m.name.split("/")[0]:
                continue
            group = m.name.split("/")[1]
            if group not in names:
                names.append(group)
            raw = tf.extractfile(m).read().decode("latin-1")
            texts.append(raw.split("\n\n", 1)[-1])  # drop the header block
            groups.append(names.index(group))
    vec = TfidfVectorizer(max_features=5000, sublinear_tf=True, stop_words="english", min_df=3)
    Z = TruncatedSVD(n_dim, random_state=0).fit_transform(vec.fit_transform(texts))
    Z = (Z - Z.mean(0)) / Z.std(0)
    return Z.astype(np.float32), np.asarray(groups), names


# ---------------------------------------------------------------------------
# Part 1: MIL table.
# ---------------------------------------------------------------------------


def _sweep(X, y, bags, est, Cs, train):
    """Inner CV on the training bags; every C also refit on all of them in the same call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        # param_grid={}: J and c are this bench's own grid (the loop in nested_cv).
        return jaxrank.sweep(X, y, groups=bags, model=est, Cs=Cs, cv=INNER_CV, where=train,
                             random_state=0, refit="joint", param_grid={})


def nested_cv(name, X, bags, y, quick=False, log=print, methods=None, on_method=None):
    """Outer 5-fold CV of every method: dict method -> list of fold records.

    Per outer fold and method, one ``jaxrank.sweep`` call (``refit="joint"``):
    the inner CV fits of every C and the refits of every C on all training bags
    run in one compiled call (compiled once per dataset and method: the outer
    folds are ``where`` masks of the same shapes). Methods run one after the
    other (all 5 folds each); ``on_method(method, records)`` is called as soon
    as a method has finished its 5 folds (the caller saves them, so a run cut
    short keeps the finished methods).
    """
    ids = np.unique(bags)
    pos_rate = y.mean()
    big = X.shape[0] > BIG
    svm_iter = BIG_SVM_ITER if big else SVM_ITER
    ratio = 1.0 / pos_rate  # (|P| + |N|) / |P|
    todo = [m for m in METHODS + ["APSVM (bag mean)"] if methods is None or m in methods]
    out = {}
    outer = StratifiedKFold(5, shuffle=True, random_state=0)
    inst_bag = np.searchsorted(ids, bags)
    folds = []
    for tr, te in outer.split(ids, y):
        train = np.zeros(len(ids), bool)
        train[tr] = True
        Xf = standardise(X, train[inst_bag])
        # Bag means of the standardised features (for APSVM on bag means).
        Xm = np.zeros((len(ids), X.shape[1]), np.float32)
        np.add.at(Xm, inst_bag, Xf)
        Xm /= np.bincount(inst_bag)[:, None]
        folds.append((train, te, Xf, ~train[inst_bag], Xm))
    for method in todo:
        recs = []
        for f, (train, te, Xf, te_rows, Xm) in enumerate(folds):
            t0 = time.perf_counter()
            if method == "APSVM (bag mean)":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    r = jaxrank.sweep(Xm, y, model=jaxrank.APSVM(tol=1e-3, max_iter=AP_ITER),
                                      Cs=MEAN_CS, cv=INNER_CV, where=train, random_state=0,
                                      refit="joint")
                m = r.best_estimators[0]
                ap = average_precision_score(y[te], m.decision_function(Xm[te]))
                rec = dict(ap=ap, C=r.best_C[0], outer=None, fits=r.n_fits + len(MEAN_CS))
            elif method == "LatentSVM":
                best = None
                grid = [(J, c) for J in SVM_JS for c in SVM_ROBUST]
                if quick:
                    grid = grid[:2]
                elif big:  # dual coordinate ascent epochs cost O(instances): shrink
                    grid = [(SVM_JS[0], SVM_ROBUST[0]), (SVM_JS[-1], SVM_ROBUST[-1])]
                for J, c in grid:
                    est = jaxrank.LatentSVM(J=J * ratio, c=c, max_iter=svm_iter,
                                            random_state=0, **SETTINGS)
                    r = _sweep(Xf, y, bags, est, SVM_CS, train)
                    score = r.mean_val_score[0].max()
                    if best is None or score > best[0]:
                        best = (score, r, J, c)
                _, r, J, c = best
                m = r.best_estimators[0]
                ap = m.score(Xf[te_rows], y[te], bags=bags[te_rows])
                rec = dict(ap=ap, C=r.best_C[0], J=J, c=c, outer=m.n_cccp_iter_,
                           max_iter=svm_iter, n_pairs=len(grid),
                           fits=len(grid) * (r.n_fits + len(SVM_CS)))
            else:
                cls = getattr(jaxrank, method)
                Cs = AP_CS if method == "LatentAPSVM" else SSVM_CS
                est = cls(inference=INFERENCE, max_iter=AP_ITER, random_state=0, **SETTINGS)
                r = _sweep(Xf, y, bags, est, Cs, train)
                m = r.best_estimators[0]
                ap = m.score(Xf[te_rows], y[te], bags=bags[te_rows])
                rec = dict(ap=ap, C=r.best_C[0], outer=m.n_cccp_iter_,
                           fits=r.n_fits + len(Cs))
            if method != "APSVM (bag mean)":
                rec.update(w_norm=float(np.linalg.norm(m.coef_)),
                           objective=float(getattr(m, "objective_", np.nan)),
                           init_objectives=np.asarray(getattr(m, "init_objectives_", []),
                                                      np.float64).tolist(),
                           n_init=SETTINGS["n_init"], init=SETTINGS["init"])
            rec["inner_cv"] = INNER_CV
            rec["scaler"] = "StandardScaler"
            rec["load"] = list(os.getloadavg())  # 1, 5, 15 min load average at fold end
            rec["total"] = time.perf_counter() - t0
            recs.append(rec)
            log(f"  {name} fold {f + 1} {method}: test AP {rec['ap']:.3f} (C={rec['C']:g}"
                + (f", J={rec['J']:g}x, c={rec['c']:g}" if "J" in rec else "")
                + (f", {rec['outer']} CCCP iterations" if rec["outer"] else "")
                + (f", |w|={rec['w_norm']:.3g}" if "w_norm" in rec else "")
                + f") {rec['total']:.0f} s")
        out[method] = recs
        if on_method is not None:
            on_method(method, recs)
    return out, pos_rate


# ---------------------------------------------------------------------------
# Part 2: supervision sweep.
# ---------------------------------------------------------------------------


def supervision_sweep(name, Z, labels, targets, Cs, log=print, n_bags=100, T=10):
    """Mean test AP [method, S] at the best C (and [method, S, C] for the table)."""
    res = {m: np.zeros((len(targets), len(S_LEVELS), len(Cs[m]))) for m in METHODS}
    for ti, target in enumerate(targets):
        index, bags, y, witness = make_bags(labels, target, n_bags, T, seed=ti)
        X = Z[index]
        # Equal-size folds of whole bags, stratified: every fit has the same shapes.
        fold = np.empty(n_bags, int)
        for cls in (0, 1):
            idx = np.random.default_rng(ti).permutation(np.flatnonzero(y == cls))
            fold[idx] = np.arange(len(idx)) % 5
        masks = np.stack([fold == f for f in range(5)])  # [F, B] validation bags
        sup_order = np.random.default_rng(100 + ti).permutation(np.flatnonzero(y == 1))
        for si, S in enumerate(S_LEVELS):
            supervised = np.zeros(n_bags, bool)
            supervised[sup_order[: int(round(S / 100 * len(sup_order)))]] = True
            # Training copy: a supervised bag's candidates all equal its known one.
            Xs = X.copy()
            for b in np.flatnonzero(supervised):
                rows = np.flatnonzero(bags == b)
                Xs[rows] = X[rows[witness[rows]]]
            for method in METHODS:
                est = _sweep_estimator(method)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    r = jaxrank.sweep(Xs, y, groups=bags, model=est, Cs=Cs[method], cv=masks,
                                      param_grid={},
                                      refit=False, return_weights=True)
                for ci in range(len(Cs[method])):
                    aps = []
                    for f in range(5):
                        w = r.weights[0, ci, f]
                        s = X @ w[: X.shape[1]] + (w[-1] if w.shape[0] > X.shape[1] else 0)
                        best = np.array([s[bags == b].max() for b in range(n_bags)])
                        aps.append(average_precision_score(y[masks[f]], best[masks[f]]))
                    res[method][ti, si, ci] = np.mean(aps)
            log(f"  {name} target {target} S={S}: "
                + ", ".join(f"{m} {res[m][ti, si].max():.3f}" for m in METHODS))
    return res


def _sweep_estimator(method):
    if method == "LatentSVM":
        return jaxrank.LatentSVM(J=1.0, c=0.0, max_iter=SVM_ITER, n_init=1, tol=1e-3,
                                 cccp_max_iter=10, random_state=0, init=SETTINGS["init"])
    return getattr(jaxrank, method)(inference=INFERENCE, max_iter=AP_ITER, n_init=1, tol=1e-3,
                                    cccp_max_iter=10, random_state=0, init=SETTINGS["init"])


def check_copy_trick(Z, labels, target, log=print):
    """fit(known=...) and the copies used by the sweep give the same training problem."""
    index, bags, y, witness = make_bags(labels, target, 40, 10, seed=7)
    X = Z[index]
    known = witness & np.isin(bags, np.flatnonzero(y == 1)[:10])
    Xs = X.copy()
    for b in np.unique(bags[known]):
        rows = np.flatnonzero(bags == b)
        Xs[rows] = X[rows[witness[rows]]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = jaxrank.LatentAPSVM(C=10.0, inference=INFERENCE, n_init=1, random_state=0).fit(
            X, y, bags=bags, known=known)
        b = jaxrank.LatentAPSVM(C=10.0, inference=INFERENCE, n_init=1, random_state=0).fit(
            Xs, y, bags=bags)
    log(f"  known= vs copies: objectives {a.objective_:.6f} / {b.objective_:.6f}, "
        f"|coef diff| {np.abs(a.coef_ - b.coef_).max():.2e}")
    return a.objective_, b.objective_


def plot_sweep(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        for method, marker in zip(METHODS, "osd"):
            best = res[method].max(axis=2).mean(axis=0)  # best C per (target, S), mean
            ax.plot(S_LEVELS, 100 * best, marker=marker, label=method)
        ax.set_xlabel("supervision S (% of positive bags with the correct candidate)")
        ax.set_ylabel("mean test AP (%), 5-fold CV")
        ax.set_title(name)
        ax.set_xticks(S_LEVELS)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Part 3: oracle time.
# ---------------------------------------------------------------------------


def _median_time(f, *args, repeats=5):
    jax.block_until_ready(f(*args))  # compile + warm up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def oracle_times(sizes, T=20, d=16, log=print):
    rows = []
    for n in sizes:
        rng = np.random.default_rng(0)
        B = n // T
        X = rng.normal(size=(n, d)).astype(np.float32)
        bags = np.repeat(np.arange(B), T)
        positive = np.zeros(B, bool)
        positive[: max(B // 10, 1)] = True
        data, _ = bag_data(X, bags)
        prob = LatentProblem(
            positive=jnp.asarray(positive), where=jnp.ones(B, bool), cand=data.allowed,
            chosen=jnp.zeros(B, jnp.int32), ignore=jnp.zeros((B, T), bool),
            J=jnp.float32(1), c=jnp.float32(0))
        w = jnp.asarray(rng.normal(size=d).astype(np.float32)) * 0.1
        kp = int(positive.sum())
        lat = LatentAPModel(kp=kp)
        ss = LatentSSVMModel(kp=kp)

        @jax.jit
        def latent_call(w, data, prob):
            return lat.oracle(lat.scores(w, data), prob).hinge

        @jax.jit
        def ssvm_call(w, data, prob):
            return ss.oracle(ss.scores(w, data), prob).hinge

        Xm = jnp.asarray(X.reshape(B, T, d).mean(axis=1))

        @jax.jit
        def bag_call(w, Xm, positive):
            return ap_oracle(Xm @ w, positive, jnp.ones_like(positive), kp=kp).hinge

        t_lat = _median_time(latent_call, w, data, prob)
        t_bag = _median_time(bag_call, w, Xm, jnp.asarray(positive))
        t_ss = _median_time(ssvm_call, w, data, prob) if n <= 10**5 else float("nan")
        rows.append((n, B, t_lat, t_bag, t_ss))
        log(f"  n={n:>8d} bags={B:>6d}: latent AP oracle {1e3 * t_lat:.2f} ms, AP oracle on "
            f"bag scores {1e3 * t_bag:.2f} ms, latent SSVM oracle {1e3 * t_ss:.2f} ms")
    return rows


# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    return x


def main():
    global INNER_CV
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", default="table,sweep,oracle")
    p.add_argument("--datasets", default=None,
                   help="comma-separated MIL sets (mil names, or animals:fox etc.)")
    p.add_argument("--quick", action="store_true", help="2 MIL sets, 1 target per sweep")
    p.add_argument("--methods", default=None,
                   help="comma-separated table methods (default all: LatentAPSVM,LatentSVM,"
                   "LatentSSVM,APSVM (bag mean))")
    p.add_argument("--output", default=str(OUT))
    p.add_argument("--figure", default=str(FIG))
    p.add_argument("--fresh", action="store_true",
                   help="ignore the raw results cached next to --output (default: update them, "
                   "so parts and datasets can be run separately)")
    p.add_argument("--n-init", type=int, default=SETTINGS["n_init"],
                   help="random initialisations of every latent model in the MIL table "
                   "(lowest objective kept; the paper uses 3-5)")
    p.add_argument("--init", choices=("centroid", "random"), default=SETTINGS["init"],
                   help="init of every latent model (the tables recorded before 2026-11-24 "
                   "used random: --init random)")
    p.add_argument("--inner-cv", type=int, default=INNER_CV,
                   help="inner CV folds of the MIL table (every method alike)")
    args = p.parse_args()
    SETTINGS["n_init"] = args.n_init
    SETTINGS["init"] = args.init
    INNER_CV = args.inner_cv
    parts = set(args.parts.split(","))
    cache_path = Path(args.output).with_suffix(".json")
    cache = {} if args.fresh or not cache_path.exists() else json.loads(cache_path.read_text())
    t_all = time.perf_counter()

    def log(msg):
        print(msg, flush=True)

    def save():
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(_jsonable(cache), indent=1))

    if args.datasets:
        sets = args.datasets.split(",")
    elif args.quick:
        sets = ["musk1", "animals:fox"]
    else:
        sets = TABLE_ORDER

    if "table" in parts:
        table = cache.setdefault("table", {})
        for name in sets:
            X, bags, y = load_mil(name)
            T_max = np.bincount(np.unique(bags, return_inverse=True)[1]).max()
            log(f"{name}: {X.shape[0]} instances x {X.shape[1]}, {len(y)} bags "
                f"({y.sum()} positive), at most {T_max} per bag")
            t0 = time.perf_counter()
            methods = None if args.methods is None else args.methods.split(",")
            # Merge into the cached entry: methods run separately (--methods) keep the others.
            entry = table.setdefault(name, {})
            entry.update(pos_rate=float(y.mean()), shape=list(X.shape), n_bags=len(y))
            entry.setdefault("res", {})
            entry.setdefault("method_seconds", {})

            def on_method(method, recs, entry=entry):
                entry["res"][method] = recs
                entry["method_seconds"][method] = sum(r["total"] for r in recs)
                entry["seconds"] = sum(entry["method_seconds"].values())
                save()  # written as soon as a method has its 5 folds

            nested_cv(name, X, bags, y, quick=args.quick, log=log, methods=methods,
                      on_method=on_method)

    if "sweep" in parts:
        results = {}
        Z, labels, images = load_digit_features()
        targets = [3] if args.quick else [3, 8]
        Cs = {"LatentAPSVM": [10.0, 100.0], "LatentSSVM": [10.0, 100.0],
              "LatentSVM": [0.01, 0.1]}
        log("digit bags: known= vs copies check")
        check = check_copy_trick(Z, labels, 3, log)
        log("supervision sweep: digits")
        results["digit bags (load_digits, T = 10)"] = supervision_sweep(
            "digits", Z, labels, targets, Cs, log)
        Zn, gl, names = load_news_features()
        # One newsgroup target (time): sci.space.
        ntargets = [names.index("sci.space")]
        log("supervision sweep: 20 Newsgroups")
        results["20 Newsgroups bags (T = 10)"] = supervision_sweep(
            "20news", Zn, gl, ntargets, Cs, log)
        cache["sweep"] = dict(results=results, Cs=Cs, digit_targets=targets,
                              news_targets=[names[t] for t in ntargets], check=check)
        save()

    if "oracle" in parts:
        sizes = [10**3, 10**4, 10**5] if args.quick else [10**3, 10**4, 10**5, 10**6]
        log("oracle time vs number of candidates")
        cache["oracle"] = oracle_times(sizes, log=log)
        save()

    lines = []
    if "table" in cache:
        lines += table_report(cache["table"])
    if "sweep" in cache:
        sw = cache["sweep"]
        results = {k: {m: np.asarray(v) for m, v in r.items()} for k, r in sw["results"].items()}
        plot_sweep(results, Path(args.figure))
        lines += sweep_report(results, sw["Cs"], sw["digit_targets"], sw["news_targets"],
                              sw["check"], Path(args.figure))
    if "oracle" in cache:
        lines += oracle_report(cache["oracle"])
    cache.setdefault("seconds", {})[",".join(sorted(parts))] = time.perf_counter() - t_all
    save()
    secs = cache.get("seconds", {})
    head = [
        "# Weak supervision: latent AP-SVM vs latent SVM vs latent SSVM (`bench/latent.py`)",
        "",
        f"Machine: {platform.machine()} VM, {jax.device_count()} CPU devices (2 cores, "
        f"`jax_num_cpu_devices=2`), no GPU, jax {jax.__version__}, float32. **Noisy "
        "timings:** the VM was shared with other engineers' jobs during the whole run "
        f"({_load_text(cache.get('table', {}))}), so every time below is several times what an "
        "idle machine gives; compare within a row.",
        "",
        "Reproduce (raw results are cached in `latent.json` next to this file and merged per "
        "dataset and method, each method saved as soon as its 5 outer folds are done, so "
        "parts, datasets and methods can be run separately; the report is rebuilt from the "
        "cache). The recorded MIL table (n_init=3 unless stated, inner 2-fold CV):",
        "",
        "```bash",
        "# every run with --init random (recorded before init='centroid' became the default)",
        "for d in musk1 ucsb_breast_cancer animals:fox animals:tiger elephant corel_dogs \\",
        "         birds_brown_creeper musk2 protein; do",
        "  python bench/latent.py --parts table --datasets $d --inner-cv 2 --init random \\",
        "      --methods 'LatentAPSVM,LatentSVM,APSVM (bag mean)'",
        "done",
        "for d in musk1 ucsb_breast_cancer animals:fox animals:tiger elephant musk2; do",
        "  python bench/latent.py --parts table --datasets $d --inner-cv 2 --init random \\",
        "      --methods LatentSSVM",
        "done",
        "for d in birds_brown_creeper protein; do   # one start (time); corel_dogs: not run",
        "  python bench/latent.py --parts table --datasets $d --inner-cv 2 --init random \\",
        "      --methods LatentSSVM --n-init 1",
        "done",
        "python bench/latent.py --parts sweep    # recorded with n_init=1 (previous run)",
        "python bench/latent.py --parts oracle   # (previous run)",
        "```",
        "",
        "`python bench/latent.py` alone runs every part on every set (all methods; many "
        "hours on this shared VM). Wall time: sweep and oracle (previous run) "
        + ", ".join(f"{k} {secs[k] / 60:.1f} min" for k in ("sweep", "oracle") if k in secs)
        + ("; table (this run) " + ", ".join(
            f"{n} " + " + ".join(f"{m} {v / 60:.1f}" for m, v in t["method_seconds"].items())
            + " min" for n, t in cache["table"].items())
           if cache.get("table") else "") + ".",
        "",
    ]
    # Hand-written observations of the recorded run (kept across reruns).
    notes = Path(args.output).with_suffix(".notes.md")
    if notes.exists():
        head += [notes.read_text().rstrip(), ""]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text("\n".join(head + lines) + "\n")
    log(f"wrote {args.output}")


def _aps(t, method, partial=False):
    """Outer-fold APs of ``method`` on one dataset, or None if it was not run there.

    A method cut short (fewer than 5 outer folds) counts as not run unless ``partial``.
    """
    recs = t["res"].get(method)
    if not recs or (len(recs) < 5 and not partial):
        return None
    return np.array([r["ap"] for r in recs])


def _load_text(table):
    """Range of the 1-minute load average recorded at the end of every outer fold."""
    loads = [r["load"][0] for t in table.values() for recs in t["res"].values() for r in recs
             if "load" in r]
    if not loads:
        return "load average not recorded"
    return (f"`uptime` 1-minute load average {min(loads):.1f}-{max(loads):.1f} on 2 cores, "
            f"median {np.median(loads):.1f}, over the {len(loads)} outer folds of the table")


def _protocol(table, key):
    """The values of record field ``key`` used in ``table`` (e.g. n_init), as text."""
    vals = sorted({r.get(key, "?") for t in table.values() for recs in t["res"].values()
                   for r in recs if key in r or key == "inner_cv"}, key=str)
    return ", ".join(str(v) for v in vals) if vals else "?"


def table_report(table):
    cols = METHODS + ["APSVM (bag mean)"]
    out = [
        "## MIL benchmarks: 5-fold CV test AP (%), hyperparameters by inner CV",
        "",
        f"Grids: LatentAPSVM C in {AP_CS}; LatentSSVM C in {SSVM_CS}; LatentSVM C in {SVM_CS}, "
        f"J in (|P|+|N|)/|P| x {SVM_JS}, c in {SVM_ROBUST}; APSVM on bag means C in "
        f"{MEAN_CS}. Inner CV folds (every method alike): {_protocol(table, 'inner_cv')}. "
        f"Latent models: inference={INFERENCE!r} (exact), "
        f"n_init={_protocol(table, 'n_init')} (lowest objective kept), "
        f"init={SETTINGS['init']}, tol={SETTINGS['tol']}, "
        f"cccp_max_iter={SETTINGS['cccp_max_iter']}, max_iter {AP_ITER} (AP) / {SVM_ITER} "
        f"(SVM) per convex step; on sets with more than {BIG} candidate rows (marked †) "
        f"LatentSVM gets {BIG_SVM_ITER} iterations per step and only the (J, c) pairs "
        f"({SVM_JS[0]}, {SVM_ROBUST[0]}) and ({SVM_JS[-1]}, {SVM_ROBUST[-1]}) (its dual "
        "coordinate ascent epochs cost O(candidates)). Bold: best of the row. "
        "–: not run (see the notes below the table).",
        "",
        "| dataset | bags (pos %) | " + " | ".join(cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for name, t in table.items():
        pos_rate, nb = t["pos_rate"], t["n_bags"]
        aps = {c: _aps(t, c, partial=True) for c in cols}
        best = max(a.mean() for a in aps.values() if a is not None)
        cells = []
        for c in cols:
            a = aps[c]
            if a is None:
                cells.append("–")
                continue
            txt = f"{100 * a.mean():.1f} ± {100 * a.std():.1f}"
            if a.size < 5:
                txt += f" ({a.size} folds, partial)"
            cells.append(f"**{txt}**" if a.mean() == best else txt)
        mark = " †" if t["shape"][0] > BIG else ""
        out.append(f"| {name}{mark} | {nb} ({100 * pos_rate:.0f}) | " + " | ".join(cells)
                   + " |")
    full = [t for t in table.values() if all(_aps(t, c) is not None for c in cols)]
    if len(full) < len(table) and full:
        out.append(f"| mean over the {len(full)} sets with every method | | " + " | ".join(
            f"{100 * np.mean([_aps(t, c).mean() for t in full]):.1f}" for c in cols) + " |")
    run = {c: [_aps(t, c).mean() for t in table.values() if _aps(t, c) is not None]
           for c in cols}
    out.append("| mean over the sets run | | " + " | ".join(
        f"{100 * np.mean(run[c]):.1f}" if run[c] else "–" for c in cols) + " |")
    out.append("")
    missing = [d for d in TABLE_ORDER if d not in table]
    if missing:
        out.append(f"Not run (time budget of the recorded run): {', '.join(missing)}.")
    partial = [(n, m) for n, t in table.items() for m, r in t["res"].items() if len(r) < 5]
    if partial:
        out.append("Partial (fewer than 5 outer folds): " + ", ".join(
            f"{n} {m} ({len(table[n]['res'][m])} folds)" for n, m in partial) + ".")
        out.append("")
    no_ss = [n for n, t in table.items() if _aps(t, "LatentSSVM") is None]
    if no_ss:
        out.append(f"LatentSSVM not run on {', '.join(no_ss)} (`--methods`): " + SSVM_SKIP_NOTE)
        out.append("")
    for other in ("LatentSVM", "LatentSSVM", "APSVM (bag mean)"):
        pairs = [(_aps(t, "LatentAPSVM"), _aps(t, other)) for t in table.values()
                 if _aps(t, other) is not None and _aps(t, "LatentAPSVM") is not None]
        if not pairs:
            continue
        lat = np.array([a.mean() for a, _ in pairs])
        o = np.array([b.mean() for _, b in pairs])
        fa = np.concatenate([a for a, _ in pairs])
        fo = np.concatenate([b for _, b in pairs])
        out.append(f"- LatentAPSVM vs {other}: ahead on {int((lat > o).sum())} of {len(lat)} "
                   f"datasets (paired by dataset; by outer fold: ahead in "
                   f"{int((fa > fo).sum())} of {fa.size}), mean difference "
                   f"{100 * (lat - o).mean():+.1f} AP points.")
    out.append("- The paper (VOC 2011 actions, S = 0): latent AP-SVM +5.1 mAP over latent SVM "
               "and +3.7 over latent SSVM.")
    out += [
        "",
        "Time (per dataset and method; one `jaxrank.sweep` call per outer fold runs the "
        "inner-CV fits and the refits of every C on the outer training bags together; "
        "LatentSVM: one such call per (J, c) pair): fold 1 (includes compilation), median "
        "of folds 2-5 (compiled), and the number of fits per fold; CCCP iterations: mean "
        "over the 5 refits of the chosen hyperparameters:",
        "",
        "| dataset | instances x d | " + " | ".join(
            f"{c}: fold 1 s / later s / fits / CCCP it." for c in METHODS)
        + " | APSVM (bag mean): fold 1 s / later s |",
        "|---|---|" + "---|" * (len(METHODS) + 1),
    ]
    for name, t in table.items():
        res, shape = t["res"], t["shape"]
        cells = []
        for c in METHODS:
            if not res.get(c):
                cells.append("–")
                continue
            first = res[c][0]["total"]
            later = np.median([r["total"] for r in res[c][1:]])
            it = np.mean([r["outer"] for r in res[c]])
            cells.append(f"{first:.0f} / {later:.0f} / {res[c][0]['fits']} / {it:.1f}")
        mr = res.get("APSVM (bag mean)")
        cells.append(f"{mr[0]['total']:.0f} / {np.median([r['total'] for r in mr[1:]]):.1f}"
                     if mr else "–")
        out.append(f"| {name} | {shape[0]} x {shape[1]} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Chosen hyperparameters per outer fold:")
    out.append("")
    for name, t in table.items():
        res = t["res"]
        parts = []
        for c in cols:
            if not res.get(c):
                continue
            if c == "LatentSVM":
                parts.append("LatentSVM " + ", ".join(
                    f"(C={r['C']:g}, J={r['J']:g}x, c={r['c']:g})" for r in res[c]))
            else:
                parts.append(f"{c} C {[float(r['C']) for r in res[c]]}")
            k = sum(r.get("w_norm", 1.0) == 0 for r in res[c])
            if k:
                parts[-1] += f" (w = 0 in {k} of {len(res[c])} folds)"
            inits = [np.asarray(r["init_objectives"]) for r in res[c]
                     if len(r.get("init_objectives", [])) > 1]
            if inits:
                later = sum(int(np.argmin(o) > 0) for o in inits)
                spread = np.median([(o.max() - o.min()) / max(o.min(), 1e-12) for o in inits])
                parts[-1] += (f" [refits: best initialisation not the first in {later} of "
                              f"{len(inits)}; median (max - min) / min of the "
                              f"{inits[0].size} final objectives {spread:.2g}]")
        out.append(f"- {name}: " + "; ".join(parts))
    out.append("")
    return out


def sweep_report(results, Cs, digit_targets, news_targets, check, fig):
    out = [
        "## Supervision sweep (Figure 1 shape): mean test AP (%) vs S",
        "",
        f"Digit targets {digit_targets}, 20 Newsgroups targets {news_targets}; 100 bags of 10 "
        "per target (50 positive, one target instance each), 5-fold CV (20 test bags per "
        f"fold). Per method, the best C of {Cs} for each (target, S), averaged over targets "
        "(the paper's protocol: best CV mean AP). All latent models: inference='greedy' (exact), "
        "n_init=1, tol=1e-3, "
        "cccp_max_iter=10. LatentSVM: J=1, c=0.",
        "",
        f"Check (one digit fit, 10 of 20 positive bags known): `fit(known=...)` objective "
        f"{check[0]:.6f}, copies {check[1]:.6f}.",
        "",
        f"![supervision sweep]({Path('..') / 'figures' / fig.name})",
        "",
    ]
    for name, res in results.items():
        out += [f"### {name}", "", "| method | " + " | ".join(f"S={s}" for s in S_LEVELS)
                + " |", "|---|" + "---|" * len(S_LEVELS)]
        for m in METHODS:
            best = res[m].max(axis=2).mean(axis=0)
            out.append(f"| {m} | " + " | ".join(f"{100 * v:.1f}" for v in best) + " |")
        gap_svm = res["LatentAPSVM"].max(axis=2).mean(0) - res["LatentSVM"].max(axis=2).mean(0)
        gap_ss = res["LatentAPSVM"].max(axis=2).mean(0) - res["LatentSSVM"].max(axis=2).mean(0)
        out.append(f"| *LatentAPSVM − LatentSVM* | " + " | ".join(f"{100 * v:+.1f}"
                                                               for v in gap_svm) + " |")
        out.append(f"| *LatentAPSVM − LatentSSVM* | " + " | ".join(f"{100 * v:+.1f}"
                                                                for v in gap_ss) + " |")
        out.append("")
    return out


def oracle_report(rows):
    out = [
        "## Loss-augmented inference time vs number of candidates",
        "",
        "One jitted call, median of 5 after warm-up; bags of 20 candidates, d = 16, 10 % "
        "positive bags, random w. Latent AP: `X w` (one matrix product), gather into "
        "[bags, 20], max over each negative bag (Proposition 3), exact AP inference "
        "(`select`) on the bag scores. Baseline: the AP oracle alone on precomputed "
        "bag-mean scores (same number of bags). Latent SSVM: approximate inference "
        "(3 starts x 4 AP inferences; not run at 10^6).",
        "",
        "| candidates | bags | latent AP oracle (ms) | AP oracle on bag scores (ms) | ratio | "
        "latent SSVM oracle (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for n, B, tl, tb, ts in rows:
        out.append(f"| {n:,} | {B:,} | {1e3 * tl:.2f} | {1e3 * tb:.2f} | {tl / tb:.1f} | "
                   + ("-" if np.isnan(ts) else f"{1e3 * ts:.2f}") + " |")
    out.append("")
    return out


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    sys.exit(main())
