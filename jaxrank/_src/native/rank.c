/*
 * Integer stages of the ranking oracles at the CPU's sort floor.
 *
 * The AP loss-augmented inference (Yue et al., SIGIR 2007, Algorithm 1;
 * Mohapatra, Jawahar, Kumar, NIPS 2014, Algorithms 2-3) and the ROC-area
 * oracle (Joachims, ICML 2005, Algorithm 3) sort order-preserving int32 keys
 * of the scores (jaxrank._src.metrics._sort_key) and count and search in
 * them.  These are those integer stages, as XLA FFI handlers for the CPU:
 *
 *   jaxrank_ap_layout   sorted positives, the selective-ranking candidate
 *                       negatives (Algorithm 3, step 2) and their sort;
 *   jaxrank_ap_expand   interleaving ranks of all negatives, in input order,
 *                       from the per-positive cuts, and n_above;
 *   jaxrank_auc_counts  the swap counts c_i, d_j of the ROC-area oracle.
 *
 * Each returns exactly the integers of the XLA path (jaxrank._src.oracles.ap
 * _ap_layout_xla, _ap_expand_xla; jaxrank._src.oracles.auc._auc_counts_xla) and
 * of the NumPy host kernels they replace, so results are bitwise identical
 * on every path.  Sorts are stable LSD radix sorts (three passes of 11, 11
 * and 10 bits; a pass whose digit is the same for every key is skipped),
 * O(n); ties keep input order.  Buffers are XLA's own (no copy); scratch
 * space is a block kept across calls (scratch_get).  The problems of a
 * batch run in parallel on XLA's CPU thread pool (par_batch, ffi_glue.h;
 * the other workers allocate their own scratch).
 *
 * Plain C99.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_glue.h"

#define KEY_TOP INT32_MAX
#define KEY_MIN INT32_MIN

/* ------------------------------------------------------------------------ */
/* Scratch space                                                            */
/* ------------------------------------------------------------------------ */

/* One process-wide scratch block, reused across calls: a workspace result
 * of the FFI call (or a fresh malloc) is new memory on every call, and at
 * 10^6 entries its page faults cost as much as the kernel itself.  A call
 * takes the block with an atomic exchange (a concurrent call finds the slot
 * empty and uses a block of its own), grows it if needed, and puts it back;
 * a block above SCRATCH_KEEP bytes is freed instead of kept. */
#define SCRATCH_KEEP ((size_t)256 << 20)

typedef struct {
    size_t size;
    /* data follows */
} scratch_t;

#if defined(__GNUC__) || defined(__clang__)
static scratch_t *scratch_slot = NULL;
static scratch_t *slot_take(void) { return __atomic_exchange_n(&scratch_slot, NULL, __ATOMIC_ACQ_REL); }
static scratch_t *slot_put(scratch_t *s) { return __atomic_exchange_n(&scratch_slot, s, __ATOMIC_ACQ_REL); }
#else /* no atomics: no reuse */
static scratch_t *slot_take(void) { return NULL; }
static scratch_t *slot_put(scratch_t *s) { return s; }
#endif

/* A block of at least `bytes` bytes (NULL if out of memory). */
static scratch_t *scratch_get(size_t bytes) {
    scratch_t *s = slot_take();
    if (s != NULL && s->size >= bytes) return s;
    free(s);
    s = (scratch_t *)malloc(sizeof(scratch_t) + (bytes ? bytes : 1));
    if (s != NULL) s->size = bytes;
    return s;
}

static void scratch_release(scratch_t *s) {
    if (s == NULL) return;
    if (s->size > SCRATCH_KEEP) {
        free(s);
        return;
    }
    free(slot_put(s)); /* keep the latest; free the one it replaces */
}

static int32_t *scratch_data(scratch_t *s) { return (int32_t *)(s + 1); }

/* ------------------------------------------------------------------------ */
/* Radix sort and radix select of int32 keys                                */
/* ------------------------------------------------------------------------ */

static inline uint32_t ukey(int32_t k) { return (uint32_t)k ^ 0x80000000u; }

/* Stable ascending sort of keys[0:m] (signed order) with optional payload
 * vals[0:m] (NULL: none).  kt, vt: scratch of m entries (vt unused without
 * vals).  The result is in keys/vals. */
static void radix_sort(int32_t *keys, int32_t *vals, int32_t *kt, int32_t *vt, int64_t m) {
    if (m <= 1) return;
    if (m < 64) { /* insertion sort (stable) */
        for (int64_t i = 1; i < m; i++) {
            const int32_t k = keys[i];
            const int32_t v = vals ? vals[i] : 0;
            int64_t j = i - 1;
            while (j >= 0 && keys[j] > k) {
                keys[j + 1] = keys[j];
                if (vals) vals[j + 1] = vals[j];
                j--;
            }
            keys[j + 1] = k;
            if (vals) vals[j + 1] = v;
        }
        return;
    }
    static const int shift[3] = {0, 11, 22};
    static const uint32_t mask[3] = {0x7FFu, 0x7FFu, 0x3FFu};
    int64_t hist[3][2048];
    memset(hist, 0, sizeof hist);
    for (int64_t i = 0; i < m; i++) {
        const uint32_t u = ukey(keys[i]);
        hist[0][u & 0x7FFu]++;
        hist[1][(u >> 11) & 0x7FFu]++;
        hist[2][u >> 22]++;
    }
    int32_t *ks = keys, *vs = vals, *kd = kt, *vd = vt;
    for (int p = 0; p < 3; p++) {
        int64_t *h = hist[p];
        const int64_t nb = (int64_t)mask[p] + 1;
        int skip = 0;
        for (int64_t b = 0; b < nb; b++) {
            if (h[b] == m) { skip = 1; break; }
            if (h[b] != 0) break;
        }
        if (skip) continue;
        int64_t sum = 0;
        for (int64_t b = 0; b < nb; b++) {
            const int64_t c = h[b];
            h[b] = sum;
            sum += c;
        }
        const int s = shift[p];
        const uint32_t mk = mask[p];
        if (vs) {
            for (int64_t i = 0; i < m; i++) {
                const int64_t at = h[(ukey(ks[i]) >> s) & mk]++;
                kd[at] = ks[i];
                vd[at] = vs[i];
            }
        } else {
            for (int64_t i = 0; i < m; i++) kd[h[(ukey(ks[i]) >> s) & mk]++] = ks[i];
        }
        int32_t *t = ks; ks = kd; kd = t;
        if (vals) { t = vs; vs = vd; vd = t; }
    }
    if (ks != keys) {
        memcpy(keys, ks, (size_t)m * sizeof(int32_t));
        if (vals) memcpy(vals, vs, (size_t)m * sizeof(int32_t));
    }
}

/* The k-th smallest (1-based, 1 <= k <= m) of a[0:m]; a is overwritten.
 * Radix select: three histogram passes, each over the entries that share
 * the digits found so far, compacted in place.  O(m), exact. */
static int32_t radix_select(int32_t *a, int64_t m, int64_t k) {
    static const int shift[3] = {22, 11, 0};
    static const uint32_t mask[3] = {0x3FFu, 0x7FFu, 0x7FFu};
    uint32_t prefix = 0;
    for (int p = 0; p < 3; p++) {
        int64_t h[2048];
        const int s = shift[p];
        const uint32_t mk = mask[p];
        memset(h, 0, sizeof h);
        for (int64_t i = 0; i < m; i++) h[(ukey(a[i]) >> s) & mk]++;
        int64_t b = 0;
        while (k > h[b]) k -= h[b++];
        prefix |= (uint32_t)b << s;
        int64_t w = 0;
        for (int64_t i = 0; i < m; i++)
            if (((ukey(a[i]) >> s) & mk) == (uint32_t)b) a[w++] = a[i];
        m = w;
    }
    return (int32_t)(prefix ^ 0x80000000u);
}

/* ------------------------------------------------------------------------ */
/* AP layout                                                                */
/* ------------------------------------------------------------------------ */

/* #{i : d_i <= x} with d_i = neg_i ? ak_i : KEY_TOP. */
static int64_t count_le(const int32_t *ak, const uint8_t *neg, int64_t n, int32_t x) {
    uint32_t c = 0; /* n < 2^31: a 32-bit count vectorises */
    for (int64_t i = 0; i < n; i++) c += (uint32_t)((neg[i] ? ak[i] : KEY_TOP) <= x);
    return (int64_t)c;
}

/* #{i : a_i <= x} */
static int64_t count_le_plain(const int32_t *a, int64_t n, int32_t x) {
    uint32_t c = 0;
    for (int64_t i = 0; i < n; i++) c += (uint32_t)(a[i] <= x);
    return (int64_t)c;
}

/* One list of jaxrank._src.oracles.ap._ap_layout (the NumPy twin is
 * _ap_layout_rows).  work: 2n int32. */
static void ap_layout_row(const int32_t *ak, const uint8_t *pos, const uint8_t *neg,
                          const int32_t *tkd, int64_t t_len, int32_t P_, int32_t N,
                          int64_t n, int64_t kp, int64_t kh, int select, int64_t niter,
                          int32_t *psk, int32_t *psrc, int32_t *m_out, int32_t *sk,
                          int32_t *src, int32_t *work) {
    int32_t *kt = work, *vt = work + n;
    /* positives: the first kp in input order, sorted by key */
    int64_t np_ = 0;
    for (int64_t i = 0; i < n && np_ < kp; i++) {
        if (pos[i]) {
            psk[np_] = ak[i];
            psrc[np_] = (int32_t)i;
            np_++;
        }
    }
    radix_sort(psk, psrc, kt, vt, np_);
    for (int64_t a = np_; a < kp; a++) {
        psk[a] = KEY_TOP;
        psrc[a] = 0;
    }
    /* candidate negatives: d_i <= thr (or every valid negative) */
    int32_t thr = KEY_TOP;
    if (select) {
        /* The XLA path's binary search over ranks, step for step.  Its counts
         * #{d <= t_{j-1}} are taken on a window (a, b] of the d values with
         * base = #{d <= a}: a query inside the window counts the window only,
         * and the window shrinks to the side the next queries lie on (the
         * thresholds t_j are non-increasing in j); a query outside it counts
         * all of d again, so every count is exact.  The first window holds
         * the d values up to the largest threshold a query can meet,
         * t_{max(lo, 1) - 1} (with few active negatives, almost none). */
        int32_t *win = work;
        int64_t wn = 0;
        int64_t lo = (int64_t)(P_ - 1 < N ? P_ - 1 : N), hi = N;
        const int64_t j0 = lo > 1 ? lo : 1;
        const int32_t x0 = j0 - 1 < t_len ? tkd[j0 - 1] : KEY_TOP;
        for (int64_t i = 0; i < n; i++) {
            const int32_t d = neg[i] ? ak[i] : KEY_TOP;
            win[wn] = d;
            wn += d <= x0;
        }
        int64_t wa = (int64_t)KEY_MIN - 1, wb = x0, base = 0;
        for (int64_t it = 0; it < niter; it++) {
            const int64_t mid = (lo + hi + 1) / 2;
            const int64_t j = mid > 1 ? mid : 1;
            if (j - 1 >= t_len) break; /* not reached: mid <= N <= n - P */
            const int32_t x = tkd[j - 1];
            int64_t cx;
            const int inside = (int64_t)x >= wa && (int64_t)x <= wb;
            if (inside) {
                cx = base + count_le_plain(win, wn, x);
            } else {
                cx = count_le(ak, neg, n, x);
            }
            if (cx >= j) {
                lo = mid;
                if (inside) { /* next queries: x' <= x */
                    int64_t w = 0;
                    for (int64_t i = 0; i < wn; i++) if (win[i] <= x) win[w++] = win[i];
                    wn = w;
                    wb = x;
                }
            } else {
                hi = mid - 1;
                if (inside) { /* next queries: x' >= x */
                    int64_t w = 0;
                    for (int64_t i = 0; i < wn; i++) if (win[i] > x) win[w++] = win[i];
                    wn = w;
                    base = cx;
                    wa = x;
                }
            }
        }
        thr = lo >= P_ ? tkd[(lo > 1 ? lo : 1) - 1] : KEY_MIN;
        const int64_t h = P_ - 1 < N ? P_ - 1 : N;
        if (kh > 0 && lo < P_ && h > 0) {
            int32_t *d = work;
            for (int64_t i = 0; i < n; i++) d[i] = neg[i] ? ak[i] : KEY_TOP;
            const int32_t kth = radix_select(d, n, h);
            if (kth > thr) thr = kth;
        }
    }
    int64_t m = 0;
    if (select) {
        for (int64_t i = 0; i < n; i++) {
            const int32_t d = neg[i] ? ak[i] : KEY_TOP;
            if (d <= thr) {
                sk[m] = ak[i];
                src[m] = (int32_t)i;
                m++;
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (neg[i]) {
                sk[m] = ak[i];
                src[m] = (int32_t)i;
                m++;
            }
        }
    }
    radix_sort(sk, src, kt, vt, m);
    for (int64_t i = m; i < n; i++) {
        sk[i] = KEY_TOP;
        src[i] = 0;
    }
    *m_out = (int32_t)m;
}

/* One batch problem of jaxrank_ap_layout (par_batch). */
typedef struct {
    const bctx *c;
    const bview *ak, *pos, *neg, *tkd, *P_, *N, *psk, *psrc, *m, *sk, *src;
    int64_t t_len, n, kp, kh;
    int select;
    int64_t niter;
} layout_batch;

static void layout_one(void *arg, int64_t b, void *scratch) {
    const layout_batch *l = (const layout_batch *)arg;
    const bctx *c = l->c;
    ap_layout_row((const int32_t *)at(c, l->ak, b), (const uint8_t *)at(c, l->pos, b),
                  (const uint8_t *)at(c, l->neg, b), (const int32_t *)at(c, l->tkd, b),
                  l->t_len, *(const int32_t *)at(c, l->P_, b), *(const int32_t *)at(c, l->N, b),
                  l->n, l->kp, l->kh, l->select, l->niter, (int32_t *)at(c, l->psk, b),
                  (int32_t *)at(c, l->psrc, b), (int32_t *)at(c, l->m, b),
                  (int32_t *)at(c, l->sk, b), (int32_t *)at(c, l->src, b), (int32_t *)scratch);
}

/* args: ak [n] s32, pos_valid [n] pred, neg_valid [n] pred, tkd [t] s32,
 *       P_ [] s32, N [] s32
 * rets: psk [kp] s32, psrc [kp] s32, m [] s32, sk [n] s32, src [n] s32
 * attrs: kh, select (0/1), niter */
JAXRANK_EXPORT XLA_FFI_Error *jaxrank_ap_layout(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 6 || cf->rets.size != 5) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank ap_layout: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 3, 1));
    bview ak, pos, neg, tkd, P_, N, psk, psrc, m, sk, src;
    CHECK(view(&c, ARG(0), "keys", 1, XLA_FFI_DataType_S32, &ak));
    CHECK(view(&c, ARG(1), "pos_valid", 1, XLA_FFI_DataType_PRED, &pos));
    CHECK(view(&c, ARG(2), "neg_valid", 1, XLA_FFI_DataType_PRED, &neg));
    CHECK(view(&c, ARG(3), "thresholds", 1, XLA_FFI_DataType_S32, &tkd));
    CHECK(view(&c, ARG(4), "P", 0, XLA_FFI_DataType_S32, &P_));
    CHECK(view(&c, ARG(5), "N", 0, XLA_FFI_DataType_S32, &N));
    CHECK(view(&c, RET(0), "psk", 1, XLA_FFI_DataType_S32, &psk));
    CHECK(view(&c, RET(1), "psrc", 1, XLA_FFI_DataType_S32, &psrc));
    CHECK(view(&c, RET(2), "m", 0, XLA_FFI_DataType_S32, &m));
    CHECK(view(&c, RET(3), "sk", 1, XLA_FFI_DataType_S32, &sk));
    CHECK(view(&c, RET(4), "src", 1, XLA_FFI_DataType_S32, &src));
    const int64_t n = sk.core_dims[0], kp = psk.core_dims[0], t_len = tkd.core_dims[0];
    if (ak.core_dims[0] != n || pos.core_dims[0] != n || neg.core_dims[0] != n ||
        src.core_dims[0] != n || psrc.core_dims[0] != kp) {
        snprintf(c.msg, sizeof c.msg, "ap_layout: inconsistent shapes (n %lld, kp %lld)",
                 (long long)n, (long long)kp);
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    const int64_t kh = attr_int(cf, "kh", 0);
    const int select = (int)attr_int(cf, "select", 0);
    const int64_t niter = attr_int(cf, "niter", 1);
    if (select && t_len < n) {
        snprintf(c.msg, sizeof c.msg, "ap_layout: thresholds need %lld entries", (long long)n);
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    scratch_t *work = scratch_get((size_t)(2 * n) * sizeof(int32_t));
    if (work == NULL) {
        snprintf(c.msg, sizeof c.msg, "ap_layout: out of memory (%lld entries)", (long long)n);
        FAIL(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
    }
    layout_batch lb = {&c, &ak, &pos, &neg, &tkd, &P_, &N, &psk, &psrc, &m, &sk, &src,
                       t_len, n, kp, kh, select, niter};
    par_batch(cf, c.nbatch, layout_one, &lb, (size_t)(2 * n) * sizeof(int32_t), scratch_data(work));
    scratch_release(work);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* AP expand                                                                */
/* ------------------------------------------------------------------------ */

/* One list of jaxrank._src.oracles.ap._ap_expand (NumPy twin:
 * _ap_expand_rows).  work: n + kp + 4 int32. */
static void ap_expand_row(const int32_t *J, int64_t kp, const int32_t *opt_head, int64_t kh,
                          int32_t m, const int32_t *src, const uint8_t *neg, int32_t P,
                          int32_t N, int64_t n, int32_t *out, int32_t *n_above, int32_t *work) {
    const int64_t mb = m < 0 ? 0 : (m > n ? n : m);
    int32_t *cnt = work;             /* [mb + 2] */
    int32_t *hist = work + n + 2;    /* [kp + 2] */
    memset(cnt, 0, (size_t)(mb + 2) * sizeof(int32_t));
    memset(hist, 0, (size_t)(kp + 2) * sizeof(int32_t));
    for (int64_t a = 0; a < kp; a++) {
        int64_t v = J[a];
        v = v < 0 ? 0 : (v > mb + 1 ? mb + 1 : v);
        cnt[v]++;
    }
    for (int64_t i = 0; i < n; i++) out[i] = neg[i] ? P + 1 : 0;
    int64_t h = (int64_t)P - 1 < mb ? (int64_t)P - 1 : mb;
    if (h < 0) h = 0;
    if (h > kh) h = kh;
    int64_t run = 0;
    for (int64_t j = 0; j < mb; j++) {
        run += cnt[j];
        const int32_t o = j < h ? opt_head[j] : (int32_t)(run + 1);
        out[src[j]] = o;
        /* As XLA's scatter-add in _counts_above: a negative index counts from
         * the end, one still out of range is dropped (only reached when the
         * float stage overflowed, e.g. scores near 1e38). */
        const int64_t at = o < 0 ? (int64_t)o + kp + 2 : (int64_t)o;
        if (at >= 0 && at <= kp + 1) hist[at]++;
    }
    hist[(int64_t)P + 1 < kp + 1 ? P + 1 : kp + 1] += N - (int32_t)mb;
    int64_t acc = hist[0];
    for (int64_t a = 1; a <= kp; a++) {
        acc += hist[a];
        n_above[a - 1] = (int32_t)acc;
    }
}

/* One batch problem of jaxrank_ap_expand (par_batch). */
typedef struct {
    const bctx *c;
    const bview *J, *oh, *m, *src, *neg, *P, *N, *out, *nab;
    int64_t n, kp, kh;
} expand_batch;

static void expand_one(void *arg, int64_t b, void *scratch) {
    const expand_batch *e = (const expand_batch *)arg;
    const bctx *c = e->c;
    ap_expand_row((const int32_t *)at(c, e->J, b), e->kp, (const int32_t *)at(c, e->oh, b), e->kh,
                  *(const int32_t *)at(c, e->m, b), (const int32_t *)at(c, e->src, b),
                  (const uint8_t *)at(c, e->neg, b), *(const int32_t *)at(c, e->P, b),
                  *(const int32_t *)at(c, e->N, b), e->n, (int32_t *)at(c, e->out, b),
                  (int32_t *)at(c, e->nab, b), (int32_t *)scratch);
}

/* args: J [kp] s32, opt_head [kh] s32, m [] s32, src [n] s32, neg_valid [n]
 *       pred, P [] s32, N [] s32
 * rets: opt [n] s32, n_above [kp] s32 */
JAXRANK_EXPORT XLA_FFI_Error *jaxrank_ap_expand(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 7 || cf->rets.size != 2) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank ap_expand: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    bview J, oh, m, src, neg, P, N, out, nab;
    CHECK(view(&c, ARG(0), "cuts", 1, XLA_FFI_DataType_S32, &J));
    CHECK(view(&c, ARG(1), "opt_head", 1, XLA_FFI_DataType_S32, &oh));
    CHECK(view(&c, ARG(2), "m", 0, XLA_FFI_DataType_S32, &m));
    CHECK(view(&c, ARG(3), "src", 1, XLA_FFI_DataType_S32, &src));
    CHECK(view(&c, ARG(4), "neg_valid", 1, XLA_FFI_DataType_PRED, &neg));
    CHECK(view(&c, ARG(5), "P", 0, XLA_FFI_DataType_S32, &P));
    CHECK(view(&c, ARG(6), "N", 0, XLA_FFI_DataType_S32, &N));
    CHECK(view(&c, RET(0), "opt", 1, XLA_FFI_DataType_S32, &out));
    CHECK(view(&c, RET(1), "n_above", 1, XLA_FFI_DataType_S32, &nab));
    const int64_t n = out.core_dims[0], kp = J.core_dims[0], kh = oh.core_dims[0];
    if (src.core_dims[0] != n || neg.core_dims[0] != n || nab.core_dims[0] != kp) {
        snprintf(c.msg, sizeof c.msg, "ap_expand: inconsistent shapes (n %lld, kp %lld)",
                 (long long)n, (long long)kp);
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    for (int64_t b = 0; b < c.nbatch; b++) {
        const int32_t *s = (const int32_t *)at(&c, &src, b);
        const int32_t mb = *(const int32_t *)at(&c, &m, b);
        for (int64_t j = 0; j < mb && j < n; j++) {
            if (s[j] < 0 || s[j] >= n) {
                snprintf(c.msg, sizeof c.msg, "ap_expand: src[%lld] out of range",
                         (long long)j);
                FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
            }
        }
    }
    scratch_t *work = scratch_get((size_t)(n + kp + 4) * sizeof(int32_t));
    if (work == NULL) {
        snprintf(c.msg, sizeof c.msg, "ap_expand: out of memory (%lld entries)", (long long)n);
        FAIL(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
    }
    expand_batch eb = {&c, &J, &oh, &m, &src, &neg, &P, &N, &out, &nab, n, kp, kh};
    par_batch(cf, c.nbatch, expand_one, &eb, (size_t)(n + kp + 4) * sizeof(int32_t),
              scratch_data(work));
    scratch_release(work);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* ROC-area swap counts                                                     */
/* ------------------------------------------------------------------------ */

/* First index r in [0, len) with t[r] >= q (left) or t[r] > q (right), else len. */
static int64_t search(const int32_t *t, int64_t len, int32_t q, int right) {
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (right ? t[mid] <= q : t[mid] < q) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One list of jaxrank._src.oracles.auc._auc_counts (NumPy twin: _auc_counts_rows).
 * work: 5n int32. */
static void auc_counts_row(const int32_t *key, const int32_t *qm, const int32_t *qp,
                           const uint8_t *pos, const uint8_t *neg, int64_t n, int32_t *c,
                           int32_t *d, int32_t *work) {
    int32_t *sp = work, *ska = work + n, *src = work + 2 * n, *kt = work + 3 * n,
            *vt = work + 4 * n;
    memset(c, 0, (size_t)n * sizeof(int32_t));
    memset(d, 0, (size_t)n * sizeof(int32_t));
    int64_t P = 0, N = 0;
    int32_t qm_min = KEY_TOP;
    for (int64_t i = 0; i < n; i++) {
        if (pos[i]) {
            sp[P++] = key[i];
            if (qm[i] < qm_min) qm_min = qm[i];
        }
        N += neg[i] != 0;
    }
    if (P == 0 || N == 0) return;
    radix_sort(sp, NULL, kt, NULL, P);
    const int32_t sp0 = sp[0];
    /* negatives that can be swapped with some positive */
    int64_t ma = 0;
    for (int64_t i = 0; i < n; i++) {
        if (neg[i] && (qp[i] > sp0 || key[i] > qm_min)) {
            ska[ma] = key[i];
            src[ma] = (int32_t)i;
            ma++;
        }
    }
    radix_sort(ska, src, kt, vt, ma);
    /* d_j = #{pos i : key_i < qp_j}: in key order qp is non-decreasing, so a
     * moving pointer; a decrease restarts with a binary search (exact). */
    int64_t r = 0;
    int32_t qprev = KEY_MIN;
    for (int64_t t = 0; t < ma; t++) {
        const int32_t q = qp[src[t]];
        if (q < qprev) r = search(sp, P, q, 0);
        while (r < P && sp[r] < q) r++;
        d[src[t]] = (int32_t)r;
        qprev = q;
    }
    for (int64_t i = 0; i < n; i++)
        if (pos[i]) c[i] = (int32_t)(ma - search(ska, ma, qm[i], 1));
}

/* One batch problem of jaxrank_auc_counts (par_batch). */
typedef struct {
    const bctx *c;
    const bview *key, *qm, *qp, *pos, *neg, *co, *dout;
    int64_t n;
} counts_batch;

static void counts_one(void *arg, int64_t b, void *scratch) {
    const counts_batch *k = (const counts_batch *)arg;
    const bctx *c = k->c;
    auc_counts_row((const int32_t *)at(c, k->key, b), (const int32_t *)at(c, k->qm, b),
                   (const int32_t *)at(c, k->qp, b), (const uint8_t *)at(c, k->pos, b),
                   (const uint8_t *)at(c, k->neg, b), k->n, (int32_t *)at(c, k->co, b),
                   (int32_t *)at(c, k->dout, b), (int32_t *)scratch);
}

/* args: key, qm, qp [n] s32, pos, neg [n] pred
 * rets: c [n] s32, d [n] s32 */
JAXRANK_EXPORT XLA_FFI_Error *jaxrank_auc_counts(XLA_FFI_CallFrame *cf) {
    if (metadata_query(cf)) return NULL;
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    bctx c;
    if (cf->args.size != 5 || cf->rets.size != 2) {
        return ffi_error(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "jaxrank auc_counts: wrong number of operands");
    }
    CHECK(init_ctx(&c, cf, 0, 1));
    bview key, qm, qp, pos, neg, co, dout;
    CHECK(view(&c, ARG(0), "keys", 1, XLA_FFI_DataType_S32, &key));
    CHECK(view(&c, ARG(1), "keys - 1/2", 1, XLA_FFI_DataType_S32, &qm));
    CHECK(view(&c, ARG(2), "keys + 1/2", 1, XLA_FFI_DataType_S32, &qp));
    CHECK(view(&c, ARG(3), "pos", 1, XLA_FFI_DataType_PRED, &pos));
    CHECK(view(&c, ARG(4), "neg", 1, XLA_FFI_DataType_PRED, &neg));
    CHECK(view(&c, RET(0), "c", 1, XLA_FFI_DataType_S32, &co));
    CHECK(view(&c, RET(1), "d", 1, XLA_FFI_DataType_S32, &dout));
    const int64_t n = co.core_dims[0];
    if (key.core_dims[0] != n || qm.core_dims[0] != n || qp.core_dims[0] != n ||
        pos.core_dims[0] != n || neg.core_dims[0] != n || dout.core_dims[0] != n) {
        snprintf(c.msg, sizeof c.msg, "auc_counts: inconsistent shapes (n %lld)", (long long)n);
        FAIL(XLA_FFI_Error_Code_INVALID_ARGUMENT);
    }
    scratch_t *work = scratch_get((size_t)(5 * n) * sizeof(int32_t));
    if (work == NULL) {
        snprintf(c.msg, sizeof c.msg, "auc_counts: out of memory (%lld entries)", (long long)n);
        FAIL(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
    }
    counts_batch cb = {&c, &key, &qm, &qp, &pos, &neg, &co, &dout, n};
    par_batch(cf, c.nbatch, counts_one, &cb, (size_t)(5 * n) * sizeof(int32_t), scratch_data(work));
    scratch_release(work);
    return NULL;
}
