"""Self-paced learning (self_paced=True) vs plain CCCP for the latent models.

For each (dataset, estimator) a worker process fits every C of
``type(est)._default_Cs`` with self_paced False then True (defaults otherwise,
random_state=0) and prints one JSON line per fit. The parent kills a worker
whose fit runs past LIMIT seconds (the fit is recorded as skipped, and so is
its partner mode at that C) and restarts it at the next fit. Results: one JSON
line per fit in spl_results.jsonl; the table goes to stdout.

Usage (repository root, with self_paced_prototype.patch applied):
    python bench/results/self_paced_measure.py [--datasets a,b] [--estimators A,B] [--budget S]
"""

import argparse
import json
import os
import select
import subprocess
import sys
import time

LIMIT = 180.0
# The repository root (this file lives in bench/results/).
HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Fits whose plain-CCCP time recorded in bench/results/convergence_latent.md is
# over LIMIT (same machine, defaults): not started, to save the budget.
PRESKIP = {("LatentAPSVM", "mil:musk1", 10000.0): "277.6 s recorded (convergence_latent.md)",
           ("LatentSSVM", "mil:musk1", 1000.0): "219.7 s recorded (convergence_latent.md)",
           ("LatentSSVM", "mil:musk1", 10000.0): "335.7 s recorded (convergence_latent.md)"}


def worker(dataset, est_name, jobs, init="centroid"):
    import warnings
    from pathlib import Path

    import numpy as np

    sys.path.insert(0, os.path.join(HERE, "bench"))
    import jaxrank
    from convergence import load_dataset

    assert jaxrank.__file__.startswith(HERE), jaxrank.__file__
    d = load_dataset(dataset, Path(HERE).parent / "shared" / "data", None)
    X, y, bags = d.X, d.y, d.extra["bags"]
    cls = getattr(jaxrank, est_name)
    # Warm-up (not reported): compiles the solver, the imputation and the SPL
    # scoring for this shape, so no reported fit_time_ includes compilation.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls(C=jobs[0][0], self_paced=True, max_outer_iter=1, init=init, random_state=0).fit(X, y, bags=bags)
    for C, spl in jobs:
        print(json.dumps({"start": [C, spl]}), flush=True)
        est = cls(C=C, self_paced=spl, init=init, random_state=0)
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est.fit(X, y, bags=bags)
        wall = time.perf_counter() - t0
        s = est.decision_function(X, bags=bags)
        out = dict(
            dataset=dataset, estimator=est_name, C=C, spl=spl, init=init,
            shape=list(X.shape), n_bags=int(len(np.unique(bags))),
            objective=float(est.objective_),
            collapse=bool(np.ptp(s) == 0 or np.allclose(est.coef_, 0)),
            converged=bool(est.converged_), n_iter=int(est.n_iter_),
            n_outer=int(est.n_outer_iter_), time=float(est.fit_time_), wall=wall,
            ap=float(est.score(X, y, bags=bags)),
            coef_norm=float(np.linalg.norm(est.coef_)),
            init_objectives=[float(v) for v in est.init_objectives_],
            cccp=[float(v) for v in est.cccp_objectives_],
            warnings=[str(x.message)[:120] for x in w])
        print(json.dumps({"done": out}), flush=True)


def run_pair_list(dataset, est_name, jobs, results, log, deadline, init="centroid"):
    """Run ``jobs`` in workers, restarting after a kill; append to ``results``."""
    skipped_C = set()
    while jobs:
        if time.time() > deadline:
            for C, spl in jobs:
                results.append(dict(dataset=dataset, estimator=est_name, C=C, spl=spl,
                                    skipped="global time budget"))
            return
        cmd = [sys.executable, __file__, "--worker", dataset, est_name, json.dumps(jobs), init]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(os.path.join(HERE, "spl_worker.log"), "a"), text=True,
                             env={**os.environ, "PYTHONPATH": HERE})
        started = None
        cur = None
        buf = ""
        fd = p.stdout.fileno()
        eof = False
        while True:
            # Raw reads and our own line buffer: a buffered readline can leave a
            # "start" line in Python's buffer, unseen by select (then a fit ran
            # past LIMIT unkilled: ucsb_breast_cancer LatentSVM C=10 SPL, 311 s).
            lines = []
            r, _, _ = select.select([fd], [], [], 1.0)
            if r:
                chunk = os.read(fd, 1 << 16).decode()
                if not chunk:
                    eof = True
                buf += chunk
                *lines, buf = buf.split("\n")
            for line in lines:
                if not line.strip():
                    continue
                msg = json.loads(line)
                if "start" in msg:
                    cur, started = tuple(msg["start"]), time.time()
                else:
                    res = msg["done"]
                    results.append(res)
                    log.write(json.dumps(res) + "\n")
                    log.flush()
                    print(fmt_one(res), flush=True)
                    jobs = [j for j in jobs if tuple(j) != cur]
                    cur = None
            if eof:
                break
            if cur is not None and time.time() - started > LIMIT:
                p.kill()
                p.wait()
                C, spl = cur
                res = dict(dataset=dataset, estimator=est_name, C=C, spl=spl,
                           skipped=f"> {LIMIT:.0f} s (killed)")
                results.append(res)
                log.write(json.dumps(res) + "\n")
                log.flush()
                print(fmt_one(res), flush=True)
                # Its partner mode at the same C is skipped too (no comparison).
                for j in jobs:
                    if j[0] == C and tuple(j) != cur:
                        r2 = dict(dataset=dataset, estimator=est_name, C=C, spl=j[1],
                                  skipped="partner fit killed")
                        results.append(r2)
                        log.write(json.dumps(r2) + "\n")
                jobs = [j for j in jobs if j[0] != C]
                break
        else:
            pass
        if p.poll() is None:
            p.wait()
        if cur is None and p.returncode not in (0, -9) and jobs:
            # crashed outside a fit: record and give up on this pair
            for C, spl in jobs:
                results.append(dict(dataset=dataset, estimator=est_name, C=C, spl=spl,
                                    skipped=f"worker exit {p.returncode}"))
            return
        if cur is not None and p.returncode not in (-9,):
            C, spl = cur
            results.append(dict(dataset=dataset, estimator=est_name, C=C, spl=spl,
                                skipped=f"error (worker exit {p.returncode})"))
            jobs = [j for j in jobs if tuple(j) != cur]


def fmt_one(r):
    tag = ("SPL" if r["spl"] else "off") + ("" if r.get("init", "centroid") == "centroid"
                                            else f"[{r['init']}]")
    if "skipped" in r:
        return f"{r['estimator']:11s} {r['dataset']:28s} C={r['C']:<8g} {tag} SKIPPED {r['skipped']}"
    return (f"{r['estimator']:11s} {r['dataset']:28s} C={r['C']:<8g} {tag} obj={r['objective']:.6g} "
            f"collapse={r['collapse']} AP={r['ap']:.4f} conv={r['converged']} iter={r['n_iter']} "
            f"outer={r['n_outer']} time={r['time']:.1f}s inits={[round(v, 5) for v in r['init_objectives']]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="mil:musk1,mil:elephant,mil:corel_dogs,"
                                          "mil:birds_brown_creeper")
    ap.add_argument("--estimators", default="LatentSVM,LatentAPSVM,LatentSSVM")
    ap.add_argument("--budget", type=float, default=3300.0, help="global seconds")
    ap.add_argument("--init", default="centroid", help="init of every fit (default: the default)")
    ap.add_argument("--Cs", default=None, help="comma list; default type(est)._default_Cs")
    ap.add_argument("--out", default=os.path.join(HERE, "spl_results.jsonl"))
    args = ap.parse_args()
    import jaxrank

    deadline = time.time() + args.budget
    results = []
    with open(args.out, "a") as log:
        for ds in args.datasets.split(","):
            for name in args.estimators.split(","):
                jobs = []
                Cs = ([float(c) for c in args.Cs.split(",")] if args.Cs
                      else getattr(jaxrank, name)._default_Cs)
                for C in Cs:
                    C = float(C)
                    if (name, ds, C) in PRESKIP:
                        for spl in (False, True):
                            r = dict(dataset=ds, estimator=name, C=C, spl=spl,
                                     skipped="not started: " + PRESKIP[(name, ds, C)])
                            results.append(r)
                            log.write(json.dumps(r) + "\n")
                            print(fmt_one(r), flush=True)
                        continue
                    jobs += [[C, False], [C, True]]
                run_pair_list(ds, name, jobs, results, log, deadline, args.init)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], [tuple(j) for j in json.loads(sys.argv[4])], *sys.argv[5:6])
    else:
        main()
