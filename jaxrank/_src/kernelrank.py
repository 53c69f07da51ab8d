r"""KernelRank (Gao & Sun 2007): kernel-smoothed AUC, its gradient and the estimator.

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
    >>> from jaxrank._src.kernelrank import kernel_auc, kernel_auc_loss
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
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import sparse as jsparse
from jax.scipy.special import ndtr
from sklearn.base import BaseEstimator, ClassifierMixin
from numbers import Integral, Real

from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from jaxrank._src import validation

Array = jax.Array

KERNELS = ("gaussian", "sigmoid_like", "sigmoid")
_U_CLIP = 1e4  # |z / h| beyond this: Phi is exactly 0 or 1 in float32 and 64.
_DEFAULT_BLOCK = 128

# ---------------------------------------------------------------------------
# Smoothed step functions Phi(u), u = z / h (dimensionless).
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Blocked pair sums with per-sample gradient weights (eq. (18)).
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Estimator helpers.
# ---------------------------------------------------------------------------


def _base():
    """:mod:`jaxrank._src.base` (imported on use, as the other helpers here do)."""
    from jaxrank._src import base

    return base


def _binary_y(y, pos_label=None):
    """``(classes_, y01 bool)`` by the label rule of every estimator.

    :func:`jaxrank._src.base.labels_to_tasks`: exactly two classes,
    ``classes_[1]`` (``pos_label``, else the larger value) is positive; KernelRank fits one task,
    so ``y`` must be 1-D (a column vector is raveled with scikit-learn's
    ``DataConversionWarning`` by ``validate_data``).
    """
    from jaxrank._src.base import labels_to_tasks

    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (KernelRank fits one binary task); got shape {y.shape}.")
    positive, classes, _ = labels_to_tasks(y, pos_label=pos_label)
    return classes, positive[0]


def _check_bandwidth(bandwidth):
    """``None`` for ``"auto"``, else the bandwidth, validated after the float32 cast."""
    from jaxrank._src.base import check_positive_float32

    if isinstance(bandwidth, str):
        if bandwidth != "auto":
            raise ValueError(
                f"bandwidth must be 'auto' or a number > 0; got {bandwidth!r}."
            )
        return None
    return check_positive_float32(bandwidth, "bandwidth")


def _check_bandwidths(h):
    """The bandwidth(s) actually used (base x multiplier), as float32, validated.

    Raises:
        ValueError: a bandwidth that is not finite and > 0 in float32 (e.g. a
            huge ``bandwidth_grid`` multiplier).
    """
    with np.errstate(over="ignore", under="ignore"):
        h32 = np.asarray(h, np.float32)
    bad = ~(np.isfinite(h32) & (h32 >= np.finfo(np.float32).tiny))
    if np.any(bad):
        raise ValueError(
            "the bandwidth used (the base bandwidth times the bandwidth_grid multiplier) "
            f"must be a finite number > 0 in float32; got {np.asarray(h)[bad].tolist()[:4]}."
        )
    return jnp.asarray(h32)


def _check_grid(grid):
    if grid is None:
        return None
    g = np.asarray(grid, np.float64).ravel()
    if g.size == 0 or not np.all(np.isfinite(g) & (g > 0)):
        raise ValueError(
            f"bandwidth_grid must be a non-empty sequence of multipliers > 0; got {grid!r}."
        )
    return g


def _auto_bandwidth(scores, y01, kernel):
    """Default bandwidth of §V-C (Gao & Sun) from the initial model's scores.

    Gaussian: ``sigma`` = standard deviation of the pair margins
    ``s_i - s_j`` over all (positive, negative) pairs, which equals
    ``sqrt(var(s+) + var(s-))`` (no pairs formed). Sigmoid-like and sigmoid:
    ``alpha = 1 / mean |s|``, so ``h = mean |s|``.
    """
    s = np.asarray(scores, np.float64)
    if kernel == "gaussian":
        h = math.sqrt(np.var(s[y01]) + np.var(s[~y01]))
    else:
        h = float(np.mean(np.abs(s)))
    return h if np.isfinite(h) and h > 0 else 1.0


def _feature_scale(X):
    """Power of two nearest the RMS of the stored values of ``X`` (1 if all zero).

    Computed without overflow (values are divided by ``max |X|`` first).
    """
    import scipy.sparse as sp

    vals = np.asarray(X.data if sp.issparse(X) else X).ravel()
    vals = vals[vals != 0]
    if vals.size == 0:
        return 1.0
    m = float(np.max(np.abs(vals)))
    rms = m * math.sqrt(float(np.mean(np.square(vals / np.float32(m), dtype=np.float64))))
    return float(2.0 ** round(math.log2(rms)))


def _scaled(X, factor):
    """``X * factor`` in float32 (``factor`` a power of two: exact barring under/overflow)."""
    import scipy.sparse as sp

    if sp.issparse(X):
        X = X.astype(np.float64) * factor
        return X.astype(np.float32)
    return (np.asarray(X, np.float64) * factor).astype(np.float32)


def _split_train_val(y01, frac, rng):
    """Stratified split: boolean mask of the validation items."""
    val = np.zeros(len(y01), bool)
    for cls in (True, False):
        idx = np.flatnonzero(y01 == cls)
        k = max(1, int(round(frac * len(idx))))
        if len(idx) - k < 1:
            raise ValueError(
                "bandwidth_grid needs at least 2 samples of each class in y "
                "(one to fit, one to validate)."
            )
        val[rng.choice(idx, k, replace=False)] = True
    return val


def _as_matrix(X, shape=None):
    """scipy.sparse -> BCOO (never densified); dense -> jnp float32 array.

    ``shape`` (``>= X.shape``) pads with zero rows and columns. Small sparse
    matrices (at most 2^16 padded entries) are densified, as in the
    structured SVMs' ``fit`` (:func:`jaxrank._src.base.pad_design`).
    """
    import scipy.sparse as sp

    shape = tuple(X.shape) if shape is None else tuple(shape)
    if sp.issparse(X) and shape[0] * shape[1] <= 2**16:
        X = X.toarray()  # small: dense is faster and shares the dense program
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32)
        X.sum_duplicates()
        B = jsparse.BCOO.from_scipy_sparse(X)
        return jsparse.BCOO((B.data, B.indices), shape=shape)
    X = jnp.asarray(X, jnp.float32)
    return jnp.pad(X, [(0, shape[0] - X.shape[0]), (0, shape[1] - X.shape[1])])


def _linear_problem(X, y01, w0, devices=None):
    """``(X, pos, neg, w0)`` for :func:`_fit_linear`, padded to shape buckets.

    Rows and columns are padded as in the structured SVMs' ``fit``
    (:func:`jaxrank._src.base.fit_buckets`), so that fits of nearby sizes
    share one compiled program: padding rows are in neither ``pos`` nor
    ``neg``, padding columns are zero (their weights get a zero gradient and
    stay 0). With ``devices`` (a tuple of several, dense ``X``) the rows are
    also padded to a multiple of their number and sharded over them
    (:func:`jaxrank._src.base.shard_rows`).
    """
    from jaxrank._src.base import fit_buckets, shard_rows
    from jaxrank._src.features import Design

    n, d = X.shape
    n_pad, d_pad, _ = fit_buckets(n, d, 1)
    if devices is not None:
        n_pad = -(-n_pad // len(devices)) * len(devices)
    pos = np.zeros(n_pad, bool)
    pos[:n] = y01
    neg = np.zeros(n_pad, bool)
    neg[:n] = ~y01
    w0 = np.pad(np.asarray(w0, np.float32), (0, d_pad - d))
    Xm = _as_matrix(X, (n_pad, d_pad))
    if devices is not None:
        Xm = shard_rows(Design(Xm), devices).X
    return Xm, jnp.asarray(pos), jnp.asarray(neg), jnp.asarray(w0)


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


# ---------------------------------------------------------------------------
# Jitted optimisation loops (one call per fit).
# ---------------------------------------------------------------------------


def _adam_ascent(score_fn, params0, pos, neg, bandwidth, learning_rate, *, kernel,
                 max_iter, block_size):
    """Adam ascent of the smoothed AUC (eq. (11)) of ``score_fn(params)``.

    Traced inside the jitted fits below; one ``lax.scan`` of ``max_iter``
    steps over the pairs of ``pos`` x ``neg`` (disjoint ``[n]`` masks; items
    in neither, e.g. padding, take no part). Returns ``(params,
    objective_history [max_iter])`` (``U`` before each step).
    """
    import optax  # here, not at module level: ~0.1 s of every `jaxrank` command's start-up

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


def _hierarchical_init(Z, K, seed):
    """Hierarchical k-means splitting of §V-B: 1 -> 2 -> ... -> K clusters.

    Start from one cluster; at each stage split the cluster with the largest
    within-cluster sum of squares into two (centre +- 0.5 std), and run
    standard k-means from these centres. Returns weights ``[K]``, means
    ``[K, D]`` and variances ``[K, D]`` of the final partition.
    """
    from sklearn.cluster import KMeans

    centres = Z.mean(0, keepdims=True)
    labels = np.zeros(len(Z), int)
    while len(centres) < K:
        sse = np.array(
            [((Z[labels == k] - centres[k]) ** 2).sum() for k in range(len(centres))]
        )
        c = int(np.argmax(sse))
        members = Z[labels == c]
        eps = 0.5 * members.std(0) + 1e-6
        new = np.vstack(
            [np.delete(centres, c, axis=0), centres[c] + eps, centres[c] - eps]
        )
        km = KMeans(len(new), init=new, n_init=1, random_state=seed).fit(Z)
        centres, labels = km.cluster_centers_, km.labels_
    weights = np.array([max(np.mean(labels == k), 1e-3) for k in range(K)])
    var = np.stack(
        [
            Z[labels == k].var(0) if np.sum(labels == k) > 1 else Z.var(0)
            for k in range(K)
        ]
    )
    return weights / weights.sum(), centres, var


def _gmm_ml(Z, K, seed, reg):
    """ML diagonal GMM by EM from the hierarchical split init."""
    from sklearn.mixture import GaussianMixture

    w, m, v = _hierarchical_init(Z, K, seed)
    gm = GaussianMixture(
        K,
        covariance_type="diag",
        weights_init=w,
        means_init=m,
        precisions_init=1 / (v + reg),
        reg_covar=reg,
        max_iter=100,
        random_state=seed,
    ).fit(Z)
    return gm.weights_, gm.means_, gm.covariances_


# ---------------------------------------------------------------------------
# Estimators.
# ---------------------------------------------------------------------------


def _ap(scores, y01):
    from sklearn.metrics import average_precision_score

    return float(average_precision_score(y01, scores))


def _auc(scores, y01):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y01, scores))


class KernelRank(ClassifierMixin, BaseEstimator):
    r"""KernelRank (Gao & Sun 2007): maximise the kernel-smoothed AUC of eq. (11).

    Two scorers:

    * ``scorer="linear"``: the linear discriminant function (LDF) of eq. (19),
      ``f(x) = w^T x``, on ``X [n, d]`` (dense, or scipy.sparse such as tf-idf:
      kept sparse as a ``jax.experimental.sparse.BCOO`` matrix). Started from
      the least-squares / Fisher LDA direction (rescaled so that the pair
      margins have unit standard deviation), then Adam ascent on ``U``.
    * ``scorer="gmm"``: each sample is a set of ``L`` local descriptors of
      dimension ``D``, ``X [n, L, D]`` padded, with ``mask [n, L]``
      (``True`` = real descriptor). ``f`` = average log-likelihood ratio
      (eq. (20)) of a positive and a negative diagonal GMM (eq. (21),
      ``n_components`` = K mixtures), each first fitted by EM (ML) from the
      hierarchical k-means split init of §V-B, then Adam ascent on ``U`` over
      means, log-variances and mixing logits. Descriptors are standardised
      per feature (statistics of the training descriptors) first.

    The whole ascent is one jitted ``lax.scan`` of ``max_iter`` steps. The
    bandwidth (score units; ``sigma`` for the Gaussian kernel, ``1/alpha``
    for the sigmoid-like kernel and the sigmoid) is ``"auto"``: the default
    of §V-C computed from the initial model's training scores (std of the
    pair margins for the Gaussian; mean ``|s|`` for the sigmoid kernels),
    or a number. With ``bandwidth_grid`` (multipliers, e.g. ``[0.1, 0.3, 1,
    3, 10]``, the paper's 0.1-10x range), a stratified 25 % validation split
    picks the multiplier with the best validation AUC (all grid points are
    fitted in one ``vmap``-ed call for the linear scorer), then the model is
    refitted on all the data.

    Args:
        scorer: ``"linear"`` or ``"gmm"``.
        kernel: ``"gaussian"``, ``"sigmoid_like"`` or ``"sigmoid"``.
        bandwidth: ``"auto"`` or a float ``> 0`` (score units).
        bandwidth_grid: ``None`` or a sequence of multipliers ``> 0`` of the
            base bandwidth.
        max_iter: number of Adam steps (int ``>= 0``).
        learning_rate: Adam step size (parameter units per step).
        n_components: mixtures K per class (GMM scorer only).
        init_ridge: LSQR damping (in units of ``X / feature_scale_``) of the
            least-squares / Fisher LDA start of the linear scorer; ``>= 0``.
        block_size: positives per block in the pair sums (memory
            ``O(block_size * n)``).
        random_state: seed for the validation split, k-means and EM.
        verbose: print the bandwidth chosen and the objective.
        devices: ``None`` (one device), an int (the first k local devices)
            or a list of ``jax.Device``: the linear scorer's rows (dense
            ``X``) are padded to a multiple of the device count (padding rows
            are neither positive nor negative) and sharded over the devices;
            XLA splits ``X w`` and ``X^T g`` by rows and gathers the ``[n]``
            scores for the pair sums (README, "Data-parallel fits"). The
            same ascent as on one device, up to float32 summation order.
        pos_label: the label of the positive (relevant) class, one of the
            two values of ``y``; ``None`` (default): the larger label in sort
            order (scikit-learn's ``classes_[1]``). Then ``classes_`` is
            ``[other label, pos_label]``: ``classes_[1]`` is the positive class.

    Attributes:
        classes_: ``[2]`` the labels; ``classes_[1]`` is the positive class.
        coef_: ``[1, d]`` float32 weights (linear scorer).
        params_: dict of ``mu [2, K, D]``, ``logvar [2, K, D]``, ``logit
            [2, K]`` (GMM scorer; index 0 = positive model, in standardised
            descriptor units).
        ml_params_: the ML (EM) parameters the ascent started from (GMM).
        intercept_: ``[1]`` float, minus the midpoint of the two classes' mean
            training scores: ``predict`` thresholds ``decision_function`` at 0.
        bandwidth_: float, the bandwidth used for the final fit.
        bandwidth_multiplier_: float, the grid multiplier chosen (1.0 without
            a grid).
        init_coef_: ``[1, d]`` the least-squares / LDA start (linear scorer).
        feature_scale_: float, a power of two near the RMS of the stored
            values of ``X`` (linear scorer): the ascent runs on ``X /
            feature_scale_`` (exact in floating point) and ``coef_`` is
            rescaled back, so the fit does not depend on the units of ``X``
            (the same scores for ``X`` and ``2**k X``).
        objective_: float, smoothed training AUC ``U`` at the last step.
        objective_history_: ``[max_iter]`` ``U`` before each step.
        n_iter_: int, number of ascent steps.
        n_features_in_: int, ``d`` (linear) or ``D`` (GMM).

    Raises (in ``fit``):
        ValueError: bad hyperparameters (``bandwidth <= 0``, unknown
            ``kernel``/``scorer``, bad grid); ``X`` with NaN (``X``
            descriptors); ``y`` without exactly two classes; ``mask`` of the
            wrong shape or with an empty bag; ``n_components`` larger than the
            number of descriptors of a class (GMM); a fitted scorer with
            non-finite training scores (float32 overflow); ``devices`` with
            more than one device and sparse ``X`` or ``scorer="gmm"``, or
            devices that :func:`jaxrank._src.base.resolve_devices` rejects.

    Warns (in ``fit``):
        UserWarning: every training sample gets the same score (the model
            does not rank, e.g. constant features).

    References:
        Gao & Sun, IEEE Trans. Multimedia 2007, eqs. (11), (15)-(21), §V.
    """

    _parameter_constraints = {
        "scorer": [StrOptions({"linear", "gmm"})],
        "kernel": [StrOptions(set(KERNELS))],
        "bandwidth": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "bandwidth_grid": [None, "array-like"],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "init_ridge": [Interval(Real, 0, None, closed="left")],
        "block_size": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["boolean"],
        "devices": [None, Interval(Integral, 1, None, closed="left"), list, tuple],
        "pos_label": "no_validation",  # checked against the labels by fit
    }
    _persist = ("bandwidth_", "objective_", "n_iter_")

    def __init__(
        self,
        scorer="linear",
        *,
        kernel="gaussian",
        bandwidth="auto",
        bandwidth_grid=None,
        max_iter=200,
        learning_rate=0.01,
        n_components=4,
        init_ridge=1.0,
        block_size=_DEFAULT_BLOCK,
        random_state=None,
        verbose=False,
        devices=None,
        pos_label=None,
    ):
        self.scorer = scorer
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.bandwidth_grid = bandwidth_grid
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.n_components = n_components
        self.init_ridge = init_ridge
        self.block_size = block_size
        self.random_state = random_state
        self.verbose = verbose
        self.devices = devices
        self.pos_label = pos_label

    # -- validation ---------------------------------------------------------

    def _check_params(self):
        from jaxrank._src.base import check_positive_float32

        self._validate_params()
        if self.scorer not in ("linear", "gmm"):
            raise ValueError(f"scorer must be 'linear' or 'gmm'; got {self.scorer!r}.")
        _check_kernel(self.kernel)
        bw = _check_bandwidth(self.bandwidth)
        grid = _check_grid(self.bandwidth_grid)
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 0:
            raise ValueError(f"max_iter must be an int >= 0; got {self.max_iter!r}.")
        lr = check_positive_float32(self.learning_rate, "learning_rate")
        if not isinstance(self.block_size, (int, np.integer)) or self.block_size < 1:
            raise ValueError(
                f"block_size must be an int >= 1; got {self.block_size!r}."
            )
        r = float(self.init_ridge)
        if not (np.isfinite(r) and r >= 0):
            raise ValueError(f"init_ridge must be >= 0; got {self.init_ridge!r}.")
        if self.scorer == "gmm" and (
            not isinstance(self.n_components, (int, np.integer))
            or self.n_components < 1
        ):
            raise ValueError(
                f"n_components must be an int >= 1; got {self.n_components!r}."
            )
        return bw, grid, lr

    # -- fit ------------------------------------------------------------------

    def fit(self, X, y, mask=None):
        """Fit the scorer by maximising the smoothed AUC (eq. (11)).

        Args:
            X: linear: ``[n, d]`` array or scipy.sparse matrix; GMM: ``[n, L,
                D]`` padded descriptors.
            y: ``[n]`` binary labels (any two values; the larger is positive).
            mask: GMM only: optional ``[n, L]`` bool, ``True`` for real
                descriptors (default all ``True``).

        Returns:
            self.

        Raises:
            ValueError: see the class docstring.
        """
        t0 = time.perf_counter()
        bw, grid, lr = self._check_params()
        seed = check_random_state(self.random_state).randint(2**31 - 1)
        devices = self._sample_devices(X)
        if self.scorer == "linear":
            if mask is not None:
                raise ValueError("mask is only used with scorer='gmm'; got a mask.")
            X, y = validate_data(
                self,
                validation.check_features(X),
                y,
                accept_sparse=("csr", "csc"),
                dtype=np.float32,
                ensure_all_finite=True,
            )
            self.classes_, y01 = _binary_y(y, self.pos_label)
            # Scale covariance: the fit runs on X / f (f a power of two, the
            # RMS of the stored values: exact in floating point) with weights
            # f w, so Adam's steps and float32 ranges do not depend on the
            # units of X (features near 1e30 or 1e-20 fit like standardised
            # ones); f = 1 for standardised or 0/1 features.
            f = _feature_scale(X)
            self.feature_scale_ = f
            w, bw_used, hist = self._fit_linear_all(_scaled(X, 1 / f), y01, bw, grid, lr, seed,
                                                    devices)
            self.coef_ = _scaled(w[None, :], 1 / f)
            self.init_coef_ = _scaled(self.init_coef_, 1 / f)
            s = self._linear_scores(X)
        else:
            Xd, maskd = self._check_bags(X, mask, reset=True)
            if len(y) != len(Xd):
                raise ValueError(
                    f"X and y must have the same number of samples; got {len(Xd)} "
                    f"and {len(y)}."
                )
            self.classes_, y01 = _binary_y(y, self.pos_label)
            self._check_components(Xd, maskd, y01)
            p, bw_used, hist = self._fit_gmm_all(Xd, maskd, y01, bw, grid, lr, seed)
            self.params_ = {k: np.asarray(v) for k, v in p.items()}
            s = self._gmm_raw_scores(Xd, maskd)
        if not np.all(np.isfinite(s)):
            raise ValueError(
                "KernelRank: the fitted scorer gives non-finite training scores (overflow in "
                "float32); rescale X (e.g. sklearn.preprocessing.StandardScaler) or lower "
                "learning_rate.")
        from jaxrank._src.base import warn_tied_scores

        warn_tied_scores(self, s[:, None], np.ones((1, s.shape[0]), bool), stacklevel=2)
        self.intercept_ = np.array(
            [-0.5 * (s[y01].mean() + s[~y01].mean())], np.float32
        )
        self.bandwidth_ = float(bw_used)
        self.objective_history_ = np.asarray(hist)
        self.objective_ = float(hist[-1]) if len(hist) else float("nan")
        self.n_iter_ = int(self.max_iter)
        self.fit_time_ = time.perf_counter() - t0
        if self.verbose:
            print(
                f"KernelRank[{self.scorer}, {self.kernel}] bandwidth={self.bandwidth_:.4g} "
                f"U: {hist[0] if len(hist) else float('nan'):.4f} -> {self.objective_:.4f} "
                f"({self.fit_time_:.1f}s); "
                f"{_base().positive_class_text(self, self.classes_)}"
            )
        return self

    # linear scorer ----------------------------------------------------------

    def _sample_devices(self, X):
        """The devices to shard the linear scorer's rows over, or ``None`` (one device)."""
        if self.devices is None:
            return None
        from jaxrank._src.base import resolve_devices

        devices = resolve_devices(self.devices)
        if len(devices) == 1:
            return None
        import scipy.sparse as sp

        if self.scorer != "linear" or sp.issparse(X):
            raise ValueError(
                f"devices={self.devices!r} shards the rows of the linear scorer on dense X; got "
                f"{'scorer=' + repr(self.scorer) if self.scorer != 'linear' else 'sparse X'}. "
                "Pass devices=None (one device).")
        return devices

    def _fit_linear_all(self, X, y01, bw, grid, lr, seed, devices=None):
        rng = np.random.RandomState(seed)
        kw = dict(
            kernel=self.kernel,
            max_iter=int(self.max_iter),
            block_size=int(self.block_size),
        )

        def base_bw(Xs, y, w0):
            if bw is not None:
                return bw
            s0 = np.asarray(Xs @ w0).ravel()
            # The LDF has no bias and AUC is shift-invariant: centre the scores
            # before taking mean |s| (otherwise the offset sets alpha).
            return _auto_bandwidth(s0 - s0.mean(), y, self.kernel)

        if grid is not None and len(grid) > 1:
            val = _split_train_val(y01, 0.25, rng)
            Xt, yt, Xv, yv = X[~val], y01[~val], X[val], y01[val]
            w0 = _lda_init(Xt, yt, ridge=float(self.init_ridge))
            h = base_bw(Xt, yt, w0) * grid
            Xm, pos, neg, w0m = _linear_problem(Xt, yt, w0, devices)
            Wt, _ = jax.vmap(
                lambda hh: _fit_linear(Xm, pos, neg, w0m, hh, lr, **kw)
            )(_check_bandwidths(h))
            Wt = np.asarray(Wt, np.float64)[:, : X.shape[1]]
            sv = np.asarray(Xv @ Wt.T)
            aucs = [_auc(sv[:, k], yv) for k in range(len(grid))]
            mult = float(grid[int(np.argmax(aucs))])
            if self.verbose:
                print(
                    "validation AUC per multiplier:",
                    dict(zip(grid.tolist(), np.round(aucs, 4))),
                )
        else:
            mult = float(grid[0]) if grid is not None else 1.0
        w0 = _lda_init(X, y01, ridge=float(self.init_ridge))
        h = base_bw(X, y01, w0) * mult
        Xm, pos, neg, w0m = _linear_problem(X, y01, w0, devices)
        w, hist = _fit_linear(Xm, pos, neg, w0m, _check_bandwidths(h), lr, **kw)
        self.init_coef_ = np.asarray(w0, np.float32)[None, :]
        self.bandwidth_multiplier_ = mult
        return np.asarray(w, np.float32)[: X.shape[1]], h, hist

    def _linear_scores(self, X):
        return np.asarray(X @ self.coef_[0].astype(np.float64)).ravel()

    # GMM scorer -------------------------------------------------------------

    def _check_bags(self, X, mask, reset):
        X = check_array(validation.check_features(X), allow_nd=True, dtype=np.float32,
                        ensure_all_finite=False)
        if X.ndim != 3:
            raise ValueError(
                f"X must be [n_bags, n_descriptors, n_features] for scorer='gmm'; "
                f"got shape {X.shape}."
            )
        if mask is None:
            mask = np.ones(X.shape[:2], bool)
        mask = np.asarray(mask)
        if mask.shape != X.shape[:2]:
            raise ValueError(f"mask must have shape {X.shape[:2]}; got {mask.shape}.")
        mask = mask.astype(bool)
        if np.any(~np.isfinite(X[mask])):
            bad = int(np.sum(~np.isfinite(X[mask])))
            raise ValueError(
                f"X (descriptors) contains {bad} NaN or infinite value(s)."
            )
        if np.any(mask.sum(1) == 0):
            raise ValueError(
                "mask: every bag needs at least one descriptor; got an empty bag."
            )
        X = np.where(mask[..., None], X, 0).astype(np.float32)
        if reset:
            self.n_features_in_ = X.shape[2]
            Z = X[mask]
            self.desc_mean_ = Z.mean(0)
            self.desc_scale_ = Z.std(0) + 1e-6
        elif X.shape[2] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[2]} descriptor features, but KernelRank was fitted "
                f"with {self.n_features_in_}."
            )
        X = np.where(mask[..., None], (X - self.desc_mean_) / self.desc_scale_, 0)
        return X.astype(np.float32), mask

    def _check_components(self, X, mask, y01):
        K = int(self.n_components)
        for name, cls in (("positive", y01), ("negative", ~y01)):
            count = int(mask[cls].sum())
            if K > count:
                raise ValueError(
                    f"n_components={K} is larger than the {count} descriptors of the "
                    f"{name} class in X (from {int(cls.sum())} bags); each class GMM "
                    "needs at least n_components descriptors."
                )

    def _fit_gmm_all(self, X, mask, y01, bw, grid, lr, seed):
        rng = np.random.RandomState(seed)
        K = int(self.n_components)
        kw = dict(
            kernel=self.kernel,
            max_iter=int(self.max_iter),
            block_size=int(self.block_size),
        )

        def ml(Xs, ms, y):
            comps = [
                _gmm_ml(Xs[ms & y[:, None]], K, seed, 1e-2),
                _gmm_ml(Xs[ms & ~y[:, None]], K, seed, 1e-2),
            ]
            return {
                "mu": jnp.asarray(np.stack([c[1] for c in comps]), jnp.float32),
                "logvar": jnp.asarray(
                    np.log(np.stack([c[2] for c in comps])), jnp.float32
                ),
                "logit": jnp.asarray(
                    np.log(np.stack([c[0] for c in comps])), jnp.float32
                ),
            }

        def base_bw(p, Xs, ms, y):
            if bw is not None:
                return bw
            return _auto_bandwidth(
                np.asarray(_gmm_scores_jit(p, Xs, ms)), y, self.kernel
            )

        if grid is not None and len(grid) > 1:
            val = _split_train_val(y01, 0.25, rng)
            p0 = ml(X[~val], mask[~val], y01[~val])
            h0 = base_bw(p0, X[~val], mask[~val], y01[~val])
            aucs = []
            for m in grid:
                p, _ = _fit_gmm(
                    jnp.asarray(X[~val]),
                    jnp.asarray(mask[~val]),
                    jnp.asarray(y01[~val]),
                    p0,
                    _check_bandwidths(h0 * m),
                    lr,
                    **kw,
                )
                aucs.append(
                    _auc(np.asarray(_gmm_scores_jit(p, X[val], mask[val])), y01[val])
                )
            mult = float(grid[int(np.argmax(aucs))])
            if self.verbose:
                print(
                    "validation AUC per multiplier:",
                    dict(zip(grid.tolist(), np.round(aucs, 4))),
                )
        else:
            mult = float(grid[0]) if grid is not None else 1.0
        p0 = ml(X, mask, y01)
        self.ml_params_ = {k: np.asarray(v) for k, v in p0.items()}
        h = base_bw(p0, X, mask, y01) * mult
        p, hist = _fit_gmm(
            jnp.asarray(X),
            jnp.asarray(mask),
            jnp.asarray(y01),
            p0,
            _check_bandwidths(h),
            lr,
            **kw,
        )
        self.bandwidth_multiplier_ = mult
        return p, h, hist

    def _gmm_raw_scores(self, X, mask, params=None):
        p = self.params_ if params is None else params
        return np.asarray(
            _gmm_scores_jit({k: jnp.asarray(v) for k, v in p.items()}, X, mask)
        )

    # -- predict --------------------------------------------------------------

    def decision_function(self, X, mask=None):
        """Ranking scores ``f(x) + intercept_`` (eq. (19) or (20)).

        Args:
            X: as in :meth:`fit`.
            mask: GMM scorer only, as in :meth:`fit`.

        Returns:
            ``[n]`` float64 array; higher = more likely positive.
        """
        check_is_fitted(self)
        if self.scorer == "linear":
            X = validate_data(
                self, validation.check_features(X), accept_sparse=("csr", "csc"),
                dtype=np.float32, reset=False
            )
            s = self._linear_scores(X)
        else:
            Xd, m = self._check_bags(X, mask, reset=False)
            s = self._gmm_raw_scores(Xd, m).astype(np.float64)
        return s + float(self.intercept_[0])

    def ml_decision_function(self, X, mask=None):
        """GMM scorer: scores of the ML (EM) starting model (the paper's baseline).

        Returns:
            ``[n]`` float64 average log-likelihood ratios of eq. (20).
        """
        check_is_fitted(self, "ml_params_")
        Xd, m = self._check_bags(X, mask, reset=False)
        return self._gmm_raw_scores(Xd, m, self.ml_params_).astype(np.float64)

    def predict(self, X, mask=None):
        """Labels: ``classes_[1]`` where ``decision_function > 0``."""
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X, mask) > 0).astype(int)]

    def score(self, X, y, mask=None):
        """Average precision of ``decision_function`` (positive = ``classes_[1]``).

        Returns:
            float in ``[0, 1]``.
        """
        y = np.asarray(y)
        return _ap(self.decision_function(X, mask), y == self.classes_[1])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Linear scorer: scipy.sparse X is kept sparse. One binary task: a
        # 1-D y with two classes (no multiclass, no multi-output).
        tags.input_tags.sparse = self.scorer == "linear"
        tags.input_tags.two_d_array = self.scorer == "linear"
        tags.input_tags.three_d_array = self.scorer == "gmm"
        tags.classifier_tags.multi_class = False
        tags.target_tags.multi_output = False
        return tags
