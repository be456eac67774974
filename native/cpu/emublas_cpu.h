/*
 * emublas_cpu.h -- public C API of the emublas CPU kernels.
 *
 * int8 x int8 -> int32 GEMM (the leaf of the Ozaki-II backend) with a
 * portable C path and AVX2, AVX-512 VNNI and AMX paths chosen at run time.
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
 * variable (they spin only while a caller holds the pool, see
 * emublas_pool_hold, so a BLAS library called afterwards gets the cores).  On Linux each worker is pinned to an
 * allowed CPU other than the calling thread's (see pool.c for why).  A region
 * never runs more threads than the CPUs nothing else is running on when it
 * starts (emublas_pool_team), unless it is long (tens of milliseconds or
 * more on one thread): another library's spinning workers (OpenBLAS's, for
 * about 0.1 s after each of its calls) would otherwise share CPUs with ours.  Calls
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
#define EMUBLAS_ERANGE (-4)  /* non-finite input (or scaled input overflowed) */

/* Bits of emublas_cpu_features(). */
#define EMUBLAS_CPU_AVX512_VNNI 1      /* avx512f+avx512bw+avx512vl+avx512vnni */
#define EMUBLAS_CPU_AVX512_VPOPCNTDQ 2 /* avx512f+avx512vpopcntdq */
#define EMUBLAS_CPU_AMX_INT8 4         /* amx-tile+amx-int8 with the tile state saved by the OS (the
                                          tile data itself is asked for when impl AMX is first used) */
#define EMUBLAS_CPU_AVX2 8             /* avx2+fma (the AVX2 int8 GEMM kernel) */

/* Values of the impl argument. */
#define EMUBLAS_IMPL_AUTO 0    /* best available */
#define EMUBLAS_IMPL_GENERIC 1 /* portable C, built for AVX2+FMA where present */
#define EMUBLAS_IMPL_VNNI 2    /* AVX-512 VNNI */
#define EMUBLAS_IMPL_GENERIC_BASELINE 3 /* portable C for the baseline ISA even
                                           where AVX2 exists (for tests) */
#define EMUBLAS_IMPL_AMX 4     /* AMX int8 tiles (TDPBSSD); opt-in, auto does not pick it */
#define EMUBLAS_IMPL_AVX2 5    /* AVX2 int16 multiply-adds (vpmaddwd); auto picks it where
                                  AVX2 exists without AVX-512 VNNI */

/* CPU features usable here (CPU and OS support), a mask of EMUBLAS_CPU_*. */
int emublas_cpu_features(void);

/* on != 0: the caller will run several calls back to back (one emulated
 * GEMM); until the matching emublas_pool_hold(0), idle workers pinned one per
 * CPU wait awake for the next call (at most 5 ms each), and sleeping ones are
 * woken now.  Holds nest and may come from several threads.  Performance
 * only: results do not depend on it. */
void emublas_pool_hold(int on);

/* The threads a parallel region asking for nthreads would run now: nthreads,
 * less where fewer CPUs are free of other runnable threads (Linux, where this
 * process may use every online CPU: /proc/loadavg's runnable count, less the
 * caller and the pool's awake workers, the smaller of two readings at least
 * 1 ms apart), at least 1.  A reading serves the regions of the next 1 ms. */
int emublas_pool_team(int nthreads);

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

/* Name of the kernel that impl selects on this CPU ("amx_int8", "avx512_vnni",
 * "avx2", "generic_avx2", "generic"), or NULL when impl is invalid or
 * unsupported. */
const char *emublas_i8gemm_kernel_name(int impl);

/* Make impl AUTO mean impl (EMUBLAS_IMPL_AUTO: the built-in choice again) for
 * every later product of the process, the Ozaki-II loop's included.  Returns
 * EMUBLAS_OK, or the error the kernel lookup gives (ENOTSUP, EINVAL). */
int emublas_i8gemm_set_auto(int impl);

/*
 * Measured VNNI ceiling: runs a register-only chain of independent 512-bit
 * vpdpbusd instructions on nthreads threads (<= 0: all CPUs) for iters loop
 * trips each and returns int8 multiply-adds per second over all threads
 * (each vpdpbusd zmm is 64 multiply-adds).  Returns 0.0 when the CPU lacks
 * AVX-512 VNNI or iters <= 0.
 */
double emublas_vnni_peak_probe(int nthreads, int64_t iters);

/*
 * Measured ceiling of the AVX2 kernel's arithmetic: register-only chains of
 * vpmaddwd + vpaddd pairs (16 int16 multiply-adds each, the pair the AVX2
 * int8 kernel issues) on nthreads threads (<= 0: all CPUs) for iters loop
 * trips each (8 pairs a trip); returns multiply-adds per second over all
 * threads.  Returns 0.0 when the CPU lacks AVX2 and FMA or iters <= 0.
 */
double emublas_avx2_peak_probe(int nthreads, int64_t iters);

/* ---- Ozaki scheme II: the passes around the int8 GEMMs (ozaki_*.c) -------
 *
 * All take element strides (any layout: transposed views, negative strides),
 * run on nthreads threads (<= 0: all CPUs; small inputs run on one), use
 * AVX-512 (F, VL, DQ, BW) where the CPU has it and portable C otherwise, with
 * bit-identical results.  They return EMUBLAS_OK or a negative EMUBLAS_E*.
 * Floating-point steps are fixed sequences of IEEE double operations with
 * explicit FMAs (the file is compiled without contraction).
 *
 * Residues.  For element x (dtype 0: float, 1: double) at X[i*rsx + j*csx]:
 * y = trunc(x * 2^shift) with shift = shift[i] (shift_axis 0) or shift[j]
 * (shift_axis 1), computed exactly (ldexp, then trunc; y may exceed 2^53 by
 * any amount).  For modulus m_l (2 <= m_l <= 256, at most 64 moduli) the
 * symmetric residue r = y mod m_l, in [-(m-1)/2, (m-1)/2] for odd m and
 * [-m/2, m/2-1] for even m, is stored as int8 at
 * out[plane*plane_stride + i*rso + j*cso].  Real: plane l.  Non-finite y
 * (NaN/Inf input, or x * 2^shift overflowing) gives EMUBLAS_ERANGE after all
 * other elements were written (the planes of those elements hold 0).
 */
int emublas_oz_residues(int dtype, int64_t rows, int64_t cols,
                        const void *X, int64_t rsx, int64_t csx,
                        const int32_t *shift, int shift_axis,
                        int nmod, const int32_t *moduli,
                        int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                        int nthreads);

/* Complex residues for 2M moduli: real parts at Xr, imaginary parts at Xi,
 * both with strides rsx, csx in real elements (interleaved complex:
 * Xi = Xr + 1, strides doubled).  yr, yi as above (yi negated if conj).
 * roots[l] = s with s^2 == -1 (mod m_l), else EMUBLAS_EINVAL.  Planes 2l and
 * 2l+1 get (yr + s*yi) mod m_l and (yr - s*yi) mod m_l. */
int emublas_oz_residues_cplx(int dtype, int64_t rows, int64_t cols,
                             const void *Xr, const void *Xi, int64_t rsx, int64_t csx,
                             const int32_t *shift, int shift_axis, int conj,
                             int nmod, const int32_t *moduli, const int32_t *roots,
                             int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                             int nthreads);

/* Complex residues for 3M (Karatsuba) moduli: planes 3l, 3l+1, 3l+2 get
 * yr mod m_l, yi mod m_l and (yr + yi) mod m_l. */
int emublas_oz_residues_3m(int dtype, int64_t rows, int64_t cols,
                           const void *Xr, const void *Xi, int64_t rsx, int64_t csx,
                           const int32_t *shift, int shift_axis, int conj,
                           int nmod, const int32_t *moduli,
                           int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                           int nthreads);

/*
 * The CRT sum, exact.  With P the product of the moduli, E its bit length and
 * beta = 46 - ceil(log2 N) for at most N terms per entry and part, each CRT
 * weight (an integer below P) is held as three doubles b[0] + b[1] + b[2]:
 * b[s] a multiple of u_{s+1} = 2^(E - (s+1) beta) with |b[s]| <= 2^beta u_{s+1}
 * (b[2] is rounded to its grid when E > 3 beta: the only approximation).
 * A term t (|t| <= 128) adds fma(t, b[s], acc_s) to accumulator s; every such
 * fma is exact (the partial sums are multiples of u_{s+1} below 2^53 u_{s+1}),
 * so the sums do not depend on the order of the terms.
 *
 * Modular reduction fused with that accumulation, for the m x n entries
 * selected by uplo (0 all, 1 i <= j, 2 i >= j; others are not touched):
 *   t = (w1*X1[i*rs1 + j*cs1] + w2*X2[i*rs2 + j*cs2]) mod modulus,
 *       symmetric representative, exact (X2 may be NULL, and may alias X1
 *       with other strides, e.g. its transpose);
 *   acc[s*plane + i + j*m] = fma(t, big[s], first ? 0 : acc[s*plane + i + j*m]), s = 0, 1, 2.
 * acc holds three column-major planes with leading dimension m, plane >= m*n
 * elements apart.  |w1|, |w2| < 2^16, 2 <= modulus < 2^31, else EMUBLAS_EINVAL.
 */
int emublas_oz_crt_accumulate(int64_t m, int64_t n,
                              const int32_t *X1, int64_t rs1, int64_t cs1, int32_t w1,
                              const int32_t *X2, int64_t rs2, int64_t cs2, int32_t w2,
                              int32_t modulus, const double *big, double *acc, int64_t plane,
                              int first, int uplo, int nthreads);

/* The finalize's constants of one set of moduli and beta: P = P[0] + P[1] + P[2]
 * on the grids of the weights (P[2] rounded to double when it does not fit),
 * Pinv = 1/P rounded, u1 = 2^(E - beta), u2 = 2^(E - 2 beta) and their inverses. */
typedef struct {
    double P[3];
    double Pinv, u1, iu1, u2, iu2;
} emublas_oz_crt;

/*
 * CRT finalize for the entries selected by uplo.  With (s1, s2, s3) the three
 * accumulated sums of an entry (re_acc / im_acc as acc above):
 *   c = round(s3/u2) u2, s2 += c, s3 -= c;  c = round(s2/u1) u1, s1 += c, s2 -= c;
 *   Q = round(s1 * Pinv);  d_s = fma(-Q, P[s-1], s_s)  (s = 1, 2, 3; all exact);
 *   C' = t + (e + d3) with (t, e) the two-sum of d1 and d2
 * (every step but the last two additions is exact, and Q is right when |C'| <=
 * P/2 (1 - 2^-31), which the caller guarantees; C' is then the symmetric
 * representative rounded to double, apart from the weights' rounding when
 * E > 3 beta and 2^-53 |e + d3|), v = ldexp(C', -(row_shift[i] + col_shift[j]))
 * (exact unless it underflows or overflows), for the real and (when im_acc is
 * given) imaginary parts, and
 *   real out:    out = alpha_re*v [+ beta_re*out]
 *   complex out: out = (alpha*v) [+ (beta*out)], each complex product as
 *                (ar*vr - ai*vi) + i(ar*vi + ai*vr),
 * in double, rounded once to out_dtype (0 float, 1 double, 2 complex float,
 * 3 complex double; strides in elements of that type).  beta == 0 (both
 * parts) means out is not read.  im_acc with a real out_dtype is EMUBLAS_EINVAL.
 */
/*
 * The per-entry accuracy certificate of the finalize (cert != NULL).  With C'
 * the reconstructed integer entry (real and imaginary parts), all in log2 and
 * in the units of C' (the product of the scaled integers):
 *   error   E  = max(row_err[i], col_err[j], crt_err)
 *           (row_err[i] = shift_i + log2 |X_i|_1 + slack: what truncating Y costs
 *           row i, col_err[j] the same for column j, crt_err the
 *           reconstruction's own error; slack covers the sum of the three and,
 *           for complex data, the modulus; -inf for an all-zero row/column,
 *           whose entries are exact)
 *   bound   B  = max(floor(log2 max|C'|) - 1     if floor(log2 max|C'|) - 1 >= E,
 *                    row_budget[i] + col_budget[j] + floor(log2 d) - 14
 *                                                 if W != NULL and d > 0),
 *           d = W[i + j*ldw] - row_wsum[i] - col_wsum[j] (a lower bound of
 *           127^2 sum|x||y| / 2^(ea_i+eb_j) from the accurate mode's bound product),
 *   certified when E <= target + B (target = log2(k) - precision: native BLAS's
 *   worst-case bound k*u*sum|x||y|).
 * An entry that is not certified is counted in cert->uncertified and, with
 * cert->fix, recomputed as a float64 dot product of the factors L (rows x k)
 * and R (cols x k), conjugated as flagged, summed with fma in order l = 0..k-1
 * (real: s = fma(x, y, s); complex: re = fma(xr, yr, re), re = fma(-xi, yi, re),
 * im = fma(xr, yi, im), im = fma(xi, yr, im)), which meets that bound.
 */
typedef struct {
    const double *row_err, *col_err;
    double crt_err, target;
    const int32_t *W;
    int64_t ldw;
    const double *row_wsum, *col_wsum;
    const int32_t *row_budget, *col_budget;
    int fix;
    int dtype; /* of the factors: 0 float32, 1 float64 */
    const void *Lr, *Li, *Rr, *Ri; /* Li, Ri NULL: real factors */
    int64_t rsl, csl, rsr, csr, k;
    int conj_l, conj_r;
    int64_t uncertified; /* out */
} emublas_oz_cert;

int emublas_oz_crt_finalize(int64_t m, int64_t n,
                            const double *re_acc, const double *im_acc, int64_t plane,
                            const emublas_oz_crt *crt,
                            const int32_t *row_shift, const int32_t *col_shift,
                            double alpha_re, double alpha_im, double beta_re, double beta_im,
                            int out_dtype, void *out, int64_t rso, int64_t cso,
                            int uplo, emublas_oz_cert *cert, int nthreads);

/*
 * The int8 products and CRT accumulation of a run of moduli in one call
 * (ozaki_product.c): what the Python driver's loop over moduli and k-chunks
 * does with emublas_i8gemm and emublas_oz_crt_accumulate, in its order and
 * with its arithmetic (bit-identical), on one thread team.
 *
 * The schedule (constant per recipe, moduli and k): modulus l of the run
 * (l < nmod <= EMUBLAS_OZ_MAX_MODULI) has planes l*planes .. l*planes +
 * planes-1 of each factor and products prod_off[l] .. prod_off[l+1]-1, each
 * a pair prods[2q], prods[2q+1] of plane indices (relative to the modulus's
 * first plane) of X and Y; at most EMUBLAS_OZ_RUN_MAX_PRODS per modulus.  Its
 * terms term_off[l] .. term_off[l+1]-1 hold 7 integers each:
 *   part (0 real, 1 imaginary), p1, t1, w1, p2 (-1: none), t2, w2,
 * products p1, p2 of the modulus (relative to prod_off[l]), read transposed
 * when t1 / t2 (rank-k updates; the output must then be square).
 * For each modulus l, each k-chunk c (columns [c*k_chunk, min(kk,
 * (c+1)*k_chunk)) of the planes), the products P_q = X_a Y_b^T (mx x my,
 * int32) are formed, then each term in order is
 *   emublas_oz_crt_accumulate(P_p1 (or P_p1^T), w1, P_p2 ..., w2, moduli[l],
 *                             big + 3 l, acc of part, plane, first[part], uplo)
 * with first[part] cleared after each term of that part (first is in/out).
 * Plane p of X: element (i, q) at X[p*xps + i*xrs + q*xcs]; Y likewise.
 * acc_re / acc_im: three planes each, as emublas_oz_crt_accumulate's acc
 * (acc_im may be NULL when no term has part 1).  group (>= 1): moduli whose products may be
 * held at once (group * max products per modulus * mx * my int32 of
 * scratch), their terms then folded in one pass over the accumulators (same
 * order per entry, same bits; used with one k-chunk, no transposed terms and
 * AVX-512, else 1).  scratch (may be NULL: allocated here): the int32 buffer
 * of the products, scratch_len elements, 4-byte aligned, not overlapping
 * anything else; emublas_oz_run_scratch gives the length a group needs (a
 * shorter one lowers the group; shorter than one modulus's is
 * EMUBLAS_EINVAL).  seconds (may be NULL): wall time of the calling thread
 * in the products and in the accumulation, added to seconds[0] and
 * seconds[1].  Returns EMUBLAS_OK, EMUBLAS_EINVAL for a bad schedule or
 * argument, EMUBLAS_ENOMEM.
 */
#define EMUBLAS_OZ_RUN_MAX_PRODS 8

typedef struct {
    int nmod, planes;
    int64_t kk, k_chunk, nchunks;
    const int32_t *prod_off, *prods;
    const int32_t *term_off, *terms;
    const int32_t *moduli;
    const double *big; /* three pieces per modulus */
} emublas_oz_schedule;

int emublas_oz_run_products(const emublas_oz_schedule *S, int64_t mx, int64_t my,
                            const int8_t *X, int64_t xps, int64_t xrs, int64_t xcs,
                            const int8_t *Y, int64_t yps, int64_t yrs, int64_t ycs,
                            double *acc_re, double *acc_im, int64_t plane,
                            int32_t *first, int uplo, int group, int32_t *scratch, int64_t scratch_len,
                            double *seconds, int nthreads);

/* int32 elements of scratch that emublas_oz_run_products uses for this
 * schedule, output size and requested group (-1: bad schedule or sizes). */
int64_t emublas_oz_run_scratch(const emublas_oz_schedule *S, int64_t mx, int64_t my, int group);

/* "avx512", "avx2" or "generic": the implementation the emublas_oz_* kernels use. */
const char *emublas_oz_kernel_name(void);

/* For tests: flag 1 forces the portable C path of the emublas_oz_* kernels,
 * 2 the AVX2 path where the CPU has AVX2+FMA (the portable one elsewhere),
 * 0 restores run-time dispatch, -1 only queries.  Returns the previous flag.
 * Every path gives bit-identical results. */
int emublas_oz_force_generic(int flag);

/* Ozaki-II scaling pass (ozaki_scale.c).  Xr/Xi: real and imaginary parts
 * (Xi NULL for real data), strides in real elements; dtype 0 float32 parts,
 * 1 float64 parts.  row_stats: per row max |x| (non-finite if the row holds
 * NaN/Inf), sum |x|^2 and sum |x|.  bound_int8: out = ceil(127 |x| 2^-ea[row]). */
int emublas_oz_row_stats(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                         int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                         int nthreads);
/* row_stats continued over more columns: starts from the given rowmax, sumsq
 * and l1 (each row's sums run over the columns in order, so feeding the
 * column blocks of a matrix one after the other gives bit-identical sums to
 * one call on the whole matrix; used by the distributed path). */
int emublas_oz_row_stats_carry(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                               int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                               int nthreads);
int emublas_oz_bound_int8(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                          int64_t rsx, int64_t csx, const int32_t *ea, int8_t *out, int64_t rso,
                          int64_t cso, int nthreads);
/* row_stats and bound_int8 in one read of the input (rows in blocks that stay in
 * cache between the two): the same statistics, ea[row] = frexp exponent of max |x|
 * (0 for a zero row or one holding NaN/Inf) written here, and the same bounds
 * (all zero on a row holding NaN/Inf). */
int emublas_oz_stats_bound(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi, int64_t rsx,
                           int64_t csx, double *rowmax, double *sumsq, double *l1, int32_t *ea, int8_t *out,
                           int64_t rso, int64_t cso, int nthreads);
/* The scaling plan of each row (as the GPU's oz_plan): from max |x| (non-finite for
 * a row holding NaN/Inf), sum |x|^2, sum |x| and, in accurate mode, the bound
 * product's row maxima wmax (NULL: fast mode), for the product bound 2^L:
 *   ea = frexp exponent of max |x| (0 for a zero row),
 *   g  = log2(wmax) - log2_127sq + safety (accurate) or (log2(sumsq) - 2 ea) + safety
 *        (fast; log2k + safety where the sum over/underflowed), -inf for a zero row,
 *   u  = floor((L - g) / 2) (0 where not finite), shift = u - ea, budget = u,
 *   err = (shift + lg) + slack, lg = log2(sum |x|) (ea + log2k where it overflowed),
 *   wsum = (127 ldexp(sum |x|, -ea)) (1 + 2^-40) + kd + 1 (127 kd + kd + 1 where it overflowed);
 * a row holding NaN/Inf gets shift EMUBLAS_OZ_DEAD, err +inf, wsum 0, budget 0. */
int emublas_oz_row_plan(int64_t rows, const double *rowmax, const double *sumsq, const double *l1,
                        const int64_t *wmax, double L, double log2_127sq, double safety, double log2k, double kd,
                        double slack, int32_t *shift, double *err, double *wsum, int32_t *budget);
/* Fast mode's scaling and the residues of one run of moduli in one read of the factor
 * (rows in cache-sized blocks: their statistics, their plan as emublas_oz_row_plan with
 * wmax NULL, then their residues as emublas_oz_residues* with shift_axis 0), bit-identical
 * to those three calls.  kind: 0 real (Xi NULL), 1 2M (roots), 2 3M, 3 split (real data,
 * Xi NULL, cols even: the left and right column halves as the parts of a 2M residue,
 * cols / 2 residue columns; the statistics are of the whole rows).  A row holding NaN/Inf
 * gets shift EMUBLAS_OZ_DEAD and zero residues.  Returns EMUBLAS_ERANGE where a scaled
 * element was not finite. */
int emublas_oz_scaled_residues(int kind, int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                               int64_t rsx, int64_t csx, int conj, int nmod, const int32_t *moduli,
                               const int32_t *roots, int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                               double L, double safety, double log2k, double slack, double *rowmax, double *sumsq,
                               double *l1, int32_t *shift, double *err, double *wsum, int32_t *budget, int nthreads);

#ifdef __cplusplus
}
#endif

#endif /* EMUBLAS_CPU_H */
