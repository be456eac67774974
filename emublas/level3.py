"""symm, hemm, trmm, trsm: the rest of level 3, with scipy.linalg.blas signatures.

The native backend calls the platform routine itself (scipy's BLAS on numpy,
cuBLAS on cupy).  Every other backend gets these routines built on its gemm,
called through the front (:func:`emublas.blas` ``_gemm``) so that the call's
backend, options and warnings apply to every product:

* symm/hemm and trmm recurse on halves of the symmetric/triangular operand;
  off-diagonal blocks are read in place (a view and a trans code), and only
  the diagonal blocks of at most ``LEAF`` rows (per device) are made explicit (the full
  symmetric block, or the triangle with zeros and the unit diagonal), so no
  full-size copy of ``a`` is ever formed;
* trsm recurses the same way (the blocked substitution of a backward-stable
  trsm): its off-diagonal updates are gemm, its diagonal blocks of at most
  ``TRSM_LEAF`` rows are solved by the native trsm.

Like the routines of :mod:`emublas.blas`, the triangle a routine does not
reference is never read (NaN there cannot reach the result), and neither is
the diagonal when ``diag=1``, nor the imaginary part of hemm's diagonal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import config
from ._arrays import as_matrix, complex_scalar, device_of, flag, is_cupy, namespace, real_scalar
from ._front import (
    CALL_OPTIONS_DOC,
    DTYPES,
    OVERWRITE_C_DOC,
    device_name,
    prefix_of,
    prepare_out,
    scale_out,
    trans_codes,
)
from .blas import _gemm
from .level3_native import native_symm, native_tri, store

__all__ = ["symm", "hemm", "trmm", "trsm", "ROUTINES", "LEAF", "TRSM_LEAF"]

#: Largest diagonal block an emulating backend handles as one piece (made explicit for
#: symm/hemm/trmm, solved natively for trsm), per device.  On the GPU an emulated product
#: costs a few milliseconds of fixed overhead, so splitting below about 1024 rows makes the
#: updates slower than the native routine they replace (ztrsm n = 16384 on the H200: 0.56 s
#: with 128, against 0.39 s for cuBLAS).
LEAF = {"cpu": 128, "gpu": 1024}

#: Largest diagonal block trsm solves natively, per device.  On the GPU the native solve
#: of a block is less accurate below some thousands of rows than cuBLAS's own solve of the
#: whole matrix (H200, cuBLAS 13.1, ztrsm n = 16384: with 1024- or 2048-row blocks the
#: recursion over cuBLAS's own gemm has 1.5x the normwise and 1.3x the componentwise
#: backward error of one cuBLAS ztrsm; with 4096 or 8192 rows it has exactly cuBLAS's),
#: and the larger blocks cost nothing there (the updates are fewer and larger).
TRSM_LEAF = {"cpu": 128, "gpu": 4096}


def _leaf(a, table=None) -> int:
    """The leaf size for ``a``'s device from ``table`` (default :data:`LEAF`, read at the call)."""
    return (LEAF if table is None else table)["gpu" if is_cupy(a) else "cpu"]


# ---------------------------------------------------------------------------
# emulated routines: recursions over the backend's gemm
# ---------------------------------------------------------------------------


class _Products:
    """gemm through the front with this call's prefix, backend and options."""

    def __init__(self, prefix: str, backend, options):
        self.prefix, self.backend, self.options = prefix, backend, options

    def __call__(self, alpha, a, ta: int, b, tb: int, beta, c) -> None:
        """``c := alpha*op(a)*op(b) + beta*c`` in place (``c`` may be any view)."""
        result = _gemm(self.prefix, alpha, a, b, beta, c, ta, tb, 1, self.backend, self.options)
        store(c, result)


def _triangle_mask(xp, k: int, lower: int, strict: bool):
    i = xp.arange(k).reshape(-1, 1)
    j = xp.arange(k).reshape(1, -1)
    if lower:
        return i > j if strict else i >= j
    return i < j if strict else i <= j


def _explicit_triangle(a, lower: int, diag: int):
    """The triangle of a small square block with zeros elsewhere (and ones on the diagonal if
    ``diag``), read without touching the other triangle (``where``, not a product: NaN there stays out)."""
    xp = namespace(a=a)
    k = a.shape[0]
    t = xp.where(_triangle_mask(xp, k, lower, strict=bool(diag)), a, 0).astype(a.dtype)
    if diag:
        t[xp.arange(k), xp.arange(k)] = 1
    return xp.asfortranarray(t)


def _explicit_symmetric(a, lower: int, herm: bool):
    """The full symmetric (Hermitian: real diagonal) matrix of a small block's stored triangle."""
    xp = namespace(a=a)
    k = a.shape[0]
    strict = xp.where(_triangle_mask(xp, k, lower, strict=True), a, 0).astype(a.dtype)
    mirror = strict.T.conj() if herm else strict.T
    full = strict + mirror
    d = xp.arange(k)
    full[d, d] = a[d, d].real if herm else a[d, d]
    return xp.asfortranarray(full)


def _symm_emulated(mm: _Products, herm: bool, alpha, a, b, beta, c, side: int, lower: int) -> None:
    """c := alpha*A*b + beta*c (side 0) or alpha*b*A + beta*c (side 1), A from a's triangle."""
    k = a.shape[0]
    if k <= _leaf(a):
        full = _explicit_symmetric(a, lower, herm)
        if side == 0:
            mm(alpha, full, 0, b, 0, beta, c)
        else:
            mm(alpha, b, 0, full, 0, beta, c)
        return
    h = k // 2
    t = 2 if herm else 1
    s1, s2 = slice(0, h), slice(h, k)
    # A = [[A11, A12], [A21, A22]] with one of A12, A21 stored and the other its (conjugate) transpose
    if lower:
        a21, a12 = (a[s2, s1], 0), (a[s2, s1], t)
    else:
        a12, a21 = (a[s1, s2], 0), (a[s1, s2], t)
    if side == 0:
        _symm_emulated(mm, herm, alpha, a[s1, s1], b[s1, :], beta, c[s1, :], side, lower)
        mm(alpha, *a12, b[s2, :], 0, 1.0, c[s1, :])
        _symm_emulated(mm, herm, alpha, a[s2, s2], b[s2, :], beta, c[s2, :], side, lower)
        mm(alpha, *a21, b[s1, :], 0, 1.0, c[s2, :])
    else:
        _symm_emulated(mm, herm, alpha, a[s1, s1], b[:, s1], beta, c[:, s1], side, lower)
        mm(alpha, b[:, s2], 0, *a21, 1.0, c[:, s1])
        _symm_emulated(mm, herm, alpha, a[s2, s2], b[:, s2], beta, c[:, s2], side, lower)
        mm(alpha, b[:, s1], 0, *a12, 1.0, c[:, s2])


def _split(a, lower: int, trans: int):
    """Halves of a triangular ``a`` for the trmm/trsm recursions: the two slices, whether
    op(A) is lower triangular, and its nonzero off-diagonal block as (view of a, trans code)."""
    k = a.shape[0]
    s1, s2 = slice(0, k // 2), slice(k // 2, k)
    op_lower = bool(lower) != (trans != 0)
    rows, cols = (s2, s1) if op_lower else (s1, s2)  # the block of op(A)
    off = (a[rows, cols], 0) if trans == 0 else (a[cols, rows], trans)
    return s1, s2, op_lower, off


def _trmm_emulated(mm: _Products, alpha, a, b, side: int, lower: int, trans: int, diag: int) -> None:
    """b := alpha*op(A)*b (side 0) or alpha*b*op(A) (side 1) in place."""
    k = a.shape[0]
    if k <= _leaf(a):
        t = _explicit_triangle(a, lower, diag)
        src = b.copy(order="F")
        if side == 0:
            mm(alpha, t, trans, src, 0, 0.0, b)
        else:
            mm(alpha, src, 0, t, trans, 0.0, b)
        return
    s1, s2, op_lower, off = _split(a, lower, trans)
    rec = _trmm_emulated
    # Each half is updated from the other's old values first, then multiplied by its own diagonal block.
    if side == 0:
        first, second = (s2, s1) if op_lower else (s1, s2)  # the half that reads the other one
        rec(mm, alpha, a[first, first], b[first, :], side, lower, trans, diag)
        mm(alpha, off[0], off[1], b[second, :], 0, 1.0, b[first, :])
        rec(mm, alpha, a[second, second], b[second, :], side, lower, trans, diag)
    else:
        first, second = (s1, s2) if op_lower else (s2, s1)
        rec(mm, alpha, a[first, first], b[:, first], side, lower, trans, diag)
        mm(alpha, b[:, second], 0, off[0], off[1], 1.0, b[:, first])
        rec(mm, alpha, a[second, second], b[:, second], side, lower, trans, diag)


def _trsm_emulated(mm: _Products, prefix: str, alpha, a, b, side: int, lower: int, trans: int, diag: int) -> None:
    """Solve op(A)*x = alpha*b (side 0) or x*op(A) = alpha*b (side 1) in place of b."""
    k = a.shape[0]
    if k <= _leaf(a, TRSM_LEAF):
        native_tri("trsm", prefix, alpha, a, b, side, lower, trans, diag)
        return
    s1, s2, op_lower, off = _split(a, lower, trans)
    rec = _trsm_emulated
    # Solve the half that depends on nothing, subtract its contribution from the other, solve that.
    if side == 0:
        first, second = (s1, s2) if op_lower else (s2, s1)
        rec(mm, prefix, alpha, a[first, first], b[first, :], side, lower, trans, diag)
        mm(-1.0, off[0], off[1], b[first, :], 0, alpha, b[second, :])
        rec(mm, prefix, 1.0, a[second, second], b[second, :], side, lower, trans, diag)
    else:
        first, second = (s2, s1) if op_lower else (s1, s2)
        rec(mm, prefix, alpha, a[first, first], b[:, first], side, lower, trans, diag)
        mm(-1.0, b[:, first], 0, off[0], off[1], alpha, b[:, second])
        rec(mm, prefix, 1.0, a[second, second], b[:, second], side, lower, trans, diag)


# ---------------------------------------------------------------------------
# the front: argument rules, quick returns, dispatch
# ---------------------------------------------------------------------------


def _code(value, name: str, allowed: tuple[int, ...], routine: str) -> int:
    try:
        return flag(value, name, allowed)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{routine}: {exc}") from None


def _symm(kind: str, prefix: str | None, alpha, a, b, beta, c, side, lower, overwrite_c, backend, options):
    xp = namespace(a=a, b=b, c=c)
    if prefix is None:
        prefix = prefix_of(a=a, b=b, c=c)
    if kind == "hemm" and prefix in "sd":
        kind = "symm"  # a Hermitian product of real data is the symmetric one
    name = prefix + kind
    dtype = DTYPES[prefix]
    scalar = real_scalar if prefix in "sd" else complex_scalar
    alpha = scalar(alpha, "alpha")
    beta = scalar(beta, "beta")
    side = _code(side, "side", (0, 1), name)
    lower = _code(lower, "lower", (0, 1), name)
    be, opts = config.resolve(backend, options)
    with device_of(xp, a, b, c):
        a = as_matrix(a, dtype, xp, "a")
        b = as_matrix(b, dtype, xp, "b")
        m, n = b.shape
        k = n if side else m
        if a.shape != (k, k):
            where = "columns" if side else "rows"
            raise ValueError(
                f"{name}: a must be square {k}x{k} (the {where} of b, side={side}),"
                f" got a {a.shape[0]}x{a.shape[1]} and b {m}x{n}"
            )
        be.check(device_name(xp))
        out, alias = prepare_out(c, (m, n), dtype, xp, bool(overwrite_c), a, b)
        if m == 0 or n == 0:
            return out
        if alpha == 0:
            scale_out(out, beta, xp)
            return out
        target = out.copy(order="F") if alias else out
        if beta == 0 and c is not None:
            target.fill(0)
        routed = be.route(kind, prefix, m, n, k, target, opts)  # auto: one concrete backend for the routine
        if routed is not None:
            be, backend, options = routed
        if be.native_level3:
            native_symm(kind, prefix, alpha, a, b, beta, target, side, lower)
        else:
            _symm_emulated(_Products(prefix, backend, options), kind == "hemm", alpha, a, b, beta, target, side, lower)
        if alias:
            out[...] = target
        return out


def _triangular(kind: str, prefix: str | None, alpha, a, b, side, lower, trans_a, diag, overwrite_b, backend, options):
    xp = namespace(a=a, b=b)
    if prefix is None:
        prefix = prefix_of(a=a, b=b)
    name = prefix + kind
    dtype = DTYPES[prefix]
    alpha = (real_scalar if prefix in "sd" else complex_scalar)(alpha, "alpha")
    side = _code(side, "side", (0, 1), name)
    lower = _code(lower, "lower", (0, 1), name)
    try:
        trans_a = trans_codes(prefix, kind, trans_a, "trans_a")
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None
    diag = _code(diag, "diag", (0, 1), name)
    be, opts = config.resolve(backend, options)
    with device_of(xp, a, b):
        shape = getattr(b, "shape", None)
        if shape is None:
            shape = np.shape(b)
        a = as_matrix(a, dtype, xp, "a")
        bm = as_matrix(b, dtype, xp, "b")
        m, n = bm.shape
        k = n if side else m
        what = f"the {'columns' if side else 'rows'} of b, side={side}"
        if kind == "trsm" and a.shape != (k, k):
            raise ValueError(
                f"{name}: a must be square {k}x{k} ({what}), got a {a.shape[0]}x{a.shape[1]} and b {m}x{n}"
            )
        if kind == "trmm":
            # scipy's trmm takes a larger a, a.shape[0] >= a.shape[1] >= k, and uses its leading k x k block
            if not a.shape[0] >= a.shape[1] >= k:
                raise ValueError(
                    f"{name}: a must be {k}x{k} ({what}) or have a leading {k}x{k} block"
                    f" (rows >= columns >= {k}), got a {a.shape[0]}x{a.shape[1]} and b {m}x{n}"
                )
            a = a[:k, :k]
        be.check(device_name(xp))
        src = b
        if len(shape) < 2 and (isinstance(b, np.ndarray) or is_cupy(b)) and b.dtype == dtype:
            src = bm  # a view of b's own memory, so that overwrite_b updates a 1-D b too, as in scipy
        out, alias = prepare_out(src, (m, n), dtype, xp, bool(overwrite_b), a)
        if m and n:
            target = out.copy(order="F") if alias else out
            routed = be.route(kind, prefix, m, n, k, target, opts)  # auto: one backend for the routine
            if routed is not None:
                be, backend, options = routed
            if alpha == 0:
                target.fill(0)  # reference BLAS: b is not read
            elif be.native_level3:
                native_tri(kind, prefix, alpha, a, target, side, lower, trans_a, diag)
            elif kind == "trmm":
                _trmm_emulated(_Products(prefix, backend, options), alpha, a, target, side, lower, trans_a, diag)
            else:
                _trsm_emulated(
                    _Products(prefix, backend, options), prefix, alpha, a, target, side, lower, trans_a, diag
                )
            if alias:
                out[...] = target
        if len(shape) < 2:
            return b if out is src and src is not b else out.reshape(shape)
        return out


# ---------------------------------------------------------------------------
# public routines
# ---------------------------------------------------------------------------

_SYMM_DOC = (
    """{title} ({what}).

Same signature and semantics as ``scipy.linalg.blas.{name}``: ``C = alpha*A*b +
beta*c`` (``side=0``) or ``C = alpha*b*A + beta*c`` (``side=1``), where ``A`` is
the {kind} matrix stored in the triangle of ``a`` selected by ``lower``; the
other triangle is not read{diag}.

Parameters
----------
alpha : scalar
a : array_like, 2-D
    Square: ``m x m`` for ``side=0``, ``n x n`` for ``side=1``.
b : array_like, 2-D
    ``m x n``.
beta : scalar, optional
    ``beta == 0`` means ``c`` is not read.
c : array_like, optional
    ``m x n`` added term; zeros when omitted.
side : {{0, 1}}, optional
    0: ``A*b``, 1: ``b*A``.
lower : {{0, 1}}, optional
    0: ``A`` is in the upper triangle of ``a``, 1: in the lower.
"""
    + OVERWRITE_C_DOC
    + CALL_OPTIONS_DOC
    + """
Returns
-------
ndarray
    Fortran-ordered ``m x n`` result of the routine's dtype, on the inputs' device.

Raises
------
ValueError
    Non-conforming shapes, illegal ``side``/``lower``, unknown backend or option.
"""
)

_TRI_DOC = (
    """{title} ({what}).

Same signature and semantics as ``scipy.linalg.blas.{name}``: {formula}, where
``A`` is the triangle of ``a`` selected by ``lower`` (the other one is not read)
and ``op(A)`` is ``A``, ``A.T`` or ``A.conj().T``.

Parameters
----------
alpha : scalar
    ``alpha == 0`` gives zeros without reading ``a`` or ``b``.
a : array_like, 2-D
    {a_shape}
b : array_like
    ``m x n`` (a 1-D array is a column, a scalar 1x1; the result has ``b``'s shape).
side : {{0, 1}}, optional
    0: ``op(A)`` on the left, 1: on the right.
lower : {{0, 1}}, optional
    0: ``A`` is upper triangular, 1: lower.
trans_a : {{0, 1, 2}}, optional
    0: ``A``, 1: ``A.T``, 2: ``A.conj().T`` (the same as 1 for real data).
diag : {{0, 1}}, optional
    1: ``A`` has a unit diagonal, which is not read.
overwrite_b : int, optional
    If nonzero and ``b`` is a Fortran-contiguous 2-D array of the routine's
    dtype, ``b`` is overwritten with the result and returned.  Otherwise ``b``
    is not modified.
"""
    + CALL_OPTIONS_DOC
    + """
Returns
-------
ndarray
    The result, Fortran-ordered, of the routine's dtype, on the inputs' device.

Raises
------
ValueError
    Non-conforming shapes, illegal ``side``/``lower``/``trans_a``/``diag``,
    unknown backend or option.
"""
)

_WHAT = {
    "s": "float32",
    "d": "float64",
    "c": "complex64",
    "z": "complex128",
    None: "dtype chosen from the inputs like scipy.linalg.get_blas_funcs",
}


def _make_symm(kind: str, prefix: str | None):
    def routine(
        alpha, a, b, beta=0.0, c=None, side=0, lower=0, overwrite_c=0, *, backend: str | None = None, **options: Any
    ):
        return _symm(kind, prefix, alpha, a, b, beta, c, side, lower, overwrite_c, backend, options)

    herm = kind == "hemm"
    title = "Hermitian matrix product" if herm else "Symmetric matrix product"
    if herm and prefix is None:
        title += "; real inputs give the symmetric product"
    routine.__name__ = routine.__qualname__ = (prefix or "") + kind
    routine.__doc__ = _SYMM_DOC.format(
        title=title,
        what=_WHAT[prefix],
        name=(prefix or ("z" if herm else "d")) + kind,
        kind="Hermitian" if herm else "symmetric",
        diag=", nor the imaginary part of its diagonal" if herm else "",
    )
    return routine


def _make_triangular(kind: str, prefix: str | None):
    def routine(
        alpha, a, b, side=0, lower=0, trans_a=0, diag=0, overwrite_b=0, *, backend: str | None = None, **options: Any
    ):
        return _triangular(kind, prefix, alpha, a, b, side, lower, trans_a, diag, overwrite_b, backend, options)

    if kind == "trmm":
        title = "Triangular matrix product"
        formula = "``B = alpha*op(A)*b`` (``side=0``) or ``B = alpha*b*op(A)`` (``side=1``)"
        a_shape = (
            "``k x k`` with ``k = m`` (``side=0``) or ``n`` (``side=1``); as in scipy, a larger ``a``"
            " with rows >= columns >= k is accepted and its leading ``k x k`` block used."
        )
    else:
        title = "Triangular solve with several right-hand sides"
        formula = (
            "``X`` with ``op(A)*X = alpha*b`` (``side=0``) or ``X*op(A) = alpha*b`` (``side=1``);"
            " a singular ``A`` gives inf/NaN, as in BLAS"
        )
        a_shape = "``m x m`` (``side=0``) or ``n x n`` (``side=1``)."
    routine.__name__ = routine.__qualname__ = (prefix or "") + kind
    routine.__doc__ = _TRI_DOC.format(
        title=title, what=_WHAT[prefix], name=(prefix or "d") + kind, formula=formula, a_shape=a_shape
    )
    return routine


symm = _make_symm("symm", None)
hemm = _make_symm("hemm", None)
trmm = _make_triangular("trmm", None)
trsm = _make_triangular("trsm", None)

ROUTINES: dict[str, Callable[..., Any]] = {"symm": symm, "hemm": hemm, "trmm": trmm, "trsm": trsm}
for _p in "sdcz":
    ROUTINES[_p + "symm"] = _make_symm("symm", _p)
    ROUTINES[_p + "trmm"] = _make_triangular("trmm", _p)
    ROUTINES[_p + "trsm"] = _make_triangular("trsm", _p)
for _p in "cz":
    ROUTINES[_p + "hemm"] = _make_symm("hemm", _p)
del _p
