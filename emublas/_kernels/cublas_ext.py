"""cuBLAS routines through ctypes: the rank-k ones cupy does not wrap (herk, syr2k, her2k),
and the int8 GemmEx of the Ozaki-II products (callable during CUDA-graph capture).

cupy exposes cuBLAS gemm and syrk but not herk, syr2k or her2k.  cupy has
already loaded libcublas into the process, so ``ctypes.CDLL`` by soname finds
that same library, and the routines run on cupy's own handle and stream.
"""

from __future__ import annotations

import ctypes
from functools import cache, lru_cache

__all__ = ["library", "call", "gemm_i8", "gemm_i8_strided_batched"]

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


@cache
def _function(kind: str, prefix: str):
    lib = library()
    if lib is None:
        return None
    fn = getattr(lib, _ROUTINES[kind].format(P=prefix.upper()), None)
    if fn is None:
        return None
    two = kind in ("syr2k", "her2k")
    # handle, uplo, trans, n, k, alpha, A, lda, [B, ldb,] beta, C, ldc
    args = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
    ]
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
    """Call cuBLAS ``{prefix}{kind}`` with raw pointers; raise on a nonzero status.

    Check :func:`available` first: this does not.  The routine runs on the stream the
    handle is set to and reads ``alpha`` and ``beta`` as the handle's pointer mode says
    (host pointers under cupy's default).

    Parameters
    ----------
    kind : str
        ``"herk"``, ``"syr2k"`` or ``"her2k"``.
    prefix : str
        cuBLAS's type letter: ``"s"``, ``"d"``, ``"c"`` or ``"z"`` (``"c"``/``"z"`` only
        for herk and her2k).
    *args
        The routine's arguments in cuBLAS's order, as ints: handle, uplo, trans, n, k,
        alpha pointer, A pointer, lda, then (syr2k and her2k only) B pointer, ldb, then
        beta pointer, C pointer, ldc.  A, B and C are column-major device buffers.

    Raises
    ------
    RuntimeError
        cuBLAS returned a nonzero status (named in the message).
    """
    status = _function(kind, prefix)(*args)
    if status != 0:
        raise RuntimeError(f"cuBLAS {prefix}{kind} failed with status {status}")


@lru_cache(maxsize=1)
def _gemm_ex():
    """``cublasGemmEx`` with cublasSetStream/PointerMode, as ctypes functions (or None)."""
    lib = library()
    if lib is None:
        return None
    gemm = lib.cublasGemmEx
    i, p = ctypes.c_int, ctypes.c_void_p
    gemm.argtypes = [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i]
    gemm.restype = i
    set_stream = lib.cublasSetStream_v2
    set_stream.argtypes, set_stream.restype = [p, p], i
    get_mode = lib.cublasGetPointerMode_v2
    get_mode.argtypes, get_mode.restype = [p, ctypes.POINTER(i)], i
    set_mode = lib.cublasSetPointerMode_v2
    set_mode.argtypes, set_mode.restype = [p, i], i
    return gemm, set_stream, get_mode, set_mode


_ONE = ctypes.c_int32(1)
_ZERO = ctypes.c_int32(0)
# cuBLAS / CUDA enumerations (cublas_api.h, library_types.h)
_CUDA_R_8I, _CUDA_R_32I, _CUBLAS_COMPUTE_32I, _CUBLAS_GEMM_DEFAULT = 3, 10, 72, -1


def gemm_i8(
    handle: int,
    stream: int,
    transa: int,
    transb: int,
    m: int,
    n: int,
    k: int,
    a: int,
    lda: int,
    b: int,
    ldb: int,
    c: int,
    ldc: int,
) -> None:
    """``C = op(A)·op(B)`` in int8 → int32 (``cublasGemmEx``, COMPUTE_32I) on ``handle`` and ``stream``.

    Called through ctypes rather than cupy's wrapper, which refuses every cuBLAS call
    while a stream is being captured into a CUDA graph; cuBLAS itself supports capture.
    The product is queued on ``stream`` without synchronising.  ``handle`` keeps
    ``stream`` as its stream afterwards; its pointer mode is switched to host for the
    call and restored.

    Parameters
    ----------
    handle : int
        A cuBLAS handle (``cublasHandle_t`` as an int), e.g. cupy's
        ``cupy.cuda.device.get_cublas_handle()``.
    stream : int
        The CUDA stream (``cudaStream_t`` as an int; 0: the legacy default stream).
    transa, transb : int
        ``cublasOperation_t`` of A and B: 0 as stored, 1 transposed.
    m, n, k : int
        ``op(A)`` is m×k, ``op(B)`` k×n and C m×n.
    a, lda : int
        Device address and leading dimension (elements) of A, int8 column-major.
    b, ldb : int
        Device address and leading dimension of B, int8 column-major.
    c, ldc : int
        Device address and leading dimension of C, int32 column-major: overwritten
        (beta = 0, so not read).

    Raises
    ------
    RuntimeError
        A cuBLAS call returned a nonzero status (the message names the call).
    """
    gemm, set_stream, get_mode, set_mode = _gemm_ex()
    mode = ctypes.c_int()
    _check(set_stream(handle, stream), "cublasSetStream")
    _check(get_mode(handle, ctypes.byref(mode)), "cublasGetPointerMode")
    if mode.value != 0:
        _check(set_mode(handle, 0), "cublasSetPointerMode")  # host scalars
    try:
        _check(
            gemm(
                handle,
                transa,
                transb,
                m,
                n,
                k,
                ctypes.addressof(_ONE),
                a,
                _CUDA_R_8I,
                lda,
                b,
                _CUDA_R_8I,
                ldb,
                ctypes.addressof(_ZERO),
                c,
                _CUDA_R_32I,
                ldc,
                _CUBLAS_COMPUTE_32I,
                _CUBLAS_GEMM_DEFAULT,
            ),
            "cublasGemmEx",
        )
    finally:
        if mode.value != 0:
            set_mode(handle, mode.value)


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with status {status}")


@lru_cache(maxsize=1)
def _gemm_strided_batched_ex():
    """``cublasGemmStridedBatchedEx`` as a ctypes function (or None)."""
    lib = library()
    if lib is None:
        return None
    fn = lib.cublasGemmStridedBatchedEx
    i, p, ll = ctypes.c_int, ctypes.c_void_p, ctypes.c_longlong
    # handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
    # beta, C, Ctype, ldc, strideC, batchCount, computeType, algo
    fn.argtypes = [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i, ll, i, i, i]
    fn.restype = i
    return fn


def gemm_i8_strided_batched(
    handle: int,
    stream: int,
    transa: int,
    transb: int,
    m: int,
    n: int,
    k: int,
    a: int,
    lda: int,
    stride_a: int,
    b: int,
    ldb: int,
    stride_b: int,
    c: int,
    ldc: int,
    stride_c: int,
    batch: int,
) -> None:
    """``C_i = op(A_i)·op(B_i)`` for i < ``batch``, int8 → int32 (``cublasGemmStridedBatchedEx``,
    COMPUTE_32I, default algorithm) on ``handle`` and ``stream``.

    ``A_i`` starts ``i * stride_a`` elements after ``a`` (likewise B and C).  Called through
    ctypes, like :func:`gemm_i8`, so that it can be captured into a CUDA graph; as there,
    ``handle`` keeps ``stream`` afterwards and its pointer mode is restored.

    Parameters
    ----------
    handle : int
        A cuBLAS handle (``cublasHandle_t`` as an int).
    stream : int
        The CUDA stream (``cudaStream_t`` as an int) the products are queued on.
    transa, transb : int
        ``cublasOperation_t`` of every A_i and B_i: 0 as stored, 1 transposed.
    m, n, k : int
        ``op(A_i)`` is m×k, ``op(B_i)`` k×n and C_i m×n.
    a, lda, stride_a : int
        Device address of A_0, leading dimension and batch stride (both in elements) of
        the int8 column-major A_i.
    b, ldb, stride_b : int
        The same for the int8 column-major B_i.
    c, ldc, stride_c : int
        The same for the int32 column-major C_i, overwritten (beta = 0, so not read).
    batch : int
        Number of products, at least 1.

    Raises
    ------
    ValueError
        ``batch`` is below 1.
    RuntimeError
        libcublas cannot be found, or a cuBLAS call returned a nonzero status.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    fn = _gemm_strided_batched_ex()
    if fn is None:
        raise RuntimeError("cublasGemmStridedBatchedEx is not available (libcublas not found)")
    _, set_stream, get_mode, set_mode = _gemm_ex()
    mode = ctypes.c_int()
    _check(set_stream(handle, stream), "cublasSetStream")
    _check(get_mode(handle, ctypes.byref(mode)), "cublasGetPointerMode")
    if mode.value != 0:
        _check(set_mode(handle, 0), "cublasSetPointerMode")  # host scalars
    try:
        _check(
            fn(
                handle,
                transa,
                transb,
                m,
                n,
                k,
                ctypes.addressof(_ONE),
                a,
                _CUDA_R_8I,
                lda,
                stride_a,
                b,
                _CUDA_R_8I,
                ldb,
                stride_b,
                ctypes.addressof(_ZERO),
                c,
                _CUDA_R_32I,
                ldc,
                stride_c,
                batch,
                _CUBLAS_COMPUTE_32I,
                _CUBLAS_GEMM_DEFAULT,
            ),
            "cublasGemmStridedBatchedEx",
        )
    finally:
        if mode.value != 0:
            set_mode(handle, mode.value)
