"""The strict data-file reader ``load_data``: format rules, errors, real files.

References are scikit-learn's ``dump_svmlight_file``/``load_svmlight_file``
with ``zero_based=False`` (1-based, as SVMlight and LIBSVM write), matrices
written out by hand, and an independent regex read of the ``qid:`` column.
"""

import bz2
import functools
import gzip
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from jaxrank import load_data

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data


def shared(*parts):
    """A file of ../shared/data; skipped if missing, but a failure under CI=true."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"shared dataset {path} is missing (CI=true: data tests must run)"
            )
        pytest.skip(f"shared dataset {path} not available")
    return path


def write(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def at_line(path, line):
    """Regex for an error located at ``path``, 1-based ``line``."""
    return re.escape(f"{path}, line {line}:")


def dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def _canonical(X):
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()  # sorts the indices too
    X.eliminate_zeros()
    return X


def assert_same_csr(X, ref, rtol=0.0):
    """Same CSR float64 matrix: same stored entries (explicit zeros aside)."""
    assert sp.issparse(X) and X.format == "csr"
    assert X.shape == ref.shape and X.dtype == np.float64
    A, B = _canonical(X), _canonical(ref)
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_allclose(A.data, B.data, rtol=rtol, atol=0)


def assert_round_trip(X, y, path, Xr, yr):
    """``Xr, yr`` equal scikit-learn's 1-based read of ``path``, and the dumped
    ``X, y`` up to the 16 significant digits dump_svmlight_file writes."""
    X0, y0 = load_svmlight_file(str(path), zero_based=False, n_features=X.shape[1])
    assert_same_csr(Xr, X0)
    np.testing.assert_array_equal(yr, y0)
    assert_same_csr(Xr, X, rtol=1e-15)
    np.testing.assert_array_equal(yr, y)


# --------------------------------------------------------- 1. feature indices


def test_rejects_a_stray_index_zero_instead_of_shifting_the_file(tmp_path):
    # "auto" indexing would read this file as 0-based because of line 4 and
    # move every feature of every line one column to the left.
    p = write(tmp_path, "train.svm", "# comment\n+1 1:0.5 3:2\n\n-1 0:1 2:4\n")
    with pytest.raises(ValueError, match=at_line(p, 4) + ".*index 0"):
        load_data(p)


def test_index_zero_error_explains_zero_based_dumps(tmp_path):
    p = tmp_path / "dumped.svm"
    dump_svmlight_file(np.eye(3), [1, -1, 1], str(p))  # zero_based=True by default
    with pytest.raises(ValueError, match=at_line(p, 1) + ".*zero_based=False"):
        load_data(p)


def test_stray_zero_in_real_w8a_lines_is_reported_not_shifted(tmp_path):
    lines = shared("w8a", "w8a").read_bytes().split(b"\n")[:300]
    good = write(tmp_path, "w8a_head.svm", b"\n".join(lines) + b"\n")
    X, y = load_data(good)
    X0, y0 = load_svmlight_file(str(good), zero_based=False)
    assert_same_csr(X, X0)
    np.testing.assert_array_equal(y, y0)
    label, rest = lines[41].split(b" ", 1)
    lines[41] = label + b" 0:1 " + rest  # line 42
    bad = write(tmp_path, "w8a_stray0.svm", b"\n".join(lines) + b"\n")
    with pytest.raises(ValueError, match=at_line(bad, 42) + ".*index 0"):
        load_data(bad)


HEAD = "# a header comment\n\n+1 1:1 2:0.5\n"  # lines 1-3; the bad line is line 4
SYNTAX_ERRORS = {
    "non-numeric value": ("-1 2:abc", "value 'abc' of feature 2 is not a number"),
    "missing colon": ("-1 2 3:1", "'2' has no colon"),
    "non-increasing indices": (
        "-1 5:1 3:1",
        "must increase along a line; 3 comes after 5",
    ),
    "duplicate index": ("-1 3:1 3:2", "feature index 3 appears twice"),
    "label not a number": ("yes 3:1", "label 'yes' is not a number"),
    "label missing": ("3:1 4:1", "not with a label"),
    "multi-label": ("1,2 3:1", "multi-label"),
    "nan value": ("-1 3:nan", "value 'nan' of feature 3 is not finite"),
    "inf value": ("-1 3:-inf", "value '-inf' of feature 3 is not finite"),
    "overflowing value": ("-1 3:1e999", "value '1e999' of feature 3 overflows float64"),
    "nan label": ("nan 3:1", "label 'nan' is not finite"),
    "inf label": ("inf 3:1", "label 'inf' is not finite"),
    "underscore in value": ("-1 3:1_0", "value '1_0' of feature 3 is not a number"),
    "underscore in label": ("1_0 3:1", "label '1_0' is not a number"),
    "underscore in index": ("-1 1_0:1", "is not a positive integer"),
    "negative index": ("-1 -3:1", "'-3' in '-3:1' is not a positive integer"),
    "fractional index": ("-1 1.5:1", "'1.5' in '1.5:1' is not a positive integer"),
    "index too large for int32": ("-1 3000000000:1", "too large"),
    "qid after features": ("-1 2:1 qid:3", "must come right after the label"),
    "qid not an integer": ("-1 qid:q7 2:1", "'qid:q7' is not a query id"),
    "qid on one line only": ("-1 qid:7 2:1", "this line has qid: but line 3 has none"),
    "cost": ("-1 cost:2 2:1", "cost:<value>"),
}


@pytest.mark.parametrize("bad, message", SYNTAX_ERRORS.values(), ids=SYNTAX_ERRORS)
def test_syntax_errors_name_file_and_line(tmp_path, bad, message):
    p = write(tmp_path, "data.svm", HEAD + bad + "\n+1 1:2\n")
    with pytest.raises(ValueError, match=at_line(p, 4) + ".*" + re.escape(message)):
        load_data(p)


DEEP_ERRORS = {
    "index zero": ("-1 0:1 4:1", "index 0"),
    "duplicate index": ("-1 4:1 4:1", "appears twice"),
    "nan value": ("-1 4:nan", "not finite"),
    "inf label": ("-inf 4:1", "not finite"),
    "underscore": ("-1 4:2_5", "not a number"),
    "above n_features": ("-1 4:1 31:1", "exceeds n_features=30"),
    "bad qid token": ("-1 qidx:3 4:1", "is not a query id"),
}


@functools.lru_cache(maxsize=1)
def _large_file_lines():
    """~1 MB of samples (30 features, 4 per line), comments and blank lines
    between them, so that line numbers differ from sample numbers."""
    rng = np.random.default_rng(0)
    idx = np.sort(np.argsort(rng.random((40000, 30)), axis=1)[:, :4] + 1, axis=1)
    val = rng.random((40000, 4))
    lines = []
    for i in range(40000):
        if i % 7 == 3:
            lines.append("# comment 0:1 nan" if i % 2 else "")
        else:
            pairs = " ".join(f"{j}:{v:.6f}" for j, v in zip(idx[i], val[i]))
            lines.append(f"{i % 2} {pairs}")
    return tuple(lines)


@pytest.mark.parametrize("bad, message", DEEP_ERRORS.values(), ids=DEEP_ERRORS)
def test_errors_deep_in_a_large_file_get_their_line(tmp_path, bad, message):
    # the same checks must hold far from the start of the file
    lines = list(_large_file_lines())
    lines[31000] = bad  # line 31001
    p = write(tmp_path, "big.svm", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=at_line(p, 31001) + ".*" + re.escape(message)):
        load_data(p, n_features=30)
    X, _ = load_data(write(tmp_path, "good.svm", "\n".join(_large_file_lines())))
    assert X.shape == (40000 - 40000 // 7 - (40000 % 7 > 3), 30)


def test_mixed_qid_deep_in_a_large_file_gets_its_line(tmp_path):
    lines = [f"{i % 3} qid:{i // 50} 1:{i}" for i in range(60000)]
    lines.insert(45000, "# a comment")
    lines[52000] = "1 1:7"  # line 52001 has no qid
    p = write(tmp_path, "rank.svm", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=at_line(p, 52001) + ".*has no qid"):
        load_data(p, return_groups=True)
    lines[52000] = "1 qid:99999999999999999999 1:7"  # qid beyond int64
    p = write(tmp_path, "rank.svm", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=at_line(p, 52001) + ".*is not a query id"):
        load_data(p, return_groups=True)


def test_qid_missing_on_a_later_line_is_reported(tmp_path):
    p = write(tmp_path, "q.svm", "1 qid:1 1:1\n0 qid:1 2:1\n# c\n1 1:1\n")
    with pytest.raises(ValueError, match=at_line(p, 4) + ".*has no qid"):
        load_data(p, return_groups=True)


def test_accepts_what_the_format_allows(tmp_path):
    text = (
        "# comment with 0:5 nan qid:3 1_0 that must be ignored\n"
        "\n"
        "+1 1:0.5 3:-2e-3\t7:1 # trailing comment 0:1\r\n"
        "  -1   003:+4.25\n"
        "0\n"  # a sample with no features
        "2.5 2:1E2#comment right after a value\n"
    )
    p = write(tmp_path, "ok.svm", text)
    X, y = load_data(p)
    expected = np.zeros((4, 7))
    expected[0, [0, 2, 6]] = [0.5, -2e-3, 1]
    expected[1, 2] = 4.25
    expected[3, 1] = 100.0
    np.testing.assert_array_equal(X.toarray(), expected)
    np.testing.assert_array_equal(y, [1, -1, 0, 2.5])


def test_underscore_only_in_comments_is_accepted(tmp_path):
    p = write(tmp_path, "c.svm", "1 1:10 # doc_id = a_b\n# only_a_comment\n-1 2:1\n")
    X, y = load_data(p)
    np.testing.assert_array_equal(X.toarray(), [[10, 0], [0, 1]])
    np.testing.assert_array_equal(y, [1, -1])


def test_empty_file_is_an_error(tmp_path):
    p = write(tmp_path, "empty.svm", "# nothing here\n\n")
    with pytest.raises(ValueError, match=re.escape(str(p)) + ".*no samples"):
        load_data(p)


# ------------------------------------------------------------------ 2. qid


QID_TEXT = (
    "2 qid:10 1:1 2:0.5 # doc a\n"
    "0 qid:10 2:1\n"
    "# a comment line between queries\n"
    "1 qid:3 1:0.25\n"
    "0 qid:10 3:1\n"  # back to query 10: queries need not be contiguous
    "1 qid:-4 1:1 3:1\n"
)


def test_returns_query_ids_as_groups(tmp_path):
    p = write(tmp_path, "rank.svm", QID_TEXT)
    X, y, groups = load_data(p, return_groups=True)
    assert groups.dtype == np.int64 and groups.shape == (5,)
    np.testing.assert_array_equal(groups, [10, 10, 3, 10, -4])
    np.testing.assert_array_equal(y, [2, 0, 1, 0, 1])
    np.testing.assert_array_equal(
        X.toarray(), [[1, 0.5, 0], [0, 1, 0], [0.25, 0, 0], [0, 0, 1], [1, 0, 1]]
    )


def test_refuses_to_pool_queries_without_return_groups(tmp_path):
    p = write(tmp_path, "rank.svm", QID_TEXT)
    with pytest.raises(
        ValueError, match=re.escape(str(p)) + ".*queries.*return_groups=True"
    ):
        load_data(p)
    with pytest.raises(ValueError, match="CLI uses them as query groups"):
        load_data(p)


def test_groups_is_none_without_qid(tmp_path):
    p = write(tmp_path, "plain.svm", "1 1:1\n-1 2:1\n")
    X, _, groups = load_data(p, return_groups=True)
    assert groups is None and X.shape == (2, 2)


def test_qid_round_trip_with_sklearn_dump(tmp_path):
    rng = np.random.default_rng(3)
    X = sp.random(40, 9, density=0.3, format="csr", random_state=4)
    y = rng.integers(0, 3, 40)
    qid = np.sort(rng.integers(1, 6, 40))
    p = tmp_path / "dump.svm"
    dump_svmlight_file(X, y, str(p), zero_based=False, query_id=qid)
    Xr, yr, groups = load_data(p, return_groups=True, n_features=9)
    assert_round_trip(X, y, p, Xr, yr)
    np.testing.assert_array_equal(groups, qid)


@pytest.mark.parametrize("part", ["S1", "S2", "S3", "S4", "S5"])
def test_mq2008_groups_match_the_qid_column(part):
    path = shared("mq2008", f"{part}.txt")
    X, y, groups = load_data(path, return_groups=True)
    X0, y0, q0 = load_svmlight_file(str(path), zero_based=False, query_id=True)
    assert_same_csr(X, X0)
    np.testing.assert_array_equal(y, y0)
    # independent read of the second column of every line
    column = [int(line.split()[1][4:]) for line in path.read_bytes().splitlines()]
    assert all(
        line.split()[1].startswith(b"qid:") for line in path.read_bytes().splitlines()
    )
    np.testing.assert_array_equal(groups, column)
    np.testing.assert_array_equal(groups, q0)
    assert X.shape[1] == 46 and set(np.unique(y)) <= {0.0, 1.0, 2.0}
    with pytest.raises(ValueError, match="holds ranking queries"):
        load_data(path)


# ----------------------------------------------------------------- 3. paths


def test_directory_is_an_error(tmp_path):
    d = tmp_path / "folder.svm"
    d.mkdir()
    with pytest.raises(
        ValueError, match=re.escape(f"{d} is a directory, expected a data file")
    ):
        load_data(d)


def test_missing_file_is_named(tmp_path):
    p = tmp_path / "nope.svm"
    with pytest.raises(FileNotFoundError, match=re.escape(str(p))):
        load_data(p)


SOME_TEXT = "".join(f"{i % 2} {i % 7 + 1}:{i / 7:.6f}\n" for i in range(3000)).encode()
CORRUPT = {
    "notgzip.svm.gz": b"1 1:1\n",
    "truncated.svm.gz": gzip.compress(SOME_TEXT)[:-1000],
    "notbz2.svm.bz2": b"BZh9 not really",
    "truncated.svm.bz2": bz2.compress(SOME_TEXT)[:-1000],
    "notgzip.csv.gz": b"1,2\n",
    "notgzip.npz.gz": b"PK",
}


@pytest.mark.parametrize("name", CORRUPT)
def test_corrupt_compressed_file_is_a_value_error_naming_it(tmp_path, name):
    p = write(tmp_path, name, CORRUPT[name])
    with pytest.raises(ValueError, match=re.escape(str(p))):
        load_data(p)


def test_compressed_content_under_a_plain_name_is_an_error(tmp_path):
    p = write(tmp_path, "packed.svm", gzip.compress(b"1 1:1\n"))
    with pytest.raises(ValueError, match=re.escape(str(p)) + ".*gzip-compressed"):
        load_data(p)


def test_path_must_be_a_file_name():
    with pytest.raises(TypeError, match="path must be a file name"):
        load_data(3)


# ----------------------------------------------------- 4. dense data dtypes


@pytest.mark.parametrize("kind", ["npy", "npz X", "npz y"])
def test_complex_arrays_are_refused_not_cast(tmp_path, kind):
    X = np.arange(6.0).reshape(3, 2) + 1j
    if kind == "npy":
        p = tmp_path / "c.npy"
        np.save(p, np.c_[X, np.ones(3)])
        name = "the array"
    else:
        p = tmp_path / "c.npz"
        name = kind[-1]
        np.savez(
            p, X=X if name == "X" else X.real, y=np.ones(3) + (1j if name == "y" else 0)
        )
    with pytest.raises(TypeError, match=re.escape(f"{p}: {name} has dtype complex128")):
        load_data(p)


def test_complex_csv_is_refused(tmp_path):
    p = write(tmp_path, "c.csv", "1,2,1\n# comment\n3,1+2j,0\n")
    with pytest.raises(
        TypeError, match=re.escape(f"{p}, line 3, column 2") + ".*complex"
    ):
        load_data(p)


def test_csv_header_is_refused(tmp_path):
    p = write(tmp_path, "h.csv", "age,size,label\n3,1,0\n")
    with pytest.raises(
        TypeError, match=re.escape(f"{p}, line 1, column 1") + ".*no header"
    ):
        load_data(p)


@pytest.mark.parametrize("suffix", ["npy", "npz"])
def test_object_arrays_are_refused_and_never_unpickled(tmp_path, suffix):
    marker = tmp_path / "unpickled"

    class Trap:  # unpickling it would create `marker`
        def __reduce__(self):
            return (open, (str(marker), "w"))

    trap = np.array([[Trap(), 1.0]], dtype=object)
    p = tmp_path / f"o.{suffix}"
    if suffix == "npy":
        np.save(p, trap, allow_pickle=True)
    else:
        np.savez(p, X=trap, y=np.ones(1))
    pickle.dumps(trap)  # the payload is a valid pickle
    with pytest.raises(TypeError, match=re.escape(str(p)) + ".*dtype object"):
        load_data(p)
    assert not marker.exists()


def test_text_arrays_are_refused(tmp_path):
    p = tmp_path / "s.npy"
    np.save(p, np.array([["1", "2", "0"]]))
    with pytest.raises(TypeError, match=re.escape(str(p)) + ".*dtype <U1"):
        load_data(p)


@pytest.mark.parametrize("fmt", ["npy", "npz", "csv"])
def test_non_finite_dense_values_are_located(tmp_path, fmt):
    a = np.arange(12.0).reshape(4, 3)
    a[2, 1] = np.nan
    if fmt == "npy":
        p = tmp_path / "d.npy"
        np.save(p, a)
        where = "the array[2, 1] is nan"
    elif fmt == "npz":
        p = tmp_path / "d.npz"
        np.savez(p, X=a[:, :2], y=a[:, 2])
        where = "X[2, 1] is nan"
    else:
        p = write(tmp_path, "d.csv", "0,1,2\n# c\n3,4,5\n6,nan,8\n9,10,11\n")
        where = "line 4, column 2"
    with pytest.raises(ValueError, match=re.escape(where) + ".*not"):
        load_data(p)


def test_dense_round_trips_keep_values_and_dtypes(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = np.where(rng.random(20) < 0.5, 1, -1)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    np.savez(tmp_path / "i.npz", X=(X > 0).astype(np.int32), y=y > 0)
    np.save(tmp_path / "d.npy", np.c_[X, y])
    np.savetxt(tmp_path / "d.csv", np.c_[X, y], delimiter=",", fmt="%.17g")
    with gzip.open(tmp_path / "d.csv.gz", "wb") as f:
        f.write((tmp_path / "d.csv").read_bytes())
    for name in ("d.npz", "d.npy", "d.csv", "d.csv.gz"):
        Xr, yr, groups = load_data(tmp_path / name, return_groups=True, n_features=3)
        np.testing.assert_array_equal(Xr, X)
        np.testing.assert_array_equal(yr, y)
        assert groups is None
    Xi, yi = load_data(tmp_path / "i.npz")
    assert Xi.dtype == np.int32 and yi.dtype == bool
    np.testing.assert_array_equal(Xi, X > 0)


def test_dense_errors(tmp_path):
    np.savez(tmp_path / "k.npz", A=np.ones((2, 2)))
    with pytest.raises(ValueError, match="needs arrays 'X' and 'y'; it has \\['A'\\]"):
        load_data(tmp_path / "k.npz")
    np.savez(tmp_path / "s.npz", X=np.ones((3, 2)), y=np.ones(2))
    with pytest.raises(ValueError, match="expected X of shape"):
        load_data(tmp_path / "s.npz")
    write(tmp_path, "bad.npz", b"xx")
    with pytest.raises(ValueError, match="cannot read data file .*bad.npz"):
        load_data(tmp_path / "bad.npz")
    write(tmp_path, "r.csv", "1,2,1\n3,1\n")
    with pytest.raises(ValueError, match=at_line(tmp_path / "r.csv", 2) + ".*2 comma"):
        load_data(tmp_path / "r.csv")
    np.save(tmp_path / "d.npy", np.ones((4, 3)))
    with pytest.raises(
        ValueError, match="has 2 feature columns; expected n_features=5"
    ):
        load_data(tmp_path / "d.npy", n_features=5)


# ------------------------------------------------------------ 5. n_features


def test_index_above_n_features_names_the_line(tmp_path):
    p = write(tmp_path, "test.svm", "1 1:1 3:1\n# c\n-1 2:1 4:1\n")
    with pytest.raises(ValueError, match=at_line(p, 3) + ".*4 exceeds n_features=3"):
        load_data(p, n_features=3)


def test_n_features_widens_a_test_file(tmp_path):
    p = write(tmp_path, "test.svm", "1 1:1 3:1\n-1 2:1\n")
    X, _ = load_data(p, n_features=6)
    expected = np.zeros((2, 6))
    expected[0, [0, 2]] = 1
    expected[1, 1] = 1
    np.testing.assert_array_equal(X.toarray(), expected)


@pytest.mark.parametrize(
    "bad, error", [(0, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_n_features_must_be_a_positive_int(tmp_path, bad, error):
    p = write(tmp_path, "t.svm", "1 1:1\n")
    with pytest.raises(error, match="n_features"):
        load_data(p, n_features=bad)


# ------------------------------------------------- round trips, real files


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("suffix", [".svm", ".svm.gz", ".libsvm.bz2"])
def test_round_trip_with_sklearn_dump_one_based(tmp_path, seed, suffix):
    rng = np.random.default_rng(seed)
    X = sp.random(60, 25, density=0.2, format="csr", random_state=seed)
    X.data = rng.normal(size=X.nnz) * 10.0 ** rng.integers(-8, 8, X.nnz)
    X = sp.csr_matrix(sp.diags((rng.random(60) > 0.1).astype(float)) @ X)  # empty rows
    X.eliminate_zeros()
    y = rng.choice([-1.0, 1.0, 0.5], 60)
    plain = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(plain), zero_based=False, comment="written by a test")
    p = tmp_path / ("d" + suffix)
    if suffix.endswith(".gz"):
        p.write_bytes(gzip.compress(plain.read_bytes()))
    elif suffix.endswith(".bz2"):
        p.write_bytes(bz2.compress(plain.read_bytes()))
    Xr, yr = load_data(p, n_features=25)
    assert_round_trip(X, y, p, Xr, yr)


@pytest.mark.parametrize(
    "parts",
    [
        ("w8a", "w8a"),
        ("reuters_moneyfx", "reuters.trn.bz2"),
        ("reuters_moneyfx", "reuters.tst.bz2"),
    ],
    ids=["w8a", "reuters.trn", "reuters.tst"],
)
def test_real_files_equal_sklearn_one_based(parts):
    path = shared(*parts)
    X, y, groups = load_data(path, return_groups=True)
    X0, y0 = load_svmlight_file(str(path), zero_based=False)
    assert_same_csr(X, X0)
    np.testing.assert_array_equal(y, y0)
    assert groups is None


@pytest.mark.parametrize("suffix", [".csv", ".svm"])
def test_a_huge_number_is_reported_as_overflowing_float64(tmp_path, suffix):
    big = "7" * 5_000_000  # a 5-MB numeric token: float() gives inf
    text = f"1,2,0\n{big},2,1\n" if suffix == ".csv" else f"1 1:2\n-1 1:{big}\n"
    p = tmp_path / ("data" + suffix)
    p.write_text(text)
    with pytest.raises(ValueError, match="line 2.*overflows float64") as e:
        load_data(p)
    assert "not finite" not in str(e.value) and len(str(e.value)) < 400
