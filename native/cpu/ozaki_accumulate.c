/*
 * ozaki_accumulate.c -- the modular reduction of one modulus's int32 products
 * (w1 X1 + w2 X2 mod m, X2 possibly X1 transposed for the rank-k updates)
 * fused with the exact three-piece CRT accumulation (emublas_cpu.h), AVX-512,
 * AVX2 and portable C in one fixed operation order (see ozaki.h).
 */
#pragma GCC optimize("fp-contract=off") /* see ozaki.h */

#include "ozaki.h"

/* ---- CRT accumulate --------------------------------------------------------- */

/* One entry: the term t, then its product with each piece of the weight added to that
 * piece's accumulator.  Every fma is exact (emublas_cpu.h), so both paths, and any
 * order of the terms, give the same sums. */
OZ_INLINE void acc_entry(const acc_job *J, double x1, double x2, double *p, int first)
{
    double v = fma(J->w1, x1, J->w2 * x2); /* exact: |v| < 2^49 */
    double t = red_small(v, &J->M);
    for (int s = 0; s < 3; s++)
        p[s * J->plane] = fma(t, J->b[s], first ? 0.0 : p[s * J->plane]);
}

static void acc_cols_generic(acc_job *J, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i++) {
            double x1 = (double)J->X1[i * J->rs1 + j * J->cs1];
            double x2 = J->X2 ? (double)J->X2[i * J->rs2 + j * J->cs2] : 0.0;
            acc_entry(J, x1, x2, J->acc + i + j * J->m, J->first);
        }
    }
}

#if EMUBLAS_X86
OZ_TARGET OZ_INLINE __m512d load_i32(const int32_t *p, int64_t stride, __mmask8 k)
{
    if (stride == 1)
        return _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, p));
    const __m512i idx = _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(stride));
    return _mm512_cvtepi32_pd(_mm512_mask_i64gather_epi32(_mm256_setzero_si256(), k, idx, p, 4));
}

typedef struct {
    __m512d m, inv, bias, w1, w2, b[3];
} acc_vc;

/* 8 entries (lanes k) at p (three planes, plane apart): the operations of acc_entry. */
OZ_TARGET OZ_INLINE void acc8(const acc_vc *C, __m512d x1, __m512d x2, double *p, int64_t plane, __mmask8 k,
                              int first)
{
    __m512d v = _mm512_fmadd_pd(C->w1, x1, _mm512_mul_pd(C->w2, x2));
    __m512d t = vred(v, C->m, C->inv, C->bias);
    for (int s = 0; s < 3; s++) {
        __m512d a = first ? _mm512_setzero_pd() : _mm512_maskz_loadu_pd(k, p + s * plane);
        _mm512_mask_storeu_pd(p + s * plane, k, _mm512_fmadd_pd(t, C->b[s], a));
    }
}

/* c[q] = column q of the 8 x 8 int32 matrix whose rows are r[0..7], in registers
 * (AVX2 instructions: both SIMD paths use it). */
__attribute__((target("avx2"))) OZ_INLINE void transpose8x8_epi32(const __m256i r[8], __m256i c[8])
{
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    c[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    c[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    c[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    c[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    c[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    c[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    c[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    c[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* Rows i0 .. i0+nr-1 (nr <= 8; the rest zero), columns j .. j+7 (lanes kc) of
 * a matrix contiguous along j, transposed: c[q] holds column j+q. */
OZ_TARGET OZ_INLINE void load_t8x8(const int32_t *X, int64_t rs, int64_t i0, int nr, int64_t j, __mmask8 kc,
                                   __m256i c[8])
{
    __m256i r[8];
    for (int q = 0; q < 8; q++)
        r[q] = q < nr ? _mm256_maskz_loadu_epi32(kc, X + (i0 + q) * rs + j) : _mm256_setzero_si256();
    transpose8x8_epi32(r, c);
}

#define OZ_TB 32 /* columns per transposed block */

/* Columns jb .. jb+nc-1 (nc <= OZ_TB), rows [r0, r1) of X (contiguous along
 * j, row stride rs) into buf: column q at buf + q*ld, 8x8 tiles transposed in
 * registers, each row's cache lines used up before the next row. */
/* The row ranges [ra, rb) of columns jb .. jb+nc-1 (row_range) and their union [*lo, *hi)
 * (empty: *lo >= *hi): the rows a block of transposed columns must read. */
static inline void block_rows(int64_t m, int uplo, int64_t jb, int nc, int64_t *ra, int64_t *rb, int64_t *lo,
                              int64_t *hi)
{
    int64_t l = m, h = 0;
    for (int q = 0; q < nc; q++) {
        row_range(m, uplo, jb + q, &ra[q], &rb[q]);
        if (ra[q] < rb[q]) {
            l = ra[q] < l ? ra[q] : l;
            h = rb[q] > h ? rb[q] : h;
        }
    }
    *lo = l;
    *hi = h;
}

OZ_TARGET static void transpose_block(const int32_t *X, int64_t rs, int64_t ld, int64_t r0, int64_t r1, int64_t jb,
                                      int nc, int32_t *buf)
{
    for (int64_t i0 = r0; i0 < r1; i0 += 8) {
        const int nr = r1 - i0 < 8 ? (int)(r1 - i0) : 8;
        const __mmask8 kr = (__mmask8)((1u << nr) - 1);
        for (int h = 0; h < nc; h += 8) {
            const int w = nc - h < 8 ? nc - h : 8;
            __m256i c[8];
            load_t8x8(X, rs, i0, nr, jb + h, (__mmask8)((1u << w) - 1), c);
            for (int q = 0; q < w; q++)
                _mm256_mask_storeu_epi32(buf + (int64_t)(h + q) * ld + i0, kr, c[q]);
        }
    }
}

/* An operand contiguous along j but not along i (e.g. X2 = X1^T for the
 * rank-k updates): blocks of OZ_TB columns are first transposed into a
 * per-thread buffer (full cache lines read row by row), then the column loop
 * reads the buffer.  Each entry still goes through acc8 alone, so the
 * results are those of the plain column loop.  Returns 0 without a buffer. */
OZ_TARGET static int acc_cols_transposed(acc_job *J, const acc_vc *C, int64_t j0, int64_t j1, int t1, int t2)
{
    const int64_t m = J->m;
    const int64_t ld = (m + 15) / 16 * 16 + 16; /* columns not 4 KiB apart: no cache-set pile-up */
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)ld * OZ_TB * (size_t)(t1 + t2));
    if (!buf)
        return 0;
    int32_t *b1 = buf, *b2 = buf + (t1 ? ld * OZ_TB : 0);
    const __m512d zero = _mm512_setzero_pd();
    const int first = J->first;
    for (int64_t jb = j0; jb < j1; jb += OZ_TB) {
        const int nc = j1 - jb < OZ_TB ? (int)(j1 - jb) : OZ_TB;
        int64_t ra[OZ_TB], rb[OZ_TB], lo_i, hi_i;
        block_rows(m, J->uplo, jb, nc, ra, rb, &lo_i, &hi_i);
        if (lo_i >= hi_i)
            continue;
        if (t1)
            transpose_block(J->X1, J->rs1, ld, lo_i, hi_i, jb, nc, b1);
        if (t2)
            transpose_block(J->X2, J->rs2, ld, lo_i, hi_i, jb, nc, b2);
        for (int q = 0; q < nc; q++) {
            const int64_t j = jb + q;
            const int32_t *p1 = t1 ? b1 + (int64_t)q * ld : J->X1 + j * J->cs1;
            const int32_t *p2 = t2 ? b2 + (int64_t)q * ld : J->X2 ? J->X2 + j * J->cs2 : NULL;
            const int64_t s1 = t1 ? 1 : J->rs1, s2 = t2 ? 1 : J->rs2;
            double *pa = J->acc + j * m;
            for (int64_t i = ra[q]; i < rb[q]; i += 8) {
                const int n = rb[q] - i < 8 ? (int)(rb[q] - i) : 8;
                const __mmask8 k = (__mmask8)((1u << n) - 1);
                __m512d x1 = load_i32(p1 + i * s1, s1, k);
                __m512d x2 = p2 ? load_i32(p2 + i * s2, s2, k) : zero;
                acc8(C, x1, x2, pa + i, J->plane, k, first);
            }
        }
    }
    free(buf);
    return 1;
}

OZ_TARGET static void acc_cols_simd(acc_job *J, int64_t j0, int64_t j1)
{
    const acc_vc C = {
        .m = _mm512_set1_pd(J->M.m), .inv = _mm512_set1_pd(J->M.inv), .bias = _mm512_set1_pd(J->M.bias),
        .w1 = _mm512_set1_pd(J->w1), .w2 = _mm512_set1_pd(J->w2),
        .b = {_mm512_set1_pd(J->b[0]), _mm512_set1_pd(J->b[1]), _mm512_set1_pd(J->b[2])},
    };
    const __m512d zero = _mm512_setzero_pd();
    const int t1 = J->rs1 != 1 && J->cs1 == 1, t2 = J->X2 && J->rs2 != 1 && J->cs2 == 1;
    if ((t1 || t2) && acc_cols_transposed(J, &C, j0, j1, t1, t2))
        return;
    const int first = J->first;
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        double *pa = J->acc + j * J->m;
        for (int64_t i = i0; i < i1; i += 8) {
            const int n = i1 - i < 8 ? (int)(i1 - i) : 8;
            const __mmask8 k = (__mmask8)((1u << n) - 1);
            __m512d x1 = load_i32(J->X1 + i * J->rs1 + j * J->cs1, J->rs1, k);
            __m512d x2 = J->X2 ? load_i32(J->X2 + i * J->rs2 + j * J->cs2, J->rs2, k) : zero;
            acc8(&C, x1, x2, pa + i, J->plane, k, first);
        }
    }
}
#endif

#if EMUBLAS_X86
/* ---- AVX2: acc8's operations on 4 lanes; the 1-3 entries left at the end of
 * a column go through acc_entry itself (same operations, so same bits). */

OZ_TARGET2 OZ_INLINE __m256d load_i32x4(const int32_t *p, int64_t stride)
{
    if (stride == 1)
        return _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)p));
    return _mm256_cvtepi32_pd(_mm_set_epi32(p[3 * stride], p[2 * stride], p[stride], p[0]));
}

typedef struct {
    __m256d m, inv, bias, w1, w2, b[3];
} acc_vc4;

OZ_TARGET2 static void acc_vc4_init(acc_vc4 *C, const ozmod *M, double w1, double w2, const double *b)
{
    *C = (acc_vc4){
        .m = _mm256_set1_pd(M->m), .inv = _mm256_set1_pd(M->inv), .bias = _mm256_set1_pd(M->bias),
        .w1 = _mm256_set1_pd(w1), .w2 = _mm256_set1_pd(w2),
        .b = {_mm256_set1_pd(b[0]), _mm256_set1_pd(b[1]), _mm256_set1_pd(b[2])},
    };
}

/* 4 entries at p (three planes, plane apart): the operations of acc_entry. */
OZ_TARGET2 OZ_INLINE void acc4(const acc_vc4 *C, __m256d x1, __m256d x2, double *p, int64_t plane, int first)
{
    __m256d v = _mm256_fmadd_pd(C->w1, x1, _mm256_mul_pd(C->w2, x2));
    __m256d t = vred4(v, C->m, C->inv, C->bias);
    for (int s = 0; s < 3; s++) {
        __m256d a = first ? _mm256_setzero_pd() : _mm256_loadu_pd(p + s * plane);
        _mm256_storeu_pd(p + s * plane, _mm256_fmadd_pd(t, C->b[s], a));
    }
}

/* Rows [i0, i1) of one column: X1's entries at p1 (row stride s1), X2's at p2
 * (s2; NULL: none), the accumulators at pa. */
OZ_TARGET2 static void acc_col4(const acc_job *J, const acc_vc4 *C, const int32_t *p1, int64_t s1,
                                const int32_t *p2, int64_t s2, double *pa, int64_t i0, int64_t i1)
{
    const __m256d zero = _mm256_setzero_pd();
    const int first = J->first;
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
        __m256d x1 = load_i32x4(p1 + i * s1, s1);
        __m256d x2 = p2 ? load_i32x4(p2 + i * s2, s2) : zero;
        acc4(C, x1, x2, pa + i, J->plane, first);
    }
    for (; i < i1; i++)
        acc_entry(J, (double)p1[i * s1], p2 ? (double)p2[i * s2] : 0.0, pa + i, first);
}

/* Rows i0 .. i0+7, columns j .. j+7 of X (contiguous along j) into buf
 * (column q at buf + q*ld), transposed in registers as load_t8x8 does. */
OZ_TARGET2 static void transpose8x8_avx2(const int32_t *X, int64_t rs, int64_t i0, int64_t j, int64_t ld,
                                         int32_t *buf)
{
    __m256i r[8], c[8];
    for (int q = 0; q < 8; q++)
        r[q] = _mm256_loadu_si256((const __m256i *)(X + (i0 + q) * rs + j));
    transpose8x8_epi32(r, c);
    for (int q = 0; q < 8; q++)
        _mm256_storeu_si256((__m256i *)(buf + q * ld + i0), c[q]);
}

/* transpose_block with full 8x8 tiles in registers, the edges copied one by one. */
OZ_TARGET2 static void transpose_block_avx2(const int32_t *X, int64_t rs, int64_t ld, int64_t r0, int64_t r1,
                                            int64_t jb, int nc, int32_t *buf)
{
    for (int64_t i0 = r0; i0 < r1; i0 += 8) {
        const int nr = r1 - i0 < 8 ? (int)(r1 - i0) : 8;
        for (int h = 0; h < nc; h += 8) {
            const int w = nc - h < 8 ? nc - h : 8;
            if (nr == 8 && w == 8) {
                transpose8x8_avx2(X, rs, i0, jb + h, ld, buf + (int64_t)h * ld);
                continue;
            }
            for (int q = 0; q < w; q++)
                for (int r = 0; r < nr; r++)
                    buf[(int64_t)(h + q) * ld + i0 + r] = X[(i0 + r) * rs + jb + h + q];
        }
    }
}

/* acc_cols_transposed on AVX2. */
OZ_TARGET2 static int acc_cols_transposed_avx2(acc_job *J, const acc_vc4 *C, int64_t j0, int64_t j1, int t1,
                                               int t2)
{
    const int64_t m = J->m;
    const int64_t ld = (m + 15) / 16 * 16 + 16; /* as acc_cols_transposed */
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)ld * OZ_TB * (size_t)(t1 + t2));
    if (!buf)
        return 0;
    int32_t *b1 = buf, *b2 = buf + (t1 ? ld * OZ_TB : 0);
    for (int64_t jb = j0; jb < j1; jb += OZ_TB) {
        const int nc = j1 - jb < OZ_TB ? (int)(j1 - jb) : OZ_TB;
        int64_t ra[OZ_TB], rb[OZ_TB], lo_i, hi_i;
        block_rows(m, J->uplo, jb, nc, ra, rb, &lo_i, &hi_i);
        if (lo_i >= hi_i)
            continue;
        if (t1)
            transpose_block_avx2(J->X1, J->rs1, ld, lo_i, hi_i, jb, nc, b1);
        if (t2)
            transpose_block_avx2(J->X2, J->rs2, ld, lo_i, hi_i, jb, nc, b2);
        for (int q = 0; q < nc; q++) {
            const int64_t j = jb + q;
            const int32_t *p1 = t1 ? b1 + (int64_t)q * ld : J->X1 + j * J->cs1;
            const int32_t *p2 = t2 ? b2 + (int64_t)q * ld : J->X2 ? J->X2 + j * J->cs2 : NULL;
            acc_col4(J, C, p1, t1 ? 1 : J->rs1, p2, t2 ? 1 : J->rs2, J->acc + j * m, ra[q], rb[q]);
        }
    }
    free(buf);
    return 1;
}

OZ_TARGET2 static void acc_cols_avx2(acc_job *J, int64_t j0, int64_t j1)
{
    acc_vc4 C;
    acc_vc4_init(&C, &J->M, J->w1, J->w2, J->b);
    const int t1 = J->rs1 != 1 && J->cs1 == 1, t2 = J->X2 && J->rs2 != 1 && J->cs2 == 1;
    if ((t1 || t2) && acc_cols_transposed_avx2(J, &C, j0, j1, t1, t2))
        return;
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(J->m, J->uplo, j, &i0, &i1);
        acc_col4(J, &C, J->X1 + j * J->cs1, J->rs1, J->X2 ? J->X2 + j * J->cs2 : NULL, J->rs2, J->acc + j * J->m,
                 i0, i1);
    }
}
#endif

#if EMUBLAS_X86
/* oz_acc_terms_task on 8 entries at a time: the accumulators of each part
 * stay in registers over all the terms, which go through acc8's operations. */
OZ_TARGET static void acc_terms_simd(int64_t m, int uplo, const acc_term *T, int nterm, double *const acc[2],
                                     int64_t plane, int64_t j0, int64_t j1)
{
    acc_vc C[OZ_MAX_FUSED_TERMS];
    int used[2] = {0, 0};
    for (int t = 0; t < nterm; t++) {
        C[t] = (acc_vc){
            .m = _mm512_set1_pd(T[t].M.m), .inv = _mm512_set1_pd(T[t].M.inv), .bias = _mm512_set1_pd(T[t].M.bias),
            .w1 = _mm512_set1_pd(T[t].w1), .w2 = _mm512_set1_pd(T[t].w2),
            .b = {_mm512_set1_pd(T[t].b[0]), _mm512_set1_pd(T[t].b[1]), _mm512_set1_pd(T[t].b[2])},
        };
        used[T[t].part] = 1;
    }
    const __m512d zero = _mm512_setzero_pd();
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(m, uplo, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i += 8) {
            const int n = i1 - i < 8 ? (int)(i1 - i) : 8;
            const __mmask8 k = (__mmask8)((1u << n) - 1);
            const int64_t off = i + j * m;
            __m512d a[2][3];
            for (int p = 0; p < 2; p++)
                for (int s = 0; s < 3; s++)
                    a[p][s] = used[p] ? _mm512_maskz_loadu_pd(k, acc[p] + s * plane + off) : zero;
            for (int t = 0; t < nterm; t++) {
                const acc_vc *c = &C[t];
                const int p = T[t].part;
                __m512d x1 = _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, T[t].x1 + off));
                __m512d x2 = T[t].x2 ? _mm512_cvtepi32_pd(_mm256_maskz_loadu_epi32(k, T[t].x2 + off)) : zero;
                __m512d v = _mm512_fmadd_pd(c->w1, x1, _mm512_mul_pd(c->w2, x2));
                __m512d tt = vred(v, c->m, c->inv, c->bias);
                for (int s = 0; s < 3; s++)
                    a[p][s] = _mm512_fmadd_pd(tt, c->b[s], T[t].first ? zero : a[p][s]);
            }
            for (int p = 0; p < 2; p++)
                if (used[p])
                    for (int s = 0; s < 3; s++)
                        _mm512_mask_storeu_pd(acc[p] + s * plane + off, k, a[p][s]);
        }
    }
}
#endif

#if EMUBLAS_X86
/* One entry (offset off) of oz_acc_terms_task, term after term in memory:
 * acc_terms_avx2's operations on the entries left at the end of a column. */
static void acc_terms_entry(const acc_term *T, int nterm, double *const acc[2], int64_t plane, int64_t off)
{
    for (int t = 0; t < nterm; t++) {
        const double x2 = T[t].x2 ? (double)T[t].x2[off] : 0.0;
        const double v = fma(T[t].w1, (double)T[t].x1[off], T[t].w2 * x2);
        const double tt = red_small(v, &T[t].M);
        double *p = acc[T[t].part] + off;
        for (int s = 0; s < 3; s++)
            p[s * plane] = fma(tt, T[t].b[s], T[t].first ? 0.0 : p[s * plane]);
    }
}

/* NV vectors of 4 entries from off on, every term in turn: the sums of each part in named
 * registers (indexed by the term's part, a [2][3] array lived on the stack and every term
 * waited for its store).  IM: some term has an imaginary part.  A real table takes two
 * vectors at a time, so that the FMA chains of the sums overlap; a complex one's twelve
 * sums would not fit the sixteen registers. */
OZ_TARGET2 OZ_INLINE void acc_terms_vec4(const acc_term *T, const acc_vc4 *C, int nterm, const int *used,
                                         double *const acc[2], int64_t plane, int64_t off, const int NV,
                                         const int IM)
{
    const __m256d zero = _mm256_setzero_pd();
    __m256d r[2][3], q[2][3];
    for (int u = 0; u < NV; u++)
        for (int s = 0; s < 3; s++) {
            r[u][s] = used[0] ? _mm256_loadu_pd(acc[0] + s * plane + off + 4 * u) : zero;
            q[u][s] = IM && used[1] ? _mm256_loadu_pd(acc[1] + s * plane + off + 4 * u) : zero;
        }
    for (int t = 0; t < nterm; t++) {
        const acc_vc4 *c = &C[t];
        const int first = T[t].first, imag = T[t].part;
        for (int u = 0; u < NV; u++) {
            const int64_t o = off + 4 * u;
            __m256d x1 = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(T[t].x1 + o)));
            __m256d x2 = T[t].x2 ? _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(T[t].x2 + o))) : zero;
            __m256d v = _mm256_fmadd_pd(c->w1, x1, _mm256_mul_pd(c->w2, x2));
            __m256d tt = vred4(v, c->m, c->inv, c->bias);
            if (!IM || !imag)
                for (int s = 0; s < 3; s++)
                    r[u][s] = _mm256_fmadd_pd(tt, c->b[s], first ? zero : r[u][s]);
            else
                for (int s = 0; s < 3; s++)
                    q[u][s] = _mm256_fmadd_pd(tt, c->b[s], first ? zero : q[u][s]);
        }
    }
    for (int u = 0; u < NV; u++)
        for (int s = 0; s < 3; s++) {
            if (used[0])
                _mm256_storeu_pd(acc[0] + s * plane + off + 4 * u, r[u][s]);
            if (IM && used[1])
                _mm256_storeu_pd(acc[1] + s * plane + off + 4 * u, q[u][s]);
        }
}

/* acc_terms_simd on 4 entries at a time. */
OZ_TARGET2 static void acc_terms_avx2(int64_t m, int uplo, const acc_term *T, int nterm, double *const acc[2],
                                      int64_t plane, int64_t j0, int64_t j1)
{
    acc_vc4 C[OZ_MAX_FUSED_TERMS];
    int used[2] = {0, 0};
    for (int t = 0; t < nterm; t++) {
        acc_vc4_init(&C[t], &T[t].M, T[t].w1, T[t].w2, T[t].b);
        used[T[t].part] = 1;
    }
    for (int64_t j = j0; j < j1; j++) {
        int64_t i0, i1;
        row_range(m, uplo, j, &i0, &i1);
        int64_t i = i0;
        if (!used[1]) {
            for (; i + 8 <= i1; i += 8)
                acc_terms_vec4(T, C, nterm, used, acc, plane, i + j * m, 2, 0);
            for (; i + 4 <= i1; i += 4)
                acc_terms_vec4(T, C, nterm, used, acc, plane, i + j * m, 1, 0);
        } else {
            for (; i + 4 <= i1; i += 4)
                acc_terms_vec4(T, C, nterm, used, acc, plane, i + j * m, 1, 1);
        }
        for (; i < i1; i++)
            acc_terms_entry(T, nterm, acc, plane, i + j * m);
    }
}
#endif

int oz_acc_terms_task(int64_t m, int64_t n, int uplo, const acc_term *T, int nterm, double *const acc[2],
                      int64_t plane, int tid, int nt)
{
#if EMUBLAS_X86
    if (oz_simd() && nterm <= OZ_MAX_FUSED_TERMS) {
        int64_t j0, j1;
        split_cols(m, n, uplo, tid, nt, &j0, &j1);
        acc_terms_simd(m, uplo, T, nterm, acc, plane, j0, j1);
        return 1;
    }
    if (oz_avx2() && nterm <= OZ_MAX_FUSED_TERMS) {
        int64_t j0, j1;
        split_cols(m, n, uplo, tid, nt, &j0, &j1);
        acc_terms_avx2(m, uplo, T, nterm, acc, plane, j0, j1);
        return 1;
    }
#endif
    return 0;
}

void oz_acc_task(void *ctx, int tid, int nt)
{
    acc_job *J = ctx;
    int64_t j0, j1;
    split_cols(J->m, J->n, J->uplo, tid, nt, &j0, &j1);
#if EMUBLAS_X86
    if (J->simd) {
        acc_cols_simd(J, j0, j1);
        return;
    }
    if (J->avx2) {
        acc_cols_avx2(J, j0, j1);
        return;
    }
#endif
    acc_cols_generic(J, j0, j1);
}

int emublas_oz_crt_accumulate(int64_t m, int64_t n, const int32_t *X1, int64_t rs1, int64_t cs1,
                              int32_t w1, const int32_t *X2, int64_t rs2, int64_t cs2, int32_t w2,
                              int32_t modulus, const double *big, double *acc, int64_t plane, int first,
                              int uplo, int nthreads)
{
    if (m < 0 || n < 0 || uplo < 0 || uplo > 2 || modulus < 2 || w1 <= -65536 || w1 >= 65536 ||
        w2 <= -65536 || w2 >= 65536)
        return EMUBLAS_EINVAL;
    if (m == 0 || n == 0)
        return EMUBLAS_OK;
    if (!X1 || !acc || !big || plane < m * n || !isfinite(big[0]) || !isfinite(big[1]) || !isfinite(big[2]))
        return EMUBLAS_EINVAL;
    acc_job J;
    oz_acc_prepare(&J, m, n, X1, rs1, cs1, w1, X2, rs2, cs2, w2, modulus, big, acc, plane, first, uplo);
    const double work = (double)m * (double)n * (uplo ? 0.5 : 1.0) * 16;
    int nt = oz_threads(nthreads, work);
    if (nt > n)
        nt = (int)n;
    oz_parallel(oz_acc_task, &J, nt, work);
    return EMUBLAS_OK;
}

void oz_acc_prepare(acc_job *J, int64_t m, int64_t n, const int32_t *X1, int64_t rs1, int64_t cs1, int32_t w1,
                    const int32_t *X2, int64_t rs2, int64_t cs2, int32_t w2, int32_t modulus, const double *big,
                    double *acc, int64_t plane, int first, int uplo)
{
    *J = (acc_job){
        .m = m, .n = n, .X1 = X1, .X2 = X2, .rs1 = rs1, .cs1 = cs1, .rs2 = rs2, .cs2 = cs2,
        .w1 = (double)w1, .w2 = X2 ? (double)w2 : 0.0, .b = {big[0], big[1], big[2]},
        .acc = acc, .plane = plane, .first = first != 0, .uplo = uplo, .simd = oz_simd(),
        .avx2 = oz_avx2(),
    };
    ozmod_init(&J->M, modulus);
}
