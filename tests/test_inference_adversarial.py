"""Adversarial exactness tests of AP loss-augmented inference (float64).

The three methods (``greedy``, ``search``, ``select``) are compared with the
literal Algorithm 1 (``reference.literal_algorithm1``), with each other and,
for small lists, with the explicit ranking built by
``reference.outputs_from_interleaving`` / brute force. With continuous scores
the interleaving ranks must be identical; with exact ties only the objective
(hinge) is pinned, and the returned ranks must form a real ranking whose
loss / coef are the returned ones.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference

from jaxrank.inference import METHODS, ap_most_violated


# ---------------------------------------------------------------------------
# Helpers.
# ---------------------------------------------------------------------------


def _run(scores, labels, where=None):
    s = jnp.asarray(np.asarray(scores, np.float64))
    return {m: ap_most_violated(s, labels, where=where, method=m) for m in METHODS}


def _sorted_pos_neg(scores, labels):
    pos = np.flatnonzero(labels)
    neg = np.flatnonzero(~labels)
    pos = pos[np.argsort(-scores[pos], kind="stable")]
    neg = neg[np.argsort(-scores[neg], kind="stable")]
    return pos, neg


def _check_structure(rank, labels, P):
    assert np.all(rank[labels] == 0)
    assert rank[~labels].min() >= 1 and rank[~labels].max() <= P + 1


def _assert_identical(scores, labels, out, explicit=False, atol=1e-10):
    """Continuous scores: identical ranks / coef / loss, equal to Algorithm 1."""
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    opt_ref, pos, neg = reference.literal_algorithm1(scores, labels)
    first = next(iter(out.values()))
    for m, r in out.items():
        rank = np.asarray(r.interleaving_rank)
        _check_structure(rank, labels, len(pos))
        np.testing.assert_array_equal(rank[neg], opt_ref, err_msg=m)
        np.testing.assert_array_equal(np.asarray(r.coef), np.asarray(first.coef), err_msg=m)
        assert float(r.loss) == float(first.loss), m
        assert float(r.hinge) >= -1e-12, m
    if explicit:
        loss, coef, hinge = reference.outputs_from_interleaving(scores, labels, opt_ref, pos, neg)
        for m, r in out.items():
            np.testing.assert_allclose(float(r.loss), loss, atol=atol, err_msg=m)
            np.testing.assert_allclose(np.asarray(r.coef), coef, atol=atol, err_msg=m)
            np.testing.assert_allclose(float(r.hinge), hinge, atol=atol, err_msg=m)


def _fast_outputs(scores, labels, rank):
    """Loss / coef / hinge of the interleaving ``rank`` (vectorised, any n).

    Independent of jaxrank: builds the explicit order (negatives just above
    the positive of their rank) and evaluates eq. (1) by counting, per
    positive, the negatives ranked above it.
    """
    pos, _ = _sorted_pos_neg(scores, labels)
    neg = np.flatnonzero(~labels)
    P, N = len(pos), len(neg)
    r = rank[neg]
    n_above = np.cumsum(np.bincount(r, minlength=P + 2))[1 : P + 1]  # a = 1..P
    a = np.arange(1, P + 1)
    loss = 1 - np.mean(a / (a + n_above))
    coef = np.zeros(len(scores))
    coef[pos] = 2 * n_above / (P * N)
    coef[neg] = -2 * (P + 1 - r) / (P * N)
    c = scores - scores.mean()
    return loss, coef, loss - c @ coef


def _assert_optimal_with_ties(scores, labels, out, best=None, atol=1e-12):
    """Tied scores: same objective as Algorithm 1, and a self-consistent ranking."""
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    opt_ref, pos, neg = reference.literal_algorithm1(scores, labels)
    small = len(scores) <= 80
    if small:
        _, _, hinge_ref = reference.outputs_from_interleaving(scores, labels, opt_ref, pos, neg)
    else:
        full = np.zeros(len(scores), np.int64)
        full[neg] = opt_ref
        _, _, hinge_ref = _fast_outputs(scores, labels, full)
    if best is not None:
        np.testing.assert_allclose(hinge_ref, best, atol=atol)
    for m, r in out.items():
        rank = np.asarray(r.interleaving_rank)
        _check_structure(rank, labels, len(pos))
        if small:
            negs = neg[np.argsort(rank[neg], kind="stable")]
            loss, coef, hinge = reference.outputs_from_interleaving(
                scores, labels, rank[negs], pos, negs
            )
        else:
            loss, coef, hinge = _fast_outputs(scores, labels, rank)
        np.testing.assert_allclose(float(r.loss), loss, atol=atol, err_msg=m)
        _assert_coef_equivalent(np.asarray(r.coef), coef, scores, labels, atol, m)
        np.testing.assert_allclose(hinge, hinge_ref, atol=atol, err_msg=m)
        np.testing.assert_allclose(float(r.hinge), hinge_ref, atol=atol, err_msg=m)


def _assert_coef_equivalent(actual, expected, scores, labels, atol, msg):
    """Equal coef, up to the (arbitrary) order of positives with tied scores."""
    np.testing.assert_allclose(actual[~labels], expected[~labels], atol=atol, err_msg=msg)
    for v in np.unique(scores[labels]):
        grp = labels & (scores == v)
        np.testing.assert_allclose(
            np.sort(actual[grp]), np.sort(expected[grp]), atol=atol, err_msg=msg
        )


def _labels(n, n_pos, rng):
    labels = np.zeros(n, bool)
    labels[rng.choice(n, n_pos, replace=False)] = True
    return labels


# ---------------------------------------------------------------------------
# Randomised small / medium cases, padded to one shape: each test makes one
# vmapped call per method (one compile), the real items placed at random
# positions among adversarial padding that ``where`` removes.
# ---------------------------------------------------------------------------

N_PAD = 300
BATCH = 300

# Tiny structured cases, checked against brute force over all rankings.
TINY_STRUCTURED = [
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1, 0, 1, 0, 1, 0]),  # everything tied
    ([1.0, 1.0, 1.0, 1.0, 1.0], [1, 1, 1, 1, 0]),  # single negative, tied
    ([1.0, 1.0, 1.0, 1.0, 1.0], [0, 0, 0, 0, 1]),  # single positive, tied
    ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [1, 1, 1, 0, 0, 0]),  # negatives above
    ([5.0, 4.0, 3.0, 2.0, 1.0, 0.0], [1, 1, 1, 0, 0, 0]),  # negatives below
    ([5.0, 4.0, 3.0, 2.0, 1.0, 0.0], [1, 0, 1, 0, 1, 0]),  # interleaved
    ([2.0, 2.0, 1.0, 1.0, 0.0, 0.0], [1, 0, 1, 0, 1, 0]),  # cross-class ties
    ([1.6, 1.5, 1.5, 0.3, 1.2, 1.2], [1, 1, 1, 0, 0, 0]),  # j < P active
    ([3.0, 3.0, 3.0, 3.0, 3.0, 0.0], [1, 1, 1, 1, 1, 0]),  # P >> N
    ([0.0, 3.0, 3.0, 3.0, 3.0, 3.0], [1, 0, 0, 0, 0, 0]),  # N >> P
    ([0.5, 0.5, 0.0, 0.0, 0.5, 0.5], [1, 1, 1, 0, 0, 0]),  # P = N, ties
    ([1e6 + 0.5, 1e6, 1e6 + 0.25, 1e6 + 0.25, 1e6], [1, 1, 0, 0, 0]),  # offset
    ([0.0, 1.0], [1, 0]),
    ([1.0, 0.0], [1, 0]),
]


def _random_case(rng, b, max_pos, tied):
    if b % 4 == 0:
        n = int(rng.integers(2, 12))  # `where` removes almost everything
    else:
        n = int(rng.integers(2, N_PAD + 1))
    choice = b % 7
    if choice == 0:
        n_pos = 1  # single positive
    elif choice == 1:
        n_pos = n - 1  # single negative
    elif choice == 2:
        n_pos = n // 2  # P = N (or N + 1)
    else:
        n_pos = int(rng.integers(1, n))
    n_pos = max(1, min(n_pos, n - 1, max_pos))
    labels = _labels(n, n_pos, rng)
    style = (b // 7) % 5
    if tied:
        scale = [1.0, 0.5, 0.25, 1.0, 2.0][style]
        scores = rng.integers(-2, 3, n).astype(float) * scale
        if style == 3:  # positives all tied, with negatives tied to them
            scores = np.where(labels, 1.0, rng.integers(0, 3, n).astype(float))
        elif style == 4:  # "trained" with ties: few active negatives
            scores = scores + np.round(1 + (n - n_pos) / (2 * n_pos)) * labels
    else:
        scores = rng.normal(size=n)
        if style == 1:  # "trained": few active negatives
            scores = scores + (2 + (n - n_pos) / (2 * n_pos)) * labels
        elif style == 2:  # huge common offset, tiny spread
            scores = 1e6 + 1e-3 * scores
        elif style == 3:  # all negatives above all positives
            scores = np.abs(scores) * np.where(labels, -1, 1) + np.where(labels, -0.1, 0.1)
        elif style == 4:  # all negatives below all positives
            scores = np.abs(scores) * np.where(labels, 1, -1) + np.where(labels, 0.1, -0.1)
    return scores, labels


def _random_batch(seed, max_pos, tiny=()):
    """BATCH cases: ``tiny`` first, then alternately continuous and tied."""
    rng = np.random.default_rng(seed)
    S = np.zeros((BATCH, N_PAD))
    L = np.zeros((BATCH, N_PAD), bool)
    W = np.zeros((BATCH, N_PAD), bool)
    cases = []
    for b in range(BATCH):
        if b < len(tiny):
            scores, labels = np.asarray(tiny[b][0]), np.asarray(tiny[b][1], bool)
            kind = "tiny"
        else:
            kind = "tied" if b % 2 else "continuous"
            scores, labels = _random_case(rng, b, max_pos, kind == "tied")
        n = len(scores)
        idx = rng.permutation(N_PAD)[:n]
        S[b, idx], L[b, idx], W[b, idx] = scores, labels, True
        # The padding gets adversarial values: it must be ignored.
        S[b, ~W[b]] = rng.normal(size=N_PAD - n) * 10
        L[b, ~W[b]] = rng.random(N_PAD - n) < 0.5
        cases.append((kind, idx))
    return S, L, W, cases


def _unbatch(out, b, idx):
    return {
        m: r._replace(
            loss=r.loss[b], hinge=r.hinge[b],
            coef=np.asarray(r.coef[b])[idx],
            aux=np.asarray(r.interleaving_rank[b])[idx],
        )
        for m, r in out.items()
    }


def test_random_cases_against_literal_algorithm(x64):
    # kp = min(N_PAD, 512) = 300 (not a power of two); P ranges from 1 to 299.
    S, L, W, cases = _random_batch(101, N_PAD, TINY_STRUCTURED)
    s = jnp.asarray(S)
    out = {m: ap_most_violated(s, L, where=W, method=m) for m in METHODS}
    counts = {"tiny": 0, "tied": 0, "continuous": 0}
    for b, (kind, idx) in enumerate(cases):
        for m, r in out.items():  # removed items get zero coef and rank
            assert np.all(np.asarray(r.coef[b])[~W[b]] == 0), m
            assert np.all(np.asarray(r.interleaving_rank[b])[~W[b]] == 0), m
        scores, labels = S[b, idx], L[b, idx]
        res = _unbatch(out, b, idx)
        offset = np.abs(scores).max() > 100  # reference s @ coef loses ~1e6 eps
        if kind == "tiny":
            best = reference.brute_force_ap_violation(scores, labels)
            _assert_optimal_with_ties(scores, labels, res, best=best, atol=1e-9 if offset else 1e-12)
        elif kind == "tied":
            _assert_optimal_with_ties(scores, labels, res)
        else:
            _assert_identical(
                scores, labels, res, explicit=len(idx) <= 60, atol=1e-7 if offset else 1e-10
            )
        counts[kind] += 1
    assert counts["tied"] >= 140 and counts["continuous"] >= 140


# ---------------------------------------------------------------------------
# Large structured cases around the capacity-bucket thresholds of `select`.
# ---------------------------------------------------------------------------


def _large_case(n, scenario, seed):
    rng = np.random.default_rng(seed)
    n_pos = 33  # just above a power of two: kp = 64 for every case
    labels = _labels(n, n_pos, rng)
    N = n - n_pos
    if scenario == "trained":  # a handful of active negatives (smallest bucket)
        scores = rng.normal(size=n) + (2 + N / (2 * n_pos)) * labels
    elif scenario == "mid":  # a few thousand active negatives (middle bucket)
        scores = rng.normal(size=n) + 3.0 * labels  # ~3500 at n = 32768
    elif scenario == "above":  # all negatives above all positives: all active
        scores = rng.normal(size=n) - 20.0 * labels
    elif scenario == "below":  # all below, but close, huge offset
        scores = np.abs(rng.normal(size=n)) * np.where(labels, 1e-3, -1e-3) + 1e6
    elif scenario == "ties":  # integer scores, heavy ties across classes
        scores = rng.integers(0, 6, n).astype(float) + 3.0 * labels
    else:
        raise ValueError(scenario)
    return scores, labels


# Bucket capacities (_select_capacities): 4095 -> [4095] (no switch);
# 4096 -> [1024, 4096]; 4097 -> [1025, 4097]; 32767 -> [8192, 32767];
# 32768 -> [1024, 8192, 32768]; 32769 -> [1025, 8193, 32769].
LARGE = {
    4095: ("trained", "ties"),
    4096: ("trained", "above", "ties"),
    4097: ("trained", "below"),
    32767: ("trained", "mid"),
    32768: ("trained", "mid", "above"),
    32769: ("trained", "ties"),
}


@pytest.mark.parametrize("n", sorted(LARGE))
def test_bucket_thresholds(n, x64):
    # `select` against Algorithm 1 (greedy / search do not depend on the
    # buckets: all three methods only at n = 4096, to keep the runtime low).
    methods = METHODS if n == 4096 else ("select",)
    for k, scenario in enumerate(LARGE[n]):
        scores, labels = _large_case(n, scenario, seed=n + k)
        s = jnp.asarray(scores)
        out = {m: ap_most_violated(s, labels, method=m) for m in methods}
        if scenario == "ties":
            _assert_optimal_with_ties(scores, labels, out, atol=1e-11)
        else:
            _assert_identical(scores, labels, out)


def test_select_threshold_no_int32_overflow(x64):
    # Every negative is active (scores above the last positive). The bisection
    # evaluates tau(j) for j + P >= 46342, where (j + P)(j + P - 1) would wrap
    # in int32 (regression test: it is computed in the float dtype).
    n, P = 50000, 4
    labels = np.zeros(n, bool)
    labels[:P] = True
    scores = np.zeros(n)
    scores[:P] = [3.0, 2.0, 1.0, 0.0]
    scores[P : P + 47000] = 1.0
    scores[P + 47000 :] = 1e-9
    opt_ref, _, neg = reference.literal_algorithm1(scores, labels)
    sel = ap_most_violated(jnp.asarray(scores), labels, method="select")
    np.testing.assert_array_equal(np.asarray(sel.interleaving_rank)[neg], opt_ref)
