/*
 * ozaki_scale.c -- the scaling pass of Ozaki scheme II: per-row statistics of
 * a factor (largest magnitude, sum of squares, sum of magnitudes) and the
 * 7-bit upper-bound matrix ceil(127 |x| / 2^ea) for the accurate mode's
 * bound product.  One read of the input each; rows are split over threads.
 *
 * Rows are the scaled units (rows of op(A), columns of op(B) seen as rows of
 * op(B)^T).  When the input is stored by columns (unit row stride) the loops
 * run down columns and update every row's accumulators, so the inner loop is
 * contiguous either way.  A row holding NaN or Inf gets a non-finite rowmax; sums
 * that overflow or underflow are left to the caller to redo with scaling
 * (they are only inf/0 for rows of extreme magnitude).
 *
 * Where the CPU has AVX-512 both passes run on 8 rows at a time (one lane per
 * row, columns in order, the operations of the scalar code one for one), so
 * they give the same bits as the scalar loops.  Where it has AVX2+FMA only,
 * 4-lane vectors do the same: by columns over blocks of SC_BLK rows with the
 * accumulators in the output arrays, as the scalar code (a few rows swept
 * over all columns would fetch every cache line once per column), by rows on
 * 4 rows with 4x4 transposes; the bounds, entrywise, run along the unit
 * stride.  No contraction (see below): the sums of squares must be a product
 * then a sum, as in the scalar code.
 */
#pragma GCC optimize("fp-contract=off")

#include "ozaki.h"

#if EMUBLAS_X86
#include <immintrin.h>
#define SC_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#define SC_TARGET2 __attribute__((target("avx2,fma")))
#include "simd_avx2.h"
#endif

typedef struct {
    int dtype; /* 0 float32, 1 float64 */
    int64_t rows, cols;
    const char *xr, *xi; /* xi NULL: real data */
    int64_t rsx, csx;    /* strides in real elements */
    double *rowmax, *sumsq, *l1;
    const int32_t *ea;
    int8_t *out;
    int64_t rso, cso;
    int carry; /* row_stats: continue from the given rowmax/sumsq/l1 instead of zero */
} scale_job;

static inline double mag(const scale_job *J, int64_t off)
{
    double re, im = 0.0;
    if (J->dtype == 0) {
        re = ((const float *)J->xr)[off];
        if (J->xi)
            im = ((const float *)J->xi)[off];
    } else {
        re = ((const double *)J->xr)[off];
        if (J->xi)
            im = ((const double *)J->xi)[off];
    }
    if (!J->xi)
        return fabs(re);
    /* sqrt of the sum of squares where that cannot over/underflow; hypot otherwise */
    double s = re * re + im * im;
    return s > 0x1p-1000 && s < 0x1p1000 ? sqrt(s) : hypot(re, im);
}

static void rows_of(int64_t rows, int tid, int nt, int64_t *i0, int64_t *i1)
{
    *i0 = rows * tid / nt;
    *i1 = rows * (tid + 1) / nt;
}

#if EMUBLAS_X86
SC_TARGET static void stats_simd(scale_job *J, int64_t i0, int64_t i1);
SC_TARGET static void bound_simd(scale_job *J, int64_t i0, int64_t i1);
static int sc_simd(void);
SC_TARGET2 static void stats_avx2(scale_job *J, int64_t i0, int64_t i1);
SC_TARGET2 static void bound_avx2(scale_job *J, int64_t i0, int64_t i1);
static int sc_avx2(void);
#endif

/* The statistics of rows [i0, i1): one pass over their columns. */
static void stats_range(scale_job *J, int64_t i0, int64_t i1)
{
#if EMUBLAS_X86
    if (sc_simd()) {
        stats_simd(J, i0, i1);
        return;
    }
    if (sc_avx2()) {
        stats_avx2(J, i0, i1);
        return;
    }
#endif
    for (int64_t i = i0; i < i1 && !J->carry; i++) { /* both branches start from these */
        J->rowmax[i] = 0.0;
        J->sumsq[i] = 0.0;
        J->l1[i] = 0.0;
    }
    if (J->rsx == 1 || J->rsx < J->csx) {
        /* by columns: contiguous down a column, accumulators per row */
        for (int64_t j = 0; j < J->cols; j++)
            for (int64_t i = i0; i < i1; i++) {
                double v = mag(J, i * J->rsx + j * J->csx);
                J->rowmax[i] = v > J->rowmax[i] || v != v ? v : J->rowmax[i];
                J->sumsq[i] += v * v;
                J->l1[i] += v;
            }
    } else {
        for (int64_t i = i0; i < i1; i++) {
            double mx = J->rowmax[i], s2 = J->sumsq[i], s1 = J->l1[i];
            int bad = !(mx <= 1.7976931348623157e308); /* a carried NaN/Inf stays non-finite */
            for (int64_t j = 0; j < J->cols; j++) {
                double v = mag(J, i * J->rsx + j * J->csx);
                bad |= !(v <= 1.7976931348623157e308);
                mx = v > mx ? v : mx;
                s2 += v * v;
                s1 += v;
            }
            J->rowmax[i] = bad ? NAN : mx;
            J->sumsq[i] = s2;
            J->l1[i] = s1;
        }
    }
}

/* 127 |x| 2^-ea rounded up.  127 * 2^-ea overflows for rows of subnormal
 * magnitude (ea < -1016): those rows scale in two steps. */
static inline int8_t bound_of(double v, double f, int32_t ea)
{
    double w = ea < -1000 ? ldexp(v, -ea) * 127.0 : v * f;
    /* at least 1 for any nonzero entry, also one so far below its row's maximum that
     * the product underflows: W_ij = 0 then proves x_il y_jl = 0 for every l */
    return (int8_t)(v > 0 ? fmax(ceil(w), 1.0) : ceil(w));
}

#if EMUBLAS_X86
static int sc_simd(void)
{
    return (emublas__cpu_features() & EMUBLAS__CPU_AVX512_FVLDQBW) && !emublas_oz_force_generic(-1);
}

/* Elements (i0 + q, j) for lanes q of k, as doubles (exactly, for float32). */
SC_TARGET static inline __m512d sc_load(const scale_job *J, const char *X, int64_t i0, int64_t j, __m512i idx,
                                        __mmask8 k)
{
    const int64_t off = i0 * J->rsx + j * J->csx;
    if (J->dtype == 1) {
        const double *p = (const double *)X + off;
        return J->rsx == 1 ? _mm512_maskz_loadu_pd(k, p) : _mm512_mask_i64gather_pd(_mm512_setzero_pd(), k, idx, p, 8);
    }
    const float *p = (const float *)X + off;
    return _mm512_cvtps_pd(J->rsx == 1 ? _mm256_maskz_loadu_ps(k, p)
                                       : _mm512_mask_i64gather_ps(_mm256_setzero_ps(), k, idx, p, 4));
}

/* mag() on lanes k of rows i0.. of column j. */
SC_TARGET static inline __m512d sc_mag(const scale_job *J, int64_t i0, int64_t j, __m512i idx, __mmask8 k)
{
    __m512d re = sc_load(J, J->xr, i0, j, idx, k);
    if (!J->xi)
        return _mm512_abs_pd(re);
    __m512d im = sc_load(J, J->xi, i0, j, idx, k);
    __m512d s = _mm512_add_pd(_mm512_mul_pd(re, re), _mm512_mul_pd(im, im));
    __m512d v = _mm512_sqrt_pd(s);
    const __mmask8 ok = _mm512_cmp_pd_mask(s, _mm512_set1_pd(0x1p-1000), _CMP_GT_OQ) &
                        _mm512_cmp_pd_mask(s, _mm512_set1_pd(0x1p1000), _CMP_LT_OQ);
    if ((ok & k) != k) { /* lanes out of sqrt's safe range: hypot, as mag() */
        double r[8], q[8], out[8];
        _mm512_storeu_pd(r, re);
        _mm512_storeu_pd(q, im);
        _mm512_storeu_pd(out, v);
        for (int l = 0; l < 8; l++)
            if (((k & ~ok) >> l) & 1)
                out[l] = hypot(r[l], q[l]);
        v = _mm512_loadu_pd(out);
    }
    return v;
}

SC_TARGET static void stats_simd(scale_job *J, int64_t i0, int64_t i1)
{
    const int by_cols = J->rsx == 1 || J->rsx < J->csx; /* the scalar code's two NaN/Inf conventions */
    const __m512i idx = _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(J->rsx));
    const __m512d big = _mm512_set1_pd(1.7976931348623157e308);
    for (int64_t i = i0; i < i1; i += 8) {
        const int n = i1 - i < 8 ? (int)(i1 - i) : 8;
        const __mmask8 k = (__mmask8)((1u << n) - 1);
        __m512d mx = _mm512_setzero_pd(), s2 = mx, s1 = mx;
        if (J->carry) {
            mx = _mm512_maskz_loadu_pd(k, J->rowmax + i);
            s2 = _mm512_maskz_loadu_pd(k, J->sumsq + i);
            s1 = _mm512_maskz_loadu_pd(k, J->l1 + i);
        }
        __mmask8 bad = _mm512_cmp_pd_mask(mx, big, _CMP_NLE_UQ);
        for (int64_t j = 0; j < J->cols; j++) {
            __m512d v = sc_mag(J, i, j, idx, k);
            if (by_cols)
                mx = _mm512_mask_mov_pd(
                    mx, _mm512_cmp_pd_mask(v, mx, _CMP_GT_OQ) | _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q), v);
            else {
                bad |= _mm512_cmp_pd_mask(v, big, _CMP_NLE_UQ);
                mx = _mm512_mask_mov_pd(mx, _mm512_cmp_pd_mask(v, mx, _CMP_GT_OQ), v);
            }
            s2 = _mm512_add_pd(s2, _mm512_mul_pd(v, v));
            s1 = _mm512_add_pd(s1, v);
        }
        if (!by_cols)
            mx = _mm512_mask_mov_pd(mx, bad, _mm512_set1_pd(NAN));
        _mm512_mask_storeu_pd(J->rowmax + i, k, mx);
        _mm512_mask_storeu_pd(J->sumsq + i, k, s2);
        _mm512_mask_storeu_pd(J->l1 + i, k, s1);
    }
}

/* bound_of on 8 lanes (rows with ea >= -1000: w = v*f). */
SC_TARGET static void bound_simd(scale_job *J, int64_t i0, int64_t i1)
{
    const __m512i idx = _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(J->rsx));
    const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
    for (int64_t i = i0; i < i1; i += 8) {
        const int n = i1 - i < 8 ? (int)(i1 - i) : 8;
        const __mmask8 k = (__mmask8)((1u << n) - 1);
        double f[8] = {0};
        int tiny = 0;
        for (int q = 0; q < n; q++) {
            tiny |= J->ea[i + q] < -1000;
            f[q] = ldexp(127.0, -J->ea[i + q]);
        }
        if (tiny) { /* subnormal rows: the scalar two-step scaling */
            for (int64_t r = i; r < i + n; r++) {
                const double fr = J->ea[r] < -1000 ? 0.0 : ldexp(127.0, -J->ea[r]);
                for (int64_t j = 0; j < J->cols; j++)
                    J->out[r * J->rso + j * J->cso] = bound_of(mag(J, r * J->rsx + j * J->csx), fr, J->ea[r]);
            }
            continue;
        }
        const __m512d fv = _mm512_loadu_pd(f);
        for (int64_t j = 0; j < J->cols; j++) {
            __m512d v = sc_mag(J, i, j, idx, k);
            __m512d c = _mm512_roundscale_pd(_mm512_mul_pd(v, fv), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
            /* fmax(c, 1) for v > 0 (max_pd gives its second operand for a NaN, as fmax) */
            c = _mm512_mask_max_pd(c, _mm512_cmp_pd_mask(v, zero, _CMP_GT_OQ), c, one);
            int32_t r[8];
            _mm256_storeu_si256((__m256i *)r, _mm512_cvttpd_epi32(c));
            int8_t *o = J->out + i * J->rso + j * J->cso;
            for (int q = 0; q < n; q++)
                o[q * J->rso] = (int8_t)r[q];
        }
    }
}

/* ---- AVX2 ------------------------------------------------------------------ */

static int sc_avx2(void)
{
    return (emublas__cpu_features() & EMUBLAS__CPU_AVX2_FMA) && !sc_simd() && emublas_oz_force_generic(-1) != 1;
}

/* Lanes q < n of a line of 4 elements X[off + q*stride] as doubles (exactly,
 * for float32); idx = q*stride, k64/k32 the lanes as 64/32-bit masks. */
SC_TARGET2 static inline __m256d sc_load4(const scale_job *J, const char *X, int64_t off, int64_t stride,
                                          __m256i idx, __m256i k64, __m128i k32, int n)
{
    if (J->dtype == 1) {
        const double *p = (const double *)X + off;
        if (stride == 1)
            return n == 4 ? _mm256_loadu_pd(p) : _mm256_maskload_pd(p, k64);
        return _mm256_mask_i64gather_pd(_mm256_setzero_pd(), p, idx, _mm256_castsi256_pd(k64), 8);
    }
    const float *p = (const float *)X + off;
    if (stride == 1)
        return _mm256_cvtps_pd(n == 4 ? _mm_loadu_ps(p) : _mm_maskload_ps(p, k32));
    return _mm256_cvtps_pd(_mm256_mask_i64gather_ps(_mm_setzero_ps(), p, idx, _mm_castsi128_ps(k32), 4));
}

/* mag() from the parts of 4 entries (lanes >= n are ignored). */
SC_TARGET2 static inline __m256d sc_cmag(__m256d re, __m256d im, int n)
{
    const __m256d s = _mm256_add_pd(_mm256_mul_pd(re, re), _mm256_mul_pd(im, im));
    __m256d v = _mm256_sqrt_pd(s);
    /* sqrt where mag() takes it, and for 0 + 0i, where hypot gives sqrt's +0 too */
    const __m256d zero = _mm256_setzero_pd();
    const __m256d ok = _mm256_or_pd(
        _mm256_and_pd(_mm256_cmp_pd(s, _mm256_set1_pd(0x1p-1000), _CMP_GT_OQ),
                      _mm256_cmp_pd(s, _mm256_set1_pd(0x1p1000), _CMP_LT_OQ)),
        _mm256_and_pd(_mm256_cmp_pd(re, zero, _CMP_EQ_OQ), _mm256_cmp_pd(im, zero, _CMP_EQ_OQ)));
    const int hy = ~_mm256_movemask_pd(ok) & ((1 << n) - 1);
    if (hy) {
        double r[4], q[4], out[4];
        _mm256_storeu_pd(r, re);
        _mm256_storeu_pd(q, im);
        _mm256_storeu_pd(out, v);
        for (int l = 0; l < 4; l++)
            if ((hy >> l) & 1)
                out[l] = hypot(r[l], q[l]);
        v = _mm256_loadu_pd(out);
    }
    return v;
}

/* mag() of the entries at element offsets off + q*stride, q < n. */
SC_TARGET2 static inline __m256d sc_mag4(const scale_job *J, int64_t off, int64_t stride, __m256i idx, __m256i k64,
                                         __m128i k32, int n)
{
    if (J->xi && n == 4 && stride == 2 && J->xi == J->xr + (J->dtype ? 8 : 4)) {
        /* interleaved complex: 4 (re, im) pairs in one or two loads */
        __m256d re, im;
        avx2_load4_cplx(J->xr + off * (J->dtype ? 8 : 4), J->dtype, &re, &im);
        return sc_cmag(re, im, 4);
    }
    const __m256d re = sc_load4(J, J->xr, off, stride, idx, k64, k32, n);
    if (!J->xi)
        return _mm256_and_pd(re, _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX)));
    return sc_cmag(re, sc_load4(J, J->xi, off, stride, idx, k64, k32, n), n);
}

SC_TARGET2 static inline void sc_masks(int n, __m256i *k64, __m128i *k32)
{
    const __m128i q = _mm_setr_epi32(0, 1, 2, 3);
    *k32 = _mm_cmpgt_epi32(_mm_set1_epi32(n), q);
    *k64 = _mm256_cvtepi32_epi64(*k32);
}

#define SC_BLK 256 /* rows per sweep over the columns when the rows are the unit-stride side */

/* By columns (the scalar code's first loop): a block of rows at a time, every
 * column in order, the accumulators in the output arrays. */
SC_TARGET2 static void stats_cols_avx2(scale_job *J, int64_t i0, int64_t i1)
{
    const __m256i idx = _mm256_setr_epi64x(0, J->rsx, 2 * J->rsx, 3 * J->rsx);
    for (int64_t b0 = i0; b0 < i1; b0 += SC_BLK) {
        const int64_t b1 = i1 - b0 < SC_BLK ? i1 : b0 + SC_BLK;
        if (!J->carry)
            for (int64_t i = b0; i < b1; i++)
                J->rowmax[i] = J->sumsq[i] = J->l1[i] = 0.0;
        const int64_t bf = b0 + ((b1 - b0) & ~(int64_t)3); /* full vectors end */
        __m256i k64, f64;
        __m128i k32, f32;
        sc_masks((int)(b1 - bf), &k64, &k32);
        sc_masks(4, &f64, &f32);
        for (int64_t j = 0; j < J->cols; j++) {
            int64_t i = b0;
            for (; i < bf; i += 4) { /* plain loads and stores: AMD's masked stores are slow */
                const __m256d v = sc_mag4(J, i * J->rsx + j * J->csx, J->rsx, idx, f64, f32, 4);
                const __m256d mx = _mm256_loadu_pd(J->rowmax + i);
                const __m256d gt = _mm256_or_pd(_mm256_cmp_pd(v, mx, _CMP_GT_OQ), _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
                _mm256_storeu_pd(J->rowmax + i, _mm256_blendv_pd(mx, v, gt));
                _mm256_storeu_pd(J->sumsq + i, _mm256_add_pd(_mm256_loadu_pd(J->sumsq + i), _mm256_mul_pd(v, v)));
                _mm256_storeu_pd(J->l1 + i, _mm256_add_pd(_mm256_loadu_pd(J->l1 + i), v));
            }
            if (i < b1) {
                const int n = (int)(b1 - i);
                const __m256d v = sc_mag4(J, i * J->rsx + j * J->csx, J->rsx, idx, k64, k32, n);
                const __m256d mx = _mm256_maskload_pd(J->rowmax + i, k64);
                const __m256d gt = _mm256_or_pd(_mm256_cmp_pd(v, mx, _CMP_GT_OQ), _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
                _mm256_maskstore_pd(J->rowmax + i, k64, _mm256_blendv_pd(mx, v, gt));
                _mm256_maskstore_pd(J->sumsq + i, k64,
                                    _mm256_add_pd(_mm256_maskload_pd(J->sumsq + i, k64), _mm256_mul_pd(v, v)));
                _mm256_maskstore_pd(J->l1 + i, k64, _mm256_add_pd(_mm256_maskload_pd(J->l1 + i, k64), v));
            }
        }
    }
}

/* The scalar code's second loop (by rows) on 4 rows, one lane each. */
typedef struct {
    __m256d mx, s2, s1, bad;
} sc_acc;

SC_TARGET2 static inline void sc_acc_add(sc_acc *A, __m256d v)
{
    A->bad = _mm256_or_pd(A->bad, _mm256_cmp_pd(v, _mm256_set1_pd(1.7976931348623157e308), _CMP_NLE_UQ));
    A->mx = _mm256_blendv_pd(A->mx, v, _mm256_cmp_pd(v, A->mx, _CMP_GT_OQ));
    A->s2 = _mm256_add_pd(A->s2, _mm256_mul_pd(v, v));
    A->s1 = _mm256_add_pd(A->s1, v);
}

SC_TARGET2 static void stats_rows_avx2(scale_job *J, int64_t i0, int64_t i1)
{
    const __m256i idxr = _mm256_setr_epi64x(0, J->rsx, 2 * J->rsx, 3 * J->rsx);
    const __m256i idxc = _mm256_setr_epi64x(0, J->csx, 2 * J->csx, 3 * J->csx);
    /* whole rows of 4 columns at once (then a 4x4 transpose) where they are contiguous */
    const int along = J->csx == 1 || (J->xi && J->csx == 2 && J->xi == J->xr + (J->dtype ? 8 : 4));
    for (int64_t i = i0; i < i1; i += 4) {
        const int n = i1 - i < 4 ? (int)(i1 - i) : 4;
        __m256i k64, f64;
        __m128i k32, f32;
        sc_masks(n, &k64, &k32);
        sc_masks(4, &f64, &f32);
        sc_acc A = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
        if (J->carry) {
            A.mx = _mm256_maskload_pd(J->rowmax + i, k64);
            A.s2 = _mm256_maskload_pd(J->sumsq + i, k64);
            A.s1 = _mm256_maskload_pd(J->l1 + i, k64);
        }
        A.bad = _mm256_cmp_pd(A.mx, _mm256_set1_pd(1.7976931348623157e308), _CMP_NLE_UQ);
        int64_t j = 0;
        if (along && n == 4)
            for (; j + 4 <= J->cols; j += 4) {
                const int64_t off = i * J->rsx + j * J->csx;
                const __m256d m0 = sc_mag4(J, off, J->csx, idxc, f64, f32, 4);
                const __m256d m1 = sc_mag4(J, off + J->rsx, J->csx, idxc, f64, f32, 4);
                const __m256d m2 = sc_mag4(J, off + 2 * J->rsx, J->csx, idxc, f64, f32, 4);
                const __m256d m3 = sc_mag4(J, off + 3 * J->rsx, J->csx, idxc, f64, f32, 4);
                const __m256d t0 = _mm256_unpacklo_pd(m0, m1), t1 = _mm256_unpackhi_pd(m0, m1);
                const __m256d t2 = _mm256_unpacklo_pd(m2, m3), t3 = _mm256_unpackhi_pd(m2, m3);
                sc_acc_add(&A, _mm256_permute2f128_pd(t0, t2, 0x20)); /* column j */
                sc_acc_add(&A, _mm256_permute2f128_pd(t1, t3, 0x20));
                sc_acc_add(&A, _mm256_permute2f128_pd(t0, t2, 0x31));
                sc_acc_add(&A, _mm256_permute2f128_pd(t1, t3, 0x31));
            }
        for (; j < J->cols; j++)
            sc_acc_add(&A, sc_mag4(J, i * J->rsx + j * J->csx, J->rsx, idxr, k64, k32, n));
        _mm256_maskstore_pd(J->rowmax + i, k64, _mm256_blendv_pd(A.mx, _mm256_set1_pd(NAN), A.bad));
        _mm256_maskstore_pd(J->sumsq + i, k64, A.s2);
        _mm256_maskstore_pd(J->l1 + i, k64, A.s1);
    }
}

SC_TARGET2 static void stats_avx2(scale_job *J, int64_t i0, int64_t i1)
{
    if (J->rsx == 1 || J->rsx < J->csx) /* the scalar code's two NaN/Inf conventions */
        stats_cols_avx2(J, i0, i1);
    else
        stats_rows_avx2(J, i0, i1);
}

/* bound_of on 4 lanes (w = v*f): the low bytes of the truncated int32s, as
 * the int8 casts of the scalar code and bound_simd. */
SC_TARGET2 static inline uint32_t bound4(__m256d v, __m256d f)
{
    const __m256d one = _mm256_set1_pd(1.0);
    __m256d c = _mm256_round_pd(_mm256_mul_pd(v, f), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    /* fmax(c, 1) for v > 0 (max_pd gives its second operand for a NaN, as fmax) */
    c = _mm256_blendv_pd(c, _mm256_max_pd(c, one), _mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_GT_OQ));
    const __m128i b = _mm_shuffle_epi8(_mm256_cvttpd_epi32(c), _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1,
                                                                              -1, -1, -1, -1, -1, -1));
    return (uint32_t)_mm_cvtsi128_si32(b);
}

static void bound_row_scalar(scale_job *J, int64_t r)
{
    const double f = J->ea[r] < -1000 ? 0.0 : ldexp(127.0, -J->ea[r]);
    for (int64_t j = 0; j < J->cols; j++)
        J->out[r * J->rso + j * J->cso] = bound_of(mag(J, r * J->rsx + j * J->csx), f, J->ea[r]);
}

/* The bounds are entrywise: lanes run down the unit-stride dimension, rows
 * when the statistics do so (by columns), else along each row. */
SC_TARGET2 static void bound_avx2(scale_job *J, int64_t i0, int64_t i1)
{
    if (J->rsx == 1 || J->rsx < J->csx) {
        const __m256i idx = _mm256_setr_epi64x(0, J->rsx, 2 * J->rsx, 3 * J->rsx);
        double f[SC_BLK];
        for (int64_t b0 = i0; b0 < i1; b0 += SC_BLK) {
            const int64_t b1 = i1 - b0 < SC_BLK ? i1 : b0 + SC_BLK;
            for (int64_t i = b0; i < b1; i++)
                f[i - b0] = J->ea[i] < -1000 ? 0.0 : ldexp(127.0, -J->ea[i]);
            for (int64_t j = 0; j < J->cols; j++)
                for (int64_t i = b0; i < b1; i += 4) {
                    const int n = b1 - i < 4 ? (int)(b1 - i) : 4;
                    int8_t *o = J->out + i * J->rso + j * J->cso;
                    int tiny = 0;
                    for (int q = 0; q < n; q++)
                        tiny |= J->ea[i + q] < -1000;
                    if (tiny) { /* subnormal rows: the scalar two-step scaling */
                        for (int q = 0; q < n; q++)
                            o[q * J->rso] =
                                bound_of(mag(J, (i + q) * J->rsx + j * J->csx), f[i + q - b0], J->ea[i + q]);
                        continue;
                    }
                    __m256i k64;
                    __m128i k32;
                    sc_masks(n, &k64, &k32);
                    const __m256d v = sc_mag4(J, i * J->rsx + j * J->csx, J->rsx, idx, k64, k32, n);
                    const uint32_t u = bound4(v, _mm256_maskload_pd(f + (i - b0), k64));
                    if (n == 4 && J->rso == 1)
                        memcpy(o, &u, 4);
                    else
                        for (int q = 0; q < n; q++)
                            o[q * J->rso] = (int8_t)(u >> (8 * q));
                }
        }
        return;
    }
    const __m256i idx = _mm256_setr_epi64x(0, J->csx, 2 * J->csx, 3 * J->csx);
    __m256i k64;
    __m128i k32;
    sc_masks(4, &k64, &k32);
    for (int64_t i = i0; i < i1; i++) {
        if (J->ea[i] < -1000) {
            bound_row_scalar(J, i);
            continue;
        }
        const double f = ldexp(127.0, -J->ea[i]);
        const __m256d fv = _mm256_set1_pd(f);
        int8_t *o = J->out + i * J->rso;
        int64_t j = 0;
        for (; j + 4 <= J->cols; j += 4) {
            const uint32_t u = bound4(sc_mag4(J, i * J->rsx + j * J->csx, J->csx, idx, k64, k32, 4), fv);
            if (J->cso == 1)
                memcpy(o + j, &u, 4);
            else
                for (int q = 0; q < 4; q++)
                    o[(j + q) * J->cso] = (int8_t)(u >> (8 * q));
        }
        for (; j < J->cols; j++)
            o[j * J->cso] = bound_of(mag(J, i * J->rsx + j * J->csx), f, J->ea[i]);
    }
}
#endif

/* The bound planes of rows [i0, i1), from J->ea. */
static void bound_range(scale_job *J, int64_t i0, int64_t i1)
{
#if EMUBLAS_X86
    if (sc_simd()) {
        bound_simd(J, i0, i1);
        return;
    }
    if (sc_avx2()) {
        bound_avx2(J, i0, i1);
        return;
    }
#endif
    if (J->rsx == 1 || J->rsx < J->csx) {
        double *f = malloc((size_t)(i1 > i0 ? i1 - i0 : 1) * sizeof(double));
        if (!f) { /* no scratch: the row loop below needs none */
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = 0; j < J->cols; j++)
                    J->out[i * J->rso + j * J->cso] =
                        bound_of(mag(J, i * J->rsx + j * J->csx), ldexp(127.0, -J->ea[i]), J->ea[i]);
            return;
        }
        for (int64_t i = i0; i < i1; i++)
            f[i - i0] = J->ea[i] < -1000 ? 0.0 : ldexp(127.0, -J->ea[i]);
        for (int64_t j = 0; j < J->cols; j++)
            for (int64_t i = i0; i < i1; i++)
                J->out[i * J->rso + j * J->cso] = bound_of(mag(J, i * J->rsx + j * J->csx), f[i - i0], J->ea[i]);
        free(f);
    } else {
        for (int64_t i = i0; i < i1; i++) {
            const double f = J->ea[i] < -1000 ? 0.0 : ldexp(127.0, -J->ea[i]);
            for (int64_t j = 0; j < J->cols; j++)
                J->out[i * J->rso + j * J->cso] = bound_of(mag(J, i * J->rsx + j * J->csx), f, J->ea[i]);
        }
    }
}

static void stats_task(void *ctx, int tid, int nt)
{
    scale_job *J = ctx;
    int64_t i0, i1;
    rows_of(J->rows, tid, nt, &i0, &i1);
    stats_range(J, i0, i1);
}

static void bound_task(void *ctx, int tid, int nt)
{
    scale_job *J = ctx;
    int64_t i0, i1;
    rows_of(J->rows, tid, nt, &i0, &i1);
    bound_range(J, i0, i1);
}

/* Bytes of input a block of the fused pass holds, so that its second sweep (the
 * bounds) reads it from the core's cache rather than from memory. */
#define SB_BYTES (192 * 1024)
/* Where the rows are the unit-stride side: 32 to 64 rows a block, within this many
 * bytes (measured best of 8..512 rows on 1024..4096-square float64 and complex128
 * inputs, on a 2-vCPU AVX2 host). */
#define SB_COL_BYTES (2 * 1024 * 1024)

/* Statistics and bounds in one read of the input: the rows are taken in blocks
 * small enough to stay in cache between the two sweeps, each block's statistics
 * then its exponents then its bounds, with the arithmetic of the two separate
 * passes (same bits).  A row holding NaN/Inf gets ea 0 and a zero bound row, as
 * the separate passes give it from the zeroed copy the caller would make. */
static void stats_bound_task(void *ctx, int tid, int nt)
{
    scale_job *J = ctx;
    int64_t i0, i1;
    rows_of(J->rows, tid, nt, &i0, &i1);
    const int64_t blk = oz_block_rows(J->cols * (J->dtype ? 8 : 4) * (J->xi ? 2 : 1), J->rsx, J->csx);
    int32_t *ea = (int32_t *)J->ea;        /* this pass writes the exponents it reads */
    for (int64_t b0 = i0; b0 < i1; b0 += blk) {
        const int64_t b1 = i1 - b0 < blk ? i1 : b0 + blk;
        stats_range(J, b0, b1);
        for (int64_t i = b0; i < b1; i++) {
            int e = 0;
            frexp(J->rowmax[i] <= 1.7976931348623157e308 ? J->rowmax[i] : 0.0, &e);
            ea[i] = e;
        }
        bound_range(J, b0, b1);
        for (int64_t i = b0; i < b1; i++)
            if (!(J->rowmax[i] <= 1.7976931348623157e308)) /* its bounds above came from NaN/Inf */
                for (int64_t j = 0; j < J->cols; j++)
                    J->out[i * J->rso + j * J->cso] = 0;
    }
}

static int threads_for(int nthreads, int64_t rows, int64_t cols)
{
    if (nthreads < 1)
        nthreads = 1;
    if ((double)rows * (double)cols < emublas__par_min((double)(1 << 16)) || rows < 2)
        return 1;
    return nthreads;
}

int emublas_oz_row_stats(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                         int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                         int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !rowmax || !sumsq || !l1 ||
        (rows * cols > 0 && !Xr))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, rowmax, sumsq, l1, NULL, NULL, 0, 0, 0};
    emublas__parallel(stats_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}

int emublas_oz_row_stats_carry(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                               int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                               int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !rowmax || !sumsq || !l1 ||
        (rows * cols > 0 && !Xr))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, rowmax, sumsq, l1, NULL, NULL, 0, 0, 1};
    emublas__parallel(stats_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}

int emublas_oz_bound_int8(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                          int64_t rsx, int64_t csx, const int32_t *ea, int8_t *out, int64_t rso,
                          int64_t cso, int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !ea || (rows * cols > 0 && (!Xr || !out)))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, NULL, NULL, NULL, ea, out, rso, cso, 0};
    emublas__parallel(bound_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}

int emublas_oz_stats_bound(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi, int64_t rsx,
                           int64_t csx, double *rowmax, double *sumsq, double *l1, int32_t *ea, int8_t *out,
                           int64_t rso, int64_t cso, int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !rowmax || !sumsq || !l1 || !ea ||
        (rows * cols > 0 && (!Xr || !out)))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, rowmax, sumsq, l1, ea, out, rso, cso, 0};
    emublas__parallel(stats_bound_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}

/* The plan of rows [i0, i1) from their statistics; the formulas and their order are the
 * GPU's oz_plan (native/cuda/ozaki2.cu) and the header's description. */
static void plan_rows(int64_t i0, int64_t i1, const double *rowmax, const double *sumsq, const double *l1,
                      const int64_t *wmax, double L, double log2_127sq, double safety, double log2k, double kd,
                      double slack, int32_t *shift, double *err, double *wsum, int32_t *budget)
{
    const double big = 1.7976931348623157e308;
    for (int64_t i = i0; i < i1; i++) {
        const double rm = rowmax[i];
        if (!(rm <= big)) {
            shift[i] = EMUBLAS_OZ_DEAD;
            err[i] = INFINITY;
            wsum[i] = 0.0;
            budget[i] = 0;
            continue;
        }
        int ea = 0;
        frexp(rm, &ea);
        double g;
        if (rm == 0.0)
            g = -INFINITY;
        else if (wmax)
            g = wmax[i] > 0 ? (log2((double)wmax[i]) - log2_127sq) + safety : -INFINITY;
        else {
            const double s = sumsq[i];
            g = s > 0.0 && s <= big ? (log2(s) - 2.0 * (double)ea) + safety : log2k + safety;
        }
        const double uu = floor((L - g) * 0.5);
        const int64_t u = uu <= big && uu >= -big ? (int64_t)uu : 0;
        const double s1 = l1[i];
        const int ok1 = s1 <= big;
        const double lg = rm == 0.0 ? -INFINITY : ok1 ? log2(s1) : (double)ea + log2k;
        shift[i] = (int32_t)(u - ea);
        err[i] = ((double)(u - ea) + lg) + slack;
        wsum[i] = ok1 ? (127.0 * ldexp(s1, -ea)) * (1.0 + 0x1p-40) + kd + 1.0 : (127.0 * kd + kd) + 1.0;
        budget[i] = (int32_t)u;
    }
}

int emublas_oz_row_plan(int64_t rows, const double *rowmax, const double *sumsq, const double *l1,
                        const int64_t *wmax, double L, double log2_127sq, double safety, double log2k, double kd,
                        double slack, int32_t *shift, double *err, double *wsum, int32_t *budget)
{
    if (rows < 0 || (rows > 0 && (!rowmax || !sumsq || !l1 || !shift || !err || !wsum || !budget)))
        return EMUBLAS_EINVAL;
    plan_rows(0, rows, rowmax, sumsq, l1, wmax, L, log2_127sq, safety, log2k, kd, slack, shift, err, wsum, budget);
    return EMUBLAS_OK;
}

void oz_stats_plan_rows(int dtype, int64_t cols, const void *Xr, const void *Xi, int64_t rsx, int64_t csx,
                        int64_t i0, int64_t i1, double *rowmax, double *sumsq, double *l1, double L, double safety,
                        double log2k, double kd, double slack, int32_t *shift, double *err, double *wsum,
                        int32_t *budget)
{
    scale_job J = {dtype, i1, cols, Xr, Xi, rsx, csx, rowmax, sumsq, l1, NULL, NULL, 0, 0, 0};
    stats_range(&J, i0, i1);
    plan_rows(i0, i1, rowmax, sumsq, l1, NULL, L, 0.0, safety, log2k, kd, slack, shift, err, wsum, budget);
}

int64_t oz_block_rows(int64_t row_bytes, int64_t rsx, int64_t csx)
{
    int64_t blk = row_bytes > 0 ? SB_BYTES / row_bytes : INT64_MAX / 2;
    blk = blk < 8 ? 8 : blk & ~(int64_t)7; /* whole SIMD lanes of rows */
    if (rsx == 1 || rsx < csx) {           /* swept by columns: a block's column pieces must be */
        blk = SB_COL_BYTES / (row_bytes > 0 ? row_bytes : 1); /* several lines long, or each line */
        blk = blk < 32 ? 32 : blk > 64 ? 64 : blk;             /* costs a page walk */
    }
    return blk;
}
