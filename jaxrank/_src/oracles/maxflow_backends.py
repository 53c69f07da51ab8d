"""Max-flow back-ends besides the built-in C kernel: a Python port of it, OR-tools, PyMaxflow."""

from __future__ import annotations

import numpy as np


def _score_changes(d, tails, heads, w, base, labs):
    """``S(labs[k]) - S(base)`` for rows ``labs [r, n]`` (float64, exact sums)."""
    diff = labs.astype(np.int64) - base.astype(np.int64)[None]
    cut0 = (base[tails] != base[heads]).astype(np.int64)
    cut1 = (labs[:, tails] != labs[:, heads]).astype(np.int64)
    return diff @ d - (cut1 - cut0[None]) @ w


class _PyBK:
    """Pure-Python port of ``_maxflow.c`` (same algorithm, same journal)."""

    TERMINAL, ORPHAN, FREE = -1, -2, -3

    def __init__(self, d, tails, heads, w):
        n, m = d.shape[0], tails.shape[0]
        self.n = n
        deg = np.bincount(np.r_[tails, heads], minlength=n)
        first = np.r_[0, np.cumsum(deg)]
        fill = first[:-1].copy()
        head = np.zeros(2 * m, np.int64)
        sister = np.zeros(2 * m, np.int64)
        w0 = np.zeros(2 * m)
        for e in range(m):
            a, b = fill[tails[e]], fill[heads[e]]
            fill[tails[e]] += 1
            fill[heads[e]] += 1
            head[a], head[b] = heads[e], tails[e]
            sister[a], sister[b] = b, a
            w0[a] = w0[b] = w[e]
        self.first = first.tolist()
        self.head, self.sister, self.w0 = head.tolist(), sister.tolist(), w0.tolist()
        self.d = [float(x) for x in d]
        self.journal = False

    def fresh(self):
        n = self.n
        self.rcap = list(self.w0)
        self.tr = list(self.d)
        self.parent = [self.FREE] * n
        self.sink = [0] * n
        self.dist = [1] * n
        self.ts = [0] * n
        self.time = 0
        self.queue, self.inq, self.orph = [], [False] * n, []
        self.qh = 0
        for k in range(n):
            if self.tr[k] != 0:
                self.parent[k] = self.TERMINAL
                self.sink[k] = int(self.tr[k] < 0)
                self.active(k)

    # journal of first writes
    def jnode(self, k):
        if self.journal and k not in self.nlog:
            self.nlog[k] = (self.tr[k], self.parent[k], self.sink[k], self.dist[k], self.ts[k])

    def jarc(self, a):
        if self.journal and a not in self.alog:
            self.alog[a] = self.rcap[a]

    def undo(self):
        for a, v in self.alog.items():
            self.rcap[a] = v
        for k, (tr, par, s, dd, t) in self.nlog.items():
            self.tr[k], self.parent[k], self.sink[k], self.dist[k], self.ts[k] = tr, par, s, dd, t
        self.alog, self.nlog = {}, {}

    def active(self, k):
        if not self.inq[k]:
            self.inq[k] = True
            self.queue.append(k)

    def next_active(self):
        while self.qh < len(self.queue):
            k = self.queue[self.qh]
            self.qh += 1
            self.inq[k] = False
            if self.parent[k] != self.FREE:
                return k
        self.queue, self.qh = [], 0
        return -1

    def orphan(self, k):
        self.jnode(k)
        self.parent[k] = self.ORPHAN
        self.orph.append(k)

    def push(self, a, b):
        self.jarc(a)
        self.jarc(self.sister[a])
        self.rcap[a] -= b
        self.rcap[self.sister[a]] += b

    def augment(self, mid):
        head, sister, parent, rcap = self.head, self.sister, self.parent, self.rcap
        tail, hd = head[sister[mid]], head[mid]
        b = rcap[mid]
        k = tail
        while parent[k] != self.TERMINAL:
            b = min(b, rcap[sister[parent[k]]])
            k = head[parent[k]]
        b = min(b, self.tr[k])
        k = hd
        while parent[k] != self.TERMINAL:
            b = min(b, rcap[parent[k]])
            k = head[parent[k]]
        b = min(b, -self.tr[k])
        self.push(mid, b)
        k = tail
        while True:
            e = parent[k]
            if e == self.TERMINAL:
                self.jnode(k)
                self.tr[k] -= b
                if self.tr[k] == 0:
                    self.orphan(k)
                break
            self.push(sister[e], b)
            if rcap[sister[e]] == 0:
                self.orphan(k)
            k = head[e]
        k = hd
        while True:
            e = parent[k]
            if e == self.TERMINAL:
                self.jnode(k)
                self.tr[k] += b
                if self.tr[k] == 0:
                    self.orphan(k)
                break
            self.push(e, b)
            if rcap[e] == 0:
                self.orphan(k)
            k = head[e]

    def origin(self, j):
        dd = 0
        while True:
            if self.ts[j] == self.time:
                return dd + self.dist[j]
            e = self.parent[j]
            dd += 1
            if e == self.TERMINAL:
                self.jnode(j)
                self.ts[j], self.dist[j] = self.time, 1
                return dd
            if e in (self.ORPHAN, self.FREE):
                return None
            j = self.head[e]

    def mark(self, j, dd):
        while self.ts[j] != self.time:
            self.jnode(j)
            self.ts[j], self.dist[j] = self.time, dd
            dd -= 1
            j = self.head[self.parent[j]]

    def adopt(self):
        head, sister, parent, rcap = self.head, self.sister, self.parent, self.rcap
        while self.orph:
            k = self.orph.pop()
            s = self.sink[k]
            best, dmin = None, None
            for a in range(self.first[k], self.first[k + 1]):
                j = head[a]
                if self.sink[j] != s or parent[j] == self.FREE:
                    continue
                if (rcap[a] if s else rcap[sister[a]]) <= 0:
                    continue
                dj = self.origin(j)
                if dj is not None:
                    if dmin is None or dj < dmin:
                        best, dmin = a, dj
                    self.mark(j, dj)
            self.jnode(k)
            if best is not None:
                parent[k], self.ts[k], self.dist[k] = best, self.time, dmin + 1
                continue
            for a in range(self.first[k], self.first[k + 1]):
                j = head[a]
                e = parent[j]
                if self.sink[j] != s or e == self.FREE:
                    continue
                if (rcap[a] if s else rcap[sister[a]]) > 0:
                    self.active(j)
                if e not in (self.TERMINAL, self.ORPHAN) and head[e] == k:
                    self.orphan(j)
            parent[k] = self.FREE

    def set_tree(self, j, s, arc, frm):
        self.jnode(j)
        self.sink[j], self.parent[j] = s, arc
        self.ts[j], self.dist[j] = self.ts[frm], self.dist[frm] + 1

    def run(self):
        head, sister, parent, rcap = self.head, self.sister, self.parent, self.rcap
        while True:
            i = self.next_active()
            if i < 0:
                return
            mid = -1
            src = not self.sink[i]
            for a in range(self.first[i], self.first[i + 1]):
                if (rcap[a] if src else rcap[sister[a]]) <= 0:
                    continue
                j = head[a]
                if parent[j] == self.FREE:
                    self.set_tree(j, int(not src), sister[a], i)
                    self.active(j)
                elif self.sink[j] == src:  # other tree
                    mid = a if src else sister[a]
                    break
                elif self.ts[j] <= self.ts[i] and self.dist[j] > self.dist[i]:
                    self.set_tree(j, int(not src), sister[a], i)
            if mid >= 0:
                self.time += 1
                self.augment(mid)
                self.adopt()
                if parent[i] != self.FREE:
                    self.active(i)

    def labels(self):
        return np.array([int(p != self.FREE and not s) for p, s in zip(self.parent, self.sink)],
                        np.int8)

    def clamp(self, k, side):
        if self.parent[k] != self.FREE:
            s = self.sink[k]
            for a in range(self.first[k], self.first[k + 1]):
                j = self.head[a]
                if self.sink[j] == s and self.parent[j] == self.sister[a]:
                    self.orphan(j)
        self.jnode(k)
        self.tr[k] = np.inf if side else -np.inf
        self.parent[k], self.sink[k] = self.TERMINAL, int(not side)
        self.time += 1
        self.ts[k], self.dist[k] = self.time, 1
        self.adopt()
        self.active(k)


def _cut_python(d, tails, heads, w, mode, want_labels):
    n = d.shape[0]
    g = _PyBK(d, tails, heads, w)
    g.fresh()
    g.run()
    mp = g.labels()
    if mode == 0:
        return mp, np.zeros(0), None
    labs = np.repeat(mp[None], n, axis=0)
    for k in range(n):
        if mode == 1:
            g.journal, g.alog, g.nlog = True, {}, {}
            g.clamp(k, 1 - int(mp[k]))
            g.run()
            for j in g.nlog:
                labs[k, j] = int(g.parent[j] != g.FREE and not g.sink[j])
            g.undo()
            g.journal = False
        else:
            g.fresh()
            g.tr[k] = np.inf if mp[k] == 0 else -np.inf
            g.parent[k], g.sink[k] = g.TERMINAL, int(mp[k])
            g.active(k)
            g.run()
            labs[k] = g.labels()
    delta = _score_changes(d, tails, heads, w, mp, labs)
    return mp, delta, labs if want_labels else None


def _int_caps(d, w):
    """int64 capacities ``round(c * 2^k)``: sum of all below ``2^60`` (module docstring)."""
    total = float(np.sum(np.abs(d)) + 2 * np.sum(w))
    k = int(np.floor(np.log2(2.0**60 / max(total, 1e-300))))
    k = min(k, 1000)
    scale = 2.0**k
    return np.round(d * scale).astype(np.int64), np.round(w * scale).astype(np.int64)


def _cut_ortools(d, tails, heads, w, mode, want_labels):
    try:
        from ortools.graph.python import max_flow
    except ImportError:  # pragma: no cover - optional
        raise ImportError("method='ortools' needs OR-tools: pip install ortools (or jaxrank[ortools])") from None
    n = d.shape[0]
    di, wi = _int_caps(d, w)
    big = np.int64(2**62)
    s, t = n, n + 1

    def solve(clamp=None):
        f = max_flow.SimpleMaxFlow()
        src = np.where(di > 0, di, 0)
        snk = np.where(di < 0, -di, 0)
        if clamp is not None:
            k, side = clamp
            src, snk = src.copy(), snk.copy()
            if side:
                src[k] = big
            else:
                snk[k] = big
        nodes = np.arange(n)
        tl = np.r_[tails, heads, np.full(n, s), nodes].astype(np.int32)
        hd = np.r_[heads, tails, nodes, np.full(n, t)].astype(np.int32)
        cap = np.r_[wi, wi, src, snk].astype(np.int64)
        f.add_arcs_with_capacity(tl, hd, cap)
        if f.solve(s, t) != f.OPTIMAL:  # pragma: no cover
            raise RuntimeError("OR-tools max-flow did not solve the cut.")
        lab = np.zeros(n, np.int8)
        side_s = np.asarray(f.get_source_side_min_cut(), np.int64)
        lab[side_s[side_s < n]] = 1
        return lab

    mp = solve()
    if mode == 0:
        return mp, np.zeros(0), None
    labs = np.stack([solve((k, 1 - int(mp[k]))) for k in range(n)])
    delta = _score_changes(d, tails, heads, w, mp, labs)
    return mp, delta, labs if want_labels else None


def _cut_pymaxflow(d, tails, heads, w, mode, want_labels):
    try:
        import maxflow  # PyMaxflow (GPL): only when asked for
    except ImportError:  # pragma: no cover - optional
        raise ImportError("method='pymaxflow' needs PyMaxflow (GPL-licensed, not a "
                          "jaxrank dependency): pip install PyMaxflow") from None
    n = d.shape[0]
    big = float(np.sum(np.abs(d)) + 2 * np.sum(w) + 1.0)

    def solve(clamp=None):
        g = maxflow.Graph[float](n, tails.shape[0])
        ids = g.add_nodes(n)
        if tails.shape[0]:
            g.add_edges(tails, heads, w, w)
        src = np.where(d > 0, d, 0.0)
        snk = np.where(d < 0, -d, 0.0)
        if clamp is not None:
            k, side = clamp
            src, snk = src.copy(), snk.copy()
            if side:
                src[k] = big
            else:
                snk[k] = big
        g.add_grid_tedges(ids, src, snk)
        g.maxflow()
        return (~g.get_grid_segments(ids)).astype(np.int8)

    mp = solve()
    if mode == 0:
        return mp, np.zeros(0), None
    labs = np.stack([solve((k, 1 - int(mp[k]))) for k in range(n)])
    delta = _score_changes(d, tails, heads, w, mp, labs)
    return mp, delta, labs if want_labels else None
