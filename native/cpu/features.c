/*
 * features.c -- run-time CPU feature detection: the one place that asks the
 * CPU what it has.  Every kernel family picks its SIMD path from
 * emublas__cpu_features().
 *
 * __builtin_cpu_supports reports an AVX-512 feature only when the OS also
 * saves the zmm/mask state (XCR0), so "supported" here means "usable".
 */
#include "internal.h"

static int probe(void)
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
    if (avx512 && __builtin_cpu_supports("avx512bw"))
        f |= EMUBLAS__CPU_AVX512BW;
    if (avx512 && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        f |= EMUBLAS__CPU_AVX512_FVLDQBW;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        f |= EMUBLAS__CPU_AVX2_FMA;
    if (__builtin_cpu_supports("popcnt"))
        f |= EMUBLAS__CPU_POPCNT;
#endif
    return f;
}

int emublas__cpu_features(void)
{
    static int cached = -1; /* the probe is idempotent: a race only repeats it */
    int f = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (f < 0) {
        f = probe();
        __atomic_store_n(&cached, f, __ATOMIC_RELAXED);
    }
    return f;
}

int emublas_cpu_features(void)
{
    return emublas__cpu_features() & (EMUBLAS_CPU_AVX512_VNNI | EMUBLAS_CPU_AVX512_VPOPCNTDQ);
}
