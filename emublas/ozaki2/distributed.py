"""Ozaki-II gemm on Dask arrays, bit-identical to the single-process result.

Three passes over the blocks, each a Dask computation:

1. **Statistics.**  Per row of ``X = op(A)`` and of ``Y = op(B)ᵀ`` (both
   "rows × k"): max |x|, Σ|x|², Σ|x|, continued over the k-blocks in order
   (a chain of tasks per row block), so the sums are those of one pass.
2. **Bounds.**  The accurate mode's bound product W summed over k-blocks as
   exact int64 (a chain over k-blocks per output block), reduced to its row
   and column maxima.  From here on the single-process code decides:
   :class:`emublas.ozaki2.scaling.Side` built from the statistics,
   :func:`emublas.ozaki2.routines.plan` for the moduli and shifts (the rows
   that its accuracy estimate samples are fetched from the cluster).
3. **Products.**  Lazy: the residue planes of every block with the global
   shifts; per output block (i, j) and group of ``MODULI_PER_TASK`` moduli, a
   chain over the k-blocks l that adds the int32 plane products of ``X_il``
   and ``Y_jl`` exactly; per output block, the CRT sums continued group after
   group in the engine's order, then the finalize (:mod:`emublas.ozaki2.blocks`).
   The chains keep the large int32 sums where they are and move the planes;
   the groups give even a few large output blocks enough tasks to balance.

Passes 1–2 run when :func:`gemm` is called; pass 3 when the result is
computed.  The tasks are :mod:`emublas.ozaki2.blocks` for numpy chunks and
:mod:`emublas.ozaki2.gpu_blocks` (same signatures, the GPU engine's kernels,
CRT terms per group and one final pass) for cupy chunks.
"""
from __future__ import annotations

from functools import partial

import dask
import dask.array as da
import numpy as np
from dask import delayed
from dask.base import tokenize

from .._arrays import is_cupy, namespace
from . import blocks, routines, scaling

__all__ = ["gemm"]


class _DaskSide(scaling.Side):
    """A :class:`~emublas.ozaki2.scaling.Side` of a Dask array, from reduced statistics.

    The rows it is asked for (``auto`` mode's samples, rows of extreme magnitude)
    are gathered from the cluster and laid out as numpy's fancy indexing lays
    them out (C order, a fresh array), so the sums over them are the
    single-process ones; with cupy chunks they stay on the device, where the
    single-process GPU call computes them.
    """

    _redo: dict | None = None

    def scaled_mag(self, rows):
        rows = np.asarray(rows)
        if rows.size == 1 and hasattr(self, "log2l1"):
            # Side.__init__ redoes the rows whose plain sums over/underflowed one at a
            # time: gather them all on the first call instead of one round trip each
            if self._redo is None:
                redo = np.flatnonzero(self.finite & ~self.zero
                                      & ~(np.isfinite(self.log2norm) & np.isfinite(self.log2l1)))
                self._redo = dict(zip(redo.tolist(), self._fetch(redo))) if redo.size else {}
            hit = self._redo.get(int(rows.reshape(-1)[0]))
            if hit is not None:
                return hit[None, :].copy()
        return self._fetch(rows)

    def _fetch(self, rows):
        sub = self.x[rows].compute()
        xp = namespace(sub=sub)  # cupy chunks: on the device, as the single-process GPU Side computes it
        mag = xp.abs(xp.ascontiguousarray(sub)).astype(np.float64, copy=False)
        return xp.ldexp(mag, xp.asarray(-self.ea[rows], dtype=np.int32)[:, None])


def _offsets(chunks) -> list[int]:
    return [int(v) for v in np.concatenate([[0], np.cumsum(chunks)])]


def _ops(x):
    """The block tasks for ``x``'s chunks: :mod:`.blocks` (numpy) or :mod:`.gpu_blocks` (cupy)."""
    if is_cupy(x._meta):
        from . import gpu_blocks

        return gpu_blocks
    return blocks


def _stats(x):
    """Delayed per-row statistics of each row block of ``x`` (a chain over k-blocks)."""
    xb = x.to_delayed()
    name = "oz-stats-" + tokenize(x.name)
    out = []
    for i in range(xb.shape[0]):
        carry = None
        for l in range(xb.shape[1]):
            carry = delayed(_ops(x).stats)(xb[i, l], carry, dask_key_name=(name, i, l))
        out.append(carry)
    return out


def _sides(x, y):
    sx, sy = _stats(x), _stats(y)
    got = dask.compute(*sx, *sy)
    full = [tuple(np.concatenate(parts) for parts in zip(*got[s])) for s in (slice(0, len(sx)), slice(len(sx), None))]
    left = _DaskSide(x, full[0])
    return left, _DaskSide(y, full[1])


def _bound_accurate(x, y, left, right):
    """:func:`emublas.ozaki2.scaling.bound_accurate` with W summed over k-blocks exactly
    (a chain of tasks over l per output block, ending in W's row and column maxima)."""
    ops = _ops(x)
    xb, yb = x.to_delayed(), y.to_delayed()
    ox, oy = _offsets(x.chunks[0]), _offsets(y.chunks[0])
    nl = xb.shape[1]
    ea_x, ea_y = left.ea.astype(np.int32), right.ea.astype(np.int32)
    token = tokenize(x.name, y.name, ea_x, ea_y, scaling.K_CHUNK)
    bx = [[delayed(ops.bound_int8)(xb[i, l], ea_x[ox[i]:ox[i + 1]], dask_key_name=("oz-bound-x-" + token, i, l))
           for l in range(nl)] for i in range(xb.shape[0])]
    by = [[delayed(ops.bound_int8)(yb[j, l], ea_y[oy[j]:oy[j + 1]], dask_key_name=("oz-bound-y-" + token, j, l))
           for l in range(nl)] for j in range(yb.shape[0])]
    jobs = []
    for i in range(xb.shape[0]):
        for j in range(yb.shape[0]):
            w = None
            for l in range(nl):
                w = delayed(ops.bound_product)(bx[i][l], by[j][l], w, scaling.K_CHUNK, l == nl - 1,
                                                  dask_key_name=("oz-w-" + token, i, j, l))
            jobs.append(w)
    got = dask.compute(*jobs)
    nj = yb.shape[0]
    rowmax = np.concatenate([np.max([got[i * nj + j][0] for j in range(nj)], axis=0) for i in range(xb.shape[0])])
    colmax = np.concatenate([np.max([got[i * nj + j][1] for i in range(xb.shape[0])], axis=0) for j in range(nj)])
    return scaling.bound_from_maxima(rowmax, colmax)


def _meta(x, dtype):
    """An empty 2-D array of ``x``'s chunk type (numpy or cupy) and ``dtype``."""
    return x._meta.astype(dtype)[:0, :0] if x._meta is not None else np.empty((0, 0), dtype)


def _zero_nonfinite(block):
    xp = namespace(block=block)
    return xp.where(xp.isfinite(block), block, 0).astype(block.dtype, copy=False)


def gemm(alpha, x, y, beta, c, *, conj_x: bool, conj_y: bool, dtype, moduli="default", mode="accurate"):
    """``alpha·op(X)·Yᵀ + beta·c`` (conjugates as flagged) as a lazy Dask array.

    ``x`` (m × k) and ``y`` (n × k) are Dask arrays of ``dtype`` with the same
    k chunks; ``c`` is None or an (m × n) Dask array chunked like the result.
    ``alpha != 0`` and ``k > 0`` (the caller settles those cases).
    """
    left, right = _sides(x, y)
    if not (left.finite.all() and right.finite.all()):
        return _nonfinite(alpha, x, y, beta, c, left, right, conj_x=conj_x, conj_y=conj_y, dtype=dtype,
                          moduli=moduli, mode=mode)
    cplx = np.dtype(dtype).kind == "c"
    family = routines._Family("2m", routines.MAX_HYBRID) if cplx else routines._Family("real", routines.MAX_REAL)
    if mode == "fast":
        g_r, g_c = scaling.bound_fast(left, right)
    else:
        g_r, g_c = _bound_accurate(x, y, left, right)
    p = routines.plan("gemm", family, routines._precision(dtype), left, right, g_r, g_c, moduli=moduli, mode=mode)
    recipes = routines.recipes_for("2m" if cplx else "real", p.roots)
    return _products(alpha, x, y, beta, c, p, recipes, conj_x=conj_x, conj_y=conj_y, dtype=dtype)


#: Moduli per product task: a call's int8 GEMMs are cut into this many
#: moduli per block triple, so that a few large output blocks still make
#: enough tasks for every worker (the CRT then runs group after group).
MODULI_PER_TASK = 4


def _products(alpha, x, y, beta, c, p, recipes, *, conj_x, conj_y, dtype):
    ops = _ops(x)
    meta = _meta(x, dtype)
    xb, yb = x.to_delayed(), y.to_delayed()
    cb = None if c is None else c.to_delayed()
    ox, oy, ok = _offsets(x.chunks[0]), _offsets(y.chunks[0]), _offsets(x.chunks[1])
    ni, nj, nl = xb.shape[0], yb.shape[0], xb.shape[1]
    token = tokenize(x.name, y.name, None if c is None else c.name, p.x_shift, p.y_shift, list(p.moduli),
                     [r.planes for r in recipes], alpha, beta, conj_x, conj_y, np.dtype(dtype).str, scaling.K_CHUNK,
                     MODULI_PER_TASK)
    groups = [(g0, min(g0 + MODULI_PER_TASK, len(p.moduli))) for g0 in range(0, len(p.moduli), MODULI_PER_TASK)]
    state = {}  # per output block: the CRT sums after the groups so far
    # constant arguments go into partials: Dask would otherwise walk the recipes and
    # constant arrays of every task for collections (most of the graph's build time)
    for g, (g0, g1) in enumerate(groups):
        ms, rts, recs = list(p.moduli[g0:g1]), list(p.roots[g0:g1]), recipes[g0:g1]
        planes_x = partial(ops.planes, moduli=ms, roots=rts, recipes=recs, conj=conj_x, k_chunk=scaling.K_CHUNK)
        planes_y = partial(ops.planes, moduli=ms, roots=rts, recipes=recs, conj=conj_y, k_chunk=scaling.K_CHUNK)
        pa = [[delayed(planes_x)(xb[i, l], p.x_shift[ox[i]:ox[i + 1]], k0=ok[l],
                                 dask_key_name=(f"oz-planes-x-{token}", g, i, l)) for l in range(nl)]
              for i in range(ni)]
        pb = [[delayed(planes_y)(yb[j, l], p.y_shift[oy[j]:oy[j + 1]], k0=ok[l],
                                 dask_key_name=(f"oz-planes-y-{token}", g, j, l)) for l in range(nl)]
              for j in range(nj)]
        products = partial(ops.products, recipes=recs)
        crt = partial(ops.crt, moduli=ms, roots=rts, recipes=recs, weights=list(p.mset.weights[g0:g1]),
                      big_hi=p.mset.big_hi[g0:g1], big_lo=p.mset.big_lo[g0:g1], complex_out=recs[0].complex_out)
        for i in range(ni):
            for j in range(nj):
                acc = None
                for l in range(nl):  # a chain: the int32 sums stay where they are, planes move
                    acc = delayed(products)(pa[i][l], pb[j][l], prev=acc,
                                            dask_key_name=(f"oz-products-{token}", g, i, j, l))
                state[i, j] = delayed(crt)(acc, state.get((i, j)), dask_key_name=(f"oz-crt-{token}", g, i, j))
    finalize = partial(ops.finalize, P_hi=p.mset.P_hi, P_lo=p.mset.P_lo, alpha=alpha, beta=beta,
                       dtype=np.dtype(dtype).str)
    rows = []
    for i in range(ni):
        row = []
        for j in range(nj):
            blk = delayed(finalize)(state[i, j], None if cb is None else cb[i, j], x_shift=p.x_shift[ox[i]:ox[i + 1]],
                                    y_shift=p.y_shift[oy[j]:oy[j + 1]], dask_key_name=(f"oz-out-{token}", i, j))
            row.append(da.from_delayed(blk, (ox[i + 1] - ox[i], oy[j + 1] - oy[j]), dtype=dtype, meta=meta))
        rows.append(row)
    return da.block(rows)


def _nonfinite(alpha, x, y, beta, c, left, right, *, conj_x, conj_y, dtype, moduli, mode):
    """NaN/Inf, as :func:`emublas.ozaki2.routines.gemm` treats them: the product of the
    inputs with non-finite entries set to zero everywhere, and the rows and columns those
    entries touch (entirely non-finite) from a float product of the original blocks."""
    emu = gemm(alpha, x.map_blocks(_zero_nonfinite, dtype=x.dtype), y.map_blocks(_zero_nonfinite, dtype=y.dtype),
               beta, c, conj_x=conj_x, conj_y=conj_y, dtype=dtype, moduli=moduli, mode=mode)
    bad_r, bad_c = ~left.finite, ~right.finite
    xb, yb, eb = x.to_delayed(), y.to_delayed(), emu.to_delayed()
    cb = None if c is None else c.to_delayed()
    ox, oy = _offsets(x.chunks[0]), _offsets(y.chunks[0])
    rows = []
    for i in range(xb.shape[0]):
        row = []
        for j in range(yb.shape[0]):
            r, q = bad_r[ox[i]:ox[i + 1]], bad_c[oy[j]:oy[j + 1]]
            blk = eb[i, j]
            if r.any() or q.any():
                blk = delayed(_patch, pure=True)(blk, list(xb[i]), list(yb[j]), None if cb is None else cb[i, j],
                                                 r, q, alpha, beta, conj_x, conj_y)
            row.append(da.from_delayed(blk, (len(r), len(q)), dtype=dtype, meta=_meta(x, dtype)))
        rows.append(row)
    return da.block(rows)


def _patch(emu, xs, ys, c, bad_r, bad_c, alpha, beta, conj_x, conj_y):
    """``emu`` with the rows ``bad_r`` and columns ``bad_c`` taken from the float product."""
    xp = namespace(emu=emu)
    with np.errstate(all="ignore"):  # NaN and Inf are the point here
        acc = sum((xp.conj(xl) if conj_x else xl) @ (xp.conj(yl) if conj_y else yl).T for xl, yl in zip(xs, ys))
        native = alpha * acc
        if c is not None and beta != 0:
            native = native + beta * c
    mask = xp.asarray(bad_r[:, None] | bad_c[None, :])
    return xp.where(mask, native.astype(emu.dtype), emu)
