"""AP loss-augmented inference: exactness against independent references."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference

from jaxrank.inference import (
    METHODS,
    Violation,
    ap_most_violated,
    ap_oracle,
    zero_one_most_violated,
)


def _random_case(rng, n, n_pos, ties=False):
    labels = np.zeros(n, bool)
    labels[rng.choice(n, n_pos, replace=False)] = True
    if ties:
        scores = rng.integers(-3, 4, n) * 0.25
    else:
        scores = rng.normal(size=n) + 0.7 * labels
    return scores, labels


def _tiny_cases():
    rng = np.random.default_rng(0)
    cases = []
    for n in range(2, 8):
        for _ in range(12):
            n_pos = int(rng.integers(1, n))
            cases.append(_random_case(rng, n, n_pos, ties=bool(len(cases) % 2)))
    return cases


TINY = _tiny_cases()


@pytest.mark.parametrize("method", METHODS)
def test_matches_brute_force_over_all_rankings_with_ties(method, x64):
    for scores, labels in TINY:
        # Pad every case to 7 items with a `where` mask: one compile per method.
        n = len(scores)
        pad = 7 - n
        where = np.r_[np.ones(n, bool), np.zeros(pad, bool)]
        r = ap_most_violated(
            jnp.asarray(np.r_[scores, np.zeros(pad)]), np.r_[labels, np.zeros(pad, bool)],
            where=where, method=method,
        )
        r = jax.tree.map(lambda x: x[:n] if x.ndim else x, r)
        best = reference.brute_force_ap_violation(scores, labels)
        np.testing.assert_allclose(float(r.hinge), best, atol=1e-12)
        # The returned output is a real ranking whose loss / coef are the
        # returned ones (built explicitly from the interleaving ranks).
        pos = np.flatnonzero(labels)
        neg = np.flatnonzero(~labels)
        pos = pos[np.argsort(-scores[pos], kind="stable")]
        ranks = np.asarray(r.interleaving_rank)
        neg = neg[np.argsort(ranks[neg], kind="stable")]
        loss, coef, hinge = reference.outputs_from_interleaving(
            scores, labels, ranks[neg], pos, neg
        )
        np.testing.assert_allclose(float(r.loss), loss, atol=1e-12)
        np.testing.assert_allclose(np.asarray(r.coef), coef, atol=1e-12)
        np.testing.assert_allclose(float(r.hinge), hinge, atol=1e-12)


def test_greedy_equals_literal_algorithm1(x64):
    rng = np.random.default_rng(1)
    for n, n_pos in [(40, 7), (300, 30), (500, 400), (2000, 150)]:
        scores, labels = _random_case(rng, n, n_pos)
        opt_ref, pos, neg = reference.literal_algorithm1(scores, labels)
        r = ap_most_violated(jnp.asarray(scores), labels, method="greedy")
        np.testing.assert_array_equal(np.asarray(r.interleaving_rank)[neg], opt_ref)
        loss, coef, hinge = reference.outputs_from_interleaving(
            scores, labels, opt_ref, pos, neg
        ) if n <= 300 else (None, None, None)
        if loss is not None:
            np.testing.assert_allclose(float(r.loss), loss, atol=1e-10)
            np.testing.assert_allclose(np.asarray(r.coef), coef, atol=1e-10)


CASES = [(20000, 1, 0), (20000, 19999, 0), (20000, 300, 0), (20000, 7000, 0),
         (3000, 2999, 0), (20000, 300, 1), (20000, 3000, 1), (8000, 5000, 1)]


@pytest.mark.parametrize("n,n_pos,trained", CASES)
def test_three_methods_identical_in_float64(n, n_pos, trained, x64):
    # "trained": positives shifted by about N / (2P) so that few negatives are
    # active (the regime where selective ranking skips most of them).
    rng = np.random.default_rng(n + n_pos)
    scores, labels = _random_case(rng, n, n_pos)
    if trained:
        scores = scores + (2 + (n - n_pos) / (4 * n_pos)) * labels
    out = {m: ap_most_violated(jnp.asarray(scores), labels, method=m) for m in METHODS}
    for m in ("greedy", "search"):
        np.testing.assert_array_equal(out[m].interleaving_rank, out["select"].interleaving_rank)
        np.testing.assert_array_equal(out[m].coef, out["select"].coef)
        assert float(out[m].loss) == float(out["select"].loss)


@pytest.mark.parametrize("n,n_pos", [(20000, 300), (20000, 7000), (3000, 1)])
@pytest.mark.parametrize("shift", [0.0, 3.0])
def test_three_methods_agree_in_float32(n, n_pos, shift):
    # In float32 two delta values can tie within rounding; then methods may
    # pick adjacent ranks, but the maximum (the hinge) is the same.
    rng = np.random.default_rng(7 + n_pos)
    scores, labels = _random_case(rng, n, n_pos)
    scores = (scores + shift * labels).astype(np.float32)
    out = {m: ap_most_violated(jnp.asarray(scores), labels, method=m) for m in METHODS}
    with jax.enable_x64(True):
        exact = ap_most_violated(jnp.asarray(scores, jnp.float64), labels, method="search")
    for m in METHODS:
        np.testing.assert_allclose(float(out[m].hinge), float(exact.hinge), rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(float(out[m].loss), float(exact.loss), atol=2e-3)
        mismatch = np.mean(np.asarray(out[m].interleaving_rank) != np.asarray(exact.interleaving_rank))
        assert mismatch < 0.2


@pytest.mark.parametrize("n,n_pos,ties", [(600, 40, False), (600, 40, True), (5000, 100, False),
                                          (5000, 120, True)])
def test_select_head_rows_same_for_every_capacity(n, n_pos, ties, x64):
    # Selective ranking solves its first P - 1 rows on dense delta rows for a
    # small positive capacity kp and by divide and conquer for a large one:
    # the two must give the same interleaving ranks, loss and coefficients,
    # and match Algorithm 1 (greedy).
    rng = np.random.default_rng(n + n_pos)
    scores, labels = _random_case(rng, n, n_pos, ties=ties)
    s, pos = jnp.asarray(scores, jnp.float64), jnp.asarray(labels)
    where = jnp.ones(n, bool)
    out = {kp: ap_oracle(s, pos, where, kp=kp) for kp in (n_pos, 128, 129, 400)}
    ref = ap_oracle(s, pos, where, kp=n_pos, method="greedy")
    for kp, r in out.items():
        np.testing.assert_array_equal(r.aux, ref.aux, err_msg=f"kp={kp}")
        np.testing.assert_array_equal(r.coef, ref.coef, err_msg=f"kp={kp}")
        # The loss is a sum over the kp-wide positive buffer: its reduction
        # order follows kp, so it may differ in the last bits only.
        np.testing.assert_allclose(float(r.loss), float(ref.loss),
                                   rtol=8 * np.finfo(np.float64).eps, atol=0, err_msg=f"kp={kp}")


def test_negatives_ranked_before_the_last_positive_can_be_active(x64):
    # opt_j <= P can hold for j < P although t_P(j) < 0 (delta_j is not
    # unimodal there): selective ranking must still rank them.
    s, y = jnp.array([1.6, 1.5, 1.5, 0.3, 1.2]), np.array([1, 1, 1, 0, 0])
    best = reference.brute_force_ap_violation(np.asarray(s), y > 0)
    for m in METHODS:
        np.testing.assert_allclose(float(ap_most_violated(s, y, method=m).hinge), best, atol=1e-12)


def test_structure_stated_in_math_notes(x64):
    rng = np.random.default_rng(3)
    scores, labels = _random_case(rng, 3000, 200)
    r = ap_most_violated(jnp.asarray(scores), labels)
    rank = np.asarray(r.interleaving_rank)
    neg = np.flatnonzero(~labels)
    neg = neg[np.argsort(-scores[neg], kind="stable")]
    P = labels.sum()
    assert np.all(np.diff(rank[neg]) >= 0)  # opt_j non-decreasing in j
    assert rank[neg].min() >= 1 and rank[neg].max() <= P + 1
    assert np.all(rank[labels] == 0)
    coef = np.asarray(r.coef)
    np.testing.assert_allclose(coef.sum(), 0, atol=1e-12)
    assert np.all(coef[neg][rank[neg] == P + 1] == 0)  # inactive negatives
    assert float(r.hinge) >= 0
    np.testing.assert_allclose(float(r.hinge), float(r.loss) - scores @ coef, atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_jit_matches_eager_and_vmap_matches_loop(method):
    rng = np.random.default_rng(5)
    S, L = [], []
    for _ in range(3):
        s, l = _random_case(rng, 50, 9)
        S.append(s.astype(np.float32))
        L.append(l)
    S, L = np.stack(S), np.stack(L)
    eager = [ap_most_violated(jnp.asarray(s), l, method=method) for s, l in zip(S, L)]
    jitted = jax.jit(lambda s: ap_most_violated(s, L[0], method=method))(jnp.asarray(S[0]))
    np.testing.assert_allclose(jitted.hinge, eager[0].hinge, rtol=1e-6)
    np.testing.assert_array_equal(jitted.interleaving_rank, eager[0].interleaving_rank)
    batched = ap_most_violated(jnp.asarray(S), L, method=method)
    for b, e in enumerate(eager):
        np.testing.assert_allclose(batched.coef[b], e.coef, rtol=1e-6)
        np.testing.assert_allclose(batched.hinge[b], e.hinge, rtol=1e-6)
    # Traced labels (no static bound on the positives) give the same answer.
    traced = jax.jit(lambda s, l: ap_most_violated(s, l, method=method))(
        jnp.asarray(S[1]), jnp.asarray(L[1])
    )
    np.testing.assert_allclose(traced.hinge, eager[1].hinge, rtol=1e-6)


def test_where_equals_dropping_items(x64):
    rng = np.random.default_rng(9)
    s, l = _random_case(rng, 60, 12)
    keep = rng.random(60) < 0.7
    keep[np.flatnonzero(l)[0]] = keep[np.flatnonzero(~l)[0]] = True
    masked = ap_most_violated(jnp.asarray(s), l, where=keep)
    dropped = ap_most_violated(jnp.asarray(s[keep]), l[keep])
    np.testing.assert_allclose(masked.coef[keep], dropped.coef, atol=1e-12)
    assert np.all(np.asarray(masked.coef)[~keep] == 0)
    np.testing.assert_allclose(masked.hinge, dropped.hinge, atol=1e-12)
    np.testing.assert_allclose(masked.loss, dropped.loss, atol=1e-12)


def test_labels_minus_one_plus_one_and_bool_agree():
    s = jnp.array([0.3, 1.2, -0.4, 0.9, 0.1])
    a = ap_most_violated(s, np.array([1, 0, 0, 1, 0]))
    b = ap_most_violated(s, np.array([1, -1, -1, 1, -1]))
    c = ap_most_violated(s, np.array([True, False, False, True, False]))
    for r in (b, c):
        np.testing.assert_array_equal(r.coef, a.coef)


def test_zero_one_matches_hinge_formula():
    rng = np.random.default_rng(11)
    s = rng.normal(size=200).astype(np.float32)
    y = rng.random(200) < 0.2
    r = zero_one_most_violated(jnp.asarray(s), y, pos_weight=3.0)
    ys = np.where(y, 1.0, -1.0)
    w = np.where(y, 3.0, 1.0)
    np.testing.assert_allclose(r.hinge, np.sum(w * np.maximum(0, 1 - ys * s)), rtol=1e-5)
    np.testing.assert_allclose(r.hinge, r.loss - s @ np.asarray(r.coef), rtol=1e-5)
    assert isinstance(r, Violation) and r.interleaving_rank is None


@pytest.mark.parametrize(
    "scores,labels,kw,exc,match",
    [
        ([0.1, np.nan, 0.3], [1, 0, 0], {}, ValueError, "NaN"),
        ([0.1, np.inf, 0.3], [1, 0, 0], {}, ValueError, "infinite"),
        ([0.1, 0.2, 0.3], [1, 1, 1], {}, ValueError, "both classes"),
        ([0.1, 0.2, 0.3], [0, 0, 0], {}, ValueError, "both classes"),
        ([0.1, 0.2, 0.3], [0, 2, 1], {}, ValueError, "binary"),
        ([0.1, 0.2, 0.3], [0, 1], {}, ValueError, "same shape"),
        (np.zeros(0), np.zeros(0), {}, ValueError, "empty"),
        ([0.1, 0.2], [0, 1], {"method": "quick"}, ValueError, "method"),
        ([0.1, 0.2], [0, 1], {"where": np.array([1, 1])}, TypeError, "bool"),
        ([1, 2], [0, 1], {}, TypeError, "float"),
    ],
)
def test_bad_input_raises(scores, labels, kw, exc, match):
    arr = np.asarray(scores, np.float32) if np.asarray(scores).dtype.kind == "f" else np.asarray(scores)
    with pytest.raises(exc, match=match):
        ap_most_violated(arr, np.asarray(labels), **kw)


def test_zero_one_bad_pos_weight():
    with pytest.raises(ValueError, match="pos_weight"):
        zero_one_most_violated(jnp.array([0.1, 0.2]), np.array([0, 1]), pos_weight=0.0)
