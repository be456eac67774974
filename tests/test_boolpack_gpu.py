"""boolpack on the GPU: exactness of the CUDA kernels against an int64 reference.

Skipped without cupy and a CUDA device (the ``cupy`` fixture of conftest).
"""

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SHAPES = [
    (1, 1, 1),
    (1, 0, 1),
    (3, 0, 5),
    (2, 1, 3),
    (5, 63, 7),
    (9, 64, 25),
    (17, 65, 3),
    (33, 127, 50),
    (127, 255, 129),
    (128, 256, 128),
    (129, 257, 130),
    (130, 511, 1),
    (1, 513, 300),
    (200, 1000, 77),
    (256, 4096, 384),
]


@pytest.fixture
def gpu(cupy):
    from emublas.backends.boolpack import kernels_gpu as boolpack_gpu

    return boolpack_gpu


def _kernels(cupy, gpu):
    cc = int(cupy.cuda.Device().compute_capability)
    return ["popc", "mma"] if gpu.kernel_for(cc) == "mma" else ["popc"]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_binary_exact(cupy, gpu, rng, m, k, n):
    a = rng.integers(0, 2, (m, k)).astype(np.uint8)
    b = rng.integers(0, 2, (k, n)).astype(np.uint8)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    for kernel in _kernels(cupy, gpu):
        got = gpu.matmul01(cupy.asarray(a), cupy.asarray(b), kernel=kernel)
        assert np.array_equal(cupy.asnumpy(got).astype(np.int64), ref), kernel


@pytest.mark.parametrize("dtype", ["bool", "int8", "float32"])
def test_dtypes_and_layouts(cupy, gpu, rng, dtype):
    a = rng.integers(0, 2, (70, 300)).astype(dtype)
    b = rng.integers(0, 2, (300, 45)).astype(dtype)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    ga = cupy.asfortranarray(cupy.asarray(a))  # k not contiguous: repacked
    gb = cupy.asarray(np.ascontiguousarray(b))  # C order B: columns strided
    got = gpu.matmul01(ga, gb)
    assert np.array_equal(cupy.asnumpy(got).astype(np.int64), ref)


def test_pack_ballot_bits(cupy, gpu):
    x = np.zeros((3, 70), np.uint8)
    x[0, 0] = x[1, 31] = x[1, 32] = x[2, 69] = 1
    p = cupy.asnumpy(gpu.pack(cupy.asarray(x), 0).words)
    assert p.shape == (128, 16)
    assert p[0, 0] == 1 and p[1, 0] == 1 << 31 and p[1, 1] == 1 and p[2, 2] == 1 << 5
    assert p[3:].sum() == 0 and p[:, 3:].sum() == 0


def test_float_gemm_error_falls(cupy, emublas, rng):
    a = rng.standard_normal((65, 130))
    b = rng.standard_normal((130, 33))
    ref = a @ b
    errs = []
    for bits in (6, 10, 14):
        c = emublas.gemm(1.0, cupy.asarray(a), cupy.asarray(b), backend="boolpack", bits=bits)
        errs.append(float(np.abs(cupy.asnumpy(c) - ref).max() / np.abs(ref).max()))
    assert errs[1] < errs[0] / 4 and errs[2] < errs[1] / 4


def test_float_gemm_matches_cpu(cupy, emublas, rng):
    a = rng.standard_normal((40, 50)) + 1j * rng.standard_normal((40, 50))
    b = rng.standard_normal((50, 30)) + 1j * rng.standard_normal((50, 30))
    cpu_c = emublas.gemm(1.0, a, b, backend="boolpack", bits=12)
    gpu_c = emublas.gemm(1.0, cupy.asarray(a), cupy.asarray(b), backend="boolpack", bits=12)
    # same quantization, exact integer products: equal up to the final scaling's rounding
    assert np.allclose(cupy.asnumpy(gpu_c), cpu_c, rtol=1e-14, atol=1e-12)


@pytest.mark.parametrize(
    "dtype,lo,hi",
    [("bool", 0, 2), ("uint8", 0, 2), ("int16", -300, 300), ("int32", -(2**20), 2**20), ("uint8", 0, 256)],
)
@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 70, 29), (130, 257, 65)])
def test_intmatmul_exact_on_gpu(cupy, emublas, rng, dtype, lo, hi, shape):
    m, k, n = shape
    a = rng.integers(lo, hi, (m, k)).astype(dtype)
    b = rng.integers(lo, hi, (k, n)).astype(dtype)
    got = emublas.intmatmul(cupy.asarray(a), cupy.asarray(b), backend="boolpack")
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(got).astype(object), a.astype(object) @ b.astype(object))


def test_intmatmul_overflow_on_gpu(cupy, emublas):
    a = cupy.full((2, 3), 2**40, np.int64)
    with pytest.raises(OverflowError):
        emublas.intmatmul(a, a.T, backend="boolpack")
