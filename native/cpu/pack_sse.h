/*
 * pack_sse.h -- the byte interleave both int8 kernels pack with (SSE2, which
 * every x86-64 CPU has, so it inlines into the AVX-512 and the AMX code alike).
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

#endif /* EMUBLAS_CPU_PACK_SSE_H */
