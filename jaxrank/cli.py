"""Command-line interface, in the conventions of svm_perf_learn / svm_map_learn.

    jaxrank train [--model NAME] [-c C] TRAIN MODEL
    jaxrank predict MODEL DATA [-o scores.txt]
    jaxrank evaluate MODEL DATA
    jaxrank sweep TRAIN [--model NAME] [--Cs auto|0.1,1,10] [--grid NAME=V1,V2] [--cv 5]
                  [--task-column COL ...] [--tasks all|CLASS,...] [--output-prefix P]
    jaxrank demo

Models are the registry's (``jaxrank.ESTIMATORS``): every option that names an
estimator parameter (``-c``, ``--tol``, ``--k``, ...) is passed to the chosen
class, and an option the class does not have is an error. SVMlight files
with ``qid:`` columns are query-grouped data: models with query grouping
(``apsvm``: mean AP over queries) train per query, others refuse them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

# CLI option (argparse dest) -> estimator parameter.
_PARAM_OPTIONS = {
    "c": "C",
    "inference": "inference",
    "max_iter": "max_iter",
    "tol": "tol",
    "pos_weight": "pos_weight",
    "k": "k",
    "C_binary": "C_binary",
    "kernel": "kernel",
    "bandwidth": "bandwidth",
    "pos_label": "pos_label",
}
_FLAG = {"c": "-c", "C_binary": "--C-binary"}


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    with np.errstate(over="ignore", under="ignore"):
        v32 = np.float32(v)
    if not np.isfinite(v32) or v32 <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a number > 0 that is finite and non-zero in float32, got {text!r}")
    return v


def _pos_weight(text):
    """``--pos-weight``: ``"balanced"`` or a number > 0."""
    return "balanced" if text == "balanced" else _positive_float(text)


def _nonnegative_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    with np.errstate(over="ignore", under="ignore"):
        v32 = np.float32(v)
    if not np.isfinite(v32) or v < 0:
        raise argparse.ArgumentTypeError(
            f"expected a number >= 0 that is finite in float32, got {text!r}")
    return v


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def _bandwidth(text):
    return "auto" if text == "auto" else _positive_float(text)


def _grid(text):
    if text == "auto":
        return "auto"
    return [_positive_float(v) for v in text.split(",")]


def _label_value(text):
    """A ``--pos-label`` value: an int or a float when the text is one (labels read
    from data files are numbers), else the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _param(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _grid_param(text):
    """A ``--grid NAME=V1,V2,...`` option: ``(NAME, [values])``, each value JSON
    when it parses as JSON, else the text itself; ``none``: no other parameter."""
    if text == "none":
        return None
    key, sep, values = text.partition("=")
    if not sep or not key or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,... or none, got {text!r}")
    out = []
    for v in values.split(","):
        try:
            out.append(json.loads(v))
        except json.JSONDecodeError:
            out.append(v)
    return key, out


def _param_grid(cls, given):
    """``param_grid`` of ``sweep`` from the ``--grid`` options (``None``: the
    model's default grid; ``--grid none``: ``{}``)."""
    if not given:
        return None
    if None in given:
        if len(given) > 1:
            raise ValueError("--grid none tunes C only; it cannot be combined with other "
                             "--grid options.")
        return {}
    names = set(cls().get_params())
    grid = {}
    for key, values in given:
        if key not in names or key == "C":
            raise ValueError(f"--grid {key}: {cls.__name__} has no such parameter besides C "
                             f"(give C values with --Cs); it has {sorted(names - {'C'})}.")
        if key in grid:
            raise ValueError(f"--grid {key} is given twice.")
        grid[key] = values
    return grid


def _estimator_params(cls, args):
    """Parameters of ``cls`` from the options the user gave (errors for foreign ones)."""
    names = set(cls().get_params())
    params = {}
    for dest, param in _PARAM_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if param not in names:
            flag = _FLAG.get(dest, "--" + dest.replace("_", "-"))
            raise ValueError(f"{flag} does not apply to --model {args.model} "
                             f"({cls.__name__} has no parameter {param!r}).")
        params[param] = value
    for key, value in getattr(args, "param", None) or []:
        if key not in names:
            raise ValueError(f"--param {key}: {cls.__name__} has no such parameter; it has "
                             f"{sorted(names)}.")
        params[key] = value
    if "verbose" in names:
        params["verbose"] = not args.quiet
    return params


def make_estimator(args):
    """The unfitted estimator of ``--model`` with the given options."""
    from jaxrank._src.estimators.registry import get_estimator

    cls = get_estimator(args.model)
    return cls(**_estimator_params(cls, args))


def precision_at_k(scores, positive, k=10):
    """Fraction of positives among the ``k`` highest scores (stable order)."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return float(np.mean(np.asarray(positive, bool)[order]))


def evaluate_scores(scores, positive, groups=None):
    """AP, ROC-AUC and P@10 of scores (MAP over queries with ``groups``)."""
    from jaxrank.metrics import average_precision, roc_auc

    s = np.asarray(scores, np.float32)
    out = {
        "AP": float(average_precision(s, positive)),
        "ROC-AUC": float(roc_auc(s, positive)),
        "P@10": precision_at_k(s, positive, 10),
    }
    if groups is not None:
        from jaxrank._src.estimators.base import map_score

        out["MAP"] = map_score(s, positive, groups)
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


def _extra_inputs(est, path, groups, edges, *, model_name):
    """Keyword arguments of fit/decision_function from qid: and --edges (per class)."""
    kw = {}
    gname = getattr(est, "_groups_param", None)
    if groups is not None:
        if gname is None:
            raise ValueError(
                f"{path} has qid: columns; --model {model_name} trains one pooled ranking and "
                "takes neither queries nor bags. Use --model apsvm (mean AP over queries), a "
                "latent model (qid: = bag id) or remove the qid: columns.")
        kw[gname] = groups
    elif getattr(est, "_groups_required", False):
        raise ValueError(f"--model {model_name} needs qid: columns in {path} ({gname}).")
    if getattr(est, "_needs_edges", False):
        if edges is None:
            raise ValueError(f"--model {model_name} needs --edges EDGES.txt.")
        kw["edges"] = edges
    elif edges is not None:
        raise ValueError(f"--edges does not apply to --model {model_name}.")
    return kw


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
    name = type(model).__name__
    kw = _extra_inputs(model, args.data_file, groups, edges, model_name=name)
    if not getattr(model, "_groups_at_predict", False):
        kw.pop(getattr(model, "_groups_param", None) or "", None)
    return kw


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
    if hasattr(model, "_per_group_labels") and getattr(model, "_groups_at_predict", False):
        y, groups = model._per_group_labels(y, groups), None  # one score per bag
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
    from jaxrank._src.estimators.base import positive_class_text

    return positive_class_text(est, classes, grouped=grouped)


def _sweep_classes(Y, pos_label):
    """``classes_`` of a two-label task column (``classes_[1]`` positive)."""
    from jaxrank._src.estimators.base import labels_to_tasks

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
    bags_model = getattr(cls, "_groups_param", None) == "bags"  # qid: = bag ids
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
    res = sweep(
        X, Y, Cs=args.Cs, model=args.model, cv=args.cv,
        **({"bags": groups} if bags_model else {"groups": groups}),
        random_state=args.seed, task_names=names, refit=False, verbose=not args.quiet,
        progress=not args.quiet, batch_size=args.batch_size, devices=_devices(args),
        param_grid=_param_grid(cls, args.grid), **params,
    )
    mean = res.mean_val_ap  # [T, G]
    F = res.val_ap.shape[2]
    extra = list(res.params[0]) if res.params else []  # the other tuned parameters
    head = ["C"] + extra + [str(n) for n in names] + ["mean"]
    widths = [max(8, len(h)) for h in head]
    for i, k in enumerate(extra, start=1):
        widths[i] = max([widths[i]] + [len(str(p[k])) for p in res.params])
    for t, p in enumerate(res.best_params):
        i = 1 + len(extra) + t
        widths[i] = max([widths[i]] + [len(str(v)) for v in p.values()])
    score = "AP over bags" if bags_model else "MAP" if groups is not None else "AP"
    if (names == ["label"] or bags_model) and not getattr(args, "quiet", False):
        print(_positive_class_text(cls(**params), _sweep_classes(Y, params.get("pos_label"))))
    print(f"\nmean validation {score} over {F} folds "
          f"({res.n_fits} fits, model {args.model}):")
    print(_fmt_row(head, widths))
    for g, C in enumerate(res.Cs):
        cells = [f"{C:g}"] + [str(res.params[g][k]) for k in extra] + [
            f"{mean[t, g]:.4f}" for t in range(T)] + [f"{mean[:, g].mean():.4f}"]
        print(_fmt_row(cells, widths))
    print(_fmt_row(["chosen C"] + [""] * len(extra) + [f"{c:g}" for c in res.best_C] + [""],
                   widths))
    for k in extra:
        print(_fmt_row([f"chosen {k}"] + [""] * len(extra) + [
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
        "Cs": [float(c) for c in res.Cs], "tasks": [str(n) for n in names],
        "mean_val_ap": {str(n): [float(v) for v in mean[t]] for t, n in enumerate(names)},
        "best_C": {str(n): float(c) for n, c in zip(names, res.best_C)},
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


def build_parser():
    from jaxrank._src.estimators.registry import ESTIMATORS

    names = sorted(ESTIMATORS)
    p = argparse.ArgumentParser(
        prog="jaxrank",
        description="Train and use rankers that optimise Average Precision (AP-SVM), "
        "ROC-AUC (ROC-area SVM, KernelRank) or a binary SVM baseline. Data files: "
        "SVMlight/LIBSVM (1-based indices; qid: = query ids; .gz/.bz2 ok), .npz (X, y), "
        ".npy/.csv (label in the last column).",
    )
    p.add_argument("--no-cache", action="store_true",
                   help="do not use the persistent compilation cache (default: compiled "
                   "programs are kept in ~/.cache/jaxrank or $JAXRANK_CACHE_DIR, so a "
                   "repeated run skips compilation)")
    sub = p.add_subparsers(dest="command", required=True)

    def quiet(q):
        q.add_argument("-q", "--quiet", action="store_true",
                       help="print only results, warnings and errors: no progress bars and "
                       "no summary lines (by default progress is shown for steps of more "
                       "than a few seconds)")

    def common_fit(q):
        q.add_argument("--inference", choices=["select", "search", "greedy"], default=None,
                       help="AP loss-augmented inference algorithm (all exact; default select)")
        q.add_argument("--max-iter", type=_positive_int, default=None,
                       help="maximum solver iterations (default: the model's)")
        q.add_argument("--tol", type=_nonnegative_float, default=None,
                       help="relative duality gap to stop at, >= 0 (default 1e-4; 0 runs to "
                       "max_iter unless the gap closes exactly)")
        q.add_argument("--pos-weight", type=_pos_weight, default=None,
                       help="svm: weight of positives in the hinge, a number > 0 or "
                       "'balanced' (n_neg / n_pos of the training samples; the default)")
        q.add_argument("--k", type=_positive_float, default=None,
                       help="apsvm-appx: fraction of the easy set kept, in (0, 1]")
        q.add_argument("--C-binary", dest="C_binary", type=_positive_float, default=None,
                       help="apsvm-appx: C of the first-stage binary SVM (default C/n)")
        q.add_argument("--pos-label", type=_label_value, default=None, metavar="LABEL",
                       help="the label of the positive (relevant) class, one of the two "
                       "labels of the file (default: the larger one)")
        q.add_argument("--param", type=_param, action="append", metavar="NAME=VALUE",
                       help="any other parameter of the model's class (JSON value)")
        quiet(q)

    def batched(q):
        q.add_argument("--batch-size", type=_positive_int, default=None,
                       help="fits stepped together per device (default: up to 32)")
        q.add_argument("--devices", type=_positive_int, default=None,
                       help="devices to shard the fits over (default: all; on a CPU, "
                       "one per core)")

    t = sub.add_parser(
        "train", help="train a model on TRAIN and write it to MODEL",
        description="Train a ranker. -c is the C of eq. (3) (Mohapatra et al. 2014): "
        "1/2||w||^2 + C*xi with the AP loss in [0,1]; SVM-perf/SVM-map measure the loss "
        "in percent, so their -c equals 100*C here. A TRAIN file with qid: columns is "
        "query-grouped (apsvm: mean AP over queries, SVM-map).",
    )
    t.add_argument("train_file", metavar="TRAIN")
    t.add_argument("model_file", metavar="MODEL")
    t.add_argument("--model", choices=names, default="apsvm",
                   help="apsvm (default), svm, apsvm-appx (AP-SVM-APPX, paper §3.3), "
                   "auc-svm (ROC-area SVM, SVM-perf -l 10) or kernelrank (smoothed AUC; "
                   "Gao & Sun)")
    t.add_argument("--kernel", choices=["gaussian", "sigmoid_like", "sigmoid"],
                   default=None, help="kernelrank: smoothing kernel (default gaussian)")
    t.add_argument("--bandwidth", type=_bandwidth, default=None,
                   help="kernelrank: bandwidth in score units, or 'auto' (paper default)")
    t.add_argument("-c", type=_positive_float, default=None,
                   help="trade-off C > 0 (default: the model's, 1)")
    t.add_argument("--force", action="store_true", help="overwrite MODEL if it exists")
    t.add_argument("--progress", action="store_true",
                   help="print the solver's objective, dual bound and gap at its first "
                   "iteration and every 25th (default: for training sets of at least 10^7 "
                   "stored values; other fits show their elapsed time once they run over 2 s). "
                   "A fit with this output is compiled again on every run: JAX's compilation "
                   "cache does not keep programs with host callbacks")
    t.add_argument("--edges", default=None, metavar="EDGES.txt",
                   help="models over a graph of samples: two 0-based sample indices per line")
    common_fit(t)
    t.set_defaults(func=cmd_train)

    pr = sub.add_parser("predict", help="write the scores of MODEL on DATA",
                        description="Print one score per line (or write them with -o).")
    pr.add_argument("model_file", metavar="MODEL")
    pr.add_argument("data_file", metavar="DATA")
    pr.add_argument("-o", "--output", help="write scores to this file instead of stdout")
    pr.add_argument("--force", action="store_true", help="overwrite the -o file if it exists")
    pr.add_argument("--edges", default=None, metavar="EDGES.txt",
                    help="graph models: the edges among the samples of DATA")
    pr.set_defaults(func=cmd_predict)

    ev = sub.add_parser("evaluate", help="AP, ROC-AUC and P@10 of MODEL on DATA",
                        description="Positives are the model's classes_[1] (its larger "
                        "label); with qid: columns, also the MAP over queries.")
    ev.add_argument("model_file", metavar="MODEL")
    ev.add_argument("data_file", metavar="DATA")
    ev.add_argument("--edges", default=None, metavar="EDGES.txt",
                    help="graph models: the edges among the samples of DATA")
    ev.set_defaults(func=cmd_evaluate)

    sw = sub.add_parser(
        "sweep", help="choose C by k-fold CV for one or many tasks, all fits in one call",
        description="Cross-validate C (validation AP; MAP over queries for qid: files) for "
        "every task of TRAIN with all (task, C, fold) fits in one compiled call. Tasks: a "
        "binary label gives one task; a multi-class label column gives one one-vs-rest task "
        "per class (--tasks); several --task-column columns of a .csv/.npy file give one "
        "binary task each. Writes PREFIX.csv (one row per fit) and PREFIX.json (summary).",
    )
    sw.add_argument("train_file", metavar="TRAIN")
    # (kernelrank has no C; the graph models need edges, which sweep does not take)
    sw.add_argument("--model", choices=[n for n in names
                                        if n not in ("kernelrank", "hob-svm", "hoap-svm")],
                    default="apsvm", help="apsvm (default), svm, apsvm-appx, auc-svm, or a "
                    "latent model on a qid: (bag id) file")
    sw.add_argument("--Cs", type=_grid, default="auto",
                    help="comma-separated C grid, or 'auto' (default): the model's own "
                    "grid, extended while the best C sits at an edge")
    sw.add_argument("--grid", type=_grid_param, action="append", default=None,
                    metavar="NAME=V1,V2,...",
                    help="another parameter to cross-validate with C (repeatable; every "
                    "combination is fitted over the C grid), or 'none' (C only). Default: "
                    "the model's own grid of other parameters (latent-svm: "
                    "J=balanced,balanced*0.3,balanced*0.1 and c=0,0.1; none for the other "
                    "models), without those fixed by --param")
    sw.add_argument("--cv", type=_positive_int, default=5, help="CV folds (default 5)")
    sw.add_argument("--task-column", type=int, nargs="+", default=None, metavar="COL",
                    help="label column(s) of a .csv/.npy TRAIN (0-based, negative from the "
                    "end); the other columns are features. Default: the last column.")
    sw.add_argument("--tasks", default="all",
                    help="multi-class label: 'all' (default, one-vs-rest per class) or "
                    "comma-separated class values")
    sw.add_argument("--output-prefix", default="jaxrank-sweep",
                    help="write PREFIX.csv and PREFIX.json (default jaxrank-sweep); missing "
                    "folders are created, and a folder (a PREFIX ending in /) gets "
                    "sweep.csv and sweep.json")
    sw.add_argument("--force", action="store_true", help="overwrite existing output files")
    sw.add_argument("--seed", type=int, default=0, help="fold seed (default 0)")
    common_fit(sw)
    batched(sw)
    sw.set_defaults(func=cmd_sweep)

    d = sub.add_parser(
        "demo", help="binary SVM vs AP-SVM vs ROC-area SVM vs KernelRank on bundled data",
        description="On each bundled demo dataset (KEEL/UCI, jaxrank.datasets.DEMO_DATASETS): "
        "a stratified 70/30 split, standardised features, C of each SVM chosen by k-fold CV "
        "(validation AP) in one batched sweep per model, KernelRank's bandwidth by its "
        "validation split; prints test AP per dataset and each model's number of wins.",
    )
    d.add_argument("--cv", type=_positive_int, default=3, help="CV folds (default 3)")
    d.add_argument("--seed", type=int, default=0, help="split/fold seed (default 0)")
    d.add_argument("--datasets", default=None,
                   help="comma-separated subset of the demo datasets (default: all)")
    quiet(d)
    batched(d)
    d.set_defaults(func=cmd_demo)
    return p


def _compilation_cache(args):
    """Turn on JAX's persistent compilation cache (unless ``--no-cache``); returns a program store.

    Compiled programs are stored in ``$JAXRANK_CACHE_DIR`` or the user's cache
    directory (``$XDG_CACHE_HOME/jaxrank``, default ``~/.cache/jaxrank``): XLA
    programs of every size in ``jax/`` (JAX's cache), and the executables of
    single fits in ``programs/`` (the returned
    :class:`jaxrank._src.cli_store.ProgramStore`, keyed by model, shapes and
    versions, so that a repeated ``train`` also skips tracing and lowering).
    A no-op returning ``None`` when JAX is already configured with a cache
    directory (e.g. by the caller of :func:`main`) or the location is not
    writable; also (with a one-line warning) when the cache directory or its
    ``jax/`` or ``programs/`` part is not the user's own or is writable by
    other users, since both hold executables that are run (directories are
    created with mode ``0o700``).
    """
    if getattr(args, "no_cache", False):
        return None
    import jax

    if jax.config.jax_compilation_cache_dir:
        return None
    from jaxrank._src.cli_store import ProgramStore, untrusted_directory

    base = os.environ.get("JAXRANK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "jaxrank")
    try:
        # Private directories (mode 0o700 whatever the umask allows others).
        for d in (base, os.path.join(base, "jax"), os.path.join(base, "programs")):
            os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError:
        return None  # unwritable cache location: run without a cache
    # Both caches hold executables that are run: refuse directories that
    # other users could write (or replace), as pip does with its cache.
    for d in (base, os.path.join(base, "jax"), os.path.join(base, "programs")):
        problem = untrusted_directory(d)
        if problem:
            _warn(f"not using the compilation cache: {problem} (or pass --no-cache).")
            return None
    try:
        store = ProgramStore(os.path.join(base, "programs"))
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", os.path.join(base, "jax"))
    # Every program, however quick to compile: a run of the CLI compiles
    # dozens of small ones (input glue), each compiled again otherwise.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return store


def _warn(message):
    """Print ``jaxrank: warning: MESSAGE`` as one line on stderr."""
    _show_warning(message, UserWarning, "", 0)


def _is_command_process(argv):
    """True when this process is the ``jaxrank`` command itself (not Python calling main)."""
    if argv is not None:
        return False
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return spec.name in ("jaxrank.__main__", "jaxrank.cli")
    return os.path.basename(sys.argv[0] or "").startswith("jaxrank")  # the console script


def _end_process(code):
    """Flush the output and end the process without the interpreter's teardown.

    Tearing down the interpreter (JAX's and SciPy's modules and threads) took
    about 0.4 s, a third of a ``jaxrank train`` whose programs are cached;
    every file the command writes is closed by then.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv=None):
    """Entry point of the ``jaxrank`` command; returns the exit status.

    Run as the command (``jaxrank ...``, ``python -m jaxrank ...``), the
    process ends right after the command (:func:`_end_process`); called from
    Python with an ``argv`` list, it returns the status.
    """
    code = _main(argv)
    if _is_command_process(argv):
        _end_process(code)
    return code


def _main(argv):
    import warnings

    from jaxrank._src.solvers.run import use_program_store
    from jaxrank._src.oracles.sorting import _cacheable_programs

    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        # Python's warnings as one line each: `jaxrank: warning: ...`.
        warnings.showwarning = _show_warning
        store = _compilation_cache(args)
        previous = use_program_store(store)
        try:
            if store is None:
                return args.func(args)
            # Programs on disk cannot hold host callbacks: with the caches on and
            # without the native kernels (whose FFI calls can be stored), the
            # NumPy host sort only for long lists (jaxrank.inference).
            with _cacheable_programs():
                return args.func(args)
        except (ValueError, TypeError, FileNotFoundError, FileExistsError, IsADirectoryError,
                PermissionError) as e:
            print(f"jaxrank: error: {_one_line(e)}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            # The reader of stdout went away (e.g. `jaxrank predict ... | head`).
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return 0
        finally:
            use_program_store(previous)


def _one_line(message):
    """``message`` (an exception or warning) as one line of text."""
    return " ".join(str(message).split())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` of the command: ``jaxrank: warning: MESSAGE`` on stderr."""
    from tqdm import tqdm

    name = getattr(category, "__name__", "Warning")
    kind = "" if name in ("UserWarning", "RuntimeWarning") else f" ({name})"
    try:
        # (tqdm.write: a progress line being shown is cleared first and redrawn after)
        tqdm.write(f"jaxrank: warning: {_one_line(message)}{kind}", file=file or sys.stderr)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
