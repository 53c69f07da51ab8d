"""Sphinx configuration of the jaxrank documentation.

Build (CI does, with warnings as errors)::

    pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Markdown pages are read by MyST; the API reference is generated from the
docstrings (Google style, read by napoleon).
"""

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


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
