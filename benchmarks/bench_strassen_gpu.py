"""strassen on cupy arrays (fused CUDA sums and chain writes, cuBLAS leaves) against cuBLAS, same run, CUDA events.

python3 benchmarks/bench_strassen_gpu.py --sizes 8192 16384 --levels 1 2 --dtypes d s z --reps 5
"""

from __future__ import annotations

import argparse

import emublas
from emublas.backends import strassen
from emublas.timing import cuda_median_time


def main() -> None:
    import cupy as cp

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384])
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtypes", nargs="+", default=["d", "s", "z"])
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    print(f"GPU: {name.decode() if isinstance(name, bytes) else name}, cupy {cp.__version__}")
    print(
        "| routine | n | cuBLAS (emublas native) [ms] | levels | strassen [ms] | speed vs cuBLAS"
        " | normwise diff | impl |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for prefix in args.dtypes:
        dtype = {"s": cp.float32, "d": cp.float64, "c": cp.complex64, "z": cp.complex128}[prefix]
        for n in args.sizes:
            rng = cp.random.default_rng(n)
            a = cp.asfortranarray(rng.standard_normal((n, n)).astype(dtype))
            b = cp.asfortranarray(rng.standard_normal((n, n)).astype(dtype))
            if prefix in "cz":
                a += 1j * rng.standard_normal((n, n)).astype(dtype)
                b += 1j * rng.standard_normal((n, n)).astype(dtype)
            gemm = getattr(emublas, prefix + "gemm")
            t_nat = cuda_median_time(cp, lambda: gemm(1.0, a, b, backend="native"), args.reps)
            ref = gemm(1.0, a, b, backend="native")
            for lv in args.levels:
                t = cuda_median_time(cp, lambda: gemm(1.0, a, b, backend="strassen", levels=lv), args.reps)
                diff = float(cp.linalg.norm(gemm(1.0, a, b, backend="strassen", levels=lv) - ref) / cp.linalg.norm(ref))
                impl = strassen.last_run()["impl"]
                print(
                    f"| {prefix}gemm | {n} | {t_nat * 1e3:.1f} | {lv} | {t * 1e3:.1f} | {t_nat / t:.2f} | {diff:.1e} "
                    f"| {impl} |",
                    flush=True,
                )
            a = b = ref = None  # free before the next size
            cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
