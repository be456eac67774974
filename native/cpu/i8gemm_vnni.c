/*
 * i8gemm_vnni.c -- the AVX-512 VNNI int8 GEMM kernel and the VNNI peak probe.
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes, four at a time, and
 * adds the four products to a 32-bit lane.  Our operands are both signed, so
 * A is packed offset by 128 (a ^ 0x80 == a + 128 as u8) and the surplus is
 * removed through the accumulator's starting value:
 *
 *     sum_p (a_ip + 128) b_pj  -  128 sum_p b_pj  =  sum_p a_ip b_pj
 *
 * where the column sums of B come free while B is packed (bias[j] =
 * -128 * colsum_j).  Everything wraps modulo 2^32 exactly as the C kernel.
 *
 * Panel layouts (k padded with zeros to a multiple of 4):
 *   A panel, MR rows:    for each k-group g: MR x 4 bytes  (row r, k 4g..4g+3)
 *   B panel, NR columns: for each k-group g: NR x 4 bytes  (col j, k 4g..4g+3)
 * so one 64-byte load of B feeds 16 columns, and A's 4 bytes of a row are
 * broadcast to all 16 lanes.  The MR x NR tile lives in MR*NR/16 zmm
 * accumulators.
 *
 * The SIMD functions here are compiled for AVX-512 VNNI one by one (target
 * attribute), so the build needs no -march flag; they are only reached after
 * emublas_cpu_features() said yes.
 */
#include <string.h>

#include "internal.h"

#if EMUBLAS_X86

#include <immintrin.h>

#include "pack_sse.h"

#ifndef VNNI_MR
#define VNNI_MR 8 /* rows of the register tile */
#endif
#ifndef VNNI_NV
#define VNNI_NV 3 /* zmm vectors (16 columns each) across the tile */
#endif
#define VNNI_NR (16 * VNNI_NV)

#ifndef VNNI_KC
#define VNNI_KC 1024
#endif
#ifndef VNNI_MC
#define VNNI_MC 192
#endif
#ifndef VNNI_NC
#define VNNI_NC 4096
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE uint32_t load32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static ALWAYS_INLINE void store32(void *p, uint32_t v) { memcpy(p, &v, 4); }

/* ---- packing ----------------------------------------------------------------
 * The transpose trick in the driver lets either operand take either role, so
 * four source layouts are common, and each has a register fast path for the
 * full panels:
 *   k contiguous (A: csa == 1, B: rsb == 1): the 4 bytes of a k-group are one
 *     dword and packing is a dword transpose, done 16 groups at a time;
 *   m / n contiguous (A: rsa == 1, B: csb == 1): four k-lines of 16 bytes are
 *     byte-interleaved with unpack instructions, walking whole cache lines.
 * Other strides, the k tail and the edge panels take a scalar loop.
 * Padding: zero in B (so padded k contributes nothing); in A, 0x80 (the
 * offset zero) in k and 0 in rows the driver discards. */

/* The same for 8 items (8-byte lines) into 32 bytes. */
EMUBLAS_TARGET_VNNI static ALWAYS_INLINE void
interleave_4x8(const int8_t *s, int64_t ld, __m128i flip, void *dst)
{
    __m128i x0 = _mm_loadl_epi64((const __m128i *)(s));
    __m128i x1 = _mm_loadl_epi64((const __m128i *)(s + ld));
    __m128i x2 = _mm_loadl_epi64((const __m128i *)(s + 2 * ld));
    __m128i x3 = _mm_loadl_epi64((const __m128i *)(s + 3 * ld));
    __m128i t01 = _mm_unpacklo_epi8(x0, x1), t23 = _mm_unpacklo_epi8(x2, x3);
    __m128i *d = dst;
    _mm_storeu_si128(d, _mm_xor_si128(_mm_unpacklo_epi16(t01, t23), flip));
    _mm_storeu_si128(d + 1, _mm_xor_si128(_mm_unpackhi_epi16(t01, t23), flip));
}

/* First two rounds of a dword transpose of rows r[0..nr) (nr = 8 or 16):
 * afterwards 128-bit lane L of b[4i+j] holds rows 4i..4i+3 of column
 * 4L+j. */
EMUBLAS_TARGET_VNNI static ALWAYS_INLINE void
transpose_dw_4x4(const __m512i *r, __m512i *b, int nr)
{
    for (int i = 0; i < nr / 4; i++) {
        __m512i a0 = _mm512_unpacklo_epi32(r[4 * i], r[4 * i + 1]);
        __m512i a1 = _mm512_unpackhi_epi32(r[4 * i], r[4 * i + 1]);
        __m512i a2 = _mm512_unpacklo_epi32(r[4 * i + 2], r[4 * i + 3]);
        __m512i a3 = _mm512_unpackhi_epi32(r[4 * i + 2], r[4 * i + 3]);
        b[4 * i + 0] = _mm512_unpacklo_epi64(a0, a2);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a0, a2);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a1, a3);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a1, a3);
    }
}

/* 16 lines of 16 dwords (line i at s + i*ld bytes) transposed: dword column
 * c (c = 0..15) is stored as 64 bytes at dst + c*dst_ld. */
EMUBLAS_TARGET_VNNI static ALWAYS_INLINE void
transpose_dw_16x16(const int8_t *s, int64_t ld, int8_t *dst, int64_t dst_ld)
{
    __m512i r[16], b[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_si512(s + i * ld);
    transpose_dw_4x4(r, b, 16);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        /* 4 x 4 transpose of 128-bit lanes across b[j], b[4+j], b[8+j], b[12+j]. */
        __m512i c0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44);
        __m512i c1 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xEE);
        __m512i c2 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
        __m512i c3 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xEE);
        _mm512_storeu_si512(dst + (0 + j) * dst_ld, _mm512_shuffle_i32x4(c0, c2, 0x88));
        _mm512_storeu_si512(dst + (4 + j) * dst_ld, _mm512_shuffle_i32x4(c0, c2, 0xDD));
        _mm512_storeu_si512(dst + (8 + j) * dst_ld, _mm512_shuffle_i32x4(c1, c3, 0x88));
        _mm512_storeu_si512(dst + (12 + j) * dst_ld, _mm512_shuffle_i32x4(c1, c3, 0xDD));
    }
}

/* 8 lines of 16 dwords, XORed with flip, transposed: column c (8 dwords,
 * 32 bytes) is stored at dst + c*32. */
EMUBLAS_TARGET_VNNI static ALWAYS_INLINE void
transpose_dw_8x16(const int8_t *s, int64_t ld, __m512i flip, uint8_t *dst)
{
    __m512i r[8], b[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        r[i] = _mm512_xor_si512(_mm512_loadu_si512(s + i * ld), flip);
    transpose_dw_4x4(r, b, 8);
    /* Column 4L+j = lane L of b[j] then lane L of b[4+j]. */
    const __m512i lanes01 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i lanes23 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i p01 = _mm512_permutex2var_epi64(b[j], lanes01, b[4 + j]);
        __m512i p23 = _mm512_permutex2var_epi64(b[j], lanes23, b[4 + j]);
        _mm256_storeu_si256((__m256i *)(dst + (0 + j) * 32), _mm512_castsi512_si256(p01));
        _mm256_storeu_si256((__m256i *)(dst + (4 + j) * 32), _mm512_extracti64x4_epi64(p01, 1));
        _mm256_storeu_si256((__m256i *)(dst + (8 + j) * 32), _mm512_castsi512_si256(p23));
        _mm256_storeu_si256((__m256i *)(dst + (12 + j) * 32), _mm512_extracti64x4_epi64(p23, 1));
    }
}

/* Scalar packing of k-groups [g0, g1) of one A panel with mr valid rows. */
static void pack_a_scalar(const int8_t *a, int64_t rsa, int64_t csa, int64_t mr,
                          int64_t kc, int64_t g0, int64_t g1, uint8_t *panel)
{
    const int MR = VNNI_MR;
    for (int64_t g = g0; g < g1; g++)
        for (int r = 0; r < MR; r++)
            for (int q = 0; q < 4; q++) {
                const int64_t p = 4 * g + q;
                uint8_t v = 0;
                if (r < mr)
                    v = p < kc ? (uint8_t)(a[r * rsa + p * csa] ^ 0x80) : 0x80;
                panel[(g * MR + r) * 4 + q] = v;
            }
}

EMUBLAS_TARGET_VNNI static void
pack_a_vnni(int64_t mc, int64_t kc, const int8_t *A, int64_t rsa, int64_t csa,
            void *dst_)
{
    const int MR = VNNI_MR;
    const int64_t kfull = kc / 4, kp = (kc + 3) / 4 * 4, ng = kp / 4;
    const int64_t mfull = mc / MR * MR; /* rows in full panels */
    uint8_t *dst = dst_;
    int64_t gdone = 0; /* k-groups of the full panels done by a fast path */

    if (csa == 1 && MR == 8) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        const int64_t g16 = kfull / 16 * 16;
        for (int64_t i0 = 0; i0 < mfull; i0 += MR) {
            uint8_t *panel = dst + i0 * kp;
            const int8_t *a = A + i0 * rsa;
            for (int64_t g = 0; g < g16; g += 16)
                transpose_dw_8x16(a + 4 * g, rsa, flip, panel + g * MR * 4);
            for (int64_t g = g16; g < kfull; g++)
                for (int r = 0; r < MR; r++)
                    store32(panel + (g * MR + r) * 4,
                            load32(a + r * rsa + 4 * g) ^ 0x80808080u);
        }
        gdone = kfull;
    } else if (rsa == 1 && MR % 8 == 0) {
        /* One k-group at a time over all full panels, so each source cache
         * line is consumed whole.  Row r lives in panel r/MR at r%MR. */
        const __m128i flip = _mm_set1_epi8((char)0x80);
#define A_DST(r, g) (dst + (r) / MR * MR * kp + ((g) * MR + (r) % MR) * 4)
        /* Two k-groups per sweep: with MR = 8 they fill one whole line of
         * each panel, so no line is written twice (panels sit kp*MR bytes
         * apart, often a multiple of 4 KiB: they share L1 sets). */
        for (int64_t g0 = 0; g0 < kfull; g0 += 2) {
            const int64_t g1 = g0 + 2 < kfull ? g0 + 2 : kfull;
            int64_t r = 0;
            for (; r + 16 <= mfull; r += 16)
                for (int64_t g = g0; g < g1; g++)
                    emublas__interleave_4x16(A + 4 * g * csa + r, csa, flip, A_DST(r, g),
                                    A_DST(r + 8, g));
            for (; r < mfull; r += 8)
                for (int64_t g = g0; g < g1; g++)
                    interleave_4x8(A + 4 * g * csa + r, csa, flip, A_DST(r, g));
        }
#undef A_DST
        gdone = kfull;
    }
    for (int64_t i0 = 0; i0 < mc; i0 += MR) {
        const int64_t mr = mc - i0 < MR ? mc - i0 : MR;
        pack_a_scalar(A + i0 * rsa, rsa, csa, mr, kc, mr == MR ? gdone : 0, ng,
                      dst + i0 * kp);
    }
}

/* Scalar packing of k-groups [g0, g1) of one B panel with nr valid columns. */
static void pack_b_scalar(const int8_t *b, int64_t rsb, int64_t csb, int64_t nr,
                          int64_t kc, int64_t g0, int64_t g1, int8_t *panel)
{
    const int NR = VNNI_NR;
    for (int64_t g = g0; g < g1; g++)
        for (int j = 0; j < NR; j++)
            for (int q = 0; q < 4; q++) {
                const int64_t p = 4 * g + q;
                panel[(g * NR + j) * 4 + q] =
                    (j < nr && p < kc) ? b[p * rsb + j * csb] : 0;
            }
}

EMUBLAS_TARGET_VNNI static void
pack_b_vnni(int64_t kc, int64_t nc, const int8_t *B, int64_t rsb, int64_t csb,
            void *dst_, int32_t *bias)
{
    const int NR = VNNI_NR;
    const int64_t kfull = kc / 4, kp = (kc + 3) / 4 * 4, ng = kp / 4;
    const int64_t nfull = nc / NR * NR;
    int8_t *dst = dst_;
    int64_t gdone = 0;

    if (rsb == 1) {
        const int64_t g16 = kfull / 16 * 16;
        for (int64_t j0 = 0; j0 < nfull; j0 += NR) {
            int8_t *panel = dst + j0 * kp;
            /* 16 columns at a time: 16 read streams, which the hardware
             * prefetchers follow better than NR of them. */
            for (int j = 0; j < NR; j += 16)
                for (int64_t g = 0; g < g16; g += 16)
                    transpose_dw_16x16(B + (j0 + j) * csb + 4 * g, csb,
                                       panel + (g * NR + j) * 4, NR * 4);
            for (int64_t g = g16; g < kfull; g++)
                for (int j = 0; j < NR; j++)
                    store32(panel + (g * NR + j) * 4,
                            load32(B + (j0 + j) * csb + 4 * g));
        }
        gdone = kfull;
    } else if (csb == 1) {
        const __m128i zero = _mm_setzero_si128();
        for (int64_t g = 0; g < kfull; g++) {
            const int8_t *b = B + 4 * g * rsb;
            for (int64_t j = 0; j < nfull; j += 16) {
                int8_t *d = dst + j / NR * NR * kp + (g * NR + j % NR) * 4;
                emublas__interleave_4x16(b + j, rsb, zero, d, d + 32);
            }
        }
        gdone = kfull;
    }
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t j0 = 0; j0 < nc; j0 += NR) {
        const int64_t nr = nc - j0 < NR ? nc - j0 : NR;
        int8_t *panel = dst + j0 * kp;
        pack_b_scalar(B + j0 * csb, rsb, csb, nr, kc, nr == NR ? gdone : 0, ng, panel);

        /* Column sums of the packed panel, by vpdpbusd against ones. */
        __m512i sum[VNNI_NV];
        for (int v = 0; v < VNNI_NV; v++)
            sum[v] = _mm512_setzero_si512();
        for (int64_t g = 0; g < ng; g++)
            for (int v = 0; v < VNNI_NV; v++)
                sum[v] = _mm512_dpbusd_epi32(
                    sum[v], ones, _mm512_load_si512(panel + (g * NR + 16 * v) * 4));
        for (int v = 0; v < VNNI_NV; v++)
            _mm512_storeu_si512(bias + j0 + 16 * v,
                                _mm512_sub_epi32(_mm512_setzero_si512(),
                                                 _mm512_slli_epi32(sum[v], 7)));
    }
}

/* ---- the register-tile kernel --------------------------------------------- */

EMUBLAS_TARGET_VNNI static void
micro_vnni(int64_t kp, const void *a_, const void *b_, const int32_t *bias,
           int32_t *c, int64_t rsc, int add)
{
    const uint8_t *a = a_;
    const int8_t *b = b_;
    __m512i acc[VNNI_MR][VNNI_NV];

    /* Start C's lines on their way now; they are needed only at the end. */
#pragma GCC unroll 16
    for (int r = 0; r < VNNI_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < VNNI_NV; v++)
            _mm_prefetch((const char *)(c + r * rsc + 16 * v), _MM_HINT_T0);

#pragma GCC unroll 4
    for (int v = 0; v < VNNI_NV; v++) {
        const __m512i b0 = _mm512_loadu_si512(bias + 16 * v);
#pragma GCC unroll 16
        for (int r = 0; r < VNNI_MR; r++)
            acc[r][v] = b0;
    }

    for (int64_t g = 0; g < kp / 4; g++) {
        __m512i bv[VNNI_NV];
#pragma GCC unroll 4
        for (int v = 0; v < VNNI_NV; v++)
            bv[v] = _mm512_load_si512(b + 64 * v);
#pragma GCC unroll 16
        for (int r = 0; r < VNNI_MR; r++) {
            const __m512i ar = _mm512_set1_epi32((int)load32(a + 4 * r));
#pragma GCC unroll 4
            for (int v = 0; v < VNNI_NV; v++)
                acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], ar, bv[v]);
        }
        a += 4 * VNNI_MR;
        b += 64 * VNNI_NV;
    }

#pragma GCC unroll 16
    for (int r = 0; r < VNNI_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < VNNI_NV; v++) {
            int32_t *p = c + r * rsc + 16 * v;
            __m512i x = acc[r][v];
            if (add)
                x = _mm512_add_epi32(x, _mm512_loadu_si512(p));
            _mm512_storeu_si512(p, x);
        }
}

const emublas__i8kernel emublas__i8kernel_vnni = {
    .name = "avx512_vnni",
    .mr = VNNI_MR, .nr = VNNI_NR, .kmul = 4, .elt = 1,
    .kc = VNNI_KC, .mc = VNNI_MC, .nc = VNNI_NC,
    .par_min_macs = 1 << 24, /* break-even measured between 224^3 and 256^3 */
    .pack_a = pack_a_vnni,
    .pack_b = pack_b_vnni,
    .micro = micro_vnni,
};

/* ---- peak probe ----------------------------------------------------------- */

/* Independent accumulators: more than vpdpbusd latency x issue width, so
 * the loop measures throughput, not latency. */
#define PROBE_CHAINS 24

typedef struct {
    int64_t iters;
} probe_job;

#define DP(i) "vpdpbusd %[x], %[y], %%zmm" #i "\n\t"

/* The loop body is written in asm so that the accumulators provably stay in
 * zmm0-zmm23 (no loads, stores or spills: a register-only ceiling). */
EMUBLAS_TARGET_VNNI static void probe_task(void *ctx, int tid, int nthreads)
{
    const probe_job *P = ctx;
    (void)tid;
    (void)nthreads;
    const __m512i x = _mm512_set1_epi32(0x01020304), y = _mm512_set1_epi32(0x05060708);
    for (int64_t it = 0; it < P->iters; it++)
        __asm__ volatile(DP(0) DP(1) DP(2) DP(3) DP(4) DP(5) DP(6) DP(7)
                         DP(8) DP(9) DP(10) DP(11) DP(12) DP(13) DP(14) DP(15)
                         DP(16) DP(17) DP(18) DP(19) DP(20) DP(21) DP(22) DP(23)
                         :
                         : [x] "v"(x), [y] "v"(y)
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",
                           "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                           "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",
                           "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23");
}

double emublas_vnni_peak_probe(int nthreads, int64_t iters)
{
    if (!(emublas_cpu_features() & EMUBLAS_CPU_AVX512_VNNI) || iters <= 0)
        return 0.0;
    probe_job P = {.iters = iters};
    return emublas__probe_rate(probe_task, &P, nthreads, (double)iters * PROBE_CHAINS * 64.0);
}

#else /* not x86 */

double emublas_vnni_peak_probe(int nthreads, int64_t iters)
{
    (void)nthreads;
    (void)iters;
    return 0.0;
}

#endif
