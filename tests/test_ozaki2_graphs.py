"""ozaki2's CUDA-graph replay of small calls on cupy arrays (emublas.backends.ozaki2.graphs).

Every replayed result is checked bit for bit against the same call made directly
(``graphs="off"``) on the same data; the calls of one signature go direct, then
captured, then replayed, and the inputs stay untouched.  Skips without cupy or a GPU.
"""

import numpy as np
import pytest
from conftest import cupy_or_skip

from helpers import randn

pytestmark = [pytest.mark.gpu]


@pytest.fixture
def cp():
    cupy = cupy_or_skip()
    from emublas.backends.ozaki2 import graphs

    graphs.clear()
    yield cupy
    graphs.clear()


def _wide(rng, shape, dtype, phi=1.0):
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x.astype(dtype)


def _graph():
    from emublas.backends.ozaki2 import routines

    return routines.last_run()["graph"]


CASES = [
    ("gemm", "float64", {"trans_a": 0, "trans_b": 0}),
    ("gemm", "float64", {"trans_a": 1, "trans_b": 0}),
    ("gemm", "complex128", {"trans_a": 2, "trans_b": 1}),
    ("gemm", "float32", {}),
    ("gemm", "complex64", {}),
    ("herk", "complex128", {"lower": 1}),
    ("herk", "complex128", {"trans": 2}),
    ("syrk", "float64", {"lower": 1}),  # odd k: the factor is padded per call
    ("syrk", "complex128", {}),
]


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("routine,dtype,kw", CASES)
def test_replay_is_the_direct_call_bit_for_bit(emublas, cp, rng, routine, dtype, kw, mode):
    m, n, k = 70, 45, 33
    fn = getattr(emublas, routine)
    cplx = np.dtype(dtype).kind == "c"
    alpha, beta = (0.75 - 0.5j, 1.25 + 0.5j) if cplx and routine != "herk" else (0.75, -1.5)
    seen = []
    for _ in range(4):  # direct, captured, replayed, replayed
        if routine == "gemm":
            ta, tb = kw.get("trans_a", 0), kw.get("trans_b", 0)
            a = cp.asarray(_wide(rng, (m, k) if ta == 0 else (k, m), dtype))
            b = cp.asarray(_wide(rng, (k, n) if tb == 0 else (n, k), dtype))
            c = cp.asarray(randn(rng, (m, n), dtype))
            args = (alpha, a, b, beta)
        else:
            a = cp.asarray(_wide(rng, (n, k) if kw.get("trans", 0) == 0 else (k, n), dtype))
            c = cp.asarray(randn(rng, (n, n), dtype))
            args = (alpha, a, beta)
        inputs = [x.copy() for x in args if isinstance(x, cp.ndarray)] + [c.copy()]
        want = fn(*args, c.copy(), **kw, backend="ozaki2", mode=mode, moduli=14, graphs="off")
        got = fn(*args, c, **kw, backend="ozaki2", mode=mode, moduli=14)
        seen.append(_graph())
        cp.testing.assert_array_equal(got, want)
        for before, now in zip(inputs, [x for x in args if isinstance(x, cp.ndarray)] + [c]):
            cp.testing.assert_array_equal(now, before)  # overwrite_c is off: c stays, too
    emublas.synchronize()
    assert seen == [None, "captured", "replayed", "replayed"]


def test_replays_deliver_their_accuracy_warnings(emublas, cp, rng):
    """Too few moduli: every replay's uncertified entries are counted, warned about and recomputed."""
    a_host = _wide(rng, (60, 50), np.float64, phi=3.0)
    b_host = _wide(rng, (50, 40), np.float64, phi=3.0)
    a, b = cp.asarray(a_host), cp.asarray(b_host)
    for _ in range(3):
        with pytest.warns(emublas.OzakiAccuracyWarning, match="earlier call on the GPU"):
            got = emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=4)
            emublas.synchronize()
        assert emublas.ozaki2.last_run()["uncertified"] > 0
        np.testing.assert_allclose(cp.asnumpy(got), a_host @ b_host, rtol=1e-12, atol=1e-300)
    assert _graph() == "replayed"


def test_calls_that_do_not_qualify_run_directly(emublas, cp, rng):
    a = cp.asarray(randn(rng, (64, 128), np.float64))[:, ::2]  # not contiguous
    b = cp.asarray(randn(rng, (64, 64), np.float64))
    for _ in range(3):
        emublas.dgemm(1.0, a, b, backend="ozaki2")
        assert _graph() is None
    for _ in range(3):
        emublas.dgemm(1.0, b, b, backend="ozaki2", mode="auto")  # auto mode reads its sample
        assert emublas.ozaki2.last_run().get("graph") is None
    for _ in range(3):
        emublas.dgemm(1.0, b, b, backend="ozaki2", graphs="off")
        assert _graph() is None


def test_each_stream_replays_its_own_graph(emublas, cp, rng):
    a = cp.asarray(randn(rng, (80, 80), np.float64))
    want = emublas.dgemm(1.0, a, a, backend="ozaki2", graphs="off")
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    for stream in (s1, s2, s1, s2, s1, s2):
        with stream:
            got = emublas.dgemm(1.0, a, a, backend="ozaki2")
        stream.synchronize()
        cp.testing.assert_array_equal(got, want)
    from emublas.backends.ozaki2 import graphs

    assert graphs.cached() == 2


def test_the_cache_is_bounded(emublas, cp, rng, monkeypatch):
    from emublas.backends.ozaki2 import graphs

    monkeypatch.setattr(graphs, "MAX_GRAPHS", 2)
    for n in (40, 41, 42, 43):
        a = cp.asarray(randn(rng, (n, n), np.float64))
        for _ in range(3):
            got = emublas.dgemm(1.0, a, a, backend="ozaki2")
        cp.testing.assert_array_equal(got, emublas.dgemm(1.0, a, a, backend="ozaki2", graphs="off"))
    assert graphs.cached() == 2


def test_threads_sharing_a_stream_get_their_own_results(emublas, cp, rng):
    """Replays of one graph from several threads on the default stream never mix operands."""
    import threading

    mats = [cp.asarray(randn(rng, (96, 96), np.float64)) for _ in range(8)]
    want = [emublas.dgemm(1.0, a, a, backend="ozaki2", graphs="off") for a in mats]
    emublas.dgemm(1.0, mats[0], mats[0], backend="ozaki2")  # first sighting; the threads capture and replay
    bad = []

    def work(i):
        for _ in range(20):
            got = emublas.dgemm(1.0, mats[i], mats[i], backend="ozaki2")
            if not bool(cp.all(got == want[i])):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(mats))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cp.cuda.Device().synchronize()
    assert not bad
