"""emublas._float32: the elementwise steps that must keep float32 subnormals, the same on
numpy and (with a GPU) on cupy, bit for bit."""

import numpy as np
import pytest
from conftest import cupy_or_skip

from emublas import _float32 as f32

TINY = np.finfo(np.float32).tiny


def _data(rng, dtype, shape=(7, 5)):
    """Normal, subnormal and zero parts side by side."""
    x = rng.standard_normal(shape) * np.where(rng.random(shape) < 0.5, 2.0**-135, 1.0)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape) * np.where(rng.random(shape) < 0.5, 2.0**-140, 1.0)
    x = x.astype(dtype)
    x[0, 0] = 0
    return x


@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64", "complex128"])
def test_numpy_steps(rng, dtype):
    x = _data(rng, dtype)
    want = x.copy()
    want.real = np.ldexp(x.real, -5)
    if x.dtype.kind == "c":
        want.imag = np.ldexp(x.imag, -5)
    np.testing.assert_array_equal(f32.ldexp(x, -5), want)
    np.testing.assert_array_equal(f32.conj(x), np.conj(x))
    parts = np.abs(np.concatenate([x.real.ravel(), x.imag.ravel()]))
    hi, lo, finite = f32.magnitude_range(x)
    assert (hi, lo, finite) == (parts.max(), parts[parts > 0].min(), True)
    x[1, 1] = np.inf
    assert not f32.magnitude_range(x)[2]


def test_unit_times_rounds_once_from_float64(rng):
    x = _data(rng, "complex64")
    u = complex(np.exp(0.7j))
    got = f32.unit_times(u, x)
    xr, xi = x.real.astype(np.float64), x.imag.astype(np.float64)
    want = ((xr * u.real - xi * u.imag) + 1j * (xr * u.imag + xi * u.real)).astype(np.complex64)
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero((np.abs(got.real) < TINY) & (got.real != 0)) > 0  # subnormal results kept


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64", "complex128"])
def test_cupy_steps_equal_numpy(rng, dtype):
    cp = cupy_or_skip()
    x = _data(rng, dtype)
    d = cp.asarray(x)
    for t in (-9, 7):
        np.testing.assert_array_equal(cp.asnumpy(f32.ldexp(d, t)), f32.ldexp(x, t))
    np.testing.assert_array_equal(cp.asnumpy(f32.conj(d)), f32.conj(x))
    assert f32.magnitude_range(d) == f32.magnitude_range(x)
    if x.dtype.kind == "c":
        u = complex(np.exp(-1.1j))
        np.testing.assert_array_equal(cp.asnumpy(f32.unit_times(u, d)), f32.unit_times(u, x))
