"""HOB-SVM and HOAP-SVM (Dokania et al., ECCV 2014) against literal references."""

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sklearn.exceptions import ConvergenceWarning

import jaxrank
from jaxrank.inference import ap_most_violated
from jaxrank.models import (
    GraphData,
    HighOrderFeatures,
    HOAPModel,
    HOAPProblem,
    HOBModel,
    HOBProblem,
    design,
    pairwise_design,
)
from jaxrank.graph import graph_layout


def toy(n=36, d=4, seed=0):
    """Samples in small 'images' (cliques) whose members tend to share the label."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, n // 3, n)
    yg = rng.random(n // 3) < 0.35
    y = (yg[g] ^ (rng.random(n) < 0.1)).astype(int)
    X = rng.normal(size=(n, d)) + 0.9 * y[:, None] * np.linspace(1, 0, d)
    e = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if g[i] == g[j]])
    return X.astype(np.float32), y, e


@pytest.fixture(scope="module")
def data():
    return toy()


# ---------------------------------------------------------------------------
# Oracles against brute force (one connected graph of 8 samples).
# ---------------------------------------------------------------------------

N8 = 8


def graph8(seed=1, max_enum=12):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N8, 3)).astype(np.float32)
    ring = np.array([(i, (i + 1) % N8) for i in range(N8)] + [(0, 4), (1, 6)])
    y = np.array([1, 1, 0, 0, 1, 0, 0, 0], bool)
    lay = graph_layout(N8, ring, max_enum=max_enum)
    gd = GraphData(design(X), pairwise_design(X, np.asarray(lay.edges)), lay)
    return gd, y, lay


ALL_Y = np.array(list(itertools.product([0, 1], repeat=N8)))


def scores_of_all(S, lay):
    """S(Y) of every labeling, float64."""
    unary, pair = (np.asarray(a, np.float64) for a in S)
    E = np.asarray(lay.edges)
    return (np.where(ALL_Y == 1, unary[:, 1], unary[:, 0]).sum(1)
            + ((ALL_Y[:, E[:, 0]] != ALL_Y[:, E[:, 1]]) * pair).sum(1))


def random_w(feats, gd, seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=feats.dim(gd)).astype(np.float32)
    k = feats.width(gd)
    w[2 * k:] = -np.abs(w[2 * k:])  # w2 <= 0
    return jnp.asarray(w)


def test_hob_oracle_is_the_exact_loss_augmented_maximum():
    for max_enum in (12, 1):  # enumeration, then graph cuts
        gd, y, lay = graph8(max_enum=max_enum)
        feats = HighOrderFeatures(eta=0.7)
        model = HOBModel(features=feats)
        J = 2.0
        prob = HOBProblem(jnp.asarray(y), jnp.ones(N8, bool), jnp.float32(J), lay)
        a = np.where(y, J, 1.0) / (J * y.sum() + (~y).sum())
        star = (ALL_Y == y.astype(int)).all(1)
        oracle = jax.jit(model.oracle)
        for seed in range(3):
            S = feats(random_w(feats, gd, seed), gd)
            v = oracle(S, prob)
            total = scores_of_all(S, lay)
            delta = ((ALL_Y != y.astype(int)) * a).sum(1)
            slack = np.max(delta + total - total[star])
            assert abs(float(v.hinge) - slack) < 1e-4
            # hinge = loss - <S, coef> for the returned labeling
            inner = sum(float(jnp.vdot(s, c)) for s, c in zip(S, v.coef))
            assert abs(float(v.loss) - inner - float(v.hinge)) < 1e-4


def literal_hoap_slack(S, St, y, lay):
    """Proposition 5 literally: Ybar from St (w_t), max-marginals of S (w), AP inference."""
    tot, tot_t = scores_of_all(S, lay), scores_of_all(St, lay)
    sbar = np.zeros(N8)
    ybar = np.zeros((N8, N8), np.int8)
    for i in range(N8):
        truth = int(y[i])
        at = ALL_Y[:, i] == truth
        yb = ALL_Y[at][np.argmax(tot_t[at])]  # Proposition 4 labeling at w_t
        ybar[i] = yb
        mbar = tot[(ALL_Y == yb).all(1)][0]  # w . Psi(Ybar) at w
        wrong = tot[ALL_Y[:, i] != truth].max()  # max-marginal at the wrong label, at w
        sbar[i] = (mbar - wrong) if truth else (wrong - mbar)
    with jax.enable_x64(True):
        r = ap_most_violated(jnp.asarray(sbar), jnp.asarray(y))
    return float(r.hinge), ybar


@pytest.mark.parametrize("max_enum", [12, 1])
def test_hoap_oracle_matches_propositions_4_and_5(max_enum):
    gd, y, lay = graph8(max_enum=max_enum)
    feats = HighOrderFeatures(eta=0.5)
    model = HOAPModel(features=feats, kp=int(y.sum()))
    St = feats(random_w(feats, gd, 10), gd)
    oracle = jax.jit(model.oracle)
    for seed in range(2):
        w = random_w(feats, gd, seed)
        S = feats(w, gd)
        ref, ybar = literal_hoap_slack(S, St, y, lay)
        prob = HOAPProblem(jnp.asarray(y), jnp.ones(N8, bool), lay,
                           (jnp.asarray(ybar)[None],))
        v = oracle(S, prob)
        assert abs(float(v.hinge) - ref) < 1e-4
        # The plane is a subgradient of the (convex) slack: at any w', the slack is
        # at least the plane's value there.
        for s2 in range(3):
            S2 = feats(random_w(feats, gd, 100 + s2), gd)
            lin = float(v.loss) - sum(float(jnp.vdot(a, c)) for a, c in zip(S2, v.coef))
            assert float(oracle(S2, prob).hinge) >= lin - 1e-4


# ---------------------------------------------------------------------------
# eta = 0: the paper's baselines.
# ---------------------------------------------------------------------------


def test_hob_with_eta_zero_is_the_weighted_binary_svm(data):
    X, y, e = data
    C = 0.05
    h = jaxrank.HOBSVM(C=C, eta=0.0, fit_intercept=False, tol=1e-5, max_iter=4000).fit(
        X, y, edges=e)
    P, N = y.sum(), (1 - y).sum()
    J, Z = N / P, 2.0 * N
    a = np.where(y == 1, J / Z, 1 / Z)  # margins of (7)
    b = jaxrank.BinarySVM(C=2 * C / Z, pos_weight=J, fit_intercept=False, tol=1e-6,
                          max_iter=20000).fit(X / a[:, None], y)
    gap_h = h.objective_ - h.dual_objective_
    gap_b = b.objective_ - b.dual_objective_
    # Same optimum: HOB = BinarySVM / 2, each certified within its gap.
    assert abs(h.objective_ - b.objective_ / 2) <= gap_h + gap_b / 2 + 1e-5 * h.objective_
    # Strong convexity: ||v - v*|| <= 2 sqrt(gap_h) (HOB, 1/4||v||^2) and
    # ||w - w*|| <= sqrt(2 gap_b) (BinarySVM).
    bound = 2 * np.sqrt(gap_h) + np.sqrt(2 * gap_b) + 1e-5
    assert np.linalg.norm(h.coef_[0] - b.coef_[0]) <= bound
    assert bound < 0.2 * np.linalg.norm(b.coef_[0])  # the check is not vacuous


def test_hoap_with_eta_zero_is_apsvm_with_twice_c(data):
    X, y, e = data
    C = 5.0
    h = jaxrank.HOAPSVM(C=C, eta=0.0, init="zero", tol=1e-4, max_iter=2000,
                        cccp_max_iter=1).fit(X, y, edges=e)
    ap = jaxrank.APSVM(C=2 * C, tol=1e-6, max_iter=5000).fit(X, y)
    # eta = 0: isolated samples, so the linearisation is exact: the objective (16) at the
    # new weights is the convex step's objective, AP-SVM(2C) in v = w+ - w- (halved).
    assert abs(h.cccp_objectives_[1] - h.objective_) <= 1e-5 * h.objective_
    gap_h = h.objective_ - h.dual_objective_
    gap_a = ap.objective_ - ap.dual_objective_
    assert abs(h.objective_ - ap.objective_ / 2) <= gap_h + gap_a / 2 + 1e-5 * h.objective_
    bound = 2 * np.sqrt(gap_h) + np.sqrt(2 * gap_a) + 1e-5
    assert np.linalg.norm(h.coef_[0] - ap.coef_[0]) <= bound
    assert bound < 0.2 * np.linalg.norm(ap.coef_[0])
    assert abs(h.intercept_[0]) < 1e-3  # AP is shift invariant: the offset stays 0


def test_hoap_apsvm_init_starts_at_apsvm_objective(data):
    # init="apsvm": w_0 minimises (16) with w2 = 0, i.e. AP-SVM(2C) in v = w+ - w-
    # (objective halved); CCCP with the edges then never goes above it.
    X, y, e = data
    C = 5.0
    h = jaxrank.HOAPSVM(C=C, eta=0.5, init="apsvm", tol=1e-5, max_iter=2000,
                        cccp_max_iter=2, cccp_tol=0.0).fit(X, y, edges=e)
    ap = jaxrank.APSVM(C=2 * C, tol=1e-6, max_iter=5000).fit(X, y)
    F = h.cccp_objectives_
    # (16) at w_0 (with the edges; w2 = 0 so they add nothing) is AP-SVM's objective
    # at a point certified within tol = 1e-5 of its optimum.
    assert ap.dual_objective_ / 2 - 1e-6 <= F[0] <= (ap.objective_ / 2) * (1 + 3e-5) + 1e-6
    assert np.all(np.diff(F) <= 1e-5 * F[:-1])
    # The HOB-SVM initialisation starts elsewhere (above AP-SVM's optimum).
    with warnings.catch_warnings():  # 50 iterations: enough to start elsewhere
        warnings.simplefilter("ignore", ConvergenceWarning)
        hob = jaxrank.HOAPSVM(C=C, eta=0.5, init="hobsvm", cccp_max_iter=1,
                              max_iter=50).fit(X, y, edges=e)
    assert hob.cccp_objectives_[0] > F[0] + 1e-3 * F[0]


def test_hoap_cccp_stops_only_after_a_converged_step(data):
    # cccp_tol = 1: the rule fires after every step. After a converged step CCCP
    # stops there; after a step cut off at max_iter it makes one more step (once),
    # then stops, unconverged.
    X, y, e = data
    kw = dict(C=5.0, eta=0.5, init="zero", cccp_max_iter=5, cccp_tol=1.0, tol=1e-4)
    done = jaxrank.HOAPSVM(max_iter=2000, **kw).fit(X, y, edges=e)
    assert done.converged_ and done.n_cccp_iter_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cut = jaxrank.HOAPSVM(max_iter=3, **kw).fit(X, y, edges=e)
    assert not cut.converged_ and cut.n_cccp_iter_ == 2
    assert np.all(cut.cccp_gaps_ > kw["tol"] * cut.cccp_objectives_[:-1])  # both cut off


def _hoap_weights(h):
    return np.concatenate([np.ravel(h.coef_), np.ravel(h.intercept_),
                           np.ravel(h.pairwise_coef_), np.ravel(h.pairwise_intercept_)])


def test_self_paced_first_step_is_the_fit_without_the_hardest_positives(data):
    # From w = 0 every score ties, so the first self-paced step keeps the
    # ceil(|P| / 2) positives of lowest index (documented tie rule) and every
    # negative: its convex problem is HOAP-SVM's on the data without the other
    # positives (their rows and edges removed), from the same start.
    X, y, e = data
    C, eta = 5.0, 0.5
    kw = dict(C=C, eta=eta, init="zero", tol=1e-5, max_iter=3000, cccp_max_iter=1)
    spl = jaxrank.HOAPSVM(self_paced=True, **kw).fit(X, y, edges=e)
    pos = np.flatnonzero(y == 1)
    hard = pos[int(np.ceil(0.5 * pos.size)):]
    keep = np.setdiff1d(np.arange(y.size), hard)
    new_id = -np.ones(y.size, np.int64)
    new_id[keep] = np.arange(keep.size)
    e_keep = new_id[e[np.all(np.isin(e, keep), axis=1)]]
    ref = jaxrank.HOAPSVM(**kw).fit(X[keep], y[keep], edges=e_keep)
    assert spl.n_cccp_iter_ == ref.n_cccp_iter_ == 1
    # The step moved from w = 0 under the full objective (16), so it is the one kept.
    assert spl.cccp_objectives_[1] < spl.cccp_objectives_[0]
    # Both convex steps are certified within their gaps (strong convexity of 1/2||w||^2;
    # coef_ = w+ - w- doubles a distance in w).
    bound = 2 * (np.sqrt(2 * (spl.objective_ - spl.dual_objective_))
                 + np.sqrt(2 * (ref.objective_ - ref.dual_objective_))) + 1e-4
    assert np.linalg.norm(_hoap_weights(spl) - _hoap_weights(ref)) <= bound
    assert bound < 0.2 * np.linalg.norm(_hoap_weights(ref))
    full = jaxrank.HOAPSVM(**kw).fit(X, y, edges=e)
    assert np.linalg.norm(_hoap_weights(full) - _hoap_weights(ref)) > 2 * bound


def test_self_paced_cccp_does_not_stop_while_the_share_grows(data):
    # cccp_tol = 1 stops plain CCCP after one step; the self-paced share is
    # 0.5, 0.65, 0.845 of the positives in steps 1-3 and all of them in step 4.
    X, y, e = data
    kw = dict(C=5.0, eta=0.5, cccp_tol=1.0, max_iter=200, cccp_max_iter=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = jaxrank.HOAPSVM(**kw).fit(X, y, edges=e)
        spl = jaxrank.HOAPSVM(self_paced=True, **kw).fit(X, y, edges=e)
    assert plain.n_cccp_iter_ == 1
    assert spl.n_cccp_iter_ == 4
    assert len(spl.cccp_objectives_) == 5  # the start and the full objective (16) of each step


# ---------------------------------------------------------------------------
# Training with the pairwise part.
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hoap(data):
    X, y, e = data
    return jaxrank.HOAPSVM(C=5.0, eta=0.5, cccp_max_iter=3, cccp_tol=0.0, max_iter=10,
                           tol=1e-4).fit(X, y, edges=e)


def test_cccp_objective_is_non_increasing(hoap):
    h = hoap
    F, gaps = h.cccp_objectives_, h.cccp_gaps_
    assert len(F) == h.n_cccp_iter_ + 1 >= 3
    assert np.any(gaps > 1e-4 * F[1:])  # some step stopped unconverged (max_iter=10) ...
    for t in range(len(F) - 1):  # ... and still no increase: warm-started at W_t
        assert F[t + 1] <= F[t] + 1e-5 * F[t]
    assert F[-1] < F[0]  # CCCP moved from the HOB-SVM initialisation
    assert np.all(h.pairwise_coef_ <= 0) and np.all(h.pairwise_intercept_ <= 0)  # w2 <= 0


@pytest.fixture(scope="module")
def hob_fits(data):
    """HOB-SVM on the toy data by enumeration (``auto``) and by graph cuts (``bk``)."""
    X, y, e = data
    kw = {"C": 0.05, "eta": 0.5, "max_iter": 150}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # both converge (tol 1e-4)
        a = jaxrank.HOBSVM(graph_method="auto", **kw).fit(X, y, edges=e)  # enumeration
        b = jaxrank.HOBSVM(graph_method="bk", **kw).fit(X, y, edges=e)
    return kw, a, b


def test_back_ends_agree_in_training(hob_fits):
    # Enumeration (XLA, float32) and graph cuts (C, float64) give the same
    # max-marginals up to rounding, so the fits reach the same optimum: their
    # certified intervals [dual, objective] overlap.
    _, a, b = hob_fits
    for f in (a, b):  # converged: intervals of relative width <= tol
        assert f.objective_ - f.dual_objective_ <= 1e-4 * f.objective_
    assert max(a.dual_objective_, b.dual_objective_) <= min(a.objective_, b.objective_) + 1e-6
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=2e-4)


def test_decision_function_is_the_max_marginal_difference(data, hoap):
    X, y, e = data
    h = hoap
    s = h.decision_function(X, edges=e)
    # Literal (11) from the fitted weights, each component by brute force.
    unary = np.stack([np.zeros(len(y)), X @ h.coef_[0] + h.intercept_[0]], 1)
    phi = np.exp(-(X[e[:, 0]] - X[e[:, 1]]) ** 2)
    pair = h.pairwise_intercept_[0] + phi @ h.pairwise_coef_[0]
    with jax.enable_x64(True):
        mm = np.asarray(jaxrank.graph.max_marginals(unary, e, np.minimum(pair, 0),
                                                    method="enumerate"))
    np.testing.assert_allclose(s, mm[:, 1] - mm[:, 0], atol=1e-4)
    assert h.score(X, y, edges=e) > 0.8
    np.testing.assert_array_equal(h.predict(X, edges=e), (s > 0).astype(int))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_hob_multi_task_equals_single_tasks(data, hob_fits):
    X, y, e = data
    kw, one, _ = hob_fits
    Y = np.stack([y, 1 - y], 1)
    both = jaxrank.HOBSVM(**kw).fit(X, Y, edges=e)
    assert both.coef_.shape == (2, X.shape[1])
    # The batched fit of task 0 and the single fit solve the same problem: their
    # certified intervals [dual, objective] overlap.
    assert max(both.dual_objective_[0], one.dual_objective_) <= min(
        both.objective_[0], one.objective_) + 1e-6
    s = both.decision_function(X, edges=e)
    assert s.shape == (len(y), 2)
    # Task 1 ranks the other class: its AP is high for the negatives of task 0.
    assert both.score(X, Y, edges=e) > 0.7


# ---------------------------------------------------------------------------
# Errors, persistence, command line.
# ---------------------------------------------------------------------------


def test_bad_inputs(data):
    X, y, e = data
    with pytest.raises(ValueError, match="eta must be >= 0"):
        jaxrank.HOBSVM(eta=-1.0).fit(X, y, edges=e)
    with pytest.raises(ValueError, match="names a node outside"):
        jaxrank.HOBSVM().fit(X, y, edges=np.array([[0, len(y)]]))
    with pytest.raises(ValueError, match="self-loop"):
        jaxrank.HOAPSVM().fit(X, y, edges=np.array([[3, 3]]))
    with pytest.raises(TypeError, match="edges"):
        jaxrank.HOBSVM().fit(X, y)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        jaxrank.HOBSVM().fit(Xn, y, edges=e)
    with pytest.raises(ValueError, match="graph_method"):
        jaxrank.HOBSVM(graph_method="magic").fit(X, y, edges=e)
    with pytest.raises(ValueError, match="init_C"):
        jaxrank.HOAPSVM(init_C=0.0).fit(X, y, edges=e)
    with pytest.raises(ValueError, match="init"):
        jaxrank.HOAPSVM(init="svm").fit(X, y, edges=e)
    # features beyond what the float32 solver can resolve: an error, not a
    # silently non-ranking model (issue 9)
    for cls in (jaxrank.HOBSVM, jaxrank.HOAPSVM):
        with pytest.raises(ValueError, match="Rescale X"):
            cls().fit(X * 1e-20, y, edges=e)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_save_load_and_command_line(data, hoap, tmp_path, capsys):
    X, y, e = data
    h = hoap
    jaxrank.save(h, tmp_path / "m.npz")
    back = jaxrank.load(tmp_path / "m.npz")
    np.testing.assert_allclose(back.decision_function(X, edges=e),
                               h.decision_function(X, edges=e), atol=1e-6)
    np.testing.assert_allclose(back.cccp_objectives_, h.cccp_objectives_)
    from sklearn.datasets import dump_svmlight_file

    from jaxrank.cli import main

    dump_svmlight_file(X, y, str(tmp_path / "train.svm"), zero_based=False)
    np.savetxt(tmp_path / "edges.txt", e, fmt="%d")
    assert main(["train", str(tmp_path / "train.svm"), str(tmp_path / "hob.npz"), "--model",
                 "hob-svm", "--edges", str(tmp_path / "edges.txt"), "-c", "0.05", "--param",
                 "eta=0.5", "--max-iter", "50", "--quiet"]) == 0
    assert main(["predict", str(tmp_path / "hob.npz"), str(tmp_path / "train.svm"), "--edges",
                 str(tmp_path / "edges.txt"), "-o", str(tmp_path / "s.txt")]) == 0
    model = jaxrank.load(tmp_path / "hob.npz")
    np.testing.assert_allclose(np.loadtxt(tmp_path / "s.txt"),
                               model.decision_function(X, edges=e), rtol=1e-5, atol=1e-6)
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "hob.npz"), str(tmp_path / "train.svm"), "--edges",
                 str(tmp_path / "edges.txt")]) == 0
    printed = dict(line.split() for line in capsys.readouterr().out.splitlines()
                   if line.startswith(("AP ", "ROC-AUC ")))
    assert abs(float(printed["AP"]) - model.score(X, y, edges=e)) < 1e-4
    # Without --edges a graph model cannot score: a clear error (exit status 2).
    assert main(["evaluate", str(tmp_path / "hob.npz"), str(tmp_path / "train.svm")]) == 2
    assert "needs --edges" in capsys.readouterr().err
    # HOAP-SVM from the command line, on dense .npz data with the settings of the `hoap`
    # fixture (its compiled programs are reused), one CCCP step: the same first step.
    np.savez(tmp_path / "train.npz", X=X, y=y)
    assert main(["train", str(tmp_path / "train.npz"), str(tmp_path / "hoap.npz"), "--model",
                 "hoap-svm", "--edges", str(tmp_path / "edges.txt"), "-c", "5", "--param",
                 "eta=0.5", "--param", "cccp_max_iter=1", "--max-iter", "10", "--quiet"]) == 0
    hoap_cli = jaxrank.load(tmp_path / "hoap.npz")
    assert isinstance(hoap_cli, jaxrank.HOAPSVM) and hoap_cli.n_cccp_iter_ == 1
    np.testing.assert_allclose(hoap_cli.cccp_objectives_, h.cccp_objectives_[:2], rtol=1e-4)
    assert main(["predict", str(tmp_path / "hoap.npz"), str(tmp_path / "train.npz"),
                 "--edges", str(tmp_path / "edges.txt"), "-o", str(tmp_path / "s2.txt")]) == 0
    np.testing.assert_allclose(np.loadtxt(tmp_path / "s2.txt"),
                               hoap_cli.decision_function(X, edges=e), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, Cs, kw, refit", [
    ("hob-svm", [0.01, 0.1], {"eta": 0.5, "max_iter": 150}, True),
    ("hoap-svm", [5.0], {"eta": 0.5, "cccp_max_iter": 2, "max_iter": 50}, False),
])
def test_sweep_fits_are_the_fits_on_whole_components(data, name, Cs, kw, refit):
    """``sweep(edges=...)``: folds of whole components; each (C, fold) fit and its
    validation AP are those of the estimator on the fold's own samples and subgraph."""
    X, y, e = data
    cls = jaxrank.ESTIMATORS[name]
    res = jaxrank.sweep(X, y, model=name, edges=e, Cs=Cs, cv=2, refit=refit, **kw)
    side, n = cls.side_input, len(y)
    units = side.units(e, n)
    for f in range(2 if refit else 1):  # (HOAP: one fold, no refit: compilations)
        val = res.val_masks[0, f]
        assert not set(units[val]) & set(units[~val])  # no component is split
        for g, C in enumerate(Cs):
            one = cls(C=C, **kw).fit(X[~val], y[~val], edges=side.take(e, ~val, n))
            np.testing.assert_allclose(res.objective[0, g, f], one.objective_, rtol=1e-4)
            np.testing.assert_allclose(
                res.val_score[0, g, f], one.score(X[val], y[val], edges=side.take(e, val, n)),
                atol=1e-6)
    if not refit:
        return
    best = res.best_estimators[0]
    ref = cls(C=res.best_C[0], **kw).fit(X, y, edges=e)
    np.testing.assert_allclose(best.objective_, ref.objective_, rtol=1e-4)
    assert best.score(X, y, edges=e) == pytest.approx(ref.score(X, y, edges=e), abs=1e-6)
