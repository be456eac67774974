"""Error growth of Strassen–Winograd with the recursion depth (Higham, Accuracy and Stability, ch. 23).

Normwise error ‖C_strassen − C_ref‖_F / ‖C_ref‖_F per level for float32 and
float64, against the classical product in the same precision (native BLAS)
and against a higher-precision reference (float32: the float64 product;
float64: ozaki2 with 22 moduli, whose integer product is exact and whose
only rounding is the final one for these inputs, see the ozaki2 accuracy table).

    python3 benchmarks/bench_strassen_error.py --n 1024 --levels 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import emublas


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--levels", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.n
    a64 = rng.standard_normal((n, n))
    b64 = rng.standard_normal((n, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact64 = emublas.dgemm(1.0, a64, b64, backend="ozaki2", moduli=22)
    a32, b32 = a64.astype(np.float32), b64.astype(np.float32)
    exact32 = a32.astype(np.float64) @ b32.astype(np.float64)
    print(f"n = {n}, inputs standard normal (seed {args.seed})")
    print("| dtype | levels | vs classical (same precision) | vs higher-precision reference | classical vs reference |")
    print("|---|---|---|---|---|")
    for name, a, b, exact in (("float32", a32, b32, exact32), ("float64", a64, b64, exact64)):
        classical = emublas.gemm(1.0, a, b, backend="native").astype(np.float64)
        base = np.linalg.norm(classical - exact) / np.linalg.norm(exact)
        for lv in args.levels:
            c = emublas.gemm(1.0, a, b, backend="strassen", levels=lv).astype(np.float64)
            e_cls = np.linalg.norm(c - classical) / np.linalg.norm(classical)
            e_ref = np.linalg.norm(c - exact) / np.linalg.norm(exact)
            print(f"| {name} | {lv} | {e_cls:.2e} | {e_ref:.2e} | {base:.2e} |", flush=True)


if __name__ == "__main__":
    main()
