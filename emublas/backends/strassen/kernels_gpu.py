"""Fused operand sums and chain writes of Strassen–Winograd on the GPU (native/cuda/strassen.cu).

:func:`ops` returns an object with the two operations the recursion in
:mod:`emublas.backends.strassen.driver` needs, ``sums(x, side)`` and ``update(c, s, beta)``,
as single kernels on cupy's current stream (no host synchronisation); the
leaf GEMMs stay cuBLAS calls through the native backend.  The module is
compiled with NVRTC for the current device (cupy names the device's own
architecture, ``sm_XY`` from its compute capability) and cached per device.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..._kernels import cuda_source

__all__ = ["load_error", "ops", "source_path"]

_SOURCE = "strassen.cu"
_SUFFIX = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}
_TILE = {"s": 32, "d": 32, "c": 32, "z": 16}  # as compiled in strassen.cu
_SUMS_ROWS = 8
_UPDATE_THREADS = 256
_MAX_GRID_Y = 65535

_lock = threading.Lock()
_cache: dict[tuple[int, str], Any] = {}  # (device id, compute capability) -> _CudaOps
_errors: dict[tuple[int, str], str] = {}


def source_path() -> str:
    """Path of ``strassen.cu`` (package data in a wheel, ``native/cuda`` in a checkout).

    Returns
    -------
    str
        The file's path.

    Raises
    ------
    FileNotFoundError
        Neither the package data nor a source checkout holds it.
    """
    return cuda_source.source_path(_SOURCE)


def _device_key() -> tuple[int, str]:
    import cupy

    dev = cupy.cuda.Device()
    return dev.id, dev.compute_capability


def ops() -> _CudaOps | None:
    """The fused kernels for the current device, or None where cupy, a device or the build is missing.

    Returns
    -------
    _CudaOps or None
        Compiled once per device; a failure is remembered (:func:`load_error`).
    """
    try:
        key = _device_key()
    except Exception:  # noqa: BLE001 -- no cupy or no device: the reference expressions run
        return None
    with _lock:
        if key in _cache:
            return _cache[key]
        if key in _errors:
            return None
        try:
            result = _CudaOps(cuda_source.module(_SOURCE))
        except Exception as exc:  # noqa: BLE001 -- compile or load failure: report, fall back
            _errors[key] = f"{type(exc).__name__}: {exc}"
            return None
        _cache[key] = result
        return result


def load_error() -> str | None:
    """Why :func:`ops` returned None on the current device.

    Returns
    -------
    str or None
        The compile or load error in words; None when it did not fail.
    """
    try:
        return _errors.get(_device_key())
    except Exception as exc:  # noqa: BLE001 -- reported, not raised
        return f"{type(exc).__name__}: {exc}"


def _elem_strides(x) -> tuple[int, int] | None:
    s0, s1 = x.strides
    it = x.itemsize
    if s0 % it or s1 % it:
        return None
    return s0 // it, s1 // it


class _CudaOps:
    """The operations of :class:`emublas.backends.strassen.driver._ArrayOps`, as fused kernels."""

    def __init__(self, module: Any) -> None:
        names = ("sums", "update")
        self._fn = {(op, s): module.get_function(f"strassen_{op}_{s}") for op in names for s in "sdcz"}

    def sums(self, x, side: int):
        """The four sums of ``x``'s quadrants (side 0: S1–S4, side 1: T1–T4), in one kernel."""
        import cupy

        suffix = _SUFFIX[x.dtype]
        h, g = x.shape[0] // 2, x.shape[1] // 2
        out = tuple(cupy.empty((h, g), dtype=x.dtype, order="F") for _ in range(4))
        if h == 0 or g == 0:
            return out
        st = _elem_strides(x)
        if st is None:
            x = cupy.asfortranarray(x)
            st = _elem_strides(x)
        assert st is not None  # a Fortran-ordered copy has whole-element strides
        tile = _TILE[suffix]
        grid = ((h + tile - 1) // tile, (g + tile - 1) // tile)
        self._fn["sums", suffix](
            grid,
            (tile, _SUMS_ROWS),
            (
                np.int32(side),
                np.int64(h),
                np.int64(g),
                x,
                np.int64(st[0]),
                np.int64(st[1]),
                np.int32(0),
                *out,
                np.int64(max(1, h)),
            ),
            stream=cupy.cuda.get_current_stream(),
        )
        return out

    def update(self, c, s, beta) -> None:
        """Chain write ``c = s + beta·c`` (c a column-major view; not read when beta is 0)."""
        import cupy

        m, n = c.shape
        if m == 0 or n == 0:
            return
        sc, ss = _elem_strides(c), _elem_strides(s)
        if sc is None or ss is None or s.shape != c.shape or (m > 1 and (sc[0] != 1 or ss[0] != 1)):
            raise ValueError("strassen update needs column-major c and s of one shape")
        lds, ldc = (ss[1], sc[1]) if n > 1 else (m, m)
        beta = complex(beta)
        grid = (min((m + _UPDATE_THREADS - 1) // _UPDATE_THREADS, 1024), min(n, _MAX_GRID_Y))
        self._fn["update", _SUFFIX[c.dtype]](
            grid,
            (_UPDATE_THREADS,),
            (
                np.int64(m),
                np.int64(n),
                np.float64(beta.real),
                np.float64(beta.imag),
                s,
                np.int64(max(1, lds)),
                c,
                np.int64(max(1, ldc)),
            ),
            stream=cupy.cuda.get_current_stream(),
        )
