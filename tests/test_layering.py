"""Layers go strictly downward: kernels -> losses -> models -> solver -> estimators -> tools.

Checked on the source: every ``import`` of a ``jaxrank._src`` module (also the
lazy ones inside functions, and module names in strings, which the registry
imports with ``importlib``) must point to the same or a lower layer, the
import graph must have no cycle, and the public modules only re-export.
"""

import ast
import pathlib
import re
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "jaxrank"

# 0 types/validation, 1 kernels, 2 losses, 3 models, 4 solver, 5 estimators,
# 6 tools on top of the estimators (registry, sweep, io, data, demo).
LAYERS = {
    "types": 0, "validation": 0,
    "inference": 1, "metrics": 1, "native": 1,
    "losses": 2,
    "features": 3, "models": 3,
    "solver": 4, "dcd": 4,
    "base": 5, "apsvm": 5, "binary": 5, "aucsvm": 5, "appx": 5, "kernelrank": 5,
    "latent": 5, "high_order": 5, "graph": 1,
    "_maxflow": 1,  # C extension, imported by name
    "model_selection": 6, "registry": 6, "sweep": 6, "io": 6, "data": 6, "demo": 6,
}


def _imports(path):
    """``jaxrank._src`` modules imported anywhere in the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("jaxrank._src."):
                out.add(node.module.split(".")[2])
            elif node.module == "jaxrank._src":
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[2] for a in node.names
                       if a.name.startswith("jaxrank._src."))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and re.fullmatch(r"jaxrank\._src\.\w+", node.value)):
            out.add(node.value.split(".")[2])
    return out


def _graph():
    return {p.stem: _imports(p) for p in (SRC / "_src").glob("*.py") if p.stem != "__init__"}


def test_every_private_module_has_a_layer():
    missing = sorted(set(_graph()) - set(LAYERS))
    assert not missing, f"assign a layer to {missing} in tests/test_layering.py"


@pytest.mark.parametrize("module", sorted(p.stem for p in (SRC / "_src").glob("*.py")
                                          if p.stem != "__init__"))
def test_imports_point_to_the_same_or_a_lower_layer(module):
    for dep in _imports(SRC / "_src" / f"{module}.py"):
        assert LAYERS[dep] <= LAYERS[module], f"{module} (layer {LAYERS[module]}) imports {dep} " \
                                              f"(layer {LAYERS[dep]})"


def test_no_import_cycle():
    graph = _graph()
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "active", "import cycle: " + " -> ".join(path + [m])
        state[m] = "active"
        for d in graph.get(m, ()):
            visit(d, path + [m])
        state[m] = "done"

    for m in graph:
        visit(m, [])


def test_public_modules_only_reexport():
    for path in SRC.glob("*.py"):
        if path.stem in ("__init__", "__main__", "cli"):
            continue
        tree = ast.parse(path.read_text())
        defs = [n.name for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))]
        assert not defs, f"jaxrank/{path.name} defines {defs}; public modules only re-export"


def test_registry_strings_are_seen_as_imports():
    # The registry imports the estimators lazily by name; the checks above must see them.
    assert {"apsvm", "latent", "high_order", "kernelrank"} <= _imports(SRC / "_src" / "registry.py")


def test_command_line_imports_only_the_model_it_runs():
    # ``import jaxrank`` is lazy (PEP 562): the CLI and the APSVM estimator must not pull
    # in the other model families (start-up time of every ``jaxrank`` command, issue 12).
    code = ("import sys, jaxrank, jaxrank.cli; jaxrank.cli.build_parser(); jaxrank.ESTIMATORS['apsvm']; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('jaxrank'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert "jaxrank._src.apsvm" in out
    for lazy in ("jaxrank._src.kernelrank", "jaxrank._src.latent", "jaxrank._src.high_order",
                 "jaxrank._src.graph", "jaxrank._src.sweep", "jaxrank._src.appx"):
        assert lazy not in out, f"{lazy} imported by the CLI start-up: {out}"


def test_lazy_top_level_names_resolve():
    import jaxrank

    for name in jaxrank.__all__:
        assert getattr(jaxrank, name) is not None
        assert name in dir(jaxrank)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        jaxrank.nope
