"""The one side-input convention: declarations, fold units, metadata routing."""

import inspect
import itertools

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold, StratifiedGroupKFold

import jaxrank
from estimator_settings import fast_params


@pytest.mark.parametrize("name", sorted(jaxrank.ESTIMATORS))
def test_every_estimator_takes_its_declared_side_input_by_keyword(name):
    cls = jaxrank.ESTIMATORS[name]
    side = cls.side_input
    keyword_only = {m: {p.name: p for p in inspect.signature(getattr(cls, m)).parameters.values()
                        if p.kind is inspect.Parameter.KEYWORD_ONLY}
                    for m in ("fit", "score", "decision_function", "predict")}
    if side is None:
        assert not keyword_only["fit"], f"{name}: fit takes {list(keyword_only['fit'])}"
        return
    assert isinstance(side, jaxrank.SideInput)
    assert side.name in keyword_only["fit"] and side.name in keyword_only["score"]
    assert (keyword_only["fit"][side.name].default is inspect.Parameter.empty) == side.required
    for m in ("decision_function", "predict"):
        assert (side.name in keyword_only[m]) == side.at_predict, (name, m)


def test_registering_a_class_whose_signature_disagrees_is_refused():
    class Wrong(jaxrank.BinarySVM):
        side_input = jaxrank.SideInput("bags", "bags", required=True)

    with pytest.raises(TypeError, match=r"Wrong.fit must take the side input as the keyword"):
        jaxrank.register_estimator("wrong-svm", Wrong)
    assert "wrong-svm" not in jaxrank.ESTIMATORS
    with pytest.raises(ValueError, match="kind must be one of"):
        jaxrank.SideInput("groups", "clusters")


def _components_bfs(n, edges):
    """Connected components by breadth-first search (independent of scipy)."""
    nbr = [[] for _ in range(n)]
    for i, j in edges:
        nbr[i].append(j)
        nbr[j].append(i)
    comp = -np.ones(n, int)
    for s in range(n):
        if comp[s] < 0:
            comp[s], todo = s, [s]
            while todo:
                for v in nbr[todo.pop()]:
                    if comp[v] < 0:
                        comp[v] = s
                        todo.append(v)
    return comp


def test_graph_units_are_the_connected_components_and_take_the_induced_subgraph():
    rng = np.random.default_rng(3)
    n = 40
    edges = rng.integers(0, n, (30, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    side = jaxrank.HOBSVM.side_input
    units = side.units(edges, n)
    ref = _components_bfs(n, edges)
    for i, j in itertools.combinations(range(n), 2):  # the same partition
        assert (units[i] == units[j]) == (ref[i] == ref[j])
    rows = rng.permutation(n)[:25]
    sub = side.take(edges, rows, n)
    pos = {int(r): k for k, r in enumerate(rows)}
    want = sorted((pos[i], pos[j]) for i, j in edges if i in pos and j in pos)
    assert sorted(map(tuple, sub.tolist())) == want
    # Ids and masks are sample-aligned: take is indexing.
    q = rng.integers(0, 5, n)
    np.testing.assert_array_equal(jaxrank.APSVM.side_input.take(q, rows, n), q[rows])
    np.testing.assert_array_equal(jaxrank.APSVM.side_input.units(q, n), q)
    with pytest.raises(ValueError, match="rows must not repeat"):
        side.take(edges, [1, 1], n)


def _queries(seed=0, n_q=12, per=10, d=5):
    rng = np.random.default_rng(seed)
    q = np.repeat(np.arange(n_q), per)
    X = rng.normal(size=(q.size, d)).astype(np.float32)
    grades = (X[:, 0] + 0.7 * rng.normal(size=q.size) > 0.4).astype(int)
    return X, grades, q


def test_grid_search_routes_query_ids_to_fit_score_and_the_splitter():
    X, y, q = _queries()
    base = jaxrank.APSVM(**fast_params("apsvm"))
    cv = GroupKFold(3)
    with sklearn.config_context(enable_metadata_routing=True):
        est = clone(base).set_fit_request(groups=True).set_score_request(groups=True)
        search = GridSearchCV(est, {"C": [1.0, 100.0]}, cv=cv).fit(X, y, groups=q)
    # The same folds by hand: fit on whole training queries, MAP on the validation ones.
    for k, C in enumerate([1.0, 100.0]):
        scores = [clone(base).set_params(C=C).fit(X[tr], y[tr], groups=q[tr]).score(
                      X[va], y[va], groups=q[va])
                  for tr, va in cv.split(X, y, q)]
        np.testing.assert_allclose(search.cv_results_["mean_test_score"][k], np.mean(scores),
                                   rtol=1e-6)
        for tr, va in cv.split(X, y, q):
            assert not set(q[tr]) & set(q[va])  # queries stay whole


def test_grid_search_routes_bag_ids_of_a_latent_model():
    rng = np.random.default_rng(1)
    bags = np.repeat(np.arange(24), 3)
    yb = (np.arange(24) % 3 == 0).astype(int)
    X = rng.normal(size=(bags.size, 4)).astype(np.float32)
    X[np.flatnonzero(yb[bags])[::3], 0] += 2.0  # one instance of each positive bag stands out
    y = yb[bags]  # one label per row, equal within a bag
    base = jaxrank.LatentAPSVM(**fast_params("latent-apsvm"))
    cv = StratifiedGroupKFold(3)
    with sklearn.config_context(enable_metadata_routing=True):
        est = clone(base).set_fit_request(bags=True).set_score_request(bags=True)
        search = GridSearchCV(est, {"C": [1.0, 10.0]}, cv=cv).fit(X, y, bags=bags, groups=bags)
    for k, C in enumerate([1.0, 10.0]):
        scores = [clone(base).set_params(C=C).fit(X[tr], y[tr], bags=bags[tr]).score(
                      X[va], y[va], bags=bags[va])
                  for tr, va in cv.split(X, y, bags)]
        assert np.isfinite(scores).all()
        np.testing.assert_allclose(search.cv_results_["mean_test_score"][k], np.mean(scores),
                                   rtol=1e-6)
