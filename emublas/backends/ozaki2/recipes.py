"""The Ozaki-II recipes: which residue planes, which int8 products, which CRT terms.

Each routine is a *recipe* run once per modulus.  Both factors are given as
"rows × k" matrices (the right factor transposed), already scaled by the
caller's shifts.  A recipe says

* how the residue planes of a factor are formed (``real``: one plane;
  ``2m``: ``X± = Xr ± s·Xi``; ``split``: ``P ± s·Q`` for the column halves of a
  real factor; ``split2m``: the split applied to both 2M planes; ``3m``: ``Xr, Xi,
  Xr+Xi``);
* which plane products to form (one int8 GEMM each, ``left_plane · right_planeᵀ``);
* how the int32 products combine into the real and imaginary parts, as CRT
  accumulation terms ``(part, product, transposed, factor)`` with the factor
  ``sign · 2^-d · s^-e`` taken modulo m (the 2M and rank-k identities of docs/design.md §3).

This is data: the driver (:mod:`.pipeline`) and the stages of each device read it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Recipe", "Term", "RECIPES", "PLANES_PER_MODULUS", "factor", "for_moduli", "SPLIT_KINDS"]


@dataclass(frozen=True)
class Term:
    """One CRT accumulation term: ``part += f1·P1 [+ f2·P2]``, P = the recipe's product of that index.

    Attributes
    ----------
    part : {"re", "im"}
        The part of the result the term adds to.
    p1 : int
        Index of the first product in :attr:`Recipe.products`.
    t1 : bool
        Whether that product is read transposed.
    f1 : tuple of int
        ``(sign, d, e)``: the factor ``sign · 2^-d · s^-e`` modulo m.
    p2 : int or None
        Index of a second product, or None.
    t2 : bool
        Whether the second product is read transposed.
    f2 : tuple of int
        Its factor, as ``f1``.
    """

    part: str  # "re" or "im"
    p1: int
    t1: bool
    f1: tuple[int, int, int]  # (sign, d, e): sign · 2^-d · s^-e  (mod m)
    p2: int | None = None
    t2: bool = False
    f2: tuple[int, int, int] = (1, 0, 0)


@dataclass(frozen=True)
class Recipe:
    """How one routine runs for one modulus: residue planes, int8 products and CRT terms.

    Attributes
    ----------
    planes : {"real", "2m", "split", "split2m", "3m"}
        How the residue planes of each factor are formed (see the module docstring).
    products : tuple of (int, int)
        ``(left plane, right plane)`` of each int8 product ``left · rightᵀ``.
    terms : tuple of Term
        How the products combine into the result's parts.
    complex_out : bool
        Whether the result has an imaginary part.
    """

    planes: str
    products: tuple[tuple[int, int], ...]
    terms: tuple[Term, ...]
    complex_out: bool = False


H = (1, 1, 0)  # 1/2
HS = (1, 1, 1)  # 1/(2s)
NHS = (-1, 1, 1)
Q = (1, 2, 0)  # 1/4
QS = (1, 2, 1)  # 1/(4s)
NQS = (-1, 2, 1)
ONE = (1, 0, 0)
NEG = (-1, 0, 0)

RECIPES = {
    # C = X·Yᵀ
    "real": Recipe("real", ((0, 0),), (Term("re", 0, False, ONE),)),
    # 2M: C± = X±·Y±ᵀ, Cr = (C+ + C−)/2, Ci = (C+ − C−)/(2s)
    "2m": Recipe(
        "2m", ((0, 0), (1, 1)), (Term("re", 0, False, H, 1, False, H), Term("im", 0, False, HS, 1, False, NHS)), True
    ),
    # 3M for moduli without a square root of −1
    "3m": Recipe(
        "3m",
        ((0, 0), (1, 1), (2, 2)),
        (Term("re", 0, False, ONE, 1, False, NEG), Term("im", 2, False, ONE, 0, False, NEG), Term("im", 1, False, NEG)),
        True,
    ),
    # HERK / HER2K: C+ = X+·Y−ᵀ and C− = C+ᵀ
    "herk": Recipe(
        "2m", ((0, 1),), (Term("re", 0, False, H, 0, True, H), Term("im", 0, False, HS, 0, True, NHS)), True
    ),
    # real SYRK: G = (P+sQ)(P−sQ)ᵀ, X·Xᵀ = (G + Gᵀ)/2
    "syrk": Recipe("split", ((0, 1),), (Term("re", 0, False, H, 0, True, H),)),
    # complex SYRK: the split applied to X+ and X−
    "csyrk": Recipe(
        "split2m",
        ((0, 1), (2, 3)),
        (
            Term("re", 0, False, Q, 0, True, Q),
            Term("re", 1, False, Q, 1, True, Q),
            Term("im", 0, False, QS, 0, True, QS),
            Term("im", 1, False, NQS, 1, True, NQS),
        ),
        True,
    ),
    # real SYR2K: G = X·Yᵀ, C = G + Gᵀ
    "syr2k": Recipe("real", ((0, 0),), (Term("re", 0, False, ONE, 0, True, ONE),)),
    # complex SYR2K: G± = X±·Y±ᵀ, C± = G± + G±ᵀ
    "csyr2k": Recipe(
        "2m",
        ((0, 0), (1, 1)),
        (
            Term("re", 0, False, H, 0, True, H),
            Term("re", 1, False, H, 1, True, H),
            Term("im", 0, False, HS, 0, True, HS),
            Term("im", 1, False, NHS, 1, True, NHS),
        ),
        True,
    ),
}
PLANES_PER_MODULUS = {"real": 1, "2m": 2, "split": 2, "split2m": 4, "3m": 3}


def factor(f, weight: int, m: int, s: int) -> int:
    """A term's factor as a symmetric residue modulo ``m``.

    Parameters
    ----------
    f : tuple of int
        ``(sign, d, e)``: the factor ``sign · 2^-d · s^-e``.
    weight : int
        An integer weight to multiply it by.
    m : int
        The modulus (odd, coprime to ``s``).
    s : int
        The modulus's square root of −1 (2M) or the split's scale.

    Returns
    -------
    int
        ``weight · sign · 2^-d · s^-e`` modulo ``m``, in (−m/2, m/2].
    """
    sign, d, e = f
    w = weight * sign * pow(pow(2, d, m), -1, m) if d else weight * sign
    if e:
        w *= pow(pow(s, e, m), -1, m)
    w %= m
    return w - m if w > m // 2 else w


#: Plane kinds whose factor holds two column halves (the planes have k/2 columns).
SPLIT_KINDS = ("split", "split2m")


def for_moduli(name: str, roots) -> tuple[Recipe, ...]:
    """The recipe per modulus.

    Parameters
    ----------
    name : str
        A key of ``RECIPES``.
    roots : sequence of int or None
        Per modulus, its square root of −1, or None where it has none.

    Returns
    -------
    tuple of Recipe
        ``RECIPES[name]`` for each modulus, with 3M in place of a complex recipe
        where the modulus has no square root of −1.
    """
    recipe = RECIPES[name]
    return tuple(recipe if r is not None or recipe.planes == "real" else RECIPES["3m"] for r in roots)
