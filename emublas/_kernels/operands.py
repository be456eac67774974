"""numpy operands for the cffi kernels: checked, their element strides, their address.

Shared by every backend's CPU kernel bindings (``emublas.backends.*.kernels_cpu``)
and by :mod:`emublas._kernels.cpu` itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_operand", "elem_strides", "ptr"]


def check_operand(x: Any, name: str, dtype: type) -> np.ndarray:
    """Check that an argument is a 2-D numpy array of one dtype, and return it unchanged.

    Layout is not checked (nor copied): callers look at the strides themselves
    (see :func:`elem_strides`).

    Parameters
    ----------
    x : object
        The argument to check.
    name : str
        Its name, used in the error messages.
    dtype : type
        The numpy scalar type it must have, e.g. ``numpy.int8``.

    Returns
    -------
    numpy.ndarray
        ``x`` itself.

    Raises
    ------
    TypeError
        ``x`` is not a numpy array, or has another dtype.
    ValueError
        ``x`` is not 2-D.
    """
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    return x


def elem_strides(x: np.ndarray) -> tuple[int, int] | None:
    """Element strides, or None when a byte stride is not a whole element.

    Parameters
    ----------
    x : numpy.ndarray
        A 2-D array, any strides (negative and zero included).

    Returns
    -------
    tuple of (int, int) or None
        ``(row stride, column stride)`` counted in elements, as the C kernels
        take them (a Fortran-ordered ``(m, n)`` array gives ``(1, m)``); None
        when either byte stride is not a multiple of ``x.itemsize``, in which
        case the array must be copied before C can read it.
    """
    s0, s1 = x.strides
    size = x.itemsize
    if s0 % size or s1 % size:
        return None
    return s0 // size, s1 // size


def ptr(ffi: Any, ctype: str, x: np.ndarray) -> Any:
    """``x``'s first element as a cffi pointer of type ``ctype`` (``x`` must outlive its use).

    Parameters
    ----------
    ffi : cffi.FFI
        The extension's ``ffi``.
    ctype : str
        A pointer type, e.g. ``"const double *"``.
    x : numpy.ndarray
        Any strides.

    Returns
    -------
    cffi pointer
        ``x``'s data address (that of element 0, even for negative strides).
    """
    # the buffer protocol is several times faster than __array_interface__ (a new dict per call)
    # and gives the same address for a contiguous array (its first element is its lowest byte)
    if x.flags.c_contiguous:
        return ffi.cast(ctype, ffi.from_buffer(x))
    if x.flags.f_contiguous:
        return ffi.cast(ctype, ffi.from_buffer(x.T))
    return ffi.cast(ctype, x.__array_interface__["data"][0])
