"""Command-line interface, in the conventions of svm_perf_learn / svm_map_learn.

    jaxrank train [--model apsvm|svm] [-c C] TRAIN MODEL
    jaxrank predict MODEL DATA [-o scores.txt]
    jaxrank evaluate MODEL DATA
    jaxrank sweep TRAIN [--model apsvm|svm|apsvm-appx] [--Cs 0.1,1,10] [--cv 5]
                  [--task-column COL ...] [--tasks all|CLASS,...] [--output-prefix P]
    jaxrank demo
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

MODELS = ("apsvm", "svm", "apsvm-appx")  # linear structural SVMs (train and sweep)
TRAIN_MODELS = MODELS + ("kernelrank", "auc-svm")


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return v


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def _make_model(name, C, args):
    import jaxrank

    if name == "apsvm":
        return jaxrank.APSVM(
            C=C, inference=args.inference, max_iter=args.max_iter, tol=args.tol,
            verbose=args.verbose,
        )
    if name == "kernelrank":
        bw = args.bandwidth
        return jaxrank.KernelRank(
            scorer="linear", kernel=args.kernel,
            bandwidth="auto" if bw == "auto" else _positive_float(bw),
            verbose=args.verbose,
        )
    if name == "auc-svm":
        return jaxrank.AUCSVM(C=C, max_iter=args.max_iter, tol=args.tol, verbose=args.verbose)
    if name == "apsvm-appx":
        return jaxrank.APSVMApprox(
            C=C, k=args.k, C_binary=args.C_binary, inference=args.inference,
            max_iter=args.max_iter, tol=args.tol, verbose=args.verbose,
        )
    return jaxrank.BinarySVM(
        C=C, pos_weight=args.pos_weight, max_iter=args.max_iter, tol=args.tol,
        verbose=args.verbose,
    )


def precision_at_k(scores, positive, k=10):
    """Fraction of positives among the ``k`` highest scores (stable order)."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return float(np.mean(np.asarray(positive, bool)[order]))


def _evaluate(scores, y):
    from jaxrank._src.validation import binary_labels
    from jaxrank.metrics import average_precision, roc_auc

    positive = binary_labels(y, "labels of DATA")
    s = np.asarray(scores, np.float32)
    return {
        "AP": float(average_precision(s, positive)),
        "ROC-AUC": float(roc_auc(s, positive)),
        "P@10": precision_at_k(s, positive, 10),
    }


def cmd_train(args):
    import jaxrank

    if os.path.exists(args.model_file) and not args.force:
        raise SystemExit(f"error: {args.model_file} exists; use --force to overwrite it.")
    X, y = jaxrank.load_data(args.train_file)
    print(f"read {X.shape[0]} samples x {X.shape[1]} features from {args.train_file}")
    model = _make_model(args.model, args.c, args)
    t0 = time.perf_counter()
    model.fit(X, y)
    dt = time.perf_counter() - t0
    print(
        f"trained {type(model).__name__}(C={args.c}) in {dt:.2f} s: {model.n_iter_} "
        f"iterations, objective {model.objective_:.6g}, "
        f"converged={getattr(model, 'converged_', 'n/a')}"
    )
    jaxrank.save(model, args.model_file, overwrite=args.force)
    print(f"wrote {args.model_file}")
    return 0


def _load_for_model(model, path):
    import jaxrank

    X, y = jaxrank.load_data(path, n_features=model.n_features_in_)
    return X, y


def cmd_predict(args):
    import jaxrank

    model = jaxrank.load(args.model_file)
    X, _ = _load_for_model(model, args.data_file)
    scores = model.decision_function(X)
    if args.output:
        if os.path.exists(args.output) and not args.force:
            raise SystemExit(f"error: {args.output} exists; use --force to overwrite it.")
        np.savetxt(args.output, scores, fmt="%.8g")
        print(f"wrote {len(scores)} scores to {args.output}")
    else:
        np.savetxt(sys.stdout, scores, fmt="%.8g")
    return 0


def cmd_evaluate(args):
    import jaxrank

    model = jaxrank.load(args.model_file)
    X, y = _load_for_model(model, args.data_file)
    res = _evaluate(model.decision_function(X), y)
    for k, v in res.items():
        print(f"{k:8s} {v:.4f}")
    return 0


def _read_matrix(path):
    """A numeric matrix from a ``.csv`` (no header) or ``.npy`` file."""
    low = path.lower()
    if low.endswith(".npy"):
        a = np.load(path, allow_pickle=False)
    elif low.endswith((".csv", ".csv.gz", ".csv.bz2")):
        a = np.loadtxt(path, delimiter=",", ndmin=2)
    else:
        raise ValueError(
            f"--task-column needs a .csv or .npy file (one row per sample); got {path}."
        )
    if a.ndim != 2 or a.shape[1] < 2:
        raise ValueError(f"{path} must be a 2-D matrix with at least 2 columns.")
    return a


def sweep_tasks(X, labels, *, task_columns=None, tasks="all"):
    """Turn label column(s) into binary ranking tasks ``[n, T]`` and task names.

    * One label column with two values in ``{0,1}``/``{-1,1}``: one task.
    * One label column with any other values (a multi-class label): one
      one-vs-rest task per class, ``positive = (label == class)``; ``tasks``
      ``"all"`` (default) takes every class, or a comma-separated list of
      class values selects some (e.g. ``"1,3"``).
    * Several label columns (``--task-column`` given more than once): each
      column is one binary task named ``col<index>``.

    Raises:
        ValueError: an unknown class in ``tasks``, a non-binary column among
            several, a task with a single class.
    """
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] > 1:
        names = [f"col{c}" for c in task_columns] if task_columns else list(
            range(labels.shape[1]))
        return labels, names
    y = labels.reshape(-1)
    values = np.unique(y)
    if set(values.tolist()) <= {0, 1} or set(values.tolist()) <= {-1, 1}:
        return y[:, None], ["label"]
    if tasks == "all":
        chosen = values
    else:
        chosen = []
        for v in str(tasks).split(","):
            v = float(v)
            if v not in values:
                raise ValueError(f"--tasks: class {v:g} is not a label value; classes are "
                                 f"{[float(f'{c:g}') for c in values]}.")
            chosen.append(v)
        chosen = np.asarray(chosen)
    Y = np.stack([(y == c).astype(np.int8) for c in chosen], axis=1)
    return Y, [f"class={float(c):g}" for c in chosen]


def _fmt_row(cells, widths):
    return "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))


def _use_cpu_cores(args):
    """Make each CPU core a JAX device (``--devices``), before JAX's first computation.

    Batched fits are sharded over devices (:func:`jaxrank.solvers.fit_ssvm_many`);
    JAX's CPU backend has one device unless ``jax_num_cpu_devices`` is set
    before it starts. A no-op if JAX is already running (``main`` called from
    Python) or for a GPU/TPU default backend (it only shapes the CPU backend).
    """
    import jax

    n = args.devices
    if n is None:
        cores = getattr(os, "sched_getaffinity", None)
        n = len(cores(0)) if cores else (os.cpu_count() or 1)
    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except RuntimeError:  # backends already initialised: keep their devices
        pass


def _devices(args):
    """The devices to shard batched fits over: the first ``--devices`` local ones."""
    import jax

    devs = jax.local_devices()
    return devs[: args.devices] if args.devices else devs


def cmd_sweep(args):
    """Cross-validate C for one or many tasks in one compiled call."""
    import csv
    import json

    from jaxrank._src.sweep import sweep

    _use_cpu_cores(args)
    prefix = args.output_prefix
    outputs = [prefix + ".csv", prefix + ".json"]
    for f in outputs:
        if os.path.exists(f) and not args.force:
            raise SystemExit(f"error: {f} exists; use --force to overwrite it.")
    if args.task_column:
        a = _read_matrix(args.train_file)
        cols = [c if c >= 0 else a.shape[1] + c for c in args.task_column]
        if any(c < 0 or c >= a.shape[1] for c in cols) or len(set(cols)) != len(cols):
            raise ValueError(f"--task-column: bad or repeated column in {args.task_column} "
                             f"for {a.shape[1]} columns.")
        feat = [c for c in range(a.shape[1]) if c not in cols]
        X, labels = a[:, feat], a[:, cols]
        Y, names = sweep_tasks(X, labels, task_columns=args.task_column, tasks=args.tasks)
    else:
        import jaxrank

        X, y = jaxrank.load_data(args.train_file)
        Y, names = sweep_tasks(X, y, tasks=args.tasks)
    T, G, F = Y.shape[1], len(args.Cs), args.cv
    print(f"read {X.shape[0]} samples x {X.shape[1]} features from {args.train_file}; "
          f"{T} task(s): {', '.join(map(str, names))}")
    res = sweep(
        X, Y, Cs=args.Cs, model=args.model, cv=args.cv, k=args.k, C_binary=args.C_binary,
        inference=args.inference, tol=args.tol, max_iter=args.max_iter,
        pos_weight=args.pos_weight, random_state=args.seed, task_names=names,
        refit=False, verbose=True, progress=True, batch_size=args.batch_size,
        devices=_devices(args),
    )
    mean = res.mean_val_ap  # [T, G]
    head = ["C"] + [str(n) for n in names] + ["mean"]
    widths = [max(8, len(h)) for h in head]
    print(f"\nmean validation AP over {F} folds ({T * G * F} fits, model {args.model}):")
    print(_fmt_row(head, widths))
    for g, C in enumerate(res.Cs):
        cells = [f"{C:g}"] + [f"{mean[t, g]:.4f}" for t in range(T)] + [
            f"{mean[:, g].mean():.4f}"]
        print(_fmt_row(cells, widths))
    print(_fmt_row(["chosen C"] + [f"{c:g}" for c in res.best_C] + [""], widths))
    print(f"{int(res.converged.sum())}/{res.converged.size} fits converged; "
          f"{res.cv_time:.1f} s including compilation")
    with open(outputs[0], "w", newline="") as fh:
        rows = res.rows()
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = {
        "train_file": args.train_file, "model": args.model, "cv": F,
        "Cs": [float(c) for c in res.Cs], "tasks": [str(n) for n in names],
        "mean_val_ap": {str(n): [float(v) for v in mean[t]] for t, n in enumerate(names)},
        "best_C": {str(n): float(c) for n, c in zip(names, res.best_C)},
        "n_fits": res.n_fits, "n_converged": int(res.converged.sum()),
        "seconds": res.cv_time,
        "settings": {"tol": args.tol, "max_iter": args.max_iter, "inference": args.inference,
                     "k": args.k, "C_binary": args.C_binary, "seed": args.seed},
    }
    with open(outputs[1], "w") as fh:
        json.dump(summary, fh, indent=2)
    print(f"wrote {outputs[0]} and {outputs[1]}")
    return 0


def cmd_demo(args):
    """Binary SVM vs AP-SVM on the bundled page-blocks data, C by CV."""
    import jax.numpy as jnp
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import jaxrank
    from jaxrank._src.model_selection import cv_grid, stratified_fold_masks

    _use_cpu_cores(args)
    X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=args.seed
    )
    scaler = StandardScaler().fit(Xtr)
    Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    Cs = np.asarray(args.Cs, np.float32)
    print(
        f"page-blocks0 (bundled, KEEL/UCI): train {len(ytr)} ({int((ytr > 0).sum())} "
        f"positives), test {len(yte)} ({int((yte > 0).sum())} positives), "
        f"{X.shape[1]} features, standardised"
    )
    print(f"choosing C from {[float(f'{c:g}') for c in args.Cs]} by {args.cv}-fold CV (validation AP) ...")
    positive = ytr > 0
    masks = stratified_fold_masks(positive, args.cv, random_state=args.seed)
    Xj = jnp.asarray(Xtr, jnp.float32)
    rows = []
    for name in ("svm", "apsvm"):
        loss = "ap" if name == "apsvm" else "zero_one"
        kp = int(positive.sum()) if loss == "ap" else 1
        t0 = time.perf_counter()
        ap, obj, steps, conv = cv_grid(
            Xj, jnp.asarray(positive), jnp.asarray(masks), jnp.asarray(Cs),
            jnp.float32(args.tol), loss=loss, kp=kp, max_iter=args.max_iter,
            fit_intercept=(name == "svm"), batch_size=args.batch_size,
            devices=tuple(_devices(args)),
        )
        mean_ap = np.asarray(ap).mean(axis=0)
        best = int(np.argmax(mean_ap))
        t_cv = time.perf_counter() - t0
        cv_txt = "  ".join(f"C={c:g}: {a:.4f}" for c, a in zip(Cs, mean_ap))
        print(f"  {name:6s} CV AP  {cv_txt}   ({t_cv:.1f} s for {masks.shape[0] * len(Cs)} fits)")
        model = _make_model(name, float(Cs[best]), args)
        t0 = time.perf_counter()
        model.fit(Xtr, ytr)
        t_fit = time.perf_counter() - t0
        res = _evaluate(model.decision_function(Xte), yte)
        rows.append((type(model).__name__, float(Cs[best]), float(mean_ap[best]), res,
                     t_fit, model.n_iter_, t_cv))
    print()
    print("| model | C (CV) | CV AP | test AP | test ROC-AUC | test P@10 | fit time (s) | iterations | CV time (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, C, cvap, res, t_fit, it, t_cv in rows:
        print(
            f"| {name} | {C:g} | {cvap:.4f} | {res['AP']:.4f} | {res['ROC-AUC']:.4f} | "
            f"{res['P@10']:.2f} | {t_fit:.2f} | {it} | {t_cv:.1f} |"
        )
    print("\nfit time includes JIT compilation (first call of each shape).")
    return 0


def build_parser():
    p = argparse.ArgumentParser(
        prog="jaxrank",
        description="Train and use rankers that optimise Average Precision (AP-SVM) "
        "or a binary SVM baseline. Data files: SVMlight/LIBSVM (.gz/.bz2 ok), "
        ".npz (X, y), .npy/.csv (label in the last column).",
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common_fit(q):
        q.add_argument("--inference", choices=["select", "search", "greedy"], default="select",
                       help="AP loss-augmented inference algorithm (all exact; default select)")
        q.add_argument("--max-iter", type=int, default=2000,
                       help="maximum solver iterations (default 2000)")
        q.add_argument("--tol", type=_positive_float, default=1e-4,
                       help="relative duality gap to stop at (default 1e-4)")
        q.add_argument("--pos-weight", type=_positive_float, default=1.0,
                       help="weight of positives in the binary SVM hinge (default 1)")
        q.add_argument("-v", "--verbose", action="store_true", help="print solver progress")
        q.add_argument("--k", type=_positive_float, default=0.5,
                       help="apsvm-appx: fraction of the easy set kept, in (0, 1] (default 0.5)")
        q.add_argument("--C-binary", dest="C_binary", type=_positive_float, default=None,
                       help="apsvm-appx: C of the first-stage binary SVM (default C/n)")

    def batched(q):
        q.add_argument("--batch-size", type=_positive_int, default=None,
                       help="fits stepped together per device (default: up to 32)")
        q.add_argument("--devices", type=_positive_int, default=None,
                       help="devices to shard the fits over (default: all; on a CPU, "
                       "one per core)")

    t = sub.add_parser(
        "train", help="train a model on TRAIN and write it to MODEL",
        description="Train an AP-SVM (eq. (3) of Mohapatra et al. 2014) or a binary SVM. "
        "-c is the C of eq. (3): 1/2||w||^2 + C*xi with the AP loss in [0,1]. "
        "SVM-perf/SVM-map measure the loss in percent, so their -c equals 100*C here.",
    )
    t.add_argument("train_file", metavar="TRAIN")
    t.add_argument("model_file", metavar="MODEL")
    t.add_argument("--model", choices=TRAIN_MODELS, default="apsvm",
                   help="apsvm (default), svm, apsvm-appx (AP-SVM-APPX, paper §3.3), "
                   "kernelrank (smoothed AUC, linear scorer; Gao & Sun) or auc-svm "
                   "(ROC-area SVM, SVM-perf -l 10)")
    t.add_argument("--kernel", choices=["gaussian", "sigmoid_like", "sigmoid"],
                   default="gaussian", help="kernelrank: smoothing kernel (default gaussian)")
    t.add_argument("--bandwidth", default="auto",
                   help="kernelrank: bandwidth in score units, or 'auto' (paper default)")
    t.add_argument("-c", type=_positive_float, default=1.0, help="trade-off C > 0 (default 1)")
    t.add_argument("--force", action="store_true", help="overwrite MODEL if it exists")
    common_fit(t)
    t.set_defaults(func=cmd_train)

    pr = sub.add_parser("predict", help="write the scores of MODEL on DATA",
                        description="Print one score per line (or write them with -o).")
    pr.add_argument("model_file", metavar="MODEL")
    pr.add_argument("data_file", metavar="DATA")
    pr.add_argument("-o", "--output", help="write scores to this file instead of stdout")
    pr.add_argument("--force", action="store_true", help="overwrite the -o file if it exists")
    pr.set_defaults(func=cmd_predict)

    ev = sub.add_parser("evaluate", help="AP, ROC-AUC and P@10 of MODEL on DATA")
    ev.add_argument("model_file", metavar="MODEL")
    ev.add_argument("data_file", metavar="DATA")
    ev.set_defaults(func=cmd_evaluate)

    sw = sub.add_parser(
        "sweep", help="choose C by k-fold CV for one or many tasks, all fits in one call",
        description="Cross-validate C (validation AP) for every task of TRAIN with all "
        "(task, C, fold) fits in one compiled call (work queues of --batch-size vmapped "
        "fits per device). Tasks: a binary label gives one "
        "task; a multi-class label column gives one one-vs-rest task per class (--tasks); "
        "several --task-column columns of a .csv/.npy file give one binary task each. "
        "Writes PREFIX.csv (one row per fit) and PREFIX.json (summary).",
    )
    sw.add_argument("train_file", metavar="TRAIN")
    sw.add_argument("--model", choices=MODELS, default="apsvm",
                    help="apsvm (default), svm or apsvm-appx")
    sw.add_argument("--Cs", type=lambda s: [_positive_float(v) for v in s.split(",")],
                    default=[0.1, 1.0, 10.0], help="comma-separated C grid (default 0.1,1,10)")
    sw.add_argument("--cv", type=int, default=5, help="stratified CV folds (default 5)")
    sw.add_argument("--task-column", type=int, nargs="+", default=None, metavar="COL",
                    help="label column(s) of a .csv/.npy TRAIN (0-based, negative from the "
                    "end); the other columns are features. Default: the last column.")
    sw.add_argument("--tasks", default="all",
                    help="multi-class label: 'all' (default, one-vs-rest per class) or "
                    "comma-separated class values")
    sw.add_argument("--output-prefix", default="jaxrank-sweep",
                    help="write PREFIX.csv and PREFIX.json (default jaxrank-sweep)")
    sw.add_argument("--force", action="store_true", help="overwrite existing output files")
    sw.add_argument("--seed", type=int, default=0, help="fold seed (default 0)")
    common_fit(sw)
    batched(sw)
    sw.set_defaults(func=cmd_sweep)

    d = sub.add_parser(
        "demo", help="binary SVM vs AP-SVM on the bundled page-blocks data",
        description="Train a binary SVM and an AP-SVM on the bundled KEEL page-blocks0 "
        "data (70/30 stratified split, standardised features), C chosen by k-fold CV "
        "on the training split, and print test AP, ROC-AUC, P@10, time, iterations.",
    )
    d.add_argument("--Cs", type=lambda s: [_positive_float(v) for v in s.split(",")],
                   default=[0.01, 0.1, 1.0, 10.0], help="comma-separated C grid")
    d.add_argument("--cv", type=int, default=3, help="CV folds (default 3)")
    d.add_argument("--seed", type=int, default=0, help="split/fold seed (default 0)")
    common_fit(d)
    batched(d)
    d.set_defaults(func=cmd_demo)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
