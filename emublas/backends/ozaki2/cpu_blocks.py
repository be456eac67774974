"""The Ozaki-II stages on numpy chunks, cut for the Dask block tasks of :mod:`.distributed`.

Row statistics and bound products continued over k-blocks, residue planes per driver
k-chunk, products summed over k-blocks per k-chunk and folded into the accumulators in
the driver's order (:func:`.pipeline.reduce_group`), and the certified finalize: the
same kernels as :mod:`.cpu_stages`, so the blocks' results are the single call's bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..._kernels import cpu
from . import kernels_cpu, pipeline, scaling
from .cpu_stages import accumulate, dead_zeroed, finalize, new_state, residues

__all__ = ["BLOCKS"]


class _Blocks:
    """The CPU's block stages (:mod:`.distributed` says what each task asks of it)."""

    @staticmethod
    def stats(x, carry=None):
        return kernels_cpu.oz_row_stats(x, carry=carry)

    @staticmethod
    def bound_int8(x, rowmax):
        rowmax = np.asarray(rowmax, np.float64)
        live = rowmax <= np.finfo(np.float64).max
        ea = np.frexp(np.where(live, rowmax, 0.0))[1]
        return kernels_cpu.oz_bound_int8(dead_zeroed(x, ~live), ea)

    @staticmethod
    def bound_product(a, b, prev):
        w = np.zeros((a.shape[0], b.shape[0]), np.int64) if prev is None else prev.copy()
        for c0 in range(0, a.shape[1], scaling.K_CHUNK):  # int32 stays exact within one chunk
            w += cpu.i8gemm(a[:, c0 : c0 + scaling.K_CHUNK], b[:, c0 : c0 + scaling.K_CHUNK].T)
        return w

    @staticmethod
    def bound_maxima(w):
        return scaling.axis_max(w, 1), scaling.axis_max(w, 0)

    @staticmethod
    def bound_w32(w):
        return np.asfortranarray(np.minimum(w, 2**31 - 1).astype(np.int32))

    @staticmethod
    def planes(x, shift, jb: pipeline.Job, lo: int, hi: int, conj: bool, k0: int) -> dict:
        shift = np.asarray(shift, np.int32)
        x = dead_zeroed(x, shift == scaling.DEAD)
        out = {}
        for c, a, b in pipeline.k_pieces(k0, x.shape[1]):
            out[c] = [
                (
                    start,
                    stop,
                    residues(
                        jb.recipes[start].planes, x[:, a:b], shift, jb.moduli[start:stop], jb.roots[start:stop], conj
                    ),
                )
                for start, stop in pipeline.runs(jb, lo, hi)
            ]
        return out

    @staticmethod
    def products(px: dict, py: dict, jb: pipeline.Job, lo: int, hi: int, prev: dict | None) -> dict:
        out = dict(prev) if prev else {}
        for c, runs_x in px.items():
            runs_y = py[c]
            rows_x, rows_y = runs_x[0][2].shape[1], runs_y[0][2].shape[1]
            per_mod = []
            for l in range(lo, hi):
                rec = jb.recipes[l]
                # Fortran order, as the single call's buffers: the CRT kernel walks them by columns
                prods = [
                    cpu.i8gemm(
                        pipeline.run_plane(runs_x, l, rec.planes, a),
                        pipeline.run_plane(runs_y, l, rec.planes, b).T,
                        out=np.empty((rows_x, rows_y), np.int32, order="F"),
                    )
                    for a, b in rec.products
                ]
                if c in out:
                    for mine, earlier in zip(prods, out[c][l - lo]):
                        mine += earlier
                per_mod.append(prods)
            out[c] = per_mod
        return out

    @staticmethod
    def crt(acc: dict, state, jb: pipeline.Job, lo: int, hi: int) -> dict:
        if state is None:
            shape = acc[min(acc)][0][0].shape
            state = new_state(shape, jb.complex_out)
        else:
            state = {k: v.copy(order="F") if isinstance(v, np.ndarray) else v for k, v in state.items()}
        pipeline.reduce_group(jb, _BlockReduce, state, acc, lo, hi)
        return state

    @staticmethod
    def finalize(state: dict, c, jb: pipeline.Job, x_shift, y_shift, alpha, beta, dtype, cert) -> tuple:
        mx, my = len(x_shift), len(y_shift)
        if c is not None and beta != 0:
            out = np.array(c, dtype=dtype, order="F", copy=True)
        else:
            out = np.zeros((mx, my), dtype=dtype, order="F")
        # arrays that crossed processes may arrive unaligned (pickle protocol 5 buffers)
        state = {
            key: np.require(v, np.float64, ["F", "A"]) if isinstance(v, np.ndarray) else v for key, v in state.items()
        }
        finalize(state, jb, np.asarray(x_shift, np.int32), np.asarray(y_shift, np.int32), out, alpha, beta, cert=cert)
        return out, (cert["uncertified"] if cert is not None else 0)

    concatenate = staticmethod(np.concatenate)


class _BlockReduce:
    """The reduce stage of a Dask block (no timer, whole output block)."""

    @staticmethod
    def reduce(state, prods, jb, l, c):
        accumulate(state, prods, jb, l)


BLOCKS = _Blocks()
