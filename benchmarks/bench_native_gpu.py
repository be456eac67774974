"""emublas's native backend on cupy arrays against cuBLAS called through cupy directly.

The native backend should cost nothing over the library it wraps: this times
``emublas.{d,z}gemm``, ``dsyrk`` and the gemm-derived ``zherk`` on cupy arrays
side by side with ``cupy.matmul`` (cuBLAS gemm) on the same data, with CUDA
events, median of repetitions after a warm-up, rotating among input sets so
that no run reads a cached operand.

Usage::

    python3 benchmarks/bench_native_gpu.py --sizes 4096 8192 --reps 10 --json out.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from emublas.timing import cuda_median_time


def main() -> None:
    import cupy as cp

    import emublas

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--json", default=None)
    args = p.parse_args()

    dev = cp.cuda.runtime.getDeviceProperties(0)
    rows = []
    for n in args.sizes:
        rng = cp.random.default_rng(n)
        a = [rng.standard_normal((n, n)) for _ in range(2)]
        za = [x + 1j * rng.standard_normal((n, n)) for x in a]
        it = iter(range(10**9))

        def pick(xs):
            return xs[next(it) % len(xs)]

        cases = [
            ("dgemm", 2 * n**3, lambda: emublas.dgemm(1.0, pick(a), a[0]), lambda: cp.matmul(pick(a), a[0])),
            ("zgemm", 8 * n**3, lambda: emublas.zgemm(1.0, pick(za), za[0]), lambda: cp.matmul(pick(za), za[0])),
            # rank-k: nominal flops are half a gemm; the reference is the full cuBLAS gemm
            ("dsyrk", n**3, lambda: emublas.dsyrk(1.0, pick(a)), lambda: cp.matmul(pick(a), a[0].T)),
            ("zherk", 4 * n**3, lambda: emublas.zherk(1.0, pick(za)), lambda: cp.matmul(pick(za), za[0].conj().T)),
        ]
        for name, flops, ours, ref in cases:
            t_ours = cuda_median_time(cp, ours, args.reps)
            t_ref = cuda_median_time(cp, ref, args.reps)
            rows.append(
                {
                    "routine": name,
                    "n": n,
                    "emublas_s": t_ours,
                    "cupy_matmul_s": t_ref,
                    "emublas_tflops": flops / t_ours / 1e12,
                    "speed_vs_matmul": t_ref / t_ours,
                }
            )
        a.clear()  # free the inputs before the next size
        za.clear()
        cp.get_default_memory_pool().free_all_blocks()

    name = dev["name"].decode() if isinstance(dev["name"], bytes) else dev["name"]
    from cupy_backends.cuda.libs import cublas

    meta = {
        "gpu": name,
        "cupy": cp.__version__,
        "numpy": np.__version__,
        "emublas": emublas.__version__,
        "cublas": cublas.getVersion(cp.cuda.device.get_cublas_handle()),
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=2)
    print(f"GPU: {name}, cupy {cp.__version__}, cuBLAS {meta['cublas']}")
    print(
        "| routine | n | emublas native [ms] | cupy.matmul [ms] | emublas TFLOP/s (nominal)"
        " | matmul time / emublas time |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['routine']} | {r['n']} | {r['emublas_s'] * 1e3:.2f} | {r['cupy_matmul_s'] * 1e3:.2f} |"
            f" {r['emublas_tflops']:.1f} | {r['speed_vs_matmul']:.2f} |"
        )


if __name__ == "__main__":
    main()
