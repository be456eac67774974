/*
 * pool.c -- a minimal persistent thread pool.
 *
 * Why not OpenMP: GOMP's idle threads spin (GOMP_SPINCOUNT, OMP_WAIT_POLICY)
 * after a parallel region, and scipy's OpenBLAS usually runs right after us
 * in the same process; spinning workers would steal its cores.  Here idle
 * workers block on a condition variable, i.e. they sleep in the kernel as
 * soon as a call returns.  Waking one costs some 10-40 us (a futex wake and,
 * in a VM, an interrupt to a halted vCPU), which the kernels avoid for small
 * problems by running single-threaded.
 *
 * A caller with several regions to run back to back (one emulated GEMM: the
 * scaling, residue, product and CRT passes with Python in between) holds the
 * pool (emublas_pool_hold): while held, a worker that finished a region spins
 * for the next one instead of sleeping, for at most HOLD_SPIN_NS after each
 * region, and holding wakes the last region's team at once, so that their wake-up
 * overlaps the caller's own work.  Only a region's team is woken, and a worker
 * outside it sleeps on: on a many-core machine a call with a small team (a
 * small problem, an explicit thread count) leaves the other cores to others.
 * While held, the kernels also split smaller
 * work (emublas__par_min).  On a 2-vCPU VM this took a 128 x 128 ozaki2 dgemm
 * (seven regions) to about 0.8 of its time (BENCHMARKS.md).  Released, the
 * workers sleep again, so a BLAS library called after the emulated call gets
 * the cores.
 *
 * Other work on the machine: the team is never larger than the CPUs nothing
 * else is running on when the region starts (team_cap).  OpenBLAS's workers
 * keep spinning for some 0.1 s after each of its calls, so in a program that
 * calls scipy's BLAS or LAPACK between emulated calls a full team shares CPUs
 * with them: our regions then run at a fraction of their speed, and a pinned
 * worker pushes OpenBLAS's spinning one onto the caller's CPU, where
 * OpenBLAS's next call waits for a scheduler time slice (milliseconds) to get
 * its worker back.  With the cap such a region runs on the free CPUs, often
 * on the caller's thread alone (bench_mixed_cpu.py, BENCHMARKS.md).  A long
 * region (emublas__parallel_sized) keeps its team: those workers sleep within
 * about 0.1 s, and a region cut short would stay short of threads to its end.
 *
 * One parallel region runs at a time; a caller that finds the pool busy (a
 * second Python thread, the GIL being released) simply runs its task on its
 * own thread with nthreads = 1.
 *
 * Placement (Linux): when the region has no more threads than the caller
 * may use CPUs, each worker is pinned to one of those CPUs other than the
 * one the caller runs on.  Without this the scheduler often wakes the worker
 * on the caller's own CPU (wake-affine placement; in VMs an idle, halted
 * vCPU does not look available), where it preempts the caller and the two
 * halves of the work run one after the other.  Pins are re-checked on every
 * region (the caller may have moved) and dropped when threads outnumber
 * CPUs.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER; /* one region at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;     /* guards the fields below */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;       /* the caller waits here */
static pthread_mutex_t barrier_lock = PTHREAD_MUTEX_INITIALIZER; /* emublas__barrier_wait's sleepers */
static pthread_cond_t barrier_wake = PTHREAD_COND_INITIALIZER;
static int nworkers;            /* started workers have ids 1 .. nworkers */
static pthread_cond_t wake_w[EMUBLAS_MAX_THREADS]; /* worker id waits on wake_w[id] (only a region's team is woken) */
static int last_team;          /* the last region's threads (a hold pre-wakes that many) */
static uint64_t generation;     /* bumped once per region */
static uint64_t start_gen[EMUBLAS_MAX_THREADS];
static emublas_task_fn job_fn;
static void *job_ctx;
static int job_nthreads;
static int pending;             /* workers of the current region not finished */
static int hold_count;          /* emublas_pool_hold nesting (atomic reads outside the lock) */
static uint64_t hold_epoch;     /* bumped when hold_count leaves zero */
static int spin_ok;             /* the workers are pinned one per CPU: spinning steals no one's core */
static int asleep_n;            /* workers asleep on `wake` and not yet woken (their asleep[] set) */
static unsigned char asleep[EMUBLAS_MAX_THREADS];
static int last_others;         /* others_runnable's previous reading */
static int whole_machine = -1;  /* this process may use every online CPU (-1: not checked yet) */
static uint64_t cap_time;       /* when team_cap last read the machine's load (0: never) */
static int cap_free;            /* the CPUs it found free then */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static pthread_t worker_thread[EMUBLAS_MAX_THREADS];
#if defined(__linux__) && defined(CPU_SET)
#define POOL_PINNING 1
static int worker_cpu[EMUBLAS_MAX_THREADS]; /* pinned CPU, or -1: caller's mask */
#else
#define POOL_PINNING 0
#endif

/* A held worker waits awake this long for the next region, then sleeps until
 * the next hold; the caller waits awake this long for its workers. */
#define HOLD_SPIN_NS 5000000
#define DONE_SPIN_NS 200000
#define CAP_AGE_NS 1000000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Spin while no region after `seen` is posted and the pool is held, for at
 * most HOLD_SPIN_NS; returns 1 when a region was posted. */
static int spin_for_region(uint64_t seen)
{
    const uint64_t end = now_ns() + HOLD_SPIN_NS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) != seen)
                return 1;
            if (__atomic_load_n(&hold_count, __ATOMIC_ACQUIRE) == 0)
                return 0;
            cpu_relax();
        }
        if (now_ns() >= end)
            return 0;
    }
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "emublas-pool"); /* for top, gdb and the tests */
#endif
    pthread_mutex_lock(&lock);
    /* start_gen was recorded before this thread existed, so a region posted
     * between pthread_create and here is not missed. */
    uint64_t seen = start_gen[id];
    uint64_t gave_up = 0; /* the hold epoch whose spin timed out (epochs start at 1) */
    for (;;) {
        while (generation == seen) {
            if (hold_count > 0 && spin_ok && gave_up != hold_epoch) {
                const uint64_t epoch = hold_epoch;
                pthread_mutex_unlock(&lock);
                const int posted = spin_for_region(seen);
                pthread_mutex_lock(&lock);
                if (!posted && hold_count > 0 && hold_epoch == epoch && generation == seen)
                    gave_up = epoch; /* held but idle too long: sleep until a region or the next hold */
                continue;
            }
            asleep[id] = 1;
            __atomic_add_fetch(&asleep_n, 1, __ATOMIC_ACQ_REL);
            pthread_cond_wait(&wake_w[id], &lock);
            if (asleep[id]) { /* not counted as woken by wake_team (a spurious wake-up) */
                asleep[id] = 0;
                __atomic_sub_fetch(&asleep_n, 1, __ATOMIC_ACQ_REL);
            }
        }
        seen = generation;
        emublas_task_fn fn = job_fn;
        void *ctx = job_ctx;
        int nt = job_nthreads;
        /* after a region, its team waits awake again (at most HOLD_SPIN_NS); a worker left
         * out of it (a smaller region, or one cut short for other work by team_cap) sleeps
         * instead: the next region is likely the same size, and it would compete with other work */
        gave_up = id < nt ? 0 : hold_epoch;
        pthread_mutex_unlock(&lock);
        if (id < nt)
            fn(ctx, id, nt);
        pthread_mutex_lock(&lock);
        if (id < nt && __atomic_sub_fetch(&pending, 1, __ATOMIC_ACQ_REL) == 0)
            pthread_cond_signal(&done);
    }
    return NULL;
}

/* A forked child has only the forking thread: forget the workers and reset
 * the locks (the parent may have held them at fork time). */
static void atfork_child(void)
{
    pthread_mutex_t m0 = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c0 = PTHREAD_COND_INITIALIZER;
    run_lock = m0;
    lock = m0;
    done = c0;
    barrier_lock = m0;
    barrier_wake = c0;
    for (int id = 0; id < EMUBLAS_MAX_THREADS; id++)
        wake_w[id] = c0;
    nworkers = 0;
    last_team = 0;
    pending = 0;
    hold_count = 0;
    spin_ok = 0;
    asleep_n = 0;
    memset(asleep, 0, sizeof asleep);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}

/* Wake workers 1 .. nt-1, counting them awake from now (they are runnable
 * before they return from their wait); the others sleep on, so that a small
 * region on a many-core machine does not start every worker.  Called with
 * `lock` held. */
static void wake_team(int nt)
{
    for (int id = 1; id < nt && id <= nworkers; id++)
        if (asleep[id]) {
            asleep[id] = 0;
            __atomic_sub_fetch(&asleep_n, 1, __ATOMIC_ACQ_REL);
            pthread_cond_signal(&wake_w[id]);
        }
}

/* Start workers until there are want-1 of them; returns the thread count
 * available (workers + caller).  Called with `lock` held. */
static int grow_pool(int want)
{
    if (want > EMUBLAS_MAX_THREADS)
        want = EMUBLAS_MAX_THREADS;
    if (nworkers + 1 >= want)
        return want;
    /* Workers must not take Python's signals: block everything while they
     * are created so they inherit an all-blocked mask. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (nworkers + 1 < want) {
        int id = nworkers + 1;
        start_gen[id] = generation;
        pthread_cond_init(&wake_w[id], NULL);
        if (pthread_create(&worker_thread[id], &attr, worker_main,
                           (void *)(intptr_t)id) != 0)
            break;
#if POOL_PINNING
        worker_cpu[id] = -1;
#endif
        nworkers = id;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return nworkers + 1 < want ? nworkers + 1 : want;
}

#if POOL_PINNING
/* Pin workers 1 .. nt-1 to distinct allowed CPUs other than the caller's
 * current one, or unpin them when that is impossible.  Best effort: errors
 * leave the scheduler in charge.  Called with `lock` held. */
static void place_workers(int nt)
{
    cpu_set_t allowed;
    if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0)
        return;
    const int me = sched_getcpu();
    int others[EMUBLAS_MAX_THREADS], nothers = 0;
    for (int c = 0; c < CPU_SETSIZE && nothers < EMUBLAS_MAX_THREADS; c++)
        if (CPU_ISSET(c, &allowed) && c != me)
            others[nothers++] = c;
    const int pin = me >= 0 && CPU_ISSET(me, &allowed) && nt - 1 <= nothers;
    spin_ok = pin;
    for (int id = 1; id < nt; id++) {
        const int want = pin ? others[(id - 1) % nothers] : -1;
        if (worker_cpu[id] == want)
            continue;
        cpu_set_t one;
        const cpu_set_t *set = &allowed;
        if (want >= 0) {
            CPU_ZERO(&one);
            CPU_SET(want, &one);
            set = &one;
        }
        if (pthread_setaffinity_np(worker_thread[id], sizeof *set, set) == 0)
            worker_cpu[id] = want;
    }
}
#endif

/* Runnable threads on the machine other than the caller and our awake workers
 * (/proc/loadavg's fourth field counts the runnable ones), the smaller of this
 * reading and the previous one; 0 where unknown. */
static int others_runnable(void)
{
#if defined(__linux__)
    static int fd = -2; /* -2: not opened yet; -1: unavailable */
    int f = __atomic_load_n(&fd, __ATOMIC_ACQUIRE);
    if (f == -2) {
        f = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
        int expected = -2;
        if (!__atomic_compare_exchange_n(&fd, &expected, f, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            if (f >= 0)
                close(f); /* another thread opened it first */
            f = expected;
        }
    }
    if (f < 0)
        return 0;
    char buf[128];
    const ssize_t len = pread(f, buf, sizeof buf - 1, 0);
    if (len <= 0)
        return 0;
    buf[len] = 0;
    const char *p = buf; /* "0.50 0.40 0.30 R/T last-pid" */
    for (int i = 0; i < 3 && p; i++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    if (!p)
        return 0;
    const int ours = __atomic_load_n(&nworkers, __ATOMIC_ACQUIRE) - __atomic_load_n(&asleep_n, __ATOMIC_ACQUIRE);
    long now = strtol(p, NULL, 10) - 1 - ours;
    now = now > 0 ? (now < EMUBLAS_MAX_THREADS ? now : EMUBLAS_MAX_THREADS) : 0;
    /* the smaller of two readings: a kernel thread that runs for microseconds is
     * rarely seen twice, a spinning BLAS worker is */
    const int prev = __atomic_exchange_n(&last_others, (int)now, __ATOMIC_ACQ_REL);
    return prev < now ? prev : (int)now;
#else
    return 0;
#endif
}

/* The team a region of nthreads gets: at most the CPUs nothing else runs on.
 * The count is the whole machine's, so it is used only where this process may
 * use every online CPU (in a cpuset of a larger machine it would count other
 * tenants' threads as ours to avoid). */
static int team_cap(int nthreads)
{
    if (nthreads <= 1)
        return nthreads;
    /* checked once per process (sysconf reads sysfs: tens of microseconds) */
    int whole = __atomic_load_n(&whole_machine, __ATOMIC_ACQUIRE);
    if (whole < 0) {
        whole = (long)emublas__online_cpus() == sysconf(_SC_NPROCESSORS_ONLN);
        __atomic_store_n(&whole_machine, whole, __ATOMIC_RELEASE);
    }
    if (!whole)
        return nthreads;
    /* a reading serves the regions of the next CAP_AGE_NS (one emulated call has
     * several, each after a little Python) */
    const uint64_t t = now_ns();
    int free_cpus = __atomic_load_n(&cap_free, __ATOMIC_ACQUIRE);
    if (t - __atomic_load_n(&cap_time, __ATOMIC_ACQUIRE) > CAP_AGE_NS) {
        free_cpus = emublas__online_cpus() - others_runnable();
        __atomic_store_n(&cap_free, free_cpus, __ATOMIC_RELEASE);
        __atomic_store_n(&cap_time, t, __ATOMIC_RELEASE);
    }
    return free_cpus < 1 ? 1 : (nthreads < free_cpus ? nthreads : free_cpus);
}

int emublas_pool_team(int nthreads)
{
    return team_cap(nthreads < 1 ? 1 : nthreads);
}

int emublas__parallel(emublas_task_fn fn, void *ctx, int nthreads)
{
    return emublas__parallel_sized(fn, ctx, nthreads, 0.0);
}

int emublas__parallel_sized(emublas_task_fn fn, void *ctx, int nthreads, double seconds)
{
    if (!(seconds >= EMUBLAS_LONG_REGION_S))
        nthreads = team_cap(nthreads);
    if (nthreads <= 1 || pthread_mutex_trylock(&run_lock) != 0) {
        fn(ctx, 0, 1);
        return 1;
    }
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&lock);
    int nt = grow_pool(nthreads);
#if POOL_PINNING
    if (nt > 1)
        place_workers(nt);
#endif
    if (nt > 1) {
        job_fn = fn;
        job_ctx = ctx;
        job_nthreads = nt;
        pending = nt - 1;
        last_team = nt;
        __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
        wake_team(nt);
    }
    pthread_mutex_unlock(&lock);

    fn(ctx, 0, nt);

    if (nt > 1) {
        if (spin_ok) { /* the workers usually finish within microseconds of the caller */
            const uint64_t end = now_ns() + DONE_SPIN_NS;
            while (__atomic_load_n(&pending, __ATOMIC_ACQUIRE) > 0 && now_ns() < end)
                for (int i = 0; i < 64; i++)
                    cpu_relax();
        }
        pthread_mutex_lock(&lock);
        while (pending > 0)
            pthread_cond_wait(&done, &lock);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_unlock(&run_lock);
    return nt;
}

void emublas_pool_hold(int on)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&lock);
    if (on) {
        if (__atomic_add_fetch(&hold_count, 1, __ATOMIC_ACQ_REL) == 1) {
            hold_epoch++;
            /* start waking the last region's team now (not to compete with other work) */
            if (spin_ok && nworkers > 0)
                wake_team(team_cap(last_team > 1 ? last_team : nworkers + 1));
        }
    } else if (hold_count > 0) {
        __atomic_sub_fetch(&hold_count, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_unlock(&lock);
}

double emublas__par_min(double cold)
{
    const int warm = __atomic_load_n(&hold_count, __ATOMIC_ACQUIRE) > 0 && spin_ok;
    return warm ? cold / 16 : cold;
}

int emublas__online_cpus(void)
{
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- barrier ----------------------------------------------------------------
 * Spin first: the partners of a region normally arrive within microseconds,
 * and a futex round trip costs tens.  Then sleep on one condition variable
 * for all barriers (one region runs at a time, so its sleepers are the only
 * ones). */
#define BARRIER_SPINS 4000

void emublas__barrier_wait(emublas__barrier *b, int nthreads)
{
    if (nthreads <= 1)
        return;
    const unsigned int gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == nthreads) {
        /* last to arrive: reset, then open the round (no one can arrive for
         * the next round before gen moves) */
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        pthread_mutex_lock(&barrier_lock);
        __atomic_add_fetch(&b->gen, 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&barrier_wake);
        pthread_mutex_unlock(&barrier_lock);
        return;
    }
    for (int i = 0; i < BARRIER_SPINS; i++) {
        if (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) != gen)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&barrier_lock);
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen)
        pthread_cond_wait(&barrier_wake, &barrier_lock);
    pthread_mutex_unlock(&barrier_lock);
}

double emublas__probe_rate(emublas_task_fn fn, void *ctx, int nthreads, double ops_per_thread)
{
    int nt = nthreads > 0 ? nthreads : emublas__online_cpus();
    if (nt > EMUBLAS_MAX_THREADS)
        nt = EMUBLAS_MAX_THREADS;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nt = emublas__parallel(fn, ctx, nt);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return (double)nt * ops_per_thread / secs;
}
