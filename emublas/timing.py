"""Median-of-repetitions timing: the harness of ``emublas sweep`` and of the benchmark scripts.

A measurement is one warm-up call (its result is returned, for checking)
followed by ``reps`` timed calls: wall-clock seconds on the CPU, CUDA events
on the GPU.  :class:`Timing` summarizes the repetitions as median, min and
max, the spread that says whether a comparison means anything.

>>> from emublas.timing import time_call
>>> out, t = time_call(lambda: sum(range(1000)), reps=5)
>>> t.min <= t.median <= t.max
True

This module uses only the standard library (cupy is imported only for
``device="gpu"``), so a benchmark can load it by path next to another
checkout's emublas.
"""
from __future__ import annotations

import statistics
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

__all__ = ["Timing", "wall_times", "cuda_times", "time_call", "median_time", "cuda_median_time", "summary"]


@dataclass(frozen=True)
class Timing:
    """Seconds of repeated calls.

    Parameters
    ----------
    times : sequence of float
        Seconds of each timed repetition, in order (at least one).
    """

    times: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.times:
            raise ValueError("a Timing needs at least one repetition")
        object.__setattr__(self, "times", tuple(float(t) for t in self.times))

    @property
    def median(self) -> float:
        """Median seconds over the repetitions."""
        return float(statistics.median(self.times))

    @property
    def min(self) -> float:
        """Fastest repetition, in seconds."""
        return min(self.times)

    @property
    def max(self) -> float:
        """Slowest repetition, in seconds."""
        return max(self.times)

    @property
    def spread(self) -> float:
        """Slowest over fastest repetition (1.0 for a perfectly steady machine; inf if the fastest took 0 s)."""
        return self.max / self.min if self.min > 0 else float("inf")


@contextmanager
def _silenced(quiet: bool) -> Iterator[None]:
    """Warnings ignored inside, when ``quiet``."""
    if not quiet:
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def wall_times(fn: Callable[[], Any], reps: int, pause: float = 0.0, *, warmup: bool = True,
               quiet: bool = False) -> tuple[Any, list[float]]:
    """Wall-clock seconds of ``reps`` calls of ``fn``, after one warm-up call.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    reps : int
        Timed repetitions.
    pause : float, optional
        Seconds slept before each timed call (not timed): OpenBLAS's idle
        threads spin for about 0.1 s after each of its calls and would steal a
        core from the next one.
    warmup : bool, optional
        Make the untimed warm-up call (default); False when the caller made it.
    quiet : bool, optional
        Ignore warnings raised by the timed calls (the warm-up's are the ones
        worth reporting).

    Returns
    -------
    result : object
        The warm-up call's result (None without a warm-up).
    times : list of float
        Seconds of each timed call.
    """
    out = fn() if warmup else None
    times = []
    for _ in range(reps):
        if pause:
            time.sleep(pause)
        with _silenced(quiet):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return out, times


def cuda_times(cp, fn: Callable[[], Any], reps: int, *, warmup: bool = True,
               quiet: bool = False) -> tuple[Any, list[float]]:
    """GPU seconds of ``reps`` calls of ``fn``, each between its own pair of CUDA events.

    Parameters
    ----------
    cp : module
        cupy.
    fn : callable
        Called with no arguments; it launches work on the current stream.
    reps : int
        Timed repetitions.
    warmup : bool, optional
        Make one warm-up call and synchronize the device after it (default).
    quiet : bool, optional
        Ignore warnings raised by the timed calls.

    Returns
    -------
    result : object
        The warm-up call's result (None without a warm-up).
    times : list of float
        Seconds between each call's start and stop events.
    """
    out = None
    if warmup:
        out = fn()
        cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        with _silenced(quiet):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return out, times


def time_call(fn: Callable[[], Any], reps: int, *, device: str = "cpu", pause: float = 0.0,
              quiet: bool = False) -> tuple[Any, Timing]:
    """One warm-up call of ``fn`` and ``reps`` timed ones, on ``device``.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    reps : int
        Timed repetitions (at least 1).
    device : {"cpu", "gpu"}
        ``"cpu"``: wall clock (:func:`wall_times`); ``"gpu"``: CUDA events
        (:func:`cuda_times`).
    pause : float, optional
        CPU only: seconds slept before each timed call.
    quiet : bool, optional
        Ignore warnings raised by the timed calls.

    Returns
    -------
    result : object
        The warm-up call's result.
    timing : Timing
    """
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    if device == "gpu":
        import cupy

        out, times = cuda_times(cupy, fn, reps, quiet=quiet)
    elif device == "cpu":
        out, times = wall_times(fn, reps, pause, quiet=quiet)
    else:
        raise ValueError(f"unknown device {device!r}; valid devices: cpu, gpu")
    return out, Timing(tuple(times))


def median_time(fn: Callable[[], Any], reps: int, pause: float = 0.0) -> float:
    """Median wall-clock seconds of ``fn()`` over ``reps`` calls after one warm-up (see :func:`wall_times`).

    Parameters
    ----------
    fn : callable
    reps : int
    pause : float, optional

    Returns
    -------
    float
    """
    return statistics.median(wall_times(fn, reps, pause)[1])


def cuda_median_time(cp, fn: Callable[[], Any], reps: int) -> float:
    """Median GPU seconds of ``fn()`` with CUDA events, after one synchronized warm-up (see :func:`cuda_times`).

    Parameters
    ----------
    cp : module
        cupy.
    fn : callable
    reps : int

    Returns
    -------
    float
    """
    return statistics.median(cuda_times(cp, fn, reps)[1])


def summary(times: Sequence[float]) -> dict[str, float]:
    """``{"median", "min", "max"}`` of some seconds, as a benchmark row stores them.

    Parameters
    ----------
    times : sequence of float

    Returns
    -------
    dict
    """
    t = Timing(tuple(times))
    return {"median": t.median, "min": t.min, "max": t.max}

