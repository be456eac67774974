"""cffi builder for ``emublas._kernels._cpu`` (out-of-line API mode).

Used by setup.py (``cffi_modules=["native/build.py:ffibuilder"]``), which runs
from the project root, so source paths are given relative to that root.  Run
``python3 native/build.py`` (from anywhere) to build the extension under
build/cffi and copy it into emublas/_kernels for development.

The build is portable: no ``-march=native``.  SIMD kernels are compiled per
function with ``__attribute__((target(...)))`` and chosen at run time.
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CPU_DIR = os.path.join(HERE, "cpu")
PACKAGE_DIR = os.path.join(ROOT, "emublas", "_kernels")

CDEF = """
#define EMUBLAS_OK ...
#define EMUBLAS_EINVAL ...
#define EMUBLAS_ENOTSUP ...
#define EMUBLAS_ENOMEM ...
#define EMUBLAS_ERANGE ...
#define EMUBLAS_CPU_AVX512_VNNI ...
#define EMUBLAS_CPU_AVX512_VPOPCNTDQ ...
#define EMUBLAS_IMPL_AUTO ...
#define EMUBLAS_IMPL_GENERIC ...
#define EMUBLAS_IMPL_VNNI ...
#define EMUBLAS_IMPL_GENERIC_BASELINE ...

int emublas_cpu_features(void);
int emublas_i8gemm(int impl, int64_t m, int64_t n, int64_t k,
                   const int8_t *A, int64_t rsa, int64_t csa,
                   const int8_t *B, int64_t rsb, int64_t csb,
                   int32_t *C, int64_t rsc, int64_t csc,
                   int accumulate, int nthreads);
const char *emublas_i8gemm_kernel_name(int impl);
double emublas_vnni_peak_probe(int nthreads, int64_t iters);
int emublas_oz_residues(int dtype, int64_t rows, int64_t cols,
                        const void *X, int64_t rsx, int64_t csx,
                        const int32_t *shift, int shift_axis,
                        int nmod, const int32_t *moduli,
                        int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                        int nthreads);
int emublas_oz_residues_cplx(int dtype, int64_t rows, int64_t cols,
                             const void *Xr, const void *Xi, int64_t rsx, int64_t csx,
                             const int32_t *shift, int shift_axis, int conj,
                             int nmod, const int32_t *moduli, const int32_t *roots,
                             int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                             int nthreads);
int emublas_oz_residues_3m(int dtype, int64_t rows, int64_t cols,
                           const void *Xr, const void *Xi, int64_t rsx, int64_t csx,
                           const int32_t *shift, int shift_axis, int conj,
                           int nmod, const int32_t *moduli,
                           int8_t *out, int64_t plane_stride, int64_t rso, int64_t cso,
                           int nthreads);
int emublas_oz_crt_accumulate(int64_t m, int64_t n,
                              const int32_t *X1, int64_t rs1, int64_t cs1, int32_t w1,
                              const int32_t *X2, int64_t rs2, int64_t cs2, int32_t w2,
                              int32_t modulus, double big_hi, double big_lo,
                              double *acc_hi, double *acc_lo,
                              int first, int uplo, int nthreads);
int emublas_oz_crt_finalize(int64_t m, int64_t n,
                            const double *re_hi, const double *re_lo,
                            const double *im_hi, const double *im_lo,
                            double P_hi, double P_lo,
                            const int32_t *row_shift, const int32_t *col_shift,
                            double alpha_re, double alpha_im, double beta_re, double beta_im,
                            int out_dtype, void *out, int64_t rso, int64_t cso,
                            int uplo, int nthreads);
const char *emublas_oz_kernel_name(void);
int emublas_oz_row_stats(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                         int64_t rsx, int64_t csx, double *rowmax, double *sumsq, double *l1,
                         int nthreads);
int emublas_oz_bound_int8(int dtype, int64_t rows, int64_t cols, const void *Xr, const void *Xi,
                          int64_t rsx, int64_t csx, const int32_t *ea, int8_t *out, int64_t rso,
                          int64_t cso, int nthreads);
int emublas_oz_force_generic(int flag);
"""


def _compile_args() -> list[str]:
    if sys.platform == "win32":  # MSVC: the sources need pthreads; not supported yet
        return ["/O2"]
    return [
        "-O3",
        "-std=c11",
        "-pthread",
        "-fvisibility=hidden",  # only PyInit__cpu needs to be exported
        "-ffp-contract=fast",  # FMAs in the float kernel (exact either way)
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
    ]


def make_builder(absolute_paths: bool = False) -> cffi.FFI:
    """The FFI builder.  Paths are relative to the project root (where setup.py
    runs) unless absolute_paths is set."""
    def path(p: str) -> str:
        return p if absolute_paths else os.path.relpath(p, ROOT)

    builder = cffi.FFI()
    builder.cdef(CDEF)
    builder.set_source(
        "emublas._kernels._cpu",
        '#include "emublas_cpu.h"',
        sources=sorted(path(p) for p in glob.glob(os.path.join(CPU_DIR, "*.c"))),
        depends=sorted(path(p) for p in glob.glob(os.path.join(CPU_DIR, "*.h"))),
        include_dirs=[path(CPU_DIR)],
        extra_compile_args=_compile_args(),
        extra_link_args=[] if sys.platform == "win32" else ["-pthread"],
        # One file name (_cpu.cpython-3XX-...so) whether setuptools or
        # compile() below builds it, so neither build shadows the other.
        py_limited_api=False,
    )
    return builder


ffibuilder = make_builder(absolute_paths=__name__ == "__main__")

if __name__ == "__main__":
    # Build under build/cffi, then put the module where `import
    # emublas._kernels._cpu` finds it, replacing any other build of it (a
    # stale _cpu.abi3.so from pip would otherwise be shadowed, or shadow).
    built = ffibuilder.compile(tmpdir=os.path.join(ROOT, "build", "cffi"), verbose=True)
    for old in glob.glob(os.path.join(PACKAGE_DIR, "_cpu.*so")) + glob.glob(
        os.path.join(PACKAGE_DIR, "_cpu.*pyd")
    ):
        os.remove(old)
    shutil.copy2(built, os.path.join(PACKAGE_DIR, os.path.basename(built)))
    print(f"installed {os.path.basename(built)} into {PACKAGE_DIR}")
