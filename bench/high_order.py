"""High-order ranking on real graphs: HOB-SVM / HOAP-SVM vs binary SVM / AP-SVM, and max-marginal timings.

Dokania et al. (ECCV 2014), Table 1 in spirit, on two graphs of similar samples:

* **Cora** (``../shared/data/cora``): 2,708 papers, citations as ``E`` (one
  component of 2,485 papers plus 77 small ones: graph cuts), one ranking task
  per class (7). Features: tf-idf of the 1,433 words, 64 SVD components,
  standardised (dense, so that ``Phi = exp(-(z_i - z_j)^2)`` is informative;
  on raw sparse words ``Phi`` is 1 on every word both papers lack). Split:
  stratified 50/50 by class (seed 0). Training graph: the citations among
  training papers; test scores: ``decision_function`` on the whole graph
  (features of all papers, no labels), AP over the test papers.
* **20 Newsgroups threads** (``../shared/data/20newsgroups``): 5 groups
  (``comp.graphics``, ``rec.autos``, ``sci.med``, ``sci.space``,
  ``talk.politics.guns``), bydate train / test posts; posts whose normalised
  subject lines (``Re:``/``Fwd:`` prefixes, case and spaces removed) match
  form a thread, ``E`` = all pairs of a thread (a chain for threads of more
  than 12 posts): many small components (enumeration). Features: tf-idf (5,000
  terms, fitted on the training posts), 64 SVD components, standardised. One
  task per group (5); train graph among train posts, test graph among test
  posts.

Models and grids (C and eta by 2-fold CV on the training part, validation AP;
the validation scores of the graph models use the whole training graph; all
tasks of a dataset in one multi-task fit per grid point). Starting grids:
``BinarySVM(pos_weight=1)`` (C in 0.001, 0.01, 0.1, 1), ``APSVM`` (C in 0.1, 1, 10, 100),
``HOBSVM`` (C in 0.0001, 0.001, 0.01; eta in 0.1, 1; ``max_iter`` 3000),
``HOAPSVM`` (C in 0.05, 0.5, 5, 50, i.e. AP-SVM's 0.1 ... 100 at eta = 0; eta
in 0.1, 1; initialised by HOB-SVM with C = 0.001 and 3000 iterations; 2 CCCP
steps of at most 3,000 solver iterations).
**Edge rule** (every model, both ends): after the starting grid, while more
than half of a dataset's tasks choose the grid's smallest (largest) ``C`` (any
eta), the next decade below (above) is added and cross-validated, at most
``MAX_EXTEND = 3`` decades per end; the grid actually used is printed with
each table. It was added because in an earlier run HOB-SVM chose its smallest
``C`` (1e-4) on 11 of 12 tasks; the other models' choices were interior (or
at an edge on at most 2 tasks of a dataset), so the rule leaves their grids
as they are unless a run says otherwise.
The graph models' solves are capped at 3,000 solver iterations per convex
problem (HOB-SVM, and each CCCP step of HOAP-SVM); the median certified
relative gap of the refits (and how many reached ``tol = 1e-4``) is printed
with each table. Both models need many iterations on one large component:
HOB-SVM's weighted 0-1 loss sums over samples, and each of HOAP-SVM's
Proposition-5 scores carries a convex term over every node of its
component, so both are sums of many kinks seen through one slack. Measured on
Cora (Neural_Networks, one task): a HOAP-SVM convex step (C = 0.5, eta =
0.1, HOB-SVM start) went from a 0.76 relative gap after 150 iterations (the
cap of the earlier runs) to converged in about 2,000 iterations with the
high-order models' plane cache of 128 planes and 128 cached-plane steps
(``jaxrank._src.models.high_order.PLANE_CACHE``; 32 / 32 before: 1.4e-4 after
3,000). The same step at eta = 1e-6 (pairwise weights negligible) is as
slow, so the cause is the component-wide terms, not the sign constraint
``w2 <= 0``; at eta = 0 (isolated samples) it converges in under 25
iterations. Every convex step restarts the dual from an empty cache (only the
primal is warm-started).

Timing: max-marginals (all ``n`` flipped cuts: one call of the jitted
``jaxrank.graph.layout_max_marginals`` on a layout prepared once) on Cora subgraphs grown by breadth-first
search from the largest component (random unaries ``N(0, 1)``, weights
``-U(0, 1)``), median of repeats: C Boykov-Kolmogorov with tree reuse
(``bk``), the same cuts from scratch (``bk-fresh``), the pure-Python port,
OR-tools (if installed), and enumeration on graphs of the same size made of
components of 8 nodes (and ``bk`` on those).

    python bench/high_order.py              # about 27 min on 2 idle cores (Cora 12, threads 14, timings 1)
    python bench/high_order.py --quick      # timings and Cora only, smaller grids
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import subprocess
import tarfile
import time
from pathlib import Path

import jax
import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer, TfidfVectorizer
from sklearn.metrics import average_precision_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.preprocessing import StandardScaler

import jaxrank
import jax.numpy as jnp

from jaxrank.graph import graph_layout, has_c_extension, layout_max_marginals

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "bench" / "results" / "high_order.md"
MAX_EXTEND = 3  # decades the edge rule may add below / above a model's C grid
HOAP_INIT_C = 0.001  # C of the HOB-SVM initialisation of HOAP-SVM (HOB-SVM's scale)
GROUPS = ("comp.graphics", "rec.autos", "sci.med", "sci.space", "talk.politics.guns")


# ---------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------


def load_cora():
    z = np.load(DATA / "cora" / "cora.npz", allow_pickle=False)
    X = sp.csr_matrix((z["attr_data"], z["attr_indices"], z["attr_indptr"]), shape=z["attr_shape"])
    A = sp.csr_matrix((z["adj_data"], z["adj_indices"], z["adj_indptr"]),
                      shape=z["adj_shape"]).tocoo()
    edges = np.stack([A.row, A.col], axis=1).astype(np.int64)
    X = TfidfTransformer().fit_transform(X)
    Z = TruncatedSVD(64, random_state=0).fit_transform(X)
    Z = StandardScaler().fit_transform(Z).astype(np.float32)
    y = z["labels"].astype(int)
    return Z, y, edges, [str(c) for c in z["class_names"]]


def _subject(text):
    for line in text.split("\n"):
        if line.lower().startswith("subject:"):
            s = line[8:].strip().lower()
            while True:
                t = re.sub(r"^(re|fwd?|fw)\s*(\[\d+\])?\s*:\s*", "", s)
                if t == s:
                    break
                s = t
            return re.sub(r"\s+", " ", s)
    return ""


def thread_edges(subjects, max_clique=12):
    """Pairs of posts with the same normalised subject (chains for long threads)."""
    by = {}
    for i, s in enumerate(subjects):
        if s:
            by.setdefault(s, []).append(i)
    edges = []
    for ids in by.values():
        if len(ids) < 2:
            continue
        if len(ids) <= max_clique:
            edges += [(a, b) for k, a in enumerate(ids) for b in ids[k + 1:]]
        else:
            edges += list(zip(ids[:-1], ids[1:]))
    return np.asarray(edges, np.int64).reshape(-1, 2)


def load_threads():
    posts = {"train": [], "test": []}
    with tarfile.open(DATA / "20newsgroups" / "20news-bydate.tar.gz") as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            split, group = m.name.split("/")[0].split("-")[-1], m.name.split("/")[1]
            if group not in GROUPS:
                continue
            text = tar.extractfile(m).read().decode("latin-1")
            posts[split].append((group, text))
    out = {}
    vec = TfidfVectorizer(max_features=5000, sublinear_tf=True, stop_words="english")
    texts_tr = [t for _, t in posts["train"]]
    Xtr = vec.fit_transform(texts_tr)
    svd = TruncatedSVD(64, random_state=0).fit(Xtr)
    scaler = StandardScaler().fit(svd.transform(Xtr))
    for split in ("train", "test"):
        texts = [t for _, t in posts[split]]
        Z = scaler.transform(svd.transform(vec.transform(texts))).astype(np.float32)
        y = np.array([GROUPS.index(g) for g, _ in posts[split]])
        out[split] = (Z, y, thread_edges([_subject(t) for t in texts]))
    return out


def induced(edges, keep):
    """Edges among the samples of bool mask ``keep``, renumbered."""
    idx = -np.ones(keep.shape[0], np.int64)
    idx[keep] = np.arange(keep.sum())
    e = edges[keep[edges[:, 0]] & keep[edges[:, 1]]]
    return idx[e]


# ---------------------------------------------------------------------------
# Models, CV, evaluation.
# ---------------------------------------------------------------------------


def graph_models(quick):
    hob_iter, hoap_iter = (300, 300) if quick else (3000, 3000)
    etas = [0.1, 1.0]
    return {
        "SVM": (lambda C, eta: jaxrank.BinarySVM(C=C, pos_weight=1.0, max_iter=2000),
                [0.001, 0.01, 0.1, 1.0], [None]),
        "AP-SVM": (lambda C, eta: jaxrank.APSVM(C=C, max_iter=1000), [0.1, 1.0, 10.0, 100.0],
                   [None]),
        "HOB-SVM": (lambda C, eta: jaxrank.HOBSVM(C=C, eta=eta, max_iter=hob_iter),
                    [0.0001, 0.001, 0.01], etas),
        "HOAP-SVM": (lambda C, eta: jaxrank.HOAPSVM(C=C, eta=eta, init_C=HOAP_INIT_C,
                                                   init_max_iter=hob_iter, max_iter=hoap_iter,
                                                   cccp_max_iter=2),
                     [0.05, 0.5, 5.0, 50.0], etas),
    }


def fit_scores(name, make, C, eta, Xtr, Ytr, etr, Xev, eev):
    """Fit all tasks in one call; scores ``[n_ev, T]`` and the fitted model."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = make(C, eta)
        if name in ("HOB-SVM", "HOAP-SVM"):
            est.fit(Xtr, Ytr, edges=etr)
            return np.asarray(est.decision_function(Xev, edges=eev)), est
        est.fit(Xtr, Ytr)
        return np.asarray(est.decision_function(Xev)), est


def gaps(est):
    obj, dual = np.atleast_1d(est.objective_), np.atleast_1d(est.dual_objective_)
    return (obj - dual) / np.maximum(np.abs(obj), 1e-30)


def run_dataset(title, Xtr, ytr, etr, Xte, yte, ete, names, *, test_on_all=None, quick, log):
    """CV, refit, test AP per task. ``test_on_all = (X_all, edges_all, test_mask)`` scores
    the test samples inside the whole graph (Cora); else on the test graph."""
    T = len(names)
    Ytr = np.stack([(ytr == t).astype(int) for t in range(T)], 1)
    Yte = np.stack([(yte == t).astype(int) for t in range(T)], 1)
    folds = list(StratifiedKFold(2, shuffle=True, random_state=0).split(Xtr, ytr))
    models = graph_models(quick)
    table, chosen, info, grids, detail = {}, {}, {}, {}, {}
    for name, (make, Cs, etas) in models.items():
        t0 = time.perf_counter()
        grid, val = [], []

        def evaluate(C):
            for eta in etas:
                v = np.zeros(T)
                for tr, va in folds:
                    keep = np.zeros(len(ytr), bool)
                    keep[tr] = True
                    s, _ = fit_scores(name, make, C, eta, Xtr[tr], Ytr[tr],
                                      induced(etr, keep), Xtr, etr)
                    v += [average_precision_score(Ytr[va, t], s[va, t]) for t in range(T)]
                grid.append((C, eta))
                val.append(v)
                log(f"  {title} {name} C={C:g} eta={eta}: mean val AP {v.mean() / 2:.4f} "
                    f"({time.perf_counter() - t0:.0f} s)")

        for C in Cs:
            evaluate(C)
        # Edge rule: while more than half of the tasks pick the grid's smallest
        # (largest) C, add the next decade below (above), at most MAX_EXTEND
        # decades per edge; the chosen C is then interior for most tasks.
        ext = {"low": 0, "high": 0}
        while True:
            best_C = np.array([grid[b][0] for b in np.argmax(np.stack(val), axis=0)])
            lo, hi = min(c for c, _ in grid), max(c for c, _ in grid)
            if np.sum(best_C == lo) > T / 2 and ext["low"] < MAX_EXTEND:
                ext["low"] += 1
                log(f"  {title} {name}: {np.sum(best_C == lo)}/{T} tasks at the lowest C "
                    f"{lo:g}; adding {lo / 10:g}")
                evaluate(lo / 10)
            elif np.sum(best_C == hi) > T / 2 and ext["high"] < MAX_EXTEND:
                ext["high"] += 1
                log(f"  {title} {name}: {np.sum(best_C == hi)}/{T} tasks at the highest C "
                    f"{hi:g}; adding {hi * 10:g}")
                evaluate(hi * 10)
            else:
                break
        val = np.stack(val)
        grids[name] = sorted({c for c, _ in grid})
        best = np.argmax(val, axis=0)
        ap = np.zeros(T)
        g_all, c_all, cccp = [0.0] * T, [False] * T, [None] * T
        for gi in np.unique(best):
            C, eta = grid[gi]
            if test_on_all is not None:
                Xall, eall, test = test_on_all
                s, est = fit_scores(name, make, C, eta, Xtr, Ytr, etr, Xall, eall)
                s = s[test]
            else:
                s, est = fit_scores(name, make, C, eta, Xtr, Ytr, etr, Xte, ete)
            g = gaps(est)
            conv = np.atleast_1d(est.converged_)
            for t in np.flatnonzero(best == gi):
                ap[t] = average_precision_score(Yte[:, t], s[:, t])
                g_all[t] = float(g[t] if g.size == T else g[0])
                c_all[t] = bool(conv[t] if conv.size == T else conv[0])
                if name == "HOAP-SVM":
                    F = np.atleast_2d(est.cccp_objectives_)
                    sg = np.atleast_2d(est.cccp_gaps_)
                    k = int(np.atleast_1d(est.n_cccp_iter_)[t if F.shape[0] == T else 0])
                    cccp[t] = {"objectives": F[t if F.shape[0] == T else 0][:k + 1].tolist(),
                               "gaps": sg[t if sg.shape[0] == T else 0][:k].tolist()}
        table[name] = ap
        chosen[name] = [grid[b] for b in best]
        info[name] = (time.perf_counter() - t0, float(np.median(g_all)), int(sum(c_all)))
        detail[name] = {"gaps": g_all, "converged": c_all, "grid": grids[name]}
        if name == "HOAP-SVM":
            detail[name]["cccp"] = cccp
        log(f"{title} {name}: test AP {np.round(ap, 4).tolist()} mean {ap.mean():.4f} "
            f"({info[name][0]:.0f} s, median gap {info[name][1]:.2e}, "
            f"{info[name][2]}/{T} converged; gaps {np.round(g_all, 4).tolist()})")
    return table, chosen, info, detail


def results_md(title, names, table, chosen, info, detail=None):
    cols = list(table)
    lines = [f"### {title}", "", "| task | " + " | ".join(cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for t, nm in enumerate(names):
        best = max(table[c][t] for c in cols)
        cells = [(f"**{table[c][t]:.4f}**" if table[c][t] == best else f"{table[c][t]:.4f}")
                 for c in cols]
        lines.append(f"| {nm} | " + " | ".join(cells) + " |")
    lines.append("| **mean** | " + " | ".join(f"{table[c].mean():.4f}" for c in cols) + " |")
    lines += ["", "Paired wins (tasks where the first beats the second; ties not counted):", ""]
    for a, b in (("HOB-SVM", "SVM"), ("HOAP-SVM", "AP-SVM"), ("HOAP-SVM", "HOB-SVM"),
                 ("AP-SVM", "SVM")):
        w = int(np.sum(table[a] > table[b]))
        lo = int(np.sum(table[a] < table[b]))
        lines.append(f"* {a} vs {b}: {w} wins, {lo} losses of {len(names)}")
    lines += ["", "Chosen (C, eta) per task and wall time (CV + refit):", ""]
    detail = detail or {}
    for c in cols:
        ch = ", ".join(f"({C:g}, {e:g})" if e is not None else f"{C:g}" for C, e in chosen[c])
        conv = f", {info[c][2]}/{len(names)} converged" if len(info[c]) > 2 else ""
        grid = ""
        if c in detail:
            grid = "; C grid " + ", ".join(f"{g:g}" for g in detail[c]["grid"])
        lines.append(f"* {c}: {ch}; {info[c][0]:.0f} s; median certified relative gap "
                     f"{info[c][1]:.2e}{conv}{grid}")
    if "HOAP-SVM" in detail and "cccp" in detail["HOAP-SVM"]:
        lines += ["", "HOAP-SVM refits: CCCP objective (16) at w_0, w_1, ... and the certified "
                  "gap of each convex step (17) divided by (16) after the step:", ""]
        for nm, d in zip(names, detail["HOAP-SVM"]["cccp"]):
            if d is None:
                continue
            F, g = d["objectives"], d["gaps"]
            while len(g) > 1 and g[-1] == 0.0 and F[-1] == F[-2]:
                # Steps a multi-task fit padded after this task's CCCP stopped
                # (caches written before only the steps made were stored).
                F, g = F[:-1], g[:-1]
            rel = [gg / max(abs(f), 1e-30) for gg, f in zip(g, F[1:])]
            lines.append(f"* {nm}: objectives " + ", ".join(f"{f:.4g}" for f in F)
                         + "; step gaps " + ", ".join(f"{r:.2e}" for r in rel))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Timing of max-marginals.
# ---------------------------------------------------------------------------


def bfs_subgraph(edges, n, size, start=0):
    A = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    A = ((A + A.T) > 0).tocsr()
    order = sp.csgraph.breadth_first_order(A, start, directed=False, return_predecessors=False)
    keep = np.zeros(n, bool)
    keep[order[:size]] = True
    return induced(edges, keep), int(keep.sum())


def median_time(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def kernel(n, e, u, p, method):
    """The jitted max-marginal kernel on a prepared graph (layout built once, as in training)."""
    lay = graph_layout(n, e, method=method)
    pm = jax.ops.segment_sum(jnp.asarray(p), lay.merge, num_segments=lay.m)
    uu = jnp.asarray(u)
    cut = method if method != "enumerate" else "auto"
    f = jax.jit(lambda a, b: layout_max_marginals(lay, a, b, method=cut).delta)
    return lambda: f(uu, pm).block_until_ready()


def timing_rows(edges, n_all, sizes, log):
    rng = np.random.default_rng(0)
    methods = ["bk", "bk-fresh", "python"]
    try:
        import ortools  # noqa: F401

        methods.append("ortools")
    except ImportError:
        pass
    rows = []
    big = edges
    comp_n, comp_lab = sp.csgraph.connected_components(
        sp.coo_matrix((np.ones(len(big)), (big[:, 0], big[:, 1])), shape=(n_all, n_all)))
    start = int(np.flatnonzero(comp_lab == np.argmax(np.bincount(comp_lab)))[0])
    for size in sizes:
        e, n = bfs_subgraph(edges, n_all, size, start)
        u = rng.normal(size=(n, 2)).astype(np.float32)
        p = -rng.random(len(e)).astype(np.float32)
        row = {"n": n, "m": int(np.unique(np.sort(e, axis=1), axis=0).shape[0])}
        for method in methods:
            if method in ("python", "ortools") and n > 1000:
                row[method] = None
                continue
            row[method] = median_time(kernel(n, e, u, p, method), 5 if n < 1000 else 3)
        # Enumeration: the same number of nodes as components of 8 (a ring plus chords).
        q = max(n // 8, 1)
        base = np.array([(i, (i + 1) % 8) for i in range(8)] + [(0, 4), (2, 6)])
        ee = np.concatenate([base + 8 * k for k in range(q)])
        ue = rng.normal(size=(8 * q, 2)).astype(np.float32)
        pe = -rng.random(len(ee)).astype(np.float32)
        row["enumerate (8-node components)"] = median_time(
            kernel(8 * q, ee, ue, pe, "enumerate"), 5)
        row["bk (8-node components)"] = median_time(kernel(8 * q, ee, ue, pe, "bk"), 5)
        rows.append(row)
        log("  timing " + ", ".join(f"{k}={v if not isinstance(v, float) else f'{v * 1e3:.1f} ms'}"
                                     for k, v in row.items()))
    return rows


def timing_md(rows):
    cols = [c for c in ("bk", "bk-fresh", "python", "ortools") if c in rows[0]] + [
        "enumerate (8-node components)", "bk (8-node components)"]
    lines = ["| nodes | edges | " + " | ".join(cols) + " | bk-fresh / bk |",
             "|---:|---:|" + "---:|" * (len(cols) + 1)]
    for r in rows:
        cells = [("-" if r.get(c) is None else f"{r[c] * 1e3:.1f} ms") for c in cols]
        ratio = "-" if r.get("bk-fresh") is None else f"{r['bk-fresh'] / r['bk']:.0f}x"
        lines.append(f"| {r['n']} | {r['m']} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines) + "\n"


def load_cache(path):
    return json.loads(path.read_text()) if path.exists() else {}


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def machine(loads):
    return (f"{platform.machine()} ({cpu_name()}), {os.cpu_count()} cores, "
            f"jax {jax.__version__}, {jax.device_count()} CPU device(s); load average "
            f"during the parts: {loads}")


def write_md(cache, path):
    """``high_order.md`` from every part in the cache."""
    out = io.StringIO()
    out.write("# High-order ranking: HOB-SVM and HOAP-SVM (Dokania et al., ECCV 2014)\n\n")
    loads = ", ".join(f"{k} {v['load'][0]:.1f}-{v['load'][1]:.1f}" for k, v in cache.items())
    out.write(f"Machine: {machine(loads)}. A shared VM: other jobs ran at the same time, so "
              "wall times are noisy (compare within a row). Reproduce: `python "
              "bench/high_order.py` (every part; raw results are cached in "
              "`high_order.json` next to this file, so `--only cora|news|timing` runs one "
              "part and merges it). Protocol in the script's docstring.\n\n")
    for key, title in (("cora", "Cora (7 classes; transductive scores on the whole graph)"),
                       ("news", "20 Newsgroups threads (5 groups)")):
        if key in cache:
            c = cache[key]
            table = {k: np.asarray(v) for k, v in c["table"].items()}
            chosen = {k: [tuple(x) for x in v] for k, v in c["chosen"].items()}
            out.write(results_md(f"{title}; part took {c['seconds']:.0f} s (load average "
                                 f"{c['load'][0]:.1f} at start, {c['load'][1]:.1f} at end)",
                                 c["names"], table, chosen, c["info"], c.get("detail")) + "\n")
    if "timing" in cache:
        out.write("## Max-marginals: time per call (all n flipped cuts), vs graph size\n\n")
        out.write("Cora subgraphs grown by breadth-first search in the largest component; "
                  "random unaries and weights; one call of the jitted "
                  "`jaxrank.graph.layout_max_marginals` on a layout prepared once; median of "
                  "repeats. `bk`: C Boykov-Kolmogorov, search trees and flow reused between "
                  "the clamped cuts; `bk-fresh`: the same cuts from scratch; `python`: the "
                  "pure-Python port of `bk`; enumeration: the same number of nodes as 8-node "
                  "components (a ring plus 2 chords each).\n\n")
        out.write(timing_md(cache["timing"]["rows"]))
    path.write_text(out.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", default=str(OUT))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["all", "cora", "news", "timing"], default="all",
                    help="run one part (merged into the cache next to --output)")
    args = ap.parse_args()
    t_all = time.perf_counter()
    out_path = Path(args.output)
    cache_path = out_path.with_suffix(".json")
    cache = load_cache(cache_path)

    def log(msg):
        print(msg, flush=True)

    def save(part, value, t0, load0):
        value["seconds"] = time.perf_counter() - t0
        value["load"] = [load0, os.getloadavg()[0]]
        value["uptime_end"] = subprocess.run(["uptime"], capture_output=True,
                                             text=True).stdout.strip()
        value["quick"] = bool(args.quick)
        cache[part] = value
        cache_path.write_text(json.dumps(cache, indent=1))
        write_md(cache, out_path)
        log(f"{part}: {value['seconds']:.0f} s; wrote {out_path} and {cache_path}")

    if not has_c_extension():
        log("warning: the C extension is not built; 'bk' falls back to Python")
    Z, y, edges, names = load_cora()
    n = Z.shape[0]
    log(f"Cora: {Z.shape}, {len(edges)} citation links, {len(names)} classes")
    sizes = [100, 300, 1000, 2708] if not args.quick else [100, 300, 1000]
    if args.only in ("all", "timing"):
        t0, l0 = time.perf_counter(), os.getloadavg()[0]
        save("timing", {"rows": timing_rows(edges, n, sizes, log)}, t0, l0)
    idx = np.arange(n)
    tr, te = train_test_split(idx, test_size=0.5, stratify=y, random_state=0)
    keep = np.zeros(n, bool)
    keep[tr] = True
    if args.only in ("all", "cora"):
        t0, l0 = time.perf_counter(), os.getloadavg()[0]
        table, chosen, info, detail = run_dataset("Cora", Z[tr], y[tr], induced(edges, keep), Z[te],
                                          y[te], None, names, test_on_all=(Z, edges, te),
                                          quick=args.quick, log=log)
        save("cora", {"names": names, "table": {k: v.tolist() for k, v in table.items()},
                      "chosen": chosen, "info": info, "detail": detail}, t0, l0)
    if args.only in ("all", "news") and not args.quick:
        t0, l0 = time.perf_counter(), os.getloadavg()[0]
        d = load_threads()
        Xtr, ytr, etr = d["train"]
        Xte, yte, ete = d["test"]
        log(f"20news threads: train {Xtr.shape} ({len(etr)} edges), test {Xte.shape} "
            f"({len(ete)} edges)")
        table, chosen, info, detail = run_dataset("20news threads", Xtr, ytr, etr, Xte, yte, ete,
                                          list(GROUPS), quick=args.quick, log=log)
        save("news", {"names": list(GROUPS), "table": {k: v.tolist() for k, v in table.items()},
                      "chosen": chosen, "info": info, "detail": detail}, t0, l0)
    log(f"total {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    main()
