"""Every page of the documentation site (docs/*.md) runs on its own.

Each page's ```python blocks run in order in a namespace of their own, in a
fresh folder, so that no page depends on another page (or on the README's
quickstart); shell blocks (```bash) are not allowed in a page until the site
has a runner for them. Every page is in the site's table of contents.
"""

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md"))


def _blocks(page, lang):
    return re.findall(rf"^```{lang}\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def test_every_page_is_in_the_table_of_contents():
    index = (DOCS / "index.md").read_text()
    toc = re.search(r"^```\{toctree\}\n(.*?)^```", index, flags=re.S | re.M)
    assert toc is not None, "docs/index.md has no toctree"
    listed = {line.strip() for line in toc.group(1).splitlines()
              if line.strip() and not line.startswith(":")}
    missing = {p.stem for p in PAGES if p.stem != "index"} - listed
    assert not missing, f"pages missing from the toctree of docs/index.md: {sorted(missing)}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_code_runs_on_its_own(page, tmp_path, monkeypatch):
    assert not _blocks(page, "(?:bash|sh|shell|console)"), (
        f"{page.name}: shell blocks need the site's shell runner (not written yet)")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"__docs_{page.stem}__"}
    for i, code in enumerate(_blocks(page, "python")):
        try:
            exec(compile(code, f"{page.name} block {i + 1}", "exec"), namespace)
        except Exception as e:  # pragma: no cover - the message names the block
            raise AssertionError(f"{page.name} block {i + 1} failed: {e!r}\n{code}") from e
