import os
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

# Two virtual CPU devices (before JAX's first computation), so the tests run
# the batched fits sharded over devices as `jaxrank sweep` does on 2 cores.
jax.config.update("jax_num_cpu_devices", 2)
# JAX's persistent compilation cache is off in the test session unless
# $JAXRANK_TEST_JAX_CACHE names a directory for it. Its files are written
# without a lock (the two xdist workers could read each other's partly
# written entries), and two CI runs lost a worker while it was on, one of them
# inside a cache write (jax 0.10: `put_executable_and_time`). A cache
# directory is configured either way, so that `jaxrank.cli.main` called in
# a test does not turn on a cache of its own in the user's home directory.
_CACHE = os.environ.get("JAXRANK_TEST_JAX_CACHE", "")
jax.config.update("jax_compilation_cache_dir",
                  _CACHE or str(Path(__file__).resolve().parents[1] / ".jax_cache"))
jax.config.update("jax_enable_compilation_cache", bool(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
# The processes the tests start (notebook kernels, workers, scripts) keep the
# estimators' persistent cache off too (tests/test_cache.py runs its own
# processes without this variable).
os.environ.setdefault("JAXRANK_NO_CACHE", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # for `import reference`

SHARED_DATA = HERE.parents[1] / "shared" / "data"


def _memory_maps():
    """Number of memory mappings of this process (Linux), else 0."""
    try:
        with open("/proc/self/maps", "rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


# Each program XLA compiles for the CPU keeps about 30 memory mappings while
# JAX's in-memory caches hold it, and a test worker compiles thousands: past
# the kernel's limit (vm.max_map_count, 65530 by default) the next compilation
# aborts the process ("Fatal Python error: Aborted" in backend_compile_and_load,
# seen in CI). Drop the compiled programs when a worker gets near the limit.
_MAX_MAPS = 30000


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    yield
    if _memory_maps() > _MAX_MAPS:
        jax.clear_caches()


@pytest.fixture
def x64():
    """Run a test in float64 (reference comparisons)."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="session")
def page_blocks():
    """The bundled real dataset, standardised."""
    from sklearn.preprocessing import StandardScaler

    import jaxrank

    X, y = jaxrank.datasets.load_page_blocks(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


def shared_data(*parts):
    """Path of a dataset in ../shared/data: skipped when absent, a failure with CI=true."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"shared dataset {path} is missing (CI=true: datasets are required)")
        pytest.skip(f"shared dataset {path} not available")
    return path
