"""jaxrank.save / jaxrank.load: a loaded model passes every check its own fit would."""

import json

import numpy as np
import pytest

import jaxrank


def _rewrite(src, dst, *, params=None, **arrays):
    """Copy the model file ``src`` to ``dst`` with some parameters / arrays replaced."""
    with np.load(src) as z:
        stored = {k: z[k] for k in z.files}
    meta = json.loads(str(stored.pop("metadata")))
    meta["params"] |= params or {}
    np.savez(dst, metadata=np.array(json.dumps(meta)), **(stored | arrays))
    return dst


@pytest.fixture(scope="module")
def chain_model(tmp_path_factory):
    """A HOBSVM fitted on a 16-node chain, saved."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 0, 1], 4)
    X = (rng.normal(size=(16, 3)) + 1.5 * y[:, None]).astype(np.float32)
    edges = np.stack([np.arange(15), np.arange(1, 16)], axis=1)
    m = jaxrank.HOBSVM(C=1.0, eta=1.0, max_iter=200).fit(X, y, edges=edges)
    path = tmp_path_factory.mktemp("chain") / "hob.npz"
    jaxrank.save(m, path)
    return path, m, X, edges


def test_high_order_model_with_positive_pairwise_weight_is_refused(chain_model, tmp_path):
    path, m, X, edges = chain_model
    back = jaxrank.load(path)  # the file as saved loads and predicts the same
    np.testing.assert_array_equal(back.decision_function(X, edges=edges),
                                  m.decision_function(X, edges=edges))
    assert np.all(m.pairwise_coef_ <= 0) and np.all(m.pairwise_intercept_ <= 0)
    bad = np.abs(m.pairwise_coef_) + 0.5
    with pytest.raises(ValueError, match=r"pairwise_coef_ must be <= 0"):
        jaxrank.load(_rewrite(path, tmp_path / "pos.npz", pairwise_coef_=bad))
    with pytest.raises(ValueError, match=r"pairwise_intercept_ must be <= 0"):
        jaxrank.load(_rewrite(path, tmp_path / "posb.npz",
                              pairwise_intercept_=np.ones_like(m.pairwise_intercept_)))
    with pytest.raises(ValueError, match=r"pairwise_coef_ must have shape"):
        jaxrank.load(_rewrite(path, tmp_path / "shape.npz",
                              pairwise_coef_=m.pairwise_coef_[:, :2]))


@pytest.mark.parametrize("params,match", [
    ({"C": 1e39}, "C must be a finite number > 0 representable in float32"),
    ({"tol": -1.0}, "tol"),
    ({"devices": 99}, "devices must be between 1 and"),
    ({"eta": -1.0}, "eta must be >= 0"),
    ({"max_iter": 0}, "max_iter"),
])
def test_loaded_parameters_pass_the_estimators_own_checks(chain_model, tmp_path, params,
                                                          match):
    path = _rewrite(chain_model[0], tmp_path / "p.npz", params=params)
    with pytest.raises(ValueError, match=match) as e:
        jaxrank.load(path)
    assert str(path) in str(e.value)
    # The same parameters are refused by a fit (the check load applies).
    m = jaxrank.HOBSVM(**(chain_model[1].get_params() | params))
    with pytest.raises((ValueError, TypeError)):
        m.fit(chain_model[2], np.repeat([0, 1, 0, 1], 4), edges=chain_model[3])


@pytest.fixture(scope="module")
def apsvm_file(tmp_path_factory):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 4)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=80) > 0.8).astype(int)
    m = jaxrank.APSVM(C=1.0).fit(X, y)
    path = tmp_path_factory.mktemp("ap") / "ap.npz"
    jaxrank.save(m, path)
    return path, m


@pytest.mark.parametrize("attr,value,match", [
    ("n_iter_", np.int64(-3), "n_iter_ must hold integers >= 0"),
    ("converged_", np.float64(1.0), "converged_ must be bool"),
    ("classes_", np.array([1, 0]), "classes_ must hold 2 distinct labels in sorted order"),
    ("classes_", np.array([1, 1]), "classes_ must hold 2 distinct labels"),
    ("intercept_", np.array([np.inf], np.float32), "intercept_ contains NaN or infinite"),
    ("intercept_", np.zeros(2, np.float32), r"intercept_ must have shape \(1,\)"),
    ("coef_", np.full((1, 4), 1e300), "coef_ overflows float32"),
])
def test_loaded_attributes_are_what_a_fit_writes(apsvm_file, tmp_path, attr, value, match):
    with pytest.raises(ValueError, match=match):
        jaxrank.load(_rewrite(apsvm_file[0], tmp_path / "a.npz", **{attr: value}))


def test_kernelrank_bandwidth_must_be_positive(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3)).astype(np.float32)
    y = (X[:, 0] > 0.3).astype(int)
    m = jaxrank.KernelRank(max_iter=5).fit(X, y)
    jaxrank.save(m, tmp_path / "k.npz")
    assert jaxrank.load(tmp_path / "k.npz").bandwidth_ == m.bandwidth_
    with pytest.raises(ValueError, match="bandwidth_ must be > 0"):
        jaxrank.load(_rewrite(tmp_path / "k.npz", tmp_path / "k2.npz",
                              bandwidth_=np.float64(-1.0)))


def test_load_of_data_files_says_what_the_file_is(tmp_path, apsvm_file):
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"x\.npy is a \.npy array, not a jaxrank model"):
        jaxrank.load(npy)
    svm = tmp_path / "train.svm"
    svm.write_text("1 1:0.5 2:1\n-1 1:0.1\n")
    with pytest.raises(ValueError, match="not a readable jaxrank model file") as e:
        jaxrank.load(svm)
    assert "allow_pickle" not in str(e.value) and "load_data" in str(e.value)


def test_save_into_a_missing_directory_names_the_directory(tmp_path, apsvm_file):
    target = tmp_path / "nodir" / "x.npz"
    with pytest.raises(FileNotFoundError) as e:
        jaxrank.save(apsvm_file[1], target)
    msg = str(e.value)
    assert str(tmp_path / "nodir") in msg and ".tmp" not in msg
    assert not (tmp_path / "nodir").exists()


def test_model_files_with_the_former_cccp_names_load(tmp_path):
    # Files saved before the rename (max_outer_iter / n_outer_iter_) load under the
    # current names (CHANGELOG.md).
    rng = np.random.default_rng(2)
    X = rng.normal(size=(24, 3)).astype(np.float32)
    bags = np.repeat(np.arange(8), 3)
    y = np.array([0, 1] * 4)
    X[np.isin(bags, np.flatnonzero(y)), 0] += 2.0
    m = jaxrank.LatentAPSVM(C=10.0, cccp_max_iter=4, n_init=1, max_iter=50,
                            random_state=0).fit(X, y, bags=bags)
    new = tmp_path / "new.npz"
    jaxrank.save(m, new)
    with np.load(new) as z:
        stored = {k: z[k] for k in z.files}
    meta = json.loads(str(stored.pop("metadata")))
    meta["params"]["max_outer_iter"] = meta["params"].pop("cccp_max_iter")
    meta["attributes"] = ["n_outer_iter_" if a == "n_cccp_iter_" else a
                          for a in meta["attributes"]]
    stored["n_outer_iter_"] = stored.pop("n_cccp_iter_")
    old = tmp_path / "old.npz"
    np.savez(old, metadata=np.array(json.dumps(meta)), **stored)
    back = jaxrank.load(old)
    assert back.cccp_max_iter == 4 and back.n_cccp_iter_ == m.n_cccp_iter_
    bag_scores = m.decision_function(X, bags=bags)
    np.testing.assert_array_equal(back.decision_function(X, bags=bags), bag_scores)
