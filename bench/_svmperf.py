"""SVM-perf at bench time: build it from the source a user gives, read its model files.

SVM-perf's licence is non-commercial: nothing of it is in this repository; the
benches that compare with it (``bench/svmperf.py``, ``bench/convergence.py
--svmperf``) build it in a temporary folder from a path the user passes.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np


def build_svm_perf(src, work, flag="--svm-perf-tar"):
    """Unpack ``src`` (tarball or directory) into ``work`` and ``make``; the build folder."""
    src = Path(src)
    build = work / "svm_perf"
    if src.is_dir():
        shutil.copytree(src, build, ignore=shutil.ignore_patterns(
            "*.o", "svm_perf_learn", "svm_perf_classify"))
    elif src.is_file() and tarfile.is_tarfile(src):
        build.mkdir()
        with tarfile.open(src) as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            try:
                tar.extractall(build, members=members, filter="data")
            except TypeError:  # Python without extraction filters
                tar.extractall(build, members=members)
    else:
        raise SystemExit(f"{flag} {src}: not a tar archive or directory")
    tops = list(build.iterdir())
    if not (build / "Makefile").exists() and len(tops) == 1 and (tops[0] / "Makefile").exists():
        build = tops[0]
    # -fcommon: V3.00 defines `verbosity` in two files; GCC >= 10 defaults to -fno-common.
    for extra in (["SFLAGS=-fcommon"], []):
        r = subprocess.run(["make", *extra], cwd=build, capture_output=True, text=True,
                           errors="replace", check=False)
        if r.returncode == 0 and (build / "svm_perf_learn").exists() \
                and (build / "svm_perf_classify").exists():
            return build, " ".join(["make", *extra])
    raise SystemExit("building SVM-perf failed:\n" + (r.stdout + r.stderr)[-3000:])


def read_model(path, d):
    """``(w [d] float64, b_file)`` of a linear SVM-light model file (score = w.x - b_file)."""
    lines = Path(path).read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if "threshold b" in ln)
    b_file = float(lines[i].split()[0])
    w = np.zeros(d + 2)
    for ln in lines[i + 1:]:
        toks = ln.split("#", 1)[0].split()
        if not toks:
            continue
        a = float(toks[0])
        for t in toks[1:]:
            j, v = t.split(":")
            if int(j) <= d:  # the bias feature (d + 1) is removed from the file by SVM-perf
                w[int(j) - 1] += a * float(v)
    return w[:d], b_file
