"""JAX's persistent compilation cache for the Python API (jaxrank.use_compilation_cache).

Each case runs fits in fresh Python processes (the cache is per process and
the test session keeps it off), with the cache folder in a temporary folder.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import jaxrank

FIT = """
import sys, numpy as np, jaxrank
{before}
rng = np.random.default_rng(0)
X = rng.normal(size=(120, 5)).astype(np.float32)
y = (X[:, 0] + rng.normal(size=120) > 1).astype(int)
m = jaxrank.APSVM(C=10.0).fit(X, y)
np.save(sys.argv[1], m.coef_)
"""


def _run(tmp_path, name, env_extra, before=""):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAXRANK_", "JAX_", "XLA_"))}
    env.update(env_extra)
    out = tmp_path / f"{name}.npy"
    p = subprocess.run([sys.executable, "-c", FIT.format(before=before), str(out)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return np.load(out), p.stderr


def _entries(folder):
    jax_dir = folder / "jax"
    return sorted(p.name for p in jax_dir.iterdir()) if jax_dir.is_dir() else []


def test_second_process_loads_the_first_ones_programs(tmp_path):
    cache = tmp_path / "cache"
    env = {"JAXRANK_CACHE_DIR": str(cache)}
    w1, _ = _run(tmp_path, "first", env)
    written = _entries(cache)
    assert any(name.startswith("jit_fit") for name in written), written
    assert oct(os.stat(cache).st_mode & 0o777) == oct(0o700)
    w2, _ = _run(tmp_path, "second", env)
    assert _entries(cache) == written  # every program came from the cache
    np.testing.assert_array_equal(w1, w2)


def test_opt_out_by_environment_and_by_call(tmp_path):
    cache = tmp_path / "cache"
    _run(tmp_path, "env", {"JAXRANK_CACHE_DIR": str(cache), "JAXRANK_NO_CACHE": "1"})
    assert not cache.exists()
    _run(tmp_path, "call", {"JAXRANK_CACHE_DIR": str(cache)},
         before="jaxrank.use_compilation_cache(enabled=False)")
    assert not cache.exists()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX modes")
def test_a_folder_others_can_write_is_not_used(tmp_path):
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    _, err = _run(tmp_path, "open", {"JAXRANK_CACHE_DIR": str(cache)})
    assert "not using the compilation cache" in err and "writable by other users" in err
    assert _entries(cache) == []


def test_bad_arguments():
    with pytest.raises(TypeError, match="enabled"):
        jaxrank.use_compilation_cache(enabled="no")
    with pytest.raises(TypeError, match="directory"):
        jaxrank.use_compilation_cache(3)
