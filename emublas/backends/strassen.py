"""The ``strassen`` backend: Strassen–Winograd with 7-write chaining over the native GEMM.

On numpy arrays the whole recursion runs in the C driver (native/cpu/strassen.c:
fused operand sums and chain writes on both cores, scipy's OpenBLAS ``?gemm``
as the leaf, no Python per block); on cupy arrays the recursion in
:mod:`emublas.strassen` runs the fused CUDA kernels (native/cuda/strassen.cu)
around cuBLAS leaves.  Without the extension (or where the CUDA kernels do
not compile) the reference recursion with array expressions runs instead;
the chaining, the peeling and the semantics are the same.
"""
from __future__ import annotations

from .. import strassen
from .base import Backend, Option, int_range
from .native import BACKEND as NATIVE

#: Smallest block edge worth another level, per device and kind of data (None:
#: never); an entry per BLAS prefix, e.g. ("cpu", "s"), overrides its kind's.
#: Measured (BENCHMARKS.md):
#: CPU (2-core Zen 4, C driver over OpenBLAS): one level beats OpenBLAS from
#: 2048-blocks for real data (sgemm/dgemm at n = 4096: 1.08×/see BENCHMARKS;
#: two levels at n = 8192 dgemm 1.15×) but not from 1024-blocks (0.84–0.90×
#: at n = 2048); complex data from 1024-blocks (cgemm/zgemm at n = 2048, one
#: level: 1.06×/1.10×; n = 4096, two levels: 1.16×/1.21×).  s and d agree, so
#: no per-prefix entries.  H200 (fused CUDA kernels, cuBLAS leaf): dgemm one
#: level 1.07× at n = 16384, 1.00× at 8192, two levels never better, so
#: 8192-blocks; sgemm two levels 1.05× at 8192 and 1.12× at 16384, so
#: 2048-blocks; zgemm two levels 1.14× at 8192 and 1.20× at 16384, so
#: 2048-blocks (cgemm not measured apart: the complex entry).  ``auto`` uses
#: at most AUTO_MAX_LEVELS, the most measured.
CROSSOVER = {("cpu", "real"): 2048, ("cpu", "complex"): 1024,
             ("gpu", "real"): 2048, ("gpu", "d"): 8192, ("gpu", "complex"): 2048}
AUTO_MAX_LEVELS = 2


def crossover(device: str, dtype) -> int | None:
    """The CROSSOVER entry for ``device`` ("cpu" or "gpu") and ``dtype``: the
    BLAS prefix's own entry ("s", "d", "c", "z") where measured apart, else the
    kind's ("real", "complex")."""
    prefix = {"f4": "s", "f8": "d", "c8": "c", "c16": "z"}[f"{dtype.kind}{dtype.itemsize}"]
    key = (device, prefix)
    if key in CROSSOVER:
        return CROSSOVER[key]
    return CROSSOVER[(device, "complex" if dtype.kind == "c" else "real")]


def _leaf(alpha, a, b, beta, c) -> None:
    NATIVE.gemm(alpha, a, b, beta, c, 0, 0)


def _leaf_trans(alpha, a, b, beta, c, trans_a, trans_b) -> None:
    NATIVE.gemm(alpha, a, b, beta, c, trans_a, trans_b)


class StrassenBackend(Backend):
    """Strassen–Winograd, chained accumulation, recursive to ``levels``."""

    name = "strassen"
    description = "Strassen-Winograd with 7-write chained accumulation over the native GEMM"
    options = {
        "levels": Option("levels", "auto", int_range(0, 6, also=("auto",)),
                         "recursion levels (auto: while blocks stay above the device's crossover)",
                         env="EMUBLAS_STRASSEN_LEVELS"),
    }

    def readiness(self):
        return NATIVE.readiness()

    def check(self, device: str) -> None:
        NATIVE.check(device)

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, *, levels="auto", **opts):
        from .._arrays import is_cupy

        m, n = c.shape
        k = a.shape[0] if trans_a else a.shape[1]
        if levels == "auto":
            edge = crossover("gpu" if is_cupy(c) else "cpu", c.dtype)
            levels = 0 if edge is None else strassen.levels_for(m, n, k, edge, AUTO_MAX_LEVELS)
        levels = int(levels)
        if levels == 0:
            _leaf_trans(alpha, a, b, beta, c, trans_a, trans_b)
            return
        xp = strassen._namespace(c)
        bad_a = ~xp.isfinite(a).all(axis=0 if trans_a else 1)  # rows of op(a)
        bad_b = ~xp.isfinite(b).all(axis=1 if trans_b else 0)  # columns of op(b)
        if not (bool(bad_a.any()) or bool(bad_b.any())):
            strassen.gemm(alpha, a, b, beta, c, trans_a, trans_b, levels=levels, leaf=_leaf)
            return
        # NaN/Inf: Strassen's block sums would spread them to other rows and columns; the
        # rows and columns they touch come from the platform BLAS, so the pattern is native's
        rows, cols = xp.flatnonzero(bad_a), xp.flatnonzero(bad_b)
        keep_r, keep_c = c[rows, :].copy(), c[:, cols].copy()
        clean_a = xp.where(xp.isfinite(a), a, 0)
        clean_b = xp.where(xp.isfinite(b), b, 0)
        strassen.gemm(alpha, clean_a, clean_b, beta, c, trans_a, trans_b, levels=levels, leaf=_leaf)
        opa = a if trans_a == 0 else (a.T if trans_a == 1 else a.conj().T)
        opb = b if trans_b == 0 else (b.T if trans_b == 1 else b.conj().T)
        if rows.size:
            part_r = xp.asfortranarray(keep_r)
            _leaf(alpha, opa[rows, :], opb, beta, part_r)
            c[rows, :] = part_r
        if cols.size:
            part_c = xp.asfortranarray(keep_c)
            _leaf(alpha, opa, opb[:, cols], beta, part_c)
            c[:, cols] = part_c


BACKEND = StrassenBackend()
