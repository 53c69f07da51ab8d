"""Independent NumPy references used by the tests and benchmarks.

Nothing here imports jaxrank: these are literal transcriptions of the papers'
algorithms and brute-force definitions, written for clarity, not speed.
"""

from __future__ import annotations

import itertools

import numpy as np


def ap_of_ranking(labels_in_rank_order):
    """AP of a total order (no ties): mean over positives of precision@rank."""
    labels = np.asarray(labels_in_rank_order, bool)
    hits = np.cumsum(labels)
    ranks = np.arange(1, len(labels) + 1)
    return float(np.sum(hits[labels] / ranks[labels]) / labels.sum())


def literal_algorithm1(scores, labels):
    """Algorithm 1 of Mohapatra et al. 2014 (Yue et al. 2007), as printed.

    Sort positives and negatives separately (descending); for each negative
    j = 1..N compute delta_j(i) of eq. (5) for i = 1..P (plus delta_j(P+1) = 0)
    and take the first argmax. Returns (opt_sorted [N], pos_order, neg_order).
    """
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    pos = np.flatnonzero(labels)
    neg = np.flatnonzero(~labels)
    pos = pos[np.argsort(-scores[pos], kind="stable")]
    neg = neg[np.argsort(-scores[neg], kind="stable")]
    P, N = len(pos), len(neg)
    sp, sn = scores[pos], scores[neg]
    k = np.arange(1, P + 1)
    opt = np.empty(N, np.int64)
    for j in range(1, N + 1):
        terms = (1.0 / P) * (j / (j + k) - (j - 1) / (j + k - 1)) - 2 * (
            sp - sn[j - 1]
        ) / (P * N)
        delta = np.append(np.cumsum(terms[::-1])[::-1], 0.0)  # delta_j(1..P+1)
        opt[j - 1] = int(np.argmax(delta)) + 1
    return opt, pos, neg


def outputs_from_interleaving(scores, labels, opt, pos, neg):
    """Loss, coef and hinge of the ranking given by interleaving ranks.

    Builds the ranking explicitly (negative j just above positive opt_j) and
    evaluates 1 - AP and Psi(X,R*) - Psi(X,R) of eq. (1) term by term.
    """
    scores = np.asarray(scores, np.float64)
    P, N = len(pos), len(neg)
    order = []
    by_slot = [[] for _ in range(P + 2)]
    for jj, o in enumerate(opt):
        by_slot[o].append(neg[jj])
    for a in range(1, P + 1):
        order.extend(by_slot[a])
        order.append(pos[a - 1])
    order.extend(by_slot[P + 1])
    rank = np.empty(len(scores), np.int64)
    rank[order] = np.arange(len(order))
    labels = np.asarray(labels, bool)
    loss = 1 - ap_of_ranking(labels[order])
    coef = np.zeros(len(scores))
    for i in pos:
        for j in neg:
            r = 1.0 if rank[i] < rank[j] else -1.0
            # Psi* - Psi uses (R*_ij - R_ij)(psi_i - psi_j), R*_ij = 1.
            coef[i] += (1 - r) / (P * N)
            coef[j] -= (1 - r) / (P * N)
    return loss, coef, loss - scores @ coef


def brute_force_ap_violation(scores, labels):
    """max over all total orders R of Delta(R*,R) + w^T Psi(R) - w^T Psi(R*)."""
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    pos = np.flatnonzero(labels)
    neg = np.flatnonzero(~labels)
    P, N = len(pos), len(neg)
    diff = scores[pos][:, None] - scores[neg][None, :]
    best = -np.inf
    for perm in itertools.permutations(range(len(scores))):
        rank = np.empty(len(scores), np.int64)
        rank[list(perm)] = np.arange(len(scores))
        R = np.where(rank[pos][:, None] < rank[neg][None, :], 1.0, -1.0)
        val = 1 - ap_of_ranking(labels[list(perm)]) + ((R - 1) * diff).sum() / (P * N)
        best = max(best, val)
    return best


def average_precision_ties(scores, labels):
    """AP with tied scores as one threshold (scikit-learn's convention), O(n^2)."""
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    P = labels.sum()
    total = 0.0
    for i in np.flatnonzero(labels):
        above = scores >= scores[i]
        total += labels[above].sum() / above.sum()
    return total / P


def ap_oracle_literal(X, labels):
    """Loss-augmented inference for AP-SVM from the literal Algorithm 1.

    Returns ``oracle(w) -> (loss, a)`` with ``a = X^T g`` (float64).
    """
    X = np.asarray(X, np.float64)
    labels = np.asarray(labels, bool)

    def oracle(w):
        s = X @ w
        opt, pos, neg = literal_algorithm1(s, labels)
        loss, coef, _ = outputs_from_interleaving(s, labels, opt, pos, neg)
        return loss, X.T @ coef

    return oracle


def cutting_plane_ssvm(oracle, dim, C, *, eps=1e-9, max_iter=300):
    """Exact 1-slack cutting-plane solver (Joachims et al. 2009) with a QP.

    Solves ``min 1/2 ||w||^2 + C xi`` s.t. ``xi >= b - a^T w`` for every
    output, by adding the most violated plane and re-solving the dual QP
    ``max_alpha sum alpha_k b_k - 1/2 ||sum alpha_k a_k||^2``,
    ``alpha >= 0, sum alpha <= C`` with scipy's SLSQP. Returns
    ``(w, primal, dual)``; the optimum lies in ``[dual, primal]``.
    """
    from scipy.optimize import minimize

    A, B = [], []
    w = np.zeros(dim)
    alpha = np.zeros(0)
    dual = 0.0
    for _ in range(max_iter):
        b, a = oracle(w)
        xi_true = max(0.0, b - a @ w)
        xi_ws = max([0.0] + [bk - ak @ w for ak, bk in zip(A, B)])
        if xi_true <= xi_ws + eps:
            break
        A.append(a)
        B.append(b)
        Am, Bv = np.array(A), np.array(B)
        G = Am @ Am.T
        x0 = np.append(alpha, 0.0)
        res = minimize(
            lambda x: 0.5 * x @ G @ x - Bv @ x,
            x0,
            jac=lambda x: G @ x - Bv,
            bounds=[(0, None)] * len(B),
            constraints=[{"type": "ineq", "fun": lambda x: C - x.sum(), "jac": lambda x: -np.ones_like(x)}],
            method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        alpha = np.clip(res.x, 0, None)
        w = Am.T @ alpha
        dual = float(Bv @ alpha - 0.5 * w @ w)
    b, a = oracle(w)
    primal = 0.5 * w @ w + C * max(0.0, b - a @ w)
    return w, primal, dual
