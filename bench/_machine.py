"""The line every benchmark prints first: where it ran (issue 12, item 5)."""

import os
import platform


def device_line():
    """``"jax X on <platform> (<device kind>) x N devices; <machine>, K CPUs"`` (str).

    Imports JAX (initialising its default backend); the benchmarks run on
    whatever backend JAX picks (CPU, GPU or TPU) without edits.
    """
    import jax

    devs = jax.devices()
    return (f"jax {jax.__version__} on {devs[0].platform} ({devs[0].device_kind}) x "
            f"{len(devs)} device(s); {platform.machine()}, {os.cpu_count()} CPUs")


def cpu_name():
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def simd_level():
    """NumPy's best detected SIMD level on x86 (its sorts dispatch on it), e.g. ``AVX512_SPR``."""
    import numpy

    try:
        from numpy._core._multiarray_umath import __cpu_features__ as found
    except ImportError:
        return "unknown"
    best = [k for k in ("AVX512_SPR", "AVX512_ICL", "AVX512_SKX", "AVX2", "SSE42")
            if found.get(k)]
    return f"numpy {numpy.__version__}, SIMD {best[0] if best else 'baseline'}"
