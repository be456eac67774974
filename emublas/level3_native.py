"""The level-3 routines of the native backend: scipy's BLAS on numpy arrays, cuBLAS on cupy.

The front (:mod:`emublas.level3`) calls these for the native backend and for the
small diagonal blocks that an emulating backend's trsm solves natively.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cache

import numpy as np

from ._arrays import is_cupy

__all__ = ["native_tri", "native_symm", "store"]


def _scipy_routine(name: str):
    """scipy's own routine, also while the interpose shim has replaced it (the
    replacement keeps the original as ``__wrapped__``): native never routes back."""
    import scipy.linalg.blas as fblas

    fn = getattr(fblas, name)
    return getattr(fn, "__wrapped__", fn)


def store(out, result) -> None:
    """Copy an f2py result into ``out`` unless f2py already wrote ``out`` itself.

    Parameters
    ----------
    out : numpy.ndarray
        The destination.
    result : numpy.ndarray
        What the scipy routine returned (a copy when it could not work on ``out``).
    """
    if result is not out:  # f2py copied a non-Fortran view
        out[...] = result


_CUBLAS = {
    "trsm": "cublas{P}trsm_v2",
    "trmm": "cublas{P}trmm_v2",
    "symm": "cublas{P}symm_v2",
    "hemm": "cublas{P}hemm_v2",
}


@cache
def _cublas_function(kind: str, prefix: str):
    import ctypes

    from ._kernels import cublas_ext

    lib = cublas_ext.library()
    fn = None if lib is None else getattr(lib, _CUBLAS[kind].format(P=prefix.upper()), None)
    if fn is None:
        raise RuntimeError(f"cuBLAS {prefix}{kind} is not available in the loaded libcublas")
    p, i = ctypes.c_void_p, ctypes.c_int
    if kind in ("trsm", "trmm"):
        # handle, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb[, C, ldc]
        args = [p, i, i, i, i, i, i, p, p, i, p, i] + ([p, i] if kind == "trmm" else [])
    else:
        # handle, side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc
        args = [p, i, i, i, i, p, p, i, p, i, p, p, i]
    fn.argtypes = args
    fn.restype = ctypes.c_int
    return fn


@contextmanager
def _cublas_handle():
    """cupy's cuBLAS handle on the current stream in host pointer mode, restored afterwards."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    try:
        yield handle
    finally:
        cublas.setPointerMode(handle, mode)


def _column_major_ld(x) -> int | None:
    """The leading dimension when cuBLAS can read ``x`` in place as column-major, else None."""
    rows, cols = x.shape
    it = x.itemsize
    s0, s1 = x.strides
    if rows > 1 and s0 != it:
        return None
    if cols <= 1:
        return max(1, rows)
    if s1 <= 0 or s1 % it or s1 // it < max(1, rows):
        return None
    return s1 // it


def _cublas(kind: str, prefix: str, *, side, lower, a, b, alpha, trans=0, diag=0, beta=0.0, c=None) -> None:
    """cuBLAS ``{prefix}{kind}``; the result goes into ``b`` (trsm, trmm) or ``c`` (symm, hemm),
    through a Fortran temporary where that view is not column-major."""
    target = b if kind in ("trsm", "trmm") else c
    ld_t = _column_major_ld(target)
    if ld_t is None:
        tmp = target.copy(order="F")
        if kind in ("trsm", "trmm"):
            _cublas(kind, prefix, side=side, lower=lower, a=a, b=tmp, alpha=alpha, trans=trans, diag=diag)
        else:
            _cublas(kind, prefix, side=side, lower=lower, a=a, b=b, alpha=alpha, beta=beta, c=tmp)
        target[...] = tmp
        return
    if _column_major_ld(a) is None:
        a = a.copy(order="F")
    m, n = target.shape
    dtype = target.dtype
    al = np.array(alpha, dtype=dtype)  # host-mode scalars are read before the call returns
    uplo = 0 if lower else 1  # CUBLAS_FILL_MODE_LOWER / UPPER
    fn = _cublas_function(kind, prefix)
    with _cublas_handle() as h:
        if kind in ("trsm", "trmm"):
            head = (h, side, uplo, trans, diag, m, n, al.ctypes.data, a.data.ptr, _column_major_ld(a), b.data.ptr, ld_t)
            status = fn(*head) if kind == "trsm" else fn(*head, b.data.ptr, ld_t)  # trmm in place: C = B
        else:
            if _column_major_ld(b) is None:
                b = b.copy(order="F")
            be = np.array(beta, dtype=dtype)
            status = fn(
                h,
                side,
                uplo,
                m,
                n,
                al.ctypes.data,
                a.data.ptr,
                _column_major_ld(a),
                b.data.ptr,
                _column_major_ld(b),
                be.ctypes.data,
                c.data.ptr,
                ld_t,
            )
    if status != 0:
        raise RuntimeError(f"cuBLAS {prefix}{kind} failed with status {status}")


def native_tri(kind: str, prefix: str, alpha, a, b, side, lower, trans, diag) -> None:
    """Native trmm/trsm of ``b`` in place: scipy's routine on numpy, cuBLAS on cupy.

    Parameters
    ----------
    kind : {"trmm", "trsm"}
        The routine.
    prefix : {"s", "d", "c", "z"}
        Its precision prefix.
    alpha : float or complex
        The scalar.
    a : array
        The k × k triangle, any strides.
    b : array
        The Fortran-ordered m × n right-hand side, overwritten with the result.
    side, lower, trans, diag : int
        The BLAS codes (scipy's meaning).
    """
    if is_cupy(b):
        _cublas(kind, prefix, side=side, lower=lower, a=a, b=b, alpha=alpha, trans=trans, diag=diag)
        return
    fn = _scipy_routine(prefix + kind)
    store(b, fn(alpha, a, b, side=side, lower=lower, trans_a=trans, diag=diag, overwrite_b=1))


def native_symm(kind: str, prefix: str, alpha, a, b, beta, c, side, lower) -> None:
    """Native symm/hemm into ``c`` in place: scipy's routine on numpy, cuBLAS on cupy.

    Parameters
    ----------
    kind : {"symm", "hemm"}
        The routine.
    prefix, alpha, beta
        The precision prefix and the scalars, as in :func:`native_tri` (``beta`` scales ``c``).
    a : array
        The square symmetric (Hermitian) operand; only the triangle ``lower`` selects is read.
    b : array
        The m × n operand.
    c : array
        The Fortran-ordered m × n output, updated in place.
    side, lower : int
        The BLAS codes (scipy's meaning).
    """
    if is_cupy(c):
        _cublas(kind, prefix, side=side, lower=lower, a=a, b=b, alpha=alpha, beta=beta, c=c)
        return
    fn = _scipy_routine(prefix + kind)
    store(c, fn(alpha, a, b, beta, c, side=side, lower=lower, overwrite_c=1))
