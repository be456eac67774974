"""Rank-k routines derived by the front from a backend that only has gemm."""

import itertools

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
from emublas import backends
from emublas.backends.base import Backend
from emublas.backends.native.backend import BACKEND as NATIVE

from helpers import randn


class GemmOnly(Backend):
    name = "gemmonly"
    description = "native gemm, nothing else: exercises the front's derivations"

    def __init__(self):
        self.calls = 0

    def readiness(self):
        return {"cpu": (True, "test"), "gpu": NATIVE.readiness()["gpu"]}

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts):
        self.calls += 1
        NATIVE.gemm(alpha, a, b, beta, c, trans_a, trans_b)


@pytest.fixture(scope="module")
def gemmonly():
    be = GemmOnly()
    backends.register(be)
    yield be
    backends.unregister("gemmonly")


def _tol(dtype, k):
    return 50 * max(k, 1) * np.finfo(dtype).eps


CASES = []
for prefix, kind in itertools.product("sdcz", ("syrk", "syr2k", "herk", "her2k")):
    if kind.startswith("he") and prefix in "sd":
        continue
    trans_codes = (0, 2) if kind.startswith("he") else ((0, 1, 2) if prefix in "sd" else (0, 1))
    for trans, lower in itertools.product(trans_codes, (0, 1)):
        CASES.append((prefix + kind, trans, lower))


@pytest.mark.parametrize("name, trans, lower", CASES)
def test_derived_matches_scipy(gemmonly, xp, name, trans, lower):
    seed = np.random.SeedSequence().entropy
    rng = np.random.default_rng(seed)
    dtype = emublas.blas.DTYPES[name[0]]
    n, k = 7, 5
    a = randn(rng, (n, k) if trans == 0 else (k, n), dtype)
    b = randn(rng, a.shape, dtype)
    c = randn(rng, (n, n), dtype)
    alpha = complex(rng.standard_normal(), rng.standard_normal()) if name[0] in "cz" else rng.standard_normal()
    beta = complex(rng.standard_normal(), rng.standard_normal()) if name[0] in "cz" else rng.standard_normal()
    if "he" in name:
        beta = beta.real
        if name.endswith("herk"):
            alpha = alpha.real
    args = (alpha, a, b) if name.endswith("2k") else (alpha, a)
    ref = getattr(sblas, name)(*args, beta, c, trans=trans, lower=lower)
    dev_args = tuple(xp.asarray(x) if isinstance(x, np.ndarray) else x for x in args)
    ours = getattr(emublas, name)(*dev_args, beta, xp.asarray(c), trans=trans, lower=lower, backend="gemmonly")
    assert ours.flags.f_contiguous and ours.dtype == dtype
    ours = ours if xp is np else xp.asnumpy(ours)
    scale = np.abs(ref).max()
    assert np.abs(ours - ref).max() <= _tol(dtype, k) * scale, f"seed {seed}"
    untouched = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    assert np.array_equal(ours[untouched], c[untouched]), f"seed {seed}"
    if "he" in name:
        assert np.all(np.diagonal(ours).imag == 0)


def test_derived_her2k_uses_two_gemms(gemmonly):
    rng = np.random.default_rng()
    a = randn(rng, (4, 3), np.complex128)
    before = gemmonly.calls
    emublas.zher2k(1 + 2j, a, a[::-1], backend="gemmonly")
    assert gemmonly.calls - before == 2


def test_overwrite_c_aliasing_input_is_safe(gemmonly):
    """c given in place while it is also an input: the result must be the product of the old values."""
    rng = np.random.default_rng()
    x = np.asfortranarray(rng.standard_normal((6, 6)))
    expected = sblas.dgemm(1.0, x, x, 1.0, x.copy())
    for be in ("native", "gemmonly"):
        y = x.copy(order="F")
        out = emublas.dgemm(1.0, y, y, 1.0, y, overwrite_c=1, backend=be)
        assert out is y
        np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
    y = x.copy(order="F")
    out = emublas.dsyrk(1.0, y, 1.0, y, overwrite_c=1, backend="gemmonly")
    np.testing.assert_allclose(np.triu(out), np.triu(sblas.dsyrk(1.0, x, 1.0, x.copy())), rtol=1e-13, atol=1e-13)
