"""NDCG loss-augmented inference against AP's and the ROC-area oracle and np.sort.

Times the public jitted oracles on one list of ``P`` positives and ``N``
negatives (untrained scores: both classes N(0, 1)), compile excluded,
median of ``--repeats`` calls, for N = 10^2 .. 10^6 and P = N / 10 and
N / 100, next to NumPy's sort of the same scores (the CPU's floor). Prints
the machine (CPU, NumPy's SIMD level) first and a Markdown table.

    python bench/ndcg.py                 # about 2 minutes on 2 cores
    python bench/ndcg.py --max-n 100000  # smaller
"""

import argparse
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _machine import cpu_name, device_line, simd_level  # noqa: E402


def median_time(fn, repeats):
    import jax

    jax.block_until_ready(fn())  # compile / warm up
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-n", type=int, default=10**6)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    import jax.numpy as jnp

    from jaxrank.inference import ap_oracle, auc_oracle, ndcg_oracle

    print(device_line())
    print(f"{cpu_name()}; {simd_level()}")
    print()
    print("| N | P | np.sort ms | ap_oracle (select) ms | auc_oracle ms | ndcg_oracle ms "
          "| ndcg / np.sort | ndcg / ap |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    N = 100
    while N <= args.max_n:
        for P in (N // 10, N // 100):
            if P < 1:
                continue
            n = P + N
            s_np = rng.normal(size=n).astype(np.float32)
            s = jnp.asarray(s_np)
            pos = jnp.asarray(np.arange(n) < P)
            where = jnp.ones(n, bool)
            kp = 1 << (P - 1).bit_length()
            t_sort = median_time(lambda: np.sort(s_np), args.repeats)
            t_ap = median_time(lambda: ap_oracle(s, pos, where, kp=kp), args.repeats)
            t_auc = median_time(lambda: auc_oracle(s, pos, where), args.repeats)
            t_ndcg = median_time(lambda: ndcg_oracle(s, pos, where, kp=kp), args.repeats)
            print(f"| {N} | {P} | {t_sort * 1e3:.3g} | {t_ap * 1e3:.3g} | {t_auc * 1e3:.3g} "
                  f"| {t_ndcg * 1e3:.3g} | {t_ndcg / t_sort:.1f}x | {t_ndcg / t_ap:.1f}x |",
                  flush=True)
        N *= 10


if __name__ == "__main__":
    main()
