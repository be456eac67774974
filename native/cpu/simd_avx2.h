/*
 * simd_avx2.h -- small AVX2 helpers shared by the Ozaki-II passes
 * (ozaki_residues.c, ozaki_scale.c).  Loads and lane moves only, no
 * arithmetic, so the files' floating-point pragmas do not matter here.
 * Include after <immintrin.h>, on x86 only.
 */
#ifndef EMUBLAS_SIMD_AVX2_H
#define EMUBLAS_SIMD_AVX2_H

/* Four interleaved (re, im) pairs at p, float64 when f64 else float32, as
 * four real parts and four imaginary parts in float64 lanes. */
__attribute__((target("avx2,fma"))) static inline void avx2_load4_cplx(const void *p, int f64, __m256d *re,
                                                                       __m256d *im)
{
    if (f64) {
        const __m256d c0 = _mm256_loadu_pd((const double *)p);
        const __m256d c1 = _mm256_loadu_pd((const double *)p + 4);
        const __m256d lo = _mm256_permute2f128_pd(c0, c1, 0x20); /* r0 i0 r2 i2 */
        const __m256d hi = _mm256_permute2f128_pd(c0, c1, 0x31); /* r1 i1 r3 i3 */
        *re = _mm256_unpacklo_pd(lo, hi);
        *im = _mm256_unpackhi_pd(lo, hi);
    } else {
        const __m256 c = _mm256_permutevar8x32_ps(_mm256_loadu_ps((const float *)p),
                                                  _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
        *re = _mm256_cvtps_pd(_mm256_castps256_ps128(c));
        *im = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
    }
}

#endif /* EMUBLAS_SIMD_AVX2_H */
