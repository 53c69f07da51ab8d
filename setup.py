"""Build of jaxrank's native CPU kernels (metadata lives in pyproject.toml).

Compiles ``jaxrank/_src/native/dcd.c``, ``jaxrank/_src/native/rank.c`` and
``jaxrank/_src/native/qp.c`` (plain C99, no Python API) into the shared library
``jaxrank/_src/native/_kernels<EXT_SUFFIX>``, which ``jaxrank/_src/native/__init__.py`` loads with
ctypes and registers as XLA FFI targets (the DCD passes; the integer stages of
the AP and ROC-area oracles; the solver's cached-plane QP). Works for ``pip install .``
(the library goes into the wheel) and ``pip install -e .`` (setuptools builds
it next to the source). In a checkout without installing:
``python setup.py build_ext --inplace``.

``jaxrank/_src/native/_maxflow.c`` (against the CPython API, no NumPy headers) is
the Boykov-Kolmogorov max-flow with tree reuse behind
:func:`jaxrank.graph.max_marginals`.

Both extensions are optional: if no C compiler is available the install still
succeeds and jaxrank falls back to its XLA path (with a warning) and to a pure-Python port of the
max-flow (slow on large graphs).
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    """Compiler flags by compiler family; no ``-march=native`` (wheels move)."""

    def build_extensions(self):
        if self.compiler.compiler_type == "msvc":
            args = ["/O2"]
        else:
            args = ["-std=c99", "-O3", "-fno-math-errno", "-fvisibility=hidden"]
        for ext in self.extensions:
            ext.extra_compile_args = args
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "jaxrank._src.native._kernels",
            sources=["jaxrank/_src/native/dcd.c", "jaxrank/_src/native/rank.c", "jaxrank/_src/native/qp.c"],
            depends=["jaxrank/_src/native/xla_ffi/c_api.h", "jaxrank/_src/native/ffi_glue.h"],
            include_dirs=["jaxrank/_src/native"],
            # a plain C library, not a Python module: nothing to export on Windows
            export_symbols=[] if sys.platform == "win32" else None,
            optional=True,
        ),
        Extension(
            "jaxrank._src.native._maxflow",
            sources=["jaxrank/_src/native/_maxflow.c"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": BuildExt},
)
