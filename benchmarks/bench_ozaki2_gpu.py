"""ozaki2 on the GPU against cuBLAS, side by side in one run (issue #4's targets).

    python3 benchmarks/bench_ozaki2_gpu.py --json out.json          (on a GPU machine)
    python3 benchmarks/bench_ozaki2_gpu.py --quick                  (small sizes, a smoke run)

Every time is a median of CUDA-event timings after a warm-up (emublas.timing).
Rates are nominal: 2mnk flops for real GEMM, 8mnk for complex GEMM, 4n²k for
ZHERK (its half of the complex product), whatever the emulation does inside.
Rows:

* dgemm / zgemm at several n: cuBLAS native, cuBLAS with
  ``CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH`` (math mode 8; reported as run, it
  may fall back to native arithmetic on this architecture), ozaki2 per moduli
  count, each with the max relative error of 64 sampled entries against the
  exact product (Python integers);
* zherk n=k: cuBLAS ZHERK, ozaki2 ZHERK, ozaki2 ZGEMM of the same product;
* the int8 gemmEx rate alone at the size of one modulus's product, and
  ozaki2's phase split (CUDA events around each phase; one profiled call);
* intmatmul on int32 data (|x| < 2^24, so the exact product fits int64) against
  cupy's integer matmul (int64, wraps on overflow; here it cannot);
* error against moduli 8…22 at one n for φ = 0.5 and 4 beside native's error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emublas.timing import cuda_median_time, elapsed  # noqa: E402


def wide(cp, rng_seed, shape, phi, dtype):
    """(rand − 0.5)·exp(φ·randn), Fortran-ordered on the GPU."""
    rs = cp.random.RandomState(rng_seed)
    x = (rs.random_sample(shape) - 0.5) * cp.exp(phi * rs.standard_normal(shape))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (rs.random_sample(shape) - 0.5) * cp.exp(phi * rs.standard_normal(shape))
    return cp.asfortranarray(x.astype(dtype))


def sampled_error(cp, op, a, b, got, samples=64, seed=7):
    """Max and median relative error of sampled entries against the exact product."""
    from emublas._reference import exact_dot, exact_entries

    rng = np.random.default_rng(seed)
    m, n = got.shape
    rows, cols = rng.integers(0, m, samples), rng.integers(0, n, samples)
    if op == "herk":  # the referenced (upper) triangle
        rows, cols = np.minimum(rows, cols), np.maximum(rows, cols)
    ar = cp.asnumpy(a[cp.asarray(rows)])
    if op == "gemm":
        bc = cp.asnumpy(b[:, cp.asarray(cols)])
        exact = exact_entries("gemm", ar, bc, np.arange(samples), np.arange(samples))
    else:  # herk: a_i · conj(a_j)
        ac = cp.asnumpy(a[cp.asarray(cols)])
        exact = np.array([exact_dot(ar[t], np.conj(ac[t])) for t in range(samples)])
    vals = cp.asnumpy(got[cp.asarray(rows), cp.asarray(cols)])
    rel = np.abs(vals - exact) / np.maximum(np.abs(exact), np.finfo(np.float64).tiny)
    return float(rel.max()), float(np.median(rel))


class MathMode:
    """cupy's cuBLAS handle in another math mode (and the eager emulation strategy) for a while."""

    def __init__(self, cp, mode):
        from cupy_backends.cuda.libs import cublas

        self.cublas, self.handle, self.mode = cublas, cp.cuda.device.get_cublas_handle(), mode
        self.note = ""

    def __enter__(self):
        self.old = self.cublas.getMathMode(self.handle)
        self.cublas.setMathMode(self.handle, self.mode)
        try:  # cublasSetEmulationStrategy(handle, CUBLAS_EMULATION_STRATEGY_EAGER = 2), cuBLAS >= 12.9
            import ctypes

            lib = ctypes.CDLL("libcublas.so." + str(self.cublas.getVersion(self.handle) // 10000))
            rc = lib.cublasSetEmulationStrategy(ctypes.c_void_p(self.handle), 2)
            self.note = f"eager strategy rc={rc}"
        except Exception as exc:
            self.note = f"no emulation strategy call ({type(exc).__name__})"
        return self

    def __exit__(self, *exc):
        self.cublas.setMathMode(self.handle, self.old)
        return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()

    import cupy as cp

    import emublas
    from emublas.backends.ozaki2 import calls, routines
    from emublas.backends.ozaki2 import kernels_gpu as kg

    reps = args.reps
    big = 4096 if args.quick else 16384
    mid = 2048 if args.quick else 8192
    sizes_d = [1024, 2048, 4096] if args.quick else [4096, 8192, 16384]
    sizes_z = [1024, 2048] if args.quick else [4096, 16384]
    dev = cp.cuda.runtime.getDeviceProperties(0)
    rows = []
    from cupy_backends.cuda.libs import cublas

    meta = {
        "gpu": dev["name"].decode(),
        "cupy": cp.__version__,
        "emublas": emublas.__version__,
        "cublas": cublas.getVersion(cp.cuda.device.get_cublas_handle()),
        "reps": reps,
        "command": " ".join(sys.argv),
    }
    print(f"GPU: {meta['gpu']}  cupy {meta['cupy']}  cuBLAS {meta['cublas']}", flush=True)

    def record(**row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    def timed(fn):
        return cuda_median_time(cp, fn, reps)

    # ---- DGEMM / ZGEMM ---------------------------------------------------------
    for dtype, sizes, counts in (("float64", sizes_d, (13, 14, 15, 16)), ("complex128", sizes_z, (14, 15, 16))):
        cplx = dtype == "complex128"
        name = "zgemm" if cplx else "dgemm"
        fn = emublas.zgemm if cplx else emublas.dgemm
        for n in sizes:
            a, b = wide(cp, 1, (n, n), 0.5, dtype), wide(cp, 2, (n, n), 0.5, dtype)
            flops = (8 if cplx else 2) * n**3
            t_nat = timed(lambda a=a, b=b: fn(1.0, a, b, backend="native"))
            c = fn(1.0, a, b, backend="native")
            e_nat = sampled_error(cp, "gemm", a, b, c)
            record(
                op=name, n=n, impl="cuBLAS", t=t_nat, rate=flops / t_nat, ratio=1.0, err_max=e_nat[0], err_med=e_nat[1]
            )
            with MathMode(cp, 8) as mm:
                t_emu = timed(lambda a=a, b=b: fn(1.0, a, b, backend="native"))
                c = fn(1.0, a, b, backend="native")
            e_emu = sampled_error(cp, "gemm", a, b, c)
            record(
                op=name,
                n=n,
                impl="cuBLAS FP64_EMULATED_FIXEDPOINT",
                t=t_emu,
                rate=flops / t_emu,
                ratio=t_nat / t_emu,
                err_max=e_emu[0],
                err_med=e_emu[1],
                note=mm.note,
            )
            for count in counts:
                t = timed(lambda a=a, b=b, count=count: fn(1.0, a, b, backend="ozaki2", moduli=count))
                c = fn(1.0, a, b, backend="ozaki2", moduli=count)
                e = sampled_error(cp, "gemm", a, b, c)
                record(
                    op=name,
                    n=n,
                    impl=f"ozaki2 {count} moduli",
                    t=t,
                    rate=flops / t,
                    ratio=t_nat / t,
                    err_max=e[0],
                    err_med=e[1],
                    plan=routines.last_run().get("gpu_plan"),
                )
            del a, b, c
            cp.get_default_memory_pool().free_all_blocks()

    # ---- phase split and gemmEx alone at the big size ---------------------------
    n = big
    for dtype in ("float64", "complex128"):
        a, b = wide(cp, 3, (n, n), 0.5, dtype), wide(cp, 4, (n, n), 0.5, dtype)
        fn = emublas.zgemm if dtype == "complex128" else emublas.dgemm
        calls.PROFILE_GPU = True
        fn(1.0, a, b, backend="ozaki2")
        cp.cuda.Device().synchronize()
        wall = elapsed(lambda a=a, b=b: fn(1.0, a, b, backend="ozaki2"))  # the host's wall time of one call
        calls.PROFILE_GPU = False
        info = routines.last_run()
        gpu_total = sum(v for k, v in info["phases"].items() if k in ("residues", "gemm", "crt"))
        record(
            op=("zgemm" if dtype == "complex128" else "dgemm") + " phases",
            n=n,
            phases=info["phases"],
            wall=wall,
            gemm_share=info["phases"]["gemm"] / gpu_total,
            plan=info["gpu_plan"],
        )
        del a, b
    kp = kg.pad(n)
    x8 = cp.random.randint(-127, 128, (n, kp), dtype=np.int8)
    y8 = cp.random.randint(-127, 128, (n, kp), dtype=np.int8)
    w = cp.empty((n, n), np.int32)
    t = timed(lambda x8=x8, y8=y8, w=w: kg.gemm_tn(x8.data.ptr, y8.data.ptr, n, n, kp, kp, kp, w, n))
    record(op="int8 gemmEx alone", n=n, t=t, rate=2 * n**3 / t)
    del x8, y8, w
    cp.get_default_memory_pool().free_all_blocks()

    # ---- ZHERK -------------------------------------------------------------------
    n = big
    a = wide(cp, 5, (n, n), 0.5, "complex128")
    t_nat = timed(lambda a=a: emublas.zherk(1.0, a, backend="native"))
    t_her = timed(lambda a=a: emublas.zherk(1.0, a, backend="ozaki2"))
    c = emublas.zherk(1.0, a, backend="ozaki2")
    e_her = sampled_error(cp, "herk", a, None, c)
    ah = cp.asfortranarray(a.conj().T)
    t_gem = timed(lambda a=a, ah=ah: emublas.zgemm(1.0, a, ah, backend="ozaki2"))
    flops = 4 * n**3
    record(
        op="zherk",
        n=n,
        k=n,
        t_native=t_nat,
        t_ozaki2=t_her,
        t_ozaki2_zgemm=t_gem,
        vs_cublas_zherk=t_nat / t_her,
        vs_own_zgemm=t_gem / t_her,
        rate=flops / t_her,
        err_max=e_her[0],
    )
    del a, ah, c
    cp.get_default_memory_pool().free_all_blocks()

    # ---- intmatmul -----------------------------------------------------------------
    n = mid
    rs = cp.random.RandomState(9)
    ai = rs.randint(-(2**24), 2**24, (n, n)).astype(np.int32)
    bi = rs.randint(-(2**24), 2**24, (n, n)).astype(np.int32)
    t_ours = timed(lambda ai=ai, bi=bi: emublas.intmatmul(ai, bi, backend="ozaki2"))
    a64, b64 = ai.astype(np.int64), bi.astype(np.int64)
    t_cupy = cuda_median_time(cp, lambda a64=a64, b64=b64: a64 @ b64, max(1, reps // 2))
    same = bool((emublas.intmatmul(ai, bi, backend="ozaki2") == a64 @ b64).all())
    record(op="intmatmul int32", n=n, t_ozaki2=t_ours, t_cupy_int64=t_cupy, speedup=t_cupy / t_ours, equal=same)
    del ai, bi, a64, b64

    # ---- error against moduli ------------------------------------------------------
    n = mid
    for phi in (0.5, 4.0):
        a, b = wide(cp, 11, (n, n), phi, "float64"), wide(cp, 12, (n, n), phi, "float64")
        e_nat = sampled_error(cp, "gemm", a, b, emublas.dgemm(1.0, a, b, backend="native"))
        for count in range(8, 23):
            c = emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=count)
            e = sampled_error(cp, "gemm", a, b, c)
            record(
                op="dgemm error",
                n=n,
                phi=phi,
                moduli=count,
                err_max=e[0],
                err_med=e[1],
                native_err_max=e_nat[0],
                native_err_med=e_nat[1],
            )
        del a, b, c

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    main()
