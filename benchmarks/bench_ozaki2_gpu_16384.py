"""Quick check on a GPU: ozaki2 (16 moduli) against cuBLAS at n = 16384, dgemm and zgemm (CUDA events, median of 3).

python3 benchmarks/bench_ozaki2_gpu_16384.py
"""

import sys

import cupy as cp

import emublas

sys.path.insert(0, "benchmarks")
from bench_ozaki2_gpu import wide

from emublas.timing import cuda_median_time

for dt, fn, _flops in (("float64", emublas.dgemm, 2), ("complex128", emublas.zgemm, 8)):
    n = 16384
    a, b = wide(cp, 1, (n, n), 0.5, dt), wide(cp, 2, (n, n), 0.5, dt)
    tn = cuda_median_time(cp, lambda a=a, b=b: fn(1.0, a, b, backend="native"), 3)
    to = cuda_median_time(cp, lambda a=a, b=b: fn(1.0, a, b, backend="ozaki2"), 3)
    print(dt, n, f"native {tn * 1e3:.1f} ms ozaki2(16) {to * 1e3:.1f} ms ratio {tn / to:.2f}", flush=True)
    del a, b
    cp.get_default_memory_pool().free_all_blocks()
