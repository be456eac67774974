/*
 * ozaki2.cu -- the memory-bound passes of Ozaki scheme II on the GPU
 * (docs/design.md §2, §5), loaded by emublas/_kernels/ozaki_gpu.py with cupy.RawModule.
 *
 *   oz_stats_*     per-row max |x|, sum |x|^2, sum |x| of a factor (scaling)
 *   oz_bound_*     ceil(127 |x| 2^-ea) as int8, k-contiguous (accurate bound)
 *   oz_res_*       every residue plane of a factor for a batch of moduli in
 *                  one pass, k-contiguous and zero-padded for cuBLAS gemmEx
 *   oz_terms       int32 products of one modulus -> int8 CRT terms
 *                  (w1 X1 + w2 X2 mod m, X2 possibly X1 transposed)
 *   oz_crt_final   all terms of all moduli -> exact three-piece CRT sum ->
 *                  symmetric representative -> unscale -> alpha/beta -> C
 *   oz_crt_fused   the same straight from the int32 products of all moduli
 *                  (oz_terms' reduction done in the sum's loop: no term planes)
 *   oz_crt_fused_tr  the same for the rank-k terms that read a product transposed
 *
 * The arithmetic is the CPU kernels' (native/cpu/ozaki.c), operation for
 * operation: residues are exact, the CRT sums are exact (in any order), and the
 * finalize is the same fixed sequence of IEEE double operations with explicit
 * fma(), so the GPU and CPU backends give identical results.  The module must be
 * compiled with --fmad=false: contracting a*b+c into an FMA would break the two-sum.
 *
 * Layouts.  A factor is "rows x cols" (rows of op(A), or columns of op(B) seen
 * as rows), read with element strides rs, cs (complex data as two real views
 * with doubled strides).  Residue planes are rows_pad x cols_pad int8 with the
 * k index contiguous (row i at i*ld): the TN layout of cuBLAS's int8 tensor
 * core path.  Products and term planes are column-major.
 */


#include "../include/emublas_constants.h" /* shared with the CPU kernels and Python */

#define OZ_SPLIT EMUBLAS_OZ_SPLIT
#define OZ_SPLIT_INV EMUBLAS_OZ_SPLIT_INV
#define OZ_BIG EMUBLAS_OZ_BIG
#define OZ_MAX_MOD EMUBLAS_OZ_MAX_MODULI
#define TILE EMUBLAS_OZ_PAD /* a padded plane is a whole number of tiles */

struct ozmod {
    double m, inv, bias, c49;
};

#define OZ_MAGIC EMUBLAS_OZ_MAGIC /* (z + MAGIC) - MAGIC rounds |z| < 2^51 to even */

/* Round to nearest even by the magic constant (as the CPU code does): two
 * DADDs instead of the slower FRND. */
__device__ __forceinline__ double rnd(double z)
{
    return (z + OZ_MAGIC) - OZ_MAGIC;
}

__device__ __forceinline__ double red_small(double t, const ozmod &M)
{
    double q = rnd(fma(t, M.inv, M.bias));
    return fma(-q, M.m, t);
}

/* Symmetric residue of an integer-valued double (rare path: |y| >= 2^90). */
__device__ __forceinline__ double red_huge(double y, const ozmod &M)
{
    if (!isfinite(y))
        return 0.0;
    int e;
    double f = frexp(y, &e);
    double mant = ldexp(f, 53);
    double a = rnd(mant * OZ_SPLIT_INV);
    double b = fma(-a, OZ_SPLIT, mant);
    double r0 = red_small(fma(a, M.c49, b), M);
    /* 2^(e-53) mod m by squaring in float64 (every product below 2^15, exact): the 64-bit
     * integer remainders of pow2mod would hold registers the common path needs */
    double p = 1.0, w = red_small(2.0, M);
    for (int k = e - 53; k > 0; k >>= 1) {
        if (k & 1)
            p = red_small(p * w, M);
        w = red_small(w * w, M);
    }
    return red_small(r0 * p, M);
}

/* y = a*2^49 + b: the modulus-independent half of the reduction. */
struct split49 {
    double a, b;
    bool huge;
};

__device__ __forceinline__ split49 split_of(double y)
{
    split49 s;
    s.huge = !(fabs(y) < OZ_BIG);
    double yy = s.huge ? 0.0 : y;
    s.a = rnd(yy * OZ_SPLIT_INV);
    s.b = fma(-s.a, OZ_SPLIT, yy);
    return s;
}

/* HUGE = false: the caller knows no entry of its warp is huge (the common case: one
 * warp-uniform test per tile instead of a branch per entry and modulus). */
template <bool HUGE = true>
__device__ __forceinline__ double red_split(const split49 &s, double y, const ozmod &M)
{
    if (HUGE && s.huge)
        return red_huge(y, M);
    return red_small(fma(s.a, M.c49, s.b), M);
}

__device__ __forceinline__ double trunc_scaled(double x, int shift)
{
    return trunc(ldexp(x, shift));
}

/* ---- residues ------------------------------------------------------------- */

/* The shift of a row holding NaN or Inf (oz_plan): its residues are zero, and the
 * final pass takes its entries from a float64 dot product of the original data. */
#define OZ_DEAD EMUBLAS_OZ_DEAD
#define OZ_RES_TILES EMUBLAS_OZ_RES_TILES

/* Asynchronous copy of a TILE x TILE tile of NS sources, as stored, into raw[s][line][el]:
 * el runs along the source's contiguous direction (rows when by_rows), so a warp copies
 * one contiguous run; entries outside rows x cols are zero-filled, nothing read. */
template <typename T, int NS>
__device__ __forceinline__ void fetch_tile(T (*raw)[TILE][TILE + 1], const T *const *src, long long rows,
                                           long long cols, long long rs, long long cs, long long r0, long long c0,
                                           bool by_rows)
{
#pragma unroll
    for (int step = 0; step < TILE * TILE / 256; step++) {
        const int lin = threadIdx.x + step * 256, line = lin / TILE, el = lin % TILE;
        const long long gr = r0 + (by_rows ? el : line), gc = c0 + (by_rows ? line : el);
        const bool in = gr < rows && gc < cols;
        const long long off = in ? gr * rs + gc * cs : 0;
#pragma unroll
        for (int s = 0; s < NS; s++)
            emublas_cp_async<sizeof(T)>(&raw[s][line][el], src[s] + off, in);
    }
}

/* The four low bytes, by byte permutes (three instructions, not nine shifts and masks). */

/* the low byte of an integer-valued |x| < 2^51 (two's complement), as the low word of x + MAGIC */
__device__ __forceinline__ unsigned low_word(double x)
{
    return (unsigned)__double2loint(x + OZ_MAGIC);
}

/* four low bytes into one int (byte e from w[e]) */
__device__ __forceinline__ int pack_words(const unsigned (&w)[4])
{
    return (int)__byte_perm(__byte_perm(w[0], w[1], 0x0040), __byte_perm(w[2], w[3], 0x0040), 0x5410);
}

/* The four low bytes, by byte permutes (three instructions, not nine shifts and masks). */
__device__ __forceinline__ int pack4(double a, double b, double c, double d)
{
    const unsigned w[4] = {low_word(a), low_word(b), low_word(c), low_word(d)};
    return pack_words(w);
}

/* red_small for odd m in three operations: t/m rounded once, by fma(t, 1/m, MAGIC).  For
 * |t| < 2^51, t/m lies at least 1/(2m) from a half-integer and the product's error is below
 * that, so q is red_small's and so is the residue, bit for bit. */
__device__ __forceinline__ double red_odd(double t, const ozmod &M)
{
    const double q = fma(t, M.inv, OZ_MAGIC) - OZ_MAGIC;
    return fma(-q, M.m, t);
}

template <bool ODD> __device__ __forceinline__ double red_mod(double t, const ozmod &M)
{
    return ODD ? red_odd(t, M) : red_small(t, M);
}

/* Every modulus's planes of one thread's 4 x NS entries when some entry of its warp has
 * |y| >= 2^90 (or is not finite): each source reduced on its own, then combined, one entry
 * and one byte at a time (a rare path that holds as few registers as it can). */
template <int KIND, int NS>
__device__ __forceinline__ void residue_planes_huge(const double (&y)[NS][4], const ozmod *smod,
                                                    const double3 *sroot, int nmod, signed char *o,
                                                    long long plane_stride)
{
    constexpr int PL = KIND == 0 ? 1 : KIND == 1 ? 2 : KIND == 2 ? 3 : 4;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        for (int l = 0; l < nmod; l++) {
            const ozmod M = smod[l];
            const double sr = sroot[l].x;
            double r[NS], res[PL];
#pragma unroll
            for (int s_ = 0; s_ < NS; s_++)
                r[s_] = red_split<true>(split_of(y[s_][e]), y[s_][e], M);
            if (KIND == 0) {
                res[0] = r[0];
            } else if (KIND == 1) {
                res[0] = red_small(fma(sr, r[1 % NS], r[0]), M);
                res[1 % PL] = red_small(fma(-sr, r[1 % NS], r[0]), M);
            } else if (KIND == 2) {
                res[0] = r[0];
                res[1 % PL] = r[1 % NS];
                res[2 % PL] = red_small(r[0] + r[1 % NS], M);
            } else {
                double ap = red_small(fma(sr, r[1 % NS], r[0]), M), am = red_small(fma(-sr, r[1 % NS], r[0]), M);
                double bp = red_small(fma(sr, r[3 % NS], r[2 % NS]), M);
                double bm = red_small(fma(-sr, r[3 % NS], r[2 % NS]), M);
                res[0] = red_small(fma(sr, bp, ap), M);
                res[1 % PL] = red_small(fma(-sr, bp, ap), M);
                res[2 % PL] = red_small(fma(sr, bm, am), M);
                res[3 % PL] = red_small(fma(-sr, bm, am), M);
            }
#pragma unroll
            for (int p = 0; p < PL; p++)
                o[(long long)(PL * l + p) * plane_stride + e] = (signed char)low_word(res[p]);
        }
    }
}

/* One modulus's planes when no entry of the warp is huge.  The 2M planes X+- = (Xr +- sr Xi)
 * mod m come from one reduction each: Xr = a 2^49 + b and Xi = a' 2^49 + h 2^25 + l give
 * Xr + sr Xi = a c49 + b + a' (sr c49) + h (sr c25) + l sr (c: powers of 2 mod m, every
 * factor symmetric), each product and sum exact (|.| < 2^50), where reducing Xr and Xi
 * first took two more reductions. */
template <int KIND, int NS, bool ODD>
__device__ __forceinline__ void residue_planes_of(const split49 (&sp)[NS][4], const double (&h)[4],
                                                  const double (&lo)[4], const ozmod &M, const double3 &c,
                                                  signed char *o, long long plane_stride)
{
    constexpr int PL = KIND == 0 ? 1 : KIND == 1 ? 2 : KIND == 2 ? 3 : 4;
    const double sr = c.x;
    unsigned w[PL][4]; /* each residue's byte as soon as it is known: one register, not two */
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const double r = fma(sp[0][e].a, M.c49, sp[0][e].b); /* = Xr mod m, unreduced */
        if constexpr (KIND == 0) {
            w[0][e] = low_word(red_mod<ODD>(r, M));
        } else if constexpr (KIND == 1) {
            const double i = fma(sp[1][e].a, c.y, fma(h[e], c.z, lo[e] * sr));
            w[0][e] = low_word(red_mod<ODD>(r + i, M));
            w[1 % PL][e] = low_word(red_mod<ODD>(r - i, M));
        } else {
            const double r_0 = red_mod<ODD>(r, M);
            const double r_1 = red_mod<ODD>(fma(sp[1][e].a, M.c49, sp[1][e].b), M);
            if constexpr (KIND == 2) {
                w[0][e] = low_word(r_0);
                w[1 % PL][e] = low_word(r_1);
                w[2 % PL][e] = low_word(red_small(r_0 + r_1, M));
            } else {
                const double r_2 = red_mod<ODD>(fma(sp[2 % NS][e].a, M.c49, sp[2 % NS][e].b), M);
                const double r_3 = red_mod<ODD>(fma(sp[3 % NS][e].a, M.c49, sp[3 % NS][e].b), M);
                double ap = red_small(fma(sr, r_1, r_0), M), am = red_small(fma(-sr, r_1, r_0), M);
                double bp = red_small(fma(sr, r_3, r_2), M), bm = red_small(fma(-sr, r_3, r_2), M);
                w[0][e] = low_word(red_small(fma(sr, bp, ap), M));
                w[1 % PL][e] = low_word(red_small(fma(-sr, bp, ap), M));
                w[2 % PL][e] = low_word(red_small(fma(sr, bm, am), M));
                w[3 % PL][e] = low_word(red_small(fma(-sr, bm, am), M));
            }
        }
    }
#pragma unroll
    for (int p = 0; p < PL; p++)
        *(int *)(o + (long long)p * plane_stride) = pack_words(w[p]);
}

/* Every modulus's planes of one thread's 4 x NS entries when no entry of its warp is huge. */
template <int KIND, int NS>
__device__ __forceinline__ void fast_planes(const split49 (&sp)[NS][4], const ozmod *smod, const double3 *sroot,
                                            int nmod, signed char *o, long long plane_stride)
{
    constexpr int PL = KIND == 0 ? 1 : KIND == 1 ? 2 : KIND == 2 ? 3 : 4;
    double h[4], lo[4]; /* Xi's low part b = h 2^25 + lo, |h| <= 2^23, |lo| <= 2^24 (2M) */
#pragma unroll
    for (int e = 0; e < 4; e++) {
        h[e] = KIND == 1 ? rnd(sp[1 % NS][e].b * 0x1p-25) : 0.0;
        lo[e] = KIND == 1 ? fma(-h[e], 0x1p25, sp[1 % NS][e].b) : 0.0;
    }
    for (int l = 0; l < nmod; l++) {
        const ozmod M = smod[l];
        signed char *ol = o + (long long)(PL * l) * plane_stride;
        if (M.bias == 0.0) /* odd modulus (a uniform branch) */
            residue_planes_of<KIND, NS, true>(sp, h, lo, M, sroot[l], ol, plane_stride);
        else
            residue_planes_of<KIND, NS, false>(sp, h, lo, M, sroot[l], ol, plane_stride);
    }
}

/* a mod m as its symmetric representative, |.| <= m/2 */
__device__ __forceinline__ double sym_mod(long long a, long long m)
{
    long long v = ((a % m) + m) % m;
    return (double)(2 * v > m ? v - m : v);
}

/*
 * Residues.  KIND 0 real (1 source, 1 plane per modulus), 1 2M (re, im: X+ and
 * X-), 2 3M (re, im: re, im, re+im), 3 split2M (P re, P im, Q re, Q im: the
 * split of X+ and of X-, 4 planes).  Grid: (ceil(tiles_x / OZ_RES_TILES), rows_pad/32),
 * 256 threads; a block takes OZ_RES_TILES consecutive 32 x 32 tiles of one tile row,
 * the next tile's copy in flight while this one is reduced (two buffers; one when the
 * tile of four float64 sources would not fit twice).  Planes of modulus l start at
 * out + (PL*l + p)*plane_stride.
 */
template <typename T, int KIND>
__device__ void residues(long long rows, long long cols, const T *s0, const T *s1, const T *s2, const T *s3,
                         long long rs, long long cs, const int *shift, int conj, int nmod, const double *mods,
                         const double *roots, signed char *out, long long plane_stride, long long ld,
                         long long tiles_x)
{
    constexpr int NS = KIND == 0 ? 1 : KIND == 3 ? 4 : 2;
    constexpr int PL = KIND == 0 ? 1 : KIND == 1 ? 2 : KIND == 2 ? 3 : 4;
    constexpr int NB = NS * sizeof(T) <= 16 ? 2 : 1;
    __shared__ T raw[NB][NS][TILE][TILE + 1];
    __shared__ ozmod smod[OZ_MAX_MOD];
    __shared__ double3 sroot[OZ_MAX_MOD]; /* sr, sr 2^49 mod m, sr 2^25 mod m (symmetric) */
    const T *src[4] = {s0, s1, s2, s3};
    for (int l = threadIdx.x; l < nmod; l += blockDim.x) {
        smod[l] = ozmod{mods[4 * l], mods[4 * l + 1], mods[4 * l + 2], mods[4 * l + 3]};
        const long long m = (long long)mods[4 * l], sr = roots ? (long long)roots[l] : 0;
        sroot[l] = make_double3(sym_mod(sr, m), sym_mod(sr * (long long)mods[4 * l + 3], m),
                                sym_mod(sr * pow2mod(25, m), m));
    }
    const bool by_rows = (rs == 1) || (cs != 1 && rs < cs); /* contiguous along rows */
    const long long r0 = (long long)blockIdx.y * TILE, tx0 = (long long)blockIdx.x * OZ_RES_TILES;
    const int ntile = (int)(tiles_x - tx0 < OZ_RES_TILES ? tiles_x - tx0 : OZ_RES_TILES);
    const int conj_mask = conj ? (KIND == 3 ? 0xA : 0x2) : 0;
    const int r = threadIdx.x / 8, q = threadIdx.x % 8; /* this thread: row r, columns 4q .. 4q+3 */
    const long long gr = r0 + r;
    const int sh = gr < rows ? shift[gr] : OZ_DEAD;
    fetch_tile<T, NS>(raw[0], src, rows, cols, rs, cs, r0, tx0 * TILE, by_rows);
    emublas_cp_async_commit();
    for (int u = 0; u < ntile; u++) {
        const long long c0 = (tx0 + u) * TILE;
        emublas_cp_async_wait<0>();
        __syncthreads(); /* tile u has landed for every thread; tile u - 1 is read */
        /* the thread's entries, scaled (and conjugated): read again on the rare huge path, so
         * that they need no registers across the moduli */
        auto entries = [&](double (&y)[NS][4]) {
#pragma unroll
            for (int s_ = 0; s_ < NS; s_++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int c = 4 * q + e;
                    const T x = by_rows ? raw[u % NB][s_][c][r] : raw[u % NB][s_][r][c];
                    const double v = trunc_scaled(sh != OZ_DEAD ? emublas_f2d(x) : 0.0, sh);
                    y[s_][e] = ((conj_mask >> s_) & 1) ? -v : v;
                }
        };
        split49 sp[NS][4];
        bool huge = false;
        {
            double y[NS][4];
            entries(y);
#pragma unroll
            for (int s_ = 0; s_ < NS; s_++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    sp[s_][e] = split_of(y[s_][e]);
                    huge |= sp[s_][e].huge;
                }
        }
        /* the next tile's copy, in flight while this one is reduced (with one buffer, after) */
        if (NB == 2 && u + 1 < ntile)
            fetch_tile<T, NS>(raw[(u + 1) % NB], src, rows, cols, rs, cs, r0, c0 + TILE, by_rows);
        if (NB == 2)
            emublas_cp_async_commit();
        signed char *o = out + gr * ld + c0 + 4 * q;
        if (__any_sync(0xffffffffu, huge)) {
            double y[NS][4];
            entries(y);
            residue_planes_huge<KIND, NS>(y, smod, sroot, nmod, o, plane_stride);
        } else {
            fast_planes<KIND, NS>(sp, smod, sroot, nmod, o, plane_stride);
        }
        if (NB == 1) {
            __syncthreads(); /* the one buffer is read before the next copy overwrites it */
            if (u + 1 < ntile)
                fetch_tile<T, NS>(raw[0], src, rows, cols, rs, cs, r0, c0 + TILE, by_rows);
            emublas_cp_async_commit();
        }
    }
}

#define OZ_RES(NAME, T, KIND)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256, KIND == 0 ? 3 : KIND == 3 ? 1 : 2) NAME(                                  \
        long long rows, long long cols, const T *s0, const T *s1, const T *s2, const T *s3, long long rs,       \
        long long cs, const int *shift, int conj, int nmod, const double *mods, const double *roots,            \
        signed char *out, long long plane_stride, long long ld, long long tiles_x)                              \
    {                                                                                                           \
        residues<T, KIND>(rows, cols, s0, s1, s2, s3, rs, cs, shift, conj, nmod, mods, roots, out,             \
                          plane_stride, ld, tiles_x);                                                           \
    }

OZ_RES(oz_res_real_f32, float, 0)
OZ_RES(oz_res_real_f64, double, 0)
OZ_RES(oz_res_2m_f32, float, 1)
OZ_RES(oz_res_2m_f64, double, 1)
OZ_RES(oz_res_3m_f32, float, 2)
OZ_RES(oz_res_3m_f64, double, 2)
OZ_RES(oz_res_split2m_f32, float, 3)
OZ_RES(oz_res_split2m_f64, double, 3)

/* ---- scaling: row statistics and the 7-bit bound matrix -------------------- */

template <typename T>
__device__ __forceinline__ double mag_of(const T *xr, const T *xi, long long off)
{
    double re = emublas_f2d(xr[off]);
    if (!xi)
        return fabs(re);
    double im = emublas_f2d(xi[off]);
    double s = re * re + im * im;
    return s > 0x1p-1000 && s < 0x1p1000 ? sqrt(s) : hypot(re, im);
}

/*
 * One block per 32 rows: 256 threads as 32 row lanes x 8 column lanes when
 * by_rows (rows contiguous), else 8 rows x 32 column lanes; each lane walks its
 * columns, then the lanes of a row are combined through shared memory.
 * rowmax is NaN for a row holding NaN or Inf.
 */
template <typename T>
__device__ void row_stats(long long rows, long long cols, const T *xr, const T *xi, long long rs, long long cs,
                          int by_rows, double *rowmax, double *sumsq, double *l1)
{
    __shared__ double smax[256], ssq[256], sl1[256];
    __shared__ int sbad[256];
    const int t = threadIdx.x;
    const int r = by_rows ? t % 32 : t / 32;      /* 0..31 or 0..7 */
    const int lane = by_rows ? t / 32 : t % 32;   /* column lane */
    const int nrow = by_rows ? 32 : 8, nlane = by_rows ? 8 : 32;
    const long long gr = (long long)blockIdx.x * nrow + r;
    double mx = 0.0, s2 = 0.0, s1 = 0.0;
    int bad = 0;
    if (gr < rows)
        for (long long c = lane; c < cols; c += nlane) {
            double v = mag_of(xr, xi, gr * rs + c * cs);
            bad |= !(v <= 1.7976931348623157e308);
            mx = v > mx ? v : mx;
            s2 += v * v;
            s1 += v;
        }
    smax[t] = mx;
    ssq[t] = s2;
    sl1[t] = s1;
    sbad[t] = bad;
    __syncthreads();
    if (lane == 0 && gr < rows) {
        for (int j = 1; j < nlane; j++) {
            int u = by_rows ? r + 32 * j : r * 32 + j;
            mx = smax[u] > mx ? smax[u] : mx;
            s2 += ssq[u];
            s1 += sl1[u];
            bad |= sbad[u];
        }
        rowmax[gr] = bad ? __longlong_as_double(0x7ff8000000000000LL) : mx;
        sumsq[gr] = s2;
        l1[gr] = s1;
    }
}

extern "C" __global__ void __launch_bounds__(256) oz_stats_f32(long long rows, long long cols, const float *xr,
                                                              const float *xi, long long rs, long long cs,
                                                              int by_rows, double *rowmax, double *sumsq,
                                                              double *l1)
{
    row_stats<float>(rows, cols, xr, xi, rs, cs, by_rows, rowmax, sumsq, l1);
}

extern "C" __global__ void __launch_bounds__(256) oz_stats_f64(long long rows, long long cols, const double *xr,
                                                              const double *xi, long long rs, long long cs,
                                                              int by_rows, double *rowmax, double *sumsq,
                                                              double *l1)
{
    row_stats<double>(rows, cols, xr, xi, rs, cs, by_rows, rowmax, sumsq, l1);
}

/* ceil(127 |x| 2^-ea) (two steps for rows of subnormal magnitude), padded
 * k-contiguous int8 like the residue planes.  Grid as for the residues. */
template <typename T>
__device__ void bound_int8(long long rows, long long cols, const T *xr, const T *xi, long long rs, long long cs,
                           const double *rowmax, signed char *out, long long ld)
{
    const long long r0 = (long long)blockIdx.y * TILE, c0 = (long long)blockIdx.x * TILE;
    const int r = threadIdx.x / 8, q = threadIdx.x % 8;
    const long long gr = r0 + r;
    double w[4];
    /* ea from the row's maximum (frexp, as the host computes it); a row with NaN/Inf is all zero */
    const double rm = gr < rows ? rowmax[gr] : 0.0;
    const bool live = rm <= 1.7976931348623157e308;
    int e = 0;
    frexp(live ? rm : 0.0, &e);
    double f = e < -1000 ? 0.0 : ldexp(127.0, -e);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long gc = c0 + 4 * q + k;
        double v = (live && gr < rows && gc < cols) ? mag_of(xr, xi, gr * rs + gc * cs) : 0.0;
        w[k] = ceil(e < -1000 ? ldexp(v, -e) * 127.0 : v * f);
        if (v > 0)
            w[k] = fmax(w[k], 1.0); /* as the C bound_of: nonzero entries bound by at least 1 */
    }
    *(int *)(out + gr * ld + c0 + 4 * q) = pack4(w[0], w[1], w[2], w[3]);
}

extern "C" __global__ void __launch_bounds__(256) oz_bound_f32(long long rows, long long cols, const float *xr,
                                                              const float *xi, long long rs, long long cs,
                                                              const double *rowmax, signed char *out, long long ld)
{
    bound_int8<float>(rows, cols, xr, xi, rs, cs, rowmax, out, ld);
}

extern "C" __global__ void __launch_bounds__(256) oz_bound_f64(long long rows, long long cols, const double *xr,
                                                              const double *xi, long long rs, long long cs,
                                                              const double *rowmax, signed char *out, long long ld)
{
    bound_int8<double>(rows, cols, xr, xi, rs, cs, rowmax, out, ld);
}

/*
 * The plan of each row of a factor, on the device so that no call waits for the host:
 * from max|x| (NaN for a row with NaN/Inf), sum|x|^2, sum|x| and, in accurate mode, the
 * bound product's row maxima wmax, with L the log2 bound of the product:
 *   ea = frexp exponent of max|x| (0 for a zero row),
 *   g  = log2(wmax) - log2_127sq + safety (accurate) or (log2(sumsq) - 2 ea) + safety
 *        (fast; log2(k) + safety where the sum over/underflowed), -inf for a zero row,
 *   u  = floor((L - g) / 2) (0 where not finite), shift = u - ea,
 *   err = (shift + lg) + slack with lg = log2(sum|x|) (ea + log2 k where it overflowed),
 *   wsum = (127 ldexp(sum|x|, -ea)) (1 + 2^-40) + k + 1 (127 k + k + 1 where it overflowed),
 *   budget = u;
 * a row with NaN/Inf gets shift OZ_DEAD and err = +inf.  emublas/ozaki2/scaling.py
 * (row_plan) computes the same on the host, in the same order.
 */
extern "C" __global__ void __launch_bounds__(256) oz_plan(long long rows, const double *rowmax, const double *sumsq,
                                                         const double *l1, const long long *wmax, double L,
                                                         double log2_127sq, double safety, double log2k,
                                                         double kd, double slack, int *shift, double *err,
                                                         double *wsum, int *budget)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    const double inf = __longlong_as_double(0x7ff0000000000000LL), big = 1.7976931348623157e308;
    const double rm = rowmax[i];
    if (!(rm <= big)) {
        shift[i] = OZ_DEAD;
        err[i] = inf;
        wsum[i] = 0.0;
        budget[i] = 0;
        return;
    }
    int ea = 0;
    frexp(rm, &ea);
    double g;
    if (rm == 0.0)
        g = -inf;
    else if (wmax)
        g = wmax[i] > 0 ? (log2((double)wmax[i]) - log2_127sq) + safety : -inf;
    else {
        const double s = sumsq[i];
        g = s > 0.0 && s <= big ? (log2(s) - 2.0 * (double)ea) + safety : log2k + safety;
    }
    const double uu = floor((L - g) * 0.5);
    const long long u = uu <= big && uu >= -big ? (long long)uu : 0;
    const double s1 = l1[i];
    const bool ok1 = s1 <= big;
    const double lg = rm == 0.0 ? -inf : ok1 ? log2(s1) : (double)ea + log2k;
    shift[i] = (int)(u - ea);
    err[i] = ((double)(u - ea) + lg) + slack;
    wsum[i] = ok1 ? (127.0 * ldexp(s1, -ea)) * (1.0 + 0x1p-40) + kd + 1.0 : (127.0 * kd + kd) + 1.0;
    budget[i] = (int)u;
}

/* ---- products -> CRT terms ---------------------------------------------------
 *
 * For the output block rows [0, rows) x cols [0, cols) (global row r0 + i,
 * column j0 + j), each term t of the modulus writes
 *     T_t[i, j] = (w1 X1 + w2 X2) mod m   (symmetric, exact, as int8)
 * where X = P_src[i, j] or, transposed, P_src[j, i] (square blocks only, r0 ==
 * j0).  spec: nterms rows of {src1, tr1, w1, src2 (-1: none), tr2, w2}.
 * Tiles entirely outside the uplo triangle are skipped.  Grid (ceil(rows/32),
 * ceil(cols/32)), 256 threads.
 */
extern "C" __global__ void __launch_bounds__(256) oz_terms(
    long long rows, long long cols, long long r0, long long j0, const int *p0, const int *p1, const int *p2,
    const int *p3, long long ldp, const int *spec, int nterms, double m, double inv, double bias,
    signed char *out, long long plane_stride, long long ldt, int uplo)
{
    __shared__ int trn[4][TILE][TILE + 1];
    __shared__ int sspec[4 * 6];
    /* P(s) by selects: an array indexed at run time would live in local memory */
    auto P = [&](int s_) { return s_ == 0 ? p0 : s_ == 1 ? p1 : s_ == 2 ? p2 : p3; };
    const long long i0 = (long long)blockIdx.x * TILE, jt0 = (long long)blockIdx.y * TILE;
    /* skip tiles with no entry in the triangle (global indices) */
    if (uplo == 1 && r0 + i0 > j0 + jt0 + TILE - 1)
        return;
    if (uplo == 2 && r0 + i0 + TILE - 1 < j0 + jt0)
        return;
    for (int u = threadIdx.x; u < 6 * nterms; u += blockDim.x)
        sspec[u] = spec[u];
    __syncthreads();
    int need = 0;
    for (int t = 0; t < nterms; t++) {
        if (sspec[6 * t + 1])
            need |= 1 << sspec[6 * t];
        if (sspec[6 * t + 3] >= 0 && sspec[6 * t + 4])
            need |= 1 << sspec[6 * t + 3];
    }
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    for (int s = 0; s < 4; s++) {
        if (!((need >> s) & 1))
            continue;
        /* trn[s][i][j] = P_s[j, i]: P_s(row jt0+j... read along its contiguous rows */
        for (int yy = ty; yy < TILE; yy += 8) {
            long long pi = i0 + yy, pj = jt0 + tx; /* element P_s[pj, pi] at pi*ldp + pj */
            trn[s][yy][tx] = (pi < rows && pj < cols) ? P(s)[pi * ldp + pj] : 0;
        }
    }
    __syncthreads();
    const ozmod M = {m, inv, bias, 0.0};
    for (int yy = ty; yy < TILE; yy += 8) {
        long long i = i0 + tx, j = jt0 + yy;
        if (i >= rows || j >= cols)
            continue;
        for (int t = 0; t < nterms; t++) {
            const int *sp = sspec + 6 * t;
            double x1 = sp[1] ? (double)trn[sp[0]][tx][yy] : (double)P(sp[0])[j * ldp + i];
            double x2 = 0.0;
            if (sp[3] >= 0)
                x2 = sp[4] ? (double)trn[sp[3]][tx][yy] : (double)P(sp[3])[j * ldp + i];
            double v = fma((double)sp[2], x1, (double)sp[5] * x2); /* exact: |v| < 2^49 */
            out[(long long)t * plane_stride + j * ldt + i] = (signed char)(int)red_small(v, M);
        }
    }
}

/* The same without transposed sources: 4 consecutive rows per thread (int4
 * loads, char4 stores; ldp and ldt multiples of 4).  Grid (ceil(ldp/4 / 256),
 * min(cols, 65535)): no 64-bit division per thread, columns looped past the
 * grid's y limit. */
extern "C" __global__ void __launch_bounds__(256) oz_terms_direct(
    long long quads, long long cols, const int *p0, const int *p1, const int *p2, const int *p3, long long ldp,
    const int *spec, int nterms, double m, double inv, double bias, signed char *out, long long plane_stride,
    long long ldt)
{
    const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= quads)
        return;
    const ozmod M = {m, inv, bias, 0.0};
    const int *P[4] = {p0, p1, p2, p3};
    for (long long j = blockIdx.y; j < cols; j += gridDim.y) {
        int4 v[4];
#pragma unroll
        for (int s = 0; s < 4; s++)
            if (P[s])
                v[s] = *(const int4 *)(P[s] + j * ldp + 4 * q);
        for (int t = 0; t < nterms; t++) {
            const int s1 = spec[6 * t], s2 = spec[6 * t + 3];
            const double w1 = spec[6 * t + 2], w2 = spec[6 * t + 5];
            int4 a = v[0], b = make_int4(0, 0, 0, 0);
#pragma unroll
            for (int s = 1; s < 4; s++) {
                if (s1 == s)
                    a = v[s];
                if (s2 == s)
                    b = v[s];
            }
            if (s2 == 0)
                b = v[0];
            double r0 = red_small(fma(w1, (double)a.x, w2 * (double)b.x), M);
            double r1 = red_small(fma(w1, (double)a.y, w2 * (double)b.y), M);
            double r2 = red_small(fma(w1, (double)a.z, w2 * (double)b.z), M);
            double r3 = red_small(fma(w1, (double)a.w, w2 * (double)b.w), M);
            *(int *)(out + (long long)t * plane_stride + j * ldt + 4 * q) = pack4(r0, r1, r2, r3);
        }
    }
}

/* Row and column maxima of the bound product W (accurate mode's scaling): w holds nb
 * columns of W, column j at j*ld, entries i < rows; rowmax[i] and colmax[j] are the
 * maxima over them, merged by atomicMax (W >= 0, both start at 0), so that blocks may
 * come in any order.  Coalesced along i, 64 columns per thread; a column's maximum over
 * the block's 256 rows by a warp butterfly, then across the warps in shared memory: one
 * atomic per column and block.  Grid (ceil(rows/256), ceil(nb/64)). */
extern "C" __global__ void __launch_bounds__(256) oz_wmax(long long rows, long long nb, const int *w, long long ld,
                                                          unsigned long long *rowmax, unsigned long long *colmax)
{
    __shared__ int swarp[8][64];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = i < rows;
    const long long j0 = (long long)blockIdx.y * 64;
    const int nj = (int)(nb - j0 < 64 ? nb - j0 : 64);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int mx = 0;
    for (int u = 0; u < nj; u++) {
        int v = live ? w[(j0 + u) * ld + i] : 0;
        mx = max(mx, v);
#pragma unroll
        for (int d = 16; d > 0; d /= 2)
            v = max(v, __shfl_xor_sync(0xffffffffu, v, d));
        if (lane == 0)
            swarp[warp][u] = v;
    }
    if (live && mx > 0)
        atomicMax(rowmax + i, (unsigned long long)mx);
    __syncthreads();
    if (threadIdx.x < nj) {
        int c = 0;
#pragma unroll
        for (int q = 0; q < 8; q++)
            c = max(c, swarp[q][threadIdx.x]);
        if (c > 0)
            atomicMax(colmax + j0 + threadIdx.x, (unsigned long long)c);
    }
}

/* ---- the per-entry accuracy certificate (see emublas_cpu.h, emublas_oz_cert) ----
 * The same tests in the same order as the C finalize, so that both certify
 * (and recompute) the same entries and stay bit-identical.
 */
#define OZ_NEG_INF (__longlong_as_double((long long)0xfff0000000000000ULL))
#define OZ_FIX_SPARSE EMUBLAS_OZ_FIX_SPARSE

struct oz_cert {
    const double *row_err, *col_err;
    double crt_err, target;
    const int *W;
    long long ldw;
    const double *row_wsum, *col_wsum;
    const int *row_budget, *col_budget;
    int fix, dtype; /* factors: 0 float32, 1 float64 */
    const void *Lr, *Li, *Rr, *Ri;
    long long rsl, csl, rsr, csr, k;
    int conj_l, conj_r;
    unsigned long long *uncertified;
    /* with fix: the entries to recompute are flagged here (block-local i + j*ldm) and
     * counted per 32 x 32 tile (ti + tj*ntr), up to OZ_FIX_SPARSE + 1; the fix passes
     * recompute them afterwards (oz_fix_tiles, oz_fix_collect, oz_fix_entries) */
    unsigned char *mask;
    int *tiles;
    long long ldm, ntr;
};

__device__ __forceinline__ int floor_log2(double a) /* a > 0, finite */
{
    int e;
    frexp(a, &e);
    return e - 1;
}

/* inlined: a call would need the final pass's certificate in local memory, written by
 * every thread (two hundred bytes each, more than the output itself) */
__device__ __forceinline__ bool cert_ok(const oz_cert &C, long long i, long long j, double cr, double ci)
{
    const double re = C.row_err[i], ce = C.col_err[j];
    if (re == OZ_NEG_INF || ce == OZ_NEG_INF)
        return true;
    if (C.W && C.W[i + j * C.ldw] == 0)
        return true; /* no l with x_il y_jl != 0: an exact zero */
    const double E = fmax(fmax(re, ce), C.crt_err);
    double B = OZ_NEG_INF;
    const double a = fmax(fabs(cr), fabs(ci));
    if (a > 0) {
        const double g = (double)(floor_log2(a) - 1);
        if (g >= E)
            B = g;
    }
    if (C.W) {
        const double d = (double)C.W[i + j * C.ldw] - C.row_wsum[i] - C.col_wsum[j];
        if (d > 0)
            B = fmax(B, ((double)C.row_budget[i] + (double)C.col_budget[j]) + (double)(floor_log2(d) - 14));
    }
    return E <= __dadd_rn(C.target, B);
}

__device__ __forceinline__ double cert_load(int dtype, const void *p, long long off)
{
    return dtype ? ((const double *)p)[off] : emublas_f2d(((const float *)p)[off]);
}

/* As the C finalize's cert_dot: rows scaled by 2^si, 2^sj so that the product is in C' units. */
__device__ void cert_dot(const oz_cert &C, long long i, long long j, int si, int sj, double &vr, double &vi)
{
    double sr = 0.0, si_ = 0.0;
    for (long long l = 0; l < C.k; l++) {
        const long long ol = i * C.rsl + l * C.csl, orr = j * C.rsr + l * C.csr;
        const double xr = ldexp(cert_load(C.dtype, C.Lr, ol), si), yr = ldexp(cert_load(C.dtype, C.Rr, orr), sj);
        if (!C.Li) {
            sr = fma(xr, yr, sr);
            continue;
        }
        double xi = ldexp(cert_load(C.dtype, C.Li, ol), si), yi = ldexp(cert_load(C.dtype, C.Ri, orr), sj);
        if (C.conj_l)
            xi = -xi;
        if (C.conj_r)
            yi = -yi;
        sr = fma(xr, yr, sr);
        sr = fma(-xi, yi, sr);
        si_ = fma(xr, yi, si_);
        si_ = fma(xi, yr, si_);
    }
    vr = sr;
    vi = si_;
}

/* ---- CRT finalize ------------------------------------------------------------
 *
 * Entry (i, j) of the block (global r0 + i, j0 + j; only the uplo triangle):
 * the exact three-piece sums of t*w[t] over the nterms term planes (part[t]:
 * 0 real, 1 imaginary; the order does not matter, every fma is exact), the
 * symmetric representative modulo P, scaled by 2^-(row_shift + col_shift),
 * then out = alpha v + beta out
 * (beta0: out not read) rounded once to out's type (0 f32, 1 f64, 2 c64,
 * 3 c128; strides in elements of that type, out at the global origin).
 */
/* the finalize's constants (emublas_oz_crt in emublas_cpu.h) */
struct oz_crtk {
    double P1, P2, P3, Pinv, u1, iu1, u2, iu2;
};

/* one term into the three exact sums: every fma is exact (its result is representable) */
__device__ __forceinline__ void acc3(double t, const double3 &b, double *s)
{
    s[0] = fma(t, b.x, s[0]);
    s[1] = fma(t, b.y, s[1]);
    s[2] = fma(t, b.z, s[2]);
}

/* The symmetric representative of the three sums, rounded to double: the C finalize's
 * crt_rep, operation for operation. */
__device__ __forceinline__ double crt_value(const double *p, const oz_crtk &K)
{
    double s1 = p[0], s2 = p[1], s3 = p[2];
    double c = rnd(s3 * K.iu2) * K.u2;
    s2 = s2 + c;
    s3 = s3 - c;
    c = rnd(s2 * K.iu1) * K.u1;
    s1 = s1 + c;
    s2 = s2 - c;
    const double Q = rnd(s1 * K.Pinv);
    const double d1 = fma(-Q, K.P1, s1), d2 = fma(-Q, K.P2, s2), d3 = fma(-Q, K.P3, s3);
    const double t = d1 + d2, z = t - d1;
    const double e = (d1 - (t - z)) + (d2 - z);
    return t + (e + d3);
}

/* out = alpha v + beta out with v = (vr + i vi) 2^ee, alpha times the integer first and the
 * power of two last (the C finalize's fin_combine), rounded once to out's type. */
__device__ __forceinline__ void store_entry(double vr, double vi, int ee, double ar, double ai, double br,
                                            double bi, int beta0, int dtype, void *out, long long off)
{
    if (dtype < 2) {
        double c = 0.0;
        if (!beta0)
            c = dtype == 0 ? emublas_f2d(((const float *)out)[off]) : ((const double *)out)[off];
        const double x = ldexp(ar * vr, ee);
        double re = beta0 ? x : x + br * c;
        if (dtype == 0)
            ((float *)out)[off] = emublas_d2f(re);
        else
            ((double *)out)[off] = re;
        return;
    }
    double cr = 0.0, ci = 0.0;
    if (!beta0) {
        if (dtype == 2) {
            cr = emublas_f2d(((const float *)out)[2 * off]);
            ci = emublas_f2d(((const float *)out)[2 * off + 1]);
        } else {
            cr = ((const double *)out)[2 * off];
            ci = ((const double *)out)[2 * off + 1];
        }
    }
    double xr = ldexp(ar * vr - ai * vi, ee), xi = ldexp(ar * vi + ai * vr, ee);
    const bool one = br == 1.0 && bi == 0.0; /* beta = 1 adds c, as native BLAS: no inf*0 */
    double re = beta0 ? xr : xr + (one ? cr : br * cr - bi * ci);
    double im = beta0 ? xi : xi + (one ? ci : br * ci + bi * cr);
    if (dtype == 2) {
        ((float *)out)[2 * off] = emublas_d2f(re);
        ((float *)out)[2 * off + 1] = emublas_d2f(im);
    } else {
        ((double *)out)[2 * off] = re;
        ((double *)out)[2 * off + 1] = im;
    }
}

__device__ __forceinline__ int unscale_exp(int rsh, int csh)
{
    long long e = -((long long)rsh + (long long)csh);
    return e > 4000 ? 4000 : e < -4000 ? -4000 : (int)e;
}

__device__ __forceinline__ bool is_dead(const oz_cert &C, long long gi, long long gj)
{
    const double inf = __longlong_as_double(0x7ff0000000000000LL);
    return C.row_err[gi] == inf || C.col_err[gj] == inf; /* NaN/Inf in the row or column: native's pattern */
}

/* The entry recomputed as the C finalize's cert_fail does, given its float64 dot product
 * (r, q) of the data: (r, q) itself, or where that overflows (a live entry) the dot
 * product in C' units with the row and column shifts. */
__device__ __forceinline__ void fallback_entry(const oz_cert &C, long long gi, long long gj, int rsh, int csh,
                                               double r, double q, double &vr, double &vi, int &ee)
{
    if (!is_dead(C, gi, gj) && !(fabs(r) <= 1.7976931348623157e308 && fabs(q) <= 1.7976931348623157e308)) {
        cert_dot(C, gi, gj, rsh, csh, vr, vi);
        ee = unscale_exp(rsh, csh);
    } else {
        vr = r;
        vi = q;
        ee = 0;
    }
}

__device__ __forceinline__ void final_entry(const double *re, const double *im, const oz_crtk &K, int rsh,
                                            int csh, double ar, double ai, double br,
                                            double bi, int beta0, int dtype, void *out, long long off,
                                            const oz_cert &C, bool certify, long long gi, long long gj, long long li,
                                            long long lj)
{
    int ee = unscale_exp(rsh, csh);
    /* v = (vr + i vi) 2^ee; alpha multiplies the integer first, the power of two comes last */
    double vr = crt_value(re, K);
    double vi = dtype >= 2 ? crt_value(im, K) : 0.0;
    if (certify) {
        const bool dead = is_dead(C, gi, gj);
        bool redo = dead;
        if (!dead && !cert_ok(C, gi, gj, vr, vi)) {
            atomicAdd(C.uncertified, 1ULL);
            redo = C.fix;
        }
        if (redo) { /* left to the fix passes, which read out's c and write the entry */
            C.mask[li + lj * C.ldm] = 1;
            int *t = &C.tiles[li / 32 + (lj / 32) * C.ntr];
            if (*t <= OZ_FIX_SPARSE) /* past the limit the count no longer matters */
                atomicAdd(t, 1);
            return;
        }
    }
    store_entry(vr, vi, ee, ar, ai, br, bi, beta0, dtype, out, off);
}

#define OZ_MAX_TERMS EMUBLAS_OZ_MAX_TERMS

/* Where the final pass reads term t of an entry.  Unfused: byte (i, j) of int8 term
 * plane t.  Fused (products resident, no transposed reads): the int32 products the
 * term combines, reduced here exactly as oz_terms_direct would have reduced them,
 * (w1 X1 + w2 X2) mod m, so that both give the same term values, bit for bit.
 * spec[t] = {product 1, product 2 (-1: none), w1 + 2^16 w2, modulus}; the products
 * are planes of prod_stride ints, column j at j * ldp. */
struct term_src {
    const signed char *terms;
    long long plane_stride, ldt;
    const int *prods;
    long long prod_stride, ldp;
    const int4 *spec;
    const double *mods; /* per modulus {m, inv, bias} */
    int nmod;
};

/* the fused pass's term table in shared memory (a block-uniform read per term), for up
 * to MT terms */
#define OZ_FUSED_MAX_TERMS EMUBLAS_OZ_FUSED_MAX_TERMS
template <bool FUSED, int MT = OZ_MAX_TERMS> struct term_smem {
    __device__ void load(const term_src &, int, const double *) {}
};
template <int MT> struct term_smem<true, MT> {
    int4 spec[MT];
    ozmod mod[OZ_MAX_MOD];
    __device__ void load(const term_src &S, int nterms)
    {
        for (int u = threadIdx.x; u < nterms; u += blockDim.x)
            spec[u] = S.spec[u];
        for (int u = threadIdx.x; u < S.nmod; u += blockDim.x)
            mod[u] = ozmod{S.mods[3 * u], S.mods[3 * u + 1], S.mods[3 * u + 2], 0.0};
    }
};

/* (double)x of an int32 as one DADD (the low word of 2^52 + 2^31 + x): exact, like the
 * conversion instruction, which runs at a quarter of the FP64 rate. */
__device__ __forceinline__ double i2d(int x)
{
    return __hiloint2double(0x43300000, x ^ (int)0x80000000) - 4503601774854144.0; /* 2^52 + 2^31 */
}

/* What term t of the fused pass needs besides its values (block-uniform): the element
 * offsets of its products (off2 < 0: none), their weights, its modulus and its CRT
 * weight's three pieces. */
struct fused_term {
    long long off1, off2;
    double w1, w2;
    ozmod M;
    double3 w;
};

/* A term of the fused pass's table in shared memory, decoded once per block and laid out
 * for 16-byte reads: decoding it where it was used took as many instructions per lane as
 * its arithmetic. */
struct __align__(16) fused_rec {
    double w1, w2, m, inv, bias, wx, wy, wz;
    long long off1, off2;
};

template <int MT> struct fused_smem {
    fused_rec rec[MT];
    __device__ void load(const term_src &S, int nterms, const double *bw)
    {
        for (int u = threadIdx.x; u < nterms; u += blockDim.x) {
            const int4 sp = S.spec[u];
            const double *md = S.mods + 3 * sp.w;
            rec[u] = fused_rec{(double)(short)(sp.z & 0xffff),
                               (double)(sp.z >> 16),
                               md[0],
                               md[1],
                               md[2],
                               bw[3 * u],
                               bw[3 * u + 1],
                               bw[3 * u + 2],
                               (long long)sp.x * S.prod_stride,
                               sp.y >= 0 ? (long long)sp.y * S.prod_stride : -1};
        }
    }
};

/* the final pass's table: none for term planes, fused_smem for products */
template <bool FUSED, int MT> struct final_smem {
    using type = term_smem<false, MT>;
};
template <int MT> struct final_smem<true, MT> {
    using type = fused_smem<MT>;
};

template <int MT>
__device__ __forceinline__ fused_term fused_term_of(const term_src &, const fused_smem<MT> &sm, int t)
{
    const fused_rec &r = sm.rec[t];
    return fused_term{r.off1, r.off2, r.w1, r.w2, ozmod{r.m, r.inv, r.bias, 0.0}, make_double3(r.wx, r.wy, r.wz)};
}

/* ENT consecutive int32 at p (aligned to ENT of them): one vector load. */
template <int ENT> __device__ __forceinline__ void load_ints(const int *p, int *v)
{
    if constexpr (ENT == 8) {
        load_ints<4>(p, v);
        load_ints<4>(p + 4, v + 4);
    } else if constexpr (ENT == 4) {
        const int4 q = *(const int4 *)p;
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else if constexpr (ENT == 2) {
        const int2 q = *(const int2 *)p;
        v[0] = q.x, v[1] = q.y;
    } else {
#pragma unroll
        for (int e = 0; e < ENT; e++)
            v[e] = p[e];
    }
}

/* The lane's ENT rows of term f's products (FULL: all ENT rows exist; else the first
 * left of them, the rest read as 0). */
template <int ENT, bool TWO, bool FULL>
__device__ __forceinline__ void load_fused(const int *col, int left, const fused_term &f, int *a, int *b)
{
    if constexpr (FULL) {
        load_ints<ENT>(col + f.off1, a);
        if (TWO) {
            if (f.off2 >= 0)
                load_ints<ENT>(col + f.off2, b);
            else
#pragma unroll
                for (int e = 0; e < ENT; e++)
                    b[e] = 0;
        }
    } else {
#pragma unroll
        for (int e = 0; e < ENT; e++) {
            a[e] = e < left ? col[f.off1 + e] : 0;
            if (TWO)
                b[e] = e < left && f.off2 >= 0 ? col[f.off2 + e] : 0;
        }
    }
}

/* The ENT term values v added to the real or (imag) imaginary sums. */
template <bool CPLX, int ENT>
__device__ __forceinline__ void add_values(const double *v, const double3 &w, bool imag, double (*re)[3],
                                           double (*im)[3])
{
    if (CPLX && imag) {
#pragma unroll
        for (int e = 0; e < ENT; e++)
            acc3(v[e], w, im[e]);
    } else {
#pragma unroll
        for (int e = 0; e < ENT; e++)
            acc3(v[e], w, re[e]);
    }
}

/* Term t's values (w1 X1 + w2 X2) mod m for ENT entries, summed into the accumulators. */
template <bool CPLX, int ENT, bool TWO, int MT>
__device__ __forceinline__ void add_fused(const fused_smem<MT> &sm, const fused_term &f, const int *a, const int *b,
                                          const double3 &w, bool imag, double (*re)[3], double (*im)[3])
{
    const ozmod M = f.M;
    double v[ENT];
    if (TWO && f.off2 >= 0) {
        /* with two products the kernel is bound by issue: the conversion instruction's one
         * issue slot beats i2d's two */
#pragma unroll
        for (int e = 0; e < ENT; e++)
            v[e] = red_small(fma(f.w1, (double)a[e], f.w2 * (double)b[e]), M); /* exact: |v| < 2^49 */
    } else {
        const double z = f.w2 * 0.0; /* what w2 * X2 is for the absent X2 */
#pragma unroll
        for (int e = 0; e < ENT; e++)
            v[e] = red_small(fma(f.w1, TWO ? (double)a[e] : i2d(a[e]), z), M);
    }
    add_values<CPLX, ENT>(v, w, imag, re, im);
}

/* The fused pass's sum: term t's products are reduced to (w1 X1 + w2 X2) mod m exactly as
 * oz_terms_direct reduces them (the same values: an absent X2 reads as 0), then added as
 * the unfused pass adds its term bytes.  Two buffers in turn (even and odd terms): a term's
 * loads are issued two terms before its values are used, where one term ahead left the
 * loop waiting on memory.  TWO = false: no term has a second product (the real recipe),
 * which frees the registers of the second values. */
template <bool CPLX, int ENT, bool TWO, bool FULL, int MT>
__device__ __forceinline__ void sum_fused(const term_src &S, const fused_smem<MT> &sm, const signed char *spart,
                                          int nterms, long long j, long long i0,
                                          int left, double (*re)[3], double (*im)[3])
{
    const int *col = S.prods + j * S.ldp + i0;
    int a0[ENT], b0[ENT], a1[ENT], b1[ENT];
    /* a term's table entry is read where it is used, not held across the loop in registers */
    load_fused<ENT, TWO, FULL>(col, left, fused_term_of(S, sm, 0), a0, b0);
    if (nterms > 1)
        load_fused<ENT, TWO, FULL>(col, left, fused_term_of(S, sm, 1), a1, b1);
    for (int t = 0; t < nterms; t += 2) {
        const fused_term f0 = fused_term_of(S, sm, t);
        add_fused<CPLX, ENT, TWO>(sm, f0, a0, b0, f0.w, spart[t], re, im);
        if (t + 2 < nterms)
            load_fused<ENT, TWO, FULL>(col, left, fused_term_of(S, sm, t + 2), a0, b0);
        if (t + 1 < nterms) {
            const fused_term f1 = fused_term_of(S, sm, t + 1);
            add_fused<CPLX, ENT, TWO>(sm, f1, a1, b1, f1.w, spart[t + 1], re, im);
            if (t + 3 < nterms)
                load_fused<ENT, TWO, FULL>(col, left, fused_term_of(S, sm, t + 3), a1, b1);
        }
    }
}

/* The fused pass's sum for a lane whose ENT rows all exist, its products streamed
 * through a ring of STAGES terms in shared memory by asynchronous copies: each lane
 * copies and reads back only its own values, so no barrier is needed, and STAGES terms
 * stay in flight without the registers that held them in sum_fused (which kept two,
 * too few bytes in flight to cover the latency of the device's memory). */
template <int ENT, bool TWO> struct fused_ring {
    static constexpr int NP = TWO ? 2 : 1;                    /* products a term reads */
    static constexpr int STAGES = 24576 / (256 * NP * ENT * 4); /* 24 KiB a block */
};

template <int ENT> __device__ __forceinline__ void copy_ints(int *dst, const int *src)
{
    if constexpr (ENT == 8) {
        emublas_cp_async16(dst, src);
        emublas_cp_async16(dst + 4, src + 4);
    } else if constexpr (ENT == 4)
        emublas_cp_async16(dst, src);
    else
        emublas_cp_async<4 * ENT>(dst, src);
}

template <bool CPLX, int ENT, bool TWO, int MT>
__device__ __forceinline__ void sum_fused_async(const term_src &S, const fused_smem<MT> &sm, const signed char *spart,
                                                int nterms, long long j, long long i0,
                                                double (*re)[3], double (*im)[3])
{
    using R = fused_ring<ENT, TWO>;
    __shared__ __align__(16) int ring[R::STAGES][R::NP][256 * ENT];
    const int *col = S.prods + j * S.ldp + i0;
    const int me = threadIdx.x * ENT;
    /* term t's values into ring slot `slot`; one group per term, empty past the last */
    auto issue = [&](int t, int slot) {
        if (t < nterms) {
            const fused_term f = fused_term_of(S, sm, t);
            copy_ints<ENT>(&ring[slot][0][me], col + f.off1);
            if (TWO && f.off2 >= 0)
                copy_ints<ENT>(&ring[slot][R::NP - 1][me], col + f.off2);
        }
        emublas_cp_async_commit();
    };
#pragma unroll
    for (int u = 0; u < R::STAGES; u++)
        issue(u, u);
    int slot = 0;
    for (int t = 0; t < nterms; t++) {
        emublas_cp_async_wait<R::STAGES - 1>(); /* term t's group has landed */
        const fused_term f = fused_term_of(S, sm, t);
        int a[ENT], b[ENT];
        load_ints<ENT>(&ring[slot][0][me], a);
        if (TWO) {
            if (f.off2 >= 0)
                load_ints<ENT>(&ring[slot][R::NP - 1][me], b);
            else
#pragma unroll
                for (int e = 0; e < ENT; e++)
                    b[e] = 0;
        }
        add_fused<CPLX, ENT, TWO>(sm, f, a, b, f.w, spart[t], re, im);
        issue(t + R::STAGES, slot); /* after the values are used: the slot is free */
        slot = slot + 1 == R::STAGES ? 0 : slot + 1;
    }
    emublas_cp_async_wait<0>();
}

/* Complex tables whose terms come in pairs reading the same two products (2M: a
 * modulus's real and imaginary terms): each pair's products are loaded and converted
 * once, where term by term they were loaded and converted twice, and OZ_PAIR_DEPTH
 * pairs' loads stay in flight (twice the bytes sum_fused keeps in flight with the same
 * registers: the pass waited on memory).  Each term's value is add_fused's, bit for bit. */
#define OZ_FUSED1_ENT EMUBLAS_OZ_FUSED1_ROWS
#ifndef OZ_PAIR_DEPTH
#define OZ_PAIR_DEPTH 4
#endif

template <int ENT, int MT>
__device__ __forceinline__ void add_pair_term(const fused_smem<MT> &sm, const fused_term &f, const double *x,
                                              const double *y, const double3 &w, bool imag, double (*re)[3],
                                              double (*im)[3])
{
    const ozmod M = f.M;
    double v[ENT];
#pragma unroll
    for (int e = 0; e < ENT; e++)
        v[e] = red_small(fma(f.w1, x[e], f.w2 * y[e]), M); /* exact: |v| < 2^49 */
    add_values<true, ENT>(v, w, imag, re, im);
}

template <int ENT, bool FULL, int MT>
__device__ __forceinline__ void sum_fused_pairs(const term_src &S, const fused_smem<MT> &sm, const signed char *spart,
                                                int nterms, long long j, long long i0,
                                                int left, double (*re)[3], double (*im)[3])
{
    constexpr int D = OZ_PAIR_DEPTH;
    const int *col = S.prods + j * S.ldp + i0;
    const int npairs = nterms / 2;
    int a[D][ENT], b[D][ENT];
#pragma unroll
    for (int d = 0; d < D; d++)
        if (d < npairs)
            load_fused<ENT, true, FULL>(col, left, fused_term_of(S, sm, 2 * d), a[d], b[d]);
    for (int p = 0; p < npairs; p += D) {
#pragma unroll
        for (int d = 0; d < D; d++) {
            const int q = p + d;
            if (q < npairs) {
                double x[ENT], y[ENT];
#pragma unroll
                for (int e = 0; e < ENT; e++) {
                    x[e] = (double)a[d][e];
                    y[e] = (double)b[d][e];
                }
                if (q + D < npairs) /* the slot's next pair, in flight while these are summed */
                    load_fused<ENT, true, FULL>(col, left, fused_term_of(S, sm, 2 * (q + D)), a[d], b[d]);
                {
                    const fused_term f = fused_term_of(S, sm, 2 * q);
                    add_pair_term<ENT>(sm, f, x, y, f.w, spart[2 * q], re, im);
                }
                const fused_term f = fused_term_of(S, sm, 2 * q + 1);
                add_pair_term<ENT>(sm, f, x, y, f.w, spart[2 * q + 1], re, im);
            }
        }
    }
}

/* ENT consecutive term bytes at p (aligned to ENT): one load. */
template <int ENT, bool FULL> __device__ __forceinline__ void load_bytes(const signed char *p, int left, signed char *v)
{
    if constexpr (FULL && ENT == 4) {
        const char4 q = *(const char4 *)p;
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else if constexpr (FULL && ENT == 2) {
        const char2 q = *(const char2 *)p;
        v[0] = q.x, v[1] = q.y;
    } else {
#pragma unroll
        for (int e = 0; e < ENT; e++)
            v[e] = FULL || e < left ? p[e] : 0;
    }
}

/* The unfused pass's sum over the int8 term planes, the next term's bytes loaded while
 * this one is summed. */
template <bool CPLX, int ENT, bool FULL>
__device__ __forceinline__ void sum_planes(const term_src &S, const double3 *sw, const signed char *spart,
                                           int nterms, long long j, long long i0, int left, double (*re)[3],
                                           double (*im)[3])
{
    const signed char *col = S.terms + j * S.ldt + i0;
    signed char nx[ENT];
    load_bytes<ENT, FULL>(col, left, nx);
    for (int t = 0; t < nterms; t++) {
        double v[ENT];
#pragma unroll
        for (int e = 0; e < ENT; e++)
            v[e] = (double)nx[e];
        const double3 w = sw[t];
        const int pt_ = spart[t];
        if (t + 1 < nterms)
            load_bytes<ENT, FULL>(col + (long long)(t + 1) * S.plane_stride, left, nx);
        add_values<CPLX, ENT>(v, w, pt_, re, im);
    }
}

/* Each warp takes 32 ENT consecutive rows of one output column, ENT consecutive
 * entries per lane (rows ENT lane .. ENT lane + ENT - 1 of the segment): a term's
 * products (or bytes) are one vector load per lane and one contiguous run per warp,
 * where a lane's rows 32 apart took ENT loads, each with its own address and bounds test.  The block's 8 warps take wpc = 2^lwpc (1, 2, 4 or 8) consecutive such row
 * segments of each of 8 / wpc columns: with wpc = 8 a term's products are read
 * as one run of 8 · 32 ENT values of one column, where eight columns' shorter
 * runs scattered the block's requests over as many DRAM rows.  Grid
 * (ceil(cols / (8 / wpc)), ceil(rows / (wpc · 32 ENT))), 256 threads. */
template <bool CPLX, int ENT, bool FUSED, bool TWO = true, bool PAIRS = false>
__device__ __forceinline__ void crt_final(
    long long rows, long long cols, long long r0, long long j0, const term_src &S, int nterms,
    const signed char *part, const double *bw, const oz_crtk &K, const int *row_shift, const int *col_shift, double ar, double ai, double br, double bi, int beta0, int dtype,
    void *out, long long rso, long long cso, int uplo, const oz_cert &C, bool certify, int lwpc)
{
    constexpr int MT = FUSED ? OZ_FUSED_MAX_TERMS : OZ_MAX_TERMS; /* the host keeps nterms <= MT */
    __shared__ double3 sw[FUSED ? 1 : MT]; /* the weight's three pieces (fused: in sm's table) */
    __shared__ signed char spart[MT];
    __shared__ typename final_smem<FUSED, MT>::type sm;
    for (int u = threadIdx.x; u < nterms; u += blockDim.x) {
        if (!FUSED)
            sw[u] = make_double3(bw[3 * u], bw[3 * u + 1], bw[3 * u + 2]);
        spart[u] = part[u];
    }
    sm.load(S, nterms, bw);
    __syncthreads();
    const int lane = threadIdx.x % 32;
    const int w = threadIdx.x / 32; /* segment w & (wpc - 1) of column w >> lwpc */
    const long long i0 = ((long long)(blockIdx.y << lwpc) + (w & ((1 << lwpc) - 1))) * (32 * ENT) + ENT * lane;
    const long long j = ((long long)blockIdx.x << (3 - lwpc)) + (w >> lwpc);
    if (i0 >= rows || j >= cols)
        return;
    const long long gj = j0 + j;
    /* a lane whose rows all lie outside the uplo triangle has nothing to do */
    if ((uplo == 1 && r0 + i0 > gj) || (uplo == 2 && r0 + i0 + (ENT - 1) < gj))
        return;
    double re[ENT][3], im[CPLX ? ENT : 1][3];
#pragma unroll
    for (int e = 0; e < ENT; e++)
        re[e][0] = re[e][1] = re[e][2] = 0.0;
#pragma unroll
    for (int e = 0; e < (CPLX ? ENT : 1); e++)
        im[e][0] = im[e][1] = im[e][2] = 0.0;
    const int left = rows - i0 < ENT ? (int)(rows - i0) : ENT;
    if (nterms > 0) {
        if constexpr (FUSED) {
            /* complex (two entries a lane, 8-byte copies): the ring measured slower than
             * sum_fused's two register buffers */
            if constexpr (PAIRS) {
                if (left == ENT)
                    sum_fused_pairs<ENT, true>(S, sm, spart, nterms, j, i0, left, re, im);
                else
                    sum_fused_pairs<ENT, false>(S, sm, spart, nterms, j, i0, left, re, im);
            } else if constexpr (!CPLX) {
                if (left == ENT)
                    sum_fused_async<CPLX, ENT, TWO>(S, sm, spart, nterms, j, i0, re, im);
                else
                    sum_fused<CPLX, ENT, TWO, false>(S, sm, spart, nterms, j, i0, left, re, im);
            } else if (left == ENT)
                sum_fused<CPLX, ENT, TWO, true>(S, sm, spart, nterms, j, i0, left, re, im);
            else
                sum_fused<CPLX, ENT, TWO, false>(S, sm, spart, nterms, j, i0, left, re, im);
        } else {
            if (left == ENT)
                sum_planes<CPLX, ENT, true>(S, sw, spart, nterms, j, i0, left, re, im);
            else
                sum_planes<CPLX, ENT, false>(S, sw, spart, nterms, j, i0, left, re, im);
        }
    }
    const int cs_ = col_shift[gj];
#pragma unroll
    for (int e = 0; e < ENT; e++) {
        const long long i = i0 + e, gi = r0 + i;
        if (e >= left || (uplo == 1 && gi > gj) || (uplo == 2 && gi < gj))
            continue;
        final_entry(re[e], im[CPLX ? e : 0], K, row_shift[gi], cs_, ar, ai, br, bi, beta0, dtype, out,
                    gi * rso + gj * cso, C, certify, gi, gj, i, j);
    }
}

/* The arguments after the term source, shared by both entry points. */
#define OZ_CRT_TAIL_PARAMS                                                                                       \
    int nterms, const signed char *part, const double *bw, double P1, double P2, double P3, double Pinv,        \
        double u1, double iu1, double u2, double iu2, const int *row_shift, const int *col_shift, double ar, double ai, double br, double bi,    \
        int beta0, int dtype, void *out, long long rso, long long cso, int uplo, int certify,                   \
        const double *row_err, const double *col_err, double crt_err, double target, const int *W,              \
        long long ldw, const double *row_wsum, const double *col_wsum, const int *row_budget,                   \
        const int *col_budget, int fix, int fdtype, const void *Lr, const void *Li, const void *Rr,             \
        const void *Ri, long long rsl, long long csl, long long rsr, long long csr, long long k, int conj_l,     \
        int conj_r, unsigned long long *uncertified, unsigned char *mask, int *tiles, long long ldm,            \
        long long ntr, int lwpc

/* The certificate and the CRT constants from those arguments. */
#define OZ_CRT_TAIL_STRUCTS                                                                                      \
    const oz_cert C = {row_err, col_err, crt_err, target, W, ldw, row_wsum, col_wsum, row_budget,               \
                       col_budget, fix, fdtype, Lr, Li, Rr, Ri, rsl, csl, rsr, csr, k, conj_l, conj_r,          \
                       uncertified, mask, tiles, ldm, ntr};                                                      \
    const oz_crtk K = {P1, P2, P3, Pinv, u1, iu1, u2, iu2}

#define OZ_CRT_TAIL_CALL(CPLX, ENT, FUSED, TWO, PAIRS)                                                              \
    OZ_CRT_TAIL_STRUCTS;                                                                                         \
    crt_final<CPLX, ENT, FUSED, TWO, PAIRS>(rows, cols, r0, j0, S, nterms, part, bw, K, row_shift,                      \
                                col_shift, ar, ai, br, bi, beta0, dtype, out, rso, cso, uplo,                    \
                                C, certify != 0, lwpc)

#define OZ_CRT_FINAL(NAME, CPLX, ENT)                                                                          \
    extern "C" __global__ void __launch_bounds__(256, 3)                                                        \
        NAME(long long rows, long long cols, long long r0, long long j0, const signed char *terms,              \
             long long plane_stride, long long ldt, OZ_CRT_TAIL_PARAMS)                                          \
    {                                                                                                            \
        const term_src S = {terms, plane_stride, ldt, nullptr, 0, 0, nullptr, nullptr, 0};                      \
        OZ_CRT_TAIL_CALL(CPLX, ENT, false, true, false);                                                                      \
    }

/* The final pass straight from the int32 products (no term planes): as oz_crt_final, with
 * term t read through spec[t] (see term_src) from products[spec.x], products[spec.y];
 * the *1 forms for tables whose terms read one product each (spec.y < 0 throughout). */
/* A fused entry point's head: its name, blocks per SM, the products and the term table. */
#define OZ_CRT_FUSED_HEAD(NAME, MINB)                                                                            \
    extern "C" __global__ void __launch_bounds__(256, MINB)                                                     \
        NAME(long long rows, long long cols, long long r0, long long j0, const int *prods,                      \
             long long prod_stride, long long ldp, const int4 *spec, const double *mods, int nmod,               \
             OZ_CRT_TAIL_PARAMS)

#define OZ_CRT_FUSED(NAME, CPLX, ENT, TWO, PAIRS, MINB)                                                             \
    OZ_CRT_FUSED_HEAD(NAME, MINB)                                                                                \
    {                                                                                                            \
        const term_src S = {nullptr, 0, 0, prods, prod_stride, ldp, spec, mods, nmod};                          \
        OZ_CRT_TAIL_CALL(CPLX, ENT, true, TWO, PAIRS);                                                                \
    }

OZ_CRT_FINAL(oz_crt_final_real, false, 4)
OZ_CRT_FINAL(oz_crt_final_cplx, true, 2)
OZ_CRT_FUSED(oz_crt_fused_real, false, 4, true, false, 3)
OZ_CRT_FUSED(oz_crt_fused_cplx, true, 2, true, false, 3)
/* the real gemm's table (one product a term): eight rows a lane, so that a term's fixed
 * work (its table entry, the ring's copy and wait) is shared by twice the entries */
OZ_CRT_FUSED(oz_crt_fused1_real, false, OZ_FUSED1_ENT, false, false, OZ_FUSED1_ENT == 8 ? 2 : 3)
OZ_CRT_FUSED(oz_crt_fused1_cplx, true, 2, false, false, 3)
/* complex tables of term pairs (sum_fused_pairs) */
OZ_CRT_FUSED(oz_crt_fused2_cplx, true, 2, true, true, 3)

/* The fused final pass for the rank-k recipes, whose terms read X1 = P[i, j] and X2 =
 * P[j, i] (the whole square output in one block: r0 == j0 == 0, rows == cols).  One
 * 32 x 32 output tile per block of 256 threads, as oz_terms lays them out: lane tx on
 * row i0 + tx, its entries in columns jt0 + ty + 8q (q < 4).  X1 comes straight from
 * the column-major product (coalesced along i), X2 through a shared tile read along the
 * product's own columns.  Consecutive terms that read the same products (a modulus's
 * real and imaginary terms) form a group: its values are loaded once, and the next
 * group's loads are issued before this one's terms are summed, so that the loop does
 * not wait on memory term by term.  Each term is reduced, (w1 X1 + w2 X2) mod m, and
 * summed in slot order exactly as oz_terms and the term planes' pass do, so the result
 * is theirs bit for bit.  spec[t] = {product 1, product 2 | 2^30 when read transposed
 * (-1: none), w1 + 2^16 w2, modulus}.  Grid (ceil(rows/32), ceil(cols/32)); tiles
 * outside the uplo triangle return at once. */
struct tr_loads {
    int x1[4], x2[4]; /* X1 of the lane's entries; X2 read directly, or the tile values it stores */
};

/* The group of terms from t on: its end and its sources (block-uniform). */
__device__ __forceinline__ int group_end(const term_smem<true> &sm, int t, int nterms)
{
    const int4 a = sm.spec[t];
    int e = t + 1;
    while (e < nterms && sm.spec[e].x == a.x && sm.spec[e].y == a.y)
        e++;
    return e;
}

__device__ __forceinline__ void load_group(const term_src &S, const int4 sp, long long i0, long long jt0,
                                           long long rows, long long cols, int tx, int ty, tr_loads &L)
{
    const bool two = sp.y >= 0, tr2 = two && (sp.y & 0x40000000);
    const int *P1 = S.prods + (long long)sp.x * S.prod_stride;
    const int *P2 = two ? S.prods + (long long)(sp.y & 0x3fffffff) * S.prod_stride : nullptr;
    const long long i = i0 + tx;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const long long j = jt0 + ty + 8 * q;
        const bool in = i < rows && j < cols;
        L.x1[q] = in ? P1[j * S.ldp + i] : 0;
        if (tr2) { /* the tile's row ty + 8q: X2 of (i0 + ty + 8q, jt0 + tx) is P[jt0 + tx, i0 + ty + 8q] */
            const long long pi = i0 + ty + 8 * q, pj = jt0 + tx;
            L.x2[q] = (pi < rows && pj < cols) ? P2[pi * S.ldp + pj] : 0;
        } else {
            L.x2[q] = two && in ? P2[j * S.ldp + i] : 0;
        }
    }
}

template <bool CPLX>
__device__ __forceinline__ void crt_fused_transposed(long long rows, long long cols, long long r0, long long j0,
                                                     const term_src &S, int nterms, const signed char *part,
                                                     const double *bw, const oz_crtk &K, const int *row_shift,
                                                     const int *col_shift, double ar, double ai, double br, double bi,
                                                     int beta0, int dtype, void *out, long long rso, long long cso,
                                                     int uplo, const oz_cert &C, bool certify)
{
    __shared__ double3 sw[OZ_MAX_TERMS];
    __shared__ signed char spart[OZ_MAX_TERMS];
    __shared__ term_smem<true> sm;
    __shared__ int trn[TILE][TILE + 1]; /* trn[a][b] = X2 of tile entry (i0 + a, jt0 + b) */
    const long long i0 = (long long)blockIdx.x * TILE, jt0 = (long long)blockIdx.y * TILE;
    if ((uplo == 1 && r0 + i0 > j0 + jt0 + TILE - 1) || (uplo == 2 && r0 + i0 + TILE - 1 < j0 + jt0))
        return; /* block-uniform: before any barrier */
    for (int u = threadIdx.x; u < nterms; u += blockDim.x) {
        sw[u] = make_double3(bw[3 * u], bw[3 * u + 1], bw[3 * u + 2]);
        spart[u] = part[u];
    }
    sm.load(S, nterms);
    __syncthreads();
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const long long i = i0 + tx;
    double re[4][3], im[CPLX ? 4 : 1][3];
#pragma unroll
    for (int q = 0; q < 4; q++)
        re[q][0] = re[q][1] = re[q][2] = 0.0;
#pragma unroll
    for (int q = 0; q < (CPLX ? 4 : 1); q++)
        im[q][0] = im[q][1] = im[q][2] = 0.0;
    tr_loads next;
    if (nterms > 0)
        load_group(S, sm.spec[0], i0, jt0, rows, cols, tx, ty, next);
    for (int t = 0; t < nterms;) {
        const int e = group_end(sm, t, nterms);
        const int4 sp = sm.spec[t];
        const bool two = sp.y >= 0, tr2 = two && (sp.y & 0x40000000);
        double x1[4], x2[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            x1[q] = (double)next.x1[q];
        if (tr2) {
            __syncthreads(); /* every lane has read the previous group's tile */
#pragma unroll
            for (int q = 0; q < 4; q++)
                trn[ty + 8 * q][tx] = next.x2[q];
            __syncthreads();
#pragma unroll
            for (int q = 0; q < 4; q++)
                x2[q] = (double)trn[tx][ty + 8 * q];
        } else {
#pragma unroll
            for (int q = 0; q < 4; q++)
                x2[q] = (double)next.x2[q];
        }
        if (e < nterms) /* the next group's loads fly while this one is summed */
            load_group(S, sm.spec[e], i0, jt0, rows, cols, tx, ty, next);
        for (; t < e; t++) {
            const int4 st = sm.spec[t];
            const ozmod M = sm.mod[st.w];
            const double w1 = (double)(short)(st.z & 0xffff), w2 = (double)(st.z >> 16);
            const double3 w = sw[t];
            const bool imag = CPLX && spart[t];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const double v = red_small(fma(w1, x1[q], w2 * (two ? x2[q] : 0.0)), M); /* exact: |v| < 2^49 */
                if (imag)
                    acc3(v, w, im[q]);
                else
                    acc3(v, w, re[q]);
            }
        }
    }
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const long long j = jt0 + ty + 8 * q, gi = r0 + i, gj = j0 + j;
        if (i >= rows || j >= cols || (uplo == 1 && gi > gj) || (uplo == 2 && gi < gj))
            continue;
        final_entry(re[q], im[CPLX ? q : 0], K, row_shift[gi], col_shift[gj], ar, ai, br, bi, beta0, dtype, out,
                    gi * rso + gj * cso, C, certify, gi, gj, i, j);
    }
}

/* The entry points: OZ_CRT_FUSED's arguments (lwpc unused: the grid is one tile a block). */
#define OZ_CRT_FUSED_TR(NAME, CPLX)                                                                             \
    OZ_CRT_FUSED_HEAD(NAME, 2)                                                                                   \
    {                                                                                                            \
        const term_src S = {nullptr, 0, 0, prods, prod_stride, ldp, spec, mods, nmod};                          \
        OZ_CRT_TAIL_STRUCTS;                                                                                     \
        (void)lwpc;                                                                                              \
        crt_fused_transposed<CPLX>(rows, cols, r0, j0, S, nterms, part, bw, K, row_shift, col_shift, ar, ai,    \
                                   br, bi, beta0, dtype, out, rso, cso, uplo, C, certify != 0);                  \
    }

OZ_CRT_FUSED_TR(oz_crt_fused_tr_real, false)
OZ_CRT_FUSED_TR(oz_crt_fused_tr_cplx, true)

/* The entries oz_crt_final flagged, recomputed as float64 dot products of the data.  One
 * 64 x 64 block (2 x 2 of the final pass's 32 x 32 flag tiles; a block with none flagged
 * returns at once) per 256 threads, each thread a 4 x 4 register block (rows tx + 16 a,
 * columns ty + 16 b): 8 shared loads per 16 fma, where one entry per thread would be
 * shared-memory bound.  The operands are staged through shared memory FIX_K columns of
 * k at a time, and each entry's sum is taken in k order with the same fma sequence as
 * cert_dot, so the values are the C finalize's bit for bit.  Grid (ceil(rows/64),
 * ceil(cols/64)); rows/cols/r0/j0/out as oz_crt_final's; ntr tile rows of 32. */
#define FIX_K 16
#define FIX_B 64
template <bool CPLX>
__device__ void fix_block(long long rows, long long cols, long long r0, long long j0, const int *row_shift,
                          const int *col_shift, double ar, double ai, double br, double bi, int beta0, int dtype,
                          void *out, long long rso, long long cso, const oz_cert &C, const unsigned char *mask,
                          long long ldm)
{
    __shared__ double sLr[FIX_K][FIX_B], sRr[FIX_K][FIX_B];
    __shared__ double sLi[CPLX ? FIX_K : 1][FIX_B], sRi[CPLX ? FIX_K : 1][FIX_B];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const long long bi0 = (long long)blockIdx.x * FIX_B, bj0 = (long long)blockIdx.y * FIX_B;
    double sr[4][4] = {}, si[4][4] = {};
    for (long long l0 = 0; l0 < C.k; l0 += FIX_K) {
        /* stage columns l0 .. l0+FIX_K-1 of the block's 64 rows of L and 64 rows of R */
        for (int u = threadIdx.x; u < FIX_B * FIX_K; u += 256) {
            const int rr = u % FIX_B, ll = u / FIX_B;
            const long long l = l0 + ll, ii = bi0 + rr, jj = bj0 + rr;
            double a = 0, b = 0, c = 0, d = 0;
            if (l < C.k && ii < rows) {
                const long long o = (r0 + ii) * C.rsl + l * C.csl;
                a = cert_load(C.dtype, C.Lr, o);
                if (CPLX)
                    b = cert_load(C.dtype, C.Li, o);
            }
            if (l < C.k && jj < cols) {
                const long long o = (j0 + jj) * C.rsr + l * C.csr;
                c = cert_load(C.dtype, C.Rr, o);
                if (CPLX)
                    d = cert_load(C.dtype, C.Ri, o);
            }
            sLr[ll][rr] = a;
            sRr[ll][rr] = c;
            if (CPLX) {
                sLi[ll][rr] = C.conj_l ? -b : b;
                sRi[ll][rr] = C.conj_r ? -d : d;
            }
        }
        __syncthreads();
        const int kk = C.k - l0 < FIX_K ? (int)(C.k - l0) : FIX_K;
        for (int ll = 0; ll < kk; ll++) {
            double xr[4], yr[4], xi[4], yi[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                xr[e] = sLr[ll][tx + 16 * e];
                yr[e] = sRr[ll][ty + 16 * e];
                if (CPLX) {
                    xi[e] = sLi[ll][tx + 16 * e];
                    yi[e] = sRi[ll][ty + 16 * e];
                }
            }
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    sr[a][b] = fma(xr[a], yr[b], sr[a][b]);
                    if (CPLX) {
                        sr[a][b] = fma(-xi[a], yi[b], sr[a][b]);
                        si[a][b] = fma(xr[a], yi[b], si[a][b]);
                        si[a][b] = fma(xi[a], yr[b], si[a][b]);
                    }
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const long long i = bi0 + tx + 16 * a, gi = r0 + i;
        if (i >= rows)
            continue;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const long long j = bj0 + ty + 16 * b, gj = j0 + j;
            if (j >= cols || !mask[i + j * ldm])
                continue;
            double vr, vi;
            int ee;
            fallback_entry(C, gi, gj, row_shift[gi], col_shift[gj], sr[a][b], si[a][b], vr, vi, ee);
            store_entry(vr, vi, ee, ar, ai, br, bi, beta0, dtype, out, gi * rso + gj * cso);
        }
    }
}

/* Whether 64 x 64 block (bx, by) is recomputed whole: one of its 32 x 32 flag tiles (rows
 * 2bx, 2bx+1 and columns 2by, 2by+1 of the tile grid) holds more than OZ_FIX_SPARSE. */
__device__ __forceinline__ bool fix_dense(const int *tiles, long long ntr, long long ntc, long long bx,
                                          long long by)
{
    bool dense = false;
    for (long long c = 2 * by; c < 2 * by + 2 && c < ntc; c++)
        for (long long r = 2 * bx; r < 2 * bx + 2 && r < ntr; r++)
            dense |= tiles[r + c * ntr] > OZ_FIX_SPARSE;
    return dense;
}

/* The fix passes' arguments: the output's, then the factors' (as cert_args passes them). */
#define OZ_FIX_PARAMS                                                                                            \
    long long rows, long long cols, long long r0, long long j0, const int *row_shift, const int *col_shift,     \
        double ar, double ai, double br, double bi, int beta0, int dtype, void *out, long long rso,              \
        long long cso, const double *row_err, const double *col_err, int fdtype, const void *Lr,                \
        const void *Li, const void *Rr, const void *Ri, long long rsl, long long csl, long long rsr,            \
        long long csr, long long k, int conj_l, int conj_r, const unsigned char *mask, const int *tiles,        \
        long long ldm, long long ntr

#define OZ_FIX_CERT                                                                                              \
    oz_cert C = {};                                                                                              \
    C.row_err = row_err;                                                                                         \
    C.col_err = col_err;                                                                                         \
    C.dtype = fdtype;                                                                                            \
    C.Lr = Lr;                                                                                                   \
    C.Li = Li;                                                                                                   \
    C.Rr = Rr;                                                                                                   \
    C.Ri = Ri;                                                                                                   \
    C.rsl = rsl;                                                                                                 \
    C.csl = csl;                                                                                                 \
    C.rsr = rsr;                                                                                                 \
    C.csr = csr;                                                                                                 \
    C.k = k;                                                                                                     \
    C.conj_l = conj_l;                                                                                           \
    C.conj_r = conj_r

extern "C" __global__ void __launch_bounds__(256) oz_fix_tiles(OZ_FIX_PARAMS)
{
    if (!fix_dense(tiles, ntr, (cols + 31) / 32, blockIdx.x, blockIdx.y))
        return; /* nothing flagged, or few enough for oz_fix_entries */
    OZ_FIX_CERT;
    if (Li != nullptr)
        fix_block<true>(rows, cols, r0, j0, row_shift, col_shift, ar, ai, br, bi, beta0, dtype, out, rso, cso, C,
                        mask, ldm);
    else
        fix_block<false>(rows, cols, r0, j0, row_shift, col_shift, ar, ai, br, bi, beta0, dtype, out, rso, cso, C,
                         mask, ldm);
}

template <bool CPLX> __device__ void fix_entry(const oz_cert &C, long long gi, long long gj, double &sr, double &si)
{
    sr = 0.0;
    si = 0.0;
    for (long long l = 0; l < C.k; l++) {
        const long long ol = gi * C.rsl + l * C.csl, orr = gj * C.rsr + l * C.csr;
        const double xr = cert_load(C.dtype, C.Lr, ol), yr = cert_load(C.dtype, C.Rr, orr);
        sr = fma(xr, yr, sr);
        if (CPLX) {
            double xi = cert_load(C.dtype, C.Li, ol), yi = cert_load(C.dtype, C.Ri, orr);
            if (C.conj_l)
                xi = -xi;
            if (C.conj_r)
                yi = -yi;
            sr = fma(-xi, yi, sr);
            si = fma(xr, yi, si);
            si = fma(xi, yr, si);
        }
    }
}

/* The flagged entries of the blocks that fix_dense leaves alone (at most 4 OZ_FIX_SPARSE
 * each) appended to list[1 ...], list[0].x counting them: one 64 x 64 block per 256
 * threads, as oz_fix_tiles' grid. */
extern "C" __global__ void __launch_bounds__(256) oz_fix_collect(long long rows, long long cols,
                                                                 const unsigned char *mask, const int *tiles,
                                                                 long long ldm, long long ntr, int2 *list)
{
    __shared__ int2 found[4 * OZ_FIX_SPARSE];
    __shared__ unsigned int nfound, base;
    const long long ntc = (cols + 31) / 32, bi0 = 64LL * blockIdx.x, bj0 = 64LL * blockIdx.y;
    bool any = false;
    for (long long c = 2LL * blockIdx.y; c < 2LL * blockIdx.y + 2 && c < ntc; c++)
        for (long long r = 2LL * blockIdx.x; r < 2LL * blockIdx.x + 2 && r < ntr; r++)
            any |= tiles[r + c * ntr] > 0;
    if (!any || fix_dense(tiles, ntr, ntc, blockIdx.x, blockIdx.y))
        return;
    if (threadIdx.x == 0)
        nfound = 0;
    __syncthreads();
    for (int u = threadIdx.x; u < 64 * 64; u += 256) {
        const long long i = bi0 + u % 64, j = bj0 + u / 64;
        if (i < rows && j < cols && mask[i + j * ldm])
            found[atomicAdd(&nfound, 1u)] = make_int2((int)i, (int)j);
    }
    __syncthreads();
    if (threadIdx.x == 0)
        base = atomicAdd((unsigned int *)list, nfound);
    __syncthreads();
    for (unsigned int u = threadIdx.x; u < nfound; u += 256)
        list[1 + base + u] = found[u];
}

/* The listed entries, one thread each: the same in-order fma sequence as fix_block's (and
 * cert_dot's), so the same values bit for bit.  The list's length is read here, so the
 * launch (a fixed grid, strided) needs no host read. */
extern "C" __global__ void __launch_bounds__(256) oz_fix_entries(OZ_FIX_PARAMS, const int2 *list)
{
    OZ_FIX_CERT;
    const long long n = (unsigned int)list[0].x;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x) {
        const int2 e = list[1 + p];
        const long long gi = r0 + e.x, gj = j0 + e.y;
        double sr, si, vr, vi;
        int ee;
        if (Li != nullptr)
            fix_entry<true>(C, gi, gj, sr, si);
        else
            fix_entry<false>(C, gi, gj, sr, si);
        fallback_entry(C, gi, gj, row_shift[gi], col_shift[gj], sr, si, vr, vi, ee);
        store_entry(vr, vi, ee, ar, ai, br, bi, beta0, dtype, out, gi * rso + gj * cso);
    }
}

/* ---- exact integer products (intmatmul) -----------------------------------
 *
 * Residues of int64 data as doubles: v = hi*2^32 + lo with hi < 2^31 and
 * lo < 2^32, t = hi*(2^32 mod m) + lo is exact (< 2^40) and == v (mod m),
 * then red_small.  mods: the ozmod constants of each modulus; c32[l] =
 * 2^32 mod m_l.
 */
extern "C" __global__ void __launch_bounds__(256) oz_int_residues(long long rows, long long cols,
                                                                 const long long *x, long long rs, long long cs,
                                                                 int nmod, const double *mods, const double *c32,
                                                                 signed char *out, long long plane_stride,
                                                                 long long ld)
{
    const long long r0 = (long long)blockIdx.y * TILE, c0 = (long long)blockIdx.x * TILE;
    const int r = threadIdx.x / 8, q = threadIdx.x % 8;
    const long long gr = r0 + r;
    double hi[4], lo[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        long long gc = c0 + 4 * q + k;
        long long v = (gr < rows && gc < cols) ? x[gr * rs + gc * cs] : 0;
        hi[k] = (double)(v >> 32);                 /* floor division: lo is non-negative */
        lo[k] = (double)(unsigned int)(v & 0xffffffffLL);
    }
    for (int l = 0; l < nmod; l++) {
        const ozmod M = {mods[4 * l], mods[4 * l + 1], mods[4 * l + 2], mods[4 * l + 3]};
        double d[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            d[k] = red_small(fma(hi[k], c32[l], lo[k]), M);
        *(int *)(out + (long long)l * plane_stride + gr * ld + c0 + 4 * q) = pack4(d[0], d[1], d[2], d[3]);
    }
}

/* acc = (acc + prod) mod m, symmetric, as int32 (first: acc = prod mod m). */
extern "C" __global__ void oz_int_accumulate(long long n, const int *prod, int *acc, double m, double inv,
                                             double bias, int first)
{
    long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n)
        return;
    const ozmod M = {m, inv, bias, 0.0};
    double t = (double)prod[u] + (first ? 0.0 : (double)acc[u]);
    acc[u] = (int)red_small(t, M);
}

/*
 * Garner: residues res[l][u] (symmetric, int32, plane stride ps) of nmod
 * moduli -> mixed-radix digits in registers -> value in wrapping int64, with a
 * double approximation; entries whose approximation reaches 2^62 are marked in
 * suspect[u] and counted (the host checks those exactly).  inv[l*nmod + j] =
 * m_j^-1 mod m_l.  Entry u = j*ld + i of the (ld x cols) planes goes to
 * out[i*ro + j*co] for i < rows.
 */
#define OZ_INT_MAX_MOD 24

extern "C" __global__ void oz_int_garner(long long rows, long long cols, long long ld, const int *res,
                                         long long ps, int nmod, const double *mods, const double *inv,
                                         long long *out, long long ro, long long co, unsigned char *suspect,
                                         int *nsuspect)
{
    long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= ld * cols)
        return;
    long long i = u % ld, j = u / ld;
    if (i >= rows)
        return;
    double dig[OZ_INT_MAX_MOD];
    for (int l = 0; l < nmod; l++) {
        const ozmod M = {mods[4 * l], mods[4 * l + 1], mods[4 * l + 2], mods[4 * l + 3]};
        double t = (double)res[l * ps + u];
        for (int k = 0; k < l; k++)
            t = red_small((t - dig[k]) * inv[l * nmod + k], M); /* |.| < 2^17: exact */
        dig[l] = t;
    }
    long long v = (long long)dig[nmod - 1];
    double approx = dig[nmod - 1];
    for (int l = nmod - 2; l >= 0; l--) {
        v = (long long)((unsigned long long)v * (unsigned long long)(long long)mods[4 * l] +
                        (unsigned long long)(long long)dig[l]); /* wraps modulo 2^64 */
        approx = approx * mods[4 * l] + dig[l];
    }
    out[i * ro + j * co] = v;
    bool bad = !(fabs(approx) < 4611686018427387904.0); /* 2^62 */
    suspect[i * ro + j * co] = bad;
    if (bad)
        atomicAdd(nsuspect, 1);
}
