"""BLAS gemm on float data through quantization to ``bits``-bit integers.

Row i of ``op(A)`` is scaled by ``2^e_i`` and column j of ``op(B)`` by
``2^f_j`` (powers of two: exact), rounded to integers of at most ``bits``
bits including the sign (``|q| <= 2^(bits-1) - 1``), multiplied exactly with
bit planes (:mod:`.planes`), and scaled back.  The only error is the
rounding of the inputs, relative ``2^-bits`` of each row's (column's)
largest magnitude, so the error falls by about 2x per extra bit.  Complex
data uses four real products (real and imaginary parts share the row and
column scales).  The inner dimension is split so that each integer partial
sum, and the sum of two of them, stays below 2^63.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._arrays import namespace
from . import planes

__all__ = ["gemm", "quantize", "MIN_BITS", "MAX_BITS"]

MIN_BITS, MAX_BITS = 2, 24


def quantize(x: Any, bits: int, xp: Any = np) -> tuple[Any, Any]:
    """Rows of real or complex ``x`` as int64 (real, imaginary) parts and shifts.

    Parameters
    ----------
    x : array
        2-D float or complex numpy/cupy array, finite.
    bits : int
        Bits per integer, sign included.
    xp : module, optional
        numpy or cupy.

    Returns
    -------
    parts : list of arrays
        ``[re]`` or ``[re, im]``, int64, ``|q| <= 2^(bits-1) - 1``.
    shift : array of int64
        ``x[i] ≈ q[i] * 2^-shift[i]``.
    """
    parts = [x.real, x.imag] if xp.iscomplexobj(x) else [x]
    parts = [p.astype(xp.float64) for p in parts]
    rowmax = xp.abs(parts[0]).max(axis=1) if x.shape[1] else xp.zeros(x.shape[0])
    for p in parts[1:]:
        rowmax = xp.maximum(rowmax, xp.abs(p).max(axis=1))
    _, e = xp.frexp(rowmax)  # rowmax < 2^e (e = 0 for zero rows)
    shift = (bits - 1 - e).astype(xp.int64)
    top = 2 ** (bits - 1) - 1
    q = [xp.clip(xp.rint(xp.ldexp(p, shift[:, None].astype(xp.int32))), -top, top).astype(xp.int64) for p in parts]
    return q, shift


def _chunk(bits: int) -> int:
    """Longest k whose partial sums of two products stay below 2^62."""
    return max(1, 2 ** (62 - 2 * (bits - 1)))


def gemm(alpha, a, b, beta, c, trans_a, trans_b, *, bits: int, leaf: Any) -> None:
    """``c = alpha·op(a)·op(b) + beta·c`` with quantized inputs (finite data only).

    Parameters
    ----------
    alpha, beta : scalar
    a, b : array
        numpy or cupy operands of ``c``'s dtype, finite.
    c : array
        ``(m, n)``, Fortran-ordered, updated in place.
    trans_a, trans_b : {0, 1, 2}
        0: no transpose, 1: transpose, 2: conjugate transpose.
    bits : int
        Bits each input entry is rounded to (``MIN_BITS``..``MAX_BITS``).
    leaf : CpuLeaf or GpuLeaf
        The 0/1 product kernels.
    """
    xp = namespace(a=a, b=b, c=c)
    x = _op(a, trans_a)  # m x k
    y = _op(b, trans_b).T  # n x k: columns of op(b) as rows
    qa, ea = quantize(x, bits, xp)
    qb, eb = quantize(y, bits, xp)
    k = x.shape[1]
    width = planes.width(-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1)
    step = _chunk(bits)
    acc = None
    for s in range(0, k, step):
        sl = slice(s, s + step)

        def prod(u, v, sl=sl):
            return planes.plane_product(u[:, sl], v[:, sl].T, width, width, leaf)

        if len(qa) == 1 and len(qb) == 1:
            part = prod(qa[0], qb[0]).astype(xp.float64)
        else:
            ar, ai = qa if len(qa) == 2 else (qa[0], None)
            br, bi = qb if len(qb) == 2 else (qb[0], None)
            re = prod(ar, br)
            if ai is not None and bi is not None:
                re = re - prod(ai, bi)
            im = None
            if bi is not None:
                im = prod(ar, bi)
            if ai is not None:
                t = prod(ai, br)
                im = t if im is None else im + t
            assert im is not None  # one of the operands is complex in this branch
            part = re.astype(xp.float64) + 1j * im.astype(xp.float64)
        acc = part if acc is None else acc + part
    if acc is None:  # k == 0 (the front normally handles it)
        acc = xp.zeros((x.shape[0], y.shape[0]), c.dtype)
    scale = (-(ea[:, None] + eb[None, :])).astype(xp.int32)
    if xp.iscomplexobj(acc):
        value = xp.ldexp(acc.real, scale) + 1j * xp.ldexp(acc.imag, scale)
    else:
        value = xp.ldexp(acc, scale)
    if beta == 0:
        c[...] = alpha * value
    elif beta == 1:
        # as native BLAS: c is added, not multiplied (1·(inf+0j) would be inf+nanj)
        c[...] = alpha * value + c
    else:
        with np.errstate(invalid="ignore", over="ignore"):  # Inf in c: native does not warn
            c[...] = alpha * value + beta * c


def _op(x: Any, trans: int) -> Any:
    if trans == 0:
        return x
    return x.T.conj() if trans == 2 else x.T
