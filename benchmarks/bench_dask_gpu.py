"""emublas.dask with ozaki2 on cupy chunks against the single call on the whole cupy arrays.

For each dtype: one n×n×n product with the inputs on the GPU, the single call
``emublas.gemm(..., backend="ozaki2")`` on the whole arrays, and
``emublas.dask.matmul`` on Dask arrays of cupy chunks with Dask's threaded
scheduler in this process (every block on the same GPU: this measures the
blocked path's cost, not a gain from more devices).  Times are wall medians
with the device synchronised; the Dask time includes the scaling passes run
when ``matmul`` is called.  The results must be equal bit for bit (asserted).

Usage::

    python3 benchmarks/bench_dask_gpu.py --sizes 8192:4096 16384:8192 --dtypes d z --reps 3 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import emublas
import emublas.dask as ed
from emublas.timing import wall_times


def _median(fn, reps: int, sync) -> tuple[float, list[float]]:
    """Median wall seconds (synchronized) of ``fn()`` over ``reps`` calls after one warm-up, and all the times."""
    _, times = wall_times(fn, reps, sync=sync)
    return statistics.median(times), times


def _one(code: str, n: int, chunk: int, reps: int) -> dict:
    """Time the single call and the Dask call for one dtype; check they agree bit for bit."""
    import cupy
    import dask
    import dask.array as da

    sync = cupy.cuda.Device().synchronize
    rng = cupy.random.default_rng(0)
    a, b = rng.standard_normal((n, n)) - 0.5, rng.standard_normal((n, n)) - 0.5
    if code == "z":
        a = a + 1j * (rng.standard_normal((n, n)) - 0.5)
        b = b + 1j * (rng.standard_normal((n, n)) - 0.5)
    xa, xb = da.from_array(a, chunks=chunk, asarray=False), da.from_array(b, chunks=chunk, asarray=False)
    got = {}

    def single():
        got["single"] = emublas.gemm(1.0, a, b, backend="ozaki2")

    def blocked():
        with dask.config.set(scheduler="threads"):
            t0 = time.perf_counter()
            lazy = ed.matmul(xa, xb, backend="ozaki2")  # the scaling passes run here
            got["scaling"] = time.perf_counter() - t0
            got["dask"] = lazy.compute()

    t_single, all_single = _median(single, reps, sync)
    t_dask, all_dask = _median(blocked, reps, sync)
    same = cupy.ascontiguousarray(got["single"]).view(np.uint8) == cupy.ascontiguousarray(got["dask"]).view(np.uint8)
    identical = bool(same.all())
    assert identical, f"{code}: Dask result differs from the single call"
    flops = (8 if code == "z" else 2) * n**3
    return {
        "dtype": code,
        "n": n,
        "chunk": chunk,
        "blocks": [-(-n // chunk)] * 3,
        "single_ms": 1e3 * t_single,
        "dask_ms": 1e3 * t_dask,
        "overhead": t_dask / t_single - 1,
        "dask_scaling_ms_last": 1e3 * got["scaling"],
        "single_tflops": flops / t_single / 1e12,
        "dask_tflops": flops / t_dask / 1e12,
        "bit_identical": identical,
        "times": {"single": all_single, "dask": all_dask},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["8192:4096"], help="n:chunk pairs")
    ap.add_argument("--dtypes", nargs="+", choices=["d", "z"], default=["d", "z"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()

    import cupy
    import dask

    rows = [
        _one(code, int(n), int(chunk), args.reps)
        for n, chunk in (s.split(":") for s in args.sizes)
        for code in args.dtypes
    ]
    meta = {
        "gpu": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "cupy": cupy.__version__,
        "dask": dask.__version__,
    }
    print(
        f"ozaki2 (accurate, default moduli) on {meta['gpu']}: single call vs emublas.dask, cupy chunks,"
        " threaded scheduler"
    )
    print("| op | n | chunk | single (ms) | dask (ms) | of which scaling passes (ms) | overhead | bit-identical |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['dtype']}gemm | {r['n']} | {r['chunk']} | {r['single_ms']:.1f} | {r['dask_ms']:.1f} |"
            f" {r['dask_scaling_ms_last']:.1f} | {100 * r['overhead']:+.0f}% | {r['bit_identical']} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
