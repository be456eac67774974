"""Wall-clock timing shared by the CPU benchmarks (GPU ones time with CUDA events)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def wall_times(fn: Callable[[], object], reps: int, pause: float = 0.0) -> tuple[object, list[float]]:
    """``fn()``'s result from one warm-up call and the wall-clock seconds of ``reps`` further calls.

    ``pause`` sleeps before each timed call: OpenBLAS's idle threads spin for
    about 0.1 s after each of its calls and would steal a core from the next one.
    """
    out = fn()
    times = []
    for _ in range(reps):
        if pause:
            time.sleep(pause)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return out, times


def median_time(fn: Callable[[], object], reps: int, pause: float = 0.0) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls after one warm-up call (see :func:`wall_times`)."""
    return statistics.median(wall_times(fn, reps, pause)[1])


def cuda_times(cp, fn: Callable[[], object], reps: int) -> tuple[object, list[float]]:
    """``fn()``'s result from one synchronized warm-up call and the GPU seconds of ``reps``
    further calls, each timed with its own pair of CUDA events."""
    out = fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return out, times


def cuda_median_time(cp, fn: Callable[[], object], reps: int) -> float:
    """Median seconds of ``fn()`` on the GPU with CUDA events, after one synchronized warm-up."""
    return statistics.median(cuda_times(cp, fn, reps)[1])
