"""Every page of the documentation site (docs/*.md) runs on its own.

Each page runs in a fresh folder of its own, so that no page depends on
another page (or on the README's quickstart). Its ```python and ```bash
blocks (also ```sh / ```shell) run in the order of the page, in that folder:

* the ```python blocks in one namespace of their own (a page makes or loads
  its own data, and writes the files its commands name);
* each command line of a shell block (a line ending in ``\\`` continues on
  the next) on its own, in ``bash -e -o pipefail -c``, with the folder of
  this Python's executable first on ``PATH`` (so ``jaxrank`` is this
  checkout's command) and the command line's compilation cache in a folder of
  the test session. No state (``cd``, variables) carries from one command
  line to the next. A command line is left out only if :data:`NOT_RUN` lists
  it, with the reason.

The estimator registry is restored after each page (a page may register an
estimator of its own). A block or command that fails fails the test, naming the page, the block
(numbered in the order of the page, python and shell blocks together) and the
command. ```console blocks (commands mixed with their output) are
refused: commands go in ```bash blocks, output in ```text blocks. Every page
is in the site's table of contents, and docs/cli.md shows the generated help
of every subcommand.
"""

import importlib.util
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md"))

SHELL = "(?:bash|sh|shell)"

# Command lines of the pages that the test does not run: (page, the start of
# the command line) -> the reason.
NOT_RUN = {
    ("cli.md", "jaxrank demo"):
        "the main job: four models cross-validated on six datasets (a minute or more on "
        "2 cores); tests/test_cli.py and tests/test_readme.py run it on one dataset",
}

# Seconds one command may run before the test fails.
COMMAND_TIMEOUT = 300


def _blocks(page, lang):
    return re.findall(rf"^```{lang}\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def _command_lines(block):
    """The command lines of a shell block: continued lines joined, blank and
    comment-only lines left out."""
    lines, current = [], ""
    for line in block.splitlines():
        current += line
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if shlex.split(current, comments=True):
            lines.append(current.strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def _not_run(page, command):
    for (name, start), reason in NOT_RUN.items():
        if name == page.name and command.startswith(start):
            return reason
    return None


def test_every_page_is_in_the_table_of_contents():
    index = (DOCS / "index.md").read_text()
    toc = re.search(r"^```\{toctree\}\n(.*?)^```", index, flags=re.S | re.M)
    assert toc is not None, "docs/index.md has no toctree"
    listed = {line.strip() for line in toc.group(1).splitlines()
              if line.strip() and not line.startswith(":")}
    missing = {p.stem for p in PAGES if p.stem != "index"} - listed
    assert not missing, f"pages missing from the toctree of docs/index.md: {sorted(missing)}"


def test_every_command_left_out_is_on_its_page():
    for (name, start), reason in NOT_RUN.items():
        commands = [c for block in _blocks(DOCS / name, SHELL) for c in _command_lines(block)]
        assert any(c.startswith(start) for c in commands), (
            f"NOT_RUN lists {start!r} on {name}, which has no such command ({reason})")


def test_the_command_line_reference_covers_every_subcommand():
    """docs/cli.md shows the generated help (``{cli-help}``, docs/conf.py) of
    ``jaxrank`` and of each of its subcommands."""
    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    shown = re.findall(r"^```\{cli-help\}[ \t]*(\S*)[ \t]*$", (DOCS / "cli.md").read_text(),
                       flags=re.M)
    assert sorted(shown) == sorted(conf.cli_parsers()), (
        f"docs/cli.md shows the help of {sorted(shown)}; the parser has "
        f"{sorted(conf.cli_parsers())} ('' = jaxrank itself)")


@pytest.fixture(scope="session")
def cli_cache(tmp_path_factory):
    """The command line's compilation cache for the pages' commands ($JAXRANK_CACHE_DIR):
    a folder of this test session (of this worker, under xdist), never the user's."""
    return tmp_path_factory.mktemp("jaxrank-cache")


def _code_blocks(page):
    """``(kind, code)`` of the page's python and shell blocks, in the order of the page."""
    found = re.findall(rf"^```(python|{SHELL})\n(.*?)^```", page.read_text(),
                       flags=re.S | re.M)
    return [("python" if lang == "python" else "shell", code) for lang, code in found]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_code_runs_on_its_own(page, tmp_path, monkeypatch, cli_cache):
    assert not _blocks(page, "console"), (
        f"{page.name}: a ```console block; put commands in ```bash blocks (they are run) "
        "and their output in ```text blocks")
    monkeypatch.chdir(tmp_path)
    # A page may register an estimator of its own (docs/interface.md): the registry
    # is restored after the page, so that no other test sees it.
    from jaxrank._src.estimators import registry

    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    monkeypatch.setattr(registry, "_CLASSES", dict(registry._CLASSES))
    namespace = {"__name__": f"__docs_{page.stem}__"}
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["JAXRANK_CACHE_DIR"] = str(cli_cache)
    for i, (kind, code) in enumerate(_code_blocks(page), start=1):
        if kind == "python":
            try:
                exec(compile(code, f"{page.name} block {i}", "exec"), namespace)
            except Exception as e:  # pragma: no cover - the message names the block
                raise AssertionError(f"{page.name} block {i} failed: {e!r}\n{code}") from e
            continue
        for command in _command_lines(code):
            if not _not_run(page, command):
                _run_command(page, i, command, tmp_path, env)


def _run_command(page, block, command, folder, env):
    try:
        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=folder,
                           env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{page.name} block {block}: `{command}` ran over {COMMAND_TIMEOUT} s")
    if p.returncode != 0:
        pytest.fail(f"{page.name} block {block}: `{command}` failed (exit {p.returncode})\n"
                    f"stdout:\n{p.stdout[-2000:]}\nstderr:\n{p.stderr[-3000:]}")
