"""Scale benchmark: ``APSVM(C=10).fit`` on ``n x 100`` dense float32, n up to 10^7.

For each ``n`` (default 10^5, 10^6, 10^7) and each method, one fresh Python
process (so that the peak RSS is that of one ``n`` and one method) generates
the data, fits, scores a test set and reports:

* fit time: first call (XLA compilation included) and warm (second call, same
  shapes) for jaxrank; one call for scikit-learn;
* iterations (jaxrank: calls of AP loss-augmented inference; scikit-learn:
  its ``n_iter_``), convergence;
* test AP (``sklearn.metrics.average_precision_score`` of
  ``decision_function`` on 10^5 test rows from the same generator);
* peak RSS of the process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``: data
  generation, both fits, test scoring) and its ratio to the bytes of ``X``;
* for jaxrank, the CPU time of the warm fit (user + system, all threads; on
  a loaded machine closer to the idle wall time than the wall time is) and
  where the warm fit's time goes: the public oracle
  ``jaxrank.models.APModel(kp=|P|).oracle`` is timed alone (jitted, median of
  3) at the trained scores and at ``w = 0`` (all scores tied, the first
  iteration), times the iterations: the inference estimate is the range
  ``n_iter * [t_trained, t_w=0]``; the products are ``n_iter`` times the
  median time of ``X @ w`` plus ``X.T @ c`` (``jax.vjp``) on the
  ``jaxrank.models.design(X, in_place=True)`` that ``fit`` builds; the rest
  (input checks, the solver's cached-plane steps, training scores) is the
  warm fit minus both.

Methods: ``apsvm`` (``jaxrank.APSVM(C=10)``), ``linearsvc``
(``sklearn.svm.LinearSVC(dual=False)``, default ``C=1``) and ``sgd``
(``sklearn.linear_model.SGDClassifier(loss="hinge")``, default ``alpha=1e-4``,
``random_state=0``). LinearSVC is skipped where its memory would exceed the
machine (liblinear copies ``X`` to float64 and then to 16-byte
``feature_node`` entries: about 24 bytes per entry, 24 GB at 10^7 x 100), and
any run that exceeds ``--timeout`` is reported as such.

Data (synthetic, stated so that it can be regenerated): ``X`` has i.i.d.
N(0, 1) float32 entries; a fixed ``w*`` ~ N(0, I / d) (seed 12345); score ``s
= X w* + 0.5 e`` with ``e`` ~ N(0, 1); label ``y = 1`` iff ``s > t`` with
``t = Phi^-1(0.95) sqrt(||w*||^2 + 0.25)``, i.e. about 5 % positives.
Training rows use seed ``n``, the 10^5 test rows seed 1. ``X`` is generated
in chunks straight into its final float32 array: with ``--input numpy`` a
plain ``np.empty`` array (NumPy aligns its buffers to 16 bytes, so jaxrank
uses it in place through ``jaxrank.models.design``'s shifted-row layout),
with ``--input npy`` a ``.npy`` file re-opened with ``np.load(mmap_mode="r")``
(64-byte aligned: used in place as a plain array).

``--kernels`` times the products that the solver calls every iteration
(``X @ w`` and its transpose ``X.T @ c`` via ``jax.vjp``), in one process,
interleaved, median of ``--repeats``: dense ``jnp`` arrays with XLA's own
transposed dot (the former path), a ``jaxrank.models.Design`` of an aligned
array and of a plain NumPy array (shifted rows); sparse BCOO and BCSR
(``jax.experimental.sparse``, their own kernels) and jaxrank's ``Design``
(segment sums over the BCOO entries), on Reuters money-fx and w8a
(``../shared/data``) and a synthetic 10^6 x 10^4 matrix with 20 entries per
row; scipy's CSR products for reference.

``--cli`` times the command line (issue 12, item 4): ``jaxrank train`` on
the first 2,000 documents of Reuters money-fx (``../shared/data``; SVM-perf's
own 2,000-document Reuters example is not among the shared data sets, this
is the same size from the same corpus) with a fresh cache directory
(``JAXRANK_CACHE_DIR``): the first run, ``--repeats`` cached runs, ``--no-cache``
runs, and the imports alone; wall and CPU time of each child process, and
the fit time the command prints. Python's bytecode of every imported module
is written once before the timed runs (an untimed ``import jaxrank.cli`` with
``PYTHONPYCACHEPREFIX`` in the temporary directory, as ``pip install``
compiles it at install time), so no run is charged for compiling sources:
this matters where ``PYTHONDONTWRITEBYTECODE`` is set, which would otherwise
make every run of a source checkout compile jaxrank's modules again (about
0.08 s on this machine).

Usage::

    python bench/scale.py                      # n = 1e5, 1e6, 1e7; writes bench/results/scale.md
    python bench/scale.py --quick              # n = 2e4, 1e5 (smoke run)
    python bench/scale.py --sizes 1e6 --methods apsvm --input npy
    python bench/scale.py --kernels            # products only
    python bench/scale.py --cli --repeats 5    # jaxrank train: first vs cached runs

The machine's load average is printed next to every run: timings taken while
other processes use the CPU are slower than on an idle machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

D = 100  # features
TEST_N = 100_000
POS_RATE = 0.05
NOISE = 0.5
CHUNK = 1 << 16  # rows per generated chunk
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "..", "shared", "data")
LINEARSVC_MAX_BYTES = 6 * 2**30  # skip LinearSVC when its ~24 bytes/entry exceed this


def _wstar(d=D):
    return (np.random.default_rng(12345).standard_normal(d) / np.sqrt(d)).astype(np.float32)


def generate(n, seed, out=None, d=D):
    """``(X [n, d] float32, y [n] int8)`` of the module docstring's generator.

    ``out``: an ``[n, d]`` float32 array to fill (e.g. a memmap); default a
    new ``np.empty`` array. Generated in chunks of rows (no float64 temporary).
    """
    from scipy.stats import norm

    w = _wstar(d)
    t = norm.ppf(1 - POS_RATE) * np.sqrt(float(w @ w) + NOISE**2)
    X = np.empty((n, d), np.float32) if out is None else out
    y = np.empty(n, np.int8)
    rng = np.random.default_rng(seed)
    for i in range(0, n, CHUNK):
        c = X[i : i + CHUNK]
        rng.standard_normal(out=c, dtype=np.float32)
        s = c @ w + NOISE * rng.standard_normal(c.shape[0], dtype=np.float32)
        y[i : i + CHUNK] = s > t
    return X, y


def _peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KB


def _load():
    return round(os.getloadavg()[0], 1)


def _cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _median_time(f, repeats=3):
    import jax

    jax.block_until_ready(f())
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f())
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


# ---------------------------------------------------------------------------
# Worker: one (method, n) per process.
# ---------------------------------------------------------------------------


def worker(method, n, input_kind, tmpdir):
    out = {"method": method, "n": n, "input": input_kind, "load_start": _load()}
    if input_kind == "npy":
        path = os.path.join(tmpdir, f"X_{n}.npy")
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, D))
        written, y = generate(n, seed=n, out=mm)
        mm.flush()
        del mm, written  # unmapped: only the read-only mapping below counts in the RSS
        X = np.load(path, mmap_mode="r")
    else:
        X, y = generate(n, seed=n)
    Xte, yte = generate(TEST_N, seed=1)
    out["x_bytes"] = int(X.nbytes)
    out["positives"] = int(y.sum())
    from sklearn.metrics import average_precision_score

    if method == "apsvm":
        import warnings

        import jax
        import jax.numpy as jnp

        import jaxrank
        from jaxrank.models import APModel, ItemProblem

        out["rss_before_fit"] = _peak_rss_bytes()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            jaxrank.APSVM(C=10).fit(X, y)
            out["fit_first_s"] = time.perf_counter() - t0
            t0, c0 = time.perf_counter(), _cpu_s()
            est = jaxrank.APSVM(C=10).fit(X, y)
            out["fit_warm_s"] = time.perf_counter() - t0
            out["fit_warm_cpu_s"] = _cpu_s() - c0
        out["warnings"] = sorted({type(w.message).__name__ for w in caught})
        out["n_iter"] = int(est.n_iter_)
        out["converged"] = bool(est.converged_)
        out["objective"] = float(est.objective_)
        out["test_ap"] = float(average_precision_score(yte, est.decision_function(Xte)))
        out["device"] = str(jax.devices()[0])
        # AP inference alone, at the trained scores and at w = 0.
        S = jnp.asarray(est.decision_function(X), jnp.float32)
        problem = ItemProblem(jnp.asarray(y > 0), jnp.ones(n, bool))
        oracle = jax.jit(lambda s, p: APModel(kp=int(y.sum())).oracle(s, p))
        out["oracle_trained_s"] = _median_time(lambda: oracle(S, problem))
        out["oracle_w0_s"] = _median_time(lambda: oracle(jnp.zeros_like(S), problem))
        del S
        # The two products of an iteration, on the design fit made of X.
        from jaxrank.models import design

        data = design(X, in_place=True)
        w = jnp.asarray(est.coef_[0])
        c = jnp.asarray(np.random.default_rng(0).standard_normal(n), jnp.float32)
        mv = jax.jit(lambda D, v: D @ v)
        rmv = jax.jit(lambda D, v, g: jax.vjp(lambda u: D @ u, v)[1](g)[0])
        out["matvec_s"] = _median_time(lambda: mv(data, w))
        out["rmatvec_s"] = _median_time(lambda: rmv(data, w, c))
        out["layout"] = type(data.X).__name__
        del data
    elif method == "linearsvc":
        from sklearn.svm import LinearSVC

        t0 = time.perf_counter()
        est = LinearSVC(dual=False).fit(X, y)
        out["fit_first_s"] = time.perf_counter() - t0
        out["n_iter"] = int(est.n_iter_)
        out["test_ap"] = float(average_precision_score(yte, est.decision_function(Xte)))
    elif method == "sgd":
        from sklearn.linear_model import SGDClassifier

        t0 = time.perf_counter()
        est = SGDClassifier(loss="hinge", random_state=0).fit(X, y)
        out["fit_first_s"] = time.perf_counter() - t0
        out["n_iter"] = int(est.n_iter_)
        out["test_ap"] = float(average_precision_score(yte, est.decision_function(Xte)))
    else:
        raise ValueError(f"unknown method {method!r}")
    out["peak_rss"] = _peak_rss_bytes()
    out["load_end"] = _load()
    print("RESULT " + json.dumps(out), flush=True)


def run_one(method, n, input_kind, timeout, tmpdir):
    if method == "linearsvc" and 24 * n * D > LINEARSVC_MAX_BYTES:
        return {"method": method, "n": n, "skipped": (
            f"not run: liblinear needs about 24 bytes per entry ({24 * n * D / 2**30:.0f} GB) "
            "for its float64 copy and feature_node list")}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, "--n", str(n),
           "--input", input_kind, "--tmpdir", tmpdir]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"method": method, "n": n, "skipped": f"stopped after the {timeout:.0f} s timeout"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["process_s"] = time.perf_counter() - t0
            return res
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"method": method, "n": n, "skipped": f"failed (exit {p.returncode}): "
            + " / ".join(tail)}


# ---------------------------------------------------------------------------
# Kernels: the two products of every iteration.
# ---------------------------------------------------------------------------


def _aligned(shape, dtype=np.float32):
    """A C-contiguous array whose buffer is 64-byte aligned (XLA CPU uses it in place)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def _product_times(cases, repeats):
    """``{name: (X @ w ms, X.T @ c ms)}``, interleaved over ``repeats`` rounds."""
    import jax

    fns = {}
    for name, (op, w, c) in cases.items():
        mv = jax.jit(lambda A, v: A @ v)
        vjp = jax.jit(lambda A, v, g: jax.vjp(lambda u: A @ u, v)[1](g)[0])
        fns[name] = (lambda mv=mv, op=op, w=w: mv(op, w),
                     lambda vjp=vjp, op=op, w=w, c=c: vjp(op, w, c))
        for f in fns[name]:
            jax.block_until_ready(f())
    times = {name: ([], []) for name in cases}
    for _ in range(repeats):
        for name, fs in fns.items():
            for k, f in enumerate(fs):
                t0 = time.perf_counter()
                jax.block_until_ready(f())
                times[name][k].append(1e3 * (time.perf_counter() - t0))
    return {name: tuple(statistics.median(t) for t in ts) for name, ts in times.items()}


def kernels(repeats):
    import jax
    import jax.numpy as jnp
    import scipy.sparse as sp
    from jax.experimental import sparse as jsparse
    from sklearn.datasets import load_svmlight_file

    from jaxrank.models import design

    rows = []
    load0 = _load()
    # Dense, 10^6 x 100 float32.
    n = 10**6
    X, _ = generate(n, seed=n, out=_aligned((n, D)))
    Xplain = np.empty((n, D), np.float32)
    Xplain[...] = X
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal(D), jnp.float32)
    c = jnp.asarray(rng.standard_normal(n), jnp.float32)
    dense = {
        "jnp array (XLA dot and its transpose)": (jnp.asarray(X), w, c),
        "Design, 64-byte aligned array (used in place)": (design(X, in_place=True), w, c),
        "Design, plain np.empty array (shifted rows, in place)":
            (design(Xplain, in_place=True), w, c),
    }
    for name, (a, b) in _product_times(dense, repeats).items():
        rows.append(("dense 10^6 x 100", name, a, b))
    del dense, X, Xplain
    # Sparse.
    mats = []
    p = os.path.join(DATA, "reuters_moneyfx", "reuters.trn.bz2")
    if os.path.exists(p):
        mats.append(("Reuters money-fx train", load_svmlight_file(p)[0]))
    p = os.path.join(DATA, "w8a", "w8a")
    if os.path.exists(p):
        mats.append(("w8a", load_svmlight_file(p)[0]))
    ns, ds, k = 10**6, 10**4, 20
    cols = np.sort(rng.integers(0, ds, size=(ns, k)), axis=1)
    vals = rng.standard_normal((ns, k)).astype(np.float32)
    mats.append(("synthetic 10^6 x 10^4, 20 per row",
                 sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, ns * k + 1, k)),
                               shape=(ns, ds))))
    for label, M in mats:
        M = sp.csr_matrix(M, dtype=np.float32)
        M.sum_duplicates()
        M.sort_indices()
        n, d = M.shape
        w = jnp.asarray(rng.standard_normal(d), jnp.float32)
        c = jnp.asarray(rng.standard_normal(n), jnp.float32)
        cases = {
            "BCOO (jax.experimental.sparse kernels)": (jsparse.BCOO.from_scipy_sparse(M), w, c),
            "BCSR (jax.experimental.sparse kernels)": (jsparse.BCSR.from_scipy_sparse(M), w, c),
            "Design (segment sums over BCOO entries)": (design(M), w, c),
        }
        for name, (a, b) in _product_times(cases, repeats).items():
            rows.append((f"{label} ({n} x {d}, {M.nnz} entries)", name, a, b))
        wn, cn = np.asarray(w), np.asarray(c)
        ta, tb = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            M @ wn
            ta.append(1e3 * (time.perf_counter() - t0))
            t0 = time.perf_counter()
            M.T @ cn
            tb.append(1e3 * (time.perf_counter() - t0))
        rows.append((f"{label} ({n} x {d}, {M.nnz} entries)", "scipy CSR (host, reference)",
                     statistics.median(ta), statistics.median(tb)))
    return rows, (load0, _load()), str(jax.devices()[0])


# ---------------------------------------------------------------------------
# CLI start-up: `jaxrank train` twice and more, with and without the caches.
# ---------------------------------------------------------------------------


def _child(cmd, env):
    """``(wall s, CPU s, stdout)`` of one child process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr[-2000:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, p.stdout


def cli_startup(repeats):
    """Rows ``(what, [(wall, cpu, fit s)])`` of ``jaxrank train`` on 2,000 Reuters documents."""
    import bz2
    import re

    src = os.path.join(DATA, "reuters_moneyfx", "reuters.trn.bz2")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "reuters2000.svm")
        with bz2.open(src, "rt") as fin, open(data, "w") as fout:
            for _, line in zip(range(2000), fin):
                fout.write(line)
        env = dict(os.environ, JAXRANK_CACHE_DIR=os.path.join(tmp, "cache"),
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        _child([sys.executable, "-c", "import jaxrank.cli, jaxrank._src.estimators.ap, jaxrank._src.data, "
                "jaxrank._src.io, sklearn.datasets"], env)
        train = [sys.executable, "-m", "jaxrank", "train", "--force", data,
                 os.path.join(tmp, "model.npz")]

        def runs(label, cmd, k):
            out = []
            for _ in range(k):
                wall, cpu, text = _child(cmd, env)
                m = re.search(r"in ([0-9.]+) s:", text)
                out.append((wall, cpu, float(m.group(1)) if m else None))
            rows.append((label, out))

        runs("`jaxrank train` 1st run (empty cache)", train, 1)
        runs("`jaxrank train` later runs (cached)", train, repeats)
        progs = os.listdir(os.path.join(tmp, "cache", "programs"))
        jaxc = os.listdir(os.path.join(tmp, "cache", "jax"))
        runs("`jaxrank --no-cache train`", train[:3] + ["--no-cache"] + train[3:], 2)
        runs("`python -c 'import jaxrank.cli; jaxrank.APSVM'` (imports of a train run)",
             [sys.executable, "-c", "import jaxrank.cli; jaxrank.APSVM"], repeats)
        runs("`python -c 'import jax, sklearn.base, scipy.sparse'` (dependencies only)",
             [sys.executable, "-c", "import jax, jax.numpy, sklearn.base, "
              "sklearn.utils.validation, scipy.sparse"], repeats)
    return rows, len(progs), len(jaxc)


def cli_table(rows):
    lines = ["| command | runs | wall (s), median [min-max] | CPU user+sys (s), median | "
             "fit as printed (s), median |", "|---|---:|---|---:|---:|"]
    for label, out in rows:
        walls = [o[0] for o in out]
        cpus = [o[1] for o in out]
        fits = [o[2] for o in out if o[2] is not None]
        lines.append(
            f"| {label} | {len(out)} | {statistics.median(walls):.2f} [{min(walls):.2f}-"
            f"{max(walls):.2f}] | {statistics.median(cpus):.2f} | "
            f"{statistics.median(fits):.2f} |" if fits else
            f"| {label} | {len(out)} | {statistics.median(walls):.2f} [{min(walls):.2f}-"
            f"{max(walls):.2f}] | {statistics.median(cpus):.2f} | |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------


def _gb(b):
    return f"{b / 2**30:.2f}"


def _fmt(v, spec=".1f"):
    return "" if v is None else format(v, spec)


def scale_table(results):
    lines = [
        "| n | method | fit first (s) | fit warm (s) | warm CPU (s) | iterations | converged | "
        "test AP | peak RSS (GB) | RSS / X | X (GB) | inference est. (s) | products (s) | "
        "rest (s) | load avg |",
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        n = f"{r['n']:.0e}".replace("e+0", "e")
        if "skipped" in r:
            lines.append(f"| {n} | {r['method']} | {r['skipped']} |" + " |" * 12)
            continue
        inf = prod = rest = ""
        if "oracle_trained_s" in r:
            k = r["n_iter"]
            lo, hi = sorted((r["oracle_trained_s"] * k, r["oracle_w0_s"] * k))
            inf = f"{lo:.1f}-{hi:.1f}"
            p = k * (r["matvec_s"] + r["rmatvec_s"])
            prod = f"{p:.1f}"
            rest = f"{max(r['fit_warm_s'] - hi - p, 0):.1f}-{max(r['fit_warm_s'] - lo - p, 0):.1f}"
        lines.append(
            f"| {n} | {r['method']} | {r['fit_first_s']:.1f} | "
            f"{_fmt(r.get('fit_warm_s'))} | {_fmt(r.get('fit_warm_cpu_s'))} | {r['n_iter']} | "
            f"{'' if 'converged' not in r else ('yes' if r['converged'] else 'no')} | "
            f"{r['test_ap']:.4f} | {_gb(r['peak_rss'])} | {r['peak_rss'] / r['x_bytes']:.2f} | "
            f"{_gb(r['x_bytes'])} | {inf} | {prod} | {rest} | "
            f"{r['load_start']} / {r['load_end']} |")
    return "\n".join(lines)


def kernel_table(rows):
    lines = ["| data | product implementation | X @ w (ms) | X.T @ c via vjp (ms) |",
             "|---|---|---:|---:|"]
    for data, name, a, b in rows:
        lines.append(f"| {data} | {name} | {a:.2f} | {b:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=None, help="comma-separated n (default 1e5,1e6,1e7)")
    ap.add_argument("--methods", default="apsvm,linearsvc,sgd")
    ap.add_argument("--input", choices=["numpy", "npy"], default="numpy")
    ap.add_argument("--quick", action="store_true", help="n = 2e4, 1e5 (smoke run)")
    ap.add_argument("--kernels", action="store_true", help="time the products only")
    ap.add_argument("--cli", action="store_true",
                    help="time `jaxrank train` on 2,000 Reuters documents, first and cached runs")
    ap.add_argument("--repeats", type=int, default=7,
                    help="--kernels: rounds (median); --cli: cached runs")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--output", default=None, help="append the tables to this .md file")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tmpdir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.n, args.input, args.tmpdir)
        return 0
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    head = (f"Run {stamp} on {platform.machine()} with {os.cpu_count()} CPU cores, "
            f"`python bench/scale.py {' '.join(sys.argv[1:] if argv is None else argv)}`")
    out = []
    if args.kernels:
        rows, (l0, l1), dev = kernels(args.repeats)
        out.append(f"{head}; device {dev}; load average {l0} / {l1} (start / end).\n\n"
                   + kernel_table(rows))
    elif args.cli:
        l0 = _load()
        rows, n_prog, n_jax = cli_startup(args.repeats)
        out.append(f"{head}; load average {l0} / {_load()} (start / end); after the 1st run "
                   f"the cache held {n_prog} stored fit program(s) and {n_jax} JAX cache "
                   "entries.\n\n" + cli_table(rows))
    else:
        sizes = [2 * 10**4, 10**5] if args.quick else [10**5, 10**6, 10**7]
        if args.sizes:
            sizes = [int(float(s)) for s in args.sizes.split(",")]
        methods = args.methods.split(",")
        results = []
        with tempfile.TemporaryDirectory(dir=os.environ.get("JAXRANK_SCALE_TMP")) as tmp:
            for n in sizes:
                for m in methods:
                    r = run_one(m, n, args.input, args.timeout, tmp)
                    results.append(r)
                    print(json.dumps(r), flush=True)
        dev = next((r["device"] for r in results if "device" in r), "?")
        out.append(f"{head}; jaxrank device {dev}; input `--input {args.input}`.\n\n"
                   + scale_table(results))
    text = "\n\n".join(out)
    print(text)
    if args.output:
        with open(args.output, "a") as fh:
            fh.write(text + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
