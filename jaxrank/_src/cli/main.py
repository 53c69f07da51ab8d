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
import os
import sys

from jaxrank._src.cli.commands import cmd_demo, cmd_evaluate, cmd_predict, cmd_sweep, cmd_train
from jaxrank._src.cli.options import (
    _bandwidth,
    _grid,
    _grid_param,
    _label_value,
    _nonnegative_float,
    _param,
    _pos_weight,
    _positive_float,
    _positive_int,
    _positive_number,
)


def _version():
    import jaxrank

    return jaxrank.__version__


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
    p.add_argument("--version", action="version", version=f"jaxrank {_version()}")
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
        q.add_argument("--k", type=_positive_number, default=None,
                       help="apsvm-appx: fraction of the easy set kept, in (0, 1]; "
                       "prec-at-k-svm, rec-at-k-svm: the k of Prec@k / Rec@k (a count)")
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
                       help="fits stepped together per device (default: up to 32; on a CPU "
                       "one per 16 fits of a device)")
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
                   help="trade-off C > 0 (default: the model's own, e.g. 100 for apsvm, 1 "
                   "for svm)")
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
        description="Cross-validate C (validation AP, or the model's own measure; MAP over "
        "queries for qid: files; kernelrank, without C: its --grid parameters, one fit at a "
        "time) for "
        "every task of TRAIN with all (task, C, fold) fits in one compiled call. Tasks: a "
        "binary label gives one task; a multi-class label column gives one one-vs-rest task "
        "per class (--tasks); several --task-column columns of a .csv/.npy file give one "
        "binary task each. Writes PREFIX.csv (one row per fit) and PREFIX.json (summary).",
    )
    sw.add_argument("train_file", metavar="TRAIN")
    sw.add_argument("--model", choices=names,
                    default="apsvm", help="apsvm (default), svm, apsvm-appx, auc-svm, ..., a "
                    "latent model on a qid: (bag id) file, a graph model with --edges, or "
                    "kernelrank (no C: its --grid parameters only, one fit at a time)")
    sw.add_argument("--edges", default=None, metavar="EDGES.txt",
                    help="graph models: the edges among the samples of TRAIN (two 0-based "
                    "sample indices per line); the folds keep connected components whole")
    sw.add_argument("--Cs", type=_grid, default=None,
                    help="comma-separated C grid, or 'auto' (the default for a model with "
                    "C): the model's own grid, extended while the best C sits at an edge")
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
    :class:`jaxrank._src.cli.store.ProgramStore`, keyed by model, shapes and
    versions, so that a repeated ``train`` also skips tracing and lowering).
    A no-op returning ``None`` when JAX is already configured with a cache
    directory (e.g. by the caller of :func:`main`) or the location is not
    writable; also (with a one-line warning) when the cache directory or its
    ``jax/`` or ``programs/`` part is not the user's own or is writable by
    other users, since both hold executables that are run (directories are
    created with mode ``0o700``).
    """
    from jaxrank._src.cache import default_directory, private_directories, use_compilation_cache

    if getattr(args, "no_cache", False):
        use_compilation_cache(enabled=False)  # nor do the estimators turn it on
        return None
    import jax

    if jax.config.jax_compilation_cache_dir:
        return None
    from jaxrank._src.cli.store import ProgramStore

    base = default_directory()
    # Where the command decides against the caches, the estimators it runs
    # do not turn JAX's cache on either (use_compilation_cache(enabled=False)).
    try:
        problem = private_directories(base, "jax", "programs")
    except OSError:
        use_compilation_cache(enabled=False)
        return None  # unwritable cache location: run without a cache
    if problem:
        # Both caches hold executables that are run: refuse directories that
        # other users could write (or replace), as pip does with its cache.
        _warn(f"not using the compilation cache: {problem} (or pass --no-cache).")
        use_compilation_cache(enabled=False)
        return None
    try:
        store = ProgramStore(os.path.join(base, "programs"))
    except OSError:
        use_compilation_cache(enabled=False)
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

    Tearing down the interpreter (JAX's and SciPy's modules and threads) is a
    large share of a short command such as a ``jaxrank train`` whose programs
    are cached (``docs/design_notes.md``); every file the command writes is
    closed by then.
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

    from jaxrank._src.oracles.sorting import _cacheable_programs

    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        # Python's warnings as one line each: `jaxrank: warning: ...`.
        warnings.showwarning = _show_warning
        store = _compilation_cache(args)
        args.program_store = store  # the commands hand it to the estimators they fit
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
