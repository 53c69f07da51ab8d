"""Per-sample side information of an estimator, declared once per class.

Some rankers need more than ``(X, y)``: the query of each sample (APSVM's
mean AP over queries), the bag of each instance (the latent models), the
graph over the samples (HOB-SVM, HOAP-SVM) or the real descriptors of each
padded set (KernelRank's GMM scorer). Each estimator class declares its one
side input as ``side_input = SideInput(...)`` (``None``: it takes none), and
every consumer reads the declaration instead of the class:

* ``fit``, ``score`` (and ``decision_function``/``predict`` where
  ``at_predict``) take it as the keyword ``name``;
* :func:`jaxrank.sweep` takes it by the same keyword and keeps the units it
  names (queries, bags, connected components of the graph) whole in every
  fold (:meth:`SideInput.units`);
* the ``jaxrank`` command reads it from the data file's ``qid:`` column
  (queries, bags) or from ``--edges FILE`` (:attr:`SideInput.cli_source`);
* scikit-learn's metadata routing passes it (``set_fit_request(name=True)``)
  where it is sample-aligned (ids and masks; not a graph, whose ``[m, 2]``
  rows are not samples);
* :meth:`SideInput.take` restricts it to a subset of the samples (a fold).
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np

# kind -> (what the unit of the side input is, how the CLI reads it)
KINDS = {
    "queries": "qid",  # [n] query ids: one ranking per query (MAP)
    "bags": "qid",  # [n] bag ids: the sample is the bag, its instances the candidates
    "edges": "--edges",  # [m, 2] sample pairs (or an [n, n] adjacency): the sample graph
    "descriptor_mask": None,  # [n, L] bool: the real rows of each padded descriptor set
}


@dataclasses.dataclass(frozen=True)
class SideInput:
    """The per-sample side input one estimator class takes (module docstring).

    Args:
        name: the keyword of ``fit`` and ``score`` (and of
            ``decision_function``/``predict`` when ``at_predict``), e.g.
            ``"groups"``, ``"bags"``, ``"edges"``, ``"mask"``.
        kind: ``"queries"`` (``[n]`` integer query ids), ``"bags"`` (``[n]``
            hashable bag ids), ``"edges"`` (``[m, 2]`` integer sample pairs or
            a ``scipy.sparse`` ``[n, n]`` adjacency) or ``"descriptor_mask"``
            (``[n, L]`` bool).
        required: ``fit`` refuses to run without it.
        at_predict: ``decision_function`` and ``predict`` take it too.

    Raises:
        ValueError: an unknown ``kind``, an empty ``name``.
    """

    name: str
    kind: str
    required: bool = False
    at_predict: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}; got {self.kind!r}.")
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be a keyword (an identifier); got {self.name!r}.")

    @property
    def cli_source(self):
        """``"qid"`` (the data file's ``qid:`` column), ``"--edges"`` or ``None``."""
        return KINDS[self.kind]

    def units(self, value, n):
        """``[n]`` int64 id of the unit each sample belongs to, or ``None``.

        Queries and bags are their own units; a graph's units are its
        connected components (``scipy.sparse.csgraph``), so a fold that
        keeps units whole cuts no edge. A descriptor mask groups nothing
        (``None``).

        Args:
            value: the side input as ``fit`` takes it (shapes in the class
                docstring).
            n: the number of samples.

        Raises:
            ValueError, TypeError: a value ``fit`` would refuse (the same
                checks and messages).
        """
        if self.kind == "descriptor_mask":
            return None
        if self.kind == "edges":
            from scipy.sparse import coo_matrix
            from scipy.sparse.csgraph import connected_components

            from jaxrank._src.oracles.maxflow import check_edges

            e = check_edges(value, n, self.name)
            A = coo_matrix((np.ones(e.shape[0]), (e[:, 0], e[:, 1])), shape=(n, n))
            return connected_components(A, directed=False)[1].astype(np.int64)
        if self.kind == "bags":
            from jaxrank._src.estimators.bags import check_bags

            return check_bags(value, n, self.name)
        from jaxrank._src.estimators.base import check_groups

        return check_groups(value, n, self.name).astype(np.int64)

    def take(self, value, rows, n):
        """The side input of the samples ``rows`` (in that order), as ``fit`` takes it.

        Args:
            value: the side input of all ``n`` samples.
            rows: ``[k]`` distinct sample indices (int) or an ``[n]`` bool mask.
            n: the number of samples.

        Returns:
            ids and masks: ``value[rows]``; a graph: the ``[m', 2]`` int64
            edges with both ends in ``rows``, renumbered ``0..k-1`` in the order
            of ``rows`` (the induced subgraph).

        Raises:
            ValueError: ``rows`` out of range or repeated, or a bool mask not
                of length ``n``; a value ``fit`` would refuse (edges).
        """
        r = np.asarray(rows)
        if r.dtype == bool:
            if r.shape != (n,):
                raise ValueError(f"rows must be [{n}] bool or sample indices; got bool "
                                 f"shape {r.shape}.")
            r = np.flatnonzero(r)
        if r.ndim != 1 or (r.size and (r.dtype.kind not in "iu" or r.min() < 0
                                       or r.max() >= n)):
            raise ValueError(f"rows must be distinct indices in 0..{n - 1}; got {rows!r}.")
        if np.unique(r).size != r.size:
            raise ValueError("rows must not repeat a sample.")
        if self.kind != "edges":
            return np.asarray(value)[r]
        from jaxrank._src.oracles.maxflow import check_edges

        e = check_edges(value, n, self.name)
        new = np.full(n, -1, np.int64)
        new[r] = np.arange(r.size)
        e = new[e]
        return e[(e >= 0).all(axis=1)]


def check_side_input(cls):
    """Check that ``cls.side_input`` matches the signatures of its methods.

    ``fit`` and ``score`` (and ``decision_function``/``predict`` when
    ``at_predict``) must take the side input as the keyword-only parameter
    ``name``, without a default in ``fit`` exactly when it is ``required``.

    Raises:
        TypeError: ``side_input`` that is neither ``None`` nor a
            :class:`SideInput`, or a method whose signature disagrees.
    """
    side = getattr(cls, "side_input", None)
    if side is None:
        return
    if not isinstance(side, SideInput):
        raise TypeError(f"{cls.__name__}.side_input must be None or a jaxrank.SideInput; got "
                        f"{type(side).__name__}.")
    methods = ("fit", "score") + (("decision_function", "predict") if side.at_predict else ())
    for m in methods:
        p = inspect.signature(getattr(cls, m)).parameters.get(side.name)
        if p is None or p.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"{cls.__name__}.{m} must take the side input as the keyword-only "
                            f"parameter {side.name!r} (its side_input).")
        if m == "fit" and (p.default is inspect.Parameter.empty) != side.required:
            raise TypeError(f"{cls.__name__}.fit: {side.name!r} has "
                            f"{'no ' if p.default is inspect.Parameter.empty else 'a '}default "
                            f"but side_input.required is {side.required}.")
