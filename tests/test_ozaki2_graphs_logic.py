"""The bookkeeping of ozaki2's CUDA-graph replay, without a GPU: which calls qualify, what a
signature keeps apart, and the first-direct / capture / replay / bounded-cache sequence.

A stand-in ``cupy`` module (streams only) and a stand-in graph replace the device; the
replays themselves are checked on the GPU in tests/test_ozaki2_graphs.py.
"""

import sys
import threading
import types

import numpy as np
import pytest

from emublas.backends.ozaki2 import graphs


class _Stream:
    def __init__(self, ptr, capturing=False):
        self.ptr, self.capturing = ptr, capturing

    def is_capturing(self):
        return self.capturing


class _Arr:
    """What signature() reads of a cupy array: shape, dtype, flags, device."""

    def __init__(self, a):
        self._a = np.asarray(a)
        self.shape, self.dtype, self.flags = self._a.shape, self._a.dtype, self._a.flags
        self.device = types.SimpleNamespace(id=0)

    @property
    def T(self):
        return _Arr(self._a.T)


@pytest.fixture
def fake_cupy(monkeypatch):
    current = {"stream": _Stream(0)}
    cuda = types.SimpleNamespace(
        get_current_stream=lambda: current["stream"],
        runtime=types.SimpleNamespace(streamPerThread=2),
    )
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    graphs.clear()
    yield current
    graphs.clear()


def _sig(x, y, out, alpha=1.0, beta=0.0, fixed=(False, False, 0, 16, "accurate", "dot", "auto")):
    return graphs.signature("gemm", "real", ("real", 20), x, y, out, alpha, beta, fixed)


def test_what_qualifies(fake_cupy):
    x, y, out = _Arr(np.ones((8, 5))), _Arr(np.ones((6, 5))), _Arr(np.ones((8, 6), order="F"))
    assert _sig(x, y, out) is not None
    assert _sig(_Arr(np.ones((8, 10))[:, ::2]), y, out) is None  # not contiguous
    assert _sig(_Arr(np.ones((8, 0))), _Arr(np.ones((6, 0))), out) is None  # k = 0
    fake_cupy["stream"] = _Stream(7, capturing=True)
    assert _sig(x, y, out) is None  # the caller is capturing: its graph takes the launches


def test_mnk_limit(fake_cupy, monkeypatch):
    x, y, out = _Arr(np.ones((8, 5))), _Arr(np.ones((6, 5))), _Arr(np.ones((8, 6), order="F"))
    monkeypatch.setattr(graphs, "MAX_MNK", 8 * 6 * 5 - 1)
    assert _sig(x, y, out) is None
    monkeypatch.setattr(graphs, "MAX_MNK", 8 * 6 * 5)
    assert _sig(x, y, out) is not None


def test_what_a_signature_keeps_apart(fake_cupy):
    x, y, out = _Arr(np.ones((8, 5))), _Arr(np.ones((6, 5))), _Arr(np.ones((8, 6), order="F"))
    base = _sig(x, y, out)
    assert _sig(x, y, out) == base
    assert _sig(x, y, out, alpha=-1.0) != base
    assert _sig(x, y, out, beta=-0.0) != base  # the sign of zero results differs
    assert _sig(_Arr(np.ones((8, 5), order="F")), y, out) != base  # memory order
    assert _sig(_Arr(np.ones((8, 5), np.float32)), y, out) != base  # dtype
    square = _Arr(np.ones((8, 8), order="F"))
    assert _sig(x, x, square) != _sig(x, _Arr(np.ones((8, 5))), square)  # y is x (shared shifts) or not
    assert _sig(x, y, out, fixed=(False, False, 0, 17, "accurate", "dot", "auto")) != base  # options
    fake_cupy["stream"] = _Stream(9)
    assert _sig(x, y, out) != base  # another stream, another graph


def test_the_per_thread_stream_keys_by_thread(fake_cupy):
    x, y, out = _Arr(np.ones((8, 5))), _Arr(np.ones((6, 5))), _Arr(np.ones((8, 6), order="F"))
    fake_cupy["stream"] = _Stream(2)  # cudaStreamPerThread: one pointer, one stream per thread
    mine = _sig(x, y, out)
    other = []
    t = threading.Thread(target=lambda: other.append(_sig(x, y, out)))
    t.start()
    t.join()
    assert other[0] != mine
    fake_cupy["stream"] = _Stream(0)  # the legacy stream is one stream for every thread
    here = _sig(x, y, out)
    t = threading.Thread(target=lambda: other.append(_sig(x, y, out)))
    t.start()
    t.join()
    assert other[1] == here


class _FakeGraph:
    made = 0

    def __init__(self, x, y, out, direct):
        _FakeGraph.made += 1
        self.counters, self.info = direct(x, y, out)
        self.nbytes = 10
        self.replays = 0

    def replay(self, x, y, out, read_out):
        self.replays += 1
        return self.counters


def test_direct_then_captured_then_replayed_and_bounded(fake_cupy, monkeypatch):
    monkeypatch.setattr(graphs, "_Graph", _FakeGraph)
    monkeypatch.setattr(graphs, "MAX_GRAPHS", 2)
    _FakeGraph.made = 0
    calls = []

    def direct(x, y, out):
        calls.append(1)
        return ["counter"], {"moduli": 16, "graph": None}

    hows = []
    for _ in range(4):
        counters, info = graphs.run(("s", 1), None, None, None, direct, read_out=False)
        hows.append(info["graph"])
        assert counters == ["counter"]
    assert hows == [None, "captured", "replayed", "replayed"]
    assert len(calls) == 2 and _FakeGraph.made == 1  # the direct call, then the one captured
    for key in (("s", 2), ("s", 3)):
        for _ in range(2):
            graphs.run(key, None, None, None, direct, read_out=False)
    assert graphs.cached() == 2  # the least recently used signature was dropped


def test_a_signature_that_cannot_be_captured_runs_directly(fake_cupy, monkeypatch):
    def failing(*args):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(graphs, "_Graph", failing)
    n = []

    def direct(x, y, out):
        n.append(1)
        return [], {"graph": None}

    for _ in range(4):
        _, info = graphs.run(("t", 1), None, None, None, direct, read_out=False)
        assert info["graph"] is None
    assert len(n) == 4 and graphs.cached() == 0
