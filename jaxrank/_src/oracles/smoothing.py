r"""KernelRank (Gao & Sun 2007): kernel-smoothed AUC, and its gradient.

Smoothed AUC (eq. (11) of Gao & Sun): with positives ``i in P`` (``M`` of
them), negatives ``j in N`` (``N`` of them) and ``z_ij = s_i - s_j``,

.. math::
    U = \frac{1}{MN} \sum_{i \in P} \sum_{j \in N} \Phi(z_{ij}),

where ``Phi`` is a smoothed step function. Three are provided; every one is
parametrised by a ``bandwidth`` ``h`` in score units:

* ``"gaussian"`` (eq. (10)): ``Phi(z) = ndtr(z / (sqrt(2) h))``, the CDF of
  the difference of two Gaussian-kernel density estimates; ``h = sigma`` of
  eq. (9).
* ``"sigmoid_like"`` (eqs. (12)-(14)): with ``x = exp(alpha z)``,
  ``Phi = x/(x-1) - x ln(x)/(x-1)^2`` and ``alpha = 1/h``. Evaluated in the
  stable form ``Phi(-a) = e^{-a} (expm1(-a) + a) / expm1(-a)^2`` (``a >= 0``)
  with a power series for ``a < 1`` (the removable singularity ``x = 1`` of
  eq. (14), ``Phi = 1/2``, ``Phi' = alpha/6``) and ``Phi(a) = 1 - Phi(-a)``.
* ``"sigmoid"`` (sigmoid smoothing, Yan et al. 2003): ``Phi = sigmoid(z/h)``,
  ``alpha = 1/h``.

The gradient needs only one weight per sample (eq. (18)):
``dU/ds_i = (1/MN) sum_j Phi'(z_ij)`` for positives and
``-(1/MN) sum_i Phi'(z_ij)`` for negatives. :func:`kernel_auc` computes the
value and these weights in one pass over blocks of positives (a
``custom_vjp``), so its memory does not grow with ``M N``.

Usage::

    >>> import jax, jax.numpy as jnp
    >>> from jaxrank.losses import kernel_auc, kernel_auc_loss
    >>> s = jnp.array([2., 0., 1., -1.]); y = jnp.array([1, 0, 1, 0])
    >>> u = kernel_auc(s, y, kernel="gaussian", bandwidth=0.1)
    >>> print(f"{float(u):.3f}")      # all 4 pairs ordered by >= 1 score unit
    1.000
    >>> g = jax.grad(kernel_auc_loss)(s, y, kernel="sigmoid", bandwidth=1.0)
    >>> g.shape
    (4,)
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtr

from jaxrank._src import validation

Array = jax.Array


KERNELS = ("gaussian", "sigmoid_like", "sigmoid")


_U_CLIP = 1e4  # |z / h| beyond this: Phi is exactly 0 or 1 in float32 and 64.


_DEFAULT_BLOCK = 128


def _poly(a, coeffs):
    """Horner evaluation of sum_k coeffs[k] a^k."""
    out = jnp.zeros_like(a) + coeffs[-1]
    for c in coeffs[-2::-1]:
        out = out * a + c
    return out


# T(a) = (expm1(-a) + a) / a^2 = sum_k (-a)^k / (k+2)!   (a < 1)
_T_COEF = tuple((-1) ** k / math.factorial(k + 2) for k in range(13))


# r(a) = expm1(-a) / a = -sum_k (-a)^k / (k+1)!            (a < 1)
_R_COEF = tuple(-((-1) ** k) / math.factorial(k + 1) for k in range(13))


def _sigmoid_like_lower(a):
    """``Phi(-a)`` of eq. (14) for ``a >= 0`` (alpha = 1), no cancellation.

    ``Phi(-a) = e^{-a} (expm1(-a) + a) / expm1(-a)^2``; for ``a < 1`` the ratio
    is the ratio of two power series ``T(a) / r(a)^2`` (value 1/2 at 0).
    Both branches are evaluated on clamped inputs (double ``where``) so that
    the unused one is finite and so is its gradient.
    """
    small = a < 1
    a_s = jnp.where(small, a, 0)
    a_b = jnp.where(small, 1, a)
    r = _poly(a_s, _R_COEF)
    f_small = jnp.exp(-a_s) * _poly(a_s, _T_COEF) / (r * r)
    e = jnp.expm1(-a_b)
    f_big = jnp.exp(-a_b) * (e + a_b) / (e * e)
    return jnp.where(small, f_small, f_big)


def _phi_sigmoid_like(u):
    u = jnp.clip(u, -_U_CLIP, _U_CLIP)
    neg = u < 0
    # where-selected arguments (not abs/maximum) keep d/du exact at u = 0.
    lower = _sigmoid_like_lower(jnp.where(neg, -u, 0))
    upper = 1 - _sigmoid_like_lower(jnp.where(neg, 0, u))
    return jnp.where(neg, lower, upper)


def _phi_gaussian(u):
    # Difference of two N(., h^2) kernels has std sqrt(2) h: eq. (10).
    return ndtr(jnp.clip(u, -_U_CLIP, _U_CLIP) * (1 / math.sqrt(2)))


def _phi_sigmoid(u):
    return jax.nn.sigmoid(jnp.clip(u, -_U_CLIP, _U_CLIP))


_PHI = {
    "gaussian": _phi_gaussian,
    "sigmoid_like": _phi_sigmoid_like,
    "sigmoid": _phi_sigmoid,
}


def smoothed_step(z, *, kernel: str, bandwidth):
    r"""The smoothed indicator ``Phi(z)`` of eqs. (10), (14) or a sigmoid.

    Args:
        z: float32 or float64 array of pair margins ``s_i - s_j`` (score
            units).
        kernel: ``"gaussian"``, ``"sigmoid_like"`` or ``"sigmoid"``. Static.
        bandwidth: ``h > 0`` in score units (``sigma`` of eq. (9), or
            ``1/alpha`` of eq. (13) and of the sigmoid).

    Returns:
        Array like ``z`` with values in ``[0, 1]``; ``Phi(0) = 1/2``. A
        traced ``bandwidth`` that is not finite and ``> 0`` gives NaN.

    Raises:
        ValueError: unknown ``kernel``; for a concrete ``bandwidth``, one
            that is not finite and ``> 0`` in the dtype of ``z`` (checked
            after the cast: ``1e-50`` is 0 in float32).
        TypeError: ``z`` not float32/float64 (complex, bool, integer,
            float16, bfloat16: refused, not cast); a complex ``bandwidth``.
    """
    _check_kernel(kernel)
    validation.check_dtype(z, "z", integers=False, half=False, fn="smoothed_step")
    _check_bandwidth_dtype(bandwidth)
    z = jnp.asarray(z)
    if validation.is_concrete(bandwidth):
        _check_bandwidth_value(bandwidth, z.dtype)
    # A traced bandwidth that is not finite and > 0 makes every value NaN.
    return _PHI[kernel](z / _bandwidth_or_nan(jnp.asarray(bandwidth, z.dtype)))


def _check_bandwidth_dtype(bandwidth):
    """``TypeError`` unless ``bandwidth`` is a real number (a dtype check: also at trace time)."""
    dt = validation.dtype_of(bandwidth)
    if dt.kind not in "iuf" and dt.name != "bfloat16":
        raise TypeError(
            f"bandwidth must be a real number; got {'complex ' if dt.kind == 'c' else ''}"
            f"dtype {dt}.")


def _bandwidth_or_nan(bw):
    """``bw`` where finite and ``>= tiny`` in its dtype, else NaN (the traced bad value)."""
    ok = jnp.isfinite(bw) & (bw >= jnp.finfo(bw.dtype).tiny)
    return jnp.where(ok, bw, jnp.full((), jnp.nan, bw.dtype))


def _check_bandwidth_value(bandwidth, dtype):
    """Raise unless the scalar ``bandwidth`` is finite and ``> 0`` once cast to ``dtype``."""
    if np.ndim(bandwidth) != 0:
        raise ValueError(f"bandwidth must be a scalar; got shape {np.shape(bandwidth)}.")
    b = np.asarray(bandwidth)
    if b.dtype.kind not in "iuf":
        raise TypeError(f"bandwidth must be a real number; got dtype {b.dtype}.")
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        b_cast = b.astype(dtype)
    if not (np.isfinite(b_cast) and b_cast >= np.finfo(dtype).tiny):
        raise ValueError(
            f"bandwidth must be a finite number > 0 in the dtype of scores ({dtype}, between "
            f"{np.finfo(dtype).tiny:.3g} and {np.finfo(dtype).max:.3g}); got {float(b)!r}.")


def _check_kernel(kernel):
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}; got {kernel!r}.")


def _pair_pass(kernel, block_size, scores, pos, neg, bandwidth):
    """One pass over blocks of positives.

    Returns ``total = sum_{i in P, j in N} Phi((s_i - s_j)/h)``, ``g [n]`` with
    ``g = d total / d s`` and ``d total / d h``. Positives are moved to the
    front by a stable sort; only ``ceil(M / b)`` blocks of ``b x n`` pairs are
    evaluated (a ``while_loop`` with a dynamic trip count).
    """
    phi = _PHI[kernel]
    dtype = scores.dtype
    n = scores.shape[0]
    b = max(1, min(block_size, n))
    order = jnp.argsort(~pos, stable=True)  # positives first
    pad = (-n) % b
    rows_s = jnp.concatenate([scores[order], jnp.zeros((pad,), dtype)])
    rows_ok = jnp.concatenate([pos[order], jnp.zeros((pad,), bool)])
    num_pos = jnp.sum(pos, dtype=jnp.int32)
    nblocks = (num_pos + b - 1) // b
    inv_h = 1 / bandwidth

    def body(k, carry):
        total, dh, row_g, col_g = carry
        start = k * b
        rs = lax.dynamic_slice(rows_s, (start,), (b,))
        rok = lax.dynamic_slice(rows_ok, (start,), (b,))
        m = rok[:, None] & neg[None, :]
        # Margins of pairs outside the masks are set to 0 first: a masked
        # score (NaN, inf) must not leak into sums through 0 * NaN.
        z = jnp.where(m, rs[:, None] - scores[None, :], 0)
        u = z * inv_h
        val, der = jax.jvp(phi, (u,), (jnp.ones_like(u),))
        val = jnp.where(m, val, 0)
        der = jnp.where(m, der, 0) * inv_h  # dPhi/dz
        total = total + jnp.sum(val)
        dh = dh - jnp.sum(der * z) * inv_h  # dPhi/dh = -Phi'(z) z / h
        row_g = lax.dynamic_update_slice(row_g, jnp.sum(der, axis=1), (start,))
        col_g = col_g - jnp.sum(der, axis=0)
        return total, dh, row_g, col_g

    zero = jnp.zeros((), dtype)
    init = (zero, zero, jnp.zeros((n + pad,), dtype), jnp.zeros((n,), dtype))
    total, dh, row_g, col_g = lax.fori_loop(0, nblocks, body, init)
    g = jnp.zeros((n,), dtype).at[order].set(row_g[:n]) + col_g
    return total, g, dh


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _kernel_auc_1d(kernel, block_size, scores, pos, neg, bandwidth):
    total, _, _ = _pair_pass(kernel, block_size, scores, pos, neg, bandwidth)
    return _normalise(total, pos, neg)[0]


def _normalise(total, pos, neg):
    # In the float dtype: |P| |N| overflows int32 beyond 2^31 pairs.
    dtype = total.dtype
    pairs = jnp.sum(pos, dtype=jnp.int32).astype(dtype) * jnp.sum(neg, dtype=jnp.int32).astype(dtype)
    inv = jnp.where(pairs > 0, 1 / jnp.maximum(pairs, 1), 0)
    return total * inv, inv


def _kernel_auc_fwd(kernel, block_size, scores, pos, neg, bandwidth):
    total, g, dh = _pair_pass(kernel, block_size, scores, pos, neg, bandwidth)
    u, inv = _normalise(total, pos, neg)
    # Where U is NaN (a NaN score of a positive or a negative), so is every
    # entry of the gradient (rax: never a plausible number).
    bad = jnp.isnan(u)
    g = jnp.where(bad, jnp.nan, g * inv).astype(g.dtype)
    dh = jnp.where(bad, jnp.nan, dh * inv).astype(dh.dtype)
    return u, (g, dh, pos, neg)


def _kernel_auc_bwd(kernel, block_size, res, ct):
    g, dh, pos, neg = res
    ct_u = ct
    f0 = jax.dtypes.float0
    return (
        ct_u * g,
        np.zeros(pos.shape, f0),
        np.zeros(neg.shape, f0),
        ct_u * dh,
    )


_kernel_auc_1d.defvjp(_kernel_auc_fwd, _kernel_auc_bwd)


def _kernel_auc_masked(scores, pos, neg, bandwidth, *, kernel, block_size):
    """Unvalidated core on ``[n]`` arrays (used inside the estimators' jit)."""
    return _kernel_auc_1d(kernel, block_size, scores, pos, neg, bandwidth)


def _prepare_pairs(scores, labels, where, bandwidth, kernel, block_size, name):
    _check_kernel(kernel)
    if not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"block_size must be a positive int; got {block_size!r}.")
    validation.check_same_shape("scores", scores, "labels", labels)
    if where is not None:
        validation.check_same_shape("scores", scores, "where", where)
    if np.ndim(scores) == 0:
        raise ValueError("scores must have at least one axis; got a scalar.")
    if np.ndim(bandwidth) != 0:
        raise ValueError(
            f"bandwidth must be a scalar; got shape {np.shape(bandwidth)}."
        )
    # Dtypes: the same errors eagerly and at trace time (no cast drops an
    # imaginary part or rounds an integer).
    validation.check_dtype(scores, "scores", integers=False, half=False, fn=name)
    validation.check_label_dtype(labels, fn=name)
    if where is not None and validation.dtype_of(where) != bool:
        raise TypeError(f"where must be a bool array; got dtype {validation.dtype_of(where)}.")
    _check_bandwidth_dtype(bandwidth)
    if validation.is_concrete(bandwidth):  # a Python or NumPy bandwidth: checked even under jit
        _check_bandwidth_value(
            bandwidth, jax.dtypes.canonicalize_dtype(validation.dtype_of(scores)))
    if validation.is_concrete(scores, labels, where, bandwidth):
        valid = validation.check_where(where, np.shape(scores))
        arr = np.asarray(scores)
        # Items outside ``where`` take no part: their scores may be anything.
        validation.check_scores(np.where(valid, arr, np.zeros((), arr.dtype)), "scores")
        lab = np.asarray(labels)
        if jnp.issubdtype(lab.dtype, jnp.floating) and np.any(np.isnan(lab)):
            raise ValueError("labels contains NaN values.")
        validation.check_both_classes(lab > 0, valid, name="labels")
    scores = jnp.asarray(scores)
    positive = jnp.asarray(labels) > 0
    valid = jnp.ones(scores.shape, bool) if where is None else jnp.asarray(where, bool)
    # Under jit, what the eager checks refuse (a NaN label; a bandwidth not
    # finite and > 0, see _kernel_auc_jit) makes the list's value NaN.
    bad = validation.label_defects(labels, valid, binary=False)
    bw = jnp.asarray(bandwidth, scores.dtype)
    return scores, positive & valid, ~positive & valid, bw, bad


def kernel_auc(
    scores,
    labels,
    *,
    kernel: str = "gaussian",
    bandwidth,
    where=None,
    block_size: int = _DEFAULT_BLOCK,
):
    r"""Kernel-smoothed AUC ``U`` of eq. (11) (Gao & Sun), differentiable.

    .. math::
        U = \frac{1}{MN} \sum_{i \in P} \sum_{j \in N} \Phi(s_i - s_j)

    with ``Phi`` the Gaussian-kernel CDF (eq. (10)), the sigmoid-like-kernel
    CDF (eq. (14)) or a sigmoid (see the module docstring). As the bandwidth
    goes to 0, ``U`` tends to the AUC with ties counted 1/2.

    ``jax.grad`` uses a ``custom_vjp`` with the per-sample weights of
    eq. (18), computed in the forward pass. The pairs are visited in blocks of
    ``block_size`` positives against all ``n`` items. Peak memory per list is
    ``O(block_size * n)`` floats (about 4 arrays of ``block_size x n``: pair
    margins, ``Phi``, ``Phi'`` and the mask) plus ``O(n)``; it does not grow
    with ``M * N``. Leading batch axes are ``vmap``-ed, so a batch of ``B``
    lists needs ``O(B * block_size * n)``. Time is
    ``O(ceil(M / block_size) * block_size * n)``.

    Args:
        scores: ``[..., n]`` float32 array (float64 with x64) of scores;
            units arbitrary, the same as ``bandwidth``. Integer, bool,
            complex and half-precision scores are refused, not cast.
        labels: ``[..., n]`` bool, integer or real float array; items with
            ``label > 0`` are positives, all others negatives.
        kernel: ``"gaussian"``, ``"sigmoid_like"`` or ``"sigmoid"``. Static.
        bandwidth: scalar ``h > 0`` in score units: ``sigma`` of eq. (9) for
            the Gaussian kernel, ``1/alpha`` (eq. (13)) for the sigmoid-like
            kernel and the sigmoid. May be traced; differentiable.
        where: optional ``[..., n]`` bool mask; ``False`` items take no part.
        block_size: positives per block (static int >= 1); trades memory for
            fewer loop steps.

    Returns:
        ``[...]`` float array of values in ``[0, 1]``. A list without a
        (positive, negative) pair gives 0 with a zero gradient (under ``jit``).
        Under ``jit``, what eager calls refuse by value gives NaN, with NaN
        gradients, never a number: a traced ``bandwidth`` that is not finite
        and ``> 0`` (every list), a NaN score or a NaN label among a list's
        items of ``where`` (that list).

    Raises:
        ValueError: unknown ``kernel``; ``block_size < 1``; mismatched shapes
            of ``scores``/``labels``/``where``; a non-traced ``bandwidth``
            that is not finite and ``> 0`` in the dtype of ``scores`` (always,
            also at trace time). For concrete (non-traced) inputs also: NaN
            or infinite ``scores``, NaN ``labels``, a list with a single
            class.
        TypeError: (eagerly and at trace time) scores that are not float32
            or float64 (complex, bool, integer, float16, bfloat16), complex
            or non-numeric labels or ``bandwidth``, a non-bool ``where``.

    References:
        Gao & Sun, "Improving semantic concept detection through optimizing
        ranking function", IEEE Trans. Multimedia 2007, eqs. (6)-(18).
    """
    s, pos, neg, bw, bad = _prepare_pairs(
        scores, labels, where, bandwidth, kernel, block_size, "kernel_auc"
    )
    return _kernel_auc_jit(
        s, pos, neg, bw, bad, kernel=kernel, block_size=block_size, loss=False
    )


def kernel_auc_loss(
    scores,
    labels,
    *,
    kernel: str = "gaussian",
    bandwidth,
    where=None,
    block_size: int = _DEFAULT_BLOCK,
):
    r"""``1 - U``: the KernelRank loss (minimise it to maximise eq. (11)).

    Same arguments, shapes, memory bound and errors as :func:`kernel_auc`.
    A list without a (positive, negative) pair gives 0 (no loss), with a zero
    gradient.

    Returns:
        ``[...]`` float array in ``[0, 1]``.
    """
    s, pos, neg, bw, bad = _prepare_pairs(
        scores, labels, where, bandwidth, kernel, block_size, "kernel_auc_loss"
    )
    return _kernel_auc_jit(
        s, pos, neg, bw, bad, kernel=kernel, block_size=block_size, loss=True
    )


@functools.partial(jax.jit, static_argnames=("kernel", "block_size", "loss"))
def _kernel_auc_jit(s, pos, neg, bw, bad, *, kernel, block_size, loss):
    """Batched (leading axes), jitted value of U or of the loss 1 - U.

    ``bad [...]``: lists whose value is NaN (a NaN label); a bandwidth that
    is not finite and ``> 0`` makes every value NaN. NaN values have NaN
    gradients (in the scores and the bandwidth), never a plausible number.
    """
    bw_bad = ~(jnp.isfinite(bw) & (bw >= jnp.finfo(bw.dtype).tiny))

    def fn(s, pos, neg, bad):
        u = _kernel_auc_masked(s, pos, neg, bw, kernel=kernel, block_size=block_size)
        if loss:
            u = jnp.where(jnp.any(pos) & jnp.any(neg), 1 - u, 0)
        bad = bad | bw_bad
        # The NaN branch depends on every valid score and on bw: its gradient is NaN.
        mult = jnp.where(bad, jnp.nan, 0).astype(u.dtype)
        nan = mult * (jnp.sum(jnp.where(pos | neg, s, 0)) + bw)
        return jnp.where(bad, nan, u)

    batch = s.shape[:-1]
    if batch:
        n = s.shape[-1]
        out = jax.vmap(fn)(s.reshape(-1, n), pos.reshape(-1, n), neg.reshape(-1, n),
                           bad.reshape(-1))
        return out.reshape(batch)
    return fn(s, pos, neg, bad)
