"""Loss-augmented inference (most-violated rankings) as pure JAX kernels.

AP loss (Yue et al. 2007; Mohapatra et al. 2014, Algorithms 1-3). All kernels are pure,
shape-static and jit/vmap-able; the Python wrappers only choose a static layout.

Notation (``shared/MATH_NOTES.md``): positives sorted by score, descending,
``s+_1 >= ... >= s+_P``; negatives ``s-_1 >= ... >= s-_N``. The increment

    t_k(j) = delta_j(k) - delta_j(k+1)
           = (1/P) k / ((j+k)(j+k-1)) - 2 (s+_k - s-_j) / (P N)

is one term of eq. (5); ``delta_j(i)`` is its suffix sum over ``k >= i`` and
``delta_j(P+1) = 0``. The output of inference only needs
``n_a = #{j : opt_j <= a}``, the number of negatives ranked above the a-th
positive in the most-violated ranking.

The integer stages (sorts, selection) run through :mod:`jaxrank._src.oracles.sorting`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._src import validation
from jaxrank._src.metrics import _sort_key
from jaxrank._src.oracles.ap_select import (
    _ap_expand,
    _ap_layout,
    _counts_above,
    _cumsum,
    _num_bisections,
    _select_capacities,
)
from jaxrank._src.oracles.inputs import _layout, _masked_scores, _nan_if_nan_scores
from jaxrank._src.oracles.sorting import (
    _desc_scores,
)
from jaxrank._src.types import Violation

Array = jax.Array


METHODS = ("greedy", "search", "select")


# Entries of the delta table evaluated at once by the dense kernels.
_BLOCK_ENTRIES = 2**18


# Up to this positive capacity selective ranking solves its first P - 1 rows on
# dense delta rows (Algorithm 1, _opt_greedy), beyond it by divide and conquer.
_DENSE_HEAD_MAX_KP = 128


def _increment(k, j, sp_k, sn_j, P, N):
    """t_k(j) of eq. (5) in its stable closed form (no harmonic numbers).

    ``k`` and ``j`` are 1-based ranks (any integer dtype), ``P`` and ``N`` the
    numbers of valid positives and negatives. Broadcasts.
    """
    dtype = sp_k.dtype
    kf = k.astype(dtype)
    jf = j.astype(dtype)
    Pf = P.astype(dtype)
    Nf = N.astype(dtype)
    first = kf / ((jf + kf) * (jf + kf - 1)) / Pf
    second = 2 * (sp_k - sn_j) / (Pf * Nf)
    return first - second


def _first_true(pred_fn, lo, hi, num_iter):
    """Vectorised binary search: first ``k`` in ``[lo, hi]`` with ``pred_fn(k)``.

    ``pred_fn`` must be monotone (False ... False True ... True) on ``[lo, hi]``;
    returns ``hi`` if only ``hi`` (or nothing) is True. ``lo``/``hi`` are int
    arrays of equal shape; ``num_iter`` is static.
    """

    def body(_, carry):
        lo, hi = carry
        mid = (lo + hi) // 2
        ok = pred_fn(mid)
        return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

    lo, hi = lax.fori_loop(0, num_iter, body, (lo, hi))
    return lo


def _delta_rows(sp, P, N, j, sn):
    """Dense rows of the delta table for negatives of rank ``j`` (``[r]``).

    Returns ``delta [r, Kp+1]`` with ``delta[:, i-1] = delta_j(i)`` (prefix-sum
    form of eq. (5): suffix sums of the increments) and the increments
    ``t [r, Kp]``; columns beyond ``P`` hold 0.
    """
    kp = sp.shape[0]
    k = jnp.arange(1, kp + 1, dtype=jnp.int32)
    t = _increment(k[None, :], j[:, None], sp[None, :], sn[:, None], P, N)
    t = jnp.where(k[None, :] <= P, t, 0)
    delta = jnp.cumsum(t[:, ::-1], axis=1)[:, ::-1]
    delta = jnp.concatenate([delta, jnp.zeros_like(delta[:, :1])], axis=1)
    return delta, t


def _map_row_blocks(fn, j, sn, num_rows, kp):
    """Apply ``fn(j_block, sn_block) -> [b]`` to the first ``num_rows`` rows.

    Rows are processed in static blocks of about ``_BLOCK_ENTRIES / kp`` inside a
    ``fori_loop`` whose trip count is ``ceil(num_rows / block)`` (dynamic), so
    padding rows cost nothing; rows that fit one block are evaluated at once,
    without the loop. Rows past ``num_rows`` are 0, except those sharing the
    loop's last block with used rows (callers mask them).
    """
    r = j.shape[0]
    b = min(max(_BLOCK_ENTRIES // max(kp, 1), 8), max(r, 1))
    if b >= r:  # one block: no loop (a smaller program)
        out = fn(j, sn).astype(jnp.int32)
        return jnp.where(jnp.arange(r) < num_rows, out, 0)
    pad = (-r) % b
    jp = jnp.concatenate([j, jnp.ones((pad,), j.dtype)])
    snp = jnp.concatenate([sn, jnp.zeros((pad,), sn.dtype)])
    nblocks = (jnp.minimum(num_rows, r) + b - 1) // b

    def body(blk, out):
        start = blk * b
        jb = lax.dynamic_slice(jp, (start,), (b,))
        sb = lax.dynamic_slice(snp, (start,), (b,))
        return lax.dynamic_update_slice(out, fn(jb, sb).astype(out.dtype), (start,))

    out = lax.fori_loop(0, nblocks, body, jnp.zeros((r + pad,), jnp.int32))
    return out[:r]


def _opt_greedy(sp, P, N, sn, num_rows=None):
    """Algorithm 1: ``opt_j = argmax_{i in 1..P+1} delta_j(i)`` for each row.

    ``sn [m]`` are the sorted negative scores of ranks ``1..m``; rows past
    ``num_rows`` (dynamic, default ``N``) are not evaluated and hold 0. O(P m).
    """
    m = sn.shape[0]
    if m == 0:
        return jnp.zeros((0,), jnp.int32)
    j = jnp.arange(1, m + 1, dtype=jnp.int32)

    def block(jb, snb):
        delta, _ = _delta_rows(sp, P, N, jb, snb)
        i = jnp.arange(1, delta.shape[1] + 1, dtype=jnp.int32)
        delta = jnp.where(i[None, :] <= P + 1, delta, -jnp.inf)
        return (jnp.argmax(delta, axis=1) + 1).astype(jnp.int32)

    return _map_row_blocks(block, j, sn, N if num_rows is None else num_rows, sp.shape[0])


def _tail_cuts(sp, P, N, value_at, m, num_valid):
    """``J_a = max{j : t_a(j) >= 0}`` for each positive ``a``: one binary search each.

    For ``j >= P``, ``opt_j <= a`` iff ``t_a(j) >= 0``, and ``t_a(j)`` is
    non-increasing in ``j`` (also as computed in floating point: every
    operation is monotone), so ``J_a`` is a binary search over the ranks
    ``P - 1 .. num_valid``, O(P log N) in all; then ``opt_j = 1 + #{a : J_a
    < j}`` (:func:`_expand_cuts`). Equivalent to Algorithm 2's per-negative
    search, O(N log P), when ``N >> P``.

    Args:
        sp: ``[kp]`` sorted positive scores; P, N: ``[]`` int32 counts.
        value_at: ``jj [kp] -> s-_jj`` (1-based ranks in ``1..max(m, 1)``).
        m: static number of rows; num_valid: ``[]`` int32, rows in use.

    Returns:
        ``J [kp]`` int32 in ``[0, m + 1]``; ``m + 1`` for the padding ``a > P``.
    """
    kp = sp.shape[0]
    a = jnp.arange(1, kp + 1, dtype=jnp.int32)

    def pred(j):
        jj = jnp.clip(j, 1, max(m, 1))
        return _increment(a, jj, sp, value_at(jj), P, N) >= 0

    def body(_, carry):
        lo, hi = carry  # invariant: lo = P - 1 ("none") or pred(lo)
        mid = (lo + hi + 1) // 2
        ok = pred(mid) & (mid <= hi)
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)

    lo0 = jnp.full((kp,), P - 1, jnp.int32)
    hi0 = jnp.full((kp,), num_valid, jnp.int32)
    J, _ = lax.fori_loop(0, _num_bisections(m + 1), body, (lo0, hi0))
    return jnp.where(a <= P, jnp.clip(J, 0, m + 1), m + 1)  # padding never counts


def _opt_search(sp, P, N, sn, num_valid):
    """Algorithm 2 for every row: binary search on the unimodal part.

    Rows past ``num_valid`` (dynamic) are padding and are ignored.
    For ``j >= P`` delta_j is unimodal on ``{1..P+1}``, so ``opt_j`` is the
    first ``k`` with ``t_k(j) >= 0`` (or ``P+1``): a batched binary search,
    O(log P) per negative. The ``min(P-1, m)`` rows with ``j < P`` also need
    the linear scan over ``i > j`` (eqs. (7)-(9)), done on dense rows.
    (Selective ranking, :func:`_select_opt`, uses the per-positive search of
    :func:`_tail_cuts` and the divide and conquer of
    :func:`_opt_head_monotone` instead.)
    """
    m = sn.shape[0]
    kp = sp.shape[0]
    if m == 0:
        return jnp.zeros((0,), jnp.int32)
    j = jnp.arange(1, m + 1, dtype=jnp.int32)
    niter = _num_bisections(kp + 1)

    def pred(jj, snj, k):
        kk = jnp.minimum(k, kp)
        t = _increment(kk, jj, sp[kk - 1], snj, P, N)
        return (k >= P + 1) | (t >= 0)

    # j >= P: eq. (7) over the whole domain.
    hi = jnp.broadcast_to(P + 1, j.shape).astype(jnp.int32)
    opt_tail = _first_true(lambda k: pred(j, sn, k), jnp.ones_like(j), hi, niter)

    # j < P: i1 by binary search on {1..j}, i2 by linear scan on {j+1..P+1}.
    num_head = min(kp - 1, m)
    if num_head <= 0:
        return opt_tail

    def block(jb, snb):
        delta, _ = _delta_rows(sp, P, N, jb, snb)
        i1 = _first_true(
            lambda k: pred(jb, snb, k) | (k >= jb), jnp.ones_like(jb), jb, niter
        )
        i = jnp.arange(1, delta.shape[1] + 1, dtype=jnp.int32)
        tail = (i[None, :] > jb[:, None]) & (i[None, :] <= P + 1)
        i2 = jnp.argmax(jnp.where(tail, delta, -jnp.inf), axis=1) + 1
        d1 = jnp.take_along_axis(delta, (i1 - 1)[:, None], axis=1)[:, 0]
        d2 = jnp.take_along_axis(delta, (i2 - 1)[:, None], axis=1)[:, 0]
        return jnp.where(d1 >= d2, i1, i2).astype(jnp.int32)

    rows = jnp.minimum(P - 1, num_valid)
    opt_head = _map_row_blocks(block, j[:num_head], sn[:num_head], rows, kp)
    opt_head = jnp.where(j[:num_head] < P, opt_head, opt_tail[:num_head])
    return opt_tail.at[:num_head].set(opt_head)


def _opt_head_monotone(sp, P, N, sn, num_rows, increment=_increment, unrolled=False):
    """Exact ``opt_j`` for the first rows by divide and conquer on monotonicity.

    ``opt_j`` is non-decreasing in ``j`` (Yue et al. 2007), so once the rows
    ``j - h`` and ``j + h`` are solved, row ``j`` only needs the argmax of
    ``delta_j`` over ``[opt_{j-h}, opt_{j+h}]``. Solving rows level by level
    (midpoints first), the ranges of one level tile ``{1..P+1}`` with overlaps
    only at their ends, so a level costs O(P + rows) and the ``r`` rows cost
    O((P + r) log r) instead of the O(P r) of the linear scan in Algorithm 2.
    Within a range, ``delta_j(i) - delta_j(hi) = sum_{k=i}^{hi-1} t_k(j)`` is
    a segmented suffix sum (prefix-sum form of eq. (5)). Rows past
    ``num_rows`` (dynamic) get ``P + 1``.

    ``increment(k, j, sp_k, sn_j, P, N)`` is ``t_k(j)``, the value of rank ``k``
    minus that of rank ``k + 1`` for row ``j`` (default: AP's eq. (5)); any
    rank loss whose ``argmax`` is non-decreasing in ``j`` can use it (the NDCG
    oracle, :mod:`jaxrank._src.oracles.ndcg`).

    ``unrolled`` (static): the two widest levels run on their own, each sized
    for its rows, and the other levels in a loop sized for the widest of
    them, instead of one loop body sized for the widest level of all; for
    many rows (``r`` much larger than ``P``) that is about a quarter of the
    work, for two more bodies to compile.
    """
    r = sn.shape[0]
    kp = sp.shape[0]
    levels = max(1, int(np.ceil(np.log2(r + 1))))
    size = 2**levels - 1
    snp = jnp.concatenate([sn, jnp.zeros((size - r,), sn.dtype)])
    big = jnp.int32(np.iinfo(np.int32).max)

    def level(lev, opt, nr):
        # opt holds rows 0..size+1; rows 0 and size+1 are the sentinels 1, P+1.
        # ``nr`` (static) slots hold the level's ``2^lev`` rows.
        buf = kp + 1 + nr
        q = jnp.arange(buf, dtype=jnp.int32)
        m = jnp.arange(nr, dtype=jnp.int32)
        half = jnp.left_shift(1, levels - lev - 1).astype(jnp.int32)
        in_level = m < jnp.left_shift(1, lev)
        rows = jnp.where(in_level, half * (2 * m + 1), 1)  # 1-based j
        lo = opt[rows - half]
        hi = opt[jnp.minimum(rows + half, size + 1)]
        length = jnp.where(in_level, jnp.maximum(hi - lo + 1, 1), 0)
        ends = _cumsum(length)
        starts = ends - length
        # seg[q] = #{k : starts[k] <= q} - 1 (a searchsorted of the sorted
        # starts, as a histogram and a cumulative sum: no loop on CPU).
        marks = jnp.zeros((buf + 1,), jnp.int32).at[jnp.minimum(starts, buf)].add(1)
        seg = jnp.clip(_cumsum(marks)[:buf] - 1, 0, nr - 1)
        i = lo[seg] + q - starts[seg]
        inside = (q < ends[-1]) & (i <= hi[seg]) & in_level[seg]
        jr = rows[seg]
        kk = jnp.clip(i, 1, kp)
        t = increment(kk, jr, sp[kk - 1], snp[jr - 1], P, N)
        v = jnp.where(inside & (i < hi[seg]), t, 0)
        g = _cumsum(v[::-1])[::-1]
        g_next = jnp.concatenate([g[1:], jnp.zeros((1,), g.dtype)])
        rel = g - g_next[jnp.maximum(ends - 1, 0)][seg]  # delta_j(i) - delta_j(hi)
        rel = jnp.where(inside, rel, -jnp.inf)
        best = jax.ops.segment_max(rel, seg, num_segments=nr)
        first = jax.ops.segment_min(
            jnp.where(inside & (rel == best[seg]), q, big), seg, num_segments=nr
        )
        sol = lo + (first - starts)
        sol = jnp.where(rows <= num_rows, sol, P + 1)
        dest = jnp.where(in_level, rows, size + 2)
        return opt.at[dest].set(sol.astype(jnp.int32), mode="drop")

    opt = jnp.full((size + 2,), P + 1, jnp.int32).at[0].set(1)
    if unrolled:
        # The two widest levels on their own, the others in one loop whose body
        # is sized for the widest of them: about a quarter of the work of one
        # body sized for the widest level, for two more bodies to compile.
        groups = [(0, max(levels - 2, 0)), (max(levels - 2, 0), levels - 1),
                  (levels - 1, levels)]
        for start, end in groups:
            if end - start == 1:
                opt = level(start, opt, 2 ** start)
            elif end > start:
                opt = lax.fori_loop(
                    start, end,
                    functools.partial(lambda nr, lev, o: level(lev, o, nr), 2 ** (end - 1)),
                    opt)
    else:
        nr = 2 ** (levels - 1)  # rows solved at the last (widest) level
        opt = lax.fori_loop(0, levels, lambda lev, o: level(lev, o, nr), opt)
    return opt[1 : r + 1]


def _ap_outputs(sp, P, N, n_above, dtype):
    """AP loss of R_hat and the coefficients of the sorted positives."""
    kp = sp.shape[0]
    a = jnp.arange(1, kp + 1, dtype=dtype)
    Pf = jnp.maximum(P, 1).astype(dtype)
    Nf = jnp.maximum(N, 1).astype(dtype)
    valid_a = jnp.arange(1, kp + 1) <= P
    # 1 - AP as the mean of the complements 1 - prec_a = n_a / (a + n_a):
    # no cancellation when AP is close to 1 (where C Delta needs every digit).
    above = n_above.astype(dtype)
    loss = jnp.sum(jnp.where(valid_a, above / (a + above), 0)) / Pf
    g_pos = jnp.where(valid_a, 2 * n_above.astype(dtype) / (Pf * Nf), 0)
    return loss, g_pos


def _list_counts(pos_valid, neg_valid, dtype):
    """``(P, N, max(P, 1), max(P, 1) as dtype, max(N, 1) as dtype, P > 0 and N > 0)``
    of a list's valid positives and negatives (int32 counts)."""
    P = jnp.sum(pos_valid, dtype=jnp.int32)
    N = jnp.sum(neg_valid, dtype=jnp.int32)
    P_ = jnp.maximum(P, 1)
    return P, N, P_, P_.astype(dtype), jnp.maximum(N, 1).astype(dtype), (P > 0) & (N > 0)


def _ap_core(scores, pos_valid, neg_valid, kp, method):
    """AP loss-augmented inference with a static capacity for the positives.

    Args:
        scores: ``[n]`` float scores.
        pos_valid: ``[n]`` bool, the positives taking part.
        neg_valid: ``[n]`` bool, the negatives taking part (disjoint).
        kp: static int ``>= #positives``: the positives are gathered into a
            ``[kp]`` buffer, so the delta tables are ``kp`` wide.
        method: static, one of ``METHODS``.

    Returns:
        ``(loss, coef [n], interleaving_rank [n])``, zeros where not valid.
        With no valid positive or no valid negative the loss and the
        coefficients are 0.

    The integer stages (sorting, candidate selection, and for ``select`` the
    expansion of the per-positive cuts into per-negative ranks) are
    :func:`_ap_layout` and :func:`_ap_expand`: host kernels on CPU (native
    or NumPy), XLA elsewhere, with identical results. The float stages are
    XLA on every path.
    """
    dtype = scores.dtype
    n = scores.shape[0]
    P, N, P_, Pf, Nf, ok = _list_counts(pos_valid, neg_valid, dtype)
    select = method == "select"
    caps = tuple(_select_capacities(n)) if select else (n,)
    kh = min(kp - 1, n)
    if len(caps) > 1:
        # tau_j of the selective ranking for every rank j (see _select_opt),
        # as integer keys: s >= tau_j  iff  key(-s) <= tkd[j - 1].
        s_last = jnp.min(jnp.where(pos_valid, scores, jnp.inf))  # = s+_P
        s_last = jnp.where(P > 0, s_last, 0).astype(dtype)
        eps = 64 * jnp.finfo(dtype).eps
        # In the float dtype: (j + P)(j + P - 1) overflows int32 for n >= 46342.
        jP = (jnp.arange(1, n + 1, dtype=jnp.int32) + P_).astype(dtype)
        t = s_last - Pf / (jP * (jP - 1)) * (Nf / 2)
        tkd = _sort_key(-(t - eps * (jnp.abs(s_last) + jnp.abs(t) + 1)))
    else:
        tkd = jnp.zeros((1,), _sort_key(scores[:1]).dtype)  # unused
    psk, psrc, m, sk, src = _ap_layout(scores, pos_valid, neg_valid, tkd, P_, N,
                                       kp=kp, caps=caps, kh=kh)
    sp = _desc_scores(psk, dtype)

    if select:
        opt, n_above = _select_opt(sp, P, N, m, sk, src, neg_valid, caps=caps, kh=kh)
    else:
        sn = _desc_scores(sk, dtype)
        if method == "greedy":
            opt_sorted = _opt_greedy(sp, P, N, sn)
        else:
            opt_sorted = _opt_search(sp, P, N, sn, N)
        dest = jnp.where(jnp.arange(n) < N, src, n)
        opt = jnp.zeros((n,), jnp.int32).at[dest].set(opt_sorted, mode="drop")
        n_above = _counts_above(opt, neg_valid, kp)

    opt = jnp.where(neg_valid & ok, opt, 0)
    n_above = jnp.where(ok, n_above, 0)
    loss, g_pos_sorted = _ap_outputs(sp, P, N, n_above, dtype)
    coef = jnp.where(neg_valid, -2 * (P + 1 - opt).astype(dtype) / (Pf * Nf), 0)
    pdest = jnp.where(jnp.arange(kp) < P, psrc, n)
    coef = coef.at[pdest].add(g_pos_sorted, mode="drop")
    coef = jnp.where(ok, coef, 0)
    return jnp.where(ok, loss, 0).astype(dtype), coef, opt


def _select_opt(sp, P, N, m, sk, src, neg_valid, *, caps, kh):
    """Interleaving ranks of all negatives (input order) by selective ranking.

    Algorithm 3. Active negatives (``opt_j <= P``) form a prefix of the sorted
    order (``opt_j`` is non-decreasing in ``j``). For ``j >= P`` (where
    ``delta_j`` is unimodal) negative ``j`` is active iff ``t_P(j) >= 0``, i.e.
    ``s-_j >= tau_j := s+_P - P N / (2 (j+P)(j+P-1))``, and since
    ``s-_j >= tau_j`` iff ``#{s- >= tau_j} >= j``, the last active rank
    ``J >= P`` is found by a binary search over ranks whose steps are O(n)
    counts: no sort (step 2). Ranks ``j < P`` are not covered by that test,
    so the top ``P - 1`` negatives are always candidates. ``tau`` is lowered
    by a small relative margin so that rounding can only enlarge the
    candidate set. That selection, the compaction of the candidates (a top
    set of the negatives) and their sort are :func:`_ap_layout` (integer
    keys; ``m`` candidates, sorted keys ``sk``, input positions ``src``).

    Here the candidates are ranked in the smallest static bucket that holds
    them: the rows ``j >= P`` by one binary search per positive
    (:func:`_tail_cuts`, O(P log m)), the first ``P - 1`` rows by the exact
    divide and conquer of :func:`_opt_head_monotone`; :func:`_ap_expand`
    turns the cuts into ranks in input order (every other negative gets ``P +
    1``). The largest bucket holds all negatives (the exact fallback); inputs
    too small for a second bucket go straight to it.

    Returns:
        ``opt [n]`` int32 and ``n_above [kp]`` int32 (see :func:`_ap_expand`).
    """
    dtype = sp.dtype
    kp = sp.shape[0]

    def branch(cap):
        def run(_):
            J = _tail_cuts(sp, P, N, lambda jj: _desc_scores(sk[jj - 1], dtype), cap, m)
            num_head = min(kp - 1, cap)
            oh = jnp.full((kh,), P + 1, jnp.int32)
            if num_head > 0:
                rows = jnp.minimum(P - 1, m)
                sn_head = _desc_scores(sk[:num_head], dtype)
                if kp <= _DENSE_HEAD_MAX_KP:
                    # Algorithm 1 on these rows: O(P^2), a much smaller program
                    # than the divide and conquer, and as fast for small P.
                    head = _opt_greedy(sp, P, N, sn_head, rows)
                    j = jnp.arange(1, num_head + 1, dtype=jnp.int32)
                    head = jnp.where(j <= rows, head, P + 1)
                else:
                    head = _opt_head_monotone(sp, P, N, sn_head, rows)
                oh = oh.at[:num_head].set(head)
            return J, oh

        return run

    if len(caps) == 1:  # small inputs: a conditional costs more than it saves
        J, oh = branch(caps[0])(None)
    else:
        bucket = jnp.searchsorted(jnp.asarray(caps), m)
        J, oh = lax.switch(bucket, [branch(c) for c in caps], None)
    return _ap_expand(J, oh, m, src, neg_valid, P, N, kp=kp)


@functools.partial(jax.jit, static_argnames=("kp", "method"))
def ap_most_violated_masked(scores, pos_valid, neg_valid, *, kp, method="select"):
    """Jitted AP inference on a masked layout (building block of the solvers).

    Args:
        scores: ``[n]`` float scores.
        pos_valid: ``[n]`` bool mask of the positives taking part.
        neg_valid: ``[n]`` bool mask of the negatives taking part.
        kp: static int, an upper bound on ``pos_valid.sum()``. Positives beyond
            ``kp`` are silently dropped, so callers must pass a true bound.
        method: static, one of ``"greedy"``, ``"search"``, ``"select"``.

    Returns:
        :class:`Violation`.
    """
    loss, coef, rank = _ap_core(scores, pos_valid, neg_valid, kp, method)
    return _finish(loss, coef, scores, rank)


@functools.partial(jax.jit, static_argnames=("kp", "method"))
def ap_oracle(scores, positive, where, *, kp, method="select"):
    r"""AP loss-augmented inference on one list: the oracle of the AP-SVM model.

    The pure, unvalidated kernel behind :func:`ap_most_violated`, in the
    oracle form of the structured-model interface (use it in the ``oracle``
    of a model of your own). Solves eq. (4) of Mohapatra et al. (2014) for
    the items with ``where``.

    Args:
        scores: ``[n]`` float scores ``s_k = w^T psi(x_k)``.
        positive: ``[n]`` bool, True for positives.
        where: ``[n]`` bool, the items that take part.
        kp: static int, an upper bound on the number of positives with
            ``where``; positives beyond it are dropped, so pass a true bound
            (smaller is faster: the delta tables are ``kp`` wide).
        method: static, ``"greedy"`` (Alg. 1), ``"search"`` (Alg. 2) or
            ``"select"`` (Alg. 3); all exact.

    Returns:
        :class:`Violation` (``aux`` = interleaving ranks ``[n]`` int32). A
        list without a positive or without a negative gives zeros.

    Raises:
        ValueError / TypeError: (at trace time) ``scores`` not ``[n]`` float32 or
            float64, ``positive`` or ``where`` of another shape.

    On CPU, for ``n >= 512``, the sorting and selection run as jaxrank's
    native kernels (``rank.c``, XLA FFI calls; without the compiled library,
    NumPy host kernels from ``n >= 8192``); the float work stays in XLA, and
    the results are bitwise equal to the pure-XLA path that GPU/TPU run.
    ``vmap`` batches the host kernels into one call per batch.

    References:
        Yue et al., SIGIR 2007 (Algorithm 1); Mohapatra, Jawahar, Kumar,
        NIPS 2014 (eqs. (4)-(5), Algorithms 2-3).
    """
    validation.check_oracle_args("ap_oracle", scores, positive, where)
    return ap_most_violated_masked(scores, positive & where, ~positive & where, kp=kp,
                                   method=method)


def _finish(loss, coef, scores, rank):
    # sum(g) = 0, so centring the scores does not change s @ g but reduces
    # cancellation when the scores share a large offset.
    active = coef != 0
    ref = jnp.sum(jnp.where(active, scores, 0)) / jnp.maximum(jnp.sum(active), 1)
    hinge = loss - jnp.dot(scores - ref, coef)
    return Violation(loss=loss, coef=coef, aux=rank, hinge=hinge)


def _check_method(method):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}.")


def ap_most_violated(scores, labels, *, where=None, method="select"):
    r"""Most-violated ranking of the AP-SVM (AP loss-augmented inference).

    Solves eq. (4) of Mohapatra et al. (2014),
    :math:`\hat R = \arg\max_R \Delta(R^*, R) + w^\top\Psi(X, R)`, given the
    individual scores :math:`s_k = w^\top\psi(x_k)`, with the joint feature
    vector of eq. (1) (normalised by :math:`1/(|P||N|)`) and
    :math:`\Delta = 1 - \mathrm{AP}`. All methods are exact:

    * ``"greedy"``: Algorithm 1 (Yue et al. 2007), dense ``delta_j(i)`` table,
      ``O(|P| |N|)`` after sorting.
    * ``"search"``: Algorithm 2, batched binary search on the unimodal
      ``delta_j`` for ``j >= |P|``, linear scan for the first ``|P| - 1``
      negatives: ``O(|P|^2 + |N| log |P|)``.
    * ``"select"``: Algorithm 3, selective ranking: only the active negatives
      (``opt_j <= |P|``) are sorted and ranked; found without sorting by a
      binary search over ranks with O(n) counts; the first ``|P| - 1`` rows
      use an exact divide and conquer on the monotonicity of ``opt_j``, and
      the rows ``j >= |P|`` one binary search per positive (``O(|P| log |N|)``).

    ``opt_j`` ranges over ``{1, ..., |P|+1}`` with ``delta_j(|P|+1) = 0``;
    argmax ties go to the smallest rank. The increments ``delta_j(i) -
    delta_j(i+1)`` use their closed form (no harmonic numbers), ``delta`` is
    their suffix sum. In float64 the three methods return identical results;
    in float32, where two ``delta`` values tie within rounding, they may pick
    adjacent ranks with the same objective (``hinge``) up to rounding.

    Args:
        scores: ``[..., n]`` float array of individual scores ``w^T psi(x_k)``.
        labels: ``[..., n]`` array, ``label > 0`` marks the positives
            (``{0, 1}``, ``{-1, 1}`` or bool).
        where: optional ``[..., n]`` bool mask; ``False`` items take no part.
        method: ``"greedy"``, ``"search"`` or ``"select"`` (static).

    Returns:
        :class:`Violation` with ``loss [...]``, ``coef [..., n]``,
        ``hinge [...]`` and ``interleaving_rank [..., n]`` (int32).
        Under ``jit`` a list without both classes gives zeros, and a list
        with a NaN score or a NaN or non-binary label (among the items of
        ``where``) gives NaN ``loss``, ``hinge`` and ``coef``. Scores outside
        ``where`` are ignored (NaN allowed there).

    Raises:
        ValueError: unknown ``method``; mismatched shapes or scalar scores;
            and, for concrete inputs, empty or non-finite scores, non-binary
            labels, a list without a positive or without a negative.
        TypeError: (eagerly and at trace time) scores that are not float32
            or float64 (complex, bool, integer, float16, bfloat16), complex
            or non-numeric labels, a non-bool ``where``.

    References:
        Yue, Finley, Radlinski, Joachims, SIGIR 2007 (Algorithm 1);
        Mohapatra, Jawahar, Kumar, NIPS 2014 (Algorithms 2 and 3, eq. (5)).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxrank.inference import ap_most_violated
        >>> r = ap_most_violated(jnp.array([2., 0., 1.]), jnp.array([1, 1, 0]))
        >>> r.interleaving_rank.tolist()
        [0, 0, 2]
    """
    _check_method(method)
    scores, positive, valid, kp = _layout(scores, labels, where, "ap_most_violated")
    fn = functools.partial(ap_most_violated_masked, kp=kp, method=method)
    raw, scores = scores, _masked_scores(scores, valid)
    batch = scores.shape[:-1]
    if batch:
        n = scores.shape[-1]
        out = jax.vmap(fn)(
            scores.reshape(-1, n),
            (positive & valid).reshape(-1, n),
            (~positive & valid).reshape(-1, n),
        )
        out = jax.tree_util.tree_map(lambda x: x.reshape(batch + x.shape[1:]), out)
    else:
        out = fn(scores, positive & valid, ~positive & valid)
    return _nan_if_nan_scores(out, raw, jnp.broadcast_to(valid, raw.shape))
