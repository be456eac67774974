"""Wall-clock timing shared by the CPU benchmarks (GPU ones time with CUDA events)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], reps: int, pause: float = 0.0) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls after one warm-up call.

    ``pause`` sleeps before each timed call: OpenBLAS's idle threads spin for
    about 0.1 s after each of its calls and would steal a core from the next one.
    """
    fn()
    times = []
    for _ in range(reps):
        if pause:
            time.sleep(pause)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
