"""Dimensions beyond the 32-bit BLAS interface are split, not passed on to overflow.

Real sizes past 2**31 need tens of GiB, so the limit is lowered for the test:
the splitting code is the same.
"""

import numpy as np
import pytest

import emublas
from emublas.backends.native import backend as native


@pytest.fixture
def small_int_max(monkeypatch):
    monkeypatch.setattr(native, "_INT_MAX", 3)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(2, 2, 10), (7, 2, 3), (2, 8, 3), (7, 8, 10)])
def test_gemm_split_matches_unsplit(xp, rng, small_int_max, dtype, shape):
    m, n, k = shape
    for ta, tb in [(0, 0), (1, 0), (0, 2), (2, 1)]:
        a = rng.standard_normal((m, k) if ta == 0 else (k, m)).astype(dtype)
        b = rng.standard_normal((k, n) if tb == 0 else (n, k)).astype(dtype)
        c = rng.standard_normal((m, n)).astype(dtype)
        op = {0: lambda x: x, 1: lambda x: x.T, 2: lambda x: x.conj().T}
        ta_, tb_ = (ta, tb) if np.dtype(dtype).kind == "c" else (min(ta, 1), min(tb, 1))
        ref = 0.5 * op[ta_](a.astype(complex)) @ op[tb_](b.astype(complex)) + 2.0 * c
        got = emublas.gemm(0.5, xp.asarray(a), xp.asarray(b), 2.0, xp.asarray(c), trans_a=ta, trans_b=tb)
        got = got if xp is np else xp.asnumpy(got)
        assert np.abs(got - ref).max() <= 100 * k * np.finfo(dtype).eps * np.abs(ref).max()


def test_rank_k_past_limit_is_derived_and_split(xp, rng, small_int_max):
    a = rng.standard_normal((5, 9))
    got = emublas.dsyrk(1.0, xp.asarray(a), lower=1)
    got = got if xp is np else xp.asnumpy(got)
    np.testing.assert_allclose(got, np.tril(a @ a.T), rtol=1e-13, atol=1e-13)
    za = a + 1j * rng.standard_normal(a.shape)
    got = emublas.zher2k(1j, xp.asarray(za), xp.asarray(za[::-1]))
    got = got if xp is np else xp.asnumpy(got)
    ref = np.triu(1j * za @ za[::-1].conj().T - 1j * za[::-1] @ za.conj().T)
    np.fill_diagonal(ref, ref.diagonal().real)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)
