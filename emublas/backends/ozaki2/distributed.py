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
   group in the driver's order, then the finalize.
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

from ..._arrays import is_cupy, namespace
from . import certify, cpu_blocks, routines, scaling

__all__ = ["gemm"]


class _DaskSide(scaling.Side):
    """A :class:`~emublas.ozaki2.scaling.Side` of a Dask array, from reduced statistics.

    The rows it is asked for (``auto`` mode's samples, rows of extreme magnitude)
    are gathered from the cluster and laid out as numpy's fancy indexing lays
    them out (C order, a fresh array), so the sums over them are the
    single-process ones; with cupy chunks they stay on the device, where the
    single-process GPU call computes them.
    """

    def fetch_rows(self, rows):
        sub = self.x[np.asarray(rows)].compute()
        xp = namespace(sub=sub)  # cupy chunks: on the device, as the single-process GPU Side reads them
        return xp.ascontiguousarray(sub)


def _offsets(chunks) -> list[int]:
    return [int(v) for v in np.concatenate([[0], np.cumsum(chunks)])]


def _ops(x):
    """The block stages for ``x``'s chunks: numpy or cupy."""
    if is_cupy(x._meta):
        from . import gpu_blocks

        return gpu_blocks.BLOCKS
    return cpu_blocks.BLOCKS


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
    """:func:`emublas.ozaki2.scaling.bound_product` with W summed over k-blocks exactly (a
    chain of tasks over l per output block): W's row and column maxima (computed now) and
    the delayed W block of every output block (i, j), which its finalize certifies against."""
    ops = _ops(x)
    xb, yb = x.to_delayed(), y.to_delayed()
    ox, oy = _offsets(x.chunks[0]), _offsets(y.chunks[0])
    nl = xb.shape[1]
    rm_x, rm_y = left.host()[0], right.host()[0]  # max|x| per row (NaN: a row with NaN/Inf, whose bounds are 0)
    token = tokenize(x.name, y.name, rm_x, rm_y, scaling.K_CHUNK)
    bx = [
        [
            delayed(ops.bound_int8)(xb[i, l], rm_x[ox[i] : ox[i + 1]], dask_key_name=("oz-bound-x-" + token, i, l))
            for l in range(nl)
        ]
        for i in range(xb.shape[0])
    ]
    by = [
        [
            delayed(ops.bound_int8)(yb[j, l], rm_y[oy[j] : oy[j + 1]], dask_key_name=("oz-bound-y-" + token, j, l))
            for l in range(nl)
        ]
        for j in range(yb.shape[0])
    ]
    jobs, blocks_w = [], {}
    for i in range(xb.shape[0]):
        for j in range(yb.shape[0]):
            w = None
            for l in range(nl):
                w = delayed(ops.bound_product)(bx[i][l], by[j][l], w, dask_key_name=("oz-w-" + token, i, j, l))
            blocks_w[i, j] = delayed(ops.bound_w32)(w, dask_key_name=("oz-w32-" + token, i, j))
            jobs.append(delayed(ops.bound_maxima)(w, dask_key_name=("oz-wmax-" + token, i, j)))
    got = dask.compute(*jobs)
    nj = yb.shape[0]
    rowmax = np.concatenate([np.max([got[i * nj + j][0] for j in range(nj)], axis=0) for i in range(xb.shape[0])])
    colmax = np.concatenate([np.max([got[i * nj + j][1] for i in range(xb.shape[0])], axis=0) for j in range(nj)])
    return rowmax.astype(np.int64), colmax.astype(np.int64), blocks_w


def _meta(x, dtype):
    """An empty 2-D array of ``x``'s chunk type (numpy or cupy) and ``dtype``."""
    return x._meta.astype(dtype)[:0, :0] if x._meta is not None else np.empty((0, 0), dtype)


def gemm(
    alpha,
    x,
    y,
    beta,
    c,
    *,
    conj_x: bool,
    conj_y: bool,
    dtype,
    moduli="default",
    mode="accurate",
    fallback="dot",
    bits=None,
):
    """``alpha·op(X)·op(Y)ᵀ + beta·c`` as a lazy Dask array, bit for bit the single-process result.

    Exact int8 residue products are summed over the k-blocks and each output block
    is reconstructed once (one CRT per block).  ``alpha != 0`` and ``k > 0``: the
    caller settles those cases.

    Parameters
    ----------
    alpha, beta : float or complex
        The scalars.
    x, y : dask.array.Array
        m × k and n × k operands of ``dtype`` with the same k chunks.
    c : dask.array.Array or None
        m × n, chunked like the result; None when ``beta == 0``.
    conj_x, conj_y : bool
        Whether ``x``, ``y`` are conjugated.
    dtype : numpy.dtype
        The routine's dtype.
    moduli, mode, fallback, bits
        The ozaki2 options of those names.

    Returns
    -------
    dask.array.Array
        The m × n result of ``dtype``.
    """
    left, right = _sides(x, y)
    cplx = np.dtype(dtype).kind == "c"
    family = routines.Family("2m", routines.MAX_HYBRID) if cplx else routines.Family("real", routines.MAX_REAL)
    wrow = wcol = None
    blocks_w = {}
    if mode != "fast":
        wrow, wcol, blocks_w = _bound_accurate(x, y, left, right)
    precision = routines.precision_of(dtype)
    p = routines.plan(
        "gemm", family, precision, left, right, wrow, wcol, moduli=moduli, mode=mode, complex_data=cplx, bits=bits
    )
    jb = routines.job_for("2m" if cplx else "real", p, x.shape[1])
    cert = certify.certificate(
        p.px,
        p.py,
        p.mset,
        routines.nterms(jb),
        k=x.shape[1],
        precision=precision,
        W=None,
        fallback=fallback,
        bits=bits,
        conj_l=conj_x,
        conj_r=conj_y,
    )
    out = _products(
        alpha, x, y, beta, c, p, jb, conj_x=conj_x, conj_y=conj_y, dtype=dtype, cert=cert, blocks_w=blocks_w
    )
    return out


#: Moduli per product task: a call's int8 GEMMs are cut into this many
#: moduli per block triple, so that a few large output blocks still make
#: enough tasks for every worker (the CRT then runs group after group).
MODULI_PER_TASK = 4


def _products(alpha, x, y, beta, c, p, jb, *, conj_x, conj_y, dtype, cert, blocks_w):
    ops = _ops(x)
    meta = _meta(x, dtype)
    xb, yb = x.to_delayed(), y.to_delayed()
    cb = None if c is None else c.to_delayed()
    ox, oy, ok = _offsets(x.chunks[0]), _offsets(y.chunks[0]), _offsets(x.chunks[1])
    ni, nj, nl = xb.shape[0], yb.shape[0], xb.shape[1]
    token = tokenize(
        x.name,
        y.name,
        None if c is None else c.name,
        p.x_shift,
        p.y_shift,
        list(p.moduli),
        [r.planes for r in jb.recipes],
        alpha,
        beta,
        conj_x,
        conj_y,
        np.dtype(dtype).str,
        jb.k_chunk,
        MODULI_PER_TASK,
    )
    groups = [(g0, min(g0 + MODULI_PER_TASK, jb.nmod)) for g0 in range(0, jb.nmod, MODULI_PER_TASK)]
    state = {}  # per output block: the CRT state after the groups so far
    # constant arguments go into partials: Dask would otherwise walk the job and
    # constant arrays of every task for collections (most of the graph's build time)
    for g, (g0, g1) in enumerate(groups):
        planes_x = partial(ops.planes, jb=jb, lo=g0, hi=g1, conj=conj_x)
        planes_y = partial(ops.planes, jb=jb, lo=g0, hi=g1, conj=conj_y)
        pa = [
            [
                delayed(planes_x)(
                    xb[i, l], p.x_shift[ox[i] : ox[i + 1]], k0=ok[l], dask_key_name=(f"oz-planes-x-{token}", g, i, l)
                )
                for l in range(nl)
            ]
            for i in range(ni)
        ]
        pb = [
            [
                delayed(planes_y)(
                    yb[j, l], p.y_shift[oy[j] : oy[j + 1]], k0=ok[l], dask_key_name=(f"oz-planes-y-{token}", g, j, l)
                )
                for l in range(nl)
            ]
            for j in range(nj)
        ]
        products = partial(ops.products, jb=jb, lo=g0, hi=g1)
        crt = partial(ops.crt, jb=jb, lo=g0, hi=g1)
        for i in range(ni):
            for j in range(nj):
                acc = None
                for l in range(nl):  # a chain: the int32 sums stay where they are, planes move
                    acc = delayed(products)(
                        pa[i][l], pb[j][l], prev=acc, dask_key_name=(f"oz-products-{token}", g, i, j, l)
                    )
                state[i, j] = delayed(crt)(acc, state.get((i, j)), dask_key_name=(f"oz-crt-{token}", g, i, j))
    finalize = partial(_finalize, ops=ops, jb=jb, alpha=alpha, beta=beta, dtype=np.dtype(dtype).str)
    rows = []
    for i in range(ni):
        row = []
        for j in range(nj):
            # the block's share of the certificate; the fallback reads its row and column panels
            bc = _cert_block(cert, p, ox[i], ox[i + 1], oy[j], oy[j + 1])
            blk = delayed(finalize)(
                state[i, j],
                None if cb is None else cb[i, j],
                x_shift=p.x_shift[ox[i] : ox[i + 1]],
                y_shift=p.y_shift[oy[j] : oy[j + 1]],
                cert=bc,
                w=blocks_w.get((i, j)),
                xs=list(xb[i]),
                ys=list(yb[j]),
                dask_key_name=(f"oz-out-{token}", i, j),
            )
            row.append(da.from_delayed(blk, (ox[i + 1] - ox[i], oy[j + 1] - oy[j]), dtype=dtype, meta=meta))
        rows.append(row)
    return da.block(rows)


def _finalize(state, c, *, ops, jb, alpha, beta, dtype, x_shift, y_shift, cert=None, w=None, xs=(), ys=()):
    """``alpha·C + beta·c`` of one output block from its CRT state over all moduli, certified
    entry by entry (``cert``: the block's share, ``w`` its block of W or None, ``xs``, ``ys``
    the k-blocks of its row and column panels, which the fallback reads); a warning where
    the block ran (on a worker: its log) when entries failed."""
    if cert is not None:
        cert = dict(cert, W=w)
        if w is None:
            for key in ("row_wsum", "col_wsum", "row_budget", "col_budget"):
                cert.pop(key, None)
        cert["L"] = xs[0] if len(xs) == 1 else ops.concatenate(list(xs), axis=1)
        cert["R"] = ys[0] if len(ys) == 1 else ops.concatenate(list(ys), axis=1)
    out, count = ops.finalize(state, c, jb, x_shift, y_shift, alpha, beta, np.dtype(dtype), cert)
    if count:
        certify.warn(
            "gemm (a Dask block)",
            count,
            out.size,
            cert.get("moduli", 0),
            cert.get("bits", 0.0),
            "dot" if cert["fix"] else "none",
            cert.get("required_bits"),
        )
    return out


def _cert_block(cert: dict, p, r0: int, r1: int, c0: int, c1: int) -> dict:
    """The certificate of output block rows [r0, r1) × columns [c0, c1) (W and the factor
    panels are attached in the block's finalize task)."""
    out = {key: cert[key] for key in ("crt_err", "target", "fix", "conj_l", "conj_r")}
    out["moduli"], out["bits"], out["required_bits"] = len(p.moduli), p.mset.bits, p.info["required_bits"]
    out["row_err"], out["col_err"] = p.px.err[r0:r1], p.py.err[c0:c1]
    out["row_wsum"], out["col_wsum"] = p.px.wsum[r0:r1], p.py.wsum[c0:c1]
    out["row_budget"], out["col_budget"] = p.px.budget[r0:r1], p.py.budget[c0:c1]
    return out
