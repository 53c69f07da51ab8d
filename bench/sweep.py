"""Batched training benchmark: 10 tasks x 8 C x 5 folds = 400 AP-SVM fits.

Data: 20 Newsgroups (bydate train), 10 groups, a stratified random subset of
1,000 posts, tf-idf (2,000 terms, sublinear tf, English stop words, fitted on
the subset), dense float32; one one-vs-rest ranking task per group (8-12 %
positives). C grid 0.1 ... 300 (8 values), stratified 5-fold CV per task.

Compared, on the same 400 fits (tol 1e-4 relative duality gap, max_iter 1000):

* ``jaxrank.model_selection.sweep_kernel``, one jitted call for all 400 fits,
  with each of the axes task / C / fold either vmapped or looped by
  ``lax.map`` inside the call (``vmap_axes``): all three vmapped (one
  ``while_loop`` over 400 fits, runs until the slowest stops), task x fold,
  task x fold (the ``sweep`` default), task only, none.
* ``Python loop``: 400 calls of the jitted single fit ``jaxrank.solvers.fit_linear``
  (compiled once, compile time excluded and reported separately).

Every batched objective is checked against the same fit run alone (max
relative difference reported; must be <= 0.1 %).

Second part (Tables 2/3 of the paper): time per call of loss-augmented
inference for BinarySVM, APSVM and APSVMApprox (k = 0.5), averaged over the
10 tasks and over 5 points of the training path (scores ``t X w*`` for
``t = 0, 0.25, ..., 1`` between the initial ``w = 0`` and the solution), and
the total inference time of one training (time per call x iterations).

    python bench/sweep.py            # about 6-8 minutes on 2 CPU cores
    python bench/sweep.py --quick    # smaller grid, for a smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import tarfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

import jaxrank
from jaxrank.model_selection import stratified_fold_masks, sweep_kernel
from jaxrank.solvers import fit_linear

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
OUT = Path(__file__).resolve().parent / "results" / "sweep.md"
GROUPS = ("alt.atheism", "comp.graphics", "misc.forsale", "rec.autos", "rec.sport.hockey",
          "sci.crypt", "sci.med", "sci.space", "soc.religion.christian",
          "talk.politics.guns")


def load_news(n_train=1000, n_test=2000, max_features=2000, seed=0):
    """20 Newsgroups, 10 groups: (Xtr, ytr, Xte, yte, names); y = group index."""
    path = DATA / "20newsgroups" / "20news-bydate.tar.gz"
    if not path.exists():
        raise SystemExit(f"dataset {path} not found")
    docs = {"train": [], "test": []}
    with tarfile.open(path) as tf:
        for m in tf:
            if not m.isfile():
                continue
            top, group = m.name.split("/")[:2]
            if group not in GROUPS:
                continue
            split = "train" if "train" in top else "test"
            text = tf.extractfile(m).read().decode("latin-1")
            docs[split].append((GROUPS.index(group), text))
    rng = np.random.RandomState(seed)
    parts = {}
    for split, n in (("train", n_train), ("test", n_test)):
        d = docs[split]
        idx = np.sort(rng.permutation(len(d))[:n])
        parts[split] = ([d[i][1] for i in idx], np.array([d[i][0] for i in idx]))
    vec = TfidfVectorizer(max_features=max_features, sublinear_tf=True,
                          stop_words="english", min_df=3)
    Xtr = vec.fit_transform(parts["train"][0]).toarray().astype(np.float32)
    Xte = vec.transform(parts["test"][0]).toarray().astype(np.float32)
    return Xtr, parts["train"][1], Xte, parts["test"][1], list(GROUPS)


def one_vs_rest(y, T):
    return np.stack([(y == g) for g in range(T)], axis=1).astype(np.int8)


def time_batched(X, Y, masks, Cs, kp, vmap_axes, tol, max_iter):
    args = (jnp.asarray(X), jnp.asarray(Y.T > 0), jnp.asarray(masks),
            jnp.asarray(Cs, jnp.float32), jnp.float32(tol), jnp.float32(0.5),
            jnp.float32(np.nan))
    t0 = time.perf_counter()
    compiled = sweep_kernel.lower(*args, model="apsvm", kp=kp, max_iter=max_iter,
                                  vmap_axes=vmap_axes).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    t_run = time.perf_counter() - t0
    return t_compile, t_run, [np.asarray(a) for a in out]


def time_loop(X, Y, masks, Cs, kp, tol, max_iter):
    Xj = jnp.asarray(X)
    T, F = masks.shape[:2]
    pos = [jnp.asarray(Y[:, t] > 0) for t in range(T)]
    train = [[jnp.asarray(~masks[t, f]) for f in range(F)] for t in range(T)]
    t0 = time.perf_counter()
    compiled = fit_linear.lower(Xj, pos[0], train[0][0], jnp.float32(1), jnp.float32(tol),
                                loss="ap", kp=kp, max_iter=max_iter).compile()
    t_compile = time.perf_counter() - t0
    obj = np.zeros((T, len(Cs), F))
    steps = np.zeros((T, len(Cs), F), int)
    conv = np.zeros((T, len(Cs), F), bool)
    t0 = time.perf_counter()
    for t in range(T):
        for g, C in enumerate(Cs):
            for f in range(F):
                r = compiled(Xj, pos[t], train[t][f], jnp.float32(C), jnp.float32(tol))
                obj[t, g, f] = float(r.objective)
                steps[t, g, f] = int(r.num_steps)
                conv[t, g, f] = bool(r.converged)
    return t_compile, time.perf_counter() - t0, obj, steps, conv


def _time_call(fn, *args, repeat=10):
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(repeat):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / repeat


def inference_times(X, Y, C, C_svm, appx_max_iter=300):
    """Per-call loss-augmented inference time along the training path (Tables 2/3)."""
    # The oracles exactly as the solver calls them (masked kernels, static kp).
    from jaxrank._src.appx import appx_oracle, appx_split
    from jaxrank._src.inference import ap_most_violated_masked, zero_one_core

    APSVMApprox = getattr(jaxrank, "APSVMApprox", None)
    if APSVMApprox is None:
        from jaxrank._src.appx import APSVMApprox
    Xj = jnp.asarray(X)
    rows = {"BinarySVM": [], "APSVM": [], "APSVMApprox (k=0.5)": []}
    iters = {k: [] for k in rows}
    kp = int(Y.sum(axis=0).max())
    ts = (0.0, 0.25, 0.5, 0.75, 1.0)
    # One compiled oracle per model, labels as arguments (no recompilation per task).
    f_svm = jax.jit(lambda s, p: zero_one_core(s, p, jnp.ones_like(p), 1.0))
    f_ap = jax.jit(lambda s, p: ap_most_violated_masked(s, p, ~p, kp=kp))
    f_appx = jax.jit(lambda s, p, e, d, mu: appx_oracle(p, e, d, mu, kp=kp)(s))
    for t in range(Y.shape[1]):
        y = Y[:, t]
        pos = jnp.asarray(y > 0)
        svm = jaxrank.BinarySVM(C=C_svm).fit(X, y)
        ap = jaxrank.APSVM(C=C).fit(X, y)
        appx = APSVMApprox(C=C, k=0.5, C_binary=C_svm, max_iter=appx_max_iter).fit(X, y)
        s0 = Xj @ jnp.asarray(appx.w0_[0])
        easy, diff = appx_split(s0, pos, jnp.ones_like(pos), 0.5)
        mu = jnp.float32(appx.mu_)
        for name, model, fn, extra in (
            ("BinarySVM", svm, f_svm, ()),
            ("APSVM", ap, f_ap, ()),
            ("APSVMApprox (k=0.5)", appx, f_appx, (easy, diff, mu)),
        ):
            w = jnp.asarray(model.coef_[0])
            b = float(model.intercept_[0])
            per = [_time_call(fn, a * (Xj @ w) + a * b, pos, *extra) for a in ts]
            rows[name].append(float(np.mean(per)))
            iters[name].append(model.n_iter_)
    return {k: (float(np.mean(v)), float(np.mean(iters[k]))) for k, v in rows.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--output", default=str(OUT))
    args = p.parse_args()
    t_all = time.perf_counter()
    n_train = 400 if args.quick else 1000
    Xtr, ytr, _, _, _ = load_news(n_train=n_train, max_features=2000)
    T = 10
    Y = one_vs_rest(ytr, T)
    Cs = np.array([0.1, 0.3, 1, 3, 10, 30, 100, 300], np.float32)
    F, tol, max_iter = 5, 1e-4, 1000
    masks = np.stack([stratified_fold_masks(Y[:, t] > 0, F, random_state=0)
                      for t in range(T)])
    kp = int(Y.sum(axis=0).max())
    n_fits = T * len(Cs) * F
    print(f"20news: {Xtr.shape[0]} x {Xtr.shape[1]}, {T} tasks, positives "
          f"{Y.sum(axis=0).tolist()}; {n_fits} fits", flush=True)

    lc, lr, lobj, lsteps, lconv = time_loop(Xtr, Y, masks, Cs, kp, tol, max_iter)
    print(f"loop: compile {lc:.1f} s, run {lr:.1f} s", flush=True)
    results = [("Python loop of jitted single fits", lc, lr, 0.0, lsteps, lconv)]
    variants = [("task", "C", "fold"), ("task", "fold"), ("task",), ()]
    for va in variants:
        bc, br, out = time_batched(Xtr, Y.astype(bool), masks, Cs, kp, va, tol, max_iter)
        obj = out[1]
        rel = float(np.max(np.abs(obj / lobj - 1)))
        print(f"batched {va}: compile {bc:.1f} s, run {br:.1f} s, max rel obj diff "
              f"{rel:.2e}", flush=True)
        assert rel <= 1e-3, f"batched objective differs from the single fit by {rel:.2e}"
        mapped = [a for a in ("task", "C", "fold") if a not in va]
        label = (f"one jitted call: vmap over {' x '.join(va) or '-'}; lax.map over "
                 f"{' x '.join(mapped) or '-'}" + (" (sweep default)" if va == ("task", "fold")
                                                   else ""))
        results.append((label, bc, br, rel, out[3], out[4]))

    # Tables 2/3: inference time per call, on the full training subset.
    inf = inference_times(Xtr, Y, C=10.0, C_svm=1.0)
    total = time.perf_counter() - t_all

    lines = [
        "# Batched training benchmark (`bench/sweep.py`)",
        "",
        f"20 Newsgroups (bydate train), {T} groups one-vs-rest, {Xtr.shape[0]} posts x "
        f"{Xtr.shape[1]} tf-idf terms (dense float32); AP-SVM, C in "
        f"{[float(f'{c:g}') for c in Cs]}, {F}-fold stratified CV: **{n_fits} fits**, "
        f"tol {tol:g} (relative duality gap), max_iter {max_iter}.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU "
        f"cores, jax {jax.__version__}, CPU backend. Total benchmark time {total:.0f} s.",
        "",
        "| method | compile (s) | run (s) | speed-up vs loop (run) | iterations: sum / max | "
        "converged | max rel. objective diff vs single fit |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c, r, rel, steps, conv in results:
        lines.append(f"| {name} | {c:.1f} | {r:.1f} | {lr / r:.2f}x | {int(steps.sum())} / "
                     f"{int(steps.max())} | {int(conv.sum())}/{conv.size} | {rel:.1e} |")
    lines += [
        "",
        "Last column: the objective of every batched fit vs the same fit run alone "
        "(checked <= 1e-3 = 0.1 %; the script fails otherwise).",
        "",
        "Why not vmap everything: a vmapped `while_loop` runs until its slowest member "
        "stops, and the number of iterations grows with C (here from "
        f"{lsteps[:, 0].mean():.0f} at C={Cs[0]:g} to {lsteps[:, -1].mean():.0f} at "
        f"C={Cs[-1]:g}), so vmapping over C makes every fit pay for the largest C; and "
        "the solver's plane cache (`[batch, 33, d]` floats) of a large batch no longer "
        "fits in the CPU cache, so the 32 cached-plane steps per iteration become "
        "memory-bound. Keeping all fits in one compiled call removes the per-call "
        "overhead of the Python loop in every variant.",
        "",
        "## Loss-augmented inference time (paper Tables 2/3 shape)",
        "",
        f"Full training subset ({Xtr.shape[0]} posts), C = 10 (APSVM; APSVMApprox k = 0.5 "
        "with C_binary = 1, max_iter 300), C = 1 (BinarySVM, intercept); per-call time "
        "averaged over 5 "
        "points of the training path and over the 10 tasks; total = per call x "
        "iterations of the fit.",
        "",
        "| | " + " | ".join(inf) + " |",
        "|---|" + "---|" * len(inf),
        "| per call (ms) | " + " | ".join(f"{v[0] * 1e3:.3f}" for v in inf.values()) + " |",
        "| iterations per training | " + " | ".join(f"{v[1]:.0f}" for v in inf.values())
        + " |",
        "| inference per training (s) | "
        + " | ".join(f"{v[0] * v[1]:.3f}" for v in inf.values()) + " |",
        "",
        "The masked kernels keep static shapes, so APPX's AP inference still scans all "
        "n samples (the easy ones are masked, not removed); its per-call time is the AP "
        "time plus the hinge term. Timings were taken while other jobs shared the 2 "
        "cores (noisy; compare ratios, not absolute values).",
        "",
        "Reproduce: `python bench/sweep.py` (writes this file).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.output).write_text(text)


if __name__ == "__main__":
    main()
