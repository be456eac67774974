/*
 * i8gemm_avx2.c -- the AVX2 integer int8 GEMM kernel, for CPUs without
 * AVX-512 VNNI.
 *
 * Operands are sign-extended to int16 and multiplied with vpmaddwd, which
 * forms 16 int16 products per 256-bit instruction and adds adjacent pairs
 * into eight int32 lanes; vpaddd then adds those to the accumulators: 16
 * multiply-adds per two instructions, where the float kernel gets 8 per FMA.
 * On a Zen 4 core this runs at about 1.5x the float kernel (the adds, loads
 * and broadcasts compete for the vector pipes, so not 2x).
 *
 * Exactness: an int8 product is in [-16256, 16384], a pair sum in [-32512,
 * 32768].  vpmaddwd sums the pair in int32, so 32768 = 2 * (-128)^2 is kept
 * (it saturates only when both products are (-32768)^2, impossible here),
 * and the int32 accumulators wrap modulo 2^32 like every other kernel's.
 *
 * Panel layouts (k padded with zeros to a multiple of 2, int16 elements):
 *   A panel, MR rows:    for each k-pair g: MR x 2 int16  (row r, k 2g, 2g+1)
 *   B panel, NR columns: for each k-pair g: NR x 2 int16  (col j, k 2g, 2g+1)
 * so a 32-byte load of B feeds 8 columns, and a row's pair of A is one dword
 * broadcast to all lanes.  The 6 x 16 tile lives in 12 ymm accumulators.
 *
 * The SIMD functions are compiled for AVX2 one by one (target attribute) and
 * only reached after emublas__cpu_features() said yes.
 */
#include <string.h>

#include "internal.h"

#if EMUBLAS_X86

#include <immintrin.h>

#define AVX2_MR 6  /* rows of the register tile (the asm below is written for 6) */
#define AVX2_NR 16 /* columns: two ymm of eight int32 */

/* A B panel (KC x 16 int16, 12 KiB) stays in L1 across the sweep of A
 * panels; the A block (MC x KC int16, 108 KiB) stays in L2.  KC 256-1024 and
 * MC 60-240 measured the same within the noise of a shared host. */
#ifndef AVX2_KC
#define AVX2_KC 384
#endif
#ifndef AVX2_MC
#define AVX2_MC 144
#endif
#ifndef AVX2_NC
#define AVX2_NC 4096
#endif

#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* ---- packing ----------------------------------------------------------------
 * Both roles use one routine: items (A's rows or B's columns) at stride is,
 * k at stride ks, packed into panels of W items.  Each common source layout
 * has a register path for the full panels:
 *   k contiguous (ks == 1): 16 bytes of k of 8 items are sign-extended to
 *     eight vectors of 8 k-pairs and transposed as 8 x 8 dwords;
 *   items contiguous (is == 1): the two k-lines of a pair are byte-interleaved
 *     and sign-extended, which is the panel's layout already.
 * Other strides, the k tail and the edge panels take a scalar loop. */

/* Packs k-pairs [g0, g1) of one panel with w valid items (zero padding). */
static void pack_scalar(const int8_t *x, int64_t is, int64_t ks, int64_t w, int W, int64_t kc, int64_t g0,
                        int64_t g1, int16_t *panel)
{
    for (int64_t g = g0; g < g1; g++)
        for (int i = 0; i < W; i++)
            for (int q = 0; q < 2; q++) {
                const int64_t p = 2 * g + q;
                panel[(g * W + i) * 2 + q] = (i < w && p < kc) ? x[i * is + p * ks] : 0;
            }
}

/* Transposes r[0..8) as an 8 x 8 matrix of dwords, in place. */
TARGET_AVX2 static ALWAYS_INLINE void transpose_8x8_dw(__m256i *r)
{
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}

/* Stores the first n (6 or 8) dwords of v. */
TARGET_AVX2 static ALWAYS_INLINE void store_dw(int16_t *d, __m256i v, int n)
{
    if (n == 8) {
        _mm256_storeu_si256((__m256i *)d, v);
    } else {
        _mm_storeu_si128((__m128i *)d, _mm256_castsi256_si128(v));
        _mm_storel_epi64((__m128i *)(d + 8), _mm256_extracti128_si256(v, 1));
    }
}

/* The bytes of one k-line of a W = 6 panel, in the low 6 bytes; reads 8 when
 * the block has them. */
static ALWAYS_INLINE __m128i load6(const int8_t *s, int wide)
{
    int64_t v = 0;
    if (wide)
        memcpy(&v, s, 8);
    else
        memcpy(&v, s, 6);
    return _mm_cvtsi64_si128(v);
}

TARGET_AVX2 static ALWAYS_INLINE void pack_i16(int64_t rows, int64_t kc, const int8_t *X, int64_t is, int64_t ks,
                                               int16_t *dst, const int W)
{
    const int64_t kp = (kc + 1) / 2 * 2, ng = kp / 2;
    const int64_t full = rows / W * W; /* items in full panels */
    int64_t gdone = 0;                 /* k-pairs of the full panels done by a fast path */

    if (ks == 1) {
        const int64_t g8 = kc / 16 * 8;
        for (int64_t i0 = 0; i0 < full; i0 += W) {
            int16_t *panel = dst + i0 * kp;
            for (int j0 = 0; j0 < W; j0 += 8) {
                const int n = W - j0 < 8 ? W - j0 : 8;
                const int8_t *x = X + (i0 + j0) * is;
                for (int64_t g = 0; g < g8; g += 8) {
                    __m256i r[8];
                    for (int j = 0; j < 8; j++)
                        r[j] = j < n ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + j * is + 2 * g)))
                                     : _mm256_setzero_si256();
                    transpose_8x8_dw(r);
                    for (int q = 0; q < 8; q++)
                        store_dw(panel + ((g + q) * W + j0) * 2, r[q], n);
                }
            }
        }
        gdone = g8;
    } else if (is == 1 && (W == 16 || W == 6)) {
        const int64_t gfull = kc / 2;
        for (int64_t g = 0; g < gfull; g++) {
            const int8_t *l0 = X + 2 * g * ks, *l1 = l0 + ks;
            int16_t *d = dst + g * W * 2;
            for (int64_t i0 = 0; i0 < full; i0 += W, d += W * kp) {
                if (W == 16) {
                    const __m128i x0 = _mm_loadu_si128((const __m128i *)(l0 + i0));
                    const __m128i x1 = _mm_loadu_si128((const __m128i *)(l1 + i0));
                    _mm256_storeu_si256((__m256i *)d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1)));
                    _mm256_storeu_si256((__m256i *)(d + 16), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1)));
                } else {
                    const int wide = i0 + 8 <= rows;
                    const __m128i y = _mm_unpacklo_epi8(load6(l0 + i0, wide), load6(l1 + i0, wide));
                    store_dw(d, _mm256_cvtepi8_epi16(y), 6);
                }
            }
        }
        gdone = gfull;
    }
    for (int64_t i0 = 0; i0 < rows; i0 += W) {
        const int64_t w = rows - i0 < W ? rows - i0 : W;
        pack_scalar(X + i0 * is, is, ks, w, W, kc, w == W ? gdone : 0, ng, dst + i0 * kp);
    }
}

TARGET_AVX2 static void pack_a_avx2(int64_t mc, int64_t kc, const int8_t *A, int64_t rsa, int64_t csa, void *dst)
{
    pack_i16(mc, kc, A, rsa, csa, dst, AVX2_MR);
}

TARGET_AVX2 static void pack_b_avx2(int64_t kc, int64_t nc, const int8_t *B, int64_t rsb, int64_t csb, void *dst,
                                    int32_t *bias)
{
    (void)bias; /* no offset to correct */
    pack_i16(nc, kc, B, csb, rsb, dst, AVX2_NR);
}

/* ---- the register-tile kernel -----------------------------------------------
 * The k loop is written in asm: with 12 accumulators, 2 B vectors, the
 * broadcast A pair and a product all live, every one of the 16 ymm registers
 * is taken, and GCC's allocation of the same loop in intrinsics spilled
 * accumulators to the stack (two thirds of the speed).  The accumulators are asm
 * operands (GCC keeps them in ymm0-11), ymm12-15 are the scratch. */

/* k-pair o after the panel pointers (A: 24 bytes a pair, B: 64). */
#define AVX2_ROW(r, o)                                   \
    "vpbroadcastd " #o "*24+" #r "*4(%[a]), %%ymm14\n\t" \
    "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n\t"             \
    "vpaddd %%ymm15, %[c" #r "0], %[c" #r "0]\n\t"       \
    "vpmaddwd %%ymm13, %%ymm14, %%ymm14\n\t"             \
    "vpaddd %%ymm14, %[c" #r "1], %[c" #r "1]\n\t"
#define AVX2_STEP(o)                                    \
    "vmovdqu " #o "*64(%[b]), %%ymm12\n\t"              \
    "vmovdqu " #o "*64+32(%[b]), %%ymm13\n\t"           \
    AVX2_ROW(0, o) AVX2_ROW(1, o) AVX2_ROW(2, o)        \
    AVX2_ROW(3, o) AVX2_ROW(4, o) AVX2_ROW(5, o)
#define AVX2_OPERANDS                                                                                         \
    : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), [c21] "+x"(c21), \
      [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51), \
      [a] "+r"(a), [b] "+r"(b), [n] "+r"(n)                                                                 \
    :                                                                                                         \
    : "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory"

TARGET_AVX2 static void micro_avx2(int64_t kp, const void *a_, const void *b_, const int32_t *bias, int32_t *c,
                                   int64_t rsc, int add)
{
    const int16_t *a = a_, *b = b_;
    int64_t n = kp / 2; /* k-pairs */
    (void)bias;

    /* Start C's lines on their way now; they are needed only at the end. */
    for (int r = 0; r < AVX2_MR; r++)
        _mm_prefetch((const char *)(c + r * rsc), _MM_HINT_T0);

    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    if (n & 1)
        __asm__(AVX2_STEP(0)
                "add $24, %[a]\n\t"
                "add $64, %[b]\n\t"
                AVX2_OPERANDS);
    n /= 2;
    if (n > 0) /* two k-pairs a trip: a few % faster than one */
        __asm__("1:\n\t"
                AVX2_STEP(0) AVX2_STEP(1)
                "add $48, %[a]\n\t"
                "add $128, %[b]\n\t"
                "dec %[n]\n\t"
                "jnz 1b\n\t"
                AVX2_OPERANDS);

    const __m256i acc[AVX2_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < AVX2_MR; r++)
        for (int v = 0; v < 2; v++) {
            __m256i *p = (__m256i *)(c + r * rsc + 8 * v);
            __m256i x = acc[r][v];
            if (add) /* lanes wrap: C += T modulo 2^32 */
                x = _mm256_add_epi32(x, _mm256_loadu_si256(p));
            _mm256_storeu_si256(p, x);
        }
}

const emublas__i8kernel emublas__i8kernel_avx2 = {
    .name = "avx2",
    .mr = AVX2_MR, .nr = AVX2_NR, .kmul = 2, .elt = 2,
    .kc = AVX2_KC, .mc = AVX2_MC, .nc = AVX2_NC,
    .par_min_macs = 1 << 23, /* ~0.17 ms on one core: several thread wake-ups */
    .pack_a = pack_a_avx2,
    .pack_b = pack_b_avx2,
    .micro = micro_avx2,
};

/* ---- the ceiling of this kernel's arithmetic ------------------------------------
 * Register-only chains of the micro-kernel's instruction pair, vpmaddwd into a temporary
 * and vpaddd of it into an accumulator: eight independent accumulators (more than the
 * instructions' latency needs), four temporaries, no loads or stores.  The adds run on
 * other pipes than the multiplies, so the pair's rate is vpmaddwd's. */
#define AVX2_PROBE_CHAINS 8
#define PMADD(t, c) "vpmaddwd %%ymm14, %%ymm15, %%ymm" #t "\n\tvpaddd %%ymm" #t ", %%ymm" #c ", %%ymm" #c "\n\t"

typedef struct {
    int64_t iters;
} avx2_probe_job;

TARGET_AVX2 static void avx2_probe_task(void *ctx, int tid, int nthreads)
{
    const avx2_probe_job *P = ctx;
    (void)tid;
    (void)nthreads;
    const __m256i x = _mm256_set1_epi32(0x00010002), y = _mm256_set1_epi32(0x00030004);
    for (int64_t it = 0; it < P->iters; it++)
        __asm__ volatile("vmovdqa %[x], %%ymm14\n\tvmovdqa %[y], %%ymm15\n\t"
                         PMADD(8, 0) PMADD(9, 1) PMADD(10, 2) PMADD(11, 3)
                         PMADD(8, 4) PMADD(9, 5) PMADD(10, 6) PMADD(11, 7)
                         :
                         : [x] "x"(x), [y] "x"(y)
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                           "xmm10", "xmm11", "xmm14", "xmm15");
}

double emublas_avx2_peak_probe(int nthreads, int64_t iters)
{
    if (!(emublas_cpu_features() & EMUBLAS_CPU_AVX2) || iters <= 0)
        return 0.0;
    avx2_probe_job P = {.iters = iters};
    return emublas__probe_rate(avx2_probe_task, &P, nthreads, (double)iters * AVX2_PROBE_CHAINS * 16.0);
}

#else /* not x86 */

double emublas_avx2_peak_probe(int nthreads, int64_t iters)
{
    (void)nthreads;
    (void)iters;
    return 0.0;
}

#endif
