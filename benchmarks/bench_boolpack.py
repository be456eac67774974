"""boolpack: 0/1 and integer products by AND + popcount, against BLAS, numpy and Ozaki-II.

CPU parts (default):

* ``binary``: 0/1 n x n matrices.  boolpack end to end (uint8 in, packing
  included, int64 out), its GEMM alone on prepacked operands, OpenBLAS sgemm
  on the same data as float32 (exact too: counts < 2^24), and numpy's integer
  matmul (not a BLAS path: timed at ``--numpy-n``, normalized by 2n^3/t).
* ``bits``: signed integers of 1..16 bits at ``--bits-n``, boolpack
  (one Boolean product per pair of non-empty planes) next to
  ``emublas.intmatmul(..., backend="ozaki2")``: where the crossover is.
* ``error``: float64 N(0,1) data at ``--err-n``, boolpack gemm at several
  ``bits`` next to ozaki2 (default moduli) and native dgemm; error is
  max|C - ref| / max(|A||B|) with ref from ozaki2 with 20 moduli.

GPU part (``--gpu``, needs cupy): 0/1 matrices at ``--gpu-n``: pack time,
GEMM time, end to end, normalized 2n^3/t, against cuBLAS int8 gemmEx (TN,
int32 out) in the same run, with the two results compared.

Timings are medians; OpenBLAS's idle threads spin about 0.1 s after a call,
so every CPU timing pauses 0.3 s before each call.  The 0/1 contenders are
timed in turns (one call of each per round), so that a passing load on a
shared machine hits them alike.

Usage::

    python3 benchmarks/bench_boolpack.py --out boolpack.json
    python3 benchmarks/bench_boolpack.py --gpu --skip-cpu --out boolpack_gpu.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics

import numpy as np
import scipy.linalg.blas as sblas

import emublas
from emublas._kernels import cpu
from emublas.backends.boolpack import kernels_cpu as boolpack_cpu
from emublas.info import cpu_model
from emublas.timing import cuda_median_time, interleaved, median_time

PAUSE = 0.3


def interleaved_medians(fns: dict, reps: int, pause: float = PAUSE) -> dict:
    """Median seconds of each function, the calls taken in turns (one warm-up each;
    see emublas.timing.interleaved)."""
    return {name: statistics.median(ts) for name, ts in interleaved(fns, reps, pause).items()}


def bench_binary(n: int, numpy_n: int, reps: int, rng) -> dict:
    a = rng.integers(0, 2, (n, n), dtype=np.uint8)
    b = rng.integers(0, 2, (n, n), dtype=np.uint8)
    af, bf = np.asfortranarray(a, np.float32), np.asfortranarray(b, np.float32)
    cf = np.empty((n, n), np.float32, order="F")
    pa, pb = boolpack_cpu.pack(a, 0), boolpack_cpu.pack(b, 1)
    out = np.empty((n, n), np.int64)
    ops = 2.0 * n**3
    res = {"n": n, "kernel": boolpack_cpu.kernel_name()}
    res.update(
        interleaved_medians(
            {
                "sgemm_s": lambda: sblas.sgemm(1.0, af, bf, c=cf, overwrite_c=1),
                "boolpack_end_to_end_s": lambda: boolpack_cpu.matmul01(a, b),
                "boolpack_gemm_s": lambda: boolpack_cpu.gemm(pa, pb, out),
                "boolpack_generic_gemm_s": lambda: boolpack_cpu.gemm(pa, pb, out, impl="generic"),
            },
            reps,
            pause=1.0,
        )
    )  # 0.3 s was measured too short for the call right after sgemm here
    res["pack_a_s"] = median_time(lambda: boolpack_cpu.pack(a, 0), reps, PAUSE)
    res["pack_b_s"] = median_time(lambda: boolpack_cpu.pack(b, 1), reps, PAUSE)  # C-ordered B
    ok = np.array_equal(boolpack_cpu.matmul01(a, b), sblas.sgemm(1.0, af, bf).astype(np.int64))
    res["exact_vs_sgemm"] = bool(ok)
    for key in ("sgemm_s", "boolpack_end_to_end_s", "boolpack_gemm_s", "boolpack_generic_gemm_s"):
        res[key.replace("_s", "_Tops")] = ops / res[key] / 1e12
    res["speedup_gemm_vs_sgemm"] = res["sgemm_s"] / res["boolpack_gemm_s"]
    res["speedup_end_to_end_vs_sgemm"] = res["sgemm_s"] / res["boolpack_end_to_end_s"]
    # numpy integer matmul: no BLAS, so at a smaller size
    an, bn = a[:numpy_n, :numpy_n].astype(np.int32), b[:numpy_n, :numpy_n].astype(np.int32)
    t_np = median_time(lambda: an @ bn, 1, PAUSE)
    res["numpy_int32_n"] = numpy_n
    res["numpy_int32_s"] = t_np
    res["numpy_int32_Tops"] = 2.0 * numpy_n**3 / t_np / 1e12
    res["speedup_gemm_vs_numpy_int"] = res["boolpack_gemm_Tops"] / res["numpy_int32_Tops"]
    return res


def bench_bits(n: int, reps: int, rng, widths) -> list[dict]:
    rows = []
    for w in widths:
        lo, hi = (0, 1) if w == 1 else (-(2 ** (w - 1)), 2 ** (w - 1) - 1)
        a = rng.integers(lo, hi, (n, n), endpoint=True).astype(np.int32)
        b = rng.integers(lo, hi, (n, n), endpoint=True).astype(np.int32)
        t_bp = median_time(lambda a=a, b=b: emublas.intmatmul(a, b, backend="boolpack"), reps, PAUSE)
        t_oz = median_time(lambda a=a, b=b: emublas.intmatmul(a, b, backend="ozaki2"), reps, PAUSE)
        same = np.array_equal(emublas.intmatmul(a, b, backend="boolpack"), emublas.intmatmul(a, b, backend="ozaki2"))
        rows.append(
            {
                "bits": w,
                "n": n,
                "boolpack_s": t_bp,
                "ozaki2_s": t_oz,
                "boolpack_over_ozaki2": t_bp / t_oz,
                "identical": bool(same),
            }
        )
        print(
            f"  bits {w:2d}: boolpack {t_bp * 1e3:9.1f} ms  ozaki2 {t_oz * 1e3:9.1f} ms  "
            f"ratio {t_bp / t_oz:6.2f}  identical={same}",
            flush=True,
        )
    return rows


def bench_error(n: int, reps: int, rng, bit_list) -> dict:
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    ref = emublas.gemm(1.0, a, b, backend="ozaki2", moduli=20)
    scale = float((np.abs(a) @ np.abs(b)).max())

    def err(c):
        return float(np.abs(c - ref).max() / scale)

    res = {
        "n": n,
        "native_dgemm": err(a @ b),
        "native_sgemm": err((a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)),
        "ozaki2_default": err(emublas.gemm(1.0, a, b, backend="ozaki2")),
    }
    res["ozaki2_s"] = median_time(lambda: emublas.gemm(1.0, a, b, backend="ozaki2"), reps, PAUSE)
    res["native_dgemm_s"] = median_time(lambda: emublas.gemm(1.0, a, b, backend="native"), reps, PAUSE)
    res["boolpack"] = []
    for bits in bit_list:
        c = emublas.gemm(1.0, a, b, backend="boolpack", bits=bits)
        t = median_time(lambda bits=bits: emublas.gemm(1.0, a, b, backend="boolpack", bits=bits), reps, PAUSE)
        res["boolpack"].append({"bits": bits, "error": err(c), "time_s": t})
        print(f"  bits {bits:2d}: error {err(c):.3e}  time {t * 1e3:.1f} ms", flush=True)
    return res


def bench_gpu(n: int, reps: int) -> dict:
    import cupy as cp

    from emublas.backends.boolpack import kernels_gpu as bg

    rng = cp.random.default_rng(0)
    a = (rng.random((n, n)) < 0.5).astype(cp.uint8)
    b = (rng.random((n, n)) < 0.5).astype(cp.uint8)
    cc = int(cp.cuda.Device().compute_capability)
    res = {
        "n": n,
        "cc": cc,
        "kernel": bg.kernel_for(cc),
        "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
    }
    pa, pb = bg.pack(a, 0), bg.pack(b, 1)
    out = cp.empty((n, n), cp.int32)
    res["pack_a_s"] = cuda_median_time(cp, lambda: bg.pack(a, 0), reps)
    res["pack_b_s"] = cuda_median_time(cp, lambda: bg.pack(b, 1), reps)
    res["gemm_s"] = cuda_median_time(cp, lambda: bg.gemm(pa, pb, out), reps)
    res["end_to_end_s"] = cuda_median_time(cp, lambda: bg.matmul01(a, b), reps)
    if res["kernel"] == "mma":
        res["gemm_popc_s"] = cuda_median_time(cp, lambda: bg.gemm(pa, pb, out, kernel="popc"), max(1, reps // 2))
    ops = 2.0 * n**3
    for key in ("gemm_s", "end_to_end_s", "gemm_popc_s"):
        if key in res:
            res[key.replace("_s", "_ops_per_s")] = ops / res[key]
    try:
        from cupy_backends.cuda.libs import cublas

        a8 = a.view(cp.int8)
        b8 = cp.ascontiguousarray(b.T).view(cp.int8)  # columns of B contiguous: the TN layout
        c32 = cp.empty((n, n), cp.int32)  # column-major C^T = row-major C
        one, zero = np.array(1, np.int32), np.array(0, np.int32)
        handle = cp.cuda.device.get_cublas_handle()

        def int8_gemm():
            # column-major: C^T (n x m) = B8 (as k x n, op T) ... written as C(m x n) col-major
            # with A^T: op(A)=A8^T where A8 is k x m column-major (= m x k row-major).
            cublas.gemmEx(
                handle,
                1,
                0,
                n,
                n,
                n,
                one.ctypes.data,
                a8.data.ptr,
                3,
                n,
                b8.data.ptr,
                3,
                n,
                zero.ctypes.data,
                c32.data.ptr,
                10,
                n,
                72,
                -1,
            )

        res["cublas_int8_s"] = cuda_median_time(cp, int8_gemm, reps)
        res["cublas_int8_ops_per_s"] = ops / res["cublas_int8_s"]
        # c32 column-major holds C[i, j] at i + j*n, i.e. row-major C^T
        res["identical_to_cublas"] = bool(cp.array_equal(bg.gemm(pa, pb, out), c32.T))
        res["speedup_gemm_vs_cublas_int8"] = res["cublas_int8_s"] / res["gemm_s"]
        res["speedup_end_to_end_vs_cublas_int8"] = res["cublas_int8_s"] / res["end_to_end_s"]
    except Exception as exc:  # report, do not hide, a failed comparison
        res["cublas_int8_error"] = f"{type(exc).__name__}: {exc}"
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=4096, help="0/1 size against sgemm")
    p.add_argument("--numpy-n", type=int, default=1024, help="size of numpy's integer matmul")
    p.add_argument("--bits-n", type=int, default=2048, help="size of the bit-width sweep")
    p.add_argument("--bits", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8, 10, 12, 14, 16])
    p.add_argument("--err-n", type=int, default=1024)
    p.add_argument("--err-bits", type=int, nargs="+", default=[4, 8, 12, 16, 20, 24])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--skip-cpu", action="store_true")
    p.add_argument("--skip", nargs="*", default=[], choices=["binary", "bits", "error"])
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--gpu-n", type=int, default=16384)
    p.add_argument("--out", default=None, help="JSON file")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    meta = {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "features": cpu.features(),
        "threads": cpu.default_threads(),
        "emublas": emublas.__version__,
    }
    result: dict = {"meta": meta}
    print(meta, flush=True)
    if not args.skip_cpu:
        if "binary" not in args.skip:
            r = result["binary"] = bench_binary(args.n, args.numpy_n, args.reps, rng)
            print(
                f"binary n={r['n']}: boolpack gemm {r['boolpack_gemm_s'] * 1e3:.1f} ms "
                f"({r['boolpack_gemm_Tops']:.2f} T), end to end {r['boolpack_end_to_end_s'] * 1e3:.1f} ms, "
                f"generic {r['boolpack_generic_gemm_s'] * 1e3:.1f} ms, sgemm {r['sgemm_s'] * 1e3:.1f} ms "
                f"({r['sgemm_Tops']:.3f} T): {r['speedup_gemm_vs_sgemm']:.1f}x "
                f"(end to end {r['speedup_end_to_end_vs_sgemm']:.1f}x); numpy int32 n={r['numpy_int32_n']} "
                f"{r['numpy_int32_Tops'] * 1e3:.2f} G: {r['speedup_gemm_vs_numpy_int']:.0f}x; "
                f"pack A {r['pack_a_s'] * 1e3:.1f} ms, B {r['pack_b_s'] * 1e3:.1f} ms; exact={r['exact_vs_sgemm']}",
                flush=True,
            )
        if "bits" not in args.skip:
            print(f"bits sweep n={args.bits_n}", flush=True)
            result["bits"] = bench_bits(args.bits_n, max(1, args.reps // 2), rng, args.bits)
        if "error" not in args.skip:
            print(f"error vs bits n={args.err_n}", flush=True)
            result["error"] = bench_error(args.err_n, max(1, args.reps // 2), rng, args.err_bits)
            e = result["error"]
            print(
                f"  native dgemm {e['native_dgemm']:.3e}, sgemm {e['native_sgemm']:.3e}, "
                f"ozaki2 {e['ozaki2_default']:.3e} ({e['ozaki2_s'] * 1e3:.1f} ms), "
                f"dgemm {e['native_dgemm_s'] * 1e3:.1f} ms",
                flush=True,
            )
    if args.gpu:
        result["gpu"] = g = bench_gpu(args.gpu_n, args.reps)
        print(json.dumps(g, indent=1), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
