"""The strassen backend: 7 output writes per level, every dtype, odd shapes, trans, special values."""

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
from emublas.backends.strassen import driver as strassen

from helpers import randn

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_seven_output_writes_per_level(rng, levels):
    n = 64
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    emublas.dgemm(1.0, a, b, backend="strassen", levels=levels)
    writes = strassen.last_run()["writes_per_level"]
    assert writes == {d: 7 * 7**d for d in range(levels)}  # 7 per block, 7^d blocks at depth d


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 8, 8), (9, 7, 13), (33, 65, 17), (64, 31, 50), (5, 1, 9), (1, 1, 1)])
@pytest.mark.parametrize("levels", [1, 3])
@pytest.mark.parametrize("impl", ["c", "reference"])
def test_matches_native(rng, monkeypatch, dtype, shape, levels, impl):
    if impl == "reference":
        monkeypatch.setattr(strassen, "_c_driver", lambda *args: None)
    m, n, k = shape
    for ta, tb in [(0, 0), (1, 0), (0, 2), (2, 1)]:
        a = randn(rng, (m, k) if ta == 0 else (k, m), dtype)
        b = randn(rng, (k, n) if tb == 0 else (n, k), dtype)
        c = randn(rng, (m, n), dtype)
        ours = emublas.gemm(1.5, a, b, 0.5, c, trans_a=ta, trans_b=tb, backend="strassen", levels=levels)
        ref = emublas.gemm(1.5, a, b, 0.5, c, trans_a=ta, trans_b=tb, backend="native")
        # Strassen's error bound grows with the level count (Higham ch. 23): a loose normwise check
        tol = 50 * (4**levels) * k * np.finfo(dtype).eps * (np.abs(a).max() * np.abs(b).max() + 1)
        assert np.abs(ours - ref).max() <= tol, (ta, tb)


def test_auto_levels_follow_crossover(rng):
    from emublas.backends.strassen.backend import CROSSOVER

    assert strassen.levels_for(40, 40, 40, CROSSOVER[("cpu", "real")]) == 0
    from emublas.backends.strassen.backend import crossover

    assert crossover("gpu", np.dtype(np.float64)) == 8192  # H200: dgemm only from 16384
    assert crossover("gpu", np.dtype(np.float32)) == CROSSOVER[("gpu", "real")]
    assert strassen.levels_for(8192, 8192, 8192, 2048) == 2
    assert strassen.levels_for(8192, 8192, 100, 2048) == 0


def test_crossover_per_prefix_overrides_kind(monkeypatch):
    from emublas.backends.strassen import backend as sb

    assert sb.crossover("cpu", np.dtype(np.float64)) == sb.CROSSOVER[("cpu", "real")]
    assert sb.crossover("cpu", np.dtype(np.complex64)) == sb.CROSSOVER[("cpu", "complex")]
    monkeypatch.setitem(sb.CROSSOVER, ("cpu", "s"), 12345)
    assert sb.crossover("cpu", np.dtype(np.float32)) == 12345
    assert sb.crossover("cpu", np.dtype(np.float64)) == sb.CROSSOVER[("cpu", "real")]


def test_nan_inf_pattern_matches_native(rng):
    a, b = rng.standard_normal((12, 10)), rng.standard_normal((10, 9))
    a[3, 4] = np.nan
    b[7, 2] = np.inf
    b[4, 5] = 0.0
    ours = emublas.dgemm(1.0, a, b, backend="strassen", levels=2)
    ref = sblas.dgemm(1.0, a, b)
    assert np.array_equal(np.isnan(ours), np.isnan(ref)) and np.array_equal(np.isinf(ours), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(ours[fin], ref[fin], rtol=1e-12, atol=1e-12)


def test_levels_option_validation(rng, monkeypatch):
    a = rng.standard_normal((4, 4))
    with pytest.raises(ValueError, match="levels"):
        emublas.dgemm(1.0, a, a, backend="strassen", levels=9)
    monkeypatch.setenv("EMUBLAS_STRASSEN_LEVELS", "deep")
    with pytest.raises(ValueError, match="EMUBLAS_STRASSEN_LEVELS"):
        emublas.dgemm(1.0, a, a, backend="strassen")


# --------------------------------------------------------------------------
# the C driver (native/cpu/strassen.c) and the reference recursion agree
# --------------------------------------------------------------------------


def _c_kernels():
    from emublas.backends.strassen import kernels_cpu as strassen_cpu

    if not strassen_cpu.available():
        pytest.skip("the C extension with the strassen driver is not built")
    return strassen_cpu


@pytest.mark.parametrize("impl", ["c", "reference"])
@pytest.mark.parametrize("levels", [1, 2])
def test_writes_per_level_each_impl(rng, monkeypatch, impl, levels):
    if impl == "c":
        _c_kernels()
    else:
        monkeypatch.setattr(strassen, "_c_driver", lambda *args: None)
    a, b = rng.standard_normal((37, 40)), rng.standard_normal((40, 45))
    ours = emublas.dgemm(1.0, a, b, backend="strassen", levels=levels)
    info = strassen.last_run()
    assert info["impl"] == impl
    assert info["writes_per_level"] == {d: 7 * 7**d for d in range(levels)}
    np.testing.assert_allclose(ours, a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("layout", ["F", "C", "T", "H"])
def test_fused_sums_match_expressions(rng, dtype, side, layout):
    sc = _c_kernels()
    x = randn(rng, (12, 18), dtype)
    x = np.asfortranarray(x) if layout == "F" else np.ascontiguousarray(x)
    conj = layout == "H" and np.iscomplexobj(x)
    view = x[::-1, :] if layout == "T" else x  # negative strides go through the gather path
    ours = sc.sums(view, side, conj=conj)
    ref = strassen._ArrayOps.sums(view.conj() if conj else view, side)
    for o, r in zip(ours, ref):
        np.testing.assert_array_equal(o, r)  # the same operations in the same order


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5, 0.5 + 2j])
def test_chain_write_kernel(rng, dtype, beta):
    sc = _c_kernels()
    if isinstance(beta, complex) and not np.iscomplexobj(np.empty(0, dtype)):
        beta = beta.real
    c = np.asfortranarray(randn(rng, (70, 33), dtype))
    s = np.asfortranarray(randn(rng, (70, 33), dtype))
    want = s + dtype(beta) * c if beta != 0 else s.copy()
    if beta == 0:
        c[0, 0] = np.nan  # not read
    sc.update(c, s, beta)
    np.testing.assert_allclose(c, want, rtol=10 * np.finfo(dtype).eps, atol=10 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_c_driver_strided_operands_and_c(rng, dtype):
    """Views with a leading dimension, C-ordered operands and a C-ordered output."""
    sc = _c_kernels()
    big_a = np.asfortranarray(randn(rng, (50, 60), dtype))
    a = big_a[3:40, 5:51]  # 37 x 46, ld 50
    b = np.ascontiguousarray(randn(rng, (46, 29), dtype))
    c = np.ascontiguousarray(randn(rng, (37, 29), dtype))
    want = 0.5 * (a @ b) - 2.0 * c
    info = sc.gemm(0.5, a, b, -2.0, c, 0, 0, 2)
    assert info["writes_per_level"] == {0: 7, 1: 49}
    assert all(v > 0 for v in info["workspace_bytes"].values())
    tol = 200 * np.finfo(dtype).eps * 46 * (1 + np.abs(want).max())
    assert np.abs(c - want).max() <= tol


# --------------------------------------------------------------------------
# the fused CUDA kernels (native/cuda/strassen.cu); skipped without a device
# --------------------------------------------------------------------------


def _cuda_ops(cupy):
    from emublas.backends.strassen import kernels_gpu as strassen_gpu

    ops = strassen_gpu.ops()
    assert ops is not None, strassen_gpu.load_error()
    return ops


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("side", [0, 1])
def test_cuda_sums_keep_float32_subnormals(rng, cupy, dtype, side):
    """Sums of subnormal float32 quadrants, as numpy forms them on the host (cupy's own
    kernels, compiled with -ftz=true, would flush them)."""
    ops = _cuda_ops(cupy)
    x = np.asfortranarray(randn(rng, (40, 22), dtype) * np.float32(2.0**-135))
    ours = ops.sums(cupy.asarray(x), side)
    for o, r in zip(ours, strassen._ArrayOps.sums(x, side)):
        assert np.any(r != 0)
        np.testing.assert_array_equal(cupy.asnumpy(o), r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("layout", ["F", "T", "view"])
def test_cuda_sums_match_expressions(rng, cupy, dtype, side, layout):
    ops = _cuda_ops(cupy)
    x = cupy.asarray(np.asfortranarray(randn(rng, (70, 38), dtype)))
    if layout == "T":
        x = cupy.asfortranarray(x.T.copy()).T  # row-major view: unit stride along columns
    elif layout == "view":
        x = cupy.asfortranarray(cupy.asarray(randn(rng, (90, 50), dtype)))[5:75, 3:41]
    ours = ops.sums(x, side)
    ref = strassen._ArrayOps.sums(x, side)
    for o, r in zip(ours, ref):
        cupy.testing.assert_array_equal(o, r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta", [0.0, 1.0, -0.5, 0.5 + 2j])
def test_cuda_chain_write(rng, cupy, dtype, beta):
    ops = _cuda_ops(cupy)
    if isinstance(beta, complex) and not np.iscomplexobj(np.empty(0, dtype)):
        beta = beta.real
    big = cupy.asfortranarray(cupy.asarray(randn(rng, (80, 40), dtype)))
    c = big[3:73, 2:35]
    s = cupy.asfortranarray(cupy.asarray(randn(rng, (70, 33), dtype)))
    want = (s + dtype(beta) * c) if beta != 0 else s.copy()
    if beta == 0:
        c[0, 0] = np.nan  # not read
    ops.update(c, s, beta)
    eps = np.finfo(dtype).eps
    cupy.testing.assert_allclose(c, want, rtol=10 * eps, atol=10 * eps)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("levels", [1, 2])
def test_cuda_path_matches_native(rng, cupy, dtype, levels):
    m, n, k = 67, 41, 53
    for ta, tb in [(0, 0), (1, 2), (2, 0)]:
        a = cupy.asarray(randn(rng, (m, k) if ta == 0 else (k, m), dtype))
        b = cupy.asarray(randn(rng, (k, n) if tb == 0 else (n, k), dtype))
        c = cupy.asarray(randn(rng, (m, n), dtype))
        ours = emublas.gemm(1.5, a, b, 0.5, c, trans_a=ta, trans_b=tb, backend="strassen", levels=levels)
        info = strassen.last_run()
        assert info["impl"] == "cuda" and info["writes_per_level"] == {d: 7 * 7**d for d in range(levels)}
        ref = emublas.gemm(1.5, a, b, 0.5, c, trans_a=ta, trans_b=tb, backend="native")
        tol = 50 * (4**levels) * k * np.finfo(dtype).eps * (float(abs(a).max() * abs(b).max()) + 1)
        assert float(abs(ours - ref).max()) <= tol, (ta, tb)
