"""Accuracy verdicts of GPU calls, delivered without waiting for the device.

A GPU call's certificate (:mod:`.certify`) counts its uncertified entries in a
device counter.  Reading it at once would make every call wait for the GPU,
so the call instead queues a copy of the counter into pinned host memory and
an event behind it on the call's stream, and returns.  :func:`check` looks at
the queued verdicts: those whose event has completed are read, recorded in
their call's ``last_run()`` record and, when entries failed, raised as
:class:`~emublas.OzakiAccuracyWarning`.  It runs at the start of every ozaki2
call and in :func:`emublas.synchronize` (which waits for all of them), so a
verdict reaches the user no later than the next emublas call that finds it
ready, or the next ``emublas.synchronize()``.
"""

from __future__ import annotations

import threading

import numpy as np

from . import certify

__all__ = ["defer", "check", "pending"]

_lock = threading.Lock()
_queue: list = []


def defer(counters, *, routine: str, total: int, info: dict, fallback: str) -> None:
    """Queue the certificate verdict of a GPU call, read later without a synchronisation.

    Parameters
    ----------
    counters : list of (int, cupy.ndarray)
        ``(device, uint64 counter of uncertified entries)`` per GPU of the call.
    routine : str
        The routine's name, for the warning.
    total : int
        The number of entries the call computed.
    info : dict
        The call's last-run record; its ``uncertified`` entry is set when read
        (None until then, or a note when the call was captured in a CUDA graph).
    fallback : {"dot", "none"}
        What happened to uncertified entries, for the warning.
    """
    import cupy

    if counters and cupy.cuda.get_current_stream().is_capturing():
        # inside a CUDA graph capture the counter is counted on every replay, but no host
        # read can follow it: such calls deliver no verdict (docs/design.md §5.8)
        info["uncertified"] = "not delivered: captured in a CUDA graph"
        return
    for device, counter in counters:
        with cupy.cuda.Device(device):
            mem = cupy.cuda.alloc_pinned_memory(8)
            host = np.frombuffer(mem, np.uint64, 1)
            stream = cupy.cuda.get_current_stream()
            cupy.cuda.runtime.memcpyAsync(
                host.ctypes.data, counter.data.ptr, 8, cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr
            )
            done = cupy.cuda.Event(disable_timing=True)
            done.record(stream)
        with _lock:
            _queue.append((done, host, mem, routine, total, info, fallback))
    info["uncertified"] = None  # known once check() has read it


def check(wait: bool = False) -> None:
    """Read the queued verdicts that are ready, record them and warn about uncertified entries.

    Parameters
    ----------
    wait : bool, optional
        Wait for every queued verdict instead of reading only the finished ones.
    """
    if not _queue:
        return
    with _lock:
        ready = [v for v in _queue if wait or v[0].done]
        for v in ready:
            _queue.remove(v)
    for done, host, _mem, routine, total, info, fallback in ready:
        done.synchronize()
        count = int(host[0])
        info["uncertified"] = (info.get("uncertified") or 0) + count
        if count:
            certify.warn(
                f"{routine} (an earlier call on the GPU)",
                count,
                total,
                info["moduli"],
                info["bits"],
                fallback,
                info.get("required_bits"),
            )


def pending() -> int:
    """The number of verdicts not read yet.

    Returns
    -------
    int
        Queued verdicts.
    """
    return len(_queue)


def synchronize() -> None:
    """Wait for the verdicts of every GPU call queued so far and raise their warnings.

    Ozaki-II calls on cupy arrays return without waiting for the device, like
    cuBLAS; their accuracy warnings arrive with the next emublas call that
    finds them ready, or here.
    """
    check(wait=True)
