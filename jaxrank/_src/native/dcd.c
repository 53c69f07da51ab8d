/*
 * Dual coordinate descent (DCD) epochs for sums of per-sample hinges.
 *
 * Hsieh, Chang, Lin, Keerthi, Sundararajan, "A dual coordinate descent
 * method for large-scale linear SVM", ICML 2008, Algorithm 1 (liblinear
 * `-s 3`, L2-regularised L1-loss SVC, dual), with the optional shrinking of
 * its Section 3.2 as liblinear's solve_l2r_l1l2_svc implements it.
 *
 * Problem (one of B independent problems that may share the rows z_i):
 *
 *     min_alpha  1/2 ||w||^2 - sum_i alpha_i,   0 <= alpha_i <= u_i,
 *     w = w_other + sum_i alpha_i y_i z_i       (w_other stays fixed)
 *
 * One coordinate step at sample i (skipped when u_i <= 0):
 *
 *     G = y_i z_i^T w - 1,   alpha_i' = clip(alpha_i - G / Q_ii, 0, u_i),
 *     w += (alpha_i' - alpha_i) y_i z_i,   Q_ii = ||z_i||^2.
 *
 * Rows: dense float32 [m, d] (row-major) or CSR (indptr [m+1] int32,
 * indices [nnz] int32, values [nnz] float32) with d columns, plus an
 * optional implicit constant last feature `bias` (column d of w; 0 = none).
 *
 * Arithmetic: w, alpha, rows are float32; each dot product z_i^T w is
 * accumulated in double (every float32 product is exact in double, so G is
 * the correctly rounded margin up to the final sum's rounding; near the
 * optimum G is a small difference of O(1) terms and float32 accumulation
 * over long rows would lose its leading digits).  Within a call w and
 * alpha are held in double (copies of the float32 inputs, rounded back once
 * at the end; w then takes the rounding of each alpha_i, so that it stays
 * sum_i alpha_i y_i z_i of the stored alpha), and every step
 * alpha_i' = clip(alpha_i - G / Q_ii, 0, u_i) and update w += delta z_i is
 * made there.  In float32, the updates of w drift from sum_i alpha_i y_i
 * z_i (about eps_32 * u_i * ||z_i|| per visit, accumulating), and a step
 * below half a unit in the last place of alpha_i is lost, so at large u_i
 * the projected gradients cannot fall below the pass tolerance; either
 * stalls the certified gap of the solver (docs/solver.md).  The XLA path
 * keeps float32.
 *
 * Entry points:
 *   - XLA FFI handlers (typed FFI, C API of xla/ffi/api/c_api.h, vendored
 *     in xla_ffi/): jaxrank_dcd_epoch_dense, jaxrank_dcd_epoch_csr,
 *     jaxrank_row_dots_dense, jaxrank_row_dots_csr, jaxrank_sq_norms_dense,
 *     jaxrank_sq_norms_csr, jaxrank_random_order.
 *     Buffers arrive as XLA's own device buffers (no copy).  Leading batch
 *     axes (vmap with vmap_method="expand_dims") broadcast: an axis of
 *     size 1 in an operand is shared by every problem of the batch.
 *   - jaxrank_dcd_abi_version, jaxrank_dcd_last_rows_ptr: plain C (ctypes):
 *     version check at load time; the address of the last rows buffer a
 *     handler read (tests check that it is the JAX array's own buffer).
 *
 * Plain C99 (no Python API).
 */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xla_ffi/c_api.h"

#if defined(_WIN32)
#define DCD_EXPORT __declspec(dllexport)
#else
#define DCD_EXPORT __attribute__((visibility("default")))
#endif

#define DCD_ABI_VERSION 3
/* The passes are also compiled for AVX2 where the toolchain can pick the
 * variant at load time (GCC's target_clones, ifunc on x86-64 Linux): w is
 * held in double, whose vectors are half as wide as float32's. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DCD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DCD_CLONES
#endif
/* liblinear's threshold below which a projected gradient counts as zero. */
#define DCD_PG_ZERO 1.0e-12

/* ------------------------------------------------------------------------ */
/* One problem                                                              */
/* ------------------------------------------------------------------------ */

typedef struct {
    int64_t m;        /* rows */
    int64_t d;        /* stored columns (bias column, if any, is w[d]) */
    int64_t dim;      /* len(w): d or d + 1 */
    int64_t nnz;      /* CSR only */
    const float *X;   /* dense [m, d] row-major, or NULL for CSR */
    const int32_t *indptr;
    const int32_t *indices;
    const float *values;
    float bias;       /* value of the implicit last feature, 0 = none */
    const float *sqn; /* [m] Q_ii = ||z_i||^2 (incl. bias^2) */
    const float *y;   /* [m] labels +-1 */
    const float *u;   /* [m] upper bounds; <= 0: term absent */
    const int32_t *order; /* [m] visiting order of the first pass */
    float *w;         /* [dim] in/out */
    float *alpha;     /* [m] in/out */
    int32_t *list;    /* [2 m] workspace: the visiting list, then the samples shrunk in a pass */
    uint8_t *active;  /* [m] in/out shrinking mask, or NULL (no shrinking) */
    float *pg_old;    /* [2] in/out (PGmax_old, PGmin_old), with active */
    float pg_tol;     /* with active: reactivate / stop when PGmax - PGmin <= pg_tol */
    int64_t max_visits; /* with active: stop after the pass that reaches it (<= 0: none) */
    float *pg_stats;  /* [2] out: (PGmax, PGmin) of the last pass, or NULL */
    int32_t *n_passes; /* [] out: passes done, or NULL */
    int32_t *n_visits; /* [] out: coordinate visits in the call (saturating), or NULL */
    uint8_t *converged; /* [] out: stopped on PGmax - PGmin <= pg_tol over all terms */
} dcd_problem;

static inline double dot_dense(const float *restrict x, const float *restrict w,
                               int64_t d) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t j = 0;
    for (; j + 4 <= d; j += 4) {
        s0 += (double)x[j] * (double)w[j];
        s1 += (double)x[j + 1] * (double)w[j + 1];
        s2 += (double)x[j + 2] * (double)w[j + 2];
        s3 += (double)x[j + 3] * (double)w[j + 3];
    }
    for (; j < d; j++) s0 += (double)x[j] * (double)w[j];
    return (s0 + s1) + (s2 + s3);
}

static inline double dot_dense_d(const float *restrict x, const double *restrict w,
                                 int64_t d) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t j = 0;
    for (; j + 4 <= d; j += 4) {
        s0 += (double)x[j] * w[j];
        s1 += (double)x[j + 1] * w[j + 1];
        s2 += (double)x[j + 2] * w[j + 2];
        s3 += (double)x[j + 3] * w[j + 3];
    }
    for (; j < d; j++) s0 += (double)x[j] * w[j];
    return (s0 + s1) + (s2 + s3);
}

static inline void axpy_dense_d(double a, const float *restrict x, double *restrict w,
                                int64_t d) {
    for (int64_t j = 0; j < d; j++) w[j] += a * (double)x[j];
}

static void set_err(char *err, size_t len, const char *msg, long long a, long long b) {
    if (err && len) snprintf(err, len, msg, a, b);
}

/* Counter-based PRNG for the reshuffles (reproduced bit for bit by the XLA
 * path with uint32 arithmetic): lowbias32 hash of seed + c * golden. */
static inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static inline uint32_t order_seed(const int32_t *order, int64_t m) {
    return hash32(hash32((uint32_t)order[0]) ^ hash32((uint32_t)order[m - 1] ^ (uint32_t)m));
}

/* uniform in [0, n): high 32 bits of r * n (Lemire) */
static inline uint32_t below(uint32_t r, uint32_t n) {
    return (uint32_t)(((uint64_t)r * (uint64_t)n) >> 32);
}

/* z_i^T w (w held in double) accumulated in double; sets *lo, *hi for CSR. 0 = ok. */
static inline __attribute__((always_inline)) int
row_dot(const dcd_problem *p, const int sparse, int64_t i, const double *restrict w,
        double *out, int64_t *lo_out, int64_t *hi_out, char *err, size_t errlen) {
    const int64_t d = p->d;
    double dot;
    if (sparse) {
        const int64_t lo = p->indptr[i], hi = p->indptr[i + 1];
        if (lo < 0 || hi < lo || hi > p->nnz) {
            set_err(err, errlen, "indptr is not monotone in [0, nnz] at row %lld (nnz %lld)", i, p->nnz);
            return 1;
        }
        double s0 = 0.0, s1 = 0.0;
        int64_t k = lo;
        for (; k + 2 <= hi; k += 2) {
            const uint32_t j0 = (uint32_t)p->indices[k];
            const uint32_t j1 = (uint32_t)p->indices[k + 1];
            if (j0 >= (uint64_t)d || j1 >= (uint64_t)d) {
                set_err(err, errlen, "indices in row %lld out of range [0, %lld)", i, d);
                return 1;
            }
            s0 += (double)p->values[k] * w[j0];
            s1 += (double)p->values[k + 1] * w[j1];
        }
        if (k < hi) {
            const uint32_t j0 = (uint32_t)p->indices[k];
            if (j0 >= (uint64_t)d) {
                set_err(err, errlen, "indices in row %lld out of range [0, %lld)", i, d);
                return 1;
            }
            s0 += (double)p->values[k] * w[j0];
        }
        dot = s0 + s1;
        *lo_out = lo;
        *hi_out = hi;
    } else {
        dot = dot_dense_d(p->X + i * d, w, d);
    }
    if (p->bias != 0.0f) dot += (double)p->bias * w[d];
    *out = dot;
    return 0;
}

static int check_dims(const dcd_problem *p, char *err, size_t errlen) {
    if (p->dim != p->d && p->dim != p->d + 1) {
        set_err(err, errlen, "w has %lld entries; expected d = %lld or d + 1", p->dim, p->d);
        return 1;
    }
    if (p->bias != 0.0f && p->dim != p->d + 1) {
        set_err(err, errlen, "bias != 0 needs w with d + 1 = %lld entries; got %lld",
                p->d + 1, p->dim);
        return 1;
    }
    return 0;
}

/* Up to n_epochs passes (liblinear's solve_l2r_l1l2_svc outer loop).
 *
 * The visited samples (u_i > 0) are kept in p->list, active ones first (the
 * first `act`).  Pass 1 visits them in the order of p->order; every later
 * pass first reshuffles list[0:act] (Fisher-Yates; liblinear reshuffles every
 * pass).  With shrinking (p->active != NULL) a sample leaves the active part
 * when liblinear's test says so (at the end of the pass, keeping the visiting
 * order; liblinear instead swaps in the last active sample); after a pass with
 * PGmax - PGmin <= pg_tol the shrunk samples are reactivated, or, if none
 * was shrunk, the call stops (converged).  Returns 0, or 1 with a message.
 * `sparse` is a compile-time constant at both call sites (specialised). */
static inline __attribute__((always_inline)) int
run_passes(const dcd_problem *p, int64_t n_epochs, const int sparse, char *err,
           size_t errlen) {
    const int64_t m = p->m;
    const float bias = p->bias;
    const int64_t d = p->d;
    float *restrict alpha = p->alpha;
    int32_t *restrict list = p->list;
    uint8_t *active = p->active;
    const int shrink = active != NULL;
    if (check_dims(p, err, errlen)) return 1;
    double *restrict w = (double *)malloc((size_t)(p->dim > 0 ? p->dim : 1) * sizeof(double));
    double *restrict ad = (double *)malloc((size_t)(m > 0 ? m : 1) * sizeof(double));
    if (!w || !ad) {
        free(w);
        free(ad);
        set_err(err, errlen, "cannot allocate w and alpha in double (%lld, %lld entries)",
                p->dim, m);
        return 1;
    }
    for (int64_t j = 0; j < p->dim; j++) w[j] = (double)p->w[j];
    for (int64_t i = 0; i < m; i++) ad[i] = (double)alpha[i];
    int rc = 0;
    /* list: active samples in `order`, then the shrunk ones */
    int64_t nf = 0, nb = 0;
    for (int64_t k = 0; k < m; k++) {
        const int64_t i = p->order[k];
        if ((uint64_t)i >= (uint64_t)m) {
            set_err(err, errlen, "order[%lld] = %lld is not a row index", k, i);
            rc = 1;
            goto done;
        }
        if (!(p->u[i] > 0.0f)) continue; /* term absent (also NaN) */
        if (shrink && !active[i])
            list[m - 1 - nb++] = (int32_t)i;
        else
            list[nf++] = (int32_t)i;
    }
    for (int64_t k = 0; k < nb / 2; k++) { /* back part: reverse, then move after the front */
        const int32_t t = list[m - 1 - k];
        list[m - 1 - k] = list[m - nb + k];
        list[m - nb + k] = t;
    }
    memmove(list + nf, list + m - nb, (size_t)nb * sizeof(int32_t));
    const int64_t n = nf + nb;
    int64_t act = nf;
    uint32_t seed = m > 0 ? order_seed(p->order, m) : 0, ctr = 0;
    double pgmax_old = shrink ? (double)p->pg_old[0] : INFINITY;
    double pgmin_old = shrink ? (double)p->pg_old[1] : -INFINITY;
    double pgmax_new = -INFINITY, pgmin_new = INFINITY;
    int64_t passes = 0, visits = 0;
    int converged = 0;
    for (int64_t ep = 0; ep < n_epochs; ep++) {
        if (ep > 0) {
            for (int64_t k = 0; k + 1 < act; k++) {
                const int64_t j = k + (int64_t)below(hash32(seed + ctr++ * 0x9E3779B9U),
                                                     (uint32_t)(act - k));
                const int32_t t = list[k];
                list[k] = list[j];
                list[j] = t;
            }
        }
        pgmax_new = -INFINITY;
        pgmin_new = INFINITY;
        /* kept samples move to list[0:kept], the ones shrunk in this pass to
         * list[kept:act], both in visiting order */
        int32_t *restrict shrunk = list + m;
        int64_t kept = 0, nshrunk = 0;
        for (int64_t s = 0; s < act; s++) {
            const int64_t i = list[s];
            const float ui = p->u[i];
            double dot;
            int64_t lo = 0, hi = 0;
            if (row_dot(p, sparse, i, w, &dot, &lo, &hi, err, errlen)) {
                rc = 1;
                goto done;
            }
            visits++;
            const float yi = p->y[i];
            const double G = (double)yi * dot - 1.0;
            const double a = ad[i];
            double PG = 0.0;
            if (a <= 0.0) {
                if (G > pgmax_old) { /* shrink (never without a mask: +inf) */
                    shrunk[nshrunk++] = (int32_t)i;
                    continue;
                }
                if (G < 0.0) PG = G;
            } else if (a >= (double)ui) {
                if (G < pgmin_old) { /* shrink */
                    shrunk[nshrunk++] = (int32_t)i;
                    continue;
                }
                if (G > 0.0) PG = G;
            } else {
                PG = G;
            }
            list[kept++] = (int32_t)i;
            if (PG > pgmax_new) pgmax_new = PG;
            if (PG < pgmin_new) pgmin_new = PG;
            if (fabs(PG) > DCD_PG_ZERO) {
                const float q = p->sqn[i];
                double anew;
                if (q > 0.0f) {
                    double t = a - G / (double)q;
                    t = t < 0.0 ? 0.0 : t;
                    anew = t > (double)ui ? (double)ui : t;
                } else { /* z_i = 0: G = -1, the step is unbounded */
                    anew = G < 0.0 ? (double)ui : 0.0;
                }
                const double delta = (anew - a) * (double)yi;
                ad[i] = anew;
                if (delta != 0.0) {
                    if (sparse) {
                        for (int64_t k = lo; k < hi; k++)
                            w[p->indices[k]] += delta * (double)p->values[k];
                    } else {
                        axpy_dense_d(delta, p->X + i * d, w, d);
                    }
                    if (bias != 0.0f) w[d] += delta * (double)bias;
                }
            }
        }
        memcpy(list + kept, shrunk, (size_t)nshrunk * sizeof(int32_t));
        act = kept;
        passes++;
        if (shrink) {
            if (pgmax_new - pgmin_new <= (double)p->pg_tol) {
                if (act == n) {
                    converged = 1;
                    break;
                }
                act = n; /* reactivate (liblinear) */
                pgmax_old = INFINITY;
                pgmin_old = -INFINITY;
                if (p->max_visits > 0 && visits >= p->max_visits) break;
                continue;
            }
            pgmax_old = pgmax_new <= 0.0 ? INFINITY : pgmax_new;
            pgmin_old = pgmin_new >= 0.0 ? -INFINITY : pgmin_new;
            if (p->max_visits > 0 && visits >= p->max_visits) break;
        }
    }
    if (shrink) {
        for (int64_t s = 0; s < n; s++) active[list[s]] = s < act;
        p->pg_old[0] = (float)pgmax_old;
        p->pg_old[1] = (float)pgmin_old;
    }
    if (p->pg_stats) {
        p->pg_stats[0] = (float)pgmax_new;
        p->pg_stats[1] = (float)pgmin_new;
    }
    if (p->n_passes) *p->n_passes = (int32_t)passes;
    if (p->n_visits) *p->n_visits = visits > INT32_MAX ? INT32_MAX : (int32_t)visits;
    if (p->converged) *p->converged = (uint8_t)converged;
done:
    /* alpha back to float32; w takes the rounding of each alpha_i, so that it
     * stays sum_i alpha_i y_i z_i of the stored alpha (only weights strictly
     * inside (0, u_i) round: 0 and u_i are float32 values). */
    for (int64_t i = 0; i < m; i++) {
        const float af = (float)ad[i];
        const double r = ((double)af - ad[i]) * (double)p->y[i];
        alpha[i] = af;
        if (r != 0.0 && rc == 0) {
            if (sparse) {
                const int64_t lo = p->indptr[i], hi = p->indptr[i + 1];
                for (int64_t k = lo; k < hi; k++) w[p->indices[k]] += r * (double)p->values[k];
            } else {
                axpy_dense_d(r, p->X + i * d, w, d);
            }
            if (bias != 0.0f) w[d] += r * (double)bias;
        }
    }
    for (int64_t j = 0; j < p->dim; j++) p->w[j] = (float)w[j];
    free(w);
    free(ad);
    return rc;
}

DCD_CLONES static int run_dense(const dcd_problem *p, int64_t n_epochs, char *err, size_t len) {
    return run_passes(p, n_epochs, 0, err, len);
}

DCD_CLONES static int run_csr(const dcd_problem *p, int64_t n_epochs, char *err, size_t len) {
    return run_passes(p, n_epochs, 1, err, len);
}

DCD_EXPORT int jaxrank_dcd_abi_version(void) { return DCD_ABI_VERSION; }

/* Last row-data pointer an FFI handler received (zero-copy check). */
static const void *volatile last_rows_ptr = NULL;

DCD_EXPORT const void *jaxrank_dcd_last_rows_ptr(void) { return last_rows_ptr; }

/* s_i = z_i^T w for all rows (double accumulation, float32 result). */
static int row_dots(const dcd_problem *p, float *out, char *err, size_t errlen) {
    if (check_dims(p, err, errlen)) return 1;
    /* w in double: the products are the same as of the float32 values */
    double *w = (double *)malloc((size_t)(p->dim > 0 ? p->dim : 1) * sizeof(double));
    if (!w) {
        set_err(err, errlen, "cannot allocate w in double (%lld entries)", p->dim, 0);
        return 1;
    }
    for (int64_t j = 0; j < p->dim; j++) w[j] = (double)p->w[j];
    int rc = 0;
    int64_t lo, hi;
    for (int64_t i = 0; i < p->m && rc == 0; i++) {
        double s;
        if (p->X)
            rc = row_dot(p, 0, i, w, &s, &lo, &hi, err, errlen);
        else
            rc = row_dot(p, 1, i, w, &s, &lo, &hi, err, errlen);
        if (rc == 0) out[i] = (float)s;
    }
    free(w);
    return rc;
}

/* Random permutation of [0, m) (inside-out Fisher-Yates, splitmix64). */
static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void random_order(uint64_t seed, int64_t m, int32_t *out) {
    uint64_t s = seed;
    for (int64_t i = 0; i < m; i++) {
        /* j uniform in [0, i] (Lemire's multiply-shift; bias < (i+1)/2^32) */
        const uint64_t r = splitmix64(&s) >> 32;
        const int64_t j = (int64_t)((r * (uint64_t)(i + 1)) >> 32);
        out[i] = out[j];
        out[j] = (int32_t)i;
    }
}

#include "ffi_glue.h"


/* Views of the rows: dense X, or CSR indptr/indices/values/ncols. */
typedef struct {
    int sparse;
    bview X, indptr, indices, values, ncols;
} rows_view;

/* Parses the rows operands starting at args[first]; returns the next index. */
static int64_t view_rows(bctx *c, XLA_FFI_CallFrame *cf, int64_t first, int sparse,
                         rows_view *r) {
    r->sparse = sparse;
    if (!sparse) {
        if (view(c, ARG(first), "X", 2, XLA_FFI_DataType_F32, &r->X)) return -1;
        return first + 1;
    }
    if (view(c, ARG(first), "indptr", 1, XLA_FFI_DataType_S32, &r->indptr)) return -1;
    if (view(c, ARG(first + 1), "indices", 1, XLA_FFI_DataType_S32, &r->indices)) return -1;
    if (view(c, ARG(first + 2), "values", 1, XLA_FFI_DataType_F32, &r->values)) return -1;
    if (view(c, ARG(first + 3), "n_cols", 0, XLA_FFI_DataType_S32, &r->ncols)) return -1;
    if (r->indices.core_dims[0] != r->values.core_dims[0]) {
        snprintf(c->msg, sizeof c->msg, "indices and values differ in length");
        return -1;
    }
    return first + 4;
}

/* Fills the row fields of p for problem b. */
static int rows_at(bctx *c, const rows_view *r, int64_t b, dcd_problem *p) {
    if (!r->sparse) {
        p->m = r->X.core_dims[0];
        p->d = r->X.core_dims[1];
        p->X = (const float *)at(c, &r->X, b);
        p->indptr = NULL;
        p->indices = NULL;
        p->values = NULL;
        p->nnz = 0;
        last_rows_ptr = p->X;
    } else {
        p->m = r->indptr.core_dims[0] - 1;
        p->d = *(const int32_t *)at(c, &r->ncols, b);
        p->X = NULL;
        p->indptr = (const int32_t *)at(c, &r->indptr, b);
        p->indices = (const int32_t *)at(c, &r->indices, b);
        p->values = (const float *)at(c, &r->values, b);
        p->nnz = r->values.core_dims[0];
        last_rows_ptr = p->values;
        if (p->m < 0 || p->d < 0) {
            snprintf(c->msg, sizeof c->msg, "bad CSR shape (m %lld, n_cols %lld)",
                     (long long)p->m, (long long)p->d);
            return 1;
        }
    }
    return 0;
}

/* The problems of one epoch call, run by par_batch. */
typedef struct {
    const dcd_problem *probs;
    int64_t n_epochs;
    int sparse;
    int failed;     /* set (atomic) by the first problem that fails */
    char *msg;      /* its message */
} epoch_batch;

static void epoch_one(void *arg, int64_t b, void *scratch) {
    epoch_batch *e = (epoch_batch *)arg;
    char msg[256];
    (void)scratch;
    msg[0] = 0;
    int rc = e->sparse ? run_csr(e->probs + b, e->n_epochs, msg, sizeof msg)
                       : run_dense(e->probs + b, e->n_epochs, msg, sizeof msg);
    if (rc && par_first(&e->failed)) memcpy(e->msg, msg, sizeof msg);
}

/* args: w, alpha, <rows>, bias, sqn, y, u, order[, active, pg_old, pg_tol, max_visits]
 * rets: w, alpha, workspace[, active, pg_old, pg_stats, counts, converged]
 *   pg_old, pg_stats: float32 [2]; counts: int32 [2] (passes, visits);
 *   converged: pred []; workspace: int32 [2 m] (scratch, discarded)
 * attrs: n_epochs (int) */
static XLA_FFI_Error *epoch_handler(XLA_FFI_CallFrame *cf, int sparse) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    const int64_t nrows_args = sparse ? 4 : 1;
    const int64_t nbase = 2 + nrows_args + 5;
    const int shrink = cf->args.size == nbase + 4;
    if (cf->args.size != nbase && !shrink) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank dcd epoch: wrong number of operands");
    }
    if (cf->rets.size != (shrink ? 8 : 3)) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank dcd epoch: wrong number of results");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    const int64_t n_epochs = attr_int(cf, "n_epochs", 1);
    bview w, alpha, bias, sqn, y, u, order, active, pg, tol, budget;
    bview w_o, alpha_o, work_o, active_o, pg_o, stats_o, counts_o, conv_o;
    rows_view rows;
    CHECK(view(&c, ARG(0), "w", 1, XLA_FFI_DataType_F32, &w));
    CHECK(view(&c, ARG(1), "alpha", 1, XLA_FFI_DataType_F32, &alpha));
    int64_t a = view_rows(&c, cf, 2, sparse, &rows);
    CHECK(a < 0);
    CHECK(view(&c, ARG(a), "bias", 0, XLA_FFI_DataType_F32, &bias));
    CHECK(view(&c, ARG(a + 1), "sq_norms", 1, XLA_FFI_DataType_F32, &sqn));
    CHECK(view(&c, ARG(a + 2), "labels", 1, XLA_FFI_DataType_F32, &y));
    CHECK(view(&c, ARG(a + 3), "upper", 1, XLA_FFI_DataType_F32, &u));
    CHECK(view(&c, ARG(a + 4), "order", 1, XLA_FFI_DataType_S32, &order));
    CHECK(view(&c, RET(0), "w out", 1, XLA_FFI_DataType_F32, &w_o));
    CHECK(view(&c, RET(1), "alpha out", 1, XLA_FFI_DataType_F32, &alpha_o));
    CHECK(view(&c, RET(2), "workspace", 1, XLA_FFI_DataType_S32, &work_o));
    if (shrink) {
        CHECK(view(&c, ARG(a + 5), "active", 1, XLA_FFI_DataType_PRED, &active));
        CHECK(view(&c, ARG(a + 6), "pg bounds", 1, XLA_FFI_DataType_F32, &pg));
        CHECK(view(&c, ARG(a + 7), "pg_tol", 0, XLA_FFI_DataType_F32, &tol));
        CHECK(view(&c, ARG(a + 8), "max_visits", 0, XLA_FFI_DataType_S32, &budget));
        CHECK(view(&c, RET(3), "active out", 1, XLA_FFI_DataType_PRED, &active_o));
        CHECK(view(&c, RET(4), "pg bounds out", 1, XLA_FFI_DataType_F32, &pg_o));
        CHECK(view(&c, RET(5), "pg stats out", 1, XLA_FFI_DataType_F32, &stats_o));
        CHECK(view(&c, RET(6), "counts out", 1, XLA_FFI_DataType_S32, &counts_o));
        CHECK(view(&c, RET(7), "converged out", 0, XLA_FFI_DataType_PRED, &conv_o));
    }
    const int64_t dim = w.core_dims[0];
    /* The problems are set up (and checked) here, then run in parallel on
     * XLA's CPU thread pool (par_batch). */
    dcd_problem *probs = (dcd_problem *)calloc((size_t)(c.nbatch > 0 ? c.nbatch : 1),
                                               sizeof(dcd_problem));
    if (probs == NULL) {
        snprintf(c.msg, sizeof c.msg, "out of memory for %lld problems", (long long)c.nbatch);
        FAIL(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
    }
    int bad = 0;
    for (int64_t b = 0; b < c.nbatch && !bad; b++) {
        dcd_problem *pp = probs + b;
        if (rows_at(&c, &rows, b, pp)) { bad = 1; break; }
        const int64_t m = pp->m;
        if (alpha.core_dims[0] != m || sqn.core_dims[0] != m || y.core_dims[0] != m ||
            u.core_dims[0] != m || order.core_dims[0] != m || work_o.core_dims[0] != 2 * m) {
            snprintf(c.msg, sizeof c.msg, "alpha, sq_norms, labels, upper and order need %lld entries",
                     (long long)m);
            bad = 1;
            break;
        }
        pp->dim = dim;
        pp->bias = *(const float *)at(&c, &bias, b);
        pp->sqn = (const float *)at(&c, &sqn, b);
        pp->y = (const float *)at(&c, &y, b);
        pp->u = (const float *)at(&c, &u, b);
        pp->order = (const int32_t *)at(&c, &order, b);
        pp->list = (int32_t *)at(&c, &work_o, b);
        pp->w = (float *)at(&c, &w_o, b);
        pp->alpha = (float *)at(&c, &alpha_o, b);
        if (pp->w != at(&c, &w, b)) memcpy(pp->w, at(&c, &w, b), (size_t)dim * sizeof(float));
        if (pp->alpha != at(&c, &alpha, b))
            memcpy(pp->alpha, at(&c, &alpha, b), (size_t)m * sizeof(float));
        if (shrink) {
            pp->active = (uint8_t *)at(&c, &active_o, b);
            if (active.core_dims[0] != m) {
                snprintf(c.msg, sizeof c.msg, "active needs %lld entries", (long long)m);
                bad = 1;
                break;
            }
            if (pp->active != at(&c, &active, b)) memcpy(pp->active, at(&c, &active, b), (size_t)m);
            pp->pg_old = (float *)at(&c, &pg_o, b);
            memcpy(pp->pg_old, at(&c, &pg, b), 2 * sizeof(float));
            pp->pg_tol = *(const float *)at(&c, &tol, b);
            pp->max_visits = *(const int32_t *)at(&c, &budget, b);
            pp->pg_stats = (float *)at(&c, &stats_o, b);
            int32_t *counts = (int32_t *)at(&c, &counts_o, b);
            pp->n_passes = counts;
            pp->n_visits = counts + 1;
            pp->converged = (uint8_t *)at(&c, &conv_o, b);
        }
    }
    if (!bad) {
        epoch_batch e = {probs, n_epochs, sparse, 0, c.msg};
        par_batch(cf, c.nbatch, epoch_one, &e, 0, NULL);
        bad = e.failed;
    }
    free(probs);
    if (bad) FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    return NULL;
}

DCD_EXPORT XLA_FFI_Error *jaxrank_dcd_epoch_dense(XLA_FFI_CallFrame *cf) {
    return epoch_handler(cf, 0);
}

DCD_EXPORT XLA_FFI_Error *jaxrank_dcd_epoch_csr(XLA_FFI_CallFrame *cf) {
    return epoch_handler(cf, 1);
}

/* args: w, <rows>, bias;  rets: scores [m] */
static XLA_FFI_Error *dots_handler(XLA_FFI_CallFrame *cf, int sparse) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != (sparse ? 6 : 3) || cf->rets.size != 1) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank row_dots: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    bview w, bias, out;
    rows_view rows;
    CHECK(view(&c, ARG(0), "w", 1, XLA_FFI_DataType_F32, &w));
    int64_t a = view_rows(&c, cf, 1, sparse, &rows);
    CHECK(a < 0);
    CHECK(view(&c, ARG(a), "bias", 0, XLA_FFI_DataType_F32, &bias));
    CHECK(view(&c, RET(0), "scores", 1, XLA_FFI_DataType_F32, &out));
    for (int64_t b = 0; b < c.nbatch; b++) {
        dcd_problem p;
        memset(&p, 0, sizeof p);
        CHECK(rows_at(&c, &rows, b, &p));
        if (out.core_dims[0] != p.m) {
            snprintf(c.msg, sizeof c.msg, "scores need %lld entries", (long long)p.m);
            FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
        }
        p.dim = w.core_dims[0];
        p.w = (float *)at(&c, &w, b);
        p.bias = *(const float *)at(&c, &bias, b);
        if (row_dots(&p, (float *)at(&c, &out, b), c.msg, sizeof c.msg))
            FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    return NULL;
}

DCD_EXPORT XLA_FFI_Error *jaxrank_row_dots_dense(XLA_FFI_CallFrame *cf) {
    return dots_handler(cf, 0);
}

DCD_EXPORT XLA_FFI_Error *jaxrank_row_dots_csr(XLA_FFI_CallFrame *cf) {
    return dots_handler(cf, 1);
}

/* ||z_i||^2 for all rows (double accumulation, float32 result). */
static int row_sq_norms(const dcd_problem *p, float *out, char *err, size_t errlen) {
    const int64_t d = p->d;
    const double b2 = (double)p->bias * (double)p->bias;
    for (int64_t i = 0; i < p->m; i++) {
        double s = 0.0;
        if (p->X) {
            s = dot_dense(p->X + i * d, p->X + i * d, d);
        } else {
            const int64_t lo = p->indptr[i], hi = p->indptr[i + 1];
            if (lo < 0 || hi < lo || hi > p->nnz) {
                set_err(err, errlen, "indptr is not monotone in [0, nnz] at row %lld (nnz %lld)", i, p->nnz);
                return 1;
            }
            for (int64_t k = lo; k < hi; k++) s += (double)p->values[k] * (double)p->values[k];
        }
        out[i] = (float)(s + b2);
    }
    return 0;
}

/* args: <rows>, bias;  rets: sq_norms [m] */
static XLA_FFI_Error *sq_norms_handler(XLA_FFI_CallFrame *cf, int sparse) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != (sparse ? 5 : 2) || cf->rets.size != 1) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank sq_norms: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    bview bias, out;
    rows_view rows;
    int64_t a = view_rows(&c, cf, 0, sparse, &rows);
    CHECK(a < 0);
    CHECK(view(&c, ARG(a), "bias", 0, XLA_FFI_DataType_F32, &bias));
    CHECK(view(&c, RET(0), "sq_norms", 1, XLA_FFI_DataType_F32, &out));
    for (int64_t b = 0; b < c.nbatch; b++) {
        dcd_problem p;
        memset(&p, 0, sizeof p);
        CHECK(rows_at(&c, &rows, b, &p));
        if (out.core_dims[0] != p.m) {
            snprintf(c.msg, sizeof c.msg, "sq_norms need %lld entries", (long long)p.m);
            FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
        }
        p.bias = *(const float *)at(&c, &bias, b);
        if (row_sq_norms(&p, (float *)at(&c, &out, b), c.msg, sizeof c.msg))
            FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    return NULL;
}

DCD_EXPORT XLA_FFI_Error *jaxrank_sq_norms_dense(XLA_FFI_CallFrame *cf) {
    return sq_norms_handler(cf, 0);
}

DCD_EXPORT XLA_FFI_Error *jaxrank_sq_norms_csr(XLA_FFI_CallFrame *cf) {
    return sq_norms_handler(cf, 1);
}

/* args: seed uint32 [2];  rets: order int32 [m] */
DCD_EXPORT XLA_FFI_Error *jaxrank_random_order(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 1 || cf->rets.size != 1) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank random_order: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    bview seed, out;
    CHECK(view(&c, ARG(0), "seed", 1, XLA_FFI_DataType_U32, &seed));
    CHECK(view(&c, RET(0), "order", 1, XLA_FFI_DataType_S32, &out));
    if (seed.core_dims[0] != 2) {
        snprintf(c.msg, sizeof c.msg, "seed needs 2 entries");
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    const int64_t m = out.core_dims[0];
    for (int64_t b = 0; b < c.nbatch; b++) {
        const uint32_t *s = (const uint32_t *)at(&c, &seed, b);
        random_order(((uint64_t)s[0] << 32) | (uint64_t)s[1], m, (int32_t *)at(&c, &out, b));
    }
    return NULL;
}
