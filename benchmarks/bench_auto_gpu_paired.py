"""auto against native on cupy arrays, call for call: what the choice costs a call that stays native.

For each case (routine and n): rounds of back-to-back batches, native then auto in
each round on the same arrays (CUDA events around each batch: device time per call;
wall time per call on the host), then the medians over the rounds and auto's
choice.  ``cupy.matmul`` (dgemm/zgemm cases) times the same product without
emublas's front, to show what the front itself costs.  Where the host's time per
call exceeds the device's, the calls are host-bound and the front's cost shows
in full.

Usage::

    python3 benchmarks/bench_auto_gpu_paired.py --cases dgemm:1024 dsyrk:4096 dsyrk:8192 --rounds 5 --reps 20
"""

from __future__ import annotations

import argparse
import json
import statistics

import emublas
from emublas.timing import cuda_batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["dgemm:1024", "dsyrk:4096", "dsyrk:8192"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="calls per batch")
    ap.add_argument("--json")
    args = ap.parse_args()

    import cupy

    rng = cupy.random.default_rng(0)
    rows = []
    print("| case | cupy.matmul µs | native µs (host) | auto µs (host) | auto/native (device) | auto chose |")
    print("|---|---:|---:|---:|---:|---|")
    for case in args.cases:
        op, n = case.split(":")
        n = int(n)
        a = cupy.asfortranarray(rng.random((n, n)) - 0.5)
        if op[0] == "z":
            a = a + 1j * cupy.asfortranarray(rng.random((n, n)) - 0.5)
        fn = getattr(emublas, op)
        args_ = (1.0, a) if op[1:] in ("syrk", "herk") else (1.0, a, a)
        runs = {"native": [], "auto": [], "cupy": []}
        for _ in range(args.rounds):
            if op[1:] == "gemm":
                runs["cupy"].append(cuda_batch(cupy, lambda: cupy.matmul(a, a), args.reps, warmups=3))
            for be in ("native", "auto"):
                runs[be].append(cuda_batch(cupy, lambda be=be: fn(*args_, backend=be), args.reps, warmups=3))
        med = {k: tuple(statistics.median(x) for x in zip(*v)) for k, v in runs.items() if v}
        chose = emublas.auto_last()["backend"]
        ratio = med["auto"][1] / med["native"][1]
        rows.append({"case": case, "rounds": runs, "medians": med, "auto_chose": chose, "auto_vs_native": ratio})
        cp_ = f"{1e6 * med['cupy'][1]:.1f}" if "cupy" in med else "–"
        print(
            f"| {op} {n} | {cp_} | {1e6 * med['native'][1]:.1f} ({1e6 * med['native'][0]:.1f}) |"
            f" {1e6 * med['auto'][1]:.1f} ({1e6 * med['auto'][0]:.1f}) | {ratio:.3f} | {chose} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
