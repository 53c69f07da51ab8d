"""Model persistence (npz + JSON, no pickle) and data-file loading."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

FORMAT = "jaxrank-model"
FORMAT_VERSION = 1

_ARRAYS = ("coef_", "intercept_", "classes_")
_SCALARS = ("n_iter_", "objective_", "dual_objective_", "converged_", "n_features_in_")


def _registry():
    from jaxrank._src.appx import APSVMApprox
    from jaxrank._src.estimators import APSVM, BinarySVM
    from jaxrank._src.kernelrank import AUCSVM, KernelRank

    return {
        "APSVM": APSVM,
        "APSVMApprox": APSVMApprox,
        "AUCSVM": AUCSVM,
        "BinarySVM": BinarySVM,
        "KernelRank": KernelRank,
    }


def save(model, path, *, overwrite=False):
    """Save a fitted linear model to ``path`` (``.npz``; no pickle).

    The file is a NumPy ``.npz`` archive holding the fitted arrays
    (``coef_``, ``intercept_``, ``classes_``) and a JSON string
    ``metadata`` with the format name, format version, the estimator class and
    its ``get_params()``.

    Args:
        model: a fitted single-task :class:`jaxrank.APSVM`,
            :class:`jaxrank.BinarySVM`, :class:`jaxrank.APSVMApprox`,
            :class:`jaxrank.AUCSVM` or linear :class:`jaxrank.KernelRank`.
        path: destination file name (``str`` or ``os.PathLike``).
        overwrite: replace an existing file; by default an existing file is
            an error and is left untouched.

    Raises:
        TypeError: ``model`` is not a supported estimator.
        ValueError: ``model`` is not fitted.
        FileExistsError: ``path`` exists and ``overwrite`` is False.
    """
    name = type(model).__name__
    if name not in _registry():
        raise TypeError(f"model must be one of {sorted(_registry())}; got {name}.")
    if name == "KernelRank" and getattr(model, "scorer", "linear") != "linear":
        raise TypeError("only KernelRank(scorer='linear') can be saved; the GMM scorer cannot.")
    if not hasattr(model, "coef_"):
        raise ValueError("model is not fitted; call fit before save.")
    if np.ndim(model.coef_) != 2 or np.shape(model.coef_)[0] != 1:
        raise ValueError(
            "only single-task models can be saved; this model has "
            f"{np.shape(model.coef_)[0]} rankers (one per label column): save each "
            "column's model separately."
        )
    path = os.fspath(path)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True (CLI: --force) to replace it.")
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": name,
        "params": model.get_params(),
        "attributes": {k: _to_json(getattr(model, k)) for k in _SCALARS if hasattr(model, k)},
    }
    arrays = {k: np.asarray(getattr(model, k)) for k in _ARRAYS}
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, metadata=np.array(json.dumps(meta)), **arrays)
    os.replace(tmp, path)


def _to_json(v):
    if isinstance(v, (np.generic,)):
        return v.item()
    return v


def load(path):
    """Load a model written by :func:`save`; validates everything it reads.

    Args:
        path: file name.

    Returns:
        A fitted estimator of the saved class.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not a readable jaxrank model (not an npz,
            missing or malformed metadata or arrays, unknown format version or
            estimator, inconsistent shapes, non-finite weights).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"model file {path} does not exist.")
    try:
        with np.load(path, allow_pickle=False) as data:
            files = set(data.files)
            missing = {"metadata", *_ARRAYS} - files
            if missing:
                raise ValueError(f"missing entries {sorted(missing)}")
            meta = json.loads(str(data["metadata"]))
            arrays = {k: np.array(data[k]) for k in _ARRAYS}
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
    cls = _registry().get(meta.get("estimator"))
    if cls is None:
        raise ValueError(f"{path}: unknown estimator {meta.get('estimator')!r}.")
    coef, intercept, classes = arrays["coef_"], arrays["intercept_"], arrays["classes_"]
    if coef.ndim != 2 or coef.shape[0] != 1 or intercept.shape != (1,) or classes.shape != (2,):
        raise ValueError(f"{path}: arrays have inconsistent shapes.")
    if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(intercept))):
        raise ValueError(f"{path}: weights contain NaN or infinite values.")
    try:
        model = cls(**meta.get("params", {}))
    except TypeError as e:
        raise ValueError(f"{path}: bad estimator parameters: {e}") from None
    model.coef_, model.intercept_, model.classes_ = coef, intercept, classes
    for k, v in meta.get("attributes", {}).items():
        if k in _SCALARS:
            setattr(model, k, v)
    model.n_features_in_ = coef.shape[1]
    return model


def load_data(path, *, n_features=None):
    """Read a binary-labelled data file.

    Formats, by extension: SVMlight/LIBSVM (``.svm``, ``.svmlight``,
    ``.libsvm``, ``.txt``, ``.dat``, optionally ``.gz``/``.bz2``; read with
    ``sklearn.datasets.load_svmlight_file``, returned as a CSR matrix);
    ``.npz`` with arrays ``X`` and ``y``; ``.npy`` (last column = label);
    ``.csv`` (no header, last column = label).

    Args:
        path: file name.
        n_features: for SVMlight files, the number of features to assume
            (so that a test file matches its training file).

    Returns:
        ``(X, y)``: ``[n, d]`` float array or CSR matrix and ``[n]`` labels.

    Raises:
        FileNotFoundError: missing file.
        ValueError: unknown extension or unreadable content.
    """
    from sklearn.datasets import load_svmlight_file

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file {path} does not exist.")
    low = path.lower()
    base = low[:-3] if low.endswith(".gz") else low[:-4] if low.endswith(".bz2") else low
    try:
        if base.endswith(".npz"):
            with np.load(path, allow_pickle=False) as d:
                if "X" not in d.files or "y" not in d.files:
                    raise ValueError("an .npz data file needs arrays 'X' and 'y'")
                return np.array(d["X"]), np.array(d["y"])
        if base.endswith(".npy"):
            a = np.load(path, allow_pickle=False)
            if a.ndim != 2 or a.shape[1] < 2:
                raise ValueError("an .npy data file must be 2-D with the label last")
            return a[:, :-1], a[:, -1]
        if base.endswith(".csv"):
            a = np.loadtxt(path, delimiter=",", ndmin=2)
            return a[:, :-1], a[:, -1]
        X, y = load_svmlight_file(path, n_features=n_features)
        return X, y
    except ValueError as e:
        raise ValueError(f"cannot read data file {path}: {e}") from None
