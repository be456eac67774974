/*
 * emublas_boolpack.h -- public C API of the boolpack kernels (boolpack.c).
 *
 * Products of 0/1 matrices as AND + popcount of packed words (docs/design.md §6.1):
 * C[i,j] = popcount(row_i(A) AND col_j(B)).  Both operands are packed along k
 * into uint64 words (bit b of word w is element 64w+b; k is padded with
 * zeros), in panels: MR rows of A, resp. NR columns of B, interleaved word by
 * word, so that one 512-bit load of a B panel holds one word of 8 columns and
 * every vector lane accumulates a different output (no horizontal sums).
 *
 * A packed operand of `rows` rows (rows of A, columns of B) and inner size k
 * occupies emublas_bp_packed_words(side, rows, k) words per plane:
 * ceil(rows/R) panels of R*kw words, kw = ceil(k/64), R = MR or NR; word w of
 * row r of panel p is at [(p*kw + w)*R + r].  Padding rows are zero.
 *
 * All implementations (portable C with __builtin_popcountll, AVX-512
 * VPOPCNTDQ) and thread counts give identical results.  Threads: the pool of
 * pool.c (emublas_cpu.h describes it); nthreads <= 0 means all allowed CPUs.
 */
#ifndef EMUBLAS_BOOLPACK_H
#define EMUBLAS_BOOLPACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Register tile of the GEMM (rows of A x columns of B per micro-kernel). */
#define EMUBLAS_BP_MR 8
#define EMUBLAS_BP_NR 24

/* Values of the impl argument of emublas_bp_gemm. */
#define EMUBLAS_BP_IMPL_AUTO 0      /* best available */
#define EMUBLAS_BP_IMPL_GENERIC 1   /* portable C (__builtin_popcountll) */
#define EMUBLAS_BP_IMPL_VPOPCNTDQ 2 /* AVX-512 VPOPCNTDQ */

/* Source element types of emublas_bp_pack. */
#define EMUBLAS_BP_SRC_U8 0  /* 1-byte elements, any nonzero byte is a 1 (nplanes 1) */
#define EMUBLAS_BP_SRC_I64 1 /* int64 elements: plane p is bit p (two's complement) */

/* Output types of emublas_bp_gemm. */
#define EMUBLAS_BP_OUT_I32 0
#define EMUBLAS_BP_OUT_I64 1

/* Words per plane of a packed operand: side 0 packs rows of A (panels of
 * MR), side 1 columns of B (panels of NR).  -1 for bad arguments. */
int64_t emublas_bp_packed_words(int side, int64_t rows, int64_t k);

/*
 * Pack `rows` vectors of length k: element l of vector r is
 * X[r*rsx + l*csx] (strides in elements; for B's columns pass rsx = B's
 * column stride and csx = its row stride).  For SRC_I64, planes 0..nplanes-1
 * (1 <= nplanes <= 64) are written at out + p*plane_stride; for SRC_U8,
 * nplanes must be 1.  Returns EMUBLAS_OK or EMUBLAS_EINVAL.
 */
int emublas_bp_pack(int src, int side, int64_t rows, int64_t k,
                    const void *X, int64_t rsx, int64_t csx,
                    int nplanes, uint64_t *out, int64_t plane_stride, int nthreads);

/*
 * From packed A (m rows) and packed B (n columns), both of inner size k:
 *   P[i,j] = popcount(A_i AND B_j),
 *   C[i*rsc + j*csc] = (accumulate ? C : 0) + weight * P[i,j]
 * in wrapping arithmetic (int64: modulo 2^64, so a negative weight or a
 * power-of-two weight of a bit plane works; int32 output needs weight 1 and
 * k < 2^31).  m, n or k == 0 is allowed.  Returns EMUBLAS_OK, EMUBLAS_EINVAL
 * or EMUBLAS_ENOTSUP (impl not runnable on this CPU).
 */
int emublas_bp_gemm(int impl, int64_t m, int64_t n, int64_t k,
                    const uint64_t *Ap, const uint64_t *Bp,
                    int out_type, void *C, int64_t rsc, int64_t csc,
                    int64_t weight, int accumulate, int nthreads);

/* Name of the kernel impl selects here ("avx512_vpopcntdq", "generic_popcnt",
 * "generic"), or NULL when impl is invalid or unsupported. */
const char *emublas_bp_kernel_name(int impl);

#ifdef __cplusplus
}
#endif

#endif /* EMUBLAS_BOOLPACK_H */
