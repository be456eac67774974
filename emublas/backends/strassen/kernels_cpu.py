"""Python side of the Strassen–Winograd C driver (native/cpu/strassen.c).

The whole recursion (fused operand sums, chain writes, leaf GEMMs) runs in C
without the GIL; the leaf is scipy's own BLAS ``?gemm``, whose function
pointer ``scipy.linalg.cython_blas`` exports as a PyCapsule.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ..._kernels import cpu

__all__ = ["MAX_LEVELS", "available", "gemm", "release_workspace", "sums", "update"]

#: Deepest recursion the C driver takes (EMUBLAS_STRASSEN_MAX_LEVELS).
MAX_LEVELS = 8

_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.complex64): 2, np.dtype(np.complex128): 3}
_PREFIX = "sdcz"
_INT_MAX = 2**31 - 1
_lock = threading.Lock()
_gemm_ptrs: dict[int, int] = {}


def available() -> bool:
    """Whether the C extension carries the Strassen driver.

    Returns
    -------
    bool
        True when ``emublas._kernels._cpu`` loaded and exports it.
    """
    mod = cpu.load()
    return mod is not None and hasattr(mod.lib, "emublas_strassen_gemm")


def _gemm_pointer(code: int) -> int:
    """Address of scipy's Fortran-convention ``?gemm`` for dtype ``code``."""
    ptr = _gemm_ptrs.get(code)
    if ptr is None:
        from scipy.linalg import cython_blas

        capsule = cython_blas.__pyx_capi__[_PREFIX[code] + "gemm"]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        with _lock:
            ptr = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
            _gemm_ptrs[code] = ptr
    return ptr


def _lib() -> tuple[Any, Any]:
    return cpu.require()


def _addr(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


def _blas_view(x: np.ndarray, trans: int) -> tuple[np.ndarray, int, int] | None:
    """``(x', trans', ld)`` with op'(x') = op(x) and x' column-major with leading dimension ld,
    without copying; None when x has no such layout."""
    rows, cols = x.shape
    it = x.itemsize
    s0, s1 = x.strides
    if (rows <= 1 or s0 == it) and s1 % it == 0 and (cols <= 1 or s1 // it >= max(1, rows)):
        return x, trans, (s1 // it if cols > 1 else max(1, rows))
    if trans in (0, 1) and (cols <= 1 or s1 == it) and s0 % it == 0 and (rows <= 1 or s0 // it >= max(1, cols)):
        return x.T, 1 - trans, (s0 // it if rows > 1 else max(1, cols))
    return None


def _scalar(value: Any, dtype: np.dtype) -> np.ndarray:
    return np.array([value], dtype=dtype)


def gemm(
    alpha: Any,
    a: np.ndarray,
    b: np.ndarray,
    beta: Any,
    c: np.ndarray,
    trans_a: int,
    trans_b: int,
    levels: int,
    threads: int | None = None,
) -> dict | None:
    """``c = alpha·op(a)·op(b) + beta·c`` in place with ``levels`` Strassen–Winograd levels, in C.

    Parameters
    ----------
    alpha, beta : scalar
    a, b : numpy.ndarray
        2-D, the dtype of ``c``; any layout (copied only when neither it nor
        its transpose is column-major).
    c : numpy.ndarray
        2-D float32, float64, complex64 or complex128, written in place.
    trans_a, trans_b : {0, 1, 2}
        op = identity, transpose, conjugate transpose.
    levels : int
        Recursion levels, 0 to :data:`MAX_LEVELS`.
    threads : int, optional
        Threads for the sums and chain writes; default
        :func:`emublas._kernels.cpu.default_threads`.

    Returns
    -------
    dict or None
        ``writes_per_level`` (output writes at each depth) and
        ``workspace_bytes`` (per depth); None when the driver cannot take
        these operands (dimensions beyond a C int), so the caller falls back.

    Raises
    ------
    MemoryError
        The workspace could not be allocated.
    """
    code = _DTYPES[np.dtype(c.dtype)]
    m, n = c.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if max(m, n, k) > _INT_MAX or not 0 <= levels <= MAX_LEVELS:
        return None
    nthreads = cpu.default_threads() if threads is None else int(threads)
    ops = []
    for x, t in ((a, trans_a), (b, trans_b)):
        view = _blas_view(x, t)
        if view is None:
            x = np.asfortranarray(x)
            view = (x, t, max(1, x.shape[0]))
        ops.append(view)
    (a2, ta, lda), (b2, tb, ldb) = ops
    target = c
    cv = _blas_view(c, 0)
    if cv is None or cv[1] != 0 or np.may_share_memory(c, a2) or np.may_share_memory(c, b2):
        target = np.array(c, order="F") if beta != 0 else np.empty((m, n), c.dtype, "F")
        ldc = max(1, m)
    else:
        ldc = cv[2]
    if max(lda, ldb, ldc) > _INT_MAX:
        return None
    ffi, lib = _lib()
    writes = np.zeros(max(levels, 1), dtype=np.int64)
    wsb = np.zeros(max(levels, 1), dtype=np.int64)
    al, be = _scalar(alpha, c.dtype), _scalar(beta, c.dtype)
    rc = lib.emublas_strassen_gemm(
        code,
        ffi.cast("void *", _gemm_pointer(code)),
        ta,
        tb,
        m,
        n,
        k,
        ffi.cast("void *", _addr(al)),
        ffi.cast("void *", _addr(a2)),
        lda,
        ffi.cast("void *", _addr(b2)),
        ldb,
        ffi.cast("void *", _addr(be)),
        ffi.cast("void *", _addr(target)),
        ldc,
        levels,
        nthreads,
        ffi.cast("int64_t *", _addr(writes)),
        ffi.cast("int64_t *", _addr(wsb)),
    )
    if rc == lib.EMUBLAS_ENOMEM:
        raise MemoryError(f"emublas strassen: cannot allocate the workspace for {m}x{n}x{k}")
    if rc != lib.EMUBLAS_OK:
        raise ValueError(f"emublas strassen: invalid arguments (code {rc}) for {m}x{n}x{k}")
    if target is not c:
        c[...] = target
    used = [d for d in range(levels) if writes[d]]
    return {"writes_per_level": {d: int(writes[d]) for d in used}, "workspace_bytes": {d: int(wsb[d]) for d in used}}


def sums(x: np.ndarray, side: int, conj: bool = False, threads: int | None = None) -> tuple[np.ndarray, ...]:
    """The four operand sums of ``x`` (2h × 2g) in one pass, as the driver forms them.

    Parameters
    ----------
    x : numpy.ndarray
        2-D, even shape, any strides that are whole elements.
    side : {0, 1}
        0: S1..S4 (A side), 1: T1..T4 (B side), docs/design.md §6.2.
    conj : bool
        Conjugate the elements as they are read (complex only).

    Returns
    -------
    tuple of numpy.ndarray
        Four Fortran-ordered h × g arrays.
    """
    code = _DTYPES[np.dtype(x.dtype)]
    rows, cols = x.shape
    if rows % 2 or cols % 2:
        raise ValueError(f"sums needs an even shape, got {x.shape}")
    if x.strides[0] % x.itemsize or x.strides[1] % x.itemsize:
        x = np.asfortranarray(x)
    h, g = rows // 2, cols // 2
    out = [np.empty((h, g), x.dtype, order="F") for _ in range(4)]
    ffi, lib = _lib()
    p = [ffi.cast("void *", _addr(o)) for o in out]
    rc = lib.emublas_strassen_sums(
        code,
        side,
        h,
        g,
        ffi.cast("void *", _addr(x)),
        x.strides[0] // x.itemsize,
        x.strides[1] // x.itemsize,
        int(conj),
        *p,
        max(1, h),
        cpu.default_threads() if threads is None else int(threads),
    )
    if rc != lib.EMUBLAS_OK:
        raise ValueError(f"emublas strassen sums: invalid arguments (code {rc})")
    return tuple(out)


def update(c: np.ndarray, s: np.ndarray, beta: Any, threads: int | None = None) -> None:
    """Chain write ``c = s + beta·c`` in place.

    Parameters
    ----------
    c : numpy.ndarray
        Fortran-ordered output, updated in place; not read when ``beta`` is 0.
    s : numpy.ndarray
        Fortran-ordered, of ``c``'s shape and dtype.
    beta : float or complex
        The scale of ``c``.
    threads : int, optional
        Threads of the C kernel; None: the package default.

    Raises
    ------
    ValueError
        Operands that are not Fortran-ordered or differ in shape or dtype.
    """
    code = _DTYPES[np.dtype(c.dtype)]
    if not (c.flags.f_contiguous and s.flags.f_contiguous) or s.dtype != c.dtype or s.shape != c.shape:
        raise ValueError("update needs Fortran-ordered c and s of one shape and dtype")
    ffi, lib = _lib()
    m, n = c.shape
    be = _scalar(beta, c.dtype)
    rc = lib.emublas_strassen_update(
        code,
        m,
        n,
        ffi.cast("void *", _addr(be)),
        ffi.cast("void *", _addr(s)),
        max(1, m),
        ffi.cast("void *", _addr(c)),
        max(1, m),
        cpu.default_threads() if threads is None else int(threads),
    )
    if rc != lib.EMUBLAS_OK:
        raise ValueError(f"emublas strassen update: invalid arguments (code {rc})")


def release_workspace() -> int:
    """Free the workspace the driver keeps between calls.

    Returns
    -------
    int
        Bytes released.
    """
    if not available():
        return 0
    _, lib = _lib()
    return int(lib.emublas_strassen_release())
