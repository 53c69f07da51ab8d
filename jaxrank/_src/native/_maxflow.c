/*
 * Max-marginals of a binary pairwise score by graph cuts: a Boykov-Kolmogorov
 * max-flow with search-tree reuse between the clamped cuts (Kohli & Torr).
 *
 * Part of jaxrank (MIT licence). Written for jaxrank from the published
 * algorithm descriptions:
 *   Y. Boykov, V. Kolmogorov, "An experimental comparison of min-cut/max-flow
 *   algorithms for energy minimization in vision", PAMI 26(9), 2004 (growth,
 *   augmentation and adoption stages; the distance/timestamp heuristic);
 *   P. Kohli, P. Torr, "Measuring uncertainty in graph cut solutions -
 *   efficiently computing min-marginal energies using dynamic graph cuts",
 *   ECCV 2006, and "Dynamic graph cuts for efficient inference in Markov
 *   random fields", PAMI 2007 (clamping a node in the residual graph of the
 *   optimal flow, reusing flow and search trees, then restoring).
 *
 * Problem. Labels y in {0,1}^n, score
 *     S(y) = sum_k (u0_k + y_k d_k) - sum_e w_e [y_a(e) != y_b(e)],  w_e >= 0
 * (d_k = u1_k - u0_k). Maximising S is a minimum s-t cut: node k on the
 * source side <=> y_k = 1; residual terminal capacity tr_k = d_k (> 0: from
 * the source, < 0: to the sink); an edge gives two arcs of capacity w_e.
 *
 * For every node k, the max-marginal of the label other than its MAP label
 * is obtained by clamping k (terminal capacity +inf or -inf) in the residual
 * graph of the MAP flow, continuing the max-flow with the MAP's search trees,
 * reading the new cut, and undoing every change (a journal of first writes),
 * so that each clamp costs the size of the region it touches. Values are
 * exact score differences of the labelings (sums over the changed nodes and
 * their edges), not differences of flow values.
 *
 * Python entry point (buffers are C-contiguous NumPy arrays):
 *     _maxflow.max_marginals(d, tails, heads, w, map_out, delta_out,
 *                            labels_out, mode) -> number of augmentations
 *   d        float64 [n]   unary differences u1 - u0
 *   tails    int32   [m]   edge end points (0 <= tails, heads < n, no loops)
 *   heads    int32   [m]
 *   w        float64 [m]   edge weights >= 0 (the score subtracts them when cut)
 *   map_out  int8    [n]   out: a MAP labeling
 *   delta_out float64 [n]  out: S(best labeling with y_k flipped) - S(MAP) <= 0
 *                          (unused with mode 0)
 *   labels_out int8 [n*n] or [0]: out: row k = that labeling (mode 1, 2)
 *   mode     0: MAP only; 1: max-marginals with tree reuse; 2: max-marginals,
 *            every clamped cut from scratch (no reuse; for comparison)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TERMINAL (-1)
#define ORPHAN (-2)
#define FREE (-3)
#define DINF 1000000000

typedef struct {
    int n, na;          /* nodes, arcs (2 per edge) */
    int *first;         /* [n + 1] CSR offsets of the arcs leaving each node */
    int *head;          /* [na] */
    int *sister;        /* [na] reverse arc */
    double *w0;         /* [na] original capacity */
    double *rcap;       /* [na] residual capacity */
    double *tr;         /* [n] residual terminal capacity (> 0 source, < 0 sink) */
    double *d;          /* [n] original terminal capacity */
    int *parent;        /* [n] arc to the parent, TERMINAL, ORPHAN or FREE */
    char *sink;         /* [n] 1: in the sink tree */
    int *dist, *ts;     /* [n] distance heuristic and its timestamp */
    int time;
    int *q, qh, qn;     /* FIFO of active nodes (circular, capacity n) */
    char *inq;
    int *orph, norph;   /* orphan stack (capacity n) */
    long long augmentations;
    /* journal of first writes during one clamped cut */
    int journal, stamp;
    int *astamp, *nstamp;
    int *alog, nalog;
    double *alog_cap;
    int *nlog, nnlog;
    double *nlog_tr;
    int *nlog_parent, *nlog_dist, *nlog_ts;
    char *nlog_sink;
} Graph;

static void jnode(Graph *g, int k) {
    if (g->journal && g->nstamp[k] != g->stamp) {
        g->nstamp[k] = g->stamp;
        g->nlog[g->nnlog] = k;
        g->nlog_tr[g->nnlog] = g->tr[k];
        g->nlog_parent[g->nnlog] = g->parent[k];
        g->nlog_sink[g->nnlog] = g->sink[k];
        g->nlog_dist[g->nnlog] = g->dist[k];
        g->nlog_ts[g->nnlog] = g->ts[k];
        g->nnlog++;
    }
}

static void jarc(Graph *g, int a) {
    if (g->journal && g->astamp[a] != g->stamp) {
        g->astamp[a] = g->stamp;
        g->alog[g->nalog] = a;
        g->alog_cap[g->nalog] = g->rcap[a];
        g->nalog++;
    }
}

static void set_active(Graph *g, int k) {
    if (!g->inq[k]) {
        g->inq[k] = 1;
        g->q[(g->qh + g->qn) % g->n] = k;
        g->qn++;
    }
}

static int next_active(Graph *g) {
    while (g->qn > 0) {
        int k = g->q[g->qh];
        g->qh = (g->qh + 1) % g->n;
        g->qn--;
        g->inq[k] = 0;
        if (g->parent[k] != FREE) return k;
    }
    return -1;
}

static void make_orphan(Graph *g, int k) {
    jnode(g, k);
    g->parent[k] = ORPHAN;
    g->orph[g->norph++] = k;
}

static void push_arc(Graph *g, int a, double b) {
    jarc(g, a);
    jarc(g, g->sister[a]);
    g->rcap[a] -= b;
    g->rcap[g->sister[a]] += b;
}

static void augment(Graph *g, int mid) {
    int tail = g->head[g->sister[mid]], hd = g->head[mid], k, e;
    double b = g->rcap[mid];
    for (k = tail; g->parent[k] != TERMINAL; k = g->head[g->parent[k]]) {
        e = g->sister[g->parent[k]];
        if (g->rcap[e] < b) b = g->rcap[e];
    }
    if (g->tr[k] < b) b = g->tr[k];
    for (k = hd; g->parent[k] != TERMINAL; k = g->head[g->parent[k]]) {
        e = g->parent[k];
        if (g->rcap[e] < b) b = g->rcap[e];
    }
    if (-g->tr[k] < b) b = -g->tr[k];
    push_arc(g, mid, b);
    for (k = tail;;) {
        e = g->parent[k];
        if (e == TERMINAL) {
            jnode(g, k);
            g->tr[k] -= b;
            if (g->tr[k] == 0) make_orphan(g, k);
            break;
        }
        push_arc(g, g->sister[e], b);
        if (g->rcap[g->sister[e]] == 0) make_orphan(g, k);
        k = g->head[e];
    }
    for (k = hd;;) {
        e = g->parent[k];
        if (e == TERMINAL) {
            jnode(g, k);
            g->tr[k] += b;
            if (g->tr[k] == 0) make_orphan(g, k);
            break;
        }
        push_arc(g, e, b);
        if (g->rcap[e] == 0) make_orphan(g, k);
        k = g->head[e];
    }
    g->augmentations++;
}

/* Distance of j to its terminal through parents (DINF if it hangs on an orphan). */
static int origin_dist(Graph *g, int j) {
    int d = 0, e;
    for (;;) {
        if (g->ts[j] == g->time) return d + g->dist[j];
        e = g->parent[j];
        d++;
        if (e == TERMINAL) {
            jnode(g, j);
            g->ts[j] = g->time;
            g->dist[j] = 1;
            return d;
        }
        if (e == ORPHAN || e == FREE) return DINF;
        j = g->head[e];
    }
}

static void mark_path(Graph *g, int j, int d) {
    while (g->ts[j] != g->time) {
        jnode(g, j);
        g->ts[j] = g->time;
        g->dist[j] = d--;
        j = g->head[g->parent[j]];
    }
}

static void adopt(Graph *g) {
    while (g->norph > 0) {
        int k = g->orph[--g->norph], a, j, best = FREE, dmin = DINF, dj, e;
        int s = g->sink[k];
        for (a = g->first[k]; a < g->first[k + 1]; a++) {
            j = g->head[a];
            if (g->sink[j] != s || g->parent[j] == FREE) continue;
            if ((s ? g->rcap[a] : g->rcap[g->sister[a]]) <= 0) continue;
            dj = origin_dist(g, j);
            if (dj < DINF) {
                if (dj < dmin) {
                    best = a;
                    dmin = dj;
                }
                mark_path(g, j, dj);
            }
        }
        jnode(g, k);
        if (best != FREE) {
            g->parent[k] = best;
            g->ts[k] = g->time;
            g->dist[k] = dmin + 1;
            continue;
        }
        for (a = g->first[k]; a < g->first[k + 1]; a++) {
            j = g->head[a];
            e = g->parent[j];
            if (g->sink[j] != s || e == FREE) continue;
            if ((s ? g->rcap[a] : g->rcap[g->sister[a]]) > 0) set_active(g, j);
            if (e != TERMINAL && e != ORPHAN && g->head[e] == k) make_orphan(g, j);
        }
        g->parent[k] = FREE;
    }
}

static void set_tree(Graph *g, int j, int s, int arc, int from) {
    jnode(g, j);
    g->sink[j] = (char)s;
    g->parent[j] = arc;
    g->ts[j] = g->ts[from];
    g->dist[j] = g->dist[from] + 1;
}

static void run(Graph *g) {
    int i, a, j, mid;
    while ((i = next_active(g)) >= 0) {
        mid = -1;
        if (!g->sink[i]) {
            for (a = g->first[i]; a < g->first[i + 1]; a++) {
                if (g->rcap[a] <= 0) continue;
                j = g->head[a];
                if (g->parent[j] == FREE) {
                    set_tree(g, j, 0, g->sister[a], i);
                    set_active(g, j);
                } else if (g->sink[j]) {
                    mid = a;
                    break;
                } else if (g->ts[j] <= g->ts[i] && g->dist[j] > g->dist[i]) {
                    set_tree(g, j, 0, g->sister[a], i);
                }
            }
        } else {
            for (a = g->first[i]; a < g->first[i + 1]; a++) {
                if (g->rcap[g->sister[a]] <= 0) continue;
                j = g->head[a];
                if (g->parent[j] == FREE) {
                    set_tree(g, j, 1, g->sister[a], i);
                    set_active(g, j);
                } else if (!g->sink[j]) {
                    mid = g->sister[a];
                    break;
                } else if (g->ts[j] <= g->ts[i] && g->dist[j] > g->dist[i]) {
                    set_tree(g, j, 1, g->sister[a], i);
                }
            }
        }
        if (mid >= 0) {
            g->time++;
            augment(g, mid);
            adopt(g);
            if (g->parent[i] != FREE) set_active(g, i);
        }
    }
}

static void fresh_start(Graph *g) {
    int k;
    memcpy(g->rcap, g->w0, sizeof(double) * (size_t)g->na);
    memcpy(g->tr, g->d, sizeof(double) * (size_t)g->n);
    g->qh = g->qn = 0;
    g->norph = 0;
    g->time = 0;
    for (k = 0; k < g->n; k++) {
        g->inq[k] = 0;
        g->ts[k] = 0;
        g->dist[k] = 1;
        if (g->tr[k] > 0) {
            g->parent[k] = TERMINAL;
            g->sink[k] = 0;
            set_active(g, k);
        } else if (g->tr[k] < 0) {
            g->parent[k] = TERMINAL;
            g->sink[k] = 1;
            set_active(g, k);
        } else {
            g->parent[k] = FREE;
            g->sink[k] = 0;
        }
    }
}

static char label_of(const Graph *g, int k) {
    return (char)(g->parent[k] != FREE && !g->sink[k]);
}

/* Turn k into a root of the tree of `side` (1: source, label 1) with infinite
 * terminal capacity: its children in its old tree become orphans. */
static void clamp(Graph *g, int k, int side) {
    int a, j;
    if (g->parent[k] != FREE) {
        int s = g->sink[k];
        for (a = g->first[k]; a < g->first[k + 1]; a++) {
            j = g->head[a];
            if (g->sink[j] == s && g->parent[j] == g->sister[a]) make_orphan(g, j);
        }
    }
    jnode(g, k);
    g->tr[k] = side ? INFINITY : -INFINITY;
    g->parent[k] = TERMINAL;
    g->sink[k] = (char)!side;
    g->time++;
    g->ts[k] = g->time;
    g->dist[k] = 1;
    adopt(g);
    set_active(g, k);
}

/* S(lab') - S(lab) over the nodes in `changed` (flags set in mark). */
static double score_change(const Graph *g, const char *lab, const char *lab2,
                           const int *changed, int nc, const char *mark) {
    double delta = 0;
    int c, k, a, j;
    for (c = 0; c < nc; c++) {
        k = changed[c];
        delta += (double)(lab2[k] - lab[k]) * g->d[k];
        for (a = g->first[k]; a < g->first[k + 1]; a++) {
            j = g->head[a];
            if (mark[j] && j < k) continue; /* counted from j */
            delta -= g->w0[a] * (double)((lab2[k] != lab2[j]) - (lab[k] != lab[j]));
        }
    }
    return delta;
}

static int build(Graph *g, int n, const int *tails, const int *heads, const double *w, int m,
                 const double *d) {
    int e, k, *fill;
    g->n = n;
    g->na = 2 * m;
#define ALLOC(p, cnt) p = calloc((size_t)(cnt) + 1, sizeof(*(p)))
    ALLOC(g->first, n + 1);
    ALLOC(g->head, g->na);
    ALLOC(g->sister, g->na);
    ALLOC(g->w0, g->na);
    ALLOC(g->rcap, g->na);
    ALLOC(g->tr, n);
    ALLOC(g->d, n);
    ALLOC(g->parent, n);
    ALLOC(g->sink, n);
    ALLOC(g->dist, n);
    ALLOC(g->ts, n);
    ALLOC(g->q, n);
    ALLOC(g->inq, n);
    ALLOC(g->orph, n);
    ALLOC(g->astamp, g->na);
    ALLOC(g->nstamp, n);
    ALLOC(g->alog, g->na);
    ALLOC(g->alog_cap, g->na);
    ALLOC(g->nlog, n);
    ALLOC(g->nlog_tr, n);
    ALLOC(g->nlog_parent, n);
    ALLOC(g->nlog_sink, n);
    ALLOC(g->nlog_dist, n);
    ALLOC(g->nlog_ts, n);
    ALLOC(fill, n);
#undef ALLOC
    if (!g->first || !g->head || !g->sister || !g->w0 || !g->rcap || !g->tr || !g->d ||
        !g->parent || !g->sink || !g->dist || !g->ts || !g->q || !g->inq || !g->orph ||
        !g->astamp || !g->nstamp || !g->alog || !g->alog_cap || !g->nlog || !g->nlog_tr ||
        !g->nlog_parent || !g->nlog_sink || !g->nlog_dist || !g->nlog_ts || !fill) {
        free(fill);
        return -1;
    }
    for (e = 0; e < m; e++) {
        g->first[tails[e] + 1]++;
        g->first[heads[e] + 1]++;
    }
    for (k = 0; k < n; k++) g->first[k + 1] += g->first[k];
    for (k = 0; k < n; k++) fill[k] = g->first[k];
    for (e = 0; e < m; e++) {
        int a = fill[tails[e]]++, b = fill[heads[e]]++;
        g->head[a] = heads[e];
        g->head[b] = tails[e];
        g->sister[a] = b;
        g->sister[b] = a;
        g->w0[a] = g->w0[b] = w[e];
    }
    free(fill);
    memcpy(g->d, d, sizeof(double) * (size_t)n);
    for (k = 0; k < n; k++) g->nstamp[k] = -1;
    for (e = 0; e < g->na; e++) g->astamp[e] = -1;
    return 0;
}

static void destroy(Graph *g) {
    free(g->first); free(g->head); free(g->sister); free(g->w0); free(g->rcap);
    free(g->tr); free(g->d); free(g->parent); free(g->sink); free(g->dist); free(g->ts);
    free(g->q); free(g->inq); free(g->orph); free(g->astamp); free(g->nstamp);
    free(g->alog); free(g->alog_cap); free(g->nlog); free(g->nlog_tr);
    free(g->nlog_parent); free(g->nlog_sink); free(g->nlog_dist); free(g->nlog_ts);
}

static void undo(Graph *g) {
    int c;
    for (c = g->nalog - 1; c >= 0; c--) g->rcap[g->alog[c]] = g->alog_cap[c];
    for (c = g->nnlog - 1; c >= 0; c--) {
        int k = g->nlog[c];
        g->tr[k] = g->nlog_tr[c];
        g->parent[k] = g->nlog_parent[c];
        g->sink[k] = g->nlog_sink[c];
        g->dist[k] = g->nlog_dist[c];
        g->ts[k] = g->nlog_ts[c];
    }
    g->nalog = g->nnlog = 0;
}

static long long solve(int n, const int *tails, const int *heads, const double *w, int m,
                       const double *d, char *map_out, double *delta_out, char *labels_out,
                       int mode, int *err) {
    Graph g;
    int k, c;
    char *lab2 = NULL, *mark = NULL;
    int *changed = NULL;
    long long aug;
    memset(&g, 0, sizeof(g));
    *err = 0;
    if (n == 0) return 0;
    if (build(&g, n, tails, heads, w, m, d) != 0) {
        destroy(&g);
        *err = 1;
        return 0;
    }
    fresh_start(&g);
    run(&g);
    for (k = 0; k < n; k++) map_out[k] = label_of(&g, k);
    if (mode == 0) {
        aug = g.augmentations;
        destroy(&g);
        return aug;
    }
    lab2 = calloc((size_t)n, 1);
    mark = calloc((size_t)n, 1);
    changed = calloc((size_t)n, sizeof(int));
    if (!lab2 || !mark || !changed) {
        free(lab2); free(mark); free(changed); destroy(&g);
        *err = 1;
        return 0;
    }
    memcpy(lab2, map_out, (size_t)n);
    for (k = 0; k < n; k++) {
        int side = !map_out[k], nc = 0;
        if (mode == 1) {
            g.journal = 1;
            g.stamp = k;
            clamp(&g, k, side);
            run(&g);
            for (c = 0; c < g.nnlog; c++) {
                int j = g.nlog[c];
                lab2[j] = label_of(&g, j);
                if (lab2[j] != map_out[j]) {
                    changed[nc++] = j;
                    mark[j] = 1;
                }
            }
        } else {
            fresh_start(&g);
            g.tr[k] = side ? INFINITY : -INFINITY;
            g.parent[k] = TERMINAL;
            g.sink[k] = (char)!side;
            set_active(&g, k);
            run(&g);
            for (c = 0; c < n; c++) {
                lab2[c] = label_of(&g, c);
                if (lab2[c] != map_out[c]) {
                    changed[nc++] = c;
                    mark[c] = 1;
                }
            }
        }
        delta_out[k] = score_change(&g, map_out, lab2, changed, nc, mark);
        if (labels_out) {
            char *row = labels_out + (size_t)k * (size_t)n;
            memcpy(row, map_out, (size_t)n);
            for (c = 0; c < nc; c++) row[changed[c]] = lab2[changed[c]];
        }
        for (c = 0; c < nc; c++) mark[changed[c]] = 0;
        if (mode == 1) {
            for (c = 0; c < g.nnlog; c++) lab2[g.nlog[c]] = map_out[g.nlog[c]];
            undo(&g);
        }
    }
    aug = g.augmentations;
    free(lab2); free(mark); free(changed);
    destroy(&g);
    return aug;
}

static int get_buf(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable,
                   const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0)
        return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes", name, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *py_max_marginals(PyObject *self, PyObject *args) {
    PyObject *od, *ot, *oh, *ow, *om, *odl, *ol;
    int mode, err = 0;
    Py_buffer bd, bt, bh, bw, bm, bdl, bl;
    Py_ssize_t n, m;
    long long aug;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOi", &od, &ot, &oh, &ow, &om, &odl, &ol, &mode))
        return NULL;
    if (get_buf(od, &bd, 8, 0, "d")) return NULL;
    if (get_buf(ot, &bt, 4, 0, "tails")) { PyBuffer_Release(&bd); return NULL; }
    if (get_buf(oh, &bh, 4, 0, "heads")) { PyBuffer_Release(&bd); PyBuffer_Release(&bt); return NULL; }
    if (get_buf(ow, &bw, 8, 0, "w")) {
        PyBuffer_Release(&bd); PyBuffer_Release(&bt); PyBuffer_Release(&bh); return NULL;
    }
    if (get_buf(om, &bm, 1, 1, "map_out")) {
        PyBuffer_Release(&bd); PyBuffer_Release(&bt); PyBuffer_Release(&bh);
        PyBuffer_Release(&bw); return NULL;
    }
    if (get_buf(odl, &bdl, 8, 1, "delta_out")) {
        PyBuffer_Release(&bd); PyBuffer_Release(&bt); PyBuffer_Release(&bh);
        PyBuffer_Release(&bw); PyBuffer_Release(&bm); return NULL;
    }
    if (get_buf(ol, &bl, 1, 1, "labels_out")) {
        PyBuffer_Release(&bd); PyBuffer_Release(&bt); PyBuffer_Release(&bh);
        PyBuffer_Release(&bw); PyBuffer_Release(&bm); PyBuffer_Release(&bdl); return NULL;
    }
    n = bd.len / 8;
    m = bt.len / 4;
    if (bh.len / 4 != m || bw.len / 8 != m || bm.len != n || (mode != 0 && bdl.len / 8 != n) ||
        (bl.len != 0 && bl.len != n * n) || mode < 0 || mode > 2 || n > 2147483647 / 2 ||
        m > 1073741823) {
        PyErr_SetString(PyExc_ValueError, "max_marginals: inconsistent buffer sizes or mode");
        err = 2;
    } else {
        const int *t = (const int *)bt.buf, *h = (const int *)bh.buf;
        Py_ssize_t e;
        for (e = 0; e < m; e++) {
            if (t[e] < 0 || t[e] >= n || h[e] < 0 || h[e] >= n || t[e] == h[e]) {
                PyErr_SetString(PyExc_ValueError, "max_marginals: bad edge end point");
                err = 2;
                break;
            }
        }
    }
    if (!err) {
        Py_BEGIN_ALLOW_THREADS
        aug = solve((int)n, (const int *)bt.buf, (const int *)bh.buf, (const double *)bw.buf,
                    (int)m, (const double *)bd.buf, (char *)bm.buf, (double *)bdl.buf,
                    bl.len ? (char *)bl.buf : NULL, mode, &err);
        Py_END_ALLOW_THREADS
        if (err) PyErr_NoMemory();
    }
    PyBuffer_Release(&bd); PyBuffer_Release(&bt); PyBuffer_Release(&bh); PyBuffer_Release(&bw);
    PyBuffer_Release(&bm); PyBuffer_Release(&bdl); PyBuffer_Release(&bl);
    if (err) return NULL;
    return PyLong_FromLongLong(aug);
}

static PyMethodDef methods[] = {
    {"max_marginals", py_max_marginals, METH_VARARGS,
     "max_marginals(d, tails, heads, w, map_out, delta_out, labels_out, mode) -> augmentations"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_maxflow",
                                    "Boykov-Kolmogorov max-flow with tree reuse (jaxrank).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__maxflow(void) { return PyModule_Create(&module); }
