"""Command-line interface, in the conventions of svm_perf_learn / svm_map_learn.

    jaxrank train [--model apsvm|svm] [-c C] TRAIN MODEL
    jaxrank predict MODEL DATA [-o scores.txt]
    jaxrank evaluate MODEL DATA
    jaxrank demo
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

MODELS = ("apsvm", "svm")


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return v


def _make_model(name, C, args):
    import jaxrank

    if name == "apsvm":
        return jaxrank.APSVM(
            C=C, inference=args.inference, max_iter=args.max_iter, tol=args.tol,
            verbose=args.verbose,
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
        f"iterations, objective {model.objective_:.6g}, converged={model.converged_}"
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


def cmd_demo(args):
    """Binary SVM vs AP-SVM on the bundled page-blocks data, C by CV."""
    import jax.numpy as jnp
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    import jaxrank
    from jaxrank._src.model_selection import cv_grid, stratified_fold_masks

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
            fit_intercept=(name == "svm"),
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

    t = sub.add_parser(
        "train", help="train a model on TRAIN and write it to MODEL",
        description="Train an AP-SVM (eq. (3) of Mohapatra et al. 2014) or a binary SVM. "
        "-c is the C of eq. (3): 1/2||w||^2 + C*xi with the AP loss in [0,1]. "
        "SVM-perf/SVM-map measure the loss in percent, so their -c equals 100*C here.",
    )
    t.add_argument("train_file", metavar="TRAIN")
    t.add_argument("model_file", metavar="MODEL")
    t.add_argument("--model", choices=MODELS, default="apsvm", help="apsvm (default) or svm")
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
