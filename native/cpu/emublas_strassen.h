/*
 * emublas_strassen.h -- public C API of the Strassen-Winograd CPU kernels.
 *
 * Chained Strassen-Winograd (docs/design.md §6.2) run wholly in C: the fused
 * operand sums (S1-S4 from op(A)'s quadrants, T1-T4 from op(B)'s, each
 * quadrant read once), the chain writes C = S + beta*C and the leaf GEMMs,
 * which call a Fortran-convention BLAS ?gemm given as a function pointer
 * (scipy.linalg.cython_blas exports OpenBLAS's).
 *
 * Matrices are column-major blocks with a leading dimension, as in BLAS;
 * op(X) is X (trans 0), X^T (1) or X^H (2).  Sizes are in elements.
 * Element types (dtype): 0 float, 1 double, 2 complex float, 3 complex
 * double (complex values as interleaved (re, im) pairs).  Scalars (alpha,
 * beta) point to one element of that type.  Return codes are those of
 * emublas_cpu.h (EMUBLAS_OK, EMUBLAS_EINVAL, EMUBLAS_ENOMEM).
 */
#ifndef EMUBLAS_STRASSEN_H
#define EMUBLAS_STRASSEN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Deepest recursion the driver accepts. */
#define EMUBLAS_STRASSEN_MAX_LEVELS 8

/*
 * Operand sums of op(X), an (2h) x (2g) matrix whose element (i, j) is
 * X[i*rs + j*cs] (conjugated when conj != 0), with quadrants X11 X12 / X21 X22:
 *   side 0 (A side): S1 = X21+X22, S2 = S1-X11, S3 = X11-X21, S4 = X12-S2
 *   side 1 (B side): T1 = X12-X11, T2 = X22-T1, T3 = X22-X12, T4 = T2-X21
 * written to out[0..3], each h x g with leading dimension ldo.  One pass
 * over X; columns split over up to nthreads threads.
 */
int emublas_strassen_sums(int dtype, int side, int64_t h, int64_t g,
                          const void *X, int64_t rs, int64_t cs, int conj,
                          void *out0, void *out1, void *out2, void *out3,
                          int64_t ldo, int nthreads);

/*
 * Chain write: C = S + beta*C for the m x n blocks (C is not read when
 * beta is zero).  Columns split over up to nthreads threads.
 */
int emublas_strassen_update(int dtype, int64_t m, int64_t n, const void *beta,
                            const void *S, int64_t lds, void *C, int64_t ldc,
                            int nthreads);

/*
 * C = alpha*op(A)*op(B) + beta*C with `levels` levels of chained
 * Strassen-Winograd (odd sizes peeled), C m x n, op(A) m x k, op(B) k x n.
 * gemm: a Fortran ?gemm of the dtype (char *transa, char *transb, int *m,
 * int *n, int *k, T *alpha, T *a, int *lda, T *b, int *ldb, T *beta, T *c,
 * int *ldc), called with beta = 1 to accumulate where the chain allows.
 * writes (optional, `levels` entries): output writes made at each depth
 * (7 per block).  ws_bytes (optional, `levels` entries): workspace bytes of
 * each depth (four S, four T and one chain temporary, reused by the 7
 * products of that depth).  The workspace is kept between calls (see
 * emublas_strassen_release).  Dimensions and leading dimensions must fit in
 * a C int.  Returns EMUBLAS_OK, EMUBLAS_EINVAL or EMUBLAS_ENOMEM.
 */
int emublas_strassen_gemm(int dtype, void *gemm, int trans_a, int trans_b,
                          int64_t m, int64_t n, int64_t k, const void *alpha,
                          const void *A, int64_t lda, const void *B, int64_t ldb,
                          const void *beta, void *C, int64_t ldc, int levels,
                          int nthreads, int64_t *writes, int64_t *ws_bytes);

/* Free the workspace kept between calls; returns the bytes released. */
int64_t emublas_strassen_release(void);

#ifdef __cplusplus
}
#endif

#endif /* EMUBLAS_STRASSEN_H */
