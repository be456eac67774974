"""The argument rules the BLAS-3 fronts share (:mod:`emublas.blas`, :mod:`emublas.level3`).

The prefix of a generic call, the legal trans codes, the result array and its aliasing with
the inputs, the quick-return scaling, and the text of the call options in the docstrings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _triangles as tri
from ._arrays import as_matrix, flag, is_cupy

__all__ = [
    "DTYPES",
    "prefix_of",
    "device_name",
    "prepare_out",
    "trans_codes",
    "given",
    "scale_out",
    "OVERWRITE_C_DOC",
    "CALL_OPTIONS_DOC",
]

DTYPES: dict[str, np.dtype[Any]] = {
    "s": np.dtype(np.float32),
    "d": np.dtype(np.float64),
    "c": np.dtype(np.complex64),
    "z": np.dtype(np.complex128),
}


def prefix_of(**arrays: Any) -> str:
    """BLAS prefix for the generic routines, promoted like scipy's find_best_blas_type.

    Parameters
    ----------
    **arrays
        The call's operands by name (None for an absent one).

    Returns
    -------
    str
        "s", "d", "c" or "z".
    """
    # imported here: importing scipy.linalg.blas is what triggers the interpose start-up hook
    from scipy.linalg.blas import find_best_blas_type

    probes = []
    for x in arrays.values():
        if x is None:
            continue
        dt = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
        probes.append(np.empty(0, dtype=dt))
    prefix, _, _ = find_best_blas_type(probes)
    return prefix


def device_name(xp) -> str:
    """The device of an array namespace, as the backends' readiness checks name it.

    Parameters
    ----------
    xp : module
        numpy or cupy.

    Returns
    -------
    {"cpu", "gpu"}
    """
    return "cpu" if xp is np else "gpu"


def prepare_out(c: Any, shape: tuple[int, int], dtype: np.dtype, xp, overwrite_c: bool, *inputs):
    """The array the routine writes and returns.

    ``c`` itself when BLAS would update it in place (``overwrite_c`` and ``c``
    already a Fortran-contiguous, writeable array of the right dtype),
    otherwise a Fortran-ordered copy; zeros when ``c`` is None.  Returns
    ``(out, alias)`` where ``alias`` is True when ``out`` overlaps an input, in
    which case the caller must compute into a temporary first.

    Parameters
    ----------
    c : array or None
        The caller's ``c``.
    shape : tuple of int
        The result's shape.
    dtype : numpy.dtype
        The routine's dtype.
    xp : module
        numpy or cupy.
    overwrite_c : bool
        The caller's ``overwrite_c``.
    *inputs : array
        The operands, for the aliasing check.

    Returns
    -------
    out : array
        The result array.
    alias : bool
        Whether ``out`` shares memory with an input.

    Raises
    ------
    ValueError
        ``c`` of the wrong shape.
    """
    if c is None:
        return xp.zeros(shape, dtype=dtype, order="F"), False
    is_array = isinstance(c, np.ndarray) if xp is np else is_cupy(c)
    arr = as_matrix(c, dtype, xp, "c") if not is_array or c.ndim != 2 else c
    if arr.shape != shape:
        raise ValueError(f"c has shape {arr.shape[0]}x{arr.shape[1]} but the result is {shape[0]}x{shape[1]}")
    in_place = overwrite_c and is_array and arr is c and c.dtype == dtype
    if in_place:
        flags = c.flags  # a new object per access
        in_place = flags.f_contiguous and (xp is not np or flags.writeable)
    if not in_place:
        return xp.array(arr, dtype=dtype, order="F", copy=True), False
    if xp is np:
        for x in inputs:  # a plain loop: a generator costs more than the one or two tests
            if np.may_share_memory(c, x):
                return c, True
        return c, False
    return c, _cupy_overlaps(c, inputs)


def _cupy_overlaps(c, inputs) -> bool:
    """Whether the bytes cupy array ``c`` spans overlap any input's (cupy.may_share_memory's
    bounds test, without its Python-level cost on every call)."""
    lo, hi = _span(c)
    dev = c.data.device_id
    for x in inputs:
        if x.data.device_id == dev:
            xl, xh = _span(x)
            if xl < hi and lo < xh:
                return True
    return False


def _span(x) -> tuple[int, int]:
    """[first byte, one past the last byte] a 2-D array's elements occupy; empty for none."""
    (rows, cols), (s0, s1) = x.shape, x.strides
    if rows == 0 or cols == 0:
        return 0, 0
    p = x.data.ptr
    d0, d1 = (rows - 1) * s0, (cols - 1) * s1
    return p + min(d0, 0) + min(d1, 0), p + max(d0, 0) + max(d1, 0) + x.itemsize


def trans_codes(prefix: str, kind: str, trans: Any, name: str = "trans") -> int:
    """Legal trans codes per routine; real routines map 2 (C) to 1 (T).

    scipy lets BLAS print a warning and return garbage for an illegal code;
    emublas raises instead.

    Parameters
    ----------
    prefix : {"s", "d", "c", "z"}
    kind : str
        The routine without its prefix.
    trans : int-like
        The caller's code.
    name : str, optional
        The argument's name in messages.

    Returns
    -------
    int
        0, 1 or 2.

    Raises
    ------
    ValueError
        A code the routine does not take (the message says why).
    """
    if prefix in "sd":
        return min(flag(trans, name, (0, 1, 2)), 1)
    if kind in ("syrk", "syr2k"):
        allowed = (0, 1)
        why = (
            "a conjugate transpose is not defined for complex symmetric updates"
            f" (use {prefix}{kind.replace('sy', 'he')})"
        )
    elif kind in ("herk", "her2k"):
        allowed = (0, 2)
        why = f"a plain transpose is not defined for Hermitian updates (use {prefix}{kind.replace('he', 'sy')})"
    else:
        return flag(trans, name, (0, 1, 2))
    try:
        return flag(trans, "trans", allowed)
    except ValueError:
        raise ValueError(f"{prefix}{kind}: trans must be one of {allowed}, got {trans!r}; {why}") from None


def given(raw, arr) -> str:
    """How an operand is named in a shape error: as the caller passed it.

    Parameters
    ----------
    raw : object
        The operand as passed.
    arr : array
        It as a matrix.

    Returns
    -------
    str
    """
    ndim = getattr(raw, "ndim", None)
    if ndim is None:
        ndim = np.ndim(raw)
    if ndim == 1:
        return f"1-D of length {arr.shape[0]}, read as a {arr.shape[0]}x1 column"
    if ndim == 0:
        return "a scalar, read as 1x1"
    return f"{arr.shape[0]}x{arr.shape[1]}"


def scale_out(out, beta, xp) -> None:
    """``out = beta·out`` for a quick return (beta = 0 writes zeros: ``out`` is not read).

    Parameters
    ----------
    out : array
        Updated in place.
    beta : scalar
    xp : module
        numpy or cupy.
    """
    if beta == 0:
        out.fill(0)
    elif beta != 1:
        tri.scale(out, None, beta)  # keeps float32 subnormals on cupy too


OVERWRITE_C_DOC = """overwrite_c : int, optional
    If nonzero and ``c`` is a Fortran-contiguous array of the routine's dtype,
    ``c`` is updated in place and returned.  Otherwise ``c`` is not modified.
"""
CALL_OPTIONS_DOC = """backend : str, optional
    Backend for this call (see :func:`emublas.use`).
**options
    Backend options for this call.
"""
