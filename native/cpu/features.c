/*
 * features.c -- run-time CPU feature detection.
 *
 * __builtin_cpu_supports reports an AVX-512 feature only when the OS also
 * saves the zmm/mask state (XCR0), so "supported" here means "usable".
 */
#include "internal.h"

int emublas_cpu_features(void)
{
    int f = 0;
#if EMUBLAS_X86
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f");
    if (avx512 && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni"))
        f |= EMUBLAS_CPU_AVX512_VNNI;
    if (avx512 && __builtin_cpu_supports("avx512vpopcntdq"))
        f |= EMUBLAS_CPU_AVX512_VPOPCNTDQ;
#endif
    return f;
}
