"""emublas.dask with ozaki2 on a LocalCluster against the single-process call.

One float64 (or, with ``--dtype z``, complex128) product n×n×n: the
single-process ``emublas.dgemm(..., backend="ozaki2")`` (``zgemm``) in this
process (the C kernels' thread pool on all cores), and ``emublas.dask.matmul``
on a ``LocalCluster`` of worker processes with one thread each and
``EMUBLAS_NUM_THREADS=1`` per worker (the same cores in all, no
oversubscription).  The inputs are persisted on the workers first (data
already distributed, as in real use); the timed Dask call covers the scaling
passes and the product graph, once with the result gathered into the
client (``compute``, comparable with the single call) and once left on the
workers (``persist``).  The result must equal the single-process one bit for
bit (asserted).

``--wait-idle`` (Linux, for shared machines): each timed call starts only
after 0.3 s in which processes outside this benchmark's process tree used
less than 10% of a core, and is repeated (up to 10 times) when they used more
than 5% of its time.

Usage::

    python3 benchmarks/bench_dask.py --n 4096 --chunk 2048 --workers 2 --reps 3 --wait-idle [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings

import numpy as np

import emublas
import emublas.dask as ed
from emublas.info import cpu_model
from emublas.timing import settled_time


def _median(fn, reps: int, wait_idle: bool, tries: int = 10) -> tuple[float, list[float]]:
    """Median seconds of ``fn()`` over ``reps`` calls after one warm-up call (0.3 s pause
    before each, which also lets OpenBLAS's spinning threads go idle), and all the times;
    the workers' CPU time is this process's own."""
    fn()
    times = [
        settled_time(fn, pause=0.3, wait_idle=wait_idle, tries=tries, slack=0.01, children=True) for _ in range(reps)
    ]
    return statistics.median(times), times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=2048, help="chunks of A and B (square unless --row-chunk)")
    ap.add_argument("--row-chunk", type=int, help="row chunks of A (more, smaller output blocks)")
    ap.add_argument("--dtype", choices=["d", "z"], default="d", help="float64 (dgemm) or complex128 (zgemm, 2M)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wait-idle", action="store_true", help="time only while other processes are idle")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster, wait

    rng = np.random.default_rng(0)
    n = args.n
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    if args.dtype == "z":
        a, b = a + 1j * rng.standard_normal((n, n)), b + 1j * rng.standard_normal((n, n))
    gemm = getattr(emublas, args.dtype + "gemm")
    flops = (8 if args.dtype == "z" else 2) * n**3

    single = {}

    def run_single():
        single["c"] = gemm(1.0, a, b, backend="ozaki2")

    t_single, all_single = _median(run_single, args.reps, args.wait_idle)

    root = os.path.dirname(os.path.dirname(os.path.abspath(emublas.__file__)))
    env = {
        "EMUBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    with (
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None, env=env
        ) as cluster,
        Client(cluster),
    ):
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # the inputs travel inside the graph once, on purpose
            warnings.filterwarnings("ignore", message="Sending large graph")
            xa = da.from_array(a, chunks=(args.row_chunk or args.chunk, args.chunk)).persist()
            xb = da.from_array(b, chunks=args.chunk).persist()
        wait([xa, xb])
        t_scatter = time.perf_counter() - t0
        dist = {}

        def run_dask():
            t1 = time.perf_counter()
            lazy = ed.matmul(xa, xb, backend="ozaki2")  # the scaling passes run here
            dist["scaling"] = time.perf_counter() - t1
            dist["c"] = lazy.compute()

        def run_persist():
            lazy = ed.matmul(xa, xb, backend="ozaki2")
            wait(lazy.persist())

        t_dask, all_dask = _median(run_dask, args.reps, args.wait_idle)
        t_persist, all_persist = _median(run_persist, args.reps, args.wait_idle)

    def bits(x):
        return np.ascontiguousarray(x).view(np.uint64)

    identical = bool((bits(dist["c"]) == bits(single["c"])).all())
    assert identical, "Dask result differs from the single-process ozaki2 result"
    nblocks = -(-n // args.chunk)
    nrows = -(-n // (args.row_chunk or args.chunk))
    out = {
        "cpu": cpu_model(),
        "n": n,
        "chunk": args.chunk,
        "row_chunk": args.row_chunk or args.chunk,
        "blocks": [nrows, nblocks, nblocks],
        "workers": args.workers,
        "single_s": t_single,
        "dask_s": t_dask,
        "overhead": t_dask / t_single - 1,
        "dask_persist_s": t_persist,
        "overhead_persist": t_persist / t_single - 1,
        "dask_scaling_pass_s_last": dist["scaling"],
        "persist_inputs_s": t_scatter,
        "bit_identical": identical,
        "dtype": args.dtype,
        "single_gflops": flops / t_single / 1e9,
        "dask_gflops": flops / t_dask / 1e9,
        "times": {"single": all_single, "dask_compute": all_dask, "dask_persist": all_persist},
    }
    print(
        f"n={n} {'complex128' if args.dtype == 'z' else 'float64'}, ozaki2 (16 moduli, accurate):"
        f" A chunks {args.row_chunk or args.chunk}×{args.chunk},"
        f" B chunks {args.chunk}² ({nrows}×{nblocks}×{nblocks} blocks),"
        f" {args.workers} worker processes × 1 thread"
    )
    print(f"  single process ({os.cpu_count()} C threads): {t_single:.2f} s ({out['single_gflops']:.1f} GFLOP/s)")
    print(
        f"  dask, result gathered:         {t_dask:.2f} s ({out['dask_gflops']:.1f} GFLOP/s),"
        f" of which scaling passes {dist['scaling']:.2f} s; overhead {100 * out['overhead']:+.0f}%"
    )
    print(f"  dask, result left on the workers: {t_persist:.2f} s; overhead {100 * out['overhead_persist']:+.0f}%")
    print("  all times [s]: " + "; ".join(f"{k} " + " ".join(f"{t:.2f}" for t in v) for k, v in out["times"].items()))
    print(f"  persisting the inputs on the workers: {t_scatter:.2f} s (not in the timing)")
    print(f"  bit-identical to single process: {identical}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
