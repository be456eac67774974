/*
 * pack_sse.h -- the byte interleave and the transposes the int8 kernels pack
 * with (SSE2, which every x86-64 CPU has, so they inline into the AVX-512 and
 * the AMX code alike).
 */
#ifndef EMUBLAS_CPU_PACK_SSE_H
#define EMUBLAS_CPU_PACK_SSE_H

#include <emmintrin.h>
#include <stdint.h>

/* Byte-interleave 4 k-lines of 16 bytes (s + q*ld, q = 0..3): item i gets
 * bytes (line0[i], line1[i], line2[i], line3[i]).  Items 0-7 go to lo, 8-15
 * to hi (32 bytes each); flip is XORed in (0x80 for the VNNI kernel's A, else 0). */
static inline __attribute__((always_inline)) void
emublas__interleave_4x16(const int8_t *s, int64_t ld, __m128i flip, void *lo, void *hi)
{
    __m128i x0 = _mm_loadu_si128((const __m128i *)(s));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(s + ld));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(s + 2 * ld));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(s + 3 * ld));
    __m128i t01l = _mm_unpacklo_epi8(x0, x1), t01h = _mm_unpackhi_epi8(x0, x1);
    __m128i t23l = _mm_unpacklo_epi8(x2, x3), t23h = _mm_unpackhi_epi8(x2, x3);
    __m128i *l = lo, *h = hi;
    _mm_storeu_si128(l, _mm_xor_si128(_mm_unpacklo_epi16(t01l, t23l), flip));
    _mm_storeu_si128(l + 1, _mm_xor_si128(_mm_unpackhi_epi16(t01l, t23l), flip));
    _mm_storeu_si128(h, _mm_xor_si128(_mm_unpacklo_epi16(t01h, t23h), flip));
    _mm_storeu_si128(h + 1, _mm_xor_si128(_mm_unpackhi_epi16(t01h, t23h), flip));
}

/* A 16 x 16 byte block transposed: dst[c*ldd + r] = src[r*lds + c] (an unpack
 * ladder of 8-, 16-, 32- and 64-bit interleaves). */
static inline __attribute__((always_inline)) void
emublas__transpose_16x16_bytes(const int8_t *src, int64_t lds, int8_t *dst, int64_t ldd)
{
    __m128i a[16], b[16];
    for (int i = 0; i < 16; i++)
        a[i] = _mm_loadu_si128((const __m128i *)(src + i * lds));
    for (int i = 0; i < 8; i++) {
        b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
        b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++)
        for (int h = 0; h < 2; h++) {
            a[4 * i + 2 * h] = _mm_unpacklo_epi16(b[4 * i + h], b[4 * i + 2 + h]);
            a[4 * i + 2 * h + 1] = _mm_unpackhi_epi16(b[4 * i + h], b[4 * i + 2 + h]);
        }
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 4; h++) {
            b[8 * i + 2 * h] = _mm_unpacklo_epi32(a[8 * i + h], a[8 * i + 4 + h]);
            b[8 * i + 2 * h + 1] = _mm_unpackhi_epi32(a[8 * i + h], a[8 * i + 4 + h]);
        }
    for (int h = 0; h < 8; h++) {
        _mm_storeu_si128((__m128i *)(dst + (2 * h) * ldd), _mm_unpacklo_epi64(b[h], b[8 + h]));
        _mm_storeu_si128((__m128i *)(dst + (2 * h + 1) * ldd), _mm_unpackhi_epi64(b[h], b[8 + h]));
    }
}

/* A 4 x 4 block of 4-byte items transposed: item (c, r) of dst = item (r, c) of
 * src; lds and ldd in bytes. */
static inline __attribute__((always_inline)) void
emublas__transpose_4x4_dwords(const int8_t *src, int64_t lds, int8_t *dst, int64_t ldd)
{
    __m128i r0 = _mm_loadu_si128((const __m128i *)(src));
    __m128i r1 = _mm_loadu_si128((const __m128i *)(src + lds));
    __m128i r2 = _mm_loadu_si128((const __m128i *)(src + 2 * lds));
    __m128i r3 = _mm_loadu_si128((const __m128i *)(src + 3 * lds));
    __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpackhi_epi32(r0, r1);
    __m128i t2 = _mm_unpacklo_epi32(r2, r3), t3 = _mm_unpackhi_epi32(r2, r3);
    _mm_storeu_si128((__m128i *)(dst), _mm_unpacklo_epi64(t0, t2));
    _mm_storeu_si128((__m128i *)(dst + ldd), _mm_unpackhi_epi64(t0, t2));
    _mm_storeu_si128((__m128i *)(dst + 2 * ldd), _mm_unpacklo_epi64(t1, t3));
    _mm_storeu_si128((__m128i *)(dst + 3 * ldd), _mm_unpackhi_epi64(t1, t3));
}

#endif /* EMUBLAS_CPU_PACK_SSE_H */
