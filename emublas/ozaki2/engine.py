"""The Ozaki-II pipeline shared by every routine: residues, int8 products, CRT.

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

The int32 bound is kept by splitting k into chunks of at most ``K_CHUNK``;
each chunk's products are accumulated as separate congruent terms.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._kernels import cpu
from .scaling import K_CHUNK

__all__ = ["Recipe", "Term", "RECIPES", "run"]


@dataclass(frozen=True)
class Term:
    """``part += factor·(P1 [+ factor2·P2])`` with P = product[idx] (transposed if ``t``)."""

    part: str  # "re" or "im"
    p1: int
    t1: bool
    f1: tuple[int, int, int]  # (sign, d, e): sign · 2^-d · s^-e  (mod m)
    p2: int | None = None
    t2: bool = False
    f2: tuple[int, int, int] = (1, 0, 0)


@dataclass(frozen=True)
class Recipe:
    planes: str
    products: tuple[tuple[int, int], ...]
    terms: tuple[Term, ...]
    complex_out: bool = False


H = (1, 1, 0)    # 1/2
HS = (1, 1, 1)   # 1/(2s)
NHS = (-1, 1, 1)
Q = (1, 2, 0)    # 1/4
QS = (1, 2, 1)   # 1/(4s)
NQS = (-1, 2, 1)
ONE = (1, 0, 0)
NEG = (-1, 0, 0)

RECIPES = {
    # C = X·Yᵀ
    "real": Recipe("real", ((0, 0),), (Term("re", 0, False, ONE),)),
    # 2M: C± = X±·Y±ᵀ, Cr = (C+ + C−)/2, Ci = (C+ − C−)/(2s)
    "2m": Recipe("2m", ((0, 0), (1, 1)),
                 (Term("re", 0, False, H, 1, False, H), Term("im", 0, False, HS, 1, False, NHS)), True),
    # 3M for moduli without a square root of −1
    "3m": Recipe("3m", ((0, 0), (1, 1), (2, 2)),
                 (Term("re", 0, False, ONE, 1, False, NEG), Term("im", 2, False, ONE, 0, False, NEG),
                  Term("im", 1, False, NEG)), True),
    # HERK / HER2K: C+ = X+·Y−ᵀ and C− = C+ᵀ
    "herk": Recipe("2m", ((0, 1),),
                   (Term("re", 0, False, H, 0, True, H), Term("im", 0, False, HS, 0, True, NHS)), True),
    # real SYRK: G = (P+sQ)(P−sQ)ᵀ, X·Xᵀ = (G + Gᵀ)/2
    "syrk": Recipe("split", ((0, 1),), (Term("re", 0, False, H, 0, True, H),)),
    # complex SYRK: the split applied to X+ and X−
    "csyrk": Recipe("split2m", ((0, 1), (2, 3)),
                    (Term("re", 0, False, Q, 0, True, Q), Term("re", 1, False, Q, 1, True, Q),
                     Term("im", 0, False, QS, 0, True, QS), Term("im", 1, False, NQS, 1, True, NQS)), True),
    # real SYR2K: G = X·Yᵀ, C = G + Gᵀ
    "syr2k": Recipe("real", ((0, 0),), (Term("re", 0, False, ONE, 0, True, ONE),)),
    # complex SYR2K: G± = X±·Y±ᵀ, C± = G± + G±ᵀ
    "csyr2k": Recipe("2m", ((0, 0), (1, 1)),
                     (Term("re", 0, False, H, 0, True, H), Term("re", 1, False, H, 1, True, H),
                      Term("im", 0, False, HS, 0, True, HS), Term("im", 1, False, NHS, 1, True, NHS)), True),
}
PLANES_PER_MODULUS = {"real": 1, "2m": 2, "split": 2, "split2m": 4, "3m": 3}


@dataclass
class Timer:
    """Seconds spent per phase (reported by ``emublas.ozaki2.last_run()``)."""

    phases: dict = field(default_factory=lambda: {"residues": 0.0, "gemm": 0.0, "crt": 0.0})

    def add(self, phase: str, t0: float) -> float:
        t1 = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + (t1 - t0)
        return t1


def _factor(f, weight: int, m: int, s: int) -> int:
    sign, d, e = f
    w = weight * sign * pow(pow(2, d, m), -1, m) if d else weight * sign
    if e:
        w *= pow(pow(s, e, m), -1, m)
    w %= m
    return w - m if w > m // 2 else w


def _planes(kind: str, x, shift, moduli, roots, conj, threads):
    """Residue planes of one factor for a batch of moduli: array (planes·g, rows, k)."""
    rows, k = x.shape
    if kind == "real":
        return cpu.oz_residues(x, shift, 0, moduli, threads=threads)
    if kind == "2m":
        return cpu.oz_residues_cplx(x.real, x.imag, shift, 0, moduli, roots, conj=conj, threads=threads)
    if kind == "3m":
        return cpu.oz_residues_3m(x.real, x.imag, shift, 0, moduli, conj=conj, threads=threads)
    if kind == "split":
        h = k // 2
        return cpu.oz_residues_cplx(x[:, :h], x[:, h:], shift, 0, moduli, roots, threads=threads)
    if kind == "split2m":
        two = cpu.oz_residues_cplx(x.real, x.imag, shift, 0, moduli, roots, conj=conj, threads=threads)
        h = k // 2
        out = np.empty((4 * len(moduli), rows, h), np.int8)
        for l, (m, s) in enumerate(zip(moduli, roots)):
            for half in range(2):
                y = two[2 * l + half].astype(np.int32)
                p, q = y[:, :h], y[:, h:] * s
                for sign, slot in ((1, 0), (-1, 1)):
                    r = (p + sign * q) % m
                    r[r > (m - 1) // 2] -= m
                    out[4 * l + 2 * half + slot] = r
        return out
    raise ValueError(kind)


def run(recipes, moduli, roots, weights, big_hi, big_lo, x, y, x_shift, y_shift, *,
        conj_x=False, conj_y=False, acc, uplo=0, batch=None, threads=None, timer: Timer) -> None:
    """Accumulate the CRT sums of the integer product for every modulus into ``acc``.

    Parameters
    ----------
    recipes : list of Recipe, one per modulus
    moduli, roots, weights, big_hi, big_lo : per-modulus constants
    x, y : arrays (rows_x, k), (rows_y, k); the product is ``x·yᵀ`` (y is x for rank-k).
    x_shift, y_shift : int32 shifts per row.
    acc : dict with ``re_hi, re_lo`` (and ``im_hi, im_lo`` for complex) float64
        Fortran arrays (rows_x, rows_y); ``acc["first"]`` is True until written.
    """
    n_mod = len(moduli)
    same = y is x and y_shift is x_shift and conj_x == conj_y
    batch = batch or n_mod
    buf = None
    start = 0
    while start < n_mod:
        # a batch: consecutive moduli sharing one plane kind
        kind = recipes[start].planes
        stop = start + 1
        while stop < n_mod and stop - start < batch and recipes[stop].planes == kind:
            stop += 1
        ms, rs = list(moduli[start:stop]), [roots[i] or 0 for i in range(start, stop)]
        t0 = time.perf_counter()
        px = _planes(kind, x, x_shift, ms, rs, conj_x, threads)
        py = px if same else _planes(kind, y, y_shift, ms, rs, conj_y, threads)
        t0 = timer.add("residues", t0)
        per = PLANES_PER_MODULUS[kind]
        kk = px.shape[2]
        for j, l in enumerate(range(start, stop)):
            rec, m, s = recipes[l], moduli[l], roots[l] or 1
            for c0 in range(0, max(kk, 1), K_CHUNK):
                c1 = min(kk, c0 + K_CHUNK)
                prods = []
                for idx, (a, b) in enumerate(rec.products):
                    if buf is None or len(buf) <= idx:
                        buf = (buf or []) + [np.empty((x.shape[0], y.shape[0]), np.int32, order="F")]
                    cpu.i8gemm(px[per * j + a][:, c0:c1], py[per * j + b][:, c0:c1].T, out=buf[idx],
                               threads=threads)
                    prods.append(buf[idx])
                t0 = timer.add("gemm", t0)
                for term in rec.terms:
                    hi, lo = acc[term.part + "_hi"], acc[term.part + "_lo"]
                    x1 = prods[term.p1].T if term.t1 else prods[term.p1]
                    w1 = _factor(term.f1, weights[l], m, s)
                    kw = {}
                    if term.p2 is not None:
                        kw = {"x2": prods[term.p2].T if term.t2 else prods[term.p2],
                              "w2": _factor(term.f2, weights[l], m, s)}
                    cpu.oz_crt_accumulate(x1, w1, m, big_hi[l], big_lo[l], hi, lo,
                                          first=acc["first_" + term.part], uplo=uplo, threads=threads, **kw)
                    acc["first_" + term.part] = False
                t0 = timer.add("crt", t0)
        del px, py
        start = stop
