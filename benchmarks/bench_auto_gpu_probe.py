"""auto against native on the GPU, call for call: device and host time per call, alternating.

The script of the fifteenth session's first device call (BENCHMARKS.md), as it ran there,
reformatted for the linter only: for dsyrk 4096, dgemm 1024 and dsyrk 8192 (Fortran-ordered
rand − 0.5), 5 rounds of 20-call batches of native then auto (``emublas.timing.cuda_batch``:
host wall time and CUDA-event device time per call), their medians, auto's decision
(``emublas.auto_last()``) and a cProfile of 50 auto calls.

    python3 benchmarks/bench_auto_gpu_probe.py
"""

import cProfile
import io
import pstats
import statistics

import cupy

import emublas
from emublas.timing import cuda_batch

rng = cupy.random.default_rng(0)
for op, n in (("dsyrk", 4096), ("dgemm", 1024), ("dsyrk", 8192)):
    a = cupy.asfortranarray(rng.random((n, n)) - 0.5)
    f = getattr(emublas, op)
    args = (1.0, a) if op == "dsyrk" else (1.0, a, a)
    res = {"native": [], "auto": []}
    for _r in range(5):
        for be in ("native", "auto"):
            h, d = cuda_batch(cupy, lambda: f(*args, backend=be), 20, warmups=3)
            res[be].append((h, d))
    for be, v in res.items():
        print(
            f"{op} {n} {be}: host/call {1e6 * statistics.median(x[0] for x in v):.1f} us,"
            f" device/call {1e6 * statistics.median(x[1] for x in v):.1f} us  all dev {[round(1e6 * x[1]) for x in v]}"
        )
    print("auto chose:", emublas.auto_last() if hasattr(emublas, "auto_last") else "?")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(50):
        f(*args, backend="auto")
    cupy.cuda.Device().synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
    print(s.getvalue()[:3000])
