"""Reading SVMlight files: jaxrank's strict ``load_data`` vs plain scikit-learn.

The baseline is ``sklearn.datasets.load_svmlight_file(path, zero_based=False)``
(``query_id=True`` for files with ``qid:``), which does the parsing in both;
``load_data`` adds reading the bytes once, the vectorised checks (finite
values, underscores, qid on every line, n_features) and the qid regex pass.
Medians of ``--repeats`` runs, both in this process, alternated.

    python bench/data_io.py               # real files + ~50 MB concatenations
    python bench/data_io.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_svmlight_file

from jaxrank import load_data

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _time(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _time_error(fn):
    t = time.perf_counter()
    try:
        fn()
    except ValueError as e:
        return time.perf_counter() - t, str(e)
    raise AssertionError("expected a ValueError")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    files = [
        ("w8a", DATA / "w8a" / "w8a", False),
        ("reuters.trn.bz2", DATA / "reuters_moneyfx" / "reuters.trn.bz2", False),
        ("reuters.tst.bz2", DATA / "reuters_moneyfx" / "reuters.tst.bz2", False),
        ("mq2008 S1", DATA / "mq2008" / "S1.txt", True),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "w8a_x15.svm"
        big.write_bytes((DATA / "w8a" / "w8a").read_bytes() * 15)
        files.append(("w8a x15", big, False))
        big = Path(tmp) / "mq2008_S1-S5_x6.txt"
        mq = b"".join((DATA / "mq2008" / f"S{i}.txt").read_bytes() for i in range(1, 6))
        big.write_bytes(mq * 6)
        files.append(("mq2008 S1-S5 x6", big, True))
        print(f"# load_data vs load_svmlight_file, median of {args.repeats} runs")
        print(
            f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"python {platform.python_version()}, scikit-learn {sklearn.__version__}"
        )
        print()
        print("| file | MB | lines | sklearn s | load_data s | ratio | overhead s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, path, qid in files:
            base = partial(
                load_svmlight_file, str(path), zero_based=False, query_id=qid
            )
            ours = partial(load_data, path, return_groups=True)
            X0 = base()[0]
            X1 = ours()[0]
            assert (X0 != X1).nnz == 0 and X0.shape == X1.shape
            tb, to = [], []
            for _ in range(args.repeats):  # alternate, so drift hits both
                tb.append(_time(base))
                to.append(_time(ours))
            b, o = float(np.median(tb)), float(np.median(to))
            size = path.stat().st_size / 1e6
            print(
                f"| {name} | {size:.1f} | {X0.shape[0]} | {b:.3f} | {o:.3f} | "
                f"{o / b:.2f} | {o - b:+.3f} |"
            )
        # Error path: a bad last line of the 52 MB file. Index 0 makes
        # scikit-learn fail (chunked re-parse to find the line); nan is found
        # by the vectorised checks after a successful parse.
        w8a15 = Path(tmp) / "w8a_x15.svm"
        print()
        print(
            "| bad last line of w8a x15 | sklearn s (parse) | load_data s (to raise) "
            "| ratio | message |"
        )
        print("|---|---:|---:|---:|---|")
        base = partial(load_svmlight_file, str(w8a15), zero_based=False)
        for what, line in [("index 0", b"1 3:1 0:2\n"), ("nan value", b"1 3:nan\n")]:
            bad = Path(tmp) / "bad.svm"
            bad.write_bytes(w8a15.read_bytes() + line)
            tb, to = [], []
            for _ in range(max(1, args.repeats // 2)):
                tb.append(_time(base))
                t, msg = _time_error(partial(load_data, bad))
                to.append(t)
            b, o = float(np.median(tb)), float(np.median(to))
            msg = msg.replace(str(bad), "<file>")[:60]
            print(f"| {what} | {b:.3f} | {o:.3f} | {o / b:.2f} | {msg}... |")


if __name__ == "__main__":
    from _machine import device_line

    print(device_line(), flush=True)
    main()
