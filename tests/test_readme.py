"""Every ```python snippet of README.md runs as written, in order, in one namespace."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _snippets():
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_has_python_snippets():
    assert len(_snippets()) >= 5


def test_readme_snippets_run_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # snippets may write files (save)
    namespace = {"__name__": "__readme__"}
    for i, code in enumerate(_snippets()):
        try:
            exec(compile(code, f"README.md snippet {i + 1}", "exec"), namespace)
        except Exception as e:  # pragma: no cover - the message says which snippet
            raise AssertionError(f"README.md snippet {i + 1} failed: {e!r}\n{code}") from e


# ---------------------------------------------------------------------------
# Shell blocks: every command-line example runs as written, in order, in one
# fresh folder holding the data files a user would have (made below).
# ---------------------------------------------------------------------------

# Shell blocks that are not command-line examples, by the start of their first
# line, with the reason the test does not run them.
NOT_RUN = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install . ":
        "installs jaxrank from the network into a new venv (its `jaxrank demo` runs below)",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e ":
        "the test command itself",
    "python my_fit.py 0 & python my_fit.py 1":
        "a sketch around the user's own script (tests/distributed_worker.py is a complete "
        "one, run as two processes by tests/test_data_parallel.py)",
    "python bench/kernelrank.py": "a benchmark (minutes, reads ../shared/data)",
    "python bench/latent.py": "a benchmark (about 70 minutes)",
}


def _small(command):
    """``command`` in the small configuration the test runs (the same files are written).

    The demo runs on one dataset with 2 folds, and each sweep on the grid
    ``1,10`` with 2 folds: as written they take minutes on 2 cores, most of it
    in the compilation of their programs; `tests/test_cli.py` and
    `tests/test_sweep.py` test the full grids (``auto``) and the demo.
    """
    if command == "jaxrank demo":
        return "jaxrank demo --datasets ecoli1 --cv 2"
    if command.startswith("jaxrank sweep "):
        command = re.sub(r" --(Cs|cv) \S+", "", command) + " --Cs 1,10 --cv 2"
    return command


def _shell_blocks():
    return re.findall(r"^```(?:bash|sh|shell|console)\n(.*?)^```", README.read_text(),
                      flags=re.S | re.M)


def _commands(block):
    import shlex

    return [line for line in block.splitlines() if shlex.split(line, comments=True)]


def _is_cli_block(block):
    return all(line.startswith("jaxrank ") for line in _commands(block))


def test_every_shell_block_is_run_or_says_why_not():
    blocks = _shell_blocks()
    assert sum(map(_is_cli_block, blocks)) >= 4
    for block in blocks:
        if not _is_cli_block(block):
            first = _commands(block)[0]
            assert any(first.startswith(k) for k in NOT_RUN), (
                "a README shell block that is neither command-line examples nor listed in "
                f"NOT_RUN:\n{block}")


def _user_files(folder):
    """The data files the README's commands name, as a user would have them."""
    import numpy as np
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    w = rng.normal(size=6)

    def binary(n):
        X = rng.normal(size=(n, 6)).astype(np.float32)
        return X, np.where(X @ w + rng.normal(size=n) > 1.0, 1, -1)

    X, y = binary(240)
    dump_svmlight_file(X, y, str(folder / "train.svm"), zero_based=False)
    Xt, yt = binary(120)
    dump_svmlight_file(Xt, yt, str(folder / "test.svm"), zero_based=False)
    # A multi-class label (classes 0-3).
    Xm = rng.normal(size=(240, 6)).astype(np.float32)
    ym = np.digitize(Xm @ w + rng.normal(size=240), [-1.0, 0.0, 1.0])
    dump_svmlight_file(Xm, ym, str(folder / "multiclass.svm"), zero_based=False)
    # Six binary label columns after the features (as the scene data).
    Xs = rng.normal(size=(240, 8))
    Ys = (Xs[:, :6] + rng.normal(size=(240, 6)) > 0.8).astype(int)
    np.savetxt(folder / "scene.csv", np.column_stack([Xs, Ys]), delimiter=",", fmt="%.6g")
    # Bags of 3 candidates (qid: = bag id), the bag label on each line.
    bags = np.repeat(np.arange(1, 41), 3)
    yb = np.where(np.arange(40) % 3 == 0, 1, -1)
    Xb = rng.normal(size=(120, 5)).astype(np.float32)
    Xb[::3] += 1.5 * (yb == 1)[:, None]  # one candidate of each positive bag stands out
    dump_svmlight_file(Xb, yb[bags - 1], str(folder / "bags.svm"), query_id=bags,
                       zero_based=False)
    # Edges among the rows of train.svm / test.svm: groups of 3 consecutive samples.
    for name, n in (("train_edges.txt", 240), ("test_edges.txt", 120)):
        e = [(i, j) for g in range(0, n, 3) for i in range(g, g + 3)
             for j in range(i + 1, g + 3)]
        np.savetxt(folder / name, np.array(e), fmt="%d")


def test_readme_shell_blocks_run_in_order(tmp_path, monkeypatch, capsys):
    import shlex

    from jaxrank.cli import main

    _user_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    ran = []
    for block in filter(_is_cli_block, _shell_blocks()):
        for line in _commands(block):
            argv = shlex.split(_small(shlex.join(shlex.split(line, comments=True))))
            try:
                code = main(argv[1:])
            except SystemExit as e:  # --help
                code = e.code
            out = capsys.readouterr()
            assert code == 0, f"README command failed ({code}): {line}\n{out.err[-3000:]}"
            ran.append(line)
    assert len(ran) >= 19
    written = ["apsvm.npz", "kernelrank.npz", "scores.txt", "jaxrank-sweep.csv",
               "runs/classes.csv", "runs/scene.json", "runs/a.csv", "appx.npz", "latent.npz",
               "bag_scores.txt", "runs/bags.csv", "hob.npz", "hoap.npz", "hob_scores.txt"]
    missing = [f for f in written if not (tmp_path / f).is_file()]
    assert not missing, missing
