"""Estimators: scikit-learn conventions, sparse input, persistence, errors."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_svmlight_file
from sklearn.metrics import average_precision_score

import jaxrank
from jaxrank.models import design

from conftest import shared_data


@pytest.mark.parametrize("cls", [jaxrank.APSVM, jaxrank.BinarySVM, jaxrank.AUCSVM,
                                 jaxrank.APSVMApprox])
def test_sklearn_conventions(cls, page_blocks):
    X, y = page_blocks[0][:600], page_blocks[1][:600]
    est = cls(C=0.5)
    assert est.get_params()["C"] == 0.5
    est.set_params(C=2.0)
    assert clone(est).get_params() == est.get_params()
    est.fit(X, y)
    s = est.decision_function(X)
    assert s.shape == (600,)
    np.testing.assert_allclose(est.score(X, y), average_precision_score(y, s), rtol=1e-5)
    assert set(np.unique(est.predict(X))) <= set(np.unique(y))
    assert est.coef_.shape == (1, X.shape[1]) and est.n_iter_ >= 1
    assert est.objective_ >= est.dual_objective_ - 1e-6


def test_apsvm_beats_chance_and_inference_methods_agree(page_blocks):
    X, y = page_blocks
    m = {k: jaxrank.APSVM(C=1.0, inference=k).fit(X[:800], y[:800]) for k in ("select", "search")}
    np.testing.assert_allclose(m["select"].objective_, m["search"].objective_, rtol=1e-3)
    assert m["select"].score(X[800:], y[800:]) > 2 * np.mean(y[800:] > 0)


def test_sparse_input_stays_sparse_and_matches_dense():
    path = shared_data("reuters_moneyfx", "reuters.tst.bz2")
    X, y = load_svmlight_file(str(path))
    X, y = X[:600].tocsr(), y[:600]
    Xb = design(X)
    assert Xb.sparse and Xb.X.nse == X.nnz
    # tol 1e-6: both fits certified close to the one optimum, so their weights
    # are close too (F is 1-strongly convex: ||w - w*||^2 <= 2 (F(w) - F*)).
    sparse = jaxrank.APSVM(C=10.0, tol=1e-6).fit(X, y)
    dense = jaxrank.APSVM(C=10.0, tol=1e-6).fit(X.toarray(), y)
    assert sparse.converged_ and dense.converged_
    np.testing.assert_allclose(sparse.objective_, dense.objective_, rtol=1e-5)
    gaps = [m.objective_ - m.dual_objective_ for m in (sparse, dense)]
    assert np.linalg.norm(sparse.coef_ - dense.coef_) <= sum(np.sqrt(2 * g) for g in gaps)
    np.testing.assert_allclose(sparse.decision_function(X), dense.decision_function(X), atol=1e-3)


def test_high_dimensional_sparse_fit():
    rng = np.random.default_rng(0)
    X = sp.random(1000, 100_000, density=1e-4, format="csr", random_state=0, dtype=np.float32)
    y = rng.random(1000) < 0.1
    X = X + sp.csr_matrix((y * 1.0)[:, None] * np.eye(1, 100_000, 7))  # a signal feature
    m = jaxrank.BinarySVM(C=1.0, max_iter=100).fit(X, y)
    assert m.coef_.shape == (1, 100_000) and m.coef_[0, 7] > 0


def test_save_load_round_trip(tmp_path, page_blocks):
    X, y = page_blocks[0][:500], page_blocks[1][:500]
    for cls in (jaxrank.APSVM, jaxrank.BinarySVM):
        m = cls(C=0.7).fit(X, y)
        path = tmp_path / f"{cls.__name__}.npz"
        jaxrank.save(m, path)
        m2 = jaxrank.load(path)
        assert type(m2) is cls and m2.get_params() == m.get_params()
        np.testing.assert_array_equal(m2.decision_function(X), m.decision_function(X))
        with pytest.raises(FileExistsError):
            jaxrank.save(m, path)
        jaxrank.save(m, path, overwrite=True)


def test_load_rejects_corrupt_and_foreign_files(tmp_path, page_blocks):
    X, y = page_blocks[0][:300], page_blocks[1][:300]
    m = jaxrank.APSVM().fit(X, y)
    good = tmp_path / "m.npz"
    jaxrank.save(m, good)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="not a readable"):
        jaxrank.load(garbage)
    truncated = tmp_path / "trunc.npz"
    truncated.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ValueError):
        jaxrank.load(truncated)
    other = tmp_path / "other.npz"
    np.savez(other, a=np.arange(3))
    with pytest.raises(ValueError, match="missing"):
        jaxrank.load(other)
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays.pop("metadata")))

    def write(name, meta, **changes):
        path = tmp_path / name
        np.savez(path, metadata=np.array(json.dumps(meta)), **(arrays | changes))
        return path

    with pytest.raises(ValueError, match="version"):
        jaxrank.load(write("v99.npz", meta | {"format_version": 99}))
    with pytest.raises(ValueError, match="attributes"):
        jaxrank.load(write("attr.npz", meta | {"attributes": {"coef_": 1}}))
    with pytest.raises(ValueError, match="complex|dtype"):
        jaxrank.load(write("cplx.npz", meta, coef_=arrays["coef_"] + 1j))
    with pytest.raises(ValueError, match="NaN"):
        jaxrank.load(write("nan.npz", meta, coef_=arrays["coef_"] * np.nan))
    with pytest.raises(ValueError, match="parameters"):
        jaxrank.load(write("param.npz", meta | {"params": meta["params"] | {"C": -1.0}}))
    with pytest.raises(ValueError, match="directory"):
        jaxrank.load(tmp_path)
    with pytest.raises(FileNotFoundError):
        jaxrank.load(tmp_path / "missing.npz")


@pytest.mark.parametrize(
    "X,y,params,exc,match",
    [
        (np.full((4, 2), np.nan), [0, 1, 0, 1], {}, ValueError, "NaN"),
        (np.ones((4, 2)), [1, 1, 1, 1], {}, ValueError, "two classes"),
        (np.ones((4, 2)), [0, 1, 0], {}, ValueError, "inconsistent numbers of samples"),
        (np.ones((4, 2)), [0, 1, 2, 1], {}, ValueError, "two classes"),
        (np.ones((0, 2)), [], {}, ValueError, "0 sample"),
        (np.ones((4, 2)), [0, 1, 0, 1], {"C": 0.0}, ValueError, "'C' parameter"),
        (np.ones((4, 2)), [0, 1, 0, 1], {"C": -1.0}, ValueError, "'C' parameter"),
        (np.ones((4, 2)), [0, 1, 0, 1], {"C": 1e39}, ValueError, "float32"),
        (np.ones((4, 2)), [0, 1, 0, 1], {"C": 1e-50}, ValueError, "float32"),
        (np.full((4, 2), 1e39), [0, 1, 0, 1], {}, ValueError, "infinity|too large|float32"),
        (np.ones((4, 2)) + 1j, [0, 1, 0, 1], {}, ValueError, "[Cc]omplex"),
        (np.array([["a", "b"]] * 4), [0, 1, 0, 1], {}, ValueError, "[Cc]onvert"),
    ],
)
def test_bad_input_raises(X, y, params, exc, match):
    with pytest.raises(exc, match=match):
        jaxrank.APSVM(**params).fit(X, np.asarray(y))


def test_unknown_inference_and_unfitted():
    with pytest.raises(ValueError, match="'inference' parameter"):
        jaxrank.APSVM(inference="fast").fit(np.eye(4), np.array([0, 1, 0, 1]))
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        jaxrank.APSVM().decision_function(np.eye(2))


def test_bundled_dataset_is_read_from_the_package():
    data = jaxrank.datasets.load_page_blocks()
    assert data.data.shape == (5472, 10) and int((data.target > 0).sum()) == 559


def test_load_data_formats(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = np.where(rng.random(20) < 0.5, 1, -1)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    np.save(tmp_path / "d.npy", np.c_[X, y])
    np.savetxt(tmp_path / "d.csv", np.c_[X, y], delimiter=",")
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(X, y, str(tmp_path / "d.svm"), zero_based=False)
    for name in ("d.npz", "d.npy", "d.csv", "d.svm"):
        Xr, yr = jaxrank.load_data(tmp_path / name)
        Xr = Xr.toarray() if sp.issparse(Xr) else Xr
        np.testing.assert_allclose(Xr, X, rtol=1e-6)
        np.testing.assert_array_equal(yr, y)
    (tmp_path / "bad.npz").write_bytes(b"xx")
    with pytest.raises(ValueError, match="cannot read"):
        jaxrank.load_data(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError):
        jaxrank.load_data(tmp_path / "none.svm")
