"""Model persistence: ``save`` / ``load`` (npz + JSON metadata, no pickle)."""

from __future__ import annotations

import json
import os
import tempfile
import zipfile

import numpy as np

FORMAT = "jaxrank-model"
FORMAT_VERSION = 3

# Versions load reads: 2 (before dict attributes and n_features_in_) and 3.
_READS = (2, 3)

# Parameters and fitted attributes renamed since earlier model files: read under
# their current names (the renames are listed in CHANGELOG.md).
_RENAMED = {"max_outer_iter": "cccp_max_iter", "n_outer_iter_": "n_cccp_iter_"}

# Fitted attributes every saved model has; each class declares the others it
# stores, with their checks, in ``_persist`` (jaxrank._src.estimators.base:
# StructuredSVM._persist describes the kinds, shapes and signs).
_COMMON = {"intercept_": ("weights", "T", None), "classes_": ("labels", "(2,)", None),
           "n_features_in_": ("count", "()", None)}


# An attribute of kind "arrays" (a dict of arrays) is stored as one entry per
# key, named ATTRIBUTE + _SEP + KEY.
_SEP = "::"


def _attribute_specs(cls):
    """``{name: (kind, shape, sign)}``: every attribute ``save`` writes for ``cls``."""
    return {**_COMMON, **dict(getattr(cls, "_persist", {}))}


def _saved_attributes(cls):
    return tuple(_attribute_specs(cls))


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
    fitted attributes, e.g. :class:`jaxrank.APSVMApprox`'s ``w0_`` or the
    mixtures of :class:`jaxrank.KernelRank`'s GMM scorer) as arrays,
    and a JSON string ``metadata`` with the format name and version, the
    estimator class (from the registry) and its ``get_params()`` (a
    ``devices`` parameter given as ``jax.Device`` objects is saved as their
    number). Multi-task models (fitted on a 2-D ``y``) are saved whole.

    Args:
        model: a fitted estimator of the registry (:data:`jaxrank.ESTIMATORS`).
        path: destination file name (``str`` or ``os.PathLike``).
        overwrite: replace an existing file; by default an existing file is
            an error and is left untouched.

    Raises:
        TypeError: ``model`` is not a registered estimator.
        ValueError: ``model`` is not fitted, or ``path`` is a directory.
        FileExistsError: ``path`` exists and ``overwrite`` is False.
        FileNotFoundError: the directory of ``path`` does not exist.
    """
    from jaxrank._src.estimators.registry import class_named, class_names

    name = type(model).__name__
    if class_named(name) is not type(model):
        raise TypeError(f"model must be one of {class_names()}; got {name}.")
    if not all(hasattr(model, k) for k in _COMMON):
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
    specs = _attribute_specs(type(model))
    arrays = {}
    for k in attrs:
        value = getattr(model, k)
        parts = ({f"{k}{_SEP}{key}": v for key, v in value.items()}
                 if specs[k][0] == "arrays" else {k: value})
        for entry, v in parts.items():
            a = np.asarray(v)
            if a.dtype == object:
                raise TypeError(f"attribute {k} of {name} cannot be saved (object dtype).")
            arrays[entry] = a
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot save to {path}: directory {directory} does not "
                                "exist.")
    fd, tmp = tempfile.mkstemp(suffix=".tmp.npz", dir=directory)
    os.close(fd)
    try:
        np.savez_compressed(tmp, metadata=np.array(json.dumps(meta)), **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


_F32_MAX = float(np.finfo(np.float32).max)


def _check_array(path, k, a, T, d, spec, pos_label=None):
    """Raise ``ValueError`` unless fitted attribute ``k`` is what a fit writes.

    ``spec``: ``(kind, shape, sign)`` as the class declares it.

    ``pos_label``: the model's parameter (``classes_`` is then ``[other,
    pos_label]``, not sorted, as fit sets it).
    """
    if a.dtype.kind in "cOV":
        raise ValueError(f"{path}: attribute {k} has unsupported dtype {a.dtype}.")
    if k == "coef_":
        return
    if k == "classes_":
        if a.shape != (2,):
            raise ValueError(f"{path}: classes_ must hold 2 labels; got shape {a.shape}.")
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise ValueError(f"{path}: classes_ contains NaN or infinite values.")
        chosen = pos_label is not None and a.tolist()[1] == pos_label and a[1] < a[0]
        if not (a[0] < a[1] or chosen):
            raise ValueError(f"{path}: classes_ must hold 2 distinct labels in sorted order, "
                             "or [other, pos_label] with the model's pos_label (as fit sets "
                             f"it); got {a.tolist()}.")
        return
    kind, shape, sign = spec
    want = {"()": [()], "T": [(T,)], "Td": [(T, d)], "T?": [(), (T,)]}.get(shape)
    if shape == "1d" and a.ndim != 1:
        raise ValueError(f"{path}: attribute {k} must be 1-D; got shape {a.shape}.")
    if want is not None and a.shape not in want:
        raise ValueError(f"{path}: attribute {k} must have shape "
                         f"{' or '.join(map(str, want))}; got {a.shape}.")
    if kind == "flag":
        if a.dtype != bool:
            raise ValueError(f"{path}: attribute {k} must be bool; got {a.dtype}.")
        return
    if kind == "count":
        if a.dtype.kind not in "iu" or np.any(a < 0):
            raise ValueError(f"{path}: attribute {k} must hold integers >= 0; got "
                             f"{a.dtype} {a.ravel()[:4].tolist()}.")
        return
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{path}: attribute {k} must be a real array; got {a.dtype}.")
    if kind == "trace":
        return
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{path}: attribute {k} contains NaN or infinite values.")
    if kind == "weights" and np.any(np.abs(a) > _F32_MAX):
        raise ValueError(f"{path}: attribute {k} overflows float32 (the dtype of every "
                         "fit and prediction).")
    if sign == "<= 0" and np.any(a > 0):
        raise ValueError(f"{path}: attribute {k} must be <= 0 (a fit keeps the pairwise "
                         f"weights non-positive); got a maximum of {float(np.max(a)):.6g}.")
    if sign == "> 0" and np.any(a <= 0):
        raise ValueError(f"{path}: attribute {k} must be > 0; got a minimum of "
                         f"{float(np.min(a)):.6g}.")


def _check_params(path, model):
    """The estimator's own parameter checks (those of ``fit``), on a loaded model."""
    from jaxrank._src.solvers.run import resolve_devices

    try:
        check = getattr(model, "_check_params", None)
        if check is not None:
            check()
        else:
            model._validate_params()
        if getattr(model, "devices", None) is not None:
            resolve_devices(model.devices)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: bad estimator parameters: {e}") from None


def load(path):
    """Load a model written by :func:`save`; validates everything it reads.

    Args:
        path: file name.

    Returns:
        A fitted estimator of the saved class.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is a directory, or the file is not a readable
            jaxrank model (not an npz -- a ``.npy`` array or a text/SVMlight
            data file is named as such --, missing or malformed metadata or
            arrays, unknown format version or estimator, inconsistent
            shapes, complex or non-finite weights). Every parameter passes
            the estimator's own checks (those of ``fit``: e.g. ``C`` finite
            and positive in float32, ``devices`` at most the local devices),
            and every fitted attribute must be what a fit writes: its dtype
            and shape, counts ``>= 0``, finite weights within float32, the
            constraints a fit keeps (:class:`jaxrank.HOBSVM` /
            :class:`jaxrank.HOAPSVM`: ``pairwise_coef_ <= 0`` and
            ``pairwise_intercept_ <= 0``; ``bandwidth_ > 0``), two sorted
            distinct ``classes_``.
    """
    from jaxrank._src.estimators.registry import class_named

    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory; expected a jaxrank model file.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"model file {path} does not exist.")
    with open(path, "rb") as fh:
        head = fh.read(6)
    if head.startswith(b"\x93NUMPY"):
        raise ValueError(f"{path} is a .npy array, not a jaxrank model file (an .npz archive "
                         "written by jaxrank.save); to read a data file use "
                         "jaxrank.load_data.")
    if not head.startswith(b"PK"):
        raise ValueError(f"{path} is not a readable jaxrank model file: expected an .npz "
                         "archive written by jaxrank.save (a data file, e.g. SVMlight or CSV, "
                         "is read by jaxrank.load_data).")
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
    if meta.get("format_version") not in _READS:
        raise ValueError(
            f"{path} has model format version {meta.get('format_version')!r}; this "
            f"jaxrank reads versions {', '.join(map(str, _READS))}."
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
    params = {_RENAMED.get(k, k): v for k, v in params.items()}
    attrs = [_RENAMED.get(a, a) for a in attrs]
    arrays = {_RENAMED.get(k, k): v for k, v in arrays.items()}
    allowed = set(_saved_attributes(cls))
    specs = _attribute_specs(cls)
    plain, grouped = {}, {}
    for entry, a in arrays.items():
        head, sep, key = entry.partition(_SEP)
        if not sep and specs.get(entry, ("",))[0] != "arrays":
            plain[entry] = a
        elif specs.get(head, ("",))[0] == "arrays" and key.isidentifier():
            grouped.setdefault(head, {})[key] = a
        else:
            raise ValueError(f"{path}: unexpected entry {entry!r} for {cls.__name__}.")
    required = {"intercept_", "classes_"}
    if not required <= set(attrs) or not set(attrs) <= allowed \
            or set(attrs) != set(plain) | set(grouped) \
            or not ({"coef_", "n_features_in_"} & set(attrs)):
        raise ValueError(f"{path}: the stored attributes {sorted(arrays)} do not match the "
                         f"{cls.__name__} format.")
    # Tasks T: the rows of the weights, else the entries of the intercept.
    coef = plain.get("coef_")
    icpt = plain["intercept_"]
    if coef is None and (icpt.ndim != 1 or icpt.shape[0] < 1):
        raise ValueError(f"{path}: intercept_ must be a 1-D array of one value per task; got "
                         f"shape {icpt.shape}.")
    T = icpt.shape[0] if coef is None else coef.shape[0]
    if coef is not None:
        if coef.ndim != 2 or coef.shape[0] < 1 or coef.shape[1] < 1 or coef.dtype.kind != "f":
            raise ValueError(f"{path}: coef_ must be a 2-D float array; got {coef.dtype} "
                             f"{coef.shape}.")
        if not np.all(np.isfinite(coef)):
            raise ValueError(f"{path}: weights contain NaN or infinite values.")
        if np.any(np.abs(coef) > _F32_MAX):
            raise ValueError(f"{path}: coef_ overflows float32 (the dtype of every fit and "
                             "prediction).")
    d = coef.shape[1] if coef is not None else None
    if "n_features_in_" in plain:
        _check_array(path, "n_features_in_", plain["n_features_in_"], T, d,
                     specs["n_features_in_"])
        saved = int(plain["n_features_in_"])
        if saved < 1 or (d is not None and saved != d):
            raise ValueError(f"{path}: n_features_in_ = {saved} does not match the model's "
                             f"{d} weight columns." if d is not None else
                             f"{path}: n_features_in_ must be >= 1; got {saved}.")
        d = saved
    for k in plain:
        _check_array(path, k, plain[k], T, d, specs[k], params.get("pos_label"))
    for k, parts in grouped.items():
        for key, a in parts.items():
            if a.dtype.kind != "f" or not np.all(np.isfinite(a)):
                raise ValueError(f"{path}: attribute {k}[{key!r}] must be a finite float "
                                 f"array; got {a.dtype}.")
    if arrays["intercept_"].dtype.kind != "f":
        raise ValueError(f"{path}: intercept_ must be a float array.")
    try:
        model = cls(**params)
    except TypeError as e:
        raise ValueError(f"{path}: bad estimator parameters: {e}") from None
    _check_params(path, model)
    missing = sorted(set(getattr(model, "_required_attributes", lambda: ())()) - set(attrs))
    if missing:
        raise ValueError(f"{path}: a fitted {cls.__name__} with these parameters has "
                         f"{', '.join(missing)}; the file lacks it.")
    for k, a in plain.items():
        setattr(model, k, a.item() if a.ndim == 0 else a)
    for k, parts in grouped.items():
        setattr(model, k, dict(parts))
    check = getattr(model, "_check_loaded", None)
    if check is not None:
        try:
            check(d)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
    if getattr(model, "multi_output_", False) is False and T != 1 and "multi_output_" in attrs:
        raise ValueError(f"{path}: a single-task model must have one row of coef_.")
    model.n_features_in_ = d
    return model
