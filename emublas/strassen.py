"""Strassen–Winograd with chained accumulation (DESIGN §6), over a BLAS leaf.

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
thin GEMMs.  This module is the reference implementation in numpy/cupy (the
operand sums are array expressions); the number of output writes per level is
counted for the tests and reported by :func:`last_run`.
"""
from __future__ import annotations

import threading

__all__ = ["gemm", "last_run"]

_local = threading.local()


def last_run() -> dict | None:
    """Levels used and output writes per level of the last strassen call in this thread."""
    return getattr(_local, "info", None)


def _count_write(level: int) -> None:
    writes = _local.writes
    writes[level] = writes.get(level, 0) + 1


def _mul(alpha, a, b, beta, c, levels: int, leaf, depth: int) -> None:
    """``c = alpha·a·b + beta·c`` in place (c may be a view), Strassen for ``levels`` more levels."""
    m, k = a.shape
    n = b.shape[1]
    if levels == 0 or min(m, n, k) < 2:
        leaf(alpha, a, b, beta, c)
        return
    me, ke, ne = m - m % 2, k - k % 2, n - n % 2
    if (me, ke, ne) != (m, k, n):
        # peel: the even core by Strassen, the rest by thin products
        _mul(alpha, a[:me, :ke], b[:ke, :ne], beta, c[:me, :ne], levels, leaf, depth)
        if ke != k:
            leaf(alpha, a[:me, ke:], b[ke:, :ne], 1.0, c[:me, :ne])
        if ne != n:
            leaf(alpha, a[:me, :], b[:, ne:], beta, c[:me, ne:])
        if me != m:
            leaf(alpha, a[me:, :], b, beta, c[me:, :])
        return
    h, g, w = m // 2, k // 2, n // 2
    a11, a12, a21, a22 = a[:h, :g], a[:h, g:], a[h:, :g], a[h:, g:]
    b11, b12, b21, b22 = b[:g, :w], b[:g, w:], b[g:, :w], b[g:, w:]
    c11, c12, c21, c22 = c[:h, :w], c[:h, w:], c[h:, :w], c[h:, w:]
    if beta == 0:
        c.fill(0)
    elif beta != 1:
        c *= beta
    s1 = a21 + a22
    s2 = s1 - a11
    s3 = a11 - a21
    s4 = a12 - s2
    t1 = b12 - b11
    t2 = b22 - t1
    t3 = b22 - b12
    t4 = t2 - b21
    nxt = levels - 1
    xp = _namespace(c)
    s = xp.empty((h, w), dtype=c.dtype, order="F")
    # chain 1
    _mul(alpha, a11, b11, 0.0, s, nxt, leaf, depth + 1)
    c11 += s
    _count_write(depth)
    _mul(alpha, s2, t2, 1.0, s, nxt, leaf, depth + 1)
    c12 += s
    _count_write(depth)
    _mul(alpha, s3, t3, 1.0, s, nxt, leaf, depth + 1)
    c22 += s
    _count_write(depth)
    _mul(-alpha, a22, t4, 1.0, s, nxt, leaf, depth + 1)
    c21 += s
    _count_write(depth)
    # chain 2
    _mul(alpha, s1, t1, 0.0, s, nxt, leaf, depth + 1)
    c22 += s
    _count_write(depth)
    _mul(alpha, s4, b22, 1.0, s, nxt, leaf, depth + 1)
    c12 += s
    _count_write(depth)
    # chain 3: straight into the output
    _mul(alpha, a12, b21, 1.0, c11, nxt, leaf, depth + 1)
    _count_write(depth)


def _namespace(x):
    from ._arrays import is_cupy

    if is_cupy(x):
        import cupy

        return cupy
    import numpy

    return numpy


def levels_for(m: int, n: int, k: int, crossover: int, max_levels: int = 6) -> int:
    """Levels that keep every block's smallest dimension at or above ``crossover``."""
    levels, size = 0, min(m, n, k)
    while levels < max_levels and size // 2 >= crossover:
        size //= 2
        levels += 1
    return levels


def gemm(alpha, a, b, beta, c, trans_a: int, trans_b: int, *, levels: int, leaf) -> None:
    """``c = alpha·op(a)·op(b) + beta·c`` (c Fortran-ordered, in place) with ``levels`` Strassen levels.

    ``leaf(alpha, a, b, beta, c)`` is the plain GEMM of the blocks (no trans).
    """
    def op(x, t):
        if t == 0:
            return x
        return x.T if t == 1 else x.conj().T

    _local.writes = {}
    _mul(alpha, op(a, trans_a), op(b, trans_b), beta, c, levels, leaf, 0)
    _local.info = {"levels": levels, "writes_per_level": dict(_local.writes)}
