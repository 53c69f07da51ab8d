"""Compile time: every estimator's first fit, with and without the persistent cache.

For each registered estimator that fits ``fit(X, y)`` without a side input,
on breast cancer (569 x 30, standardised), three fresh Python processes:

1. ``JAXRANK_NO_CACHE=1``: the first fit (compiles everything) and a second
   fit of a new instance in the same process (compiled programs in memory);
2. and 3. with an empty cache folder (``$JAXRANK_CACHE_DIR``): the first
   process fills the cache, the second loads it: its first fit is what a
   new notebook kernel or script pays once the cache is warm.

"compile" is first fit minus second fit of the same process. Then the
oracles' first call (``jax.jit`` of :func:`jaxrank.inference.ap_oracle`,
``ndcg_oracle``, ``auc_oracle`` at n = 10^6) against their later calls.

    python bench/compile.py                       # about 3-5 minutes on 2 cores
    python bench/compile.py --models apsvm,svm    # a subset
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import device_line  # noqa: E402

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import jaxrank
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler
X, y = load_breast_cancer(return_X_y=True)
X = StandardScaler().fit_transform(X)
cls = jaxrank.ESTIMATORS[sys.argv[1]]  # imports the estimator's modules (and JAX)
t1 = time.perf_counter()
cls().fit(X, y)
t2 = time.perf_counter()
cls().fit(X, y)
t3 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "first": t2 - t1, "second": t3 - t2}))
"""


def run_child(name, env):
    p = subprocess.run([sys.executable, "-c", CHILD, name], env=env, capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def plain_estimators():
    import jaxrank

    out = []
    for name, cls in jaxrank.ESTIMATORS.items():
        side = getattr(cls, "side_input", None)
        if side is None or not side.required:
            out.append(name)
    return out


def oracle_rows(n):
    import jax
    import jax.numpy as jnp

    from jaxrank.inference import ap_oracle, auc_oracle, ndcg_oracle

    rng = np.random.default_rng(0)
    s = jnp.asarray(rng.normal(size=n).astype(np.float32))
    P = n // 100
    pos = jnp.asarray(np.arange(n) < P)
    where = jnp.ones(n, bool)
    kp = 1 << (P - 1).bit_length()
    rows = []
    for name, fn in (("ap_oracle", lambda: ap_oracle(s, pos, where, kp=kp)),
                     ("ndcg_oracle", lambda: ndcg_oracle(s, pos, where, kp=kp)),
                     ("auc_oracle", lambda: auc_oracle(s, pos, where))):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        first = time.perf_counter() - t0
        later = []
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            later.append(time.perf_counter() - t0)
        rows.append((name, first, float(np.median(later))))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated registry names")
    ap.add_argument("--oracle-n", type=int, default=10**6)
    args = ap.parse_args(argv)
    names = args.models.split(",") if args.models else plain_estimators()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("JAXRANK_")}
    print(device_line())
    print()
    print("| estimator | first fit s (no cache) | second fit s | compile s | first fit s, "
          "cache warm | compile s, cache warm |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        cold, err = run_child(name, {**base_env, "JAXRANK_NO_CACHE": "1"})
        if cold is None:
            print(f"| {name} | failed: {err} | | | | |", flush=True)
            continue
        with tempfile.TemporaryDirectory() as d:
            env = {**base_env, "JAXRANK_CACHE_DIR": os.path.join(d, "cache")}
            run_child(name, env)  # fills the cache
            warm, err = run_child(name, env)
        if warm is None:
            print(f"| {name} | {cold['first']:.2f} | {cold['second']:.3f} | "
                  f"{cold['first'] - cold['second']:.2f} | failed: {err} | |", flush=True)
            continue
        print(f"| {name} | {cold['first']:.2f} | {cold['second']:.3f} | "
              f"{cold['first'] - cold['second']:.2f} | {warm['first']:.2f} | "
              f"{warm['first'] - warm['second']:.2f} |", flush=True)
    print()
    print(f"Oracles at n = {args.oracle_n} (1 % positives), this process, no persistent cache:")
    print()
    print("| oracle | first call s | later calls, median s | compile s |")
    print("|---|---:|---:|---:|")
    for name, first, later in oracle_rows(args.oracle_n):
        print(f"| {name} | {first:.2f} | {later:.4f} | {first - later:.2f} |")


if __name__ == "__main__":
    os.environ["JAXRANK_NO_CACHE"] = "1"  # the oracle rows: compile in this process
    main()
