/*
 * strassen.c -- chained Strassen-Winograd on the CPU (see emublas_strassen.h).
 *
 * The recursion, the fused operand sums, the chain writes and the leaf GEMM
 * calls all run here, so a whole product is one call without the GIL.  The
 * memory-bound passes (sums, chain writes) are split by columns over the
 * pthread pool; the leaf is the caller's BLAS, which threads itself.
 *
 * Chaining (docs/design.md §6.2), per block, with P the chain temporary:
 *   P = P1; C11 = P + beta C11; P += P6; C12 = P + beta C12; P += P7;
 *   C22 = P + beta C22; P -= P4; C21 = P + beta C21;          (chain 1)
 *   P = P5; C22 += P; P += P3; C12 += P;                     (chain 2)
 *   C11 += P2 (leaf with beta = 1 straight into C11)         (chain 3)
 * Every quadrant's first write is in chain 1, so beta is applied there and
 * C is never scaled in a separate pass.  The P += Pi steps are leaf GEMMs
 * (or deeper recursions) with beta = 1.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* posix_memalign, madvise */
#endif

#include <complex.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "emublas_strassen.h"
#include "internal.h"

typedef float _Complex cfloat;
typedef double _Complex cdouble;

static const size_t ESZ[4] = {sizeof(float), sizeof(double), sizeof(cfloat), sizeof(cdouble)};

/* ---- column-split parallel loops ---------------------------------------- */

typedef void (*col_body)(const void *args, int64_t j0, int64_t j1);

typedef struct {
    col_body body;
    const void *args;
    int64_t ncols;
} col_job;

static void col_task(void *ctx, int tid, int nt)
{
    const col_job *job = ctx;
    int64_t j0 = job->ncols * tid / nt, j1 = job->ncols * (tid + 1) / nt;
    if (j0 < j1)
        job->body(job->args, j0, j1);
}

/* Below this many elements a pass runs on one thread: waking a worker costs
 * tens of microseconds, more than the pass itself. */
#define PAR_MIN_ELEMS (1 << 16)

static void run_cols(col_body body, const void *args, int64_t ncols, int64_t elems, int nthreads)
{
    col_job job = {body, args, ncols};
    if (elems < PAR_MIN_ELEMS)
        nthreads = 1;
    if (nthreads > ncols)
        nthreads = (int)ncols;
    emublas__parallel(col_task, &job, nthreads < 1 ? 1 : nthreads);
}

/* ---- fused operand sums --------------------------------------------------- */

typedef struct {
    int side, conj;
    int64_t h, g, rs, cs, ldo;
    const void *X;
    void *out[4];
} sums_args;

/* Element formulas; side 0: S1..S4 from A, side 1: T1..T4 from B. */
#define SUMS_A(x11, x12, x21, x22, o0, o1, o2, o3) \
    do {                                           \
        __typeof__(x11) s1_ = (x21) + (x22);       \
        __typeof__(x11) s2_ = s1_ - (x11);         \
        o0 = s1_;                                  \
        o1 = s2_;                                  \
        o2 = (x11) - (x21);                        \
        o3 = (x12) - s2_;                          \
    } while (0)
#define SUMS_B(x11, x12, x21, x22, o0, o1, o2, o3) \
    do {                                           \
        __typeof__(x11) t1_ = (x12) - (x11);       \
        __typeof__(x11) t2_ = (x22) - t1_;         \
        o0 = t1_;                                  \
        o1 = t2_;                                  \
        o2 = (x22) - (x12);                        \
        o3 = t2_ - (x21);                          \
    } while (0)

/* Unit row stride: columns are contiguous and the loops vectorize (complex
 * data comes here as real data with twice the rows). */
#define DEFINE_SUMS_CONTIG(NAME, T)                                                      \
    static void NAME(const void *vp, int64_t j0, int64_t j1)                             \
    {                                                                                    \
        const sums_args *p = vp;                                                         \
        const int64_t h = p->h, cs = p->cs, ld = p->ldo;                                 \
        const T *x11 = p->X, *x12 = x11 + p->g * cs, *x21 = x11 + h, *x22 = x12 + h;     \
        for (int64_t j = j0; j < j1; j++) {                                              \
            const T *restrict a = x11 + j * cs, *restrict b = x12 + j * cs;              \
            const T *restrict c = x21 + j * cs, *restrict d = x22 + j * cs;              \
            T *restrict o0 = (T *)p->out[0] + j * ld, *restrict o1 = (T *)p->out[1] + j * ld; \
            T *restrict o2 = (T *)p->out[2] + j * ld, *restrict o3 = (T *)p->out[3] + j * ld; \
            if (p->side == 0)                                                            \
                for (int64_t i = 0; i < h; i++)                                          \
                    SUMS_A(a[i], b[i], c[i], d[i], o0[i], o1[i], o2[i], o3[i]);          \
            else                                                                         \
                for (int64_t i = 0; i < h; i++)                                          \
                    SUMS_B(a[i], b[i], c[i], d[i], o0[i], o1[i], o2[i], o3[i]);          \
        }                                                                                \
    }

/* Any strides (transposed quadrants), optional conjugation: square tiles so
 * that both the strided reads and the column writes stay in cache. */
#define SUMS_TILE 32
#define DEFINE_SUMS_GATHER(NAME, T, CJ)                                                  \
    static void NAME(const void *vp, int64_t j0, int64_t j1)                             \
    {                                                                                    \
        const sums_args *p = vp;                                                         \
        const int64_t h = p->h, rs = p->rs, cs = p->cs, ld = p->ldo;                     \
        const T *x11 = p->X, *x12 = x11 + p->g * cs, *x21 = x11 + h * rs;                \
        const T *x22 = x21 + p->g * cs;                                                  \
        T *o0 = p->out[0], *o1 = p->out[1], *o2 = p->out[2], *o3 = p->out[3];            \
        const int cj = p->conj;                                                          \
        for (int64_t jj = j0; jj < j1; jj += SUMS_TILE) {                                \
            const int64_t je = jj + SUMS_TILE < j1 ? jj + SUMS_TILE : j1;                \
            for (int64_t ii = 0; ii < h; ii += SUMS_TILE) {                              \
                const int64_t ie = ii + SUMS_TILE < h ? ii + SUMS_TILE : h;              \
                for (int64_t i = ii; i < ie; i++)                                        \
                    for (int64_t j = jj; j < je; j++) {                                  \
                        const int64_t x = i * rs + j * cs, o = i + j * ld;               \
                        T a = x11[x], b = x12[x], c = x21[x], d = x22[x];                \
                        if (cj) {                                                        \
                            a = CJ(a);                                                   \
                            b = CJ(b);                                                   \
                            c = CJ(c);                                                   \
                            d = CJ(d);                                                   \
                        }                                                                \
                        if (p->side == 0)                                                \
                            SUMS_A(a, b, c, d, o0[o], o1[o], o2[o], o3[o]);              \
                        else                                                             \
                            SUMS_B(a, b, c, d, o0[o], o1[o], o2[o], o3[o]);              \
                    }                                                                    \
            }                                                                            \
        }                                                                                \
    }

#define NOCONJ(x) (x)
DEFINE_SUMS_CONTIG(sums_contig_s, float)
DEFINE_SUMS_CONTIG(sums_contig_d, double)
DEFINE_SUMS_GATHER(sums_gather_s, float, NOCONJ)
DEFINE_SUMS_GATHER(sums_gather_d, double, NOCONJ)
DEFINE_SUMS_GATHER(sums_gather_c, cfloat, conjf)
DEFINE_SUMS_GATHER(sums_gather_z, cdouble, conj)

int emublas_strassen_sums(int dtype, int side, int64_t h, int64_t g,
                          const void *X, int64_t rs, int64_t cs, int conj,
                          void *out0, void *out1, void *out2, void *out3,
                          int64_t ldo, int nthreads)
{
    if (dtype < 0 || dtype > 3 || (side != 0 && side != 1) || h < 0 || g < 0 || ldo < h ||
        ldo < 1)
        return EMUBLAS_EINVAL;
    if (h == 0 || g == 0)
        return EMUBLAS_OK;
    if (!X || !out0 || !out1 || !out2 || !out3)
        return EMUBLAS_EINVAL;
    sums_args p = {side, conj && dtype >= 2, h, g, rs, cs, ldo, X, {out0, out1, out2, out3}};
    col_body body;
    if (rs == 1 && !p.conj) {
        if (dtype >= 2) { /* complex as interleaved reals: twice the rows */
            p.h *= 2;
            p.cs *= 2;
            p.ldo *= 2;
        }
        body = (dtype == 0 || dtype == 2) ? sums_contig_s : sums_contig_d;
    } else {
        static const col_body gather[4] = {sums_gather_s, sums_gather_d, sums_gather_c,
                                           sums_gather_z};
        body = gather[dtype];
    }
    run_cols(body, &p, g, h * g, nthreads);
    return EMUBLAS_OK;
}

/* ---- chain writes: C = S + beta*C ----------------------------------------- */

typedef struct {
    int64_t m, lds, ldc;
    const void *S;
    void *C;
    double br, bi; /* beta */
} upd_args;

#define DEFINE_UPDATE_REAL(NAME, T)                                              \
    static void NAME(const void *vp, int64_t j0, int64_t j1)                     \
    {                                                                            \
        const upd_args *p = vp;                                                  \
        const T beta = (T)p->br;                                                 \
        for (int64_t j = j0; j < j1; j++) {                                      \
            const T *restrict s = (const T *)p->S + j * p->lds;                  \
            T *restrict c = (T *)p->C + j * p->ldc;                              \
            if (beta == 0)                                                       \
                memcpy(c, s, (size_t)p->m * sizeof(T));                          \
            else if (beta == 1)                                                  \
                for (int64_t i = 0; i < p->m; i++)                               \
                    c[i] += s[i];                                                \
            else                                                                 \
                for (int64_t i = 0; i < p->m; i++)                               \
                    c[i] = s[i] + beta * c[i];                                   \
        }                                                                        \
    }

/* Complex beta with a nonzero imaginary part, the product written out (no
 * C99 Annex G special-value handling: BLAS does not do it either). */
#define DEFINE_UPDATE_CPLX(NAME, R)                                              \
    static void NAME(const void *vp, int64_t j0, int64_t j1)                     \
    {                                                                            \
        const upd_args *p = vp;                                                  \
        const R br = (R)p->br, bi = (R)p->bi;                                    \
        for (int64_t j = j0; j < j1; j++) {                                      \
            const R *restrict s = (const R *)p->S + 2 * j * p->lds;              \
            R *restrict c = (R *)p->C + 2 * j * p->ldc;                          \
            for (int64_t i = 0; i < 2 * p->m; i += 2) {                          \
                const R cr = c[i], ci = c[i + 1];                                \
                c[i] = s[i] + (br * cr - bi * ci);                               \
                c[i + 1] = s[i + 1] + (br * ci + bi * cr);                       \
            }                                                                    \
        }                                                                        \
    }

DEFINE_UPDATE_REAL(update_s, float)
DEFINE_UPDATE_REAL(update_d, double)
DEFINE_UPDATE_CPLX(update_c, float)
DEFINE_UPDATE_CPLX(update_z, double)

static void read_scalar(int dtype, const void *x, double *re, double *im)
{
    switch (dtype) {
    case 0: *re = *(const float *)x; *im = 0; break;
    case 1: *re = *(const double *)x; *im = 0; break;
    case 2: *re = ((const float *)x)[0]; *im = ((const float *)x)[1]; break;
    default: *re = ((const double *)x)[0]; *im = ((const double *)x)[1]; break;
    }
}

int emublas_strassen_update(int dtype, int64_t m, int64_t n, const void *beta,
                            const void *S, int64_t lds, void *C, int64_t ldc,
                            int nthreads)
{
    if (dtype < 0 || dtype > 3 || m < 0 || n < 0 || lds < m || ldc < m || !beta)
        return EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!S || !C)
        return EMUBLAS_EINVAL;
    upd_args p = {m, lds, ldc, S, C, 0, 0};
    read_scalar(dtype, beta, &p.br, &p.bi);
    col_body body;
    if (dtype < 2 || p.bi == 0) {
        if (dtype >= 2) { /* real beta: complex as interleaved reals */
            p.m *= 2;
            p.lds *= 2;
            p.ldc *= 2;
        }
        body = (dtype == 0 || dtype == 2) ? update_s : update_d;
    } else {
        body = dtype == 2 ? update_c : update_z;
    }
    run_cols(body, &p, n, m * n, nthreads);
    return EMUBLAS_OK;
}

/* ---- workspace kept between calls ----------------------------------------- */

static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
static void *ws_cache;
static size_t ws_cache_bytes;

#define WS_ALIGN ((size_t)2 << 20) /* huge-page aligned: fewer TLB misses and faults */

static void *ws_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, WS_ALIGN, bytes) != 0)
        return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE); /* best effort */
#endif
    return p;
}

/* The cached block when it is free and large enough (held: *owned = 0 and
 * ws_lock stays locked until ws_put), else a fresh one (*owned = 1). */
static void *ws_get(size_t bytes, int *owned)
{
    if (pthread_mutex_trylock(&ws_lock) == 0) {
        if (ws_cache_bytes < bytes) {
            free(ws_cache);
            ws_cache = ws_alloc(bytes);
            ws_cache_bytes = ws_cache ? bytes : 0;
        }
        if (ws_cache) {
            *owned = 0;
            return ws_cache;
        }
        pthread_mutex_unlock(&ws_lock);
    }
    *owned = 1;
    return ws_alloc(bytes);
}

static void ws_put(void *p, int owned)
{
    if (owned)
        free(p);
    else
        pthread_mutex_unlock(&ws_lock);
}

int64_t emublas_strassen_release(void)
{
    pthread_mutex_lock(&ws_lock);
    int64_t bytes = (int64_t)ws_cache_bytes;
    free(ws_cache);
    ws_cache = NULL;
    ws_cache_bytes = 0;
    pthread_mutex_unlock(&ws_lock);
    return bytes;
}

/* ---- the recursion -------------------------------------------------------- */

typedef void (*gemm_fn)(const char *, const char *, const int *, const int *, const int *,
                        const void *, const void *, const int *, const void *, const int *,
                        const void *, void *, const int *);

/* op(X) of a column-major block: element (i, j) of op(X) is at
 * p[i + j*ld] (t == 0) or p[j + i*ld] (t == 1, 2; conjugated for 2). */
typedef struct {
    const char *p;
    int64_t ld;
    int t;
} opnd;

typedef struct {
    char *S[4], *T[4], *P; /* operand sums and the chain temporary */
    int64_t lds, ldt, ldp;
} level_ws;

typedef struct {
    int dt;
    size_t esz;
    gemm_fn gemm;
    int nthreads;
    int64_t *writes;
    unsigned char one[16], zero[16];
    level_ws ws[EMUBLAS_STRASSEN_MAX_LEVELS];
} driver;

static opnd sub(const driver *d, opnd x, int64_t r0, int64_t c0)
{
    const int64_t off = x.t == 0 ? r0 + c0 * x.ld : c0 + r0 * x.ld;
    x.p += off * (int64_t)d->esz;
    return x;
}

static void leaf(const driver *d, opnd A, opnd B, int64_t m, int64_t n, int64_t k,
                 const void *alpha, const void *beta, char *C, int64_t ldc)
{
    static const char code[3] = {'N', 'T', 'C'};
    if (m <= 0 || n <= 0)
        return;
    const int im = (int)m, in = (int)n, ik = (int)k;
    const int la = (int)A.ld, lb = (int)B.ld, lc = (int)ldc;
    d->gemm(&code[A.t], &code[B.t], &im, &in, &ik, alpha, A.p, &la, B.p, &lb, beta, C, &lc);
}

static void chain_write(driver *d, int depth, int64_t m, int64_t n, const void *beta,
                        const char *S, int64_t lds, char *C, int64_t ldc)
{
    emublas_strassen_update(d->dt, m, n, beta, S, lds, C, ldc, d->nthreads);
    if (d->writes)
        d->writes[depth]++;
}

static void negate(int dt, const void *x, unsigned char out[16])
{
    switch (dt) {
    case 0: *(float *)out = -*(const float *)x; break;
    case 1: *(double *)out = -*(const double *)x; break;
    case 2: for (int i = 0; i < 2; i++) ((float *)out)[i] = -((const float *)x)[i]; break;
    default: for (int i = 0; i < 2; i++) ((double *)out)[i] = -((const double *)x)[i]; break;
    }
}

static void mul(driver *d, int depth, int lev, opnd A, opnd B, int64_t m, int64_t n,
                int64_t k, const void *alpha, const void *beta, char *C, int64_t ldc)
{
    if (m <= 0 || n <= 0)
        return;
    if (lev == 0 || m < 2 || n < 2 || k < 2) {
        leaf(d, A, B, m, n, k, alpha, beta, C, ldc);
        return;
    }
    const int64_t me = m & ~(int64_t)1, ne = n & ~(int64_t)1, ke = k & ~(int64_t)1;
    const int64_t esz = (int64_t)d->esz;
    if (me != m || ne != n || ke != k) {
        /* peel: the even core by Strassen, the last row/column/inner index by thin GEMMs */
        mul(d, depth, lev, A, B, me, ne, ke, alpha, beta, C, ldc);
        if (ke != k)
            leaf(d, sub(d, A, 0, ke), sub(d, B, ke, 0), me, ne, k - ke, alpha, d->one, C, ldc);
        if (ne != n)
            leaf(d, A, sub(d, B, 0, ne), me, n - ne, k, alpha, beta, C + ne * ldc * esz, ldc);
        if (me != m)
            leaf(d, sub(d, A, me, 0), B, m - me, n, k, alpha, beta, C + me * esz, ldc);
        return;
    }
    const int64_t h = m / 2, g = k / 2, w = n / 2;
    const level_ws *ws = &d->ws[depth];
    emublas_strassen_sums(d->dt, 0, h, g, A.p, A.t ? A.ld : 1, A.t ? 1 : A.ld, A.t == 2,
                          ws->S[0], ws->S[1], ws->S[2], ws->S[3], ws->lds, d->nthreads);
    emublas_strassen_sums(d->dt, 1, g, w, B.p, B.t ? B.ld : 1, B.t ? 1 : B.ld, B.t == 2,
                          ws->T[0], ws->T[1], ws->T[2], ws->T[3], ws->ldt, d->nthreads);
    const opnd a11 = A, a12 = sub(d, A, 0, g), a22 = sub(d, A, h, g);
    const opnd b11 = B, b21 = sub(d, B, g, 0), b22 = sub(d, B, g, w);
    opnd s[4], t[4];
    for (int i = 0; i < 4; i++) {
        s[i] = (opnd){ws->S[i], ws->lds, 0};
        t[i] = (opnd){ws->T[i], ws->ldt, 0};
    }
    char *c11 = C, *c12 = C + w * ldc * esz, *c21 = C + h * esz, *c22 = c12 + h * esz;
    char *P = ws->P;
    const int64_t ldp = ws->ldp;
    unsigned char neg_alpha[16];
    negate(d->dt, alpha, neg_alpha);
    const int nx = lev - 1, dn = depth + 1;
    /* chain 1: P1, P1+P6, P1+P6+P7, P1+P6+P7-P4; the first write of each quadrant applies beta */
    mul(d, dn, nx, a11, b11, h, w, g, alpha, d->zero, P, ldp);
    chain_write(d, depth, h, w, beta, P, ldp, c11, ldc);
    mul(d, dn, nx, s[1], t[1], h, w, g, alpha, d->one, P, ldp);
    chain_write(d, depth, h, w, beta, P, ldp, c12, ldc);
    mul(d, dn, nx, s[2], t[2], h, w, g, alpha, d->one, P, ldp);
    chain_write(d, depth, h, w, beta, P, ldp, c22, ldc);
    mul(d, dn, nx, a22, t[3], h, w, g, neg_alpha, d->one, P, ldp);
    chain_write(d, depth, h, w, beta, P, ldp, c21, ldc);
    /* chain 2: P5, P5+P3 */
    mul(d, dn, nx, s[0], t[0], h, w, g, alpha, d->zero, P, ldp);
    chain_write(d, depth, h, w, d->one, P, ldp, c22, ldc);
    mul(d, dn, nx, s[3], b22, h, w, g, alpha, d->one, P, ldp);
    chain_write(d, depth, h, w, d->one, P, ldp, c12, ldc);
    /* chain 3: P2 straight into C11 */
    mul(d, dn, nx, a12, b21, h, w, g, alpha, d->one, c11, ldc);
    if (d->writes)
        d->writes[depth]++;
}

/* Leading dimension of a temporary: whole cache lines, and not a multiple of
 * 4 KiB, whose columns would all map to the same cache sets. */
static int64_t pad_ld(int64_t rows, size_t esz)
{
    int64_t bytes = (rows < 1 ? 1 : rows) * (int64_t)esz;
    bytes = (bytes + 63) / 64 * 64;
    if (bytes % 4096 == 0)
        bytes += 64;
    return bytes / (int64_t)esz;
}

static size_t round_page(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

int emublas_strassen_gemm(int dtype, void *gemm, int trans_a, int trans_b,
                          int64_t m, int64_t n, int64_t k, const void *alpha,
                          const void *A, int64_t lda, const void *B, int64_t ldb,
                          const void *beta, void *C, int64_t ldc, int levels,
                          int nthreads, int64_t *writes, int64_t *ws_bytes)
{
    if (dtype < 0 || dtype > 3 || !gemm || trans_a < 0 || trans_a > 2 || trans_b < 0 ||
        trans_b > 2 || m < 0 || n < 0 || k < 0 || levels < 0 ||
        levels > EMUBLAS_STRASSEN_MAX_LEVELS || !alpha || !beta)
        return EMUBLAS_EINVAL;
    const int64_t rows_a = trans_a ? k : m, rows_b = trans_b ? n : k;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX || lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) ||
        ldc < (m > 1 ? m : 1))
        return EMUBLAS_EINVAL;
    if (writes)
        memset(writes, 0, sizeof(int64_t) * (size_t)levels);
    if (ws_bytes)
        memset(ws_bytes, 0, sizeof(int64_t) * (size_t)levels);
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!A || !B || !C)
        return EMUBLAS_EINVAL;

    driver d;
    memset(&d, 0, sizeof d);
    d.dt = dtype;
    d.esz = ESZ[dtype];
    d.gemm = (gemm_fn)gemm;
    d.nthreads = nthreads < 1 ? 1 : nthreads;
    d.writes = writes;
    if (dtype == 0)
        *(float *)d.one = 1.0f;
    else if (dtype == 1)
        *(double *)d.one = 1.0;
    else if (dtype == 2)
        ((float *)d.one)[0] = 1.0f;
    else
        ((double *)d.one)[0] = 1.0;

    /* Block sizes are fixed per depth (peeling rounds down, then halves), so
     * each depth gets one workspace that its 7 products reuse in turn. */
    size_t off[EMUBLAS_STRASSEN_MAX_LEVELS], total = 0;
    int depths = 0;
    int64_t bm = m, bn = n, bk = k;
    while (depths < levels && bm >= 2 && bn >= 2 && bk >= 2) {
        const int64_t h = bm / 2, g = bk / 2, w = bn / 2;
        level_ws *ws = &d.ws[depths];
        ws->lds = pad_ld(h, d.esz);
        ws->ldt = pad_ld(g, d.esz);
        ws->ldp = pad_ld(h, d.esz);
        const size_t s_sz = round_page((size_t)(ws->lds * g) * d.esz);
        const size_t t_sz = round_page((size_t)(ws->ldt * w) * d.esz);
        const size_t p_sz = round_page((size_t)(ws->ldp * w) * d.esz);
        off[depths] = total;
        const size_t level_bytes = 4 * s_sz + 4 * t_sz + p_sz;
        if (ws_bytes)
            ws_bytes[depths] = (int64_t)level_bytes;
        total += level_bytes;
        bm = h, bn = w, bk = g;
        depths++;
    }
    int owned = 1;
    char *base = NULL;
    if (total) {
        base = ws_get(total, &owned);
        if (!base)
            return EMUBLAS_ENOMEM;
    }
    bm = m, bn = n, bk = k;
    for (int dp = 0; dp < depths; dp++) {
        level_ws *ws = &d.ws[dp];
        const int64_t h = bm / 2, g = bk / 2, w = bn / 2;
        const size_t s_sz = round_page((size_t)(ws->lds * g) * d.esz);
        const size_t t_sz = round_page((size_t)(ws->ldt * w) * d.esz);
        char *p = base + off[dp];
        for (int i = 0; i < 4; i++, p += s_sz)
            ws->S[i] = p;
        for (int i = 0; i < 4; i++, p += t_sz)
            ws->T[i] = p;
        ws->P = p;
        bm = h, bn = w, bk = g;
    }
    const opnd a = {A, lda, trans_a}, b = {B, ldb, trans_b};
    mul(&d, 0, depths, a, b, m, n, k, alpha, beta, C, ldc);
    if (total)
        ws_put(base, owned);
    return EMUBLAS_OK;
}
