"""Ozaki-II on one block of a blocked product: the tasks of the distributed path.

The product ``C = X·Yᵀ`` of two "rows × k" factors cut into blocks
``X_il``, ``Y_jl`` (l the k-block) is computed here piece by piece so that the
pieces add up *exactly*:

* :func:`stats` continues each row's statistics over the k-blocks in order
  (bit-identical to one pass over the whole row);
* :func:`bound_product` adds block l's share of the accurate mode's bound
  product W, an exact integer matrix, to that of the blocks before it;
* :func:`planes` and :func:`products` add, per modulus, the int32 products of
  the residues of ``X_il`` and ``Y_jl`` to those of the blocks before,
  separately per global k-chunk (``K_CHUNK``) as the single-process engine
  splits k, so the sums are exactly the engine's int32 products;
* :func:`crt` runs the same double-double CRT accumulation as
  :func:`emublas.ozaki2.engine.run` on them, one group of moduli after the
  other, and :func:`finalize` the same finalize.

Same products, same CRT terms in the same order: the result is bit-identical.
Everything here is plain numpy in, numpy out (it runs on Dask workers).
"""
from __future__ import annotations

import numpy as np

from .._kernels import cpu
from . import certify, engine, scaling

__all__ = ["stats", "bound_int8", "bound_product", "planes", "products", "crt", "finalize"]


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


def _dead_zeroed(x: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """``x`` with the rows flagged ``dead`` (NaN/Inf somewhere in the row) set to zero."""
    if not dead.any():
        return x
    x = x.copy()
    x[dead] = 0
    return x


def bound_int8(x: np.ndarray, rowmax) -> np.ndarray:
    """``ceil(127·|x|/2^ea)`` of one block (int8), ea from the rows' max|x| over all
    k-blocks (NaN: a row with NaN/Inf, whose bounds are zero)."""
    rowmax = np.asarray(rowmax, np.float64)
    live = rowmax <= np.finfo(np.float64).max
    ea = np.frexp(np.where(live, rowmax, 0.0))[1]
    return cpu.oz_bound_int8(_dead_zeroed(x, ~live), ea)


def bound_product(a: np.ndarray, b: np.ndarray, prev: np.ndarray | None, k_chunk: int, last: bool = False):
    """W of the k-blocks up to this one: ``prev + a·bᵀ`` in int64 (exact)."""
    w = np.zeros((a.shape[0], b.shape[0]), np.int64) if prev is None else prev.copy()
    for c0 in range(0, a.shape[1], k_chunk):  # int32 stays exact within one chunk
        w += cpu.i8gemm(a[:, c0:c0 + k_chunk], b[:, c0:c0 + k_chunk].T)
    return w


def bound_maxima(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row and column maxima of a block of W (host int64)."""
    return scaling._axis_max(w, 1), scaling._axis_max(w, 0)


def bound_w32(w: np.ndarray) -> np.ndarray:
    """A block of W as the certificate reads it: int32 (saturated), Fortran order."""
    return np.asfortranarray(np.minimum(w, 2**31 - 1).astype(np.int32))


def _runs(kinds: list[str]):
    """``(start, stop)`` of the runs of consecutive moduli with one plane kind."""
    start = 0
    for stop in range(1, len(kinds) + 1):
        if stop == len(kinds) or kinds[stop] != kinds[start]:
            yield start, stop
            start = stop


def planes(x: np.ndarray, shift, moduli, roots, recipes: list, conj: bool, k0: int, k_chunk: int) -> dict:
    """Residue planes of one block (at global column offset ``k0``) for every modulus.

    Returns ``{c: [(start, stop, array)]}``: per engine k-chunk ``c`` that the
    block's columns fall into, one int8 array (planes·count, rows, columns of
    that piece) per run of moduli with one plane kind.
    """
    shift = np.asarray(shift, np.int32)
    x = _dead_zeroed(x, shift == scaling.DEAD)
    kinds = [r.planes for r in recipes]
    out = {}
    for c, lo, hi in _k_pieces(k0, x.shape[1], k_chunk):
        runs = []
        for start, stop in _runs(kinds):
            rs = [roots[q] or 0 for q in range(start, stop)]
            runs.append((start, stop, engine._planes(kinds[start], x[:, lo:hi], shift, list(moduli[start:stop]), rs,
                                                     conj, None)))
        out[c] = runs
    return out


def _plane(runs, q: int, kind: str, idx: int) -> np.ndarray:
    per = engine.PLANES_PER_MODULUS[kind]
    for start, stop, arr in runs:
        if start <= q < stop:
            return arr[per * (q - start) + idx]
    raise IndexError(q)


def products(px: dict, py: dict, recipes: list, prev: dict | None = None) -> dict:
    """int32 plane products of the k-blocks up to this one, per modulus and global k-chunk.

    ``px``, ``py``: :func:`planes` of ``X_il`` and ``Y_jl``.  Returns
    ``{c: [[int32 (rows_x, rows_y) per plane product] per modulus]}`` with c the
    index of the engine's k-chunk (``K_CHUNK`` columns); ``prev``, the same for
    the k-blocks before this one, is added in.  The sums stay exact in int32:
    the columns of one chunk are no more than ``K_CHUNK``, the bound that
    ``K_CHUNK`` is chosen for.  ``prev`` is not modified (the sums go into this
    call's own buffers).
    """
    out = dict(prev) if prev else {}
    for c, runs_x in px.items():
        runs_y = py[c]
        rows_x, rows_y = runs_x[0][2].shape[1], runs_y[0][2].shape[1]
        per_mod = []
        for q, rec in enumerate(recipes):
            # Fortran order, as the engine's buffers: the CRT kernel walks the accumulators by columns
            prods = [cpu.i8gemm(_plane(runs_x, q, rec.planes, a), _plane(runs_y, q, rec.planes, b).T,
                                out=np.empty((rows_x, rows_y), np.int32, order="F"))
                     for a, b in rec.products]
            if c in out:
                for mine, earlier in zip(prods, out[c][q]):
                    mine += earlier
            per_mod.append(prods)
        out[c] = per_mod
    return out


def crt(acc: dict, state: dict | None, *, moduli, roots, recipes, weights, big_hi, big_lo,
        complex_out: bool) -> dict:
    """The double-double CRT sums of one output block, continued over a group of moduli.

    ``acc``: the group's products summed over k (:func:`products`); ``state``:
    the sums after the moduli before this group (None for the first group).
    The accumulation runs modulus by modulus, k-chunk by k-chunk, term by term,
    the order of :func:`emublas.ozaki2.engine.run`.  ``state`` is not modified.
    """
    chunks = sorted(acc)
    if state is None:
        shape = acc[chunks[0]][0][0].shape
        parts = ("re", "im") if complex_out else ("re",)
        state = {f"{p}_{h}": np.zeros(shape, order="F") for p in parts for h in ("hi", "lo")}
        state.update(first_re=True, first_im=True)
    else:
        state = {k: v.copy(order="F") if isinstance(v, np.ndarray) else v for k, v in state.items()}
    for q, rec in enumerate(recipes):
        m, s = moduli[q], roots[q] or 1
        for ch in chunks:
            prods = acc[ch][q]
            for term in rec.terms:
                x1 = prods[term.p1].T if term.t1 else prods[term.p1]
                kw = {}
                if term.p2 is not None:
                    kw = {"x2": prods[term.p2].T if term.t2 else prods[term.p2],
                          "w2": engine._factor(term.f2, weights[q], m, s)}
                cpu.oz_crt_accumulate(x1, engine._factor(term.f1, weights[q], m, s), m, big_hi[q], big_lo[q],
                                      state[term.part + "_hi"], state[term.part + "_lo"],
                                      first=state["first_" + term.part], **kw)
                state["first_" + term.part] = False
    return state


def finalize(state: dict, c, *, P_hi, P_lo, x_shift, y_shift, alpha, beta, dtype, cert=None, w=None, xs=(),
             ys=()) -> np.ndarray:
    """``alpha·C + beta·c`` of one output block from its CRT sums over all moduli (:func:`crt`),
    certified entry by entry (``cert``: the block's share, ``w`` its block of W or None,
    ``xs``, ``ys`` the k-blocks of its row and column panels, which the fallback reads)."""
    mx, my = len(x_shift), len(y_shift)
    dtype = np.dtype(dtype)
    if c is not None and beta != 0:
        out = np.array(c, dtype=dtype, order="F", copy=True)
    else:
        out = np.zeros((mx, my), dtype=dtype, order="F")
    if cert is not None:
        cert = panel_cert(cert, w, xs, ys, np.concatenate)
    # arrays that crossed processes may arrive unaligned (pickle protocol 5 buffers)
    state = {key: np.require(v, np.float64, ["F", "A"]) if isinstance(v, np.ndarray) else v
             for key, v in state.items()}
    cpu.oz_crt_finalize(state["re_hi"], state["re_lo"], P_hi, P_lo, np.asarray(x_shift, np.int32),
                        np.asarray(y_shift, np.int32), out, im_hi=state.get("im_hi"), im_lo=state.get("im_lo"),
                        alpha=alpha, beta=beta, cert=cert)
    if cert is not None:
        report(cert["uncertified"], out.size, cert)
    return out


def panel_cert(cert: dict, w, xs, ys, concatenate) -> dict:
    """A block's certificate with its W block and its factor panels attached."""
    cert = dict(cert, W=w)
    if w is None:
        for key in ("row_wsum", "col_wsum", "row_budget", "col_budget"):
            cert.pop(key, None)
    cert["L"] = xs[0] if len(xs) == 1 else concatenate(list(xs), axis=1)
    cert["R"] = ys[0] if len(ys) == 1 else concatenate(list(ys), axis=1)
    return cert


def report(count: int, total: int, cert: dict) -> None:
    """The accuracy warning of a block (raised where the block ran: on a worker, its log)."""
    if count:
        certify.warn("gemm (a Dask block)", count, total, cert.get("moduli", 0), cert.get("bits", 0.0),
                     "dot" if cert["fix"] else "none")
