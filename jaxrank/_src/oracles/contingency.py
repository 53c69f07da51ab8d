r"""Contingency-table losses of SVM-perf (F1, PRBEP, Prec@k, Rec@k): oracles and metrics.

The multivariate SVM of Joachims (ICML 2005) predicts a labelling
``y in {+1, -1}^n`` of all the items of a list at once. With ``P`` positives,
``N`` negatives and ``n = P + N`` items taking part (those of ``where``), the
joint feature map is

.. math::
    \Psi(X, y) = \frac{1}{2n} \sum_{i \in \mathrm{where}} y_i x_i ,

and the loss ``Delta(y*, y)`` depends on ``y`` only through its contingency
table against the true labels ``y*``: ``a`` true positives, ``b`` false
positives, ``c = P - a`` false negatives, ``d = N - b`` true negatives. The
losses (SVM-perf's are 100 times these) and the labellings they range over:

=============  =============  ==========================  ====================
loss           ``svm_perf``   ``Delta(a, b)``             labellings
=============  =============  ==========================  ====================
F1             ``-l 1``       ``1 - 2a / (2a + b + c)``   all
PRBEP          ``-l 3``       ``1 - a / P``               ``a + b = P``
Prec@k         ``-l 4``       ``1 - a / (a + b)``         ``a + b >= k``
Rec@k          ``-l 5``       ``1 - a / P``               ``a + b <= k``
=============  =============  ==========================  ====================

Conventions, as in SVM-perf (``fone``, ``prec``, ``rec`` of
``svm_struct_api.c``): F1 is 0 when ``a = 0``; a precision or recall with a
zero denominator is 0. With ``a + b = P`` precision and recall are both
``a / P`` (the break-even point), which is SVM-perf's ``prbep_loss`` there.
For Prec@k with ``a + b > k``, ``a / (a + b)`` is the expected precision of
``k`` items drawn from the ``a + b`` predicted positives. The true labelling
``y*`` is always among the labellings ranged over (``k`` is clipped, below),
so ``Delta(y*, y*) = 0`` and every hinge is ``>= 0``.

**k** (Prec@k, Rec@k) is a count of items. SVM-perf derives it from its
``--p`` option as ``k = max(1, floor(P * p))`` (``p <= 1`` for Prec@k,
default ``0.5``; ``p >= 1`` for Rec@k, default ``2``); :func:`k_from_fraction`
computes it. The oracles clip ``k`` into the range those ``p`` allow: to
``[1, P]`` for Prec@k and to ``[P, n]`` for Rec@k (``k > n`` admits every
labelling, as ``k = n`` does).

**Inference** (margin rescaling). With scores ``s = X w``, a labelling that
predicts ``a`` positives and ``b`` negatives as positive scores best when it
takes the ``a`` highest-scoring positives and the ``b`` highest-scoring
negatives (Joachims 2005, Algorithm 2), so

.. math::
    \max_y \Delta(y^*, y) + w^\top(\Psi(y) - \Psi(y^*))
    = \max_{(a, b)} \Delta(a, b) + \frac{1}{n}\Big(\sum_{j \le b} s^-_{(j)}
      - \sum_{i > a} s^+_{(i)}\Big)

over the admissible tables, with ``s^+_{(1)} >= s^+_{(2)} >= ...`` the sorted
positive scores and ``s^-_{(j)}`` the sorted negative ones. Algorithm 2 scans
all ``(P + 1)(N + 1)`` tables. Here, after two sorts:

* **F1, Prec@k**: for a fixed ``a`` both ``Delta(a, .)`` and the prefix sums of
  the sorted negative scores are concave in ``b`` (non-increasing increments),
  so the best ``b`` is where the increment turns non-positive, found by a
  binary search run for all ``a`` at once: O(n log n) time, O(n) memory.
* **PRBEP** (``b = P - a``) and **Rec@k** (the loss does not depend on ``b``:
  ``b = min(k - a, N, #negatives with s > 0)``): O(n) after the sorts.

Ties among scores do not change the maximum (any order of tied items gives
the same sums); which of several maximising labellings is returned is not
specified. The search is exact in exact arithmetic; in floating point the
maximum is found up to rounding.

**Relation to SVM-perf's ``-c``.** SVM-perf rescales the labels of these
losses to ``+-50/n`` (``read_struct_examples``: ``0.5*100.0/(numn+nump)``),
sums ``y.class[i] * x_i`` in ``psi``, returns 100 times the losses above
(``fone_loss``, ``prbep_loss``, ``prec_k_loss``, ``rec_k_loss``), and its
1-slack programs minimise ``1/2 |w|^2 + C xi`` with ``svm_c = sparm->C``
(``svm_struct_learn_custom.c``; margin rescaling is its default ``-o 2``).
Its ``Psi`` and ``Delta`` are therefore 100 times the ones here, its slack
``xi`` is 100 times ours, and the same feature vectors give the same ``w``
with

    ``C (jaxrank) = 100 * c (svm_perf -c)``.

SVM-perf's search skips tables of loss 0 (its ``if(loss > 0)``); including
them (here) only adds candidates of slack ``<= 0`` and changes no solution.

**Metrics** (:func:`f1_at_zero`, :func:`prbep`, :func:`precision_at_k`,
:func:`recall_at_k`) score a ranking or a thresholded prediction; the top-k
ones take the expected value over the orders of tied scores (tie-robust),
where SVM-perf's own ``prbep`` breaks ties pessimistically.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src import validation
from jaxrank._src.types import Violation

__all__ = [
    "f1_at_zero",
    "f1_oracle",
    "k_from_fraction",
    "prbep",
    "prbep_oracle",
    "precision_at_k",
    "precision_at_k_oracle",
    "recall_at_k",
    "recall_at_k_oracle",
]


# ----------------------------------------------------------------------------
# shared machinery
# ----------------------------------------------------------------------------


def _check_k(fn, k):
    """Trace-time check of ``k``: an integer scalar (Python int or int array)."""
    if np.ndim(k) != 0:
        raise ValueError(f"{fn}: k must be a scalar integer; got shape {np.shape(k)}.")
    dt = validation.dtype_of(k)
    if dt == bool or not jnp.issubdtype(dt, jnp.integer):
        raise TypeError(f"{fn}: k must be an integer (a count of items); got dtype {dt}.")


def _sorted_desc(scores, member):
    """Scores of ``member`` sorted in decreasing order, and each item's rank.

    Returns:
        ``(s_sorted [n], rank [n] int32)``: ``s_sorted[:m]`` are the ``m``
        member scores in decreasing order, zeros after; ``rank[i]`` is the
        position of item ``i`` in that order (meaningful for members only).
    """
    n = scores.shape[0]
    idx = jnp.arange(n, dtype=jnp.int32)
    flag = (~member).astype(jnp.int32)  # members first
    _, _, perm = lax.sort((flag, -scores, idx), num_keys=2)
    m = jnp.sum(member, dtype=jnp.int32)
    s_sorted = jnp.where(idx < m, scores[perm], jnp.zeros((), scores.dtype))
    rank = jnp.zeros(n, jnp.int32).at[perm].set(idx)
    return s_sorted, rank


def _first_nonpositive(inc, lo, hi, steps):
    """Vectorised binary search: per entry the least ``b`` in ``[lo, hi]`` with
    ``b == hi`` or ``inc(b) <= 0`` (``inc`` non-increasing on ``[lo, hi)``),
    i.e. the maximiser of the concave sequence whose increments are ``inc``."""

    def body(_, state):
        L, R = state
        mid = (L + R) // 2
        active = L < R
        stop = ~active | (inc(mid) <= 0)
        return jnp.where(stop, L, mid + 1), jnp.where(stop & active, mid, R)

    L, _ = lax.fori_loop(0, steps, body, (lo, hi))
    return L


def _solve(scores, positive, where, loss_kind, k):
    """Loss-augmented inference over contingency tables (module docstring).

    Args:
        scores: ``[n]`` float32/float64.
        positive, where: ``[n]`` bool.
        loss_kind: static, one of ``"f1"``, ``"prbep"``, ``"prec"``, ``"rec"``.
        k: int32 scalar (``"prec"`` and ``"rec"``; ignored otherwise).

    Returns:
        :class:`Violation` with ``aux`` the predicted-positive mask.
    """
    positive = jnp.asarray(positive, bool)
    where = jnp.asarray(where, bool)
    dtype = scores.dtype
    n_items = scores.shape[0]
    pos, neg = positive & where, ~positive & where
    P = jnp.sum(pos, dtype=jnp.int32)
    N = jnp.sum(neg, dtype=jnp.int32)
    n = P + N
    ok = (P > 0) & (N > 0)
    Pf, nf = P.astype(dtype), jnp.maximum(n, 1).astype(dtype)
    zero = jnp.zeros((), dtype)

    # Same scores for every item outside `where` (never read, no NaN from them).
    s = jnp.where(where, scores, zero)
    sp, rank_p = _sorted_desc(s, pos)
    sn, rank_n = _sorted_desc(s, neg)
    # Sn[b] = sum of the b highest negative scores; Tp[a] = sum of the
    # positive scores below the a highest (suffix sums: no large differences).
    Sn = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(sn)])
    Tp = jnp.concatenate([jnp.cumsum(sp[::-1])[::-1], jnp.zeros((1,), dtype)])

    a = jnp.arange(n_items + 1, dtype=jnp.int32)  # candidate true-positive counts
    af = a.astype(dtype)

    if loss_kind == "f1":
        def inc(b):
            m = Pf + af + b.astype(dtype)
            d_loss = (2 * af / jnp.maximum(m, 1)) / (m + 1)
            return nf * d_loss + sn[jnp.minimum(b, n_items - 1)]

        lo = jnp.zeros_like(a)
        hi = jnp.broadcast_to(N, a.shape)
        feasible = a <= P
        b_star = _first_nonpositive(inc, lo, hi, n_items.bit_length() + 1)
    elif loss_kind == "prec":
        k = jnp.clip(k, 1, jnp.maximum(P, 1))

        def inc(b):
            m = af + b.astype(dtype)
            d_loss = (af / jnp.maximum(m, 1)) / (m + 1)
            return nf * d_loss + sn[jnp.minimum(b, n_items - 1)]

        lo = jnp.maximum(k - a, 0)
        hi = jnp.broadcast_to(N, a.shape)
        feasible = (a <= P) & (lo <= hi)
        b_star = _first_nonpositive(inc, jnp.minimum(lo, hi), hi, n_items.bit_length() + 1)
    elif loss_kind == "rec":
        k = jnp.clip(k, P, n)

        n_plus = jnp.sum(neg & (s > 0), dtype=jnp.int32)  # negatives worth predicting
        feasible = (a <= P) & (a <= k)
        b_star = jnp.clip(jnp.minimum(k - a, n_plus), 0, N)
    elif loss_kind == "prbep":
        b_star = P - a
        feasible = (a <= P) & (b_star <= N)
        b_star = jnp.clip(b_star, 0, N)
    else:  # pragma: no cover - internal
        raise ValueError(loss_kind)

    value = _delta_at(loss_kind, a, b_star, Pf, dtype) + (Sn[b_star] - Tp[a]) / nf
    value = jnp.where(feasible, value, -jnp.inf)
    a_hat = jnp.argmax(value).astype(jnp.int32)
    b_hat = b_star[a_hat]

    aux = (pos & (rank_p < a_hat)) | (neg & (rank_n < b_hat))
    aux = aux & ok
    loss = jnp.where(ok, _delta_at(loss_kind, a_hat, b_hat, Pf, dtype), zero)
    inv = jnp.where(ok, 1 / nf, zero)
    # coef = (y* - y_hat) / (2n): +1/n for a missed positive, -1/n for a
    # negative predicted positive, 0 elsewhere (and outside `where`).
    coef = jnp.where(pos & ~aux, inv, jnp.where(neg & aux, -inv, zero))
    # sum(coef) = (P - a - b) / n exactly: centre the scores on the flipped
    # items' mean and add that part back (no cancellation when a + b = P).
    active = coef != 0
    ref = jnp.sum(jnp.where(active, s, zero)) / jnp.maximum(jnp.sum(active), 1).astype(dtype)
    sum_coef = jnp.where(ok, (P - a_hat - b_hat).astype(dtype) * inv, zero)
    dot = jnp.dot(jnp.where(active, s - ref, zero), coef) + ref * sum_coef
    hinge = jnp.maximum(loss - dot, 0)
    return Violation(loss=loss, coef=coef, aux=aux, hinge=hinge)


def _delta_at(loss_kind, a, b, Pf, dtype):
    """``Delta(a, b)`` at one contingency table (module docstring; ``P > 0``)."""
    af, bf = a.astype(dtype), b.astype(dtype)
    if loss_kind == "f1":
        return (bf + Pf - af) / jnp.maximum(Pf + af + bf, 1)
    if loss_kind == "prec":
        return bf / jnp.maximum(af + bf, 1)
    return (Pf - af) / jnp.maximum(Pf, 1)  # "rec", "prbep"


# ----------------------------------------------------------------------------
# oracles (oracle form: one list, jit-pure, vmap-able)
# ----------------------------------------------------------------------------

_ORACLE_DOC = """
    Args:
        scores: ``[n]`` float32 or float64, ``s = X w``.
        positive: ``[n]`` bool, the true labels (True = positive).
        where: ``[n]`` bool, the items that take part.{k_arg}

    Returns:
        :class:`jaxrank._src.types.Violation`: ``loss []`` = ``Delta(y*,
        y_hat)`` in ``[0, 1]``; ``coef [n]`` = ``(y*_i - y_hat_i) / (2n)``
        (``1/n`` for a positive predicted negative, ``-1/n`` for a negative
        predicted positive, 0 otherwise and outside ``where``), so that
        ``Psi(X, y*) - Psi(X, y_hat) = sum_i coef_i x_i``; ``aux [n]`` bool,
        the labelling ``y_hat`` (True = predicted positive, False outside
        ``where``); ``hinge []`` = ``loss - <scores, coef> >= 0``, the
        maximum. A list without both classes gives zeros (``aux`` all False).

    Raises:
        ValueError / TypeError: (at trace time) ``scores`` not ``[n]`` float32
            or float64, ``positive`` or ``where`` of another shape{k_raise}.
"""

_K_ARG = """
        k: integer scalar (Python int or int array; may be traced, and batched
            under ``vmap``), the cut-off; clipped as in the module docstring."""
_K_RAISE = ",\n            ``k`` not an integer scalar"


def _oracle(has_k):
    """Fill in the shared part of an oracle's docstring, then ``jax.jit`` it."""

    def deco(fn):
        fn.__doc__ = fn.__doc__.replace("{doc}", _ORACLE_DOC.format(
            k_arg=_K_ARG if has_k else "", k_raise=_K_RAISE if has_k else "").strip())
        return jax.jit(fn)

    return deco


@_oracle(has_k=False)
def f1_oracle(scores, positive, where):
    """F1 loss-augmented inference (SVM-perf ``-l 1``), oracle form.

    ``Delta = 1 - F1`` over all labellings; O(n log n) time, O(n) memory
    (concavity in ``b``, module docstring).

    {doc}

    References:
        Joachims, ICML 2005, Algorithm 2; SVM-perf ``fone_loss``.
    """
    validation.check_oracle_args("f1_oracle", scores, positive, where)
    return _solve(scores, positive, where, "f1", None)


@_oracle(has_k=False)
def prbep_oracle(scores, positive, where):
    """Precision/recall break-even loss-augmented inference (SVM-perf ``-l 3``).

    ``Delta = 1 - a/P`` over the labellings with ``P`` predicted positives
    (where precision = recall); O(n log n) time (the sorts), O(n) memory.

    {doc}

    References:
        Joachims, ICML 2005, Algorithm 2; SVM-perf ``prbep_loss``.
    """
    validation.check_oracle_args("prbep_oracle", scores, positive, where)
    return _solve(scores, positive, where, "prbep", None)


@_oracle(has_k=True)
def precision_at_k_oracle(scores, positive, where, k):
    """Prec@k loss-augmented inference (SVM-perf ``-l 4``), oracle form.

    ``Delta = 1 - a/(a+b)`` over the labellings with ``a + b >= k`` predicted
    positives, ``k`` clipped to ``[1, P]``; O(n log n) time, O(n) memory.

    {doc}

    References:
        Joachims, ICML 2005, Algorithm 2; SVM-perf ``prec_k_loss`` and the
        ``a+b >= k`` restriction of its threshold-metric search.
    """
    validation.check_oracle_args("precision_at_k_oracle", scores, positive, where)
    _check_k("precision_at_k_oracle", k)
    return _solve(scores, positive, where, "prec", jnp.asarray(k, jnp.int32))


@_oracle(has_k=True)
def recall_at_k_oracle(scores, positive, where, k):
    """Rec@k loss-augmented inference (SVM-perf ``-l 5``), oracle form.

    ``Delta = 1 - a/P`` over the labellings with ``a + b <= k`` predicted
    positives, ``k`` clipped to ``[P, n]``; O(n log n) time (the sorts), O(n)
    memory.

    {doc}

    References:
        Joachims, ICML 2005, Algorithm 2; SVM-perf ``rec_k_loss`` and the
        ``a+b <= k`` restriction of its threshold-metric search.
    """
    validation.check_oracle_args("recall_at_k_oracle", scores, positive, where)
    _check_k("recall_at_k_oracle", k)
    return _solve(scores, positive, where, "rec", jnp.asarray(k, jnp.int32))


def k_from_fraction(n_positive, fraction):
    """SVM-perf's ``k`` from its ``--p`` option: ``max(1, floor(P * p))``.

    Args:
        n_positive: integer scalar or array ``P`` (may be traced).
        fraction: Python float ``p > 0`` (SVM-perf: ``p <= 1`` for Prec@k,
            default 0.5; ``p >= 1`` for Rec@k, default 2).

    Returns:
        int32 array of the shape of ``n_positive``.

    Raises:
        ValueError: ``fraction`` not a positive finite number.

    References:
        SVM-perf ``find_most_violated_constraint_thresholdmetric``
        (``prec_rec_k``) and ``init_struct_model`` (defaults).
    """
    fraction = float(fraction)
    if not (np.isfinite(fraction) and fraction > 0):
        raise ValueError(f"fraction must be a positive finite number; got {fraction}.")
    P = jnp.asarray(n_positive)
    # Exact in float64 on the host for concrete counts; in the float dtype otherwise.
    if validation.is_concrete(P):
        k = np.floor(np.asarray(P, np.float64) * fraction).astype(np.int64)
        return jnp.asarray(np.maximum(k, 1), jnp.int32)
    ft = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    return jnp.maximum(jnp.floor(P.astype(ft) * fraction), 1).astype(jnp.int32)


# ----------------------------------------------------------------------------
# metrics
# ----------------------------------------------------------------------------


def _metric_args(fn, scores, labels, where):
    """Trace-time checks of a metric's one list; returns jnp arrays."""
    if np.ndim(scores) != 1:
        raise ValueError(f"{fn}: scores must be one list of shape [n]; got shape "
                         f"{np.shape(scores)}.")
    validation.check_dtype(scores, "scores", integers=True, half=True, fn=fn)
    if where is None:
        where = np.ones(np.shape(scores), bool)
    for name, x in (("labels", labels), ("where", where)):
        if np.shape(x) != np.shape(scores):
            raise ValueError(f"{fn}: {name} must have the shape of scores "
                             f"{np.shape(scores)}; got {np.shape(x)}.")
        if validation.dtype_of(x) != bool:
            raise TypeError(f"{fn}: {name} must be a bool array; got dtype "
                            f"{validation.dtype_of(x)}.")
    scores = jnp.asarray(scores)
    if scores.dtype.name in ("float16", "bfloat16"):
        scores = scores.astype(jnp.float32)
    ft = jnp.float64 if scores.dtype == jnp.float64 else jnp.float32
    return scores, jnp.asarray(labels, bool), jnp.asarray(where, bool), ft


def _expected_hits(scores, positive, where, k, ft):
    """Expected number of positives among the top ``k`` valid items, tied
    scores ordered uniformly at random (``1 <= k <= #valid`` assumed).

    With ``t`` the ``k``-th largest valid score, ``n_above`` items above it
    (``pos_above`` positive) and ``m_t`` tied at it (``p_t`` positive), the
    top ``k`` take ``r = k - n_above`` of the tied items: ``pos_above + r
    p_t / m_t`` positives in expectation.
    """
    n = scores.shape[0]
    # Ascending, items outside `where` first: the k-th largest is at n - k.
    _, s_sorted = lax.sort((where.astype(jnp.int32), scores), num_keys=2)
    t = s_sorted[jnp.clip(n - k, 0, n - 1)]
    above = where & (scores > t)
    tied = where & (scores == t)
    n_above = jnp.sum(above, dtype=jnp.int32)
    pos_above = jnp.sum(above & positive, dtype=jnp.int32)
    m_t = jnp.sum(tied, dtype=jnp.int32)
    p_t = jnp.sum(tied & positive, dtype=jnp.int32)
    return pos_above.astype(ft) + (k - n_above).astype(ft) * p_t.astype(ft) / jnp.maximum(
        m_t, 1).astype(ft)


@functools.partial(jax.jit, static_argnames=("ft", "denom"))
def _topk_metric(scores, positive, where, k, *, ft, denom):
    """Prec@k (``denom="k"``), Rec@k (``"P"``) or PRBEP (``k=None``) of one list."""
    n_valid = jnp.sum(where, dtype=jnp.int32)
    P = jnp.sum(positive & where, dtype=jnp.int32)
    if k is None:  # PRBEP: the top P
        k = P
    k = jnp.clip(k, 1, jnp.maximum(n_valid, 1))
    hits = _expected_hits(scores, positive, where, k, ft)
    d = k if denom == "k" else P
    out = hits / jnp.maximum(d, 1).astype(ft)
    return jnp.where((n_valid > 0) & (d > 0), out, jnp.zeros((), ft))


def f1_at_zero(scores, labels, where=None):
    """F1 of the predictions ``score > 0``.

    ``F1 = 2 TP / (2 TP + FP + FN)`` over the items of ``where``; 0 when
    ``TP = 0`` (no positive found, or no positives and no positive
    predictions), as SVM-perf's ``fone`` and scikit-learn's ``f1_score(...,
    zero_division=0)``.

    Args:
        scores: ``[n]`` real array (integer or floating).
        labels: ``[n]`` bool, True = positive.
        where: optional ``[n]`` bool, the items that count (default all).

    Returns:
        ``[]`` float32 (float64 for float64 scores) in ``[0, 1]``; jit- and
        vmap-able (``float(...)`` gives a Python number).

    Raises:
        ValueError / TypeError: (at trace time) ``scores`` not one list of a
            real dtype, ``labels`` or ``where`` not bool of its shape.

    References:
        van Rijsbergen's F-measure with beta = 1; Joachims, ICML 2005, Sec. 2.
    """
    scores, labels, where, ft = _metric_args("f1_at_zero", scores, labels, where)
    pred = where & (scores > 0)
    tp = jnp.sum(pred & labels, dtype=jnp.int32)
    fp = jnp.sum(pred & ~labels, dtype=jnp.int32)
    fn = jnp.sum(where & labels & ~pred, dtype=jnp.int32)
    return jnp.where(tp > 0, 2 * tp.astype(ft) / jnp.maximum(2 * tp + fp + fn, 1).astype(ft),
                     jnp.zeros((), ft))


def prbep(scores, labels, where=None):
    """Precision/recall break-even point: the precision of the top ``P`` items.

    With ``P`` positives among the items of ``where``, precision and recall of
    the ``P`` highest-scoring items are equal; items tied across the cut-off
    count by their expected share over random orders of the tied scores
    (``hits = #pos above + r * p_t / m_t`` for ``r`` of the ``m_t`` tied items
    taken, ``p_t`` of them positive). 0 when ``P = 0``.

    Args:
        scores: ``[n]`` real array.
        labels: ``[n]`` bool, True = positive.
        where: optional ``[n]`` bool (default all).

    Returns:
        ``[]`` float32 (float64 for float64 scores) in ``[0, 1]``.

    Raises:
        ValueError / TypeError: as :func:`f1_at_zero`.

    References:
        Joachims, ICML 2005, Sec. 2 (PRBEP); SVM-perf ``prbep`` (which breaks
        ties pessimistically instead).
    """
    scores, labels, where, ft = _metric_args("prbep", scores, labels, where)
    return _topk_metric(scores, labels, where, None, ft=ft, denom="P")


def precision_at_k(scores, labels, where=None, k=1):
    """Precision of the ``k`` highest-scoring items (Prec@k).

    ``E[#positives in the top k] / k``, the expectation over random orders of
    tied scores (as :func:`prbep`). ``k`` is clipped to ``[1, #valid]`` (a
    ``k`` above the list takes the whole list); 0 for an empty list.

    Args:
        scores: ``[n]`` real array.
        labels: ``[n]`` bool, True = positive.
        where: optional ``[n]`` bool (default all).
        k: integer scalar (may be traced).

    Returns:
        ``[]`` float32 (float64 for float64 scores) in ``[0, 1]``.

    Raises:
        ValueError / TypeError: as :func:`f1_at_zero`, or ``k`` not an
            integer scalar.

    References:
        Joachims, ICML 2005, Sec. 2 (Prec@k).
    """
    scores, labels, where, ft = _metric_args("precision_at_k", scores, labels, where)
    _check_k("precision_at_k", k)
    return _topk_metric(scores, labels, where, jnp.asarray(k, jnp.int32), ft=ft, denom="k")


def recall_at_k(scores, labels, where=None, k=1):
    """Recall of the ``k`` highest-scoring items (Rec@k).

    ``E[#positives in the top k] / P`` (ties as :func:`precision_at_k`);
    ``k`` clipped to ``[1, #valid]``; 0 when ``P = 0``.

    Args:
        scores: ``[n]`` real array.
        labels: ``[n]`` bool, True = positive.
        where: optional ``[n]`` bool (default all).
        k: integer scalar (may be traced).

    Returns:
        ``[]`` float32 (float64 for float64 scores) in ``[0, 1]``.

    Raises:
        ValueError / TypeError: as :func:`precision_at_k`.

    References:
        Joachims, ICML 2005, Sec. 2 (Rec@k).
    """
    scores, labels, where, ft = _metric_args("recall_at_k", scores, labels, where)
    _check_k("recall_at_k", k)
    return _topk_metric(scores, labels, where, jnp.asarray(k, jnp.int32), ft=ft, denom="P")
