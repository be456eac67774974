/*
 * i8gemm.c -- int8 x int8 -> int32 GEMM: the blocked driver shared by all
 * kernels, the portable C kernel, and the public entry point.
 *
 * The driver follows the BLIS loop nest: for each NC-wide column block of
 * B, for each KC-deep slice, pack B; for each MC-tall row block of A, pack A;
 * then sweep the packed block with MR x NR register tiles.  Threads split C
 * into disjoint row or column ranges and run the nest independently, so they
 * never synchronise inside a call.
 *
 * All sums are formed in uint32_t (or in SIMD lanes, which wrap), so
 * overflow wraps modulo 2^32 without undefined behaviour; results are the
 * same for every kernel and every thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- portable C kernel -------------------------------------------------------
 * Products of int8 values are at most 2^14 in size, so a sum of up to 1024 of
 * them is an integer of at most 2^24 in size, and every such integer (and
 * every partial sum, in any order) is exact in binary32.  The portable kernel
 * therefore multiplies in float -- the fastest arithmetic any compiler
 * vectorises well everywhere -- over k-slices of at most GEN_KC_MAX, converts
 * the exact tile to int32, and accumulates slices in wrapping int32 like the
 * other kernels.  The results are bit-identical to an integer computation.
 *
 * The kernel is written with GNU C vector extensions (GCC, Clang), not
 * intrinsics, and instantiated twice from the same source: for the baseline
 * ISA (128-bit vectors, 6 x 8 tile) and, where the CPU has them, for AVX2+FMA
 * (6 x 16 tile).  The build uses -ffp-contract=fast so the latter gets FMAs;
 * exactness does not depend on it (an FMA of exact integers below 2^24 is
 * exact too). */

#define GEN_KC_MAX 1024 /* 1024 * 2^14 = 2^24: the exactness limit above */
#define GEN_KC 512
_Static_assert(GEN_KC <= GEN_KC_MAX, "generic kernel: k-slice too deep for exact float sums");

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* int8 -> float panels: A as [panel][k][tile rows], B as [panel][k][tile
 * columns], zero padded to whole panels. */
static ALWAYS_INLINE void pack_f32(int64_t rows, int64_t kc, const int8_t *X,
                                   int64_t rs, int64_t ks, float *dst, int tile)
{
    for (int64_t i0 = 0; i0 < rows; i0 += tile) {
        const int64_t t = rows - i0 < tile ? rows - i0 : tile;
        const int8_t *x = X + i0 * rs;
        if (t == tile && rs == 1) {
            for (int64_t p = 0; p < kc; p++, dst += tile)
                for (int i = 0; i < tile; i++)
                    dst[i] = (float)x[p * ks + i];
        } else {
            for (int64_t p = 0; p < kc; p++, dst += tile)
                for (int64_t i = 0; i < tile; i++)
                    dst[i] = i < t ? (float)x[p * ks + i * rs] : 0.0f;
        }
    }
}

/* One instantiation of the kernel: VT is a float vector of VW lanes (VTI and
 * VTU its int32 and uint32 twins), the tile is MR x (NV*VW).
 * T = A panel * B panel in float (exact), then C = T or C += T in wrapping
 * int32. */
#define DEFINE_GENERIC_KERNEL(SUFFIX, ATTR, VT, VTI, VTU, VW, MR, NV, PAR_MIN)    \
    ATTR static void pack_a_##SUFFIX(int64_t mc, int64_t kc, const int8_t *A,     \
                                     int64_t rsa, int64_t csa, void *dst)         \
    {                                                                             \
        pack_f32(mc, kc, A, rsa, csa, dst, MR);                                   \
    }                                                                             \
    ATTR static void pack_b_##SUFFIX(int64_t kc, int64_t nc, const int8_t *B,     \
                                     int64_t rsb, int64_t csb, void *dst,         \
                                     int32_t *bias)                               \
    {                                                                             \
        (void)bias; /* the float kernel needs no bias */                          \
        pack_f32(nc, kc, B, csb, rsb, dst, (NV) * (VW));                          \
    }                                                                             \
    ATTR static void micro_##SUFFIX(int64_t kc, const void *a_, const void *b_,   \
                                    const int32_t *bias, int32_t *c, int64_t rsc, \
                                    int add)                                      \
    {                                                                             \
        const float *a = a_, *b = b_;                                             \
        VT acc[MR][NV];                                                           \
        (void)bias;                                                               \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                  \
                acc[r][v] = (VT){0};                                              \
        for (int64_t p = 0; p < kc; p++) {                                        \
            VT bv[NV];                                                            \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)                  \
                memcpy(&bv[v], b + (VW) * v, sizeof(VT));                         \
            _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                  \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)              \
                    acc[r][v] += a[r] * bv[v];                                    \
            a += MR;                                                              \
            b += (NV) * (VW);                                                     \
        }                                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                \
                int32_t *cp = c + r * rsc + (VW) * v;                             \
                VTU x = (VTU)__builtin_convertvector(acc[r][v], VTI), old;        \
                if (add) { /* unsigned lanes: the sum wraps, no UB */             \
                    memcpy(&old, cp, sizeof old);                                 \
                    x += old;                                                     \
                }                                                                 \
                memcpy(cp, &x, sizeof x);                                         \
            }                                                                     \
    }                                                                             \
    static const emublas__i8kernel kernel_##SUFFIX = {                            \
        .name = #SUFFIX,                                                          \
        .mr = MR, .nr = (NV) * (VW), .kmul = 1, .elt = 4,                         \
        .kc = GEN_KC, .mc = 96, .nc = 2048, .par_min_macs = PAR_MIN,              \
        .pack_a = pack_a_##SUFFIX,                                                \
        .pack_b = pack_b_##SUFFIX,                                                \
        .micro = micro_##SUFFIX,                                                  \
    };

/* Baseline: 128-bit vectors (SSE2 on x86-64, NEON on arm64), 6 x 8 tile in
 * 12 of the 16 vector registers. */
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef uint32_t vu4 __attribute__((vector_size(16)));
DEFINE_GENERIC_KERNEL(generic, , vf4, vi4, vu4, 4, 6, 2, 1 << 21)

#if EMUBLAS_X86
/* AVX2+FMA: 256-bit vectors, 6 x 16 tile in 12 of the 16 ymm registers. */
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef uint32_t vu8 __attribute__((vector_size(32)));
DEFINE_GENERIC_KERNEL(generic_avx2, __attribute__((target("avx2,fma"))), vf8, vi8, vu8, 8, 6,
                      2, 1 << 22)
#endif

/* The portable kernel, built for the best ISA this CPU has. */
static const emublas__i8kernel *generic_kernel(void)
{
#if EMUBLAS_X86
    if (emublas__cpu_features() & EMUBLAS__CPU_AVX2_FMA)
        return &kernel_generic_avx2;
#endif
    return &kernel_generic;
}

/* ---- blocked driver ------------------------------------------------------ */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Block size <= max (a multiple of mult) that splits total into equal
 * blocks: k = 600 with KC = 512 gives 2 x 300, not 512 + 88. */
static int64_t balanced_block(int64_t total, int64_t max, int64_t mult)
{
    int64_t nblocks = (total + max - 1) / max;
    return round_up((total + nblocks - 1) / nblocks, mult);
}

typedef emublas__gemm_job gemm_job;

/* Per-thread workspace layout, every part 64-byte aligned. */
typedef struct {
    size_t apack, bpack, bias, tile, total;
} ws_layout;

static ws_layout workspace_layout(const emublas__i8kernel *K, int64_t m,
                                  int64_t n, int64_t k)
{
    int64_t kp = round_up(min64(K->kc, k), K->kmul);
    int64_t mp = round_up(min64(K->mc, m), K->mr);
    int64_t np = round_up(min64(K->nc, n), K->nr);
    ws_layout w;
    w.apack = 0;
    w.bpack = w.apack + (size_t)round_up(mp * kp * K->elt, 64);
    w.bias = w.bpack + (size_t)round_up(np * kp * K->elt, 64);
    w.tile = w.bias + (size_t)round_up(np * 4, 64);
    w.total = w.tile + (size_t)round_up((int64_t)K->mr * K->nr * 4, 64);
    return w;
}

/* Scratch tile t (row stride ldt) into C, for edge tiles and strided C. */
static void tile_store(const int32_t *t, int64_t ldt, int64_t mr, int64_t nr,
                       int32_t *c, int64_t rsc, int64_t csc, int add)
{
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++) {
            int32_t *p = c + i * rsc + j * csc;
            uint32_t v = (uint32_t)t[i * ldt + j];
            if (add)
                v += (uint32_t)*p;
            *p = (int32_t)v;
        }
}

/* The whole loop nest on one thread, for an m x n sub-problem. */
static void gemm_serial(const gemm_job *J, int64_t m, int64_t n,
                        const int8_t *A, const int8_t *B, int32_t *C,
                        unsigned char *work)
{
    const emublas__i8kernel *K = J->K;
    const int64_t MR = K->mr, NR = K->nr, k = J->k;
    const int64_t rsa = J->rsa, csa = J->csa, rsb = J->rsb, csb = J->csb;
    const int64_t rsc = J->rsc, csc = J->csc;
    const ws_layout w = workspace_layout(K, J->m, J->n, J->k);
    unsigned char *apack = work + w.apack;
    unsigned char *bpack = work + w.bpack;
    int32_t *bias = (int32_t *)(work + w.bias);
    int32_t *tile = (int32_t *)(work + w.tile);

    const int64_t KC = balanced_block(k, K->kc, K->kmul);
    const int64_t MC = balanced_block(m, K->mc, MR);
    const int64_t NC = balanced_block(n, K->nc, NR);

    for (int64_t jc = 0; jc < n; jc += NC) {
        const int64_t nc = min64(NC, n - jc);
        for (int64_t pc = 0; pc < k; pc += KC) {
            const int64_t kc = min64(KC, k - pc);
            const int64_t kp = round_up(kc, K->kmul);
            const int add = J->accumulate || pc > 0;
            K->pack_b(kc, nc, B + pc * rsb + jc * csb, rsb, csb, bpack, bias);
            for (int64_t ic = 0; ic < m; ic += MC) {
                const int64_t mc = min64(MC, m - ic);
                K->pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, apack);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    const int64_t nr = min64(NR, nc - jr);
                    const unsigned char *bp = bpack + jr * kp * K->elt;
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const int64_t mr = min64(MR, mc - ir);
                        const unsigned char *ap = apack + ir * kp * K->elt;
                        int32_t *cp = C + (ic + ir) * rsc + (jc + jr) * csc;
                        if (mr == MR && nr == NR && csc == 1) {
                            K->micro(kp, ap, bp, bias + jr, cp, rsc, add);
                        } else {
                            K->micro(kp, ap, bp, bias + jr, tile, NR, 0);
                            tile_store(tile, NR, mr, nr, cp, rsc, csc, add);
                        }
                    }
                }
            }
        }
    }
}

void emublas__i8gemm_task(void *ctx, int tid, int nthreads)
{
    const gemm_job *J = ctx;
    const int64_t unit = J->split_n ? J->K->nr : J->K->mr;
    const int64_t dim = J->split_n ? J->n : J->m;
    const int64_t units = (dim + unit - 1) / unit;
    const int64_t lo = min64(dim, units * tid / nthreads * unit);
    const int64_t hi = min64(dim, units * (tid + 1) / nthreads * unit);
    if (lo >= hi)
        return;
    unsigned char *work = J->work + (size_t)tid * J->work_stride;
    if (J->split_n)
        gemm_serial(J, J->m, hi - lo, J->A, J->B + lo * J->csb,
                    J->C + lo * J->csc, work);
    else
        gemm_serial(J, hi - lo, J->n, J->A + lo * J->rsa, J->B,
                    J->C + lo * J->rsc, work);
}

/* Threads split C's rows (in units of MR) or columns (units of NR).  Each
 * thread then packs all of the other operand itself, so the choice trades
 * load balance (NR is coarse) against duplicated packing.  Estimated
 * critical path in multiply-add equivalents; a packed byte costs about as
 * much time as PACK_COST multiply-adds. */
#define PACK_COST 16.0

static double split_cost(int64_t split, int64_t other, int64_t k, int64_t unit,
                         int nt)
{
    const int64_t units = (split + unit - 1) / unit;
    const int64_t per = (units + nt - 1) / nt * unit; /* largest share */
    const double mine = (double)(per < split ? per : split);
    return mine * (double)other * (double)k          /* multiply-adds */
           + PACK_COST * (double)k * ((double)other + mine); /* packing */
}

static int choose_split(const emublas__i8kernel *K, int64_t m, int64_t n,
                        int64_t k, int nt)
{
    if (nt <= 1)
        return 1;
    return split_cost(n, m, k, K->nr, nt) <= split_cost(m, n, k, K->mr, nt);
}

/* What impl AUTO means for this process (emublas_i8gemm_set_auto). */
static int auto_impl = EMUBLAS_IMPL_AUTO;

int emublas_i8gemm_set_auto(int impl)
{
    int err;
    if (impl != EMUBLAS_IMPL_AUTO && !emublas__i8gemm_kernel(impl, &err))
        return err;
    __atomic_store_n(&auto_impl, impl, __ATOMIC_RELAXED);
    return EMUBLAS_OK;
}

const emublas__i8kernel *emublas__i8gemm_kernel(int impl, int *err)
{
    if (impl == EMUBLAS_IMPL_AUTO) {
        const int pinned = __atomic_load_n(&auto_impl, __ATOMIC_RELAXED);
        if (pinned != EMUBLAS_IMPL_AUTO)
            impl = pinned;
    }
    const int vnni = (emublas_cpu_features() & EMUBLAS_CPU_AVX512_VNNI) != 0;
    const int amx = (emublas_cpu_features() & EMUBLAS_CPU_AMX_INT8) != 0;
    const int avx2 = (emublas__cpu_features() & EMUBLAS__CPU_AVX2_FMA) != 0;
    *err = EMUBLAS_OK;
    switch (impl) {
    case EMUBLAS_IMPL_AUTO:
#if EMUBLAS_HAVE_AMX
        if (amx && emublas__amx_permit())
            return &emublas__i8kernel_amx;
#endif
#if EMUBLAS_X86
        if (vnni)
            return &emublas__i8kernel_vnni;
        /* about 1.4-1.5x the float kernel where there is no VNNI (bench_i8gemm.py) */
        if (avx2)
            return &emublas__i8kernel_avx2;
#endif
        return generic_kernel();
    case EMUBLAS_IMPL_AMX:
#if EMUBLAS_HAVE_AMX
        if (amx && emublas__amx_permit())
            return &emublas__i8kernel_amx;
#endif
        *err = EMUBLAS_ENOTSUP;
        return NULL;
    case EMUBLAS_IMPL_GENERIC:
        return generic_kernel();
    case EMUBLAS_IMPL_GENERIC_BASELINE:
        return &kernel_generic;
    case EMUBLAS_IMPL_VNNI:
#if EMUBLAS_X86
        if (vnni)
            return &emublas__i8kernel_vnni;
#endif
        *err = EMUBLAS_ENOTSUP;
        return NULL;
    case EMUBLAS_IMPL_AVX2:
#if EMUBLAS_X86
        if (avx2)
            return &emublas__i8kernel_avx2;
#endif
        *err = EMUBLAS_ENOTSUP;
        return NULL;
    default:
        *err = EMUBLAS_EINVAL;
        return NULL;
    }
}

const char *emublas_i8gemm_kernel_name(int impl)
{
    int err;
    const emublas__i8kernel *K = emublas__i8gemm_kernel(impl, &err);
    return K ? K->name : NULL;
}

int emublas_i8gemm(int impl, int64_t m, int64_t n, int64_t k,
                   const int8_t *A, int64_t rsa, int64_t csa,
                   const int8_t *B, int64_t rsb, int64_t csb,
                   int32_t *C, int64_t rsc, int64_t csc,
                   int accumulate, int nthreads)
{
    int err;
    const emublas__i8kernel *K = emublas__i8gemm_kernel(impl, &err);
    if (!K)
        return err;
    if (m < 0 || n < 0 || k < 0)
        return EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!C || (k > 0 && (!A || !B)))
        return EMUBLAS_EINVAL;
    if (k == 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    C[i * rsc + j * csc] = 0;
        return EMUBLAS_OK;
    }

    int nt = nthreads > 0 ? nthreads : emublas__online_cpus();
    if (nt > EMUBLAS_MAX_THREADS)
        nt = EMUBLAS_MAX_THREADS;
    if ((double)m * (double)n * (double)k < emublas__par_min(K->par_min_macs))
        nt = 1;
    gemm_job J;
    emublas__i8gemm_prepare(&J, K, m, n, k, A, rsa, csa, B, rsb, csb, C, rsc, csc, accumulate, nt);
    const int64_t units = J.split_n ? (J.n + K->nr - 1) / K->nr : (J.m + K->mr - 1) / K->mr;
    if (nt > units)
        nt = (int)units;
    J.work = aligned_alloc(64, J.work_stride * (size_t)nt);
    if (!J.work)
        return EMUBLAS_ENOMEM;
    emublas__parallel_sized(emublas__i8gemm_task, &J, nt, (double)m * (double)n * (double)k / EMUBLAS_I8_MACS_PER_S);
    free(J.work);
    return EMUBLAS_OK;
}

void emublas__i8gemm_prepare(gemm_job *J, const emublas__i8kernel *K, int64_t m, int64_t n, int64_t k,
                             const int8_t *A, int64_t rsa, int64_t csa, const int8_t *B, int64_t rsb,
                             int64_t csb, int32_t *C, int64_t rsc, int64_t csc, int accumulate, int nthreads)
{
    /* Kernels write rows of a tile with vector stores, so they want C's
     * contiguous dimension to be n.  For column-major C compute
     * C^T = B^T A^T instead: swap the operands and the strides. */
    int transpose = 0;
    if (csc != 1 && rsc == 1)
        transpose = 1;
    else if (csc == 1 && rsc == 1) /* a vector: any layout; make n long */
        transpose = m > n;
    *J = (gemm_job){
        .K = K, .k = k, .accumulate = accumulate != 0,
        .m = m, .n = n, .A = A, .rsa = rsa, .csa = csa,
        .B = B, .rsb = rsb, .csb = csb, .C = C, .rsc = rsc, .csc = csc,
    };
    if (transpose) {
        J->m = n; J->n = m;
        J->A = B; J->rsa = csb; J->csa = rsb;
        J->B = A; J->rsb = csa; J->csb = rsa;
        J->rsc = csc; J->csc = rsc;
    }
    J->split_n = choose_split(K, J->m, J->n, k, nthreads);
    J->work_stride = workspace_layout(K, J->m, J->n, k).total;
}
