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
import re
from fractions import Fraction

import numpy as np
import pytest

from emublas._kernels import cpu
from emublas.backends.ozaki2 import kernels_cpu, kernels_crt
from emublas.backends.ozaki2.moduli import (
    REAL_MODULI,
    TWO_M_MODULI,
    TWO_M_ROOTS,
    crt_reference,
    crt_split,
    real_set,
    two_m_set,
)

pytestmark = pytest.mark.skipif(not cpu.available(), reason=f"C extension not built: {cpu.load_error()}")

REAL30 = list(REAL_MODULI[:30])
ROOTS = [TWO_M_ROOTS[m] for m in TWO_M_MODULI]


@contextlib.contextmanager
def forced_generic(flag: bool | int):
    """flag: 1 (True) the portable C path, 2 the AVX2 path (portable C without AVX2), 0 run-time dispatch."""
    _, lib = cpu.require()
    old = lib.emublas_oz_force_generic(int(flag))
    try:
        yield
    finally:
        lib.emublas_oz_force_generic(old)


@pytest.fixture(params=["auto", "avx2", "generic"])
def impl(request):
    with forced_generic({"auto": 0, "avx2": 2, "generic": 1}[request.param]):
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


def _avx2_active() -> bool:
    with forced_generic(2):
        return kernels_cpu.oz_kernel_name() == "avx2"


def _paths(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the AVX2 path and on the portable C path."""
    outs = []
    for flag in (2, 1):
        with forced_generic(flag):
            outs.append(fn(*args, **kwargs))
    return outs


def _layouts(x):
    """x as C-, F-ordered, strided, reversed and transposed views with the same values."""
    wide = np.repeat(x, 3, axis=0)[1::3]
    return [
        x,
        np.asfortranarray(x),
        wide,
        np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1],
        np.asfortranarray(x.T).T,
        np.repeat(np.asfortranarray(x), 2, axis=1)[:, ::2],
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_residues_avx2_matches_generic(rng, dtype):
    """AVX2 and portable residues bit for bit: sizes off the 4 lanes and across the 64-row
    blocks, every layout, real/2M/3M with conj, huge lanes, and shifts at the edges of the
    vector code's two-step power-of-two scaling (and beyond, where the scalar code runs)."""
    if not _avx2_active():
        pytest.skip("no AVX2 path on this CPU")
    mods, mods2 = REAL30[:9], list(TWO_M_MODULI[:7])
    roots2 = ROOTS[:7]
    for rows, cols in ((2, 2), (3, 5), (7, 4), (13, 9), (67, 3), (130, 2)):
        for axis in (0, 1):
            x, shift = random_inputs(rng, rows, cols, axis, dtype)
            # same line scales as x (the shift is shared), other values
            perm = (slice(None), rng.permutation(cols)) if axis == 0 else (rng.permutation(rows), slice(None))
            xi = (x[perm] * rng.choice([1.0, -1.0, 0.5, -0.75], size=x.shape)).astype(dtype)
            fi = np.finfo(dtype)
            for s in (-3000, -2045, -2044, -1023, -1022, 1023, 1024, 1100, 2046, 2047, 2**31 - 1):
                if rng.random() < 0.5:  # a line with shift s and values that keep x 2^s below 2^95
                    k = int(rng.integers(2, shift.size)) if shift.size > 2 else 0
                    line = (k, slice(None)) if axis == 0 else (slice(None), k)
                    n = x[line].size
                    e = np.clip(-s + rng.integers(0, 95, size=n), -1100, int(fi.maxexp) - 1)
                    shift[k] = s
                    x[line] = np.ldexp(rng.uniform(-2, 2, size=n), e).astype(dtype)
                    xi[line] = np.ldexp(rng.uniform(-2, 2, size=n), e).astype(dtype)
            for xv, iv in zip(_layouts(x), _layouts(xi)):
                got = _paths(kernels_cpu.oz_residues, xv, shift, axis, mods, threads=1)
                np.testing.assert_array_equal(got[0], got[1])
                for conj in (False, True):
                    got = _paths(kernels_cpu.oz_residues_cplx, xv, iv, shift, axis, mods2, roots2, conj=conj, threads=2)
                    np.testing.assert_array_equal(got[0], got[1])
                    got = _paths(kernels_cpu.oz_residues_3m, xv, iv, shift, axis, mods, conj=conj)
                    np.testing.assert_array_equal(got[0], got[1])
            if rows * cols <= 200:  # and the exact values
                np.testing.assert_array_equal(got[0][::3], ref_residues(x, shift, axis, mods))
    # interleaved complex (the deinterleaving loads), C and Fortran order, odd lengths
    for shape in ((37, 5), (8, 3), (5, 70)):
        z = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(
            np.complex128 if dtype == np.float64 else np.complex64
        ) * np.exp2(rng.integers(-20, 20, size=shape))
        sh = rng.integers(30, 60, size=shape[1]).astype(np.int32)
        for zz in (z, np.asfortranarray(z)):
            got = _paths(kernels_cpu.oz_residues_cplx, zz.real, zz.imag, sh, 1, mods2, roots2, conj=True)
            np.testing.assert_array_equal(got[0], got[1])
            got = _paths(kernels_cpu.oz_residues_3m, zz.real, zz.imag, sh, 1, mods)
            np.testing.assert_array_equal(got[0], got[1])


def test_residues_avx2_power_of_two_edges():
    """trunc(x 2^s) near the ends of the double range, where the AVX2 code scales in two
    steps: x ~ 2^1023 with s ~ -1023, subnormal x with s ~ 1074..1160, against the exact
    reference on every path; non-finite lanes and huge products are errors on both."""
    xs, shifts = [], []
    for s, e in (
        (-1023, 1023),
        (-1022, 1023),
        (-1024, 1023),
        (-1030, 1023),
        (-1100, 1023),
        (-2044, 1023),
        (-2045, 1023),
        (1074, -1074),
        (1100, -1074),
        (1150, -1060),
        (1023, -1000),
        (1024, -1000),
        (2046, -1074),
        (0, 0),
        (5, 3),
    ):
        shifts.append(s)
        xs.append(
            [np.ldexp(m, e) for m in (1.0, 1.5, 1.75, -1.25, 1.9999999999999998, 1.0000000000000002, 1.125, -1.0, 0.0)]
        )
    x = np.array(xs).T  # 9 x 15, shift per column
    x[:, 13] = [2.0**52 + 1, -(2.0**53), 12345.0, -7.0, 0.5, -0.5, 1.0, 2.0**60, 3.0]
    x[:, 12] = x[:, 12] * 0.0 + [2.0**-1074, 3 * 2.0**-1074, 0.0, -(2.0**-1074), 0.0, 0.0, 0.0, 0.0, 0.0]
    shift = np.array(shifts, np.int32)
    ref = ref_residues(x, shift, 1, REAL30[:12])
    for flag in (0, 2, 1):
        with forced_generic(flag):
            for xv in (x, np.ascontiguousarray(x), x.T.copy().T[::-1][::-1]):
                np.testing.assert_array_equal(kernels_cpu.oz_residues(xv, shift, 1, REAL30[:12]), ref)
            for bad in (np.nan, np.inf, -np.inf, 2.0**1000):
                xb = x.copy()
                xb[5, 8] = bad  # shift 1100: 2^1000 overflows
                with pytest.raises(ValueError, match="non-finite"):
                    kernels_cpu.oz_residues(xb, shift, 1, REAL30[:12])


# ---------------------------------------------------------------------------
# CRT accumulate + finalize
# ---------------------------------------------------------------------------


def random_reps(pyrng: random.Random, c: int, m: int) -> int:
    """A random int32 congruent to c mod m."""
    r = c % m
    k_max = (2**31 - 1 - r) // m
    k_min = -((2**31 + r) // m)
    return r + m * pyrng.randint(k_min, k_max)


def new_acc(m: int, n: int, fill: float = 7.0) -> np.ndarray:
    """The three accumulators of each of m x n entries: float64 (m, n, 3), Fortran order."""
    return np.full((m, n, 3), fill, order="F")


def crt_run(ms, X, uplo=0, threads=2, crt=None):
    """Accumulate the int32 residue matrices X[l] with the CRT weights of ms: one term per
    modulus, so the pieces of ``crt_split(ms, len(ms))`` unless ``crt`` is given."""
    m, n = X[0].shape
    crt = crt_split(ms, len(ms)) if crt is None else crt
    acc = new_acc(m, n)
    for l, mod in enumerate(ms.moduli):
        kernels_crt.oz_crt_accumulate(
            X[l], ms.weights[l], mod, crt.weights[l], acc, first=(l == 0), uplo=uplo, threads=threads
        )
    return acc, crt


def weights_exact(ms, crt) -> bool:
    """Whether the three pieces hold every weight P/m exactly (P's bit length E ≤ 3β)."""
    return ms.P.bit_length() <= 3 * crt.beta


def crt_err(crt, shift: int = 0) -> Fraction:
    """``crt_split``'s bound on the error before the final rounding, unscaled by 2^-shift."""
    return Fraction(2.0**crt.err) / Fraction(2) ** shift


def assert_crt_rounded(got: float, exact: Fraction, err: Fraction, ctx=()) -> None:
    """``got`` is ``exact`` plus at most ``err``, rounded once to double (emublas_cpu.h):
    ``got == fl(exact)`` unless a rounding boundary (a midpoint between doubles) lies
    within ``err`` of ``exact``, and ``|got − exact| ≤ err + ulp(got)/2`` in any case."""
    r = float(exact)
    below, above = math.nextafter(r, -math.inf), math.nextafter(r, math.inf)
    mids = ((Fraction(r) + Fraction(below)) / 2, (Fraction(r) + Fraction(above)) / 2)
    if min(abs(exact - b) for b in mids) > err:
        assert got == r, (*ctx, got, r)
    assert abs(Fraction(got) - exact) <= err + Fraction(math.ulp(got)) / 2, (*ctx, got, r)


def ulps(got: float, exact: Fraction) -> float:
    ref = float(exact)
    if ref == 0:
        return 0.0 if got == 0 else math.inf
    return float(abs(Fraction(got) - exact) / Fraction(math.ulp(ref)))


def bits(a: np.ndarray) -> np.ndarray:
    """The float64 bit patterns of ``a`` (so that -0.0 and 0.0 differ)."""
    return np.ascontiguousarray(a).view(np.uint64)


SETS = [("real", 8), ("real", 16), ("real", 20), ("2m", 16), ("2m", 22)]


def bound_of(ms) -> int:
    """P/2·(1 − 2^-31): at least the largest |C'| the planner allows, 2^(log2 P − MARGIN_BITS)."""
    assert math.log2(ms.P // 2 - ms.P // 2**32) >= ms.L
    return ms.P // 2 - ms.P // 2**32


def get_set(kind, count):
    return real_set(count) if kind == "real" else two_m_set(count)


def check_pieces(pieces, x: int, E: int, beta: int, ctx=()) -> Fraction:
    """Check three pieces of the integer x (E bits at most): piece s a multiple of
    u_s = 2^(E − s·β) of at most 2^β units; their sum x itself when E ≤ 3β, within
    u_3/2 of it otherwise.  Returns |sum − x|."""
    fr = [Fraction(float(p)) for p in pieces]
    assert len(fr) == 3, ctx
    for s, f in enumerate(fr, 1):
        u = Fraction(2) ** (E - s * beta)
        assert (f / u).denominator == 1, (*ctx, x, s)  # on its grid
        assert abs(f) <= 2**beta * u, (*ctx, x, s)
    rest = abs(sum(fr) - x)
    if E <= 3 * beta:
        assert rest == 0, (*ctx, x)
    else:
        assert rest <= Fraction(2) ** (E - 3 * beta - 1), (*ctx, x)
    return rest


@pytest.mark.parametrize("kind,count", [*SETS, ("real", 1), ("real", 3), ("real", 30), ("real", 49), ("2m", 5)])
def test_crt_split_invariants(kind, count):
    """The pieces of every weight P/m and of P, checked with Fractions: multiples of
    u_s = 2^(E − s·β) of at most 2^β units (so N terms |t| ≤ 128 stay below 2^53 units),
    summing to the weight exactly when E ≤ 3β and to within u_3/2 otherwise; the
    finalize's constants; an error bound that grows with the term count."""
    ms = get_set(kind, count)
    P, E = ms.P, ms.P.bit_length()
    errs = []
    for nterms in sorted({1, 2, 3, count, 3 * count, 1024, 2**13}):
        crt = crt_split(ms, nterms)
        beta = crt.beta
        assert beta == 46 - math.ceil(math.log2(nterms)) and crt.nterms == nterms
        assert nterms * 128 * 2**beta <= 2**53  # the sums' headroom
        assert crt.weights.shape == (count, 3) and crt.weights.dtype == np.float64
        ctx = (kind, count, nterms)
        worst = max(check_pieces(crt.weights[l], P // mod, E, beta, ctx) for l, mod in enumerate(ms.moduli))
        check_pieces(crt.consts[:3], P, E, beta, ctx)
        assert crt.consts[3] == float(Fraction(1, P))
        assert crt.consts[4:] == (2.0 ** (E - beta), 2.0 ** (beta - E), 2.0 ** (E - 2 * beta), 2.0 ** (2 * beta - E))
        # the bound covers the weights' rounding (N terms of |t| <= 128) and the last additions'
        assert Fraction(2.0**crt.err) >= 128 * nterms * worst + Fraction(2) ** (E - 106)
        errs.append(crt.err)
    assert errs == sorted(errs) and errs[-1] > errs[0], errs  # fewer terms, a smaller bound
    assert max(errs) < E - 60  # far below the margin P·2^-31 that keeps the quotient right
    with pytest.raises(ValueError, match=r"2\*\*13"):
        crt_split(ms, 2**13 + 1)


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
    acc, crt = crt_run(ms, X)
    rsh = np.array([pyrng.randint(-200, 200) for _ in range(m)], dtype=np.int32)
    csh = np.array([pyrng.randint(-200, 200) for _ in range(n)], dtype=np.int32)
    out = np.full((m, n), np.nan)
    kernels_crt.oz_crt_finalize(acc, crt.consts, rsh, csh, out)
    max_ulp = 0.0
    for i in range(m):
        for j in range(n):
            sh = int(rsh[i]) + int(csh[j])
            exact = Fraction(Cs[i][j]) / Fraction(2) ** sh
            # the exact symmetric representative, rounded once, up to crt_split's error bound
            # (the weights' rounding when E > 3β, the last two additions' otherwise)
            assert_crt_rounded(out[i, j], exact, crt_err(crt, sh), (seed, i, j))
            u = ulps(out[i, j], exact)
            if weights_exact(ms, crt):
                # exact sums: only the finalize's last two additions round, fl(s + fl(e + d3)),
                # within 1 ulp of C' (correctly rounded unless |C'| is near P and C' a hair
                # from a rounding boundary), so 1 ulp is the tolerance
                assert u <= 1.0, (seed, i, j, u)
            if abs(Cs[i][j]) >= P >> 30:
                max_ulp = max(max_ulp, u)
    assert max_ulp <= 0.5, f"finalize not correctly rounded: max {max_ulp} ulp (seed {seed})"


def test_crt_ulp_statistics(seed):
    """Many trials at 16 real moduli with |C'| spread over P/2 .. P/2^45.

    With one term per modulus (N = 16, β = 42) the pieces hold every weight exactly
    (E = 126 = 3β), so the three sums are exact and only the finalize's last two
    additions round, ``fl(s + fl(e + d3))``: C' comes back within 1 ulp always, and
    correctly rounded in practice (``e + d3`` is a multiple of u_3 = 1 below 2^53
    unless |C'| is near 2^100 or more, and even then it would have to lie within
    about 2^-106 P of a rounding boundary)."""
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
    acc, crt = crt_run(ms, X)
    assert weights_exact(ms, crt)
    out = np.empty((m, n))
    z = np.zeros(m, np.int32)
    kernels_crt.oz_crt_finalize(acc, crt.consts, z, np.zeros(n, np.int32), out)
    worst_cr = worst = 0.0
    for i in range(m):
        for j in range(n):
            c = Cs[i][j]
            u = ulps(out[i, j], Fraction(c))
            if abs(c) < 2**100:  # e + d3 exact: the result is fl(C'), correctly rounded
                assert u <= 0.5, (seed, i, j, u)
            if abs(c) >= ms.P >> 20:
                worst_cr = max(worst_cr, u)
            worst = max(worst, u)
            assert_crt_rounded(out[i, j], Fraction(c), crt_err(crt), (seed, i, j))
            assert u <= 1.0, (seed, i, j, u)  # exact sums: at most the last additions' rounding
    assert worst_cr <= 0.5, worst_cr
    assert worst <= 1.0, worst


@pytest.mark.parametrize("pieces", [1, 3])
def test_crt_many_terms_at_the_bound(seed, impl, pieces):
    """|C'| at the planner's bound with 20 real moduli, each accumulated as 1 or 3 terms
    (60 terms: more than any recipe sums per part, β = 40): the quotient round(s1/P) is
    still the right one, so the result is the correctly rounded C' (up to crt_split's
    bound, the weights' rounding, far below an ulp of C' here)."""
    ms = real_set(20)
    crt = crt_split(ms, len(ms) * pieces)
    pyrng = random.Random(seed)
    m, n = 8, 6
    lim = bound_of(ms)
    Cs = [
        [pyrng.choice([lim, -lim, lim - pyrng.randint(0, 2**40), pyrng.randint(-lim, lim)]) for _ in range(n)]
        for _ in range(m)
    ]
    acc = np.empty((m, n, 3), order="F")
    first = True
    for l, mod in enumerate(ms.moduli):
        left = [[c for c in row] for row in Cs]
        for p in range(pieces):
            # random residues for all pieces but the last, which completes C' mod m
            part = [[c if p == pieces - 1 else pyrng.randrange(mod) for c in row] for row in left]
            left = [[c - q for c, q in zip(r1, r2)] for r1, r2 in zip(left, part)]
            X = np.array([[random_reps(pyrng, c, mod) for c in row] for row in part], np.int32, order="F")
            kernels_crt.oz_crt_accumulate(X, ms.weights[l], mod, crt.weights[l], acc, first=first)
            first = False
    out = np.empty((m, n))
    kernels_crt.oz_crt_finalize(acc, crt.consts, np.zeros(m, np.int32), np.zeros(n, np.int32), out)
    for i in range(m):
        for j in range(n):
            assert_crt_rounded(out[i, j], Fraction(Cs[i][j]), crt_err(crt), (seed, pieces, i, j))
            assert ulps(out[i, j], Fraction(Cs[i][j])) <= 0.5, (seed, pieces, i, j)


@pytest.mark.parametrize("kind,count", SETS)
@pytest.mark.parametrize("pieces", [1, 3])
def test_crt_near_the_bound(seed, impl, kind, count, pieces):
    """C' within a few units (and within 2^40) of ±P/2·(1 − 2^-31), the largest |C'| the
    finalize takes, and the doubles just below it, each modulus as 1 or 3 terms: the
    quotient stays right and C' reconstructs exactly (the doubles come back as
    themselves, the others correctly rounded up to crt_split's bound)."""
    ms = get_set(kind, count)
    crt = crt_split(ms, count * pieces)
    pyrng = random.Random(seed)
    lim = bound_of(ms)
    k = lim.bit_length() - 53
    top = (lim >> k) << k  # the largest double <= lim
    vals = [lim, lim - 1, lim - 2, lim - 3, top, top - (1 << k), top - (5 << k), lim - pyrng.randint(0, 2**40)]
    vals += [lim - pyrng.randint(0, 2**40) for _ in range(4)]
    vals += [-v for v in vals]
    m, n = 6, len(vals) // 6
    Cs = [vals[i * n : (i + 1) * n] for i in range(m)]
    acc = new_acc(m, n, np.nan)
    first = True
    for l, mod in enumerate(ms.moduli):
        left = [list(row) for row in Cs]
        for p in range(pieces):
            part = [[c if p == pieces - 1 else pyrng.randrange(mod) for c in row] for row in left]
            left = [[c - q for c, q in zip(r1, r2)] for r1, r2 in zip(left, part)]
            X = np.array([[random_reps(pyrng, c, mod) for c in row] for row in part], np.int32)
            kernels_crt.oz_crt_accumulate(X, ms.weights[l], mod, crt.weights[l], acc, first=first)
            first = False
    out = np.full((m, n), np.nan)
    kernels_crt.oz_crt_finalize(acc, crt.consts, np.zeros(m, np.int32), np.zeros(n, np.int32), out)
    for i in range(m):
        for j in range(n):
            c = Cs[i][j]
            if abs(c) in (top, top - (1 << k), top - (5 << k)):
                assert out[i, j] == c, (seed, i, j)  # a double: exactly itself
            assert_crt_rounded(out[i, j], Fraction(c), crt_err(crt), (seed, i, j))
            assert ulps(out[i, j], Fraction(c)) <= 0.5, (seed, i, j)


@pytest.mark.parametrize("kind,count", [("real", 8), ("real", 20), ("2m", 22)])
def test_crt_order_independent(seed, impl, kind, count):
    """Every fma of the sum is exact, so the order of the terms does not matter: each
    modulus's residues as two terms (a random residue and the rest), accumulated in
    order, reversed and shuffled (``first`` on each order's own first term, over
    NaN-filled accumulators), on 1 and 2 threads, give the same bits in the
    accumulators and out of the finalize: the correctly rounded C'."""
    ms = get_set(kind, count)
    pyrng = random.Random(seed)
    m, n = 10, 9
    lim = bound_of(ms)
    Cs = [[pyrng.randint(-lim, lim) >> pyrng.choice([0, 1, 20, 60]) for _ in range(n)] for _ in range(m)]
    Cs[0][0], Cs[1][0], Cs[2][0] = lim, -lim, 0
    terms = []
    for l, mod in enumerate(ms.moduli):
        part = [[pyrng.randrange(mod) for _ in range(n)] for _ in range(m)]
        rest = [[c - q for c, q in zip(r1, r2)] for r1, r2 in zip(Cs, part)]
        for vals in (part, rest):
            X = np.array(
                [[random_reps(pyrng, c, mod) for c in row] for row in vals], np.int32, order=pyrng.choice("CF")
            )
            terms.append((X, l))
    crt = crt_split(ms, len(terms))
    nt = len(terms)
    orders = [list(range(nt)), list(range(nt))[::-1], pyrng.sample(range(nt), nt)]
    rsh = np.array([pyrng.randint(-50, 50) for _ in range(m)], np.int32)
    csh = np.array([pyrng.randint(-50, 50) for _ in range(n)], np.int32)
    results = []
    for order, threads in zip(orders, (2, 1, 2)):
        acc = new_acc(m, n, np.nan)
        for k, q in enumerate(order):
            X, l = terms[q]
            kernels_crt.oz_crt_accumulate(
                X, ms.weights[l], ms.moduli[l], crt.weights[l], acc, first=k == 0, threads=threads
            )
        out = np.full((m, n), np.nan)
        kernels_crt.oz_crt_finalize(acc, crt.consts, rsh, csh, out, threads=threads)
        results.append((acc, out))
    for acc, out in results[1:]:
        np.testing.assert_array_equal(bits(acc), bits(results[0][0]))
        np.testing.assert_array_equal(bits(out), bits(results[0][1]))
    out = results[0][1]
    for i in range(m):
        for j in range(n):
            sh = int(rsh[i]) + int(csh[j])
            assert_crt_rounded(out[i, j], Fraction(Cs[i][j]) / Fraction(2) ** sh, crt_err(crt, sh), (seed, i, j))


@pytest.mark.parametrize("nterms", [1, 16, 1024])
def test_crt_accumulate_extreme_terms_exact(seed, impl, nterms):
    """N terms of the extreme residue |t| = 128 (modulus 257, whose symmetric residues
    reach ±128), each times the widest pieces: the largest weight of 20 real moduli
    (the widest P here) and the largest odd pieces a weight may have, (2^β − 1)·u_s.
    At crt_split(ms, N) the sums reach N·128·(2^β − 1) ≈ 2^53 units, yet every
    accumulator is the exact sum Σ t·piece (Fractions): no fma rounded.  With
    too few terms declared (β = 46 for 1024 terms) the same sums do round."""
    ms = real_set(20)
    E = ms.P.bit_length()
    rng = np.random.default_rng(seed)
    m, n = 11, 9  # a tail of the 8 lanes both ways
    T = rng.choice([-128, 128], size=(nterms, m, n)).astype(np.int64)
    T[:, 0, 0], T[:, 1, 0] = 128, -128  # the largest sums of either sign
    T[:, 2, 0] = np.where(np.arange(nterms) % 2, 128, -128)
    X = [(t + 257 * rng.integers(-(2**22), 2**22, size=(m, n))).astype(np.int32) for t in T]

    def run(crt, rows):
        acc = new_acc(m, n, np.nan)
        for k in range(nterms):
            kernels_crt.oz_crt_accumulate(X[k], 1, 257, rows[k % len(rows)], acc, first=k == 0)
        return acc

    crt = crt_split(ms, nterms)
    beta = crt.beta
    units = [Fraction(2) ** (E - s * beta) for s in (1, 2, 3)]
    widest = crt.weights[int(np.argmax(np.abs(crt.weights[:, 0])))]
    odd = [float((2**beta - 1) * u) for u in units]
    for rows in ([widest], [odd], [odd, [-v for v in odd]]):
        acc = run(crt, rows)
        for s in range(3):
            exact = sum(T[k].astype(object) * Fraction(rows[k % len(rows)][s]) for k in range(nterms))
            for i in range(m):
                for j in range(n):
                    assert Fraction(acc[i, j, s]) == exact[i, j], (seed, nterms, s, i, j)
        if rows[0] is odd and len(rows) == 1:
            assert abs(Fraction(acc[0, 0, 2])) > 2**52 * units[2]  # the headroom was used
    if nterms == 1024:  # the control: declared as one term (β = 46), the sum is not exact
        loose = crt_split(ms, 1)
        wide = [float((2**loose.beta - 1) * Fraction(2) ** (E - s * loose.beta)) for s in (1, 2, 3)]
        acc = run(loose, [wide])
        exact = int(T[:, 0, 0].sum()) * Fraction(wide[0])
        assert Fraction(acc[0, 0, 0]) != exact


def test_crt_2m_complex_with_x2(seed, impl):
    """2M pipeline: C± ≡ Cr ± s Ci; Cr ≡ (C+ + C−)/2, Ci ≡ (C+ − C−)/(2s) through the X2 path."""
    ms = two_m_set(16)
    crt = crt_split(ms, len(ms))  # one term per modulus in each part
    pyrng = random.Random(seed)
    m, n = 9, 10
    Cr = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.choice([0, 3, 10]) for _ in range(n)] for _ in range(m)]
    Ci = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.choice([0, 3, 10]) for _ in range(n)] for _ in range(m)]
    acc_re = np.empty((m, n, 3), order="F")
    acc_im = np.empty_like(acc_re)
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
        kernels_crt.oz_crt_accumulate(cp, wr, mod, crt.weights[l], acc_re, x2=cm, w2=wr, first=l == 0)
        kernels_crt.oz_crt_accumulate(cp, wi, mod, crt.weights[l], acc_im, x2=cm, w2=-wi, first=l == 0)
    rsh = np.array([pyrng.randint(-100, 100) for _ in range(m)], np.int32)
    csh = np.array([pyrng.randint(-100, 100) for _ in range(n)], np.int32)
    out = np.empty((m, n), np.complex128)
    kernels_crt.oz_crt_finalize(acc_re, crt.consts, rsh, csh, out, im=acc_im)
    for i in range(m):
        for j in range(n):
            sh = int(rsh[i]) + int(csh[j])
            sc = Fraction(2) ** sh
            assert_crt_rounded(out[i, j].real, Fraction(Cr[i][j]) / sc, crt_err(crt, sh), (seed, i, j))
            assert_crt_rounded(out[i, j].imag, Fraction(Ci[i][j]) / sc, crt_err(crt, sh), (seed, i, j))
            assert ulps(out[i, j].real, Fraction(Cr[i][j]) / sc) <= 0.5, (seed, i, j)
            assert ulps(out[i, j].imag, Fraction(Ci[i][j]) / sc) <= 0.5, (seed, i, j)


@pytest.mark.parametrize("uplo", [0, 1, 2])
def test_crt_herk_transposed_alias_and_uplo(seed, impl, uplo):
    """HERK: X2 = X1ᵀ (same memory); Cr ≡ (C+ + C+ᵀ)/2, Ci ≡ (C+ − C+ᵀ)/(2s); uplo leaves the rest."""
    ms = two_m_set(12)
    crt = crt_split(ms, len(ms))  # one term per modulus in each part
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
    acc_re = new_acc(n, n, sentinel)
    acc_im = new_acc(n, n, sentinel)
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
        kernels_crt.oz_crt_accumulate(cp, wr, mod, crt.weights[l], acc_re, x2=cp.T, w2=wr, first=l == 0, uplo=uplo)
        kernels_crt.oz_crt_accumulate(cp, wi, mod, crt.weights[l], acc_im, x2=cp.T, w2=-wi, first=l == 0, uplo=uplo)
    out = np.full((n, n), complex(np.nan, np.nan), np.complex128)
    z = np.zeros(n, np.int32)
    kernels_crt.oz_crt_finalize(acc_re, crt.consts, z, z, out, im=acc_im, uplo=uplo)
    for i in range(n):
        for j in range(n):
            inside = uplo == 0 or (uplo == 1 and i <= j) or (uplo == 2 and i >= j)
            if inside:
                assert_crt_rounded(out[i, j].real, Fraction(Cr[i][j]), crt_err(crt), (seed, i, j))
                assert_crt_rounded(out[i, j].imag, Fraction(Ci[i][j]), crt_err(crt), (seed, i, j))
                assert out[i, j] == complex(float(Cr[i][j]), float(Ci[i][j])), (seed, i, j)
            else:
                assert (acc_re[i, j] == sentinel).all() and (acc_im[i, j] == sentinel).all()
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
    crt = parts[0][1]
    rsh = rng.integers(0, 100, size=m).astype(np.int32)
    csh = rng.integers(-10, 30, size=n).astype(np.int32)
    # v from alpha = 1, beta = 0 into complex128 (exact representation of the doubles)
    v = np.empty((m, n), np.complex128)
    kw = dict(im=parts[1][0]) if cplx else {}
    kernels_crt.oz_crt_finalize(parts[0][0], crt.consts, rsh, csh, v, **kw)
    alpha = complex(-1.5, 0.25) if cplx else -1.5
    beta_c = complex(beta) if cplx else complex(beta).real
    c0 = (rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if cplx else 0)).astype(dtype)
    c0 *= 1e3
    big = np.zeros((m + 5, 2 * n + 1), dtype=dtype)
    out = big[2 : 2 + m, 1 : 2 * n + 1 : 2]  # strided view
    out[...] = c0 if beta != 0 else np.nan
    kernels_crt.oz_crt_finalize(parts[0][0], crt.consts, rsh, csh, out, alpha=alpha, beta=beta_c, **kw)
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
    crt = crt_split(ms, 4)  # four terms per accumulator
    m, n = 403, 391
    X1 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    X1f = np.asfortranarray(X1)
    Xsq = rng.integers(-(2**31), 2**31, size=(n, n), dtype=np.int64).astype(np.int32)
    results = []
    for generic in (False, True):
        with forced_generic(generic):
            for t in (1, 2):
                res = []
                acc = np.empty((m, n, 3), order="F")
                acc_im = np.empty((m, n, 3), order="F")
                for l in range(4):
                    x = X1f if l % 2 else X1
                    w, mod, big = ms.weights[l], ms.moduli[l], crt.weights[l]
                    kernels_crt.oz_crt_accumulate(x, w, mod, big, acc, first=l == 0, threads=t)
                    kernels_crt.oz_crt_accumulate(x[::-1, ::-1], w, mod, big, acc_im, first=l == 0, threads=t)
                res += [acc.copy(), acc_im.copy()]
                sq = np.zeros((n, n, 3), order="F")
                for uplo in (1, 2):
                    kernels_crt.oz_crt_accumulate(
                        Xsq, 77, 241, crt.weights[0], sq, x2=Xsq.T, w2=-5, first=True, uplo=uplo, threads=t
                    )
                    res.append(sq.copy())
                for dt in (np.float32, np.float64, np.complex64, np.complex128):
                    o = np.ones((m, n), dt)
                    kw = dict(im=acc_im) if np.dtype(dt).kind == "c" else {}
                    kernels_crt.oz_crt_finalize(
                        acc,
                        crt.consts,
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


PATHS = (1, 2, 0)  # portable C, AVX2, run-time dispatch (AVX-512 where the CPU has it)


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """a and b bit for bit, NaNs only where both have one (their payloads may differ)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype.kind == "c":
        a, b = a.view(a.real.dtype), b.view(b.real.dtype)
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    u = np.uint32 if a.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(a[~nan].view(u), b[~nan].view(u))


def _small_acc(ms, crt, pyrng, m, n, uplo=0):
    """Accumulators of integers of every size up to P/2 (zeros among them)."""
    C = [[pyrng.randint(-bound_of(ms), bound_of(ms)) >> pyrng.randint(0, 140) for _ in range(n)] for _ in range(m)]
    X = [np.array([[random_reps(pyrng, c, mod) for c in row] for row in C], np.int32, order="F") for mod in ms.moduli]
    return crt_run(ms, X, uplo=uplo, crt=crt)[0]


@pytest.mark.parametrize("uplo", [0, 1, 2])
def test_crt_accumulate_paths_bit_identical(rng, uplo):
    """The same accumulators on every path: rows off the vector width, both layouts of
    X1, a transposed X2 (the rank-k updates), a strided X2, first or carried."""
    ms = real_set(16)
    crt = crt_split(ms, 6)
    for m, n in ((1, 1), (3, 5), (6, 6), (13, 11), (37, 9), (70, 70)):
        X1 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
        wide = rng.integers(-(2**31), 2**31, size=(m, 2 * n), dtype=np.int64).astype(np.int32)
        start = np.asfortranarray(np.einsum("ij,s->ijs", rng.integers(-99, 99, (m, n)), crt.weights[5]))
        runs = []
        for flag in PATHS:
            with forced_generic(flag):
                for threads in (1, 2):
                    acc = start.copy(order="F")
                    terms = [(np.asfortranarray(X1), {}), (X1, {}), (X1, {"x2": wide[:, ::2], "w2": -3})]
                    if m == n:
                        terms.append((np.asfortranarray(X1), {"x2": np.asfortranarray(X1).T, "w2": 7}))
                        terms.append((X1, {"x2": X1.T, "w2": -65535}))
                    for l, (x, kw) in enumerate(terms):
                        w = ms.weights[l] if l % 2 else 65535
                        kernels_crt.oz_crt_accumulate(
                            x, w, ms.moduli[l], crt.weights[l], acc, first=l == 1, uplo=uplo, threads=threads, **kw
                        )
                    runs.append(acc)
        for acc in runs[1:]:
            same_bits(acc, runs[0])
        assert not np.array_equal(runs[0], start)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("uplo", [0, 1])
def test_crt_finalize_paths_bit_identical(seed, dtype, uplo):
    """The same output on every path: contiguous and strided out, alpha/beta (beta 0 with
    NaN in out, beta 1, complex beta), Inf/NaN in c, shifts whose 2^-shift is normal,
    subnormal or out of range (subnormal, zero and infinite results), rows off the
    vector width."""
    ms = real_set(12)
    crt = crt_split(ms, len(ms))
    pyrng = random.Random(seed)
    rng = np.random.default_rng(seed)
    cplx = np.dtype(dtype).kind == "c"
    m, n = 23, 26
    re = _small_acc(ms, crt, pyrng, m, n, uplo)
    im = _small_acc(ms, crt, pyrng, m, n, uplo) if cplx else None
    rsh = rng.integers(-40, 40, m).astype(np.int32)
    rsh[:4] = [1100, -1090, 2**31 - 1, -(2**31)]  # 2^-shift out of range, extremes clamped
    rsh[4:8], rsh[8:12] = 1000, 100  # whole vectors of small powers: subnormal float64, float32
    csh = rng.integers(-40, 40, n).astype(np.int32)
    csh[:6] = [20, 60, -(2**31), 0, 10, 20]
    c = rng.standard_normal((m, n)) * 1e3 + (1j * rng.standard_normal((m, n)) if cplx else 0)
    c[1, 2], c[4, 3], c[7, 7] = np.inf, np.nan, -np.inf
    c = c.astype(dtype)
    ab = [(0.75, 0.0), (-1.5, 1.0), (2.0**-60, 0.5), (2.0**-60, 0.0)]
    if cplx:
        ab += [(0.5 - 0.25j, 1.0), (1 + 2j, -0.5 + 0.75j), (2 - 1j, 0.0)]
    seen_sub = False
    for alpha, beta in ab:
        outs = []
        for flag in PATHS:
            with forced_generic(flag):
                for layout in ("F", "strided"):
                    base = np.full((m + 3, 2 * n + 1), np.nan, dtype)
                    out = np.asfortranarray(base[:m, :n]) if layout == "F" else base[2 : 2 + m, ::2][:, :n]
                    out[...] = c if beta != 0 else np.nan
                    kernels_crt.oz_crt_finalize(re, crt.consts, rsh, csh, out, im=im, alpha=alpha, beta=beta, uplo=uplo)
                    outs.append(out.copy())
        for o in outs[1:]:
            same_bits(o, outs[0])
        v = np.ascontiguousarray(outs[0]).view(outs[0].real.dtype)
        seen_sub |= bool(((v != 0) & (np.abs(v) < np.finfo(v.dtype).tiny)).any())
    assert seen_sub


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("fix", [False, True])
def test_crt_finalize_certificate_paths_bit_identical(seed, cplx, fix):
    """Every verdict of the certificate on every path: NaN/Inf rows and columns (error
    +inf: recomputed from the factors), all-zero ones (-inf), W = 0, the size bound and
    the W bound deciding (also with an infinite weight sum), entries rejected and
    deferred, recomputed as dot products or (fix off) counted only; the same outputs and
    the same count of uncertified entries."""
    ms = real_set(12)
    crt = crt_split(ms, len(ms))
    pyrng = random.Random(seed)
    rng = np.random.default_rng(seed)
    m, n, k = 43, 38, 9
    re = _small_acc(ms, crt, pyrng, m, n)
    im = _small_acc(ms, crt, pyrng, m, n) if cplx else None
    dt = np.complex128 if cplx else np.float64
    L = (rng.standard_normal((m, k)) + (1j * rng.standard_normal((m, k)) if cplx else 0)).astype(dt)
    R = (rng.standard_normal((n, k)) + (1j * rng.standard_normal((n, k)) if cplx else 0)).astype(dt)
    row_err = rng.uniform(0, 100, m)
    col_err = rng.uniform(0, 100, n)
    row_err[[2, 9]], col_err[[4]] = np.inf, np.inf
    row_err[[5, 6]], col_err[[7, 8]] = -np.inf, -np.inf
    L[2, 3] = np.nan
    L[9, 0] = np.inf
    R[4, 1] = np.nan
    W = rng.integers(0, 5000, (m, n)).astype(np.int32)
    W[rng.random((m, n)) < 0.2] = 0
    row_wsum, col_wsum = rng.uniform(0, 2000, m), rng.uniform(0, 2000, n)
    row_wsum[11] = -np.inf  # d = +inf: the W bound from cert_ok's own steps
    cert = dict(
        row_err=row_err, col_err=col_err, crt_err=30.0, target=-25.0, W=np.asfortranarray(W),
        row_wsum=row_wsum, col_wsum=col_wsum, row_budget=rng.integers(-20, 40, m).astype(np.int32),
        col_budget=rng.integers(-20, 40, n).astype(np.int32), fix=fix, L=L, R=R,
        conj_l=cplx, conj_r=False,
    )  # fmt: skip
    rsh = rng.integers(-5, 60, m).astype(np.int32)
    csh = rng.integers(-5, 60, n).astype(np.int32)
    c = (rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if cplx else 0)).astype(dt)
    alpha, beta = (0.5 - 1j, 0.25 + 0.5j) if cplx else (0.5, 0.25)
    outs, counts = [], []
    for flag in PATHS:
        with forced_generic(flag):
            for threads in (1, 2):
                for w in (None, 0):  # with W and without
                    cw = dict(cert, W=None) if w == 0 else dict(cert)
                    out = np.asfortranarray(c.copy())
                    kernels_crt.oz_crt_finalize(
                        re, crt.consts, rsh, csh, out, im=im, alpha=alpha, beta=beta, cert=cw, threads=threads
                    )
                    outs.append(out)
                    counts.append(cw["uncertified"])
    for q, o in enumerate(outs):  # with W at even places, without at odd ones
        same_bits(o, outs[q % 2])
    assert counts[::2] == [counts[0]] * len(PATHS) * 2 and counts[1::2] == [counts[1]] * len(PATHS) * 2
    assert 0 < counts[0] < m * n - 2 * n  # certified, rejected and dead entries all there
    assert np.isnan(outs[0][2]).all() and np.isnan(outs[0][:, 4]).all()  # NaN row and column recomputed
    assert np.isfinite(np.delete(outs[0][3], 4)).all()


def test_accumulate_reduction_exact(rng, impl):
    """t = (w1 x1 + w2 x2) mod m, symmetric, for extreme int32 and weights: read back
    through pieces (1, -1/2, 2^-30), each accumulator t times its piece."""
    m, n = 17, 5
    x1 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    x2 = rng.integers(-(2**31), 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    x1[0, 0] = -(2**31)
    x2[0, 0] = -(2**31)
    x1[1, 0] = 2**31 - 1
    x2[1, 0] = 2**31 - 1
    big = (1.0, -0.5, 2.0**-30)
    for mod in (2, 3, 256, 255, 257, 241, 97, 65521, 2**31 - 1):
        for w1, w2 in ((1, 0), (511, -511), (65535, 65535), (-65535, 3)):
            acc = new_acc(m, n, np.nan)
            kernels_crt.oz_crt_accumulate(x1, w1, mod, big, acc, x2=x2, w2=w2, first=True)
            ref = np.array(
                [[sym(w1 * int(x1[i, j]) + w2 * int(x2[i, j]), mod) for j in range(n)] for i in range(m)],
                dtype=np.float64,
            )
            for s in range(3):
                np.testing.assert_array_equal(acc[:, :, s], ref * big[s])


def test_crt_errors():
    acc = np.zeros((3, 4, 3), order="F")
    x = np.zeros((3, 4), np.int32)
    crt = crt_split(real_set(3), 1)
    big = crt.weights[0]
    with pytest.raises(ValueError, match="Fortran"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, big, np.zeros((3, 4, 3)))
    with pytest.raises(ValueError, match=re.escape("acc has shape (3, 4), expected (3, 4, 3)")):
        kernels_crt.oz_crt_accumulate(x, 1, 7, big, np.zeros((3, 4), order="F"))
    with pytest.raises(TypeError):
        kernels_crt.oz_crt_accumulate(x.astype(np.int64), 1, 7, big, acc)
    with pytest.raises(TypeError, match="float64"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, big, acc.astype(np.float32))
    with pytest.raises(ValueError, match="modulus"):
        kernels_crt.oz_crt_accumulate(x, 1, 1, big, acc)
    with pytest.raises(ValueError, match="w1"):
        kernels_crt.oz_crt_accumulate(x, 2**16, 7, big, acc)
    with pytest.raises(ValueError, match="uplo"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, big, acc, uplo=3)
    with pytest.raises(ValueError, match="big must be three finite floats"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, (1.0, 0.0), acc)
    with pytest.raises(ValueError, match="big must be three finite floats"):
        kernels_crt.oz_crt_accumulate(x, 1, 7, (1.0, np.inf, 0.0), acc)
    z3, z4 = [0] * 3, [0] * 4
    with pytest.raises(ValueError, match="complex out"):
        kernels_crt.oz_crt_finalize(acc, crt.consts, z3, z4, np.zeros((3, 4)), im=acc)
    with pytest.raises(TypeError):
        kernels_crt.oz_crt_finalize(acc, crt.consts, z3, z4, np.zeros((3, 4), np.int32))
    with pytest.raises(ValueError, match="shape"):
        kernels_crt.oz_crt_finalize(acc, crt.consts, z3, z4, np.zeros((4, 3)))
    with pytest.raises(ValueError, match=re.escape("re must be 3-D (m, n, 3)")):
        kernels_crt.oz_crt_finalize(acc[:, :, 0], crt.consts, z3, z4, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="re has shape"):
        kernels_crt.oz_crt_finalize(np.zeros((3, 4, 2), order="F"), crt.consts, z3, z4, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="im has shape"):
        kernels_crt.oz_crt_finalize(acc, crt.consts, z3, z4, np.zeros((3, 4), complex), im=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="crt must be the 8 finite constants of CrtSplit.consts"):
        kernels_crt.oz_crt_finalize(acc, crt.consts[:3], z3, z4, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="crt must be the 8 finite constants"):
        kernels_crt.oz_crt_finalize(acc, (*crt.consts[:7], np.nan), z3, z4, np.zeros((3, 4)))


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


def _same_stats(a, b):
    for u, v in zip(a, b):
        np.testing.assert_array_equal(np.isnan(u), np.isnan(v))
        ok = ~np.isnan(u)
        assert (bits(u[ok]) == bits(v[ok])).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_scale_avx2_matches_generic(rng, dtype):
    """Row statistics (one pass and carried) and int8 bounds, AVX2 against portable C bit
    for bit: row counts off the 4 lanes and across the 256-row sweeps, column counts off
    the 4x4 transposes, every layout (interleaved complex too), NaN/Inf rows, zeros,
    subnormal rows (two-step bounds), rows near overflow (hypot), mixed exponents."""
    if not _avx2_active():
        pytest.skip("no AVX2 path on this CPU")
    fin = np.finfo(np.dtype(dtype).char.lower() if np.dtype(dtype).kind == "f" else np.zeros(1, dtype).real.dtype)
    for rows, cols in ((1, 1), (3, 2), (4, 4), (5, 7), (9, 13), (257, 6), (300, 5), (6, 300)):
        x = rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-30, 30, size=(rows, cols)))
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-30, 30, size=(rows, cols)))
        x = x.astype(dtype)
        if rows >= 6:
            x[0, cols // 2] = np.nan
            x[1, cols - 1] = -np.inf
            x[2] = 0
            x[3] *= fin.tiny / 2**10  # subnormal
            x[4] = (rng.random(cols) - 0.5) * fin.max  # squares overflow: hypot
            x[5, 0] = fin.smallest_subnormal
            x[5, -1] = fin.tiny
            if np.dtype(dtype).kind == "c":
                x[2, 0] = 1j * fin.tiny  # one part zero, tiny modulus
        rowmax = np.abs(x).max(axis=1)
        live = np.isfinite(rowmax)
        ea = np.frexp(np.where(live, rowmax, 0.0))[1].astype(np.int32)
        if rows >= 6:
            ea[min(7, rows - 1)] = 2000  # f underflows to 0: bounds of 1
        for xv in _layouts(x):
            cl = xv.copy()
            cl[~live] = 0
            for threads in (1, 2):
                got = _paths(kernels_cpu.oz_row_stats, xv, threads=threads)
                _same_stats(got[0], got[1])
                h = cols // 2
                carry = kernels_cpu.oz_row_stats(xv[:, :h])
                got = _paths(kernels_cpu.oz_row_stats, xv[:, h:], carry=carry, threads=threads)
                _same_stats(got[0], got[1])
                got = _paths(kernels_cpu.oz_bound_int8, cl, ea, threads=threads)
                np.testing.assert_array_equal(got[0], got[1])
                assert (got[0][live] >= 0).all() and (got[0][cl != 0] >= 1).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_stats_bound_one_read_matches_two_passes(rng, impl, dtype):
    """oz_stats_bound (statistics and bounds from one read, rows in cache-sized blocks)
    gives the bits of oz_row_stats then oz_bound_int8 on the NaN/Inf-zeroed copy, with
    ea = frexp of each finite row maximum (0 otherwise), on every kernel path and layout,
    for row counts across several blocks and both thread counts."""
    real = np.zeros(1, dtype).real.dtype
    fin = np.finfo(real)
    for rows, cols in ((1, 1), (9, 13), (300, 5), (70, 3000), (5, 0), (0, 4)):
        x = rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-30, 30, size=(rows, 1)))
        if np.dtype(dtype).kind == "c":
            x = x + 1j * rng.standard_normal((rows, cols))
        x = x.astype(dtype)
        if rows >= 9 and cols:
            x[0, cols // 2] = np.nan
            x[1, cols - 1] = -np.inf
            x[2] = 0
            x[3] *= fin.tiny / 2**10  # subnormal: the two-step bounds
            x[4] = (rng.random(cols) - 0.5) * fin.max  # squares overflow: hypot
            x[8, 0] = np.inf * (1j if np.dtype(dtype).kind == "c" else 1)
        for xv in _layouts(x):
            for threads in (1, 2):
                rowmax, sumsq, l1, ea, bound = kernels_cpu.oz_stats_bound(xv, threads=threads)
                _same_stats((rowmax, sumsq, l1), kernels_cpu.oz_row_stats(xv, threads=threads))
                live = rowmax <= np.finfo(np.float64).max
                want_ea = np.frexp(np.where(live, rowmax, 0.0))[1].astype(np.int32)
                np.testing.assert_array_equal(ea, want_ea)
                clean = xv.copy()
                clean[~live] = 0
                np.testing.assert_array_equal(bound, kernels_cpu.oz_bound_int8(clean, want_ea, threads=threads))
                assert bound.shape == (rows, cols) and (bound.flags.c_contiguous or bound.flags.f_contiguous)
                assert not bound[~live].any()


def _row_plan_formulas(stats, wmax, L, log2_127sq, safety, log2k, k, slack):
    """The row plan's formulas written in numpy, as the reference of the C kernel."""
    rowmax, sumsq, l1 = stats
    big = np.finfo(np.float64).max
    live = rowmax <= big
    rm = np.where(live, rowmax, 0.0)
    ea = np.frexp(rm)[1].astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if wmax is not None:
            w = np.asarray(wmax, np.float64)
            g = np.where(w > 0, (np.log2(np.where(w > 0, w, 1.0)) - log2_127sq) + safety, -np.inf)
        else:
            ok = (sumsq > 0) & (sumsq <= big)
            g = np.where(ok, (np.log2(np.where(ok, sumsq, 1.0)) - 2.0 * ea) + safety, log2k + safety)
        g = np.where(rm == 0, -np.inf, g)
        uu = np.floor((L - g) * 0.5)
        u = np.where(np.isfinite(uu), uu, 0).astype(np.int64)
        ok1 = l1 <= big
        lg = np.where(rm == 0, -np.inf, np.where(ok1, np.log2(np.where(ok1, l1, 1.0)), ea + log2k))
        shift = u - ea
        err = (shift + lg) + slack
        wsum = np.where(
            ok1,
            (127.0 * np.ldexp(np.where(ok1, l1, 0.0), -ea.astype(np.int32))) * (1.0 + 2.0**-40) + float(k) + 1.0,
            (127.0 * k + k) + 1.0,
        )
    return (
        np.where(live, shift, -(2**31)).astype(np.int32),
        np.where(live, err, np.inf),
        np.where(live, wsum, 0.0),
        np.where(live, u, 0).astype(np.int32),
    )


@pytest.mark.parametrize("accurate", [False, True])
def test_row_plan_kernel_matches_formulas(rng, accurate):
    """oz_row_plan against its formulas in numpy: shifts and budgets exactly, the error
    terms and plane sums to the last bit of log2 (libm's and numpy's may differ there),
    on rows of every magnitude, zero rows, NaN/Inf rows, overflowed sums, zero W maxima."""
    from emublas.backends.ozaki2 import scaling

    for _ in range(60):
        rows, k = int(rng.integers(0, 200)), int(rng.integers(1, 5000))
        x = rng.standard_normal((rows, k)) * np.exp2(rng.integers(-1070, 1020, size=(rows, 1)))
        if rows > 6:
            x[1, 0], x[2], x[4, 1] = np.nan, 0.0, np.inf
            x[5] = np.finfo(np.float64).max / 3  # the sums overflow
        with np.errstate(over="ignore", invalid="ignore"):
            stats = kernels_cpu.oz_row_stats(x)
        wmax = rng.integers(0, 2**40, size=rows).astype(np.int64) if accurate else None
        if accurate and rows:
            wmax[0] = 0
        args = (
            wmax,
            float(rng.uniform(30, 130)),
            scaling.LOG2_127SQ,
            2.0**-20,
            math.log2(k),
            k,
            float(rng.random() * 3),
        )
        got = kernels_cpu.oz_row_plan(stats, *args)
        want = _row_plan_formulas(stats, *args)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[3], want[3])
        for g, w in zip(got[1:3], want[1:3]):
            np.testing.assert_array_equal(np.isfinite(g), np.isfinite(w))
            np.testing.assert_array_equal(g[~np.isfinite(g)], w[~np.isfinite(w)])
            np.testing.assert_allclose(g[np.isfinite(g)], w[np.isfinite(w)], rtol=2**-50, atol=0)
        assert got[0].dtype == np.int32 and got[3].dtype == np.int32


@pytest.mark.parametrize("kind", ["real", "2m", "3m", "split"])
def test_scaled_residues_one_read_matches_three_passes(rng, impl, kind):
    """oz_scaled_residues (fast mode's statistics, plan and residues from one read) gives the
    bits of oz_row_stats, oz_row_plan and the residue kernels on the NaN/Inf-zeroed copy, on
    every kernel path and layout, for row counts across several blocks, both thread counts,
    conjugated or not; a NaN/Inf row gets the dead shift and zero residues."""
    from emublas.backends.ozaki2 import cpu_stages, scaling

    cplx = kind in ("2m", "3m")
    ms = tuple(TWO_M_MODULI[:5]) if kind in ("2m", "split") else tuple(REAL30[:7])
    rs = tuple(TWO_M_ROOTS[m] for m in ms) if kind in ("2m", "split") else (0,) * len(ms)
    for rows, cols in ((1, 2), (9, 14), (300, 6), (70, 3000)):
        x = rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-60, 60, size=(rows, 1)))
        if cplx:
            x = x + 1j * rng.standard_normal((rows, cols))
        if rows >= 9:
            x[2] = 0
            x[3, 1] = np.nan
            x[5, 0] = np.inf
        for xv in _layouts(x):
            for threads, conj in ((1, False), (2, True)):
                L, slack = float(rng.uniform(60, 120)), float(rng.random())
                stats, plan, planes = kernels_cpu.oz_scaled_residues(
                    kind, xv, ms, rs, conj=conj, L=L, safety=scaling.SAFETY, slack=slack, threads=threads
                )
                want_stats = kernels_cpu.oz_row_stats(xv)
                _same_stats(stats, want_stats)
                want_plan = kernels_cpu.oz_row_plan(
                    want_stats, None, L, scaling.LOG2_127SQ, scaling.SAFETY, math.log2(cols), cols, slack
                )
                for got, want in zip(plan, want_plan):
                    np.testing.assert_array_equal(got, want)
                dead = plan[0] == scaling.DEAD
                assert dead.sum() == (2 if rows >= 9 else 0)
                clean = xv.copy()
                clean[dead] = 0
                want = cpu_stages.residues(kind, clean, plan[0], ms, rs, conj, threads=threads)
                np.testing.assert_array_equal(planes, want)
                assert not planes[:, dead].any()


def test_one_read_kernels_on_random_adversarial_cases():
    """oz_scaled_residues and oz_stats_bound against the separate passes on 600 random cases:
    every plane kind, float32 and float64, exponents across the range (per row and per
    entry), NaN/±Inf at random places, four layouts, 1 to 19 moduli, conjugation, one or two
    threads, and the portable, AVX2 and dispatched kernel paths drawn at random."""
    from emublas.backends.ozaki2 import cpu_stages, scaling

    _, lib = cpu.require()
    rng = np.random.default_rng(0x1EAD)
    for trial in range(600):
        kind = ("real", "2m", "3m", "split")[trial % 4]
        cplx = kind in ("2m", "3m")
        f32 = rng.random() < 0.3
        rows, k = int(rng.integers(0, 90)), int(rng.integers(1, 300)) * (2 if kind == "split" else 1)
        span = 120 if f32 else 1020
        x = rng.standard_normal((rows, k)) * np.exp2(rng.integers(-span, span, size=(rows, 1)))
        with np.errstate(over="ignore", invalid="ignore"):
            if rng.random() < 0.3:
                x = x * np.exp2(rng.integers(-40, 40, size=(rows, k)))
            if cplx:
                x = x + 1j * rng.standard_normal((rows, k)) * np.exp2(rng.integers(-30, 30, size=(rows, 1)))
            real, cdt = (np.float32, np.complex64) if f32 else (np.float64, np.complex128)
            x = x.astype(cdt if cplx else real)
        for _ in range(int(rng.integers(0, 3))):
            if rows:
                x[rng.integers(rows), rng.integers(k)] = (np.nan, np.inf, -np.inf)[rng.integers(3)]
        x = _layouts(x)[int(rng.integers(4))]
        count = int(rng.integers(1, 20))
        two = kind in ("2m", "split")
        ms = tuple(TWO_M_MODULI[:count]) if two else tuple(REAL30[:count])
        rs = tuple(TWO_M_ROOTS[m] for m in ms) if two else (0,) * count
        L, slack, conj = float(rng.uniform(20, 140)), float(rng.random() * 3), bool(rng.integers(2))
        threads = int(rng.integers(1, 3))
        with forced_generic(int(rng.integers(3))), np.errstate(over="ignore", invalid="ignore"):
            stats, plan, planes = kernels_cpu.oz_scaled_residues(
                kind, x, ms, rs, conj=conj, L=L, safety=scaling.SAFETY, slack=slack, threads=threads
            )
            want_stats = kernels_cpu.oz_row_stats(x)
            want_plan = kernels_cpu.oz_row_plan(
                want_stats, None, L, scaling.LOG2_127SQ, scaling.SAFETY, math.log2(k), k, slack
            )
            dead = want_plan[0] == scaling.DEAD
            clean = x.copy()
            clean[dead] = 0
            ea = np.frexp(np.where(dead, 0.0, want_stats[0]))[1].astype(np.int32)
            one_read = kernels_cpu.oz_stats_bound(x, threads=threads)
            want_planes = cpu_stages.residues(kind, clean, want_plan[0], ms, rs, conj)
            want_bound = kernels_cpu.oz_bound_int8(clean, ea)
        _same_stats(stats, want_stats)
        _same_stats(one_read[:3], want_stats)
        for got, want in zip(plan, want_plan):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(planes, want_planes)
        np.testing.assert_array_equal(one_read[3], ea)
        np.testing.assert_array_equal(one_read[4], want_bound)
