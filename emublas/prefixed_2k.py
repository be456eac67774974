"""The prefixed syr2k and her2k routines (s, d, c, z): real definitions with scipy's signatures.

Each routine has exactly the positional parameters and defaults of its
``scipy.linalg.blas`` namesake, plus the keyword-only ``backend`` and
``**options`` of emublas, and hands its arguments unchanged to the front's
generic implementation (:mod:`emublas.blas`), which checks them once.
gemm, syrk and herk are in :mod:`emublas.prefixed`.
"""

from __future__ import annotations

from typing import Any

from ._arrays import Matrix, Operand
from .blas import _rank_k

__all__: list[str] = ["ssyr2k", "dsyr2k", "csyr2k", "zsyr2k", "cher2k", "zher2k"]


def ssyr2k(
    alpha: float,
    a: Operand,
    b: Operand,
    beta: float = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """float32 symmetric rank-2k update ``alpha*(op(a)*op(b).T + op(b)*op(a).T) + beta*c``.

    As ``scipy.linalg.blas.ssyr2k``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : float
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The square ``(n, n)`` term updated in its referenced triangle.
    trans : {0, 1, 2}, optional
        0: ``op(x) = x``, 1 or 2: ``op(x) = x.T``.
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous float32 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(n, n)`` float32 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes (``a`` and ``b`` differ), illegal codes, unknown backend or option.
    """
    return _rank_k("syr2k", "s", alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


def dsyr2k(
    alpha: float,
    a: Operand,
    b: Operand,
    beta: float = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """float64 symmetric rank-2k update ``alpha*(op(a)*op(b).T + op(b)*op(a).T) + beta*c``.

    As ``scipy.linalg.blas.dsyr2k``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : float
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The square ``(n, n)`` term updated in its referenced triangle.
    trans : {0, 1, 2}, optional
        0: ``op(x) = x``, 1 or 2: ``op(x) = x.T``.
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous float64 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(n, n)`` float64 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes (``a`` and ``b`` differ), illegal codes, unknown backend or option.
    """
    return _rank_k("syr2k", "d", alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


def csyr2k(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex64 symmetric rank-2k update ``alpha*(op(a)*op(b).T + op(b)*op(a).T) + beta*c``.

    As ``scipy.linalg.blas.csyr2k``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : complex
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The square ``(n, n)`` term updated in its referenced triangle.
    trans : {0, 1}, optional
        0: ``op(x) = x``, 1: ``op(x) = x.T`` (2 is illegal).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous complex64 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(n, n)`` complex64 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes (``a`` and ``b`` differ), illegal codes, unknown backend or option.
    """
    return _rank_k("syr2k", "c", alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


def zsyr2k(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex128 symmetric rank-2k update ``alpha*(op(a)*op(b).T + op(b)*op(a).T) + beta*c``.

    As ``scipy.linalg.blas.zsyr2k``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : complex
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The square ``(n, n)`` term updated in its referenced triangle.
    trans : {0, 1}, optional
        0: ``op(x) = x``, 1: ``op(x) = x.T`` (2 is illegal).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous complex128 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(n, n)`` complex128 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes (``a`` and ``b`` differ), illegal codes, unknown backend or option.
    """
    return _rank_k("syr2k", "z", alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


def cher2k(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex64 Hermitian rank-2k update ``alpha*op(a)*op(b)^H + conj(alpha)*op(b)*op(a)^H + beta*c``.

    As ``scipy.linalg.blas.cher2k``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).
    The diagonal of the result is exactly real.

    Parameters
    ----------
    alpha, beta : complex
        Only ``beta``'s real part is used; ``beta == 0``: ``c`` is not read.
    a, b : array_like
        2-D operands of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The square ``(n, n)`` term updated in its referenced triangle.
    trans : {0, 2}, optional
        0: ``op(x) = x``, 2: ``op(x) = x^H`` (1 is illegal).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous complex64 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(n, n)`` complex64 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes (``a`` and ``b`` differ), illegal codes, unknown backend or option.
    """
    return _rank_k("her2k", "c", alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


def zher2k(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex128 Hermitian rank-2k update ``alpha*op(a)*op(b)^H + conj(alpha)*op(b)*op(a)^H + beta*c``.

    As ``scipy.linalg.blas.zher2k``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).
    The diagonal of the result is exactly real.

    Parameters
    ----------
    alpha, beta : complex
        Only ``beta``'s real part is used; ``beta == 0``: ``c`` is not read.
    a, b : array_like
        2-D operands of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The square ``(n, n)`` term updated in its referenced triangle.
    trans : {0, 2}, optional
        0: ``op(x) = x``, 2: ``op(x) = x^H`` (1 is illegal).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous complex128 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(n, n)`` complex128 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes (``a`` and ``b`` differ), illegal codes, unknown backend or option.
    """
    return _rank_k("her2k", "z", alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)
