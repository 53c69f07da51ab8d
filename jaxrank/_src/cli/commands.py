"""The commands of the command line: train, predict, evaluate, sweep, demo."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from jaxrank._src.cli.options import _estimator_params, _param_grid, make_estimator


def precision_at_k(scores, positive, k=10):
    """Fraction of positives among the ``k`` highest scores (stable order)."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return float(np.mean(np.asarray(positive, bool)[order]))


def evaluate_scores(scores, positive, groups=None):
    """AP, ROC-AUC and P@10 of scores (with ``groups``, MAP and NDCG over queries:
    the means over the queries with a relevant and an irrelevant item; NDCG with
    binary gains and no cut-off, as :class:`jaxrank.NDCGSVM` optimises)."""
    from jaxrank.metrics import average_precision, roc_auc

    s = np.asarray(scores, np.float32)
    out = {
        "AP": float(average_precision(s, positive)),
        "ROC-AUC": float(roc_auc(s, positive)),
        "P@10": precision_at_k(s, positive, 10),
    }
    if groups is not None:
        from jaxrank._src.estimators.base import map_score

        from jaxrank._src.estimators.ndcg import mean_ndcg

        out["MAP"] = map_score(s, positive, groups)
        out["NDCG"] = mean_ndcg(s, positive, groups)
        out["queries"] = int(np.unique(groups).size)
    return out


def _check_output(path, force):
    """Fail before any work if ``path`` cannot be written (or exists without --force)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory; expected a file name to write.")
    if os.path.exists(path) and not force:
        raise FileExistsError(f"{path} exists; use --force to overwrite it.")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"cannot write {path}: directory {directory} does not exist.")
    if not os.access(directory, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"cannot write {path}: permission denied.")


def _read(path, n_features=None):
    from jaxrank._src.data import load_data

    return load_data(path, n_features=n_features, return_groups=True)


def _read_edges(path):
    """``[m, 2]`` int64 edges: two 0-based sample indices per line (``None`` without a path).

    Indices beyond int64 are returned as read (float64), for the model's
    range check to name them.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a directory, an unreadable or empty file, or lines that
            are not two integers.
    """
    if path is None:
        return None
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory; expected an edges file.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"edges file {path} does not exist.")
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*input contained no data")
            e = np.loadtxt(path, dtype=np.float64, ndmin=2, comments="#")
    except ValueError as err:
        raise ValueError(f"cannot read edges file {path}: {err}") from None
    if e.size == 0:
        raise ValueError(f"edges file {path} holds no edges (it is empty or only comments); "
                         "expected two 0-based sample indices per line.")
    if e.shape[1] != 2 or not np.all(np.isfinite(e)) or not np.all(e == np.round(e)):
        raise ValueError(f"{path}: expected two integer sample indices per line.")
    if np.abs(e).max() >= 2.0**63:  # kept as read: the model names the index out of range
        return e
    return e.astype(np.int64)


def _extra_inputs(est, path, groups, edges, *, model_name, predict=False):
    """Keyword arguments of fit (``predict``: decision_function) from qid: and --edges.

    Read from the class's declared side input (``side_input``): query or bag
    ids come from the data file's ``qid:`` column, a graph from ``--edges``.
    """
    side = est.side_input
    source = None if side is None else side.cli_source
    if groups is not None and source != "qid":
        raise ValueError(
            f"{path} has qid: columns; --model {model_name} trains one pooled ranking and "
            "takes neither queries nor bags. Use --model apsvm (mean AP over queries), a "
            "latent model (qid: = bag id) or remove the qid: columns.")
    if edges is not None and source != "--edges":
        raise ValueError(f"--edges does not apply to --model {model_name}.")
    value = {"qid": groups, "--edges": edges}.get(source)
    if value is None:
        if side is not None and side.required:
            need = "qid: columns in " + path if source == "qid" else "--edges EDGES.txt"
            raise ValueError(f"--model {model_name} needs {need} ({side.name}).")
        return {}
    if predict and not side.at_predict:
        return {}
    return {side.name: value}


# Seconds a step of the command runs before its elapsed-time line appears.
_PROGRESS_DELAY = 2.0


# Per-iteration progress of `jaxrank train` by default only for training sets of
# at least this many stored values (shorter fits show the elapsed time): the
# per-iteration output is a host callback, and JAX never keeps a program with
# host callbacks in its persistent compilation cache, so such a fit is
# compiled again on every run (seconds, far more than a small fit).
_PROGRESS_MIN_ENTRIES = 10**7


def _stored_entries(X):
    return int(X.nnz) if hasattr(X, "nnz") else int(np.size(X))


class _Elapsed:
    """Context manager: a tqdm line ``DESC: 0:12 elapsed`` on stderr while a step runs.

    The line appears only once the step has run ``delay`` seconds (a quick
    step prints nothing) and is redrawn every second by a thread of its own,
    so it needs nothing from the step: the fit's compiled program keeps no
    host callback and stays in the compilation caches. Nothing is shown when
    ``enabled`` is False.
    """

    def __init__(self, desc, enabled=True, delay=_PROGRESS_DELAY):
        import threading

        self.desc, self.enabled, self.delay = desc, enabled, delay
        self._done = threading.Event()
        self._thread = None

    def __enter__(self):
        import threading

        if self.enabled:
            self._thread = threading.Thread(target=self._show, daemon=True)
            self._thread.start()
        return self

    def _show(self):
        if self._done.wait(self.delay):
            return
        from tqdm.auto import tqdm

        bar = tqdm(desc=self.desc, bar_format="{desc}: {elapsed} elapsed", file=sys.stderr,
                   leave=False, initial=0, total=None)
        try:
            while not self._done.wait(1.0):
                bar.refresh()
        finally:
            bar.close()

    def __exit__(self, *exc):
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        return False


def _describe(est):
    """``Name(C=...)`` of a fitted estimator for the summary line (its C, or its bandwidth)."""
    name = type(est).__name__
    if "C" in est.get_params():
        return f"{name}(C={est.C:g})"
    parts = [f"{k}={est.get_params()[k]}" for k in ("kernel",) if k in est.get_params()]
    if hasattr(est, "bandwidth_"):
        parts.append(f"bandwidth={float(est.bandwidth_):.4g}")
    return f"{name}({', '.join(parts)})"


def cmd_train(args):
    _check_output(args.model_file, args.force)
    est = make_estimator(args)
    if getattr(args, "program_store", None) is not None:
        est._program_store = args.program_store  # single fits from the on-disk store
    say = _printer(args)
    with _Elapsed(f"reading {args.train_file}", enabled=not args.quiet):
        X, y, groups = _read(args.train_file)
    progress = not args.quiet and "verbose" in est.get_params() and (
        bool(getattr(args, "progress", False)) or _stored_entries(X) >= _PROGRESS_MIN_ENTRIES)
    if "verbose" in est.get_params():
        est.set_params(verbose=progress)
    edges = _read_edges(getattr(args, "edges", None))
    say(f"read {X.shape[0]} samples x {X.shape[1]} features from {args.train_file}"
        + (f", {np.unique(groups).size} qid groups" if groups is not None else ""))
    kw = _extra_inputs(est, args.train_file, groups, edges, model_name=args.model)
    t0 = time.perf_counter()
    with _Elapsed(f"training {type(est).__name__}", enabled=not (args.quiet or progress)):
        est.fit(X, y, **kw)
    dt = time.perf_counter() - t0
    conv = getattr(est, "converged_", None)
    say(f"trained {_describe(est)} in {dt:.2f} s: "
        f"{est.n_iter_} iterations, objective {est.objective_:.6g}"
        + ("" if conv is None else f", converged={conv}"))
    if not getattr(args, "quiet", False):
        print(_positive_class_text(est, est.classes_,
                                   grouped=getattr(est, "n_queries_", None) is not None))
    if groups is not None and hasattr(est, "n_dropped_queries_"):
        say(f"{est.n_queries_} queries, {est.n_dropped_queries_} dropped (no relevant or no "
            "irrelevant item)")
    import jaxrank

    jaxrank.save(est, args.model_file, overwrite=args.force)
    say(f"wrote {args.model_file}")
    return 0


def _printer(args):
    """``print``, or a no-op with ``-q`` (summary lines; results are always printed)."""
    if getattr(args, "quiet", False):
        return lambda *a, **k: None
    return print


def cmd_predict(args):
    import jaxrank

    if args.output:
        _check_output(args.output, args.force)
    model = jaxrank.load(args.model_file)
    with _Elapsed(f"reading {args.data_file}"):
        X, _, groups = _read(args.data_file, model.n_features_in_)
    kw = _predict_inputs(model, args, groups)
    with _Elapsed(f"scoring {X.shape[0]} samples"):
        scores = np.asarray(model.decision_function(X, **kw))
    if args.output:
        np.savetxt(args.output, scores, fmt="%.8g")
        print(f"wrote {len(scores)} scores to {args.output}")
    else:
        np.savetxt(sys.stdout, scores, fmt="%.8g")
    return 0


def _predict_inputs(model, args, groups):
    """decision_function keywords for MODEL on DATA (bags / edges where the class needs them)."""
    edges = _read_edges(getattr(args, "edges", None))
    return _extra_inputs(model, args.data_file, groups, edges, model_name=type(model).__name__,
                         predict=True)


def _positive_labels(model, y, path):
    """Labels of a data file as positives by the model's ``classes_`` (or grades)."""
    y = np.asarray(y)
    if getattr(model, "n_queries_", None) is not None:  # query-grouped: grades
        return y >= model.min_relevance
    values = np.unique(y)
    if np.isin(values, model.classes_).all():
        return y == model.classes_[1]
    if values.size == 2:  # another two-value coding ({0, 1} vs {-1, 1}): larger positive
        return y == values[1]
    raise ValueError(f"labels of {path} {values.tolist()[:6]} are neither among the model's "
                     f"classes {model.classes_.tolist()} nor two values (larger = positive).")


def cmd_evaluate(args):
    import jaxrank

    model = jaxrank.load(args.model_file)
    with _Elapsed(f"reading {args.data_file}"):
        X, y, groups = _read(args.data_file, model.n_features_in_)
    kw = _predict_inputs(model, args, groups)
    with _Elapsed(f"scoring {X.shape[0]} samples"):
        s = np.asarray(model.decision_function(X, **kw))
    s = s if s.ndim == 1 else s[:, 0]
    side = model.side_input
    if side is not None and side.kind == "bags":
        from jaxrank._src.estimators.bags import per_bag_labels

        y, groups = per_bag_labels(y, groups), None  # one score per bag
    positive = _positive_labels(model, y, args.data_file)
    if positive.all() or not positive.any():
        raise ValueError(f"{args.data_file} needs positives and negatives to evaluate.")
    res = evaluate_scores(s, positive, groups)
    for k, v in res.items():
        print(f"{k:8s} {v:.4f}" if isinstance(v, float) else f"{k:8s} {v}")
    return 0


def _read_matrix(path):
    """A numeric matrix from a ``.csv`` (no header) or ``.npy`` file.

    Read by :func:`jaxrank.load_data`'s strict readers, whose errors name the
    file, line and column (e.g. a header line).
    """
    from jaxrank._src.data import load_data

    low = path.lower()
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory; expected a .csv or .npy file.")
    if not low.endswith((".npy", ".npy.gz", ".npy.bz2", ".csv", ".csv.gz", ".csv.bz2")):
        raise ValueError(
            f"--task-column needs a .csv or .npy file (one row per sample); got {path}."
        )
    X, y = load_data(path)  # (the last column as y)
    return np.column_stack([np.asarray(X), np.asarray(y)])


def sweep_tasks(labels, *, task_columns=None, tasks="all"):
    """Turn label column(s) into binary ranking tasks ``[n, T]`` and task names.

    * One label column with two values: one task (larger value positive).
    * One label column with more values (a multi-class label): one
      one-vs-rest task per class, ``positive = (label == class)``; ``tasks``
      ``"all"`` (default) takes every class, or a comma-separated list of
      class values selects some (e.g. ``"1,3"``).
    * Several label columns (``--task-column`` given more than once): each
      column is one binary task named ``col<index>``.

    Raises:
        ValueError: an unknown class in ``tasks``.
    """
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] > 1:
        names = [f"col{c}" for c in task_columns] if task_columns else list(
            range(labels.shape[1]))
        return labels, names
    y = labels.reshape(-1)
    values = np.unique(y)
    if values.size <= 2:
        return y, ["label"]
    if tasks == "all":
        chosen = values
    else:
        chosen = []
        for v in str(tasks).split(","):
            try:
                v = float(v)
            except ValueError:
                raise ValueError(f"--tasks: {v!r} is not a number.") from None
            if v not in values:
                raise ValueError(f"--tasks: class {v:g} is not a label value; classes are "
                                 f"{[float(f'{c:g}') for c in values]}.")
            chosen.append(v)
        chosen = np.asarray(chosen)
    Y = np.stack([(y == c).astype(np.int8) for c in chosen], axis=1)
    return Y, [f"class={float(c):g}" for c in chosen]


def _positive_class_text(est, classes, grouped=False):
    """Which class a fit takes as relevant (one summary line)."""
    from jaxrank._src.estimators.labels import positive_class_text

    return positive_class_text(est, classes, grouped=grouped)


def _sweep_classes(Y, pos_label):
    """``classes_`` of a two-label task column (``classes_[1]`` positive)."""
    from jaxrank._src.estimators.labels import labels_to_tasks

    return labels_to_tasks(np.ravel(Y), pos_label=pos_label)[1]


def _fmt_row(cells, widths):
    return "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))


def _use_cpu_cores(args):
    """Make each CPU core a JAX device (``--devices``), before JAX's first computation.

    A no-op if JAX is already running (``main`` called from Python) or for a
    GPU/TPU default backend (it only shapes the CPU backend).
    """
    import jax

    n = getattr(args, "devices", None)
    if n is None:
        cores = getattr(os, "sched_getaffinity", None)
        n = len(cores(0)) if cores else (os.cpu_count() or 1)
    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except RuntimeError:  # backends already initialised: keep their devices
        pass


def _devices(args):
    import jax

    devs = jax.local_devices()
    return devs[: args.devices] if args.devices else devs


def _sweep_outputs(prefix, force):
    """``[PREFIX.csv, PREFIX.json]``, checked; missing parent folders are created.

    A prefix that is a directory (an existing one, or any ending in ``/``)
    writes ``sweep.csv`` and ``sweep.json`` inside it.
    """
    if not prefix:
        raise ValueError("--output-prefix is empty; expected a path such as runs/a.")
    if prefix.endswith(("/", os.sep)) or (os.altsep and prefix.endswith(os.altsep)) \
            or os.path.isdir(prefix):
        prefix = os.path.join(prefix, "sweep")
    outputs = [prefix + ".csv", prefix + ".json"]
    for f in outputs:
        if os.path.isdir(f):
            raise ValueError(f"{f} is a directory; expected a file name to write.")
        if os.path.exists(f) and not force:
            raise FileExistsError(f"{f} exists; use --force to overwrite it.")
    directory = os.path.dirname(os.path.abspath(outputs[0]))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot write {outputs[0]}: cannot create the folder {directory} "
                         f"({e.strerror}).") from None
    for f in outputs:
        _check_output(f, force)
    return outputs


def cmd_sweep(args):
    """Cross-validate C for one or many tasks in one compiled call."""
    import csv

    from jaxrank._src.estimators.registry import get_estimator
    from jaxrank._src.estimators.sweep import sweep

    _use_cpu_cores(args)
    outputs = _sweep_outputs(args.output_prefix, args.force)
    cls = get_estimator(args.model)
    params = _estimator_params(cls, args)
    params.pop("verbose", None)
    params.pop("C", None)
    groups = None
    side = cls.side_input
    bags_model = side is not None and side.kind == "bags"  # qid: = bag ids
    if args.task_column:
        with _Elapsed(f"reading {args.train_file}", enabled=not args.quiet):
            a = _read_matrix(args.train_file)
        cols = [c if c >= 0 else a.shape[1] + c for c in args.task_column]
        if any(c < 0 or c >= a.shape[1] for c in cols) or len(set(cols)) != len(cols):
            raise ValueError(f"--task-column: bad or repeated column in {args.task_column} "
                             f"for {a.shape[1]} columns.")
        feat = [c for c in range(a.shape[1]) if c not in cols]
        X, labels = a[:, feat], a[:, cols]
        Y, names = sweep_tasks(labels, task_columns=args.task_column, tasks=args.tasks)
    else:
        with _Elapsed(f"reading {args.train_file}", enabled=not args.quiet):
            X, y, groups = _read(args.train_file)
        if groups is not None:
            Y, names = y, ["bags" if bags_model else "queries"]
        else:
            Y, names = sweep_tasks(y, tasks=args.tasks)
    if params.get("pos_label") is not None and names != ["label"] and not bags_model:
        raise ValueError(
            "--pos-label applies to a label column with two values; here the tasks are "
            f"{', '.join(map(str, names))} (one class against the rest per task, or "
            "relevance grades of qid: queries).")
    T = 1 if np.ndim(Y) == 1 else Y.shape[1]
    say = _printer(args)
    say(f"read {X.shape[0]} samples x {X.shape[1]} features from {args.train_file}; "
        f"{T} task(s): {', '.join(map(str, names))}")
    has_C = "C" in cls().get_params()
    Cs = args.Cs if args.Cs is not None else "auto" if has_C else None
    res = sweep(
        X, Y, Cs=Cs, model=args.model, cv=args.cv,
        **_extra_inputs(cls, args.train_file, groups, _read_edges(args.edges),
                        model_name=args.model),
        random_state=args.seed, task_names=names, refit=False, verbose=not args.quiet,
        progress=not args.quiet, batch_size=args.batch_size, devices=_devices(args),
        param_grid=_param_grid(cls, args.grid), **params,
    )
    mean = res.mean_val_score  # [T, G]
    F = res.val_score.shape[2]
    extra = list(res.params[0]) if res.params else []  # the other tuned parameters
    lead = ["C"] if has_C else []
    head = lead + extra + [str(n) for n in names] + ["mean"]
    widths = [max(8, len(h)) for h in head]
    for i, k in enumerate(extra, start=len(lead)):
        widths[i] = max([widths[i]] + [len(str(p[k])) for p in res.params])
    # the first column also holds the "chosen ..." labels
    widths[0] = max([widths[0]] + [len(f"chosen {k}") for k in lead[:1] + extra])
    for t, p in enumerate(res.best_params):
        i = len(lead) + len(extra) + t
        widths[i] = max([widths[i]] + [len(str(v)) for v in p.values()])
    score = ("AP over bags" if bags_model else "MAP" if groups is not None else "AP") \
        if res.scoring == "average_precision" else res.scoring
    if (names == ["label"] or bags_model) and not getattr(args, "quiet", False):
        print(_positive_class_text(cls(**params), _sweep_classes(Y, params.get("pos_label"))))
    print(f"\nmean validation {score} over {F} folds "
          f"({res.n_fits} fits, model {args.model}):")
    print(_fmt_row(head, widths))
    for g, C in enumerate(res.Cs):
        cells = [f"{C:g}"][:len(lead)] + [str(res.params[g][k]) for k in extra] + [
            f"{mean[t, g]:.4f}" for t in range(T)] + [f"{mean[:, g].mean():.4f}"]
        print(_fmt_row(cells, widths))
    pad = [""] * (len(lead) + len(extra) - 1)
    if has_C:
        print(_fmt_row(["chosen C"] + pad + [f"{c:g}" for c in res.best_C] + [""], widths))
    for k in extra:
        print(_fmt_row([f"chosen {k}"] + pad + [
            str(p[k]) for p in res.best_params] + [""], widths))
    say(f"{int(res.converged.sum())}/{res.converged.size} fits converged; "
        f"{res.cv_time:.1f} s including compilation")
    with open(outputs[0], "w", newline="") as fh:
        rows = res.rows()
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = {
        "train_file": args.train_file, "model": args.model, "cv": F,
        **({"Cs": [float(c) for c in res.Cs]} if has_C else {}),
        "tasks": [str(n) for n in names], "scoring": res.scoring,
        "mean_val_score": {str(n): [float(v) for v in mean[t]] for t, n in enumerate(names)},
        **({"best_C": {str(n): float(c) for n, c in zip(names, res.best_C)}} if has_C else {}),
        **({"params": res.params,
            "best_params": {str(n): p for n, p in zip(names, res.best_params)}}
           if extra else {}),
        "n_fits": res.n_fits, "n_converged": int(res.converged.sum()),
        "grid_extensions": res.extensions, "seconds": res.cv_time,
        "settings": {k: v for k, v in params.items()} | {"seed": args.seed},
    }
    with open(outputs[1], "w") as fh:
        json.dump(summary, fh, indent=2)
    say(f"wrote {outputs[0]} and {outputs[1]}")
    return 0


def cmd_demo(args):
    """The mission on bundled real data: four rankers, C by CV, test AP per dataset."""
    from jaxrank._src.demo import run_demo

    _use_cpu_cores(args)
    return run_demo(seed=args.seed, cv=args.cv, devices=_devices(args), quiet=args.quiet,
                    datasets=args.datasets)
