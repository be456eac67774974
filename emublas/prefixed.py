"""The prefixed gemm, syrk and herk routines (s, d, c, z): real definitions with scipy's signatures.

Each routine has exactly the positional parameters and defaults of its
``scipy.linalg.blas`` namesake, plus the keyword-only ``backend`` and
``**options`` of emublas, and hands its arguments unchanged to the front's
generic implementation (:mod:`emublas.blas`), which checks them once.
The rank-2k routines are in :mod:`emublas.prefixed_2k`, symm, hemm, trmm and trsm in
:mod:`emublas.level3`.
"""

from __future__ import annotations

from typing import Any

from ._arrays import Matrix, Operand
from .blas import _gemm, _rank_k

__all__: list[str] = ["sgemm", "dgemm", "cgemm", "zgemm", "ssyrk", "dsyrk", "csyrk", "zsyrk", "cherk", "zherk"]


def sgemm(
    alpha: float,
    a: Operand,
    b: Operand,
    beta: float = 0.0,
    c: Operand | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """float32 matrix product ``alpha*op(a)*op(b) + beta*c``, as ``scipy.linalg.blas.sgemm``.

    Parameters
    ----------
    alpha, beta : float
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The ``(m, n)`` term added; zeros when omitted.
    trans_a, trans_b : {0, 1, 2}, optional
        ``op``: 0 none, 1 transpose, 2 conjugate transpose.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous float32 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(m, n)`` float32 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes, illegal codes, unknown backend or option.
    """
    return _gemm("s", alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, backend, options)


def dgemm(
    alpha: float,
    a: Operand,
    b: Operand,
    beta: float = 0.0,
    c: Operand | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """float64 matrix product ``alpha*op(a)*op(b) + beta*c``, as ``scipy.linalg.blas.dgemm``.

    Parameters
    ----------
    alpha, beta : float
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The ``(m, n)`` term added; zeros when omitted.
    trans_a, trans_b : {0, 1, 2}, optional
        ``op``: 0 none, 1 transpose, 2 conjugate transpose.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous float64 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(m, n)`` float64 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes, illegal codes, unknown backend or option.
    """
    return _gemm("d", alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, backend, options)


def cgemm(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex64 matrix product ``alpha*op(a)*op(b) + beta*c``, as ``scipy.linalg.blas.cgemm``.

    Parameters
    ----------
    alpha, beta : complex
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The ``(m, n)`` term added; zeros when omitted.
    trans_a, trans_b : {0, 1, 2}, optional
        ``op``: 0 none, 1 transpose, 2 conjugate transpose.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous complex64 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(m, n)`` complex64 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes, illegal codes, unknown backend or option.
    """
    return _gemm("c", alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, backend, options)


def zgemm(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex128 matrix product ``alpha*op(a)*op(b) + beta*c``, as ``scipy.linalg.blas.zgemm``.

    Parameters
    ----------
    alpha, beta : complex
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a, b : array_like
        2-D operands; numpy arrays compute on the CPU, cupy arrays on their GPU.
    c : array_like, optional
        The ``(m, n)`` term added; zeros when omitted.
    trans_a, trans_b : {0, 1, 2}, optional
        ``op``: 0 none, 1 transpose, 2 conjugate transpose.
    overwrite_c : int, optional
        Nonzero: ``c`` is updated in place when it is a Fortran-contiguous complex128 array.
    backend : str, optional
        This call's backend (see :func:`emublas.use`); ``**options`` are its options.

    Returns
    -------
    ndarray
        The Fortran-ordered ``(m, n)`` complex128 result, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes, illegal codes, unknown backend or option.
    """
    return _gemm("z", alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, backend, options)


def ssyrk(
    alpha: float,
    a: Operand,
    beta: float = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """float32 symmetric rank-k update ``alpha*op(a)*op(a).T + beta*c``.

    As ``scipy.linalg.blas.ssyrk``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : float
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a : array_like
        2-D operand; a numpy array computes on the CPU, a cupy array on its GPU.
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
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("syrk", "s", alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def dsyrk(
    alpha: float,
    a: Operand,
    beta: float = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """float64 symmetric rank-k update ``alpha*op(a)*op(a).T + beta*c``.

    As ``scipy.linalg.blas.dsyrk``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : float
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a : array_like
        2-D operand; a numpy array computes on the CPU, a cupy array on its GPU.
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
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("syrk", "d", alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def csyrk(
    alpha: complex,
    a: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex64 symmetric rank-k update ``alpha*op(a)*op(a).T + beta*c``.

    As ``scipy.linalg.blas.csyrk``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : complex
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a : array_like
        2-D operand; a numpy array computes on the CPU, a cupy array on its GPU.
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
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("syrk", "c", alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def zsyrk(
    alpha: complex,
    a: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex128 symmetric rank-k update ``alpha*op(a)*op(a).T + beta*c``.

    As ``scipy.linalg.blas.zsyrk``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha, beta : complex
        ``beta == 0``: ``c`` is not read (NaN in it cannot reach the result).
    a : array_like
        2-D operand; a numpy array computes on the CPU, a cupy array on its GPU.
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
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("syrk", "z", alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def cherk(
    alpha: complex,
    a: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex64 Hermitian rank-k update ``alpha*op(a)*op(a)^H + beta*c``.

    As ``scipy.linalg.blas.cherk``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).
    The diagonal of the result is exactly real.

    Parameters
    ----------
    alpha, beta : complex
        Only their real parts are used, as BLAS reads them; ``beta == 0``: ``c`` is not read.
    a : array_like
        2-D operand; a numpy array computes on the CPU, a cupy array on its GPU.
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
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("herk", "c", alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def zherk(
    alpha: complex,
    a: Operand,
    beta: complex = 0j,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """complex128 Hermitian rank-k update ``alpha*op(a)*op(a)^H + beta*c``.

    As ``scipy.linalg.blas.zherk``: only the triangle selected by ``lower`` is
    written, the other keeps ``c``'s values (zeros when ``c`` is omitted).
    The diagonal of the result is exactly real.

    Parameters
    ----------
    alpha, beta : complex
        Only their real parts are used, as BLAS reads them; ``beta == 0``: ``c`` is not read.
    a : array_like
        2-D operand; a numpy array computes on the CPU, a cupy array on its GPU.
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
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("herk", "z", alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)
