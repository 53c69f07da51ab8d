r"""KernelRank's training (Gao & Sun 2007): Adam ascent of the smoothed AUC, eq. (11).

One ``lax.scan`` per fit:
the linear discriminant of eq. (19) (started from Fisher's LDA, §IV) and the
GMM likelihood ratio of eqs. (20)-(21).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src.oracles.smoothing import _kernel_auc_masked

Array = jax.Array


def _lda_init(X, y01, ridge):
    """Least-squares / Fisher LDA direction (the ML start of §IV).

    Solves ``min ||Xc w - t||^2 + ridge^2 ||w||^2`` by LSQR, where ``Xc`` is
    ``X`` with its column means removed (applied as an operator, so sparse
    ``X`` is never densified) and ``t = n/M`` for positives, ``-n/N`` for
    negatives: the least-squares solution with these targets is the Fisher
    discriminant direction (Duda, Hart & Stork, §5.8).
    """
    import scipy.sparse as sp
    from scipy.sparse.linalg import LinearOperator, lsqr

    n, d = X.shape
    mu = np.asarray(X.mean(axis=0)).ravel().astype(np.float64)
    Xs = X if sp.issparse(X) else np.asarray(X, np.float64)

    def mv(v):
        v = np.ravel(v)
        return np.asarray(Xs @ v).ravel() - mu @ v

    def rmv(u):
        u = np.ravel(u)
        return np.asarray(Xs.T @ u).ravel() - mu * np.sum(u)

    op = LinearOperator((n, d), matvec=mv, rmatvec=rmv, dtype=np.float64)
    M, N = int(y01.sum()), int((~y01).sum())
    t = np.where(y01, n / M, -n / N)
    w = lsqr(op, t, damp=ridge, iter_lim=max(50, min(d, 300)), atol=1e-8, btol=1e-8)[0]
    s = np.asarray(Xs @ w).ravel()
    spread = math.sqrt(np.var(s[y01]) + np.var(s[~y01]))
    if not np.isfinite(spread) or spread == 0:
        w = mu * 0 + (
            np.asarray(X[y01].mean(0)).ravel() - np.asarray(X[~y01].mean(0)).ravel()
        )
        s = np.asarray(Xs @ w).ravel()
        spread = math.sqrt(np.var(s[y01]) + np.var(s[~y01])) or 1.0
    return (w / spread).astype(np.float32)  # scale: pair-margin std = 1


def _adam_ascent(score_fn, params0, pos, neg, bandwidth, learning_rate, *, kernel,
                 max_iter, block_size):
    """Adam ascent of the smoothed AUC (eq. (11)) of ``score_fn(params)``.

    Traced inside the jitted fits below; one ``lax.scan`` of ``max_iter``
    steps over the pairs of ``pos`` x ``neg`` (disjoint ``[n]`` masks; items
    in neither, e.g. padding, take no part). Returns ``(params,
    objective_history [max_iter])`` (``U`` before each step).
    """
    import optax  # here, not at module level: keeps optax out of every `jaxrank` command's start-up

    opt = optax.adam(learning_rate)

    def loss(p):
        return 1 - _kernel_auc_masked(
            score_fn(p), pos, neg, bandwidth, kernel=kernel, block_size=block_size
        )

    def step(carry, _):
        p, state = carry
        val, g = jax.value_and_grad(loss)(p)
        upd, state = opt.update(g, state, p)
        return (optax.apply_updates(p, upd), state), 1 - val

    (p, _), hist = lax.scan(step, (params0, opt.init(params0)), None, length=max_iter)
    return p, hist


@functools.partial(jax.jit, static_argnames=("kernel", "max_iter", "block_size"))
def _fit_linear(X, pos, neg, w0, bandwidth, learning_rate, *, kernel, max_iter,
                block_size):
    """Adam ascent on eq. (11) for the LDF of eq. (19); one ``lax.scan``.

    ``bandwidth`` and ``learning_rate`` are traced (vmap over a grid).
    Returns ``(w, objective_history [max_iter])`` (``U`` before each step).
    """
    return _adam_ascent(
        lambda w: X @ w, w0, pos, neg, bandwidth, learning_rate,
        kernel=kernel, max_iter=max_iter, block_size=block_size,
    )


def _gmm_loglik(params, X):
    """Per-descriptor log-likelihoods ``[2, n, L]`` of the two GMMs (eq. (21))."""
    mu, logvar, logit = params["mu"], params["logvar"], params["logit"]
    logvar = jnp.clip(logvar, -12.0, 12.0)
    prec = jnp.exp(-logvar)  # [2, K, D]
    logw = jax.nn.log_softmax(logit, axis=-1)  # [2, K]
    D = X.shape[-1]
    quad = (
        jnp.einsum("nld,ckd->cnlk", X * X, prec)
        - 2 * jnp.einsum("nld,ckd->cnlk", X, mu * prec)
        + jnp.sum(mu * mu * prec, axis=-1)[:, None, None, :]
    )
    lognorm = -0.5 * (D * math.log(2 * math.pi) + jnp.sum(logvar, axis=-1))  # [2, K]
    comp = logw[:, None, None, :] + lognorm[:, None, None, :] - 0.5 * quad
    return jax.nn.logsumexp(comp, axis=-1)


def _gmm_scores(params, X, mask):
    """Average log-likelihood ratio of eq. (20): ``[n]``."""
    ll = _gmm_loglik(params, X)
    diff = jnp.where(mask, ll[0] - ll[1], 0)
    return jnp.sum(diff, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1)


_gmm_scores_jit = jax.jit(_gmm_scores)


@functools.partial(jax.jit, static_argnames=("kernel", "max_iter", "block_size"))
def _fit_gmm(
    X, mask, pos, params0, bandwidth, learning_rate, *, kernel, max_iter, block_size
):
    """Adam ascent on eq. (11) for the GMM ratio of eq. (20); one ``lax.scan``."""
    return _adam_ascent(
        lambda p: _gmm_scores(p, X, mask), params0, pos, ~pos, bandwidth, learning_rate,
        kernel=kernel, max_iter=max_iter, block_size=block_size,
    )
