"""Moduli tables and the CRT constants derived from them (docs/design.md §2.5, §2.6).

Real products use the greedy pairwise-coprime list going down from 256.  The
2M complex algorithm needs moduli with a square root of −1 (products of primes
≡ 1 mod 4); their greedy list stops at 22 entries.  Every constant here is
computed exactly with Python integers at import time and checked against the
definitions, so the tables cannot drift from the mathematics.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache, lru_cache
from math import ceil, floor, gcd, log2, prod

import numpy as np

__all__ = [
    "REAL_MODULI",
    "TWO_M_MODULI",
    "TWO_M_ROOTS",
    "HYBRID_EXTRA",
    "ModulusSet",
    "real_set",
    "two_m_set",
    "crt_reference",
    "MARGIN_BITS",
    "CrtSplit",
    "crt_split",
]

#: How far below log2(P) the budgets keep every |C'|: ``|C'| ≤ 2^(log2 P − MARGIN_BITS)``,
#: just under P/2.  The finalize picks the multiple of P to subtract as round(s1/P) from the
#: leading exact sum, whose error is below 2^-32 for any term count here (:func:`crt_split`),
#: so 2^-30 of P to spare keeps it right; docs/design.md §2.5.
MARGIN_BITS = 1.0 + 2.0**-30


def _greedy(candidates, start=()) -> list[int]:
    chosen: list[int] = []
    for m in candidates:
        if all(gcd(m, x) == 1 for x in (*start, *chosen)):
            chosen.append(m)
    return chosen


def _has_sqrt_minus_one(m: int) -> bool:
    if m % 2 == 0:
        return False
    x, p = m, 3
    while p * p <= x:
        while x % p == 0:
            if p % 4 != 1:
                return False
            x //= p
        p += 2
    return x == 1 or x % 4 == 1


REAL_MODULI: tuple[int, ...] = tuple(_greedy(range(256, 1, -1)))
TWO_M_MODULI: tuple[int, ...] = tuple(_greedy(m for m in range(255, 2, -1) if _has_sqrt_minus_one(m)))
# One square root of −1 per 2M modulus (the table of docs/design.md §2.6).
TWO_M_ROOTS: dict[int, int] = {
    241: 64,
    233: 89,
    229: 107,
    221: 21,
    205: 32,
    197: 14,
    193: 81,
    181: 19,
    173: 80,
    157: 28,
    149: 44,
    137: 37,
    113: 15,
    109: 33,
    101: 10,
    97: 22,
    89: 34,
    73: 27,
    61: 11,
    53: 23,
    37: 6,
    29: 12,
}
assert tuple(TWO_M_ROOTS) == TWO_M_MODULI
# Moduli past the 22 2M ones for the hybrid: coprime to all of them, computed with 3M.
HYBRID_EXTRA: tuple[int, ...] = tuple(_greedy(range(256, 1, -1), start=TWO_M_MODULI))
assert all((s * s + 1) % m == 0 for m, s in TWO_M_ROOTS.items())


@dataclass(frozen=True)
class ModulusSet:
    """A list of pairwise-coprime moduli with the constants the CRT kernel needs.

    Attributes
    ----------
    moduli : tuple of int
    P : int
        Product of the moduli.
    weights : tuple of int
        ``y_l = (P/m_l)^{-1} mod m_l``: the CRT weight of residue l.
    bits : float
        ``log2(P)``.
    L : float
        log2 of the largest ``|C'|`` the budgets may allow: ``bits − MARGIN_BITS``.
    """

    moduli: tuple[int, ...]
    P: int
    weights: tuple[int, ...]
    bits: float

    @classmethod
    def from_moduli(cls, moduli) -> ModulusSet:
        """The set of the given moduli, with its CRT constants computed.

        Parameters
        ----------
        moduli : iterable of int
            Pairwise-coprime moduli.

        Returns
        -------
        ModulusSet
            Built once per tuple of moduli (cached).
        """
        return _modulus_set(tuple(int(m) for m in moduli))

    @classmethod
    def _build(cls, moduli: tuple[int, ...]) -> ModulusSet:
        if any(gcd(a, b) != 1 for i, a in enumerate(moduli) for b in moduli[i + 1 :]):
            raise ValueError("moduli must be pairwise coprime")
        P = prod(moduli)
        big = [P // m for m in moduli]
        weights = tuple(pow(b % m, -1, m) for b, m in zip(big, moduli))
        return cls(moduli, P, weights, log2(P))

    def __len__(self) -> int:
        return len(self.moduli)

    @property
    def L(self) -> float:
        """log2 of the product bound the moduli reconstruct (``bits − MARGIN_BITS``)."""
        return self.bits - MARGIN_BITS


@dataclass(frozen=True)
class CrtSplit:
    """The exact CRT sum's constants for one set of moduli and term count (docs/design.md §2.5).

    Each weight ``P/m_l`` is held as three doubles on the grids ``u_s = 2^(E − s·β)``
    (E the bit length of P), so that a term ``t`` (``|t| ≤ 128``) adds
    ``fma(t, b_s, acc_s)`` to three accumulators without rounding, in any order.

    Attributes
    ----------
    beta : int
        Bits per piece: ``46 − ceil(log2 N)``, so that N terms of 8 bits stay below 2^53 units.
    nterms : int
        The most terms an accumulator takes (N).
    weights : numpy.ndarray
        float64 ``(nmod, 3)``: the pieces of each modulus's weight.
    consts : tuple of float
        ``(P1, P2, P3, 1/P, u1, 1/u1, u2, 1/u2)``: P on the same grids, its
        rounded inverse and the carries' grids (``emublas_oz_crt`` in emublas_cpu.h).
    err : float
        log2 of the reconstruction's error in C' units, beyond rounding the result
        once: the pieces' rounding (only when ``E > 3β``) and the last additions'.
    """

    beta: int
    nterms: int
    weights: np.ndarray
    consts: tuple[float, ...]
    err: float


def _pieces(x: int, e_top: int, beta: int) -> tuple[list[Fraction], Fraction]:
    """``x`` as three multiples of ``2^(e_top − s·β)`` (s = 1, 2, 3) nearest it in turn, and what is left."""
    out = []
    rest = Fraction(x)
    for s in (1, 2, 3):
        g = Fraction(2) ** (e_top - s * beta)
        piece = floor(rest / g + Fraction(1, 2)) * g
        out.append(piece)
        rest -= piece
    return out, rest


def crt_split(mset: ModulusSet, nterms: int) -> CrtSplit:
    """The :class:`CrtSplit` of ``mset`` for at most ``nterms`` terms per accumulator (cached).

    Parameters
    ----------
    mset : ModulusSet
        The moduli.
    nterms : int
        Terms summed into one part of an entry (over every modulus and k-chunk).

    Returns
    -------
    CrtSplit

    Raises
    ------
    ValueError
        More than 2^13 terms (the pieces would get too narrow for ``Q`` to stay right).
    """
    return _crt_split(mset.moduli, max(int(nterms), 1))


@lru_cache(maxsize=256)
def _crt_split(moduli: tuple[int, ...], nterms: int) -> CrtSplit:
    beta = 46 - ceil(log2(nterms))
    if beta < 33:
        raise ValueError(f"ozaki2: {nterms} CRT terms per entry are more than 2**13")
    P = prod(moduli)
    E = P.bit_length()
    rows, worst = [], Fraction(0)
    for m in moduli:
        pieces, rest = _pieces(P // m, E, beta)
        rows.append([float(v) for v in pieces])
        assert all(Fraction(f) == v for f, v in zip(rows[-1], pieces))  # each piece is a double
        worst = max(worst, abs(rest))
    p_pieces, p_rest = _pieces(P, E, beta)
    assert all(Fraction(float(v)) == v for v in p_pieces)
    q_max = 128 * nterms + 1
    last = nterms * Fraction(2) ** (E - 2 * beta - 46) + Fraction(2) ** (E - 106)  # the two last additions
    err = 128 * nterms * worst + q_max * abs(p_rest) + last
    consts = (
        *(float(v) for v in p_pieces),
        float(Fraction(1, P)),
        2.0 ** (E - beta),
        2.0 ** (beta - E),
        2.0 ** (E - 2 * beta),
        2.0 ** (2 * beta - E),
    )
    return CrtSplit(beta, nterms, np.array(rows, np.float64).reshape(-1, 3), consts, log2(2 * err))


@lru_cache(maxsize=256)
def _modulus_set(moduli: tuple[int, ...]) -> ModulusSet:
    return ModulusSet._build(moduli)


@cache
def real_set(count: int) -> ModulusSet:
    """The first ``count`` real moduli."""
    if not 1 <= count <= len(REAL_MODULI):
        raise ValueError(f"real moduli count must be in 1..{len(REAL_MODULI)}, got {count}")
    return ModulusSet.from_moduli(REAL_MODULI[:count])


@cache
def two_m_set(count: int) -> ModulusSet:
    """The first ``count`` 2M moduli (at most 22)."""
    if not 1 <= count <= len(TWO_M_MODULI):
        raise ValueError(f"2M moduli count must be in 1..{len(TWO_M_MODULI)}, got {count}")
    return ModulusSet.from_moduli(TWO_M_MODULI[:count])


def crt_reference(residues, moduli) -> int:
    """The integer with the given residues, by the CRT in Python integers (a test reference).

    Parameters
    ----------
    residues : sequence of int
        One residue per modulus.
    moduli : sequence of int
        Pairwise-coprime moduli.

    Returns
    -------
    int
        The symmetric representative in (−P/2, P/2], P the moduli's product.
    """
    P = prod(moduli)
    x = 0
    for r, m in zip(residues, moduli):
        big = P // m
        x += (int(r) * pow(big % m, -1, m) % m) * big
    x %= P
    return x - P if x > P // 2 else x
