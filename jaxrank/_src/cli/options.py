"""Command-line options that name estimator parameters, and their parsing."""

from __future__ import annotations

import argparse
import json

import numpy as np

# CLI option (argparse dest) -> estimator parameter.
_PARAM_OPTIONS = {
    "c": "C",
    "inference": "inference",
    "max_iter": "max_iter",
    "tol": "tol",
    "pos_weight": "pos_weight",
    "k": "k",
    "C_binary": "C_binary",
    "kernel": "kernel",
    "bandwidth": "bandwidth",
    "pos_label": "pos_label",
}


_FLAG = {"c": "-c", "C_binary": "--C-binary"}


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    with np.errstate(over="ignore", under="ignore"):
        v32 = np.float32(v)
    if not np.isfinite(v32) or v32 <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a number > 0 that is finite and non-zero in float32, got {text!r}")
    return v


def _pos_weight(text):
    """``--pos-weight``: ``"balanced"`` or a number > 0."""
    return "balanced" if text == "balanced" else _positive_float(text)


def _positive_number(text):
    """A number > 0 that keeps its kind: ``20`` an int (a count), ``0.5`` a float."""
    v = _positive_float(text)
    try:
        return int(text)
    except ValueError:
        return v


def _nonnegative_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    with np.errstate(over="ignore", under="ignore"):
        v32 = np.float32(v)
    if not np.isfinite(v32) or v < 0:
        raise argparse.ArgumentTypeError(
            f"expected a number >= 0 that is finite in float32, got {text!r}")
    return v


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def _bandwidth(text):
    return "auto" if text == "auto" else _positive_float(text)


def _grid(text):
    if text == "auto":
        return "auto"
    return [_positive_float(v) for v in text.split(",")]


def _label_value(text):
    """A ``--pos-label`` value: an int or a float when the text is one (labels read
    from data files are numbers), else the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _param(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _grid_param(text):
    """A ``--grid NAME=V1,V2,...`` option: ``(NAME, [values])``, each value JSON
    when it parses as JSON, else the text itself; ``none``: no other parameter."""
    if text == "none":
        return None
    key, sep, values = text.partition("=")
    if not sep or not key or not values:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,... or none, got {text!r}")
    out = []
    for v in values.split(","):
        try:
            out.append(json.loads(v))
        except json.JSONDecodeError:
            out.append(v)
    return key, out


def _param_grid(cls, given):
    """``param_grid`` of ``sweep`` from the ``--grid`` options (``None``: the
    model's default grid; ``--grid none``: ``{}``)."""
    if not given:
        return None
    if None in given:
        if len(given) > 1:
            raise ValueError("--grid none tunes C only; it cannot be combined with other "
                             "--grid options.")
        return {}
    names = set(cls().get_params())
    grid = {}
    for key, values in given:
        if key not in names or key == "C":
            raise ValueError(f"--grid {key}: {cls.__name__} has no such parameter besides C "
                             f"(give C values with --Cs); it has {sorted(names - {'C'})}.")
        if key in grid:
            raise ValueError(f"--grid {key} is given twice.")
        grid[key] = values
    return grid


def _estimator_params(cls, args):
    """Parameters of ``cls`` from the options the user gave (errors for foreign ones)."""
    names = set(cls().get_params())
    params = {}
    for dest, param in _PARAM_OPTIONS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if param not in names:
            flag = _FLAG.get(dest, "--" + dest.replace("_", "-"))
            raise ValueError(f"{flag} does not apply to --model {args.model} "
                             f"({cls.__name__} has no parameter {param!r}).")
        params[param] = value
    for key, value in getattr(args, "param", None) or []:
        if key not in names:
            raise ValueError(f"--param {key}: {cls.__name__} has no such parameter; it has "
                             f"{sorted(names)}.")
        params[key] = value
    if "verbose" in names:
        params["verbose"] = not args.quiet
    return params


def make_estimator(args):
    """The unfitted estimator of ``--model`` with the given options."""
    from jaxrank._src.estimators.registry import get_estimator

    cls = get_estimator(args.model)
    return cls(**_estimator_params(cls, args))
