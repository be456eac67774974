// boolpack.cu -- 0/1 matrix products on the GPU: C[i,j] = popcount(A_i AND B_j).
//
// Loaded by emublas/backends/boolpack/kernels_gpu.py with cupy.RawModule (extern "C"
// kernels, no host code).  CI checks it with
//   nvcc -arch=sm_90 -std=c++17 -c native/cuda/boolpack.cu
//
// Packed layout (shared by all kernels): P[r * ldw + w] is word w (bits
// 32w .. 32w+31 of the row, bit b = element 32w+b) of row r.  The caller
// pads: ldw is a multiple of BKW (16 words = 512 bits, zero beyond k) and
// the packed row count a multiple of 128 (zero rows), so the GEMM kernels
// need no bounds checks except when writing C.  A is packed by rows, B by
// columns (rows of B^T).
//
// Summation over k is order-free, so inside each 16-word slice a thread may
// feed the MMA any words as long as A and B use the same ones: thread tig of
// a quad uses words 4*tig+2s and 4*tig+2s+1 in k-step s (s = 0, 1) as the
// first and second k-halves of m16n8k256, one 128-bit shared load per row.

// Only the project's own header (pasted in for NVRTC): no host standard library.
#include "../include/emublas_constants.h"

#define BKW 16      // words of k per pipeline stage (512 bits, two m16n8k256 steps)
#define BM 128      // block tile rows (A)
#define BN 128      // block tile columns (B)
#define STAGES 3    // cp.async pipeline depth: 3 x 16 KiB shared memory

// ---- packing: one warp ballot per 32-bit word ---------------------------------

// X: rows x k bytes (0/1, or any nonzero byte as 1), element (r, l) at
// X[r*rsx + l*csx].  Writes words 0 .. ldw-1 of rows 0 .. rows-1 of P.
extern "C" __global__ void bp_pack(const unsigned char *__restrict__ X, long long rows, long long k,
                                   long long rsx, long long csx, unsigned int *__restrict__ P,
                                   long long ldw)
{
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = warp; r < rows; r += nwarps) {  // uniform per warp: ballots are safe
        const unsigned char *row = X + r * rsx;
        for (long long w = 0; w < ldw; w++) {
            const long long l = 32 * w + lane;
            const bool bit = l < k && row[l * csx] != 0;
            const unsigned int word = __ballot_sync(0xffffffffu, bit);
            if (lane == 0)
                P[r * ldw + w] = word;
        }
    }
}

// ---- binary tensor-core GEMM (sm_80 .. sm_90) -----------------------------------

__device__ __forceinline__ void mma_b1(int *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                       unsigned b0, unsigned b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && __CUDA_ARCH__ < 1000
    asm volatile(
        "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap();  // the host picks bp_gemm_popc on other architectures
#endif
}

// One stage: BM rows of A and BN rows of B^T, BKW words each (16 KiB).
__device__ __forceinline__ void load_stage(unsigned int (*sA)[BKW], unsigned int (*sB)[BKW],
                                           const unsigned int *A, const unsigned int *B,
                                           long long ldw, long long kword, int tid)
{
    // 128 rows x 4 chunks of 16 bytes per operand; 256 threads, 2 chunks each.
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int c = tid + 256 * i;
        const int row = c >> 2, part = (c & 3) * 4;
        emublas_cp_async16(&sA[row][part], A + row * ldw + kword + part);
        emublas_cp_async16(&sB[row][part], B + row * ldw + kword + part);
    }
}

// C (m x n int32, row stride ldc) = A (packed, m rows) * B (packed, n columns).
// 256 threads = 8 warps as 2 x 4, each a 64 x 32 tile (4 x 4 m16n8 MMAs).
// Grid: (ceil(n / BN), ceil(m / BM)).
extern "C" __global__ void __launch_bounds__(256)
bp_gemm_mma(const unsigned int *__restrict__ A, const unsigned int *__restrict__ B, long long ldw,
            int *__restrict__ C, long long m, long long n, long long ldc)
{
    __shared__ __align__(16) unsigned int sA[STAGES][BM][BKW];
    __shared__ __align__(16) unsigned int sB[STAGES][BN][BKW];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, tig = lane & 3;
    const int wm = warp >> 2, wn = warp & 3;
    const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
    const unsigned int *Ab = A + row0 * ldw, *Bb = B + col0 * ldw;
    const long long ktiles = ldw / BKW;

    int acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[i][j][r] = 0;

    // Prologue: stages 0 .. STAGES-2 in flight (one commit group each, empty or not).
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load_stage(sA[s], sB[s], Ab, Bb, ldw, (long long)s * BKW, tid);
        emublas_cp_async_commit();
    }
    for (long long kt = 0; kt < ktiles; kt++) {
        emublas_cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread) ...
        __syncthreads();              // ... for all threads; stage (kt-1) is free again
        const long long nk = kt + STAGES - 1;
        if (nk < ktiles)
            load_stage(sA[nk % STAGES], sB[nk % STAGES], Ab, Bb, ldw, nk * BKW, tid);
        emublas_cp_async_commit();

        const int st = (int)(kt % STAGES);
        uint4 af[4][2], bf[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = wm * 64 + i * 16 + g;
            af[i][0] = *reinterpret_cast<const uint4 *>(&sA[st][r][4 * tig]);
            af[i][1] = *reinterpret_cast<const uint4 *>(&sA[st][r + 8][4 * tig]);
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            bf[j] = *reinterpret_cast<const uint4 *>(&sB[st][wn * 32 + j * 8 + g][4 * tig]);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                // k-step 0: words 4tig, 4tig+1; k-step 1: words 4tig+2, 4tig+3
                mma_b1(acc[i][j], af[i][0].x, af[i][1].x, af[i][0].y, af[i][1].y, bf[j].x, bf[j].y);
                mma_b1(acc[i][j], af[i][0].z, af[i][1].z, af[i][0].w, af[i][1].w, bf[j].z, bf[j].w);
            }
    }
    emublas_cp_async_wait<0>();

    // Accumulator layout of m16n8: c0, c1 at (g, 2tig + 0/1), c2, c3 at (g + 8, 2tig + 0/1).
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const long long row = row0 + wm * 64 + i * 16 + g + (r >> 1) * 8;
                const long long col = col0 + wn * 32 + j * 8 + 2 * tig + (r & 1);
                if (row < m && col < n)
                    C[row * ldc + col] = acc[i][j][r];
            }
}

// ---- __popc fallback (any architecture) -------------------------------------

// 64 x 64 outputs per block of 256 threads (4 x 4 each), shared tiles of
// 64 rows x BKW words.  Grid: (ceil(n / 64), ceil(m / 64)).
extern "C" __global__ void __launch_bounds__(256)
bp_gemm_popc(const unsigned int *__restrict__ A, const unsigned int *__restrict__ B, long long ldw,
             int *__restrict__ C, long long m, long long n, long long ldc)
{
    __shared__ unsigned int sA[64][BKW + 1];  // +1: rows fall into different banks
    __shared__ unsigned int sB[64][BKW + 1];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const long long row0 = (long long)blockIdx.y * 64, col0 = (long long)blockIdx.x * 64;
    int acc[4][4] = {{0}};
    for (long long kw = 0; kw < ldw; kw += BKW) {
        // 64 x 16 words per operand, 4 per thread (rows are padded: no checks)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int c = tid + 256 * i, row = c >> 4, w = c & 15;
            sA[row][w] = A[(row0 + row) * ldw + kw + w];
            sB[row][w] = B[(col0 + row) * ldw + kw + w];
        }
        __syncthreads();
#pragma unroll
        for (int w = 0; w < BKW; w++) {
            unsigned int a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                a[i] = sA[ty * 4 + i][w];
                b[i] = sB[tx + 16 * i][w];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] += __popc(a[i] & b[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const long long row = row0 + ty * 4 + i, col = col0 + tx + 16 * j;
            if (row < m && col < n)
                C[row * ldc + col] = acc[i][j];
        }
}
