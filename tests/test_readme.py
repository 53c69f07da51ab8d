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
