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
