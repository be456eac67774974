"""strassen (reference implementation) against native dgemm/zgemm: time per level, in one run.

    python3 benchmarks/bench_strassen.py --sizes 2048 4096 --levels 0 1 2 --reps 3
"""
from __future__ import annotations

import argparse

import numpy as np
import scipy.linalg.blas as sblas

from _timing import median_time  # benchmarks/ is on sys.path when a script runs
import emublas
from emublas.info import cpu_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtypes", nargs="+", default=["d"])
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    rng = np.random.default_rng(1)
    print(f"CPU: {cpu_model()}")
    print("| routine | n | native [s] | levels | strassen [s] | speed vs native | normwise error vs native |")
    print("|---|---|---|---|---|---|---|")
    for prefix in args.dtypes:
        for n in args.sizes:
            a = np.asfortranarray(rng.standard_normal((n, n)))
            b = np.asfortranarray(rng.standard_normal((n, n)))
            if prefix in "cz":
                a = a + 1j * rng.standard_normal((n, n))
                b = b + 1j * rng.standard_normal((n, n))
            native = getattr(sblas, prefix + "gemm")
            t_nat = median_time(lambda: native(1.0, a, b), args.reps)
            ref = native(1.0, a, b)
            for lv in args.levels:
                run = getattr(emublas, prefix + "gemm")
                t = median_time(lambda: run(1.0, a, b, backend="strassen", levels=lv), args.reps)
                err = np.linalg.norm(run(1.0, a, b, backend="strassen", levels=lv) - ref) / np.linalg.norm(ref)
                print(f"| {prefix}gemm | {n} | {t_nat:.3f} | {lv} | {t:.3f} | {t_nat / t:.2f} | {err:.1e} |",
                      flush=True)


if __name__ == "__main__":
    main()
