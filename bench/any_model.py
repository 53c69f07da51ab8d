"""AP for any JAX model: an MLP trained with optax on mini-batches, BCE vs the exact AP hinge.

Part 1, w8a (LIBSVM, 49,749 x 300 sparse binary features, 2.97 % positives;
``<data-dir>/w8a/w8a``, one file: a fixed stratified split, ``random_state=0``,
into 60 % train / 20 % validation / 20 % test, the same for every run). One
MLP, pure JAX: 300 -> 64 ReLU -> 1 (He-normal init), trained with optax on
mini-batches of 1024 that all have the data's positive ratio (30 positives +
994 negatives: an epoch is one pass over the negatives, the positives are
reshuffled and cycled, so about one pass over them too), 30 epochs for every
loss, no early stopping. Losses:

(a) ``bce``: ``optax.sigmoid_binary_cross_entropy`` (batch mean), adam;
(b) ``ap_hinge``: ``jaxrank.losses.ap_hinge_loss`` on the batch's scores, adam,
    nothing else;
(c) ``ap_hinge_well``: the hinge with the SVM's regulariser (decoupled weight
    decay, ``optax.adamw``), a score scale (the loss sees ``scale * f(x)``,
    i.e. a temperature ``1/scale``) and/or a warm start (the first ``warm``
    epochs on BCE, then the hinge with a fresh optimizer state; the epochs
    count in the 30);
(d) ``rax_approx_ap``: ``rax.approx_t12n(rax.ap_metric)`` (sigmoid-smoothed
    ranks, minus the approximate AP), adam (rax 0.4.0's ``approx_t12n`` fails on
    this JAX, which has no ``jax.util``: the same loss is then built from rax's
    ``ap_metric`` and ``utils.approx_ranks`` / ``approx_cutoff``, as
    ``approx_t12n`` does);
(e) ``libauc_soap``: LibAUC's ``APLoss`` (squared-hinge surrogate, moving
    averages per positive) with its ``SOAP`` optimizer (adam mode), on
    ``sigmoid(f(x))`` as LibAUC's examples do, in PyTorch, the same
    architecture, batches (identical indices) and epochs; its grid: lr in
    {1e-3, 3e-3}, margin in {0.6, 1}, gamma in {0.1, 0.9}, warm start (BCE,
    Adam) in {0, 3} epochs. This code path
    (``--libauc``) imports no JAX: it runs in a separate virtualenv
    (``--libauc-python``, default ``/tmp/venv-libauc/bin/python`` when it exists;
    made by ``python3 -m venv /tmp/venv-libauc && /tmp/venv-libauc/bin/pip install
    "libauc>=2.0.1" torch numpy scikit-learn``, the ``bench-libauc`` extra's list).

Each loss's settings (learning rate in {1e-3, 3e-3, 1e-2}; for (c) also weight
decay in {0, 0.1}, scale in {1, 10}, warm start in {0, 3} epochs) are chosen
by validation AP with seed 0; then 5 seeds (initialisation and batch order)
are trained on the train part and scored on the test part by scikit-learn's
``average_precision_score``. Time per epoch: median over the epochs of all
seeds (training only; not the compiling first epoch; for a warm start, the
hinge's epochs), next to BCE's. PyTorch runs on 1 thread (2 threads were 5-10x
slower on the shared 2-core VM).

Part 2, many labels at once: scene (``<data-dir>/scene/scene-{train,test}.arff``,
CSV rows of 294 features then 6 0/1 labels; 1,211 train / 1,196 test rows).
One MLP 294 -> 64 -> 6 trained on ``ap_hinge_loss(scores.T, labels.T)`` (one
hinge per label: leading axes are lists; the six are summed) vs one
294 -> 64 -> 1 network per label on its own hinge (six trainings) vs one
6-output network on BCE; random mini-batches of 128, 60 epochs, adam; the
learning rate in {1e-3, 3e-3, 1e-2} (the hinge: also weight decay in {0, 1})
chosen by validation mAP on a random 25 % of the train file (seed 0), then
each model retrained on the whole train file; the per-label networks use the
6-output hinge's settings; mean test AP over the 6 labels (mAP), 5 seeds.
Also, per epoch of one run each, the training loss (batch mean) and the test
AP / mAP.

    python bench/any_model.py --out bench/results/any_model.md   # ~10-12 min on 2 cores
    python bench/any_model.py --quick                            # smoke run (~1 min)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import average_precision_score
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
HIDDEN = 64
BATCH = 1024
LRS = (1e-3, 3e-3, 1e-2)
WELL_GRID = [dict(lr=lr, wd=wd, scale=sc, warm=wm) for lr in (3e-3, 1e-2)
             for wd in (0.0, 0.1) for sc in (1.0, 10.0) for wm in (0, 3)]
DEFAULT_LIBAUC_PY = Path("/tmp/venv-libauc/bin/python")


# ---------------------------------------------------------------- data (NumPy only)

def load_w8a(data_dir):
    """Dense float32 X, int32 0/1 y; the fixed 60/20/20 stratified split."""
    X, y = load_svmlight_file(str(Path(data_dir) / "w8a" / "w8a"), n_features=300)
    X = np.asarray(X.todense(), dtype=np.float32)
    y = (y > 0).astype(np.int32)
    Xtv, Xte, ytv, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=0)
    Xtr, Xva, ytr, yva = train_test_split(Xtv, ytv, test_size=0.25, stratify=ytv,
                                          random_state=1)
    return Xtr, ytr, Xva, yva, Xte, yte


def load_scene(data_dir):
    def read(name):
        rows = [line.split(",") for line in
                (Path(data_dir) / "scene" / name).read_text().splitlines() if line.strip()]
        a = np.asarray(rows, dtype=np.float32)
        return a[:, :294], a[:, 294:].astype(np.int32)
    return (*read("scene-train.arff"), *read("scene-test.arff"))


def stratified_batches(y, rng, batch=BATCH):
    """[steps, batch] indices: each batch has round(batch * pos ratio) positives."""
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y <= 0)
    n_pos = int(round(batch * len(pos) / len(y)))
    n_neg = batch - n_pos
    steps = len(neg) // n_neg
    negs = rng.permutation(neg)[:steps * n_neg].reshape(steps, n_neg)
    reps = -(-steps * n_pos // len(pos))
    poss = np.concatenate([rng.permutation(pos) for _ in range(reps)])
    return np.concatenate([poss[:steps * n_pos].reshape(steps, n_pos), negs], axis=1)


def random_batches(n, rng, batch):
    steps = n // batch
    return rng.permutation(n)[:steps * batch].reshape(steps, batch)


def ap(y, s):
    return float(average_precision_score(y, s))


def mean_ap(Y, S):
    return float(np.mean([ap(Y[:, j], S[:, j]) for j in range(Y.shape[1])]))


def machine_lines():
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return cpu, os.cpu_count(), platform.python_version()


# ---------------------------------------------------------------- LibAUC (PyTorch only)

LIBAUC_GRID = [dict(lr=lr, margin=mg, gamma=ga, warm=wm) for lr in (1e-3, 3e-3)
               for mg in (0.6, 1.0) for ga in (0.1, 0.9) for wm in (0, 3)]


def run_libauc(Xtr, ytr, Xev, yev, seed, epochs, *, lr, margin=1.0, gamma=0.9, warm=0):
    """LibAUC APLoss + SOAP on the same MLP / batches; (eval AP, epoch times).

    ``warm``: that many first epochs on BCE (``torch.optim.Adam(lr)``), as
    LibAUC's examples pretrain with cross-entropy, then APLoss + SOAP.
    """
    import torch
    from libauc.losses import APLoss
    from libauc.optimizers import SOAP

    torch.set_num_threads(1)  # 2 threads ran 5-10x slower on the shared 2-core VM
    torch.manual_seed(seed)
    d = Xtr.shape[1]
    net = torch.nn.Sequential(torch.nn.Linear(d, HIDDEN), torch.nn.ReLU(),
                              torch.nn.Linear(HIDDEN, 1))
    torch.nn.init.kaiming_normal_(net[0].weight, nonlinearity="relu")
    torch.nn.init.zeros_(net[0].bias)
    torch.nn.init.normal_(net[2].weight, std=HIDDEN ** -0.5)
    torch.nn.init.zeros_(net[2].bias)
    loss_fn = APLoss(data_len=len(ytr), margin=margin, gamma=gamma, device=torch.device("cpu"))
    bce = torch.nn.BCEWithLogitsLoss()
    X, y = torch.from_numpy(Xtr), torch.from_numpy(ytr.astype(np.float32))
    rng = np.random.default_rng(seed)
    times = []
    for e in range(epochs):
        if e == 0 and warm:
            opt = torch.optim.Adam(net.parameters(), lr=lr)
        if e == warm:
            opt = SOAP(net.parameters(), lr=lr, mode="adam", verbose=False,
                       device=torch.device("cpu"))
        idxs = torch.from_numpy(stratified_batches(ytr, rng))
        t = time.perf_counter()
        for idx in idxs:
            opt.zero_grad()
            out = net(X[idx])
            if e < warm:
                loss = bce(out[:, 0], y[idx])
            else:
                loss = loss_fn(torch.sigmoid(out), y[idx], idx)
            loss.backward()
            opt.step()
        if e >= warm:
            times.append(time.perf_counter() - t)
    with torch.no_grad():
        s = net(torch.from_numpy(Xev))[:, 0].numpy()
    return ap(yev, s), times


def libauc_main(args):
    """Selection on validation, then seeds on test; prints one JSON object."""
    import torch
    Xtr, ytr, Xva, yva, Xte, yte = load_w8a(args.data_dir)
    grid = LIBAUC_GRID[:1] if args.quick else LIBAUC_GRID
    sel = [run_libauc(Xtr, ytr, Xva, yva, 0, args.epochs, **cfg)[0] for cfg in grid]
    cfg = grid[int(np.argmax(sel))]
    aps, times = [], []
    for seed in range(args.seeds):
        a, t = run_libauc(Xtr, ytr, Xte, yte, seed, args.epochs, **cfg)
        aps.append(a)
        times += t
    print(json.dumps(dict(selection=[[c, v] for c, v in zip(grid, sel)], cfg=cfg, aps=aps,
                          epoch_s=statistics.median(times), torch=torch.__version__)))


# ---------------------------------------------------------------- JAX

def jax_parts():
    """Imported lazily so that ``--libauc`` runs without JAX."""
    import jax
    import jax.numpy as jnp
    import optax

    from jaxrank.losses import ap_hinge_loss

    def init(key, d, out=1):
        k1, k2 = jax.random.split(key)
        return {"W1": jax.random.normal(k1, (d, HIDDEN)) * jnp.sqrt(2.0 / d),
                "b1": jnp.zeros(HIDDEN),
                "W2": jax.random.normal(k2, (HIDDEN, out)) * jnp.sqrt(1.0 / HIDDEN),
                "b2": jnp.zeros(out)}

    def apply(p, x):
        return jax.nn.relu(x @ p["W1"] + p["b1"]) @ p["W2"] + p["b2"]  # [n, out]

    def rax_loss():
        """``rax.approx_t12n(rax.ap_metric)``, or the same loss from rax's parts.

        rax 0.4.0's ``approx_t12n`` decorates with ``jax.util.wraps``, gone from
        recent JAX; then the identical loss is built as ``approx_t12n`` builds it
        (temperature 1): minus ``ap_metric`` with sigmoid-approximated ranks and
        cutoffs.
        """
        import functools

        import rax
        try:
            return rax.approx_t12n(rax.ap_metric)
        except AttributeError:
            kw = dict(rank_fn=functools.partial(rax.utils.approx_ranks, step_fn=jax.nn.sigmoid),
                      cutoff_fn=functools.partial(rax.utils.approx_cutoff,
                                                  step_fn=jax.nn.sigmoid))
            return lambda s, y: -rax.ap_metric(s, y, **kw)

    def batch_loss(kind, scale):
        """(scores [n, out], labels [n, out]) -> scalar."""
        if kind == "bce":
            return lambda s, y: optax.sigmoid_binary_cross_entropy(s, y.astype(s.dtype)).mean()
        if kind == "hinge":
            # one list per output column (leading axes are lists); summed over labels
            return lambda s, y: ap_hinge_loss(scale * s.T, y.T).sum()
        if kind == "rax":
            f = rax_loss()
            return lambda s, y: f(s.T, y.T.astype(s.dtype))
        raise ValueError(kind)

    @functools.lru_cache(maxsize=None)
    def make_epoch(kind, lr, wd, scale):
        """A jitted epoch (a ``lax.scan`` over the batches); cached, so seeds share it."""
        lossf, opt = batch_loss(kind, scale), optimizer(lr, wd)

        def objective(p, X, Y, idx):
            return lossf(apply(p, X[idx]), Y[idx])

        @jax.jit
        def epoch(p, st, idxs, X, Y):
            def step(carry, idx):
                p, st = carry
                val, g = jax.value_and_grad(objective)(p, X, Y, idx)
                u, st = opt.update(g, st, p)
                return (optax.apply_updates(p, u), st), val
            (p, st), vals = jax.lax.scan(step, (p, st), idxs)
            return p, st, vals.mean()
        return epoch, opt

    def optimizer(lr, wd):
        return optax.adamw(lr, weight_decay=wd) if wd else optax.adam(lr)

    def train(kind, Xtr, Ytr, *, lr, wd=0.0, scale=1.0, warm=0, seed=0, epochs=30,
              batches=None, monitor=None):
        """Returns (params, epoch times [s], per-epoch (loss kind, train loss, monitor)).

        The times are those of the last phase's epochs (``kind``'s, after a warm
        start), without the first epoch of a ``(kind, settings)`` (it compiles).
        """
        X, Y = jnp.asarray(Xtr), jnp.asarray(Ytr.reshape(len(Ytr), -1))
        p = init(jax.random.PRNGKey(seed), X.shape[1], Y.shape[1])
        rng = np.random.default_rng(seed)
        phases = [("bce", lr, 0.0, 1.0, warm)] if warm else []
        phases.append((kind, lr, wd, scale, epochs - warm))
        times, hist = [], []
        for k, lr_, wd_, sc_, n in phases:
            key = (k, lr_, wd_, sc_, X.shape, Y.shape)
            fresh = key not in compiled
            compiled.add(key)
            epoch, opt = make_epoch(k, lr_, wd_, sc_)
            st = opt.init(p)
            times = []
            for i in range(n):
                idxs = jnp.asarray(batches(rng))
                t = time.perf_counter()
                p, st, val = epoch(p, st, idxs, X, Y)
                val = float(val)  # blocks
                if not (fresh and i == 0):
                    times.append(time.perf_counter() - t)
                hist.append((k, val, monitor(p) if monitor else None))
        return p, times, hist

    compiled = set()

    def predict(p, X):
        return np.asarray(apply(p, jnp.asarray(X)))

    return dict(train=train, predict=predict, jax=jax, optax=optax)


def fmt_cfg(c):
    out = f"lr {c['lr']:g}"
    if c.get("wd"):
        out += f", wd {c['wd']:g}"
    if c.get("scale", 1.0) != 1.0:
        out += f", scale {c['scale']:g}"
    if "margin" in c:
        out += f", margin {c['margin']:g}, gamma {c['gamma']:g}"
    if c.get("warm"):
        out += f", warm {c['warm']} BCE ep."
    return out


def pm(xs):
    return f"{np.mean(xs):.4f} ± {np.std(xs):.4f}"


def main():
    ap_ = argparse.ArgumentParser(description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    ap_.add_argument("--quick", action="store_true", help="tiny configuration (smoke run)")
    ap_.add_argument("--out", default=None, help="write the Markdown tables here")
    ap_.add_argument("--data-dir", default=str(DEFAULT_DATA))
    ap_.add_argument("--seeds", type=int, default=None, help="default 5 (1 with --quick)")
    ap_.add_argument("--epochs", type=int, default=None, help="w8a epochs (default 30)")
    ap_.add_argument("--scene-epochs", type=int, default=None, help="default 60")
    ap_.add_argument("--libauc", action="store_true",
                     help="(internal) run the LibAUC/PyTorch path and print JSON")
    ap_.add_argument("--libauc-python", default=None,
                     help="python of a venv with libauc + torch (default "
                          f"{DEFAULT_LIBAUC_PY} if it exists; 'none' to skip)")
    args = ap_.parse_args()
    args.seeds = args.seeds or (1 if args.quick else 5)
    args.epochs = args.epochs or (3 if args.quick else 30)
    args.scene_epochs = args.scene_epochs or (5 if args.quick else 60)
    if args.libauc:
        libauc_main(args)
        return

    t_all = time.perf_counter()
    J = jax_parts()
    train, predict, jax = J["train"], J["predict"], J["jax"]
    cpu, ncpu, pyver = machine_lines()
    head = [f"Machine: {cpu}, os.cpu_count() = {ncpu}, Python {pyver}, jax {jax.__version__} "
            f"({jax.devices()[0].platform}), optax {J['optax'].__version__}.",
            f"Command: `python bench/any_model.py{' --quick' if args.quick else ''}"
            f"{' --out ' + args.out if args.out else ''}`."]
    print("\n".join(head), flush=True)
    md = ["# AP for any JAX model: an MLP on BCE vs the exact AP hinge", "",
          "Written by `bench/any_model.py` (its docstring has the full protocol).", "", *head, ""]

    # ------------------------------------------------------------ w8a
    Xtr, ytr, Xva, yva, Xte, yte = load_w8a(args.data_dir)
    E = args.epochs
    bat = stratified_batches(ytr, np.random.default_rng(0))
    md += ["## w8a: one MLP (300 -> 64 ReLU -> 1), mini-batches of 1024", "",
           f"Train / validation / test: {len(ytr)} / {len(yva)} / {len(yte)} rows "
           f"({ytr.sum()} / {yva.sum()} / {yte.sum()} positives); every batch: "
           f"{int((ytr[bat[0]] > 0).sum())} positives + {int((ytr[bat[0]] == 0).sum())} "
           f"negatives, {bat.shape[0]} batches an epoch, {E} epochs, {args.seeds} seed(s).", ""]

    def batches(rng):
        return stratified_batches(ytr, rng)

    def val_ap(kind, cfg, seed=0):
        p, _, _ = train(kind, Xtr, ytr, seed=seed, epochs=E, batches=batches, **cfg)
        return ap(yva, predict(p, Xva)[:, 0])

    lrs = LRS[:1] if args.quick else LRS
    grid = ([dict(lr=1e-2, wd=0.1, scale=10.0, warm=w) for w in (0, 1)] if args.quick
            else WELL_GRID)
    methods = {}  # name -> (kind, candidate configs)
    methods["(a) BCE"] = ("bce", [dict(lr=lr) for lr in lrs])
    methods["(b) AP hinge alone"] = ("hinge", [dict(lr=lr) for lr in lrs])
    methods["(c) AP hinge, used well"] = ("hinge", grid)
    try:
        import rax  # noqa: F401
        methods["(d) rax approx AP"] = ("rax", [dict(lr=lr) for lr in lrs])
    except ImportError:
        print("rax not importable: (d) skipped", flush=True)
    sel_rows, chosen = [], {}
    for name, (kind, cfgs) in methods.items():
        scores = []
        for cfg in cfgs:
            t = time.perf_counter()
            v = val_ap(kind, cfg)
            scores.append(v)
            sel_rows.append(f"| {name} | {fmt_cfg(cfg)} | {v:.4f} |")
            print(f"select {name:26s} {fmt_cfg(cfg):40s} val AP {v:.4f} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
        chosen[name] = (kind, cfgs[int(np.argmax(scores))])

    results = {}
    mon = None
    for name, (kind, cfg) in chosen.items():
        aps, times = [], []
        for seed in range(args.seeds):
            monitor = None
            if name.startswith("(c)") and seed == 0:
                monitor = lambda p: ap(yte, predict(p, Xte)[:, 0])  # noqa: E731
            p, tms, hist = train(kind, Xtr, ytr, seed=seed, epochs=E, batches=batches,
                                 monitor=monitor, **cfg)
            aps.append(ap(yte, predict(p, Xte)[:, 0]))
            times += tms
            if monitor:
                mon = hist
        results[name] = (cfg, aps, statistics.median(times) if times else float("nan"))
        print(f"test   {name:26s} {fmt_cfg(cfg):40s} AP {pm(aps)}  "
              f"epoch {1e3 * statistics.median(times):.0f} ms", flush=True)

    # LibAUC in its own venv
    lib_py = args.libauc_python or (str(DEFAULT_LIBAUC_PY) if DEFAULT_LIBAUC_PY.exists()
                                    else "none")
    lib_note = None
    if lib_py != "none":
        cmd = [lib_py, str(Path(__file__).resolve()), "--libauc", "--data-dir", args.data_dir,
               "--seeds", str(args.seeds), "--epochs", str(E)] + (["--quick"] if args.quick
                                                                   else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            out = json.loads(r.stdout.strip().splitlines()[-1])
            for c, v in out["selection"]:
                sel_rows.append(f"| (e) LibAUC APLoss + SOAP | {fmt_cfg(c)} | {v:.4f} |")
            results["(e) LibAUC APLoss + SOAP (PyTorch)"] = (out["cfg"], out["aps"],
                                                             out["epoch_s"])
            lib_note = f"LibAUC ran with torch {out['torch']} (CPU) in `{lib_py}`."
            print(f"test   LibAUC {out}", flush=True)
        else:
            lib_note = f"LibAUC failed: `{r.stderr.strip().splitlines()[-1:]}`"
            print(lib_note, r.stderr[-2000:], flush=True)
    else:
        lib_note = "LibAUC not run (no venv with libauc + torch given)."

    t_bce = results["(a) BCE"][2]
    md += ["### Test AP (final epoch, mean ± std over seeds) and time per epoch", "",
           "| loss | settings (chosen on validation, seed 0) | test AP | per seed | "
           "ms / epoch | vs BCE |", "|---|---|---|---|---|---|"]
    for name, (cfg, aps, tm) in results.items():
        md.append(f"| {name} | {fmt_cfg(cfg)} | {pm(aps)} | "
                  f"{', '.join(f'{a:.4f}' for a in aps)} | {1e3 * tm:.0f} | {tm / t_bce:.2f}x |")
    md += ["", "Time per epoch: median over the training epochs of all seeds, without the "
           "compiling first epoch (JAX), and only the AP loss's epochs of a warm-started run; "
           "the LibAUC row is PyTorch, eager, 1 thread, on the same CPU, next to JAX's jitted "
           "`lax.scan` epochs. Test AP is the final epoch's (no early stopping).", "",
           lib_note, "", "### Settings tried (validation AP, seed 0)", "",
           "| loss | settings | validation AP |", "|---|---|---|", *sel_rows, ""]
    if mon:
        md += ["### One run, per epoch: (c)'s seed 0, training loss (batch mean) "
               "and test AP", "", "| epoch | loss on | training loss | test AP |",
               "|---|---|---|---|"]
        md += [f"| {i + 1} | {k} | {v:.4f} | {a:.4f} |" for i, (k, v, a) in enumerate(mon)]
        md.append("")

    # ------------------------------------------------------------ scene
    Xs, Ys, Xst, Yst = load_scene(args.data_dir)
    SE = args.scene_epochs
    # settings chosen on a validation split of scene's train file (25 %), then
    # every model is retrained on the whole train file
    Xa, Xv, Ya, Yv = train_test_split(Xs, Ys, test_size=0.25, random_state=0)
    s_lrs = LRS[1:2] if args.quick else LRS
    s_grid = {"bce": [dict(lr=lr) for lr in s_lrs],
              "hinge": [dict(lr=lr, wd=wd) for lr in s_lrs for wd in (0.0, 1.0)]}
    s_chosen, s_sel_rows = {}, []
    for kind, cfgs in s_grid.items():
        vals = []
        for cfg in cfgs:
            p, _, _ = train(kind, Xa, Ya, seed=0, epochs=SE,
                            batches=lambda rng: random_batches(len(Ya), rng, 128), **cfg)
            vals.append(mean_ap(Yv, predict(p, Xv)))
            s_sel_rows.append(f"| {kind} | {fmt_cfg(cfg)} | {vals[-1]:.4f} |")
            print(f"scene select {kind} {fmt_cfg(cfg)} val mAP {vals[-1]:.4f}", flush=True)
        s_chosen[kind] = cfgs[int(np.argmax(vals))]
    bcfg, hcfg = s_chosen["bce"], s_chosen["hinge"]

    def sbatches(rng):
        return random_batches(len(Ys), rng, 128)

    rows = {"BCE, one 6-output MLP": [], "AP hinge, one 6-output MLP (leading axes = lists)": [],
            "AP hinge, one MLP per label (6 trainings)": []}
    stimes = {k: [] for k in rows}
    smon = None
    for seed in range(args.seeds):
        t = time.perf_counter()
        p, _, _ = train("bce", Xs, Ys, seed=seed, epochs=SE, batches=sbatches, **bcfg)
        stimes["BCE, one 6-output MLP"].append(time.perf_counter() - t)
        rows["BCE, one 6-output MLP"].append(mean_ap(Yst, predict(p, Xst)))
        monitor = (lambda p: mean_ap(Yst, predict(p, Xst))) if seed == 0 else None
        t = time.perf_counter()
        p, _, hist = train("hinge", Xs, Ys, seed=seed, epochs=SE, batches=sbatches,
                           monitor=monitor, **hcfg)
        stimes["AP hinge, one 6-output MLP (leading axes = lists)"].append(
            time.perf_counter() - t)
        rows["AP hinge, one 6-output MLP (leading axes = lists)"].append(
            mean_ap(Yst, predict(p, Xst)))
        if monitor:
            smon = hist
        t = time.perf_counter()
        S = np.stack([predict(train("hinge", Xs, Ys[:, j], seed=seed, epochs=SE,
                                    batches=sbatches, **hcfg)[0], Xst)[:, 0]
                      for j in range(Ys.shape[1])], axis=1)
        stimes["AP hinge, one MLP per label (6 trainings)"].append(time.perf_counter() - t)
        rows["AP hinge, one MLP per label (6 trainings)"].append(mean_ap(Yst, S))
    md += ["## scene: 6 labels at once (294 -> 64 ReLU -> 6)", "",
           f"Train / test: {len(Ys)} / {len(Yst)} rows; positives per label (train): "
           f"{', '.join(str(int(c)) for c in Ys.sum(0))}; random batches of 128, {SE} epochs; "
           f"settings chosen by validation mAP (seed 0) on a random 25 % of the train file, "
           f"then every model retrained on the whole train file: BCE {fmt_cfg(bcfg)}, the "
           f"hinge {fmt_cfg(hcfg)} (the per-label networks use the 6-output hinge's "
           f"settings); {args.seeds} seed(s). mAP = mean over the 6 labels of the test AP.", "",
           "| model | test mAP | per seed | training time (s, median over seeds) |",
           "|---|---|---|---|"]
    for k, v in rows.items():
        md.append(f"| {k} | {pm(v)} | {', '.join(f'{a:.4f}' for a in v)} | "
                  f"{statistics.median(stimes[k]):.1f} |")
        print(f"scene  {k:52s} mAP {pm(v)}", flush=True)
    md += ["", "Settings tried (validation mAP, seed 0):", "", "| loss | settings | "
           "validation mAP |", "|---|---|---|", *s_sel_rows]
    md += ["", "### One run, per epoch: the 6-output hinge MLP (seed 0), training hinge "
           "(sum over labels, batch mean) and test mAP", "",
           "| epoch | training hinge | test mAP |", "|---|---|---|"]
    md += [f"| {i + 1} | {v:.4f} | {a:.4f} |" for i, (_, v, a) in enumerate(smon)]
    md += ["", f"Total run time: {time.perf_counter() - t_all:.0f} s.", ""]
    text = "\n".join(md)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", flush=True)
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
