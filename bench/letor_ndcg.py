"""MQ2008 (LETOR 4.0): test NDCG@10 and MAP of the NDCG structural SVM vs MAP-SVM, binary SVM, rax.

Data: ``../shared/data/mq2008`` (784 queries, 15,211 documents, 46 features,
grades 0/1/2), the five LETOR 4.0 folds (``FORMAT.txt``): fold ``k`` trains
on ``S_k, S_k+1, S_k+2``, validates on ``S_k+3`` and tests on ``S_k+4``
(indices mod 5). Features as given (dense float32).

Models, all linear scorers ``s = X w (+ b)``:

* **NDCG-SVM**: ``jaxrank.NDCGSVM(C).fit(X, y, groups=qid)``: structural SVM on
  the mean over queries of ``1 - NDCG`` with binary gains (relevant iff
  grade >= 1) and no cut-off, exact loss-augmented inference.
* **MAP-SVM**: ``jaxrank.APSVM(C).fit(X, y, groups=qid)`` (Yue et al. 2007).
* **Binary SVM**: ``jaxrank.BinarySVM(C).fit(X, grade >= 1)``, queries ignored
  (estimator defaults, i.e. ``pos_weight="balanced"``, unless ``--binary-pos-weight``).
* **Softmax (rax)** and **ApproxNDCG (rax)**: ``rax.softmax_loss`` and
  ``rax.approx_t12n(rax.ndcg_metric)`` (temperature 1, gains ``2^grade - 1``,
  no cut-off) on the graded labels, per-query lists padded to ``[Q, L]`` with
  ``where`` masks, mean over the training queries; ``optax.adam``, full batch,
  from ``w = 0``.

Model selection, per fold, by the mean NDCG@10 on the validation part: each
SVM's ``C`` from its default grid (``type(est)._default_Cs``) extended at an
edge by the ``Cs="auto"`` rule of :func:`jaxrank.sweep` (while the best ``C``
sits at an edge, two more values beyond it, at most ``--max-extensions``
times); the rax models' step from ``--lrs`` and epochs from the checkpoints
``--epochs`` of one run per step. The model fitted on the training part with
the chosen values is scored on the test part (no refit on train + validation).

Metrics on the test part:

* **NDCG@10**: LETOR gains ``2^grade - 1``, discount ``1/log2(1 + rank)``,
  ``sklearn.metrics.ndcg_score(k=10)`` (tied scores averaged, scikit-learn's
  default), mean over the queries with at least one relevant document;
  queries without one (NDCG undefined, 0/0) are left out for every model.
  The report also gives the mean with those queries counted as 0 (scikit-learn's
  value for them).
* **MAP**: relevant iff grade >= 1, mean per-query AP
  (``jaxrank.metrics.average_precision``, ties as one threshold) over the
  queries with a relevant and an irrelevant document.

    python bench/letor_ndcg.py             # all 5 folds (about 10-20 min on 2 busy cores)
    python bench/letor_ndcg.py --folds 1   # quick: fold 1 only
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import ndcg_score

import jaxrank

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import cpu_name  # noqa: E402
from letor import extend_grid  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "mq2008"
RAX = {"Softmax (rax)": "softmax", "ApproxNDCG (rax)": "approx_ndcg"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Data and metrics.
# ---------------------------------------------------------------------------


def load_parts(path):
    """The five partitions S1..S5 as ``(X dense float32, grades, qid)``."""
    parts = []
    for i in range(1, 6):
        X, y, q = jaxrank.load_data(path / f"S{i}.txt", return_groups=True)
        X = X.toarray() if hasattr(X, "toarray") else X
        parts.append((np.asarray(X, np.float32), np.asarray(y).astype(np.int32), np.asarray(q)))
    return parts


def fold_split(parts, k):
    """LETOR fold ``k`` (1-based): ``{train, vali, test}`` -> ``(X, y, q)`` and file names."""
    idx = {"train": [(k - 1 + j) % 5 for j in range(3)], "vali": [(k + 2) % 5],
           "test": [(k + 3) % 5]}
    out = {name: tuple(np.concatenate([parts[i][c] for i in ix]) for c in range(3))
           for name, ix in idx.items()}
    names = {name: [f"S{i + 1}.txt" for i in ix] for name, ix in idx.items()}
    return out, names


def layout(q):
    """``[Q, L]`` row indices of each query's documents (``n`` marks padding)."""
    _, inv = np.unique(q, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    Q, L, n = counts.size, int(counts.max()), len(q)
    lay = np.full((Q, L), n, np.int64)
    pos = np.arange(n) - np.repeat(starts, counts)
    lay[inv[order], pos] = order
    return lay


class Split:
    """One part of a fold with its padded layout, for the metrics and rax."""

    def __init__(self, X, y, q):
        self.X, self.y, self.q = X, y, q
        self.lay = layout(q)
        self.mask = self.lay < len(y)
        self.grades = np.where(self.mask, np.concatenate([y, [0]])[self.lay], 0)
        self.gains = (2.0 ** self.grades - 1).astype(np.float64)  # LETOR gains
        self.has_rel = self.grades.max(1) >= 1
        rel = y >= 1
        _, self.seg = np.unique(q, return_inverse=True)
        self.seg = self.seg.astype(np.int32)
        ok = (np.bincount(self.seg, rel) > 0) & (np.bincount(self.seg, ~rel) > 0)
        self.ap_ok = ok[self.seg]
        self.n_q, self.n_ap = self.lay.shape[0], int(ok.sum())

    def padded_scores(self, s):
        s = np.asarray(s, np.float64)
        low = s.min() - 1.0  # padding below every document: no effect on NDCG@k (gain 0)
        return np.where(self.mask, np.concatenate([s, [low]])[self.lay], low)

    def ndcg10(self, s):
        """(mean over queries with a relevant document, mean with the others as 0)."""
        S = self.padded_scores(s)
        m = float(ndcg_score(self.gains[self.has_rel], S[self.has_rel], k=10))
        return m, m * self.has_rel.sum() / self.n_q

    def map(self, s):
        return float(jaxrank.metrics.average_precision(
            np.asarray(s, np.float32), self.y >= 1, where=self.ap_ok, segments=self.seg))

    def evaluate(self, s):
        nd, nd0 = self.ndcg10(s)
        return dict(ndcg=nd, ndcg0=nd0, map=self.map(s))


# ---------------------------------------------------------------------------
# The SVMs: C by the validation NDCG@10, grid extended at an edge (Cs="auto").
# ---------------------------------------------------------------------------


def fit_svm(name, cls, grouped, C, sp, params):
    tr = sp["train"]
    est = cls(C=C, **params)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", ConvergenceWarning)
        if grouped:
            est.fit(tr.X, tr.y, groups=tr.q)
        else:
            est.fit(tr.X, (tr.y >= 1).astype(np.int32))
    wall = time.perf_counter() - t0
    val = sp["vali"].evaluate(est.decision_function(sp["vali"].X))
    test = sp["test"].evaluate(est.decision_function(sp["test"].X))
    gap = (est.objective_ - est.dual_objective_) / max(abs(est.objective_), 1e-30)
    r = dict(C=C, val=val["ndcg"], val_map=val["map"], test=test, wall=wall,
             iters=int(est.n_iter_), status=str(est.fit_status_), gap=float(gap))
    if grouped:  # the estimator's own measure (binary NDCG / AP, no cut-off) on validation
        r["own_val"] = float(est.score(sp["vali"].X, sp["vali"].y, groups=sp["vali"].q))
        r["queries"] = (int(est.n_queries_), int(est.n_dropped_queries_))
    log(f"  {name:11s} C={C:<8g} val NDCG@10 {r['val']:.4f} test NDCG@10 {test['ndcg']:.4f} "
        f"MAP {test['map']:.4f} iters {r['iters']:4d} {r['status']} gap {gap:.1e} "
        f"{wall:.1f} s")
    return r


def select_C(name, cls, grouped, params, sp, max_extensions):
    """Fits over the default grid, extended at an edge; the best by validation NDCG@10."""
    default = set(cls._default_Cs)

    def fit(C):
        r = fit_svm(name, cls, grouped, C, sp, params)
        r["on_default_grid"] = C in default
        return r

    best, runs, _ = extend_grid(fit, cls._default_Cs, max_extensions)
    return best, runs


# ---------------------------------------------------------------------------
# rax baselines: linear scorer, optax adam, full batch over padded queries.
# ---------------------------------------------------------------------------


def import_rax():
    """``rax``; rax 0.4.0 decorates its t12n losses with ``jax.util.wraps``, which newer jax
    no longer has: a stand-in (it only copies the name and docstring) is installed then."""
    try:
        jax.util.wraps  # noqa: B018
    except AttributeError:
        import functools
        import types

        def wraps(wrapped, namestr=None, docstr=None, **kwargs):
            return functools.wraps(wrapped)

        jax.util = types.SimpleNamespace(wraps=wraps)
        RAX_SHIM.append(True)
    import rax

    return rax


RAX_SHIM = []


def rax_baseline(name, kind, sp, lrs, epochs):
    """Adam on a rax loss; returns the best (lr, epochs) by validation NDCG@10 and all runs."""
    rax = import_rax()

    tr = sp["train"]
    Xp = jnp.asarray(np.concatenate([tr.X, np.zeros((1, tr.X.shape[1]), np.float32)])[tr.lay])
    yp = jnp.asarray(tr.grades.astype(np.float32))
    mp = jnp.asarray(tr.mask)
    loss = (rax.softmax_loss if kind == "softmax" else rax.approx_t12n(rax.ndcg_metric))

    data = (Xp, yp, mp)  # jit arguments, not closed-over constants (XLA would fold them)

    def loss_fn(w, data):
        Xp, yp, mp = data
        return loss(Xp @ w, yp, where=mp)  # mean over the [Q] lists

    runs = []
    for lr in lrs:
        opt = optax.adam(lr)

        @jax.jit
        def train(w, state, n_steps, data):
            def body(_, c):
                w, state = c
                g = jax.grad(loss_fn)(w, data)
                upd, state = opt.update(g, state, w)
                return optax.apply_updates(w, upd), state
            return jax.lax.fori_loop(0, n_steps, body, (w, state))

        w = jnp.zeros(Xp.shape[-1], jnp.float32)
        state = opt.init(w)
        done = 0
        t0 = time.perf_counter()
        for ep in sorted(epochs):
            w, state = train(w, state, ep - done, data)
            done = ep
            wn = np.asarray(w)
            val = sp["vali"].evaluate(sp["vali"].X @ wn)
            r = dict(lr=lr, epochs=ep, val=val["ndcg"], val_map=val["map"],
                     test=sp["test"].evaluate(sp["test"].X @ wn),
                     loss=float(jax.jit(loss_fn)(w, data)), wall=time.perf_counter() - t0)
            runs.append(r)
            log(f"  {name:16s} lr={lr:<6g} ep {ep:4d} loss {r['loss']:.4f} val NDCG@10 "
                f"{r['val']:.4f} test NDCG@10 {r['test']['ndcg']:.4f} MAP "
                f"{r['test']['map']:.4f} {r['wall']:.1f} s")
    best = max(runs, key=lambda r: r["val"])  # first on ties
    return best, runs


# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------


def rax_version():
    from importlib.metadata import version

    return version("rax")


def write_report(args, folds, models, results, grids, model_time, fold_info, started, total):
    L = []
    w = L.append
    f = lambda x: f"{x:.4f}"  # noqa: E731
    w("# MQ2008 (LETOR 4.0): NDCG structural SVM vs MAP-SVM, binary SVM and rax "
      "(`bench/letor_ndcg.py`)\n")
    w(f"Command: `python bench/letor_ndcg.py {' '.join(args.argv)}`".rstrip() + "  ")
    w(f"Date: {started:%Y-%m-%d %H:%M} UTC  ")
    w(f"Machine: `{platform.processor() or platform.machine()}`, {os.cpu_count()} CPU cores "
      f"({cpu_name()}), jax {jax.__version__} on {jax.devices()[0].platform}; shared and "
      "loaded by other jobs while this ran, so times are indicative.  ")
    w(f"Total run time: **{total:.0f} s** ({', '.join(f'fold {k}' for k in folds)}).\n")
    w("## Protocol\n")
    w("* LETOR 4.0 folds: fold k trains on S_k, S_k+1, S_k+2, validates on S_k+3, tests on "
      "S_k+4 (mod 5); features as given; the model fitted on the training part with the "
      "hyperparameters of best validation NDCG@10 is scored on the test part (no refit).")
    w("* SVMs: `C` from the estimator's default grid `_default_Cs` (NDCGSVM and APSVM: "
      f"{', '.join(f'{c:g}' for c in jaxrank.NDCGSVM._default_Cs)}; BinarySVM: "
      f"{', '.join(f'{c:g}' for c in jaxrank.BinarySVM._default_Cs)}), extended while the "
      f"best `C` is at an edge by two more decades beyond it (at most {args.max_extensions} "
      "times, the `Cs=\"auto\"` rule of `jaxrank.sweep`); `tol` 1e-4, `max_iter` default. "
      "NDCGSVM and APSVM: `fit(X, grade, groups=qid)`, relevant iff grade >= 1 (binary "
      "gains, no cut-off for NDCGSVM); BinarySVM: `fit(X, grade >= 1)`, queries ignored, "
      f"pos_weight={args.binary_pos_weight!r}.")
    w("* rax: linear scorer `s = X w` from `w = 0`, `optax.adam(lr)`, full batch over the "
      "training queries padded to `[Q, L]` with `where` masks, graded labels 0/1/2; "
      "(a) `rax.softmax_loss`, (b) `rax.approx_t12n(rax.ndcg_metric)` (temperature 1, "
      f"gains 2^grade - 1, no cut-off); lr from {{{args.lrs}}}, epochs (full-batch steps) "
      f"from the checkpoints {{{args.epochs}}} of one run per lr."
      + (f" (rax {rax_version()} uses `jax.util.wraps`, absent from jax {jax.__version__}: "
         "the script installs a stand-in that only copies the function name and docstring.)"
         if RAX_SHIM else ""))
    w("* **NDCG@10**: gains 2^grade - 1 (LETOR), discount 1/log2(1 + rank), "
      "`sklearn.metrics.ndcg_score(k=10)` (tied scores averaged); mean over the queries "
      "with at least one relevant document, the queries without any are left out for all "
      "models (the last column gives the mean with them counted as 0, scikit-learn's value "
      "for them, i.e. the first mean times the fraction of queries with a relevant "
      "document).")
    w("* **MAP**: relevant iff grade >= 1; mean per-query AP "
      "(`jaxrank.metrics.average_precision`, ties as one threshold) over the queries with "
      "a relevant and an irrelevant document (queries that are all relevant or all "
      "irrelevant left out).\n")
    w("Test queries per fold (all / with a relevant document (NDCG@10) / with both kinds "
      "(MAP)): " + "; ".join(f"fold {k}: {fold_info[k]['test']}" for k in folds) + ".\n")

    def table(title, key, extra=None):
        w(f"## Test {title}\n")
        hdr = "| model | " + " | ".join(f"fold {k}" for k in folds) + " | mean |"
        w(hdr + (f" {extra[0]} |" if extra else ""))
        w("|---|" + "---|" * (len(folds) + 1 + bool(extra)))
        for m in models:
            v = [results[m, k]["test"][key] for k in folds]
            row = f"| {m} | " + " | ".join(f(x) for x in v) + f" | **{f(np.mean(v))}** |"
            if extra:
                row += f" {f(np.mean([results[m, k]['test'][extra[1]] for k in folds]))} |"
            w(row)
        w("")

    table("NDCG@10 (gains 2^grade - 1)", "ndcg",
          extra=("mean, no-relevant queries as 0", "ndcg0"))
    table("MAP (relevant = grade >= 1)", "map")

    w("## Chosen hyperparameters (validation NDCG@10 in brackets)\n")
    w("| model | " + " | ".join(f"fold {k}" for k in folds) + " |")
    w("|---|" + "---|" * len(folds))
    for m in models:
        cells = []
        for k in folds:
            r = results[m, k]
            if "C" in r:
                Cs = [g["C"] for g in grids[m, k]]
                edge = " (edge)" if r["C"] in (min(Cs), max(Cs)) else ""
                cells.append(f"C={r['C']:g}{edge} [{r['val']:.4f}]")
            else:
                cells.append(f"lr={r['lr']:g}, {r['epochs']} ep. [{r['val']:.4f}]")
        w(f"| {m} | " + " | ".join(cells) + " |")
    w("\n(edge: the chosen C is at an end of the grid after the extensions.)\n")

    svm_models = [m for m in models if m not in RAX]
    if svm_models and args.max_extensions > 0:
        w("Sensitivity to the edge extension: the SVMs with `C` chosen on the default grid "
          "`_default_Cs` alone (same fits, no extension):\n")
        w("| model | chosen C per fold | test NDCG@10 mean | test MAP mean | with extension: "
          "NDCG@10 / MAP |")
        w("|---|---|---|---|---|")
        for m in svm_models:
            picks = []
            for k in folds:
                runs = [g for g in grids[m, k] if g["on_default_grid"]]  # sorted by C
                picks.append(runs[int(np.argmax([g["val"] for g in runs]))])
            Cs = ", ".join(f"{g['C']:g}" for g in picks)
            w(f"| {m} | {Cs} | "
              f"{f(np.mean([g['test']['ndcg'] for g in picks]))} | "
              f"{f(np.mean([g['test']['map'] for g in picks]))} | "
              f"{f(np.mean([results[m, k]['test']['ndcg'] for k in folds]))} / "
              f"{f(np.mean([results[m, k]['test']['map'] for k in folds]))} |")
        w("")

    w("Time per model over all folds (every grid fit / rax run, validation and test "
      "scoring, compilation included):\n")
    w("| model | fits (SVM) / checkpoints (rax) | time (s) |")
    w("|---|---|---|")
    for m in models:
        w(f"| {m} | {sum(len(grids[m, k]) for k in folds)} | {model_time[m]:.0f} |")

    w("\n## SVM grids\n")
    w("Every fit: solver iterations, `fit_status_`, relative duality gap, wall time of "
      "`fit` (the first fit of a fold includes compilation), validation NDCG@10 and MAP, "
      "the estimator's own `score` on validation (NDCGSVM: binary-gain NDCG without cut-off; "
      "APSVM: MAP), test NDCG@10 and MAP.\n")
    w("| model | fold | C | iters | status | rel. gap | wall (s) | val NDCG@10 | val MAP | "
      "own val score | test NDCG@10 | test MAP |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in models:
        if m in RAX:
            continue
        for k in folds:
            for r in grids[m, k]:
                mark = " **(chosen)**" if r["C"] == results[m, k]["C"] else ""
                own = f(r["own_val"]) if "own_val" in r else "-"
                w(f"| {m} | {k} | {r['C']:g}{mark} | {r['iters']} | {r['status']} | "
                  f"{r['gap']:.1e} | {r['wall']:.1f} | {f(r['val'])} | {f(r['val_map'])} | "
                  f"{own} | {f(r['test']['ndcg'])} | {f(r['test']['map'])} |")
    qs = [results["NDCG-SVM", k].get("queries") for k in folds] if "NDCG-SVM" in models else []
    if qs and all(qs):
        w(f"\nNDCG-SVM / MAP-SVM training queries used per fold: "
          f"{', '.join(str(a - b) for a, b in qs)} (dropped, no relevant or no irrelevant "
          f"document: {', '.join(str(b) for _, b in qs)}).")
    w("\n## rax runs\n")
    w("Validation NDCG@10 per (lr, epochs), the chosen one in bold.\n")
    for m in models:
        if m not in RAX:
            continue
        lrs = sorted({r["lr"] for r in grids[m, folds[0]]})
        eps = sorted({r["epochs"] for r in grids[m, folds[0]]})
        w(f"{m}:\n")
        w("| fold | lr | " + " | ".join(f"{e} ep." for e in eps) + " |")
        w("|---|---|" + "---|" * len(eps))
        for k in folds:
            for lr in lrs:
                cells = []
                for e in eps:
                    r = next(g for g in grids[m, k] if g["lr"] == lr and g["epochs"] == e)
                    c = f(r["val"])
                    cells.append(f"**{c}**" if r is results[m, k] else c)
                w(f"| {k} | {lr:g} | " + " | ".join(cells) + " |")
        w("")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(L) + "\n")


# ---------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--folds", default="1,2,3,4,5", help="e.g. 1 or 1,3")
    ap.add_argument("--lrs", default="0.01,0.1,1", help="adam steps of the rax models (one "
                    "decade above letor.py's: at 0.001 ApproxNDCG barely leaves w = 0 in 400 "
                    "steps)")
    ap.add_argument("--epochs", default="25,50,100,200,400")
    ap.add_argument("--max-extensions", type=int, default=3,
                    help="grid extensions at an edge (the Cs='auto' rule; 0: default grid)")
    ap.add_argument("--binary-pos-weight", default="balanced",
                    help="BinarySVM's pos_weight ('balanced', the default, or a number)")
    ap.add_argument("--models", default="", help="comma-separated subset of the model names")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "letor_ndcg.md")
    args = ap.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    if not args.data.exists():
        raise SystemExit(f"{args.data} not found (LETOR 4.0 MQ2008, see ../shared/data)")
    started = datetime.now(timezone.utc)
    T0 = time.perf_counter()
    folds = [int(k) for k in args.folds.split(",")]
    lrs = [float(v) for v in args.lrs.split(",")]
    epochs = [int(v) for v in args.epochs.split(",")]
    pw = args.binary_pos_weight
    pw = pw if pw == "balanced" else float(pw)
    svms = {  # name: (class, fit on queries, extra parameters)
        "NDCG-SVM": (jaxrank.NDCGSVM, True, {}),
        "MAP-SVM": (jaxrank.APSVM, True, {}),
        "Binary SVM": (jaxrank.BinarySVM, False, {"pos_weight": pw}),
    }
    models = [*svms, *RAX]
    if args.models:
        keep = [m.strip() for m in args.models.split(",")]
        models = [m for m in models if m in keep]
    parts = load_parts(args.data)
    log(f"jax {jax.__version__} on {jax.devices()[0].platform}; MQ2008: "
        f"{sum(p[0].shape[0] for p in parts)} documents, "
        f"{sum(np.unique(p[2]).size for p in parts)} queries, {parts[0][0].shape[1]} features")
    results, grids, model_time, fold_info = {}, {}, {m: 0.0 for m in models}, {}
    done = []
    for k in folds:
        raw, names = fold_split(parts, k)
        sp = {s: Split(*raw[s]) for s in raw}
        fold_info[k] = {s: f"{sp[s].n_q}/{int(sp[s].has_rel.sum())}/{sp[s].n_ap}" for s in sp}
        log(f"\nfold {k}: train {names['train']} ({sp['train'].n_q} queries), vali "
            f"{names['vali']} ({sp['vali'].n_q}), test {names['test']} ({sp['test'].n_q})")
        for m in models:
            t0 = time.perf_counter()
            if m in svms:
                cls, grouped, params = svms[m]
                best, runs = select_C(m, cls, grouped, params, sp, args.max_extensions)
                log(f"  -> {m}: C={best['C']:g}")
            else:
                best, runs = rax_baseline(m, RAX[m], sp, lrs, epochs)
                log(f"  -> {m}: lr={best['lr']:g}, {best['epochs']} epochs")
            model_time[m] += time.perf_counter() - t0
            results[m, k], grids[m, k] = best, runs
        done.append(k)
        # the report after every fold, so that an interrupted run leaves one
        write_report(args, done, models, results, grids, model_time, fold_info, started,
                     time.perf_counter() - T0)
        log(f"fold {k} done, {time.perf_counter() - T0:.0f} s so far; wrote {args.out}")
    log(f"\ntotal {time.perf_counter() - T0:.0f} s")


if __name__ == "__main__":
    main()
