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
        np.testing.assert_allclose(transform(roc_auc)(s, y), roc_auc_score(y, s), rtol=1e-5)


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
            np.testing.assert_allclose(ap[i, j], average_precision_score(Y[i, j], S[i, j]), rtol=1e-5)
            np.testing.assert_allclose(auc[i, j], roc_auc_score(Y[i, j], S[i, j]), rtol=1e-5)
    keep = rng.random(40) < 0.6
    keep[:2] = True
    np.testing.assert_allclose(
        average_precision(S[0, 0], Y[0, 0], where=keep),
        average_precision_score(Y[0, 0][keep], S[0, 0][keep]), rtol=1e-5,
    )
    np.testing.assert_allclose(
        jax.vmap(lambda s, y: roc_auc(s, y, where=keep))(S[0], Y[0])[2],
        roc_auc_score(Y[0, 2][keep], S[0, 2][keep]), rtol=1e-5,
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
