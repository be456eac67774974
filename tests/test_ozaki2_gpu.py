"""ozaki2 on cupy arrays: the GPU pipeline against the CPU backend (bit for bit),
against exact integers and cuBLAS, blocking, k chunks, streams, bad input.

Every test skips cleanly without cupy or a GPU (see conftest.cupy_or_skip).
The whole BLAS parity suite also runs ozaki2 on cupy (tests/test_blas_parity.py).
"""

import warnings
from fractions import Fraction

import numpy as np
import pytest
from conftest import cupy_or_skip

from helpers import randn

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::emublas.errors.OzakiAccuracyWarning")]


@pytest.fixture
def cp():
    return cupy_or_skip()


def _both(emublas, cp, routine, args, kwargs, c=None):
    """Run ``routine`` with ozaki2 on numpy and on cupy copies of the same data."""
    fn = getattr(emublas, routine)
    host = fn(*args, **({"c": c.copy()} if c is not None else {}), **kwargs, backend="ozaki2")
    dev_args = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    dev_c = {"c": cp.asarray(c)} if c is not None else {}
    dev = fn(*dev_args, **dev_c, **kwargs, backend="ozaki2")
    return host, cp.asnumpy(dev)


def _wide(rng, shape, dtype, phi=2.0):
    """(rand − 0.5)·exp(φ·randn): a spread of exponents, the scaling's hard case."""
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (2, 2), (1, 2)])
@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 17, 65), (70, 41, 5)])
def test_gemm_matches_cpu_bit_for_bit(emublas, cp, rng, dtype, trans_a, trans_b, shape):
    if np.dtype(dtype).kind == "f" and 2 in (trans_a, trans_b):
        trans_a, trans_b = min(trans_a, 1), min(trans_b, 1)
    m, n, k = shape
    a = _wide(rng, (m, k) if trans_a == 0 else (k, m), dtype)
    b = _wide(rng, (k, n) if trans_b == 0 else (n, k), dtype)
    c = randn(rng, (m, n), dtype)
    alpha, beta = (0.75 - 0.5j, 1.25 + 0.5j) if np.dtype(dtype).kind == "c" else (0.75, -1.5)
    host, dev = _both(emublas, cp, "gemm", (alpha, a, b, beta), {"trans_a": trans_a, "trans_b": trans_b}, c=c)
    np.testing.assert_array_equal(dev, host)


@pytest.mark.parametrize(
    "routine,dtype",
    [
        ("syrk", "float64"),
        ("syrk", "float32"),
        ("syrk", "complex128"),
        ("herk", "complex128"),
        ("herk", "complex64"),
        ("syr2k", "float64"),
        ("syr2k", "complex128"),
        ("her2k", "complex128"),
    ],
)
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("n,k", [(1, 1), (45, 23), (64, 7)])
def test_rank_k_matches_cpu_bit_for_bit(emublas, cp, rng, routine, dtype, trans, lower, n, k):
    if routine in ("herk", "her2k") and trans == 1:
        trans = 2
    if np.dtype(dtype).kind == "c" and routine in ("syrk", "syr2k") and trans == 2:
        trans = 1
    shape = (n, k) if trans == 0 else (k, n)
    a = _wide(rng, shape, dtype)
    c = randn(rng, (n, n), dtype)
    herm = routine in ("herk", "her2k")
    alpha = 0.5 if routine == "herk" else (0.5 - 0.25j if np.dtype(dtype).kind == "c" else 0.5)
    beta = -0.75 if herm or np.dtype(dtype).kind == "f" else (0.5 + 0.5j)
    args = (alpha, a) if routine in ("syrk", "herk") else (alpha, a, _wide(rng, shape, dtype))
    host, dev = _both(emublas, cp, routine, args + (beta,), {"trans": trans, "lower": lower}, c=c)
    np.testing.assert_array_equal(dev, host)


def test_exact_against_fractions(emublas, cp, rng):
    """Entries against the exact rational product, correctly rounded (φ = 0.5, 20 moduli)."""
    a = _wide(rng, (9, 40), np.float64, 0.5)
    b = _wide(rng, (40, 7), np.float64, 0.5)
    got = cp.asnumpy(emublas.dgemm(1.0, cp.asarray(a), cp.asarray(b), backend="ozaki2", moduli=20))
    for i in range(9):
        for j in range(7):
            exact = sum(Fraction(float(a[i, l])) * Fraction(float(b[l, j])) for l in range(40))
            assert abs(Fraction(float(got[i, j])) - exact) <= abs(exact) * Fraction(2) ** -52


def test_close_to_cublas(emublas, cp, rng):
    a = cp.asarray(randn(rng, (300, 257), np.complex128))
    b = cp.asarray(randn(rng, (257, 190), np.complex128))
    got = emublas.zgemm(1.0, a, b, backend="ozaki2")
    ref = a @ b
    assert float(cp.abs(got - ref).max() / cp.abs(ref).max()) < 1e-14


def _square_call(emublas, cp, rng, routine, n=150, k=90):
    """A call of ``routine`` (gemm or a rank-k update) on wide-exponent data, n x n result:
    ``run()`` computes it on a fresh copy of c with ozaki2, planned directly."""
    dtype = np.complex128 if routine in ("gemm", "herk") else np.float64
    a = cp.asarray(_wide(rng, (n, k), dtype))
    b = cp.asarray(_wide(rng, (k, n) if routine == "gemm" else (n, k), dtype))
    c = cp.asarray(randn(rng, (n, n), dtype))
    fn = getattr(emublas, routine)
    args = (0.5, a, b) if routine in ("gemm", "syr2k") else (0.5, a)
    kw = {} if routine == "gemm" else {"lower": 1}
    # graphs="off": every call plans directly (a replay would keep the first call's plan)
    return lambda: fn(*args, 0.25, c.copy(), **kw, backend="ozaki2", graphs="off")


@pytest.mark.parametrize("routine", ["gemm", "herk", "syr2k", "syrk"])
def test_blocking_gives_the_same_result(emublas, cp, rng, monkeypatch, routine):
    """A small workspace budget forces column blocks (and, for rank-k, swapped products)."""
    from emublas.backends.ozaki2 import calls, routines

    n = 150
    run = _square_call(emublas, cp, rng, routine, n)
    whole = run()
    assert routines.last_run()["gpu_plan"]["column_block"] == n
    monkeypatch.setattr(calls, "gpu_budget", lambda x, y, out: 400_000)
    blocked = run()
    assert routines.last_run()["gpu_plan"]["column_block"] < n
    cp.testing.assert_array_equal(blocked, whole)


@pytest.mark.parametrize("routine", ["gemm", "herk", "syr2k"])
def test_batched_products_give_the_same_result(emublas, cp, rng, monkeypatch, routine):
    """The products of a run of moduli as strided-batched cuBLASLt calls (made to apply at
    this size) give the one-by-one products' result bit for bit, on the fused final pass and
    the term planes (which never batch), and a CUDA-graph replay (captured one by one)
    equals the direct batched call."""
    from emublas.backends.ozaki2 import gpu_engine, kernels_gpu, routines

    run = _square_call(emublas, cp, rng, routine)
    monkeypatch.setattr(kernels_gpu, "BATCH_MIN_VOLUME", 1)
    calls = []
    batched = kernels_gpu.gemm_tn_batched
    monkeypatch.setattr(kernels_gpu, "gemm_tn_batched", lambda *a: calls.append(batched(*a)) or calls[-1])
    for fused in (True, False):
        monkeypatch.setattr(gpu_engine, "FUSED_FINAL", fused)
        monkeypatch.setattr(kernels_gpu, "BATCHED", "off")
        one_by_one = run()
        monkeypatch.setattr(kernels_gpu, "BATCHED", "auto")
        calls.clear()
        together = run()
        assert any(calls) == (fused and routines.last_run()["gpu_plan"]["fused_final"])
        cp.testing.assert_array_equal(together, one_by_one)
    if routine == "gemm":  # the graph path: gemm qualifies for a replay
        monkeypatch.setattr(gpu_engine, "FUSED_FINAL", True)
        a = cp.asarray(randn(rng, (150, 90), np.complex128))
        b = cp.asarray(randn(rng, (90, 150), np.complex128))
        direct = emublas.gemm(1.0, a, b, backend="ozaki2", graphs="off")
        replays = [emublas.gemm(1.0, a, b, backend="ozaki2") for _ in range(3)]
        assert routines.last_run()["graph"] == "replayed"
        for r in replays:
            cp.testing.assert_array_equal(r, direct)


@pytest.mark.parametrize("routine", ["gemm", "herk", "syr2k"])
def test_product_paths_agree(emublas, cp, rng, monkeypatch, routine):
    """gemmEx, cuBLASLt's timed choice and "auto" (cuBLASLt's first heuristic proposal at
    these sizes) give the same result bit for bit, and "auto" falls back to gemmEx while
    the stream is captured (the CUDA-graph replays)."""
    from emublas._kernels import cublaslt
    from emublas.backends.ozaki2 import kernels_gpu

    run = _square_call(emublas, cp, rng, routine)
    results = {}
    for path in ("gemmex", "lt", "auto"):
        monkeypatch.setattr(kernels_gpu, "PRODUCTS", path)
        results[path] = run()
    cp.testing.assert_array_equal(results["lt"], results["gemmex"])
    cp.testing.assert_array_equal(results["auto"], results["gemmex"])
    stream = cp.cuda.Stream(non_blocking=True)
    assert not cublaslt.capturing(stream.ptr)
    with stream:
        stream.begin_capture()
        try:
            assert cublaslt.capturing(stream.ptr)
        finally:
            stream.end_capture()


@pytest.mark.parametrize("path", ["gemmex", "lt"])
@pytest.mark.parametrize("routine", ["gemm", "herk", "syr2k"])
def test_products_in_column_blocks_give_the_same_result(emublas, cp, rng, monkeypatch, path, routine):
    """int8 products issued as blocks of columns (an odd width, a short last block) give
    the whole products' result bit for bit, fused and term-plane final passes alike."""
    from emublas.backends.ozaki2 import gpu_engine, kernels_gpu

    run = _square_call(emublas, cp, rng, routine)
    monkeypatch.setattr(kernels_gpu, "PRODUCTS", path)
    monkeypatch.setattr(kernels_gpu, "SPLIT_MIN_VOLUME", 1)
    for fused in (True, False):
        monkeypatch.setattr(gpu_engine, "FUSED_FINAL", fused)
        monkeypatch.setattr(kernels_gpu, "PRODUCT_COLS", 0)
        whole = run()
        monkeypatch.setattr(kernels_gpu, "PRODUCT_COLS", 48)
        blocked = run()
        cp.testing.assert_array_equal(blocked, whole)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("phi", [0.5, 6.0])
def test_fused_final_pass_matches_the_term_planes(emublas, cp, rng, monkeypatch, dtype, phi):
    """The products kept resident and reduced in the final pass give the term-plane path's
    result bit for bit (phi = 6: entries the certificate sends to the fallback, too)."""
    from emublas.backends.ozaki2 import gpu_engine, routines

    m, n, k = 130, 97, 75
    a = cp.asarray(_wide(rng, (m, k), dtype, phi))
    b = cp.asarray(_wide(rng, (k, n), dtype, phi))
    c = cp.asarray(randn(rng, (m, n), dtype))
    alpha, beta = (0.75 - 0.5j, 1.25 + 0.5j) if np.dtype(dtype).kind == "c" else (0.75, -1.5)
    fused = emublas.gemm(alpha, a, b, beta, c.copy(), backend="ozaki2", graphs="off")
    assert routines.last_run()["gpu_plan"]["fused_final"] is True
    monkeypatch.setattr(gpu_engine, "FUSED_FINAL", False)  # the term planes' plan
    planes = emublas.gemm(alpha, a, b, beta, c.copy(), backend="ozaki2", graphs="off")
    assert routines.last_run()["gpu_plan"]["fused_final"] is False
    cp.testing.assert_array_equal(fused, planes)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize(
    "shape,phi,moduli", [((130, 97, 75), 0.5, None), ((67, 33, 41), 6.0, 12), ((3, 2, 5), 1.0, 20)]
)
def test_paired_final_pass_matches_term_by_term(emublas, cp, rng, monkeypatch, dtype, shape, phi, moduli):
    """2M's real and imaginary terms of a modulus, read as a pair (oz_crt_fused2), give the
    term-by-term fused pass's result and the CPU's bit for bit: rows that leave a lane short,
    more moduli than pairs in flight, and (phi = 6, 12 moduli) entries sent to the fallback."""
    from emublas.backends.ozaki2 import gpu_stages, kernels_gpu_crt, routines

    m, n, k = shape
    a, b = _wide(rng, (m, k), dtype, phi), _wide(rng, (k, n), dtype, phi)
    c = randn(rng, (m, n), dtype)
    opts = {"backend": "ozaki2", "graphs": "off", **({"moduli": moduli} if moduli else {})}
    args = (0.75 - 0.5j, cp.asarray(a), cp.asarray(b), 1.25 + 0.5j)
    seen = []
    real_final = kernels_gpu_crt.crt_final
    monkeypatch.setattr(kernels_gpu_crt, "crt_final", lambda *x, **kw: seen.append(kw["fused"]) or real_final(*x, **kw))
    paired = emublas.gemm(*args, cp.asarray(c), **opts)
    assert routines.last_run()["gpu_plan"]["fused_final"] is True and seen[-1][4] is True
    monkeypatch.setattr(gpu_stages, "PAIRED_FINAL", False)
    single = emublas.gemm(*args, cp.asarray(c), **opts)
    assert seen[-1][4] is False
    cp.testing.assert_array_equal(paired, single)
    host = emublas.gemm(0.75 - 0.5j, a, b, 1.25 + 0.5j, c.copy(), **{o: v for o, v in opts.items() if o != "graphs"})
    np.testing.assert_array_equal(cp.asnumpy(paired), host)


def test_fused_final_pass_needs_room_for_every_product(emublas, cp, rng, monkeypatch):
    """A budget that holds the term planes but not every modulus's products keeps the
    term-plane path, unblocked; rank-k terms that read a product transposed never fuse."""
    from emublas.backends.ozaki2 import calls, gpu_stages, routines

    n, k = 256, 64
    a, b = randn(rng, (n, k), np.float64), randn(rng, (k, n), np.float64)
    a_d, b_d = cp.asarray(a), cp.asarray(b)
    emublas.dgemm(1.0, a_d, b_d, backend="ozaki2", graphs="off", moduli=16)
    assert routines.last_run()["gpu_plan"]["fused_final"] is True
    rp, kp = gpu_stages.kg.pad(n), gpu_stages.kg.pad(k)
    fused_need = 16 * rp * rp * 4 + 16 * kp * 2 * rp  # every product, and one residue pass of both factors
    monkeypatch.setattr(calls, "gpu_budget", lambda x, y, out: fused_need - 1)
    got = emublas.dgemm(1.0, a_d, b_d, backend="ozaki2", graphs="off", moduli=16)
    plan = routines.last_run()["gpu_plan"]
    assert plan["fused_final"] is False and plan["column_block"] == n
    np.testing.assert_array_equal(cp.asnumpy(got), emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=16))
    monkeypatch.undo()
    emublas.dsyrk(1.0, a_d, backend="ozaki2", graphs="off", moduli=16)
    assert routines.last_run()["gpu_plan"]["fused_final"] is True  # oz_crt_fused_tr


@pytest.mark.parametrize("routine", ["syrk", "herk", "syr2k", "her2k"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("phi", [0.5, 6.0])
def test_fused_rank_k_pass_matches_the_term_planes(emublas, cp, rng, monkeypatch, routine, dtype, phi):
    """Rank-k terms read a product transposed; the fused pass (oz_crt_fused_tr) gives the
    term planes' result bit for bit, both triangles, with an odd order and phi = 6's
    recomputed entries."""
    from emublas.backends.ozaki2 import gpu_engine, routines

    if routine.startswith("her") and np.dtype(dtype).kind != "c":
        pytest.skip("herk/her2k are complex")
    n, k = 133, 70
    a = cp.asarray(_wide(rng, (n, k), dtype, phi))
    b = cp.asarray(_wide(rng, (n, k), dtype, phi))
    c = cp.asarray(randn(rng, (n, n), dtype))
    fn = getattr(emublas, routine)
    args = (0.75, a, b) if routine.endswith("2k") else (0.75, a)
    beta = 0.5 if routine.startswith("her") or np.dtype(dtype).kind != "c" else 0.5 - 0.25j
    for lower in (0, 1):
        a0, b0 = a.copy(), b.copy()
        fused = fn(*args, beta, c.copy(), lower=lower, backend="ozaki2", graphs="off")
        assert routines.last_run()["gpu_plan"]["fused_final"] is True
        with monkeypatch.context() as mp:
            mp.setattr(gpu_engine, "FUSED_FINAL", False)  # the term planes' plan
            planes = fn(*args, beta, c.copy(), lower=lower, backend="ozaki2", graphs="off")
            assert routines.last_run()["gpu_plan"]["fused_final"] is False
        cp.testing.assert_array_equal(fused, planes)
        cp.testing.assert_array_equal(a, a0)
        cp.testing.assert_array_equal(b, b0)


def test_workspace_too_small_raises(emublas, cp, rng, monkeypatch):
    from emublas.backends.ozaki2 import calls

    monkeypatch.setattr(calls, "gpu_budget", lambda x, y, out: 1000)
    a = cp.asarray(randn(rng, (64, 64), np.float64))
    with pytest.raises(MemoryError, match="workspace"):
        emublas.dgemm(1.0, a, a, backend="ozaki2", graphs="off")  # a replay would not plan again


def test_k_beyond_one_int32_chunk(emublas, cp, rng):
    from emublas.backends.ozaki2.scaling import K_CHUNK

    k = K_CHUNK + 77
    a = randn(rng, (5, k), np.float64)
    b = randn(rng, (k, 3), np.float64)
    host, dev = _both(emublas, cp, "dgemm", (1.0, a, b), {})
    np.testing.assert_array_equal(dev, host)


def test_nonfinite_pattern_matches_cublas(emublas, cp, rng):
    a = randn(rng, (40, 30), np.float64)
    b = randn(rng, (30, 20), np.float64)
    a[3, 4] = np.nan
    a[7, 1] = np.inf
    b[2, 5] = -np.inf
    da, db = cp.asarray(a), cp.asarray(b)
    got = cp.asnumpy(emublas.dgemm(1.0, da, db, backend="ozaki2"))
    ref = cp.asnumpy(emublas.dgemm(1.0, da, db, backend="native"))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-12, atol=1e-12)


def test_inputs_untouched_and_overwrite(emublas, cp, rng):
    a = cp.asarray(randn(rng, (20, 20), np.complex128))
    c = cp.asarray(randn(rng, (20, 20), np.complex128))
    a0, c0 = a.copy(), c.copy()
    out = emublas.zherk(1.0, a, 1.0, c, backend="ozaki2")
    cp.testing.assert_array_equal(a, a0)
    cp.testing.assert_array_equal(c, c0)
    assert out is not c


def test_runs_on_the_current_stream(emublas, cp, rng):
    a = cp.asarray(randn(rng, (128, 96), np.float64))
    b = cp.asarray(randn(rng, (96, 80), np.float64))
    ref = emublas.dgemm(1.0, a, b, backend="ozaki2")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        got = emublas.dgemm(1.0, a, b, backend="ozaki2")
    stream.synchronize()
    cp.testing.assert_array_equal(got, ref)


def test_modes_and_warning(emublas, cp, rng):
    a = _wide(rng, (50, 60), np.float64, 4.0)
    b = _wide(rng, (60, 40), np.float64, 4.0)
    for mode in ("fast", "accurate", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            host, dev = _both(emublas, cp, "dgemm", (1.0, a, b), {"mode": mode})
        np.testing.assert_allclose(dev, host, rtol=1e-15, atol=0)
    emublas.synchronize()  # earlier calls' verdicts out of the way
    with pytest.warns(emublas.OzakiAccuracyWarning, match="earlier call on the GPU"):
        got = emublas.dgemm(1.0, cp.asarray(a), cp.asarray(b), backend="ozaki2", moduli=4)
        emublas.synchronize()  # the verdict comes from the device without a wait inside the call
    assert emublas.ozaki2.last_run()["uncertified"] > 0
    np.testing.assert_allclose(cp.asnumpy(got), a @ b, rtol=1e-12, atol=1e-300)  # recomputed entries


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_bits_option_on_the_gpu(emublas, cp, rng, dtype):
    """``bits``: the device certifies to the bits asked for, as the CPU does (bit for bit, the
    same count of uncertified entries), through a replayed graph too, and its deferred
    warning names the request."""
    a, b = _wide(rng, (40, 64), dtype, 0.5), _wide(rng, (64, 30), dtype, 0.5)
    gemm = "zgemm" if dtype == np.complex128 else "dgemm"
    emublas.synchronize()
    for _ in range(3):  # the second and third calls replay a captured graph
        with warnings.catch_warnings():
            warnings.simplefilter("error", emublas.OzakiAccuracyWarning)
            host, dev = _both(emublas, cp, gemm, (1.0, a, b), {"moduli": 6, "bits": 12, "fallback": "none"})
            emublas.synchronize()
        assert emublas.ozaki2.last_run()["required_bits"] == 12
        assert emublas.ozaki2.last_run()["uncertified"] == 0
        np.testing.assert_array_equal(dev, host)
    assert np.all(np.abs(dev - a @ b) <= 2.0**-12 * (np.abs(a) @ np.abs(b)))
    with pytest.warns(emublas.OzakiAccuracyWarning, match="30 correct bits"):
        emublas.gemm(1.0, cp.asarray(a), cp.asarray(b), backend="ozaki2", moduli=6, bits=30, fallback="none")
        emublas.synchronize()
    # mode=auto sizes the count for the bits on the device as on the host (its sample is read
    # on the host, as test_modes_and_warning compares it: close, not bit for bit)
    host, dev = _both(emublas, cp, gemm, (1.0, a, b), {"mode": "auto", "bits": 14})
    emublas.synchronize()
    assert emublas.ozaki2.last_run()["moduli"] < 16 and emublas.ozaki2.last_run()["required_bits"] == 14
    for got in (host, dev):
        assert np.all(np.abs(got - a @ b) <= 2.0**-14 * (np.abs(a) @ np.abs(b)))
    with pytest.raises(ValueError, match=r"bits=30 is outside 1\.\.24"):
        emublas.gemm(
            1.0,
            cp.asarray(a.astype(np.complex64 if dtype == np.complex128 else np.float32)),
            cp.asarray(b.astype(np.complex64 if dtype == np.complex128 else np.float32)),
            backend="ozaki2",
            bits=30,
        )


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_call_is_capturable_in_a_cuda_graph(emublas, cp, rng, mode, dtype):
    """fast and accurate modes queue everything on the current stream and never wait for
    the device: the call can be captured into a CUDA graph, whose replay gives the result
    of the direct call (on new data copied into the same buffers, too)."""
    a, b = (cp.asarray(_wide(rng, s, dtype, 0.5)) for s in ((96, 80), (80, 72)))
    ref = emublas.gemm(1.0, a, b, backend="ozaki2", mode=mode, moduli=16)
    emublas.synchronize()
    # stream-ordered allocations: the call's temporaries become the graph's own memory
    old_alloc = cp.cuda.get_allocator()
    cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
    try:
        _capture_and_replay(emublas, cp, rng, a, b, ref, mode, dtype)
    finally:
        cp.cuda.set_allocator(old_alloc)


def _capture_and_replay(emublas, cp, rng, a, b, ref, mode, dtype):
    stream = cp.cuda.Stream(non_blocking=True)
    # the output lives outside the graph (c updated in place): a graph that allocated its
    # output could not be launched again until that allocation was freed
    out = cp.zeros(ref.shape, ref.dtype, order="F")
    cp.cuda.Stream.null.synchronize()  # a non-blocking stream does not wait for the null stream's work
    with stream:
        emublas.gemm(1.0, a, b, 0.0, out, overwrite_c=1, backend="ozaki2", mode=mode, moduli=16)  # warm-up
        stream.begin_capture()
        got = emublas.gemm(1.0, a, b, 0.0, out, overwrite_c=1, backend="ozaki2", mode=mode, moduli=16)
        graph = stream.end_capture()
        assert got is out
        out.fill(0)
        graph.launch(stream)
    stream.synchronize()
    cp.testing.assert_array_equal(out, ref)
    a2, b2 = (cp.asarray(_wide(rng, s, dtype, 0.5)) for s in ((96, 80), (80, 72)))
    cp.cuda.Stream.null.synchronize()
    with stream:  # the new inputs copied in on the graph's stream, so that the replay reads them
        a[...] = a2
        b[...] = b2
        graph.launch(stream)
    stream.synchronize()
    cp.testing.assert_array_equal(out, emublas.gemm(1.0, a2, b2, backend="ozaki2", mode=mode, moduli=16))
    emublas.synchronize()


def test_profile_phases(emublas, cp, rng):
    from emublas.backends.ozaki2 import calls, routines

    a = cp.asarray(randn(rng, (256, 256), np.float64))
    old = calls.PROFILE_GPU
    calls.PROFILE_GPU = True
    try:
        emublas.dgemm(1.0, a, a, backend="ozaki2")
    finally:
        calls.PROFILE_GPU = old
    phases = routines.last_run()["phases"]
    assert phases["gemm"] > 0 and phases["residues"] > 0 and phases["crt"] > 0


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.bool_])
def test_intmatmul_exact(emublas, cp, rng, dtype):
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    lo, hi = (0, 2) if info is None else (max(info.min, -(2**28)), min(info.max, 2**28))
    a = rng.integers(lo, hi, (37, 45), endpoint=False).astype(dtype)
    b = rng.integers(lo, hi, (45, 29), endpoint=False).astype(dtype)
    got = emublas.intmatmul(cp.asarray(a), cp.asarray(b), backend="ozaki2")
    exact = a.astype(object) @ b.astype(object)
    np.testing.assert_array_equal(cp.asnumpy(got).astype(object), exact)


def test_intmatmul_overflow(emublas, cp):
    a = cp.full((2, 4), 2**40, np.int64)
    with pytest.raises(OverflowError):
        emublas.intmatmul(a, a.T, backend="ozaki2")


def test_intmatmul_near_int64_limit(emublas, cp):
    """A value past 2^62 (the suspect threshold) that still fits int64 is checked exactly and kept."""
    a = cp.asarray(np.array([[2**31, 3]], np.int64))
    b = cp.asarray(np.array([[2**31 + 5], [7]], np.int64))
    got = emublas.intmatmul(a, b, backend="ozaki2")
    assert int(got[0, 0]) == 2**31 * (2**31 + 5) + 21


def test_hybrid_3m_moduli_match_cpu(emublas, cp, rng):
    """Past the 22 2M moduli the complex recipe switches to 3M per modulus (hybrid)."""
    a = _wide(rng, (40, 70), np.complex128)
    b = _wide(rng, (70, 30), np.complex128)
    host, dev = _both(emublas, cp, "zgemm", (1.0, a, b), {"moduli": 25})
    np.testing.assert_array_equal(dev, host)


def test_bound_with_k_chunks_matches_cpu(emublas, cp, rng):
    """The accurate bound product summed over k chunks (int64) on the GPU."""
    from emublas.backends.ozaki2.scaling import K_CHUNK

    a = randn(rng, (3, K_CHUNK + 40), np.complex128)
    b = randn(rng, (K_CHUNK + 40, 2), np.complex128)
    host, dev = _both(emublas, cp, "zgemm", (1.0, a, b), {})
    np.testing.assert_array_equal(dev, host)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 2)])
def test_recomputed_entries_match_cpu_bit_for_bit(emublas, cp, rng, dtype, trans_a, trans_b):
    """Few moduli on wide data: most entries fail the certificate and are recomputed by the
    GPU's tiled fallback; they are the CPU's float64 dot products bit for bit (beta and c
    included, tiles straddling the output's edges, k not a multiple of the staging width)."""
    m, n, k = 70, 41, 53
    a = _wide(rng, (m, k) if trans_a == 0 else (k, m), dtype, 4.0)
    b = _wide(rng, (k, n) if trans_b == 0 else (n, k), dtype, 4.0)
    c = _wide(rng, (m, n), dtype, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        host, dev = _both(
            emublas, cp, "gemm", (0.75, a, b, 0.5), {"trans_a": trans_a, "trans_b": trans_b, "moduli": 3}, c=c
        )
        emublas.synchronize()
    assert emublas.ozaki2.last_run()["uncertified"] > m * n // 2
    np.testing.assert_array_equal(dev, host)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 2)])
def test_sparse_and_dense_fallback_match_cpu_bit_for_bit(emublas, cp, rng, dtype, trans_a, trans_b):
    """Rows whose weight the truncation loses are uncertified, the rest certified: two lone
    rows leave their tiles within the one-thread-per-entry limit, a band of 64 rows fills
    whole tiles past it.  Both fix passes give the CPU's dot products bit for bit."""
    from emublas._kernels.constants import OZ_FIX_SPARSE

    m, n, k = 200, 150, 53
    a, b = randn(rng, (m, k), dtype), randn(rng, (k, n), dtype)
    rows = [5, 40, *range(100, 164)]
    a[rows, 0] = 2.0**60  # the row's scale: its other entries are truncated away
    b[0, :] = 2.0**-60  # so the huge entry meets only tiny ones: the lost entries carry the sum
    c = randn(rng, (m, n), dtype)
    op = {0: lambda x: x, 1: lambda x: x.T.copy(), 2: lambda x: x.conj().T.copy()}
    tb = trans_b if np.dtype(dtype).kind == "c" else min(trans_b, 1)
    a, b = op[trans_a](a), op[tb](b)
    host, dev = _both(
        emublas,
        cp,
        "gemm",
        (0.75, a, b, 0.5),
        {"trans_a": trans_a, "trans_b": tb, "moduli": 16, "mode": "accurate"},
        c=c,
    )
    emublas.synchronize()
    assert emublas.ozaki2.last_run()["uncertified"] == len(rows) * n
    assert 32 <= OZ_FIX_SPARSE < 28 * 32  # a lone row puts 32 in a tile, the band 28 x 32
    np.testing.assert_array_equal(dev, host)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_float32_subnormals_match_cpu_bit_for_bit(emublas, cp, rng, dtype):
    """Subnormal float32 inputs, c and results: cupy compiles kernels with -ftz=true, yet the
    GPU reads and writes them as the CPU does (a flushed input or result would differ)."""
    m, n, k = 40, 33, 25
    a = randn(rng, (m, k), dtype) * np.float32(2.0**-70)
    b = randn(rng, (k, n), dtype) * np.float32(2.0**-70)
    a[3, :] *= np.float32(2.0**-60)  # a row of subnormal inputs
    c = randn(rng, (m, n), dtype) * np.float32(2.0**-130)  # subnormal c
    host, dev = _both(emublas, cp, "gemm", (1.0, a, b, 0.5), {}, c=c)
    tiny = np.finfo(np.float32).tiny
    assert np.count_nonzero((np.abs(host) < tiny) & (host != 0)) > m * n // 2  # mostly subnormal results
    np.testing.assert_array_equal(dev, host)


def test_quick_return_scaling_keeps_subnormals(emublas, cp, rng):
    """k = 0 / alpha = 0: beta·c is formed by emublas on the device, subnormal results included,
    as numpy forms it (the real beta makes both products exact roundings)."""
    beta = float(np.finfo(np.float32).tiny)
    for dtype in ("float32", "complex64"):
        c = randn(rng, (6, 5), dtype)
        want = c * np.float32(beta)
        a, b = (cp.asarray(randn(rng, s, dtype)) for s in ((6, 4), (4, 5)))
        got = emublas.gemm(0.0, a, b, beta, c=cp.asarray(c))
        np.testing.assert_array_equal(cp.asnumpy(got), want)
        sq = randn(rng, (5, 5), dtype)
        got = emublas.syrk(0.0, cp.asarray(randn(rng, (5, 3), dtype)), beta, c=cp.asarray(sq), lower=1)
        np.testing.assert_array_equal(np.tril(cp.asnumpy(got)), np.tril(sq * np.float32(beta)))


@pytest.mark.parametrize("routine,dtype", [("syrk", "float64"), ("herk", "complex128")])
@pytest.mark.parametrize("lower", [0, 1])
def test_recomputed_rank_k_triangle_matches_cpu(emublas, cp, rng, routine, dtype, lower):
    a = _wide(rng, (67, 45), dtype, 4.0)
    c = _wide(rng, (67, 67), dtype, 1.0)
    if routine == "herk":
        c = (c + c.conj().T) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        host, dev = _both(emublas, cp, routine, (1.0, a, 0.5), {"lower": lower, "moduli": 3}, c=c)
        emublas.synchronize()
    np.testing.assert_array_equal(dev, host)


def test_nonfinite_rows_with_fallback_none(emublas, cp, rng):
    """Rows holding NaN/Inf are finished from the data even with fallback='none' (the
    factors reach the fix pass without the fallback option), as on the CPU."""
    a, b = rng.standard_normal((40, 30)), rng.standard_normal((30, 50))
    a[5, 3], b[7, 9] = np.nan, np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        host, dev = _both(emublas, cp, "dgemm", (1.0, a, b), {"fallback": "none"})
        emublas.synchronize()
    np.testing.assert_array_equal(dev, host)
