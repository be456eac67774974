/*
 * ozaki_finalize.c -- the last pass of Ozaki scheme II: the CRT sum's
 * symmetric representative, unscaling, alpha/beta and the write-out, with the
 * per-entry accuracy certificate and its float64 fallback (emublas_cpu.h),
 * AVX-512, AVX2 and portable C in one fixed operation order (see ozaki.h).  Entries the
 * certificate sends to the fallback are recomputed after the pass, row by row.
 */
#pragma GCC optimize("fp-contract=off") /* see ozaki.h */

#include "ozaki.h"

/* ---- CRT finalize ------------------------------------------------------------ */

enum { OUT_F32 = 0, OUT_F64 = 1, OUT_C64 = 2, OUT_C128 = 3 };

typedef struct {
    int64_t m, n;
    const double *ra, *ia; /* each part's three accumulator planes, plane apart (ia NULL: real) */
    int64_t plane;
    emublas_oz_crt K;
    const int32_t *rsh, *csh;
    double ar, ai, br, bi;
    int beta0, dtype, uplo, simd, avx2; /* avx2: the AVX2 path (simd 0) */
    char *out;
    int64_t rso, cso;
    emublas_oz_cert *cert; /* NULL: no certificate */
    struct fix_list {       /* per thread: the entries left to the fallback pass */
        int64_t *ij;        /* pairs (i, j) */
        int64_t n, cap;
    } fix[EMUBLAS_MAX_THREADS];
} fin_job;

/* ---- the accuracy certificate (emublas_cpu.h) ------------------------------- */

static inline int floor_log2(double a) /* a > 0, finite */
{
    int e;
    frexp(a, &e);
    return e - 1;
}

/* Whether entry (i, j), reconstructed as (cr, ci) in the units of C', is certified. */
static int cert_ok(const emublas_oz_cert *C, int64_t i, int64_t j, double cr, double ci)
{
    const double re = C->row_err[i], ce = C->col_err[j];
    if (re == INFINITY || ce == INFINITY)
        return 0; /* NaN/Inf in the row or column */
    if (re == -INFINITY || ce == -INFINITY)
        return 1; /* an all-zero row or column: its entries are exact */
    if (C->W && C->W[i + j * C->ldw] == 0)
        return 1; /* no l with x_il y_jl != 0: the entry is an exact zero (sparse, triangular data) */
    const double E = fmax(fmax(re, ce), C->crt_err);
    double B = -INFINITY;
    const double a = fmax(fabs(cr), fabs(ci));
    /* an infinite a or d is an infinite lower bound, as getexp reads it on the SIMD paths
     * (frexp leaves its exponent unspecified there) */
    if (a > 0) {
        const double g = isinf(a) ? INFINITY : (double)(floor_log2(a) - 1);
        if (g >= E)
            B = g;
    }
    if (C->W) {
        const double d = (double)C->W[i + j * C->ldw] - C->row_wsum[i] - C->col_wsum[j];
        if (d > 0)
            B = fmax(B, isinf(d) ? INFINITY
                                 : ((double)C->row_budget[i] + (double)C->col_budget[j]) + (double)(floor_log2(d) - 14));
    }
    return E <= C->target + B;
}

static inline double cert_load(int dtype, const void *p, int64_t off)
{
    return dtype ? ((const double *)p)[off] : (double)((const float *)p)[off];
}

/* One row of a factor for the fallback's dot product: real and imaginary parts (im NULL:
 * real), their element stride and type (0 float32, 1 float64). */
typedef struct {
    const void *re, *im;
    int64_t stride;
    int dtype;
} cert_row;

static cert_row row_of(const emublas_oz_cert *C, const void *re, const void *im, int64_t i, int64_t rs, int64_t cs)
{
    const int64_t off = i * rs * (C->dtype ? 8 : 4);
    return (cert_row){(const char *)re + off, im ? (const char *)im + off : NULL, cs, C->dtype};
}

/* The fallback: entry (i, j) as a float64 dot product of rows x and y of the factors, in
 * order, the rows scaled by 2^si and 2^sj (exactly: the product then comes out in the units
 * of C', where nothing over- or underflows; si = sj = 0 for a row holding NaN/Inf). */
static void cert_dot(const emublas_oz_cert *C, cert_row x, cert_row y, int si, int sj, double *vr, double *vi)
{
    double sr = 0.0, si_ = 0.0;
    const int scaled = si != 0 || sj != 0; /* ldexp(v, 0) is v: no library call per element */
    for (int64_t l = 0; l < C->k; l++) {
        double xr = cert_load(x.dtype, x.re, l * x.stride), yr = cert_load(y.dtype, y.re, l * y.stride);
        if (scaled) {
            xr = ldexp(xr, si);
            yr = ldexp(yr, sj);
        }
        if (!x.im) {
            sr = fma(xr, yr, sr);
            continue;
        }
        double xi = cert_load(x.dtype, x.im, l * x.stride), yi = cert_load(y.dtype, y.im, l * y.stride);
        if (scaled) {
            xi = ldexp(xi, si);
            yi = ldexp(yi, sj);
        }
        if (C->conj_l)
            xi = -xi;
        if (C->conj_r)
            yi = -yi;
        sr = fma(xr, yr, sr);
        sr = fma(-xi, yi, sr);
        si_ = fma(xr, yi, si_);
        si_ = fma(xi, yr, si_);
    }
    *vr = sr;
    *vi = si_;
}

/* Whether an entry cert_ok rejected is recomputed: a row or column holding NaN/Inf (error
 * term +inf) takes the dot product of the original data, native BLAS's pattern; any other
 * is counted and recomputed when asked (cert->fix). */
static int cert_reject(emublas_oz_cert *C, int64_t i, int64_t j)
{
    const int dead = C->row_err[i] == INFINITY || C->col_err[j] == INFINITY;
    if (dead)
        return 1;
    __atomic_fetch_add(&C->uncertified, 1, __ATOMIC_RELAXED);
    return C->fix;
}

/* The recomputed entry from rows x of L and y of R: the dot product as the data stand
 * (v itself, e = 0); where that overflows but the data are finite, again in the units of
 * C' (then alpha can still bring it back). */
/* Whether entry (i, j), whose dot product of the data as they stand is (r, q), is taken
 * again in the units of C': it overflowed, and its row and column are finite. */
static int cert_rescale(const emublas_oz_cert *C, int64_t i, int64_t j, double r, double q)
{
    const int dead = C->row_err[i] == INFINITY || C->col_err[j] == INFINITY;
    return !dead && !(fabs(r) <= DBL_MAX && fabs(q) <= DBL_MAX);
}

static void cert_redo(const emublas_oz_cert *C, int64_t i, int64_t j, cert_row x, cert_row y, int si, int sj,
                      double *cr, double *ci, int *e)
{
    double r, q;
    cert_dot(C, x, y, 0, 0, &r, &q);
    if (cert_rescale(C, i, j, r, q)) {
        cert_dot(C, x, y, si, sj, cr, ci);
        return;
    }
    *cr = r;
    *ci = q;
    *e = 0;
}

/* Entries a thread's list holds at most (16 MiB of pairs): past it, or where the list
 * cannot grow, an entry is recomputed at once, in place (same bits, slower). */
#define FIX_LIST_MAX ((int64_t)1 << 20)

/* Entry (i, j) left to the fallback pass (its output keeps c until then): 1, or 0 when
 * the list is full (the caller then recomputes it at once). */
static int fix_defer(fin_job *J, int tid, int64_t i, int64_t j)
{
    struct fix_list *L = &J->fix[tid];
    if (L->n >= FIX_LIST_MAX)
        return 0;
    if (L->n == L->cap) {
        const int64_t cap = L->cap ? 2 * L->cap : 256;
        int64_t *v = realloc(L->ij, sizeof(int64_t) * 2 * (size_t)cap);
        if (!v)
            return 0;
        L->ij = v;
        L->cap = cap;
    }
    L->ij[2 * L->n] = i;
    L->ij[2 * L->n + 1] = j;
    L->n++;
    return 1;
}

/* A rejected entry recomputed at once from the factors as they lie (no list room). */
static void cert_fail_now(fin_job *J, int64_t i, int64_t j, double *cr, double *ci, int *e)
{
    const emublas_oz_cert *C = J->cert;
    cert_redo(C, i, j, row_of(C, C->Lr, C->Li, i, C->rsl, C->csl), row_of(C, C->Rr, C->Ri, j, C->rsr, C->csr),
              J->rsh[i], J->csh[j], cr, ci, e);
}

/* C' from the three exact sums at p (see emublas_cpu.h): the carries, then S - Q*P. */
OZ_INLINE double crt_rep(const fin_job *J, const double *p)
{
    const emublas_oz_crt *K = &J->K;
    double s1 = p[0], s2 = p[J->plane], s3 = p[2 * J->plane];
    double c = rnd(s3 * K->iu2) * K->u2;
    s2 = s2 + c;
    s3 = s3 - c;
    c = rnd(s2 * K->iu1) * K->u1;
    s1 = s1 + c;
    s2 = s2 - c;
    double Q = rnd(s1 * K->Pinv);
    double d1 = fma(-Q, K->P[0], s1), d2 = fma(-Q, K->P[1], s2), d3 = fma(-Q, K->P[2], s3); /* exact */
    double s = d1 + d2, z = s - d1;
    double e = (d1 - (s - z)) + (d2 - z);
    return s + (e + d3);
}

static int clamp_exp(int64_t e)
{
    return e > 4000 ? 4000 : e < -4000 ? -4000 : (int)e;
}

static void fin_load_c(const fin_job *J, int64_t off, double *cr, double *ci)
{
    switch (J->dtype) {
    case OUT_F32: *cr = ((const float *)J->out)[off]; *ci = 0; break;
    case OUT_F64: *cr = ((const double *)J->out)[off]; *ci = 0; break;
    case OUT_C64: *cr = ((const float *)J->out)[2 * off]; *ci = ((const float *)J->out)[2 * off + 1]; break;
    default: *cr = ((const double *)J->out)[2 * off]; *ci = ((const double *)J->out)[2 * off + 1]; break;
    }
}

static void fin_store(const fin_job *J, int64_t off, double re, double im)
{
    switch (J->dtype) {
    case OUT_F32: ((float *)J->out)[off] = (float)re; break;
    case OUT_F64: ((double *)J->out)[off] = re; break;
    case OUT_C64: ((float *)J->out)[2 * off] = (float)re; ((float *)J->out)[2 * off + 1] = (float)im; break;
    default: ((double *)J->out)[2 * off] = re; ((double *)J->out)[2 * off + 1] = im; break;
    }
}

/* out = alpha v + beta c with v = (vr + i vi) 2^e, in the order both paths use: alpha
 * times the reconstructed integer first, then the power of two (exact), so that no
 * intermediate overflows where the result does not (alpha < 1 on a huge product). */
OZ_INLINE void fin_combine(const fin_job *J, double vr, double vi, int e, double cr, double ci, double *re,
                           double *im)
{
    if (J->dtype < OUT_C64) {
        const double x = ldexp(J->ar * vr, e);
        *re = J->beta0 ? x : x + J->br * cr;
        *im = 0;
        return;
    }
    double xr = ldexp(J->ar * vr - J->ai * vi, e), xi = ldexp(J->ar * vi + J->ai * vr, e);
    if (J->beta0) {
        *re = xr;
        *im = xi;
    } else if (J->br == 1.0 && J->bi == 0.0) { /* beta = 1 adds c, as native BLAS: no inf*0 */
        *re = xr + cr;
        *im = xi + ci;
    } else {
        *re = xr + (J->br * cr - J->bi * ci);
        *im = xi + (J->br * ci + J->bi * cr);
    }
}

/* Entry (i, j) on the portable path (also the AVX2 path's last 1-3 rows of a column). */
OZ_INLINE void fin_entry(fin_job *J, int tid, int64_t i, int64_t j)
{
    int64_t a = i + j * J->m, off = i * J->rso + j * J->cso;
    int e = clamp_exp(-((int64_t)J->rsh[i] + (int64_t)J->csh[j]));
    double vr = crt_rep(J, J->ra + a);
    double vi = J->ia ? crt_rep(J, J->ia + a) : 0.0;
    if (J->cert && !cert_ok(J->cert, i, j, vr, vi) && cert_reject(J->cert, i, j)) {
        if (fix_defer(J, tid, i, j))
            return;
        cert_fail_now(J, i, j, &vr, &vi, &e);
    }
    double cr = 0, ci = 0, re, im;
    if (!J->beta0)
        fin_load_c(J, off, &cr, &ci);
    fin_combine(J, vr, vi, e, cr, ci, &re, &im);
    fin_store(J, off, re, im);
}

static void fin_cols_generic(fin_job *J, int tid, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i++)
            fin_entry(J, tid, i, j);
    }
}

#if EMUBLAS_X86
OZ_TARGET OZ_INLINE __m512d vrnd(__m512d z)
{
    return _mm512_roundscale_pd(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* crt_rep on 8 lanes (k) at p. */
OZ_TARGET OZ_INLINE __m512d vcrt_rep(const fin_job *J, const double *p, __mmask8 k)
{
    const emublas_oz_crt *K = &J->K;
    __m512d s1 = _mm512_maskz_loadu_pd(k, p), s2 = _mm512_maskz_loadu_pd(k, p + J->plane);
    __m512d s3 = _mm512_maskz_loadu_pd(k, p + 2 * J->plane);
    __m512d c = _mm512_mul_pd(vrnd(_mm512_mul_pd(s3, _mm512_set1_pd(K->iu2))), _mm512_set1_pd(K->u2));
    s2 = _mm512_add_pd(s2, c);
    s3 = _mm512_sub_pd(s3, c);
    c = _mm512_mul_pd(vrnd(_mm512_mul_pd(s2, _mm512_set1_pd(K->iu1))), _mm512_set1_pd(K->u1));
    s1 = _mm512_add_pd(s1, c);
    s2 = _mm512_sub_pd(s2, c);
    const __m512d Q = vrnd(_mm512_mul_pd(s1, _mm512_set1_pd(K->Pinv)));
    const __m512d d1 = _mm512_fnmadd_pd(Q, _mm512_set1_pd(K->P[0]), s1);
    const __m512d d2 = _mm512_fnmadd_pd(Q, _mm512_set1_pd(K->P[1]), s2);
    const __m512d d3 = _mm512_fnmadd_pd(Q, _mm512_set1_pd(K->P[2]), s3);
    const __m512d s = _mm512_add_pd(d1, d2), z = _mm512_sub_pd(s, d1);
    const __m512d e = _mm512_add_pd(_mm512_sub_pd(d1, _mm512_sub_pd(s, z)), _mm512_sub_pd(d2, z));
    return _mm512_add_pd(s, _mm512_add_pd(e, d3));
}

/* cert_ok for 8 rows i.. of column j (lanes in k): the mask of lanes NOT certified. */
OZ_TARGET OZ_INLINE __mmask8 vcert_bad(const emublas_oz_cert *C, int64_t i, int64_t j, __mmask8 k, __m512d cr,
                                        __m512d ci)
{
    const double ce = C->col_err[j];
    if (ce == INFINITY)
        return k;
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    const __m512d re = _mm512_mask_loadu_pd(ninf, k, C->row_err + i);
    const __mmask8 dead = _mm512_cmp_pd_mask(re, _mm512_set1_pd(INFINITY), _CMP_EQ_OQ);
    if (ce == -INFINITY)
        return (__mmask8)(k & dead);
    const __mmask8 zero = _mm512_cmp_pd_mask(re, ninf, _CMP_EQ_OQ);
    const __m512d E = _mm512_max_pd(_mm512_max_pd(re, _mm512_set1_pd(ce)), _mm512_set1_pd(C->crt_err));
    const __m512d a = _mm512_max_pd(_mm512_abs_pd(cr), _mm512_abs_pd(ci));
    const __m512d g = _mm512_sub_pd(_mm512_getexp_pd(a), _mm512_set1_pd(1.0)); /* getexp(0) = -inf */
    __m512d B = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(g, E, _CMP_GE_OQ), ninf, g);
    __mmask8 wzero = 0;
    if (C->W) {
        const __m512d w = _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, C->W + i + j * C->ldw));
        wzero = _mm512_cmp_pd_mask(w, _mm512_setzero_pd(), _CMP_EQ_OQ);
        const __m512d d = _mm512_sub_pd(_mm512_sub_pd(w, _mm512_maskz_loadu_pd(k, C->row_wsum + i)),
                                        _mm512_set1_pd(C->col_wsum[j]));
        const __mmask8 pos = _mm512_cmp_pd_mask(d, _mm512_setzero_pd(), _CMP_GT_OQ);
        const __m512d rb = _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, C->row_budget + i));
        const __m512d gw = _mm512_add_pd(_mm512_add_pd(rb, _mm512_set1_pd((double)C->col_budget[j])),
                                         _mm512_sub_pd(_mm512_getexp_pd(d), _mm512_set1_pd(14.0)));
        B = _mm512_mask_max_pd(B, pos, B, gw);
    }
    const __mmask8 ok = _mm512_cmp_pd_mask(E, _mm512_add_pd(_mm512_set1_pd(C->target), B), _CMP_LE_OQ);
    return (__mmask8)(k & (dead | ~(ok | zero | wzero))); /* cert_ok's order: a NaN/Inf row first */
}

OZ_TARGET static void fin_cols_simd(fin_job *J, int tid, int64_t j0, int64_t j1)
{
    const __m512d ar = _mm512_set1_pd(J->ar), ai = _mm512_set1_pd(J->ai);
    const __m512d br = _mm512_set1_pd(J->br), bi = _mm512_set1_pd(J->bi);
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i ilo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i ihi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    const int cplx = J->dtype >= OUT_C64;
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        const __m512d ncs = _mm512_set1_pd(-(double)J->csh[j]);
        for (int64_t i = i0; i < i1; i += 8) {
            const int n = i1 - i < 8 ? (int)(i1 - i) : 8;
            const __mmask8 k = (__mmask8)((1u << n) - 1);
            const int64_t a = i + j * J->m, off = i * J->rso + j * J->cso;
            __m512d rs = _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, J->rsh + i));
            __m512d e = _mm512_sub_pd(ncs, rs);
            __m512d cr_ = vcrt_rep(J, J->ra + a, k);
            __m512d ci_ = J->ia ? vcrt_rep(J, J->ia + a, k) : _mm512_setzero_pd();
            __mmask8 bad = J->cert ? vcert_bad(J->cert, i, j, k, cr_, ci_) : 0, skip = 0;
            if (bad) {
                double br_[8], bi_[8], be_[8];
                _mm512_storeu_pd(br_, cr_);
                _mm512_storeu_pd(bi_, ci_);
                _mm512_storeu_pd(be_, e);
                for (int q = 0; q < n; q++)
                    if ((bad >> q & 1) && cert_reject(J->cert, i + q, j)) {
                        if (fix_defer(J, tid, i + q, j)) {
                            skip |= (__mmask8)(1u << q);
                            continue;
                        }
                        int eq = clamp_exp((int64_t)be_[q]);
                        cert_fail_now(J, i + q, j, &br_[q], &bi_[q], &eq);
                        be_[q] = eq;
                    }
                cr_ = _mm512_loadu_pd(br_);
                ci_ = _mm512_loadu_pd(bi_);
                e = _mm512_loadu_pd(be_);
            }
            const __m512d vr = cr_, vi = ci_; /* alpha first, then the power of two, as fin_combine */
            const int fast = n == 8 && J->rso == 1 && !skip; /* deferred lanes keep c: stored one by one */
            __m512d cr = _mm512_setzero_pd(), ci = cr, re, im;
            if (!J->beta0) {
                if (fast) {
                    switch (J->dtype) {
                    case OUT_F32: cr = _mm512_cvtps_pd(_mm256_loadu_ps((const float *)J->out + off)); break;
                    case OUT_F64: cr = _mm512_loadu_pd((const double *)J->out + off); break;
                    case OUT_C64: {
                        __m512 c = _mm512_loadu_ps((const float *)J->out + 2 * off);
                        __m512d c0 = _mm512_cvtps_pd(_mm512_castps512_ps256(c));
                        __m512d c1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1)));
                        cr = _mm512_permutex2var_pd(c0, even, c1);
                        ci = _mm512_permutex2var_pd(c0, odd, c1);
                        break;
                    }
                    default: {
                        __m512d c0 = _mm512_loadu_pd((const double *)J->out + 2 * off);
                        __m512d c1 = _mm512_loadu_pd((const double *)J->out + 2 * off + 8);
                        cr = _mm512_permutex2var_pd(c0, even, c1);
                        ci = _mm512_permutex2var_pd(c0, odd, c1);
                    }
                    }
                } else {
                    double bufr[8] = {0}, bufi[8] = {0};
                    for (int q = 0; q < n; q++)
                        fin_load_c(J, off + q * J->rso, &bufr[q], &bufi[q]);
                    cr = _mm512_loadu_pd(bufr);
                    ci = _mm512_loadu_pd(bufi);
                }
            }
            if (!cplx) {
                re = _mm512_scalef_pd(_mm512_mul_pd(ar, vr), e);
                if (!J->beta0)
                    re = _mm512_add_pd(re, _mm512_mul_pd(br, cr));
                im = _mm512_setzero_pd();
            } else {
                re = _mm512_scalef_pd(_mm512_sub_pd(_mm512_mul_pd(ar, vr), _mm512_mul_pd(ai, vi)), e);
                im = _mm512_scalef_pd(_mm512_add_pd(_mm512_mul_pd(ar, vi), _mm512_mul_pd(ai, vr)), e);
                if (!J->beta0 && J->br == 1.0 && J->bi == 0.0) { /* as fin_combine */
                    re = _mm512_add_pd(re, cr);
                    im = _mm512_add_pd(im, ci);
                } else if (!J->beta0) {
                    re = _mm512_add_pd(re, _mm512_sub_pd(_mm512_mul_pd(br, cr), _mm512_mul_pd(bi, ci)));
                    im = _mm512_add_pd(im, _mm512_add_pd(_mm512_mul_pd(br, ci), _mm512_mul_pd(bi, cr)));
                }
            }
            if (fast) {
                switch (J->dtype) {
                case OUT_F32: _mm256_storeu_ps((float *)J->out + off, _mm512_cvtpd_ps(re)); break;
                case OUT_F64: _mm512_storeu_pd((double *)J->out + off, re); break;
                case OUT_C64: {
                    __m512d o0 = _mm512_permutex2var_pd(re, ilo, im), o1 = _mm512_permutex2var_pd(re, ihi, im);
                    _mm256_storeu_ps((float *)J->out + 2 * off, _mm512_cvtpd_ps(o0));
                    _mm256_storeu_ps((float *)J->out + 2 * off + 8, _mm512_cvtpd_ps(o1));
                    break;
                }
                default:
                    _mm512_storeu_pd((double *)J->out + 2 * off, _mm512_permutex2var_pd(re, ilo, im));
                    _mm512_storeu_pd((double *)J->out + 2 * off + 8, _mm512_permutex2var_pd(re, ihi, im));
                }
            } else {
                double bufr[8], bufi[8];
                _mm512_storeu_pd(bufr, re);
                _mm512_storeu_pd(bufi, im);
                for (int q = 0; q < n; q++)
                    if (!(skip >> q & 1))
                        fin_store(J, off + q * J->rso, bufr[q], bufi[q]);
            }
        }
    }
}
#endif

#if EMUBLAS_X86
/* ---- AVX2: fin_cols_simd's operations on 4 lanes, whole vectors only (a column's last
 * 1-3 rows go through fin_entry).  What AVX2 lacks is rebuilt exactly: the exponent of
 * getexp from the bits (normal numbers; anything else takes cert_ok), scalef as a product
 * by 2^e (a single rounding, ldexp's result, where 2^e is a normal number; else ldexp). */

OZ_TARGET2 OZ_INLINE __m256d vrnd4(__m256d z)
{
    return _mm256_round_pd(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* crt_rep on 4 lanes at p. */
OZ_TARGET2 OZ_INLINE __m256d vcrt_rep4(const fin_job *J, const double *p)
{
    const emublas_oz_crt *K = &J->K;
    __m256d s1 = _mm256_loadu_pd(p), s2 = _mm256_loadu_pd(p + J->plane), s3 = _mm256_loadu_pd(p + 2 * J->plane);
    __m256d c = _mm256_mul_pd(vrnd4(_mm256_mul_pd(s3, _mm256_set1_pd(K->iu2))), _mm256_set1_pd(K->u2));
    s2 = _mm256_add_pd(s2, c);
    s3 = _mm256_sub_pd(s3, c);
    c = _mm256_mul_pd(vrnd4(_mm256_mul_pd(s2, _mm256_set1_pd(K->iu1))), _mm256_set1_pd(K->u1));
    s1 = _mm256_add_pd(s1, c);
    s2 = _mm256_sub_pd(s2, c);
    const __m256d Q = vrnd4(_mm256_mul_pd(s1, _mm256_set1_pd(K->Pinv)));
    const __m256d d1 = _mm256_fnmadd_pd(Q, _mm256_set1_pd(K->P[0]), s1);
    const __m256d d2 = _mm256_fnmadd_pd(Q, _mm256_set1_pd(K->P[1]), s2);
    const __m256d d3 = _mm256_fnmadd_pd(Q, _mm256_set1_pd(K->P[2]), s3);
    const __m256d s = _mm256_add_pd(d1, d2), z = _mm256_sub_pd(s, d1);
    const __m256d e = _mm256_add_pd(_mm256_sub_pd(d1, _mm256_sub_pd(s, z)), _mm256_sub_pd(d2, z));
    return _mm256_add_pd(s, _mm256_add_pd(e, d3));
}

/* floor_log2 of each lane, a positive normal number (other lanes: garbage). */
OZ_TARGET2 OZ_INLINE __m256d vlog2_4(__m256d a)
{
    const __m256d two52 = _mm256_set1_pd(0x1p52); /* its low bits take the biased exponent */
    const __m256i ex = _mm256_srli_epi64(_mm256_castpd_si256(a), 52);
    const __m256d b = _mm256_castsi256_pd(_mm256_or_si256(ex, _mm256_castpd_si256(two52)));
    return _mm256_sub_pd(b, _mm256_set1_pd(0x1p52 + 1023.0));
}

/* Lanes (bits) of positive numbers that are not normal: subnormal, Inf or NaN. */
OZ_TARGET2 OZ_INLINE int vodd4(__m256d a)
{
    const __m256d sub = _mm256_and_pd(_mm256_cmp_pd(a, _mm256_set1_pd(DBL_MIN), _CMP_LT_OQ),
                                      _mm256_cmp_pd(a, _mm256_setzero_pd(), _CMP_GT_OQ));
    return _mm256_movemask_pd(_mm256_or_pd(sub, _mm256_cmp_pd(a, _mm256_set1_pd(DBL_MAX), _CMP_NLE_UQ)));
}

/* vcert_bad for 4 rows i.. of column j: the lanes (bits) NOT certified. */
OZ_TARGET2 static int vcert_bad4(const emublas_oz_cert *C, int64_t i, int64_t j, __m256d cr, __m256d ci)
{
    const double ce = C->col_err[j];
    if (ce == INFINITY)
        return 0xf;
    const __m256d ninf = _mm256_set1_pd(-INFINITY), zero = _mm256_setzero_pd();
    const __m256d re = _mm256_loadu_pd(C->row_err + i);
    const int dead = _mm256_movemask_pd(_mm256_cmp_pd(re, _mm256_set1_pd(INFINITY), _CMP_EQ_OQ));
    if (ce == -INFINITY)
        return dead;
    const int zrow = _mm256_movemask_pd(_mm256_cmp_pd(re, ninf, _CMP_EQ_OQ));
    const __m256d E = _mm256_max_pd(_mm256_max_pd(re, _mm256_set1_pd(ce)), _mm256_set1_pd(C->crt_err));
    const __m256d sign = _mm256_set1_pd(-0.0);
    const __m256d a = _mm256_max_pd(_mm256_andnot_pd(sign, cr), _mm256_andnot_pd(sign, ci));
    int odd = vodd4(a);
    __m256d g = _mm256_sub_pd(vlog2_4(a), _mm256_set1_pd(1.0));
    g = _mm256_blendv_pd(g, ninf, _mm256_cmp_pd(a, zero, _CMP_EQ_OQ)); /* getexp(0) = -inf */
    __m256d B = _mm256_blendv_pd(ninf, g, _mm256_cmp_pd(g, E, _CMP_GE_OQ));
    int wzero = 0;
    if (C->W) {
        const __m256d w = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(C->W + i + j * C->ldw)));
        wzero = _mm256_movemask_pd(_mm256_cmp_pd(w, zero, _CMP_EQ_OQ));
        const __m256d d = _mm256_sub_pd(_mm256_sub_pd(w, _mm256_loadu_pd(C->row_wsum + i)),
                                        _mm256_set1_pd(C->col_wsum[j]));
        const __m256d pos = _mm256_cmp_pd(d, zero, _CMP_GT_OQ);
        odd |= vodd4(d) & _mm256_movemask_pd(pos);
        const __m256d rb = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(C->row_budget + i)));
        const __m256d gw = _mm256_add_pd(_mm256_add_pd(rb, _mm256_set1_pd((double)C->col_budget[j])),
                                         _mm256_sub_pd(vlog2_4(d), _mm256_set1_pd(14.0)));
        B = _mm256_blendv_pd(B, _mm256_max_pd(B, gw), pos);
    }
    const int ok = _mm256_movemask_pd(_mm256_cmp_pd(E, _mm256_add_pd(_mm256_set1_pd(C->target), B), _CMP_LE_OQ));
    int bad = 0xf & (dead | ~(ok | zrow | wzero)); /* cert_ok's order: a NaN/Inf row first */
    if (odd & ~dead & ~zrow & ~wzero) { /* a subnormal, Inf or NaN that decides: cert_ok's own steps */
        double vr[4], vi[4];
        _mm256_storeu_pd(vr, cr);
        _mm256_storeu_pd(vi, ci);
        for (int q = 0; q < 4; q++)
            if (odd >> q & 1)
                bad = (bad & ~(1 << q)) | (!cert_ok(C, i + q, j, vr[q], vi[q]) << q);
    }
    return bad;
}

/* y 2^e lane by lane, e integral (fin_combine's ldexp): a product by 2^e where every
 * lane's 2^e is a normal number, else ldexp with fin_cols_generic's clamp. */
OZ_TARGET2 OZ_INLINE __m256d vldexp4(__m256d y, __m256d e, __m256d p2, int normal)
{
    if (normal)
        return _mm256_mul_pd(y, p2);
    double b[4], f[4];
    _mm256_storeu_pd(b, y);
    _mm256_storeu_pd(f, e);
    for (int q = 0; q < 4; q++)
        b[q] = ldexp(b[q], clamp_exp((int64_t)f[q]));
    return _mm256_loadu_pd(b);
}

OZ_TARGET2 static void fin_cols_avx2(fin_job *J, int tid, int64_t j0, int64_t j1)
{
    const __m256d ar = _mm256_set1_pd(J->ar), ai = _mm256_set1_pd(J->ai);
    const __m256d br = _mm256_set1_pd(J->br), bi = _mm256_set1_pd(J->bi);
    const __m256d zero = _mm256_setzero_pd();
    const int cplx = J->dtype >= OUT_C64;
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        const __m256d ncs = _mm256_set1_pd(-(double)J->csh[j]);
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) {
            const int64_t a = i + j * J->m, off = i * J->rso + j * J->cso;
            __m256d rs = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(J->rsh + i)));
            __m256d e = _mm256_sub_pd(ncs, rs);
            __m256d cr_ = vcrt_rep4(J, J->ra + a);
            __m256d ci_ = J->ia ? vcrt_rep4(J, J->ia + a) : zero;
            int bad = J->cert ? vcert_bad4(J->cert, i, j, cr_, ci_) : 0, skip = 0;
            if (bad) {
                double br_[4], bi_[4], be_[4];
                _mm256_storeu_pd(br_, cr_);
                _mm256_storeu_pd(bi_, ci_);
                _mm256_storeu_pd(be_, e);
                for (int q = 0; q < 4; q++)
                    if ((bad >> q & 1) && cert_reject(J->cert, i + q, j)) {
                        if (fix_defer(J, tid, i + q, j)) {
                            skip |= 1 << q;
                            continue;
                        }
                        int eq = clamp_exp((int64_t)be_[q]);
                        cert_fail_now(J, i + q, j, &br_[q], &bi_[q], &eq);
                        be_[q] = eq;
                    }
                cr_ = _mm256_loadu_pd(br_);
                ci_ = _mm256_loadu_pd(bi_);
                e = _mm256_loadu_pd(be_);
            }
            const __m256d vr = cr_, vi = ci_; /* alpha first, then the power of two, as fin_combine */
            /* 2^e from e + 1023 in the exponent bits, where every lane's is normal */
            const __m256d lo = _mm256_cmp_pd(e, _mm256_set1_pd(-1022.0), _CMP_GE_OQ);
            const __m256d hi = _mm256_cmp_pd(e, _mm256_set1_pd(1023.0), _CMP_LE_OQ);
            const int normal = _mm256_movemask_pd(_mm256_and_pd(lo, hi)) == 0xf;
            const __m256d p2 = _mm256_castsi256_pd(
                _mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(e, _mm256_set1_pd(0x1p52 + 1023.0))), 52));
            const int fast = J->rso == 1 && !skip; /* deferred lanes keep c: stored one by one */
            __m256d cr = zero, ci = zero, re, im;
            if (!J->beta0) {
                if (fast) {
                    switch (J->dtype) {
                    case OUT_F32: cr = _mm256_cvtps_pd(_mm_loadu_ps((const float *)J->out + off)); break;
                    case OUT_F64: cr = _mm256_loadu_pd((const double *)J->out + off); break;
                    case OUT_C64: {
                        const __m256 c = _mm256_loadu_ps((const float *)J->out + 2 * off);
                        const __m256d c0 = _mm256_cvtps_pd(_mm256_castps256_ps128(c));
                        const __m256d c1 = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
                        /* (r0 i0 r1 i1), (r2 i2 r3 i3) -> (r0 r2 r1 r3) -> (r0 r1 r2 r3) */
                        cr = _mm256_permute4x64_pd(_mm256_unpacklo_pd(c0, c1), 0xd8);
                        ci = _mm256_permute4x64_pd(_mm256_unpackhi_pd(c0, c1), 0xd8);
                        break;
                    }
                    default: {
                        const __m256d c0 = _mm256_loadu_pd((const double *)J->out + 2 * off);
                        const __m256d c1 = _mm256_loadu_pd((const double *)J->out + 2 * off + 4);
                        cr = _mm256_permute4x64_pd(_mm256_unpacklo_pd(c0, c1), 0xd8);
                        ci = _mm256_permute4x64_pd(_mm256_unpackhi_pd(c0, c1), 0xd8);
                    }
                    }
                } else {
                    double bufr[4] = {0}, bufi[4] = {0};
                    for (int q = 0; q < 4; q++)
                        fin_load_c(J, off + q * J->rso, &bufr[q], &bufi[q]);
                    cr = _mm256_loadu_pd(bufr);
                    ci = _mm256_loadu_pd(bufi);
                }
            }
            if (!cplx) {
                re = vldexp4(_mm256_mul_pd(ar, vr), e, p2, normal);
                if (!J->beta0)
                    re = _mm256_add_pd(re, _mm256_mul_pd(br, cr));
                im = zero;
            } else {
                re = vldexp4(_mm256_sub_pd(_mm256_mul_pd(ar, vr), _mm256_mul_pd(ai, vi)), e, p2, normal);
                im = vldexp4(_mm256_add_pd(_mm256_mul_pd(ar, vi), _mm256_mul_pd(ai, vr)), e, p2, normal);
                if (!J->beta0 && J->br == 1.0 && J->bi == 0.0) { /* as fin_combine */
                    re = _mm256_add_pd(re, cr);
                    im = _mm256_add_pd(im, ci);
                } else if (!J->beta0) {
                    re = _mm256_add_pd(re, _mm256_sub_pd(_mm256_mul_pd(br, cr), _mm256_mul_pd(bi, ci)));
                    im = _mm256_add_pd(im, _mm256_add_pd(_mm256_mul_pd(br, ci), _mm256_mul_pd(bi, cr)));
                }
            }
            if (fast) {
                switch (J->dtype) {
                case OUT_F32: _mm_storeu_ps((float *)J->out + off, _mm256_cvtpd_ps(re)); break;
                case OUT_F64: _mm256_storeu_pd((double *)J->out + off, re); break;
                case OUT_C64: {
                    /* (r0 i0 r2 i2), (r1 i1 r3 i3) -> (r0 i0 r1 i1), (r2 i2 r3 i3) */
                    const __m256d t0 = _mm256_unpacklo_pd(re, im), t1 = _mm256_unpackhi_pd(re, im);
                    const __m128 o0 = _mm256_cvtpd_ps(_mm256_permute2f128_pd(t0, t1, 0x20));
                    const __m128 o1 = _mm256_cvtpd_ps(_mm256_permute2f128_pd(t0, t1, 0x31));
                    _mm256_storeu_ps((float *)J->out + 2 * off, _mm256_set_m128(o1, o0));
                    break;
                }
                default: {
                    const __m256d t0 = _mm256_unpacklo_pd(re, im), t1 = _mm256_unpackhi_pd(re, im);
                    _mm256_storeu_pd((double *)J->out + 2 * off, _mm256_permute2f128_pd(t0, t1, 0x20));
                    _mm256_storeu_pd((double *)J->out + 2 * off + 4, _mm256_permute2f128_pd(t0, t1, 0x31));
                }
                }
            } else {
                double bufr[4], bufi[4];
                _mm256_storeu_pd(bufr, re);
                _mm256_storeu_pd(bufi, im);
                for (int q = 0; q < 4; q++)
                    if (!(skip >> q & 1))
                        fin_store(J, off + q * J->rso, bufr[q], bufi[q]);
            }
        }
        for (; i < i1; i++)
            fin_entry(J, tid, i, j);
    }
}
#endif

static void fin_task(void *ctx, int tid, int nt)
{
    fin_job *J = ctx;
    int64_t j0, j1;
    split_cols(J->m, J->n, J->uplo, tid, nt, &j0, &j1);
#if EMUBLAS_X86
    if (J->simd) {
        fin_cols_simd(J, tid, j0, j1);
        return;
    }
    if (J->avx2) {
        fin_cols_avx2(J, tid, j0, j1);
        return;
    }
#endif
    fin_cols_generic(J, tid, j0, j1);
}

/* ---- the fallback pass ---------------------------------------------------------
 * The deferred entries, sorted by row, recomputed with each row of L copied once into a
 * contiguous buffer (and each row of R that is not contiguous as it is needed): a row of a
 * column-major factor lies a whole column apart element to element, so reading it afresh
 * for every entry of the row cost a cache miss per element.  Same arithmetic as in place:
 * the copies are exact (float32 to float64), the dot products run in the same order. */

typedef struct {
    fin_job *J;
    const int64_t *ij; /* sorted pairs */
    int64_t n;
} fix_job;

static int cmp_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* The pairs ij reordered, stably, by p[0] (by_col 0) or by p[1] / div (by_col 1), keys
 * below nkeys: a counting sort, linear in the entries (qsort's comparisons of a million
 * entries cost a tenth of their recomputation).  0 where there is no memory for it (ij
 * unchanged). */
static int sort_pairs(int64_t *ij, int64_t total, int by_col, int64_t div, int64_t nkeys)
{
    int64_t *tmp = malloc(sizeof(int64_t) * 2 * (size_t)total), *at = calloc((size_t)nkeys + 1, sizeof(int64_t));
    if (!tmp || !at) {
        free(tmp);
        free(at);
        return 0;
    }
    for (int64_t q = 0; q < total; q++)
        at[(by_col ? ij[2 * q + 1] / div : ij[2 * q]) + 1]++;
    for (int64_t u = 0; u < nkeys; u++)
        at[u + 1] += at[u];
    for (int64_t q = 0; q < total; q++) {
        const int64_t d = at[by_col ? ij[2 * q + 1] / div : ij[2 * q]]++;
        tmp[2 * d] = ij[2 * q];
        tmp[2 * d + 1] = ij[2 * q + 1];
    }
    memcpy(ij, tmp, sizeof(int64_t) * 2 * (size_t)total);
    free(tmp);
    free(at);
    return 1;
}

/* Row x of a factor (re, im strided) copied into buf (2k doubles: re, then im). */
static cert_row copy_row(const emublas_oz_cert *C, cert_row x, double *buf)
{
    for (int64_t l = 0; l < C->k; l++)
        buf[l] = cert_load(x.dtype, x.re, l * x.stride);
    if (x.im)
        for (int64_t l = 0; l < C->k; l++)
            buf[C->k + l] = cert_load(x.dtype, x.im, l * x.stride);
    return (cert_row){buf, x.im ? buf + C->k : NULL, 1, 1};
}

/* Row x as a contiguous float64 row: itself where it is one, else its copy in buf. */
static cert_row pack_row(const emublas_oz_cert *C, cert_row x, double *buf)
{
    if (!buf || (x.dtype == 1 && x.stride == 1))
        return x;
    return copy_row(C, x, buf);
}

/* Entry (i, j) written from its recomputed value (vr, vi) in the units given by e. */
static void fix_write(fin_job *J, int64_t i, int64_t j, double vr, double vi, int e)
{
    double cr = 0, ci = 0, re, im;
    const int64_t off = i * J->rso + j * J->cso;
    if (!J->beta0)
        fin_load_c(J, off, &cr, &ci);
    fin_combine(J, vr, vi, e, cr, ci, &re, &im);
    fin_store(J, off, re, im);
}

#if EMUBLAS_X86
/* Entries of one row recomputed together: eight per vector, up to four vectors on AVX-512,
 * four per vector and up to four vectors a pass on AVX2 (independent fma chains, so that
 * the fma latency is hidden). */
#define FIX_W 32

/* The unscaled dot products of row x of L with rows js[0 .. w) of R, one lane per entry:
 * lane t runs cert_dot's fma sequence for entry (i, js[t]) with si = sj = 0, so its value
 * is cert_dot's bit for bit.  The rows of R are first copied into yb interleaved (element
 * l of row t at l * FIX_W + t; 2 k FIX_W doubles, real parts then imaginary), unused lanes
 * zero.  G: vectors in use, (w + 7) / 8. */
OZ_TARGET OZ_INLINE void fix_dots_g(const emublas_oz_cert *C, cert_row x, const double *ybr, const double *ybi,
                                    int G, double *vr, double *vi)
{
    __m512d sr[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    __m512d si[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    for (int64_t l = 0; l < C->k; l++) {
        const __m512d a = _mm512_set1_pd(cert_load(x.dtype, x.re, l * x.stride));
        const double *yr = ybr + l * FIX_W;
        if (!x.im) {
            for (int g = 0; g < G; g++)
                sr[g] = _mm512_fmadd_pd(a, _mm512_loadu_pd(yr + 8 * g), sr[g]);
            continue;
        }
        double xi = cert_load(x.dtype, x.im, l * x.stride);
        if (C->conj_l)
            xi = -xi;
        const __m512d b = _mm512_set1_pd(xi), nb = _mm512_set1_pd(-xi);
        const double *yi = ybi + l * FIX_W;
        for (int g = 0; g < G; g++) {
            const __m512d vyr = _mm512_loadu_pd(yr + 8 * g), vyi = _mm512_loadu_pd(yi + 8 * g);
            sr[g] = _mm512_fmadd_pd(a, vyr, sr[g]);
            sr[g] = _mm512_fmadd_pd(nb, vyi, sr[g]);
            si[g] = _mm512_fmadd_pd(a, vyi, si[g]);
            si[g] = _mm512_fmadd_pd(b, vyr, si[g]);
        }
    }
    for (int g = 0; g < G; g++) {
        _mm512_storeu_pd(vr + 8 * g, sr[g]);
        _mm512_storeu_pd(vi + 8 * g, si[g]);
    }
}

/* Rows js[0 .. w) of R into yb, interleaved (element l of row t at l * FIX_W + t; real
 * parts, then the imaginary parts, conjugated where asked, k FIX_W further), unused lanes
 * zero. */
static void fix_pack(const emublas_oz_cert *C, const int64_t *js, int w, double *yb)
{
    const int64_t k = C->k;
    double *ybr = yb, *ybi = yb + k * FIX_W;
    for (int t = 0; t < FIX_W; t++) {
        if (t >= w) {
            for (int64_t l = 0; l < k; l++)
                ybr[l * FIX_W + t] = ybi[l * FIX_W + t] = 0.0;
            continue;
        }
        const cert_row y = row_of(C, C->Rr, C->Ri, js[t], C->rsr, C->csr);
        for (int64_t l = 0; l < k; l++)
            ybr[l * FIX_W + t] = cert_load(y.dtype, y.re, l * y.stride);
        if (y.im)
            for (int64_t l = 0; l < k; l++) {
                const double v = cert_load(y.dtype, y.im, l * y.stride);
                ybi[l * FIX_W + t] = C->conj_r ? -v : v;
            }
    }
}

/* The dot products of row x with the w rows packed in yb (fix_pack's layout). */
OZ_TARGET static void fix_dots(const emublas_oz_cert *C, cert_row x, int w, const double *yb, double *vr,
                               double *vi)
{
    const double *ybr = yb, *ybi = yb + C->k * FIX_W;
    /* one instance per vector count, so that the accumulators stay in registers */
    switch ((w + 7) / 8) {
    case 1:
        fix_dots_g(C, x, ybr, ybi, 1, vr, vi);
        break;
    case 2:
        fix_dots_g(C, x, ybr, ybi, 2, vr, vi);
        break;
    case 3:
        fix_dots_g(C, x, ybr, ybi, 3, vr, vi);
        break;
    default:
        fix_dots_g(C, x, ybr, ybi, 4, vr, vi);
    }
}

/* fix_dots_g on AVX2: lanes of G vectors of 4 (G <= 4) at ybr, ybi (fix_pack's layout),
 * each lane the same fma sequence. */
OZ_TARGET2 OZ_INLINE void fix_dots_g4(const emublas_oz_cert *C, cert_row x, const double *ybr, const double *ybi,
                                      int G, double *vr, double *vi)
{
    __m256d sr[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    __m256d si[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    for (int64_t l = 0; l < C->k; l++) {
        const __m256d a = _mm256_set1_pd(cert_load(x.dtype, x.re, l * x.stride));
        const double *yr = ybr + l * FIX_W;
        if (!x.im) {
            for (int g = 0; g < G; g++)
                sr[g] = _mm256_fmadd_pd(a, _mm256_loadu_pd(yr + 4 * g), sr[g]);
            continue;
        }
        double xi = cert_load(x.dtype, x.im, l * x.stride);
        if (C->conj_l)
            xi = -xi;
        const __m256d b = _mm256_set1_pd(xi), nb = _mm256_set1_pd(-xi);
        const double *yi = ybi + l * FIX_W;
        for (int g = 0; g < G; g++) {
            const __m256d vyr = _mm256_loadu_pd(yr + 4 * g), vyi = _mm256_loadu_pd(yi + 4 * g);
            sr[g] = _mm256_fmadd_pd(a, vyr, sr[g]);
            sr[g] = _mm256_fmadd_pd(nb, vyi, sr[g]);
            si[g] = _mm256_fmadd_pd(a, vyi, si[g]);
            si[g] = _mm256_fmadd_pd(b, vyr, si[g]);
        }
    }
    for (int g = 0; g < G; g++) {
        _mm256_storeu_pd(vr + 4 * g, sr[g]);
        _mm256_storeu_pd(vi + 4 * g, si[g]);
    }
}

/* fix_dots on AVX2: up to four vectors (16 lanes) per pass over row x. */
OZ_TARGET2 static void fix_dots_avx2(const emublas_oz_cert *C, cert_row x, int w, const double *yb, double *vr,
                                     double *vi)
{
    const double *ybr = yb, *ybi = yb + C->k * FIX_W;
    const int nv = (w + 3) / 4;
    for (int g0 = 0; g0 < nv; g0 += 4) {
        const int o = 4 * g0;
        switch (nv - g0 < 4 ? nv - g0 : 4) { /* one instance per vector count: accumulators in registers */
        case 1:
            fix_dots_g4(C, x, ybr + o, ybi + o, 1, vr + o, vi + o);
            break;
        case 2:
            fix_dots_g4(C, x, ybr + o, ybi + o, 2, vr + o, vi + o);
            break;
        case 3:
            fix_dots_g4(C, x, ybr + o, ybi + o, 3, vr + o, vi + o);
            break;
        default:
            fix_dots_g4(C, x, ybr + o, ybi + o, 4, vr + o, vi + o);
        }
    }
}

/* fix_dots on the path the job runs (AVX-512 or AVX2). */
static void fix_dots_job(const fin_job *J, cert_row x, int w, const double *yb, double *vr, double *vi)
{
    if (J->simd)
        fix_dots(J->cert, x, w, yb, vr, vi);
    else
        fix_dots_avx2(J->cert, x, w, yb, vr, vi);
}

/* One entry of the fallback from its unscaled dot product (cr, ci): cert_redo's choice
 * (rescaled from x and R's row where the plain product overflows), then written. */
static void fix_finish(fin_job *J, int64_t i, int64_t j, cert_row x, double cr, double ci, double *rb)
{
    const emublas_oz_cert *C = J->cert;
    int e = clamp_exp(-((int64_t)J->rsh[i] + (int64_t)J->csh[j]));
    if (cert_rescale(C, i, j, cr, ci)) /* as cert_redo */
        cert_dot(C, x, pack_row(C, row_of(C, C->Rr, C->Ri, j, C->rsr, C->csr), rb), J->rsh[i], J->csh[j], &cr, &ci);
    else
        e = 0;
    fix_write(J, i, j, cr, ci, e);
}

/* Entries ij[q0 .. q1) of row i (x its packed row), FIX_W at a time: R's rows packed into
 * yb, the dot products on AVX-512 or AVX2. */
static void fix_row_simd(fin_job *J, const int64_t *ij, int64_t q0, int64_t q1, cert_row x, double *yb, double *rb)
{
    int64_t js[FIX_W];
    double vr[FIX_W], vi[FIX_W];
    for (int64_t q = q0; q < q1; q += FIX_W) {
        const int w = (int)(q1 - q < FIX_W ? q1 - q : FIX_W);
        for (int t = 0; t < w; t++)
            js[t] = ij[2 * (q + t) + 1];
        fix_pack(J->cert, js, w, yb);
        fix_dots_job(J, x, w, yb, vr, vi);
        for (int t = 0; t < w; t++)
            fix_finish(J, ij[2 * q], js[t], x, vr[t], x.im ? vi[t] : 0.0, rb);
    }
}
#endif

/* One entry one by one: its rows as cert_redo reads them. */
static void fix_one(fin_job *J, int64_t i, int64_t j, cert_row x, double *rb)
{
    const emublas_oz_cert *C = J->cert;
    const cert_row y = pack_row(C, row_of(C, C->Rr, C->Ri, j, C->rsr, C->csr), rb);
    int e = clamp_exp(-((int64_t)J->rsh[i] + (int64_t)J->csh[j]));
    double vr, vi;
    cert_redo(C, i, j, x, y, J->rsh[i], J->csh[j], &vr, &vi, &e);
    fix_write(J, i, j, vr, vi, e);
}

/* [a, b) of n sorted entries for thread tid of nt, cut where key changes between entries. */
static void fix_share(const int64_t *ij, int64_t n, int tid, int nt, int64_t (*key)(const int64_t *),
                      int64_t *a, int64_t *b)
{
    int64_t lo = n * tid / nt, hi = n * (tid + 1) / nt;
    while (lo > 0 && lo < n && key(ij + 2 * lo) == key(ij + 2 * lo - 2))
        lo++;
    while (hi > 0 && hi < n && key(ij + 2 * hi) == key(ij + 2 * hi - 2))
        hi++;
    *a = lo;
    *b = hi;
}

static int64_t key_row(const int64_t *p) { return p[0]; }

/* Entries sorted by row: each row of L copied once; on AVX-512 or AVX2 a row's entries
 * several at a time, with the rows of R they need copied for them. */
static void fix_task(void *ctx, int tid, int nt)
{
    fix_job *F = ctx;
    fin_job *J = F->J;
    const emublas_oz_cert *C = J->cert;
    int64_t a, b;
    fix_share(F->ij, F->n, tid, nt, key_row, &a, &b);
    const size_t len = sizeof(double) * 2 * (size_t)(C->k > 0 ? C->k : 1);
    double *lb = malloc(len), *rb = malloc(len); /* NULL: the rows as they lie (slower, same bits) */
#if EMUBLAS_X86
    double *yb = J->simd || J->avx2 ? malloc(len * FIX_W) : NULL; /* NULL: one by one */
#endif
    for (int64_t q = a; q < b;) {
        const int64_t i = F->ij[2 * q];
        int64_t q1 = q + 1;
        while (q1 < b && F->ij[2 * q1] == i)
            q1++;
        const cert_row x = pack_row(C, row_of(C, C->Lr, C->Li, i, C->rsl, C->csl), lb);
#if EMUBLAS_X86
        if (yb && q1 - q >= 4) {
            fix_row_simd(J, F->ij, q, q1, x, yb, rb);
            q = q1;
            continue;
        }
#endif
        for (; q < q1; q++)
            fix_one(J, i, F->ij[2 * q + 1], x, rb);
    }
#if EMUBLAS_X86
    free(yb);
#endif
    free(lb);
    free(rb);
}

#if EMUBLAS_X86
/* Many entries (at least one per column on average): L's rows and R's rows copied once
 * (lp: row i at i * 2k, real then imaginary parts; rp: fix_pack's layout per block of FIX_W
 * columns, span doubles apart), the entries sorted by column block, then row, and each
 * block's entries of a row computed from the copies, all FIX_W lanes at once:
 * a thread works through one block's rows while the block's copy stays in cache. */
typedef struct {
    fin_job *J;
    const int64_t *ij;
    int64_t n;
    double *lp, *rp;
    int64_t span;
} fix_blocks_job;

static int64_t key_block(const int64_t *p) { return p[1] / FIX_W; }

static int cmp_block(const void *a, const void *b)
{
    const int64_t *x = a, *y = b, gx = key_block(x), gy = key_block(y);
    if (gx != gy)
        return gx < gy ? -1 : 1;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static cert_row lp_row(const fix_blocks_job *F, int64_t i)
{
    const int64_t k = F->J->cert->k;
    const double *r = F->lp + i * 2 * k;
    return (cert_row){r, F->J->cert->Li ? r + k : NULL, 1, 1};
}

static void fix_pack_task(void *ctx, int tid, int nt)
{
    fix_blocks_job *F = ctx;
    const emublas_oz_cert *C = F->J->cert;
    const int64_t m = F->J->m, n = F->J->n, blocks = (n + FIX_W - 1) / FIX_W;
    int64_t js[FIX_W];
    for (int64_t g = blocks * tid / nt; g < blocks * (tid + 1) / nt; g++) {
        const int w = (int)(n - g * FIX_W < FIX_W ? n - g * FIX_W : FIX_W);
        for (int t = 0; t < w; t++)
            js[t] = g * FIX_W + t;
        fix_pack(C, js, w, F->rp + g * F->span);
    }
    for (int64_t i = m * tid / nt; i < m * (tid + 1) / nt; i++)
        copy_row(C, row_of(C, C->Lr, C->Li, i, C->rsl, C->csl), F->lp + i * 2 * C->k);
}

static void fix_blocks_task(void *ctx, int tid, int nt)
{
    fix_blocks_job *F = ctx;
    fin_job *J = F->J;
    int64_t a, b;
    fix_share(F->ij, F->n, tid, nt, key_block, &a, &b);
    double *rb = malloc(sizeof(double) * 2 * (size_t)(J->cert->k > 0 ? J->cert->k : 1));
    double vr[FIX_W], vi[FIX_W];
    for (int64_t q = a; q < b;) {
        const int64_t i = F->ij[2 * q], g = key_block(F->ij + 2 * q);
        int64_t q1 = q + 1;
        while (q1 < b && F->ij[2 * q1] == i && key_block(F->ij + 2 * q1) == g)
            q1++;
        /* all FIX_W lanes even for one entry: four vector chains cost less than one scalar
         * chain and the copy of R's row it needs */
        const cert_row x = lp_row(F, i);
        fix_dots_job(J, x, FIX_W, F->rp + g * F->span, vr, vi);
        for (; q < q1; q++) {
            const int64_t j = F->ij[2 * q + 1];
            fix_finish(J, i, j, x, vr[j - g * FIX_W], x.im ? vi[j - g * FIX_W] : 0.0, rb);
        }
    }
    free(rb);
}

/* fix_blocks_task's run of the sorted-by-row entries ij (re-sorted here); 0 where the
 * copies do not fit in 1 GiB each or cannot be allocated (the caller then runs fix_task). */
static int fix_by_blocks(fin_job *J, int64_t *ij, int64_t total, int ft, int nthreads)
{
    const int64_t k = J->cert->k > 0 ? J->cert->k : 1, blocks = (J->n + FIX_W - 1) / FIX_W;
    const double gib = (double)(1 << 30);
    if (!(J->simd || J->avx2) || total < J->n || (double)blocks * 2.0 * (double)k * FIX_W * 8.0 > gib ||
        (double)J->m * 2.0 * (double)k * 8.0 > gib)
        return 0;
    fix_blocks_job F = {J, ij, total, NULL, NULL, 2 * k * FIX_W};
    F.rp = malloc(sizeof(double) * (size_t)(blocks * F.span));
    F.lp = malloc(sizeof(double) * 2 * (size_t)(J->m * k));
    if (!F.rp || !F.lp) {
        free(F.rp);
        free(F.lp);
        return 0;
    }
    /* by column, row, then block, each stable: cmp_block's order */
    if (!(sort_pairs(ij, total, 1, 1, J->n) && sort_pairs(ij, total, 0, 1, J->m) &&
          sort_pairs(ij, total, 1, FIX_W, blocks)))
        qsort(ij, (size_t)total, 2 * sizeof(int64_t), cmp_block);
    emublas__parallel(fix_pack_task, &F, oz_threads(nthreads, (double)(blocks * F.span + J->m * 2 * k)));
    emublas__parallel(fix_blocks_task, &F, ft);
    free(F.rp);
    free(F.lp);
    return 1;
}
#endif

/* The deferred entries of every thread's list, recomputed; the lists freed. */
static void fix_pass(fin_job *J, int nt, int nthreads)
{
    int64_t total = 0;
    for (int t = 0; t < nt; t++)
        total += J->fix[t].n;
    int64_t *ij = total ? malloc(sizeof(int64_t) * 2 * (size_t)total) : NULL;
    if (total && !ij) { /* no room to merge: each list on its own, in place */
        for (int t = 0; t < nt; t++) {
            fix_job F = {J, J->fix[t].ij, J->fix[t].n};
            fix_task(&F, 0, 1);
        }
    } else if (total) {
        int64_t at = 0;
        for (int t = 0; t < nt; t++) {
            memcpy(ij + 2 * at, J->fix[t].ij, sizeof(int64_t) * 2 * (size_t)J->fix[t].n);
            at += J->fix[t].n;
        }
        int ft = oz_threads(nthreads, (double)total * (double)(J->cert->k > 0 ? J->cert->k : 1) * 4);
        if (ft > total)
            ft = (int)total;
#if EMUBLAS_X86
        if (!fix_by_blocks(J, ij, total, ft, nthreads))
#endif
        {
            /* by column, then row, each stable: cmp_pair's order */
            if (!(sort_pairs(ij, total, 1, 1, J->n) && sort_pairs(ij, total, 0, 1, J->m)))
                qsort(ij, (size_t)total, 2 * sizeof(int64_t), cmp_pair);
            fix_job F = {J, ij, total};
            emublas__parallel(fix_task, &F, ft);
        }
    }
    free(ij);
    for (int t = 0; t < nt; t++)
        free(J->fix[t].ij);
}

int emublas_oz_crt_finalize(int64_t m, int64_t n, const double *re_acc, const double *im_acc, int64_t plane,
                            const emublas_oz_crt *crt, const int32_t *row_shift, const int32_t *col_shift,
                            double alpha_re, double alpha_im, double beta_re, double beta_im, int out_dtype,
                            void *out, int64_t rso, int64_t cso, int uplo, emublas_oz_cert *cert, int nthreads)
{
    if (m < 0 || n < 0 || uplo < 0 || uplo > 2 || out_dtype < 0 || out_dtype > 3)
        return EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!re_acc || !crt || plane < m * n || !row_shift || !col_shift || !out || (im_acc && out_dtype < OUT_C64) ||
        !(crt->Pinv > 0) || !isfinite(crt->P[0]) || !isfinite(crt->P[1]) || !isfinite(crt->P[2]) ||
        !(crt->u1 > 0) || !(crt->u2 > 0) || !isfinite(crt->iu1) || !isfinite(crt->iu2))
        return EMUBLAS_EINVAL;
    const int cplx = out_dtype >= OUT_C64;
    fin_job J = {
        .m = m, .n = n, .ra = re_acc, .ia = im_acc, .plane = plane, .K = *crt,
        .rsh = row_shift, .csh = col_shift,
        .ar = alpha_re, .ai = cplx ? alpha_im : 0.0, .br = beta_re, .bi = cplx ? beta_im : 0.0,
        .dtype = out_dtype, .uplo = uplo, .simd = oz_simd(), .avx2 = oz_avx2(), .out = out, .rso = rso, .cso = cso,
        .cert = cert,
    };
    if (cert && (!cert->row_err || !cert->col_err ||
                 (cert->W && (!cert->row_wsum || !cert->col_wsum || !cert->row_budget || !cert->col_budget ||
                              cert->ldw < m)) ||
                 !cert->Lr || !cert->Rr || (!cert->Li) != (!cert->Ri) || cert->k < 0))
        return EMUBLAS_EINVAL;
    J.beta0 = J.br == 0.0 && J.bi == 0.0;
    const double work = (double)m * (double)n * (uplo ? 0.5 : 1.0) * (cplx ? 32 : 16);
    int nt = oz_threads(nthreads, work);
    if (nt > n)
        nt = (int)n;
    oz_parallel(fin_task, &J, nt, work);
    if (J.cert)
        fix_pass(&J, nt, nthreads);
    return EMUBLAS_OK;
}
