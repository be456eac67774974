"""Kernel-by-kernel time of ozaki2 GPU calls, for a profiler.

Runs ``--calls`` emulated calls (after one warm-up) of each op on seeded
rand − 0.5 inputs (complex: both parts), Fortran order, accurate mode.  Meant
to run under Nsight Compute, which then lists every kernel's time::

    ncu --metrics gpu__time_duration.sum --print-summary per-kernel \\
        python3 benchmarks/bench_ozaki2_gpu_kernels.py --ops d z --n 4096 --moduli 16

Without a profiler it prints the median wall time per call (a sanity check).
"""

from __future__ import annotations

import argparse

import emublas
from emublas.timing import Timing, cuda_times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", choices=["d", "z"], default=["d", "z"])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--mode", default="accurate")
    ap.add_argument("--calls", type=int, default=1)
    ap.add_argument(
        "--no-warmup", action="store_true", help="one call per op, no warm-up (a profiler then sees only that call)"
    )
    args = ap.parse_args()

    import cupy

    rng = cupy.random.default_rng(0)
    for code in args.ops:
        n = args.n
        a, b = rng.random((n, n)) - 0.5, rng.random((n, n)) - 0.5
        if code == "z":
            a, b = a + 1j * (rng.random((n, n)) - 0.5), b + 1j * (rng.random((n, n)) - 0.5)
        a, b = cupy.asfortranarray(a), cupy.asfortranarray(b)
        f = getattr(emublas, code + "gemm")

        def call(f=f, a=a, b=b):
            return f(1.0, a, b, backend="ozaki2", moduli=args.moduli, mode=args.mode)

        if args.no_warmup:
            call()
            cupy.cuda.Device().synchronize()
            continue
        _, times = cuda_times(cupy, call, args.calls)
        print(f"{code}gemm n={n} moduli={args.moduli} {args.mode}: {Timing(times)}")


if __name__ == "__main__":
    main()
