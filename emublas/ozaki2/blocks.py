"""Ozaki-II on one block of a blocked product: the tasks of the distributed path.

The product ``C = X·Yᵀ`` of two "rows × k" factors cut into blocks
``X_il``, ``Y_jl`` (l the k-block) is computed here piece by piece so that the
pieces add up *exactly*:

* :func:`stats` continues each row's statistics over the k-blocks in order
  (bit-identical to one pass over the whole row);
* :func:`bound_product` gives block l's share of the accurate mode's bound
  product W, an exact integer matrix;
* :func:`planes` and :func:`products` give, per modulus, the int32 products of
  the residues of ``X_il`` and ``Y_jl``, split at the same global k-chunks
  (``K_CHUNK``) as the single-process engine;
* :func:`finalize` adds them over l (exactly, in int32: the pieces of one
  k-chunk together are no longer than the chunk) and runs the same CRT
  accumulation and finalize as :func:`emublas.ozaki2.engine.run`.

The CRT term of a modulus depends on its product only modulo m, so the sum of
the block products gives the same terms, in the same order, as one product on
the whole k range: the result is bit-identical.  Everything here is plain
numpy in, numpy out (it runs on Dask workers).
"""
from __future__ import annotations

import numpy as np

from .._kernels import cpu
from . import engine, scaling

__all__ = ["stats", "bound_product", "bound_maxima", "planes", "products", "finalize"]


def stats(x: np.ndarray, carry=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row statistics of ``x`` continued from those of the k-blocks before it."""
    return cpu.oz_row_stats(x, carry=carry)


def _k_pieces(k0: int, kl: int, k_chunk: int):
    """``(c, start, stop)``: the local column ranges of a block at global offset
    ``k0`` that fall into the engine's global k-chunk ``c``."""
    if kl == 0:
        return []
    pieces = []
    for c in range(k0 // k_chunk, (k0 + kl - 1) // k_chunk + 1):
        lo, hi = max(c * k_chunk, k0), min((c + 1) * k_chunk, k0 + kl)
        pieces.append((c, lo - k0, hi - k0))
    return pieces


def bound_product(x: np.ndarray, y: np.ndarray, ea_x, ea_y, k_chunk: int) -> np.ndarray:
    """This k-block's part of ``W = ceil(127·|X|/2^ea)·ceil(127·|Y|/2^eb)ᵀ``, int64."""
    a = cpu.oz_bound_int8(x, np.asarray(ea_x))
    b = cpu.oz_bound_int8(y, np.asarray(ea_y))
    w = np.zeros((x.shape[0], y.shape[0]), np.int64)
    for c0 in range(0, x.shape[1], k_chunk):  # int32 stays exact within one chunk
        w += cpu.i8gemm(a[:, c0:c0 + k_chunk], b[:, c0:c0 + k_chunk].T)
    return w


def bound_maxima(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row and column maxima of the sum of the k-blocks' W parts (exact)."""
    w = parts[0].copy()
    for p in parts[1:]:
        w += p
    return scaling._axis_max(w, 1), scaling._axis_max(w, 0)


def _runs(kinds: list[str]):
    """``(start, stop)`` of the runs of consecutive moduli with one plane kind."""
    start = 0
    for stop in range(1, len(kinds) + 1):
        if stop == len(kinds) or kinds[stop] != kinds[start]:
            yield start, stop
            start = stop


def planes(x: np.ndarray, shift, moduli, roots, recipes: list, conj: bool) -> list:
    """Residue planes of one block for every modulus: ``[(start, stop, array)]``,
    one int8 array (planes·count, rows, k) per run of one plane kind."""
    shift = np.asarray(shift, np.int32)
    kinds = [r.planes for r in recipes]
    out = []
    for start, stop in _runs(kinds):
        rs = [roots[q] or 0 for q in range(start, stop)]
        out.append((start, stop, engine._planes(kinds[start], x, shift, list(moduli[start:stop]), rs, conj, None)))
    return out


def _plane(runs, q: int, kind: str, idx: int) -> np.ndarray:
    per = engine.PLANES_PER_MODULUS[kind]
    for start, stop, arr in runs:
        if start <= q < stop:
            return arr[per * (q - start) + idx]
    raise IndexError(q)


def products(px: list, py: list, recipes: list, k0: int, k_chunk: int) -> dict:
    """int32 plane products of one (i, j, l) block triple, per global k-chunk.

    Returns ``{c: [[int32 (rows_x, rows_y) per plane product] per modulus]}`` with c the
    index of the engine's k-chunk (``K_CHUNK`` columns) each piece belongs to.
    """
    kl = px[0][2].shape[2] if px else 0
    rows_x, rows_y = px[0][2].shape[1], py[0][2].shape[1]
    out = {}
    for c, lo, hi in _k_pieces(k0, kl, k_chunk):
        per_mod = []
        for q, rec in enumerate(recipes):
            # Fortran order, as the engine's buffers: the CRT kernel walks the accumulators by columns
            per_mod.append([cpu.i8gemm(_plane(px, q, rec.planes, a)[:, lo:hi], _plane(py, q, rec.planes, b)[:, lo:hi].T,
                                       out=np.empty((rows_x, rows_y), np.int32, order="F"))
                            for a, b in rec.products])
        out[c] = per_mod
    return out


def _summed(parts: list, c: int, q: int) -> np.ndarray:
    """The products of modulus q in k-chunk c summed over the k-blocks, int32.

    Exact without widening: together the pieces of chunk c span at most
    ``K_CHUNK`` columns, so every partial sum is bounded like one product of
    the whole chunk, the bound that ``K_CHUNK`` is chosen for.
    """
    have = [p[c][q] for p in parts if c in p]
    if len(have) == 1:
        return have[0]
    total = [p.copy(order="F") for p in have[0]]
    for h in have[1:]:
        for t, p in zip(total, h):
            t += p
    return total


def finalize(parts: list[dict], c, *, moduli, roots, recipes, weights, big_hi, big_lo, P_hi, P_lo,
             x_shift, y_shift, alpha, beta, dtype) -> np.ndarray:
    """``alpha·C + beta·c`` of one output block from its k-blocks' products.

    The CRT accumulation runs modulus by modulus, k-chunk by k-chunk, term by
    term: the order of :func:`emublas.ozaki2.engine.run`.
    """
    mx, my = len(x_shift), len(y_shift)
    dtype = np.dtype(dtype)
    if c is not None and beta != 0:
        out = np.array(c, dtype=dtype, order="F", copy=True)
    else:
        out = np.zeros((mx, my), dtype=dtype, order="F")
    acc = {"re_hi": np.zeros((mx, my), order="F"), "re_lo": np.zeros((mx, my), order="F")}
    if dtype.kind == "c":
        acc["im_hi"] = np.zeros((mx, my), order="F")
        acc["im_lo"] = np.zeros((mx, my), order="F")
    first = {"re": True, "im": True}
    chunks = sorted({ch for p in parts for ch in p})
    for q, rec in enumerate(recipes):
        m, s = moduli[q], roots[q] or 1
        for ch in chunks:
            prods = _summed(parts, ch, q)
            for term in rec.terms:
                x1 = prods[term.p1].T if term.t1 else prods[term.p1]
                kw = {}
                if term.p2 is not None:
                    kw = {"x2": prods[term.p2].T if term.t2 else prods[term.p2],
                          "w2": engine._factor(term.f2, weights[q], m, s)}
                cpu.oz_crt_accumulate(x1, engine._factor(term.f1, weights[q], m, s), m, big_hi[q], big_lo[q],
                                      acc[term.part + "_hi"], acc[term.part + "_lo"], first=first[term.part], **kw)
                first[term.part] = False
    cpu.oz_crt_finalize(acc["re_hi"], acc["re_lo"], P_hi, P_lo, np.asarray(x_shift, np.int32),
                        np.asarray(y_shift, np.int32), out, im_hi=acc.get("im_hi"), im_lo=acc.get("im_lo"),
                        alpha=alpha, beta=beta)
    return out
