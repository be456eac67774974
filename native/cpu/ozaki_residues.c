/*
 * ozaki_residues.c -- the first pass of Ozaki scheme II: the residues of the
 * scaled inputs modulo every modulus, as int8 planes (real, 2M complex with
 * a square root of -1, 3M complex), AVX-512, AVX2 and portable C (see ozaki.h
 * for why they give the same bits).
 *
 * Residue of an integer-valued double y (|y| may exceed 2^53) modulo m:
 *   |y| < 2^90:  a = round(y / 2^49), b = y - a*2^49 (exact, |b| <= 2^48),
 *                t = a*c + b with c = 2^49 mod m (symmetric, |c| <= 128):
 *                |t| < 2^49 + 2^48, exact, and t == y (mod m);
 *   then         q = round(t/m + bias), r = t - q*m  (bias = 1/(2m) for even
 *                m, 0 for odd m), which is the symmetric representative
 *                directly: t/m is never within 1/(2m) of a rounding boundary
 *                and the computed quotient is off by at most |t|/m*2^-52.
 *   |y| >= 2^90: y = M*2^k with |M| < 2^53, r = (M mod m)(2^k mod m) mod m
 *                (scalar; rare: the vector code sends such lanes there).
 */
#pragma GCC optimize("fp-contract=off") /* see ozaki.h */

#include "ozaki.h"
#if EMUBLAS_X86
#include "simd_avx2.h"
#endif

/* Symmetric residue of any finite integer-valued y; sets *bad for NaN/Inf. */
static double red_any(double y, const ozmod *M, int *bad)
{
    if (!(fabs(y) < EMUBLAS_OZ_BIG)) {
        if (!isfinite(y)) {
            *bad = 1;
            return 0.0;
        }
        int e;
        double f = frexp(y, &e);
        double mant = ldexp(f, 53); /* integer, |mant| < 2^53; y = mant * 2^(e-53) */
        double r0 = red_any(mant, M, bad);
        int64_t p = pow2mod((int64_t)e - 53, (int64_t)M->m);
        return red_small(r0 * (double)p, M); /* |r0 p| < 2^16: exact */
    }
    double a = rnd(y * EMUBLAS_OZ_SPLIT_INV);
    double b = fma(-a, EMUBLAS_OZ_SPLIT, y);
    return red_small(fma(a, M->c49, b), M);
}

/* ---- residues -------------------------------------------------------------- */

enum { RES_REAL = 0, RES_2M = 1, RES_3M = 2 };

typedef struct {
    int kind, dtype, conj, nmod, simd, avx2;
    int64_t rows, cols;          /* inner (i) x outer (j) after normalisation */
    const char *Xr, *Xi;
    int64_t rsx, csx;
    const int32_t *shift;
    int shift_inner;             /* shift indexed by i (else by j) */
    ozmod mods[EMUBLAS_OZ_MAX_MODULI];
    double roots[EMUBLAS_OZ_MAX_MODULI];
    int8_t *out;
    int64_t ps, rso, cso;
    int bad;
} res_job;

static inline double load_x(const res_job *J, const char *X, int64_t off)
{
    return J->dtype ? ((const double *)X)[off] : (double)((const float *)X)[off];
}

static void res_element(const res_job *J, double yr, double yi, int8_t *o, int *bad)
{
    const int64_t ps = J->ps;
    if (J->kind == RES_REAL) {
        for (int l = 0; l < J->nmod; l++)
            o[l * ps] = (int8_t)red_any(yr, &J->mods[l], bad);
    } else if (J->kind == RES_2M) {
        for (int l = 0; l < J->nmod; l++) {
            const ozmod *M = &J->mods[l];
            double rr = red_any(yr, M, bad), ri = red_any(yi, M, bad), s = J->roots[l];
            o[2 * l * ps] = (int8_t)red_small(fma(s, ri, rr), M);
            o[(2 * l + 1) * ps] = (int8_t)red_small(fma(-s, ri, rr), M);
        }
    } else {
        for (int l = 0; l < J->nmod; l++) {
            const ozmod *M = &J->mods[l];
            double rr = red_any(yr, M, bad), ri = red_any(yi, M, bad);
            o[3 * l * ps] = (int8_t)rr;
            o[(3 * l + 1) * ps] = (int8_t)ri;
            o[(3 * l + 2) * ps] = (int8_t)red_small(rr + ri, M);
        }
    }
}

/* Entry (i, j), all its planes, by the portable code. */
static void res_entry(const res_job *J, int64_t i, int64_t j, int *bad)
{
    int s = J->shift_inner ? J->shift[i] : J->shift[j];
    int64_t off = i * J->rsx + j * J->csx;
    double yr = trunc_int(ldexp(load_x(J, J->Xr, off), s)), yi = 0.0;
    if (J->kind != RES_REAL) {
        yi = trunc_int(ldexp(load_x(J, J->Xi, off), s));
        if (J->conj)
            yi = -yi;
    }
    res_element(J, yr, yi, J->out + i * J->rso + j * J->cso, bad);
}

static void res_cols_generic(res_job *J, int64_t j0, int64_t j1)
{
    int bad = 0;
    for (int64_t j = j0; j < j1; j++)
        for (int64_t i = 0; i < J->rows; i++)
            res_entry(J, i, j, &bad);
    if (bad)
        __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);
}

#if EMUBLAS_X86

OZ_TARGET OZ_INLINE __m512d load8x(const res_job *J, const char *X, int64_t off, int64_t stride, int n)
{
    if (n == 8 && stride == 1)
        return J->dtype ? _mm512_loadu_pd((const double *)X + off)
                        : _mm512_cvtps_pd(_mm256_loadu_ps((const float *)X + off));
    double buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < n; k++)
        buf[k] = load_x(J, X, off + k * stride);
    return _mm512_loadu_pd(buf);
}

OZ_TARGET __attribute__((noinline)) static void store8_slow(int8_t *p, int64_t stride, __m128i b, int n)
{
    uint64_t u = (uint64_t)_mm_cvtsi128_si64(b);
    for (int k = 0; k < n; k++)
        p[k * stride] = (int8_t)(u >> (8 * k));
}

/* The 8 residues r (integers in [-128, 127]) as int8 at p, p + stride, ...;
 * fast is n == 8 && stride == 1, hoisted by the callers. */
OZ_TARGET OZ_INLINE void store8(int8_t *p, int64_t stride, __m512d r, int n, int fast)
{
    __m128i b = _mm256_cvtepi32_epi8(_mm512_cvtpd_epi32(r));
    if (fast)
        _mm_storel_epi64((__m128i *)p, b);
    else
        store8_slow(p, stride, b, n);
}

#define OZ_RB 8 /* vectors of 8 rows per block: each plane gets 64 contiguous bytes at once */

/* Split parts of a block of up to OZ_RB vectors (y = a*2^49 + b). */
typedef struct {
    double ar[OZ_RB][8], br[OZ_RB][8], ai[OZ_RB][8], bi[OZ_RB][8];
} res_stage;

/* All planes of one block, modulus by modulus (not vector by vector: 8-byte
 * stores to dozens of planes a power of two apart would fight over a few
 * cache sets).  Vectors with a bit in skip were done by the scalar code;
 * the last vector has nlast lanes.  fast: rso == 1 and full vectors. */
OZ_TARGET OZ_INLINE void res_block(const res_job *J, const res_stage *S, int nv, unsigned skip, int nlast,
                                   int8_t *o, int64_t rso, const int kind, const int fast)
{
    const int64_t ps = J->ps;
    for (int l = 0; l < J->nmod; l++) {
        const ozmod *M = &J->mods[l];
        const __m512d m = _mm512_set1_pd(M->m), inv = _mm512_set1_pd(M->inv);
        const __m512d bias = _mm512_set1_pd(M->bias), c = _mm512_set1_pd(M->c49);
        const __m512d s = _mm512_set1_pd(kind == RES_2M ? J->roots[l] : 0.0);
        for (int v = 0; v < nv; v++) {
            if (!fast && (skip >> v & 1))
                continue;
            const int n = fast ? 8 : v == nv - 1 ? nlast : 8;
            int8_t *ov = o + v * 8 * rso;
            /* tr == yr (mod m), |tr| < 2^49 + 2^48 */
            const __m512d tr = _mm512_fmadd_pd(_mm512_load_pd(S->ar[v]), c, _mm512_load_pd(S->br[v]));
            if (kind == RES_REAL) {
                store8(ov + l * ps, rso, vred(tr, m, inv, bias), n, fast);
                continue;
            }
            const __m512d ri = vred(_mm512_fmadd_pd(_mm512_load_pd(S->ai[v]), c, _mm512_load_pd(S->bi[v])), m, inv, bias);
            if (kind == RES_2M) {
                /* tr +- s*ri is exact (|.| < 2^50) and == yr +- s*yi (mod m),
                 * so one reduction gives the symmetric residue that reducing
                 * rr first does (red_small is exact for |t| < 2^51). */
                store8(ov + 2 * l * ps, rso, vred(_mm512_fmadd_pd(s, ri, tr), m, inv, bias), n, fast);
                store8(ov + (2 * l + 1) * ps, rso, vred(_mm512_fnmadd_pd(s, ri, tr), m, inv, bias), n, fast);
            } else {
                const __m512d rr = vred(tr, m, inv, bias);
                store8(ov + 3 * l * ps, rso, rr, n, fast);
                store8(ov + (3 * l + 1) * ps, rso, ri, n, fast);
                store8(ov + (3 * l + 2) * ps, rso, vred(_mm512_add_pd(rr, ri), m, inv, bias), n, fast);
            }
        }
    }
}

OZ_TARGET static void res_cols_simd(res_job *J, int64_t j0, int64_t j1)
{
    const __m512d vsplit = _mm512_set1_pd(EMUBLAS_OZ_SPLIT), vsinv = _mm512_set1_pd(EMUBLAS_OZ_SPLIT_INV);
    const __m512d vbig = _mm512_set1_pd(EMUBLAS_OZ_BIG);
    const __m512d zero = _mm512_setzero_pd();
    const int64_t rso = J->rso;
    const int kind = J->kind;
    /* Interleaved complex (Xi = Xr + one element, stride 2 along i): two
     * contiguous loads and a deinterleave instead of 16 scalar loads. */
    const int ilv = kind != RES_REAL && J->rsx == 2 && J->Xi == J->Xr + (J->dtype ? 8 : 4);
    const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i split_ps = _mm512_set_epi32(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
    const int rnd_near = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const int trunc = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    res_stage S __attribute__((aligned(64)));

    int bad = 0;
    for (int64_t j = j0; j < j1; j++) {
        const __m512d shj = _mm512_set1_pd(J->shift_inner ? 0.0 : (double)J->shift[j]);
        for (int64_t ib = 0; ib < J->rows; ib += 8 * OZ_RB) {
            unsigned skip = 0;
            int nv = 0, nlast = 8;
            for (; nv < OZ_RB && ib + 8 * nv < J->rows; nv++) {
                const int64_t i0 = ib + 8 * nv;
                const int n = J->rows - i0 < 8 ? (int)(J->rows - i0) : 8;
                nlast = n;
                const int64_t off = i0 * J->rsx + j * J->csx;
                __m512d sh = shj;
                if (J->shift_inner) {
                    __mmask8 k = (__mmask8)((1u << n) - 1);
                    sh = _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, J->shift + i0));
                }
                __m512d xr, xi = zero;
                if (ilv && n == 8) { /* 8 interleaved (re, im) pairs */
                    if (J->dtype) {
                        const __m512d c0 = _mm512_loadu_pd((const double *)J->Xr + off);
                        const __m512d c1 = _mm512_loadu_pd((const double *)J->Xr + off + 8);
                        xr = _mm512_permutex2var_pd(c0, even, c1);
                        xi = _mm512_permutex2var_pd(c0, odd, c1);
                    } else {
                        const __m512 c = _mm512_permutexvar_ps(split_ps, _mm512_loadu_ps((const float *)J->Xr + off));
                        xr = _mm512_cvtps_pd(_mm512_castps512_ps256(c));
                        xi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c), 1)));
                    }
                } else {
                    xr = load8x(J, J->Xr, off, J->rsx, n);
                    if (kind != RES_REAL)
                        xi = load8x(J, J->Xi, off, J->rsx, n);
                }
                __m512d yr = _mm512_roundscale_pd(_mm512_scalef_pd(xr, sh), trunc);
                __m512d yi = zero;
                __mmask8 big = _mm512_cmp_pd_mask(_mm512_abs_pd(yr), vbig, _CMP_NLT_UQ);
                if (kind != RES_REAL) {
                    yi = _mm512_roundscale_pd(_mm512_scalef_pd(xi, sh), trunc);
                    if (J->conj)
                        yi = _mm512_sub_pd(zero, yi);
                    big |= _mm512_cmp_pd_mask(_mm512_abs_pd(yi), vbig, _CMP_NLT_UQ);
                }
                if (big & (__mmask8)((1u << n) - 1)) { /* huge or non-finite lanes: scalar */
                    double br[8], bi[8];
                    _mm512_storeu_pd(br, yr);
                    _mm512_storeu_pd(bi, yi);
                    int8_t *o = J->out + i0 * rso + j * J->cso;
                    for (int k = 0; k < n; k++)
                        res_element(J, br[k], bi[k], o + k * rso, &bad);
                    skip |= 1u << nv;
                    continue;
                }
                const __m512d ar = _mm512_roundscale_pd(_mm512_mul_pd(yr, vsinv), rnd_near);
                _mm512_store_pd(S.ar[nv], ar);
                _mm512_store_pd(S.br[nv], _mm512_fnmadd_pd(ar, vsplit, yr));
                if (kind != RES_REAL) {
                    const __m512d ai = _mm512_roundscale_pd(_mm512_mul_pd(yi, vsinv), rnd_near);
                    _mm512_store_pd(S.ai[nv], ai);
                    _mm512_store_pd(S.bi[nv], _mm512_fnmadd_pd(ai, vsplit, yi));
                }
            }
            int8_t *o = J->out + ib * rso + j * J->cso;
            if (skip == 0 && nlast == 8 && rso == 1) {
                if (kind == RES_REAL)
                    res_block(J, &S, nv, 0, 8, o, 1, RES_REAL, 1);
                else if (kind == RES_2M)
                    res_block(J, &S, nv, 0, 8, o, 1, RES_2M, 1);
                else
                    res_block(J, &S, nv, 0, 8, o, 1, RES_3M, 1);
            } else if (skip != (1u << nv) - 1) {
                res_block(J, &S, nv, skip, nlast, o, rso, kind, 0);
            }
        }
    }
    if (bad)
        __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);
}

/* ---- AVX2: the blocks above on 4-lane vectors -------------------------------- */

OZ_TARGET2 OZ_INLINE __m256d load4x(const res_job *J, const char *X, int64_t off, int64_t stride, int n)
{
    if (n == 4 && stride == 1)
        return J->dtype ? _mm256_loadu_pd((const double *)X + off)
                        : _mm256_cvtps_pd(_mm_loadu_ps((const float *)X + off));
    double buf[4] = {0, 0, 0, 0};
    for (int k = 0; k < n; k++)
        buf[k] = load_x(J, X, off + k * stride);
    return _mm256_loadu_pd(buf);
}

/* 2^e per lane, e in [-1022, 1023]. */
OZ_TARGET2 OZ_INLINE __m256d pow2v4(__m128i e)
{
    const __m256i b = _mm256_cvtepi32_epi64(_mm_add_epi32(e, _mm_set1_epi32(1023)));
    return _mm256_castsi256_pd(_mm256_slli_epi64(b, 52));
}

/* ldexp(x, s) == (x * f1) * f2 with normal powers of two (AVX2 has no scalef):
 *   s in [-1022, 1023]:   f1 = 2^s, f2 = 1: one rounding, as ldexp;
 *   s in (1023, 2046]:    f1 = 2^1023 (exact: a nonzero |x| >= 2^-1074 lands at
 *                         2^-51 or above), f2 = 2^(s-1023) rounds once;
 *   s in [-2044, -1022):  f1 = 2^(s+1022), f2 = 2^-1022: x*f1 is exact where it
 *                         is normal; where it is not, both x*2^s and the
 *                         product are below 2^-2044 in magnitude, i.e. +-0.
 * Returns the lanes whose s lies outside [-2044, 2046] (the scalar code's). */
OZ_TARGET2 OZ_INLINE int shift_pow2(__m128i s, __m256d *f1, __m256d *f2)
{
    const __m128i neg = _mm_cmpgt_epi32(_mm_set1_epi32(-1022), s);
    __m128i s1 = _mm_min_epi32(s, _mm_set1_epi32(1023));
    s1 = _mm_blendv_epi8(s1, _mm_add_epi32(s, _mm_set1_epi32(1022)), neg);
    *f1 = pow2v4(s1);
    *f2 = pow2v4(_mm_sub_epi32(s, s1));
    const __m128i out = _mm_or_si128(_mm_cmpgt_epi32(s, _mm_set1_epi32(2046)),
                                     _mm_cmpgt_epi32(_mm_set1_epi32(-2044), s));
    return _mm_movemask_ps(_mm_castsi128_ps(out));
}

/* Residues are integers in [-128, 127], so the saturating packs only narrow
 * them, as the int8 casts of the other paths. */
OZ_TARGET2 OZ_INLINE __m128i pack16(__m256d a, __m256d b, __m256d c, __m256d d)
{
    const __m128i ab = _mm_packs_epi32(_mm256_cvtpd_epi32(a), _mm256_cvtpd_epi32(b));
    const __m128i cd = _mm_packs_epi32(_mm256_cvtpd_epi32(c), _mm256_cvtpd_epi32(d));
    return _mm_packs_epi16(ab, cd);
}

OZ_TARGET2 OZ_INLINE uint32_t pack4(__m256d a)
{
    const __m128i w = _mm_packs_epi32(_mm256_cvtpd_epi32(a), _mm_setzero_si128());
    return (uint32_t)_mm_cvtsi128_si32(_mm_packs_epi16(w, w));
}

__attribute__((noinline)) static void store4_slow(int8_t *p, int64_t stride, uint32_t u, int n)
{
    for (int k = 0; k < n; k++)
        p[k * stride] = (int8_t)(u >> (8 * k));
}

#define OZ_RB4 16 /* vectors of 4 rows per block: 64 rows, as the AVX-512 blocks */

typedef struct {
    double ar[OZ_RB4][4], br[OZ_RB4][4], ai[OZ_RB4][4], bi[OZ_RB4][4];
} res_stage4;

/* The planes of modulus (m, inv, bias, c, root s) of staged vector v, as res_block's. */
OZ_TARGET2 OZ_INLINE void res_vec4(const res_stage4 *S, int v, __m256d m, __m256d inv, __m256d bias, __m256d c,
                                   __m256d s, const int kind, __m256d r[3])
{
    const __m256d tr = _mm256_fmadd_pd(_mm256_load_pd(S->ar[v]), c, _mm256_load_pd(S->br[v]));
    if (kind == RES_REAL) {
        r[0] = vred4(tr, m, inv, bias);
        return;
    }
    const __m256d ri = vred4(_mm256_fmadd_pd(_mm256_load_pd(S->ai[v]), c, _mm256_load_pd(S->bi[v])), m, inv, bias);
    if (kind == RES_2M) {
        r[0] = vred4(_mm256_fmadd_pd(s, ri, tr), m, inv, bias);
        r[1] = vred4(_mm256_fnmadd_pd(s, ri, tr), m, inv, bias);
    } else {
        r[0] = vred4(tr, m, inv, bias);
        r[1] = ri;
        r[2] = vred4(_mm256_add_pd(r[0], ri), m, inv, bias);
    }
}

/* res_block on 4-lane vectors: modulus by modulus; fast (rso == 1, full
 * vectors, none skipped) stores 16 bytes per plane for 4 vectors. */
OZ_TARGET2 OZ_INLINE void res_block4(const res_job *J, const res_stage4 *S, int nv, unsigned skip, int nlast,
                                     int8_t *o, int64_t rso, const int kind, const int fast)
{
    const int64_t ps = J->ps;
    const int np = kind == RES_REAL ? 1 : kind == RES_2M ? 2 : 3;
    for (int l = 0; l < J->nmod; l++) {
        const ozmod *M = &J->mods[l];
        const __m256d m = _mm256_set1_pd(M->m), inv = _mm256_set1_pd(M->inv);
        const __m256d bias = _mm256_set1_pd(M->bias), c = _mm256_set1_pd(M->c49);
        const __m256d s = _mm256_set1_pd(kind == RES_2M ? J->roots[l] : 0.0);
        int8_t *ol = o + np * l * ps;
        int v = 0;
        if (fast)
            for (; v + 4 <= nv; v += 4) {
                __m256d r0[3], r1[3], r2[3], r3[3];
                res_vec4(S, v, m, inv, bias, c, s, kind, r0);
                res_vec4(S, v + 1, m, inv, bias, c, s, kind, r1);
                res_vec4(S, v + 2, m, inv, bias, c, s, kind, r2);
                res_vec4(S, v + 3, m, inv, bias, c, s, kind, r3);
                for (int q = 0; q < np; q++)
                    _mm_storeu_si128((__m128i *)(ol + q * ps + 4 * v), pack16(r0[q], r1[q], r2[q], r3[q]));
            }
        for (; v < nv; v++) {
            if (!fast && (skip >> v & 1))
                continue;
            __m256d r[3];
            res_vec4(S, v, m, inv, bias, c, s, kind, r);
            for (int q = 0; q < np; q++) {
                const uint32_t u = pack4(r[q]);
                if (fast)
                    memcpy(ol + q * ps + 4 * v, &u, 4);
                else
                    store4_slow(ol + q * ps + 4 * v * rso, rso, u, v == nv - 1 ? nlast : 4);
            }
        }
    }
}

/* Stages vector v of a block: rows i0 .. i0+n-1 of column j, scaled by the
 * shift factors f1, f2 (shift_pow2).  Returns 0 where a lane is huge or
 * non-finite (the scalar code's then). */
OZ_TARGET2 OZ_INLINE int res_stage_vec4(const res_job *J, res_stage4 *S, int v, int64_t i0, int n, int64_t j,
                                        __m256d f1, __m256d f2, int ilv)
{
    const __m256d zero = _mm256_setzero_pd(), vbig = _mm256_set1_pd(EMUBLAS_OZ_BIG);
    const __m256d vsplit = _mm256_set1_pd(EMUBLAS_OZ_SPLIT), vsinv = _mm256_set1_pd(EMUBLAS_OZ_SPLIT_INV);
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
    const int rnd_near = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const int trunc = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    const int kind = J->kind;
    const int64_t off = i0 * J->rsx + j * J->csx;
    __m256d xr, xi = zero;
    if (ilv && n == 4) { /* 4 interleaved (re, im) pairs */
        avx2_load4_cplx(J->Xr + off * (J->dtype ? 8 : 4), J->dtype, &xr, &xi);
    } else {
        xr = load4x(J, J->Xr, off, J->rsx, n);
        if (kind != RES_REAL)
            xi = load4x(J, J->Xi, off, J->rsx, n);
    }
    const __m256d yr = _mm256_round_pd(_mm256_mul_pd(_mm256_mul_pd(xr, f1), f2), trunc);
    __m256d yi = zero;
    int big = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(yr, absmask), vbig, _CMP_NLT_UQ));
    if (kind != RES_REAL) {
        yi = _mm256_round_pd(_mm256_mul_pd(_mm256_mul_pd(xi, f1), f2), trunc);
        if (J->conj)
            yi = _mm256_sub_pd(zero, yi);
        big |= _mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(yi, absmask), vbig, _CMP_NLT_UQ));
    }
    if (big & ((1 << n) - 1))
        return 0;
    const __m256d ar = _mm256_round_pd(_mm256_mul_pd(yr, vsinv), rnd_near);
    _mm256_store_pd(S->ar[v], ar);
    _mm256_store_pd(S->br[v], _mm256_fnmadd_pd(ar, vsplit, yr));
    if (kind != RES_REAL) {
        const __m256d ai = _mm256_round_pd(_mm256_mul_pd(yi, vsinv), rnd_near);
        _mm256_store_pd(S->ai[v], ai);
        _mm256_store_pd(S->bi[v], _mm256_fnmadd_pd(ai, vsplit, yi));
    }
    return 1;
}

OZ_TARGET2 static void res_cols_avx2(res_job *J, int64_t j0, int64_t j1)
{
    const int64_t rso = J->rso;
    const int kind = J->kind;
    /* Interleaved complex: two loads and a deinterleave, as res_cols_simd. */
    const int ilv = kind != RES_REAL && J->rsx == 2 && J->Xi == J->Xr + (J->dtype ? 8 : 4);
    res_stage4 S __attribute__((aligned(32)));

    int bad = 0;
    for (int64_t j = j0; j < j1; j++) {
        __m256d f1j = _mm256_setzero_pd(), f2j = f1j;
        const int outj = J->shift_inner ? 0 : shift_pow2(_mm_set1_epi32(J->shift[j]), &f1j, &f2j);
        for (int64_t ib = 0; ib < J->rows; ib += 4 * OZ_RB4) {
            unsigned skip = 0;
            int nv = 0, nlast = 4;
            for (; nv < OZ_RB4 && ib + 4 * nv < J->rows; nv++) {
                const int64_t i0 = ib + 4 * nv;
                const int n = J->rows - i0 < 4 ? (int)(J->rows - i0) : 4;
                nlast = n;
                __m256d f1 = f1j, f2 = f2j;
                int out = outj;
                if (J->shift_inner) {
                    int32_t sb[4] = {0, 0, 0, 0};
                    memcpy(sb, J->shift + i0, (size_t)n * sizeof(int32_t));
                    out = shift_pow2(_mm_loadu_si128((const __m128i *)sb), &f1, &f2);
                }
                if (!(out & ((1 << n) - 1)) && res_stage_vec4(J, &S, nv, i0, n, j, f1, f2, ilv))
                    continue;
                /* huge or non-finite lanes, or shifts out of range: scalar */
                for (int k = 0; k < n; k++)
                    res_entry(J, i0 + k, j, &bad);
                skip |= 1u << nv;
            }
            int8_t *o = J->out + ib * rso + j * J->cso;
            if (skip == 0 && nlast == 4 && rso == 1) {
                if (kind == RES_REAL)
                    res_block4(J, &S, nv, 0, 4, o, 1, RES_REAL, 1);
                else if (kind == RES_2M)
                    res_block4(J, &S, nv, 0, 4, o, 1, RES_2M, 1);
                else
                    res_block4(J, &S, nv, 0, 4, o, 1, RES_3M, 1);
            } else if (skip != (1u << nv) - 1) {
                res_block4(J, &S, nv, skip, nlast, o, rso, kind, 0);
            }
        }
    }
    if (bad)
        __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);
}
#endif

static void res_task(void *ctx, int tid, int nt)
{
    res_job *J = ctx;
    int64_t j0 = J->cols * tid / nt, j1 = J->cols * (tid + 1) / nt;
#if EMUBLAS_X86
    if (J->simd) {
        res_cols_simd(J, j0, j1);
        return;
    }
    if (J->avx2) {
        res_cols_avx2(J, j0, j1);
        return;
    }
#endif
    res_cols_generic(J, j0, j1);
}

static int residues_common(int kind, int dtype, int64_t rows, int64_t cols, const void *Xr,
                           const void *Xi, int64_t rsx, int64_t csx, const int32_t *shift,
                           int shift_axis, int conj, int nmod, const int32_t *moduli,
                           const int32_t *roots, int8_t *out, int64_t plane_stride, int64_t rso,
                           int64_t cso, int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || nmod < 0 || nmod > EMUBLAS_OZ_MAX_MODULI ||
        (shift_axis != 0 && shift_axis != 1))
        return EMUBLAS_EINVAL;
    if (rows == 0 || cols == 0 || nmod == 0)
        return EMUBLAS_OK;
    if (!Xr || (kind != RES_REAL && !Xi) || !shift || !moduli || !out ||
        (kind == RES_2M && !roots))
        return EMUBLAS_EINVAL;
    res_job *J = malloc(sizeof *J);
    if (!J)
        return EMUBLAS_ENOMEM;
    memset(J, 0, sizeof *J);
    for (int l = 0; l < nmod; l++) {
        int32_t m = moduli[l];
        if (m < 2 || m > 256) {
            free(J);
            return EMUBLAS_EINVAL;
        }
        ozmod_init(&J->mods[l], m);
        if (kind == RES_2M) {
            int64_t s = roots[l];
            if (s == 0 || ((s % m) * (s % m) + 1) % m != 0) {
                free(J);
                return EMUBLAS_EINVAL;
            }
            J->roots[l] = (double)(s % m); /* |s mod m| < 256: fma(s, ri, rr) exact */
        }
    }
    J->kind = kind;
    J->dtype = dtype;
    J->conj = conj != 0;
    J->nmod = nmod;
    J->Xr = Xr;
    J->Xi = Xi;
    J->shift = shift;
    J->out = out;
    J->ps = plane_stride;
    /* The inner (vector) dimension is the one with unit input stride, else
     * the one with unit output stride, else rows. */
    int swap = (rsx != 1 && csx == 1) || (rsx != 1 && csx != 1 && rso != 1 && cso == 1);
    if (swap) {
        J->rows = cols; J->cols = rows;
        J->rsx = csx; J->csx = rsx;
        J->rso = cso; J->cso = rso;
        J->shift_inner = shift_axis == 1;
    } else {
        J->rows = rows; J->cols = cols;
        J->rsx = rsx; J->csx = csx;
        J->rso = rso; J->cso = cso;
        J->shift_inner = shift_axis == 0;
    }
    J->simd = oz_simd();
    J->avx2 = !J->simd && oz_avx2();
    int planes = kind == RES_REAL ? nmod : kind == RES_2M ? 2 * nmod : 3 * nmod;
    const double work = (double)rows * (double)cols * planes;
    int nt = oz_threads(nthreads, work);
    if (nt > J->cols)
        nt = (int)J->cols;
    oz_parallel(res_task, J, nt, work);
    int bad = J->bad;
    free(J);
    return bad ? EMUBLAS_ERANGE : EMUBLAS_OK;
}

int emublas_oz_residues(int dtype, int64_t rows, int64_t cols, const void *X, int64_t rsx,
                        int64_t csx, const int32_t *shift, int shift_axis, int nmod,
                        const int32_t *moduli, int8_t *out, int64_t plane_stride, int64_t rso,
                        int64_t cso, int nthreads)
{
    return residues_common(RES_REAL, dtype, rows, cols, X, NULL, rsx, csx, shift, shift_axis, 0,
                           nmod, moduli, NULL, out, plane_stride, rso, cso, nthreads);
}

int emublas_oz_residues_cplx(int dtype, int64_t rows, int64_t cols, const void *Xr,
                             const void *Xi, int64_t rsx, int64_t csx, const int32_t *shift,
                             int shift_axis, int conj, int nmod, const int32_t *moduli,
                             const int32_t *roots, int8_t *out, int64_t plane_stride, int64_t rso,
                             int64_t cso, int nthreads)
{
    return residues_common(RES_2M, dtype, rows, cols, Xr, Xi, rsx, csx, shift, shift_axis, conj,
                           nmod, moduli, roots, out, plane_stride, rso, cso, nthreads);
}

int emublas_oz_residues_3m(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                           int64_t rsx, int64_t csx, const int32_t *shift, int shift_axis,
                           int conj, int nmod, const int32_t *moduli, int8_t *out,
                           int64_t plane_stride, int64_t rso, int64_t cso, int nthreads)
{
    return residues_common(RES_3M, dtype, rows, cols, Xr, Xi, rsx, csx, shift, shift_axis, conj,
                           nmod, moduli, NULL, out, plane_stride, rso, cso, nthreads);
}

/* ---- fast mode's scaling and residues in one read ------------------------- */

typedef struct {
    int kind, dtype, conj, nmod, esize;
    int64_t rows, cols, rcols;  /* rcols: residue columns (cols / 2 for the split kind) */
    const char *Xr, *Xi;        /* Xi NULL for real data */
    const char *Rr, *Ri;        /* the residues' real and imaginary inputs */
    int64_t rsx, csx;
    const int32_t *moduli, *roots;
    int8_t *out;
    int64_t ps, rso, cso;
    int planes;
    double L, safety, log2k, kd, slack;
    double *rowmax, *sumsq, *l1, *err, *wsum;
    int32_t *shift, *budget;
    int rc;
} sr_job;

/* The rows of a block in cache-sized pieces: their statistics and plan, then the
 * residues of their live runs (one thread each; a row holding NaN/Inf gets zero
 * residues in every plane, as from the zeroed copy the two-pass form makes). */
static void sr_task(void *ctx, int tid, int nt)
{
    sr_job *S = ctx;
    const int64_t i0 = S->rows * tid / nt, i1 = S->rows * (tid + 1) / nt;
    const int64_t blk = oz_block_rows(S->cols * S->esize * (S->Xi ? 2 : 1), S->rsx, S->csx);
    const int rkind = S->kind == 3 ? RES_2M : S->kind; /* split: the halves as 2M parts */
    for (int64_t b0 = i0; b0 < i1; b0 += blk) {
        const int64_t b1 = i1 - b0 < blk ? i1 : b0 + blk;
        oz_stats_plan_rows(S->dtype, S->cols, S->Xr, S->Xi, S->rsx, S->csx, b0, b1, S->rowmax, S->sumsq, S->l1, S->L,
                           S->safety, S->log2k, S->kd, S->slack, S->shift, S->err, S->wsum, S->budget);
        for (int64_t i = b0; i < b1;) {
            if (S->shift[i] == EMUBLAS_OZ_DEAD) {
                for (int p = 0; p < S->planes; p++)
                    for (int64_t j = 0; j < S->rcols; j++)
                        S->out[p * S->ps + i * S->rso + j * S->cso] = 0;
                i++;
                continue;
            }
            int64_t e = i + 1;
            while (e < b1 && S->shift[e] != EMUBLAS_OZ_DEAD)
                e++;
            const int64_t off = i * S->rsx * S->esize;
            int rc = residues_common(rkind, S->dtype, e - i, S->rcols, S->Rr + off, S->Ri ? S->Ri + off : NULL, S->rsx,
                                     S->csx, S->shift + i, 0, S->conj, S->nmod, S->moduli, S->roots,
                                     S->out + i * S->rso, S->ps, S->rso, S->cso, 1);
            if (rc != EMUBLAS_OK)
                __atomic_store_n(&S->rc, rc, __ATOMIC_RELAXED);
            i = e;
        }
    }
}

int emublas_oz_scaled_residues(int kind, int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                               int64_t rsx, int64_t csx, int conj, int nmod, const int32_t *moduli,
                               const int32_t *roots, int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                               double L, double safety, double log2k, double slack, double *rowmax, double *sumsq,
                               double *l1, int32_t *shift, double *err, double *wsum, int32_t *budget, int nthreads)
{
    if (kind < 0 || kind > 3 || (dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || nmod < 1 ||
        nmod > EMUBLAS_OZ_MAX_MODULI || (kind == 3 && cols % 2) || ((kind == 0 || kind == 3) && Xi) ||
        ((kind == 1 || kind == 2) && !Xi) || ((kind == 1 || kind == 3) && !roots) || !moduli ||
        (rows > 0 && (!rowmax || !sumsq || !l1 || !shift || !err || !wsum || !budget)) ||
        (rows * cols > 0 && (!Xr || !out)))
        return EMUBLAS_EINVAL;
    const int esize = dtype ? 8 : 4;
    sr_job S = {
        .kind = kind, .dtype = dtype, .conj = conj != 0, .nmod = nmod, .esize = esize,
        .rows = rows, .cols = cols, .rcols = kind == 3 ? cols / 2 : cols,
        .Xr = Xr, .Xi = Xi, .Rr = Xr, .Ri = kind == 3 ? (const char *)Xr + (cols / 2) * csx * esize : Xi,
        .rsx = rsx, .csx = csx, .moduli = moduli, .roots = roots,
        .out = out, .ps = plane_stride, .rso = rso, .cso = cso,
        .planes = nmod * (kind == 0 ? 1 : kind == 2 ? 3 : 2),
        .L = L, .safety = safety, .log2k = log2k, .kd = (double)cols, .slack = slack,
        .rowmax = rowmax, .sumsq = sumsq, .l1 = l1, .err = err, .wsum = wsum, .shift = shift, .budget = budget,
        .rc = EMUBLAS_OK,
    };
    const double work = (double)rows * (double)cols * S.planes;
    int nt = oz_threads(nthreads, work);
    if (nt > rows)
        nt = rows > 0 ? (int)rows : 1;
    oz_parallel(sr_task, &S, nt, work);
    return S.rc;
}
