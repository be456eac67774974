/*
 * boolpack.c -- 0/1 matrix products as AND + popcount of packed words.
 *
 * Layout and contract: emublas_boolpack.h.  The GEMM is BLIS-like: for each
 * block of KC words of k, each MC-row block of A (kept in L2) is multiplied
 * by every NR-column micro-panel of B (kept in L1 while the A panels stream
 * by).  The micro-kernel keeps an MR x NR tile of 64-bit counts in registers;
 * with panels interleaved word by word, the AVX-512 kernel does per word w
 * three loads of B (24 columns), eight broadcasts of A, and for each of the
 * 24 accumulators one AND, one VPOPCNTQ and one add -- the instruction mix
 * whose ceiling docs/design.md §7.4 gives -- and no horizontal reductions.
 */
#include <stdlib.h>
#include <string.h>

#include "emublas_boolpack.h"
#include "internal.h"

#if EMUBLAS_X86
#include <immintrin.h>
#endif

#define MR EMUBLAS_BP_MR
#define NR EMUBLAS_BP_NR
#define KC 64  /* words: a B micro-panel is NR*KC*8 = 12 KiB, in L1 beside an A panel */
#define MC 32  /* A panels per L2 block: MC*MR*KC*8 = 128 KiB */
/* Fewer bit products than this run on one thread (a worker wake-up costs
 * some 20-40 us, the time of about 10^7 bit products on one core). */
#define PAR_MIN_BITOPS 6.4e7

typedef void (*micro_fn)(int64_t kc, const uint64_t *a, const uint64_t *b, uint64_t *tile);

/* ---- packing ------------------------------------------------------------ */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t emublas_bp_packed_words(int side, int64_t rows, int64_t k)
{
    if ((side != 0 && side != 1) || rows < 0 || k < 0)
        return -1;
    const int64_t r = side == 0 ? MR : NR;
    return ceil_div(rows, r) * r * ceil_div(k, 64);
}

/* Bits of up to 64 bytes; any nonzero byte gives a 1. */
static uint64_t bits_u8(const uint8_t *x, int64_t cs, int64_t count)
{
    uint64_t w = 0;
    if (cs == 1 && count == 64) {
        /* Eight bytes at a time: the high bit of each byte of t says "byte
         * nonzero"; the multiply gathers those eight bits into the top byte. */
        for (int g = 0; g < 8; g++) {
            uint64_t v;
            memcpy(&v, x + 8 * g, 8);
            const uint64_t lo7 = 0x7f7f7f7f7f7f7f7fULL;
            uint64_t t = (((v & lo7) + lo7) | v) & ~lo7;  /* 0x80 where nonzero */
            t >>= 7;                                      /* 0x01 where nonzero */
            w |= ((t * 0x0102040810204080ULL) >> 56) << (8 * g);
        }
        return w;
    }
    for (int64_t b = 0; b < count; b++)
        w |= (uint64_t)(x[b * cs] != 0) << b;
    return w;
}

/* Eight vectors at once when consecutive vectors are adjacent bytes (a
 * row-major B packed by columns): out[c] gets the bits of elements
 * x[c + l*csx], l < count.  Eight rows of eight bytes are normalized to 0/1
 * bytes and shifted together, which transposes an 8 x 8 bit block. */
static void bits_u8_cols8(const uint8_t *x, int64_t csx, int64_t count, uint64_t out[8])
{
    const uint64_t lo7 = 0x7f7f7f7f7f7f7f7fULL;
    for (int c = 0; c < 8; c++)
        out[c] = 0;
    for (int64_t g = 0; 8 * g < count; g++) {
        uint64_t u = 0;
        for (int64_t l = 8 * g; l < 8 * g + 8 && l < count; l++) {
            uint64_t v;
            memcpy(&v, x + l * csx, 8);
            u |= (((((v & lo7) + lo7) | v) & ~lo7) >> 7) << (l - 8 * g);
        }
        for (int c = 0; c < 8; c++)
            out[c] |= ((u >> (8 * c)) & 0xffu) << (8 * g);
    }
}

/* Planes 0..np-1 of up to 64 int64 values. */
static void bits_i64(const int64_t *x, int64_t cs, int64_t count, int np, uint64_t *words)
{
    for (int p = 0; p < np; p++)
        words[p] = 0;
    for (int64_t b = 0; b < count; b++) {
        const uint64_t v = (uint64_t)x[b * cs];
        for (int p = 0; p < np; p++)
            words[p] |= ((v >> p) & 1u) << b;
    }
}

typedef struct {
    int src, np;
    int64_t rows, k, kw, R;
    const void *X;
    int64_t rsx, csx;
    uint64_t *out;
    int64_t plane_stride;
} pack_ctx;

static void pack_task(void *vctx, int tid, int nt)
{
    const pack_ctx *c = vctx;
    const int64_t npan = ceil_div(c->rows, c->R);
    const int64_t p0 = npan * tid / nt, p1 = npan * (tid + 1) / nt;
    uint64_t words[64];
    const int cols8 = c->src == EMUBLAS_BP_SRC_U8 && c->rsx == 1 && c->csx != 1;
    for (int64_t p = p0; p < p1; p++) {
        for (int64_t r = 0; r < c->R; r++) {
            if (cols8 && r % 8 == 0 && p * c->R + r + 8 <= c->rows) {
                const int64_t row = p * c->R + r;
                for (int64_t w = 0; w < c->kw; w++) {
                    const int64_t l0 = 64 * w;
                    const int64_t cnt = c->k - l0 < 64 ? c->k - l0 : 64;
                    bits_u8_cols8((const uint8_t *)c->X + row + l0 * c->csx, c->csx, cnt, words);
                    memcpy(c->out + (p * c->kw + w) * c->R + r, words, 8 * sizeof *words);
                }
                r += 7;
                continue;
            }
            const int64_t row = p * c->R + r;
            for (int64_t w = 0; w < c->kw; w++) {
                const int64_t l0 = 64 * w;
                const int64_t cnt = row < c->rows ? (c->k - l0 < 64 ? c->k - l0 : 64) : 0;
                const int64_t dst = (p * c->kw + w) * c->R + r;
                if (c->src == EMUBLAS_BP_SRC_U8) {
                    const uint8_t *x = (const uint8_t *)c->X + row * c->rsx + l0 * c->csx;
                    c->out[dst] = cnt ? bits_u8(x, c->csx, cnt) : 0;
                } else {
                    const int64_t *x = (const int64_t *)c->X + row * c->rsx + l0 * c->csx;
                    if (cnt)
                        bits_i64(x, c->csx, cnt, c->np, words);
                    for (int q = 0; q < c->np; q++)
                        c->out[q * c->plane_stride + dst] = cnt ? words[q] : 0;
                }
            }
        }
    }
}

int emublas_bp_pack(int src, int side, int64_t rows, int64_t k,
                    const void *X, int64_t rsx, int64_t csx,
                    int nplanes, uint64_t *out, int64_t plane_stride, int nthreads)
{
    const int64_t words = emublas_bp_packed_words(side, rows, k);
    if (words < 0 || (src != EMUBLAS_BP_SRC_U8 && src != EMUBLAS_BP_SRC_I64))
        return EMUBLAS_EINVAL;
    if (nplanes < 1 || nplanes > 64 || (src == EMUBLAS_BP_SRC_U8 && nplanes != 1))
        return EMUBLAS_EINVAL;
    if (words == 0)
        return EMUBLAS_OK;
    if (out == NULL || (X == NULL && rows > 0 && k > 0) || (nplanes > 1 && plane_stride < words))
        return EMUBLAS_EINVAL;
    pack_ctx c = {src, nplanes, rows, k, ceil_div(k, 64), side == 0 ? MR : NR,
                  X, rsx, csx, out, plane_stride};
    if (nthreads <= 0)
        nthreads = emublas__online_cpus();
    if ((double)rows * (double)k * nplanes < 1e6)
        nthreads = 1;
    emublas__parallel(pack_task, &c, nthreads);
    return EMUBLAS_OK;
}

/* ---- micro-kernels -------------------------------------------------------- */

/* Portable kernel: 4 x 4 sub-tiles of scalar accumulators over the panels. */
#define GENERIC_MICRO_BODY                                                        \
    for (int r0 = 0; r0 < MR; r0 += 4)                                            \
        for (int c0 = 0; c0 < NR; c0 += 4) {                                      \
            uint64_t s[4][4] = {{0}};                                             \
            for (int64_t w = 0; w < kc; w++) {                                    \
                const uint64_t *aw = a + w * MR + r0, *bw = b + w * NR + c0;      \
                for (int i = 0; i < 4; i++)                                       \
                    for (int j = 0; j < 4; j++)                                   \
                        s[i][j] += (uint64_t)__builtin_popcountll(aw[i] & bw[j]); \
            }                                                                     \
            for (int i = 0; i < 4; i++)                                           \
                for (int j = 0; j < 4; j++)                                       \
                    tile[(r0 + i) * NR + c0 + j] = s[i][j];                       \
        }

static void micro_generic(int64_t kc, const uint64_t *a, const uint64_t *b, uint64_t *tile)
{
    GENERIC_MICRO_BODY
}

#if EMUBLAS_X86
/* The same C with the POPCNT instruction (every x86-64 CPU since ~2008),
 * chosen at run time so that the build stays baseline x86-64. */
__attribute__((target("popcnt")))
static void micro_generic_popcnt(int64_t kc, const uint64_t *a, const uint64_t *b, uint64_t *tile)
{
    GENERIC_MICRO_BODY
}

#define EMUBLAS_TARGET_VPOPCNT __attribute__((target("avx512f,avx512vpopcntdq,avx512bw")))

EMUBLAS_TARGET_VPOPCNT
static void micro_vpopcnt(int64_t kc, const uint64_t *a, const uint64_t *b, uint64_t *tile)
{
    __m512i acc[MR][3];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < 3; v++)
            acc[i][v] = _mm512_setzero_si512();
    for (int64_t w = 0; w < kc; w++) {
        const __m512i b0 = _mm512_loadu_si512(b + w * NR);
        const __m512i b1 = _mm512_loadu_si512(b + w * NR + 8);
        const __m512i b2 = _mm512_loadu_si512(b + w * NR + 16);
        for (int i = 0; i < MR; i++) {
            const __m512i av = _mm512_set1_epi64((long long)a[w * MR + i]);
            acc[i][0] = _mm512_add_epi64(acc[i][0], _mm512_popcnt_epi64(_mm512_and_si512(av, b0)));
            acc[i][1] = _mm512_add_epi64(acc[i][1], _mm512_popcnt_epi64(_mm512_and_si512(av, b1)));
            acc[i][2] = _mm512_add_epi64(acc[i][2], _mm512_popcnt_epi64(_mm512_and_si512(av, b2)));
        }
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < 3; v++)
            _mm512_storeu_si512(tile + i * NR + 8 * v, acc[i][v]);
}
#endif

static int x86_has(const char *what)
{
#if EMUBLAS_X86
    const int f = emublas__cpu_features();
    if (what[0] == 'p')
        return (f & EMUBLAS__CPU_POPCNT) != 0;
    return (f & EMUBLAS_CPU_AVX512_VPOPCNTDQ) && (f & EMUBLAS__CPU_AVX512BW);
#else
    (void)what;
    return 0;
#endif
}

/* The kernel impl selects, or NULL. */
static micro_fn select_micro(int impl, const char **name)
{
    const char *nm = NULL;
    micro_fn fn = NULL;
    if (impl == EMUBLAS_BP_IMPL_VPOPCNTDQ || impl == EMUBLAS_BP_IMPL_AUTO) {
#if EMUBLAS_X86
        if (x86_has("v")) {
            fn = micro_vpopcnt;
            nm = "avx512_vpopcntdq";
        }
#endif
        if (fn == NULL && impl == EMUBLAS_BP_IMPL_VPOPCNTDQ)
            return NULL;
    } else if (impl != EMUBLAS_BP_IMPL_GENERIC) {
        return NULL;
    }
    if (fn == NULL) {
        fn = micro_generic;
        nm = "generic";
#if EMUBLAS_X86
        if (x86_has("p")) {
            fn = micro_generic_popcnt;
            nm = "generic_popcnt";
        }
#endif
    }
    if (name)
        *name = nm;
    return fn;
}

const char *emublas_bp_kernel_name(int impl)
{
    const char *nm = NULL;
    return select_micro(impl, &nm) ? nm : NULL;
}

/* ---- blocked driver ------------------------------------------------------- */

typedef struct {
    micro_fn micro;
    int64_t m, n, kw;
    const uint64_t *Ap, *Bp;
    int out_type;
    void *C;
    int64_t rsc, csc;
    uint64_t weight;
    int accumulate;
    int split_n; /* threads split the B panels (else the A panels) */
} gemm_ctx;

/* C tile update: the rows/cols of the tile inside m x n. */
static void write_tile(const gemm_ctx *g, const uint64_t *tile, int64_t i0, int64_t j0, int add)
{
    const int64_t mr = g->m - i0 < MR ? g->m - i0 : MR;
    const int64_t nr = g->n - j0 < NR ? g->n - j0 : NR;
    if (g->out_type == EMUBLAS_BP_OUT_I64 && g->csc == 1) {
        /* The usual case (C-ordered int64): unit-stride loops the compiler vectorizes. */
        int64_t *C = (int64_t *)g->C;
        const uint64_t w = g->weight;
        for (int64_t i = 0; i < mr; i++) {
            uint64_t *row = (uint64_t *)(C + (i0 + i) * g->rsc + j0);
            const uint64_t *t = tile + i * NR;
            if (add && w == 1)
                for (int64_t j = 0; j < nr; j++)
                    row[j] += t[j];
            else if (add)
                for (int64_t j = 0; j < nr; j++)
                    row[j] += w * t[j];
            else
                for (int64_t j = 0; j < nr; j++)
                    row[j] = w * t[j];
        }
    } else if (g->out_type == EMUBLAS_BP_OUT_I64) {
        int64_t *C = (int64_t *)g->C;
        for (int64_t i = 0; i < mr; i++) {
            int64_t *row = C + (i0 + i) * g->rsc + j0 * g->csc;
            const uint64_t *t = tile + i * NR;
            if (add)
                for (int64_t j = 0; j < nr; j++)
                    row[j * g->csc] = (int64_t)((uint64_t)row[j * g->csc] + g->weight * t[j]);
            else
                for (int64_t j = 0; j < nr; j++)
                    row[j * g->csc] = (int64_t)(g->weight * t[j]);
        }
    } else {
        int32_t *C = (int32_t *)g->C;
        for (int64_t i = 0; i < mr; i++) {
            int32_t *row = C + (i0 + i) * g->rsc + j0 * g->csc;
            const uint64_t *t = tile + i * NR;
            if (add)
                for (int64_t j = 0; j < nr; j++)
                    row[j * g->csc] = (int32_t)((uint32_t)row[j * g->csc] + (uint32_t)t[j]);
            else
                for (int64_t j = 0; j < nr; j++)
                    row[j * g->csc] = (int32_t)t[j];
        }
    }
}

static void gemm_task(void *vctx, int tid, int nt)
{
    const gemm_ctx *g = vctx;
    const int64_t mp = ceil_div(g->m, MR), np_ = ceil_div(g->n, NR);
    int64_t ia = 0, ib = mp, ja = 0, jb = np_;
    if (g->split_n) {
        ja = np_ * tid / nt;
        jb = np_ * (tid + 1) / nt;
    } else {
        ia = mp * tid / nt;
        ib = mp * (tid + 1) / nt;
    }
    uint64_t tile[MR * NR] __attribute__((aligned(64)));
    for (int64_t pc = 0; pc < g->kw; pc += KC) {
        const int64_t kc = g->kw - pc < KC ? g->kw - pc : KC;
        const int add = pc > 0 || g->accumulate;
        for (int64_t ic = ia; ic < ib; ic += MC) {
            const int64_t ie = ic + MC < ib ? ic + MC : ib;
            for (int64_t jp = ja; jp < jb; jp++) {
                const uint64_t *b = g->Bp + (jp * g->kw + pc) * NR;
                for (int64_t ip = ic; ip < ie; ip++) {
                    g->micro(kc, g->Ap + (ip * g->kw + pc) * MR, b, tile);
                    write_tile(g, tile, ip * MR, jp * NR, add);
                }
            }
        }
    }
}

/* k == 0: C = accumulate ? C : 0. */
static void zero_out(int64_t m, int64_t n, int out_type, void *C, int64_t rsc, int64_t csc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            if (out_type == EMUBLAS_BP_OUT_I64)
                ((int64_t *)C)[i * rsc + j * csc] = 0;
            else
                ((int32_t *)C)[i * rsc + j * csc] = 0;
        }
}

int emublas_bp_gemm(int impl, int64_t m, int64_t n, int64_t k,
                    const uint64_t *Ap, const uint64_t *Bp,
                    int out_type, void *C, int64_t rsc, int64_t csc,
                    int64_t weight, int accumulate, int nthreads)
{
    if (m < 0 || n < 0 || k < 0)
        return EMUBLAS_EINVAL;
    if (out_type != EMUBLAS_BP_OUT_I32 && out_type != EMUBLAS_BP_OUT_I64)
        return EMUBLAS_EINVAL;
    if (out_type == EMUBLAS_BP_OUT_I32 && (weight != 1 || k > INT32_MAX))
        return EMUBLAS_EINVAL;
    micro_fn micro = select_micro(impl, NULL);
    if (micro == NULL)
        return (impl >= 0 && impl <= EMUBLAS_BP_IMPL_VPOPCNTDQ) ? EMUBLAS_ENOTSUP : EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (C == NULL || (k > 0 && (Ap == NULL || Bp == NULL)))
        return EMUBLAS_EINVAL;
    if (k == 0) {
        if (!accumulate)
            zero_out(m, n, out_type, C, rsc, csc);
        return EMUBLAS_OK;
    }
    gemm_ctx g = {micro, m, n, ceil_div(k, 64), Ap, Bp, out_type, C, rsc, csc,
                  (uint64_t)weight, accumulate, 0};
    if (nthreads <= 0)
        nthreads = emublas__online_cpus();
    if ((double)m * (double)n * (double)k < PAR_MIN_BITOPS)
        nthreads = 1;
    const int64_t mp = ceil_div(m, MR), np_ = ceil_div(n, NR);
    g.split_n = np_ >= mp || np_ >= 4 * (int64_t)nthreads;
    const int64_t parts = g.split_n ? np_ : mp;
    if (parts < nthreads)
        nthreads = (int)parts;
    emublas__parallel(gemm_task, &g, nthreads);
    return EMUBLAS_OK;
}
