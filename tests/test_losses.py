"""Losses on scores: values, custom_vjp gradients, composition with a scorer."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrank.inference import ap_most_violated, zero_one_most_violated
from jaxrank.losses import ap_hinge_loss, hinge_loss
from jaxrank.metrics import average_precision


def test_ap_hinge_grad_is_minus_coef_and_chain_rule_gives_xtg():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5)).astype(np.float32)
    y = rng.random(80) < 0.25
    w = jnp.asarray(rng.normal(size=5).astype(np.float32))
    r = ap_most_violated(jnp.asarray(X) @ w, y)
    g_scores = jax.grad(ap_hinge_loss)(jnp.asarray(X) @ w, y)
    np.testing.assert_allclose(g_scores, -r.coef, atol=1e-7)
    g_w = jax.grad(lambda w: ap_hinge_loss(jnp.asarray(X) @ w, y))(w)
    np.testing.assert_allclose(g_w, -(X.T @ np.asarray(r.coef)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ap_hinge_loss(jnp.asarray(X) @ w, y), r.hinge, rtol=1e-6)


def test_ap_hinge_is_a_convex_upper_bound_on_ap_loss():
    rng = np.random.default_rng(1)
    for _ in range(20):
        s = rng.normal(size=30).astype(np.float32)
        y = rng.random(30) < 0.3
        y[0], y[1] = True, False
        assert float(ap_hinge_loss(s, y)) >= 1 - float(average_precision(s, y)) - 1e-6
        t = jnp.asarray(rng.normal(size=30).astype(np.float32))
        mid = 0.5 * (s + t)
        assert float(ap_hinge_loss(mid, y)) <= 0.5 * (
            float(ap_hinge_loss(s, y)) + float(ap_hinge_loss(t, y))
        ) + 1e-5


def test_hinge_loss_value_and_grad():
    s = jnp.array([2.0, 0.5, -0.2, 0.3])
    y = np.array([1, 1, 0, 0])
    expected = 0 + 0.5 + 0.8 + 1.3
    np.testing.assert_allclose(hinge_loss(s, y), expected, rtol=1e-6)
    r = zero_one_most_violated(s, y)
    np.testing.assert_allclose(jax.grad(hinge_loss)(s, y), -r.coef)


def test_trains_a_nonlinear_scorer_with_optax():
    # A tiny MLP trained on the AP hinge with optax raises training AP.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 2)).astype(np.float32)
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 < 0.5)  # not linearly separable
    key = jax.random.key(0)
    k1, k2 = jax.random.split(key)
    params = {
        "W1": jax.random.normal(k1, (2, 16)) * 0.5, "b1": jnp.zeros(16),
        "W2": jax.random.normal(k2, (16,)) * 0.5,
    }

    def scorer(p, X):
        return jnp.tanh(X @ p["W1"] + p["b1"]) @ p["W2"]

    def loss(p):
        return ap_hinge_loss(scorer(p, X), y) + 1e-3 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p))

    opt = optax.adam(0.05)
    state = opt.init(params)

    @jax.jit
    def step(p, s):
        g = jax.grad(loss)(p)
        u, s = opt.update(g, s)
        return optax.apply_updates(p, u), s

    ap0 = float(average_precision(scorer(params, X), y))
    for _ in range(150):
        params, state = step(params, state)
    ap1 = float(average_precision(scorer(params, X), y))
    assert ap1 > max(ap0, 0.8)


@pytest.mark.parametrize("fn", [ap_hinge_loss, hinge_loss])
def test_bad_input(fn):
    with pytest.raises(ValueError, match="NaN"):
        fn(jnp.array([0.1, jnp.nan]), np.array([0, 1]))
    with pytest.raises(ValueError, match="binary"):
        fn(jnp.array([0.1, 0.2]), np.array([5, 1]))
