/*
 * i8gemm_amx.c -- the AMX int8 GEMM kernel (Intel Sapphire Rapids and later).
 *
 * TDPBSSD multiplies a 16 x 64 tile of signed bytes (A: 16 rows, 64 k
 * values each) by a 64 x 16 tile of signed bytes held in "VNNI layout" (B:
 * 16 rows of k-groups, each row the 4 bytes of one k-group for 16 columns)
 * and adds the 16 x 16 dot products to an int32 tile.  Both operands are
 * signed, so no offset is needed (the VNNI kernel's bias is unused), and the
 * int32 sums wrap like every other kernel's.
 *
 * The register tile is 32 x 32: four C tiles (tmm0-3) fed by two A tiles
 * (tmm4-5) and two B tiles (tmm6-7) per 64-deep k step.
 *
 * Panel layouts (k padded with zeros to a multiple of 64):
 *   A panel, 32 rows:    for each k-block b: 32 rows x 64 bytes (row r, k 64b..64b+63)
 *   B panel, 32 columns: for each k-group g: 32 x 4 bytes (col j, k 4g..4g+3)
 * so an A tile is 16 consecutive 64-byte rows, and a B tile 16 consecutive
 * k-groups read with a stride of 128 bytes (one half of the panel's width).
 *
 * The tile configuration is per thread and the same for every call, so each
 * thread loads it once (and never releases it: nothing else here uses tiles).
 */
#include <string.h>

#include "internal.h"

#if EMUBLAS_HAVE_AMX

#include <immintrin.h>

#include "pack_sse.h"

#define AMX_MR 32
#define AMX_NR 32
#define AMX_KB 64 /* k per tile step */

static void pack_a_amx(int64_t mc, int64_t kc, const int8_t *A, int64_t rsa, int64_t csa, void *dst_)
{
    const int64_t kp = (kc + AMX_KB - 1) / AMX_KB * AMX_KB;
    int8_t *dst = dst_;
    for (int64_t i0 = 0; i0 < mc; i0 += AMX_MR) {
        int8_t *panel = dst + i0 * kp;
        const int64_t mr = mc - i0 < AMX_MR ? mc - i0 : AMX_MR;
        for (int64_t b = 0; b < kp / AMX_KB; b++) {
            const int64_t k0 = b * AMX_KB, kn = kc - k0 < AMX_KB ? kc - k0 : AMX_KB;
            if (rsa == 1 && csa != 1 && mr == AMX_MR && kn == AMX_KB) {
                /* m contiguous (a column-major A, e.g. residue planes of a transposed
                 * factor): 16 x 16 byte blocks transposed instead of a strided gather */
                int8_t *d = panel + b * AMX_MR * AMX_KB;
                for (int64_t r0 = 0; r0 < AMX_MR; r0 += 16)
                    for (int64_t q0 = 0; q0 < AMX_KB; q0 += 16)
                        emublas__transpose_16x16_bytes(A + (i0 + r0) + (k0 + q0) * csa, csa,
                                                       d + r0 * AMX_KB + q0, AMX_KB);
                continue;
            }
            for (int64_t r = 0; r < AMX_MR; r++) {
                int8_t *d = panel + (b * AMX_MR + r) * AMX_KB;
                if (r >= mr) {
                    memset(d, 0, AMX_KB);
                    continue;
                }
                const int8_t *s = A + (i0 + r) * rsa + k0 * csa;
                if (csa == 1) {
                    memcpy(d, s, (size_t)kn);
                } else {
                    for (int64_t q = 0; q < kn; q++)
                        d[q] = s[q * csa];
                }
                if (kn < AMX_KB)
                    memset(d + kn, 0, (size_t)(AMX_KB - kn));
            }
        }
    }
}

static void pack_b_amx(int64_t kc, int64_t nc, const int8_t *B, int64_t rsb, int64_t csb, void *dst_,
                       int32_t *bias)
{
    const int64_t kp = (kc + AMX_KB - 1) / AMX_KB * AMX_KB, ng = kp / 4, kfull = kc / 4;
    int8_t *dst = dst_;
    for (int64_t j0 = 0; j0 < nc; j0 += AMX_NR) {
        int8_t *panel = dst + j0 * kp;
        const int64_t nr = nc - j0 < AMX_NR ? nc - j0 : AMX_NR;
        int64_t jdone = 0; /* columns whose full k-groups a fast path packed */
        if (csb == 1) { /* n contiguous (the Ozaki-II planes' usual role): 16 columns per step */
            jdone = nr / 16 * 16;
            for (int64_t g = 0; g < kfull; g++)
                for (int64_t j = 0; j < jdone; j += 16)
                    emublas__interleave_4x16(B + 4 * g * rsb + j0 + j, rsb, _mm_setzero_si128(),
                                             panel + (g * AMX_NR + j) * 4, panel + (g * AMX_NR + j + 8) * 4);
        } else if (rsb == 1) { /* k contiguous: each k-group is one dword */
            jdone = nr;
            const int64_t j4 = nr / 4 * 4, g4 = kfull / 4 * 4;
            for (int64_t j = 0; j < j4; j += 4) /* 4 x 4 blocks of dwords transposed */
                for (int64_t g = 0; g < g4; g += 4)
                    emublas__transpose_4x4_dwords(B + (j0 + j) * csb + 4 * g, csb, panel + (g * AMX_NR + j) * 4,
                                                  AMX_NR * 4);
            for (int64_t j = 0; j < nr; j++)
                for (int64_t g = j < j4 ? g4 : 0; g < kfull; g++)
                    memcpy(panel + (g * AMX_NR + j) * 4, B + (j0 + j) * csb + 4 * g, 4);
        }
        for (int64_t j = 0; j < AMX_NR; j++)
            for (int64_t g = j < jdone ? kfull : 0; g < ng; g++)
                for (int q = 0; q < 4; q++) {
                    const int64_t p = 4 * g + q;
                    panel[(g * AMX_NR + j) * 4 + q] = (j < nr && p < kc) ? B[p * rsb + (j0 + j) * csb] : 0;
                }
    }
    (void)bias; /* signed x signed: no offset to correct */
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

static __thread int amx_configured;

EMUBLAS_TARGET_AMX static void configure(void)
{
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    amx_configured = 1;
}

EMUBLAS_TARGET_AMX static void micro_amx(int64_t kp, const void *a_, const void *b_, const int32_t *bias,
                                         int32_t *c, int64_t rsc, int add)
{
    const int8_t *a = a_, *b = b_;
    const int64_t ldc = rsc * 4;
    (void)bias;
    if (!amx_configured)
        configure();
    if (add) {
        _tile_loadd(0, c, ldc);
        _tile_loadd(1, c + 16, ldc);
        _tile_loadd(2, c + 16 * rsc, ldc);
        _tile_loadd(3, c + 16 * rsc + 16, ldc);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t kb = 0; kb < kp / AMX_KB; kb++) {
        const int8_t *ap = a + kb * AMX_MR * AMX_KB;
        const int8_t *bp = b + kb * (AMX_KB / 4) * AMX_NR * 4;
        _tile_loadd(4, ap, AMX_KB);
        _tile_loadd(5, ap + 16 * AMX_KB, AMX_KB);
        _tile_loadd(6, bp, AMX_NR * 4);
        _tile_loadd(7, bp + 64, AMX_NR * 4);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_stored(0, c, ldc);
    _tile_stored(1, c + 16, ldc);
    _tile_stored(2, c + 16 * rsc, ldc);
    _tile_stored(3, c + 16 * rsc + 16, ldc);
}

const emublas__i8kernel emublas__i8kernel_amx = {
    .name = "amx_int8",
    .mr = AMX_MR, .nr = AMX_NR, .kmul = AMX_KB, .elt = 1,
    .kc = 2048, .mc = 64, .nc = 2048, /* deep k blocks: C is read and written once per block */
    .par_min_macs = 1 << 25,
    .pack_a = pack_a_amx,
    .pack_b = pack_b_amx,
    .micro = micro_amx,
};

#endif /* EMUBLAS_HAVE_AMX */
