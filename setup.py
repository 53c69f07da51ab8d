"""Build the optional C extension of jaxrank (project metadata is in pyproject.toml).

``jaxrank._src._maxflow`` is the Boykov-Kolmogorov max-flow with tree reuse
behind :func:`jaxrank.graph.max_marginals` (plain C against the CPython API;
no NumPy headers). ``optional=True``: without a C compiler the package still
installs and :mod:`jaxrank.graph` falls back to its pure-Python port of the
same algorithm (slow on large graphs).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jaxrank._src._maxflow",
            sources=["jaxrank/_src/_maxflow.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
