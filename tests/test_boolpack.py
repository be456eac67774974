"""boolpack: exact 0/1 and integer products (both CPU kernels), quantized float gemm."""

import itertools

import numpy as np
import pytest

from emublas._kernels import cpu

bp = pytest.importorskip("emublas.backends.boolpack.kernels_cpu")

pytestmark = pytest.mark.skipif(not cpu.available(), reason="C extension not built")

SHAPES = [
    (1, 1, 1),
    (1, 0, 1),
    (3, 0, 5),
    (2, 1, 3),
    (5, 63, 7),
    (9, 64, 25),
    (17, 65, 3),
    (33, 127, 50),
    (8, 128, 24),
    (7, 129, 49),
    (1, 300, 1),
    (70, 5, 1),
    (1, 5, 90),
    (100, 1000, 70),
]


def impls():
    out = ["generic"]
    if cpu.available() and cpu.features()["avx512_vpopcntdq"]:
        out.append("vpopcntdq")
    return out


@pytest.mark.parametrize("impl", impls())
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_binary_exact(rng, impl, m, k, n):
    a = rng.integers(0, 2, (m, k)).astype(bool)
    b = rng.integers(0, 2, (k, n)).astype(bool)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    assert np.array_equal(bp.matmul01(a, b, impl=impl), ref)
    # int32 output, C-ordered B (the transposing pack), strided views
    assert np.array_equal(bp.matmul01(a, np.ascontiguousarray(b), impl=impl, out_dtype=np.int32), ref)
    a2 = np.asfortranarray(np.repeat(a, 2, axis=1))[:, ::2]
    assert np.array_equal(bp.matmul01(a2, b[::-1][::-1], impl=impl), ref)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float32])
def test_binary_any_dtype(emublas, rng, dtype):
    a = rng.integers(0, 2, (13, 70)).astype(dtype)
    b = rng.integers(0, 2, (70, 29)).astype(dtype)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    if dtype == np.float32:
        assert np.array_equal(bp.matmul01(a, b), ref)
    else:
        assert np.array_equal(emublas.intmatmul(a, b, backend="boolpack"), ref)


def test_impls_identical_threads(rng):
    a = rng.integers(0, 2, (203, 1100)).astype(np.uint8)
    b = rng.integers(0, 2, (1100, 301)).astype(np.uint8)
    outs = [bp.matmul01(a, b, impl=i, threads=t) for i in impls() for t in (1, 2, 3)]
    for o in outs[1:]:
        assert np.array_equal(o, outs[0])
    assert np.array_equal(outs[0], a.astype(np.int64) @ b.astype(np.int64))


def test_gemm_weight_accumulate(rng):
    a = rng.integers(0, 2, (10, 77)).astype(np.uint8)
    b = rng.integers(0, 2, (77, 30)).astype(np.uint8)
    p = a.astype(np.int64) @ b.astype(np.int64)
    pa, pb = bp.pack(a, 0), bp.pack(b, 1)
    out = np.full((10, 30), 5, np.int64)
    bp.gemm(pa, pb, out, weight=-(2**40), accumulate=True)
    assert np.array_equal(out, 5 - p * 2**40)
    outt = np.zeros((30, 10), np.int64).T  # strided output
    bp.gemm(pa, pb, outt, weight=3)
    assert np.array_equal(outt, 3 * p)


@pytest.mark.parametrize("bits", [1, 2, 3, 5, 8, 11, 16])
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 63, 7), (17, 65, 30), (33, 127, 9)])
def test_bit_planes_exact(emublas, rng, bits, signed, m, k, n):
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    dtype = np.int32 if signed else np.uint32
    a = rng.integers(lo, hi, (m, k), endpoint=True).astype(dtype)
    b = rng.integers(lo, hi, (k, n), endpoint=True).astype(dtype)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    from emublas.backends.boolpack.planes import intmatmul

    for impl in impls():
        assert np.array_equal(intmatmul(a, b, impl=impl), ref)
    assert np.array_equal(emublas.intmatmul(a, b, backend="boolpack"), ref)


def test_mixed_and_wide(emublas, rng):
    a = rng.integers(-(2**30), 2**30, (6, 40), dtype=np.int64)
    b = rng.integers(0, 2, (40, 5)).astype(bool)
    assert np.array_equal(emublas.intmatmul(a, b, backend="boolpack"), a @ b.astype(np.int64))
    # large values whose product still fits int64 after cancellation
    a = np.array([[2**62, 2**62 - 1]], np.int64)
    b = np.array([[1], [-1]], np.int64)
    assert emublas.intmatmul(a, b, backend="boolpack")[0, 0] == 1


def test_overflow_raises(emublas):
    a = np.full((2, 3), 2**40, np.int64)
    with pytest.raises(OverflowError, match="does not fit int64"):
        emublas.intmatmul(a, a.T.copy(), backend="boolpack")
    u = np.array([[2**63 + 5]], np.uint64)
    with pytest.raises(OverflowError):
        emublas.intmatmul(u, np.array([[3]], np.uint64), backend="boolpack")
    assert emublas.intmatmul(u, np.zeros((1, 1), np.uint64), backend="boolpack")[0, 0] == 0


def test_bad_impl_and_args(rng):
    a = rng.integers(0, 2, (4, 4)).astype(np.uint8)
    with pytest.raises(ValueError):
        bp.matmul01(a, a, impl="avx9")
    with pytest.raises(ValueError):
        bp.pack(a, 0, nplanes=2)
    with pytest.raises(ValueError):
        bp.gemm(bp.pack(a, 0), bp.pack(a, 1), np.zeros((4, 4), np.int32), weight=2)


# ---- float gemm -------------------------------------------------------------


def _rel_err(emublas, a, b, bits):
    with emublas.use("boolpack", bits=bits):
        c = emublas.gemm(1.0, a, b)
    ref = a.astype(np.complex128) @ b.astype(np.complex128)
    return float(np.abs(c - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_float_error_falls_with_bits(emublas, rng, dtype):
    m, k, n = 37, 90, 23
    a = rng.standard_normal((m, k)) + (1j * rng.standard_normal((m, k)) if np.dtype(dtype).kind == "c" else 0)
    b = rng.standard_normal((k, n)) + (1j * rng.standard_normal((k, n)) if np.dtype(dtype).kind == "c" else 0)
    a, b = a.astype(dtype), b.astype(dtype)
    errs = [_rel_err(emublas, a, b, bits) for bits in (4, 8, 12, 16, 20)]
    for lo, hi in itertools.pairwise(errs):
        assert hi < lo / 4  # 4 more bits: ~16x smaller, allow slack
    # bound: rounding each input to relative 2^-bits of its row's max, summed over k
    assert errs[3] < 4 * np.sqrt(k) * 2.0**-16 + (1e-6 if dtype in (np.float32, np.complex64) else 0)


def test_float_gemm_scalars_and_trans(emublas, rng):
    a = rng.standard_normal((20, 15))
    b = rng.standard_normal((20, 11))
    c = rng.standard_normal((15, 11))
    ref = 0.5 * a.T @ b - 2.0 * c
    got = emublas.gemm(0.5, a, b, beta=-2.0, c=c.copy(), trans_a=1, backend="boolpack", bits=20)
    assert np.abs(got - ref).max() < 1e-4 * np.abs(ref).max()


def test_env_bits(emublas, rng, monkeypatch):
    a = rng.standard_normal((9, 30))
    monkeypatch.setenv("EMUBLAS_BOOLPACK_BITS", "4")
    coarse = emublas.gemm(1.0, a, a.T, backend="boolpack")
    monkeypatch.setenv("EMUBLAS_BOOLPACK_BITS", "20")
    fine = emublas.gemm(1.0, a, a.T, backend="boolpack")
    ref = a @ a.T
    assert np.abs(fine - ref).max() < np.abs(coarse - ref).max() / 100


def test_nonfinite(emublas, rng):
    a = rng.standard_normal((5, 6))
    a[2, 3] = np.nan
    b = rng.standard_normal((6, 4))
    with pytest.raises(ValueError, match="NaN or Inf"):
        emublas.gemm(1.0, a, b, backend="boolpack")
    got = emublas.gemm(1.0, a, b, backend="boolpack", nonfinite="native")
    assert np.isnan(got[2]).all() and np.isfinite(np.delete(got, 2, axis=0)).all()


def test_readiness(emublas):
    from emublas import backends

    st = backends.get("boolpack").readiness()
    assert st["cpu"][0] is True
    assert isinstance(st["gpu"][1], str)


def test_plane_product_asks_each_operands_zero_planes_once():
    """Which planes are all zero is asked once per operand (on a GPU every flag is a read from
    the device, so asking per plane of the other operand cost width times as many)."""
    from emublas.backends.boolpack import planes

    class Counting(planes.CpuLeaf):
        calls = 0

        def nonzero(self, packed):
            Counting.calls += 1
            return super().nonzero(packed)

    rng = np.random.default_rng(5)
    a = rng.integers(-(2**14), 2**14, (7, 33)).astype(np.int64)
    b = rng.integers(-(2**14), 2**14, (33, 5)).astype(np.int64)
    a[:, 3] = 0  # some planes of some columns zero: the skipping still gives the exact product
    w = planes.width(-(2**14), 2**14)
    got = planes.plane_product(a, b, w, w, Counting())
    assert Counting.calls == 2
    np.testing.assert_array_equal(got, a @ b)
