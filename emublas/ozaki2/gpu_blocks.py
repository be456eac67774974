"""Ozaki-II on one block of a blocked product, on the GPU: the distributed path's tasks for cupy chunks.

The same tasks as :mod:`.blocks` with the same signatures, so that
:mod:`.distributed` builds one task graph for both; what they compute follows
:mod:`.gpu_engine` instead of the CPU engine:

* :func:`stats`, :func:`bound_int8`, :func:`bound_product`: the scaling pass's
  per-row statistics and the accurate mode's bound product W (exact integers,
  summed over k-blocks in int64), with the GPU kernels and cuBLAS int8;
* :func:`planes`: residue planes in the engine's padded, k-contiguous layout,
  one set per engine k-chunk (``K_CHUNK`` columns) that the block's columns
  fall into, so that every int8 product starts aligned;
* :func:`products`: the int32 plane products on cuBLAS (``gemmEx``), added
  exactly to those of the k-blocks before;
* :func:`crt`: a group of moduli's products reduced to int8 CRT terms
  (``oz_terms``), appended in the engine's term order (modulus, k-chunk, term);
* :func:`finalize`: one ``oz_crt_final`` pass over all terms: ``alpha·C + beta·c``.

The term planes are those :func:`.gpu_engine.run` makes for the whole product,
restricted to the block, and the final pass is the same kernel: in accurate
mode the result is the single-process result bit for bit.  Each task runs on
the device of its inputs, on that device's current stream.
"""
from __future__ import annotations

import numpy as np

from .._kernels import ozaki_gpu as kg
from . import blocks, gpu_engine
from .scaling import K_CHUNK

__all__ = ["stats", "bound_int8", "bound_product", "planes", "products", "crt", "finalize"]


def stats(x, carry=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row max |x| (NaN for rows with NaN/Inf), Σ|x|², Σ|x| of a block, added to ``carry``
    (host float64 arrays).  The sums are the block's sums added to the carry: their last
    bits can differ from one pass over whole rows (only ``fast`` and ``auto`` read them)."""
    with x.device:
        rowmax, sumsq, l1 = kg.row_stats_host(x)
    if carry is None:
        return rowmax, sumsq, l1
    pm, ps, pl = carry
    return np.maximum(pm, rowmax), ps + sumsq, pl + l1  # maximum propagates the NaN marks


def bound_int8(x, rowmax):
    """``(planes, rows)``: ``ceil(127·|x|/2^ea)`` of one block as padded int8 planes (ea from
    the rows' max|x| over all k-blocks; rows with NaN/Inf zero), and its row count."""
    import cupy

    with x.device:
        return kg.bound_planes(x, cupy.asarray(np.asarray(rowmax, np.float64))), x.shape[0]


def bound_product(a, b, prev, k_chunk: int, last: bool = False):
    """W of the k-blocks up to this one (``prev + a·bᵀ``, int64 on the device, exact),
    stored transposed: ``(rows_b_pad, rows_a_pad)`` C order, with the row counts."""
    import cupy

    (pa, rows_a), (pb, rows_b) = a, b
    with pa.device:
        rp, kp = pa.shape
        w = cupy.empty((pb.shape[0], rp), np.int32)  # column-major rp × bp: W transposed, row-major
        acc = cupy.zeros((pb.shape[0], rp), np.int64) if prev is None else prev[0].copy()
        step = max(kg.PAD, min(k_chunk, K_CHUNK) // kg.PAD * kg.PAD)  # int32 stays exact within one step
        for c0 in range(0, kp, step):
            kg.gemm_tn(pa.data.ptr + c0, pb.data.ptr + c0, rp, pb.shape[0], min(kp, c0 + step) - c0, kp, kp, w, rp)
            acc += w
        return acc, rows_a, rows_b


def bound_maxima(w):
    """The row and column maxima of a block of W (host int64)."""
    import cupy

    acc, rows_a, rows_b = w
    with acc.device:
        rowmax = acc[:rows_b, :rows_a].max(axis=0) if rows_b else cupy.zeros(rows_a, np.int64)
        colmax = acc[:rows_b, :rows_a].max(axis=1) if rows_a else cupy.zeros(rows_b, np.int64)
        return rowmax.get(), colmax.get()


def bound_w32(w):
    """A block of W as the certificate reads it: int32 (saturated), Fortran order, on the device."""
    import cupy

    acc, rows_a, rows_b = w
    with acc.device:
        return cupy.minimum(acc[:rows_b, :rows_a], 2**31 - 1).astype(np.int32).T


def planes(x, shift, moduli, roots, recipes: list, conj: bool, k0: int, k_chunk: int) -> dict:
    """Residue planes of one block (at global column offset ``k0``) for every modulus.

    Returns ``{"rows": rows, "pieces": {c: [(start, stop, planes)]}}``: per engine
    k-chunk ``c`` that the block's columns fall into, one padded int8 array
    ``(planes·count, rows_pad, cols_pad)`` per run of moduli with one plane kind.
    """
    import cupy

    kinds = [r.planes for r in recipes]
    pieces = {}
    with x.device:
        shift_d = cupy.asarray(np.asarray(shift, np.int32))
        for c, lo, hi in blocks._k_pieces(k0, x.shape[1], k_chunk):
            runs = []
            for start, stop in blocks._runs(kinds):
                rs = [roots[q] or 0 for q in range(start, stop)]
                runs.append((start, stop, kg.residues(kinds[start], x[:, lo:hi], shift_d, list(moduli[start:stop]),
                                                      rs, conj)))
            pieces[c] = runs
    return {"rows": x.shape[0], "pieces": pieces}


def products(px: dict, py: dict, recipes: list, prev: dict | None = None) -> dict:
    """int32 plane products (cuBLAS int8 TN) of the k-blocks up to this one, per global k-chunk.

    Returns ``{"shape": (rows_x, rows_y), "chunks": {c: [[int32 (cols_pad, rows_pad)
    per plane product] per modulus]}}`` (each product column-major, rows padded),
    with ``prev``, the same for the k-blocks before, added in (exact in int32: one
    chunk has at most ``K_CHUNK`` columns).  ``prev`` is not modified.
    """
    import cupy

    out = dict(prev["chunks"]) if prev else {}
    some = next(iter(px["pieces"].values()))[0][2]
    with some.device:
        for c, runs_x in px["pieces"].items():
            runs_y = py["pieces"][c]
            per_mod = []
            for q, rec in enumerate(recipes):
                prods = []
                for idx, (a, b) in enumerate(rec.products):
                    pa, pb = blocks._plane(runs_x, q, rec.planes, a), blocks._plane(runs_y, q, rec.planes, b)
                    rp, kp = pa.shape
                    prod = cupy.empty((pb.shape[0], rp), np.int32)
                    kg.gemm_tn(pa.data.ptr, pb.data.ptr, rp, pb.shape[0], kp, kp, kp, prod, rp)
                    if c in out:
                        prod += out[c][q][idx]
                    prods.append(prod)
                per_mod.append(prods)
            out[c] = per_mod
    return {"shape": (px["rows"], py["rows"]), "chunks": out}


def crt(acc: dict, state: dict | None, *, moduli, roots, recipes, weights, big_hi, big_lo,
        complex_out: bool) -> dict:
    """A group of moduli's products (:func:`products`) reduced to int8 CRT term planes.

    ``state``: the terms of the moduli before this group (None for the first);
    the new terms follow them in the engine's order (modulus, k-chunk, recipe
    term), with each term's part and CRT weight.  ``state`` is not modified.
    """
    import cupy

    rows_x, rows_y = acc["shape"]
    chunks = sorted(acc["chunks"])
    first = acc["chunks"][chunks[0]][0][0]
    rp = first.shape[1]
    part, bhi, blo, slots = gpu_engine.term_table(recipes, big_hi, big_lo, len(chunks))
    with first.device:
        T = cupy.empty((slots[-1], rows_y, rp), np.int8)
        for q, rec in enumerate(recipes):
            m, s = moduli[q], roots[q] or 1
            spec_d, tr = gpu_engine.device_spec(rec, weights[q], m, s, False, len(rec.products))
            nt = len(rec.terms)
            for c, ch in enumerate(chunks):
                kg.terms(acc["chunks"][ch][q], rp, rows_x, rows_y, 0, 0, spec_d, nt, m, T, slots[q] + c * nt,
                         rows_y * rp, rp, 0, tr)
    before = state or {"terms": [], "part": [], "bhi": [], "blo": []}
    return {"terms": before["terms"] + [T], "part": before["part"] + part, "bhi": before["bhi"] + bhi,
            "blo": before["blo"] + blo}


def finalize(state: dict, c, *, P_hi, P_lo, x_shift, y_shift, alpha, beta, dtype, cert=None, w=None, xs=(), ys=()):
    """``alpha·C + beta·c`` of one output block from the term planes of all moduli (:func:`crt`),
    certified entry by entry as :func:`.blocks.finalize` does (the verdict is read here)."""
    import cupy

    mx, my = len(x_shift), len(y_shift)
    dtype = np.dtype(dtype)
    with state["terms"][0].device:
        T = state["terms"][0] if len(state["terms"]) == 1 else cupy.concatenate(state["terms"])
        rp = T.shape[2]
        if c is not None and beta != 0:
            out = cupy.array(c, dtype=dtype, order="F", copy=True)
        else:
            out = cupy.zeros((mx, my), dtype=dtype, order="F")
        consts = [cupy.asarray(np.array(state[key], t)) for key, t in
                  (("part", np.int8), ("bhi", np.float64), ("blo", np.float64))]
        shifts = [cupy.asarray(np.asarray(sh, np.int32)) for sh in (x_shift, y_shift)]
        dev_cert = None
        if cert is not None:
            cert = blocks.panel_cert(cert, w, xs, ys, cupy.concatenate)
            dev_cert = {key: (cupy.asarray(np.asarray(v)) if isinstance(v, np.ndarray) else v)
                        for key, v in cert.items()}
            dev_cert["counter"] = cupy.zeros(1, np.uint64)
        kg.crt_final(T, T.shape[0], my * rp, rp, *consts, P_hi, P_lo, *shifts, mx, my, 0, 0, alpha, beta, out, 0,
                     cert=dev_cert)
        if dev_cert is not None:
            blocks.report(int(dev_cert["counter"].get()[0]), out.size, cert)
    return out
