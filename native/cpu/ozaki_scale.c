/*
 * ozaki_scale.c -- the scaling pass of Ozaki scheme II: per-row statistics of
 * a factor (largest magnitude, sum of squares, sum of magnitudes) and the
 * 7-bit upper-bound matrix ceil(127 |x| / 2^ea) for the accurate mode's
 * bound product.  One read of the input each; rows are split over threads.
 *
 * Rows are the scaled units (rows of op(A), columns of op(B) seen as rows of
 * op(B)^T).  When the input is stored by columns (unit row stride) the loops
 * run down columns and update every row's accumulators, so the inner loop is
 * contiguous either way.  A row holding NaN or Inf gets a non-finite rowmax; sums
 * that overflow or underflow are left to the caller to redo with scaling
 * (they are only inf/0 for rows of extreme magnitude).
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

typedef struct {
    int dtype; /* 0 float32, 1 float64 */
    int64_t rows, cols;
    const char *xr, *xi; /* xi NULL: real data */
    int64_t rsx, csx;    /* strides in real elements */
    double *rowmax, *sumsq, *l1;
    const int32_t *ea;
    int8_t *out;
    int64_t rso, cso;
    int carry; /* row_stats: continue from the given rowmax/sumsq/l1 instead of zero */
} scale_job;

static inline double mag(const scale_job *J, int64_t off)
{
    double re, im = 0.0;
    if (J->dtype == 0) {
        re = ((const float *)J->xr)[off];
        if (J->xi)
            im = ((const float *)J->xi)[off];
    } else {
        re = ((const double *)J->xr)[off];
        if (J->xi)
            im = ((const double *)J->xi)[off];
    }
    if (!J->xi)
        return fabs(re);
    /* sqrt of the sum of squares where that cannot over/underflow; hypot otherwise */
    double s = re * re + im * im;
    return s > 0x1p-1000 && s < 0x1p1000 ? sqrt(s) : hypot(re, im);
}

static void rows_of(int64_t rows, int tid, int nt, int64_t *i0, int64_t *i1)
{
    *i0 = rows * tid / nt;
    *i1 = rows * (tid + 1) / nt;
}

static void stats_task(void *ctx, int tid, int nt)
{
    scale_job *J = ctx;
    int64_t i0, i1;
    rows_of(J->rows, tid, nt, &i0, &i1);
    for (int64_t i = i0; i < i1 && !J->carry; i++) { /* both branches start from these */
        J->rowmax[i] = 0.0;
        J->sumsq[i] = 0.0;
        J->l1[i] = 0.0;
    }
    if (J->rsx == 1 || J->rsx < J->csx) {
        /* by columns: contiguous down a column, accumulators per row */
        for (int64_t j = 0; j < J->cols; j++)
            for (int64_t i = i0; i < i1; i++) {
                double v = mag(J, i * J->rsx + j * J->csx);
                J->rowmax[i] = v > J->rowmax[i] || v != v ? v : J->rowmax[i];
                J->sumsq[i] += v * v;
                J->l1[i] += v;
            }
    } else {
        for (int64_t i = i0; i < i1; i++) {
            double mx = J->rowmax[i], s2 = J->sumsq[i], s1 = J->l1[i];
            int bad = !(mx <= 1.7976931348623157e308); /* a carried NaN/Inf stays non-finite */
            for (int64_t j = 0; j < J->cols; j++) {
                double v = mag(J, i * J->rsx + j * J->csx);
                bad |= !(v <= 1.7976931348623157e308);
                mx = v > mx ? v : mx;
                s2 += v * v;
                s1 += v;
            }
            J->rowmax[i] = bad ? NAN : mx;
            J->sumsq[i] = s2;
            J->l1[i] = s1;
        }
    }
}

/* 127 |x| 2^-ea rounded up.  127 * 2^-ea overflows for rows of subnormal
 * magnitude (ea < -1016): those rows scale in two steps. */
static inline int8_t bound_of(double v, double f, int32_t ea)
{
    double w = ea < -1000 ? ldexp(v, -ea) * 127.0 : v * f;
    /* at least 1 for any nonzero entry, also one so far below its row's maximum that
     * the product underflows: W_ij = 0 then proves x_il y_jl = 0 for every l */
    return (int8_t)(v > 0 ? fmax(ceil(w), 1.0) : ceil(w));
}

static void bound_task(void *ctx, int tid, int nt)
{
    scale_job *J = ctx;
    int64_t i0, i1;
    rows_of(J->rows, tid, nt, &i0, &i1);
    if (J->rsx == 1 || J->rsx < J->csx) {
        double *f = malloc((size_t)(i1 > i0 ? i1 - i0 : 1) * sizeof(double));
        if (!f) { /* no scratch: the row loop below needs none */
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = 0; j < J->cols; j++)
                    J->out[i * J->rso + j * J->cso] =
                        bound_of(mag(J, i * J->rsx + j * J->csx), ldexp(127.0, -J->ea[i]), J->ea[i]);
            return;
        }
        for (int64_t i = i0; i < i1; i++)
            f[i - i0] = J->ea[i] < -1000 ? 0.0 : ldexp(127.0, -J->ea[i]);
        for (int64_t j = 0; j < J->cols; j++)
            for (int64_t i = i0; i < i1; i++)
                J->out[i * J->rso + j * J->cso] = bound_of(mag(J, i * J->rsx + j * J->csx), f[i - i0], J->ea[i]);
        free(f);
    } else {
        for (int64_t i = i0; i < i1; i++) {
            const double f = J->ea[i] < -1000 ? 0.0 : ldexp(127.0, -J->ea[i]);
            for (int64_t j = 0; j < J->cols; j++)
                J->out[i * J->rso + j * J->cso] = bound_of(mag(J, i * J->rsx + j * J->csx), f, J->ea[i]);
        }
    }
}

static int threads_for(int nthreads, int64_t rows, int64_t cols)
{
    if (nthreads < 1)
        nthreads = 1;
    if ((double)rows * (double)cols < (double)(1 << 16) || rows < 2)
        return 1;
    return nthreads;
}

int emublas_oz_row_stats(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                         int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                         int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !rowmax || !sumsq || !l1 ||
        (rows * cols > 0 && !Xr))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, rowmax, sumsq, l1, NULL, NULL, 0, 0, 0};
    emublas__parallel(stats_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}

int emublas_oz_row_stats_carry(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                               int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                               int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !rowmax || !sumsq || !l1 ||
        (rows * cols > 0 && !Xr))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, rowmax, sumsq, l1, NULL, NULL, 0, 0, 1};
    emublas__parallel(stats_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}

int emublas_oz_bound_int8(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                          int64_t rsx, int64_t csx, const int32_t *ea, int8_t *out, int64_t rso,
                          int64_t cso, int nthreads)
{
    if ((dtype != 0 && dtype != 1) || rows < 0 || cols < 0 || !ea || (rows * cols > 0 && (!Xr || !out)))
        return EMUBLAS_EINVAL;
    scale_job J = {dtype, rows, cols, Xr, Xi, rsx, csx, NULL, NULL, NULL, ea, out, rso, cso, 0};
    emublas__parallel(bound_task, &J, threads_for(nthreads, rows, cols));
    return EMUBLAS_OK;
}
