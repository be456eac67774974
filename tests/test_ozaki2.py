"""The ozaki2 backend against exact references (fractions, Python ints) and native BLAS."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
from emublas.backends.ozaki2 import last_run
from emublas.backends.ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, crt_reference, real_set

from helpers import randn

pytestmark = pytest.mark.filterwarnings("ignore::emublas.OzakiAccuracyWarning")


def hard(rng, shape, phi, dtype=np.float64):
    """(rand − 0.5)·exp(φ·randn): the usual Ozaki test family; φ sets the exponent span."""
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x.astype(dtype)


def exact_product(a, b):
    """a @ b with every sum exact (Fractions), then rounded once to float64/complex128."""

    def parts(x):
        return (x.real, x.imag) if np.iscomplexobj(x) else (x, None)

    def exact_real(x, y):
        fx = [[Fraction(float(v)) for v in row] for row in x]
        fy = [[Fraction(float(v)) for v in col] for col in y.T]
        return np.array([[float(sum(p * q for p, q in zip(r, c))) for c in fy] for r in fx])

    ar, ai = parts(a)
    br, bi = parts(b)
    if ai is None and bi is None:
        return exact_real(ar, br)
    ai = np.zeros_like(ar) if ai is None else ai
    bi = np.zeros_like(br) if bi is None else bi
    re = exact_real(np.hstack([ar, -ai]), np.vstack([br, bi]))
    im = exact_real(np.hstack([ar, ai]), np.vstack([bi, br]))
    return re + 1j * im


def relerr(x, ref):
    den = np.abs(ref)
    ok = den > 0
    return float((np.abs(x - ref)[ok] / den[ok]).max()) if ok.any() else float(np.abs(x).max())


# ---------------------------------------------------------------------------
# accuracy against exact products
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["d", "z"])
def test_gemm_matches_native_accuracy_at_default(rng, prefix):
    dtype = np.float64 if prefix == "d" else np.complex128
    a, b = hard(rng, (24, 40), 0.5, dtype), hard(rng, (40, 19), 0.5, dtype)
    ref = exact_product(a, b)
    ours = getattr(emublas, prefix + "gemm")(1.0, a, b, backend="ozaki2")
    nat = getattr(sblas, prefix + "gemm")(1.0, a, b)
    assert relerr(ours, ref) <= max(4 * relerr(nat, ref), 4e-16)
    info = last_run()
    assert info["moduli"] == 16 and info["mode"] == "accurate"
    assert set(info["phases"]) >= {"scaling", "residues", "gemm", "crt"}


@pytest.mark.parametrize("mode", ["fast", "accurate"])
def test_error_falls_with_moduli(rng, mode):
    a, b = hard(rng, (16, 32), 0.5), hard(rng, (32, 16), 0.5)
    ref = exact_product(a, b)
    # fallback="none": the scheme's own error, not the certificate's repairs
    errs = [
        relerr(emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=n, mode=mode, fallback="none"), ref)
        for n in (6, 9, 12, 20)
    ]
    assert errs[0] > errs[1] > errs[2] >= errs[3]
    assert errs[3] <= 2.3e-16  # at 20 moduli: correctly rounded but for the final rounding


def test_integer_valued_inputs_are_exact(rng):
    a = rng.integers(-(2**20), 2**20, (9, 33)).astype(np.float64)
    b = rng.integers(-(2**20), 2**20, (33, 7)).astype(np.float64)
    out = emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=12)
    assert np.array_equal(out, a @ b)  # |entries| < 2^46: the products are exact in float64 too


@pytest.mark.parametrize("route", ["keyword", "use", "auto"])
def test_accuracy_warning_points_at_the_callers_line(rng, monkeypatch, route):
    """The warning names the line that called emublas, whichever way the call was routed."""
    a, b = hard(rng, (12, 64), 4.0), hard(rng, (64, 12), 4.0)
    if route == "auto":  # auto, told that 10 moduli meet the accuracy asked for
        from emublas.backends.auto import backend as auto_backend

        real = auto_backend.AutoBackend._decide_call

        def ozaki2_at_ten(self, table, routine, device, prefix, m, n, k, accuracy, bits):
            be, options, record, warning = real(self, table, routine, device, prefix, m, n, k, accuracy, bits)
            return emublas.backends.get("ozaki2"), {"moduli": 10, "fallback": "none"}, record, warning

        monkeypatch.setattr(auto_backend.AutoBackend, "_decide_call", ozaki2_at_ten)
        monkeypatch.setattr(auto_backend.BACKEND, "_decisions", {})
    with pytest.warns(emublas.OzakiAccuracyWarning) as caught:
        if route == "keyword":
            emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=10, fallback="none")
        elif route == "use":
            with emublas.use("ozaki2", moduli=10, fallback="none"):
                emublas.dgemm(1.0, a, b)
        else:
            emublas.dgemm(1.0, a, b, backend="auto")
    assert {w.filename for w in caught if issubclass(w.category, emublas.OzakiAccuracyWarning)} == {__file__}


def test_wide_exponent_span_warns_and_auto_fixes(rng):
    a, b = hard(rng, (12, 64), 4.0), hard(rng, (64, 12), 4.0)
    ref = exact_product(a, b)
    with pytest.warns(emublas.OzakiAccuracyWarning, match=r"could not be certified .* 10 moduli"):
        fixed = emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=10)
    at_ten = last_run()["uncertified"]
    assert at_ten > 0
    # the fallback's in-order dot products: each entry within native BLAS's error bound k·u·Σ|a||b|
    # (the certificate's target; its actual error need not be as lucky as OpenBLAS's blocked sums)
    bound = a.shape[1] * 2.0**-53 * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(fixed - ref) <= bound)
    # auto picks the count from a sample of rows: a draw can leave an entry or two to the
    # fallback (right values, OzakiFallbackWarning), never one left as computed
    with warnings.catch_warnings():
        warnings.simplefilter("error", emublas.OzakiAccuracyWarning)
        warnings.simplefilter("ignore", emublas.OzakiFallbackWarning)
        out = emublas.dgemm(1.0, a, b, backend="ozaki2", mode="auto")
    chosen = last_run()["moduli"]
    assert last_run()["auto_chose"] and chosen > 16
    assert last_run()["uncertified"] < at_ten
    nat = sblas.dgemm(1.0, a, b)
    assert relerr(out, ref) <= max(relerr(nat, ref), 1e-15)


def _fma(x, y, s):
    """fma(x, y, s) in float64: the exact x·y + s, rounded once."""
    return float(Fraction(x) * Fraction(y) + Fraction(s))


def _in_order_dot(a, b, i, j, cplx):
    """Row i of a times column j of b as the fallback sums it: fma by fma in k order (complex:
    real part re·re then −im·im, imaginary part re·im then im·re)."""
    sr = si = 0.0
    for l in range(a.shape[1]):
        x, y = complex(a[i, l]), complex(b[l, j])
        sr = _fma(x.real, y.real, sr)
        if cplx:
            sr = _fma(-x.imag, y.imag, sr)
            si = _fma(x.real, y.imag, si)
            si = _fma(x.imag, y.real, si)
    return sr, si


@pytest.mark.parametrize("generic", [False, True])
@pytest.mark.parametrize("cplx", [False, True])
def test_fallback_entries_are_the_in_order_dot_products(rng, generic, cplx):
    """Entries the certificate rejects, recomputed after the pass (row by row, from copies of
    the factors' rows), are alpha times the in-order fma dot product plus beta·c, bit for bit,
    on both paths; c is read for them, and the other entries are not disturbed."""
    from emublas._kernels import cpu

    m, k, n = 20, 48, 18
    a, b = hard(rng, (m, k), 4.0), hard(rng, (k, n), 4.0)
    c = rng.standard_normal((m, n))
    alpha, beta = 1.5, 0.5
    if cplx:
        a, b = a + 1j * hard(rng, (m, k), 4.0), b + 1j * hard(rng, (k, n), 4.0)
        c = c + 1j * rng.standard_normal((m, n))
        alpha, beta = 1.5 - 0.25j, 0.5 + 0.5j
    a = np.asfortranarray(a)  # a row of op(a) strided: the path that copies rows
    _, lib = cpu.require()
    old = lib.emublas_oz_force_generic(1 if generic else 0)
    try:
        with pytest.warns(emublas.OzakiFallbackWarning):
            f = emublas.zgemm if cplx else emublas.dgemm
            out = f(alpha, a, b, beta, c.copy(order="F"), backend="ozaki2", moduli=16)  # some rejected, most not
    finally:
        lib.emublas_oz_force_generic(old)
    flagged = last_run()["uncertified"]
    assert flagged > 0

    same = 0
    for i in range(m):
        for j in range(n):
            vr, vi = _in_order_dot(a, b, i, j, cplx)
            if cplx:  # fin_combine's order: alpha times the value, then beta times c
                ar, ai, br, bi = alpha.real, alpha.imag, beta.real, beta.imag
                cr, ci = c[i, j].real, c[i, j].imag
                want = complex((ar * vr - ai * vi) + (br * cr - bi * ci), (ar * vi + ai * vr) + (br * ci + bi * cr))
            else:
                want = alpha * vr + beta * c[i, j]
            same += out[i, j] == want
    assert same >= flagged  # every rejected entry is its dot product (others may agree by chance)
    ref = exact_product(a, b)
    bound = k * 2.0**-53 * (np.abs(a) @ np.abs(b)) * abs(alpha) + np.abs(beta * c) * 2.0**-52
    assert np.all(np.abs(out - (alpha * ref + beta * c)) <= bound * 4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("trans", [(0, 0), (2, 2)])
@pytest.mark.parametrize("few", [False, True])
def test_fallback_rows_on_both_paths_are_the_dot_products(rng, dtype, trans, few):
    """Rows rejected (their entries recomputed several at a time on AVX-512): the same bits
    as the portable path, and each entry the in-order fma dot product of the (conjugated)
    factors, with alpha and beta.  Three whole rows (more entries than columns: R copied
    once for all rows), or 23 entries of one row (fewer: the rows it needs copied for it)."""
    from emublas._kernels import cpu

    m, k, n = 12, 21, 45  # 45 entries a row: vectors of 8, groups of 32 and a remainder
    cplx = np.dtype(dtype).kind == "c"
    ta, tb = trans if cplx else (min(trans[0], 1), min(trans[1], 1))
    a, b = randn(rng, (m, k), dtype), randn(rng, (k, n), dtype)
    rows, cols = ([5], np.arange(0, n, 2)) if few else ([2, 3, 7], np.arange(n))
    a[rows, 0] = 2.0**60  # their other entries are truncated away and carry the sum
    b[0, cols] = 2.0**-60  # elsewhere the huge entry carries it: certified
    c = randn(rng, (m, n), dtype)
    op = {0: lambda x: x, 1: lambda x: x.T.copy(), 2: lambda x: x.conj().T.copy()}
    args = (0.75, op[ta](a), op[tb](b), 0.5)
    _, lib = cpu.require()
    outs = []
    for generic in (1, 0):
        old = lib.emublas_oz_force_generic(generic)
        try:
            with pytest.warns(emublas.OzakiFallbackWarning):
                outs.append(emublas.gemm(*args, c=c.copy(), trans_a=ta, trans_b=tb, backend="ozaki2", moduli=16))
        finally:
            lib.emublas_oz_force_generic(old)
        flagged = last_run()["uncertified"]  # cols' entries, and in a few draws some others
        assert len(rows) * len(cols) <= flagged and (flagged < n) == few
    np.testing.assert_array_equal(outs[1], outs[0])
    for i in rows:
        for j in cols:
            sr, si = _in_order_dot(a, b, i, j, cplx)
            v, cij = complex(sr, si), complex(c[i, j])
            if cplx:
                want = complex(
                    (0.75 * v.real) + (0.5 * cij.real), (0.75 * v.imag) + (0.5 * cij.imag)
                )  # fin_combine with real alpha, beta
            else:
                want = 0.75 * sr + 0.5 * cij.real
            got = complex(outs[1][i, j])
            want = complex(np.dtype(dtype).type(want))
            assert got == want, (i, j, got, want)


def test_auto_is_cheap_on_easy_data(rng):
    a, b = hard(rng, (10, 20), 0.0), hard(rng, (20, 10), 0.0)
    emublas.dgemm(1.0, a, b, backend="ozaki2", mode="auto")
    assert last_run()["moduli"] <= 18


def test_float32_routines(rng):
    a, b = hard(rng, (20, 30), 0.5, np.float32), hard(rng, (30, 10), 0.5, np.float32)
    ref = exact_product(a.astype(np.float64), b.astype(np.float64))
    ours = emublas.sgemm(1.0, a, b, backend="ozaki2")
    assert ours.dtype == np.float32
    assert relerr(ours.astype(np.float64), ref) <= 2 * relerr(sblas.sgemm(1.0, a, b).astype(np.float64), ref) + 1e-7


def test_k_split_past_int32_bound(rng):
    k = 2**17 + 37
    a = rng.standard_normal((2, k))
    b = rng.standard_normal((k, 3))
    ref = np.array([[math.fsum(a[i] * b[:, j]) for j in range(3)] for i in range(2)])
    out = emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=18)
    assert relerr(out, ref) < 1e-13  # cancellation makes some entries small: compare loosely
    zb = b + 1j * rng.standard_normal(b.shape)
    out = emublas.zgemm(1.0, a.astype(complex), zb, backend="ozaki2", moduli=18)
    ref = np.array(
        [[math.fsum(a[i] * zb[:, j].real) + 1j * math.fsum(a[i] * zb[:, j].imag) for j in range(3)] for i in range(2)]
    )
    assert relerr(out, ref) < 1e-13


def test_hybrid_past_22_moduli(rng):
    a, b = hard(rng, (8, 16), 2.0, np.complex128), hard(rng, (16, 8), 2.0, np.complex128)
    ref = exact_product(a, b)
    out = emublas.zgemm(1.0, a, b, backend="ozaki2", moduli=26)
    assert last_run()["moduli"] == 26
    assert relerr(out, ref) <= 3e-16


# ---------------------------------------------------------------------------
# every routine, trans and triangle against native
# ---------------------------------------------------------------------------

CASES = [(p + k, t) for p in "sdcz" for k in ("syrk", "syr2k") for t in ((0, 1) if p in "cz" else (0, 1, 2))]
CASES += [(p + k, t) for p in "cz" for k in ("herk", "her2k") for t in (0, 2)]


@pytest.mark.parametrize("name, trans", CASES)
@pytest.mark.parametrize("lower", [0, 1])
def test_rank_k_against_native(rng, name, trans, lower):
    dtype = emublas.blas.DTYPES[name[0]]
    n, k = 9, 7  # odd k exercises the split padding
    a = hard(rng, (n, k) if trans == 0 else (k, n), 0.5, dtype)
    b = hard(rng, a.shape, 0.5, dtype)
    c = hard(rng, (n, n), 0.5, dtype)
    cplx = name[0] in "cz"
    alpha = complex(1.3, -0.4) if cplx and name[1:] != "herk" else 1.3
    beta = 0.7 if name[1:3] == "he" or not cplx else complex(0.7, 0.2)
    args = (alpha, a, b) if name.endswith("2k") else (alpha, a)
    ours = getattr(emublas, name)(*args, beta, c, trans=trans, lower=lower, backend="ozaki2")
    ref = getattr(sblas, name)(*args, beta, c, trans=trans, lower=lower)
    eps = np.finfo(dtype).eps
    scale = np.abs(ref).max()
    assert np.abs(ours - ref).max() <= 64 * eps * scale
    untouched = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    assert np.array_equal(ours[untouched], c[untouched])
    if name[1:3] == "he":
        assert np.all(np.diagonal(ours).imag == 0)


@pytest.mark.parametrize("ta, tb", [(0, 0), (1, 0), (0, 2), (2, 1), (2, 2)])
def test_zgemm_trans_alpha_beta(rng, ta, tb):
    a = hard(rng, (11, 6) if ta == 0 else (6, 11), 0.5, np.complex128)
    b = hard(rng, (6, 5) if tb == 0 else (5, 6), 0.5, np.complex128)
    c = hard(rng, (11, 5), 0.5, np.complex128)
    ours = emublas.zgemm(2 - 1j, a, b, 0.5j, c, trans_a=ta, trans_b=tb, backend="ozaki2")
    ref = sblas.zgemm(2 - 1j, a, b, 0.5j, c, trans_a=ta, trans_b=tb)
    assert np.abs(ours - ref).max() <= 64 * np.finfo(float).eps * np.abs(ref).max()


def test_rank_k_is_cheaper_than_gemm(rng):
    """herk and syrk run one half-size-equivalent int8 product per modulus."""
    a = hard(rng, (64, 64), 0.5, np.complex128)
    emublas.zherk(1.0, a, backend="ozaki2")
    herk_gemm = last_run()["phases"]["gemm"]
    emublas.zgemm(1.0, a, a, trans_b=2, backend="ozaki2")
    assert last_run()["routine"] == "gemm"
    assert herk_gemm > 0  # timings themselves are benchmarked in benchmarks/, not asserted here


# ---------------------------------------------------------------------------
# special values, hard inputs, untouched inputs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["d", "z"])
def test_nan_inf_pattern_matches_native(rng, prefix):
    dtype = np.float64 if prefix == "d" else np.complex128
    a, b = hard(rng, (8, 6), 0.5, dtype), hard(rng, (6, 7), 0.5, dtype)
    a[2, 3] = np.nan
    a[5, 0] = np.inf
    b[4, 6] = -np.inf
    b[1, 2] = 0.0
    c = hard(rng, (8, 7), 0.5, dtype)
    ours = getattr(emublas, prefix + "gemm")(1.5, a, b, 0.5, c, backend="ozaki2")
    ref = getattr(sblas, prefix + "gemm")(1.5, a, b, 0.5, c)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    assert np.array_equal(np.isinf(ours), np.isinf(ref))
    fin = np.isfinite(ref)
    assert np.abs(ours[fin] - ref[fin]).max() <= 64 * np.finfo(float).eps * np.abs(ref[fin]).max()


def test_nan_in_rank_k_input(rng):
    a = hard(rng, (6, 5), 0.5, np.complex128)
    a[1, 1] = np.nan
    ours = emublas.zherk(1.0, a, backend="ozaki2")
    ref = sblas.zherk(1.0, a)
    assert np.array_equal(np.isnan(np.triu(ours)), np.isnan(np.triu(ref)))


def test_zero_rows_subnormals_huge(rng):
    a = hard(rng, (6, 8), 0.5)
    b = hard(rng, (8, 5), 0.5)
    a[0] = 0.0
    b[:, 3] = 0.0
    a[1] *= 2.0**-1060  # subnormal row
    a[2] *= 2.0**1000  # huge row
    b[:, 1] *= 2.0**-1000
    ref = exact_product(a, b)
    out = emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=18)
    assert np.array_equal(out[0], np.zeros(5)) and np.array_equal(out[:, 3], np.zeros(6))
    fine = ref != 0
    assert np.all(np.abs(out - ref)[fine] <= 1e-14 * np.abs(ref)[fine] + 2.0**-1074 * 8)


def test_inputs_untouched_and_overwrite(rng):
    a, b = hard(rng, (7, 5), 0.5), hard(rng, (5, 6), 0.5)
    c = np.asfortranarray(hard(rng, (7, 6), 0.5))
    copies = a.copy(), b.copy(), c.copy()
    r = emublas.dgemm(1.0, a, b, 1.0, c, backend="ozaki2")
    assert r is not c and np.array_equal(c, copies[2])
    assert np.array_equal(a, copies[0]) and np.array_equal(b, copies[1])
    r = emublas.dgemm(1.0, a, b, 1.0, c, overwrite_c=1, backend="ozaki2")
    assert r is c


# ---------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------


def test_options_from_environment(rng, monkeypatch):
    a, b = hard(rng, (4, 4), 0.5), hard(rng, (4, 4), 0.5)
    monkeypatch.setenv("EMUBLAS_MODULI", "11")
    monkeypatch.setenv("EMUBLAS_OZAKI_MODE", "fast")
    emublas.dgemm(1.0, a, b, backend="ozaki2")
    assert (last_run()["moduli"], last_run()["mode"]) == (11, "fast")
    monkeypatch.setenv("EMUBLAS_OZAKI_MODE", "fastest")
    with pytest.raises(ValueError, match="EMUBLAS_OZAKI_MODE.*fast, accurate, auto"):
        emublas.dgemm(1.0, a, b, backend="ozaki2")


def test_bad_moduli_value(rng):
    a = hard(rng, (3, 3), 0.5)
    with pytest.raises(ValueError, match="moduli"):
        emublas.dgemm(1.0, a, a, backend="ozaki2", moduli=0)
    with pytest.raises(ValueError, match=r"outside \[1, 49\]"):
        emublas.dgemm(1.0, a, a, backend="ozaki2", moduli=len(REAL_MODULI) + 1)


def test_rank_k_beyond_2m_list_is_derived(rng):
    a = hard(rng, (5, 4), 0.5, np.complex128)
    ours = emublas.zherk(1.0, a, backend="ozaki2", moduli=24)
    ref = sblas.zherk(1.0, a)
    assert np.abs(np.triu(ours) - np.triu(ref)).max() <= 1e-14 * np.abs(ref).max()
    assert last_run()["routine"] == "gemm"  # derived by the front from the hybrid gemm


# ---------------------------------------------------------------------------
# CRT pieces and exact integers
# ---------------------------------------------------------------------------


def test_crt_reference_roundtrip(rng):
    for count in (4, 16, 20):
        ms = real_set(count)
        for _ in range(50):
            x = int(rng.integers(-(2**62), 2**62)) * int(rng.integers(1, 2**40))
            x %= ms.P
            x = x - ms.P if x > ms.P // 2 else x
            assert crt_reference([x % m for m in ms.moduli], ms.moduli) == x
    assert len(TWO_M_MODULI) == 22


@pytest.mark.parametrize("backend", ["ozaki2", "native"])
def test_intmatmul_exact(rng, backend):
    for lo, hi in ((-3, 4), (-(2**31), 2**31), (-(2**40), 2**40)):
        a = rng.integers(lo, hi, (9, 13), dtype=np.int64)
        b = rng.integers(lo, hi, (13, 6), dtype=np.int64)
        exact = a.astype(object) @ b.astype(object)
        if np.abs(exact).max() > 2**63 - 1:
            continue
        assert np.array_equal(emublas.intmatmul(a, b, backend=backend), exact.astype(np.int64))
    a = rng.integers(0, 2, (20, 70)).astype(bool)
    b = rng.integers(0, 2, (70, 5)).astype(np.uint8)
    assert np.array_equal(emublas.intmatmul(a, b, backend=backend), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("backend", ["ozaki2", "native"])
def test_intmatmul_int64_edge(backend):
    big = 2**31
    a = np.array([[big, big - 1]], dtype=np.int64)
    b = np.array([[big - 1], [big + 1]], dtype=np.int64)  # 2^62 - 2^31 + 2^62 - 1 = 2^63 - 2^31 - 1
    assert emublas.intmatmul(a, b, backend=backend)[0, 0] == 2**63 - 2**31 - 1
    a = np.array([[2**62, 2**62]], dtype=np.int64)
    b = np.array([[1], [1]], dtype=np.int64)  # exactly 2^63: one past int64
    with pytest.raises(OverflowError):
        emublas.intmatmul(a, b, backend=backend)
    b = np.array([[1], [-1]], dtype=np.int64)  # bound too wide, but the exact value 0 fits
    assert emublas.intmatmul(a, b, backend=backend)[0, 0] == 0


def test_intmatmul_errors():
    with pytest.raises(TypeError, match="integer"):
        emublas.intmatmul(np.ones((2, 2)), np.ones((2, 2), int))
    with pytest.raises(ValueError, match="2x3"):
        emublas.intmatmul(np.ones((2, 3), int), np.ones((2, 2), int))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_scaling_kernels_against_numpy(rng, dtype, layout):
    from emublas.backends.ozaki2 import kernels_cpu

    x = hard(rng, (37, 29), 1.0, dtype)
    x[3] *= np.float32(2.0**-120) if np.dtype(dtype).itemsize <= 8 and dtype != np.float64 else 2.0**-1060
    x[5] = 0
    x = {"C": x, "F": np.asfortranarray(x), "strided": np.repeat(x, 2, axis=1)[:, ::2]}[layout]
    cplx = np.dtype(dtype).kind == "c"
    mag = np.abs(x.astype(np.complex128) if cplx else x.astype(np.float64))
    rowmax, sumsq, l1 = kernels_cpu.oz_row_stats(x)
    np.testing.assert_allclose(rowmax, mag.max(axis=1), rtol=5e-16 if cplx else 0)
    np.testing.assert_allclose(l1, mag.sum(axis=1), rtol=1e-13)
    ok = (sumsq > 0) & np.isfinite(sumsq)
    np.testing.assert_allclose(sumsq[ok], (mag**2).sum(axis=1)[ok], rtol=1e-13)
    ea = np.frexp(rowmax)[1]
    bound = kernels_cpu.oz_bound_int8(x, ea)
    scaled = np.ldexp(mag, -ea[:, None]) * 127.0
    if cplx:  # hypot may differ from numpy's modulus in the last bit: check the bound property
        assert np.all(bound >= scaled * (1 - 1e-15)) and np.all(bound < scaled + 1 + 1e-12)
    else:
        assert np.array_equal(bound, np.ceil(scaled).astype(np.int8))
    assert bound.max() <= 127 and bound.min() >= 0
    x2 = np.array(x, copy=True)
    x2[7, 4] = np.nan
    x2[9, 0] = np.inf
    rowmax, _, _ = kernels_cpu.oz_row_stats(x2)
    assert not np.isfinite(rowmax[7]) and not np.isfinite(rowmax[9]) and np.isfinite(rowmax[8])


@pytest.mark.parametrize("name", ["zher2k", "zsyr2k", "dsyr2k", "cher2k"])
@pytest.mark.parametrize("alpha", [1.0, 7.85e-11j, 2 - 3j])
def test_rank_2k_factors_of_very_different_size(rng, name, alpha):
    """Both factors of a row share one shift: a tiny b (or a tiny alpha·a) must keep its bits."""
    cplx = name[0] in "cz"
    dtype = emublas.blas.DTYPES[name[0]]
    a = hard(rng, (7, 5), 0.5, dtype)
    b = (hard(rng, (7, 5), 0.5, dtype) * 1e-12).astype(dtype)
    alpha = alpha if cplx else abs(alpha)
    ours = getattr(emublas, name)(alpha, a, b, backend="ozaki2")
    ref = getattr(sblas, name)(alpha, a, b)
    assert np.abs(ours - ref).max() <= 64 * np.finfo(dtype).eps * np.abs(ref).max()


def test_graphs_option_is_checked_and_numpy_calls_ignore_it(emublas, rng):
    a = rng.standard_normal((9, 7))
    want = emublas.dgemm(1.0, a, a.T, backend="ozaki2")
    np.testing.assert_array_equal(emublas.dgemm(1.0, a, a.T, backend="ozaki2", graphs="off"), want)
    with pytest.raises(ValueError, match="graphs.*auto.*off"):
        emublas.dgemm(1.0, a, a.T, backend="ozaki2", graphs="on")
