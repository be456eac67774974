"""emublas.dask: blockwise GEMM on dask arrays; ozaki2 bit-identical to the single process.

Most tests run on dask's synchronous scheduler; the ``cluster`` fixture starts
one small ``LocalCluster`` of two worker processes for the distributed tests,
including a worker killed in the middle of a computation.
"""

import contextlib
import os
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import emublas  # noqa: E402
import emublas.dask as ed  # noqa: E402
from emublas._kernels import cpu  # noqa: E402
from emublas.backends.ozaki2 import scaling  # noqa: E402

from helpers import randn  # noqa: E402

pytestmark = pytest.mark.skipif(not cpu.available(), reason="C extension not built")

SHAPES = (97, 130, 61)  # m, k, n


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _operands(rng, dtype, m=97, k=130, n=61, trans_a=0, trans_b=0):
    a = randn(rng, (k, m) if trans_a else (m, k), dtype)
    b = randn(rng, (n, k) if trans_b else (k, n), dtype)
    return a, b


def _same(x, y):
    """Bit for bit, NaN where NaN (array_equal with equal_nan treats +0/-0 alike: compare the bytes)."""
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape and x.dtype == y.dtype
    assert np.array_equal(x, y, equal_nan=True), f"max diff {np.nanmax(np.abs(x - y))}"
    same_bits = np.ascontiguousarray(x).view(np.uint8) == np.ascontiguousarray(y).view(np.uint8)
    assert same_bits.all()


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32, np.complex64])
def test_matmul_bit_identical_uneven_chunks(sync, rng, dtype):
    a, b = _operands(rng, dtype)
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    got = ed.matmul(da.from_array(a, chunks=(40, 33)), da.from_array(b, chunks=(33, 40)), backend="ozaki2")
    assert got.chunks == ((40, 40, 17), (40, 21))
    _same(got.compute(), ref)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 1), (1, 0), (2, 2), (1, 2)])
def test_gemm_trans_alpha_beta_c(sync, rng, dtype, trans_a, trans_b):
    a, b = _operands(rng, dtype, trans_a=trans_a, trans_b=trans_b)
    c = randn(rng, SHAPES[::2], dtype)
    alpha, beta = (0.75, -1.5) if dtype == np.float64 else (0.5 - 0.25j, 1.0 + 2.0j)
    ref = emublas.gemm(alpha, a, b, beta, c, trans_a, trans_b, backend="ozaki2")
    got = ed.gemm(
        alpha,
        da.from_array(a, chunks=33),
        da.from_array(b, chunks=(29, 41)),
        beta,
        da.from_array(c, chunks=50),
        trans_a,
        trans_b,
        backend="ozaki2",
    ).compute()
    _same(got, ref)


@pytest.mark.parametrize("mode", ["fast", "accurate", "auto"])
def test_modes_and_moduli(sync, rng, mode):
    a, b = _operands(rng, np.float64)
    a[5] *= 2.0**40  # a row of another magnitude: the shifts differ per row
    for moduli in ("default", 9):
        # 9 moduli are too few for this exponent span (auto mode adds moduli instead): some
        # entries are not certified and are recomputed; the distributed call does the same
        # and warns (from the block tasks) as the single call does
        with warnings.catch_warnings(record=True) as single:
            warnings.simplefilter("always")
            ref = emublas.gemm(1.0, a, b, backend="ozaki2", mode=mode, moduli=moduli)
        short = any(issubclass(w.category, emublas.OzakiAccuracyWarning) for w in single)
        with pytest.warns(emublas.OzakiAccuracyWarning) if short else contextlib.nullcontext():
            got = ed.matmul(
                da.from_array(a, chunks=(50, 26)),
                da.from_array(b, chunks=(26, 61)),
                backend="ozaki2",
                mode=mode,
                moduli=moduli,
            ).compute()
        _same(got, ref)


@pytest.mark.parametrize("bits", [None, 12])
def test_bits_option(sync, rng, bits):
    """ozaki2's ``bits``: the blocks certify to the bits asked for, as the single call does
    (bit for bit, and 6 moduli certify 12 bits where native's bound fails every entry)."""
    a, b = _operands(rng, np.float64)
    kw = dict(backend="ozaki2", moduli=6, fallback="none", bits=bits)
    with warnings.catch_warnings(record=True) as single:
        warnings.simplefilter("always")
        ref = emublas.gemm(1.0, a, b, **kw)
    short = any(issubclass(w.category, emublas.OzakiAccuracyWarning) for w in single)
    assert short == (bits is None)
    with pytest.warns(emublas.OzakiAccuracyWarning, match="native") if short else warnings.catch_warnings():
        if not short:
            warnings.simplefilter("error", emublas.OzakiAccuracyWarning)
        got = ed.matmul(da.from_array(a, chunks=(50, 26)), da.from_array(b, chunks=(26, 61)), **kw).compute()
    _same(got, ref)


def test_complex_hybrid_moduli(sync, rng):
    """Past 22 moduli, complex products use 3M for the extra moduli."""
    a, b = _operands(rng, np.complex128)
    ref = emublas.zgemm(1.0, a, b, backend="ozaki2", moduli=24)
    got = ed.matmul(da.from_array(a, chunks=(40, 33)), da.from_array(b, chunks=(33, 40)), backend="ozaki2", moduli=24)
    _same(got.compute(), ref)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_k_chunk_alignment(sync, rng, monkeypatch, dtype):
    """k beyond K_CHUNK: the driver makes one CRT term per k-chunk; blocks that
    straddle a chunk boundary are split there, so the terms are the same."""
    monkeypatch.setattr(scaling, "K_CHUNK", 48)
    a, b = _operands(rng, dtype)
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    got = ed.matmul(da.from_array(a, chunks=(40, 33)), da.from_array(b, chunks=(33, 40)), backend="ozaki2")
    _same(got.compute(), ref)


def test_extreme_rows_and_zero_rows(sync, rng):
    """Rows whose plain sums overflow (redone on the gathered rows) and all-zero rows."""
    a, b = _operands(rng, np.float64)
    a[[3, 30, 90]] *= 1e300
    a[7] = 0.0
    b[:, [4, 50]] *= 1e-300
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    got = ed.matmul(da.from_array(a, chunks=(40, 33)), da.from_array(b, chunks=(33, 40)), backend="ozaki2")
    _same(got.compute(), ref)


@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_nonfinite(sync, rng, beta):
    a, b = _operands(rng, np.float64)
    c = randn(rng, SHAPES[::2], np.float64)
    a[4, 10] = np.nan
    a[50, 100] = np.inf
    b[7, 30] = -np.inf
    ref = emublas.gemm(1.5, a, b, beta, c, backend="ozaki2")
    got = ed.gemm(
        1.5,
        da.from_array(a, chunks=(40, 33)),
        da.from_array(b, chunks=(33, 40)),
        beta,
        da.from_array(c, chunks=(40, 40)),
        backend="ozaki2",
    ).compute()
    bad = ~np.isfinite(ref)
    assert bad[[4, 50]].all() and bad[:, 30].all()
    np.testing.assert_array_equal(np.isfinite(got), ~bad)
    _same(got[~bad], ref[~bad])


def test_native_backend_close_to_numpy(sync, rng):
    a, b = _operands(rng, np.complex128, trans_b=2)
    c = randn(rng, SHAPES[::2], np.complex128)
    got = ed.gemm(
        2.0,
        da.from_array(a, chunks=(40, 33)),
        da.from_array(b, chunks=(20, 33)),
        0.5,
        da.from_array(c, chunks=(40, 40)),
        0,
        2,
        backend="native",
    ).compute()
    np.testing.assert_allclose(got, 2.0 * a @ b.conj().T + 0.5 * c, rtol=1e-13, atol=1e-12)


def test_misaligned_chunks_are_rechunked(sync, rng):
    a, b = _operands(rng, np.float64)
    c = randn(rng, SHAPES[::2], np.float64)
    xa, xb = da.from_array(a, chunks=(40, 33)), da.from_array(b, chunks=(50, 40))
    got = ed.gemm(1.0, xa, xb, 1.0, da.from_array(c, chunks=(30, 30)), backend="ozaki2")
    assert got.chunks == ((40, 40, 17), (40, 21))
    _same(got.compute(), emublas.gemm(1.0, a, b, 1.0, c, backend="ozaki2"))


def test_shape_errors_name_the_dimensions(rng):
    a, b = da.ones((5, 4), chunks=2), da.ones((3, 6), chunks=2)
    with pytest.raises(ValueError, match=r"op\(a\) is 5x4.*op\(b\) is 3x6"):
        ed.matmul(a, b, backend="ozaki2")
    with pytest.raises(ValueError, match="c has shape 2x2 but the result is 5x6"):
        ed.gemm(1.0, a, da.ones((4, 6)), 1.0, da.ones((2, 2)))
    with pytest.raises(ValueError, match="trans_a"):
        ed.gemm(1.0, a, b, trans_a=3)


def test_quick_returns(sync, rng):
    a, b = _operands(rng, np.float64)
    c = randn(rng, SHAPES[::2], np.float64)
    xa, xb, xc = da.from_array(a, chunks=40), da.from_array(b, chunks=40), da.from_array(c, chunks=40)
    _same(ed.gemm(0.0, xa, xb, 2.0, xc, backend="ozaki2").compute(), emublas.gemm(0.0, a, b, 2.0, c, backend="ozaki2"))
    _same(ed.gemm(1.0, xa[:, :0], xb[:0], 0.0, xc, backend="ozaki2").compute(), np.zeros_like(c))


def test_array_likes_and_vectors(sync, rng):
    """numpy inputs become one-chunk Dask arrays; a 1-D b is a column, as in scipy."""
    a, b = _operands(rng, np.float64)
    got = ed.matmul(a, b[:, 0], backend="ozaki2")
    assert isinstance(got, da.Array) and got.shape == (97, 1)
    _same(got.compute(), emublas.dgemm(1.0, a, b[:, 0], backend="ozaki2"))


# ---------------------------------------------------------------------------
# cupy chunks (GPU): the same products computed on the device of each block
# ---------------------------------------------------------------------------


def _on_gpu(cupy, *arrays, chunks):
    return [da.from_array(cupy.asarray(x), chunks=ch, asarray=False) for x, ch in zip(arrays, chunks)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32, np.complex64])
def test_cupy_chunks_ozaki2_bit_identical(sync, rng, cupy, dtype):
    """cupy chunks: the single-process GPU result, which is also the CPU result, bit for bit."""
    a, b = _operands(rng, dtype)
    ref_cpu = emublas.gemm(1.0, a, b, backend="ozaki2")
    ref_gpu = emublas.gemm(1.0, cupy.asarray(a), cupy.asarray(b), backend="ozaki2")
    xa, xb = _on_gpu(cupy, a, b, chunks=[(40, 33), (33, 40)])
    got = ed.matmul(xa, xb, backend="ozaki2").compute()
    assert isinstance(got, cupy.ndarray)
    _same(got.get(), ref_gpu.get())
    _same(got.get(), ref_cpu)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 1), (1, 0), (2, 2), (1, 2)])
def test_cupy_chunks_trans_alpha_beta_c(sync, rng, cupy, dtype, trans_a, trans_b):
    a, b = _operands(rng, dtype, trans_a=trans_a, trans_b=trans_b)
    c = randn(rng, SHAPES[::2], dtype)
    alpha, beta = (0.75, -1.5) if dtype == np.float64 else (0.5 - 0.25j, 1.0 + 2.0j)
    ref = emublas.gemm(alpha, a, b, beta, c, trans_a, trans_b, backend="ozaki2")
    xa, xb, xc = _on_gpu(cupy, a, b, c, chunks=[33, (29, 41), 50])
    got = ed.gemm(alpha, xa, xb, beta, xc, trans_a, trans_b, backend="ozaki2").compute()
    _same(got.get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["fast", "accurate", "auto"])
def test_cupy_chunks_modes(sync, rng, cupy, mode):
    """accurate: bit for bit.  fast/auto read row norms summed block by block, whose
    last bits may differ from one pass: the result agrees to the emulation's accuracy."""
    a, b = _operands(rng, np.float64)
    a[5] *= 2.0**40
    ref = emublas.gemm(1.0, cupy.asarray(a), cupy.asarray(b), backend="ozaki2", mode=mode).get()
    xa, xb = _on_gpu(cupy, a, b, chunks=[(50, 26), (26, 61)])
    got = ed.matmul(xa, xb, backend="ozaki2", mode=mode).compute().get()
    if mode == "accurate":
        _same(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13 * np.abs(ref).max())


@pytest.mark.gpu
def test_cupy_chunks_hybrid_moduli(sync, rng, cupy):
    """Past 22 moduli, complex products use 3M for the extra moduli (on the GPU too)."""
    a, b = _operands(rng, np.complex128)
    ref = emublas.zgemm(1.0, a, b, backend="ozaki2", moduli=24)
    xa, xb = _on_gpu(cupy, a, b, chunks=[(40, 33), (33, 40)])
    _same(ed.matmul(xa, xb, backend="ozaki2", moduli=24).compute().get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_cupy_chunks_k_beyond_k_chunk(sync, rng, cupy, dtype):
    """k past K_CHUNK with k-blocks that straddle the engine's chunk boundary."""
    k = scaling.K_CHUNK + 77
    a, b = randn(rng, (3, k), dtype), randn(rng, (k, 2), dtype)
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    xa, xb = _on_gpu(cupy, a, b, chunks=[(2, 50000), (50000, 2)])
    _same(ed.matmul(xa, xb, backend="ozaki2").compute().get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_cupy_chunks_nonfinite(sync, rng, cupy, beta):
    a, b = _operands(rng, np.float64)
    c = randn(rng, SHAPES[::2], np.float64)
    a[4, 10], a[50, 100], b[7, 30] = np.nan, np.inf, -np.inf
    ref = emublas.gemm(1.5, cupy.asarray(a), cupy.asarray(b), beta, cupy.asarray(c), backend="ozaki2").get()
    xa, xb, xc = _on_gpu(cupy, a, b, c, chunks=[(40, 33), (33, 40), (40, 40)])
    got = ed.gemm(1.5, xa, xb, beta, xc, backend="ozaki2").compute().get()
    bad = ~np.isfinite(ref)
    assert bad[[4, 50]].all() and bad[:, 30].all()
    np.testing.assert_array_equal(np.isfinite(got), ~bad)
    _same(got[~bad], ref[~bad])


@pytest.mark.gpu
@pytest.mark.parametrize("backend,rtol", [("native", 1e-13), ("strassen", 1e-11), ("boolpack", 1e-3)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_cupy_chunks_other_backends(sync, rng, cupy, backend, rtol, dtype):
    """Other backends on cupy chunks: one emublas gemm per block triple, on the GPU."""
    a, b = _operands(rng, dtype, trans_b=2)
    c = randn(rng, SHAPES[::2], dtype)
    xa, xb, xc = _on_gpu(cupy, a, b, c, chunks=[(40, 33), (20, 33), (40, 40)])
    got = ed.gemm(2.0, xa, xb, 0.5, xc, 0, 2, backend=backend).compute()
    assert isinstance(got, cupy.ndarray)
    want = 2.0 * a @ b.conj().T + 0.5 * c
    np.testing.assert_allclose(got.get(), want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.gpu
def test_cupy_chunks_quick_return_and_mixing(sync, rng, cupy):
    a, b = _operands(rng, np.float64)
    xa, xb = _on_gpu(cupy, a, b, chunks=[40, 40])
    zero = ed.gemm(1.0, xa[:, :0], xb[:0], backend="ozaki2").compute()
    assert isinstance(zero, cupy.ndarray) and zero.shape == (97, 61) and not zero.any()
    with pytest.raises(TypeError, match="a has cupy chunks but b has numpy chunks"):
        ed.matmul(xa, da.from_array(b, chunks=40), backend="ozaki2")


# ---------------------------------------------------------------------------
# a LocalCluster of two worker processes
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    # the workers import the emublas this test imports, one C thread each
    root = os.path.dirname(os.path.dirname(os.path.abspath(emublas.__file__)))
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        "EMUBLAS_NUM_THREADS": "1",
    }
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, env=env
        ) as cluster,
        distributed.Client(cluster) as cl,
    ):
        yield cl


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_local_cluster_bit_identical(client, rng, dtype):
    a, b = _operands(rng, dtype)
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    got = ed.matmul(da.from_array(a, chunks=(40, 33)), da.from_array(b, chunks=(33, 40)), backend="ozaki2")
    _same(client.compute(got).result(), ref)


def test_local_cluster_worker_killed(client, rng, tmp_path):
    """A worker process dies in the middle of the product pass; Dask recomputes what it
    held on the survivor (and the restarted worker), and the result is still exact."""
    a, b = _operands(rng, np.float64, m=120, k=150, n=90)
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    marker = tmp_path / "kill-once"

    def kill_once(block):
        try:
            os.unlink(marker)  # one process wins the unlink and dies
        except FileNotFoundError:
            return block
        os._exit(1)

    pids_before = set(client.run(os.getpid).values())
    xa = da.from_array(a, chunks=(30, 30)).map_blocks(kill_once, dtype=a.dtype)
    lazy = ed.matmul(xa, da.from_array(b, chunks=(30, 45)), backend="ozaki2")  # scaling pass done, unarmed
    marker.touch()
    got = client.compute(lazy).result(timeout=120)
    assert not marker.exists()
    client.wait_for_workers(2, timeout=60)
    assert set(client.run(os.getpid).values()) != pids_before  # one worker really was replaced
    _same(got, ref)


@pytest.mark.gpu
def test_local_cluster_cupy_chunks(client, rng, cupy):
    """cupy chunks on worker processes (each on the GPU it sees): the single-process result."""
    a, b = _operands(rng, np.complex128)
    ref = emublas.gemm(1.0, a, b, backend="ozaki2")
    xa, xb = _on_gpu(cupy, a, b, chunks=[(40, 33), (33, 40)])
    got = client.compute(ed.matmul(xa, xb, backend="ozaki2")).result(timeout=120)
    _same(cupy.asnumpy(got), ref)
