"""Structured hinge losses as functions of the scores (differentiable)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._src import validation
from jaxrank._src.oracles import ap as inference
from jaxrank._src.oracles.inputs import _check_pos_weight, _layout


def structured_hinge(oracle):
    r"""The structured hinge of an oracle, as a differentiable function of the scores.

    ``structured_hinge(oracle)(S, problem) = max_y Delta(y) - <S, coef_y>``,
    the slack of the most-violated output (``Violation.hinge``, or ``loss -
    <S, coef>``). It is convex and piecewise linear in ``S``; its gradient
    (a ``custom_vjp``: nothing is differentiated through the oracle) is
    ``-coef``. Any scorer can be trained on it with ``jax.grad`` and optax.

    NaN: if any entry of ``S`` is NaN, the value and every entry of the
    gradient are NaN (never a plausible number, also under ``jit``), whatever
    the oracle returns; give masked-out items a finite score (e.g. 0).

    Args:
        oracle: ``(S, problem) -> Violation`` (e.g. a model's ``oracle``).

    Returns:
        A function ``(S, problem) -> []`` float. ``S`` is a pytree of float32
        or float64 arrays.

    Raises:
        TypeError: (when the returned function is called or traced) a leaf of
            ``S`` that is complex, bool, integer, float16/bfloat16 or not
            numeric: no cast drops an imaginary part or rounds.

    References:
        Tsochantaridis et al., JMLR 2005 (structured hinge); eq. (3) of
        Mohapatra et al., NIPS 2014.
    """
    return _structured_hinge(oracle, _any_nan, check=True)


def _any_nan(S, problem):
    del problem
    return functools.reduce(jnp.logical_or, [jnp.any(jnp.isnan(x))
                                             for x in jax.tree_util.tree_leaves(S)])


def _structured_hinge(oracle, is_nan, check=False):
    """:func:`structured_hinge` with NaN (value and gradient) where ``is_nan(S, problem)``.

    ``check``: refuse score leaves that are not float32/float64 (at trace time).
    """

    def value(S, problem):
        if check:
            for leaf in jax.tree_util.tree_leaves(S):
                validation.check_dtype(leaf, "S", integers=False, half=False,
                                       fn="structured_hinge")
        r = oracle(S, problem)
        bad = is_nan(S, problem)
        out = _slack(r, S)
        coef = jax.tree_util.tree_map(lambda c: jnp.where(bad, jnp.nan, c).astype(c.dtype),
                                      r.coef)
        return jnp.where(bad, jnp.nan, out).astype(out.dtype), coef

    @jax.custom_vjp
    def hinge(S, problem):
        return value(S, problem)[0]

    def fwd(S, problem):
        out, coef = value(S, problem)
        return out, (coef, problem)

    def bwd(res, g):
        coef, problem = res
        zero = jax.tree_util.tree_map(_zero_cotangent, problem)
        return jax.tree_util.tree_map(lambda c: -g * c, coef), zero

    hinge.defvjp(fwd, bwd)
    return hinge


def _slack(r, S):
    if r.hinge is not None:
        return r.hinge
    return r.loss - sum(jnp.vdot(a, b) for a, b in zip(jax.tree_util.tree_leaves(S),
                                                     jax.tree_util.tree_leaves(r.coef)))


def _zero_cotangent(x):
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.zeros_like(x)
    return np.zeros(x.shape, jax.dtypes.float0)


def _ap_hinge_fn(kp, method):
    # NaN where a score of the items of ``where`` (p[1]) is NaN, or where the
    # list holds more positives than the static bound ``kp``.
    return _structured_hinge(
        lambda s, p: inference.ap_oracle(jnp.where(p[1], s, 0), p[0], p[1], kp=kp,
                                         method=method),
        lambda s, p: jnp.any(jnp.isnan(s) & p[1]) | _over_bound(p, kp))


def _over_bound(p, kp):
    """True where the list ``p = (positive, where)`` has more than ``kp`` positives."""
    return jnp.sum(p[0] & p[1], dtype=jnp.int32) > kp


def _positive_bound(kp, n, max_positives, labels, where, positive, valid, name):
    """The static capacity of the positives: ``kp`` from :func:`_layout`, or the
    user's ``max_positives`` (rounded up to a power of two, at most ``n``).

    Raises:
        TypeError / ValueError: ``max_positives`` not an integer ``>= 1``, or
            fewer than the positives of a list (concrete labels).
    """
    if max_positives is None:
        return kp
    if isinstance(max_positives, bool) or not isinstance(max_positives, (int, np.integer)):
        raise TypeError(f"{name}: max_positives must be an int >= 1 or None; got "
                        f"{max_positives!r}.")
    if max_positives < 1:
        raise ValueError(f"{name}: max_positives must be >= 1; got {max_positives}.")
    if validation.is_concrete(labels, where):
        most = int(np.max(np.sum(np.asarray(positive) & np.asarray(valid), axis=-1)))
        if most > max_positives:
            raise ValueError(f"{name}: a list has {most} positives, more than "
                             f"max_positives={max_positives}.")
        return kp
    return max(1, min(n, 1 << (int(max_positives) - 1).bit_length()))


def ap_hinge_loss(scores, labels, *, where=None, method="select", max_positives=None):
    r"""AP-SVM structured hinge as a function of the scores.

    .. math::
        \xi(s) = \max_R \; \Delta(R^*, R) - \big(\Psi(X,R^*) - \Psi(X,R)\big)^\top w
               = \texttt{loss} - s^\top g

    evaluated by exact loss-augmented inference (:func:`ap_most_violated`).
    It is convex and piecewise linear in ``s``; ``jax.grad`` returns the
    subgradient ``-g`` (a ``custom_vjp``: no differentiation through the
    sort). With a linear scorer ``s = X w`` the chain rule gives ``-X^T g``,
    the AP-SVM subgradient of eq. (3); any differentiable scorer (an MLP) can
    be trained on it with optax.

    Args:
        scores: ``[..., n]`` float scores.
        labels: ``[..., n]``, ``label > 0`` marks positives.
        where: optional ``[..., n]`` bool mask of items taking part.
        method: ``"greedy"``, ``"search"`` or ``"select"`` (static; all exact).
        max_positives: optional static int, an upper bound on the positives
            of a list. Under ``jit`` the labels are not known when the program
            is built, and inference then sizes its tables for ``n``
            positives; a bound (e.g. the mini-batch's number of positives
            when the sampler fixes it) makes each call several times faster.
            Ignored for concrete labels (their count is used).

    Returns:
        ``[...]`` float hinge values (``>= 0``). Under ``jit``, lists without
        both classes give 0 with a zero gradient, and a list with a NaN score
        or a NaN or non-binary label (among the items of ``where``), or with
        more positives than ``max_positives``, gives NaN with an all-NaN
        gradient.

    Raises:
        ValueError / TypeError: as :func:`jaxrank.inference.ap_most_violated`;
            ``max_positives`` not an int ``>= 1`` or (concrete labels) below
            a list's number of positives.

    References:
        Yue et al., SIGIR 2007, eq. (3) of Mohapatra et al., NIPS 2014.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxrank.losses import ap_hinge_loss
        >>> s, y = jnp.array([0.5, 1.0, 0.0]), jnp.array([1, 0, 0])
        >>> jax.grad(ap_hinge_loss)(s, y)  # the negative at 0.0 is inactive
        Array([-1.,  1.,  0.], dtype=float32)
    """
    inference._check_method(method)
    scores, positive, valid, kp = _layout(scores, labels, where, "ap_hinge_loss")
    kp = _positive_bound(kp, scores.shape[-1], max_positives, labels, where, positive, valid,
                         "ap_hinge_loss")
    h = _ap_hinge_fn(kp, method)
    # Masked scores are replaced by 0 inside the oracle call only (p[1] is
    # ``where``): NaN there neither reaches the kernel nor the value.
    fn = lambda s, p, v: h(s, (p, v))  # noqa: E731
    for _ in range(scores.ndim - 1):
        fn = jax.vmap(fn)
    return fn(scores, positive, valid)


def hinge_loss(scores, labels, *, where=None, pos_weight=1.0):
    r"""Binary SVM hinge, summed: ``sum_i w_i max(0, 1 - y_i s_i)``.

    The loss term of ``LinearSVC(loss="hinge")`` (multiply by ``C``), with
    ``y_i = +1`` for ``label > 0`` and ``-1`` otherwise and positive weight
    ``pos_weight``. Differentiable with ``jax.grad`` (subgradient ``-coef`` of
    :func:`jaxrank.inference.zero_one_most_violated`).

    Args:
        scores: ``[..., n]`` float decision values; leading axes are batch
            axes (one value per list, as in rax).
        labels: ``[..., n]`` labels (``{0,1}``, ``{-1,1}`` or bool).
        where: optional ``[..., n]`` bool mask.
        pos_weight: positive float weight of the positives.

    Returns:
        ``[...]`` float sums (a scalar for one list). Under ``jit`` a list
        with a NaN score or a NaN or non-binary label (among the items of
        ``where``) gives NaN, with an all-NaN gradient; scores outside
        ``where`` are ignored.

    Raises:
        ValueError / TypeError: as :func:`jaxrank.inference.zero_one_most_violated`.

    References:
        Cortes & Vapnik 1995; the binary SVM baseline of Mohapatra et al. 2014.
    """
    _check_pos_weight(pos_weight)
    scores, positive, valid, _ = _layout(scores, labels, where, "hinge_loss",
                                                   both_classes=False)
    return _hinge_sum(scores, positive, jnp.broadcast_to(valid, scores.shape),
                      jnp.asarray(pos_weight, scores.dtype))


@jax.jit
def _hinge_sum(scores, positive, valid, pos_weight):
    dtype = scores.dtype
    y = jnp.where(positive, 1, -1).astype(dtype)
    w = jnp.where(positive, pos_weight, 1).astype(dtype)
    s = jnp.where(valid, scores, 0)  # masked scores (even NaN) take no part
    out = jnp.sum(jnp.where(valid, w * jnp.maximum(0, 1 - y * s), 0), axis=-1)
    return _nan_where(jnp.any(jnp.isnan(scores) & valid, axis=-1), out, s)


def _nan_where(bad, out, s):
    """``out`` where not ``bad``; NaN, with an all-NaN gradient in ``s``, where ``bad``.

    ``bad [...]``, ``out [...]``, ``s [..., n]`` (masked entries already
    replaced by finite values). The NaN branch is ``nan * sum(s)`` so that
    its gradient is NaN; where not ``bad`` its multiplier is 0 and it adds
    an exact zero to the gradient.
    """
    mult = jnp.where(bad, jnp.nan, 0).astype(out.dtype)
    return jnp.where(bad, mult * jnp.sum(s, axis=-1), out)


def _ndcg_hinge_fn(kp):
    from jaxrank._src.oracles import ndcg

    return _structured_hinge(
        lambda s, p: ndcg.ndcg_oracle(jnp.where(p[1], s, 0), p[0], p[1], kp=kp),
        lambda s, p: jnp.any(jnp.isnan(s) & p[1]) | _over_bound(p, kp))


def ndcg_hinge_loss(scores, labels, *, where=None, segments=None, max_positives=None):
    r"""NDCG structural hinge as a function of the scores (binary gains, no cut-off).

    .. math::
        \xi(s) = \max_R \; \Delta(R^*, R) - \big(\Psi(X,R^*) - \Psi(X,R)\big)^\top w
               = \texttt{loss} - s^\top g, \qquad \Delta = 1 - \mathrm{NDCG},

    with AP-SVM's joint feature vector and the exact loss-augmented inference
    of :func:`jaxrank.inference.ndcg_most_violated` (Mohapatra et al., CVPR
    2018). It is convex and piecewise linear in ``s``, an upper bound on
    ``1 - NDCG`` of the ranking by ``s`` (with ties broken against the
    relevant items); ``jax.grad`` returns the subgradient ``-g`` (a
    ``custom_vjp``: no differentiation through the sort).

    Args:
        scores: ``[..., n]`` float32 or float64 scores.
        labels: ``[..., n]`` relevance gains: bool or integer-valued numbers
            ``>= 0``; an item is relevant iff its label is ``> 0``.
        where: optional ``[..., n]`` bool mask of the items taking part.
        segments: optional ``[n]`` integer query ids (1-D ``scores`` only):
            the hinge of every query, averaged over the queries that hold a
            relevant and an irrelevant item (the SVM-map form). Must be
            concrete (a NumPy array or a constant closed over by ``jit``):
            the queries' padded layout is built on the host.
        max_positives: optional static int, an upper bound on the relevant
            items of a list (of a query), as in :func:`ap_hinge_loss`.

    Returns:
        ``[...]`` float hinge values ``>= 0`` (a scalar with ``segments``). A
        list (or every query) without a relevant or without an irrelevant
        item gives 0 with a zero gradient. Under ``jit``, a list with a NaN
        score or a negative, non-integer or NaN label among its items, or
        with more relevant items than ``max_positives``, gives NaN with an
        all-NaN gradient.

    Raises:
        ValueError: as :func:`jaxrank.inference.ndcg_most_violated`;
            ``segments`` of another length than the list, with batch axes,
            or not integers.
        TypeError: as :func:`jaxrank.inference.ndcg_most_violated`; traced
            ``segments``.

    References:
        Mohapatra, Rolinek, Jawahar, Kolmogorov, Kumar, CVPR 2018; the
        structured hinge of Yue et al., SIGIR 2007.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxrank.losses import ndcg_hinge_loss
        >>> s, y = jnp.array([0.5, 1.0, 0.0]), jnp.array([1, 0, 0])
        >>> float(ndcg_hinge_loss(s, y)) > 0
        True
    """
    from jaxrank._src.oracles import ndcg

    scores, positive, valid, kp = ndcg._ndcg_layout(scores, labels, where, "ndcg_hinge_loss")
    kp = _positive_bound(kp, scores.shape[-1], max_positives, labels, where, positive, valid,
                         "ndcg_hinge_loss")
    h = _ndcg_hinge_fn(kp)
    fn = lambda s, p, v: h(s, (p, v))  # noqa: E731
    if segments is not None:
        return _segment_mean(fn, scores, positive, valid, segments, "ndcg_hinge_loss")
    for _ in range(scores.ndim - 1):
        fn = jax.vmap(fn)
    valid = jnp.broadcast_to(valid, scores.shape)
    return fn(scores, jnp.broadcast_to(positive, scores.shape), valid)


def _segment_mean(fn, scores, positive, valid, segments, name):
    """Mean of ``fn`` over the queries of ``segments`` with both classes (host layout)."""
    from jaxrank._src.layout import query_layout

    if isinstance(segments, jax.core.Tracer):
        raise TypeError(
            f"{name}: segments must be concrete (a NumPy array or a constant closed over "
            "by jit): the queries' layout is built on the host. For traced query ids, "
            "pad the queries into [Q, L] arrays and pass where=.")
    seg = np.asarray(segments)
    if scores.ndim != 1 or seg.shape != scores.shape:
        raise ValueError(
            f"{name}: segments must have the shape of a 1-D scores array {scores.shape}; "
            f"got {seg.shape}.")
    if not np.issubdtype(seg.dtype, np.integer):
        raise ValueError(f"{name}: segments must be integer query ids; got dtype {seg.dtype}.")
    n = scores.shape[0]
    layout, _ = query_layout(seg, n)
    idx = jnp.asarray(np.minimum(layout, n - 1))
    pad = jnp.asarray(layout >= n)
    pos = jnp.asarray(positive)[idx] & ~pad
    use = jnp.broadcast_to(jnp.asarray(valid), (n,))[idx] & ~pad
    s = jnp.where(pad, 0, scores[idx])
    per_query = jax.vmap(fn)(s, pos, use)
    ok = jnp.any(pos & use, axis=1) & jnp.any(~pos & use, axis=1)
    return jnp.sum(jnp.where(ok, per_query, 0)) / jnp.maximum(jnp.sum(ok), 1)
