/*
 * emublas_cpu.h -- public C API of the emublas CPU kernels.
 *
 * int8 x int8 -> int32 GEMM (the leaf of the Ozaki-II backend) with a
 * portable C path and an AVX-512 VNNI path chosen at run time.
 *
 * Arithmetic contract: every product and sum is computed in 32-bit two's
 * complement arithmetic that wraps modulo 2^32.  The result is therefore
 * exact modulo 2^32 always, and exact as a signed int32 whenever the true
 * result fits in int32 (|a*b| <= 2^14, so k < 2^17 is always safe; the
 * caller splits k beyond that).  All implementations give bit-identical
 * results.
 *
 * Strides are in elements (not bytes), may be zero or negative, and describe
 * any view: element (i, j) of A is A[i*rsa + j*csa].  The output must not
 * overlap the inputs.
 *
 * Threads: a small pthread pool whose idle workers block on a condition
 * variable (they never spin after a call returns, so a BLAS library called
 * right afterwards gets the cores).  On Linux each worker is pinned to an
 * allowed CPU other than the calling thread's (see pool.c for why).  Calls
 * from several threads at once are safe; a call that finds the pool busy
 * runs on its own thread.  fork() in a process that used the pool is safe.
 *
 * Portability: C11 with GNU extensions (GCC or Clang) and POSIX threads;
 * x86-64 gets the SIMD kernels, other targets the portable C kernel.
 */
#ifndef EMUBLAS_CPU_H
#define EMUBLAS_CPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define EMUBLAS_OK 0
#define EMUBLAS_EINVAL (-1)  /* bad argument (negative size, NULL pointer, bad impl) */
#define EMUBLAS_ENOTSUP (-2) /* implementation requested that this CPU cannot run */
#define EMUBLAS_ENOMEM (-3)  /* packing buffers could not be allocated */

/* Bits of emublas_cpu_features(). */
#define EMUBLAS_CPU_AVX512_VNNI 1      /* avx512f+avx512bw+avx512vl+avx512vnni */
#define EMUBLAS_CPU_AVX512_VPOPCNTDQ 2 /* avx512f+avx512vpopcntdq */

/* Values of the impl argument. */
#define EMUBLAS_IMPL_AUTO 0    /* best available */
#define EMUBLAS_IMPL_GENERIC 1 /* portable C, built for AVX2+FMA where present */
#define EMUBLAS_IMPL_VNNI 2    /* AVX-512 VNNI */
#define EMUBLAS_IMPL_GENERIC_BASELINE 3 /* portable C for the baseline ISA even
                                           where AVX2 exists (for tests) */

/* CPU features usable here (CPU and OS support), a mask of EMUBLAS_CPU_*. */
int emublas_cpu_features(void);

/*
 * C = A*B (accumulate == 0) or C += A*B (accumulate != 0).
 * A is m x k, B is k x n, C is m x n, with element strides as above.
 * k == 0 zeroes C (or leaves it alone when accumulating); m == 0 or n == 0
 * does nothing.  nthreads <= 0 means all CPUs this process may run on.
 * Returns EMUBLAS_OK or a negative EMUBLAS_E* code; C is untouched on error.
 */
int emublas_i8gemm(int impl, int64_t m, int64_t n, int64_t k,
                   const int8_t *A, int64_t rsa, int64_t csa,
                   const int8_t *B, int64_t rsb, int64_t csb,
                   int32_t *C, int64_t rsc, int64_t csc,
                   int accumulate, int nthreads);

/* Name of the kernel that impl selects on this CPU ("avx512_vnni",
 * "generic_avx2", "generic"), or NULL when impl is invalid or unsupported. */
const char *emublas_i8gemm_kernel_name(int impl);

/*
 * Measured VNNI ceiling: runs a register-only chain of independent 512-bit
 * vpdpbusd instructions on nthreads threads (<= 0: all CPUs) for iters loop
 * trips each and returns int8 multiply-adds per second over all threads
 * (each vpdpbusd zmm is 64 multiply-adds).  Returns 0.0 when the CPU lacks
 * AVX-512 VNNI or iters <= 0.
 */
double emublas_vnni_peak_probe(int nthreads, int64_t iters);

#ifdef __cplusplus
}
#endif

#endif /* EMUBLAS_CPU_H */
