"""The ctypes binding of libcublasLt that :mod:`emublas._kernels.cublaslt` calls.

What it holds: the cuBLAS / cuBLASLt enumerations and structures these modules use, the
library (the libcublasLt beside the libcublas that cupy loaded) and its function table,
status checks, and the per-device and per-stream objects that live for the process:

* one cuBLASLt handle per device (:func:`handle`);
* one workspace of :data:`WORKSPACE_BYTES` per (device, stream) (:func:`workspace`),
  never freed, because a CUDA graph captured on that stream keeps using it;
* the matmul and layout descriptors per shape key, which
  :func:`emublas._kernels.cublaslt.clear_caches` destroys.

``_lock``, the one lock the cuBLASLt modules take around their caches, is defined here.
This module imports without cupy; everything that touches the GPU imports cupy when called.
"""

from __future__ import annotations

import ctypes
import os
import threading
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, NamedTuple

__all__ = [
    "WORKSPACE_BYTES",
    "CUDA_R_8I",
    "CUDA_R_32I",
    "CUBLAS_COMPUTE_32I",
    "CUBLAS_OP_N",
    "CUBLAS_OP_T",
    "MATMUL_DESC_TRANSA",
    "MATMUL_DESC_TRANSB",
    "LAYOUT_BATCH_COUNT",
    "LAYOUT_STRIDED_BATCH_OFFSET",
    "PREF_MAX_WORKSPACE_BYTES",
    "PREF_MIN_ALIGNMENT_A_BYTES",
    "PREF_MIN_ALIGNMENT_B_BYTES",
    "PREF_MIN_ALIGNMENT_C_BYTES",
    "PREF_MIN_ALIGNMENT_D_BYTES",
    "MAX_ALIGNMENT",
    "Algo",
    "HeuristicResult",
    "Shape",
    "library",
    "available",
    "version",
    "handle",
    "workspace",
]

WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommended workspace on Hopper

# cuBLAS / CUDA enumerations (library_types.h, cublas_api.h, cublasLt.h)
CUDA_R_8I, CUDA_R_32I = 3, 10
CUBLAS_COMPUTE_32I = 72
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
# cublasLtMatmulDescAttributes_t (int32 values)
MATMUL_DESC_TRANSA, MATMUL_DESC_TRANSB = 3, 4
# cublasLtMatrixLayoutAttribute_t
LAYOUT_BATCH_COUNT = 5  # int32
LAYOUT_STRIDED_BATCH_OFFSET = 6  # int64, elements
# cublasLtMatmulPreferenceAttributes_t
PREF_MAX_WORKSPACE_BYTES = 1  # uint64
PREF_MIN_ALIGNMENT_A_BYTES, PREF_MIN_ALIGNMENT_B_BYTES = 5, 6  # uint32
PREF_MIN_ALIGNMENT_C_BYTES, PREF_MIN_ALIGNMENT_D_BYTES = 7, 8  # uint32
MAX_ALIGNMENT = 256  # the preference's default: the most any kernel asks for

_STATUS = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}
_SONAMES = ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so")


class Algo(ctypes.Structure):
    """``cublasLtMatmulAlgo_t``: 64 opaque bytes that name one kernel configuration."""

    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    """``cublasLtMatmulHeuristicResult_t``, one entry of cuBLASLt's proposals."""

    _fields_ = [
        ("algo", Algo),
        ("workspaceSize", ctypes.c_size_t),
        ("state", ctypes.c_int),  # cublasStatus_t
        ("wavesCount", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


class Shape(NamedTuple):
    """A product's shape key: dimensions, batch, strides (elements) and pointer alignments (bytes)."""

    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    batch: int
    stride_a: int
    stride_b: int
    stride_c: int
    align_a: int
    align_b: int
    align_c: int


def _raise(status: int, what: str) -> None:
    if status != 0:
        name = _STATUS.get(status, "unknown status")
        raise RuntimeError(f"{what} failed with status {status} ({name})")


# --------------------------------------------------------------------------
# the library
# --------------------------------------------------------------------------


def _loaded_paths() -> list[str]:
    """Paths of the libcublasLt objects already mapped into this process (Linux)."""
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "libcublasLt.so" in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/"))


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """The libcublasLt beside the libcublas that cupy loaded, or None where none can be found."""
    from . import cublas_ext

    blas = cublas_ext.library()  # imports cupy and makes it load libcublas (which loads libcublasLt)
    names: list[str] = []
    if blas is not None:
        base = os.path.basename(getattr(blas, "_name", "") or "")
        if base.startswith("libcublas.so"):
            names.append("libcublasLt.so" + base[len("libcublas.so") :])  # the same major version
    names += [*_SONAMES, *_loaded_paths()]
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@lru_cache(maxsize=1)
def _api() -> SimpleNamespace:
    lib = library()
    if lib is None:
        raise RuntimeError(
            "libcublasLt could not be loaded (tried the soname of cupy's libcublas and " + ", ".join(_SONAMES) + ")"
        )
    p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    pp = ctypes.POINTER(ctypes.c_void_p)
    signatures: dict[str, tuple[list[Any], Any]] = {
        "cublasLtGetVersion": ([], sz),
        "cublasLtCreate": ([pp], i),
        "cublasLtDestroy": ([p], i),
        "cublasLtMatmulDescCreate": ([pp, i, i], i),
        "cublasLtMatmulDescDestroy": ([p], i),
        "cublasLtMatmulDescSetAttribute": ([p, i, p, sz], i),
        "cublasLtMatrixLayoutCreate": ([pp, i, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64], i),
        "cublasLtMatrixLayoutDestroy": ([p], i),
        "cublasLtMatrixLayoutSetAttribute": ([p, i, p, sz], i),
        "cublasLtMatmulPreferenceCreate": ([pp], i),
        "cublasLtMatmulPreferenceDestroy": ([p], i),
        "cublasLtMatmulPreferenceSetAttribute": ([p, i, p, sz], i),
        # handle, op desc, A/B/C/D desc, preference, requested count, results, returned count
        "cublasLtMatmulAlgoGetHeuristic": (
            [p, p, p, p, p, p, p, i, ctypes.POINTER(HeuristicResult), ctypes.POINTER(i)],
            i,
        ),
        # handle, op desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, size, stream
        "cublasLtMatmul": ([p, p, p, p, p, p, p, p, p, p, p, p, ctypes.POINTER(Algo), p, sz, p], i),
    }
    fns = {}
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
        fns[name[len("cublasLt") :]] = fn
    return SimpleNamespace(**fns)


def available() -> bool:
    """Whether cuBLASLt can be called here (cupy imports and libcublasLt loads).

    Returns
    -------
    bool
        True when libcublasLt loaded and has every entry point this module calls;
        False on any failure (no cupy, no library, a missing symbol).
    """
    try:
        _api()
    except Exception:
        return False
    return True


def version() -> int:
    """``cublasLtGetVersion()``: e.g. 120903 for cuBLAS 12.9.3.

    Returns
    -------
    int
        The loaded libcublasLt's version, major·10000 + minor·100 + patch.

    Raises
    ------
    RuntimeError
        libcublasLt cannot be loaded (without cupy: the ImportError of cupy).
    """
    return int(_api().GetVersion())


# --------------------------------------------------------------------------
# handles, workspaces, descriptors
# --------------------------------------------------------------------------

_lock = threading.RLock()
_handles: dict[int, int] = {}
_workspaces: dict[tuple[int, int], Any] = {}
_descs: dict[tuple[int, ...], tuple[int, int, int, int]] = {}


def _device() -> int:
    import cupy

    return int(cupy.cuda.runtime.getDevice())


def handle(device: int | None = None) -> int:
    """The cuBLASLt handle of ``device`` (default: the current one), created on first use.

    Parameters
    ----------
    device : int, optional
        CUDA device ordinal (default: cupy's current device).

    Returns
    -------
    int
        The ``cublasLtHandle_t`` as an int, kept for the life of the process (not
        destroyed by :func:`clear_caches`).

    Raises
    ------
    RuntimeError
        libcublasLt cannot be loaded or ``cublasLtCreate`` fails.
    """
    dev = _device() if device is None else int(device)
    with _lock:
        if dev not in _handles:
            import cupy

            h = ctypes.c_void_p()
            with cupy.cuda.Device(dev):
                _raise(_api().Create(ctypes.byref(h)), "cublasLtCreate")
            _handles[dev] = int(h.value or 0)
        return _handles[dev]


def workspace(device: int | None = None, stream: int | None = None) -> tuple[int, int]:
    """(pointer, bytes) of the cuBLASLt workspace of ``device`` and ``stream`` (defaults: current).

    Parameters
    ----------
    device : int, optional
        CUDA device ordinal (default: cupy's current device).
    stream : int, optional
        The stream (``cudaStream_t`` as an int; default: cupy's current stream).

    Returns
    -------
    tuple of int
        The workspace's device address and its size, :data:`WORKSPACE_BYTES`.  It is
        allocated on ``device`` the first time this pair is asked for and never freed.
    """
    import cupy

    dev = _device() if device is None else int(device)
    st = cupy.cuda.get_current_stream().ptr if stream is None else int(stream)
    with _lock:
        if (dev, st) not in _workspaces:
            with cupy.cuda.Device(dev):
                _workspaces[dev, st] = cupy.empty(WORKSPACE_BYTES, dtype=cupy.uint8)
        return int(_workspaces[dev, st].data.ptr), WORKSPACE_BYTES


def _set(setter, obj: int, attr: int, value: ctypes._SimpleCData, what: str) -> None:
    _raise(setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), what)


def _layout(dtype: int, rows: int, cols: int, ld: int, batch: int, stride: int) -> int:
    api = _api()
    out = ctypes.c_void_p()
    _raise(api.MatrixLayoutCreate(ctypes.byref(out), dtype, rows, cols, ld), "cublasLtMatrixLayoutCreate")
    lay = int(out.value or 0)
    try:
        if batch > 1:
            setter, what = api.MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute"
            _set(setter, lay, LAYOUT_BATCH_COUNT, ctypes.c_int32(batch), what + "(BATCH_COUNT)")
            _set(setter, lay, LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(stride), what + "(STRIDED_BATCH_OFFSET)")
    except Exception:
        api.MatrixLayoutDestroy(lay)
        raise
    return lay


def _descriptors(s: Shape) -> tuple[int, int, int, int]:
    """(matmul desc, A layout, B layout, C/D layout) of a shape, created once."""
    key = s[:10]  # descriptors do not depend on the pointers' alignments
    with _lock:
        if key in _descs:
            return _descs[key]
        api = _api()
        out = ctypes.c_void_p()
        _raise(api.MatmulDescCreate(ctypes.byref(out), CUBLAS_COMPUTE_32I, CUDA_R_32I), "cublasLtMatmulDescCreate")
        desc = int(out.value or 0)
        made = [desc]
        try:
            setter, what = api.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute"
            _set(setter, desc, MATMUL_DESC_TRANSA, ctypes.c_int32(CUBLAS_OP_T), what + "(TRANSA)")
            _set(setter, desc, MATMUL_DESC_TRANSB, ctypes.c_int32(CUBLAS_OP_N), what + "(TRANSB)")
            # A and B as stored: k×m and k×n (op(A) = Aᵀ); C = D, m×n
            made.append(_layout(CUDA_R_8I, s.k, s.m, s.lda, s.batch, s.stride_a))
            made.append(_layout(CUDA_R_8I, s.k, s.n, s.ldb, s.batch, s.stride_b))
            made.append(_layout(CUDA_R_32I, s.m, s.n, s.ldc, s.batch, s.stride_c))
        except Exception:
            api.MatmulDescDestroy(made[0])
            for lay in made[1:]:
                api.MatrixLayoutDestroy(lay)
            raise
        _descs[key] = (made[0], made[1], made[2], made[3])
        return _descs[key]
