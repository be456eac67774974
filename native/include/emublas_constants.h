/*
 * emublas_constants.h -- the constants and helpers that the C kernels
 * (native/cpu), the CUDA kernels (native/cuda) and Python share, written once.
 *
 * Who reads it:
 *   - the C sources include it (native/build.py puts native/include on the
 *     include path);
 *   - the CUDA sources include it as "../include/emublas_constants.h", which
 *     nvcc resolves next to the source; for NVRTC (cupy.RawModule)
 *     emublas/_kernels/cuda_source.py pastes the text in place of the
 *     #include line, so cupy's kernel cache sees header changes;
 *   - Python: every integer constant EMUBLAS_* is declared to cffi by
 *     native/build.py (so emublas._kernels._cpu.lib carries the compiled
 *     value), and emublas/_kernels/constants.py reads the same text for code
 *     that must work without the C extension (the GPU path, module constants).
 *
 * Rules that keep all three readers working: no #include (NVRTC has no host
 * standard library); integer constants are integer literals or expressions of
 * earlier EMUBLAS_* integer constants (+ - * << and parentheses);
 * floating-point constants are hexadecimal literals (exact, and Python skips
 * them).
 */
#ifndef EMUBLAS_CONSTANTS_H
#define EMUBLAS_CONSTANTS_H

/* ---- Ozaki scheme II ------------------------------------------------------ */

/* Moduli one residue pass takes (CPU and GPU keep their per-modulus constants
 * in fixed arrays of this size). */
#define EMUBLAS_OZ_MAX_MODULI 64

/* CRT terms the GPU finalize keeps in shared memory (oz_crt_final). */
#define EMUBLAS_OZ_MAX_TERMS 1024

/* CRT terms of the fused final pass straight from the products (oz_crt_fused): fewer,
 * so that its term table and its 24 KiB ring of products in flight fit in a block's
 * 48 KiB of static shared memory.  A call with more terms sums term planes instead. */
#define EMUBLAS_OZ_FUSED_MAX_TERMS 256

/* Output rows one lane of the real gemm's fused final pass takes (oz_crt_fused1_real;
 * the host sizes its grid by it): eight, so that a term's fixed work is shared by as
 * many entries. */
#define EMUBLAS_OZ_FUSED1_ROWS 8

/* GPU residue planes are padded with zeros to multiples of this in both
 * dimensions (cuBLAS's int8 TN layout); it is also the edge of the CUDA
 * kernels' tiles, so a padded plane is a whole number of tiles. */
#define EMUBLAS_OZ_PAD 32

/* 32 x 32 tiles one block of the GPU residue kernels takes in turn (oz_res_*). */
#define EMUBLAS_OZ_RES_TILES 8

/* The int8 GEMM is exact in int32 for k below this (|a*b| <= 2^14). */
#define EMUBLAS_I8GEMM_K_EXACT (1 << 17)

/* k per int8 GEMM of a long product: under the exactness limit and a multiple
 * of the GPU padding, so that every chunk starts on a padded boundary. */
#define EMUBLAS_OZ_K_CHUNK (EMUBLAS_I8GEMM_K_EXACT - EMUBLAS_OZ_PAD)

/* Entries of one 32 x 32 output tile that the GPU fallback recomputes one thread per
 * entry; a 64 x 64 block with a tile holding more is recomputed as a whole
 * (register-blocked), which costs about as much as this many single entries
 * times the four tiles. */
#define EMUBLAS_OZ_FIX_SPARSE 64

/* The shift of a row holding NaN or Inf (INT32_MIN): its residues are zero and
 * the finalize takes its entries from a float64 dot product of the data. */
#define EMUBLAS_OZ_DEAD (-2147483647 - 1)

/* Residue reduction of an integer-valued double y (see native/cpu/ozaki_residues.c):
 * y = a*2^49 + b for |y| < 2^90, and rounding to nearest even by adding and
 * subtracting 1.5*2^52 (exact for |z| < 2^51). */
#define EMUBLAS_OZ_SPLIT 0x1p49
#define EMUBLAS_OZ_SPLIT_INV 0x1p-49
#define EMUBLAS_OZ_BIG 0x1p90
#define EMUBLAS_OZ_MAGIC 0x1.8p52

/* ---- helpers for both C and CUDA ------------------------------------------ */

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define EMUBLAS_HOST_DEVICE __host__ __device__
#else
#define EMUBLAS_HOST_DEVICE
#endif

/* 2^k mod m for k >= 0, m >= 1 (the rare |y| >= 2^90 path of the residues:
 * y = M*2^k reduces as (M mod m)(2^k mod m)). */
static inline EMUBLAS_HOST_DEVICE long long pow2mod(long long k, long long m)
{
    long long r = 1 % m, b = 2 % m;
    while (k > 0) {
        if (k & 1)
            r = r * b % m;
        b = b * b % m;
        k >>= 1;
    }
    return r;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/* float32 conversions and arithmetic that keep subnormals.  cupy compiles every
 * module with -ftz=true (after the caller's options, so it cannot be undone),
 * which makes the compiler's own float32 instructions, conversions to and from
 * float included, flush subnormals to zero: a float32 input of 1e-40 would be
 * read as 0 and a subnormal result written as 0.  Inline PTX is outside that
 * flag; these are the IEEE instructions (round to nearest even). */
static __device__ __forceinline__ double emublas_f2d(float x)
{
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ double emublas_f2d(double x) { return x; }
static __device__ __forceinline__ float emublas_d2f(double x)
{
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}
static __device__ __forceinline__ float emublas_fadd(float a, float b)
{
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
static __device__ __forceinline__ float emublas_fsub(float a, float b)
{
    float r;
    asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
static __device__ __forceinline__ float emublas_fmul(float a, float b)
{
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* Asynchronous global -> shared copies (sm_80 and later; LDGSTS): the bytes in flight
 * live in shared memory, not in registers, so a kernel can keep many loads outstanding.
 * Each thread waits only for its own copies (wait_group), so a thread that reads back
 * only what it copied needs no barrier. */
static __device__ __forceinline__ void emublas_cp_async16(void *smem, const void *gmem)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned int s = (unsigned int)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#endif
}
/* n bytes (4 or 8) of gmem, or zeros where !valid (nothing is read then) */
template <int N>
static __device__ __forceinline__ void emublas_cp_async(void *smem, const void *gmem, bool valid = true)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned int s = (unsigned int)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(N),
                 "r"(valid ? N : 0)
                 : "memory");
#endif
}
static __device__ __forceinline__ void emublas_cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* until at most N of this thread's committed groups are still in flight */
template <int N> static __device__ __forceinline__ void emublas_cp_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
#endif

#endif /* EMUBLAS_CONSTANTS_H */
