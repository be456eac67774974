"""cuBLAS rank-k routines that cupy does not wrap (herk, syr2k, her2k), via ctypes.

cupy exposes cuBLAS gemm and syrk but not herk, syr2k or her2k.  cupy has
already loaded libcublas into the process, so ``ctypes.CDLL`` by soname finds
that same library, and the routines run on cupy's own handle and stream.
"""
from __future__ import annotations

import ctypes
from functools import lru_cache

__all__ = ["library", "call"]

_SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")
_ROUTINES = {"herk": "cublas{P}herk_v2", "syr2k": "cublas{P}syr2k_v2", "her2k": "cublas{P}her2k_v2"}


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """The libcublas that cupy loaded, or None where none can be found."""
    import cupy

    cupy.cuda.device.get_cublas_handle()  # makes sure cupy has loaded libcublas
    for name in _SONAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@lru_cache(maxsize=None)
def _function(kind: str, prefix: str):
    lib = library()
    if lib is None:
        return None
    fn = getattr(lib, _ROUTINES[kind].format(P=prefix.upper()), None)
    if fn is None:
        return None
    two = kind in ("syr2k", "her2k")
    # handle, uplo, trans, n, k, alpha, A, lda, [B, ldb,] beta, C, ldc
    args = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int]
    if two:
        args += [ctypes.c_void_p, ctypes.c_int]
    args += [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    fn.argtypes = args
    fn.restype = ctypes.c_int
    return fn


def available(kind: str, prefix: str) -> bool:
    """Whether cuBLAS's ``{prefix}{kind}`` can be called here."""
    try:
        return _function(kind, prefix) is not None
    except Exception:
        return False


def call(kind: str, prefix: str, *args) -> None:
    """Call cuBLAS ``{prefix}{kind}`` with raw pointers; raise on a nonzero status."""
    status = _function(kind, prefix)(*args)
    if status != 0:
        raise RuntimeError(f"cuBLAS {prefix}{kind} failed with status {status}")
