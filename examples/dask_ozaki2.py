"""Ozaki-II across a Dask cluster, bit for bit the single-process result.

Run:  python3 examples/dask_ozaki2.py [n] [chunk]
Starts a LocalCluster of two worker processes (one thread and one emublas C
thread each), multiplies two n×n float64 matrices chunked chunk×chunk with
``emublas.dask.matmul(..., backend="ozaki2")``, compares with
``emublas.dgemm(..., backend="ozaki2")`` in this process and prints both times.
Needs ``pip install 'emublas[dask]'``.
"""

import os
import sys
import time
import warnings

import numpy as np


def main() -> None:
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import emublas
    import emublas.dask

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    chunk = int(sys.argv[2]) if len(sys.argv) > 2 else n // 2
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))

    t0 = time.perf_counter()
    single = emublas.dgemm(1.0, a, b, backend="ozaki2")
    t_single = time.perf_counter() - t0

    # one C thread per worker: two processes share the two cores the single call used
    env = {"EMUBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    with (
        LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, env=env) as cluster,
        Client(cluster) as client,
    ):
        with warnings.catch_warnings():  # the inputs travel inside the graph once, on purpose
            warnings.filterwarnings("ignore", message="Sending large graph")
            xa = client.persist(da.from_array(a, chunks=chunk))  # the data lives on the workers
            xb = client.persist(da.from_array(b, chunks=chunk))
        wait([xa, xb])
        t0 = time.perf_counter()
        product = emublas.dask.matmul(xa, xb, backend="ozaki2")  # scaling pass runs here
        distributed = product.compute()  # the products and the CRT here
        t_dask = time.perf_counter() - t0

    same = np.array_equal(distributed.view(np.uint64), single.view(np.uint64))
    print(f"n = {n}, chunks {chunk}x{chunk}, 2 worker processes")
    print(f"single process : {t_single:.2f} s")
    print(f"dask           : {t_dask:.2f} s")
    print(f"bit-identical  : {same}")
    print(f"max |dask - numpy| / max |numpy| = {np.abs(distributed - a @ b).max() / np.abs(a @ b).max():.1e}")


if __name__ == "__main__":
    main()
