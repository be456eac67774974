"""Strassen–Winograd with chained accumulation (docs/design.md §6), over a BLAS leaf.

One level splits op(A), op(B) and C into 2×2 blocks and forms 7 block
products.  The products are summed in three running chains, and each running
sum is added into the outputs that need it: 7 output writes per level (plain
reconstruction needs 12)::

    chain 1: S = P1 → C11 += S;  S += P6 → C12 += S;  S += P7 → C22 += S;  S −= P4 → C21 += S
    chain 2: S = P5 → C22 += S;  S += P3 → C12 += S
    chain 3: C11 += P2

The block products recurse while the blocks are above the leaf size; ``S += P``
is a leaf GEMM accumulating into S (beta = 1).  Odd dimensions are peeled: the
even core goes through Strassen, the last row, column and inner index through
thin GEMMs.  Every quadrant's first write is in chain 1, which therefore
applies beta (C is never scaled in a separate pass).

numpy operands run in the C driver (native/cpu/strassen.c: fused sums, chain
writes and OpenBLAS leaves, no Python per block) where the extension is built;
this module's recursion, with the operand sums as array expressions or as the
fused CUDA kernels on cupy arrays, is the fallback and the GPU path.  Either
way the number of output writes per level is counted for the tests and
reported by :func:`last_run`.
"""

from __future__ import annotations

import threading

__all__ = ["gemm", "last_run", "note"]

_local = threading.local()


def last_run() -> dict | None:
    """What the last strassen call in this thread did.

    Returns
    -------
    dict or None
        ``levels``, ``impl`` (``"c"``, ``"cuda"`` or ``"reference"``) and the
        output writes per level (or the C driver's own report), plus what
        :func:`note` added; None before the first call.
    """
    return getattr(_local, "info", None)


def note(**extra) -> None:
    """Add entries to :func:`last_run`'s record (the backend's recomputed rows).

    Parameters
    ----------
    **extra
        Entries merged into the record.
    """
    _local.info = {**(last_run() or {}), **extra}


def _count_write(level: int) -> None:
    writes = _local.writes
    writes[level] = writes.get(level, 0) + 1


class _ArrayOps:
    """Operand sums and chain writes as numpy/cupy array expressions (the reference)."""

    @staticmethod
    def sums(x, side: int):
        h, g = x.shape[0] // 2, x.shape[1] // 2
        x11, x12, x21, x22 = x[:h, :g], x[:h, g:], x[h:, :g], x[h:, g:]
        if side == 0:
            s1 = x21 + x22
            s2 = s1 - x11
            return s1, s2, x11 - x21, x12 - s2
        t1 = x12 - x11
        t2 = x22 - t1
        return t1, t2, x22 - x12, t2 - x21

    @staticmethod
    def update(c, s, beta) -> None:
        """``c = s + beta·c`` (c not read when beta is 0)."""
        if beta == 0:
            c[...] = s
        elif beta == 1:
            c += s
        else:
            c *= beta
            c += s


def _mul(alpha, a, b, beta, c, levels: int, leaf, depth: int, ops) -> None:
    """``c = alpha·a·b + beta·c`` in place (c may be a view), Strassen for ``levels`` more levels."""
    m, k = a.shape
    n = b.shape[1]
    if levels == 0 or min(m, n, k) < 2:
        leaf(alpha, a, b, beta, c)
        return
    me, ke, ne = m - m % 2, k - k % 2, n - n % 2
    if (me, ke, ne) != (m, k, n):
        # peel: the even core by Strassen, the rest by thin products
        _mul(alpha, a[:me, :ke], b[:ke, :ne], beta, c[:me, :ne], levels, leaf, depth, ops)
        if ke != k:
            leaf(alpha, a[:me, ke:], b[ke:, :ne], 1.0, c[:me, :ne])
        if ne != n:
            leaf(alpha, a[:me, :], b[:, ne:], beta, c[:me, ne:])
        if me != m:
            leaf(alpha, a[me:, :], b, beta, c[me:, :])
        return
    h, g, w = m // 2, k // 2, n // 2
    a11, a12, a22 = a[:h, :g], a[:h, g:], a[h:, g:]
    b11, b21, b22 = b[:g, :w], b[g:, :w], b[g:, w:]
    c11, c12, c21, c22 = c[:h, :w], c[:h, w:], c[h:, :w], c[h:, w:]
    s1, s2, s3, s4 = ops.sums(a, 0)
    t1, t2, t3, t4 = ops.sums(b, 1)
    nxt = levels - 1
    s = _namespace(c).empty((h, w), dtype=c.dtype, order="F")

    def write(target, scale) -> None:
        ops.update(target, s, scale)
        _count_write(depth)

    # chain 1; every quadrant's first write is here, so it applies beta
    _mul(alpha, a11, b11, 0.0, s, nxt, leaf, depth + 1, ops)
    write(c11, beta)
    _mul(alpha, s2, t2, 1.0, s, nxt, leaf, depth + 1, ops)
    write(c12, beta)
    _mul(alpha, s3, t3, 1.0, s, nxt, leaf, depth + 1, ops)
    write(c22, beta)
    _mul(-alpha, a22, t4, 1.0, s, nxt, leaf, depth + 1, ops)
    write(c21, beta)
    # chain 2
    _mul(alpha, s1, t1, 0.0, s, nxt, leaf, depth + 1, ops)
    write(c22, 1.0)
    _mul(alpha, s4, b22, 1.0, s, nxt, leaf, depth + 1, ops)
    write(c12, 1.0)
    # chain 3: straight into the output
    _mul(alpha, a12, b21, 1.0, c11, nxt, leaf, depth + 1, ops)
    _count_write(depth)


def _namespace(x):
    from ..._arrays import is_cupy

    if is_cupy(x):
        import cupy

        return cupy
    import numpy

    return numpy


def levels_for(m: int, n: int, k: int, crossover: int, max_levels: int = 6) -> int:
    """Levels that keep every block's smallest dimension at or above ``crossover``.

    Parameters
    ----------
    m, n, k : int
        The product's dimensions.
    crossover : int
        Smallest block dimension worth another level.
    max_levels : int, optional

    Returns
    -------
    int
        0 when even one level would go below ``crossover``.
    """
    levels, size = 0, min(m, n, k)
    while levels < max_levels and size // 2 >= crossover:
        size //= 2
        levels += 1
    return levels


def _c_driver(alpha, a, b, beta, c, trans_a: int, trans_b: int, levels: int) -> dict | None:
    """The whole recursion in C (numpy operands), or None where that driver cannot run."""
    from . import kernels_cpu

    if not kernels_cpu.available():
        return None
    return kernels_cpu.gemm(alpha, a, b, beta, c, trans_a, trans_b, levels)


def _gpu_ops():
    """The fused CUDA sums and chain writes, or None where they cannot be built."""
    try:
        from . import kernels_gpu
    except ImportError:
        return None
    return kernels_gpu.ops()


def gemm(alpha, a, b, beta, c, trans_a: int, trans_b: int, *, levels: int, leaf) -> None:
    """``c = alpha·op(a)·op(b) + beta·c`` (c Fortran-ordered, in place) with ``levels`` Strassen levels.

    numpy operands run in the C driver (:mod:`.kernels_cpu`) where the
    extension is built; cupy operands use the fused CUDA kernels
    (:mod:`.kernels_gpu`) where they compile.  Otherwise this
    module's recursion runs with array expressions and the leaf GEMM.

    Parameters
    ----------
    alpha, beta : scalar
    a, b : array
        numpy or cupy operands of ``c``'s dtype.
    c : array
        ``(m, n)``, Fortran-ordered, updated in place.
    trans_a, trans_b : {0, 1, 2}
        0: no transpose, 1: transpose, 2: conjugate transpose.
    levels : int
        Strassen levels (0: one leaf GEMM).
    leaf : callable
        ``leaf(alpha, a, b, beta, c)``, the plain GEMM of the blocks (no trans).
    """
    from ..._arrays import is_cupy

    if not is_cupy(c):
        info = _c_driver(alpha, a, b, beta, c, trans_a, trans_b, levels)
        if info is not None:
            _local.info = {"levels": levels, "impl": "c", **info}
            return
        ops, impl = _ArrayOps, "reference"
    else:
        ops = _gpu_ops()
        ops, impl = (ops, "cuda") if ops is not None else (_ArrayOps, "reference")

    def op(x, t):
        if t == 0:
            return x
        return x.T if t == 1 else x.conj().T

    _local.writes = {}
    _mul(alpha, op(a, trans_a), op(b, trans_b), beta, c, levels, leaf, 0, ops)
    _local.info = {"levels": levels, "impl": impl, "writes_per_level": dict(_local.writes)}
