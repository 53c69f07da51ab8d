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
 * over long rows would lose its leading digits), and the step
 * alpha_i - G / Q_ii is computed in double and rounded to float32.
 * The update w += delta z_i is float32 (as the XLA path).
 *
 * Entry points:
 *   - XLA FFI handlers (typed FFI, C API of xla/ffi/api/c_api.h, vendored
 *     in xla_ffi/): jaxrank_dcd_epoch_dense, jaxrank_dcd_epoch_csr,
 *     jaxrank_row_dots_dense, jaxrank_row_dots_csr, jaxrank_random_order.
 *     Buffers arrive as XLA's own device buffers (no copy).  Leading batch
 *     axes (vmap with vmap_method="expand_dims") broadcast: an axis of
 *     size 1 in an operand is shared by every problem of the batch.
 *   - jaxrank_dcd_run: one problem, plain C (ctypes), for measurements.
 *
 * Plain C99 (no Python API).
 */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xla_ffi/c_api.h"

#if defined(_WIN32)
#define DCD_EXPORT __declspec(dllexport)
#else
#define DCD_EXPORT __attribute__((visibility("default")))
#endif

#define DCD_ABI_VERSION 1
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
    const int32_t *order; /* [m] visiting order */
    float *w;         /* [dim] in/out */
    float *alpha;     /* [m] in/out */
    uint8_t *active;  /* [m] in/out shrinking mask, or NULL (no shrinking) */
    float *pg_old;    /* [2] in/out (PGmax_old, PGmin_old), with active */
    float *pg_stats;  /* [2] out: (PGmax, PGmin) of the last epoch, or NULL */
    int32_t *n_visited; /* [] out: coordinates visited in the last epoch, or NULL */
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

static inline void axpy_dense(float a, const float *restrict x, float *restrict w,
                              int64_t d) {
    for (int64_t j = 0; j < d; j++) w[j] += a * x[j];
}

static void set_err(char *err, size_t len, const char *msg, long long a, long long b) {
    if (err && len) snprintf(err, len, msg, a, b);
}

/* Runs n_epochs epochs over p->order; returns 0, or 1 with a message in err.
 * `sparse` is a compile-time constant at both call sites (specialised). */
static inline __attribute__((always_inline)) int
run_epochs(const dcd_problem *p, int64_t n_epochs, const int sparse, char *err,
           size_t errlen) {
    const int64_t m = p->m, d = p->d;
    const float bias = p->bias;
    float *restrict w = p->w;
    float *restrict alpha = p->alpha;
    uint8_t *active = p->active;
    if (p->dim != d && p->dim != d + 1) {
        set_err(err, errlen, "w has %lld entries; expected d = %lld or d + 1", p->dim, d);
        return 1;
    }
    if (bias != 0.0f && p->dim != d + 1) {
        set_err(err, errlen,
                "bias != 0 needs w with d + 1 = %lld entries; got %lld", d + 1, p->dim);
        return 1;
    }
    double pgmax_old = active ? (double)p->pg_old[0] : INFINITY;
    double pgmin_old = active ? (double)p->pg_old[1] : -INFINITY;
    double pgmax_new = -INFINITY, pgmin_new = INFINITY;
    int64_t visited = 0;
    for (int64_t ep = 0; ep < n_epochs; ep++) {
        pgmax_new = -INFINITY;
        pgmin_new = INFINITY;
        visited = 0;
        for (int64_t k = 0; k < m; k++) {
            const int64_t i = p->order[k];
            if ((uint64_t)i >= (uint64_t)m) {
                set_err(err, errlen, "order[%lld] = %lld is not a row index", k, i);
                return 1;
            }
            const float ui = p->u[i];
            if (!(ui > 0.0f)) continue; /* term absent (also NaN) */
            if (active && !active[i]) continue;
            /* z_i^T w */
            double dot;
            int64_t lo = 0, hi = 0;
            if (sparse) {
                lo = p->indptr[i];
                hi = p->indptr[i + 1];
                if (lo < 0 || hi < lo || hi > p->nnz) {
                    set_err(err, errlen, "indptr is not monotone in [0, nnz] at row %lld (nnz %lld)", i, p->nnz);
                    return 1;
                }
                double s0 = 0.0, s1 = 0.0;
                int64_t k2 = lo;
                for (; k2 + 2 <= hi; k2 += 2) {
                    const uint32_t j0 = (uint32_t)p->indices[k2];
                    const uint32_t j1 = (uint32_t)p->indices[k2 + 1];
                    if (j0 >= (uint64_t)d || j1 >= (uint64_t)d) {
                        set_err(err, errlen, "indices in row %lld out of range [0, %lld)", i, d);
                        return 1;
                    }
                    s0 += (double)p->values[k2] * (double)w[j0];
                    s1 += (double)p->values[k2 + 1] * (double)w[j1];
                }
                if (k2 < hi) {
                    const uint32_t j0 = (uint32_t)p->indices[k2];
                    if (j0 >= (uint64_t)d) {
                        set_err(err, errlen, "indices in row %lld out of range [0, %lld)", i, d);
                        return 1;
                    }
                    s0 += (double)p->values[k2] * (double)w[j0];
                }
                dot = s0 + s1;
            } else {
                dot = dot_dense(p->X + i * d, w, d);
            }
            if (bias != 0.0f) dot += (double)bias * (double)w[d];
            const float yi = p->y[i];
            const double G = (double)yi * dot - 1.0;
            const float a = alpha[i];
            double PG = 0.0;
            if (a <= 0.0f) {
                if (G > pgmax_old) { /* shrink (never without a mask: +inf) */
                    active[i] = 0;
                    continue;
                }
                if (G < 0.0) PG = G;
            } else if (a >= ui) {
                if (G < pgmin_old) {
                    active[i] = 0;
                    continue;
                }
                if (G > 0.0) PG = G;
            } else {
                PG = G;
            }
            visited++;
            if (PG > pgmax_new) pgmax_new = PG;
            if (PG < pgmin_new) pgmin_new = PG;
            if (fabs(PG) > DCD_PG_ZERO) {
                const float q = p->sqn[i];
                float anew;
                if (q > 0.0f) {
                    double t = (double)a - G / (double)q;
                    t = t < 0.0 ? 0.0 : t;
                    t = t > (double)ui ? (double)ui : t;
                    anew = (float)t;
                } else { /* z_i = 0: G = -1, the dual term alpha_i is unbounded */
                    anew = G < 0.0 ? ui : 0.0f;
                }
                const float delta = (anew - a) * yi;
                alpha[i] = anew;
                if (delta != 0.0f) {
                    if (sparse) {
                        for (int64_t k2 = lo; k2 < hi; k2++)
                            w[p->indices[k2]] += delta * p->values[k2];
                    } else {
                        axpy_dense(delta, p->X + i * d, w, d);
                    }
                    if (bias != 0.0f) w[d] += delta * bias;
                }
            }
        }
        if (active) {
            /* liblinear: bounds for the next epoch's shrinking test. */
            pgmax_old = pgmax_new <= 0.0 ? INFINITY : pgmax_new;
            pgmin_old = pgmin_new >= 0.0 ? -INFINITY : pgmin_new;
        }
    }
    if (active) {
        p->pg_old[0] = (float)pgmax_old;
        p->pg_old[1] = (float)pgmin_old;
    }
    if (p->pg_stats) {
        p->pg_stats[0] = (float)pgmax_new;
        p->pg_stats[1] = (float)pgmin_new;
    }
    if (p->n_visited) *p->n_visited = (int32_t)visited;
    return 0;
}

static int run_dense(const dcd_problem *p, int64_t n_epochs, char *err, size_t len) {
    return run_epochs(p, n_epochs, 0, err, len);
}

static int run_csr(const dcd_problem *p, int64_t n_epochs, char *err, size_t len) {
    return run_epochs(p, n_epochs, 1, err, len);
}

/* Plain C entry (ctypes): n_epochs epochs of one problem in place. */
DCD_EXPORT int jaxrank_dcd_run(const dcd_problem *p, int64_t n_epochs, char *err,
                               int64_t errlen) {
    if (p->X) return run_dense(p, n_epochs, err, (size_t)errlen);
    return run_csr(p, n_epochs, err, (size_t)errlen);
}

DCD_EXPORT int jaxrank_dcd_abi_version(void) { return DCD_ABI_VERSION; }

DCD_EXPORT int64_t jaxrank_dcd_problem_size(void) { return (int64_t)sizeof(dcd_problem); }

/* Last row-data pointer an FFI handler received (zero-copy check). */
static const void *volatile last_rows_ptr = NULL;

DCD_EXPORT const void *jaxrank_dcd_last_rows_ptr(void) { return last_rows_ptr; }

/* s_i = z_i^T w for all rows (double accumulation, float32 result). */
static int row_dots(const dcd_problem *p, float *out, char *err, size_t errlen) {
    const int64_t m = p->m, d = p->d;
    if (p->dim != d && p->dim != d + 1) {
        set_err(err, errlen, "w has %lld entries; expected d = %lld or d + 1", p->dim, d);
        return 1;
    }
    if (p->bias != 0.0f && p->dim != d + 1) {
        set_err(err, errlen,
                "bias != 0 needs w with d + 1 = %lld entries; got %lld", d + 1, p->dim);
        return 1;
    }
    const double bw = p->bias != 0.0f ? (double)p->bias * (double)p->w[d] : 0.0;
    for (int64_t i = 0; i < m; i++) {
        double s;
        if (p->X) {
            s = dot_dense(p->X + i * d, p->w, d);
        } else {
            const int64_t lo = p->indptr[i], hi = p->indptr[i + 1];
            if (lo < 0 || hi < lo || hi > p->nnz) {
                set_err(err, errlen, "indptr is not monotone in [0, nnz] at row %lld (nnz %lld)", i, p->nnz);
                return 1;
            }
            s = 0.0;
            for (int64_t k = lo; k < hi; k++) {
                const uint32_t j = (uint32_t)p->indices[k];
                if (j >= (uint64_t)d) {
                    set_err(err, errlen, "indices in row %lld out of range [0, %lld)", i, d);
                    return 1;
                }
                s += (double)p->values[k] * (double)p->w[j];
            }
        }
        out[i] = (float)(s + bw);
    }
    return 0;
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

/* ------------------------------------------------------------------------ */
/* XLA FFI glue                                                             */
/* ------------------------------------------------------------------------ */

#define MAX_BATCH_RANK 8
#define MAX_ARGS 16

static XLA_FFI_Error *ffi_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code,
                                const char *msg) {
    XLA_FFI_Error_Create_Args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    a.extension_start = NULL;
    a.message = msg;
    a.errc = code;
    return api->XLA_FFI_Error_Create(&a);
}

/* Answers XLA's metadata query (API version of the header we built with).
 * Returns 1 if the call frame was such a query. */
static int metadata_query(XLA_FFI_CallFrame *cf) {
    XLA_FFI_Extension_Base *ext = cf->extension_start;
    if (ext == NULL || ext->type != XLA_FFI_Extension_Metadata) return 0;
    XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
    md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    md->api_version.extension_start = NULL;
    md->api_version.major_version = XLA_FFI_API_MAJOR;
    md->api_version.minor_version = XLA_FFI_API_MINOR;
    md->traits = 0;
    if (md->struct_size >= offsetof(XLA_FFI_Metadata, state_type_id) + sizeof(XLA_FFI_TypeId))
        md->state_type_id.type_id = 0;
    return 1;
}

typedef struct {
    char *data;
    int64_t core_rank;
    const int64_t *core_dims;
    int64_t stride[MAX_BATCH_RANK]; /* bytes per batch index; 0 = broadcast */
} bview;

typedef struct {
    const XLA_FFI_Api *api;
    int64_t rank;                  /* batch rank R */
    int64_t bdims[MAX_BATCH_RANK]; /* full batch shape */
    int64_t nbatch;
    char msg[256];
} bctx;

static size_t dtype_size(XLA_FFI_DataType t) {
    switch (t) {
    case XLA_FFI_DataType_PRED: case XLA_FFI_DataType_S8: case XLA_FFI_DataType_U8: return 1;
    case XLA_FFI_DataType_F32: case XLA_FFI_DataType_S32: case XLA_FFI_DataType_U32: return 4;
    case XLA_FFI_DataType_F64: case XLA_FFI_DataType_S64: case XLA_FFI_DataType_U64: return 8;
    default: return 0;
    }
}

/* Views buffer `buf` (name for messages) with `core_rank` trailing axes and
 * dtype `dt`; its leading axes must be 1 or the full batch shape. */
static int view(bctx *c, XLA_FFI_Buffer *buf, const char *name, int64_t core_rank,
                XLA_FFI_DataType dt, bview *v) {
    if (buf->dtype != dt) {
        snprintf(c->msg, sizeof c->msg, "%s: dtype code %d, expected %d", name,
                 (int)buf->dtype, (int)dt);
        return 1;
    }
    if (buf->rank != c->rank + core_rank) {
        snprintf(c->msg, sizeof c->msg, "%s: rank %lld, expected %lld", name,
                 (long long)buf->rank, (long long)(c->rank + core_rank));
        return 1;
    }
    int64_t core = (int64_t)dtype_size(dt);
    for (int64_t k = c->rank; k < buf->rank; k++) core *= buf->dims[k];
    int64_t s = core;
    for (int64_t k = c->rank - 1; k >= 0; k--) {
        const int64_t n = buf->dims[k];
        if (n != 1 && n != c->bdims[k]) {
            snprintf(c->msg, sizeof c->msg, "%s: batch axis %lld has size %lld, expected 1 or %lld",
                     name, (long long)k, (long long)n, (long long)c->bdims[k]);
            return 1;
        }
        v->stride[k] = n == 1 ? 0 : s;
        s *= n;
    }
    v->data = (char *)buf->data;
    v->core_rank = core_rank;
    v->core_dims = buf->dims + c->rank;
    return 0;
}

static void *at(const bctx *c, const bview *v, int64_t b) {
    int64_t off = 0;
    for (int64_t k = c->rank - 1; k >= 0; k--) {
        const int64_t i = b % c->bdims[k];
        b /= c->bdims[k];
        off += i * v->stride[k];
    }
    return v->data + off;
}

/* Full batch shape from an output buffer with `core_rank` trailing axes. */
static int init_ctx(bctx *c, XLA_FFI_CallFrame *cf, int64_t out_index, int64_t core_rank) {
    c->api = cf->api;
    c->msg[0] = 0;
    XLA_FFI_Buffer *out = (XLA_FFI_Buffer *)cf->rets.rets[out_index];
    c->rank = out->rank - core_rank;
    if (c->rank < 0 || c->rank > MAX_BATCH_RANK) {
        snprintf(c->msg, sizeof c->msg, "unsupported batch rank %lld", (long long)c->rank);
        return 1;
    }
    c->nbatch = 1;
    for (int64_t k = 0; k < c->rank; k++) {
        c->bdims[k] = out->dims[k];
        c->nbatch *= out->dims[k];
    }
    return 0;
}

static int64_t attr_int(XLA_FFI_CallFrame *cf, const char *name, int64_t dflt) {
    const size_t len = strlen(name);
    for (int64_t i = 0; i < cf->attrs.size; i++) {
        const XLA_FFI_ByteSpan *nm = cf->attrs.names[i];
        if (nm->len != len || memcmp(nm->ptr, name, len) != 0) continue;
        if (cf->attrs.types[i] != XLA_FFI_AttrType_SCALAR) return dflt;
        const XLA_FFI_Scalar *s = (const XLA_FFI_Scalar *)cf->attrs.attrs[i];
        switch (s->dtype) {
        case XLA_FFI_DataType_S64: return *(const int64_t *)s->value;
        case XLA_FFI_DataType_S32: return *(const int32_t *)s->value;
        case XLA_FFI_DataType_U32: return *(const uint32_t *)s->value;
        case XLA_FFI_DataType_U64: return (int64_t)*(const uint64_t *)s->value;
        default: return dflt;
        }
    }
    return dflt;
}

#define ARG(i) ((XLA_FFI_Buffer *)cf->args.args[(i)])
#define RET(i) ((XLA_FFI_Buffer *)cf->rets.rets[(i)])
#define FAIL(code) return ffi_error(cf->api, (code), c.msg)
#define CHECK(expr) do { if (expr) FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT); } while (0)

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

/* args: w, alpha, <rows>, bias, sqn, y, u, order[, active, pg_old]
 * rets: w, alpha[, active, pg_old, pg_stats, n_visited]
 * attrs: n_epochs (int) */
static XLA_FFI_Error *epoch_handler(XLA_FFI_CallFrame *cf, int sparse) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    const int64_t nrows_args = sparse ? 4 : 1;
    const int64_t nbase = 2 + nrows_args + 5;
    const int shrink = cf->args.size == nbase + 2;
    if (cf->args.size != nbase && !shrink) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank dcd epoch: wrong number of operands");
    }
    if (cf->rets.size != (shrink ? 6 : 2)) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank dcd epoch: wrong number of results");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    const int64_t n_epochs = attr_int(cf, "n_epochs", 1);
    bview w, alpha, bias, sqn, y, u, order, active, pg;
    bview w_o, alpha_o, active_o, pg_o, stats_o, count_o;
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
    if (shrink) {
        CHECK(view(&c, ARG(a + 5), "active", 1, XLA_FFI_DataType_PRED, &active));
        CHECK(view(&c, ARG(a + 6), "pg bounds", 1, XLA_FFI_DataType_F32, &pg));
        CHECK(view(&c, RET(2), "active out", 1, XLA_FFI_DataType_PRED, &active_o));
        CHECK(view(&c, RET(3), "pg bounds out", 1, XLA_FFI_DataType_F32, &pg_o));
        CHECK(view(&c, RET(4), "pg stats out", 1, XLA_FFI_DataType_F32, &stats_o));
        CHECK(view(&c, RET(5), "count out", 0, XLA_FFI_DataType_S32, &count_o));
    }
    const int64_t dim = w.core_dims[0];
    for (int64_t b = 0; b < c.nbatch; b++) {
        dcd_problem p;
        memset(&p, 0, sizeof p);
        CHECK(rows_at(&c, &rows, b, &p));
        const int64_t m = p.m;
        if (alpha.core_dims[0] != m || sqn.core_dims[0] != m || y.core_dims[0] != m ||
            u.core_dims[0] != m || order.core_dims[0] != m) {
            snprintf(c.msg, sizeof c.msg, "alpha, sq_norms, labels, upper and order need %lld entries",
                     (long long)m);
            FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
        }
        p.dim = dim;
        p.bias = *(const float *)at(&c, &bias, b);
        p.sqn = (const float *)at(&c, &sqn, b);
        p.y = (const float *)at(&c, &y, b);
        p.u = (const float *)at(&c, &u, b);
        p.order = (const int32_t *)at(&c, &order, b);
        p.w = (float *)at(&c, &w_o, b);
        p.alpha = (float *)at(&c, &alpha_o, b);
        if (p.w != at(&c, &w, b)) memcpy(p.w, at(&c, &w, b), (size_t)dim * sizeof(float));
        if (p.alpha != at(&c, &alpha, b))
            memcpy(p.alpha, at(&c, &alpha, b), (size_t)m * sizeof(float));
        if (shrink) {
            p.active = (uint8_t *)at(&c, &active_o, b);
            if (active.core_dims[0] != m) {
                snprintf(c.msg, sizeof c.msg, "active needs %lld entries", (long long)m);
                FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
            }
            if (p.active != at(&c, &active, b)) memcpy(p.active, at(&c, &active, b), (size_t)m);
            p.pg_old = (float *)at(&c, &pg_o, b);
            memcpy(p.pg_old, at(&c, &pg, b), 2 * sizeof(float));
            p.pg_stats = (float *)at(&c, &stats_o, b);
            p.n_visited = (int32_t *)at(&c, &count_o, b);
        }
        int rc = sparse ? run_csr(&p, n_epochs, c.msg, sizeof c.msg)
                        : run_dense(&p, n_epochs, c.msg, sizeof c.msg);
        if (rc) FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
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
