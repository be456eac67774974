/*
 * ozaki.c -- the memory-bound passes around the int8 GEMMs of Ozaki scheme II
 * (docs/design.md §2): residues of scaled inputs, modular reduction fused with the
 * double-double CRT accumulation, and the CRT finalize (symmetric
 * representative, unscaling, alpha/beta, write-out).
 *
 * Exactness.  Every residue computation is exact, so the AVX-512 path and the
 * portable C path give bit-identical results whatever rounding their
 * intermediate steps do; the floating-point steps of the CRT (two-prod,
 * two-sum, the complex alpha/beta arithmetic) are written in one fixed order
 * with explicit fma() in both paths.  Contraction of a*b+c into an FMA would
 * break the error-free transformations (a two-sum whose sum came out of an
 * FMA is no longer error-free) and make the paths differ, so it is switched
 * off for this file whatever -ffp-contract the build uses.
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
#pragma GCC optimize("fp-contract=off")

#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if EMUBLAS_X86
#include <immintrin.h>
#define OZ_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#endif

#define OZ_MAX_MOD 64        /* moduli per residue call */
#define OZ_SPLIT 0x1p49
#define OZ_SPLIT_INV 0x1p-49
#define OZ_BIG 0x1p90
#define OZ_PAR_MIN (1 << 17) /* element-planes below which one thread runs */

#define OZ_INLINE static inline __attribute__((always_inline))

/* ---- dispatch ------------------------------------------------------------ */

static int oz_generic_forced;

int emublas_oz_force_generic(int flag)
{
    int old = __atomic_load_n(&oz_generic_forced, __ATOMIC_RELAXED);
    if (flag >= 0)
        __atomic_store_n(&oz_generic_forced, flag ? 1 : 0, __ATOMIC_RELAXED);
    return old;
}

static int oz_simd(void)
{
#if EMUBLAS_X86
    static int have = -1;
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h && !__atomic_load_n(&oz_generic_forced, __ATOMIC_RELAXED);
#else
    return 0;
#endif
}

const char *emublas_oz_kernel_name(void) { return oz_simd() ? "avx512" : "generic"; }

static int oz_threads(int nthreads, double work)
{
    int nt = nthreads > 0 ? nthreads : emublas__online_cpus();
    if (nt > EMUBLAS_MAX_THREADS)
        nt = EMUBLAS_MAX_THREADS;
    if (work < OZ_PAR_MIN)
        nt = 1;
    return nt;
}

/* Columns [j0, j1) of thread tid: equal shares of the work, where column j
 * of an m-row matrix holds min(j+1, m) entries for uplo 1, max(m-j, 0) for
 * uplo 2 and m otherwise. */
static double col_work(int64_t m, int uplo, int64_t j)
{
    if (uplo == 1)
        return (double)(j + 1 < m ? j + 1 : m);
    if (uplo == 2)
        return (double)(m - j > 0 ? m - j : 0);
    return (double)m;
}

static void split_cols(int64_t m, int64_t n, int uplo, int tid, int nt, int64_t *j0, int64_t *j1)
{
    if (uplo == 0 || nt == 1) {
        *j0 = n * tid / nt;
        *j1 = n * (tid + 1) / nt;
        return;
    }
    double total = 0;
    for (int64_t j = 0; j < n; j++)
        total += col_work(m, uplo, j);
    double lo = total * tid / nt, hi = total * (tid + 1) / nt, acc = 0;
    int64_t a = n, b = n;
    for (int64_t j = 0; j < n; j++) {
        if (a == n && acc >= lo)
            a = j;
        if (acc >= hi) {
            b = j;
            break;
        }
        acc += col_work(m, uplo, j);
    }
    if (tid == nt - 1)
        b = n;
    if (a > b)
        a = b;
    *j0 = a;
    *j1 = b;
}

/* ---- scalar arithmetic ---------------------------------------------------- */

typedef struct {
    double m, inv, bias, c49;
} ozmod;

static void ozmod_init(ozmod *M, int64_t m)
{
    int64_t c = ((int64_t)1 << 49) % m;
    if (2 * c > m)
        c -= m;
    M->m = (double)m;
    M->inv = 1.0 / (double)m;
    M->bias = (m % 2 == 0) ? 0.5 / (double)m : 0.0;
    M->c49 = (double)c;
}

/* Round to nearest even for |z| < 2^51 (no SSE4.1 in the baseline ISA). */
OZ_INLINE double rnd(double z)
{
    const double magic = 0x1.8p52;
    return (z + magic) - magic;
}

OZ_INLINE double trunc_int(double v)
{
    return fabs(v) < 0x1p52 ? (double)(int64_t)v : v; /* NaN passes through */
}

/* Symmetric residue of an integer t, |t| < 2^49 (see the header comment). */
OZ_INLINE double red_small(double t, const ozmod *M)
{
    double q = rnd(fma(t, M->inv, M->bias));
    return fma(-q, M->m, t);
}

static int64_t pow2mod(int64_t k, int64_t m)
{
    int64_t r = 1 % m, b = 2 % m;
    while (k > 0) {
        if (k & 1)
            r = r * b % m;
        b = b * b % m;
        k >>= 1;
    }
    return r;
}

/* Symmetric residue of any finite integer-valued y; sets *bad for NaN/Inf. */
static double red_any(double y, const ozmod *M, int *bad)
{
    if (!(fabs(y) < OZ_BIG)) {
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
    double a = rnd(y * OZ_SPLIT_INV);
    double b = fma(-a, OZ_SPLIT, y);
    return red_small(fma(a, M->c49, b), M);
}

/* ---- residues -------------------------------------------------------------- */

enum { RES_REAL = 0, RES_2M = 1, RES_3M = 2 };

typedef struct {
    int kind, dtype, conj, nmod, simd;
    int64_t rows, cols;          /* inner (i) x outer (j) after normalisation */
    const char *Xr, *Xi;
    int64_t rsx, csx;
    const int32_t *shift;
    int shift_inner;             /* shift indexed by i (else by j) */
    ozmod mods[OZ_MAX_MOD];
    double roots[OZ_MAX_MOD];
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

static void res_cols_generic(res_job *J, int64_t j0, int64_t j1)
{
    int bad = 0;
    for (int64_t j = j0; j < j1; j++)
        for (int64_t i = 0; i < J->rows; i++) {
            int s = J->shift_inner ? J->shift[i] : J->shift[j];
            int64_t off = i * J->rsx + j * J->csx;
            double yr = trunc_int(ldexp(load_x(J, J->Xr, off), s)), yi = 0.0;
            if (J->kind != RES_REAL) {
                yi = trunc_int(ldexp(load_x(J, J->Xi, off), s));
                if (J->conj)
                    yi = -yi;
            }
            res_element(J, yr, yi, J->out + i * J->rso + j * J->cso, &bad);
        }
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

/* red_small on 8 lanes. */
OZ_TARGET OZ_INLINE __m512d vred(__m512d t, __m512d m, __m512d inv, __m512d bias)
{
    __m512d q = _mm512_roundscale_pd(_mm512_fmadd_pd(t, inv, bias), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_fnmadd_pd(q, m, t);
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
    const __m512d vsplit = _mm512_set1_pd(OZ_SPLIT), vsinv = _mm512_set1_pd(OZ_SPLIT_INV);
    const __m512d vbig = _mm512_set1_pd(OZ_BIG);
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
#endif
    res_cols_generic(J, j0, j1);
}

static int residues_common(int kind, int dtype, int64_t rows, int64_t cols, const void *Xr,
                           const void *Xi, int64_t rsx, int64_t csx, const int32_t *shift,
                           int shift_axis, int conj, int nmod, const int32_t *moduli,
                           const int32_t *roots, int8_t *out, int64_t plane_stride, int64_t rso,
                           int64_t cso, int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || nmod < 0 || nmod > OZ_MAX_MOD ||
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
    int planes = kind == RES_REAL ? nmod : kind == RES_2M ? 2 * nmod : 3 * nmod;
    int nt = oz_threads(nthreads, (double)rows * (double)cols * planes);
    if (nt > J->cols)
        nt = (int)J->cols;
    emublas__parallel(res_task, J, nt);
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

/* ---- CRT accumulate --------------------------------------------------------- */

typedef struct {
    int64_t m, n;
    const int32_t *X1, *X2;
    int64_t rs1, cs1, rs2, cs2;
    double w1, w2;
    ozmod M;
    double bh, bl;
    double *hi, *lo;
    int first, uplo, simd, nt;
} acc_job;

static inline void row_range(int64_t m, int uplo, int64_t j, int64_t *i0, int64_t *i1)
{
    *i0 = 0;
    *i1 = m;
    if (uplo == 1)
        *i1 = j + 1 < m ? j + 1 : m;
    else if (uplo == 2)
        *i0 = j < m ? j : m;
}

/* One entry: the fixed operation order both paths follow. */
OZ_INLINE void acc_entry(const acc_job *J, double x1, double x2, double *ph, double *pl, int first)
{
    double v = fma(J->w1, x1, J->w2 * x2); /* exact: |v| < 2^49 */
    double t = red_small(v, &J->M);
    double p = t * J->bh;
    double e = fma(t, J->bh, -p);
    double ah = first ? 0.0 : *ph, al = first ? 0.0 : *pl;
    double s = ah + p;
    double bb = s - ah;
    double err = (ah - (s - bb)) + (p - bb);
    *ph = s;
    *pl = al + fma(t, J->bl, err + e);
}

static void acc_cols_generic(acc_job *J, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i++) {
            double x1 = (double)J->X1[i * J->rs1 + j * J->cs1];
            double x2 = J->X2 ? (double)J->X2[i * J->rs2 + j * J->cs2] : 0.0;
            acc_entry(J, x1, x2, J->hi + i + j * J->m, J->lo + i + j * J->m, J->first);
        }
    }
}

#if EMUBLAS_X86
OZ_TARGET OZ_INLINE __m512d load_i32(const int32_t *p, int64_t stride, __mmask8 k)
{
    if (stride == 1)
        return _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, p));
    const __m512i idx = _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(stride));
    return _mm512_cvtepi32_pd(_mm512_mask_i64gather_epi32(_mm256_setzero_si256(), k, idx, p, 4));
}

typedef struct {
    __m512d m, inv, bias, w1, w2, bh, bl;
} acc_vc;

/* 8 entries (lanes k) at ph, pl: the operation order of acc_entry. */
OZ_TARGET OZ_INLINE void acc8(const acc_vc *C, __m512d x1, __m512d x2, double *ph, double *pl, __mmask8 k,
                              int first)
{
    const __m512d zero = _mm512_setzero_pd();
    __m512d v = _mm512_fmadd_pd(C->w1, x1, _mm512_mul_pd(C->w2, x2));
    __m512d t = vred(v, C->m, C->inv, C->bias);
    __m512d p = _mm512_mul_pd(t, C->bh);
    __m512d e = _mm512_fmsub_pd(t, C->bh, p);
    __m512d ah = first ? zero : _mm512_maskz_loadu_pd(k, ph);
    __m512d al = first ? zero : _mm512_maskz_loadu_pd(k, pl);
    __m512d s = _mm512_add_pd(ah, p);
    __m512d bb = _mm512_sub_pd(s, ah);
    __m512d err = _mm512_add_pd(_mm512_sub_pd(ah, _mm512_sub_pd(s, bb)), _mm512_sub_pd(p, bb));
    __m512d lo = _mm512_add_pd(al, _mm512_fmadd_pd(t, C->bl, _mm512_add_pd(err, e)));
    _mm512_mask_storeu_pd(ph, k, s);
    _mm512_mask_storeu_pd(pl, k, lo);
}

/* Rows i0 .. i0+nr-1 (nr <= 8; the rest zero), columns j .. j+7 (lanes kc) of
 * a matrix contiguous along j, transposed: c[q] holds column j+q. */
OZ_TARGET OZ_INLINE void load_t8x8(const int32_t *X, int64_t rs, int64_t i0, int nr, int64_t j, __mmask8 kc,
                                   __m256i c[8])
{
    __m256i r[8];
    for (int q = 0; q < 8; q++)
        r[q] = q < nr ? _mm256_maskz_loadu_epi32(kc, X + (i0 + q) * rs + j) : _mm256_setzero_si256();
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    c[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    c[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    c[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    c[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    c[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    c[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    c[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    c[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

#define OZ_TB 32 /* columns per transposed block */

/* Columns jb .. jb+nc-1 (nc <= OZ_TB), rows [r0, r1) of X (contiguous along
 * j, row stride rs) into buf: column q at buf + q*ld, 8x8 tiles transposed in
 * registers, each row's cache lines used up before the next row. */
OZ_TARGET static void transpose_block(const int32_t *X, int64_t rs, int64_t ld, int64_t r0, int64_t r1, int64_t jb,
                                      int nc, int32_t *buf)
{
    for (int64_t i0 = r0; i0 < r1; i0 += 8) {
        const int nr = r1 - i0 < 8 ? (int)(r1 - i0) : 8;
        const __mmask8 kr = (__mmask8)((1u << nr) - 1);
        for (int h = 0; h < nc; h += 8) {
            const int w = nc - h < 8 ? nc - h : 8;
            __m256i c[8];
            load_t8x8(X, rs, i0, nr, jb + h, (__mmask8)((1u << w) - 1), c);
            for (int q = 0; q < w; q++)
                _mm256_mask_storeu_epi32(buf + (int64_t)(h + q) * ld + i0, kr, c[q]);
        }
    }
}

/* An operand contiguous along j but not along i (e.g. X2 = X1^T for the
 * rank-k updates): blocks of OZ_TB columns are first transposed into a
 * per-thread buffer (full cache lines read row by row), then the column loop
 * reads the buffer.  Each entry still goes through acc8 alone, so the
 * results are those of the plain column loop.  Returns 0 without a buffer. */
OZ_TARGET static int acc_cols_transposed(acc_job *J, const acc_vc *C, int64_t j0, int64_t j1, int t1, int t2)
{
    const int64_t m = J->m;
    const int64_t ld = (m + 15) / 16 * 16 + 16; /* columns not 4 KiB apart: no cache-set pile-up */
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)ld * OZ_TB * (size_t)(t1 + t2));
    if (!buf)
        return 0;
    int32_t *b1 = buf, *b2 = buf + (t1 ? ld * OZ_TB : 0);
    const __m512d zero = _mm512_setzero_pd();
    const int first = J->first;
    for (int64_t jb = j0; jb < j1; jb += OZ_TB) {
        const int nc = j1 - jb < OZ_TB ? (int)(j1 - jb) : OZ_TB;
        int64_t ra[OZ_TB], rb[OZ_TB], lo_i = m, hi_i = 0;
        for (int q = 0; q < nc; q++) {
            row_range(m, J->uplo, jb + q, &ra[q], &rb[q]);
            if (ra[q] < rb[q]) {
                lo_i = ra[q] < lo_i ? ra[q] : lo_i;
                hi_i = rb[q] > hi_i ? rb[q] : hi_i;
            }
        }
        if (lo_i >= hi_i)
            continue;
        if (t1)
            transpose_block(J->X1, J->rs1, ld, lo_i, hi_i, jb, nc, b1);
        if (t2)
            transpose_block(J->X2, J->rs2, ld, lo_i, hi_i, jb, nc, b2);
        for (int q = 0; q < nc; q++) {
            const int64_t j = jb + q;
            const int32_t *p1 = t1 ? b1 + (int64_t)q * ld : J->X1 + j * J->cs1;
            const int32_t *p2 = t2 ? b2 + (int64_t)q * ld : J->X2 ? J->X2 + j * J->cs2 : NULL;
            const int64_t s1 = t1 ? 1 : J->rs1, s2 = t2 ? 1 : J->rs2;
            double *ph = J->hi + j * m, *pl = J->lo + j * m;
            for (int64_t i = ra[q]; i < rb[q]; i += 8) {
                const int n = rb[q] - i < 8 ? (int)(rb[q] - i) : 8;
                const __mmask8 k = (__mmask8)((1u << n) - 1);
                __m512d x1 = load_i32(p1 + i * s1, s1, k);
                __m512d x2 = p2 ? load_i32(p2 + i * s2, s2, k) : zero;
                acc8(C, x1, x2, ph + i, pl + i, k, first);
            }
        }
    }
    free(buf);
    return 1;
}

OZ_TARGET static void acc_cols_simd(acc_job *J, int64_t j0, int64_t j1)
{
    const acc_vc C = {
        .m = _mm512_set1_pd(J->M.m), .inv = _mm512_set1_pd(J->M.inv), .bias = _mm512_set1_pd(J->M.bias),
        .w1 = _mm512_set1_pd(J->w1), .w2 = _mm512_set1_pd(J->w2),
        .bh = _mm512_set1_pd(J->bh), .bl = _mm512_set1_pd(J->bl),
    };
    const __m512d zero = _mm512_setzero_pd();
    const int t1 = J->rs1 != 1 && J->cs1 == 1, t2 = J->X2 && J->rs2 != 1 && J->cs2 == 1;
    if ((t1 || t2) && acc_cols_transposed(J, &C, j0, j1, t1, t2))
        return;
    const int first = J->first;
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        double *ph = J->hi + j * J->m, *pl = J->lo + j * J->m;
        for (int64_t i = i0; i < i1; i += 8) {
            const int n = i1 - i < 8 ? (int)(i1 - i) : 8;
            const __mmask8 k = (__mmask8)((1u << n) - 1);
            __m512d x1 = load_i32(J->X1 + i * J->rs1 + j * J->cs1, J->rs1, k);
            __m512d x2 = J->X2 ? load_i32(J->X2 + i * J->rs2 + j * J->cs2, J->rs2, k) : zero;
            acc8(&C, x1, x2, ph + i, pl + i, k, first);
        }
    }
}
#endif

static void acc_task(void *ctx, int tid, int nt)
{
    acc_job *J = ctx;
    int64_t j0, j1;
    split_cols(J->m, J->n, J->uplo, tid, nt, &j0, &j1);
#if EMUBLAS_X86
    if (J->simd) {
        acc_cols_simd(J, j0, j1);
        return;
    }
#endif
    acc_cols_generic(J, j0, j1);
}

int emublas_oz_crt_accumulate(int64_t m, int64_t n, const int32_t *X1, int64_t rs1, int64_t cs1,
                              int32_t w1, const int32_t *X2, int64_t rs2, int64_t cs2, int32_t w2,
                              int32_t modulus, double big_hi, double big_lo, double *acc_hi,
                              double *acc_lo, int first, int uplo, int nthreads)
{
    if (m < 0 || n < 0 || uplo < 0 || uplo > 2 || modulus < 2 || w1 <= -65536 || w1 >= 65536 ||
        w2 <= -65536 || w2 >= 65536)
        return EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!X1 || !acc_hi || !acc_lo || !isfinite(big_hi) || !isfinite(big_lo))
        return EMUBLAS_EINVAL;
    acc_job J = {
        .m = m, .n = n, .X1 = X1, .X2 = X2, .rs1 = rs1, .cs1 = cs1, .rs2 = rs2, .cs2 = cs2,
        .w1 = (double)w1, .w2 = X2 ? (double)w2 : 0.0, .bh = big_hi, .bl = big_lo,
        .hi = acc_hi, .lo = acc_lo, .first = first != 0, .uplo = uplo, .simd = oz_simd(),
    };
    ozmod_init(&J.M, modulus);
    int nt = oz_threads(nthreads, (double)m * (double)n * (uplo ? 0.5 : 1.0) * 16);
    if (nt > n)
        nt = (int)n;
    emublas__parallel(acc_task, &J, nt);
    return EMUBLAS_OK;
}

/* ---- CRT finalize ------------------------------------------------------------ */

enum { OUT_F32 = 0, OUT_F64 = 1, OUT_C64 = 2, OUT_C128 = 3 };

typedef struct {
    int64_t m, n;
    const double *rh, *rl, *ih, *il;
    double Ph, Pl, Pinv;
    const int32_t *rsh, *csh;
    double ar, ai, br, bi;
    int beta0, dtype, uplo, simd;
    char *out;
    int64_t rso, cso;
    emublas_oz_cert *cert; /* NULL: no certificate */
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
    if (a > 0) {
        const double g = (double)(floor_log2(a) - 1);
        if (g >= E)
            B = g;
    }
    if (C->W) {
        const double d = (double)C->W[i + j * C->ldw] - C->row_wsum[i] - C->col_wsum[j];
        if (d > 0)
            B = fmax(B, ((double)C->row_budget[i] + (double)C->col_budget[j]) + (double)(floor_log2(d) - 14));
    }
    return E <= C->target + B;
}

static inline double cert_load(int dtype, const void *p, int64_t off)
{
    return dtype ? ((const double *)p)[off] : (double)((const float *)p)[off];
}

/* The fallback: entry (i, j) as a float64 dot product of the factors, in order, with the
 * factors' rows scaled by 2^si and 2^sj (exactly: the product then comes out in the units
 * of C', where nothing over- or underflows; si = sj = 0 for a row holding NaN/Inf). */
static void cert_dot(const emublas_oz_cert *C, int64_t i, int64_t j, int si, int sj, double *vr, double *vi)
{
    double sr = 0.0, si_ = 0.0;
    for (int64_t l = 0; l < C->k; l++) {
        const int64_t ol = i * C->rsl + l * C->csl, orr = j * C->rsr + l * C->csr;
        const double xr = ldexp(cert_load(C->dtype, C->Lr, ol), si), yr = ldexp(cert_load(C->dtype, C->Rr, orr), sj);
        if (!C->Li) {
            sr = fma(xr, yr, sr);
            continue;
        }
        double xi = ldexp(cert_load(C->dtype, C->Li, ol), si), yi = ldexp(cert_load(C->dtype, C->Ri, orr), sj);
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

/* An entry cert_ok rejected: a row or column holding NaN/Inf (error term +inf) takes the
 * dot product of the original data, native BLAS's pattern; any other is counted and, when
 * asked, replaced by the dot product. */
static void cert_fail(emublas_oz_cert *C, int64_t i, int64_t j, int si, int sj, double *cr, double *ci, int *e)
{
    const int dead = C->row_err[i] == INFINITY || C->col_err[j] == INFINITY;
    if (!dead) {
        __atomic_fetch_add(&C->uncertified, 1, __ATOMIC_RELAXED);
        if (!C->fix)
            return;
    }
    /* the dot product as the data stand (v itself, e = 0); where that overflows but the
     * data are finite, again in the units of C' (then alpha can still bring it back) */
    double r, q;
    cert_dot(C, i, j, 0, 0, &r, &q);
    if (!dead && !(fabs(r) <= DBL_MAX && fabs(q) <= DBL_MAX)) {
        cert_dot(C, i, j, si, sj, cr, ci);
        return;
    }
    *cr = r;
    *ci = q;
    *e = 0;
}

/* C' = S - Q*P in double (see emublas_cpu.h). */
OZ_INLINE double crt_rep(const fin_job *J, double hi, double lo)
{
    double Q = rnd(hi * J->Pinv);
    double QP = Q * J->Ph;
    double QPe = fma(Q, J->Ph, -QP);
    double d1 = hi - QP; /* exact (Sterbenz) */
    double tail = fma(-Q, J->Pl, lo - QPe);
    return d1 + tail;
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

static void fin_cols_generic(fin_job *J, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i++) {
            int64_t a = i + j * J->m, off = i * J->rso + j * J->cso;
            int e = clamp_exp(-((int64_t)J->rsh[i] + (int64_t)J->csh[j]));
            double vr = crt_rep(J, J->rh[a], J->rl[a]);
            double vi = J->ih ? crt_rep(J, J->ih[a], J->il[a]) : 0.0;
            if (J->cert && !cert_ok(J->cert, i, j, vr, vi))
                cert_fail(J->cert, i, j, J->rsh[i], J->csh[j], &vr, &vi, &e);
            double cr = 0, ci = 0, re, im;
            if (!J->beta0)
                fin_load_c(J, off, &cr, &ci);
            fin_combine(J, vr, vi, e, cr, ci, &re, &im);
            fin_store(J, off, re, im);
        }
    }
}

#if EMUBLAS_X86
OZ_TARGET OZ_INLINE __m512d vcrt_rep(const fin_job *J, __m512d hi, __m512d lo)
{
    const __m512d Ph = _mm512_set1_pd(J->Ph), Pl = _mm512_set1_pd(J->Pl), Pinv = _mm512_set1_pd(J->Pinv);
    __m512d Q = _mm512_roundscale_pd(_mm512_mul_pd(hi, Pinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d QP = _mm512_mul_pd(Q, Ph);
    __m512d QPe = _mm512_fmsub_pd(Q, Ph, QP);
    __m512d d1 = _mm512_sub_pd(hi, QP);
    __m512d tail = _mm512_fnmadd_pd(Q, Pl, _mm512_sub_pd(lo, QPe));
    return _mm512_add_pd(d1, tail);
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
    return (__mmask8)(k & ~(ok | zero | (wzero & ~dead)));
}

OZ_TARGET static void fin_cols_simd(fin_job *J, int64_t j0, int64_t j1)
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
            __m512d cr_ = vcrt_rep(J, _mm512_maskz_loadu_pd(k, J->rh + a), _mm512_maskz_loadu_pd(k, J->rl + a));
            __m512d ci_ = _mm512_setzero_pd();
            if (J->ih)
                ci_ = vcrt_rep(J, _mm512_maskz_loadu_pd(k, J->ih + a), _mm512_maskz_loadu_pd(k, J->il + a));
            __mmask8 bad = J->cert ? vcert_bad(J->cert, i, j, k, cr_, ci_) : 0;
            if (bad) {
                double br_[8], bi_[8], be_[8];
                _mm512_storeu_pd(br_, cr_);
                _mm512_storeu_pd(bi_, ci_);
                _mm512_storeu_pd(be_, e);
                for (int q = 0; q < n; q++)
                    if (bad >> q & 1) {
                        int eq = clamp_exp((int64_t)be_[q]);
                        cert_fail(J->cert, i + q, j, J->rsh[i + q], J->csh[j], &br_[q], &bi_[q], &eq);
                        be_[q] = eq;
                    }
                cr_ = _mm512_loadu_pd(br_);
                ci_ = _mm512_loadu_pd(bi_);
                e = _mm512_loadu_pd(be_);
            }
            const __m512d vr = cr_, vi = ci_; /* alpha first, then the power of two, as fin_combine */
            const int fast = n == 8 && J->rso == 1;
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
                    fin_store(J, off + q * J->rso, bufr[q], bufi[q]);
            }
        }
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
        fin_cols_simd(J, j0, j1);
        return;
    }
#endif
    fin_cols_generic(J, j0, j1);
}

int emublas_oz_crt_finalize(int64_t m, int64_t n, const double *re_hi, const double *re_lo,
                            const double *im_hi, const double *im_lo, double P_hi, double P_lo,
                            const int32_t *row_shift, const int32_t *col_shift, double alpha_re,
                            double alpha_im, double beta_re, double beta_im, int out_dtype,
                            void *out, int64_t rso, int64_t cso, int uplo, emublas_oz_cert *cert,
                            int nthreads)
{
    if (m < 0 || n < 0 || uplo < 0 || uplo > 2 || out_dtype < 0 || out_dtype > 3)
        return EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!re_hi || !re_lo || !row_shift || !col_shift || !out || (!im_hi) != (!im_lo) ||
        (im_hi && out_dtype < OUT_C64) || !(P_hi > 0) || !isfinite(P_hi) || !isfinite(P_lo))
        return EMUBLAS_EINVAL;
    const int cplx = out_dtype >= OUT_C64;
    fin_job J = {
        .m = m, .n = n, .rh = re_hi, .rl = re_lo, .ih = im_hi, .il = im_lo,
        .Ph = P_hi, .Pl = P_lo, .Pinv = 1.0 / P_hi, .rsh = row_shift, .csh = col_shift,
        .ar = alpha_re, .ai = cplx ? alpha_im : 0.0, .br = beta_re, .bi = cplx ? beta_im : 0.0,
        .dtype = out_dtype, .uplo = uplo, .simd = oz_simd(), .out = out, .rso = rso, .cso = cso,
        .cert = cert,
    };
    if (cert && (!cert->row_err || !cert->col_err ||
                 (cert->W && (!cert->row_wsum || !cert->col_wsum || !cert->row_budget || !cert->col_budget ||
                              cert->ldw < m)) ||
                 !cert->Lr || !cert->Rr || (!cert->Li) != (!cert->Ri) || cert->k < 0))
        return EMUBLAS_EINVAL;
    J.beta0 = J.br == 0.0 && J.bi == 0.0;
    int nt = oz_threads(nthreads, (double)m * (double)n * (uplo ? 0.5 : 1.0) * (cplx ? 32 : 16));
    if (nt > n)
        nt = (int)n;
    emublas__parallel(fin_task, &J, nt);
    return EMUBLAS_OK;
}
