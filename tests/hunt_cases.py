"""Adversarial cases for every routine and backend, checked entry by entry against exact values.

Used by ``tests/test_hunt.py`` (hypothesis draws the case parameters) and
``benchmarks/bench_hunt.py`` (a seeded loop that counts).  A case is a small problem
(dimensions up to a dozen, so the exact reference stays cheap) whose matrices
come from one structured family at exponents drawn across the dtype's whole
range.  Every entry the routine writes is compared with the exact value of
``alpha·op(a)·op(b) + beta·c`` (symm/hemm/trmm: ``alpha·A·b + beta·c`` or ``alpha·b·A`` with
A the operator the stored triangle defines; integers times powers of two, no rounding) and
passes when

* the error is within the entry's target (below), or
* the call raised an emublas warning (:class:`emublas.OzakiAccuracyWarning`):
  the backend said it might be off, so nothing was silent.

Targets, per real part of an entry, with ``S`` the sum of the absolute values
of the exact terms (``|alpha|·Σ|a||b|`` per real product, plus ``|beta||c|``;
for complex entries the sum over both parts, the bound of the entry's modulus)
and ``n`` the number of terms:

* native BLAS's bound ``C·(n + 3)·u·S + C·(n + 3)·η`` (u the unit roundoff of
  the output dtype, η its smallest subnormal).  The textbook bound of a dot
  product in any summation order is ``γ_n·Σ|x||y|``, γ_n ≈ n·u; the scalings by
  alpha and beta, the final addition and the rounding to the output add about
  three roundings; a complex product adds one rounding per real product; with
  FMA and blocked summation the real error is smaller still.  ``C = 4`` covers
  these first-order terms with a margin while staying tight enough that a
  wrong entry (an error of a whole term, or of the entry itself) fails it.
  Underflow adds at most η per rounding, hence the ``η`` term.
* strassen: native's bound plus the Strassen–Winograd bound (Higham,
  *Accuracy and Stability of Numerical Algorithms*, §23.2.2, Winograd variant):
  ``C·(k0² + 6·k0)·18^L·u·|alpha|·max|op(a)|·max|op(b)|`` with ``L`` levels and
  ``k0 = ceil(k / 2^L)`` -- a normwise bound: Strassen mixes the rows of a
  block, so an entry's error follows the largest entries of the operands, not
  its own ``Σ|a||b|``.
* boolpack: native's bound plus its quantization bound
  (emublas/backends/boolpack/quantize.py): every input of row i of op(a) is rounded to
  a multiple of ``2^(e_i - bits + 1)`` (``2^e_i`` above the row's largest real
  or imaginary part), columns of op(b) the same, so a term ``s·x·y`` errs by at
  most ``|s|·(εx·|y| + |x|·εy + εx·εy)``; the sum over the terms, doubled.
  boolpack raises no warning for this by design: the bound is its contract.
* ozaki2: native's bound (its accuracy contract: native accuracy, or a warning); with
  its ``bits`` option N, native's bound plus ``2^-N·S`` (the certificate's target then).

What symm/hemm/trmm must not read (the other triangle, trmm's unit diagonal, hemm's
imaginary diagonal) holds NaN, and on the emulating backends a case may shrink
``emublas.level3.LEAF`` so that their recursion over halves of ``a`` runs.  Every case
also checks that the call left its inputs untouched.

Entries whose exact value overflows the output dtype must be ±Inf of the
right sign; where ``S`` itself overflows, native BLAS may give Inf or NaN too,
so a non-finite entry is accepted there.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

import emublas
from emublas import errors, level3

KINDS = ("gemm", "syrk", "herk", "syr2k", "her2k", "symm", "hemm", "trmm", "trsm")
#: Routines whose entry (i, j) is one product X·Y of an explicit operator and b (checked like gemm).
OPERATOR_KINDS = ("symm", "hemm", "trmm")
RANK_K_KINDS = ("syrk", "herk", "syr2k", "her2k")
PREFIXES = "sdcz"
BACKENDS = ("native", "ozaki2", "strassen", "boolpack")
FAMILIES = (
    "phi",
    "odd_row",
    "odd_col",
    "interleave",
    "cancel",
    "near_overflow",
    "huge_tiny",
    "underflow",
    "dominant_col",
    "integer",
    "zeros",
)
C_FACTOR = 4

_DTYPE = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
#: (smallest exponent of a subnormal, largest exponent e with 2^e finite, unit roundoff exponent)
_RANGE = {4: (-149, 127, -24), 8: (-1074, 1023, -53)}
_WARNINGS = tuple(v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Warning))


# ---------------------------------------------------------------------------
# exact dyadic arithmetic: values n·2^e with Python ints
# ---------------------------------------------------------------------------


def _split(x) -> tuple[np.ndarray, np.ndarray]:
    """Integer mantissas and exponents of a float64 array: x == m·2^e exactly."""
    frac, e = np.frexp(np.asarray(x, np.float64))
    return np.ldexp(frac, 53).astype(np.int64), e.astype(np.int64) - 53


def _fr(n: int, e: int) -> Fraction:
    return Fraction(n << e) if e >= 0 else Fraction(n, 1 << -e)


def _dot(mu, eu, mv, ev) -> Fraction:
    """Σ u·v exactly from mantissa/exponent lists (one shift per term, one Fraction)."""
    terms = [(a * b, x + y) for a, x, b, y in zip(mu, eu, mv, ev) if a and b]
    if not terms:
        return Fraction(0)
    emin = min(e for _, e in terms)
    return _fr(sum(n << (e - emin) for n, e in terms), emin)


def _float(q: Fraction) -> float:
    """q as a float for messages (±inf past the range)."""
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def _fl(x: float) -> Fraction:
    return Fraction(float(x))


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------


@dataclass
class Case:
    """One call: routine, prefix, backend with options, operands and scalars."""

    kind: str
    prefix: str
    backend: str
    options: dict
    a: np.ndarray
    b: np.ndarray | None
    c: np.ndarray
    alpha: Any
    beta: Any
    trans: tuple[int, ...]
    lower: int = 0
    family: str = ""
    side: int = 0
    diag: int = 0
    #: symm/hemm/trmm: the operator the routine applies (the full symmetric or Hermitian
    #: matrix, or op of the triangle with its diagonal), which ``a`` stores in one triangle
    #: with NaN in what the routine must not read
    operator: np.ndarray | None = None
    #: symm/hemm/trmm on an emulating backend: ``emublas.level3.LEAF`` for the call (None:
    #: emublas's), small so that the recursion over halves of ``a`` runs at these sizes
    leaf: int | None = None

    def describe(self) -> str:
        level3 = self.kind in OPERATOR_KINDS or self.kind == "trsm"
        extra = f" side={self.side} diag={self.diag} leaf={self.leaf}" if level3 else ""
        return (
            f"{self.prefix}{self.kind} backend={self.backend} {self.options} family={self.family}"
            f" a{self.a.shape} trans={self.trans} lower={self.lower}{extra} alpha={self.alpha!r}"
            f" beta={self.beta!r}"
        )


@dataclass
class Outcome:
    """What checking one case found."""

    entries: int = 0
    bad: list = field(default_factory=list)  # (i, j, part, error, target) out of target
    warned: bool = False
    crash: str | None = None

    @property
    def silent(self) -> int:
        """Entries out of target with no warning (a crash counts as one)."""
        if self.crash is not None:
            return 1
        return 0 if self.warned else len(self.bad)


def _exp_range(prefix: str) -> tuple[int, int, int]:
    return _RANGE[np.dtype(_DTYPE[prefix]).itemsize // (2 if prefix in "cz" else 1)]


def _base(rng, shape, cplx: bool) -> np.ndarray:
    x = rng.standard_normal(shape)
    if cplx:
        x = x + 1j * rng.standard_normal(shape)
    return x


def _matrices(rng, family: str, shape_a, shape_b, prefix: str, ea: int, eb: int, phi: float, span: int, where: int):
    """op-shaped a (m x k) and b (k x n) of one family; ea/eb: the exponents the bulk sits at."""
    cplx = prefix in "cz"
    emin, emax, _ = _exp_range(prefix)
    m, k = shape_a
    n = shape_b[1]
    a = _base(rng, shape_a, cplx)
    b = _base(rng, shape_b, cplx)
    if family == "phi":
        a = (rng.random(shape_a) - 0.5) * np.exp(phi * rng.standard_normal(shape_a)) + (
            1j * (rng.random(shape_a) - 0.5) if cplx else 0
        )
        b = (rng.random(shape_b) - 0.5) * np.exp(phi * rng.standard_normal(shape_b)) + (
            1j * (rng.random(shape_b) - 0.5) if cplx else 0
        )
    elif family == "odd_row":  # one row of op(a) at another exponent
        a[where % m, :] = _ldexp(a[where % m, :], span)
    elif family == "odd_col":  # one column of op(b) at another exponent
        b[:, where % n] = _ldexp(b[:, where % n], span)
    elif family == "interleave":  # rows alternate 2^+s, 2^-s; columns of b the reverse
        sa = np.where(np.arange(k) % 2 == 0, math.ldexp(1.0, span), math.ldexp(1.0, -span))
        a = a * sa[None, :]
        b = b / sa[:, None]
    elif family == "cancel":  # b's second half nearly cancels its first: entries δ·terms
        h = k // 2
        if h:
            a[:, h : 2 * h] = a[:, :h]
            b[h : 2 * h, :] = -b[:h, :] + math.ldexp(1.0, -min(span, 40)) * b[h : 2 * h, :]
    elif family == "dominant_col":  # rows dominant in column 0, one row in column 1 instead
        a[:, 1:] = _ldexp(a[:, 1:], -span)
        if k > 1:
            r = where % m
            a[r, 0] = _ldexp(a[r, 0], -span)
            a[r, 1] = _ldexp(a[r, 1], 2 * span)
    elif family == "integer":
        a = rng.integers(-8, 9, shape_a) + (1j * rng.integers(-8, 9, shape_a) if cplx else 0)
        b = rng.integers(-8, 9, shape_b) + (1j * rng.integers(-8, 9, shape_b) if cplx else 0)
    elif family == "zeros":  # zero rows/columns and exact zeros between large entries
        a[rng.random(shape_a) < 0.5] = 0
        b[rng.random(shape_b) < 0.5] = 0
        a[where % m, :] = 0
    # bulk exponents; near_overflow/huge_tiny/underflow pick them at the range's edges
    dt = _DTYPE[prefix]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        a, b = _ldexp(a, ea).astype(dt), _ldexp(b, eb).astype(dt)
    # never NaN/Inf in the inputs: this hunt is about finite data
    a = np.where(np.isfinite(a), a, np.asarray(np.finfo(dt).max / 4, dt))
    b = np.where(np.isfinite(b), b, np.asarray(np.finfo(dt).max / 4, dt))
    return a, b


def _ldexp(x, e: int):
    """x·2^e, rounded once (subnormals and overflow as the hardware gives them)."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return np.ldexp(x.real.astype(np.float64), e) + 1j * np.ldexp(x.imag.astype(np.float64), e)
    return np.ldexp(x.astype(np.float64), e)


def _scale_exp(x: float) -> float:
    """2^x without overflow in the intermediate (x an int)."""
    return math.ldexp(1.0, int(x))


def exponents(rng_or_draw, family: str, prefix: str, k: int) -> tuple[int, int]:
    """Bulk exponents of a and b for the family, across the dtype's range."""
    emin, emax, _ = _exp_range(prefix)
    r = rng_or_draw
    lo, hi = emin + 60, emax - 8
    if family == "near_overflow":  # products just below the overflow threshold
        total = emax - int(k).bit_length() - int(r.integers(1, 8))
        ea = int(r.integers(total - emax + 4, emax - 4))
        return ea, total - ea
    if family == "huge_tiny":  # a at one end of the range, b at the other
        ea = int(r.integers(emax // 2, emax - 4))
        return (ea, -ea + int(r.integers(-20, 20))) if r.random() < 0.5 else (-ea, ea)
    if family == "underflow":  # products near the subnormal range
        total = emin + int(r.integers(20, 120))
        ea = int(r.integers(total // 2 - 200 if emax > 200 else total // 2 - 20, total // 2))
        return ea, total - ea
    if family == "integer":
        return 0, 0
    total = int(r.integers(emin + 120, emax - 20))  # the result's exponent, anywhere
    ea = int(r.integers(max(lo, total - hi), min(hi, total - lo) + 1))
    return ea, total - ea


def make_case(
    rng, kind: str, prefix: str, backend: str, family: str | None = None, options: dict | None = None
) -> Case:
    """A random case of ``kind``/``prefix`` for ``backend`` (family drawn unless given)."""
    family = family or FAMILIES[int(rng.integers(len(FAMILIES)))]
    if kind in OPERATOR_KINDS:
        return _operator_case(rng, kind, prefix, backend, family, options)
    if kind == "trsm":
        return _trsm_case(rng, prefix, backend, family, options)
    cplx = prefix in "cz"
    n = int(rng.integers(1, 10))
    k = int(rng.integers(1, 13))
    m = n if kind != "gemm" else int(rng.integers(1, 10))
    if kind == "gemm":
        ta, tb = (int(t) for t in rng.integers(0, 3 if cplx else 2, 2))
        trans = (ta, tb)
    elif kind in ("herk", "her2k"):
        trans = (int(rng.choice([0, 2] if cplx else [0, 1])),)
    else:
        trans = (int(rng.integers(0, 2)),)
    emin, emax, _ = _exp_range(prefix)
    ea, eb = exponents(rng, family, prefix, k)
    span = int(rng.integers(1, max(2, min(emax - 10, 400 if emax > 200 else 60))))
    if rng.random() < 0.5:
        span = -span
    phi = float(rng.uniform(0, 20 if emax > 200 else 6))
    where = int(rng.integers(0, 1 << 30))
    opa, opb = _matrices(
        rng,
        family,
        (m, k),
        (k, n),
        prefix,
        ea,
        eb,
        phi,
        abs(span) if family in ("interleave", "cancel", "dominant_col") else span,
        where,
    )
    if kind in ("syrk", "herk"):
        opb = None
    elif kind in ("syr2k", "her2k"):
        opb = opb.T.copy() if opb.shape == (k, n) else opb  # b has a's shape (n x k as op)
        opb = opb[:, :k] if opb.shape[1] >= k else opb
    scal = [1.0, -1.0, 0.5, float(rng.standard_normal()), 2.0 ** int(rng.integers(-30, 30))]
    alpha = scal[int(rng.integers(len(scal)))]
    if cplx and kind != "herk" and rng.random() < 0.5:
        alpha = complex(alpha, float(rng.standard_normal()))
    beta = [0.0, 1.0, -0.5, float(rng.standard_normal())][int(rng.integers(4))]
    if cplx and kind in ("gemm", "syrk", "syr2k") and rng.random() < 0.3:
        beta = complex(beta, float(rng.standard_normal()))
    dt = _DTYPE[prefix]
    ec = int(rng.integers(emin + 60, emax - 8)) if rng.random() < 0.3 else ea + eb
    with np.errstate(over="ignore", under="ignore"):
        c = (_base(rng, (m, n), cplx) * _scale_exp(min(max(ec, emin + 60), emax - 8))).astype(dt)
    c = np.asfortranarray(np.where(np.isfinite(c), c, 0).astype(dt))
    # operands as the routine takes them
    if kind == "gemm":
        a = opa if trans[0] == 0 else (opa.T.copy() if trans[0] == 1 else opa.conj().T.copy())
        b = opb if trans[1] == 0 else (opb.T.copy() if trans[1] == 1 else opb.conj().T.copy())
    else:
        t = trans[0]
        a = opa if t == 0 else (opa.conj().T.copy() if t == 2 else opa.T.copy())
        b = None if opb is None else (opb if t == 0 else (opb.conj().T.copy() if t == 2 else opb.T.copy()))
    return Case(
        kind,
        prefix,
        backend,
        dict(options or default_options(rng, backend, prefix)),
        a,
        b,
        c,
        alpha,
        beta,
        trans,
        int(rng.integers(0, 2)),
        family,
    )


def _scalars(rng, cplx: bool, complex_beta: bool):
    scal = [1.0, -1.0, 0.5, float(rng.standard_normal()), 2.0 ** int(rng.integers(-30, 30))]
    alpha = scal[int(rng.integers(len(scal)))]
    if cplx and rng.random() < 0.5:
        alpha = complex(alpha, float(rng.standard_normal()))
    beta = [0.0, 1.0, -0.5, float(rng.standard_normal())][int(rng.integers(4))]
    if complex_beta and rng.random() < 0.3:
        beta = complex(beta, float(rng.standard_normal()))
    return alpha, beta


def _square_and_b(rng, family: str, prefix: str, m: int, n: int, side: int):
    """The level-3 routines' two factors from one family: the square one (m x m for side 0,
    n x n for side 1), ``b`` (m x n), and the bulk exponents of the product's left and right
    factors (the square one's first for side 0, b's for side 1)."""
    _, emax, _ = _exp_range(prefix)
    kk = n if side else m
    ea, eb = exponents(rng, family, prefix, kk)
    span = int(rng.integers(1, max(2, min(emax - 10, 400 if emax > 200 else 60))))
    if rng.random() < 0.5:
        span = -span
    phi = float(rng.uniform(0, 20 if emax > 200 else 6))
    where = int(rng.integers(0, 1 << 30))
    shapes = ((m, n), (n, n)) if side else ((m, m), (m, n))
    x, y = _matrices(
        rng,
        family,
        *shapes,
        prefix,
        ea,
        eb,
        phi,
        abs(span) if family in ("interleave", "cancel", "dominant_col") else span,
        where,
    )
    return (y, x, ea, eb) if side else (x, y, ea, eb)


def _operator_case(rng, kind: str, prefix: str, backend: str, family: str, options: dict | None) -> Case:
    """symm/hemm/trmm: ``C = alpha·A·b + beta·c`` (side 0) or ``alpha·b·A`` (side 1) with A
    from one triangle of a square ``a``; the family shapes the product's two factors.  What
    the routine must not read holds NaN: the other triangle, trmm's unit diagonal, hemm's
    imaginary diagonal."""
    cplx = prefix in "cz"
    dt = _DTYPE[prefix]
    m, n = int(rng.integers(1, 10)), int(rng.integers(1, 10))
    side, lower = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    kk = n if side else m
    trans_a = int(rng.integers(0, 3 if cplx else 2)) if kind == "trmm" else 0
    diag = int(rng.integers(0, 2)) if kind == "trmm" else 0
    emin, emax, _ = _exp_range(prefix)
    raw, b, ea, eb = _square_and_b(rng, family, prefix, m, n, side)
    keep = np.tril(np.ones((kk, kk), bool)) if lower else np.triu(np.ones((kk, kk), bool))
    strict = keep & ~np.eye(kk, dtype=bool)
    tri = np.where(keep, raw, 0).astype(dt)
    herm = kind == "hemm" and cplx
    if kind == "trmm":
        if diag:
            tri[np.arange(kk), np.arange(kk)] = 1
        operator = tri if trans_a == 0 else (tri.T if trans_a == 1 else tri.conj().T)
    else:
        low = np.where(strict, raw, 0).astype(dt)
        mirror = low.conj().T if herm else low.T
        d = np.diag(raw).real.astype(dt) if herm else np.diag(raw)
        operator = low + mirror + np.diag(d).astype(dt)
    nan = np.asarray(np.nan, dt)
    a = np.where(keep, raw, nan).astype(dt)
    if diag:
        a[np.arange(kk), np.arange(kk)] = nan
    if herm:
        a[np.arange(kk), np.arange(kk)] = np.diag(raw).real + complex(0.0, np.nan)  # (1j * nan is nan + nanj)
    alpha, beta = _scalars(rng, cplx, complex_beta=kind != "trmm")
    if kind == "trmm":
        beta = 0.0
    ec = int(rng.integers(emin + 60, emax - 8)) if rng.random() < 0.3 else ea + eb
    with np.errstate(over="ignore", under="ignore"):
        c = (_base(rng, (m, n), cplx) * _scale_exp(min(max(ec, emin + 60), emax - 8))).astype(dt)
    c = np.asfortranarray(np.where(np.isfinite(c), c, 0).astype(dt))
    return Case(
        kind,
        prefix,
        backend,
        dict(options or default_options(rng, backend, prefix)),
        np.asfortranarray(a),
        np.asfortranarray(b),
        c,
        alpha,
        beta,
        (trans_a,),
        lower,
        family,
        side,
        diag,
        np.asarray(operator),
        [None, 1, 2, 3][int(rng.integers(4))],
    )


def _solution_in_range(operator, b, alpha, op_lower: bool, side: int, emax: int):
    """b shifted by a power of two until the solution X and |op(A)||X| (from a float64 solve)
    stay below 2^(emax - 10): the hunt is about the solver's arithmetic, and a native BLAS
    overflows in its partial sums well before X itself does."""
    from scipy.linalg import solve_triangular

    m64 = np.asarray(operator, np.complex128 if operator.dtype.kind == "c" else np.float64)
    limit = math.ldexp(1.0, emax - 10)
    for _ in range(8):
        with np.errstate(all="ignore"):
            b64 = np.asarray(b, m64.dtype) * alpha
            if side:
                x = solve_triangular(m64.T, b64.T, lower=not op_lower, check_finite=False).T
                reach = np.abs(x) @ np.abs(m64)
            else:
                x = solve_triangular(m64, b64, lower=op_lower, check_finite=False)
                reach = np.abs(m64) @ np.abs(x)
            big = max(float(np.abs(x).max(initial=0.0)), float(reach.max(initial=0.0)))
        if math.isfinite(big) and big <= limit:
            return b
        shift = 200 if not math.isfinite(big) else int(np.frexp(big)[1]) - (emax - 10) + 1
        with np.errstate(under="ignore"):
            b = _ldexp(b, -min(shift, 200)).astype(b.dtype)
    return b


def _trsm_case(rng, prefix: str, backend: str, family: str, options: dict | None) -> Case:
    """trsm: op(A)·X = alpha·b (side 0) or X·op(A) = alpha·b (side 1).  The family shapes b
    and the off-diagonal entries of op(A); its diagonal dominates both its row and its column
    (twice their sums, a random sign or phase), so that X stays within range and the check
    is about the solver, not the conditioning; complex diagonals stay where their squared
    modulus is finite and normal (complex division forms it).  NaN where the routine must
    not read: the other triangle and a unit diagonal."""
    cplx = prefix in "cz"
    dt = _DTYPE[prefix]
    m, n = int(rng.integers(1, 10)), int(rng.integers(1, 10))
    side, lower = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    trans_a, diag = int(rng.integers(0, 3 if cplx else 2)), int(rng.integers(0, 2))
    kk = n if side else m
    emin, emax, _ = _exp_range(prefix)
    raw, b, ea, eb = _square_and_b(rng, family, prefix, m, n, side)
    op_lower = bool(lower) != (trans_a != 0)
    keep = np.tril(np.ones((kk, kk), bool)) if op_lower else np.triu(np.ones((kk, kk), bool))
    strict = keep & ~np.eye(kk, dtype=bool)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        off = np.where(strict, raw, 0).astype(dt)
        if diag:  # unit diagonal: the off-diagonal entries scaled below 1/(2k)
            big = float(np.abs(off).max()) if off.size else 0.0
            if big > 0:
                off = _ldexp(off, -int(np.frexp(big)[1]) - int(kk).bit_length() - 1).astype(dt)
            d = np.ones(kk, dt)
        else:
            mags = np.abs(off).astype(np.float64)
            # a row's and a column's sums past the range would leave dom at the floor below:
            # scale the off-diagonal part down until twice them stays finite
            sums = (mags * 2.0**-64).sum(axis=1) + (mags * 2.0**-64).sum(axis=0)
            over = int(np.frexp(float(sums.max(initial=0.0)))[1]) + 64 - (emax - 4)
            if over > 0:
                off = _ldexp(off, -over).astype(dt)
                mags = np.abs(off).astype(np.float64)
            dom = 2.0 * (mags.sum(axis=1) + mags.sum(axis=0))
            floor = math.ldexp(1.0, max(min(ea, emax - 8), emin + 60))
            dom = np.where((dom > 0) & np.isfinite(dom), dom, floor) * (1.0 + rng.random(kk))
            dom = np.minimum(dom, float(np.finfo(dt).max) / 4)  # finite in the dtype
            sign = rng.choice([1.0, -1.0], kk) if not cplx else np.exp(1j * rng.uniform(0, 2 * np.pi, kk))
            d = (dom * sign).astype(dt)
            # never below 2^(8 - emax): a BLAS multiplies by the diagonal's reciprocal
            tiny = math.ldexp(1.0, 8 - emax)
            d = np.where(np.abs(d) < tiny, np.asarray(tiny, dt) * np.where(np.abs(d) > 0, d / np.abs(d), 1), d)
            d = d.astype(dt)
        if cplx and not diag:
            # complex division forms |d|^2: keep it within range (the BLAS's own limit),
            # shifting the whole operator by a power of two, then lifting the smallest
            hi, lo = emax // 2 - 8, emin // 2 + 8
            top = int(np.frexp(float(np.abs(d).max()))[1])
            if top > hi:
                off, d = _ldexp(off, hi - top).astype(dt), _ldexp(d, hi - top).astype(dt)
            small = np.abs(d) < math.ldexp(1.0, lo)
            d = np.where(small, math.ldexp(1.0, lo) * np.exp(1j * np.angle(d)), d).astype(dt)
        # whatever the steps above did to a rounded or non-finite entry: never singular
        safe = math.ldexp(1.0, (emin // 2 + 8) if cplx else (8 - emax))
        d = np.where(np.isfinite(d) & (np.abs(d) >= safe), d, np.asarray(safe, dt)).astype(dt)
        operator = (off + np.diag(d)).astype(dt)
    operator = np.where(np.isfinite(operator), operator, 0).astype(dt)
    alpha, _ = _scalars(rng, cplx, complex_beta=False)
    b = _solution_in_range(operator, b, alpha, op_lower, side, emax)
    stored = operator if trans_a == 0 else (operator.T if trans_a == 1 else operator.conj().T)
    own = np.tril(np.ones((kk, kk), bool)) if lower else np.triu(np.ones((kk, kk), bool))
    nan = np.asarray(np.nan, dt)
    a = np.where(own, stored, nan).astype(dt)
    if diag:
        a[np.arange(kk), np.arange(kk)] = nan
    return Case(
        "trsm",
        prefix,
        backend,
        dict(options or default_options(rng, backend, prefix)),
        np.asfortranarray(a),
        np.asfortranarray(b),
        np.zeros((m, n), dt, order="F"),
        alpha,
        0.0,
        (trans_a,),
        lower,
        family,
        side,
        diag,
        np.asarray(operator),
        [None, 1, 2, 3][int(rng.integers(4))],
    )


def default_options(rng, backend: str, prefix: str) -> dict:
    """Backend options drawn per case."""
    if backend == "ozaki2":
        return {"mode": ["accurate", "fast", "auto"][int(rng.integers(3))]}
    if backend == "strassen":
        return {"levels": int(rng.integers(1, 3))}
    if backend == "boolpack":
        return {"bits": int(rng.choice([8, 16, 24]))}
    return {}


# ---------------------------------------------------------------------------
# running and checking
# ---------------------------------------------------------------------------


def run(case: Case, device: str = "cpu"):
    """Call the routine (on cupy copies of the operands with ``device="gpu"``); returns
    (result on the host, warned) or raises what the call raised."""
    kind, p = case.kind, case.prefix
    name = p + kind if (kind not in ("herk", "her2k", "hemm") or p in "cz") else kind
    fn = getattr(emublas, name)
    kw = dict(backend=case.backend, **case.options)
    a, b, c = case.a, case.b, case.c
    if device == "gpu":
        import cupy

        a, b, c = (None if x is None else cupy.asarray(x) for x in (a, b, c))
    saved = level3.LEAF, level3.TRSM_LEAF
    if case.leaf is not None:
        level3.LEAF = level3.TRSM_LEAF = {"cpu": case.leaf, "gpu": case.leaf}
    try:
        return _call(case, fn, kw, a, b, c, device)
    finally:
        level3.LEAF, level3.TRSM_LEAF = saved


def _call(case: Case, fn, kw: dict, a, b, c, device: str):
    kind = case.kind
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "gemm":
            out = fn(case.alpha, a, b, case.beta, c, case.trans[0], case.trans[1], **kw)
        elif kind in ("symm", "hemm"):
            out = fn(case.alpha, a, b, case.beta, c, side=case.side, lower=case.lower, **kw)
        elif kind in ("trmm", "trsm"):
            out = fn(case.alpha, a, b, side=case.side, lower=case.lower, trans_a=case.trans[0], diag=case.diag, **kw)
        elif kind in ("syrk", "herk"):
            out = fn(case.alpha, a, case.beta, c, trans=case.trans[0], lower=case.lower, **kw)
        else:
            out = fn(case.alpha, a, b, case.beta, c, trans=case.trans[0], lower=case.lower, **kw)
        if device == "gpu":
            import cupy

            emublas.synchronize()  # the device's accuracy verdicts arrive here at the latest
            out = cupy.asnumpy(out)
    warned = any(issubclass(w.category, _WARNINGS) for w in caught)
    return np.asarray(out), warned


def _op_parts(case: Case):
    """op(a), op(b) (untransposed problem: rows of x against columns of y), as complex128/float64."""
    k2 = case.kind
    t = case.trans

    def op(x, tr):
        return x if tr == 0 else (x.T if tr == 1 else x.conj().T)

    if k2 == "gemm":
        return op(case.a, t[0]), op(case.b, t[1])
    if k2 in OPERATOR_KINDS:
        return (case.b, case.operator) if case.side else (case.operator, case.b)
    return op(case.a, t[0]), None if case.b is None else op(case.b, t[0])


def _groups(case: Case, x, y, i: int, j: int):
    """[(scalar, u, v)]: entry (i, j) is Σ scalar·(u·v) + beta·c_ij (u, v complex or real vectors)."""
    herm = case.kind in ("herk", "her2k") and case.prefix in "cz"
    conj = np.conj if herm else (lambda z: z)
    al = case.alpha
    if case.kind == "gemm" or case.kind in OPERATOR_KINDS:
        return [(al, x[i, :], y[:, j])]
    if case.kind in ("syrk", "herk"):
        return [(al, x[i, :], conj(x[j, :]))]
    second = al.conjugate() if (herm and isinstance(al, complex)) else al
    return [(al, x[i, :], conj(y[j, :])), (second, y[i, :], conj(x[j, :]))]


def _maxabs(x) -> float:
    x = np.asarray(x)
    if x.size == 0:
        return 0.0
    return float(max(np.abs(x.real).max(), np.abs(x.imag).max() if x.dtype.kind == "c" else 0.0))


def _quant_eps(x, bits: int) -> np.ndarray:
    """Per row of x: the quantization step of boolpack (2^(e - bits + 1), 0 for a zero row)."""
    rmax = np.abs(np.real(x)).max(axis=1) if x.shape[1] else np.zeros(x.shape[0])
    if x.dtype.kind == "c":
        rmax = np.maximum(rmax, np.abs(np.imag(x)).max(axis=1))
    _, e = np.frexp(rmax.astype(np.float64))
    return np.where(rmax > 0, np.ldexp(1.0, (e - bits + 1).astype(np.int64)), 0.0)


class _Prepared:
    """Mantissas/exponents of the real and imaginary parts of one vector's entries."""

    __slots__ = ("re", "im", "are", "aim")

    def __init__(self, v):
        v = np.asarray(v)
        r = np.real(v).astype(np.float64)
        i = np.imag(v).astype(np.float64) if v.dtype.kind == "c" else np.zeros_like(r)
        mr, er = _split(r)
        mi, ei = _split(i)
        self.re = (mr.tolist(), er.tolist())
        self.im = (mi.tolist(), ei.tolist())
        self.are = ([abs(t) for t in self.re[0]], self.re[1])
        self.aim = ([abs(t) for t in self.im[0]], self.im[1])


def _cdot(u: _Prepared, v: _Prepared) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """Exact (re, im) of Σ u·v and the abs sums (Σ|ur||vr| + |ui||vi|, Σ|ur||vi| + |ui||vr|)."""
    rr = _dot(*u.re, *v.re)
    ii = _dot(*u.im, *v.im)
    ri = _dot(*u.re, *v.im)
    ir = _dot(*u.im, *v.re)
    arr = _dot(*u.are, *v.are) + _dot(*u.aim, *v.aim)
    ari = _dot(*u.are, *v.aim) + _dot(*u.aim, *v.are)
    return rr - ii, ri + ir, arr, ari


def check(case: Case, out: np.ndarray, warned: bool, max_bad: int = 5) -> Outcome:
    """Compare every written entry of ``out`` with the exact value (trsm: its solution's exact
    residual, :func:`check_solve`); see the module docstring."""
    if case.kind == "trsm":
        return check_solve(case, out, warned, max_bad)
    return _check_product(case, out, warned, max_bad)


def _check_product(case: Case, out: np.ndarray, warned: bool, max_bad: int = 5, extra=None) -> Outcome:
    """:func:`check` of a product; ``extra[i][j]``, if given, is added to entry (i, j)'s
    target (:func:`check_solve`'s underflow allowance)."""
    res = Outcome(warned=warned)
    x, y = _op_parts(case)
    n_rows, n_cols = out.shape
    cplx = case.prefix in "cz"
    emin, emax, ue = _exp_range(case.prefix)
    u, eta = Fraction(1, 1 << -ue), Fraction(1, 1 << -emin)
    fmax = Fraction(float(np.finfo(_DTYPE[case.prefix]).max))
    big = Fraction(2) ** (emax + 1)  # sums at least this large may overflow natively
    prep: dict = {}

    def P(tag, vec_id, vec):
        key = (tag, vec_id)
        if key not in prep:
            prep[key] = _Prepared(vec)
        return prep[key]

    # backend-specific extra allowance per entry (see the module docstring)
    alpha_abs = abs(Fraction(complex(case.alpha).real)) + abs(Fraction(complex(case.alpha).imag))
    strassen_extra = Fraction(0)
    if case.backend == "strassen":
        L = int(case.options.get("levels", 1))
        k = x.shape[1]
        k0 = -(-k // 2**L)
        growth = (k0 * k0 + 6 * k0) * 18**L
        one = case.kind in ("gemm", "syrk", "herk", *OPERATOR_KINDS)
        pairs = [(x, y if y is not None else x)] if one else [(x, y), (y, x)]
        sm = sum(_fl(_maxabs(p)) * _fl(_maxabs(q)) for p, q in pairs) * (2 if cplx else 1)
        strassen_extra = C_FACTOR * growth * u * alpha_abs * sm
    # ozaki2's bits option: each entry certified to 2^-N·Σ|x||y| (alpha, beta and the final
    # rounding stay within native's share)
    oz_bits = case.options.get("bits") if case.backend == "ozaki2" else None
    oz_share = Fraction(1, 1 << int(oz_bits)) if oz_bits else Fraction(0)
    bits = int(case.options.get("bits", 16)) if case.backend == "boolpack" else None
    if bits is not None:
        yT = y if y is not None else x
        eps_x = _quant_eps(x, bits)
        by_cols = case.kind == "gemm" or case.kind in OPERATOR_KINDS
        eps_rows_y = _quant_eps(yT, bits) if not by_cols else None
        eps_cols_y = _quant_eps(yT.T, bits) if by_cols else None

    # |alpha|·max|b|: what a BLAS that scales b by alpha before the product may overflow on
    alpha_scaled = alpha_abs * _fl(_maxabs(case.b)) if case.kind in OPERATOR_KINDS else Fraction(0)
    be = complex(case.beta)
    for j in range(n_cols):
        if case.kind in RANK_K_KINDS:
            rows = range(j, n_rows) if case.lower else range(0, j + 1)
        else:
            rows = range(n_rows)
        for i in rows:
            re = im = Fraction(0)
            sre = sim = Fraction(0)
            raw = Fraction(0)  # Σ|u||v| before the scalars: native's sums before alpha
            nterms = 0
            q_extra = Fraction(0)
            for g, (s, uvec, vvec) in enumerate(_groups(case, x, y, i, j)):
                sc = complex(s)
                sr, si = Fraction(sc.real), Fraction(sc.imag)
                pu = P(("u", g), i, uvec)
                pv = P(("v", g), j, vvec)
                dr, di, ar, ai = _cdot(pu, pv)
                re += sr * dr - si * di
                im += sr * di + si * dr
                sre += abs(sr) * ar + abs(si) * ai
                sim += abs(sr) * ai + abs(si) * ar
                raw = max(raw, ar, ai)
                nterms += 2 * len(uvec) if cplx else len(uvec)
                if bits is not None:
                    # rows of x and of y (or columns of op(b)) own each vector's quantization step
                    if by_cols:
                        eu, ev = eps_x[i], eps_cols_y[j]
                    elif case.kind in ("syrk", "herk"):
                        eu, ev = eps_x[i], eps_x[j]
                    else:
                        eu, ev = (eps_x[i], eps_rows_y[j]) if g == 0 else (eps_rows_y[i], eps_x[j])

                    def mags(w):  # |re| + |im|, exactly (the float sum may overflow)
                        return [_fl(abs(np.real(t))) + _fl(abs(np.imag(t))) for t in w]

                    fu, fv = _fl(eu), _fl(ev)
                    part = sum(fu * t for t in mags(vvec)) + sum(t * fv for t in mags(uvec)) + len(uvec) * fu * fv
                    q_extra += 2 * (abs(sr) + abs(si)) * part * (2 if cplx else 1)
            cv = complex(case.c[i, j])
            cr, ci = Fraction(cv.real), Fraction(cv.imag)
            br, bi = Fraction(be.real), Fraction(be.imag)
            if be != 0:
                re += br * cr - bi * ci
                im += br * ci + bi * cr
                sre += abs(br) * abs(cr) + abs(bi) * abs(ci)
                sim += abs(br) * abs(ci) + abs(bi) * abs(cr)
                nterms += 2
            got = complex(out[i, j])
            # complex entries: the bound of the entry's modulus, Σ over all four real products
            # (the complex inner-product bound in |x|ᵀ|y|), for both parts.  A part far smaller
            # than the entry (the imaginary part of a nearly real entry) is not held to its own
            # componentwise sum: emublas's ozaki2 scales both parts of a row by one power of two
            # and documents this (README, "What accuracy each backend guarantees").
            s_re, s_im = (sre + sim, sre + sim) if cplx else (sre, sim)
            parts = [(0, re, s_re, got.real)]
            if cplx:
                # Hermitian updates have real diagonals (BLAS ignores Im c_ii)
                diag_herm = case.kind in ("herk", "her2k") and i == j
                parts.append((1, Fraction(0) if diag_herm else im, s_im, got.imag))
            for part, exact, s_abs, g in parts:
                res.entries += 1
                # underflow in the sums before alpha scales with alpha
                target = C_FACTOR * (nterms + 3) * (u * s_abs + eta * (1 + alpha_abs)) + strassen_extra + q_extra
                target += oz_share * s_abs
                if extra is not None:
                    target += extra[i][j]
                if not math.isfinite(g):
                    if abs(exact) + target > fmax and g == (math.inf if exact > 0 else -math.inf):
                        continue  # the exact value (within the target) overflows: ±Inf is right
                    if raw >= big or (sre + sim >= big and (cplx or s_abs != abs(exact))):
                        # native's sums before alpha, its partial sums where terms cancel, or
                        # a complex product's other half may overflow here: Inf of either sign
                        # or NaN
                        continue
                    if case.kind in OPERATOR_KINDS and alpha_scaled >= big:
                        continue  # the reference BLAS scales b by alpha first (trmm, symm)
                    err = math.inf
                    res.bad.append((i, j, part, err, _float(target)))
                    continue
                err = abs(Fraction(g) - exact)
                if err > target:
                    if abs(exact) > fmax and abs(Fraction(g)) >= fmax * (1 - 4 * u):
                        continue  # past the largest finite value: it is the nearest float
                    if len(res.bad) < max_bad:
                        res.bad.append((i, j, part, _float(err), _float(target)))
                    else:
                        res.bad.append(None)
    # the triangle a rank-k routine does not reference keeps c's values
    if case.kind in RANK_K_KINDS:
        other = np.triu(np.ones(out.shape, bool), 1) if case.lower else np.tril(np.ones(out.shape, bool), -1)
        if not np.array_equal(out[other], case.c[other]):
            res.bad.append(("untouched triangle changed",))
    return res


def _exact_solve(case: Case) -> list[list[tuple[Fraction, Fraction]]]:
    """The exact solution of a trsm case, entry by entry, as (real, imaginary) Fractions."""

    def fc(v) -> tuple[Fraction, Fraction]:
        return _fl(np.real(v)), _fl(np.imag(v))

    def mul(x, y):
        return x[0] * y[0] - x[1] * y[1], x[0] * y[1] + x[1] * y[0]

    def div(x, y):
        d = y[0] * y[0] + y[1] * y[1]
        return (x[0] * y[0] + x[1] * y[1]) / d, (x[1] * y[0] - x[0] * y[1]) / d

    M = [[fc(v) for v in row] for row in np.asarray(case.operator)]
    alpha = fc(case.alpha)
    B = [[mul(alpha, fc(v)) for v in row] for row in np.asarray(case.b)]
    k = len(M)
    if case.side:  # X·M = B: the columns of Xᵀ solve Mᵀ·Xᵀ = Bᵀ
        M = [list(col) for col in zip(*M)]
        B = [list(col) for col in zip(*B)]
    zero = (Fraction(0), Fraction(0))
    lower = all(M[i][j] == zero for i in range(k) for j in range(i + 1, k))
    order = range(k) if lower else range(k - 1, -1, -1)
    X = [[zero] * len(B[0]) for _ in range(k)]
    for c in range(len(B[0])):
        for i in order:
            s = B[i][c]
            for j in range(k):
                if j != i and M[i][j] != zero:
                    t = mul(M[i][j], X[j][c])
                    s = (s[0] - t[0], s[1] - t[1])
            X[i][c] = div(s, M[i][i])
    return [list(col) for col in zip(*X)] if case.side else X


def check_solve(case: Case, out: np.ndarray, warned: bool, max_bad: int = 5) -> Outcome:
    """trsm: the residual ``alpha·b − op(A)·X`` (``alpha·b − X·op(A)``) of the computed X, exactly,
    against the bound of a backward-stable solve, ``C·(k + 3)·u·(|op(A)||X| + |alpha·b|)`` per
    entry (the product check's target with X in the product), plus ``C·(k + 3)·η`` times the
    sum of op(A)'s row (or column) for X's entries lost to underflow.  Where X has Inf or NaN, the
    exact solution must overflow there (its real or imaginary part beyond the dtype's range)."""
    if not np.all(np.isfinite(out)):
        exact = _exact_solve(case)
        fmax = Fraction(float(np.finfo(_DTYPE[case.prefix]).max))
        res = Outcome(warned=warned)
        for i, j in zip(*np.nonzero(~np.isfinite(out))):
            res.entries += 1
            if max(abs(exact[i][j][0]), abs(exact[i][j][1])) <= fmax:
                res.bad.append((int(i), int(j), 0, math.inf, 0.0))
        return res
    op_a = np.asarray(case.operator)
    x, y = (out, op_a) if case.side else (op_a, out)
    residual = Case(
        "gemm", case.prefix, case.backend, case.options, x, y, case.b, -1.0, case.alpha, (0, 0), family=case.family
    )
    # X's entries may underflow (by up to the smallest subnormal each): the residual then
    # misses up to that times the sum of op(A)'s row (side 0) or column (side 1)
    emin, _, _ = _exp_range(case.prefix)
    eta = Fraction(1, 1 << -emin)
    k = op_a.shape[0]
    sums = [sum(_fl(abs(np.real(t))) + _fl(abs(np.imag(t))) for t in line) for line in (op_a.T if case.side else op_a)]
    m, n = out.shape
    extra = [[C_FACTOR * (k + 3) * eta * sums[j if case.side else i] for j in range(n)] for i in range(m)]
    return _check_product(residual, np.zeros_like(out), warned, max_bad, extra)


def run_and_check(case: Case, device: str = "cpu") -> Outcome:
    """Run a case and check it; an exception on finite input is a crash (counted as silent)."""
    before = [None if x is None else x.copy() for x in (case.a, case.b, case.c)]
    try:
        out, warned = run(case, device)
    except Exception as exc:  # noqa: BLE001 - any exception on finite input is a finding
        return Outcome(crash=f"{type(exc).__name__}: {exc}")
    res = check(case, out, warned)
    for name, x, x0 in zip("abc", (case.a, case.b, case.c), before):
        if x is not None and not np.array_equal(x, x0, equal_nan=True):
            res.bad.append((f"input {name} modified",))
    return res
