"""Batched (task x C x fold) training: `jaxrank.sweep`, 2-D `y`, GridSearchCV, CLI sweep.

Real data: a 300-sample subset of MULAN "scene" (294 colour features, labels
0 and 1 as two ranking tasks). Task 0 is subsampled to exactly 60 positives
and 240 negatives so that every stratified 3-fold training part has the same
size and the same number of positives (one compiled program for all folds).
"""

from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, StratifiedKFold

import jaxrank
from conftest import shared_data
from jaxrank import model_selection as ms
from jaxrank.models import APModel, ItemProblem, design
from jaxrank.solvers import Solver, fit

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CS = [0.03, 3.0]
CV = 3
TOL = 1e-4


def _load_scene():
    path = shared_data("scene", "scene-train.arff")
    a = np.loadtxt(path, delimiter=",", comments=["@", "%"])
    X, Y = a[:, :294].astype(np.float32), a[:, 294:].astype(np.int64)
    rng = np.random.RandomState(0)
    pos = rng.permutation(np.flatnonzero(Y[:, 0] == 1))[:60]
    neg = rng.permutation(np.flatnonzero(Y[:, 0] == 0))[:240]
    idx = np.sort(np.concatenate([pos, neg]))
    return X[idx], Y[idx][:, :2]


@pytest.fixture(scope="module")
def scene():
    return _load_scene()


@pytest.fixture(scope="module")
def swept(scene):
    X, Y = scene
    return jaxrank.model_selection.sweep(X, Y, Cs=CS, cv=CV, tol=TOL, random_state=0,
                                         batch_size=4, return_weights=True)


def _alone(X, pos, train, C, kp):
    import jax
    import jax.numpy as jnp

    global _FIT
    if _FIT is None:
        _FIT = jax.jit(fit, static_argnames=("model",))
    return _FIT(APModel(kp=kp), design(X), ItemProblem(jnp.asarray(pos), jnp.asarray(train)),
                C=jnp.float32(C), solver=Solver(tol=jnp.float32(TOL), max_iter=1000))


_FIT = None


def test_vmapped_fits_equal_independent_fits(scene, swept):
    from sklearn.metrics import average_precision_score

    X, Y = scene
    res = swept
    T, G, F = res.val_score.shape
    assert (T, G, F) == (2, len(CS), CV)
    assert np.all(np.isfinite(res.val_score)) and np.all(res.converged)
    kp = int(Y.sum(axis=0).max())
    W = res.weights  # batch 4 < 12 fits: the work queue refilled its slots
    for t in range(T):
        for g, C in enumerate(CS):
            for f in range(F):
                val = res.val_masks[t, f]
                alone = _alone(X, Y[:, t] > 0, ~val, C, kp)
                # Same optimum as the fit run alone (both certified within TOL).
                np.testing.assert_allclose(res.objective[t, g, f], float(alone.objective),
                                           rtol=1e-3)
                # Validation AP of each fit = scikit-learn's on its held-out part.
                ref = average_precision_score(Y[val, t], X[val] @ W[t, g, f])
                np.testing.assert_allclose(res.val_score[t, g, f], ref, atol=1e-5)
    # the chosen C maximises the mean validation AP
    np.testing.assert_array_equal(res.best_C, np.asarray(CS)[res.mean_val_score.argmax(1)])


def test_refit_and_2d_fit_match_single_task_fits(scene, swept):
    X, Y = scene
    kp = int(Y.sum(axis=0).max())
    model = jaxrank.APSVM(C=CS[1]).fit(X, Y)
    assert model.coef_.shape == (2, X.shape[1])
    assert model.decision_function(X).shape == (X.shape[0], 2)
    for t in range(2):
        alone = _alone(X, Y[:, t] > 0, np.ones(X.shape[0], bool), CS[1], kp)
        np.testing.assert_allclose(model.objective_[t], float(alone.objective), rtol=1e-3)
        est = swept.best_estimators[t]
        assert isinstance(est, jaxrank.APSVM) and est.C == swept.best_C[t]
        assert est.coef_.shape == (1, X.shape[1])
        ref = _alone(X, Y[:, t] > 0, np.ones(X.shape[0], bool), est.C, kp)
        np.testing.assert_allclose(est.objective_, float(ref.objective), rtol=1e-3)


def test_second_sweep_with_equal_shapes_does_not_recompile(scene, caplog):
    import logging

    import jax

    X, Y = scene
    # The first sweep of these shapes in this test (a worker may have dropped
    # the programs of the ``swept`` fixture since: conftest's memory-map guard).
    jaxrank.model_selection.sweep(X, Y, Cs=[0.03, 3.0], cv=CV, tol=TOL, random_state=0,
                                  batch_size=4, return_weights=True)
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        caplog.clear()
        again = jaxrank.model_selection.sweep(
            X[::-1].copy(), Y[::-1].copy(), Cs=[0.1, 1.0], cv=CV, tol=TOL, random_state=1,
            batch_size=4, return_weights=True)
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert compiled == [], compiled
    assert np.all(np.isfinite(again.val_score))


def test_param_grid_settings_equal_one_sweep_each_and_refit_their_best(scene):
    """Each setting of ``param_grid`` gives the fits of a sweep with that
    parameter fixed; the refit of a task uses its best (setting, C)."""
    X, Y = scene
    kw = dict(model="svm", Cs=[0.01, 1.0], cv=CV, random_state=0, tol=TOL)
    res = jaxrank.sweep(X, Y, param_grid={"pos_weight": np.array([1.0, 4.0])}, **kw)
    assert res.val_score.shape == (2, 4, CV)
    np.testing.assert_array_equal(res.Cs, [0.01, 1.0, 0.01, 1.0])
    assert res.params == [{"pos_weight": 1.0}] * 2 + [{"pos_weight": 4.0}] * 2
    assert all(type(p["pos_weight"]) is float for p in res.params)  # not NumPy scalars
    for s, pw in enumerate([1.0, 4.0]):
        one = jaxrank.sweep(X, Y, pos_weight=pw, refit=False, **kw)
        assert one.params == [{}, {}] and one.val_score.shape == (2, 2, CV)
        np.testing.assert_allclose(res.val_score[:, 2 * s:2 * s + 2], one.val_score, atol=1e-6)
        np.testing.assert_allclose(res.objective[:, 2 * s:2 * s + 2], one.objective,
                                   rtol=1e-4)
    best = res.mean_val_score.argmax(axis=1)
    for t in range(2):
        est = res.best_estimators[t]
        assert res.best_params[t] == res.params[best[t]]
        assert est.C == res.Cs[best[t]] and est.pos_weight == res.params[best[t]]["pos_weight"]
        ref = jaxrank.BinarySVM(C=est.C, pos_weight=est.pos_weight, tol=TOL).fit(X, Y[:, t])
        np.testing.assert_allclose(est.objective_, ref.objective_, rtol=1e-3)
    rows = res.rows()
    assert len(rows) == 2 * 4 * CV and rows[0]["pos_weight"] == 1.0
    assert rows[-1]["pos_weight"] == 4.0 and rows[-1]["C"] == 1.0


def test_balanced_pos_weight_counts_each_folds_training_samples(scene):
    """``pos_weight="balanced"`` in a sweep: every fold's fit weighs its own
    training samples (``n_neg / n_pos`` of the fold), as a single fit on them."""
    X, Y = scene
    keep = np.r_[np.flatnonzero(Y[:, 0] > 0)[1:], np.flatnonzero(Y[:, 0] <= 0)]
    X, y = X[keep], Y[keep, 0] > 0  # 59 positives: the folds' ratios differ
    res = jaxrank.sweep(X, y, model="svm", pos_weight="balanced", Cs=[1.0], cv=CV,
                        random_state=0, refit=False, tol=TOL)
    ratios = []
    for f in range(CV):
        train = ~res.val_masks[0, f]
        ratios.append((~y[train]).sum() / y[train].sum())
        ref = jaxrank.BinarySVM(C=1.0, pos_weight="balanced", tol=TOL).fit(X[train], y[train])
        np.testing.assert_allclose(res.objective[0, 0, f], ref.objective_, rtol=1e-3)
    assert np.ptp(ratios) > 0  # the folds' ratios differ: the property is exercised


def test_param_grid_with_auto_extends_C_for_every_setting(scene):
    X, Y = scene
    res = jaxrank.sweep(X, Y[:, 0], model="svm", Cs="auto", cv=CV, random_state=0,
                        refit=False, max_extensions=1, max_iter=300,
                        param_grid={"pos_weight": [1.0, 2.0]})
    G = res.Cs.size // 2
    np.testing.assert_array_equal(res.Cs[:G], res.Cs[G:])
    assert G == len(jaxrank.BinarySVM._default_Cs) + 2 * res.extensions
    assert res.params == [{"pos_weight": 1.0}] * G + [{"pos_weight": 2.0}] * G


def test_param_grid_rejects_bad_grids_before_fitting(scene):
    X, Y = scene
    for grid, err, match in [
        ({"C": [1.0]}, ValueError, "pass its grid as Cs="),
        ({"nope": [1.0]}, ValueError, "has no parameter 'nope'"),
        ({"pos_weight": []}, ValueError, "is empty"),
        ({"pos_weight": "1,2"}, TypeError, "must be a list"),
        ([("pos_weight", [1.0])], TypeError, "must be a dict"),
        ({"pos_weight": [1.0, -1.0]}, ValueError, "pos_weight"),
    ]:
        with pytest.raises(err, match=match):
            jaxrank.sweep(X, Y, model="svm", Cs=[1.0], cv=CV, param_grid=grid)


def test_stratified_fold_masks_are_the_stratifiedkfold_splits(scene):
    _, Y = scene
    masks = ms.stratified_fold_masks(Y[:, 0] > 0, CV, random_state=0)
    skf = StratifiedKFold(CV, shuffle=True, random_state=0)
    for m, (_, val) in zip(masks, skf.split(np.zeros(len(Y)), Y[:, 0])):
        np.testing.assert_array_equal(np.flatnonzero(m), val)
    assert np.all(masks.sum(axis=0) == 1)


def test_gridsearchcv_with_ap_scorer_picks_the_sweep_C(scene, swept):
    X, Y = scene
    gs = GridSearchCV(
        jaxrank.APSVM(tol=TOL), {"C": CS}, scoring=ms.ap_scorer,
        cv=StratifiedKFold(CV, shuffle=True, random_state=0), refit=False,
    ).fit(X, Y[:, 0])
    assert gs.best_params_["C"] == swept.best_C[0]
    np.testing.assert_allclose(
        gs.cv_results_["mean_test_score"], swept.mean_val_score[0], atol=5e-3
    )


def test_cli_sweep_writes_table_csv_and_json(scene, swept, tmp_path, capsys):
    import json

    from jaxrank.cli import main

    X, Y = scene
    path = tmp_path / "scene.csv"
    np.savetxt(path, np.hstack([X, Y]), delimiter=",", fmt="%.8g")
    prefix = str(tmp_path / "out")
    argv = ["sweep", str(path), "--task-column", "-2", "-1", "--Cs", "0.03,3",
            "--cv", "3", "--max-iter", "1000", "--tol", "1e-4", "--output-prefix", prefix]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "compiling and running 12 fits" in out and "chosen C" in out
    summary = json.loads(Path(prefix + ".json").read_text())
    assert summary["best_C"] == {"col-2": swept.best_C[0], "col-1": swept.best_C[1]}
    lines = Path(prefix + ".csv").read_text().strip().splitlines()
    assert len(lines) == 1 + swept.n_fits
    # refuses to overwrite without --force, before any fit
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err


def test_rejects_bad_inputs_before_fitting(scene):
    X, Y = scene
    sweep = jaxrank.model_selection.sweep
    with pytest.raises(ValueError, match="Cs is empty"):
        sweep(X, Y, Cs=[])
    with pytest.raises(ValueError, match="> 0"):
        sweep(X, Y, Cs=[1.0, 0.0])
    with pytest.raises(ValueError, match="> 0"):
        sweep(X, Y, Cs=[-1.0])
    with pytest.raises(ValueError, match="float32"):
        sweep(X, Y, Cs=[1e39])
    with pytest.raises(ValueError, match="'k' parameter"):
        sweep(X, Y, Cs=[1.0], model="apsvm-appx", k=0.0)
    with pytest.raises(ValueError, match="'k' parameter"):
        sweep(X, Y, Cs=[1.0], model="apsvm-appx", k=1.5)
    with pytest.raises(ValueError, match="KernelRank has no C"):
        sweep(X, Y, Cs=[1.0], model="kernelrank")
    with pytest.raises(TypeError, match="jaxrank estimator"):
        sweep(X, Y, model=__import__("sklearn.svm").svm.LinearSVC())
    with pytest.raises(ValueError, match="refit"):
        sweep(X, Y, model="kernelrank", refit="yes")
    single = Y.copy()
    single[:, 1] = 0
    with pytest.raises(ValueError, match="task column 1"):
        sweep(X, single, Cs=[1.0])
    with pytest.raises(ValueError, match="task column 1"):
        jaxrank.APSVM().fit(X, single)
    # a fold whose validation part has no positive
    masks = np.zeros((2, X.shape[0]), bool)
    masks[0, Y[:, 0] == 0] = True
    masks[1, Y[:, 0] == 1] = True
    with pytest.raises(ValueError, match="fold 0: the validation part has 0 positive"):
        sweep(X, Y[:, 0], Cs=[1.0], cv=masks)
    with pytest.raises(ValueError, match="unknown model"):
        sweep(X, Y, Cs=[1.0], model="ranksvm")
    with pytest.raises(ValueError, match="batch_size"):
        sweep(X, Y, Cs=[1.0], batch_size=0)
    with pytest.raises(TypeError, match="batch_size"):
        sweep(X, Y, Cs=[1.0], batch_size=2.5)
    with pytest.raises(ValueError, match="devices is empty"):
        sweep(X, Y, Cs=[1.0], devices=[])
    with pytest.raises(TypeError, match="jax.Device"):
        sweep(X, Y, Cs=[1.0], devices=["cpu"])


def test_progress_reports_every_fit_and_devices_do_not_change_the_fits(scene, swept):
    import jax

    X, Y = scene
    counts = []
    one = jaxrank.model_selection.sweep(
        X, Y, Cs=CS, cv=CV, tol=TOL, random_state=0, refit=False, progress=counts.append,
        devices=jax.devices()[:1], batch_size=5,
    )
    assert len(jax.devices()) == 2  # conftest: the default sweep used both
    assert sum(counts) == one.n_fits == 12 and min(counts) > 0
    # one device, batch 5 vs the default (two devices, all fits in the slots)
    assert np.all(one.converged)
    np.testing.assert_allclose(one.objective, swept.objective, rtol=1e-3)
    assert np.all(one.objective >= swept.dual * (1 - 1e-5))
    assert np.all(swept.objective >= one.dual * (1 - 1e-5))


def test_joint_refit_equals_the_separate_refit(scene, swept):
    X, Y = scene
    joint = jaxrank.model_selection.sweep(X, Y, Cs=CS, cv=CV, tol=TOL, random_state=0,
                                          batch_size=4, refit="joint")
    np.testing.assert_array_equal(joint.best_C, swept.best_C)
    # each fit is optimal only to `tol`, so validation APs agree to a few 1e-3
    np.testing.assert_allclose(joint.val_score, swept.val_score, atol=1e-2)
    for a, b in zip(joint.best_estimators, swept.best_estimators):
        assert a.C == b.C and a.converged_ and b.converged_
        assert a.objective_ >= b.dual_objective_ * (1 - 1e-5)
        assert b.objective_ >= a.dual_objective_ * (1 - 1e-5)


def test_sweep_scores_svmperf_losses_by_their_own_measure(scene):
    """F1SVM's folds are scored by F1 of ``decision_function > 0`` (scikit-learn's
    f1_score of each CV fit's weights), and the best C maximises mean F1."""
    from sklearn.metrics import f1_score

    X, Y = scene
    y = Y[:, 0]
    res = jaxrank.sweep(X, y, model="f1-svm", Cs=[0.1, 10.0], cv=CV, random_state=0,
                        return_weights=True, refit=False)
    assert res.scoring == "f1"
    for g in range(2):
        for f in range(CV):
            val = res.val_masks[0, f]
            w = res.weights[0, g, f]
            s = X[val] @ w[:-1] + w[-1]
            np.testing.assert_allclose(res.val_score[0, g, f], f1_score(y[val], s > 0),
                                       atol=1e-6)
    assert res.best_index[0] == int(np.argmax(res.mean_val_score[0]))
    np.testing.assert_array_equal(res.val_ap, res.val_score)  # the former name
