/*
 * XLA FFI glue shared by jaxrank's native CPU kernels (dcd.c, rank.c): typed
 * FFI through the C API of xla/ffi/api/c_api.h (vendored in xla_ffi/),
 * batched views of buffers (leading batch axes of vmap with
 * vmap_method="expand_dims"; an axis of size 1 is broadcast), error
 * reporting and scalar attributes.  Static functions only: each kernel file
 * includes it once.
 */
#ifndef JAXRANK_FFI_GLUE_H_
#define JAXRANK_FFI_GLUE_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xla_ffi/c_api.h"

#if defined(_WIN32)
#define JAXRANK_EXPORT __declspec(dllexport)
#else
#define JAXRANK_EXPORT __attribute__((visibility("default")))
#endif


#define MAX_BATCH_RANK 8

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

/* The scalar attribute `name`, or NULL (absent, or not a scalar). */
static const XLA_FFI_Scalar *scalar_attr(XLA_FFI_CallFrame *cf, const char *name) {
    const size_t len = strlen(name);
    for (int64_t i = 0; i < cf->attrs.size; i++) {
        const XLA_FFI_ByteSpan *nm = cf->attrs.names[i];
        if (nm->len != len || memcmp(nm->ptr, name, len) != 0) continue;
        if (cf->attrs.types[i] != XLA_FFI_AttrType_SCALAR) return NULL;
        return (const XLA_FFI_Scalar *)cf->attrs.attrs[i];
    }
    return NULL;
}

/* An integer scalar attribute `name`, else `dflt`. */
static int64_t attr_int(XLA_FFI_CallFrame *cf, const char *name, int64_t dflt) {
    const XLA_FFI_Scalar *s = scalar_attr(cf, name);
    if (s == NULL) return dflt;
    switch (s->dtype) {
    case XLA_FFI_DataType_S64: return *(const int64_t *)s->value;
    case XLA_FFI_DataType_S32: return *(const int32_t *)s->value;
    case XLA_FFI_DataType_U32: return *(const uint32_t *)s->value;
    case XLA_FFI_DataType_U64: return (int64_t)*(const uint64_t *)s->value;
    default: return dflt;
    }
}

/* A float64 (or float32) scalar attribute `name`, else `dflt`. */
static inline double attr_double(XLA_FFI_CallFrame *cf, const char *name, double dflt) {
    const XLA_FFI_Scalar *s = scalar_attr(cf, name);
    if (s == NULL) return dflt;
    switch (s->dtype) {
    case XLA_FFI_DataType_F64: return *(const double *)s->value;
    case XLA_FFI_DataType_F32: return *(const float *)s->value;
    default: return dflt;
    }
}


/* ------------------------------------------------------------------------ */
/* The problems of a batch on XLA's CPU thread pool                          */
/* ------------------------------------------------------------------------ */

/* Solves problem `b` of a batch; `scratch` is the calling worker's own
 * workspace (`scratch_bytes` of par_batch, NULL when 0). */
typedef void (*batch_fn)(void *arg, int64_t b, void *scratch);

/* Parallel batches need GCC/Clang atomics and sched_yield (POSIX); other
 * builds solve the problems of a batch one after another. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32)
#define JAXRANK_PAR 1
#include <sched.h>
#else
#define JAXRANK_PAR 0
#endif

#if JAXRANK_PAR
typedef struct {
    int64_t next;   /* next problem to take (atomic) */
    int64_t done;   /* problems finished (atomic) */
    int64_t refs;   /* holders of this job: the caller and each scheduled task (atomic) */
    int64_t n;
    batch_fn fn;
    void *arg;
    size_t scratch_bytes;
} par_job;

static inline void par_work(par_job *j, void *scratch) {
    for (;;) {
        const int64_t b = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (b >= j->n) return;
        j->fn(j->arg, b, scratch);
        __atomic_fetch_add(&j->done, 1, __ATOMIC_RELEASE);
    }
}

static inline void par_release(par_job *j) {
    if (__atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL) == 0) free(j);
}

/* A task on XLA's pool: it takes problems while any are left.  It may start
 * after the caller returned (then none are left and it touches only the job,
 * which the last holder frees); `arg` is read only while a problem taken by
 * this task is unfinished, and the caller waits for those. */
static inline void par_task(void *data) {
    par_job *j = (par_job *)data;
    if (__atomic_load_n(&j->next, __ATOMIC_RELAXED) < j->n) {
        void *scratch = j->scratch_bytes ? malloc(j->scratch_bytes) : NULL;
        if (scratch != NULL || j->scratch_bytes == 0) par_work(j, scratch);
        free(scratch);
    }
    par_release(j);
}

/* Frees an error the runtime returned (a refused pool call: the caller
 * works alone). */
static inline void drop_error(const XLA_FFI_Api *api, XLA_FFI_Error *err) {
    XLA_FFI_Error_Destroy_Args d;
    memset(&d, 0, sizeof(d));
    d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
    d.error = err;
    api->XLA_FFI_Error_Destroy(&d);
}

static inline int64_t pool_threads(XLA_FFI_CallFrame *cf) {
    const XLA_FFI_Api *api = cf->api;
    if (api->struct_size < offsetof(XLA_FFI_Api, XLA_FFI_ThreadPool_NumThreads)
                               + sizeof(api->XLA_FFI_ThreadPool_NumThreads)
        || api->XLA_FFI_ThreadPool_Schedule == NULL || api->XLA_FFI_ThreadPool_NumThreads == NULL)
        return 0;
    int64_t num = 0;
    XLA_FFI_ThreadPool_NumThreads_Args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE;
    a.ctx = cf->ctx;
    a.num_threads = &num;
    XLA_FFI_Error *err = api->XLA_FFI_ThreadPool_NumThreads(&a);
    if (err != NULL) {
        drop_error(api, err);
        return 0;
    }
    return num;
}
#endif /* JAXRANK_PAR */

/* 1 for the first call on `flag` (0 before), 0 for every later one: the
 * first failing problem of a batch keeps its message. */
static inline int par_first(int *flag) {
#if JAXRANK_PAR
    return !__atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL);
#else
    const int was = *flag;
    *flag = 1;
    return !was;
#endif
}

/* Runs fn(arg, b, scratch) for b = 0..n-1: the calling thread with
 * `caller_scratch`, and tasks on XLA's intra-op thread pool (one per pool
 * thread, at most n - 1) with workspaces of `scratch_bytes` they allocate.
 * Returns when every problem is finished.  Without a pool (an older XLA, a
 * pool that refuses a task) or a job allocation the caller solves them all:
 * the results never depend on which thread solved a problem. */
static inline void par_batch(XLA_FFI_CallFrame *cf, int64_t n, batch_fn fn, void *arg,
                      size_t scratch_bytes, void *caller_scratch) {
#if JAXRANK_PAR
    int64_t helpers = n > 1 ? pool_threads(cf) : 0;
    if (helpers > n - 1) helpers = n - 1;
    par_job *j = helpers > 0 ? (par_job *)malloc(sizeof(par_job)) : NULL;
    if (j == NULL) {
        for (int64_t b = 0; b < n; b++) fn(arg, b, caller_scratch);
        return;
    }
    j->next = 0;
    j->done = 0;
    j->refs = 1;
    j->n = n;
    j->fn = fn;
    j->arg = arg;
    j->scratch_bytes = scratch_bytes;
    const XLA_FFI_Api *api = cf->api;
    for (int64_t h = 0; h < helpers; h++) {
        __atomic_fetch_add(&j->refs, 1, __ATOMIC_RELAXED);
        XLA_FFI_ThreadPool_Schedule_Args a;
        memset(&a, 0, sizeof(a));
        a.struct_size = XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE;
        a.ctx = cf->ctx;
        a.task = par_task;
        a.data = j;
        XLA_FFI_Error *err = api->XLA_FFI_ThreadPool_Schedule(&a);
        if (err != NULL) {
            drop_error(api, err);
            __atomic_fetch_sub(&j->refs, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    par_work(j, caller_scratch);
    while (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) < n) sched_yield();
    par_release(j);
#else
    (void)cf;
    (void)scratch_bytes;
    for (int64_t b = 0; b < n; b++) fn(arg, b, caller_scratch);
#endif
}

#define ARG(i) ((XLA_FFI_Buffer *)cf->args.args[(i)])
#define RET(i) ((XLA_FFI_Buffer *)cf->rets.rets[(i)])
#define FAIL(code) return ffi_error(cf->api, (code), c.msg)
#define CHECK(expr) do { if (expr) FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT); } while (0)

#endif /* JAXRANK_FFI_GLUE_H_ */
