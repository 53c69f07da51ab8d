"""Sphinx configuration of the jaxrank documentation.

Build (CI does, with warnings as errors)::

    pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Markdown pages are read by MyST; the API reference is generated from the
docstrings (Google style, read by napoleon).
"""

import os
import re

project = "jaxrank"
author = "jaxrank authors"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", ".venv*"]
html_theme = "alabaster"

# -- autodoc: the public modules define __all__, which autodoc follows (the
# lazily re-exported names of ``jaxrank`` are documented under ``jaxrank.``).
autodoc_default_options = {"members": True, "member-order": "bysource",
                           "show-inheritance": True}
autodoc_typehints = "description"
autodoc_class_signature = "mixed"

# -- napoleon (Google style); "Attributes:" sections become ``.. attribute::``.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_include_init_with_doc = False
napoleon_use_rtype = False
napoleon_use_ivar = False

# -- MyST (docs/*.md)
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

_SKLEARN_REQUEST = re.compile(r"^set_\w+_request$")


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn adds set_fit_request/set_score_request/... (metadata routing)
    # to every estimator; their docstrings use scikit-learn's own glossary.
    if what == "class" and _SKLEARN_REQUEST.match(name):
        return True
    # NamedTuple field properties ("Alias for field number N"): the class's
    # "Attributes:" section documents each field already.
    doc = getattr(obj, "__doc__", None) or ""
    if what == "class" and doc.startswith("Alias for field number"):
        return True
    return skip


# -- ``{cli-help}``: the command-line reference (docs/cli.md), generated from the
# parser itself, so that it cannot drift from the code.

# Width of the generated help text (argparse wraps at $COLUMNS - 2).
_CLI_HELP_COLUMNS = "90"


def cli_parsers():
    """``{"": the parser of ``jaxrank``, "train": that of ``jaxrank train``, ...}``.

    The subcommands are the choices of the parser's one subparsers action.
    """
    import argparse

    from jaxrank.cli import build_parser

    parser = build_parser()
    parsers = {"": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.update(action.choices)
    return parsers


def _cli_help_directive():
    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class CliHelp(SphinxDirective):
        """``{cli-help} [SUBCOMMAND]``: the ``--help`` text of ``jaxrank [SUBCOMMAND]``."""

        optional_arguments = 1
        has_content = False

        def run(self):
            import inspect

            import jaxrank._src.cli.main as main
            import jaxrank._src.cli.options as options
            import jaxrank._src.estimators.registry as registry

            name = self.arguments[0] if self.arguments else ""
            parsers = cli_parsers()
            if name not in parsers:
                raise self.error(f"cli-help: jaxrank has no subcommand {name!r}; it has "
                                 f"{sorted(k for k in parsers if k)}.")
            # Read this page again when the parser's code changes.
            for module in (main, options, registry):
                self.env.note_dependency(inspect.getsourcefile(module))
            saved = os.environ.get("COLUMNS")
            os.environ["COLUMNS"] = _CLI_HELP_COLUMNS
            try:
                text = parsers[name].format_help()
            finally:
                if saved is None:
                    del os.environ["COLUMNS"]
                else:
                    os.environ["COLUMNS"] = saved
            return [nodes.literal_block(text, text, language="text")]

    return CliHelp


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.add_directive("cli-help", _cli_help_directive())
