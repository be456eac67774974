"""ozaki2 on one GPU against the same call spread over all GPUs (issue #9, part 1).

    python3 benchmarks/bench_ozaki2_multigpu.py --n 32768 --json out.json     (a 2-GPU machine)

ZGEMM (2M, 16 moduli) and DGEMM (16 moduli), n×n×n, φ = 0.5 inputs; CUDA events on the
arrays' device (which waits for the others' copies), median of --reps after a warm-up;
results compared bit for bit with the one-GPU result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emublas.timing import cuda_median_time  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=32768)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import cupy as cp

    import emublas
    from emublas.backends.ozaki2 import routines

    n, ndev = args.n, cp.cuda.runtime.getDeviceCount()
    names = [cp.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(ndev)]
    peer = [[i == j or bool(cp.cuda.runtime.deviceCanAccessPeer(i, j)) for j in range(ndev)] for i in range(ndev)]
    print(f"{ndev} GPUs: {names}; peer access: {peer}", flush=True)
    rows = []
    for dtype, fn, flops in (("complex128", emublas.zgemm, 8 * n**3), ("float64", emublas.dgemm, 2 * n**3)):
        rs = cp.random.RandomState(1)
        parts = []
        for _ in range(2):
            x = (rs.random_sample((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
            if dtype == "complex128":
                x = x + 1j * ((rs.random_sample((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n))))
            parts.append(cp.asfortranarray(x))
            del x
            cp.get_default_memory_pool().free_all_blocks()
        a, b = parts
        one_t = cuda_median_time(cp, lambda a=a, b=b: fn(1.0, a, b, backend="ozaki2", moduli=16), args.reps)
        one = fn(1.0, a, b, backend="ozaki2", moduli=16)
        row = {"op": dtype, "n": n, "one_gpu_s": one_t, "one_gpu_rate": flops / one_t}
        for split in ("moduli", "tiles"):
            try:
                t = cuda_median_time(
                    cp,
                    lambda a=a, b=b, split=split: fn(
                        1.0, a, b, backend="ozaki2", moduli=16, devices="all", split=split
                    ),
                    args.reps,
                )
                res = fn(1.0, a, b, backend="ozaki2", moduli=16, devices="all", split=split)
                row[split] = {
                    "s": t,
                    "rate": flops / t,
                    "speedup": one_t / t,
                    "identical": bool((res == one).all()),
                    "plan": routines.last_run()["gpu_plan"],
                }
                del res
            except cp.cuda.memory.OutOfMemoryError as exc:
                row[split] = {"error": str(exc)}
            cp.get_default_memory_pool().free_all_blocks()
        print(json.dumps(row), flush=True)
        rows.append(row)
        del a, b, one
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpus": names, "peer": peer, "rows": rows, "command": " ".join(sys.argv)}, fh, indent=1)


if __name__ == "__main__":
    main()
