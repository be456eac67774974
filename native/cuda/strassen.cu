// strassen.cu -- fused operand-sum and chain-write kernels of the GPU
// Strassen-Winograd path (docs/design.md §6.2; the recursion and the cuBLAS leaf
// calls are in emublas/backends/strassen/driver.py and kernels_gpu.py).
//
// Element types: float, double, float2, double2 (complex as (re, im)).  No
// CUDA headers are included, so the file compiles both with nvcc and with
// NVRTC (cupy.RawModule); the shared header is pasted in for NVRTC.  float32
// arithmetic goes through its IEEE helpers, as cupy's -ftz=true would flush
// subnormal sums to zero.
//
// Matrices: element (i, j) of an input is X[i*rs + j*cs] (any strides, so
// transposed views are read in place); outputs are column-major with a
// leading dimension.  Indices are 64-bit.

#include "../include/emublas_constants.h"

typedef long long i64;

// ---- element arithmetic ----------------------------------------------------

template <typename T> struct Ar;

template <> struct Ar<float> {
    static __device__ __forceinline__ float add(float a, float b) { return emublas_fadd(a, b); }
    static __device__ __forceinline__ float sub(float a, float b) { return emublas_fsub(a, b); }
    static __device__ __forceinline__ float mul(float a, float b) { return emublas_fmul(a, b); }
    static __device__ __forceinline__ float of(double a) { return emublas_d2f(a); }
    static __device__ __forceinline__ float neg(float a) { return __int_as_float(__float_as_int(a) ^ (int)0x80000000u); }
    static __device__ __forceinline__ float cj(float a) { return a; }
    // s + beta*c
    static __device__ __forceinline__ float axpy(double br, double, float c, float s)
    {
        return add(s, mul(of(br), c));
    }
};

template <> struct Ar<double> {
    static __device__ __forceinline__ double add(double a, double b) { return a + b; }
    static __device__ __forceinline__ double sub(double a, double b) { return a - b; }
    static __device__ __forceinline__ double mul(double a, double b) { return a * b; }
    static __device__ __forceinline__ double of(double a) { return a; }
    static __device__ __forceinline__ double neg(double a) { return -a; }
    static __device__ __forceinline__ double cj(double a) { return a; }
    static __device__ __forceinline__ double axpy(double br, double, double c, double s)
    {
        return s + br * c;
    }
};

template <typename C, typename R> struct ArComplex {
    typedef Ar<R> A;
    static __device__ __forceinline__ C add(C a, C b)
    {
        C r;
        r.x = A::add(a.x, b.x);
        r.y = A::add(a.y, b.y);
        return r;
    }
    static __device__ __forceinline__ C sub(C a, C b)
    {
        C r;
        r.x = A::sub(a.x, b.x);
        r.y = A::sub(a.y, b.y);
        return r;
    }
    static __device__ __forceinline__ C cj(C a)
    {
        a.y = A::neg(a.y);
        return a;
    }
    static __device__ __forceinline__ C axpy(double br, double bi, C c, C s)
    {
        const R r = A::of(br), i = A::of(bi);
        C out;
        out.x = A::add(s.x, A::sub(A::mul(r, c.x), A::mul(i, c.y)));
        out.y = A::add(s.y, A::add(A::mul(r, c.y), A::mul(i, c.x)));
        return out;
    }
};

template <> struct Ar<float2> : ArComplex<float2, float> {};
template <> struct Ar<double2> : ArComplex<double2, double> {};

// ---- fused operand sums ------------------------------------------------------
//
// One block forms a TILE x TILE tile of all four sums.  The four quadrant
// tiles go through shared memory so that both the reads (along whichever
// input dimension has unit stride) and the column-major writes coalesce.
// side 0: S1 = X21+X22, S2 = S1-X11, S3 = X11-X21, S4 = X12-S2
// side 1: T1 = X12-X11, T2 = X22-T1, T3 = X22-X12, T4 = T2-X21
// Launch: grid (ceil(h/TILE), ceil(g/TILE)), block (TILE, SUMS_ROWS).

#define SUMS_ROWS 8

template <typename T, int TILE>
__device__ __forceinline__ void sums_tile(int side, i64 h, i64 g, const T *__restrict__ X, i64 rs,
                                          i64 cs, int conj, T *__restrict__ o0,
                                          T *__restrict__ o1, T *__restrict__ o2,
                                          T *__restrict__ o3, i64 ldo)
{
    __shared__ T tile[4][TILE][TILE + 1];  // +1: no bank conflicts on the transposed read
    const i64 i0 = (i64)blockIdx.x * TILE, j0 = (i64)blockIdx.y * TILE;
    const int tx = threadIdx.x;
    const bool along_j = cs == 1 && rs != 1;  // transposed view: unit stride runs along j
    const i64 q12 = g * cs, q21 = h * rs;
    for (int r = threadIdx.y; r < TILE; r += SUMS_ROWS) {
        const int li = along_j ? r : tx, lj = along_j ? tx : r;
        const i64 i = i0 + li, j = j0 + lj;
        if (i < h && j < g) {
            const T *x = X + i * rs + j * cs;
            tile[0][li][lj] = x[0];
            tile[1][li][lj] = x[q12];
            tile[2][li][lj] = x[q21];
            tile[3][li][lj] = x[q21 + q12];
        }
    }
    __syncthreads();
    typedef Ar<T> A;
    for (int r = threadIdx.y; r < TILE; r += SUMS_ROWS) {
        const i64 i = i0 + tx, j = j0 + r;
        if (i >= h || j >= g)
            continue;
        T x11 = tile[0][tx][r], x12 = tile[1][tx][r], x21 = tile[2][tx][r], x22 = tile[3][tx][r];
        if (conj) {
            x11 = A::cj(x11);
            x12 = A::cj(x12);
            x21 = A::cj(x21);
            x22 = A::cj(x22);
        }
        const i64 o = i + j * ldo;
        if (side == 0) {
            const T s1 = A::add(x21, x22), s2 = A::sub(s1, x11);
            o0[o] = s1;
            o1[o] = s2;
            o2[o] = A::sub(x11, x21);
            o3[o] = A::sub(x12, s2);
        } else {
            const T t1 = A::sub(x12, x11), t2 = A::sub(x22, t1);
            o0[o] = t1;
            o1[o] = t2;
            o2[o] = A::sub(x22, x12);
            o3[o] = A::sub(t2, x21);
        }
    }
}

// ---- chain writes: C = S + beta*C (C not read when beta is 0) ---------------
// Launch: 1-D blocks along the rows, grid (any, any): grid-stride loops over
// rows (x) and columns (y).

template <typename T>
__device__ __forceinline__ void update_body(i64 m, i64 n, double br, double bi,
                                            const T *__restrict__ S, i64 lds, T *__restrict__ C,
                                            i64 ldc)
{
    const bool keep = br != 0.0 || bi != 0.0;
    for (i64 j = blockIdx.y; j < n; j += gridDim.y) {
        const T *s = S + j * lds;
        T *c = C + j * ldc;
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < m;
             i += (i64)gridDim.x * blockDim.x)
            c[i] = keep ? Ar<T>::axpy(br, bi, c[i], s[i]) : s[i];
    }
}

// ---- entry points -------------------------------------------------------------
// Tiles: 32 x 32 for elements up to 8 bytes, 16 x 16 for double2 (shared
// memory: 4 tiles of TILE x (TILE+1) elements, at most 34 KB).

#define SUMS_ENTRY(NAME, T, TILE)                                                               \
    extern "C" __global__ void __launch_bounds__(TILE * SUMS_ROWS)                             \
        NAME(int side, i64 h, i64 g, const T *X, i64 rs, i64 cs, int conj, T *o0, T *o1, T *o2, \
             T *o3, i64 ldo)                                                                    \
    {                                                                                           \
        sums_tile<T, TILE>(side, h, g, X, rs, cs, conj, o0, o1, o2, o3, ldo);                  \
    }

#define UPDATE_ENTRY(NAME, T)                                                              \
    extern "C" __global__ void NAME(i64 m, i64 n, double br, double bi, const T *S, i64 lds, \
                                    T *C, i64 ldc)                                         \
    {                                                                                      \
        update_body<T>(m, n, br, bi, S, lds, C, ldc);                                      \
    }

SUMS_ENTRY(strassen_sums_s, float, 32)
SUMS_ENTRY(strassen_sums_d, double, 32)
SUMS_ENTRY(strassen_sums_c, float2, 32)
SUMS_ENTRY(strassen_sums_z, double2, 16)

UPDATE_ENTRY(strassen_update_s, float)
UPDATE_ENTRY(strassen_update_d, double)
UPDATE_ENTRY(strassen_update_c, float2)
UPDATE_ENTRY(strassen_update_z, double2)
