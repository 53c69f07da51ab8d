"""MQ2008 (LETOR 4.0): test MAP of MAP-SVM vs pooled AP-SVM vs binary SVM vs pairwise hinge.

Data: ``../shared/data/mq2008`` (784 queries, 15,211 documents, 46 features,
grades 0/1/2), the five LETOR 4.0 folds (``FORMAT.txt``): fold ``k`` trains
on ``S_k, S_k+1, S_k+2``, validates on ``S_k+3`` and tests on ``S_k+4``
(indices mod 5). Relevant means grade >= 1 (LETOR's convention for MAP).

Models (features as given, dense float32):

* **MAP-SVM**: ``jaxrank.APSVM(C).fit(X, y, groups=qid)``: mean AP over
  queries, one AP slack per query (Yue et al. 2007), solved in the 1-slack form.
* **AP-SVM (pooled)**: ``jaxrank.APSVM(C).fit(X, relevant)``: one AP over all
  training documents, queries ignored.
* **Binary SVM**: ``jaxrank.BinarySVM(C, pos_weight=1).fit(X, relevant)`` (hinge loss,
  intercept, unweighted as liblinear; the balanced row is the estimator's default).
* **Pairwise hinge (rax)**: a linear scorer trained with
  ``rax.pairwise_hinge_loss`` (pairs of documents of one query with different
  grades, mean over the pairs of a query, then over queries) and
  ``optax.adam``, full batch, from ``w = 0``; the step size and the number of
  epochs are the hyperparameters (RankSVM-style baseline without the
  quadratic regulariser; early stopping regularises).

Model selection, per LETOR fold, by the MAP on the validation part: each
SVM's ``C`` from its own default grid (``type(est)._default_Cs``) extended by
the ``Cs="auto"`` rule of :func:`jaxrank.sweep` (while the best ``C`` sits at
an edge, two more values beyond it, at most 3 times); the baseline's step
from ``--lrs`` and its epochs from the checkpoints ``--epochs`` of one run per
step. The model fitted on the training part with the chosen values is scored
on the test part (no refit on train + validation, as in LETOR's protocol).

MAP: mean over the test queries that have a relevant and an irrelevant
document of the per-query AP (``score(X, y, groups=qid)``; ties count as one
threshold, scikit-learn's convention). Queries without a relevant document
have no AP and queries whose documents are all relevant have AP 1 under any
ranking; both are left out (LETOR's published tables use another convention,
so their figures are not directly comparable).

Also reported: the 1-slack solver's iterations, duality gap and time per fit
of MAP-SVM at every ``C`` (is it fast enough on 471 training queries?) and,
with ``--bcfw``, a prototype of the n-slack block-coordinate Frank-Wolfe
solver (Lacoste-Julien et al. 2013, Algorithm 3 on the per-query AP slacks)
on fold 1 against the built-in solver at the same ``C``.

    python bench/letor.py                   # all 5 folds (about 20-40 min on 2 cores)
    python bench/letor.py --folds 1 --bcfw  # fold 1 plus the BCFW comparison
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import tempfile
import time
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.exceptions import ConvergenceWarning

import jaxrank
from jaxrank.inference import ap_oracle
from jaxrank.models import APModel, QueryProblem, design, query_layout

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "mq2008"
C_RANGE = (1e-6, 1e8)  # the Cs="auto" bounds of jaxrank.sweep


# ---------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------


def load_parts(path):
    """The five partitions S1..S5 as ``(X dense float32, grades, qid)``."""
    parts = []
    for i in range(1, 6):
        X, y, q = jaxrank.load_data(path / f"S{i}.txt", return_groups=True)
        parts.append((np.asarray(X.toarray() if hasattr(X, "toarray") else X, np.float32),
                      np.asarray(y), np.asarray(q)))
    return parts


def fold_split(parts, k):
    """LETOR fold ``k`` (1-based): ``{train, vali, test}`` -> ``(X, y, q)`` and file names."""
    idx = {"train": [(k - 1 + j) % 5 for j in range(3)], "vali": [(k + 2) % 5],
           "test": [(k + 3) % 5]}
    out = {}
    for name, ix in idx.items():
        out[name] = tuple(np.concatenate([parts[i][c] for i in ix]) for c in range(3))
    names = {name: [f"S{i + 1}.txt" for i in ix] for name, ix in idx.items()}
    return out, names


def mean_ap(scores, grades, qid):
    """MAP over queries with a relevant and an irrelevant document (public metric)."""
    rel = np.asarray(grades) >= 1
    _, inv = np.unique(qid, return_inverse=True)
    ok = ((np.bincount(inv, rel) > 0) & (np.bincount(inv, ~rel) > 0))[inv]
    return float(jaxrank.metrics.average_precision(
        np.asarray(scores, np.float32), rel, where=ok, segments=inv.astype(np.int32)))


# ---------------------------------------------------------------------------
# The SVMs: C by the validation MAP, grid extended at an edge (Cs="auto").
# ---------------------------------------------------------------------------


SVMS = {  # name: (class, fit on queries, extra parameters)
    "MAP-SVM": (jaxrank.APSVM, True, {}),
    "AP-SVM (pooled)": (jaxrank.APSVM, False, {}),
    "Binary SVM": (jaxrank.BinarySVM, False, {"pos_weight": 1.0}),
}
BALANCED = {"Binary SVM (balanced)": (jaxrank.BinarySVM, False, {"pos_weight": "balanced"})}


def fit_svm(cls, grouped, C, split, params):
    X, y, q = split["train"]
    params = dict(params)
    if params.get("pos_weight") == "balanced":  # n_neg / n_pos of the training part
        params["pos_weight"] = float(np.sum(y < 1) / np.sum(y >= 1))
    est = cls(C=C, **params)
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", ConvergenceWarning)
        if grouped:
            est.fit(X, y, groups=q)
        else:
            est.fit(X, (y >= 1).astype(np.int32))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    Xv, yv, qv = split["vali"]
    Xt, yt, qt = split["test"]
    rel_v, rel_t = (yv >= 1).astype(np.int32), (yt >= 1).astype(np.int32)
    val, test = est.score(Xv, rel_v, groups=qv), est.score(Xt, rel_t, groups=qt)
    check = mean_ap(est.decision_function(Xt), yt, qt)  # the public metric agrees
    assert abs(check - test) < 1e-6, (check, test)
    gap = (est.objective_ - est.dual_objective_) / max(abs(est.objective_), 1e-30)
    return dict(C=C, val=val, test=test, wall=wall, cpu=cpu, iters=int(est.n_iter_),
                converged=bool(est.converged_), gap=float(gap), est=est,
                wnorm=float(np.linalg.norm(est.coef_)))


def extend_grid(fit, grid, max_extensions=3):
    """``fit(C) -> dict with "val"`` over ``grid``, extended as ``Cs="auto"`` does.

    While the best validation score (the first on ties, as GridSearchCV) sits
    at an edge, two more values beyond it with the grid's log spacing, at most
    ``max_extensions`` times, within ``C_RANGE``. Returns ``(best run, runs in
    C order, {C: run})``.
    """
    grid = list(grid)
    step = np.log10(grid[1] / grid[0])
    runs = {C: fit(C) for C in grid}
    for _ in range(max_extensions):
        Cs = sorted(runs)
        b = int(np.argmax([runs[C]["val"] for C in Cs]))
        if b == len(Cs) - 1:
            new = [Cs[-1] * 10 ** (step * j) for j in (1, 2)]
        elif b == 0:
            new = [Cs[0] * 10 ** (-step * j) for j in (1, 2)]
        else:
            break
        new = [C for C in new if C_RANGE[0] <= C <= C_RANGE[1]]
        if not new:
            break
        for C in new:
            runs[C] = fit(C)
    Cs = sorted(runs)
    best = Cs[int(np.argmax([runs[C]["val"] for C in Cs]))]
    return runs[best], [runs[C] for C in Cs], runs


def select_C(cls, grouped, params, split, log, max_extensions=3):
    """Fits over the default grid, extended at an edge; the best by validation MAP."""

    def fit(C):
        r = fit_svm(cls, grouped, C, split, params)
        log(r)
        return r

    best, runs, _ = extend_grid(fit, cls._default_Cs, max_extensions)
    return best, runs


# ---------------------------------------------------------------------------
# Pairwise baseline: rax pairwise hinge + optax, linear scorer.
# ---------------------------------------------------------------------------


def padded(X, y, q):
    layout, _ = query_layout(q)
    n = X.shape[0]
    Xp = np.concatenate([X, np.zeros((1, X.shape[1]), X.dtype)])[layout]
    yp = np.concatenate([y, [0]])[layout].astype(np.float32)
    return jnp.asarray(Xp), jnp.asarray(yp), jnp.asarray(layout < n)


def pairwise_baseline(split, lrs, epochs):
    """Adam on the per-query pairwise hinge; returns the best (lr, epochs) by validation MAP."""
    import rax

    Xp, yp, mp = padded(*split["train"])

    def loss_fn(w):
        s = Xp @ w  # [Q, L]
        per_query = jax.vmap(lambda s_, y_, m_: rax.pairwise_hinge_loss(
            s_, y_, where=m_, reduce_fn=jnp.mean))(s, yp, mp)
        has_pair = jax.vmap(lambda y_, m_: jnp.any(
            (y_[:, None] > y_[None, :]) & m_[:, None] & m_[None, :]))(yp, mp)
        return jnp.sum(per_query) / jnp.maximum(jnp.sum(has_pair), 1)

    runs = []
    for lr in lrs:
        opt = optax.adam(lr)

        @jax.jit
        def train(w, state, n_steps):
            def body(_, c):
                w, state = c
                g = jax.grad(loss_fn)(w)
                upd, state = opt.update(g, state, w)
                return optax.apply_updates(w, upd), state
            return jax.lax.fori_loop(0, n_steps, body, (w, state))

        w = jnp.zeros(Xp.shape[-1], jnp.float32)
        state = opt.init(w)
        done = 0
        t0 = time.perf_counter()
        for ep in sorted(epochs):
            w, state = train(w, state, ep - done)
            done = ep
            Xv, yv, qv = split["vali"]
            Xt, yt, qt = split["test"]
            wn = np.asarray(w)
            runs.append(dict(lr=lr, epochs=ep, val=mean_ap(Xv @ wn, yv, qv),
                             test=mean_ap(Xt @ wn, yt, qt),
                             wall=time.perf_counter() - t0))
    best = max(runs, key=lambda r: r["val"])  # first on ties
    return best, runs


# ---------------------------------------------------------------------------
# n-slack block-coordinate Frank-Wolfe prototype (Lacoste-Julien et al. 2013).
# ---------------------------------------------------------------------------


def bcfw(X, y, q, C, *, passes, tol, seed=0, min_relevance=1):
    """BCFW on ``1/2||w||^2 + C/Q sum_q xi_q`` (Algorithm 3 of Lacoste-Julien et al.).

    Blocks are the queries with both kinds of document; block ``q`` keeps its
    share ``w_q`` of ``w = sum_q w_q`` and ``l_q`` of the dual's linear term.
    A step calls the exact AP oracle on query ``q`` alone and does the exact
    line search on the dual along that block. After every pass over the
    blocks (random order), one oracle call on every query gives ``F(w)``
    and the duality gap ``F(w) - D``. Returns a list of per-pass records.
    """
    rel = np.asarray(y) >= min_relevance
    layout, _ = query_layout(q)
    n, d = X.shape
    L = layout.shape[1]
    pad = layout == n
    lay = np.minimum(layout, n - 1)
    posp = rel[lay] & ~pad
    usep = ~pad
    ok = posp.any(1) & (~posp & usep).any(1)
    Xp, posp, usep = X[lay][ok], posp[ok], usep[ok]
    Xp[~usep] = 0
    Q = Xp.shape[0]
    kp = int(posp.sum(1).max())
    arrays = (jnp.asarray(Xp), jnp.asarray(posp), jnp.asarray(usep))
    scale = jnp.float32(C / Q)

    def oracle(w, i, arrays):
        Xp, posp, usep = arrays
        r = ap_oracle(Xp[i] @ w, posp[i], usep[i], kp=kp)
        return r.loss, Xp[i].T @ r.coef, r.hinge

    @jax.jit
    def one_pass(carry, key, arrays):
        def body(c, i):
            w, Wb, ell, Lb = c
            loss, psi, _ = oracle(w, i, arrays)
            ws, ls = scale * psi, scale * loss
            dw = ws - Wb[i]
            den = jnp.dot(dw, dw)
            gamma = jnp.clip(((ls - Lb[i]) - jnp.dot(w, dw)) / jnp.maximum(den, 1e-30), 0, 1)
            gamma = jnp.where(den > 0, gamma, 0.0)
            w = w + gamma * dw
            ell = ell + gamma * (ls - Lb[i])
            return (w, Wb.at[i].add(gamma * dw), ell, Lb.at[i].add(gamma * (ls - Lb[i]))), None
        carry, _ = jax.lax.scan(body, carry, jax.random.permutation(key, Q))
        return carry

    @jax.jit
    def primal_dual(carry, arrays):
        w, _, ell, _ = carry
        hinge = jax.vmap(lambda i: oracle(w, i, arrays)[2])(jnp.arange(Q))
        F = 0.5 * w @ w + scale * jnp.sum(jnp.maximum(hinge, 0))
        D = ell - 0.5 * w @ w
        return F, D

    carry = (jnp.zeros(d, jnp.float32), jnp.zeros((Q, d), jnp.float32), jnp.float32(0),
             jnp.zeros(Q, jnp.float32))
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    jax.block_until_ready(one_pass(carry, key, arrays))  # compile
    jax.block_until_ready(primal_dual(carry, arrays))
    compile_s = time.perf_counter() - t0
    out, best_F, best_D = [], np.inf, -np.inf
    t0, c0 = time.perf_counter(), time.process_time()
    for p in range(1, passes + 1):
        key, sub = jax.random.split(key)
        carry = one_pass(carry, sub, arrays)
        F, D = (float(v) for v in primal_dual(carry, arrays))
        best_F, best_D = min(best_F, F), max(best_D, D)
        gap = (best_F - best_D) / abs(best_F)
        out.append(dict(passes=p, F=best_F, D=best_D, gap=gap,
                        wall=time.perf_counter() - t0, cpu=time.process_time() - c0))
        if gap <= tol:
            break
    return out, compile_s, Q, L


def one_slack_curve(X, y, q, C, *, tol, max_iter):
    """The built-in 1-slack solver on the same problem, with its (iteration, gap) curve."""
    est = jaxrank.APSVM(C=C)
    rel = np.asarray(y) >= est.min_relevance
    layout, _ = query_layout(q)
    model = APModel(kp=int(max(rel[q == g].sum() for g in np.unique(q))), grouped=True)
    data = design(X)
    problem = QueryProblem(jnp.asarray(rel), jnp.ones(len(rel), bool), jnp.asarray(layout))
    curve = []

    def cb(it, obj, dual):
        curve.append((int(it), float(obj), float(dual), time.perf_counter()))

    fit = jax.jit(jaxrank.solvers.fit, static_argnames=("model", "callback"))
    solver = jaxrank.solvers.Solver(tol=jnp.float32(tol), max_iter=max_iter)
    jax.block_until_ready(fit(model, data, problem, C=jnp.float32(C), solver=solver,
                              callback=cb))  # compile + run once
    curve.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    res = jax.block_until_ready(fit(model, data, problem, C=jnp.float32(C), solver=solver,
                                    callback=cb))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = [dict(iters=it, F=o, D=d_, gap=(o - d_) / abs(o), wall=t - t0)
            for it, o, d_, t in curve]
    return res, rows, wall, cpu


# ---------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------


def fmt(x, nd=4):
    return f"{x:.{nd}f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--folds", default="1,2,3,4,5")
    ap.add_argument("--lrs", default="0.001,0.01,0.1")
    ap.add_argument("--epochs", default="25,50,100,200,400")
    ap.add_argument("--balanced", action="store_true", help="also a binary SVM with "
                    "pos_weight = n_neg / n_pos (slow: 5000 iterations at C = 10)")
    ap.add_argument("--bcfw", action="store_true", help="run the BCFW comparison on fold 1")
    ap.add_argument("--bcfw-only", action="store_true", help="only the BCFW comparison "
                    "(fold 1, --bcfw-Cs)")
    ap.add_argument("--bcfw-Cs", default="", help="Cs of the BCFW comparison "
                    "(default: MAP-SVM's chosen C on fold 1, 1000 and 10000)")
    ap.add_argument("--bcfw-passes", type=int, default=400)
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI check on fold 1")
    ap.add_argument("--save-state", type=Path, default=None,
                    help="also pickle the raw results (to rewrite the report)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "letor.md")
    ap.add_argument("--max-extensions", type=int, default=3,
                    help="grid extensions at an edge (the Cs='auto' rule; 0: default grid)")
    ap.add_argument("--merge", nargs="+", type=Path, default=None,
                    help="write the report from --save-state files of runs over other folds")
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args, args.merge)
    if not args.data.exists():
        raise SystemExit(f"{args.data} not found (LETOR 4.0 MQ2008, see ../shared/data)")
    T0 = time.perf_counter()
    folds = [int(f) for f in args.folds.split(",")]
    lrs = [float(v) for v in args.lrs.split(",")]
    epochs = [int(v) for v in args.epochs.split(",")]
    parts = load_parts(args.data)
    n_q = sum(np.unique(p[2]).size for p in parts)
    print(f"MQ2008: {sum(p[0].shape[0] for p in parts)} documents, {n_q} queries, "
          f"{parts[0][0].shape[1]} features", flush=True)

    if args.bcfw_only:
        bc = run_bcfw(args, parts, folds[0], [float(c) for c in args.bcfw_Cs.split(",")])
        write_bcfw_only(args, folds[0], bc, time.perf_counter() - T0)
        return
    svms = {**SVMS, **(BALANCED if args.balanced else {})}
    results = {}  # (model, fold) -> chosen run
    grids = {}  # (model, fold) -> all runs
    names_by_fold = {}
    model_time = {}
    for k in folds:
        split, names = fold_split(parts, k)
        names_by_fold[k] = names
        qs = {s: np.unique(split[s][2]).size for s in split}
        print(f"\nfold {k}: train {names['train']} ({qs['train']} queries), vali "
              f"{names['vali']} ({qs['vali']}), test {names['test']} ({qs['test']})", flush=True)
        for name, (cls, grouped, params) in svms.items():
            t0 = time.perf_counter()

            def log(r, name=name):
                print(f"  {name:16s} C={r['C']:<8g} val {r['val']:.4f} test {r['test']:.4f} "
                      f"iters {r['iters']:4d} gap {r['gap']:.1e} conv {r['converged']} "
                      f"|w| {r['wnorm']:.3g} {r['wall']:.1f} s", flush=True)

            best, runs = select_C(cls, grouped, params, split, log,
                                  max_extensions=args.max_extensions)
            model_time[name] = model_time.get(name, 0.0) + time.perf_counter() - t0
            results[name, k], grids[name, k] = best, runs
            if grouped:
                results["_queries", k] = (best["est"].n_queries_, best["est"].n_dropped_queries_)
        t0 = time.perf_counter()
        best, runs = pairwise_baseline(split, lrs, epochs)
        name = "Pairwise hinge (rax + optax)"
        model_time[name] = model_time.get(name, 0.0) + time.perf_counter() - t0
        results[name, k], grids[name, k] = best, runs
        print(f"  {name}: lr {best['lr']:g} epochs {best['epochs']} val {best['val']:.4f} "
              f"test {best['test']:.4f}", flush=True)

    # CLI check on the first fold: same MAP as the Python fit at the chosen C.
    cli = None
    if not args.no_cli:
        k = folds[0]
        C = results["MAP-SVM", k]["C"]
        names = names_by_fold[k]
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            train = tmp / "train.txt"
            with open(train, "wb") as f:
                for nm in names["train"]:
                    f.write((args.data / nm).read_bytes())
            test = args.data / names["test"][0]
            from jaxrank.cli import main as cli_main

            buf = io.StringIO()
            t0 = time.perf_counter()
            with redirect_stdout(buf):
                rc1 = cli_main(["train", "-c", f"{C:g}", "--quiet", str(train),
                                str(tmp / "model.npz")])
                rc2 = cli_main(["evaluate", str(tmp / "model.npz"), str(test)])
            out = buf.getvalue()
            cli_map = float(out.split("MAP")[1].split()[0])
            cli = dict(fold=k, C=C, rc=(rc1, rc2), MAP=cli_map, time=time.perf_counter() - t0,
                       out=out, names=names)
            print(f"\nCLI, fold {k}, C={C:g}: MAP {cli_map:.4f} (Python: "
                  f"{results['MAP-SVM', k]['test']:.4f})", flush=True)

    bc = None
    if args.bcfw:
        Cs = ([float(c) for c in args.bcfw_Cs.split(",")] if args.bcfw_Cs else
              sorted({results["MAP-SVM", folds[0]]["C"], 1000.0, 10000.0}))
        bc = run_bcfw(args, parts, folds[0], Cs)

    total = time.perf_counter() - T0
    for runs in [*grids.values(), *results.values()]:
        for r in (runs if isinstance(runs, list) else [runs]):
            if isinstance(r, dict):
                r.pop("est", None)
    state = (folds, list(svms), results, grids, model_time, cli, bc, total)
    if args.save_state:
        import pickle

        with open(args.save_state, "wb") as f:
            pickle.dump(state, f)
    write_report(args, *state)
    print(f"\ntotal {total:.0f} s; wrote {args.out}")


def merge(args, paths):
    """One report from the states of several runs over disjoint folds (run in parallel)."""
    import pickle

    folds, results, grids, model_time, cli, bc, totals = [], {}, {}, {}, None, None, []
    for p in paths:
        with open(p, "rb") as f:
            fo, names, res, gr, mt, c, b, tot = pickle.load(f)
        folds += fo
        results.update(res)
        grids.update(gr)
        for k, v in mt.items():
            model_time[k] = model_time.get(k, 0.0) + v
        cli, bc = cli or c, bc or b
        totals.append(tot)
    print(f"merged {len(paths)} runs; wall of the longest {max(totals):.0f} s, sum "
          f"{sum(totals):.0f} s")
    write_report(args, sorted(folds), names, results, grids, model_time, cli, bc,
                 max(totals), parallel=(len(paths), sum(totals)))
    print(f"wrote {args.out}")


def run_bcfw(args, parts, k, Cs):
    split, _ = fold_split(parts, k)
    X, y, q = split["train"]
    bc = []
    for C in Cs:
        res, curve, wall, cpu = one_slack_curve(X, y, q, C, tol=1e-4, max_iter=1000)
        rows, comp, Q, L = bcfw(X, y, q, C, passes=args.bcfw_passes, tol=1e-4)
        bc.append(dict(C=C, one=(res, curve, wall, cpu), bcfw=(rows, comp), Q=Q, L=L))
        last = rows[-1]
        print(f"\nBCFW vs 1-slack, fold {k}, C={C:g}: 1-slack {int(res.num_steps)} iters "
              f"gap {float((res.objective - res.dual) / res.objective):.1e} {wall:.1f} s; "
              f"BCFW {last['passes']} passes gap {last['gap']:.1e} {last['wall']:.1f} s",
              flush=True)
    return bc


def bcfw_table(w, k, bc):
    w("\n## n-slack block-coordinate Frank-Wolfe (prototype) vs the 1-slack solver\n")
    w(f"Fold {k} training part, same objective `1/2||w||^2 + C/Q sum_q xi_q`. "
      "BCFW (Lacoste-Julien et al. 2013, Alg. 3): one block per query, exact per-query "
      "AP oracle and exact line search per step, random order per pass; after every pass "
      "one oracle call per query gives F(w) and the certified gap (not counted in the "
      "passes, included in the time). The 1-slack solver: `jaxrank.solvers.fit` (one "
      "oracle call on every query per iteration plus cached-plane steps). One pass and "
      "one 1-slack iteration cost the same number of per-query oracle calls. Times "
      "exclude compilation; CPU seconds in brackets.\n")
    w("| C | solver | oracle passes to gap <= 1e-3 | to 1e-4 | final gap | passes run | "
      "wall (s) [CPU] | wall to 1e-4 (s) |")
    w("|---|---|---|---|---|---|---|---|")

    def first(rs, thr):
        for r in rs:
            if r["gap"] <= thr:
                return r
        return None

    for b in bc:
        res, curve, wall, cpu = b["one"]
        rows, comp = b["bcfw"]
        for label, rs, tot, c in (("1-slack (built-in)", curve, wall, cpu),
                                  ("n-slack BCFW", rows, rows[-1]["wall"], rows[-1]["cpu"])):
            key = "iters" if label.startswith("1") else "passes"
            r3, r4 = first(rs, 1e-3), first(rs, 1e-4)
            w(f"| {b['C']:g} | {label} | {r3[key] if r3 else '>' + str(rs[-1][key])} | "
              f"{r4[key] if r4 else '>' + str(rs[-1][key])} | {rs[-1]['gap']:.1e} | "
              f"{rs[-1][key]} | {tot:.1f} [{c:.1f}] | "
              f"{'-' if r4 is None else format(r4['wall'], '.1f')} |")
    w(f"\n({bc[0]['Q']} queries used, padded to {bc[0]['L']} documents.)\n")


def write_bcfw_only(args, k, bc, total):
    L = [f"# MAP-SVM solvers on MQ2008 (`bench/letor.py --bcfw-only`), total {total:.0f} s\n",
         f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, jax {jax.__version__}; "
         "shared and loaded by other jobs while this ran.\n"]
    bcfw_table(L.append, k, bc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(L) + "\n")


def write_report(args, folds, svm_names, results, grids, model_time, cli, bc, total,
                 parallel=None):
    models = svm_names + ["Pairwise hinge (rax + optax)"]
    L = []
    w = L.append
    w("# MQ2008 (LETOR 4.0): MAP-SVM vs pooled AP-SVM vs binary SVM vs pairwise hinge "
      "(`bench/letor.py`)\n")
    w(f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, jax {jax.__version__}, "
      f"CPU backend; shared and loaded by other jobs while this ran, so times are indicative. "
      f"Total benchmark time **{total:.0f} s**"
      + (f" (folds split over {parallel[0]} processes run at the same time; the longest "
         f"took {total:.0f} s, together {parallel[1]:.0f} s)" if parallel else "") + ".\n")
    w("Protocol: the 5 LETOR 4.0 folds (train 3 partitions, validation 1, test 1); relevant "
      "= grade >= 1; each SVM's C from its default grid (`type(est)._default_Cs`), extended "
      "at an edge by the `Cs=\"auto\"` rule, chosen by validation MAP; the pairwise baseline's "
      f"step from {args.lrs} and epochs from {args.epochs} the same way; the model fitted on "
      "the training part with the chosen values is scored on the test part. MAP = mean AP "
      "over the test queries that have a relevant and an irrelevant document "
      "(`score(X, y, groups=qid)`).\n")
    w("## Test MAP\n")
    w("| model | " + " | ".join(f"fold {k}" for k in folds) + " | mean | std |")
    w("|---|" + "---|" * (len(folds) + 2))
    for m in models:
        v = [results[m, k]["test"] for k in folds]
        w(f"| {m} | " + " | ".join(fmt(x) for x in v) + f" | **{fmt(np.mean(v))}** | "
          f"{fmt(np.std(v))} |")
    w("\nChosen hyperparameters (validation MAP in brackets):\n")
    w("| model | " + " | ".join(f"fold {k}" for k in folds) + " |")
    w("|---|" + "---|" * len(folds))
    for m in models:
        cells = []
        for k in folds:
            r = results[m, k]
            if "C" in r:
                edge = " (edge)" if r["C"] in (min(g["C"] for g in grids[m, k]),
                                                max(g["C"] for g in grids[m, k])) else ""
                cells.append(f"C={r['C']:g}{edge} [{r['val']:.4f}]")
            else:
                cells.append(f"lr={r['lr']:g}, {r['epochs']} ep. [{r['val']:.4f}]")
        w(f"| {m} | " + " | ".join(cells) + " |")
    q = [results["_queries", k] for k in folds]
    w(f"\nMAP-SVM training queries per fold: {', '.join(f'{a - b}' for a, b in q)} used "
      f"({', '.join(str(b) for _, b in q)} dropped: no relevant or no irrelevant document).\n")
    w("Time per model over all folds (every grid fit, validation and test scoring, "
      "compilation included):\n")
    w("| model | fits | time (s) | mean per fit (s) |")
    w("|---|---|---|---|")
    for m in models:
        nfit = sum(len(grids[m, k]) for k in folds)
        w(f"| {m} | {nfit} | {model_time[m]:.0f} | {model_time[m] / nfit:.1f} |")
    w("\n## The 1-slack solver on MAP-SVM (every fit of the grid)\n")
    w("tol 1e-4 (relative duality gap), max_iter 1000; wall and CPU seconds of the fit "
      "(first fit of a fold includes compilation).\n")
    w("| fold | C | iterations | converged | rel. gap | wall (s) | CPU (s) | val MAP | "
      "test MAP |")
    w("|---|---|---|---|---|---|---|---|---|")
    for k in folds:
        for r in grids["MAP-SVM", k]:
            mark = " **(chosen)**" if r["C"] == results["MAP-SVM", k]["C"] else ""
            w(f"| {k} | {r['C']:g}{mark} | {r['iters']} | {r['converged']} | {r['gap']:.1e} | "
              f"{r['wall']:.1f} | {r['cpu']:.1f} | {fmt(r['val'])} | {fmt(r['test'])} |")
    w("\nThe other SVMs' grids:\n")
    w("| model | fold | C | iterations | converged | rel. gap | wall (s) | norm of w | "
      "val MAP | test MAP |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for m in svm_names[1:]:
        for k in folds:
            for r in grids[m, k]:
                w(f"| {m} | {k} | {r['C']:g} | {r['iters']} | {r['converged']} | "
                  f"{r['gap']:.1e} | {r['wall']:.1f} | {r['wnorm']:.3g} | {fmt(r['val'])} | "
                  f"{fmt(r['test'])} |")
    if bc:
        bcfw_table(w, folds[0], bc)
    if cli:
        names = cli["names"]
        w("\n## Reproduce one fold with the CLI\n")
        w(f"Fold {cli['fold']} at its chosen C = {cli['C']:g}: the CLI gives test MAP "
          f"**{cli['MAP']:.4f}** (Python: {results['MAP-SVM', cli['fold']]['test']:.4f}), "
          f"{cli['time']:.0f} s for train + evaluate.\n")
        w("```sh")
        w("D=../shared/data/mq2008")
        w("cat " + " ".join(f"$D/{n}" for n in names["train"]) + " > train.txt")
        w(f"jaxrank train -c {cli['C']:g} train.txt model.npz")
        w(f"jaxrank evaluate model.npz $D/{names['test'][0]}")
        w("```\n")
        w("Output of `evaluate`:\n")
        w("```")
        w("\n".join(ln for ln in cli["out"].splitlines() if ln[:3] in ("AP ", "ROC", "P@1",
                                                                    "MAP", "que")))
        w("```")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(L) + "\n")


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    main()
