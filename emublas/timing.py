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

import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Timing",
    "elapsed",
    "wall_times",
    "cuda_times",
    "cuda_batch",
    "interleaved",
    "time_call",
    "median_time",
    "cuda_median_time",
    "summary",
    "others_cpu",
    "settled_time",
    "batched_median",
]


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


def elapsed(fn: Callable[[], Any], count: int = 1, sync: Callable[[], Any] | None = None) -> float:
    """Wall-clock seconds of ``count`` back-to-back calls of ``fn`` (no warm-up).

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    count : int, optional
        Calls in the batch.
    sync : callable, optional
        Called after the last call, before the clock stops (``cupy.cuda.Device().synchronize``
        for the wall time of GPU work).

    Returns
    -------
    float
        Seconds of the whole batch.
    """
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    if sync is not None:
        sync()
    return time.perf_counter() - t0


def wall_times(
    fn: Callable[[], Any],
    reps: int,
    pause: float = 0.0,
    *,
    warmup: bool = True,
    quiet: bool = False,
    sync: Callable[[], Any] | None = None,
    warmup_s: float = 0.0,
) -> tuple[Any, list[float]]:
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
    sync : callable, optional
        Called after the warm-up and after each timed call, inside its time
        (the wall time of GPU work).
    warmup_s : float, optional
        Repeat the warm-up call until this many seconds have passed (caches,
        clocks and thread pools up to speed).

    Returns
    -------
    result : object
        The warm-up call's result (None without a warm-up).
    times : list of float
        Seconds of each timed call.
    """
    out = None
    if warmup:
        t_end = time.perf_counter() + warmup_s
        out = fn()
        while time.perf_counter() < t_end:
            fn()
        if sync is not None:
            sync()
    times = []
    for _ in range(reps):
        if pause:
            time.sleep(pause)
        with _silenced(quiet):
            times.append(elapsed(fn, 1, sync))
    return out, times


def cuda_times(
    cp, fn: Callable[[], Any], reps: int, *, warmup: bool = True, quiet: bool = False
) -> tuple[Any, list[float]]:
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


def cuda_batch(cp, fn: Callable[[], Any], reps: int, warmups: int = 3) -> tuple[float, float]:
    """Host and GPU seconds per call of a batch of ``reps`` back-to-back calls.

    The host time is the wall time of issuing the batch (without waiting for
    the GPU), the GPU time the span between CUDA events around the whole
    batch: together they show whether the host keeps the GPU busy.

    Parameters
    ----------
    cp : module
        cupy.
    fn : callable
    reps : int
        Calls in the timed batch.
    warmups : int, optional
        Untimed calls before it (followed by a device synchronization).

    Returns
    -------
    host_s, device_s : float
        Seconds per call.
    """
    for _ in range(warmups):
        fn()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    host = elapsed(fn, reps) / reps
    end.record()
    end.synchronize()
    return host, cp.cuda.get_elapsed_time(start, end) / 1e3 / reps


def interleaved(fns: dict[str, Callable[[], Any]], reps: int, pause: float = 0.0) -> dict[str, list[float]]:
    """Wall-clock seconds of each function, the calls taken in turns after one warm-up each.

    Taking turns keeps a passing load on the machine from landing on one
    contender only, so the ratios stay fair on a shared machine.

    Parameters
    ----------
    fns : dict
        Name -> function of no arguments.
    reps : int
        Rounds; each round calls every function once, in order.
    pause : float, optional
        Seconds slept before each timed call.

    Returns
    -------
    dict
        Name -> seconds of its calls, in round order.
    """
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            if pause:
                time.sleep(pause)
            times[name].append(elapsed(fn))
    return times


def others_cpu(children: bool = False) -> float:
    """CPU seconds the machine has spent outside this process so far (Linux ``/proc/stat``).

    Parameters
    ----------
    children : bool, optional
        Count this process's child processes as its own (needs psutil), e.g.
        the workers of a local Dask cluster.

    Returns
    -------
    float
        Busy seconds of all CPUs (steal time included: other guests of the
        host) less this process's user and system time.
    """
    with open("/proc/stat") as fh:
        ticks = [int(v) for v in fh.readline().split()[1:]]
    busy = (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    if not children:
        own = os.times()
        return busy - (own.user + own.system)
    import psutil

    me = psutil.Process()
    mine = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            mine += t.user + t.system
        except psutil.Error:  # a child that just ended
            pass
    return busy - mine


def settled_time(
    fn: Callable[[], Any],
    *,
    count: int = 1,
    pause: float = 0.3,
    wait_idle: bool = True,
    tries: int = 20,
    idle_tries: int | None = None,
    slack: float = 0.01,
    children: bool = False,
) -> float:
    """Seconds per call of a batch of ``count`` calls timed on a quiet machine (no warm-up).

    Before the batch the function sleeps ``pause`` seconds (OpenBLAS's idle
    threads spin about 0.1 s after each call).  With ``wait_idle`` (Linux) the
    pause repeats while other processes use more than 10% of a core, and a
    batch they disturbed (more than ``0.05 * t + slack`` CPU seconds during
    its ``t`` seconds) is timed again.

    Parameters
    ----------
    fn : callable
    count : int, optional
        Calls in the batch.
    pause : float, optional
    wait_idle : bool, optional
    tries : int, optional
        Batches timed at most.
    idle_tries : int, optional
        Pauses at most before each batch; None: until the machine is quiet.
    slack : float, optional
        CPU seconds of others tolerated in any batch.
    children : bool, optional
        Child processes count as this process (:func:`others_cpu`).

    Returns
    -------
    float
        Seconds per call of the last batch timed.
    """
    t = 0.0
    for _ in range(tries):
        waited = 0
        while True:
            before = others_cpu(children) if wait_idle else 0.0
            time.sleep(pause)
            waited += 1
            if not wait_idle or others_cpu(children) - before < 0.1 * pause:
                break
            if idle_tries is not None and waited >= idle_tries:
                break
        before = others_cpu(children) if wait_idle else 0.0
        t = elapsed(fn, count)
        if not wait_idle or others_cpu(children) - before < 0.05 * t + slack:
            break
    return t / count


def time_call(
    fn: Callable[[], Any], reps: int, *, device: str = "cpu", pause: float = 0.0, quiet: bool = False
) -> tuple[Any, Timing]:
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


def batched_median(fn: Callable[[], Any], reps: int, pause: float, batch_s: float = 0.05) -> float:
    """Median seconds per call of ``fn`` as a program's back-to-back calls see it.

    One warm-up call and one timed call first; then ``reps`` timings, each after a ``pause``:
    of one call, or, where a call is shorter than ``batch_s``, of a back-to-back batch of
    about ``batch_s`` (a lone call after the pause would pay the thread pools' wake-up).

    Parameters
    ----------
    fn : callable
    reps : int
    pause : float
        Seconds slept before each timing (OpenBLAS's idle threads spin about 0.1 s).
    batch_s : float, optional

    Returns
    -------
    float
    """
    fn()
    one = elapsed(fn)
    if one >= batch_s:
        return median_time(fn, reps, pause=pause)
    count = max(2, int(batch_s / max(one, 1e-9)))
    return statistics.median(settled_time(fn, count=count, pause=pause, wait_idle=False) for _ in range(reps))


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
