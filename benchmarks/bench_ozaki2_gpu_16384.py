"""ozaki2 against cuBLAS at one large n on a GPU: dgemm, zgemm and zherk against ozaki2's own zgemm.

    python3 benchmarks/bench_ozaki2_gpu_16384.py --n 16384 --ops dgemm zgemm zherk --rounds 3 --json out.json

Each op's calls alternate per round (cuBLAS, ozaki2 and, for zherk, ozaki2's zgemm
of the same product ``A·Aᴴ``), each timed with CUDA events after a warm-up, so that
a drift of the device lands on every column; printed are medians with [min–max]
and the ratios of the medians.  The zherk row's ``herk / own zgemm`` is issue
#14's ZHERK target (≤ 0.52 at n = 16384).  Inputs are (rand − 0.5)·exp(φ·randn),
φ = 0.5 by default, ozaki2 at its default moduli and mode unless given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import cupy as cp

import emublas

sys.path.insert(0, "benchmarks")
from bench_ozaki2_gpu import wide

from emublas.timing import cuda_times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--ops", nargs="+", choices=("dgemm", "zgemm", "zherk"), default=["dgemm", "zgemm", "zherk"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phi", type=float, default=0.5)
    ap.add_argument("--moduli", type=int, default=None)
    ap.add_argument("--json")
    args = ap.parse_args()
    n = args.n
    oz = {} if args.moduli is None else {"moduli": args.moduli}
    rows = []
    for op in args.ops:
        dt = "float64" if op == "dgemm" else "complex128"
        a = wide(cp, 1, (n, n), args.phi, dt)
        if op == "zherk":
            ah = cp.asfortranarray(a.conj().T)
            calls = {
                "cublas": lambda a=a: emublas.zherk(1.0, a, backend="native"),
                "ozaki2": lambda a=a: emublas.zherk(1.0, a, backend="ozaki2", **oz),
                "ozaki2_zgemm": lambda a=a, ah=ah: emublas.zgemm(1.0, a, ah, backend="ozaki2", **oz),
            }
        else:
            b = wide(cp, 2, (n, n), args.phi, dt)
            fn = getattr(emublas, op)
            calls = {
                "cublas": lambda a=a, b=b, fn=fn: fn(1.0, a, b, backend="native"),
                "ozaki2": lambda a=a, b=b, fn=fn: fn(1.0, a, b, backend="ozaki2", **oz),
            }
        times: dict[str, list[float]] = {k: [] for k in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                times[name] += cuda_times(cp, call, 1)[1]
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {"op": op, "n": n, "phi": args.phi, "times_s": times, "median_s": med}
        row["cublas_over_ozaki2"] = med["cublas"] / med["ozaki2"]
        if op == "zherk":
            row["herk_over_own_zgemm"] = med["ozaki2"] / med["ozaki2_zgemm"]
        rows.append(row)
        cells = "  ".join(
            f"{k} {med[k] * 1e3:.1f} ms [{min(v) * 1e3:.1f}–{max(v) * 1e3:.1f}]" for k, v in times.items()
        )
        extra = f"  herk / own zgemm {row['herk_over_own_zgemm']:.3f}" if op == "zherk" else ""
        print(f"{op} {n}  {cells}  cuBLAS/ozaki2 {row['cublas_over_ozaki2']:.2f}{extra}", flush=True)
        del a, calls
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
