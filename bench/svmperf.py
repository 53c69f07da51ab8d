"""jaxrank's SVM-perf losses next to SVM-perf itself: same data, same objective, same C.

For each loss and each SVM-perf ``-c`` of a small grid, on the same training set:

* ``svm_perf_learn -l L -c c -w 3 -e EPS --b 1`` (SVM-perf V3.00, built at bench time
  from the tarball given with ``--svm-perf-tar``; every other option at its default);
* the jaxrank estimator at the equivalent ``C`` (default ``tol=1e-4``):

=========  ====================  ===================  ===============================
loss       SVM-perf              jaxrank              conversion
=========  ====================  ===================  ===============================
F1         ``-l 1``              ``F1SVM``            ``C = 100 c``, ``[w, b]`` equal
PRBEP      ``-l 3``              ``PRBEPSVM``         ``C = 100 c``, ``[w, b]`` equal
Prec@k     ``-l 4`` (``--p`` 0)  ``PrecisionAtKSVM``  ``C = 100 c``, ``[w, b]`` equal
Rec@k      ``-l 5`` (``--p`` 0)  ``RecallAtKSVM``     ``C = 100 c``, ``[w, b]`` equal
ROCArea    ``-l 10``             ``AUCSVM``           ``C = 25 c``, ``w = w_perf / 2``
=========  ====================  ===================  ===============================

Why ``-w 3``: SVM-perf's default algorithm ``-w 9`` optimises only the error rate
(``svm_struct_learn_custom.c`` exits with "The custom algorithm can only optimize
errorrate as the loss function. Please use algorithm '-w 3' instead."); ``-w 3`` is
its 1-slack dual cutting-plane algorithm, the program jaxrank solves.

Conversions (read off SVM-perf's ``svm_struct_api.c``, V3.00):

* F1, PRBEP, Prec@k, Rec@k (module docstring of the contingency oracles): labels
  ``+-50/n``, losses in percent, so SVM-perf's ``Psi``, ``Delta`` and slack are 100
  times jaxrank's (``Psi = 1/(2n) sum_i y_i [x_i, 1]``) and the same ``[w, b]`` solves
  both with ``C = 100 c``; the objectives are equal in value. ``--b 1`` appends the
  constant feature 1 (``read_struct_examples``), regularised like any weight: that
  is ``fit_intercept=True``. The model file keeps ``b_file = -w_bias``
  (``print_struct_learning_stats``) and scores ``w.x - b_file``, so
  ``b = -b_file``. ``k``: SVM-perf's ``(int)(P * p)`` (at least 1) with ``--p``
  default 0.5 (Prec@k) / 2 (Rec@k), jaxrank's default ``k=None``.
* ROC area (``-l 10``): labels ``+50/P``, ``-50/N``; the most violated labelling
  (``find_most_violated_constraint_rankmetric``) gives item ``i`` the value
  ``(50/(PN)) sum_j y_ij`` (``y_ij = +-1`` the pair order), so
  ``Psi_perf = 50/(PN) sum_pairs y_pn (x_p - x_n)``, ``Delta_perf = 100 #swapped/(PN)``
  and ``xi_perf(w) = (100/(PN)) sum_pn max(0, 1 - w.(x_p - x_n))`` (the search shifts
  scores by ``-+0.5``). jaxrank's ``AUCSVM`` has ``Psi = 1/(PN) sum y_pn (x_p - x_n)``,
  ``Delta`` the swapped fraction, ``xi(v) = (1/(PN)) sum max(0, 1 - 2 v.(x_p - x_n))``.
  With ``w = 2 v``: ``xi_perf(2v) = 100 xi(v)`` and
  ``1/2 |w|^2 + c xi_perf = 4 (1/2 |v|^2 + 25 c xi(v))``: ``C = 25 c``, ``v = w / 2``,
  SVM-perf's objective 4 times jaxrank's. The bias feature cancels in every pair
  difference, so ``--b 1`` learns ``b = 0`` (checked: ``|b|`` is printed) and
  ``AUCSVM`` has no intercept. (The same conversion is used, with ``--b 0``, in
  ``bench/convergence.py --svmperf``.)

Columns (``bench/results/svmperf.md``):

* ``F``: the training objective ``1/2 |[w, b]|^2 + C xi`` in jaxrank's units of each
  solution (SVM-perf's weights read from its model file and mapped as above), both
  evaluated by one formula in float64: ``xi = max(0, loss - <s, coef>)`` with
  ``s = X w + b`` and ``(loss, coef)`` the most violated labelling found by jaxrank's
  exact oracle (``jaxrank.inference.{f1,prbep,precision_at_k,recall_at_k,auc}_oracle``)
  run on the float64 scores (``jax.enable_x64``); ``X`` is the float32 matrix both
  solvers read (the SVMlight files are written from it exactly).
* ``rel``: ``(F_jaxrank - F_perf) / F_perf``; ``cos``: cosine of the two ``[w, b]``.
* ``test``: the loss's own measure on the test set, one function for both
  (``jaxrank.metrics.f1_at_zero``, ``prbep``, ``precision_at_k``, ``recall_at_k`` with
  ``k`` from the test positives as the estimators' ``score``, ``roc_auc``).
* ``it``: SVM-perf's "Number of iterations" / jaxrank's ``n_iter_``.
* times (wall seconds, medians of ``--repeats``): SVM-perf: the ``svm_perf_learn``
  process (reading the file included); jaxrank: ``first`` = one fit after
  ``jax.clear_caches()`` (compilation included), ``warm`` = the same fit again.

Also checked per row: the SVM-perf scores ``X_test w - b_file`` against
``svm_perf_classify``'s predictions file (max abs difference in the JSON).

Data: Reuters money-fx vs rest (LASVM tf-idf version; ``../shared/data/reuters_moneyfx``,
train 7,770 / test 3,299 x 8,315; BSD-3). SVM-perf's own example1 Reuters set is not
available here.

SVM-perf's source has a non-commercial licence: it is never part of this repository.
``--svm-perf-tar`` names the ``svm_perf.tar.gz`` of its authors (or an unpacked
directory); it is built with ``make`` in a temporary directory, deleted at the end.

    python bench/svmperf.py --svm-perf-tar /path/to/svm_perf.tar.gz           # full run
    python bench/svmperf.py --svm-perf-tar /path/to/svm_perf.tar.gz --quick   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _svmperf import build_svm_perf, read_model

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "reuters_moneyfx"
DEFAULT_OUT = HERE / "results" / "svmperf"
DEFAULT_CS = "1,10,100"
QUICK_CS = "1"
RTOL_FLAG = 1e-3

# name -> SVM-perf flag, jaxrank class, C / c, w_perf / w_jaxrank, intercept, --p default
LOSSES = {
    "F1": {"flag": 1, "cls": "F1SVM", "C_per_c": 100.0, "scale": 1.0, "bias": True,
           "frac": None},
    "PRBEP": {"flag": 3, "cls": "PRBEPSVM", "C_per_c": 100.0, "scale": 1.0, "bias": True,
              "frac": None},
    "Prec@k": {"flag": 4, "cls": "PrecisionAtKSVM", "C_per_c": 100.0, "scale": 1.0,
               "bias": True, "frac": 0.5},
    "Rec@k": {"flag": 5, "cls": "RecallAtKSVM", "C_per_c": 100.0, "scale": 1.0, "bias": True,
              "frac": 2.0},
    "ROCArea": {"flag": 10, "cls": "AUCSVM", "C_per_c": 25.0, "scale": 2.0, "bias": False,
                "frac": None},
}


def log(msg=""):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# SVM-perf: build, run, read.
# ---------------------------------------------------------------------------


def svm_perf_version(build):
    r = subprocess.run([str(build / "svm_perf_learn"), "-?"], capture_output=True, text=True,
                       errors="replace", check=False)
    lines = [ln.strip() for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    return "; ".join(lines[:3])


PERF_KEYS = {"iterations": r"Number of iterations:\s*(\d+)",
             "cpu_s": r"Runtime in cpu-seconds:\s*([0-9.eE+-]+)",
             "pval": r"Primal objective value: pval=\s*([0-9.eE+-]+)",
             "gap": r"Upper bound on duality gap:\s*([0-9.eE+-]+)"}


def run_learn(build, argv, train, model, timeout):
    t0 = time.perf_counter()
    r = subprocess.run([str(build / "svm_perf_learn"), *argv, str(train), str(model)],
                       capture_output=True, text=True, errors="replace", check=False,
                       timeout=timeout)
    wall = time.perf_counter() - t0
    out = r.stdout + r.stderr
    if r.returncode != 0 or not model.exists():
        raise RuntimeError(f"svm_perf_learn {' '.join(argv)} failed (rc {r.returncode}):\n"
                           + out[-2000:])
    res = {"wall_s": wall}
    for k, pat in PERF_KEYS.items():
        m = re.findall(pat, out)
        res[k] = float(m[-1]) if m else None
    return res


def run_classify(build, test, model, pred):
    r = subprocess.run([str(build / "svm_perf_classify"), str(test), str(model), str(pred)],
                       capture_output=True, text=True, errors="replace", check=False)
    if r.returncode != 0:
        raise RuntimeError("svm_perf_classify failed:\n" + (r.stdout + r.stderr)[-2000:])
    return np.loadtxt(pred)


# ---------------------------------------------------------------------------
# The common objective (float64) and the test measure.
# ---------------------------------------------------------------------------


def make_xi(name, X64, positive, k):
    """``xi(w, b)``: ``max(0, loss - <s, coef>)``, ``s = X w + b``, jaxrank's exact oracle in float64."""
    import jax
    import jax.numpy as jnp

    import jaxrank.inference as inf

    oracle = {"F1": inf.f1_oracle, "PRBEP": inf.prbep_oracle,
              "Prec@k": inf.precision_at_k_oracle, "Rec@k": inf.recall_at_k_oracle,
              "ROCArea": inf.auc_oracle}[name]
    extra = () if k is None else (int(k),)

    def xi(w, b):
        s = X64 @ w + b
        with jax.enable_x64(True):
            r = oracle(jnp.asarray(s, jnp.float64), jnp.asarray(positive),
                       jnp.ones(s.shape, bool), *extra)
            loss = float(r.loss)
            coef = np.asarray(r.coef, np.float64)
        return max(0.0, loss - float(s @ coef))

    return xi


def test_measure(name, s, positive, frac):
    import jaxrank.metrics as M
    from jaxrank.inference import k_from_fraction

    s = np.asarray(s, np.float64)
    if name == "F1":
        return float(M.f1_at_zero(s, positive))
    if name == "PRBEP":
        return float(M.prbep(s, positive))
    if name == "ROCArea":
        return float(M.roc_auc(s, positive))
    k = int(k_from_fraction(int(positive.sum()), frac))
    fn = M.precision_at_k if name == "Prec@k" else M.recall_at_k
    return float(fn(s, positive, k=k))


# ---------------------------------------------------------------------------
# One (loss, c) row.
# ---------------------------------------------------------------------------


def run_row(name, c, ctx, args):
    import jax
    from sklearn.exceptions import ConvergenceWarning

    import jaxrank

    L = LOSSES[name]
    C = L["C_per_c"] * c
    a = L["scale"]
    d = ctx["d"]
    argv = ["-l", str(L["flag"]), "-c", f"{c:g}", "-w", "3", "-e", f"{args.eps:g}", "--b", "1"]
    model = ctx["work"] / f"model_{L['flag']}_{c:g}"
    perf_runs = [run_learn(ctx["build"], argv, ctx["train"], model, args.timeout)
                 for _ in range(args.repeats)]
    perf = dict(perf_runs[-1])
    perf["wall_s"] = statistics.median(r["wall_s"] for r in perf_runs)
    perf["wall_all_s"] = [r["wall_s"] for r in perf_runs]
    w_file, b_file = read_model(model, d)
    pred = run_classify(ctx["build"], ctx["test"], model, ctx["work"] / "pred")
    s_perf_test = ctx["Xte64"] @ w_file - b_file
    classify_diff = float(np.max(np.abs(pred - s_perf_test)))
    v_perf, b_perf = w_file / a, (-b_file / a if L["bias"] else 0.0)

    cls = getattr(jaxrank, L["cls"])
    kw = {"tol": args.tol} if args.tol is not None else {}
    est = cls(C=C, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        jax.clear_caches()
        t0 = time.perf_counter()
        est.fit(ctx["Xtr"], ctx["ytr"])
        first = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            est.fit(ctx["Xtr"], ctx["ytr"])
            warm.append(time.perf_counter() - t0)
    v_jax = est.coef_.ravel().astype(np.float64)
    b_jax = float(np.ravel(est.intercept_)[0]) if L["bias"] else 0.0

    k = None
    if L["frac"] is not None:
        from jaxrank.inference import k_from_fraction
        k = int(k_from_fraction(int(ctx["pos_tr"].sum()), L["frac"]))
    xi = make_xi(name, ctx["Xtr64"], ctx["pos_tr"], k)

    def F(v, b):
        return 0.5 * (float(v @ v) + b * b) + C * xi(v, b)

    F_perf, F_jax = F(v_perf, b_perf), F(v_jax, b_jax)
    u_perf, u_jax = np.append(v_perf, b_perf), np.append(v_jax, b_jax)
    cos = float(u_perf @ u_jax / max(np.linalg.norm(u_perf) * np.linalg.norm(u_jax), 1e-300))
    s_jax_test = ctx["Xte64"] @ v_jax + b_jax
    row = {
        "loss": name, "flag": L["flag"], "c": c, "C": C, "k_train": k,
        "svm_perf_argv": " ".join(argv),
        "F_perf": F_perf, "F_jaxrank": F_jax, "rel": (F_jax - F_perf) / F_perf,
        "cos": cos,
        "norm_perf": float(np.linalg.norm(u_perf)), "norm_jaxrank": float(np.linalg.norm(u_jax)),
        "b_perf": b_perf, "b_jaxrank": b_jax, "b_file": b_file,
        "test_perf": test_measure(name, s_perf_test, ctx["pos_te"], L["frac"]),
        "test_jaxrank": test_measure(name, s_jax_test, ctx["pos_te"], L["frac"]),
        "perf_pval": perf["pval"], "perf_pval_in_jaxrank_units": (
            None if perf["pval"] is None else perf["pval"] / a ** 2),
        "perf_gap": perf["gap"], "perf_iterations": perf["iterations"],
        "perf_cpu_s": perf["cpu_s"], "perf_wall_s": perf["wall_s"],
        "perf_wall_all_s": perf["wall_all_s"], "perf_classify_max_abs_diff": classify_diff,
        "jaxrank_objective": float(np.ravel(est.objective_)[0]),
        "jaxrank_dual_objective": float(np.ravel(est.dual_objective_)[0]),
        "jaxrank_n_iter": int(np.max(est.n_iter_)),
        "jaxrank_converged": bool(np.all(est.converged_)),
        "jaxrank_tol": est.tol,
        "jaxrank_first_s": first, "jaxrank_warm_s": statistics.median(warm),
        "jaxrank_warm_all_s": warm,
    }
    return row


def row_line(r):
    return (f"  {r['loss']:<8} c={r['c']:<6g} C={r['C']:<7g} F perf={r['F_perf']:.7g} "
            f"jaxrank={r['F_jaxrank']:.7g} rel={r['rel']:+.1e} cos={r['cos']:.6f} "
            f"test {r['test_perf']:.4f}/{r['test_jaxrank']:.4f} "
            f"it {r['perf_iterations']:.0f}/{r['jaxrank_n_iter']} "
            f"t perf={r['perf_wall_s']:.2f}s jax first={r['jaxrank_first_s']:.2f}s "
            f"warm={r['jaxrank_warm_s']:.2f}s"
            + ("" if r["jaxrank_converged"] else " NOT CONVERGED"))


# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------


def report(header, rows, args, total_s):
    cmd = "python bench/svmperf.py " + " ".join(sys.argv[1:])
    flagged = [r for r in rows if abs(r["rel"]) > RTOL_FLAG]
    lines = ["# jaxrank's SVM-perf losses vs SVM-perf (`bench/svmperf.py`)", "",
             *[f"- {h}" for h in header],
             f"- Command: `{cmd}` (total {total_s:.0f} s)",
             (f"- SVM-perf options: `-l L -c c -w 3 -e {args.eps:g} --b 1`, all others default "
             "(`-w 3`: the default `-w 9` optimises only the error rate and exits for these "
             "losses; `-e` is in SVM-perf's percent units, i.e. a slack tolerance of "
             f"{args.eps / 100:g} in jaxrank's). jaxrank: the estimator at `C`, "
             f"`tol={args.tol if args.tol is not None else '1e-4 (default)'}`, other "
             "parameters default (`fit_intercept=True`, `k=None`)."),
             ("- Conversion: F1/PRBEP/Prec@k/Rec@k `C = 100 c`, same `[w, b]` (`b = -threshold` "
             "of the model file); ROCArea `C = 25 c`, `w = w_perf / 2` (SVM-perf's objective "
             "4 times jaxrank's), `b = 0` (the bias feature cancels in pair differences). "
             "Derivations in the docstring of `bench/svmperf.py`."),
             ("- `F`: `1/2 |[w, b]|^2 + C xi` in jaxrank's units, both solutions through one "
             "float64 evaluation (jaxrank's exact oracle on float64 scores); `rel` = "
             "`(F_jaxrank - F_perf) / F_perf`; `cos`: cosine of the two `[w, b]`; `test`: "
             "the loss's own measure on the test set (same `jaxrank.metrics` function for "
             "both); `it`: iterations (SVM-perf / jaxrank `n_iter_`); times: wall seconds, "
             f"medians of {args.repeats} (SVM-perf: the learn process; jaxrank `first`: after "
             "`jax.clear_caches()`, compilation included; `warm`: the fit again)."), "",
             ("| loss | -c | C | F SVM-perf | F jaxrank | rel | cos | test SVM-perf | "
             "test jaxrank | it | SVM-perf s | jaxrank first s | jaxrank warm s |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['loss']} | {r['c']:g} | {r['C']:g} | {r['F_perf']:.7g} | "
            f"{r['F_jaxrank']:.7g} | {r['rel']:+.1e} | {r['cos']:.6f} | {r['test_perf']:.4f} | "
            f"{r['test_jaxrank']:.4f} | {r['perf_iterations']:.0f} / {r['jaxrank_n_iter']}"
            f"{'' if r['jaxrank_converged'] else ' (not converged)'} | "
            f"{r['perf_wall_s']:.2f} | {r['jaxrank_first_s']:.2f} | {r['jaxrank_warm_s']:.2f} |")
    worst = max(r["perf_classify_max_abs_diff"] for r in rows)
    bmax = max((abs(r["b_perf"]) for r in rows if r["loss"] == "ROCArea"), default=None)
    lines += ["", f"Rows with \\|rel\\| > {RTOL_FLAG:g}: "
              + (", ".join(f"{r['loss']} c={r['c']:g}" for r in flagged) or "none") + ".",
              f"Checks: SVM-perf's test scores `X w - b` from the model file match "
              f"`svm_perf_classify`'s predictions to {worst:.1e} (max abs)."
              + ("" if bmax is None else
                 f" ROCArea: SVM-perf's `|threshold|` <= {abs(bmax):.1e} (the bias "
                 "feature gets no weight)."),
              ""]
    return "\n".join(lines)


def machine_header(version, make_cmd, data):
    from _machine import device_line
    from convergence import cpu_name, git_state

    simd = "unknown"
    try:
        cfg = np.show_config(mode="dicts").get("SIMD Extensions", {})
        simd = (f"baseline {','.join(cfg.get('baseline', []))}; "
                f"found {','.join(cfg.get('found', []))}")
    except Exception as e:  # noqa: BLE001 (older NumPy)
        simd = f"unknown ({type(e).__name__})"
    head, dirty = git_state()
    return [(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); load average at start "
            f"{os.getloadavg()[0]:.1f}"),
            f"numpy {np.__version__} SIMD: {simd}",
            device_line(),
            "jaxrank at " + head + (f" + uncommitted changes in {', '.join(dirty)}"
                                    if dirty else ""),
            f"SVM-perf: {version} (built with `{make_cmd}`)",
            f"Data: {data}"]


# ---------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Conversions, columns: see the module docstring.")
    ap.add_argument("--svm-perf-tar", metavar="PATH", default=None,
                    help="SVM-perf's svm_perf.tar.gz (or its unpacked folder); required. Not "
                         "shipped: SVM-perf's licence is non-commercial.")
    ap.add_argument("--data", default=str(DEFAULT_DATA),
                    help="folder with reuters.trn.bz2 / reuters.tst.bz2 (default %(default)s)")
    ap.add_argument("--losses", default=",".join(LOSSES),
                    help="comma-separated subset of %(default)s")
    ap.add_argument("--cs", default=None,
                    help=f"SVM-perf -c values (default {DEFAULT_CS}; --quick {QUICK_CS})")
    ap.add_argument("--eps", type=float, default=0.001, help="SVM-perf -e (default %(default)s)")
    ap.add_argument("--tol", type=float, default=None,
                    help="jaxrank tol (default: the estimators' default, 1e-4)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs per solver and row (median; default 3, --quick 1)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds per svm_perf_learn run (default %(default)s)")
    ap.add_argument("--out", default=None,
                    help=f"write OUT.md / OUT.json (default {DEFAULT_OUT.relative_to(ROOT)}; "
                         "--quick: not written)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: -c {QUICK_CS} only, 1 repeat, nothing written")
    args = ap.parse_args(argv)
    if args.svm_perf_tar is None:
        ap.error("--svm-perf-tar PATH is required: the svm_perf.tar.gz of SVM-perf's authors "
                 "(or the unpacked folder). SVM-perf is not part of jaxrank (non-commercial "
                 "licence); it is built at bench time in a temporary directory.")
    if not Path(args.svm_perf_tar).exists():
        ap.error(f"--svm-perf-tar {args.svm_perf_tar}: no such file or directory")
    losses = [x.strip() for x in args.losses.split(",") if x.strip()]
    bad = [x for x in losses if x not in LOSSES]
    if bad:
        ap.error(f"unknown loss(es) {bad}; choose from {list(LOSSES)}")
    cs = [float(x) for x in (args.cs or (QUICK_CS if args.quick else DEFAULT_CS)).split(",")]
    args.repeats = args.repeats or (1 if args.quick else 3)
    out = args.out or (None if args.quick else str(DEFAULT_OUT))

    t_all = time.perf_counter()
    from sklearn.datasets import dump_svmlight_file, load_svmlight_file

    data = Path(args.data)
    Xtr, ytr = load_svmlight_file(str(data / "reuters.trn.bz2"))
    Xte, yte = load_svmlight_file(str(data / "reuters.tst.bz2"), n_features=Xtr.shape[1])
    Xtr, Xte = Xtr.astype(np.float32), Xte.astype(np.float32)
    d = Xtr.shape[1]
    pos_tr, pos_te = ytr > 0, yte > 0
    work = Path(tempfile.mkdtemp(prefix="jaxrank_svmperf_"))
    try:
        t0 = time.perf_counter()
        build, make_cmd = build_svm_perf(args.svm_perf_tar, work)
        version = svm_perf_version(build)
        log(f"built SVM-perf in {work} ({time.perf_counter() - t0:.0f} s; deleted at the end)")
        train, test = work / "train.dat", work / "test.dat"
        # float32 values written exactly (sklearn prints the float64 repr): both read the same X.
        dump_svmlight_file(Xtr.astype(np.float64), ytr, str(train), zero_based=False)
        dump_svmlight_file(Xte.astype(np.float64), yte, str(test), zero_based=False)
        header = machine_header(
            version, make_cmd,
            f"Reuters money-fx (`{os.path.relpath(data, ROOT)}`, LASVM tf-idf, BSD-3): train "
            f"{Xtr.shape[0]} x {d} ({int(pos_tr.sum())} positive), test {Xte.shape[0]} "
            f"({int(pos_te.sum())} positive); SVM-perf's own example1 Reuters set is not "
            "available here")
        for h in header:
            log(h)
        ctx = {"work": work, "build": build, "train": train, "test": test, "d": d,
               "Xtr": Xtr, "ytr": ytr, "Xtr64": Xtr.astype(np.float64).tocsr(),
               "Xte64": Xte.astype(np.float64).tocsr(), "pos_tr": pos_tr, "pos_te": pos_te}
        rows = []
        for name in losses:
            for c in cs:
                r = run_row(name, c, ctx, args)
                rows.append(r)
                log(row_line(r))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - t_all
    text = report(header, rows, args, total)
    log("\n" + text)
    if out:
        md, js = Path(out).with_suffix(".md"), Path(out).with_suffix(".json")
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(text)
        js.write_text(json.dumps({"header": header, "eps": args.eps, "tol": args.tol,
                                  "repeats": args.repeats, "total_s": total, "rows": rows},
                                 indent=1))
        log(f"wrote {md} and {js}")
    log(f"total {total:.0f} s")


if __name__ == "__main__":
    main()
