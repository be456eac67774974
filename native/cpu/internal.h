/*
 * internal.h -- declarations shared between the emublas CPU sources.
 * Nothing here is part of the public API; every symbol is hidden.
 */
#ifndef EMUBLAS_CPU_INTERNAL_H
#define EMUBLAS_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "emublas_cpu.h"

#if defined(__GNUC__)
#define EMUBLAS_HIDDEN __attribute__((visibility("hidden")))
#else
#define EMUBLAS_HIDDEN
#endif

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define EMUBLAS_X86 1
/* Functions using AVX-512 VNNI are compiled for it one by one, so the rest of
 * the library stays portable; they only run after a run-time CPU check. */
#define EMUBLAS_TARGET_VNNI \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#else
#define EMUBLAS_X86 0
#endif

/* AMX intrinsics need GCC 11 or Clang 12; an older compiler builds without the AMX kernel. */
#if EMUBLAS_X86 && ((defined(__clang__) && __clang_major__ >= 12) || \
                    (!defined(__clang__) && __GNUC__ >= 11))
#define EMUBLAS_HAVE_AMX 1
#define EMUBLAS_TARGET_AMX __attribute__((target("amx-tile,amx-int8")))
#else
#define EMUBLAS_HAVE_AMX 0
#endif

/* ---- CPU features (features.c) ---------------------------------------------- */

/* Bits of emublas__cpu_features(): the public EMUBLAS_CPU_* bits
 * (emublas_cpu.h) and these, which only the kernels' dispatch asks about. */
#define EMUBLAS__CPU_AVX2_FMA (1 << 8)        /* avx2+fma: the AVX2 int8 GEMM kernels, the Ozaki-II passes */
#define EMUBLAS__CPU_AVX512_FVLDQBW (1 << 9)  /* avx512f+vl+dq+bw: the Ozaki-II passes */
#define EMUBLAS__CPU_AVX512BW (1 << 10)       /* avx512f+bw: with VPOPCNTDQ, the boolpack kernel */
#define EMUBLAS__CPU_POPCNT (1 << 11)         /* popcnt: the generic boolpack kernel's build */

/* Usable CPU features, a mask of EMUBLAS_CPU_* and EMUBLAS__CPU_* bits
 * (probed once; 0 off x86). */
EMUBLAS_HIDDEN int emublas__cpu_features(void);

/* ---- thread pool (pool.c) ------------------------------------------------ */

/* A task runs as fn(ctx, tid, nthreads) for tid = 0 .. nthreads-1; it must
 * split its work by the nthreads it is given, which can be smaller than the
 * number asked for (pool busy with another caller, thread creation failed). */
typedef void (*emublas_task_fn)(void *ctx, int tid, int nthreads);

/* Runs the task on up to nthreads threads (the caller is thread 0) and
 * returns when all are done.  Returns the number of threads used. */
EMUBLAS_HIDDEN int emublas__parallel(emublas_task_fn fn, void *ctx, int nthreads);

/* emublas__parallel for a region that takes about `seconds` on one thread.
 * Every region's team is cut to the CPUs other threads leave free when it
 * starts (pool.c), except a long one (EMUBLAS_LONG_REGION_S or more): the
 * threads holding CPUs then are usually OpenBLAS's workers, which spin for
 * about 0.1 s after each of its calls and then sleep, while a region cut short
 * would run on fewer threads to its end.  emublas__parallel is this with 0. */
EMUBLAS_HIDDEN int emublas__parallel_sized(emublas_task_fn fn, void *ctx, int nthreads, double seconds);
#define EMUBLAS_LONG_REGION_S 0.05

/* A rough one-thread rate for emublas__parallel_sized: an int8 GEMM's
 * multiply-adds (about its kernels' par_min_macs per 0.2 ms, AVX2 or VNNI). */
#define EMUBLAS_I8_MACS_PER_S 5e10

/* The least work worth splitting over threads, for a kernel whose threshold
 * with sleeping workers is `cold`: 16 times less while the pool is held
 * (emublas_pool_hold) with its workers pinned one per CPU, when a region costs
 * microseconds instead of a wake-up each. */
EMUBLAS_HIDDEN double emublas__par_min(double cold);

/* Number of CPUs this process may run on (affinity mask), at least 1. */
EMUBLAS_HIDDEN int emublas__online_cpus(void);

/* The ceiling probes' driver: runs the task on nthreads threads (<= 0: all CPUs, at most
 * EMUBLAS_MAX_THREADS) and returns the threads used times ops_per_thread per second. */
EMUBLAS_HIDDEN double emublas__probe_rate(emublas_task_fn fn, void *ctx, int nthreads, double ops_per_thread);

/* Largest thread count the pool will use. */
#define EMUBLAS_MAX_THREADS 64

/* A barrier for the nthreads threads of one parallel region (zero it before
 * the region): each thread's writes before its wait are visible to all after
 * it.  Waiters spin briefly, then sleep (a worker descheduled by another
 * process must not make its partners burn their cores).  nthreads <= 1
 * returns at once. */
typedef struct {
    int count;         /* threads arrived in this round */
    unsigned int gen;  /* bumped when a round completes */
} emublas__barrier;

EMUBLAS_HIDDEN void emublas__barrier_wait(emublas__barrier *b, int nthreads);

/* ---- int8 GEMM kernels ---------------------------------------------------- */

/*
 * A kernel packs blocks of A and B into its own panel layout and multiplies
 * one MR x NR register tile at a time; the blocked driver in i8gemm.c is
 * shared by all kernels.
 *
 * pack_a: the mc x kc block at A (strides rsa, csa) into ceil(mc/mr) panels
 *   of mr rows, each kp*mr elements (kp = kc rounded up to kmul), padding
 *   with values that contribute nothing.
 * pack_b: the kc x nc block at B into ceil(nc/nr) panels of nr columns, each
 *   kp*nr elements, zero padded; a kernel that needs one also writes
 *   bias[0 .. ceil(nc/nr)*nr), the value every accumulator of that column
 *   starts from (the VNNI kernel's offset correction).
 * micro: T = (A panel)(B panel) over kp (+ bias), then C = T (add == 0) or
 *   C += T for the full mr x nr tile at c, row stride rsc, unit column
 *   stride.  The driver sends edge tiles and strided C through a scratch
 *   tile.
 */
typedef struct emublas__i8kernel {
    const char *name;
    int mr, nr;      /* register tile */
    int kmul;        /* packed k is a multiple of this */
    int elt;         /* bytes per packed element */
    int64_t kc, mc, nc; /* cache blocking */
    /* Fewer multiply-adds than this run on one thread: waking a sleeping
     * worker costs some 20-40 us (more in VMs), worth it only for products
     * that take several times that on one core. */
    double par_min_macs;
    void (*pack_a)(int64_t mc, int64_t kc, const int8_t *A, int64_t rsa,
                   int64_t csa, void *dst);
    void (*pack_b)(int64_t kc, int64_t nc, const int8_t *B, int64_t rsb,
                   int64_t csb, void *dst, int32_t *bias);
    void (*micro)(int64_t kp, const void *a, const void *b,
                  const int32_t *bias, int32_t *c, int64_t rsc, int add);
} emublas__i8kernel;

#if EMUBLAS_X86
EMUBLAS_HIDDEN extern const emublas__i8kernel emublas__i8kernel_vnni;
EMUBLAS_HIDDEN extern const emublas__i8kernel emublas__i8kernel_avx2;
#endif
#if EMUBLAS_HAVE_AMX
EMUBLAS_HIDDEN extern const emublas__i8kernel emublas__i8kernel_amx;
/* Asks the OS for the tile data once (features.c); 1 when granted. */
EMUBLAS_HIDDEN int emublas__amx_permit(void);
#endif

/* ---- int8 GEMM inside a caller's parallel region (i8gemm.c) ---------------- */

/* One prepared product C = A*B (or C += A*B); emublas_i8gemm is prepare,
 * workspace, then emublas__i8gemm_task on a parallel region. */
typedef struct {
    const emublas__i8kernel *K;
    int64_t m, n, k;
    const int8_t *A;
    int64_t rsa, csa;
    const int8_t *B;
    int64_t rsb, csb;
    int32_t *C;
    int64_t rsc, csc;
    int accumulate;
    int split_n;        /* threads split columns (else rows) of C */
    unsigned char *work;
    size_t work_stride; /* bytes of workspace per thread */
} emublas__gemm_job;

/* The kernel impl selects (NULL and *err set when invalid or unsupported). */
EMUBLAS_HIDDEN const emublas__i8kernel *emublas__i8gemm_kernel(int impl, int *err);

/* Fills J for m, n, k > 0 split over nthreads threads (C^T = B^T A^T for a
 * column-major C, as the kernels want C's rows contiguous) and sets
 * J->work_stride to the workspace one thread needs; J->work is the
 * caller's (J->work_stride bytes per thread, 64-byte aligned). */
EMUBLAS_HIDDEN void emublas__i8gemm_prepare(emublas__gemm_job *J, const emublas__i8kernel *K, int64_t m,
                                            int64_t n, int64_t k, const int8_t *A, int64_t rsa, int64_t csa,
                                            const int8_t *B, int64_t rsb, int64_t csb, int32_t *C, int64_t rsc,
                                            int64_t csc, int accumulate, int nthreads);

/* Thread tid's share of a prepared product (an emublas_task_fn). */
EMUBLAS_HIDDEN void emublas__i8gemm_task(void *ctx, int tid, int nthreads);

#endif /* EMUBLAS_CPU_INTERNAL_H */
