"""Regression tests for issue 15's numbered cases ("never silently wrong").

Each accuracy case is checked entry by entry with the hunt's checker
(``hunt_cases.check``): within native BLAS's error bound, or an emublas warning.
For ozaki2 the cases are held to more than that: with the default fallback every
entry must be within the bound (the certificate recomputes what it cannot vouch
for), and the call must say so.
"""

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
from emublas.backends import strassen

import hunt_cases as H


def _case(kind, prefix, a, b, backend, alpha=1.0, beta=0.0, c=None, trans=(0, 0), **options):
    n_rows = a.shape[0] if trans[0] == 0 else a.shape[1]
    n_cols = n_rows if kind != "gemm" else (b.shape[1] if trans[1] == 0 else b.shape[0])
    dt = np.result_type(a, np.float32 if prefix in "sc" else np.float64)
    if prefix in "cz":
        dt = np.complex64 if prefix == "c" else np.complex128
    c = np.zeros((n_rows, n_cols), dt, order="F") if c is None else np.asfortranarray(c, dt)
    return H.Case(
        kind,
        prefix,
        backend,
        options,
        np.asarray(a, dt),
        None if b is None else np.asarray(b, dt),
        c,
        alpha,
        beta,
        trans,
    )


def _assert_accurate_or_warned(case):
    out, warned = H.run(case)
    outcome = H.check(case, out, warned)
    assert outcome.silent == 0, (case.describe(), outcome.bad[:3])
    if case.backend == "ozaki2" and case.options.get("fallback", "dot") == "dot":
        strict = H.check(case, out, False)  # the warning does not excuse a wrong entry here
        assert not strict.bad, (case.describe(), strict.bad[:3])


# -- 1. the CRT's own precision ----------------------------------------------------


@pytest.mark.parametrize("t", [100, 120])
@pytest.mark.parametrize("options", [{"mode": "auto"}, {"moduli": 49}, {}])
def test_crt_precision_tiny_exact_product(t, options):
    a = np.array([[1.0, 2.0**-t]])
    b = np.array([[2.0**-t], [1.0]])  # exact 2^(1-t)
    _assert_accurate_or_warned(_case("gemm", "d", a, b, "ozaki2", **options))


# -- 2. the estimate underflows ------------------------------------------------------


@pytest.mark.parametrize("mode", ["fast", "accurate", "auto"])
def test_needed_bits_underflow(mode):
    a = np.array([[1e200, 1e-200]])
    b = np.array([[1e-200], [1e200]])  # exact 2
    _assert_accurate_or_warned(_case("gemm", "d", a, b, "ozaki2", mode=mode))
    a = np.array([[1e20, 1e-20], [1.0, 1.0]])
    b = np.array([[1e-20, 1.0], [1e20, 1.0]])
    _assert_accurate_or_warned(_case("gemm", "d", a, b, "ozaki2", mode=mode))
    _assert_accurate_or_warned(_case("gemm", "d", a, b, "ozaki2", mode=mode, moduli=49))


def test_syr2k_tiny_and_huge():
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 4)) * 1e-30, rng.random((4, 4)) * 1e300
    _assert_accurate_or_warned(_case("syr2k", "d", a, b, "ozaki2", trans=(0,)))


# -- 3. auto at its cap ------------------------------------------------------------


def test_auto_warns_at_its_cap():
    rng = np.random.default_rng(1)
    k = 16
    s = np.where(np.arange(k) % 2 == 0, 1e50, 1e-50)
    a = rng.standard_normal((8, k)) * s[None, :]
    b = rng.standard_normal((k, 8)) / s[:, None]
    _assert_accurate_or_warned(_case("gemm", "d", a, b, "ozaki2", mode="auto"))


# -- 4. one odd row among sampled ones ----------------------------------------------


@pytest.mark.parametrize("row", [5, 1000, 2047])
def test_one_odd_row_is_not_missed(row):
    rng = np.random.default_rng(2)
    a = rng.random((2048, 64)) * 2.0**-80
    a[:, 0] = 1.0
    a[row, 0], a[row, 1] = 2.0**-80, 1.0
    b = rng.random((64, 4)) * 2.0**-80
    b[0, :] = 0.0
    b[1, :] = rng.random(4) * 2.0**-80
    out, warned = H.run(_case("gemm", "d", a, b, "ozaki2", moduli=16))
    ref = sblas.dgemm(1.0, a, b)
    np.testing.assert_allclose(out[row], ref[row], rtol=1e-12)  # recomputed by the certificate's fallback
    assert warned


# -- 5. crashes and wrong specials --------------------------------------------------


@pytest.mark.parametrize("prefix,kind", [("d", "syr2k"), ("z", "syr2k"), ("z", "her2k")])
def test_rank2k_huge_times_tiny_does_not_crash(prefix, kind):
    rng = np.random.default_rng(3)
    a, b = rng.random((4, 4)) * 1e200, rng.random((4, 4)) * 1e-200
    _assert_accurate_or_warned(_case(kind, prefix, a, b, "ozaki2", trans=(0,)))


@pytest.mark.parametrize("levels", [1, 2, 3])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_strassen_no_nan_from_overflowing_block_sums(levels, beta):
    a = np.full((64, 64), 1e308)
    c = np.ones((64, 64))
    out = emublas.dgemm(1.0, a, np.eye(64), beta, c, backend="strassen", levels=levels)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, sblas.dgemm(1.0, a, np.eye(64), beta, c))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64, np.complex128])
def test_strassen_near_overflow_every_dtype(rng, dtype):
    big = np.finfo(dtype).max / 2
    # entries in [3/4, 1]·max/2: the block sums of Winograd's products certainly overflow
    # (a random draw in [0, max/4] sometimes did not, and the checked path had nothing to repair)
    a = ((0.75 + 0.25 * rng.random((33, 40))) * big).astype(dtype)
    b = np.eye(40, 20, dtype=dtype)
    out = emublas.gemm(1.0, a, b, backend="strassen", levels=2)
    assert np.isfinite(out).all()
    # Strassen's normwise error: the rows it kept err by a few ulps of the largest entry
    assert np.abs(out - a[:, :20]).max() <= 1000 * np.finfo(dtype).eps * big
    assert strassen.last_run()["native_rows"] > 0  # the checked path ran and repaired rows


def test_strassen_ordinary_inputs_skip_the_checked_path(rng):
    a = rng.standard_normal((64, 64))
    emublas.dgemm(1.0, a, a, 1.0, a, backend="strassen", levels=2)
    assert "native_rows" not in strassen.last_run()


@pytest.mark.slow
def test_strassen_auto_levels_n4096_near_overflow(request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("runs with -m slow")
    n = 4096
    out = emublas.dgemm(1.0, np.full((n, n), 1e308), np.eye(n), backend="strassen")
    assert strassen.last_run()["levels"] >= 1 and np.isfinite(out).all()


@pytest.mark.parametrize("alpha", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_strassen_infinite_alpha_follows_native(rng, alpha, dtype):
    a = rng.standard_normal((16, 16)).astype(dtype)
    a[2, :] = 0.0  # rows of zeros: inf*0 is NaN natively, exactly there
    b = np.full((16, 16), 1e308, dtype)
    ours = emublas.gemm(alpha, a, b, backend="strassen", levels=2)
    ref = emublas.gemm(alpha, a, b, backend="native")
    np.testing.assert_array_equal(ours, ref)  # NaN == NaN for assert_array_equal


@pytest.mark.parametrize("backend", ["boolpack", "ozaki2", "strassen"])
@pytest.mark.parametrize("beta", [1.0, 2.0, 1j, -1.0])
def test_complex_inf_in_c_like_native(backend, beta):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 8)) + 1j * rng.standard_normal((8, 8))
    c = rng.standard_normal((8, 8)) + 1j * rng.standard_normal((8, 8))
    c[1, 2], c[3, 4], c[5, 6] = np.inf, complex(0, -np.inf), complex(np.inf, np.inf)
    opts = {"levels": 1} if backend == "strassen" else {}
    ours = emublas.zgemm(1.0, a, a, beta, c, backend=backend, **opts)
    ref = sblas.zgemm(1.0, a, a, beta, c)
    for part in (np.real, np.imag):
        assert np.array_equal(np.isnan(part(ours)), np.isnan(part(ref)))
        assert np.array_equal(np.isposinf(part(ours)), np.isposinf(part(ref)))
        assert np.array_equal(np.isneginf(part(ours)), np.isneginf(part(ref)))
    if beta == 1.0:  # inf + 0j in c: Inf real part, finite imaginary part (not NaN)
        assert np.isposinf(ours[1, 2].real) and np.isfinite(ours[1, 2].imag)


def test_boolpack_int64_min_is_exact():
    for a, b, want in [
        ([[-(2**63)]], [[1]], [[-(2**63)]]),
        ([[-(2**63), 7]], [[1], [0]], [[-(2**63)]]),
        ([[-(2**63) + 1]], [[-1]], [[2**63 - 1]]),
        ([[3], [-(2**63)]], [[1]], [[3], [-(2**63)]]),
    ]:
        out = emublas.intmatmul(np.array(a, np.int64), np.array(b, np.int64), backend="boolpack")
        assert out.dtype == np.int64 and out.tolist() == want


@pytest.mark.parametrize(
    "a,b", [([[-(2**63)]], [[-1]]), ([[-(2**63), -1]], [[1], [1]]), ([[2**62, 2**62]], [[1], [1]])]
)
def test_boolpack_overflow_raises(a, b):
    with pytest.raises(OverflowError, match="does not fit int64"):
        emublas.intmatmul(np.array(a, np.int64), np.array(b, np.int64), backend="boolpack")
