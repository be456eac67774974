/*
 * features.c -- run-time CPU feature detection: the one place that asks the
 * CPU what it has.  Every kernel family picks its SIMD path from
 * emublas__cpu_features().
 *
 * __builtin_cpu_supports reports an AVX-512 feature only when the OS also
 * saves the zmm/mask state (XCR0), so "supported" here means "usable".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall() under -std=c11 */
#endif
#include "internal.h"

#if EMUBLAS_HAVE_AMX
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* AMX int8 is present when the CPU has it (CPUID.7.0:EDX bits 24, 25) and the
 * OS saves the tile state (XCR0 bits 17, 18).  Side-effect free: the tile data
 * permission is asked for only when the kernel is first chosen
 * (emublas__amx_permit), since a granted permission enlarges every signal frame
 * of the process. */
static int amx_present(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE: xgetbv exists */
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & (3u << 17)) == (3u << 17);
}

/* Linux grants a process the tile data on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM), for all its threads; without it the first tile
 * instruction faults.  Asked once; 1 when granted. */
int emublas__amx_permit(void)
{
    static int cached = -1;
    int ok = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (ok < 0) {
#ifdef __linux__
        ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
        ok = 0; /* no way to ask for the tile data here: do not risk the fault */
#endif
        __atomic_store_n(&cached, ok, __ATOMIC_RELAXED);
    }
    return ok;
}
#endif

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
        f |= EMUBLAS__CPU_AVX2_FMA | EMUBLAS_CPU_AVX2;
    if (__builtin_cpu_supports("popcnt"))
        f |= EMUBLAS__CPU_POPCNT;
#endif
#if EMUBLAS_HAVE_AMX
    if (amx_present())
        f |= EMUBLAS_CPU_AMX_INT8;
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
    return emublas__cpu_features() &
           (EMUBLAS_CPU_AVX512_VNNI | EMUBLAS_CPU_AVX512_VPOPCNTDQ | EMUBLAS_CPU_AMX_INT8 | EMUBLAS_CPU_AVX2);
}
