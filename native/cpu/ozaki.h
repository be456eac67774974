/*
 * ozaki.h -- what the Ozaki scheme II passes around the int8 GEMMs share
 * (ozaki_dispatch.c, ozaki_residues.c, ozaki_accumulate.c, ozaki_finalize.c;
 * docs/design.md §2): the SIMD dispatch, the thread split, and the exact
 * scalar and vector reductions modulo m.  Internal; every symbol is hidden.
 *
 * Exactness.  Every residue computation is exact, so the AVX-512 path and the
 * portable C path give bit-identical results whatever rounding their
 * intermediate steps do; the CRT sums are exact (every fma of the
 * accumulation is representable), and the floating-point steps after them
 * (the carries, the two-sum, the complex alpha/beta arithmetic) are written in
 * one fixed order with explicit fma() in both paths.  Contraction of a*b+c
 * into an FMA would break the error-free transformations (a two-sum whose sum
 * came out of an FMA is no longer error-free) and make the paths differ, so every source
 * that includes this header starts with
 *     #pragma GCC optimize("fp-contract=off")
 * (before this #include, so that the inline helpers below are compiled
 * without contraction too) whatever -ffp-contract the build uses.
 *
 * Include it first: it sets _POSIX_C_SOURCE before the system headers.
 */
#ifndef EMUBLAS_OZAKI_H
#define EMUBLAS_OZAKI_H

#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emublas_constants.h"
#include "internal.h"

#if EMUBLAS_X86
#include <immintrin.h>
#define OZ_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#define OZ_TARGET2 __attribute__((target("avx2,fma")))
#endif

#define OZ_PAR_MIN (1 << 17) /* element-planes below which one thread runs */

#define OZ_INLINE static inline __attribute__((always_inline))

/* ---- scaling (ozaki_scale.c) ---------------------------------------------- */

/* Row statistics then the fast mode's plan (no bound product) of rows [i0, i1) of a
 * factor with `cols` columns, on the calling thread: the arithmetic of
 * emublas_oz_row_stats and emublas_oz_row_plan. */
EMUBLAS_HIDDEN void oz_stats_plan_rows(int dtype, int64_t cols, const void *Xr, const void *Xi, int64_t rsx,
                                       int64_t csx, int64_t i0, int64_t i1, double *rowmax, double *sumsq,
                                       double *l1, double L, double safety, double log2k, double kd, double slack,
                                       int32_t *shift, double *err, double *wsum, int32_t *budget);

/* Rows per block of a pass that reads its rows twice (the second time from cache), for
 * rows of row_bytes bytes and the factor's element strides. */
EMUBLAS_HIDDEN int64_t oz_block_rows(int64_t row_bytes, int64_t rsx, int64_t csx);

/* ---- dispatch (ozaki_dispatch.c) ----------------------------------------- */

/* Whether the AVX-512 path runs: the CPU has it and emublas_oz_force_generic
 * has not switched it off. */
EMUBLAS_HIDDEN int oz_simd(void);

/* Whether the AVX2 path runs: the AVX-512 one does not, the CPU has AVX2+FMA
 * and emublas_oz_force_generic has not forced the portable C path. */
EMUBLAS_HIDDEN int oz_avx2(void);

/* Threads for a pass of the given work (element-planes): nthreads (<= 0: all
 * CPUs), at most EMUBLAS_MAX_THREADS, one below emublas__par_min(OZ_PAR_MIN). */
EMUBLAS_HIDDEN int oz_threads(int nthreads, double work);

/* An Ozaki pass's parallel region of `work` element-planes (oz_threads's
 * measure), sized for emublas__parallel_sized at a rough one-thread rate of
 * 0.1-0.3 ns each (bench_ozaki_kernels.py). */
#define OZ_WORK_PER_S 4e9
static inline int oz_parallel(emublas_task_fn fn, void *ctx, int nt, double work)
{
    return emublas__parallel_sized(fn, ctx, nt, work / OZ_WORK_PER_S);
}

/* Columns [j0, j1) of thread tid: equal shares of the work, where column j
 * of an m-row matrix holds min(j+1, m) entries for uplo 1, max(m-j, 0) for
 * uplo 2 and m otherwise. */
EMUBLAS_HIDDEN void split_cols(int64_t m, int64_t n, int uplo, int tid, int nt, int64_t *j0, int64_t *j1);

/* Rows [i0, i1) of column j in the triangle uplo (0 full, 1 upper, 2 lower). */
static inline void row_range(int64_t m, int uplo, int64_t j, int64_t *i0, int64_t *i1)
{
    *i0 = 0;
    *i1 = m;
    if (uplo == 1)
        *i1 = j + 1 < m ? j + 1 : m;
    else if (uplo == 2)
        *i0 = j < m ? j : m;
}

/* ---- scalar arithmetic ---------------------------------------------------- */

typedef struct {
    double m, inv, bias, c49;
} ozmod;

static inline void ozmod_init(ozmod *M, int64_t m)
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
    return (z + EMUBLAS_OZ_MAGIC) - EMUBLAS_OZ_MAGIC;
}

OZ_INLINE double trunc_int(double v)
{
    return fabs(v) < 0x1p52 ? (double)(int64_t)v : v; /* NaN passes through */
}

/* Symmetric residue of an integer t, |t| < 2^49 (see ozaki_residues.c). */
OZ_INLINE double red_small(double t, const ozmod *M)
{
    double q = rnd(fma(t, M->inv, M->bias));
    return fma(-q, M->m, t);
}

#if EMUBLAS_X86
/* red_small on 8 lanes. */
OZ_TARGET OZ_INLINE __m512d vred(__m512d t, __m512d m, __m512d inv, __m512d bias)
{
    __m512d q = _mm512_roundscale_pd(_mm512_fmadd_pd(t, inv, bias), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_fnmadd_pd(q, m, t);
}

/* red_small on 4 lanes. */
OZ_TARGET2 OZ_INLINE __m256d vred4(__m256d t, __m256d m, __m256d inv, __m256d bias)
{
    __m256d q = _mm256_round_pd(_mm256_fmadd_pd(t, inv, bias), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_fnmadd_pd(q, m, t);
}
#endif

/* ---- CRT accumulate inside a caller's parallel region (ozaki_accumulate.c) -- */

typedef struct {
    int64_t m, n;
    const int32_t *X1, *X2;
    int64_t rs1, cs1, rs2, cs2;
    double w1, w2;
    ozmod M;
    double b[3];  /* the CRT weight's three pieces (emublas_cpu.h) */
    double *acc;  /* three accumulator planes, plane apart */
    int64_t plane;
    int first, uplo, simd, nt;
    int avx2; /* the AVX2 path (simd 0) */
} acc_job;

/* J for emublas_oz_crt_accumulate's arguments (checked by the caller). */
EMUBLAS_HIDDEN void oz_acc_prepare(acc_job *J, int64_t m, int64_t n, const int32_t *X1, int64_t rs1, int64_t cs1,
                                   int32_t w1, const int32_t *X2, int64_t rs2, int64_t cs2, int32_t w2,
                                   int32_t modulus, const double *big, double *acc, int64_t plane, int first,
                                   int uplo);

/* Thread tid's columns (split_cols) of a prepared accumulation (an emublas_task_fn). */
EMUBLAS_HIDDEN void oz_acc_task(void *ctx, int tid, int nt);

/* One term of oz_acc_terms_task: x1, x2 (x2 may be NULL) column-major with
 * leading dimension m, not transposed; w2 is 0 without x2. */
typedef struct {
    const int32_t *x1, *x2;
    double w1, w2;
    ozmod M;
    double b[3];
    int part;  /* accumulator planes acc[part] */
    int first; /* start them (zero instead of their value) */
} acc_term;

#define OZ_MAX_FUSED_TERMS 32

/* Thread tid's columns of several terms (of several moduli) in one pass over
 * the entries: for each entry the terms in order, each with the operations
 * of oz_acc_task, so the results equal running them one after the other;
 * the accumulators are read and written once.  Returns 0 (and does
 * nothing) where that path does not exist (neither AVX-512 nor AVX2, too
 * many terms). */
EMUBLAS_HIDDEN int oz_acc_terms_task(int64_t m, int64_t n, int uplo, const acc_term *T, int nterm,
                                     double *const acc[2], int64_t plane, int tid, int nt);

#endif /* EMUBLAS_OZAKI_H */
