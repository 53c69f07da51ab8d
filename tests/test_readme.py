"""README.md's code runs as written: each ```python block on its own, the shell blocks in order.

The manual's pages (docs/) are tested the same way by tests/test_docs.py; the README is one page
that names every family, the two fresh-machine commands, a quickstart and the main job's table.
"""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _snippets():
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_is_one_page():
    assert len(README.read_text().splitlines()) <= 220


def test_readme_names_every_registered_family():
    import jaxrank

    text = README.read_text()
    missing = [cls.__name__ for cls in jaxrank.ESTIMATORS.values()
               if f"`{cls.__name__}`" not in text]
    assert not missing, f"README.md does not name {missing}"


def test_readme_links_resolve():
    root = README.parent
    links = re.findall(r"\]\(([^)#:]+)\)", README.read_text())
    assert links
    missing = [link for link in links if not (root / link).exists()]
    assert not missing, missing


def test_readme_snippets_run_each_on_its_own(tmp_path, monkeypatch):
    snippets = _snippets()
    assert snippets
    for i, code in enumerate(snippets):
        folder = tmp_path / f"snippet{i + 1}"
        folder.mkdir()
        monkeypatch.chdir(folder)  # snippets may write files (save)
        namespace = {"__name__": "__readme__"}
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
        "installs jaxrank from the network into a new venv (tests/test_cli.py runs the demo)",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e ":
        "the test command itself",
}


def _small(command):
    """``command`` in the small configuration the test runs (the same files are written).

    A sweep runs on the grid ``1,10`` with 2 folds: as written it takes minutes on
    2 cores, most of it compiling; `tests/test_sweep.py` tests the full grid (``auto``).
    """
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
    assert sum(map(_is_cli_block, blocks)) >= 1
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
    assert len(ran) >= 4
    written = ["apsvm.npz", "scores.txt", "runs/apsvm.csv", "runs/apsvm.json"]
    missing = [f for f in written if not (tmp_path / f).is_file()]
    assert not missing, missing
