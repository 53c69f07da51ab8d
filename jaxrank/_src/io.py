"""Model persistence: ``save`` / ``load`` (npz + JSON metadata, no pickle)."""

from __future__ import annotations

import json
import os
import tempfile
import zipfile

import numpy as np

FORMAT = "jaxrank-model"
FORMAT_VERSION = 2

# Fitted attributes every saved model has (plus the class's ``_persist``).
_COMMON = ("coef_", "intercept_", "classes_")


def _saved_attributes(cls):
    extra = tuple(getattr(cls, "_persist", ()))
    if hasattr(cls, "dual_objective_") or "StructuredSVM" in [c.__name__ for c in cls.__mro__]:
        base = ("multi_output_", "n_iter_", "objective_", "dual_objective_", "converged_")
    else:
        base = ()
    return _COMMON + base + extra


def _to_json(v):
    import jax

    if isinstance(v, jax.Device):
        return 1  # devices= given as device objects: saved as their number
    if isinstance(v, (list, tuple)) and v and all(isinstance(d, jax.Device) for d in v):
        return len(v)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    return v


def save(model, path, *, overwrite=False):
    """Save a fitted model to ``path`` (``.npz``: arrays plus JSON metadata; no pickle).

    The archive holds every attribute the estimator class persists (its
    weights, ``classes_``, the solver's certificates and the class's own
    fitted attributes, e.g. :class:`jaxrank.APSVMApprox`'s ``w0_``) as arrays,
    and a JSON string ``metadata`` with the format name and version, the
    estimator class (from the registry) and its ``get_params()`` (a
    ``devices`` parameter given as ``jax.Device`` objects is saved as their
    number). Multi-task models (fitted on a 2-D ``y``) are saved whole.

    Args:
        model: a fitted estimator of the registry (:data:`jaxrank.ESTIMATORS`);
            ``KernelRank`` with the linear scorer only.
        path: destination file name (``str`` or ``os.PathLike``).
        overwrite: replace an existing file; by default an existing file is
            an error and is left untouched.

    Raises:
        TypeError: ``model`` is not a registered estimator (or a GMM KernelRank).
        ValueError: ``model`` is not fitted, or ``path`` is a directory.
        FileExistsError: ``path`` exists and ``overwrite`` is False.
    """
    from jaxrank._src.registry import class_named, class_names

    name = type(model).__name__
    if class_named(name) is not type(model):
        raise TypeError(f"model must be one of {class_names()}; got {name}.")
    if name == "KernelRank" and getattr(model, "scorer", "linear") != "linear":
        raise TypeError("only KernelRank(scorer='linear') can be saved; the GMM scorer cannot.")
    if not hasattr(model, "coef_"):
        raise ValueError("model is not fitted; call fit before save.")
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory; expected a model file name.")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True (CLI: --force) to replace it.")
    attrs = [k for k in _saved_attributes(type(model)) if hasattr(model, k)]
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": name,
        "params": {k: _to_json(v) for k, v in model.get_params().items()},
        "attributes": attrs,
    }
    arrays = {}
    for k in attrs:
        a = np.asarray(getattr(model, k))
        if a.dtype == object:
            raise TypeError(f"attribute {k} of {name} cannot be saved (object dtype).")
        arrays[k] = a
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(suffix=".tmp.npz", dir=directory)
    os.close(fd)
    try:
        np.savez_compressed(tmp, metadata=np.array(json.dumps(meta)), **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _check_array(path, k, a, T, d):
    if a.dtype.kind in "cOV":
        raise ValueError(f"{path}: attribute {k} has unsupported dtype {a.dtype}.")
    if k == "coef_":
        return
    if k == "classes_":
        if a.shape != (2,):
            raise ValueError(f"{path}: classes_ must hold 2 labels; got shape {a.shape}.")
        return
    if k == "intercept_" and a.shape != (T,):
        raise ValueError(f"{path}: intercept_ must have shape ({T},); got {a.shape}.")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)) and k not in ("objective_",
                                                                      "dual_objective_"):
        raise ValueError(f"{path}: attribute {k} contains NaN or infinite values.")


def load(path):
    """Load a model written by :func:`save`; validates everything it reads.

    Args:
        path: file name.

    Returns:
        A fitted estimator of the saved class.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is a directory, or the file is not a readable
            jaxrank model (not an npz, missing or malformed metadata or
            arrays, unknown format version or estimator, bad parameters,
            inconsistent shapes, complex or non-finite weights).
    """
    from jaxrank._src.registry import class_named

    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory; expected a jaxrank model file.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"model file {path} does not exist.")
    try:
        with np.load(path, allow_pickle=False) as data:
            files = set(data.files)
            if "metadata" not in files:
                raise ValueError("missing entry 'metadata'")
            meta = json.loads(str(data["metadata"]))
            arrays = {k: np.array(data[k]) for k in files - {"metadata"}}
    except (OSError, zipfile.BadZipFile, EOFError, json.JSONDecodeError, KeyError) as e:
        raise ValueError(f"{path} is not a readable jaxrank model file: {e}") from None
    except ValueError as e:
        raise ValueError(f"{path} is not a readable jaxrank model file: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a jaxrank model file (bad metadata).")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has model format version {meta.get('format_version')!r}; this "
            f"jaxrank reads version {FORMAT_VERSION}."
        )
    name = meta.get("estimator")
    cls = class_named(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"{path}: unknown estimator {meta.get('estimator')!r}.")
    params, attrs = meta.get("params", {}), meta.get("attributes", [])
    if not isinstance(params, dict):
        raise ValueError(f"{path}: metadata 'params' must be a JSON object.")
    if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
        raise ValueError(f"{path}: metadata 'attributes' must be a list of names.")
    allowed = set(_saved_attributes(cls))
    if not set(_COMMON) <= set(attrs) or not set(attrs) <= allowed or set(attrs) != set(arrays):
        raise ValueError(f"{path}: the stored attributes {sorted(arrays)} do not match the "
                         f"{cls.__name__} format.")
    coef = arrays["coef_"]
    if coef.ndim != 2 or coef.shape[0] < 1 or coef.shape[1] < 1 or coef.dtype.kind != "f":
        raise ValueError(f"{path}: coef_ must be a 2-D float array; got {coef.dtype} "
                         f"{coef.shape}.")
    if not np.all(np.isfinite(coef)):
        raise ValueError(f"{path}: weights contain NaN or infinite values.")
    T, d = coef.shape
    for k in attrs:
        _check_array(path, k, arrays[k], T, d)
    if arrays["intercept_"].dtype.kind != "f":
        raise ValueError(f"{path}: intercept_ must be a float array.")
    try:
        model = cls(**params)
        model._validate_params()
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: bad estimator parameters: {e}") from None
    for k in attrs:
        a = arrays[k]
        setattr(model, k, a.item() if a.ndim == 0 else a)
    if getattr(model, "multi_output_", False) is False and T != 1 and "multi_output_" in attrs:
        raise ValueError(f"{path}: a single-task model must have one row of coef_.")
    model.n_features_in_ = d
    return model
