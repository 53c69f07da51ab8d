"""Max-marginals of binary pairwise supermodular scores (public API).

* :func:`max_marginals` — ``m[i, l] = max_{y: y_i = l} S(y)`` for ``S(y) =
  sum_i unary[i, y_i] + sum_e pairwise[e] [y_i != y_j]``, ``pairwise <= 0``:
  enumeration of small connected components (an XLA kernel) and graph cuts
  for large ones (Boykov-Kolmogorov in C, search trees reused between the
  clamped cuts), ``method="auto"``.
* :func:`graph_layout`, :class:`GraphLayout` — a graph prepared once on the
  host; :func:`layout_max_marginals`, :func:`layout_map`, :class:`Marginals`
  — the jittable kernels on it (graph cuts through ``jax.pure_callback``).
* :data:`METHODS`, :func:`has_c_extension`.

See :mod:`jaxrank._src.oracles.maxflow` for the back-ends, their licences and the
integer scaling of the OR-tools back-end.
"""

from jaxrank._src.oracles.maxflow import (
    GRAPH_CUT_METHODS,
    METHODS,
    GraphLayout,
    Marginals,
    graph_layout,
    has_c_extension,
    layout_map,
    layout_max_marginals,
    max_marginals,
)

__all__ = [
    "GRAPH_CUT_METHODS",
    "METHODS",
    "GraphLayout",
    "Marginals",
    "graph_layout",
    "has_c_extension",
    "layout_map",
    "layout_max_marginals",
    "max_marginals",
]
