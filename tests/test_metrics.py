"""Metrics against scikit-learn (ties included) and brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from sklearn.metrics import average_precision_score, roc_auc_score

from jaxrank.metrics import average_precision, roc_auc


def _cases():
    rng = np.random.default_rng(0)
    for t in range(60):
        n = (5, 33, 80)[t % 3]  # few shapes: few compilations
        y = rng.random(n) < 0.3
        y[0], y[1] = True, False
        if t % 4 < 2:
            s = rng.integers(0, 4, n).astype(np.float32)  # many ties
        else:
            s = rng.normal(size=n).astype(np.float32)
        yield s, y


@pytest.mark.parametrize("transform", [lambda f: f, jax.jit], ids=["eager", "jit"])
def test_equal_to_sklearn_with_ties(transform):
    for s, y in _cases():
        np.testing.assert_allclose(
            transform(average_precision)(s, y), average_precision_score(y, s), rtol=1e-5
        )
        np.testing.assert_allclose(
            transform(roc_auc)(s, y), roc_auc_score(y, s), rtol=1e-5
        )


def test_ap_equals_pairwise_definition():
    for s, y in list(_cases())[:20]:
        np.testing.assert_allclose(
            average_precision(s, y), reference.average_precision_ties(s, y), rtol=1e-5
        )


def test_batch_matches_loop_and_where_matches_dropping():
    rng = np.random.default_rng(1)
    S = rng.normal(size=(2, 3, 40)).astype(np.float32)
    Y = rng.random((2, 3, 40)) < 0.3
    Y[..., 0], Y[..., 1] = True, False
    ap = average_precision(S, Y)
    auc = roc_auc(S, Y)
    assert ap.shape == auc.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(
                ap[i, j], average_precision_score(Y[i, j], S[i, j]), rtol=1e-5
            )
            np.testing.assert_allclose(
                auc[i, j], roc_auc_score(Y[i, j], S[i, j]), rtol=1e-5
            )
    keep = rng.random(40) < 0.6
    keep[:2] = True
    np.testing.assert_allclose(
        average_precision(S[0, 0], Y[0, 0], where=keep),
        average_precision_score(Y[0, 0][keep], S[0, 0][keep]),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        jax.vmap(lambda s, y: roc_auc(s, y, where=keep))(S[0], Y[0])[2],
        roc_auc_score(Y[0, 2][keep], S[0, 2][keep]),
        rtol=1e-5,
    )


def test_undefined_under_jit_is_nan_not_a_number():
    s = jnp.array([0.1, 0.2, 0.3])
    y = jnp.array([0, 0, 0])
    assert np.isnan(jax.jit(average_precision)(s, y))
    assert np.isnan(jax.jit(roc_auc)(s, y))


@pytest.mark.parametrize("fn", [average_precision, roc_auc])
@pytest.mark.parametrize(
    "s,y,match",
    [
        ([0.1, np.nan], [0, 1], "NaN"),
        ([0.1, 0.2], [1, 1], "both classes"),
        ([0.1, 0.2], [1, 3], "binary"),
        ([0.1, 0.2, 0.3], [1, 0], "same shape"),
        ([], [], "empty"),
    ],
)
def test_bad_input(fn, s, y, match):
    with pytest.raises(ValueError, match=match):
        fn(np.asarray(s, np.float32), np.asarray(y))


# ---------------------------------------------------------------------------
# Exact comparisons (integer keys, signed zero, float64)
# ---------------------------------------------------------------------------


def _informative(rng, n, rate, ties):
    """Labels at a positive rate and scores correlated with them (AUC ~0.75)."""
    y = rng.random(n) < rate
    y[0], y[1] = True, False
    noise = rng.normal(size=n)
    s = y + (np.round(noise * 2) if ties else noise)  # ties: ~13 score levels
    return s.astype(np.float32), y


@pytest.mark.parametrize("transform", [lambda f: f, jax.jit], ids=["eager", "jit"])
def test_integer_scores_are_compared_exactly(transform):
    # 2**24 and 2**24 + 1 are one float32 value; as integers they are not tied.
    s = np.array([2**24 + 1, 2**24, 2**24 + 3, -(2**31), 2**31 - 1], np.int32)
    y = np.array([1, 0, 0, 1, 0])
    s64 = s.astype(np.int64)
    np.testing.assert_allclose(
        transform(average_precision)(s, y), average_precision_score(y, s64), rtol=1e-6
    )
    np.testing.assert_allclose(
        transform(roc_auc)(s, y), roc_auc_score(y, s64), rtol=1e-6
    )
    u = np.array([2**32 - 1, 5, 2**31, 2**31 - 1], np.uint32)
    yu = np.array([1, 0, 0, 1])
    np.testing.assert_allclose(
        transform(roc_auc)(u, yu), roc_auc_score(yu, u.astype(np.int64))
    )


def test_negative_zero_ties_with_zero():
    s = np.array([0.0, -0.0, -0.0, 1.0, -1.0], np.float32)
    y = np.array([1, 0, 1, 0, 1])
    np.testing.assert_allclose(jax.jit(roc_auc)(s, y), roc_auc_score(y, s), rtol=1e-6)
    np.testing.assert_allclose(
        jax.jit(average_precision)(s, y), average_precision_score(y, s), rtol=1e-6
    )


def test_float64_scores_give_float64_values(x64):
    rng = np.random.default_rng(3)
    s, y = _informative(rng, 200, 0.3, ties=False)
    s = s.astype(np.float64) + 1e-12 * rng.random(200)  # ties broken below f32 eps
    for fn, ref in (
        (average_precision, average_precision_score),
        (roc_auc, roc_auc_score),
    ):
        v = jax.jit(fn)(jnp.asarray(s), jnp.asarray(y))
        assert v.dtype == jnp.float64
        np.testing.assert_allclose(v, ref(y, s), rtol=1e-12)


def test_extreme_and_infinite_scores_under_jit():
    s = np.array([np.inf, -np.inf, 1e30, -1e30, np.inf, 0.0], np.float32)
    y = np.array([1, 0, 0, 1, 0, 1])
    finite = np.array([3.0, -3.0, 2.0, -2.0, 3.0, 0.0], np.float32)  # same order
    np.testing.assert_allclose(
        jax.jit(roc_auc)(s, y), roc_auc_score(y, finite), rtol=1e-6
    )
    np.testing.assert_allclose(
        jax.jit(average_precision)(s, y), average_precision_score(y, finite), rtol=1e-6
    )


# ---------------------------------------------------------------------------
# NaN under jit / vmap: NaN out, never a number; masked NaN does not matter
# ---------------------------------------------------------------------------

METRICS = [average_precision, roc_auc]


@pytest.mark.parametrize("fn", METRICS, ids=["ap", "auc"])
@pytest.mark.parametrize(
    "scores",
    [
        [0.3, np.nan, 0.1, 0.2],  # NaN negative
        [np.nan, 0.5, 0.1, 0.2],  # NaN positive
        [np.nan] * 4,  # all NaN (was AP 0.6 / AUC 0.5)
        [0.3, -np.nan, 0.1, 0.2],  # NaN with the sign bit set
    ],
    ids=["neg", "pos", "all", "signed"],
)
def test_nan_score_gives_nan_under_jit_and_vmap(fn, scores):
    s = np.asarray(scores, np.float32)
    y = np.array([1, 0, 1, 0])
    assert np.isnan(jax.jit(fn)(s, y))
    clean = np.array([0.3, 0.4, 0.1, 0.2], np.float32)
    batch = jax.vmap(fn)(np.stack([clean, s, clean]), np.stack([y, y, y]))
    assert np.isnan(batch[1])
    np.testing.assert_allclose(
        np.asarray(batch)[[0, 2]], float(fn(clean, y)), rtol=1e-6
    )
    # Also with segments: NaN in a segment that has no positive still counts.
    seg = np.array([0, 1, 0, 1])
    y_seg = (
        np.array([1, 0, 1, 0]) if fn is average_precision else np.array([1, 0, 0, 0])
    )
    s_nan_in_negative_segment = np.array([0.3, np.nan, 0.1, 0.2], np.float32)
    assert np.isnan(jax.jit(fn)(s_nan_in_negative_segment, y_seg, segments=seg))


@pytest.mark.parametrize("fn", METRICS, ids=["ap", "auc"])
def test_masked_nan_does_not_matter(fn):
    s = np.array([0.3, np.nan, 0.1, 0.2, np.nan], np.float32)
    y = np.array([1, 0, 1, 0, 1])
    keep = ~np.isnan(s)
    expected = fn(s[keep], y[keep])  # eager, on the valid items only
    np.testing.assert_allclose(jax.jit(fn)(s, y, where=keep), expected, rtol=1e-6)
    np.testing.assert_allclose(fn(s, y, where=keep), expected, rtol=1e-6)  # eager too
    seg = np.array([0, 0, 1, 1, 1])
    np.testing.assert_allclose(
        jax.jit(fn)(s, y, where=keep, segments=seg),
        fn(s[keep], y[keep], segments=seg[keep]),
        rtol=1e-6,
    )


@pytest.mark.parametrize("fn", METRICS, ids=["ap", "auc"])
def test_eager_nan_raises_value_error(fn):
    with pytest.raises(ValueError, match="NaN"):
        fn(np.array([0.3, np.nan, 0.1], np.float32), np.array([1, 0, 1]))
    with pytest.raises(ValueError, match="NaN"):
        fn(
            np.array([0.3, np.nan], np.float32),
            np.array([1, 0]),
            segments=np.array([0, 0]),
        )


@pytest.mark.parametrize("fn", METRICS, ids=["ap", "auc"])
def test_checkify_reports_nan_and_undefined_lists(fn):
    from jax.experimental import checkify

    checked = checkify.checkify(jax.jit(fn))
    y = jnp.array([1, 0, 1, 0])
    err, v = checked(jnp.array([0.3, jnp.nan, 0.1, 0.2]), y)
    assert np.isnan(v) and "NaN score" in err.get()
    with pytest.raises(checkify.JaxRuntimeError, match="NaN score"):
        err.throw()
    err, v = checked(jnp.array([0.3, 0.4, 0.1, 0.2]), jnp.zeros(4, int))
    assert np.isnan(v) and "no segment with a positive" in err.get()
    # No false alarm: masked NaN, and MAP with a query that has no positive.
    err, v = checked(
        jnp.array([0.3, jnp.nan, 0.1, 0.2]),
        y,
        where=jnp.array([True, False, True, True]),
    )
    assert err.get() is None and np.isfinite(v)
    seg = jnp.array([0, 0, 0, 1, 1, 1])
    err, v = checked(
        jnp.array([0.3, 0.4, 0.1, 0.2, 0.5, 0.6]),
        jnp.array([1, 0, 1, 0, 0, 0]),
        segments=seg,
    )
    assert err.get() is None and np.isfinite(v)
    # Without checkify the same call is silent (NaN, no exception).
    assert np.isnan(jax.jit(fn)(jnp.array([jnp.nan] * 4), y))


# ---------------------------------------------------------------------------
# Segments (queries): MAP over queries with a positive; AUC within queries
# ---------------------------------------------------------------------------


def _queries(rng, n_queries, ties, length=256):
    """Shuffled items of queries with non-contiguous ids, padded to ``length``
    (one shape: one compilation) with masked items; returns (s, y, q, keep).
    Two queries have no positive, one has only positives."""
    sizes = rng.integers(1, length // n_queries + 1, n_queries)
    ids = rng.choice(10**6, n_queries, replace=False) - 5 * 10**5  # any ints
    q = np.repeat(ids, sizes)
    rates = rng.random(n_queries) * 0.6
    rates[:2] = 0.0  # queries without a relevant document
    rates[2] = 1.0  # a query with only relevant documents
    y = rng.random(len(q)) < np.repeat(rates, sizes)
    y[np.flatnonzero(np.repeat(rates, sizes) == 0.0)] = False
    s, _ = _informative(rng, len(q), 0.5, ties)
    s = s + y  # informative within queries
    pad = length - len(q)
    keep = np.r_[np.ones(len(q), bool), np.zeros(pad, bool)]
    q = np.r_[q, rng.integers(-5, 5, pad)]  # padding: ids that may clash
    y = np.r_[y, rng.random(pad) < 0.5]
    s = np.r_[s, np.where(rng.random(pad) < 0.2, np.nan, 0.0)]  # masked NaN too
    perm = rng.permutation(length)
    return s[perm].astype(np.float32), y[perm], q[perm].astype(np.int32), keep[perm]


def _map_loop(s, y, q, where=None):
    """MAP the LETOR way: a plain loop over queries, skipping queries without
    a relevant document; sklearn's AP per query."""
    keep = np.ones(len(s), bool) if where is None else where
    aps = []
    for qid in np.unique(q[keep]):
        m = keep & (q == qid)
        if y[m].any():
            aps.append(average_precision_score(y[m], s[m]))
    return np.mean(aps)


def _auc_loop(s, y, q, where=None):
    keep = np.ones(len(s), bool) if where is None else where
    aucs = []
    for qid in np.unique(q[keep]):
        m = keep & (q == qid)
        if y[m].any() and not y[m].all():
            aucs.append(roc_auc_score(y[m], s[m]))
    return np.mean(aucs)


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("transform", [lambda f: f, jax.jit], ids=["eager", "jit"])
def test_segments_equal_a_loop_over_queries_with_sklearn(transform, ties):
    rng = np.random.default_rng(11 + ties)
    ap, auc = transform(average_precision), transform(roc_auc)
    for _ in range(3):
        s, y, q, keep = _queries(rng, 12, ties)
        np.testing.assert_allclose(
            ap(s, y, where=keep, segments=q), _map_loop(s, y, q, keep), rtol=1e-5
        )
        np.testing.assert_allclose(
            auc(s, y, where=keep, segments=q), _auc_loop(s, y, q, keep), rtol=1e-5
        )
        sub = keep & (rng.random(len(s)) < 0.7)  # drop more items
        sub[np.flatnonzero(keep & y)[:1]] = sub[np.flatnonzero(keep & ~y)[:1]] = True
        np.testing.assert_allclose(
            ap(s, y, where=sub, segments=q), _map_loop(s, y, q, sub), rtol=1e-5
        )


def test_per_segment_values_are_item_aligned():
    rng = np.random.default_rng(5)
    s, y, q, keep = _queries(rng, 10, ties=True)
    ap = np.asarray(
        jax.jit(average_precision, static_argnames="segment_reduce_fn")(
            s, y, where=keep, segments=q, segment_reduce_fn=None
        )
    )
    auc = np.asarray(roc_auc(s, y, where=keep, segments=q, segment_reduce_fn=None))
    assert ap.shape == auc.shape == s.shape
    assert np.all(np.isnan(ap[~keep])) and np.all(np.isnan(auc[~keep]))
    n_undefined = 0
    for qid in np.unique(q[keep]):
        m = keep & (q == qid)
        if y[m].any():
            np.testing.assert_allclose(
                ap[m], average_precision_score(y[m], s[m]), rtol=1e-5
            )
        else:
            assert np.all(np.isnan(ap[m]))  # no positive: no AP (not 0)
            n_undefined += 1
        if y[m].any() and not y[m].all():
            np.testing.assert_allclose(auc[m], roc_auc_score(y[m], s[m]), rtol=1e-5)
        else:
            assert np.all(np.isnan(auc[m]))
    assert n_undefined >= 2  # the case is exercised
    # The default (jnp.mean) is the mean over the defined segments, each once.
    first = np.unique(q[keep], return_index=True)[1]
    per_query = ap[keep][first]
    np.testing.assert_allclose(
        average_precision(s, y, where=keep, segments=q),
        np.mean(per_query[~np.isnan(per_query)]),
        rtol=1e-6,
    )


def test_segment_reduce_sum_and_custom_callable():
    rng = np.random.default_rng(6)
    s, y, q, keep = _queries(rng, 10, ties=False)
    kw = {"where": keep, "segments": q}
    per = np.asarray(average_precision(s, y, segment_reduce_fn=None, **kw))
    per_query = per[keep][np.unique(q[keep], return_index=True)[1]]
    defined = per_query[~np.isnan(per_query)]
    np.testing.assert_allclose(
        average_precision(s, y, segment_reduce_fn=jnp.sum, **kw),
        defined.sum(),
        rtol=1e-6,
    )

    def worst(values, where):
        return jnp.min(values, where=where, initial=1.0)

    np.testing.assert_allclose(
        average_precision(s, y, segment_reduce_fn=worst, **kw), defined.min(), rtol=1e-6
    )
    with pytest.raises(TypeError, match="segment_reduce_fn"):
        average_precision(s, y, segment_reduce_fn="mean", **kw)


@pytest.mark.parametrize("fn", METRICS, ids=["ap", "auc"])
def test_one_segment_equals_no_segments(fn):
    # Two code paths (split integer sorts vs (segment, score) sort) must agree.
    for s, y in list(_cases())[:24]:
        for seg_id in (0, -7, 2**31 - 1):
            np.testing.assert_allclose(
                jax.jit(fn)(s, y, segments=np.full(len(s), seg_id, np.int32)),
                fn(s, y),
                rtol=1e-6,
            )


@pytest.mark.parametrize("fn", METRICS, ids=["ap", "auc"])
def test_segments_equal_padded_lists_with_a_mask(fn):
    # A list of two queries == the two queries as padded lists with `where`,
    # averaged; in a batch [2, 3, n] under jit, and under vmap.
    rng = np.random.default_rng(8)
    n = 24
    S = rng.normal(size=(2, 3, n)).astype(np.float32)
    Y = rng.random((2, 3, n)) < 0.4
    Q = np.where(np.arange(n) < 10, 3, 9) * np.ones((2, 3, 1), np.int32)
    Q = np.take_along_axis(
        Q, rng.permuted(np.tile(np.arange(n), (2, 3, 1)), axis=-1), -1
    )
    Y[..., :4] = [True, False, True, False]
    Q[..., :4] = [3, 3, 9, 9]
    got = jax.jit(fn)(S, Y, segments=Q)
    per_query = jnp.stack([fn(S, Y, where=Q == 3), fn(S, Y, where=Q == 9)])
    np.testing.assert_allclose(got, per_query.mean(0), rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(lambda s, y, q: fn(s, y, segments=q))(S, Y, Q), got, rtol=1e-6
    )
    assert got.shape == (2, 3)


def test_segments_without_any_defined_query():
    s = jnp.array([0.3, 0.4, 0.1, 0.2])
    q = jnp.array([0, 0, 1, 1])
    assert np.isnan(jax.jit(average_precision)(s, jnp.zeros(4, int), segments=q))
    # Each query has one class only: no pair within a segment.
    y = jnp.array([1, 1, 0, 0])
    assert np.isnan(jax.jit(roc_auc)(s, y, segments=q))
    with pytest.raises(ValueError, match="segment with both"):
        roc_auc(np.asarray(s), np.asarray(y), segments=np.asarray(q))
    # The list has both classes, so AP (a segment with a positive) is defined.
    np.testing.assert_allclose(average_precision(s, y, segments=q), 1.0)


def test_segments_bad_input():
    s, y = np.array([0.1, 0.2, 0.3], np.float32), np.array([1, 0, 1])
    with pytest.raises(TypeError, match="segments must be an integer"):
        average_precision(s, y, segments=np.array([0.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="same shape"):
        roc_auc(s, y, segments=np.array([0, 1]))
    with pytest.raises(TypeError, match="where must be a bool"):
        jax.jit(roc_auc)(s, y, where=jnp.array([1, 1, 0]))


def test_64bit_numpy_inputs_are_not_rounded_without_x64():
    # Float64 scores 1e-12 apart are one float32 value; int64 ids 2**32 apart
    # are one int32 value. Eager calls keep them apart (exact host ranks).
    rng = np.random.default_rng(9)
    s = 1.0 + 1e-12 * rng.permutation(40).astype(np.float64)
    y = rng.random(40) < 0.5
    y[:2] = True, False
    assert len(np.unique(s.astype(np.float32))) == 1
    np.testing.assert_allclose(roc_auc(s, y), roc_auc_score(y, s), rtol=1e-6)
    np.testing.assert_allclose(
        average_precision(s, y), average_precision_score(y, s), rtol=1e-6
    )
    q = np.where(np.arange(40) < 20, 5, 5 + 2**32).astype(np.int64)
    expected = np.mean([roc_auc_score(y[q == v], s[q == v]) for v in np.unique(q)])
    np.testing.assert_allclose(roc_auc(s, y, segments=q), expected, rtol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_scores(dtype):
    s, y = next(_cases())
    s16 = jnp.asarray(s, dtype)
    s32 = np.asarray(s16.astype(jnp.float32))  # the same values, exactly
    for fn, ref in (
        (average_precision, average_precision_score),
        (roc_auc, roc_auc_score),
    ):
        v = jax.jit(fn)(s16, y)
        assert v.dtype == jnp.float32
        np.testing.assert_allclose(v, ref(y, s32), rtol=1e-6)
