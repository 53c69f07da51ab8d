"""The vendored XLA FFI header (jaxrank/_src/native/xla_ffi) against the installed jaxlib."""

import os
import pathlib
import re

import jax
import jaxlib
import pytest

VENDORED = pathlib.Path(__file__).resolve().parents[1] / "jaxrank/_src/native/xla_ffi/c_api.h"
# The jaxlib whose header was copied (jaxrank/_src/native/xla_ffi/README.md).
VENDORED_FROM = "0.10.2"


def _api_version(text):
    major = re.search(r"#define XLA_FFI_API_MAJOR (\d+)", text)
    minor = re.search(r"#define XLA_FFI_API_MINOR (\d+)", text)
    return int(major.group(1)), int(minor.group(1))


def _installed_header():
    include_dir = getattr(getattr(jax, "ffi", None), "include_dir", None)
    if include_dir is None:
        pytest.skip("this jax has no jax.ffi.include_dir()")
    path = os.path.join(include_dir(), "xla", "ffi", "api", "c_api.h")
    if not os.path.exists(path):
        pytest.skip(f"jaxlib installs no {path}")
    return pathlib.Path(path).read_text()


def test_vendored_ffi_header_is_compatible_with_the_installed_jaxlib():
    vendored, installed = _api_version(VENDORED.read_text()), _api_version(_installed_header())
    assert vendored[0] == installed[0], (vendored, installed)
    assert vendored[1] <= installed[1], (vendored, installed)


def test_vendored_ffi_header_is_the_named_jaxlibs_copy():
    if jaxlib.__version__ != VENDORED_FROM:
        pytest.skip(f"jaxlib {jaxlib.__version__} is not {VENDORED_FROM}, the named source")
    assert VENDORED.read_text() == _installed_header()
