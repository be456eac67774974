"""ozaki2 spread over several GPUs (``devices=``): bit-identical to one GPU, both splits.

Skips unless cupy sees at least two GPUs (the device tool's nvidia-h200-x2 kind).
"""

import numpy as np
import pytest
from conftest import cupy_or_skip

from helpers import randn

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::emublas.errors.OzakiAccuracyWarning")]


@pytest.fixture
def cp():
    cupy = cupy_or_skip()
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return cupy


@pytest.mark.parametrize("split", ["moduli", "tiles", "auto"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_gemm_same_as_one_gpu(emublas, cp, rng, split, dtype):
    from emublas.backends.ozaki2 import routines

    a = cp.asarray(randn(rng, (130, 97), dtype))
    b = cp.asarray(randn(rng, (97, 75), dtype))
    c = cp.asarray(randn(rng, (130, 75), dtype))
    one = emublas.gemm(0.5, a, b, 2.0, c, backend="ozaki2")
    two = emublas.gemm(0.5, a, b, 2.0, c, backend="ozaki2", devices="all", split=split)
    plan = routines.last_run()["gpu_plan"]
    assert len(plan["devices"]) >= 2
    assert two.device.id == a.device.id
    cp.testing.assert_array_equal(two, one)


@pytest.mark.parametrize("routine", ["herk", "syrk", "syr2k", "her2k"])
@pytest.mark.parametrize("split", ["moduli", "tiles"])
def test_rank_k_same_as_one_gpu(emublas, cp, rng, routine, split):
    dtype = np.complex128 if routine in ("herk", "her2k") else np.float64
    a = cp.asarray(randn(rng, (90, 41), dtype))
    b = cp.asarray(randn(rng, (90, 41), dtype))
    args = (0.5, a) if routine in ("herk", "syrk") else (0.5, a, b)
    fn = getattr(emublas, routine)
    one = fn(*args, lower=1, backend="ozaki2")
    two = fn(*args, lower=1, backend="ozaki2", devices=[0, 1], split=split)
    cp.testing.assert_array_equal(two, one)


def test_tiles_with_blocking(emublas, cp, rng, monkeypatch):
    from emublas.backends.ozaki2 import calls, routines

    a = cp.asarray(randn(rng, (150, 64), np.complex128))
    b = cp.asarray(randn(rng, (64, 160), np.complex128))
    one = emublas.zgemm(1.0, a, b, backend="ozaki2")
    monkeypatch.setattr(calls, "gpu_budget", lambda x, y, out: 400_000)
    two = emublas.zgemm(1.0, a, b, backend="ozaki2", devices="all", split="tiles")
    assert routines.last_run()["gpu_plan"]["column_block"] < 160
    cp.testing.assert_array_equal(two, one)


def test_unknown_device_rejected(emublas, cp):
    a = cp.ones((4, 4))
    with pytest.raises(ValueError, match="visible"):
        emublas.dgemm(1.0, a, a, backend="ozaki2", devices=[0, 99])
