"""Peak memory and time of the exact AP / NDCG hinges against rax's pairwise hinge.

For list lengths n = 10^4, 10^5, 10^6, 10^7 (the pairwise loss also at
2*10^4 and 3*10^4, to show where it stops fitting; one list, about 10 % positives, scores
N(0, 1) with the positives shifted by +0.5, float32) it times the jitted
``jax.value_and_grad`` of

* ``jaxrank.losses.ap_hinge_loss(scores, labels, max_positives=P)`` (exact AP-SVM hinge),
* ``jaxrank.losses.ndcg_hinge_loss(scores, labels, max_positives=P)`` (exact NDCG hinge;
  ``P`` the list's number of positives, the static bound of the tables under ``jit``),
* ``rax.pairwise_hinge_loss(scores, labels)`` (every ordered pair: n^2 terms),

compile excluded (``lower().compile()`` ahead of time, then one untimed
call), median of the timed calls (20 / 10 / 5 / 3 at n <= 10^4 / 10^5 /
10^6 / 10^7, or ``--repeats``), and measures the peak memory.

Memory method. Every (loss, n) runs in a fresh child process
(``python bench/memory.py --one LOSS N``) that first sets its own ``RLIMIT_AS``
(``--mem-limit-gib``, default 8 GiB of address space, before importing JAX),
under a wall-clock timeout (``--timeout``, the parent kills it). The
child reads its peak resident set (``VmHWM`` of ``/proc/self/status``, the
same number as ``getrusage(RUSAGE_SELF).ru_maxrss``) at the end. A baseline
child (``--one base N``) only imports JAX, jaxrank and rax and builds the same
inputs (scores, labels, on the device); the table reports

* ``peak - base``: the loss child's peak RSS minus the baseline child's peak
  RSS (everything the loss adds: XLA compilation + the calls),
* ``calls peak - before``: inside the loss child, the peak RSS is reset
  (``echo 5 > /proc/self/clear_refs``) after the compilation; the peak over
  the first and the timed calls minus the RSS at the reset: the working
  memory of the calls alone, without the compiler's.

Pairwise cases whose n^2 float32 pairs exceed ``--pair-limit-gib`` (4 GiB,
n above about 33,000) are not run ("not run: n^2 pairs = X GiB"); an
out-of-memory failure under the address-space limit is reported as such.

    python bench/memory.py                         # 6-20 min on 2 cores (load)
    python bench/memory.py --max-n 100000          # quick
    python bench/memory.py --one ap 1000000        # one child, prints JSON
"""

import argparse
import functools
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import cpu_name, simd_level  # noqa: E402

LOSSES = ("ap", "ndcg", "pairwise")
NAMES = {"ap": "ap_hinge_loss", "ndcg": "ndcg_hinge_loss",
         "pairwise": "rax.pairwise_hinge_loss"}


def repeats_for(loss, n):
    """Timed calls per case: fewer at the large n (ndcg ~0.2 s per call at 1e6)."""
    if n <= 10**4:
        return 20
    if n <= 10**5:
        return 10
    if n <= 10**6:
        return 5
    return 3


def _status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def _reset_peak():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def make_inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.1).astype(np.float32)
    scores = (rng.standard_normal(n) + 0.5 * labels).astype(np.float32)
    return scores, labels


def child(loss, n, repeats):
    """Run one case in this process; print one JSON line."""
    import jax
    import jax.numpy as jnp

    import jaxrank.losses  # noqa: F401  (same imports in every child)
    import rax

    scores_np, labels_np = make_inputs(n)
    scores = jax.device_put(jnp.asarray(scores_np))
    labels = jax.device_put(jnp.asarray(labels_np))
    jax.block_until_ready((scores, labels))
    del scores_np, labels_np
    out = {"loss": loss, "n": n, "positives": int(np.asarray(labels).sum())}
    if loss == "base":
        dev = jax.devices()[0]
        out["jax"] = jax.__version__
        out["device"] = f"{dev.platform} ({dev.device_kind}) x {len(jax.devices())}"
        out["rss_kb"] = _status_kb("VmRSS")
        out["peak_kb"] = _status_kb("VmHWM")
        print("RESULT " + json.dumps(out), flush=True)
        return

    # The exact hinges get the list's number of positives as their static
    # bound (max_positives: under jit the labels are traced, and without a
    # bound inference sizes its tables for n positives).
    if loss == "ap":
        f = functools.partial(jaxrank.losses.ap_hinge_loss, max_positives=out["positives"])
    elif loss == "ndcg":
        f = functools.partial(jaxrank.losses.ndcg_hinge_loss, max_positives=out["positives"])
    else:
        f = rax.pairwise_hinge_loss
    vg = jax.jit(jax.value_and_grad(f))
    try:
        t0 = time.perf_counter()
        vg = vg.lower(scores, labels).compile()  # ahead of time: compile alone
        out["compile_s"] = time.perf_counter() - t0
        out["peak_after_compile_kb"] = _status_kb("VmHWM")
        out["reset_ok"] = _reset_peak()
        out["rss_before_calls_kb"] = _status_kb("VmRSS")
        t0 = time.perf_counter()
        v, g = jax.block_until_ready(vg(scores, labels))
        out["first_call_s"] = time.perf_counter() - t0
        out["value"] = float(v)
        out["grad_abs_sum"] = float(jnp.abs(g).sum())
        del v, g
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(vg(scores, labels))
            times.append(time.perf_counter() - t0)
        out["calls"] = repeats
        out["median_s"] = float(np.median(times))
        out["min_s"] = float(np.min(times))
        out["calls_peak_kb"] = _status_kb("VmHWM")
    except Exception as e:  # XLA's out-of-memory is a JaxRuntimeError
        msg = f"{type(e).__name__}: {e}"
        out["error"] = msg[:400]
        out["oom"] = any(k in msg for k in ("Out of memory", "RESOURCE_EXHAUSTED",
                                            "MemoryError", "bad_alloc"))
    # Peak of the whole process. After the reset this is the peak since then, so
    # the larger of the two readings is the process's peak.
    out["peak_kb"] = max(_status_kb("VmHWM"), out.get("peak_after_compile_kb", 0))
    out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("RESULT " + json.dumps(out), flush=True)


def run_child(loss, n, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", loss, str(n),
           "--repeats", str(args.repeats or repeats_for(loss, n)),
           "--mem-limit-gib", str(args.mem_limit_gib)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"loss": loss, "n": n, "error": f"timeout after {args.timeout} s"}
    wall = time.perf_counter() - t0
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["wall_s"] = wall
            return r
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    msg = " / ".join(tail)[-400:]
    oom = p.returncode in (-9, 137) or any(
        k in msg for k in ("Out of memory", "MemoryError", "bad_alloc", "RESOURCE_EXHAUSTED"))
    return {"loss": loss, "n": n, "error": f"exit {p.returncode}: {msg}", "oom": oom,
            "wall_s": wall}


def _mib(kb):
    return f"{kb / 1024:.0f}"


def fmt_n(n):
    e = len(str(n)) - 1
    m = n // 10**e
    return f"10^{e}" if m == 1 and n == 10**e else f"{m}*10^{e}"


def fmt_time(s):
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", nargs=2, metavar=("LOSS", "N"),
                    help="child mode: run one case (LOSS in ap, ndcg, pairwise, base)")
    ap.add_argument("--repeats", type=int, default=0,
                    help="timed calls per case (default: 20 / 10 / 5 / 3 by n)")
    ap.add_argument("--max-n", type=int, default=10**7)
    ap.add_argument("--ns", default="",
                    help="comma list of n (default 1e4, 2e4 + 3e4 (pairwise only), 1e5, 1e6, 1e7)")
    ap.add_argument("--losses", default=",".join(LOSSES))
    ap.add_argument("--mem-limit-gib", type=float, default=8.0,
                    help="RLIMIT_AS of every child (GiB of address space)")
    ap.add_argument("--pair-limit-gib", type=float, default=4.0,
                    help="do not run pairwise cases whose n^2 float32 exceed this")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child")
    args = ap.parse_args(argv)

    if args.one:
        loss, n = args.one[0], int(float(args.one[1]))
        limit = int(args.mem_limit_gib * (1 << 30))  # before JAX is imported
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        child(loss, n, args.repeats or repeats_for(loss, n))
        return

    from importlib.metadata import version

    losses = args.losses.split(",")
    ns = ([int(float(x)) for x in args.ns.split(",")] if args.ns
          else [10**4, 2 * 10**4, 3 * 10**4, 10**5, 10**6, 10**7])
    ns = [n for n in ns if n <= args.max_n]
    # The parent does not import JAX (it only starts children): the device line
    # comes from the first baseline child.
    base = {ns[0]: run_child("base", ns[0], args)}
    b0 = base[ns[0]]
    print("    python " + " ".join(["bench/memory.py"] + (argv or sys.argv[1:])))
    print()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; jax {version('jax')} "
          f"on {b0.get('device', '?')}; {platform.machine()}, os.cpu_count() = "
          f"{os.cpu_count()}")
    print(f"{cpu_name()}; {simd_level()}")
    print(f"Every case in a fresh child under RLIMIT_AS = {args.mem_limit_gib:g} GiB, "
          f"timeout {args.timeout:g} s; pairwise not run above {args.pair_limit_gib:g} GiB "
          "of n^2 float32 pairs.")
    print("Other jobs were running on this machine (2 cores shared): timings are noisy.")
    print(flush=True)

    rows = []
    for n in ns:
        b = base[n] if n in base else run_child("base", n, args)
        base[n] = b
        print(f"# base n={n}: {json.dumps(b)}", file=sys.stderr, flush=True)
        for loss in losses:
            if loss != "pairwise" and n in (2 * 10**4, 3 * 10**4) and not args.ns:
                continue
            pair_gib = n * n * 4 / (1 << 30)
            if loss == "pairwise" and pair_gib > args.pair_limit_gib:
                rows.append((loss, n, None, f"not run: n^2 pairs = {pair_gib:.3g} GiB"))
                print(f"# {loss} n={n}: not run ({pair_gib:.3g} GiB)", file=sys.stderr)
                continue
            r = run_child(loss, n, args)
            print(f"# {loss} n={n}: {json.dumps(r)}", file=sys.stderr, flush=True)
            rows.append((loss, n, r, None))

    print("| loss | n | positives | peak - base (MiB) | calls peak - before (MiB) "
          "| median time / call | calls | first call | compile | base peak (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for loss, n, r, note in rows:
        b = base[n]
        bpk = b.get("peak_kb")
        bcol = _mib(bpk) if bpk else "?"
        if note is not None:
            print(f"| {NAMES[loss]} | {fmt_n(n)} | | {note} | | | | | | {bcol} |")
            continue
        if "error" in r:
            what = "out of memory" if r.get("oom") else "failed"
            if "first_call_s" in r and bpk:  # failed in a later call
                what += (f" in a timed call; the first call ran ({fmt_time(r['first_call_s'])}, "
                         f"peak - base {_mib(r['peak_kb'] - bpk)} MiB)")
            print(f"| {NAMES[loss]} | {fmt_n(n)} | {r.get('positives', '')} "
                  f"| **{what}** ({r['error'][:160]}) | | | | | | {bcol} |")
            continue
        d_all = _mib(r["peak_kb"] - bpk) if bpk else "?"
        d_calls = (_mib(r["calls_peak_kb"] - r["rss_before_calls_kb"])
                   if r.get("reset_ok") else "n/a")
        print(f"| {NAMES[loss]} | {fmt_n(n)} | {r['positives']} | {d_all} | {d_calls} "
              f"| {fmt_time(r['median_s'])} | {r['calls']} | {fmt_time(r['first_call_s'])} "
              f"| {fmt_time(r['compile_s'])} | {bcol} |", flush=True)


if __name__ == "__main__":
    main()
