"""Small ozaki2 calls on cupy arrays, replayed as CUDA graphs.

A call on cupy arrays issues some forty kernel launches and cuBLAS products from
Python, and sets up its scaling, plan and certificate on the host; for a small
problem that takes longer than the device's work.  The second time a call of one
signature is seen, its work is captured once into a CUDA graph over buffers of
the graph's own.  From then on a call of that signature copies its operands into
those buffers, replays the graph and copies the result out: four stream
operations and no per-call planning.

Why a replay gives the direct call's result bit for bit: in ``fast`` and
``accurate`` modes with a fixed moduli count, nothing a call launches depends
on the data (docs/design.md §5.8: every row's plan is made on the device and
nothing is read back), so the graph runs the same kernels with the same
arguments on the new data.  The signature holds everything that decides what is
launched: routine and recipe, the shapes, dtypes and memory orders of the
factors and the output, the scalars, conjugation and triangle, the ozaki2
options, the device and the stream.  Calls that do not qualify run directly:
``auto`` mode, several GPUs, the rank-2k routines (their factors are built per
call), non-contiguous operands, m·n·k above :data:`MAX_MNK`, and calls made
while the caller's stream is itself being captured.

Memory: each graph allocates from a private cupy memory pool that nothing else
uses, so every address baked into the graph stays the graph's own; the pool
holds the call's peak workspace for as long as the graph is cached.  At most
:data:`MAX_GRAPHS` graphs, holding at most :data:`MAX_BYTES` together, are kept
(least recently used out first).  :func:`clear` drops them all.

Threads: a replay issues its copies, launch and copy-out under the graph's lock,
so threads sharing a stream (the legacy default stream, a stream object passed
around) queue whole replays one after the other; on the per-thread default
stream each thread has its own graph.

The accuracy verdict: the certificate's counter is a buffer of the graph, zeroed
by the graph itself; after each replay it is deferred like a direct call's
(:mod:`.verdicts`), so every replay's warning reaches the user.  (A GPU call
raises no warning on the host while it is issued: its verdict is the deferred
one.)
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

__all__ = ["signature", "run", "clear", "cached", "MAX_GRAPHS", "MAX_MNK", "MAX_BYTES"]

#: Graphs kept at once.
MAX_GRAPHS = 32
#: Largest m·n·k replayed: 2048³, where a direct call's host time (about 3 ms on the H200's
#: host) still exceeds the device's work; from 4096³ on the device's work is the longer.
MAX_MNK = 2**33
#: Device memory the cached graphs may hold together (their operands and workspace).
MAX_BYTES = 2 * 2**30

_lock = threading.Lock()
_seen: OrderedDict = OrderedDict()  # signature -> True once seen (bounded)
_graphs: OrderedDict = OrderedDict()  # signature -> _Graph, or None where capture failed


def _order(a) -> str | None:
    if a.flags.c_contiguous:
        return "C"
    if a.flags.f_contiguous:
        return "F"
    return None


def signature(routine: str, recipe: str, family: tuple, x, y, out, alpha, beta, fixed: tuple):
    """The key of a call whose work a graph can replay, or None when it does not qualify.

    Parameters
    ----------
    routine, recipe : str
    family : tuple
        The moduli family's (name, maximum).
    x, y : cupy.ndarray
        The "rows × k" factors (``y`` may be ``x``).
    out : cupy.ndarray
        The output.
    alpha, beta : float or complex
    fixed : tuple
        Everything else that decides the launches (conjugation, triangle, options).

    Returns
    -------
    tuple or None
    """
    orders = (_order(x), _order(y), _order(out))
    m, k = x.shape
    n = y.shape[0]
    if None in orders or m * n * k > MAX_MNK or 0 in (m, n, k):
        return None
    import cupy

    stream = cupy.cuda.get_current_stream()
    if stream.is_capturing():  # the caller's own graph takes the launches as they are
        return None
    layouts = tuple((a.shape, a.dtype.str, o) for a, o in zip((x, y, out), orders))
    # the per-thread default stream has one pointer for a different stream in each thread:
    # each thread gets its own graph (buffers) there; other streams are one stream whatever
    # the thread, and a replay's issue is atomic (_Graph.replay)
    where = (stream.ptr, threading.get_ident() if stream.ptr == _per_thread_stream() else None)
    # repr keeps -0.0 apart from 0.0 (the sign of zero results differs)
    return (routine, recipe, family, y is x, layouts, repr(alpha), repr(beta), fixed, out.device.id, where)


def _per_thread_stream() -> int:
    import cupy

    return int(getattr(cupy.cuda.runtime, "streamPerThread", 2))


def run(sig: tuple, x, y, out, direct, *, read_out: bool):
    """The call of signature ``sig``: directly the first time, then through its graph.

    Parameters
    ----------
    sig : tuple
        From :func:`signature`.
    x, y, out : cupy.ndarray
        The call's factors and output (updated in place).
    direct : callable
        ``direct(x, y, out) -> (counters, info)``: the call itself, queued on the
        current stream.
    read_out : bool
        Whether the call reads ``out`` (beta ≠ 0, or a triangle whose other half stays).

    Returns
    -------
    counters : list
        The certificate's device counters, for :func:`.verdicts.defer`.
    info : dict
        The call's last-run record; ``graph`` is "captured" or "replayed" here.
    """
    with _lock:
        g = _graphs.get(sig, False)
        if g is not False:
            _graphs.move_to_end(sig)
        first = g is False and sig not in _seen
        if first:
            _seen[sig] = True
            while len(_seen) > 8 * MAX_GRAPHS:
                _seen.popitem(last=False)
    if first or g is None:  # first sighting, or a signature that could not be captured
        return direct(x, y, out)
    how = "replayed"
    t0 = time.perf_counter()
    if g is False:
        try:
            g = _Graph(x, y, out, direct)
        except Exception:
            # not capturable (or the call itself fails): the direct call decides, and raises
            with _lock:
                _graphs[sig] = None
            return direct(x, y, out)
        _keep(sig, g)
        how = "captured"
    counters = g.replay(x, y, out, read_out)
    return counters, {**g.info, "phases": {"graph": time.perf_counter() - t0}, "graph": how}


def _keep(sig, g) -> None:
    with _lock:
        _graphs[sig] = g
        held = sum(v.nbytes for v in _graphs.values() if v is not None)
        while len(_graphs) > MAX_GRAPHS or (held > MAX_BYTES and len(_graphs) > 1):
            _, old = _graphs.popitem(last=False)
            held -= old.nbytes if old is not None else 0


def clear() -> None:
    """Drop every cached graph (their memory returns to the device once no replay runs)."""
    with _lock:
        _graphs.clear()
        _seen.clear()


def cached() -> int:
    """The number of graphs held.

    Returns
    -------
    int
    """
    return sum(v is not None for v in _graphs.values())


def _copy(dst, src, stream) -> None:
    """Device-to-device copy of a contiguous array into one of the same layout, on ``stream``."""
    import cupy

    rt = cupy.cuda.runtime
    rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice, stream.ptr)


class _Graph:
    """One captured call: its graph, its buffers and the pool they live in."""

    def __init__(self, x, y, out, direct):
        import cupy

        with cupy.cuda.Device(out.device.id):
            self.pool = cupy.cuda.MemoryPool()
            stream = cupy.cuda.Stream(non_blocking=True)
            with cupy.cuda.using_allocator(self.pool.malloc):
                self.x = cupy.empty(x.shape, x.dtype, order=_order(x))
                self.y = self.x if y is x else cupy.empty(y.shape, y.dtype, order=_order(y))
                self.out = cupy.empty(out.shape, out.dtype, order=_order(out))
                with stream:
                    stream.begin_capture()
                    try:
                        self.counters, info = direct(self.x, self.y, self.out)
                    except BaseException:
                        try:
                            stream.end_capture()
                        except Exception:
                            pass
                        raise
                    self.graph = stream.end_capture()
        self.stream = stream  # the graph's nodes were made on it: keep it alive with them
        self.lock = threading.Lock()
        self.info = info
        self.nbytes = self.pool.total_bytes()

    def replay(self, x, y, out, read_out: bool):
        """Copy the operands in, replay, copy the result out, on the current stream."""
        import cupy

        s = cupy.cuda.get_current_stream()
        # two threads on one stream: each one's copies, launch and copy-out stay together in it
        with self.lock:
            _copy(self.x, x, s)
            if self.y is not self.x:
                _copy(self.y, y, s)
            if read_out:
                _copy(self.out, out, s)
            self.graph.launch(s)
            _copy(out, self.out, s)
        return self.counters
