"""Exact tests of the Ozaki-II CPU kernels around the int8 GEMMs
(emublas.backends.ozaki2.kernels_cpu.oz_*: residues, CRT accumulate, CRT finalize).

References are computed with Python integers and fractions.  Every test runs
on the AVX-512 path (where the CPU has it) and on the portable C path
(``impl`` fixture), and several check that thread counts and paths agree bit
for bit.  Each test draws a fresh seed (``seed``/``rng`` fixtures); replay a
failure with ``EMUBLAS_TEST_SEED=<seed>``.
"""

from __future__ import annotations

import contextlib
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from emublas._kernels import cpu
from emublas.backends.ozaki2 import kernels_cpu, kernels_crt
from emublas.backends.ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, TWO_M_ROOTS, crt_reference, real_set, two_m_set

pytestmark = pytest.mark.skipif(not cpu.available(), reason=f"C extension not built: {cpu.load_error()}")

REAL30 = list(REAL_MODULI[:30])
ROOTS = [TWO_M_ROOTS[m] for m in TWO_M_MODULI]


@contextlib.contextmanager
def forced_generic(flag: bool):
    _, lib = cpu.require()
    old = lib.emublas_oz_force_generic(1 if flag else 0)
    try:
        yield
    finally:
        lib.emublas_oz_force_generic(old)


@pytest.fixture(params=["auto", "generic"])
def impl(request):
    with forced_generic(request.param == "generic"):
        yield request.param


# ---------------------------------------------------------------------------
# exact references
# ---------------------------------------------------------------------------


def trunc_scaled(x: float, s: int) -> int:
    """trunc(x * 2**s) exactly."""
    p, q = float(x).as_integer_ratio()
    num = abs(p) << max(s, 0)
    den = q << max(-s, 0)
    y = num // den
    return -y if p < 0 else y


def sym(y: int, m: int) -> int:
    r = y % m
    hi = (m - 1) // 2 if m % 2 else m // 2 - 1
    return r - m if r > hi else r


def ref_residues(x, shift, axis, moduli):
    rows, cols = x.shape
    out = np.empty((len(moduli), rows, cols), dtype=np.int64)
    for i in range(rows):
        for j in range(cols):
            y = trunc_scaled(float(x[i, j]), int(shift[i] if axis == 0 else shift[j]))
            for l, m in enumerate(moduli):
                out[l, i, j] = sym(y, m)
    return out


def scaled_ints(x, shift, axis):
    rows, cols = x.shape
    return [
        [trunc_scaled(float(x[i, j]), int(shift[i] if axis == 0 else shift[j])) for j in range(cols)]
        for i in range(rows)
    ]


def random_inputs(rng, rows, cols, axis, dtype=np.float64, max_bits=95):
    """Values of many magnitudes with shifts that bring trunc(x 2^s) up to ~2^max_bits,
    plus special values: subnormals, +-0, exact integers near multiples of the moduli,
    half-integers, and values near 2^+-1000."""
    n_sh = rows if axis == 0 else cols
    finfo = np.finfo(dtype)
    emin, emax = int(finfo.minexp) - int(finfo.nmant), int(finfo.maxexp) - 1
    base = rng.integers(emin + 60, emax - 2, size=n_sh)  # exponent scale of the line
    target = rng.integers(0, max_bits, size=n_sh)  # log2 of the largest y
    shift = (target - base).astype(np.int64)
    lo_shift, hi_shift = -(2**31) + 1, 2**31 - 1
    shift = np.clip(shift, lo_shift, hi_shift)
    e = (base[:, None] if axis == 0 else base[None, :]) - rng.integers(0, 60, size=(rows, cols))
    mant = rng.uniform(-1, 1, size=(rows, cols))
    x = np.ldexp(mant, e).astype(dtype)
    # special values.  Line 0 gets shift 0 and exact integers / half-integers near
    # multiples of the moduli; line 1 gets subnormals with a shift that brings them
    # up to ~2^(max_bits); zeros, -0 and tiny values go anywhere.
    line = (lambda k: (k, slice(None))) if axis == 0 else (lambda k: (slice(None), k))
    shift[0] = 0
    L0 = x[line(0)]
    for t in range(L0.size):
        mm = int(rng.choice(REAL30))
        c = t % 4
        if c == 0:
            v = float(mm * int(rng.integers(-(10**5), 10**5)) + int(rng.integers(-2, 3)))
        elif c == 1:
            v = mm * int(rng.integers(-1000, 1000)) + float(rng.choice([-0.5, 0.5, 0.999, -0.999]))
        elif c == 2:
            v = float(rng.integers(-(2**20), 2**20))
        else:
            v = float(np.ldexp(rng.uniform(1, 2), int(rng.integers(-40, 20))))
        L0[t] = v
    sub = float(finfo.smallest_subnormal)
    x[line(1)] = (sub * rng.integers(-(2**20), 2**20, size=x[line(1)].shape)).astype(dtype)
    shift[1] = -emin + int(rng.integers(0, max_bits - 20))
    flat = x.reshape(-1)
    sel = rng.choice(flat.size, size=min(flat.size, 12), replace=False)
    for t, k in enumerate(sel):
        flat[k] = [0.0, -0.0, -float(finfo.tiny), sub][t % 4]
    x = flat.reshape(rows, cols)
    return x, shift.astype(np.int32)


# ---------------------------------------------------------------------------
# residues
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("axis", [0, 1])
def test_residues_real_exact(rng, impl, dtype, axis):
    x, shift = random_inputs(rng, 19, 13, axis, dtype)
    got = kernels_cpu.oz_residues(x, shift, axis, REAL30, threads=2)
    np.testing.assert_array_equal(got, ref_residues(x, shift, axis, REAL30))


def test_residues_extremes(impl):
    # x ~ 2^+-1000 with shifts to 2^90 and beyond (scalar fallback), subnormals, exact values
    xs = [
        2.0**-1074,
        3 * 2.0**-1074,
        -(2.0**-1022) * 1.75,
        2.0**1000 * 1.2345,
        -(2.0**-1000) * 1.999,
        2.0**52 + 1,
        -(2.0**53) + 1,
        2.0**89 * 1.5,
        2.0**90,
        -(2.0**90) * 1.25,
        2.0**200 * 1.1,
        0.0,
        -0.0,
    ]
    shifts = [1140, 1150, 1100, -910, 1090, 0, 0, 0, 0, 0, 0, 5, -5]
    x = np.array([xs], dtype=np.float64).repeat(3, axis=0)
    x[1] = -x[1]
    x[2] *= 0.75
    shift = np.array(shifts, dtype=np.int32)
    got = kernels_cpu.oz_residues(x, shift, 1, REAL30)
    np.testing.assert_array_equal(got, ref_residues(x, shift, 1, REAL30))
    got = kernels_cpu.oz_residues(x, shift, 1, list(range(2, 66)))
    np.testing.assert_array_equal(got, ref_residues(x, shift, 1, list(range(2, 66))))


def test_residues_all_small_moduli(rng, impl):
    mods = list(range(2, 257))
    x = rng.integers(-(2**40), 2**40, size=(9, 7)).astype(np.float64) * rng.choice([1, 0.5, 3.75], size=(9, 7))
    shift = rng.integers(-3, 40, size=9).astype(np.int32)
    for k in range(0, len(mods), 64):
        chunk = mods[k : k + 64]
        np.testing.assert_array_equal(kernels_cpu.oz_residues(x, shift, 0, chunk), ref_residues(x, shift, 0, chunk))


def test_residues_strided_views_and_out(rng, impl):
    big, shift = random_inputs(rng, 40, 30, 0, np.float64)
    x = big[::3, 1::2]  # non-unit strides both ways
    sh = shift[::3]
    ref = ref_residues(x, sh, 0, REAL30[:11])
    np.testing.assert_array_equal(kernels_cpu.oz_residues(x, sh, 0, REAL30[:11]), ref)
    # transposed input (unit stride along columns), output planes in a bigger buffer
    xt = np.ascontiguousarray(x.T).T  # C-ordered data viewed as (rows, cols)
    buf = np.zeros((30, x.shape[1] + 3, x.shape[0] + 5), dtype=np.int8)
    out = buf[3:25:2, 1 : 1 + x.shape[1], 2 : 2 + x.shape[0]].transpose(0, 2, 1)
    kernels_cpu.oz_residues(xt, sh, 0, REAL30[:11], out=out)
    np.testing.assert_array_equal(out, ref)
    assert not buf[0].any() and not buf[4].any()  # untouched planes
    # negative strides
    xn = x[::-1, ::-1]
    np.testing.assert_array_equal(kernels_cpu.oz_residues(xn, sh[::-1], 0, REAL30[:11]), ref[:, ::-1, ::-1])


@pytest.mark.parametrize("conj", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_residues_2m_3m_exact(rng, impl, conj, dtype):
    xr, shift = random_inputs(rng, 11, 9, 1, dtype)
    # same column scales as xr (the shift is shared), other values
    xi = (xr[rng.permutation(xr.shape[0])] * rng.choice([1.0, -1.0, 0.5, -0.75], size=xr.shape)).astype(dtype)
    z = (xr + 1j * xi).astype(np.complex128 if dtype == np.float64 else np.complex64)
    yr = scaled_ints(xr, shift, 1)
    yi = scaled_ints(xi, shift, 1)
    sgn = -1 if conj else 1
    rows, cols = xr.shape
    ref2 = np.empty((2 * len(TWO_M_MODULI), rows, cols), dtype=np.int64)
    ref3 = np.empty((3 * len(REAL30), rows, cols), dtype=np.int64)
    for i in range(rows):
        for j in range(cols):
            a, b = yr[i][j], sgn * yi[i][j]
            for l, (m, s) in enumerate(zip(TWO_M_MODULI, ROOTS)):
                ref2[2 * l, i, j] = sym(a + s * b, m)
                ref2[2 * l + 1, i, j] = sym(a - s * b, m)
            for l, m in enumerate(REAL30):
                ref3[3 * l : 3 * l + 3, i, j] = (sym(a, m), sym(b, m), sym(a + b, m))
    # interleaved complex through .real/.imag views, and separate arrays
    for r_, i_ in ((z.real, z.imag), (xr, xi)):
        got = kernels_cpu.oz_residues_cplx(r_, i_, shift, 1, TWO_M_MODULI, ROOTS, conj=conj)
        np.testing.assert_array_equal(got, ref2)
        got = kernels_cpu.oz_residues_3m(r_, i_, shift, 1, REAL30, conj=conj)
        np.testing.assert_array_equal(got, ref3)
    # "split" real matrix: xr = first columns, xi = last columns of one array
    both = np.concatenate([xr, xi], axis=1)
    h = xr.shape[1]
    got = kernels_cpu.oz_residues_cplx(both[:, :h], both[:, h:], shift, 1, TWO_M_MODULI, ROOTS, conj=conj)
    np.testing.assert_array_equal(got, ref2)
    # Fortran-ordered interleaved complex (stride 2 along the vector dimension)
    zf = np.asfortranarray(z)
    got = kernels_cpu.oz_residues_cplx(zf.real, zf.imag, shift, 1, TWO_M_MODULI, ROOTS, conj=conj, threads=1)
    np.testing.assert_array_equal(got, ref2)


def test_residues_large_threads_and_paths_agree(rng):
    x = np.asfortranarray(rng.standard_normal((517, 403)) * np.exp2(rng.integers(-30, 30, size=(517, 403))))
    shift = rng.integers(40, 80, size=403).astype(np.int32)
    outs = []
    for generic in (False, True):
        with forced_generic(generic):
            for t in (1, 2):
                outs.append(kernels_cpu.oz_residues(x, shift, 1, REAL30[:16], threads=t))
                outs.append(
                    kernels_cpu.oz_residues_cplx(
                        x[:, :200], x[:, 200:400], shift[:200], 1, TWO_M_MODULI[:16], ROOTS[:16], threads=t
                    )
                )
                outs.append(
                    kernels_cpu.oz_residues_3m(
                        np.ascontiguousarray(x[:, :200]),
                        x[:, 200:400].copy(order="C"),
                        shift[:200],
                        1,
                        REAL30[:8],
                        conj=True,
                        threads=t,
                    )
                )
    for k in range(3, len(outs)):
        np.testing.assert_array_equal(outs[k], outs[k % 3])
    # spot-check against the exact reference
    sub = (slice(0, 517, 37), slice(0, 403, 29))
    np.testing.assert_array_equal(outs[0][:, sub[0], sub[1]], ref_residues(x[sub], shift[sub[1]], 1, REAL30[:16]))


def test_residues_errors():
    x = np.ones((3, 4))
    with pytest.raises(ValueError, match="non-finite"):
        kernels_cpu.oz_residues(np.array([[1.0, np.nan]]), [0, 0], 1, [7])
    with pytest.raises(ValueError, match="non-finite"):
        kernels_cpu.oz_residues(np.array([[1.0, 2.0**1000]]), [100, 100], 1, [7])
    with pytest.raises(TypeError):
        kernels_cpu.oz_residues(x.astype(np.int32), [0] * 3, 0, [7])
    with pytest.raises(ValueError, match="length"):
        kernels_cpu.oz_residues(x, [0] * 4, 0, [7])
    with pytest.raises(ValueError, match="2..256"):
        kernels_cpu.oz_residues(x, [0] * 3, 0, [257])
    with pytest.raises(ValueError, match="shape"):
        kernels_cpu.oz_residues(x, [0] * 3, 0, [7, 5], out=np.empty((1, 3, 4), np.int8))
    with pytest.raises(ValueError, match="roots"):
        kernels_cpu.oz_residues_cplx(x, x, [0] * 3, 0, [13], [4])
    with pytest.raises(ValueError, match="axis"):
        kernels_cpu.oz_residues(x, [0] * 3, 2, [7])


# ---------------------------------------------------------------------------
# CRT accumulate + finalize
# ---------------------------------------------------------------------------


def random_reps(pyrng: random.Random, c: int, m: int) -> int:
    """A random int32 congruent to c mod m."""
    r = c % m
    k_max = (2**31 - 1 - r) // m
    k_min = -((2**31 + r) // m)
    return r + m * pyrng.randint(k_min, k_max)


def crt_run(ms, X, uplo=0, threads=2, m_n=None):
    """Accumulate the int32 residue matrices X[l] with the CRT weights of ms."""
    m, n = X[0].shape
    hi = np.full((m, n), 7.0, order="F")
    lo = np.full((m, n), 7.0, order="F")
    for l, mod in enumerate(ms.moduli):
        kernels_crt.oz_crt_accumulate(
            X[l], ms.weights[l], mod, ms.big_hi[l], ms.big_lo[l], hi, lo, first=(l == 0), uplo=uplo, threads=threads
        )
    return hi, lo


def ulps(got: float, exact: Fraction) -> float:
    ref = float(exact)
    if ref == 0:
        return 0.0 if got == 0 else math.inf
    return float(abs(Fraction(got) - exact) / Fraction(math.ulp(ref)))


SETS = [("real", 8), ("real", 16), ("real", 20), ("2m", 16), ("2m", 22)]


def bound_of(ms) -> int:
    """P/2·(1 − 2^-31): at least the largest |C'| the planner allows, 2^(log2 P − MARGIN_BITS)."""
    assert math.log2(ms.P // 2 - ms.P // 2**32) >= ms.L
    return ms.P // 2 - ms.P // 2**32


def get_set(kind, count):
    return real_set(count) if kind == "real" else two_m_set(count)


@pytest.mark.parametrize("kind,count", SETS)
def test_crt_roundtrip_exact(seed, impl, kind, count):
    ms = get_set(kind, count)
    pyrng = random.Random(seed)
    m, n = 13, 11
    P = ms.P
    lim = bound_of(ms)
    Cs = [[0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            k = pyrng.choice([0, 0, 0, 1, 5, 12, 20, 30, 45, 70])  # magnitudes P/2 .. P/2^71
            Cs[i][j] = pyrng.randint(-lim, lim) >> k
    Cs[0][0] = lim
    Cs[1][0] = -lim
    Cs[3][0] = lim - 1
    Cs[2][0] = 0
    X = [
        np.array([[random_reps(pyrng, Cs[i][j], mod) for j in range(n)] for i in range(m)], dtype=np.int32, order=order)
        for mod, order in zip(ms.moduli, "FC" * 20)
    ]
    for i in (0, 5):
        for j in (0, 7):
            assert crt_reference([X[l][i, j] for l in range(count)], ms.moduli) == Cs[i][j]
    hi, lo = crt_run(ms, X)
    rsh = np.array([pyrng.randint(-200, 200) for _ in range(m)], dtype=np.int32)
    csh = np.array([pyrng.randint(-200, 200) for _ in range(n)], dtype=np.int32)
    out = np.full((m, n), np.nan)
    kernels_crt.oz_crt_finalize(hi, lo, ms.P_hi, ms.P_lo, rsh, csh, out)
    max_ulp = 0.0
    for i in range(m):
        for j in range(n):
            exact = Fraction(Cs[i][j]) / Fraction(2) ** (int(rsh[i]) + int(csh[j]))
            big = abs(Cs[i][j]) >= P >> 30
            if big:  # correctly rounded expected
                u = ulps(out[i, j], exact)
                max_ulp = max(max_ulp, u)
                assert u <= 1.0, (seed, i, j, u)
            # absolute error bound ~ 2^-95 P for every entry (double-double limit)
            err = abs(Fraction(out[i, j]) - exact) * Fraction(2) ** (int(rsh[i]) + int(csh[j]))
            scale = Fraction(2) ** (int(rsh[i]) + int(csh[j]))
            assert err <= Fraction(P, 2**95) + abs(exact) * Fraction(1, 2**52) * scale, (seed, i, j)
    assert max_ulp <= 0.5, f"finalize not correctly rounded: max {max_ulp} ulp (seed {seed})"


def test_crt_ulp_statistics(seed):
    """Many trials at 16 real moduli with |C'| spread over P/2 .. P/2^45.

    The double-double sum carries an absolute error of about 2^-100 P, so C'
    is correctly rounded unless it lies that close to a rounding boundary:
    always (in practice) for |C'| >= P/2^20, and within 1 ulp down to
    |C'| ~ P/2^44 (where one ulp of C' is about 2^-96 P)."""
    ms = real_set(16)
    pyrng = random.Random(seed)
    m, n = 64, 40
    ks = [[pyrng.randint(0, 44) for _ in range(n)] for _ in range(m)]
    lim = bound_of(ms)
    Cs = [[pyrng.randint(-lim, lim) >> ks[i][j] for j in range(n)] for i in range(m)]
    X = [
        np.array([[random_reps(pyrng, c, mod) for c in row] for row in Cs], dtype=np.int32, order="F")
        for mod in ms.moduli
    ]
    hi, lo = crt_run(ms, X)
    out = np.empty((m, n))
    z = np.zeros(m, np.int32)
    kernels_crt.oz_crt_finalize(hi, lo, ms.P_hi, ms.P_lo, z, np.zeros(n, np.int32), out)
    worst_cr = worst_1 = 0.0
    for i in range(m):
        for j in range(n):
            c = Cs[i][j]
            u = ulps(out[i, j], Fraction(c))
            if abs(c) >= ms.P >> 20:
                worst_cr = max(worst_cr, u)
            if abs(c) >= ms.P >> 40:
                worst_1 = max(worst_1, u)
            # beyond the final rounding, the error is that of the double-double sum
            bound = Fraction(math.ulp(float(c))) / 2 + Fraction(ms.P, 2**100)
            assert abs(Fraction(out[i, j]) - c) <= bound, (seed, i, j)
    assert worst_cr <= 0.5, worst_cr
    assert worst_1 <= 1.0, worst_1


@pytest.mark.parametrize("pieces", [1, 3])
def test_crt_many_terms_at_the_bound(seed, impl, pieces):
    """|C'| at the planner's bound with 20 real moduli, each accumulated as 1 or 3 terms
    (60 terms: more than any recipe sums per part): the quotient round(hi/P) is still
    the right one, so the result is the correctly rounded C'."""
    ms = real_set(20)
    pyrng = random.Random(seed)
    m, n = 8, 6
    lim = bound_of(ms)
    Cs = [
        [pyrng.choice([lim, -lim, lim - pyrng.randint(0, 2**40), pyrng.randint(-lim, lim)]) for _ in range(n)]
        for _ in range(m)
    ]
    hi = np.empty((m, n), order="F")
    lo = np.empty((m, n), order="F")
    first = True
    for l, mod in enumerate(ms.moduli):
        left = [[c for c in row] for row in Cs]
        for p in range(pieces):
            # random residues for all pieces but the last, which completes C' mod m
            part = [[c if p == pieces - 1 else pyrng.randrange(mod) for c in row] for row in left]
            left = [[c - q for c, q in zip(r1, r2)] for r1, r2 in zip(left, part)]
            X = np.array([[random_reps(pyrng, c, mod) for c in row] for row in part], np.int32, order="F")
            kernels_crt.oz_crt_accumulate(X, ms.weights[l], mod, ms.big_hi[l], ms.big_lo[l], hi, lo, first=first)
            first = False
    out = np.empty((m, n))
    kernels_crt.oz_crt_finalize(hi, lo, ms.P_hi, ms.P_lo, np.zeros(m, np.int32), np.zeros(n, np.int32), out)
    for i in range(m):
        for j in range(n):
            assert out[i, j] == float(Cs[i][j]), (seed, pieces, i, j)


def test_crt_2m_complex_with_x2(seed, impl):
    """2M pipeline: C± ≡ Cr ± s Ci; Cr ≡ (C+ + C−)/2, Ci ≡ (C+ − C−)/(2s) through the X2 path."""
    ms = two_m_set(16)
    pyrng = random.Random(seed)
    m, n = 9, 10
    Cr = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.choice([0, 3, 10]) for _ in range(n)] for _ in range(m)]
    Ci = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.choice([0, 3, 10]) for _ in range(n)] for _ in range(m)]
    hr = np.empty((m, n), order="F")
    lr = np.empty_like(hr)
    hi_ = np.empty_like(hr)
    li = np.empty_like(hr)
    for l, mod in enumerate(ms.moduli):
        s = TWO_M_ROOTS[mod]
        cp = np.array(
            [[random_reps(pyrng, Cr[i][j] + s * Ci[i][j], mod) for j in range(n)] for i in range(m)], dtype=np.int32
        )
        cm = np.array(
            [[random_reps(pyrng, Cr[i][j] - s * Ci[i][j], mod) for j in range(n)] for i in range(m)],
            dtype=np.int32,
            order="F",
        )
        y = ms.weights[l]
        wr = sym(y * pow(2, -1, mod), mod)
        wi = sym(y * pow(2 * s, -1, mod), mod)
        kernels_crt.oz_crt_accumulate(cp, wr, mod, ms.big_hi[l], ms.big_lo[l], hr, lr, x2=cm, w2=wr, first=l == 0)
        kernels_crt.oz_crt_accumulate(cp, wi, mod, ms.big_hi[l], ms.big_lo[l], hi_, li, x2=cm, w2=-wi, first=l == 0)
    rsh = np.array([pyrng.randint(-100, 100) for _ in range(m)], np.int32)
    csh = np.array([pyrng.randint(-100, 100) for _ in range(n)], np.int32)
    out = np.empty((m, n), np.complex128)
    kernels_crt.oz_crt_finalize(hr, lr, ms.P_hi, ms.P_lo, rsh, csh, out, im_hi=hi_, im_lo=li)
    for i in range(m):
        for j in range(n):
            sc = Fraction(2) ** (int(rsh[i]) + int(csh[j]))
            assert out[i, j].real == float(Fraction(Cr[i][j]) / sc), (seed, i, j)
            assert out[i, j].imag == float(Fraction(Ci[i][j]) / sc), (seed, i, j)


@pytest.mark.parametrize("uplo", [0, 1, 2])
def test_crt_herk_transposed_alias_and_uplo(seed, impl, uplo):
    """HERK: X2 = X1ᵀ (same memory); Cr ≡ (C+ + C+ᵀ)/2, Ci ≡ (C+ − C+ᵀ)/(2s); uplo leaves the rest."""
    ms = two_m_set(12)
    pyrng = random.Random(seed)
    n = 21
    Cr = [[0] * n for _ in range(n)]
    Ci = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            Cr[i][j] = Cr[j][i] = pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.choice([0, 4])
            if i != j:
                Ci[i][j] = pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.choice([0, 4])
                Ci[j][i] = -Ci[i][j]
    sentinel = -3.25
    hr = np.full((n, n), sentinel, order="F")
    lr = hr.copy(order="F")
    hi_ = hr.copy(order="F")
    li = hr.copy(order="F")
    for l, mod in enumerate(ms.moduli):
        s = TWO_M_ROOTS[mod]
        cp = np.array(
            [[random_reps(pyrng, Cr[i][j] + s * Ci[i][j], mod) for j in range(n)] for i in range(n)],
            dtype=np.int32,
            order="F",
        )
        y = ms.weights[l]
        wr = sym(y * pow(2, -1, mod), mod)
        wi = sym(y * pow(2 * s, -1, mod), mod)
        kernels_crt.oz_crt_accumulate(
            cp, wr, mod, ms.big_hi[l], ms.big_lo[l], hr, lr, x2=cp.T, w2=wr, first=l == 0, uplo=uplo
        )
        kernels_crt.oz_crt_accumulate(
            cp, wi, mod, ms.big_hi[l], ms.big_lo[l], hi_, li, x2=cp.T, w2=-wi, first=l == 0, uplo=uplo
        )
    out = np.full((n, n), complex(np.nan, np.nan), np.complex128)
    z = np.zeros(n, np.int32)
    kernels_crt.oz_crt_finalize(hr, lr, ms.P_hi, ms.P_lo, z, z, out, im_hi=hi_, im_lo=li, uplo=uplo)
    for i in range(n):
        for j in range(n):
            inside = uplo == 0 or (uplo == 1 and i <= j) or (uplo == 2 and i >= j)
            if inside:
                assert out[i, j] == complex(float(Cr[i][j]), float(Ci[i][j])), (seed, i, j)
            else:
                assert hr[i, j] == sentinel and lr[i, j] == sentinel and li[i, j] == sentinel
                assert np.isnan(out[i, j].real) and np.isnan(out[i, j].imag)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("beta", [0.0, 0.75, 1 - 0.5j])
def test_finalize_alpha_beta_dtypes(rng, impl, dtype, beta):
    ms = real_set(10)
    m, n = 19, 14
    pyrng = random.Random(int(rng.integers(2**62)))
    cplx = np.dtype(dtype).kind == "c"
    Cr = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.randint(0, 60) for _ in range(n)] for _ in range(m)]
    Ci = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.randint(0, 60) for _ in range(n)] for _ in range(m)]
    parts = []
    for C in [Cr, Ci] if cplx else [Cr]:
        X = [np.array([[random_reps(pyrng, c, mod) for c in row] for row in C], dtype=np.int32) for mod in ms.moduli]
        parts.append(crt_run(ms, X))
    rsh = rng.integers(0, 100, size=m).astype(np.int32)
    csh = rng.integers(-10, 30, size=n).astype(np.int32)
    # v from alpha = 1, beta = 0 into complex128 (exact representation of the doubles)
    v = np.empty((m, n), np.complex128)
    kw = dict(im_hi=parts[1][0], im_lo=parts[1][1]) if cplx else {}
    kernels_crt.oz_crt_finalize(parts[0][0], parts[0][1], ms.P_hi, ms.P_lo, rsh, csh, v, **kw)
    alpha = complex(-1.5, 0.25) if cplx else -1.5
    beta_c = complex(beta) if cplx else complex(beta).real
    c0 = (rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if cplx else 0)).astype(dtype)
    c0 *= 1e3
    big = np.zeros((m + 5, 2 * n + 1), dtype=dtype)
    out = big[2 : 2 + m, 1 : 2 * n + 1 : 2]  # strided view
    out[...] = c0 if beta != 0 else np.nan
    kernels_crt.oz_crt_finalize(
        parts[0][0], parts[0][1], ms.P_hi, ms.P_lo, rsh, csh, out, alpha=alpha, beta=beta_c, **kw
    )
    ar, ai = (alpha.real, alpha.imag) if cplx else (alpha, 0.0)
    br, bi = (beta_c.real, beta_c.imag) if cplx else (beta_c, 0.0)
    for i in range(m):
        for j in range(n):
            vr, vi = float(v[i, j].real), float(v[i, j].imag)
            if cplx:
                cr, ci = float(c0[i, j].real), float(c0[i, j].imag)
                re = ar * vr - ai * vi
                im = ar * vi + ai * vr
                if beta != 0:
                    re = re + (br * cr - bi * ci)
                    im = im + (br * ci + bi * cr)
                expect = np.array(complex(re, im)).astype(dtype)
            else:
                re = ar * vr
                if beta != 0:
                    re = re + br * float(c0[i, j])
                expect = np.array(re).astype(dtype)
            assert out[i, j] == expect, (i, j, out[i, j], expect)
    # untouched gaps of the strided view
    assert not big[:, 0::2].any() and not big[:2].any()


def test_crt_large_threads_and_paths_agree(rng):
    ms = real_set(16)
    m, n = 403, 391
    X1 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    X1f = np.asfortranarray(X1)
    Xsq = rng.integers(-(2**31), 2**31, size=(n, n), dtype=np.int64).astype(np.int32)
    results = []
    for generic in (False, True):
        with forced_generic(generic):
            for t in (1, 2):
                res = []
                hi = np.empty((m, n), order="F")
                lo = np.empty((m, n), order="F")
                for l in range(4):
                    x = X1f if l % 2 else X1
                    kernels_crt.oz_crt_accumulate(
                        x, ms.weights[l], ms.moduli[l], ms.big_hi[l], ms.big_lo[l], hi, lo, first=l == 0, threads=t
                    )
                res += [hi.copy(), lo.copy()]
                hs = np.zeros((n, n), order="F")
                ls = np.zeros((n, n), order="F")
                for uplo in (1, 2):
                    kernels_crt.oz_crt_accumulate(
                        Xsq,
                        77,
                        241,
                        ms.big_hi[0],
                        ms.big_lo[0],
                        hs,
                        ls,
                        x2=Xsq.T,
                        w2=-5,
                        first=True,
                        uplo=uplo,
                        threads=t,
                    )
                    res += [hs.copy(), ls.copy()]
                for dt in (np.float32, np.float64, np.complex64, np.complex128):
                    o = np.ones((m, n), dt)
                    kw = dict(im_hi=lo, im_lo=hi * 1e-17) if np.dtype(dt).kind == "c" else {}
                    kernels_crt.oz_crt_finalize(
                        hi,
                        lo,
                        ms.P_hi,
                        ms.P_lo,
                        rng.integers(-5, 5, m) * 0 + 60,
                        np.full(n, 3),
                        o,
                        alpha=0.5 + 0.25j,
                        beta=-2 + 1j,
                        threads=t,
                        **kw,
                    )
                    res.append(o)
                results.append(res)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_accumulate_reduction_exact(rng, impl):
    """t = (w1 x1 + w2 x2) mod m, symmetric, for extreme int32 and weights: read back via big = 1."""
    m, n = 17, 5
    x1 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    x2 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    x1[0, 0] = -(2**31)
    x2[0, 0] = -(2**31)
    x1[1, 0] = 2**31 - 1
    x2[1, 0] = 2**31 - 1
    for mod in (2, 3, 256, 255, 241, 97, 65521, 2**31 - 1):
        for w1, w2 in ((1, 0), (511, -511), (65535, 65535), (-65535, 3)):
            hi = np.empty((m, n), order="F")
            lo = np.empty((m, n), order="F")
            kernels_crt.oz_crt_accumulate(x1, w1, mod, 1.0, 0.0, hi, lo, x2=x2, w2=w2, first=True)
            ref = np.array(
                [[sym(w1 * int(x1[i, j]) + w2 * int(x2[i, j]), mod) for j in range(n)] for i in range(m)],
                dtype=np.float64,
            )
            np.testing.assert_array_equal(hi, ref)
            assert not lo.any()


def test_crt_errors():
    hi = np.zeros((3, 4), order="F")
    lo = np.zeros((3, 4), order="F")
    x = np.zeros((3, 4), np.int32)
    with pytest.raises(ValueError, match="Fortran"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, 1.0, 0.0, np.zeros((3, 4)), lo)
    with pytest.raises(TypeError):
        kernels_crt.oz_crt_accumulate(x.astype(np.int64), 1, 7, 1.0, 0.0, hi, lo)
    with pytest.raises(ValueError, match="modulus"):
        kernels_crt.oz_crt_accumulate(x, 1, 1, 1.0, 0.0, hi, lo)
    with pytest.raises(ValueError, match="w1"):
        kernels_crt.oz_crt_accumulate(x, 2**16, 7, 1.0, 0.0, hi, lo)
    with pytest.raises(ValueError, match="uplo"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, 1.0, 0.0, hi, lo, uplo=3)
    with pytest.raises(ValueError, match="complex out"):
        kernels_crt.oz_crt_finalize(hi, lo, 7.0, 0.0, [0] * 3, [0] * 4, np.zeros((3, 4)), im_hi=hi, im_lo=lo)
    with pytest.raises(TypeError):
        kernels_crt.oz_crt_finalize(hi, lo, 7.0, 0.0, [0] * 3, [0] * 4, np.zeros((3, 4), np.int32))
    with pytest.raises(ValueError, match="shape"):
        kernels_crt.oz_crt_finalize(hi, lo, 7.0, 0.0, [0] * 3, [0] * 4, np.zeros((4, 3)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_row_stats_carry_matches_one_pass(rng, dtype):
    """Feeding the column blocks in order (any layouts) gives one pass's statistics bit for bit."""
    x = rng.standard_normal((70, 300)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(x.shape)
    x[3, 7], x[5, 250] = np.nan, np.inf
    for whole in (np.ascontiguousarray(x), np.asfortranarray(x)):
        ref = kernels_cpu.oz_row_stats(whole)
        for layout in (np.ascontiguousarray, np.asfortranarray):
            got = None
            for k0, k1 in ((0, 41), (41, 42), (42, 200), (200, 300)):
                got = kernels_cpu.oz_row_stats(layout(x[:, k0:k1]), carry=got, threads=2)
            np.testing.assert_array_equal(np.isfinite(got[0]), np.isfinite(ref[0]))
            ok = np.isfinite(ref[0])
            for r, g in zip(ref, got):  # float64 statistics: compare the bits
                assert (r[ok].view(np.uint64) == g[ok].view(np.uint64)).all()
