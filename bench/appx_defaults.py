"""APSVMApprox defaults: test AP and fit time of the old and new defaults vs APSVM.

Issue 13 ("Also fix", last item): with its defaults, AP-SVM-APPX (Mohapatra
et al. 2014, §3.3, problem (10)) fell several AP points below AP-SVM at the
same ``C`` and took several times longer. This script measures, at matched
``C`` (APSVM's ``C`` chosen by 5-fold CV, validation AP, per task):

* **APSVM**: ``jaxrank.APSVM(C)``.
* **APPX old defaults**: the previous ``APSVMApprox(C)`` defaults, written out
  with the public interface (:func:`appx_old`): an intercept-free first stage
  ``BinarySVM(C / n, fit_intercept=False)``, easy = ``y w0^T x >= 1 - 1e-3``
  (the margin support vectors count as easy, tied at the top-``k`` cut), ``k
  = 0.5``, problem (10) without an offset.
* **APPX new defaults**: ``jaxrank.APSVMApprox(C)`` (this checkout): a
  regularised offset ``b`` in both stages (``fit_intercept=True``), easy =
  ``y (w0^T x + b0) > 1 + 1e-3`` (strictly beyond the margin), ``C_binary =
  C / n``, ``k = 0.5``.

Tasks: the 10 one-vs-rest tasks of ``bench/table1.py`` (20 Newsgroups, 800
training posts, 2,000 test posts, 2,000 tf-idf terms, dense), and two dense
real sets of ``../shared/data``: KEEL page-blocks0 (bundled copy; 70/30
stratified split, standardised) and KEEL satimage (class 4 vs rest, its
train/test files, standardised). ``--large`` adds the largest dense real set,
MQ2008 pooled over queries (relevance >= 1; S1-S4 train, S5 test;
standardised), and w8a densified (49,749 x 300 binary features, 70/30
split, the "50,000-sample dense" case of the report) at ``C = 100``.

Fit times are of the second of two identical fits (the first compiles), on
the same machine in the same process; "it" is the second-stage iterations
(first stage in brackets), "conv" whether the second stage reached ``tol``.

    PYTHONPATH=. python bench/appx_defaults.py   # about 10 minutes on 2 CPU cores
    PYTHONPATH=. python bench/appx_defaults.py --large   # adds MQ2008 and w8a (much longer)
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import tarfile
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import average_precision_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import jaxrank
from jaxrank.models import AppxModel, AppxProblem, design
from jaxrank.solvers import fit as solver_fit

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
OUT = Path(__file__).resolve().parent / "results" / "appx_defaults.md"
TOL = 1e-4
OLD_MARGIN_TOL = 1e-3

_fit_stage2 = jax.jit(solver_fit, static_argnames=("model", "max_iter", "callback", "seed"))


class OldAppx:
    """The previous ``APSVMApprox`` defaults, literally, with public names.

    Stage 1: ``BinarySVM(C=C/n, fit_intercept=False)``. Split: easy if ``y
    w0^T x >= 1 - 1e-3``; the top ``ceil(k |E|)`` per class by margin stay
    easy, margins within ``1e-3`` of 1 tied (index order). Stage 2: problem
    (10) without an offset, the constraints as the exact penalty ``C mu``
    with ``mu = 1 + 2 F(2 w0) / ((1 - 2e-3) C)``, by ``jaxrank.solvers.fit``.
    """

    def __init__(self, C, k=0.5, max_iter=1000, binary_max_iter=2000):
        self.C, self.k, self.max_iter, self.binary_max_iter = C, k, max_iter, binary_max_iter

    def fit(self, X, y):
        t0 = time.perf_counter()
        X = np.asarray(X, np.float32)
        pos = np.asarray(y) > 0
        n, C = len(pos), float(self.C)
        b = jaxrank.BinarySVM(C=C / n, fit_intercept=False, tol=TOL,
                              max_iter=self.binary_max_iter).fit(X, pos.astype(int))
        w0 = b.coef_[0].astype(np.float32)
        s0 = X @ w0
        m = np.where(pos, 1.0, -1.0) * s0
        kept = np.zeros(n, bool)
        for cls in (pos, ~pos):
            e = np.flatnonzero(cls & (m >= 1 - OLD_MARGIN_TOL))
            key = np.where(np.abs(m[e] - 1) <= OLD_MARGIN_TOL, 1.0, m[e])
            kept[e[np.argsort(-key, kind="stable")[: math.ceil(self.k * len(e) - 1e-6)]]] = True
        dif = ~kept
        kp = max(int(pos.sum()), 1)
        ap2 = jaxrank.inference.ap_oracle(jnp.asarray(2 * s0), jnp.asarray(pos),
                                          jnp.asarray(dif), kp=kp)
        f_bar = 2 * float(w0 @ w0) + C * max(float(ap2.hinge), 0.0)
        mu = 1 + 2 * f_bar / ((1 - 2 * OLD_MARGIN_TOL) * C)
        res = _fit_stage2(AppxModel(kp=kp), design(X),
                          AppxProblem(jnp.asarray(pos), jnp.asarray(dif), jnp.asarray(kept),
                                      jnp.float32(mu)),
                          C=jnp.float32(C), tol=jnp.float32(TOL), max_iter=self.max_iter)
        self.coef_ = np.asarray(res.w)
        self.n_iter_, self.converged_ = int(res.num_steps), bool(res.converged)
        self.binary_n_iter_, self.n_easy_ = int(b.n_iter_), int(kept.sum())
        self.fit_time_ = time.perf_counter() - t0
        return self

    def decision_function(self, X):
        return np.asarray(X, np.float32) @ self.coef_


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


NEWS_GROUPS = ("alt.atheism", "comp.graphics", "misc.forsale", "rec.autos", "rec.sport.hockey",
               "sci.crypt", "sci.med", "sci.space", "soc.religion.christian",
               "talk.politics.guns")


def load_news(n_train=800, n_test=2000, max_features=2000, seed=0):
    """20 Newsgroups as in ``bench/table1.py`` (the loader of ``bench/sweep.py``).

    Returns ``(Xtr, Ytr [n, 10], Xte, Yte, names)``, one-vs-rest columns.
    """
    path = DATA / "20newsgroups" / "20news-bydate.tar.gz"
    docs = {"train": [], "test": []}
    with tarfile.open(path) as tf:
        for m in tf:
            if not m.isfile():
                continue
            top, group = m.name.split("/")[:2]
            if group not in NEWS_GROUPS:
                continue
            text = tf.extractfile(m).read().decode("latin-1")
            docs["train" if "train" in top else "test"].append((NEWS_GROUPS.index(group), text))
    rng = np.random.RandomState(seed)
    parts = {}
    for split, n in (("train", n_train), ("test", n_test)):
        d = docs[split]
        idx = np.sort(rng.permutation(len(d))[:n])
        parts[split] = ([d[i][1] for i in idx], np.array([d[i][0] for i in idx]))
    vec = TfidfVectorizer(max_features=max_features, sublinear_tf=True, stop_words="english",
                          min_df=3)
    Xtr = vec.fit_transform(parts["train"][0]).toarray().astype(np.float32)
    Xte = vec.transform(parts["test"][0]).toarray().astype(np.float32)
    T = len(NEWS_GROUPS)
    Ytr = np.stack([parts["train"][1] == g for g in range(T)], axis=1).astype(np.int8)
    Yte = np.stack([parts["test"][1] == g for g in range(T)], axis=1).astype(np.int8)
    return Xtr, Ytr, Xte, Yte, list(NEWS_GROUPS)


def _standardise(Xtr, Xte):
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr).astype(np.float32), sc.transform(Xte).astype(np.float32)


def load_page_blocks():
    X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    Xtr, Xte = _standardise(Xtr, Xte)
    return Xtr, (ytr > 0).astype(int), Xte, (yte > 0).astype(int)


def load_satimage():
    p = DATA / "keel" / "satimage"
    tr, te = np.loadtxt(p / "sat.trn.txt"), np.loadtxt(p / "sat.tst.txt")
    Xtr, Xte = _standardise(tr[:, :-1], te[:, :-1])
    return Xtr, (tr[:, -1] == 4).astype(int), Xte, (te[:, -1] == 4).astype(int)


def load_mq2008_pooled():
    parts = []
    for s in range(1, 6):
        X, y = load_svmlight_file(str(DATA / "mq2008" / f"S{s}.txt"), n_features=46)
        parts.append((X.toarray(), (y >= 1).astype(int)))
    Xtr = np.concatenate([p[0] for p in parts[:4]])
    ytr = np.concatenate([p[1] for p in parts[:4]])
    Xtr, Xte = _standardise(Xtr, parts[4][0])
    return Xtr, ytr, Xte, parts[4][1]


def load_w8a_dense():
    X, y = load_svmlight_file(str(DATA / "w8a" / "w8a"))
    X = X.toarray().astype(np.float32)
    y = (y > 0).astype(int)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    return Xtr, ytr, Xte, yte


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------


def cv_C(X, Y, grid, names):
    """APSVM's C per task by 5-fold CV (one batched sweep)."""
    res = jaxrank.sweep(X, Y, model="apsvm", Cs=grid, cv=5, random_state=0, refit=False,
                        task_names=names)
    return [float(c) for c in res.best_C]


def run_task(X, y, Xte, yte, C):
    """APSVM, old and new APPX defaults at one C: {name: (AP %, seconds, info)}."""
    out = {}
    makers = {
        "APSVM": lambda: jaxrank.APSVM(C=C, tol=TOL),
        "APPX old": lambda: OldAppx(C),
        "APPX new": lambda: jaxrank.APSVMApprox(C=C, tol=TOL),
    }
    for name, make in makers.items():
        make().fit(X, y)  # compile
        est = make().fit(X, y)
        ap = 100 * average_precision_score(yte, est.decision_function(Xte))
        info = f"{est.n_iter_}"
        if name != "APSVM":
            info = f"{est.n_iter_} [{est.binary_n_iter_}]"
        out[name] = (ap, est.fit_time_, info, bool(est.converged_),
                     getattr(est, "n_easy_", None))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--output", default=str(OUT))
    p.add_argument("--large", action="store_true", help="add MQ2008 (pooled) and w8a (dense)")
    p.add_argument("--news-tasks", type=int, default=10, help="20 Newsgroups tasks to run")
    args = p.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    t_all = time.perf_counter()
    rows = []  # (dataset, task, n_train, C, results)

    Xtr, Ytr, Xte, Yte, names = load_news(n_train=800, n_test=2000)
    T = min(args.news_tasks, len(names))
    Ytr, Yte = Ytr[:, :T], Yte[:, :T]
    grid = [1, 3, 10, 30, 100, 300, 1000]
    Cs = cv_C(Xtr, Ytr, grid, names[:T])
    print(f"20news: APSVM CV C per task {Cs}", flush=True)
    for t in range(T):
        r = run_task(Xtr, Ytr[:, t], Xte, Yte[:, t], Cs[t])
        rows.append(("20news", names[t], Xtr.shape, Cs[t], r))
        print(rows[-1], flush=True)

    sets = [("page-blocks0", load_page_blocks), ("satimage (4 vs rest)", load_satimage)]
    for label, load in sets:
        Xtr, ytr, Xte, yte = load()
        C = cv_C(Xtr, ytr, [1, 10, 100, 1000], [label])[0]
        rows.append((label, "-", Xtr.shape, C, run_task(Xtr, ytr, Xte, yte, C)))
        print(rows[-1], flush=True)
    if args.large:
        for label, load in [("MQ2008 pooled", load_mq2008_pooled), ("w8a dense", load_w8a_dense)]:
            Xtr, ytr, Xte, yte = load()
            rows.append((label, "-", Xtr.shape, 100.0, run_task(Xtr, ytr, Xte, yte, 100.0)))
            print(rows[-1], flush=True)
    total = time.perf_counter() - t_all

    models = ["APSVM", "APPX old", "APPX new"]
    lines = [
        "# APSVMApprox defaults: old vs new vs APSVM (`bench/appx_defaults.py`)",
        "",
        "Matched C: every model at APSVM's C chosen by 5-fold CV (validation AP) on the "
        "training part (20news grid 1-1000 as `bench/table1.py`, others 1-1000 by "
        "decades; `--large` sets at C = 100). Test AP in %; fit time of the second of two "
        "identical fits (s); it = second-stage iterations [first stage]; conv = second "
        "stage reached tol = 1e-4 (max_iter 1000); kept = constraints (kept easy "
        "samples). Old defaults: intercept-free stages, margin SVs easy; new: "
        "`APSVMApprox()` of this checkout (offset in both stages, easy strictly beyond "
        "the margin); both C_binary = C/n, k = 0.5.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU "
        f"cores, jax {jax.__version__}. Total time {total:.0f} s.",
        "",
        "| data | task | n x d | C | AP APSVM | AP old | AP new | old - APSVM | "
        "new - APSVM | time APSVM | time old | time new | it old | it new | conv old/new "
        "| kept old/new |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for data, task, shape, C, r in rows:
        a, o, nw = (r[m] for m in models)
        lines.append(
            f"| {data} | {task} | {shape[0]} x {shape[1]} | {C:g} | {a[0]:.2f} | {o[0]:.2f} | "
            f"{nw[0]:.2f} | {o[0] - a[0]:+.2f} | {nw[0] - a[0]:+.2f} | {a[1]:.2f} | "
            f"{o[1]:.2f} | {nw[1]:.2f} | {o[2]} | {nw[2]} | {'y' if o[3] else 'n'}/"
            f"{'y' if nw[3] else 'n'} | {o[4]}/{nw[4]} |")
    news = [r for r in rows if r[0] == "20news"]
    if news:
        mean = {m: np.mean([r[4][m][0] for r in news]) for m in models}
        tsum = {m: np.sum([r[4][m][1] for r in news]) for m in models}
        lines.append(
            f"| **20news mean** | {len(news)} tasks | | | **{mean['APSVM']:.2f}** | "
            f"**{mean['APPX old']:.2f}** | **{mean['APPX new']:.2f}** | "
            f"{mean['APPX old'] - mean['APSVM']:+.2f} | {mean['APPX new'] - mean['APSVM']:+.2f} "
            f"| {tsum['APSVM']:.2f} (sum) | {tsum['APPX old']:.2f} (sum) | "
            f"{tsum['APPX new']:.2f} (sum) | | | | |")
    worst = {m: min(r[4][m][0] - r[4]["APSVM"][0] for r in rows) for m in models[1:]}
    lines += [
        "",
        f"Largest shortfall below APSVM: old defaults {worst['APPX old']:+.2f}, new defaults "
        f"{worst['APPX new']:+.2f} AP points.",
        "",
        "Reproduce: `python bench/appx_defaults.py [--large]` (writes this file).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.output).write_text(text)


if __name__ == "__main__":
    main()
