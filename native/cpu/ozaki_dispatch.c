/*
 * ozaki_dispatch.c -- the Ozaki-II passes' choice of SIMD path (AVX-512, AVX2
 * or portable C, with a switch for tests) and their split of work over threads.
 */
#pragma GCC optimize("fp-contract=off") /* see ozaki.h */

#include "ozaki.h"

/* ---- dispatch ------------------------------------------------------------ */

static int oz_generic_forced;

int emublas_oz_force_generic(int flag)
{
    int old = __atomic_load_n(&oz_generic_forced, __ATOMIC_RELAXED);
    if (flag >= 0)
        __atomic_store_n(&oz_generic_forced, flag == 2 ? 2 : flag ? 1 : 0, __ATOMIC_RELAXED);
    return old;
}

int oz_simd(void)
{
#if EMUBLAS_X86
    return (emublas__cpu_features() & EMUBLAS__CPU_AVX512_FVLDQBW) &&
           !__atomic_load_n(&oz_generic_forced, __ATOMIC_RELAXED);
#else
    return 0;
#endif
}

int oz_avx2(void)
{
#if EMUBLAS_X86
    return (emublas__cpu_features() & EMUBLAS__CPU_AVX2_FMA) && !oz_simd() &&
           __atomic_load_n(&oz_generic_forced, __ATOMIC_RELAXED) != 1;
#else
    return 0;
#endif
}

const char *emublas_oz_kernel_name(void) { return oz_simd() ? "avx512" : oz_avx2() ? "avx2" : "generic"; }

int oz_threads(int nthreads, double work)
{
    int nt = nthreads > 0 ? nthreads : emublas__online_cpus();
    if (nt > EMUBLAS_MAX_THREADS)
        nt = EMUBLAS_MAX_THREADS;
    if (work < emublas__par_min(OZ_PAR_MIN))
        nt = 1;
    return nt;
}

/* Entries of column j (see split_cols). */
static double col_work(int64_t m, int uplo, int64_t j)
{
    if (uplo == 1)
        return (double)(j + 1 < m ? j + 1 : m);
    if (uplo == 2)
        return (double)(m - j > 0 ? m - j : 0);
    return (double)m;
}

void split_cols(int64_t m, int64_t n, int uplo, int tid, int nt, int64_t *j0, int64_t *j1)
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
