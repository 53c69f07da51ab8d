"""Inputs users have: which class is relevant (``pos_label``), sweep's arguments
and its ``Cs="auto"`` grid on ties, bag ids, graph edges as a sparse adjacency
matrix, and the test extra. Small synthetic data (no ``../shared``)."""

import csv
import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.model_selection import StratifiedKFold

import jaxrank
from jaxrank import graph
from jaxrank.cli import main
from jaxrank.metrics import average_precision

ROOT = Path(__file__).resolve().parents[1]


def _data(n=48, d=3, seed=0):
    """A minority class (every 4th sample) shifted along the first feature."""
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 4 == 0).astype(int)
    X = rng.normal(size=(n, d))
    X[:, 0] += 2.0 * y
    return X, y


# ---------------------------------------------------------------------------
# pos_label: sweep and the command line.
# ---------------------------------------------------------------------------


def test_sweep_takes_pos_label():
    """sweep had no way to say which class is relevant: "no3" (larger) always was."""
    X, y = _data()
    enc = np.where(y > 0, "has3", "no3")
    kw = dict(model="svm", Cs=[0.1, 1.0], cv=2, max_iter=200)
    ref = jaxrank.sweep(X, y, **kw)
    res = jaxrank.sweep(X, enc, pos_label="has3", **kw)
    np.testing.assert_array_equal(res.val_score, ref.val_score)  # the task of the minority class
    best = res.best_estimators[0]
    assert list(best.classes_) == ["no3", "has3"] and best.pos_label == "has3"
    assert best.score(X, enc) == pytest.approx(ref.best_estimators[0].score(X, y))
    wrong = jaxrank.sweep(X, enc, **kw)
    assert wrong.best_estimators[0].classes_[1] == "no3"
    with pytest.raises(ValueError, match="pos_label='x' is not one of the two labels"):
        jaxrank.sweep(X, enc, pos_label="x", **kw)


def test_cli_pos_label_and_the_summary_say_which_class_is_relevant(tmp_path, capsys):
    """Labels 3 (the minority, relevant) and 7: the larger label 7 was always positive."""
    X, y = _data()
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, np.where(y > 0, 3, 7), str(path), zero_based=False)
    m3, m7 = tmp_path / "m3.npz", tmp_path / "m7.npz"
    assert main(["train", "--model", "svm", "--pos-label", "3", str(path), str(m3)]) == 0
    assert "positive (relevant) class: 3 (pos_label)" in capsys.readouterr().out
    assert main(["train", "--model", "svm", str(path), str(m7)]) == 0
    assert "positive (relevant) class: 7 (the larger label" in capsys.readouterr().out
    model = jaxrank.load(m3)
    assert model.classes_[1] == 3
    s = model.decision_function(X)
    assert float(average_precision(s.astype(np.float32), y > 0)) > 0.8
    assert main(["evaluate", str(m3), str(path)]) == 0
    ap = float(capsys.readouterr().out.split("AP")[1].split()[0])
    assert ap == pytest.approx(model.score(X, np.where(y > 0, 3, 7)), abs=1e-4)
    out = tmp_path / "sw"
    assert main(["sweep", "--model", "svm", "--Cs", "0.1,1", "--cv", "2", "--pos-label", "3",
                 "--output-prefix", str(out), str(path)]) == 0
    assert "positive (relevant) class: 3 (pos_label)" in capsys.readouterr().out
    assert main(["train", "--model", "svm", "--pos-label", "5", str(path),
                 str(tmp_path / "x.npz")]) != 0
    assert "pos_label=5 is not one of the two labels" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# sweep: arguments, ties, progress, bags.
# ---------------------------------------------------------------------------


def test_sweep_argument_errors_say_what_is_expected():
    X, y = _data()
    kw = dict(Cs=[1.0], cv=2)
    with pytest.raises(TypeError, match=r"cv must be an int >= 2 .*splitter.*got 2\.5"):
        jaxrank.sweep(X, y, cv=2.5, Cs=[1.0])
    with pytest.raises(ValueError, match="cv must be an int >= 2 .*got 1"):
        jaxrank.sweep(X, y, cv=1, Cs=[1.0])
    with pytest.raises(TypeError, match="model must be a registry name .*got None"):
        jaxrank.sweep(X, y, model=None, **kw)
    with pytest.raises(ValueError, match=r"sweep\(model='latent-apsvm'\) needs bags="):
        jaxrank.sweep(X, y, model="latent-apsvm", **kw)
    with pytest.raises(ValueError, match=r"sweep\(model='hob-svm'\) needs edges="):
        jaxrank.sweep(X, y, model="hob-svm", **kw)
    with pytest.raises(ValueError, match=r"bags= does not apply to APSVM, which takes groups="):
        jaxrank.sweep(X, y, model="apsvm", bags=np.arange(len(y)) // 2, **kw)
    with pytest.raises(ValueError, match="edges= does not apply to BinarySVM, which takes no "):
        jaxrank.sweep(X, y, model="svm", edges=np.array([[0, 1]]), **kw)
    with pytest.raises(ValueError, match="got both bags= and groups="):
        ids = np.arange(len(y)) // 2
        jaxrank.sweep(X, y[::2], model="latent-svm", bags=ids, groups=ids, **kw)


def test_sweep_takes_a_splitter_as_cv():
    X, y = _data()
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    masks = np.zeros((3, len(y)), bool)
    for f, (_, val) in enumerate(cv.split(X, y)):
        masks[f, val] = True
    kw = dict(model="svm", Cs=[0.1, 1.0], refit=False, max_iter=200)
    a = jaxrank.sweep(X, y, cv=cv, **kw)
    b = jaxrank.sweep(X, y, cv=masks, **kw)
    np.testing.assert_array_equal(a.val_masks[0], masks)
    np.testing.assert_array_equal(a.val_score, b.val_score)


def test_auto_grid_is_not_extended_on_a_tie():
    """The same validation AP at every C dragged the grid down to its lower limit:
    a tie (the best value also inside the grid) is no edge."""
    X, y = _data()
    X = np.c_[np.where(y > 0, 1.0, -1.0), np.zeros((len(y), 1))]  # separable at every C
    res = jaxrank.sweep(X, y, model="apsvm", Cs="auto", cv=2, refit=False, max_iter=200)
    assert np.all(res.mean_val_score == 1.0)
    assert res.extensions == 0
    np.testing.assert_array_equal(res.Cs, jaxrank.APSVM._default_Cs)


def test_appx_sweep_progress_counts_both_stages(capsys):
    """The APPX bar counted both solver stages against the number of fits (87 of 50)."""
    X, y = _data()
    seen = []
    res = jaxrank.sweep(X, y, model="apsvm-appx", Cs=[1.0, 10.0], cv=2, refit=False,
                        max_iter=50, progress=seen.append)
    assert sum(seen) == 2 * res.n_fits
    jaxrank.sweep(X, y, model="apsvm-appx", Cs=[1.0, 10.0], cv=2, refit=False, max_iter=50,
                  progress=True)
    bars = re.findall(r"(\d+)/(\d+)", capsys.readouterr().err)
    assert bars and all(int(t) == 2 * res.n_fits and int(k) <= int(t) for k, t in bars), bars


def test_latent_sweep_takes_bags_and_the_cli_reports_ap_over_bags(tmp_path, capsys):
    """sweep asked latent models for bags= without having the argument; the CLI
    printed "MAP" (over queries) for bags."""
    rng = np.random.default_rng(2)
    n_bags, per = 24, 2
    yb = (np.arange(n_bags) % 3 == 0).astype(int)
    bags = np.repeat(np.arange(n_bags), per)
    X = rng.normal(size=(n_bags * per, 3))
    X[::per, 0] += 2.5 * yb  # one witness per positive bag
    names = np.array([f"bag{b:02d}" for b in bags])  # any hashable ids
    res = jaxrank.sweep(X, yb, model="latent-svm", bags=names, Cs=[0.1, 1.0], cv=2,
                        max_iter=100, n_init=1, cccp_max_iter=2, random_state=0, refit=False,
                        param_grid={})
    assert res.val_score.shape == (1, 2, 2) and np.all(np.isfinite(res.val_score))
    path = tmp_path / "bags.svm"
    dump_svmlight_file(X, np.repeat(yb, per), str(path), zero_based=False, query_id=bags)
    assert main(["sweep", "--model", "latent-svm", "--Cs", "0.1,1", "--cv", "2",
                 "--param", "n_init=1", "--param", "cccp_max_iter=2", "--grid", "none",
                 "--output-prefix", str(tmp_path / "lat"), str(path)]) == 0
    out = capsys.readouterr().out
    assert "mean validation AP over bags" in out and "MAP" not in out
    # --grid: the CV results of those settings, the same as sweep(param_grid=...).
    assert main(["sweep", "--model", "latent-svm", "--Cs", "0.1,1", "--cv", "2",
                 "--param", "n_init=1", "--param", "cccp_max_iter=2", "--param",
                 "max_iter=100", "--grid", "J=balanced,balanced*0.1", "--grid", "c=0,0.3",
                 "--output-prefix", str(tmp_path / "grid"), str(path)]) == 0
    out = capsys.readouterr().out
    assert "chosen J" in out and "chosen c" in out
    summary = json.loads((tmp_path / "grid.json").read_text())
    ref = jaxrank.sweep(X, yb, model="latent-svm", bags=bags, Cs=[0.1, 1.0], cv=2,
                        max_iter=100, n_init=1, cccp_max_iter=2, random_state=0, refit=False,
                        param_grid={"J": ["balanced", "balanced*0.1"], "c": [0, 0.3]})
    assert summary["params"] == ref.params and len(ref.params) == 8
    np.testing.assert_allclose(summary["mean_val_score"]["bags"], ref.mean_val_score[0], atol=1e-6)
    assert summary["best_params"]["bags"] == ref.best_params[0]
    with open(tmp_path / "grid.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and {r["J"] for r in rows} == {"balanced", "balanced*0.1"}
    for bad in (["--grid", "C=1,2"], ["--grid", "nope=1"], ["--grid", "none", "--grid", "c=0"],
                ["--grid", "c=0", "--grid", "c=0.3"]):
        assert main(["sweep", "--model", "latent-svm", "--cv", "2", "-q", *bad,
                     "--output-prefix", str(tmp_path / "bad"), str(path)]) == 2
        assert "--grid" in capsys.readouterr().err


def test_sweep_grid_help_states_every_default_param_grid(capsys):
    """``jaxrank sweep --help`` names each model's own grid of other parameters (the
    help is written out, so that the CLI start-up imports no model family)."""
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    with_grid = 0
    for name in jaxrank.ESTIMATORS:
        grid = getattr(jaxrank.ESTIMATORS[name], "_default_param_grid", None) or {}
        with_grid += bool(grid)
        for k, vals in grid.items():
            want = f"{k}=" + ",".join(f"{v:g}" if isinstance(v, float) else str(v)
                                      for v in vals)
            assert want in text, (name, want)
    assert with_grid >= 1


# ---------------------------------------------------------------------------
# Graph edges as a sparse adjacency matrix; the test extra.
# ---------------------------------------------------------------------------


def test_sparse_adjacency_edges_equal_the_edge_list():
    """A scipy.sparse adjacency matrix was an error about shape ()."""
    X, y = _data(n=40)
    pairs = np.array([(i, i + 1) for i in range(0, 39, 2)] + [(0, 5), (7, 3)])
    A = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(40, 40))
    A = (A + A.T).tocsr()  # symmetric: every edge stored twice
    kw = dict(C=1.0, max_iter=50)
    ref = jaxrank.HOBSVM(**kw).fit(X, y, edges=pairs)
    m = jaxrank.HOBSVM(**kw).fit(X, y, edges=A)
    np.testing.assert_array_equal(m.coef_, ref.coef_)
    np.testing.assert_array_equal(m.decision_function(X, edges=A),
                                  ref.decision_function(X, edges=pairs))
    lay = graph.graph_layout(40, A)
    assert lay.m == len(pairs)
    with pytest.raises(ValueError, match=r"adjacency matrix must have shape \[n, n\]"):
        graph.graph_layout(41, A)
    with pytest.raises(ValueError, match="must hold 0 and 1"):
        graph.graph_layout(40, 0.5 * A)
    with pytest.raises(TypeError, match="aligned with the per-edge weights"):
        graph.max_marginals(np.zeros((40, 2)), A, -np.ones(len(pairs)))


def test_pandas_is_in_the_test_extra():
    """scikit-learn's estimator checks skip their DataFrame checks without pandas."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    test_extra = meta["project"]["optional-dependencies"]["test"]
    assert any(re.match(r"pandas\b", req) for req in test_extra), test_extra
