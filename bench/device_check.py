"""Device check: jaxrank's oracles against a sort, one APSVM fit, one MLP epoch.

One self-contained script for a machine with an accelerator (it runs
unchanged on CPU with ``--small``). It prints, in order:

1. the device: ``jax.devices()`` and its device kind;
2. for n = 10^6 and 10^7 (``--small``: 10^4 and 10^5), one list of ``n``
   float32 scores (about 10 % positives; scores N(0, 1), positives shifted by
   +0.5), the median time of the jitted public oracles
   ``jaxrank.inference.ap_oracle(s, pos, where, kp=kp)`` (``method="select"``),
   ``ndcg_oracle(s, pos, where, kp=kp)`` and ``auc_oracle(s, pos, where)``
   (``kp`` = the next power of two >= the number of positives), each divided
   by the median time of ``jax.lax.sort`` of uint32 keys of the same scores
   (the float32 bits made order preserving: ``b ^ 0xFFFFFFFF`` for negative
   floats, ``b | 0x80000000`` otherwise; the keys are built once, outside the
   timed call, so the reference is the sort alone). Compile excluded; median
   of up to ``--repeats`` calls, fewer when the calls of one measurement pass
   ``--max-seconds``;
3. one ``jaxrank.APSVM(C=10).fit`` on 10^6 x 100 synthetic dense float32
   (``--small``: 10^4 x 100; X ~ N(0, 1), labels from a noisy linear teacher,
   about 5 % positives): wall time (the first fit of the process: compilation
   included, unless jaxrank's persistent compilation cache, which the
   estimators turn on at their first fit, already holds the program; a fresh
   machine's cache is empty; ``--no-cache`` sets ``$JAXRANK_NO_CACHE``),
   iterations, ``converged_`` and ``fit_status_``;
4. one epoch of a small MLP (pure JAX: 300 -> 64 -> 1 with ReLU, i.e. 2 dense
   layers, 64 hidden; optax adam, learning rate 1e-3) on 10^5 x 300 synthetic
   data (``--small``: 10^4 x 300) in mini-batches of 1024 (the rows shuffled
   once; the last partial batch dropped, so that every step has one shape),
   each batch's loss ``jaxrank.losses.ap_hinge_loss(scores, labels)``: the
   time of the epoch (jitted step compiled before, by one step on the first
   batch that is not counted; after the fit this compile may come from the
   persistent cache) and the loss before / after.

Budget: at most 8 minutes on one GPU, compile included (on CPU the default
sizes take much longer; use ``--small`` there, about 2 minutes on 2 cores).
On a GPU machine, from the repository root with jaxrank and optax installed
(``pip install -e . optax`` and a CUDA build of jaxlib)::

    timeout 480 python bench/device_check.py            # GPU: 10^6, 10^7
    python bench/device_check.py --small                # CPU smoke run

Every section prints as it finishes (flushed), so a run killed by the
timeout still shows what it measured; ``--skip`` leaves sections out
(e.g. ``--skip fit,mlp``).
"""

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import cpu_name  # noqa: E402


def log(*a):
    print(*a, flush=True)


def timed(fn, repeats, max_seconds):
    """(median, calls) of ``fn()`` after one untimed warm-up (compile) call."""
    import jax

    jax.block_until_ready(fn())
    out = []
    t_start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - t0)
        if time.perf_counter() - t_start > max_seconds:
            break
    return float(np.median(out)), len(out)


def make_list(n, seed=0):
    rng = np.random.default_rng(seed)
    pos = rng.random(n) < 0.1
    s = (rng.standard_normal(n) + 0.5 * pos).astype(np.float32)
    return s, pos


def fmt_n(n):
    e = len(str(n)) - 1
    return f"10^{e}" if n == 10**e else str(n)


def fmt(t):
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def section_oracles(ns, args):
    import jax
    import jax.numpy as jnp
    from jax import lax

    from jaxrank.inference import ap_oracle, auc_oracle, ndcg_oracle

    log("## Oracles / lax.sort of uint32 keys of the same scores")
    log()
    log("| n | positives | kp | lax.sort uint32 | ap_oracle | ndcg_oracle | auc_oracle "
        "| ap / sort | ndcg / sort | auc / sort | calls (sort, ap, ndcg, auc) |")
    log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")

    @jax.jit
    def keys_of(s):
        b = lax.bitcast_convert_type(s, jnp.uint32)
        return jnp.where(b >> 31 == 1, ~b, b | jnp.uint32(0x80000000))

    sort = jax.jit(lax.sort)
    for n in ns:
        s_np, pos_np = make_list(n)
        p = int(pos_np.sum())
        kp = 1 << (p - 1).bit_length()
        s = jax.device_put(s_np)
        pos = jax.device_put(pos_np)
        where = jax.device_put(np.ones(n, bool))
        keys = jax.block_until_ready(keys_of(s))
        # sanity: the keys sort like the floats
        assert bool(jnp.all(jnp.diff(s[jnp.argsort(keys)]) >= 0)), "key transform"
        ap_f = jax.jit(lambda s, p_, w: ap_oracle(s, p_, w, kp=kp))
        nd_f = jax.jit(lambda s, p_, w: ndcg_oracle(s, p_, w, kp=kp))
        au_f = jax.jit(auc_oracle)
        r, m = args.repeats, args.max_seconds
        t_sort, c_sort = timed(lambda: sort(keys), r, m)
        t_ap, c_ap = timed(lambda: ap_f(s, pos, where), r, m)
        t_nd, c_nd = timed(lambda: nd_f(s, pos, where), r, m)
        t_au, c_au = timed(lambda: au_f(s, pos, where), r, m)
        log(f"| {fmt_n(n)} | {p} | {kp} | {fmt(t_sort)} | {fmt(t_ap)} | {fmt(t_nd)} | {fmt(t_au)} "
            f"| {t_ap / t_sort:.1f}x | {t_nd / t_sort:.1f}x | {t_au / t_sort:.1f}x "
            f"| {c_sort}, {c_ap}, {c_nd}, {c_au} |")

    log()


def make_dense(n, d, seed, pos_rate=0.05):
    """X ~ N(0, 1) float32 [n, d] (chunked), y = 1 iff X w* + 0.5 e above its quantile."""
    rng_w = np.random.default_rng(12345)
    w = (rng_w.standard_normal(d) / np.sqrt(d)).astype(np.float32)
    rng = np.random.default_rng(seed)
    X = np.empty((n, d), np.float32)
    z = np.empty(n, np.float32)
    chunk = 1 << 16
    for i in range(0, n, chunk):
        c = X[i:i + chunk]
        rng.standard_normal(out=c, dtype=np.float32)
        z[i:i + chunk] = c @ w + 0.5 * rng.standard_normal(c.shape[0], dtype=np.float32)
    y = (z > np.quantile(z, 1 - pos_rate)).astype(np.int32)
    return X, y


def section_fit(n, args):
    import jaxrank

    log(f"## APSVM(C=10).fit on {fmt_n(n)} x 100 dense float32")
    log()
    t0 = time.perf_counter()
    X, y = make_dense(n, 100, seed=1)
    t_gen = time.perf_counter() - t0
    m = jaxrank.APSVM(C=10)
    t0 = time.perf_counter()
    m.fit(X, y)
    t_fit = time.perf_counter() - t0
    log(f"data generated in {t_gen:.1f} s ({X.nbytes / 2**30:.2f} GiB, "
        f"{int(y.sum())} positives)")
    log(f"fit wall time {t_fit:.2f} s (first fit of the process; persistent cache "
        f"{'off' if os.environ.get('JAXRANK_NO_CACHE') else 'on'}); "
        f"n_iter_ = {getattr(m, 'n_iter_', '?')}, converged_ = {getattr(m, 'converged_', '?')}, "
        f"fit_status_ = {getattr(m, 'fit_status_', '?')!r}")
    log()


def section_mlp(n, args):
    import jax
    import jax.numpy as jnp
    import optax

    from jaxrank.losses import ap_hinge_loss

    d, h, bs = 300, 64, 1024
    log(f"## MLP ({d} -> {h} -> 1, ReLU; adam 1e-3) one epoch on {fmt_n(n)} x {d}, "
        f"batches of {bs}, ap_hinge_loss")
    log()
    X_np, y_np = make_dense(n, d, seed=2, pos_rate=0.1)
    perm = np.random.default_rng(3).permutation(n)
    nb = n // bs
    Xb = jax.device_put(X_np[perm[:nb * bs]].reshape(nb, bs, d))
    yb = jax.device_put(y_np[perm[:nb * bs]].reshape(nb, bs).astype(np.float32))
    del X_np, y_np

    k1, k2 = jax.random.split(jax.random.key(0))
    params = {
        "W1": jax.random.normal(k1, (d, h), jnp.float32) * jnp.sqrt(2.0 / d),
        "b1": jnp.zeros(h, jnp.float32),
        "W2": jax.random.normal(k2, (h,), jnp.float32) * jnp.sqrt(1.0 / h),
        "b2": jnp.zeros((), jnp.float32),
    }

    def scores(p, x):
        return jax.nn.relu(x @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]

    def loss_fn(p, x, y):
        return ap_hinge_loss(scores(p, x), y)

    opt = optax.adam(1e-3)
    state = opt.init(params)

    @jax.jit
    def step(p, st, x, y):
        v, g = jax.value_and_grad(loss_fn)(p, x, y)
        upd, st = opt.update(g, st, p)
        return optax.apply_updates(p, upd), st, v

    @jax.jit
    def mean_loss(p):
        return jnp.mean(jax.vmap(lambda x, y: loss_fn(p, x, y))(Xb, yb))

    t0 = time.perf_counter()
    jax.block_until_ready(step(params, state, Xb[0], yb[0]))  # compile, not counted
    l0 = float(mean_loss(params))
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(nb):
        params, state, v = step(params, state, Xb[i], yb[i])
    jax.block_until_ready(params)
    t_epoch = time.perf_counter() - t0
    l1 = float(mean_loss(params))
    log(f"{nb} steps: epoch {t_epoch:.2f} s ({t_epoch / nb * 1e3:.2f} ms / step); "
        f"compile {t_compile:.1f} s; mean batch ap_hinge_loss {l0:.4f} -> {l1:.4f}")
    log()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true",
                    help="CPU sizes: oracles at 10^4, 10^5; fit 10^4 x 100; MLP 10^4 x 300")
    ap.add_argument("--repeats", type=int, default=7, help="timed calls per measurement (max)")
    ap.add_argument("--max-seconds", type=float, default=10.0,
                    help="stop a measurement's timed calls after this many seconds")
    ap.add_argument("--skip", default="", help="comma list of sections: oracles,fit,mlp")
    ap.add_argument("--no-cache", action="store_true",
                    help="set $JAXRANK_NO_CACHE=1: no persistent compilation cache")
    args = ap.parse_args(argv)
    if args.no_cache:
        os.environ["JAXRANK_NO_CACHE"] = "1"
    skip = set(filter(None, args.skip.split(",")))

    t_all = time.perf_counter()
    import jax

    devs = jax.devices()
    log("# jaxrank device check" + (" (--small)" if args.small else ""))
    log()
    log(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"command: python bench/device_check.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    log(f"jax {jax.__version__}, backend {jax.default_backend()}; jax.devices() = {devs}")
    log(f"device kind: {devs[0].device_kind}; host: {cpu_name()}, {platform.machine()}, "
        f"os.cpu_count() = {os.cpu_count()}")
    if jax.default_backend() == "cpu" and not args.small:
        log("WARNING: no accelerator backend (CPU only); the default sizes are meant "
            "for a GPU (use --small on CPU)")
    log()

    if "oracles" not in skip:
        section_oracles((10**4, 10**5) if args.small else (10**6, 10**7), args)
    if "fit" not in skip:
        section_fit(10**4 if args.small else 10**6, args)
    if "mlp" not in skip:
        section_mlp(10**4 if args.small else 10**5, args)
    log(f"total wall time {time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
