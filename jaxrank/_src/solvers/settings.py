"""The solver's settings: one object, filled in from the model's suggestions.

:class:`Solver` holds what the structured SVM solver (:func:`jaxrank.solvers.fit`,
:func:`jaxrank.solvers.fit_many`) is told besides the model and its data: the
stopping rule (``tol``, ``max_iter``), the plane cache and its inner steps,
the visit budget of the hinge block and the seed of its visiting order. A
model may suggest the three tuning values (``cache``, ``inner_steps``,
``hinge_visits``) through a ``solver_defaults`` mapping; a value given to
:class:`Solver` wins over the model's suggestion, which wins over
:data:`DEFAULTS`.

``Solver`` is a pytree whose one leaf is ``tol``: a jitted fit traces ``tol``
(a sweep over it compiles once) and keeps every other field static.
"""

from __future__ import annotations

import dataclasses
from numbers import Integral, Real
from typing import Any

import jax
import numpy as np

# The values of the tuning fields when neither the Solver nor the model sets them.
DEFAULTS = {"cache": 32, "inner_steps": 32, "hinge_visits": 5}


# Model attributes that used to hold these settings: a model that still
# defines one is refused (it would be ignored).
_TUNING = tuple(DEFAULTS)


def _check_int(name, value, low, *, optional):
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (Integral, np.integer)):
        raise TypeError(f"Solver.{name} must be an int{' or None' if optional else ''}; "
                        f"got {type(value).__name__}.")
    if value < low:
        raise ValueError(f"Solver.{name} must be >= {low}; got {value!r}.")


@dataclasses.dataclass(frozen=True)
class Solver:
    """Settings of the structured SVM solver (:func:`jaxrank.solvers.fit`).

    Attributes:
        tol: relative duality gap at which a fit stops, a float ``>= 0``
            (the pytree's one leaf: traced by the jitted drivers, so it may
            also be a ``[]`` array). A converged fit's objective is within
            ``tol`` (relative) of the exact optimum.
        max_iter: static bound on the iterations (oracle calls) of a fit
            (``>= 1``).
        cache: static floor on the cached planes (``>= 1``; the solver grows
            the cache towards ``dim + 2`` planes,
            :func:`jaxrank.solvers.plane_cache_size`); ``None``: the model's
            suggestion, else ``DEFAULTS["cache"]``.
        inner_steps: static pairwise (away/toward) steps among the cached
            planes per oracle call (``>= 0``); ``None`` as for ``cache``.
        hinge_visits: static budget of one call of dual coordinate ascent on
            the hinge terms per iteration, in passes over the ``m`` terms
            (``>= 1``; unused without hinge terms); ``None`` as for ``cache``.
        seed: static seed of the hinge block's visiting order (int).

    Raises:
        TypeError: a static field that is not an int (``None`` allowed for
            the three tuning fields), a ``tol`` that is a string.
        ValueError: a field below its bound, a ``tol`` given as a number
            that is negative or not finite.

    References:
        The settings of Shah, Kolmogorov, Lampert, CVPR 2015 (multi-plane
        cache and its inner steps) and Hsieh et al., ICML 2008 (dual
        coordinate descent); optimistix's solver objects for the shape of
        the API.
    """

    tol: Any = 1e-4
    max_iter: int = 2000
    cache: int | None = None
    inner_steps: int | None = None
    hinge_visits: int | None = None
    seed: int = 0

    def __post_init__(self):
        _check_int("max_iter", self.max_iter, 1, optional=False)
        _check_int("cache", self.cache, 1, optional=True)
        _check_int("inner_steps", self.inner_steps, 0, optional=True)
        _check_int("hinge_visits", self.hinge_visits, 1, optional=True)
        _check_int("seed", self.seed, -(2**63), optional=False)
        tol = self.tol
        if isinstance(tol, (str, bytes)):
            raise TypeError(f"Solver.tol must be a float >= 0; got {type(tol).__name__}.")
        # Only a number given as such is checked: JAX rebuilds the object
        # with tracers, placeholders or mapped leaves (e.g. bool masks) while
        # it transforms a pytree, and those pass unchecked.
        number = isinstance(tol, (Real, np.floating, np.integer)) and not isinstance(tol, bool)
        if number and not (np.isfinite(float(tol)) and float(tol) >= 0):
            raise ValueError(f"Solver.tol must be a finite float >= 0; got {tol!r}.")

    def for_model(self, model) -> Solver:
        """These settings with every ``None`` tuning field filled in for ``model``.

        From ``model.solver_defaults`` (an optional mapping with some of the
        keys ``cache``, ``inner_steps``, ``hinge_visits``), else
        :data:`DEFAULTS`.

        Raises:
            ValueError: ``model.solver_defaults`` has another key, or a value
                out of range (as for the constructor).
            TypeError: ``model.solver_defaults`` is not a mapping, or the
                model still defines one of the tuning fields itself (a
                model's ``cache``, ``inner_steps`` or ``hinge_visits`` is no
                longer read: suggest them through ``solver_defaults``).
        """
        old = [k for k in _TUNING if hasattr(model, k)]
        if old:
            raise TypeError(
                f"{type(model).__name__} defines {', '.join(old)}: the solver no longer reads "
                "these from the model. Suggest them as solver_defaults = {...} on the model, "
                "or pass jaxrank.solvers.Solver(...) to the fit.")
        hints = getattr(model, "solver_defaults", None) or {}
        if not hasattr(hints, "keys"):
            raise TypeError(f"{type(model).__name__}.solver_defaults must be a mapping; "
                            f"got {type(hints).__name__}.")
        unknown = sorted(set(hints) - set(_TUNING))
        if unknown:
            raise ValueError(f"{type(model).__name__}.solver_defaults has unknown key(s) "
                             f"{unknown}; expected some of {list(_TUNING)}.")
        filled = {k: (getattr(self, k) if getattr(self, k) is not None
                      else hints.get(k, DEFAULTS[k])) for k in _TUNING}
        if all(filled[k] == getattr(self, k) for k in _TUNING):
            return self
        return dataclasses.replace(self, **filled)

    def static(self) -> tuple:
        """The static fields, ``(max_iter, cache, inner_steps, hinge_visits, seed)``."""
        return (self.max_iter, self.cache, self.inner_steps, self.hinge_visits, self.seed)


jax.tree_util.register_dataclass(
    Solver, data_fields=["tol"],
    meta_fields=["max_iter", "cache", "inner_steps", "hinge_visits", "seed"])


def as_solver(solver) -> Solver:
    """``solver``, or the default :class:`Solver` for ``None``.

    Raises:
        TypeError: anything else.
    """
    if solver is None:
        return Solver()
    if not isinstance(solver, Solver):
        raise TypeError(f"solver must be a jaxrank.solvers.Solver or None; "
                        f"got {type(solver).__name__}.")
    return solver
