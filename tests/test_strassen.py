"""The strassen backend: 7 output writes per level, every dtype, odd shapes, trans, special values."""
import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
from helpers import randn
from emublas import strassen

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
def test_matches_native(rng, dtype, shape, levels):
    m, n, k = shape
    for ta, tb in [(0, 0), (1, 0), (0, 2), (2, 1)]:
        a = randn(rng, (m, k) if ta == 0 else (k, m), dtype)
        b = randn(rng, (k, n) if tb == 0 else (n, k), dtype)
        c = randn(rng, (m, n), dtype)
        ours = emublas.gemm(1.5, a, b, 0.5, c, trans_a=ta, trans_b=tb, backend="strassen", levels=levels)
        ref = emublas.gemm(1.5, a, b, 0.5, c, trans_a=ta, trans_b=tb, backend="native")
        # Strassen's error bound grows with the level count (Higham ch. 23): a loose normwise check
        tol = 50 * (4 ** levels) * k * np.finfo(dtype).eps * (np.abs(a).max() * np.abs(b).max() + 1)
        assert np.abs(ours - ref).max() <= tol, (ta, tb)


def test_auto_levels_follow_crossover(rng):
    from emublas.backends.strassen import CROSSOVER

    assert strassen.levels_for(40, 40, 40, CROSSOVER[("cpu", "real")]) == 0
    assert CROSSOVER[("gpu", "real")] is None
    assert strassen.levels_for(8192, 8192, 8192, 2048) == 2
    assert strassen.levels_for(8192, 8192, 100, 2048) == 0


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
