"""Layers go strictly downward, one package per layer.

Checked on the source: every ``import`` of a ``jaxrank._src`` module (also the
lazy ones inside functions, and module names in strings, which the registry
imports with ``importlib``) must point to the same or a lower layer, the
import graph must have no cycle, and the public modules only re-export.
A module's layer is that of its package under ``jaxrank/_src`` (``oracles``,
``models``, ...) or, for a module directly in ``_src``, of its own name.
"""

import ast
import pathlib
import re
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "jaxrank"

# 0 the interface and input checks, 1 native kernels, 2 oracles and exact
# metrics (pure JAX), 3 losses, 4 structured models, 5 the solver, 6 the
# scikit-learn estimators, 7 tools on top of the estimators, 8 the command line.
LAYERS = {
    "types": 0, "validation": 0, "arrays": 0, "features": 0, "layout": 0, "cache": 0,
    "native": 1,
    "oracles": 2, "metrics": 2,
    "losses": 3,
    "models": 4,
    "solvers": 5,
    "estimators": 6,
    "base": 6, "apsvm": 6, "binary": 6, "aucsvm": 6, "appx": 6, "kernelrank": 6,
    "latent": 6, "high_order": 6,
    "io": 7, "data": 7, "demo": 7,
    "cli": 8,
}
# Layers whose modules may not import scikit-learn (the functional API below
# the estimators).
NO_SKLEARN = ("types", "validation", "arrays", "features", "native", "oracles", "metrics",
              "losses", "models", "solvers")


def _name(path):
    """``oracles.ap`` for ``jaxrank/_src/oracles/ap.py``; ``native`` for its ``__init__``."""
    parts = list(path.relative_to(SRC / "_src").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(name):
    return LAYERS[name.split(".")[0]]


def _modules():
    return sorted(p for p in (SRC / "_src").rglob("*.py") if _name(p))


def _imports(path):
    """``jaxrank._src`` modules imported anywhere in the file (dotted, below ``_src``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("jaxrank._src."):
                out.add(node.module[len("jaxrank._src."):])
            elif node.module == "jaxrank._src":
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name[len("jaxrank._src."):] for a in node.names
                       if a.name.startswith("jaxrank._src."))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and re.fullmatch(r"jaxrank\._src(\.\w+)+", node.value)):
            out.add(node.value[len("jaxrank._src."):])
    return out


def _graph():
    return {_name(p): _imports(p) for p in _modules()}


def test_every_private_module_has_a_layer():
    missing = sorted(m for m in _graph() if m.split(".")[0] not in LAYERS)
    assert not missing, f"assign a layer to {missing} in tests/test_layering.py"


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_imports_point_to_the_same_or_a_lower_layer(path):
    module = _name(path)
    for dep in _imports(path):
        assert _layer(dep) <= _layer(module), f"{module} (layer {_layer(module)}) imports " \
                                              f"{dep} (layer {_layer(dep)})"


@pytest.mark.parametrize("path", [p for p in _modules() if _name(p).split(".")[0] in NO_SKLEARN],
                         ids=_name)
def test_layers_below_the_estimators_do_not_import_sklearn(path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        assert not any(n.split(".")[0] == "sklearn" for n in names), \
            f"{_name(path)} imports scikit-learn"


def test_functional_api_loads_no_sklearn():
    # The functional API stands below the estimators: importing it (fresh process)
    # must not load scikit-learn.
    code = ("import sys, jaxrank.inference, jaxrank.losses, jaxrank.metrics, jaxrank.models, "
            "jaxrank.solvers; print(' '.join(sorted(m for m in sys.modules "
            "if m.split('.')[0] == 'sklearn')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert not out, f"scikit-learn modules loaded: {out[:5]}"


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


def test_no_module_above_800_lines():
    long = {str(p.relative_to(SRC)): n for p in (*_modules(), *SRC.glob("*.py"))
            if (n := len(p.read_text().splitlines())) > 800}
    assert not long, f"split these modules: {long}"


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
    from jaxrank._src.estimators import registry

    named = {m[len("jaxrank._src."):] for m, _ in registry._ENTRIES.values()}
    assert named <= _imports(SRC / "_src" / "estimators" / "registry.py")


def test_command_line_imports_only_the_model_it_runs():
    # ``import jaxrank`` is lazy (PEP 562): the CLI and the APSVM estimator must not pull
    # in the other model families (start-up time of every ``jaxrank`` command, issue 12).
    code = ("import sys, jaxrank, jaxrank.cli; jaxrank.cli.build_parser(); jaxrank.ESTIMATORS['apsvm']; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('jaxrank'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert "jaxrank._src.estimators.ap" in out
    for lazy in ("jaxrank._src.estimators.kernelrank", "jaxrank._src.estimators.latent", "jaxrank._src.estimators.high_order",
                 "jaxrank._src.oracles.maxflow", "jaxrank._src.estimators.sweep", "jaxrank._src.estimators.appx"):
        assert lazy not in out, f"{lazy} imported by the CLI start-up: {out}"


def test_lazy_top_level_names_resolve():
    import jaxrank

    for name in jaxrank.__all__:
        assert getattr(jaxrank, name) is not None
        assert name in dir(jaxrank)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        jaxrank.nope
