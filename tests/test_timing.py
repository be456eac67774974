"""emublas.timing: what is called how often, and what the summaries say (no timed assertions)."""

import time
import warnings

import pytest

from emublas import timing


def _counter():
    calls = []

    def fn():
        calls.append(len(calls))
        return len(calls)

    return fn, calls


def test_timing_summary():
    t = timing.Timing((3.0, 1.0, 2.0))
    assert (t.median, t.min, t.max, t.spread) == (2.0, 1.0, 3.0, 3.0)
    assert timing.summary([4.0, 1.0]) == {"median": 2.5, "min": 1.0, "max": 4.0}
    assert timing.Timing((0.0, 1.0)).spread == float("inf")
    with pytest.raises(ValueError, match="at least one"):
        timing.Timing(())


def test_wall_times_warms_up_once_and_returns_the_warm_up_result():
    fn, calls = _counter()
    out, times = timing.wall_times(fn, 4)
    assert out == 1 and len(calls) == 5 and len(times) == 4 and all(t >= 0 for t in times)
    fn, calls = _counter()
    out, times = timing.wall_times(fn, 2, warmup=False)
    assert out is None and len(calls) == 2
    syncs = []
    timing.wall_times(fn, 3, sync=lambda: syncs.append(1))
    assert len(syncs) == 4  # after the warm-up and inside each timed call


def test_quiet_ignores_warnings_of_the_timed_calls_only():
    def noisy():
        warnings.warn("timed", UserWarning, stacklevel=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        timing.wall_times(noisy, 3, quiet=True)
    assert len(caught) == 1  # the warm-up's


def test_time_call_and_its_arguments():
    fn, calls = _counter()
    out, t = timing.time_call(fn, 3)
    assert out == 1 and len(t.times) == 3 and len(calls) == 4
    with pytest.raises(ValueError, match="reps"):
        timing.time_call(fn, 0)
    with pytest.raises(ValueError, match="cpu, gpu"):
        timing.time_call(fn, 1, device="tpu")


def test_elapsed_interleaved_and_settled_time_call_counts():
    fn, calls = _counter()
    assert timing.elapsed(fn, 5) >= 0 and len(calls) == 5
    order = []
    times = timing.interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 2)
    assert order == ["a", "b"] * 3 and {k: len(v) for k, v in times.items()} == {"a": 2, "b": 2}
    fn, calls = _counter()
    per_call = timing.settled_time(fn, count=4, pause=0.0, wait_idle=False)
    assert per_call >= 0 and len(calls) == 4  # no warm-up: one batch
    assert timing.median_time(fn, 3) >= 0


def test_others_cpu_reads_the_machine():
    try:
        open("/proc/stat").close()
    except OSError:
        pytest.skip("no /proc/stat")
    assert isinstance(timing.others_cpu(), float)


def test_batched_median_batches_short_calls_only():
    fn, calls = _counter()
    assert timing.batched_median(fn, 2, pause=0.0, batch_s=0.005) >= 0
    assert len(calls) > 2 + 2 * 2  # warm-up, one probe, then two batches of at least two calls

    def slow():
        time.sleep(0.002)
        calls.append(1)

    calls.clear()
    assert timing.batched_median(slow, 3, pause=0.0, batch_s=0.001) >= 0.002
    assert len(calls) == 2 + 1 + 3  # warm-up and probe, median_time's warm-up, three lone calls
