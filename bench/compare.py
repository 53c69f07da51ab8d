"""Old-vs-new benchmark comparison: the same bench scripts on two commits, interleaved.

Issue 13 ("Must keep"): no slowdown from the structured-model refactor --
rerun ``bench/inference.py``, ``bench/sweep.py`` and ``bench/training.py`` on
the old and the new code on the same machine, interleaved, every figure
within 10 % or better. This script does that:

1. checks out the old commit (default ``5b52982``, the last ``main`` commit
   before the refactor) as a detached git worktree in ``--workdir`` (default
   ``/tmp/jaxrank-compare/old``), next to a symlink ``shared`` -> this
   repository's ``../shared``, so that the old scripts find ``../shared/data``
   exactly as the new ones do;
2. for each script, runs the OLD script on the old code and the NEW script on
   the new code (``PYTHONPATH`` and working directory set to each tree), in
   turn -- old, new, old, new, ... for ``--rounds`` rounds -- each run a fresh
   process, its output kept in ``WORKDIR/runs/``;
3. parses the per-row figures of every run (the scripts' markdown tables)
   and prints one table ``figure | old | new | new/old | verdict``: old and
   new are medians over the rounds, ``new/old`` is the median of the
   per-round ratios (each round's pair ran back to back, so a slow period of
   the shared machine hits both alike), and the verdict is PASS when
   ``new/old <= 1.10`` (within 10 % or better), else FAIL.

Figures and their kinds:

* ``time`` (verdict): jaxrank run times -- median ms per call of the AP
  inference kernels and public entry points (``inference.py``), run seconds
  of the loop and the batched sweeps and the per-call inference times
  (``sweep.py``), fit seconds of APSVM and BinarySVM (``training.py``).
* ``compile`` (verdict, summarised separately): compile seconds, and the
  first-call seconds of ``training.py`` (compile + run at a dataset's first
  C; later Cs reuse the compiled program, so there it is just one more run).
* ``control`` (no verdict): code outside jaxrank timed in the same runs
  (``jnp.sort``, the literal NumPy Algorithm 1, liblinear); their ratio shows
  how much the machine drifted between the old and the new runs.
* ``info`` (no verdict): iteration counts and objectives.

Rows present on one side only (e.g. the new ``APModel.oracle`` row, the old
phase breakdown) are listed with ``n/a``. Figures printed with few decimals
(e.g. ``0.02`` s) are marked ``coarse``: their ratio is mostly rounding; a
difference no larger than the printed resolution counts as PASS.

The scripts' own options per mode (``--quick`` selects a representative
subset; see ``MODES`` below, or ``--dry-run`` to print the commands):

* inference: quick (300, 3000) and (1000, 100000), both score regimes;
  full: the script's default sizes up to (10000, 1000000). The old script
  runs with ``--no-phases`` (its phase breakdown crashes on the old code:
  a stub lacks the ``tail`` argument of the kernel it replaces).
* sweep: quick = the scripts' ``--quick`` (400 posts, 4 C values, 200 fits),
  3 internal rounds; full = the default 400 fits, 5 internal rounds.
* training: quick = page-blocks, C in {0.1, 1, 10}, 1 timed repeat; full =
  every dataset, C in {0.01, 0.1, 1, 10, 100}.

Usage (from the repository root of the NEW code, venv active; in a checkout,
build the native hinge-block kernel first: ``python setup.py build_ext
--inplace``, or the new code times its XLA fallback -- the script refuses; the old
worktree needs its own kernels built too, else the script refuses)::

    python bench/compare.py --quick            # representative subset
    python bench/compare.py                    # full comparison
    python bench/compare.py --scripts training --rounds 3
    python bench/compare.py --dry-run          # print the commands only
    python bench/compare.py --scripts training --args 'training=--Cs 0.1,1,10 --repeats 1'

The report is also written to ``WORKDIR/compare.md`` (``--output`` to
change) with the raw figures in ``WORKDIR/compare.json``. The worktree is
kept for reruns; ``--cleanup`` removes it at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "5b52982"
SCRIPTS = ("inference", "sweep", "training")
THRESHOLD = 1.10

# Per mode and script: (common args, old-only args, new-only args). "{out}" is
# replaced by a per-run file in the work directory.
MODES = {
    "quick": {
        "inference": (["--sizes", "300x3000,1000x100000", "--budget", "1"],
                      ["--no-phases"], []),
        "sweep": (["--quick", "--repeats", "3", "--output", "{out}"], [], []),
        "training": (["--quick", "--Cs", "0.1,1,10", "--repeats", "1"], [],
                     ["--lib-repeats", "1"]),
    },
    "full": {
        "inference": ([], ["--no-phases"], []),
        "sweep": (["--output", "{out}"], [], []),
        "training": (["--Cs", "0.01,0.1,1,10,100"], [], []),
    },
}


# ---------------------------------------------------------------------------
# Trees and runs.
# ---------------------------------------------------------------------------


def git(*args, cwd=ROOT, check=True):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=check).stdout.strip()


def _missing_native(tree):
    """True if a tree has C sources of the native kernels but not their library.

    The library is ``jaxrank/_src/_dcd*.so`` (before the layer packages) or
    ``jaxrank/_src/native/_kernels*.so``.
    """
    src = tree / "jaxrank" / "_src"
    for folder, lib in ((src, "_dcd*.so"), (src / "native", "_kernels*.so")):
        if (folder / "dcd.c").exists():
            return not any(folder.glob(lib))
    return False


def ensure_old_tree(workdir: Path, commit: str, allow_xla: bool = False) -> Path:
    """Detached worktree of ``commit`` at ``workdir/old`` plus the ``shared`` symlink."""
    old = workdir / "old"
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    if old.exists():
        head = git("rev-parse", "HEAD", cwd=old)
        if head != full:
            raise SystemExit(f"{old} is at {head[:10]}, not {commit}; remove it "
                             f"(git worktree remove {old}) or pass another --workdir.")
    else:
        workdir.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--detach", str(old), full)
    shared = ROOT.parent / "shared"
    link = workdir / "shared"
    if not shared.is_dir():
        raise SystemExit(f"{shared} not found: the scripts read ../shared/data.")
    if link.is_symlink() or link.exists():
        if link.resolve() != shared.resolve():
            raise SystemExit(f"{link} exists and does not point to {shared}.")
    else:
        link.symlink_to(shared.resolve(), target_is_directory=True)
    if not allow_xla and (old / "setup.py").exists() and _missing_native(old):
        # Without its native kernels the old code times its XLA fallback, and the
        # comparison would flatter the new code.
        raise SystemExit(
            f"{old}: the native kernels are missing: build the old code's from its own "
            f"sources first (e.g. `python setup.py build_ext --inplace` in {old}, or gcc "
            "with the flags of its setup.py), or pass --allow-xla-fallback.")
    return old


def command(script, tree, side, mode, out, override=None):
    common, old_only, new_only = MODES[mode][script]
    if override is not None:
        common = override
    extra = old_only if side == "old" else new_only
    # Flags for one side that the script of that tree does not have (e.g. an old
    # commit newer than the one they were written for) are left out.
    source = (tree / "bench" / f"{script}.py").read_text()
    extra = [a for a in extra if not a.startswith("--") or a in source]
    args = [a.replace("{out}", str(out)) for a in common + extra]
    return [sys.executable, str(tree / "bench" / f"{script}.py"), *args]


def run_one(cmd, tree, stdout_path, stderr_path, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("PYTHONSTARTUP", None)
    t0 = time.perf_counter()
    with open(stdout_path, "w") as so, open(stderr_path, "w") as se:
        try:
            rc = subprocess.run(cmd, cwd=tree, env=env, stdout=so, stderr=se,
                                timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return rc, time.perf_counter() - t0


# ---------------------------------------------------------------------------
# Parsing the scripts' markdown tables.
# ---------------------------------------------------------------------------


def tables(text):
    """Every markdown table: list of (header cells, [row cells])."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines) - 1:
        line, nxt = lines[i].strip(), lines[i + 1].strip()
        if line.startswith("|") and re.match(r"^\|[\s:|-]+\|$", nxt) and "-" in nxt:
            header = [c.strip() for c in line.strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out.append((header, rows))
        else:
            i += 1
    return out


_NUM = re.compile(r"^[-+]?\d+(?:\.(\d+))?(?:e[-+]?\d+)?")


def number(cell):
    """(value, resolution) of the leading number of a cell, or None."""
    m = _NUM.match(cell.replace("*", "").strip())
    if not m:
        return None
    text = m.group(0)
    if "e" in text.lower():
        return float(text), 0.0
    return float(text), 10.0 ** -len(m.group(1) or "")


def _base(label):
    """A row label without its trailing parenthesised notes."""
    return re.sub(r"\s*\((?:includes|traces|liblinear|no match|max_iter)[^)]*\)", "",
                  label).strip()


def parse_inference(text):
    figs = {}
    for header, rows in tables(text):
        if "method" not in header or "median ms" not in header:
            continue
        h = {k: j for j, k in enumerate(header)}
        for r in rows:
            method = _base(r[h["method"]])
            key = f"inference {r[h['size (P, N)']]} {r[h['regime']]}: {method}"
            control = method.startswith(("jnp.sort", "literal"))
            ms = number(r[h["median ms"]])
            if ms:
                figs[key + " [ms]"] = (*ms, "control" if control else "time")
            comp = number(r[h["compile s"]]) if r[h["compile s"]] else None
            if comp and not control:
                figs[key + " [compile s]"] = (*comp, "compile")
    return figs


def parse_sweep(text):
    figs = {}
    for header, rows in tables(text):
        h = {k: j for j, k in enumerate(header)}
        if "method" in h and "run (s), median [min-max]" in h:
            for r in rows:
                key = (f"sweep: {r[h['method']]}, batch {r[h['batch size (per device)']]} x "
                       f"{r[h['devices']]} dev.")
                run = number(r[h["run (s), median [min-max]"]])
                if run:
                    figs[key + " [run s]"] = (*run, "time")
                comp = number(r[h["compile (s)"]])
                if comp:
                    figs[key + " [compile s]"] = (*comp, "compile")
        elif header and header[0] == "" and "APSVM" in header:
            for r in rows:
                kind = {"per call (ms)": "time"}.get(r[0], "info")
                for j, model in enumerate(header[1:], start=1):
                    v = number(r[j])
                    if v:
                        figs[f"sweep inference: {model} {r[0]}"] = (*v, kind)
    return figs


def parse_training(text):
    figs = {}
    for header, rows in tables(text):
        h = {k: j for j, k in enumerate(header)}
        if not {"dataset", "model", "C", "fit s"} <= set(h):
            continue
        for r in rows:
            model = _base(r[h["model"]])
            key = f"training {r[h['dataset']]} C={r[h['C']]}: {model}"
            ours = model in ("APSVM", "BinarySVM")
            v = number(r[h["fit s"]])
            if v:
                figs[key + " [fit s]"] = (*v, "time" if ours else "control")
            v = number(r[h["first call s"]]) if r[h["first call s"]] else None
            if v and ours:
                figs[key + " [first call s]"] = (*v, "compile")
            for col in ("iters", "objective"):
                v = number(r[h[col]]) if r[h[col]] else None
                if v:
                    figs[f"{key} [{col}]"] = (*v, "info")
    return figs


PARSERS = {"inference": parse_inference, "sweep": parse_sweep, "training": parse_training}


# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------


def fmt(v):
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.3g}"


def summarise(script, results):
    """Rows (figure, old, new, ratio, verdict, note) from per-round figure dicts."""
    old_runs, new_runs = results["old"], results["new"]
    keys = []
    for runs in (new_runs, old_runs):  # the new script's row order first
        for figs in runs:
            keys += [k for k in figs if k not in keys]
    rows = []
    for key in keys:
        ov = [f[key] for f in old_runs if key in f]
        nv = [f[key] for f in new_runs if key in f]
        kind = (ov or nv)[0][2]
        o = statistics.median(v[0] for v in ov) if ov else None
        n = statistics.median(v[0] for v in nv) if nv else None
        ratio, verdict, note = None, "", ""
        if o is not None and n is not None:
            pairs = [f_new[key][0] / f_old[key][0]
                     for f_old, f_new in zip(old_runs, new_runs)
                     if key in f_old and key in f_new and f_old[key][0] > 0]
            if pairs:
                ratio = statistics.median(pairs)
            elif o > 0:
                ratio = n / o
            elif n == 0:
                ratio = 1.0
            res = max(v[1] for v in ov + nv)
            if res and min(o, n) < 20 * res:
                note = f"coarse (printed to {res:g})"
            if kind in ("time", "compile") and ratio is not None:
                verdict = "PASS" if ratio <= THRESHOLD else "FAIL"
                if verdict == "FAIL" and res and n - o <= res:
                    verdict = "PASS"  # a difference within the printed rounding
                    note = f"within rounding ({res:g})"
        else:
            note = "only in " + ("old" if n is None else "new")
        rows.append((key, kind, o, n, ratio, verdict, note))
    return rows


def report(all_rows, durations, meta):
    lines = [
        "# Old vs new benchmark comparison (`bench/compare.py`)",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        (f"- old: {meta['old_commit']} ({meta['old_tree']}); new: {meta['new_commit']} "
         f"({meta['new_tree']})"),
        (f"- mode: {meta['mode']}, rounds per script: {meta['rounds']}; old then new "
         "in each round (fresh processes)"),
        (f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
         f"load average at start {meta['load']}"),
        (f"- verdict: PASS when new/old <= {THRESHOLD:.2f} (within 10 % or better); "
         "new/old = median of the per-round ratios; old, new = medians over rounds"),
        "",
    ]
    for script, rows in all_rows.items():
        lines += [f"## {script}.py", "",
                  "| figure | kind | old | new | new/old | verdict | note |",
                  "|---|---|---:|---:|---:|---|---|"]
        for key, kind, o, n, ratio, verdict, note in rows:
            r = "n/a" if ratio is None else f"{ratio:.2f}"
            lines.append(f"| {key} | {kind} | {fmt(o)} | {fmt(n)} | {r} | {verdict} | {note} |")
        lines.append("")
    lines += ["## Summary", ""]
    for script, rows in all_rows.items():
        for kind in ("time", "compile"):
            judged = [r for r in rows if r[1] == kind and r[5]]
            fails = [r for r in judged if r[5] == "FAIL"]
            if judged:
                worst = max(judged, key=lambda r: r[4])
                lines.append(
                    f"- {script}.py, {kind} figures{' (incl. first calls)' if kind == 'compile' and script == 'training' else ''}: "
                    f"{len(judged) - len(fails)}/{len(judged)} "
                    f"PASS; worst new/old {worst[4]:.2f} ({worst[0]})")
        ctrl = [r[4] for r in rows if r[1] == "control" and r[4] is not None]
        if ctrl:
            lines.append(f"- {script}.py, control figures (not jaxrank; machine drift): "
                         f"median new/old {statistics.median(ctrl):.2f}")
    lines += ["", "## Durations (wall seconds per run)", "",
              "| script | old runs | new runs | exit codes (old / new) |", "|---|---|---|---|"]
    for script, d in durations.items():
        lines.append(
            f"| {script}.py | {', '.join(f'{t:.0f}' for t, _ in d['old'])} | "
            f"{', '.join(f'{t:.0f}' for t, _ in d['new'])} | "
            f"{', '.join(str(c) for _, c in d['old'])} / {', '.join(str(c) for _, c in d['new'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--quick", action="store_true", help="representative subset (MODES['quick'])")
    p.add_argument("--scripts", default=",".join(SCRIPTS),
                   help=f"comma-separated subset of {','.join(SCRIPTS)}")
    p.add_argument("--rounds", type=int, default=None,
                   help="old/new pairs per script (default 2 quick, 3 full)")
    p.add_argument("--old", default=OLD_COMMIT, help="old commit (default %(default)s)")
    p.add_argument("--workdir", default="/tmp/jaxrank-compare",
                   help="old worktree, run outputs and report (default %(default)s)")
    p.add_argument("--output", default=None, help="report file (default WORKDIR/compare.md)")
    p.add_argument("--timeout", type=float, default=7200, help="seconds per run")
    p.add_argument("--args", action="append", default=[], metavar="SCRIPT=ARGS",
                   help="replace the mode's common arguments of one script (both sides), "
                   "e.g. --args 'training=--Cs 0.1,1 --repeats 1'; the old-only "
                   "--no-phases of inference.py is kept")
    p.add_argument("--allow-xla-fallback", dest="allow_xla", action="store_true",
                   help="run even if the new tree's native DCD kernel is not built")
    p.add_argument("--script-rounds", action="append", default=[], metavar="SCRIPT=N",
                   help="rounds of one script (overrides --rounds for it), e.g. sweep=1")
    p.add_argument("--reuse", choices=("old", "all"), default=None,
                   help="keep outputs already in WORKDIR/runs instead of running again (a run "
                   "is reused when its .out parses to figures): 'old' those of the old code "
                   "(which does not change), 'all' also the new tree's (only if it is unchanged "
                   "since)")
    p.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    p.add_argument("--cleanup", action="store_true", help="remove the old worktree at the end")
    args = p.parse_args(argv)
    mode = "quick" if args.quick else "full"
    rounds = args.rounds or (2 if args.quick else 3)
    if rounds < 1:
        p.error("--rounds must be >= 1")
    scripts = [s.strip() for s in args.scripts.split(",") if s.strip()]
    for s in scripts:
        if s not in SCRIPTS:
            p.error(f"unknown script {s!r}; choose from {SCRIPTS}")
    override = {}
    for item in args.args:
        name, sep, rest = item.partition("=")
        if not sep or name not in SCRIPTS:
            p.error(f"--args expects SCRIPT=ARGS with SCRIPT in {SCRIPTS}; got {item!r}")
        override[name] = shlex.split(rest)
    per_script = {}
    for item in args.script_rounds:
        name, sep, n = item.partition("=")
        if not sep or name not in SCRIPTS or not n.isdigit() or int(n) < 1:
            p.error(f"--script-rounds expects SCRIPT=N (N >= 1) with SCRIPT in {SCRIPTS}; "
                    f"got {item!r}")
        per_script[name] = int(n)
    workdir = Path(args.workdir).resolve()
    runs_dir = workdir / "runs"
    old = workdir / "old"
    if args.dry_run:
        for s in scripts:
            for side, tree in (("old", old), ("new", ROOT)):
                out = runs_dir / f"{s}.{side}.1.md"
                cmd = command(s, tree, side, mode, out, override.get(s))
                print(f"(cd {tree} && PYTHONPATH={tree} {' '.join(cmd)})")
        return 0
    if _missing_native(ROOT) and not args.allow_xla:
        raise SystemExit(
            "the native kernels are missing: the new code would time its slow XLA fallback of "
            "the hinge block. Build it (python setup.py build_ext --inplace) or pass "
            "--allow-xla-fallback.")
    old = ensure_old_tree(workdir, args.old, args.allow_xla)
    runs_dir.mkdir(parents=True, exist_ok=True)
    meta = {
        "old_commit": git("rev-parse", "--short", "HEAD", cwd=old), "old_tree": str(old),
        "new_commit": git("rev-parse", "--short", "HEAD")
        + (" + uncommitted changes" if git("status", "--porcelain", "--", "jaxrank", "bench")
           else ""),
        "new_tree": str(ROOT), "mode": mode,
        "rounds": ", ".join(f"{s} {per_script.get(s, rounds)}" for s in scripts),
        "load": ", ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    print(f"old {meta['old_commit']} at {old}; new {meta['new_commit']} at {ROOT}; "
          f"{mode} mode, rounds {meta['rounds']}; outputs in {runs_dir}", flush=True)
    figures, durations, all_rows = {}, {}, {}
    for s in scripts:
        figures[s] = {"old": [], "new": []}
        durations[s] = {"old": [], "new": []}
        for r in range(1, per_script.get(s, rounds) + 1):
            for side, tree in (("old", old), ("new", ROOT)):
                base = f"{s}.{side}.{r}"
                out, err = runs_dir / f"{base}.out", runs_dir / f"{base}.err"
                cmd = command(s, tree, side, mode, runs_dir / f"{base}.md", override.get(s))
                reused = bool(args.reuse in ("all", side) and out.exists()
                              and PARSERS[s](out.read_text()))
                if reused:
                    rc, dt = 0, float("nan")
                else:
                    rc, dt = run_one(cmd, tree, out, err, args.timeout)
                text = out.read_text()
                figs = PARSERS[s](text)
                figures[s][side].append(figs)
                durations[s][side].append((dt, rc))
                print(f"{s}.py {side} round {r}: "
                      + ("reused" if reused else f"{dt:.0f} s") + f", exit {rc}, "
                      f"{len(figs)} figures"
                      + ("" if rc == 0 else f" (see {err})"), flush=True)
        all_rows[s] = summarise(s, figures[s])
    text = report(all_rows, durations, meta)
    print()
    print(text)
    out = Path(args.output) if args.output else workdir / "compare.md"
    out.write_text(text)
    (workdir / "compare.json").write_text(json.dumps(
        {"meta": meta, "figures": figures, "durations": durations}, indent=1))
    print(f"report: {out}; raw figures: {workdir / 'compare.json'}")
    if args.cleanup:
        git("worktree", "remove", "--force", str(old))
        print(f"removed {old}")
    else:
        print(f"old worktree kept for reruns; remove with: git worktree remove --force {old}")
    fails = sum(r[5] == "FAIL" for rows in all_rows.values() for r in rows if r[1] == "time")
    return 1 if fails else 0


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    sys.exit(main())
