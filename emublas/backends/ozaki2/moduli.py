"""Moduli tables and the CRT constants derived from them (docs/design.md §2.6).

Real products use the greedy pairwise-coprime list going down from 256.  The
2M complex algorithm needs moduli with a square root of −1 (products of primes
≡ 1 mod 4); their greedy list stops at 22 entries.  Every constant here is
computed exactly with Python integers at import time and checked against the
definitions, so the tables cannot drift from the mathematics.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from math import gcd, log2, prod

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
]

#: How far below log2(P) the budgets keep every |C'|: ``|C'| ≤ 2^(log2 P − MARGIN_BITS)``,
#: just under P/2.  The finalize picks the multiple of P to subtract as round(hi/P), whose
#: error is about 2^-45 for any term count here, so 2^-30 of P to spare keeps it right and
#: keeps ``hi − Q·P_hi`` exact (Sterbenz); docs/design.md §2.5.
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


def _split(x: int) -> tuple[float, float]:
    """``x`` as an unevaluated sum hi + lo of doubles (hi = round(x), lo = round(x − hi))."""
    hi = float(x)
    lo = float(x - int(hi))
    return hi, lo


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
    big_hi, big_lo : ndarray of float64
        ``P/m_l`` split as hi + lo doubles.
    P_hi, P_lo : float
        ``P`` split likewise.
    bits : float
        ``log2(P)``.
    L : float
        log2 of the largest ``|C'|`` the budgets may allow: ``bits − MARGIN_BITS``.
    """

    moduli: tuple[int, ...]
    P: int
    weights: tuple[int, ...]
    big_hi: np.ndarray
    big_lo: np.ndarray
    P_hi: float
    P_lo: float
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
        parts = [_split(b) for b in big]
        P_hi, P_lo = _split(P)
        return cls(
            moduli, P, weights, np.array([p[0] for p in parts]), np.array([p[1] for p in parts]), P_hi, P_lo, log2(P)
        )

    def __len__(self) -> int:
        return len(self.moduli)

    @property
    def L(self) -> float:
        """log2 of the product bound the moduli reconstruct (``bits − MARGIN_BITS``)."""
        return self.bits - MARGIN_BITS


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
