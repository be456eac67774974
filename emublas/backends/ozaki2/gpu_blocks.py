"""The Ozaki-II stages on cupy chunks, cut for the Dask block tasks of :mod:`.distributed`.

Each block runs on the device of its inputs.  Planes are padded and k-contiguous, one set
per driver k-chunk, so every product starts aligned; a group's products become int8 term
planes at once, and the final pass is :mod:`.gpu_stages`'s, so the blocks' results are the
single call's bit for bit.
"""

from __future__ import annotations

import numpy as np

from . import kernels_gpu as kg
from . import kernels_gpu_crt as kc
from . import pipeline, scaling
from .gpu_stages import job_constants, spec

__all__ = ["BLOCKS"]


class _Blocks:
    """The GPU's block stages (:mod:`.distributed` says what each task asks of it).  Planes are
    padded and k-contiguous, one set per driver k-chunk, so every product starts aligned;
    a group's products become int8 term planes at once (``crt``)."""

    @staticmethod
    def stats(x, carry=None):
        # the sums are the block's added to the carry: their last bits can differ from one
        # pass over whole rows (only ``fast`` and ``auto`` read them)
        with x.device:
            rowmax, sumsq, l1 = kg.row_stats_host(x)
        if carry is None:
            return rowmax, sumsq, l1
        pm, ps, pl = carry
        return np.maximum(pm, rowmax), ps + sumsq, pl + l1  # maximum propagates the NaN marks

    @staticmethod
    def bound_int8(x, rowmax):
        import cupy

        with x.device:
            return kg.bound_planes(x, cupy.asarray(np.asarray(rowmax, np.float64))), x.shape[0]

    @staticmethod
    def bound_product(a, b, prev):
        """W stored transposed: ``(rows_b_pad, rows_a_pad)`` C order int64, with the row counts."""
        import cupy

        (pa, rows_a), (pb, rows_b) = a, b
        with pa.device:
            rp, kp = pa.shape
            w = cupy.empty((pb.shape[0], rp), np.int32)  # column-major rp × bp: W transposed, row-major
            acc = cupy.zeros((pb.shape[0], rp), np.int64) if prev is None else prev[0].copy()
            for c0 in range(0, kp, scaling.K_CHUNK):  # int32 stays exact within one chunk
                kg.gemm_tn(
                    pa.data.ptr + c0,
                    pb.data.ptr + c0,
                    rp,
                    pb.shape[0],
                    min(kp, c0 + scaling.K_CHUNK) - c0,
                    kp,
                    kp,
                    w,
                    rp,
                )
                acc += w
            return acc, rows_a, rows_b

    @staticmethod
    def bound_maxima(w):
        import cupy

        acc, rows_a, rows_b = w
        with acc.device:
            rowmax = acc[:rows_b, :rows_a].max(axis=0) if rows_b else cupy.zeros(rows_a, np.int64)
            colmax = acc[:rows_b, :rows_a].max(axis=1) if rows_a else cupy.zeros(rows_b, np.int64)
            return rowmax.get(), colmax.get()

    @staticmethod
    def bound_w32(w):
        import cupy

        acc, rows_a, rows_b = w
        with acc.device:
            return cupy.minimum(acc[:rows_b, :rows_a], 2**31 - 1).astype(np.int32).T

    @staticmethod
    def planes(x, shift, jb: pipeline.Job, lo: int, hi: int, conj: bool, k0: int) -> dict:
        import cupy

        pieces = {}
        with x.device:
            shift_d = cupy.asarray(np.asarray(shift, np.int32))
            for c, a, b in pipeline.k_pieces(k0, x.shape[1]):
                pieces[c] = [
                    (
                        start,
                        stop,
                        kg.residues(
                            jb.recipes[start].planes,
                            x[:, a:b],
                            shift_d,
                            jb.moduli[start:stop],
                            jb.roots[start:stop],
                            conj,
                        ),
                    )
                    for start, stop in pipeline.runs(jb, lo, hi)
                ]
        return {"rows": x.shape[0], "pieces": pieces}

    @staticmethod
    def products(px: dict, py: dict, jb: pipeline.Job, lo: int, hi: int, prev: dict | None) -> dict:
        """Per chunk and modulus the int32 products, column-major ``(cols_pad, rows_pad)``."""
        import cupy

        out = dict(prev["chunks"]) if prev else {}
        some = next(iter(px["pieces"].values()))[0][2]
        with some.device:
            for c, runs_x in px["pieces"].items():
                runs_y = py["pieces"][c]
                per_mod = []
                for l in range(lo, hi):
                    rec = jb.recipes[l]
                    prods = []
                    for idx, (a, b) in enumerate(rec.products):
                        pa = pipeline.run_plane(runs_x, l, rec.planes, a)
                        pb = pipeline.run_plane(runs_y, l, rec.planes, b)
                        rp, kp = pa.shape
                        prod = cupy.empty((pb.shape[0], rp), np.int32)
                        kg.gemm_tn(pa.data.ptr, pb.data.ptr, rp, pb.shape[0], kp, kp, kp, prod, rp)
                        if c in out:
                            prod += out[c][l - lo][idx]
                        prods.append(prod)
                    per_mod.append(prods)
                out[c] = per_mod
        return {"shape": (px["rows"], py["rows"]), "chunks": out}

    @staticmethod
    def crt(acc: dict, state, jb: pipeline.Job, lo: int, hi: int) -> dict:
        """The group's products as int8 term planes, appended after those of ``state``."""
        import cupy

        rows_x, rows_y = acc["shape"]
        first = acc["chunks"][min(acc["chunks"])][0][0]
        rp = first.shape[1]
        with first.device:
            T = cupy.empty((jb.slot[hi] - jb.slot[lo], rows_y, rp), np.int8)
            red = _BlockReduce(rp, rows_x, rows_y, jb.slot[lo])
            pipeline.reduce_group(jb, red, T, acc["chunks"], lo, hi)
        return {"terms": (state or {"terms": []})["terms"] + [T]}

    @staticmethod
    def finalize(state: dict, c, jb: pipeline.Job, x_shift, y_shift, alpha, beta, dtype, cert) -> tuple:
        import cupy

        mx, my = len(x_shift), len(y_shift)
        with state["terms"][0].device:
            T = state["terms"][0] if len(state["terms"]) == 1 else cupy.concatenate(state["terms"])
            rp = T.shape[2]
            if c is not None and beta != 0:
                out = cupy.array(c, dtype=dtype, order="F", copy=True)
            else:
                out = cupy.zeros((mx, my), dtype=dtype, order="F")
            part, weights = job_constants(jb)
            shifts = [cupy.asarray(np.asarray(sh, np.int32)) for sh in (x_shift, y_shift)]
            dev_cert = None
            if cert is not None:
                dev_cert = {
                    key: (cupy.asarray(np.asarray(v)) if isinstance(v, np.ndarray) else v) for key, v in cert.items()
                }
                dev_cert["counter"] = cupy.zeros(1, np.uint64)
            kc.crt_final(
                T,
                T.shape[0],
                my * rp,
                rp,
                part,
                weights,
                jb.crt.consts,
                shifts[0],
                shifts[1],
                mx,
                my,
                0,
                0,
                alpha,
                beta,
                out,
                0,
                cert=dev_cert,
            )
            count = int(dev_cert["counter"].get()[0]) if dev_cert is not None else 0
        return out, count

    @staticmethod
    def concatenate(parts, axis):
        import cupy

        return cupy.concatenate(parts, axis=axis)


class _BlockReduce:
    """The reduce stage of a Dask block: products (cols_pad × rows_pad) to term planes."""

    def __init__(self, rp, rows_x, rows_y, slot0):
        self.rp, self.rows_x, self.rows_y, self.slot0 = rp, rows_x, rows_y, slot0

    def reduce(self, T, prods, jb, l, c):
        spec_d, tr = spec(jb, l, False)
        nt = len(jb.terms[l])
        kc.terms(
            prods,
            self.rp,
            self.rows_x,
            self.rows_y,
            0,
            0,
            spec_d,
            nt,
            jb.moduli[l],
            T,
            jb.slot[l] - self.slot0 + c * nt,
            self.rows_y * self.rp,
            self.rp,
            0,
            tr,
        )


BLOCKS = _Blocks()
