"""Query-grouped AP-SVM (SVM-map, mean AP over queries) against independent references.

* the grouped oracle of :class:`jaxrank.models.APModel` is the mean of the
  per-query most-violated rankings (per-query :func:`ap_most_violated` and the
  literal Algorithm 1 of ``reference.py``), with padding, ``where`` masks and
  queries without a relevant or without an irrelevant item (dropped);
* one query: the grouped fit is the pooled fit;
* the fitted objective is certified against the n-slack QP
  ``1/2 ||w||^2 + C/Q sum_q xi_q`` over every ranking of every query
  (brute force, scipy) and against the literal 1-slack cutting plane;
* the fit ignores dropped queries and the order of the samples; sweeps over
  folds of whole queries equal single fits;
* ``score(..., groups=)`` and the sweep's validation MAP are the MAP of a
  Python loop over ``sklearn.metrics.average_precision_score``;
* bad input; the CLI on a small ``qid:`` file with grades 0/1/2.
"""

import itertools
import warnings
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest
import reference
from scipy.optimize import minimize
from sklearn.datasets import dump_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import average_precision_score

import jaxrank
from jaxrank.cli import main
from jaxrank.inference import ap_most_violated
from jaxrank.models import APModel, QueryProblem, query_layout

# ---------------------------------------------------------------------------
# Helpers: random queries and independent references.
# ---------------------------------------------------------------------------


def random_queries(seed, sizes=(6, 1, 9, 3, 7, 4, 8, 5), d=4):
    """Interleaved, unsorted, non-contiguous query ids; grades 0/1/2.

    Query 1 has no relevant item and query 2 only relevant ones (both are
    dropped); the sizes differ, so the layout is padded.
    """
    rng = np.random.default_rng(seed)
    ids = rng.permutation(np.arange(len(sizes)) * 7 - 11)
    q = np.concatenate([np.full(s, g) for s, g in zip(sizes, ids)])
    y = rng.integers(0, 3, q.size) * (rng.random(q.size) < 0.5)
    y[q == ids[1]] = 0
    y[q == ids[2]] = rng.integers(1, 3, sizes[2])
    for k, g in enumerate(ids):  # the others get both kinds
        if k not in (1, 2):
            it = np.flatnonzero(q == g)
            y[it[0]], y[it[-1]] = 2, 0
    perm = rng.permutation(q.size)
    X = rng.normal(size=(q.size, d)).astype(np.float32)
    return X[perm], y[perm], q[perm]


def ok_queries(q, pos, where):
    """Query ids with a relevant and an irrelevant item among ``where``."""
    return [g for g in np.unique(q)
            if (pos & where & (q == g)).any() and (~pos & where & (q == g)).any()]


def grouped_literal_oracle(X, pos, q):
    """Mean over queries of the literal Algorithm 1: ``oracle(w) -> (loss, X^T coef)``."""
    X = np.asarray(X, np.float64)
    keep = ok_queries(q, pos, np.ones_like(pos))

    def oracle(w):
        loss, a = 0.0, np.zeros(X.shape[1])
        for g in keep:
            it = np.flatnonzero(q == g)
            s = X[it] @ w
            opt, p, n = reference.literal_algorithm1(s, pos[it])
            lq, coef, _ = reference.outputs_from_interleaving(s, pos[it], opt, p, n)
            loss += lq
            a += X[it].T @ coef
        return loss / len(keep), a / len(keep)

    return oracle


def all_ranking_planes(Xq, pos):
    """``(Delta, a)`` of every ranking of one query (brute force, unique planes).

    ``xi >= Delta(R) - a(R)^T w`` with ``a = Psi(R*) - Psi(R)`` of eq. (1) of
    Mohapatra et al. 2014 (``1/(|P||N|)`` normalisation); the true ranking
    gives ``(0, 0)``.
    """
    P, N = int(pos.sum()), int((~pos).sum())
    planes = set()
    for perm in itertools.permutations(range(len(pos))):
        order = np.array(perm)
        rank = np.empty(len(pos), int)
        rank[order] = np.arange(len(pos))
        a = np.zeros(Xq.shape[1])
        for i in np.flatnonzero(pos):
            for j in np.flatnonzero(~pos):
                if rank[i] > rank[j]:  # R_ij = -1: (1 - R_ij) = 2
                    a += 2 * (Xq[i] - Xq[j]) / (P * N)
        loss = 1 - reference.ap_of_ranking(pos[order])
        planes.add((round(loss, 12),) + tuple(np.round(a, 12)))
    return np.array(sorted(planes))


def nslack_qp(X, pos, q, C):
    """Exact optimum of ``1/2||w||^2 + C/Q sum_q xi_q`` (all rankings, SLSQP).

    Returns ``(optimum, F)`` with ``F(w)`` the n-slack objective evaluated by
    brute force over every ranking of every query.
    """
    X = np.asarray(X, np.float64)
    keep = ok_queries(q, pos, np.ones_like(pos))
    Q, d = len(keep), X.shape[1]
    planes = [all_ranking_planes(X[q == g], pos[q == g]) for g in keep]

    def F(w):
        return 0.5 * w @ w + C / Q * sum(max(0.0, np.max(p[:, 0] - p[:, 1:] @ w))
                                         for p in planes)

    A = np.zeros((sum(len(p) for p in planes), d + Q))
    b = np.concatenate([p[:, 0] for p in planes])
    row = 0
    for k, p in enumerate(planes):  # xi_k + a^T w - Delta >= 0
        A[row : row + len(p), :d] = p[:, 1:]
        A[row : row + len(p), d + k] = 1.0
        row += len(p)
    c = np.r_[np.zeros(d), np.full(Q, C / Q)]
    res = minimize(lambda z: 0.5 * z[:d] @ z[:d] + c @ z,
                   np.r_[np.zeros(d), np.ones(Q)],
                   jac=lambda z: np.r_[z[:d], np.zeros(Q)] + c,
                   constraints=[{"type": "ineq", "fun": lambda z: A @ z - b,
                                 "jac": lambda z: A}],
                   method="SLSQP", options={"ftol": 1e-12, "maxiter": 2000})
    assert res.success and np.min(A @ res.x - b) > -1e-9, res.message
    return F(res.x[:d]), F


def assert_same_optimum(a, b):
    """Two fits of one strongly convex problem: objectives and weights agree.

    ``F(w) - F* >= 1/2 ||w - w*||^2``, so each fit's certified gap
    (``objective_`` minus the best lower bound) bounds its distance to ``w*``.
    """
    lower = max(a.dual_objective_, b.dual_objective_)
    assert min(a.objective_, b.objective_) >= lower * (1 - 1e-6)
    ra = np.sqrt(2 * max(a.objective_ - lower, 0.0))
    rb = np.sqrt(2 * max(b.objective_ - lower, 0.0))
    assert np.linalg.norm(a.coef_ - b.coef_) <= (ra + rb) * 1.01 + 1e-6


def fit_quiet(est, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return est.fit(*args, **kw)


# ---------------------------------------------------------------------------
# 1. The grouped oracle.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed,method", [(0, "select"), (1, "select"), (2, "greedy")])
def test_grouped_oracle_is_the_mean_of_per_query_oracles(seed, method):
    X, y, q = random_queries(seed)
    rng = np.random.default_rng(100 + seed)
    n = q.size
    pos = y >= 1
    where = rng.random(n) < 0.8
    where[q == q[0]] = False  # a query removed entirely by where
    S = rng.normal(size=n).astype(np.float32)
    layout, ids = query_layout(q)
    assert layout.shape == (len(np.unique(q)), np.bincount(q - q.min()).max())
    np.testing.assert_array_equal(ids, np.unique(q))
    assert (layout == n).any()  # padded
    kp = int(max((pos & where & (q == g)).sum() for g in ids))
    r = APModel(kp=kp, method=method, grouped=True).oracle(
        jnp.asarray(S), QueryProblem(jnp.asarray(pos), jnp.asarray(where), jnp.asarray(layout)))

    keep = ok_queries(q, pos, where)
    assert 2 <= len(keep) < len(ids)  # some queries are dropped
    loss, hinge, coef = 0.0, 0.0, np.zeros(n)
    for g in keep:
        # one query: every other item masked out (one shape, so one compile)
        v = ap_most_violated(S, pos, where=where & (q == g), method=method)
        loss, hinge = loss + float(v.loss), hinge + float(v.hinge)
        coef += np.asarray(v.coef)
        # and the per-query value is the literal Algorithm 1's on its items (float64)
        sub = np.flatnonzero(where & (q == g))
        opt, p_, n_ = reference.literal_algorithm1(S[sub], pos[sub])
        lref, cref, href = reference.outputs_from_interleaving(S[sub], pos[sub], opt, p_, n_)
        np.testing.assert_allclose([float(v.loss), float(v.hinge)], [lref, href],
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(v.coef)[sub], cref, rtol=1e-5, atol=1e-7)
    Q = len(keep)
    np.testing.assert_allclose(float(r.loss), loss / Q, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(float(r.hinge), hinge / Q, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(r.coef), coef / Q, rtol=1e-6, atol=1e-8)
    assert not np.asarray(r.coef)[~where].any()  # masked items get nothing
    # hinge = loss - <S, coef> (the solver's convention)
    np.testing.assert_allclose(float(r.hinge), float(r.loss) - S @ np.asarray(r.coef),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# 2. Fits against references.
# ---------------------------------------------------------------------------


def test_one_query_grouped_fit_equals_pooled_fit(page_blocks):
    X, y = page_blocks
    rng = np.random.default_rng(0)
    idx = np.r_[rng.choice(np.flatnonzero(y > 0), 20, replace=False),
                rng.choice(np.flatnonzero(y <= 0), 140, replace=False)]
    rng.shuffle(idx)
    Xs, ys = X[idx], (y[idx] > 0).astype(int)
    pooled = fit_quiet(jaxrank.APSVM(C=100.0), Xs, ys)
    grouped = fit_quiet(jaxrank.APSVM(C=100.0), Xs, ys, groups=np.full(len(ys), 42))
    assert grouped.n_queries_ == 1 and grouped.n_dropped_queries_ == 0
    # Same problem: each fit's certified dual bound lies below the other's
    # objective, and (1-strong convexity of the primal) the weights are within
    # sqrt(2 gap_a) + sqrt(2 gap_b) of each other.
    assert grouped.converged_ and pooled.converged_
    assert grouped.objective_ >= pooled.dual_objective_ * (1 - 1e-5)
    assert pooled.objective_ >= grouped.dual_objective_ * (1 - 1e-5)
    slack = sum(np.sqrt(2 * max(e.objective_ - e.dual_objective_, 0.0)) for e in (grouped, pooled))
    w = lambda e: np.r_[e.coef_.ravel(), e.intercept_]  # noqa: E731
    assert np.linalg.norm(grouped.coef_ - pooled.coef_) <= slack + 1e-4 * np.linalg.norm(w(pooled))
    # one query: MAP is the pooled AP of the same scores
    np.testing.assert_allclose(grouped.score(Xs, ys, groups=np.zeros(len(ys), int)),
                               average_precision_score(ys, grouped.decision_function(Xs)),
                               rtol=1e-6)


@pytest.mark.parametrize("C", [1.0, 30.0])
def test_objective_is_the_exact_nslack_optimum_by_brute_force(C):
    rng = np.random.default_rng(3)
    sizes = [4, 5, 3, 5, 4, 2]
    q = np.repeat(np.arange(len(sizes)) * 3, sizes)
    X = rng.normal(size=(q.size, 3))
    pos = rng.random(q.size) < 0.45
    for g in np.unique(q)[:-1]:  # both kinds in all but the last query
        it = np.flatnonzero(q == g)
        pos[it[0]], pos[it[-1]] = True, False
    pos[q == q[-1]] = False  # dropped
    opt, F = nslack_qp(X, pos, q, C)
    m = fit_quiet(jaxrank.APSVM(C=C), X.astype(np.float32), pos.astype(int), groups=q)
    assert m.converged_ and m.n_queries_ == len(sizes) and m.n_dropped_queries_ == 1
    f = F(m.coef_[0].astype(np.float64))  # its objective, re-evaluated by brute force
    np.testing.assert_allclose(f, m.objective_, rtol=1e-5)
    assert opt * (1 - 1e-6) <= f <= opt * (1 + 1.5e-4)  # within tol = 1e-4 of the optimum
    assert opt * (1 - 1.5e-4) <= m.dual_objective_ <= opt * (1 + 1e-5)


@pytest.mark.parametrize("C", [1.0, 100.0])
def test_objective_matches_the_literal_1slack_cutting_plane(page_blocks, C):
    X, y = page_blocks
    rng = np.random.default_rng(1)
    idx = np.r_[rng.choice(np.flatnonzero(y > 0), 20, replace=False),
                rng.choice(np.flatnonzero(y <= 0), 100, replace=False)]
    Xs, pos = X[idx][:, :5], y[idx] > 0
    q = rng.integers(0, 8, idx.size)
    _, primal, dual = reference.cutting_plane_ssvm(
        grouped_literal_oracle(Xs, pos, q), Xs.shape[1], C)
    assert primal - dual <= 1e-6 * primal
    m = fit_quiet(jaxrank.APSVM(C=C), Xs, pos.astype(int), groups=q)
    w = m.coef_[0].astype(np.float64)
    b, a = grouped_literal_oracle(Xs, pos, q)(w)
    f = 0.5 * w @ w + C * max(0.0, b - a @ w)
    np.testing.assert_allclose(f, m.objective_, rtol=1e-4)
    assert dual * (1 - 1e-6) <= f <= primal * (1 + 2e-4)
    assert m.dual_objective_ <= primal * (1 + 1e-5)


def test_fit_ignores_dropped_queries_and_sample_order():
    X, y, q = random_queries(7, sizes=(9, 12, 10, 8, 11, 13), d=5)
    rng = np.random.default_rng(7)
    keep = np.isin(q, ok_queries(q, y >= 1, np.ones(q.size, bool)))
    ref = fit_quiet(jaxrank.APSVM(C=50.0), X[keep], y[keep], groups=q[keep])
    assert ref.n_queries_ == 4 and ref.n_dropped_queries_ == 0
    perm = rng.permutation(q.size)
    m = fit_quiet(jaxrank.APSVM(C=50.0), X[perm], y[perm], groups=q[perm] * 1000)
    assert m.n_queries_ == 6 and m.n_dropped_queries_ == 2
    assert_same_optimum(m, ref)
    # a pooled refit forgets the queries: its MAP reads y by its classes_
    labels = np.where(y >= 1, "relevant", "other")
    m.fit(X, labels)
    assert not hasattr(m, "n_queries_") and not hasattr(m, "n_dropped_queries_")
    ref, _ = sklearn_map(m.decision_function(X).astype(np.float64), labels == "relevant", q)
    np.testing.assert_allclose(m.score(X, labels, groups=q), ref, rtol=1e-5)


def sklearn_map(scores, rel, q):
    """MAP by a Python loop over ``sklearn.metrics.average_precision_score``."""
    aps = [average_precision_score(rel[q == g], scores[q == g]) for g in np.unique(q)
           if 0 < rel[q == g].sum() < (q == g).sum()]
    assert len(aps) >= 1
    return np.mean(aps), len(aps)


def test_sweep_over_whole_queries_equals_single_fits_and_map_is_sklearns():
    X, y, q = random_queries(5, sizes=(10, 14, 9, 12, 11, 13, 8, 10, 12), d=4)
    res = jaxrank.sweep(X, y, groups=q, Cs=[1.0, 30.0], cv=3, return_weights=True)
    masks = res.val_masks[0]
    for g in np.unique(q):  # each query lies in exactly one validation fold
        assert (masks[:, q == g].all(axis=1).sum() == 1
                and masks[:, q == g].any(axis=1).sum() == 1)
    for f in range(3):
        va = masks[f]
        for k in range(len(res.Cs)):
            # the validation MAP is the MAP of the fit's weights on the held-out queries
            s = X[va] @ res.weights[0, k, f]
            np.testing.assert_allclose(res.val_score[0, k, f],
                                       sklearn_map(s, y[va] >= 1, q[va])[0], rtol=1e-5)
    tr = ~masks[0]  # fold 0 (one compile): the CV fits equal single fits
    for k, C in enumerate(res.Cs):
        m = fit_quiet(jaxrank.APSVM(C=C), X[tr], y[tr], groups=q[tr])
        assert_same_optimum(SimpleNamespace(objective_=res.objective[0, k, 0],
                                            dual_objective_=res.dual[0, k, 0],
                                            coef_=res.weights[0, k, 0][None]), m)
    single = fit_quiet(jaxrank.APSVM(C=res.best_C[0]), X, y, groups=q)
    best = res.best_estimators[0]
    assert_same_optimum(best, single)
    assert (best.n_queries_, best.n_dropped_queries_) == (single.n_queries_,
                                                          single.n_dropped_queries_)
    np.testing.assert_allclose(best.score(X, y, groups=q),  # grades: fitted on queries
                               sklearn_map(best.decision_function(X), y >= 1, q)[0], rtol=1e-5)
    # score(..., groups=) is the MAP of a loop over sklearn, for each min_relevance
    s = single.decision_function(X).astype(np.float64)
    for min_rel in (1, 2):
        single.set_params(min_relevance=min_rel)
        ref, used = sklearn_map(s, y >= min_rel, q)
        assert used < len(np.unique(q))  # single-kind queries are left out
        np.testing.assert_allclose(single.score(X, y, groups=q), ref, rtol=1e-5)


# ---------------------------------------------------------------------------
# 3. Bad input.
# ---------------------------------------------------------------------------


def test_bad_groups_and_grades_are_clear_errors():
    X, y, q = random_queries(0)
    est = jaxrank.APSVM(C=1.0)
    with pytest.raises(ValueError, match="groups must be a 1-D array of"):
        est.fit(X, y, groups=q[:-1])
    with pytest.raises(ValueError, match="groups must be a 1-D array of"):
        est.fit(X, y, groups=q[:, None])
    with pytest.raises(TypeError, match="groups must hold integer query ids"):
        est.fit(X, y, groups=q + 0.5)
    with pytest.raises(TypeError, match="groups must hold integer query ids"):
        est.fit(X, y, groups=q.astype(str))
    with pytest.raises(ValueError, match="relevant .* and irrelevant items"):
        est.fit(X, np.zeros_like(y), groups=q)
    with pytest.raises(ValueError, match="relevant .* and irrelevant items"):
        jaxrank.APSVM(min_relevance=3).fit(X, y, groups=q)
    with pytest.raises(ValueError, match="no query has both"):
        est.fit(X, (q == q[0]).astype(int), groups=q)
    with pytest.raises(ValueError, match="1d array"):
        est.fit(X, np.stack([y, y], 1), groups=q)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(X, np.where(np.arange(len(y)) == 3, np.nan, y), groups=q)
    with pytest.raises(TypeError, match="unexpected keyword argument 'groups'"):
        jaxrank.BinarySVM().fit(X, y >= 1, groups=q)
    with pytest.raises(ValueError):  # sklearn's InvalidParameterError
        jaxrank.APSVM(min_relevance="high").fit(X, y, groups=q)
    m = fit_quiet(jaxrank.APSVM(C=1.0), X, y, groups=q)
    with pytest.raises(ValueError, match="groups must be a 1-D array of"):
        m.score(X, y, groups=q[1:])
    with pytest.raises(ValueError, match="no query of groups has both"):
        m.score(X, np.zeros_like(y), groups=q)


# ---------------------------------------------------------------------------
# 4. CLI on a qid file.
# ---------------------------------------------------------------------------


def test_cli_trains_and_evaluates_map_on_a_qid_file(tmp_path, capsys):
    X, y, q = random_queries(21, sizes=(15, 20, 12, 18, 9, 16, 14, 10), d=5)
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    order = np.argsort(q, kind="stable")  # SVMlight files hold queries contiguously
    half = np.isin(q, np.unique(q)[::2])
    for path, m_ in ((train, half), (test, ~half)):
        o = order[m_[order]]
        dump_svmlight_file(X[o], y[o], str(path), query_id=q[o], zero_based=False)
    model = tmp_path / "model.npz"
    assert main(["train", "-c", "10", str(train), str(model)]) == 0
    out = capsys.readouterr().out
    n_ok = len(ok_queries(q[half], y[half] >= 1, np.ones(half.sum(), bool)))
    assert 0 < n_ok < 4
    assert "4 qid groups" in out and f"4 queries, {4 - n_ok} dropped" in out
    assert main(["evaluate", str(model), str(test)]) == 0
    res = capsys.readouterr().out
    m = jaxrank.load(model)
    assert (m.n_queries_, m.n_dropped_queries_) == (4, 4 - n_ok)
    ref = fit_quiet(jaxrank.APSVM(C=10.0), X[half], y[half], groups=q[half])
    assert_same_optimum(m, ref)  # the file's sample order differs: same optimum
    got = float(res.split("MAP")[1].split()[0])
    np.testing.assert_allclose(got, m.score(X[~half], y[~half], groups=q[~half]), atol=1e-4)
    assert main(["predict", str(model), str(test), "-o", str(tmp_path / "s.txt")]) == 0
    o = order[~half[order]]
    np.testing.assert_allclose(np.loadtxt(tmp_path / "s.txt"), m.decision_function(X[o]),
                               rtol=1e-5, atol=1e-5)
