/*
 * ozaki_product.c -- the int8 products and CRT accumulation of a run of
 * moduli in one call (emublas_oz_run_products, see emublas_cpu.h).
 *
 * The loop over moduli and k-chunks is the Python driver's, moved here so
 * that a call pays one thread wake-up and no per-modulus Python work.  Each
 * step runs the kernels of emublas_i8gemm and emublas_oz_crt_accumulate
 * (their task functions, split over the team's threads), so the arithmetic
 * is theirs: the products are exact and the accumulation is entry by entry
 * in the driver's order (modulus, k-chunk, term), whatever the split.  The
 * team meets at a barrier after the products of a step (the terms read them
 * across columns) and after its terms (the next products overwrite them).
 */
#pragma GCC optimize("fp-contract=off") /* see ozaki.h */

#include <time.h>

#include "ozaki.h"

typedef struct {
    const emublas_oz_schedule *S;
    const emublas__i8kernel *K;
    int64_t mx, my, kc_max;
    const int8_t *X, *Y;
    int64_t xps, xrs, xcs, yps, yrs, ycs;
    double *acc[2]; /* re, im: three planes each, plane apart */
    int64_t plane;
    int first[2];   /* in, then out (thread 0) */
    int uplo;
    int group;      /* moduli per accumulation pass (1: per modulus and k-chunk) */
    int np_max;     /* products per modulus, at most */
    int32_t *buf;   /* group * np_max products, mx x my, column-major */
    unsigned char *work;
    size_t work_stride;
    emublas__barrier bar;
    double seconds[2];
} run_job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One product into out: X plane a times Y plane b transposed, columns [c0, c0 + kc). */
static void product(const run_job *J, int64_t a, int64_t b, int64_t c0, int64_t kc, int32_t *out, int tid, int nt)
{
    emublas__gemm_job G;
    emublas__i8gemm_prepare(&G, J->K, J->mx, J->my, kc, J->X + a * J->xps + c0 * J->xcs, J->xrs, J->xcs,
                            J->Y + b * J->yps + c0 * J->ycs, J->ycs, J->yrs, out, 1, J->mx, 0, nt);
    G.work = J->work;
    G.work_stride = J->work_stride;
    emublas__i8gemm_task(&G, tid, nt);
}

/* Groups of moduli (one k-chunk, no transposed terms): the products of the
 * whole group, then its terms in one pass over the accumulators
 * (oz_acc_terms_task), each entry seeing the terms in the order of run_task. */
static void run_grouped(run_job *J, int tid, int nt)
{
    const emublas_oz_schedule *S = J->S;
    const int64_t mn = J->mx * J->my;
    int first[2] = {J->first[0], J->first[1]};
    double t0 = tid == 0 ? now() : 0.0, t1;
    for (int l0 = 0; l0 < S->nmod; l0 += J->group) {
        const int l1 = l0 + J->group < S->nmod ? l0 + J->group : S->nmod;
        for (int l = l0; l < l1; l++) {
            const int32_t *pr = S->prods + 2 * S->prod_off[l];
            for (int q = 0; q < S->prod_off[l + 1] - S->prod_off[l]; q++)
                product(J, (int64_t)l * S->planes + pr[2 * q], (int64_t)l * S->planes + pr[2 * q + 1], 0, S->kk,
                        J->buf + ((int64_t)(l - l0) * J->np_max + q) * mn, tid, nt);
        }
        emublas__barrier_wait(&J->bar, nt);
        if (tid == 0) {
            t1 = now();
            J->seconds[0] += t1 - t0;
            t0 = t1;
        }
        acc_term T[OZ_MAX_FUSED_TERMS];
        int nterm = 0;
        for (int l = l0; l < l1; l++) {
            const int32_t *base = J->buf + (int64_t)(l - l0) * J->np_max * mn;
            for (int t = S->term_off[l]; t < S->term_off[l + 1]; t++) {
                const int32_t *R = S->terms + 7 * t;
                acc_term *a = &T[nterm++];
                a->x1 = base + R[1] * mn;
                a->x2 = R[4] >= 0 ? base + R[4] * mn : NULL;
                a->w1 = (double)R[3];
                a->w2 = R[4] >= 0 ? (double)R[6] : 0.0;
                ozmod_init(&a->M, S->moduli[l]);
                for (int h = 0; h < 3; h++)
                    a->b[h] = S->big[3 * l + h];
                a->part = R[0];
                a->first = first[R[0]];
                first[R[0]] = 0;
            }
        }
        oz_acc_terms_task(J->mx, J->my, J->uplo, T, nterm, J->acc, J->plane, tid, nt); /* the entry point checked it can */
        emublas__barrier_wait(&J->bar, nt);
        if (tid == 0) {
            t1 = now();
            J->seconds[1] += t1 - t0;
            t0 = t1;
        }
    }
    if (tid == 0) {
        J->first[0] = first[0];
        J->first[1] = first[1];
    }
}

static void run_task(void *ctx, int tid, int nt)
{
    run_job *J = ctx;
    if (J->group > 1) {
        run_grouped(J, tid, nt);
        return;
    }
    const emublas_oz_schedule *S = J->S;
    const int64_t mx = J->mx, my = J->my, mn = mx * my;
    int first[2] = {J->first[0], J->first[1]};
    double t0 = tid == 0 ? now() : 0.0, t1;
    for (int l = 0; l < S->nmod; l++) {
        const int32_t *pr = S->prods + 2 * S->prod_off[l];
        const int np = S->prod_off[l + 1] - S->prod_off[l];
        for (int64_t c = 0; c < S->nchunks; c++) {
            const int64_t c0 = c * S->k_chunk;
            const int64_t kc = (S->kk - c0 < S->k_chunk ? S->kk - c0 : S->k_chunk);
            for (int q = 0; q < np; q++) {
                int32_t *out = J->buf + q * mn;
                if (kc <= 0) { /* no columns: the product is zero */
                    int64_t j0, j1;
                    split_cols(mx, my, 0, tid, nt, &j0, &j1);
                    memset(out + j0 * mx, 0, sizeof(int32_t) * (size_t)(mx * (j1 - j0)));
                    continue;
                }
                product(J, (int64_t)l * S->planes + pr[2 * q], (int64_t)l * S->planes + pr[2 * q + 1], c0, kc, out,
                        tid, nt);
            }
            emublas__barrier_wait(&J->bar, nt);
            if (tid == 0) {
                t1 = now();
                J->seconds[0] += t1 - t0;
                t0 = t1;
            }
            for (int t = S->term_off[l]; t < S->term_off[l + 1]; t++) {
                const int32_t *T = S->terms + 7 * t;
                const int part = T[0];
                const int32_t *x1 = J->buf + T[1] * mn, *x2 = T[4] >= 0 ? J->buf + T[4] * mn : NULL;
                acc_job A;
                oz_acc_prepare(&A, mx, my, x1, T[2] ? mx : 1, T[2] ? 1 : mx, T[3], x2, T[5] ? mx : 1,
                               T[5] ? 1 : mx, T[6], S->moduli[l], S->big + 3 * l, J->acc[part], J->plane,
                               first[part], J->uplo);
                oz_acc_task(&A, tid, nt);
                first[part] = 0;
            }
            emublas__barrier_wait(&J->bar, nt);
            if (tid == 0) {
                t1 = now();
                J->seconds[1] += t1 - t0;
                t0 = t1;
            }
        }
    }
    if (tid == 0) {
        J->first[0] = first[0];
        J->first[1] = first[1];
    }
}

/* The schedule's consistency (everything the loop indexes by it). */
static int schedule_ok(const emublas_oz_schedule *S, int has_im, int square)
{
    if (!S || S->nmod < 1 || S->nmod > EMUBLAS_OZ_MAX_MODULI || S->planes < 1 || S->kk < 0 || S->k_chunk < 1 ||
        S->nchunks < 1 || S->nchunks < (S->kk + S->k_chunk - 1) / S->k_chunk || !S->prod_off || !S->prods ||
        !S->term_off || !S->terms || !S->moduli || !S->big)
        return 0;
    if (S->prod_off[0] != 0 || S->term_off[0] != 0)
        return 0;
    for (int l = 0; l < S->nmod; l++) {
        const int np = S->prod_off[l + 1] - S->prod_off[l];
        if (np < 1 || np > EMUBLAS_OZ_RUN_MAX_PRODS || S->term_off[l + 1] < S->term_off[l])
            return 0;
        if (S->moduli[l] < 2 || !isfinite(S->big[3 * l]) || !isfinite(S->big[3 * l + 1]) || !isfinite(S->big[3 * l + 2]))
            return 0;
        for (int q = S->prod_off[l]; q < S->prod_off[l + 1]; q++)
            for (int h = 0; h < 2; h++)
                if (S->prods[2 * q + h] < 0 || S->prods[2 * q + h] >= S->planes)
                    return 0;
        for (int t = S->term_off[l]; t < S->term_off[l + 1]; t++) {
            const int32_t *T = S->terms + 7 * t;
            if (T[0] < 0 || T[0] > 1 || (T[0] == 1 && !has_im) || T[1] < 0 || T[1] >= np || T[4] < -1 ||
                T[4] >= np || T[3] <= -65536 || T[3] >= 65536 || T[6] <= -65536 || T[6] >= 65536)
                return 0;
            if ((T[2] || (T[4] >= 0 && T[5])) && !square)
                return 0;
        }
    }
    return 1;
}

/* Products per modulus at most, and the group the loop will use for a requested one. */
static int effective_group(const emublas_oz_schedule *S, int group, int *np_max_out)
{
    int np_max = 0, nt_max = 0, transposed = 0;
    for (int l = 0; l < S->nmod; l++) {
        const int np = S->prod_off[l + 1] - S->prod_off[l], ntm = S->term_off[l + 1] - S->term_off[l];
        np_max = np > np_max ? np : np_max;
        nt_max = ntm > nt_max ? ntm : nt_max;
        for (int t = S->term_off[l]; t < S->term_off[l + 1]; t++)
            transposed |= S->terms[7 * t + 2] || (S->terms[7 * t + 4] >= 0 && S->terms[7 * t + 5]);
    }
    *np_max_out = np_max;
    /* what the caller allows, where the fused pass exists (AVX-512 or AVX2) */
    if (group > S->nmod)
        group = S->nmod;
    if (nt_max > 0 && group > OZ_MAX_FUSED_TERMS / nt_max)
        group = OZ_MAX_FUSED_TERMS / nt_max;
    if (group < 1 || !(oz_simd() || oz_avx2()) || transposed || S->nchunks != 1 || S->kk == 0)
        group = 1;
    return group;
}

int64_t emublas_oz_run_scratch(const emublas_oz_schedule *S, int64_t mx, int64_t my, int group)
{
    if (mx < 0 || my < 0 || !schedule_ok(S, 1, mx == my))
        return -1;
    int np_max;
    group = effective_group(S, group, &np_max);
    return (int64_t)group * np_max * mx * my;
}

int emublas_oz_run_products(const emublas_oz_schedule *S, int64_t mx, int64_t my, const int8_t *X, int64_t xps,
                            int64_t xrs, int64_t xcs, const int8_t *Y, int64_t yps, int64_t yrs, int64_t ycs,
                            double *acc_re, double *acc_im, int64_t plane, int32_t *first, int uplo, int group, int32_t *scratch, int64_t scratch_len,
                            double *seconds, int nthreads)
{
    if (mx < 0 || my < 0 || uplo < 0 || uplo > 2 || !first)
        return EMUBLAS_EINVAL;
    if (mx == 0 || my == 0)
        return EMUBLAS_OK;
    const int has_im = acc_im != NULL;
    if (!X || !Y || !acc_re || plane < mx * my || !schedule_ok(S, has_im, mx == my))
        return EMUBLAS_EINVAL;
    int err;
    const emublas__i8kernel *K = emublas__i8gemm_kernel(EMUBLAS_IMPL_AUTO, &err);
    if (!K)
        return err;
    int np_max;
    group = effective_group(S, group, &np_max);
    double macs = 0;
    for (int l = 0; l < S->nmod; l++)
        macs += (double)(S->prod_off[l + 1] - S->prod_off[l]) * (double)mx * (double)my * (double)S->kk;
    const int64_t need = (int64_t)group * np_max * mx * my;
    if (scratch && scratch_len < need) /* the caller's buffer decides: fewer moduli at once */
        group = (int)(scratch_len / ((int64_t)np_max * mx * my));
    if (group < 1)
        return EMUBLAS_EINVAL;
    /* one team for the whole loop: worth waking when the products together are
     * (one product alone decides this in emublas_i8gemm) */
    int nt = nthreads > 0 ? nthreads : emublas__online_cpus();
    if (nt > EMUBLAS_MAX_THREADS)
        nt = EMUBLAS_MAX_THREADS;
    if (macs < emublas__par_min(K->par_min_macs))
        nt = 1;
    run_job J = {
        .S = S, .K = K, .mx = mx, .my = my, .X = X, .Y = Y,
        .xps = xps, .xrs = xrs, .xcs = xcs, .yps = yps, .yrs = yrs, .ycs = ycs,
        .acc = {acc_re, acc_im}, .plane = plane,
        .first = {first[0] != 0, first[1] != 0}, .uplo = uplo, .group = group, .np_max = np_max,
    };
    /* the workspace of the deepest chunk, the largest any step needs */
    const int64_t kc_max = S->kk < S->k_chunk ? S->kk : S->k_chunk;
    if (kc_max > 0) {
        emublas__gemm_job G;
        emublas__i8gemm_prepare(&G, K, mx, my, kc_max, X, xrs, xcs, Y, ycs, yrs, NULL, 1, mx, 0, nt);
        J.work_stride = (G.work_stride + 63) / 64 * 64;
        J.work = aligned_alloc(64, J.work_stride * (size_t)nt);
        if (!J.work)
            return EMUBLAS_ENOMEM;
    }
    J.buf = scratch ? scratch
                    : aligned_alloc(64, ((size_t)group * (size_t)np_max * (size_t)(mx * my) * sizeof(int32_t) + 63) /
                                            64 * 64);
    if (!J.buf) {
        free(J.work);
        return EMUBLAS_ENOMEM;
    }
    emublas__parallel_sized(run_task, &J, nt, macs / EMUBLAS_I8_MACS_PER_S);
    if (!scratch)
        free(J.buf);
    free(J.work);
    first[0] = J.first[0];
    first[1] = J.first[1];
    if (seconds) {
        seconds[0] += J.seconds[0];
        seconds[1] += J.seconds[1];
    }
    return EMUBLAS_OK;
}
