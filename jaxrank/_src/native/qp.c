/*
 * The cached-plane QP of the 1-slack solver, solved natively on CPU, and the
 * products with the plane cache.
 *
 * Each iteration of jaxrank's solver (jaxrank/_src/solvers/qp.py, `step`)
 * re-solves the dual restricted to its cached planes, the simplex-constrained
 * QP
 *
 *     max_beta  beta . lin - 1/2 beta^T G beta,   beta >= 0,  sum(beta) = 1,
 *     lin = levels - v_other,
 *
 * (G the [k, k] Gram matrix of the cached planes, levels their offsets
 * C Delta, v_other the products of the planes with the fixed part of w), to
 * a Frank-Wolfe gap  max_t viol_t - beta . viol <= eps,  viol = lin - G beta.
 * This is the algorithm of `_solve_cached_rounds` there (its XLA form, used
 * on other platforms and when this library is missing), step for step:
 *
 *   rounds (at most max_steps), each
 *     1. a pairwise Frank-Wolfe step with exact line search, from the least
 *        violated plane in use to the most violated one (Lacoste-Julien and
 *        Jaggi, NIPS 2015, pairwise FW);
 *     2. an active-set Newton step on the support S = {beta > 0}: the KKT
 *        system (G_SS + ridge I) x_S + mu 1 = lin_S, sum(x_S) = 1, solved by
 *        Cholesky with the border eliminated, then an exact line search of
 *        the true dual towards x stopped at the first weight that reaches 0
 *        (the ratio test of an active-set method; Nocedal and Wright,
 *        Numerical Optimization, 2nd ed., Sec. 16.5).  The ridge starts at
 *        the attribute `ridge` times the largest diagonal entry of G; a
 *        failed factorisation leaves beta and multiplies it by
 *        `ridge_growth`, at most to `ridge_max` times that entry;
 *   then, if the rounds stopped above eps with every weight (the aggregate
 *   included) in the support, at most ip_steps primal-dual interior-point
 *   steps with Mehrotra's predictor-corrector (Nocedal and Wright, Alg.
 *   16.4), kept if their dual is higher.
 *
 * Arithmetic: the inputs (float32 or float64) are read into double and every
 * step is made there; beta is rounded to the input dtype once at the end.
 * The XLA form computes in the input dtype, so the two follow the same steps
 * up to rounding.
 *
 * Entry points (typed XLA FFI, C API of xla/ffi/api/c_api.h, vendored in
 * xla_ffi/): jaxrank_cached_qp (above); jaxrank_cache_rows and
 * jaxrank_cache_combine, the products of an iteration with the plane cache
 * (end of this file).  Leading batch axes (vmap with
 * vmap_method="expand_dims") broadcast: an operand axis of size 1 is shared
 * by every problem of the batch; the problems of a batch are solved in
 * parallel on XLA's CPU thread pool (par_batch, ffi_glue.h).
 *
 * Plain C99 (no Python API).
 */

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_glue.h"

typedef struct {
    int64_t k;
    const double *G; /* [k, k] */
    const double *lin; /* [k] levels - v_other */
    double *beta;    /* [k] in/out */
    /* workspace */
    double *v;       /* [k] G beta */
    double *x;       /* [k] */
    double *d;       /* [k] */
    double *rhs;     /* [2, k] */
    double *L;       /* [k, k] */
    int64_t *idx;    /* [k] */
    /* interior point */
    double *b, *s, *g, *m1, *mr, *db, *ds, *tmp, *out; /* [k] each */
    /* ridge of the Newton systems (relative to the largest diagonal entry of
     * G), its growth after a failed factorisation and its cap */
    double ridge, ridge_growth, ridge_max;
} qp_work;

static inline double dotd(const double *a, const double *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void matvec(const double *G, const double *x, double *y, int64_t k) {
    for (int64_t i = 0; i < k; i++) y[i] = dotd(G + i * k, x, k);
}

/* max(viol) - beta . viol with viol = lin - v. */
static double fw_gap(const double *beta, const double *lin, const double *v, int64_t k) {
    double top = -INFINITY, in = 0.0;
    for (int64_t i = 0; i < k; i++) {
        const double r = lin[i] - v[i];
        if (r > top) top = r;
        in += beta[i] * r;
    }
    return top - in;
}

/* In-place lower Cholesky of the n x n row-major A (stride ld); 0 on success,
 * 1 if a pivot is not positive (A not positive definite in double). */
static int cholesky(double *A, int64_t n, int64_t ld) {
    for (int64_t j = 0; j < n; j++) {
        double *rj = A + j * ld;
        double s = rj[j] - dotd(rj, rj, j);
        if (!(s > 0.0) || !isfinite(s)) return 1;
        const double l = sqrt(s);
        rj[j] = l;
        for (int64_t i = j + 1; i < n; i++) {
            double *ri = A + i * ld;
            ri[j] = (ri[j] - dotd(ri, rj, j)) / l;
        }
    }
    return 0;
}

/* Solves L L^T y = r in place (r [n]). */
static void cho_solve(const double *L, int64_t n, int64_t ld, double *r) {
    for (int64_t i = 0; i < n; i++) r[i] = (r[i] - dotd(L + i * ld, r, i)) / L[i * ld + i];
    for (int64_t i = n - 1; i >= 0; i--) {
        double s = r[i];
        for (int64_t j = i + 1; j < n; j++) s -= L[j * ld + i] * r[j];
        r[i] = s / L[i * ld + i];
    }
}

/* 1. Pairwise Frank-Wolfe step (exact line search); updates beta and v. */
static void pairwise_step(qp_work *q) {
    const int64_t k = q->k;
    const double *G = q->G;
    int64_t t = 0, a = -1;
    double vt = -INFINITY, va = INFINITY;
    for (int64_t i = 0; i < k; i++) {
        const double r = q->lin[i] - q->v[i];
        if (r > vt) { vt = r; t = i; }
        if (q->beta[i] > 0 && r < va) { va = r; a = i; }
    }
    if (a < 0 || a == t) return;
    const double denom = G[t * k + t] - 2 * G[t * k + a] + G[a * k + a];
    double gamma = denom > 0 ? (vt - va) / denom : 0.0;
    if (!(gamma > 0)) return;
    if (gamma > q->beta[a]) gamma = q->beta[a];
    q->beta[a] -= gamma;
    q->beta[t] += gamma;
    for (int64_t i = 0; i < k; i++) q->v[i] += gamma * (G[i * k + t] - G[i * k + a]);
}

/* 2. Active-set Newton step on the support; returns 0 if the factorisation
 * failed (beta unchanged), 1 otherwise. */
static int newton_step(qp_work *q, double ridge) {
    const int64_t k = q->k;
    const double *G = q->G;
    int64_t n = 0;
    for (int64_t i = 0; i < k; i++)
        if (q->beta[i] > 0) q->idx[n++] = i;
    if (n == 0) return 0;
    double *L = q->L, *xb = q->rhs, *x1 = q->rhs + k;
    for (int64_t r = 0; r < n; r++) {
        const double *gr = G + q->idx[r] * k;
        for (int64_t c = 0; c <= r; c++) L[r * n + c] = gr[q->idx[c]];
        L[r * n + r] += ridge;
        xb[r] = q->lin[q->idx[r]];
        x1[r] = 1.0;
    }
    if (cholesky(L, n, n)) return 0;
    cho_solve(L, n, n, xb);
    cho_solve(L, n, n, x1);
    double sb = 0.0, s1 = 0.0;
    for (int64_t r = 0; r < n; r++) { sb += xb[r]; s1 += x1[r]; }
    const double mu = (sb - 1.0) / s1;
    if (!isfinite(mu)) return 0;
    /* Direction to the Newton point, projected back onto sum(d) = 0. */
    double *d = q->d;
    memset(d, 0, (size_t)k * sizeof *d);
    double sd = 0.0;
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = q->idx[r];
        d[i] = xb[r] - mu * x1[r] - q->beta[i];
        sd += d[i];
    }
    sd /= (double)n;
    double t_max = INFINITY;
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = q->idx[r];
        d[i] -= sd;
        if (!isfinite(d[i])) d[i] = 0.0;
        if (d[i] < 0) {
            const double ratio = q->beta[i] / -d[i];
            if (ratio < t_max) t_max = ratio;
        }
    }
    if (!isfinite(t_max)) t_max = 0.0;
    /* Exact line search of the dual along d, capped at t_max. */
    double slope = 0.0, curv = 0.0;
    for (int64_t r = 0; r < n; r++) {
        const int64_t i = q->idx[r];
        slope += (q->lin[i] - q->v[i]) * d[i];
        double gd = 0.0;
        const double *gi = G + i * k;
        for (int64_t c = 0; c < n; c++) gd += gi[q->idx[c]] * d[q->idx[c]];
        curv += d[i] * gd;
    }
    double t = 0.0;
    if (slope > 0) {
        t = curv > 0 ? slope / curv : INFINITY;
        if (t > t_max) t = t_max;
    }
    if (!isfinite(t)) t = 0.0;
    double total = 0.0;
    double *nb = q->x;
    for (int64_t i = 0; i < k; i++) {
        double val;
        if (d[i] < 0 && q->beta[i] / -d[i] <= t && t >= t_max) val = 0.0;
        else val = fmax(q->beta[i] + t * d[i], 0.0);
        nb[i] = val;
        total += val;
    }
    if (total > 0)
        for (int64_t i = 0; i < k; i++) q->beta[i] = nb[i] / total;
    return 1;
}

static double qp_value(const qp_work *q, const double *b, double *tmp) {
    matvec(q->G, b, tmp, q->k);
    return dotd(q->lin, b, q->k) - 0.5 * dotd(b, tmp, q->k);
}

/* Frank-Wolfe gap of max(b, 0) / sum(max(b, 0)) (tmp, x: [k] scratch). */
static double normalised_gap(const qp_work *q, const double *b, double *x, double *tmp) {
    const int64_t k = q->k;
    double tot = 0.0;
    for (int64_t i = 0; i < k; i++) { x[i] = fmax(b[i], 0.0); tot += x[i]; }
    for (int64_t i = 0; i < k; i++) x[i] /= tot;
    matvec(q->G, x, tmp, k);
    return fw_gap(x, q->lin, tmp, k);
}

static double step_length(const double *x, const double *dx, int64_t k) {
    double t = 1.0;
    for (int64_t i = 0; i < k; i++)
        if (dx[i] < 0 && -x[i] / dx[i] < t) t = -x[i] / dx[i];
    return t;
}

/* (G + diag(s / b)) db - dy 1 = -r_dual - r_comp / b, sum(db) = -r_sum,
 * ds = -(r_comp + s db) / b, with the factor in q->L and m1 = M^{-1} 1. */
static double ip_direction(qp_work *q, const double *r_dual, double r_sum,
                           const double *r_comp, double *db, double *ds) {
    const int64_t k = q->k;
    double *mr = q->mr;
    for (int64_t i = 0; i < k; i++) mr[i] = -r_dual[i] - r_comp[i] / q->b[i];
    cho_solve(q->L, k, k, mr);
    double smr = 0.0, sm1 = 0.0;
    for (int64_t i = 0; i < k; i++) { smr += mr[i]; sm1 += q->m1[i]; }
    const double dy = (-r_sum - smr) / sm1;
    for (int64_t i = 0; i < k; i++) {
        db[i] = mr[i] + dy * q->m1[i];
        ds[i] = -(r_comp[i] + q->s[i] * db[i]) / q->b[i];
    }
    return dy;
}

/* Interior-point polish from beta (the XLA form's _interior_point_qp); writes
 * its normalised result to out. */
static void interior_point(qp_work *q, int64_t max_steps, double eps, double *out) {
    const int64_t k = q->k;
    const double *G = q->G;
    double *b = q->b, *s = q->s, *g = q->g, *db = q->db, *ds = q->ds, *tmp = q->tmp;
    double *r_dual = q->d, *r_comp = q->x, *nb = q->rhs, *ns = q->rhs + k;
    for (int64_t i = 0; i < k; i++) b[i] = 0.5 * q->beta[i] + 0.5 / (double)k;
    matvec(G, b, g, k);
    double gmin = INFINITY, gmax = -INFINITY;
    for (int64_t i = 0; i < k; i++) {
        g[i] -= q->lin[i];
        gmin = fmin(gmin, g[i]);
        gmax = fmax(gmax, g[i]);
    }
    double y = gmin - fmax(gmax - gmin, DBL_MIN);
    for (int64_t i = 0; i < k; i++) s[i] = g[i] - y;
    for (int64_t it = 0; it < max_steps; it++) {
        if (!(normalised_gap(q, b, out, tmp) > eps)) break;
        matvec(G, b, g, k);
        double r_sum = -1.0, bs = 0.0;
        for (int64_t i = 0; i < k; i++) {
            r_dual[i] = g[i] - q->lin[i] - y - s[i];
            r_sum += b[i];
            bs += b[i] * s[i];
        }
        const double mu = bs / (double)k;
        for (int64_t i = 0; i < k; i++) {
            memcpy(q->L + i * k, G + i * k, (size_t)(i + 1) * sizeof(double));
            q->L[i * k + i] += s[i] / b[i];
        }
        if (cholesky(q->L, k, k)) break;
        for (int64_t i = 0; i < k; i++) q->m1[i] = 1.0;
        cho_solve(q->L, k, k, q->m1);
        /* Affine-scaling predictor. */
        for (int64_t i = 0; i < k; i++) r_comp[i] = b[i] * s[i];
        ip_direction(q, r_dual, r_sum, r_comp, db, ds);
        double t = fmin(step_length(b, db, k), step_length(s, ds, k));
        double aff = 0.0;
        for (int64_t i = 0; i < k; i++) aff += (b[i] + t * db[i]) * (s[i] + t * ds[i]);
        const double ratio = aff / (double)k / mu;
        const double sigma = ratio * ratio * ratio;
        /* Corrector. */
        for (int64_t i = 0; i < k; i++) r_comp[i] = b[i] * s[i] + db[i] * ds[i] - sigma * mu;
        const double dy = ip_direction(q, r_dual, r_sum, r_comp, db, ds);
        t = 0.99 * fmin(step_length(b, db, k), step_length(s, ds, k));
        int ok = isfinite(y + t * dy);
        for (int64_t i = 0; i < k && ok; i++) {
            nb[i] = b[i] + t * db[i];
            ns[i] = s[i] + t * ds[i];
            ok = isfinite(nb[i]) && nb[i] > 0 && ns[i] > 0;
        }
        if (!ok) break;
        memcpy(b, nb, (size_t)k * sizeof *b);
        memcpy(s, ns, (size_t)k * sizeof *s);
        y += t * dy;
    }
    double tot = 0.0;
    for (int64_t i = 0; i < k; i++) { out[i] = fmax(b[i], 0.0); tot += out[i]; }
    for (int64_t i = 0; i < k; i++) out[i] /= tot;
}

static void solve(qp_work *q, double eps, int64_t max_steps, int64_t ip_steps) {
    const int64_t k = q->k;
    double scale = 0.0;
    for (int64_t i = 0; i < k; i++) scale = fmax(scale, fabs(q->G[i * k + i]));
    if (!(scale > 0)) scale = 1.0;
    double ridge = q->ridge * scale;
    const double ridge_max = q->ridge_max * scale;
    matvec(q->G, q->beta, q->v, k);
    for (int64_t r = 0; r < max_steps && fw_gap(q->beta, q->lin, q->v, k) > eps; r++) {
        pairwise_step(q);
        if (!newton_step(q, ridge)) ridge = fmin(q->ridge_growth * ridge, ridge_max);
        matvec(q->G, q->beta, q->v, k);
    }
    if (ip_steps <= 0 || !(fw_gap(q->beta, q->lin, q->v, k) > eps)) return;
    for (int64_t i = 0; i < k; i++)
        if (!(q->beta[i] > 0)) return;
    interior_point(q, ip_steps, eps, q->out);
    if (qp_value(q, q->out, q->tmp) > qp_value(q, q->beta, q->tmp))
        memcpy(q->beta, q->out, (size_t)k * sizeof *q->beta);
}

static XLA_FFI_DataType real_dtype(bctx *c, XLA_FFI_Buffer *buf, const char *name) {
    const XLA_FFI_DataType dt = buf->dtype;
    if (dt != XLA_FFI_DataType_F32 && dt != XLA_FFI_DataType_F64) {
        snprintf(c->msg, sizeof c->msg, "%s: dtype code %d, expected float32 or float64", name,
                 (int)dt);
        return XLA_FFI_DataType_INVALID;
    }
    return dt;
}

static double load(const void *p, int64_t i, int f64) {
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

/* One batch problem of jaxrank_cached_qp: its operand views. */
typedef struct {
    bctx *c;
    bview beta, gram, levels, vo, eps, out;
    int64_t k, max_steps, ip_steps;
    int f64;
    double ridge, ridge_growth, ridge_max;
} qp_batch;

/* Workspace bytes of one worker: G [k, k], L [k, k], 17 vectors [k] of
 * doubles, idx [k] and live [k]. */
static size_t qp_scratch_bytes(int64_t k) {
    return (size_t)(2 * k * k + 17 * k) * sizeof(double) + (size_t)(2 * k) * sizeof(int64_t);
}

static void qp_one(void *arg, int64_t bi, void *scratch) {
    const qp_batch *p = (const qp_batch *)arg;
    const bctx *c = p->c;
    const int64_t K = p->k;
    const int f64 = p->f64;
    int64_t *live = (int64_t *)((double *)scratch + 2 * K * K + 17 * K) + K;
    const void *pg = at(c, &p->gram, bi), *pb = at(c, &p->beta, bi);
    const void *pl = at(c, &p->levels, bi), *pv = at(c, &p->vo, bi);
    /* The planes of the QP: every slot but the zero planes (zero Gram row,
     * level, v_other and weight, e.g. the empty slots of a cache that is not
     * full) after the first.  Those are one variable repeated: the first
     * stands for all (ties in the pairwise step go to the lowest index, the
     * other steps act on the support), so the result is the full problem's. */
    int64_t k = 0;
    int zero_seen = 0;
    for (int64_t i = 0; i < K; i++) {
        const int zero = load(pb, i, f64) == 0.0 && load(pl, i, f64) == 0.0
                         && load(pv, i, f64) == 0.0 && load(pg, i * K + i, f64) == 0.0;
        if (zero && zero_seen) continue;
        zero_seen |= zero;
        live[k++] = i;
    }
    double *Gd = (double *)scratch, *lin = Gd + k * k, *bd = lin + k;
    qp_work q;
    q.k = k;
    q.G = Gd;
    q.lin = lin;
    q.beta = bd;
    q.v = bd + k;
    q.x = q.v + k;
    q.d = q.x + k;
    q.rhs = q.d + k;          /* [2k] */
    q.b = q.rhs + 2 * k;
    q.s = q.b + k;
    q.g = q.s + k;
    q.m1 = q.g + k;
    q.mr = q.m1 + k;
    q.db = q.mr + k;
    q.ds = q.db + k;
    q.tmp = q.ds + k;
    q.out = q.tmp + k;        /* ends at lin + 17 k */
    q.L = q.out + k;          /* [k, k] */
    q.idx = (int64_t *)((double *)scratch + 2 * K * K + 17 * K);
    q.ridge = p->ridge;
    q.ridge_growth = p->ridge_growth;
    q.ridge_max = p->ridge_max;
    for (int64_t r = 0; r < k; r++) {
        const int64_t i = live[r];
        for (int64_t j = 0; j < k; j++) Gd[r * k + j] = load(pg, i * K + live[j], f64);
        lin[r] = load(pl, i, f64) - load(pv, i, f64);
        bd[r] = load(pb, i, f64);
    }
    const double e = load(at(c, &p->eps, bi), 0, f64);
    solve(&q, e, p->max_steps, p->ip_steps);
    void *po = at(c, &p->out, bi);
    if (f64) memset(po, 0, (size_t)K * sizeof(double));
    else memset(po, 0, (size_t)K * sizeof(float));
    for (int64_t r = 0; r < k; r++) {
        if (f64) ((double *)po)[live[r]] = bd[r];
        else ((float *)po)[live[r]] = (float)bd[r];
    }
}

/* args: beta [k], gram [k, k], levels [k], v_other [k], eps [];
 * attrs: max_steps, ip_steps (int64), ridge, ridge_growth, ridge_max
 * (float64);  rets: beta [k] (the dtype of the args).  The problems of a
 * batch are solved in parallel on XLA's CPU thread pool (par_batch). */
JAXRANK_EXPORT XLA_FFI_Error *jaxrank_cached_qp(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 5 || cf->rets.size != 1) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank cached_qp: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    const XLA_FFI_DataType dt = real_dtype(&c, ARG(0), "beta");
    CHECK(dt == XLA_FFI_DataType_INVALID);
    qp_batch p;
    p.c = &c;
    p.f64 = dt == XLA_FFI_DataType_F64;
    CHECK(view(&c, ARG(0), "beta", 1, dt, &p.beta));
    CHECK(view(&c, ARG(1), "gram", 2, dt, &p.gram));
    CHECK(view(&c, ARG(2), "levels", 1, dt, &p.levels));
    CHECK(view(&c, ARG(3), "v_other", 1, dt, &p.vo));
    CHECK(view(&c, ARG(4), "eps", 0, dt, &p.eps));
    CHECK(view(&c, RET(0), "beta_out", 1, dt, &p.out));
    const int64_t k = p.out.core_dims[0];
    if (p.beta.core_dims[0] != k || p.gram.core_dims[0] != k || p.gram.core_dims[1] != k
        || p.levels.core_dims[0] != k || p.vo.core_dims[0] != k) {
        snprintf(c.msg, sizeof c.msg, "operands need k = %lld planes ([k], [k, k])", (long long)k);
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    p.k = k;
    p.max_steps = attr_int(cf, "max_steps", 0);
    p.ip_steps = attr_int(cf, "ip_steps", 0);
    p.ridge = attr_double(cf, "ridge", NAN);
    p.ridge_growth = attr_double(cf, "ridge_growth", NAN);
    p.ridge_max = attr_double(cf, "ridge_max", NAN);
    if (!(p.ridge > 0) || !(p.ridge_growth >= 1) || !(p.ridge_max >= p.ridge)) {
        snprintf(c.msg, sizeof c.msg,
                 "attributes ridge > 0, ridge_growth >= 1, ridge_max >= ridge are required");
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    if (k == 0) return NULL;
    void *scratch = malloc(qp_scratch_bytes(k));
    if (scratch == NULL) {
        snprintf(c.msg, sizeof c.msg, "out of memory for %lld planes", (long long)k);
        FAIL(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
    }
    par_batch(cf, c.nbatch, qp_one, &p, qp_scratch_bytes(k), scratch);
    free(scratch);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Products with the plane cache                                             */
/* ------------------------------------------------------------------------ */

/* The solver's plane cache is corners [k + 1, dim]: the planes in slots
 * 0..k-1 (filled from slot 0 upwards; slots at or above the count n of
 * filled rows are zero) and the aggregate corner in slot k.  These kernels
 * read only the filled rows and the aggregate (the XLA form reads all rows
 * of a single fit's cache), and the combination only the rows of nonzero
 * weight.  Sums are accumulated in double. */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define QP_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define QP_CLONES
#endif

#define DEFINE_CACHE_KERNELS(T, SUFFIX)                                       \
    static inline double dot_##SUFFIX(const T *restrict a, const T *restrict b, \
                                      int64_t n) {                            \
        double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                               \
        int64_t t = 0;                                                        \
        for (; t + 8 <= n; t += 8)                                            \
            for (int u = 0; u < 8; u++) s[u] += (double)a[t + u] * (double)b[t + u]; \
        for (; t < n; t++) s[0] += (double)a[t] * (double)b[t];               \
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); \
    }                                                                         \
    static QP_CLONES void rows_##SUFFIX(const T *C, const T *V, T *O, int64_t k, \
                                        int64_t dim, int64_t r, int64_t n) {  \
        for (int64_t i = 0; i <= k; i++) {                                    \
            const int empty = i >= n && i < k;                                \
            for (int64_t j = 0; j < r; j++)                                   \
                O[j * (k + 1) + i] = empty ? (T)0                             \
                    : (T)dot_##SUFFIX(C + i * dim, V + j * dim, dim);         \
        }                                                                     \
    }                                                                         \
    static QP_CLONES void combine_##SUFFIX(const T *C, const T *B, T *O, double *acc, \
                                           int64_t k, int64_t dim) {          \
        for (int64_t t = 0; t < dim; t++) acc[t] = 0.0;                       \
        for (int64_t i = 0; i <= k; i++) {                                    \
            const double a = (double)B[i];                                    \
            if (a == 0.0) continue;                                           \
            const T *row = C + i * dim;                                       \
            for (int64_t t = 0; t < dim; t++) acc[t] += a * (double)row[t];   \
        }                                                                     \
        for (int64_t t = 0; t < dim; t++) O[t] = (T)acc[t];                   \
    }

DEFINE_CACHE_KERNELS(float, f32)
DEFINE_CACHE_KERNELS(double, f64)

/* One batch problem of the cache products: its operand views. */
typedef struct {
    const bctx *c;
    const bview *corners, *vecs, *count, *out; /* vecs: beta for the combination */
    int64_t k, dim, r;
    int f64;
} cache_batch;

static void rows_one(void *arg, int64_t b, void *scratch) {
    const cache_batch *p = (const cache_batch *)arg;
    (void)scratch;
    int64_t n = *(const int32_t *)at(p->c, p->count, b);
    n = n < 0 ? 0 : (n > p->k ? p->k : n);
    if (p->f64)
        rows_f64((const double *)at(p->c, p->corners, b), (const double *)at(p->c, p->vecs, b),
                 (double *)at(p->c, p->out, b), p->k, p->dim, p->r, n);
    else
        rows_f32((const float *)at(p->c, p->corners, b), (const float *)at(p->c, p->vecs, b),
                 (float *)at(p->c, p->out, b), p->k, p->dim, p->r, n);
}

static void combine_one(void *arg, int64_t b, void *scratch) {
    const cache_batch *p = (const cache_batch *)arg;
    if (p->f64)
        combine_f64((const double *)at(p->c, p->corners, b), (const double *)at(p->c, p->vecs, b),
                    (double *)at(p->c, p->out, b), (double *)scratch, p->k, p->dim);
    else
        combine_f32((const float *)at(p->c, p->corners, b), (const float *)at(p->c, p->vecs, b),
                    (float *)at(p->c, p->out, b), (double *)scratch, p->k, p->dim);
}



/* args: corners [k + 1, dim], vecs [r, dim], n [] int32;
 * rets: out [r, k + 1] (out[j, i] = corners[i] . vecs[j], 0 on the empty slots). */
JAXRANK_EXPORT XLA_FFI_Error *jaxrank_cache_rows(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 3 || cf->rets.size != 1) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank cache_rows: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 2));
    const XLA_FFI_DataType dt = real_dtype(&c, ARG(0), "corners");
    CHECK(dt == XLA_FFI_DataType_INVALID);
    bview corners, vecs, count, out;
    CHECK(view(&c, ARG(0), "corners", 2, dt, &corners));
    CHECK(view(&c, ARG(1), "vecs", 2, dt, &vecs));
    CHECK(view(&c, ARG(2), "n", 0, XLA_FFI_DataType_S32, &count));
    CHECK(view(&c, RET(0), "out", 2, dt, &out));
    const int64_t k = corners.core_dims[0] - 1, dim = corners.core_dims[1];
    const int64_t r = vecs.core_dims[0];
    if (k < 0 || vecs.core_dims[1] != dim || out.core_dims[0] != r || out.core_dims[1] != k + 1) {
        snprintf(c.msg, sizeof c.msg, "shapes: corners [k + 1, dim], vecs [r, dim], out [r, k + 1]");
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    cache_batch p = {&c, &corners, &vecs, &count, &out, k, dim, r, dt == XLA_FFI_DataType_F64};
    par_batch(cf, c.nbatch, rows_one, &p, 0, NULL);
    return NULL;
}

/* args: corners [k + 1, dim], beta [k + 1];  rets: w [dim] = beta @ corners. */
JAXRANK_EXPORT XLA_FFI_Error *jaxrank_cache_combine(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 2 || cf->rets.size != 1) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank cache_combine: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    const XLA_FFI_DataType dt = real_dtype(&c, ARG(0), "corners");
    CHECK(dt == XLA_FFI_DataType_INVALID);
    bview corners, beta, out;
    CHECK(view(&c, ARG(0), "corners", 2, dt, &corners));
    CHECK(view(&c, ARG(1), "beta", 1, dt, &beta));
    CHECK(view(&c, RET(0), "w", 1, dt, &out));
    const int64_t k = corners.core_dims[0] - 1, dim = corners.core_dims[1];
    if (k < 0 || beta.core_dims[0] != k + 1 || out.core_dims[0] != dim) {
        snprintf(c.msg, sizeof c.msg, "shapes: corners [k + 1, dim], beta [k + 1], w [dim]");
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    double *acc = (double *)malloc((size_t)(dim + 1) * sizeof(double));
    if (acc == NULL) {
        snprintf(c.msg, sizeof c.msg, "out of memory");
        FAIL(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
    }
    cache_batch p = {&c, &corners, &beta, NULL, &out, k, dim, 0, dt == XLA_FFI_DataType_F64};
    par_batch(cf, c.nbatch, combine_one, &p, (size_t)(dim + 1) * sizeof(double), acc);
    free(acc);
    return NULL;
}
