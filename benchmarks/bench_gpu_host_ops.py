"""Host cost of the operations an ozaki2 GPU call issues from Python, one by one.

Each operation runs ``--reps`` times back to back (nothing synchronises in between;
the device's work is tiny) and the median of ``--rounds`` rounds of µs per operation
is printed: allocations from cupy's pool, views, a kernel launch of ozaki2.cu with few
and with many arguments (grids that do no work), cuBLAS's int8 gemmEx through ctypes
(an 8×8×32 product; 4096³ through gemmEx and cuBLASLt, at most 200 back to back so
that the launch queue never fills), the current-device and stream queries, and a small dgemm through
cupy's ``@`` and through emublas's front with the native backend.  It says which of a
call's steps cost host time, and so where the GPU waits for the host.

Usage::

    python3 benchmarks/bench_gpu_host_ops.py [--reps 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    import cupy

    import emublas
    from emublas._kernels import cublas_ext, cublaslt
    from emublas.backends.ozaki2 import kernels_gpu as kg

    i64, ptr = np.int64, np.uintp
    v = cupy.zeros(4096, np.float64)
    w = cupy.zeros((64, 64), np.int32)
    a8 = cupy.zeros((32, 32), np.int8)
    c32 = cupy.zeros((32, 32), np.int32)
    plan = kg._fn("oz_plan")
    wmax = kg._fn("oz_wmax")
    big = cupy.zeros((4096, 4096), np.int8)
    out = cupy.empty((4096, 4096), np.int32)
    m64 = cupy.asfortranarray(cupy.ones((64, 64), np.float64))
    handle = cupy.cuda.device.get_cublas_handle()
    stream = cupy.cuda.get_current_stream().ptr
    ops = {
        "cupy.empty(4096)": lambda: cupy.empty(4096, np.float64),
        "cupy.zeros(4096)": lambda: cupy.zeros(4096, np.float64),
        "view v[:100]": lambda: v[:100],
        "v.astype(same, copy=False)": lambda: v.astype(np.float64, copy=False),
        "cupy.ascontiguousarray(v)": lambda: cupy.ascontiguousarray(v),
        "launch, 6 args (oz_wmax, 0 rows)": lambda: wmax((1, 1), (256,), (i64(0), i64(0), w, i64(64), v, v)),
        "launch, 15 args (oz_plan, 0 rows)": lambda: plan(
            (1,),
            (256,),
            (
                i64(0),
                ptr(v.data.ptr),
                ptr(v.data.ptr),
                ptr(v.data.ptr),
                ptr(0),
                np.float64(1),
                np.float64(1),
                np.float64(1),
                np.float64(1),
                np.float64(1),
                np.float64(1),
                v,
                v,
                v,
                v,
            ),
        ),
        "kernel lookup (kernels_gpu._fn)": lambda: kg._fn("oz_plan"),
        "cublas gemmEx int8 8x8x32 (ctypes)": lambda: cublas_ext.gemm_i8(
            handle, stream, 1, 0, 8, 8, 32, a8.data.ptr, 32, a8.data.ptr, 32, c32.data.ptr, 32
        ),
        "cublas gemmEx int8 4096^3 (ctypes)": lambda: cublas_ext.gemm_i8(
            handle, stream, 1, 0, 4096, 4096, 4096, big.data.ptr, 4096, big.data.ptr, 4096, out.data.ptr, 4096
        ),
        "cuBLASLt int8 4096^3, heuristic's first": lambda: cublaslt.matmul_i8_tn(
            4096, 4096, 4096, big.data.ptr, 4096, big.data.ptr, 4096, out.data.ptr, 4096
        ),
        "cuBLASLt int8 4096^3, timed choice": lambda: cublaslt.matmul_i8_tn(
            4096, 4096, 4096, big.data.ptr, 4096, big.data.ptr, 4096, out.data.ptr, 4096, algo="best"
        ),
        "cupy.cuda.Device()": lambda: cupy.cuda.Device(),
        "runtime.getDevice()": lambda: cupy.cuda.runtime.getDevice(),
        "get_current_stream()": lambda: cupy.cuda.get_current_stream(),
        "runtime.memGetInfo()": lambda: cupy.cuda.runtime.memGetInfo(),
        "cupy a @ b, n = 64 (cuBLAS)": lambda: m64 @ m64,
        "emublas.dgemm(1, a, b, backend='native'), n = 64": lambda: emublas.dgemm(1.0, m64, m64, backend="native"),
    }
    rows = []
    for name, fn in ops.items():
        fn()
        reps = min(args.reps, 200) if "4096" in name else args.reps  # within the launch queue
        per = []
        for _ in range(args.rounds):
            cupy.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            per.append(1e6 * (time.perf_counter() - t0) / reps)
        rows.append((name, statistics.median(per), min(per), max(per)))
    print(f"host µs per operation ({args.reps} back to back, median of {args.rounds} rounds [min–max])")
    print("| operation | µs | min–max |")
    print("|---|---:|---|")
    for name, med, lo, hi in rows:
        print(f"| {name} | {med:.2f} | {lo:.2f}–{hi:.2f} |")


if __name__ == "__main__":
    main()
