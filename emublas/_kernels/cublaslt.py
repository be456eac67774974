"""cuBLASLt int8 products through ctypes: ``C = Aᵀ·B`` (int8 in, int32 out), one product
or a strided batch of them, with the algorithm chosen by cuBLASLt's heuristic or by timing.

The layout is the Ozaki-II products' "TN": A is k×m (lda) and B k×n (ldb), int8
column-major, C m×n (ldc) int32 column-major; compute type CUBLAS_COMPUTE_32I, int32
scalars alpha = 1, beta = 0.  A batch of products whose planes lie at constant
strides (the moduli of one call) goes to cuBLASLt as one strided-batched matmul.

What is cached, for the life of the process (:func:`clear_caches` drops the descriptors
and the choices):

* one cuBLASLt handle per device;
* one workspace of :data:`WORKSPACE_BYTES` per (device, stream): a cupy allocation that
  is never freed, because a CUDA graph captured on that stream keeps using it, and two
  streams must not share one while their products may overlap;
* the matmul and layout descriptors per shape (host objects, destroyed by
  :func:`clear_caches`);
* cuBLASLt's proposals per (device, shape, count) (:func:`heuristics`);
* the fastest proposal per (device, shape), chosen by timing on first use
  (:func:`best_algo`).

The shape key is (m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c) with the
alignments of the A, B and C pointers (cuBLASLt's heuristic must not propose a kernel
that needs more alignment than the buffers have, so the alignments are part of the key).

Timing synchronises the device, so it never happens while a stream is being captured
into a CUDA graph: there :func:`best_algo` and ``matmul_i8_tn(..., algo="best")`` use the
heuristic's first proposal (and do not cache it as the choice), which keeps every call
capturable.  Time a shape once outside capture (a warm-up call) to have the captured
graph use the tuned algorithm.

The library is the libcublasLt beside the libcublas that cupy loaded.  This module
imports without cupy; everything that touches the GPU imports cupy when called.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import threading
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any, NamedTuple

__all__ = [
    "WORKSPACE_BYTES",
    "Algo",
    "HeuristicResult",
    "Heuristic",
    "Shape",
    "library",
    "available",
    "version",
    "handle",
    "workspace",
    "shape",
    "heuristics",
    "best_algo",
    "tuned",
    "matmul_i8_tn",
    "clear_caches",
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
_INT32_MAX = 2**31 - 1


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


@dataclass(frozen=True, eq=False)
class Heuristic:
    """One algorithm cuBLASLt proposes for a shape.

    Attributes
    ----------
    index : int
        Its rank in cuBLASLt's list (0: the heuristic's first choice).
    algo : Algo
        The algorithm, a private copy.
    workspace : int
        Workspace bytes it needs (at most :data:`WORKSPACE_BYTES`).
    state : int
        cuBLASLt's status for it (0: usable).
    waves : float
        cuBLASLt's waves count (1.0: one full wave of thread blocks on the device).
    """

    index: int
    algo: Algo
    workspace: int
    state: int
    waves: float


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
_proposals: dict[tuple[int, Shape, int], tuple[Heuristic, ...]] = {}
_best: dict[tuple[int, Shape], Heuristic] = {}
_timings: dict[tuple[int, Shape], tuple[tuple[int, float | None], ...]] = {}


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


def clear_caches() -> None:
    """Destroy the cached descriptors and forget the proposals and timed choices.

    Handles and workspaces stay (a captured CUDA graph may still use them).
    """
    with _lock:
        if _descs:
            api = _api()
            for desc, a, b, c in _descs.values():
                _raise(api.MatmulDescDestroy(desc), "cublasLtMatmulDescDestroy")
                for lay in (a, b, c):
                    _raise(api.MatrixLayoutDestroy(lay), "cublasLtMatrixLayoutDestroy")
        _descs.clear()
        _ready.clear()
        _proposals.clear()
        _best.clear()
        _timings.clear()


# --------------------------------------------------------------------------
# shapes and algorithms
# --------------------------------------------------------------------------


def _alignment(ptr: int, stride_bytes: int) -> int:
    """Largest power of two (at most 256) dividing the pointer and the batch stride (0: no constraint)."""
    align = MAX_ALIGNMENT
    for v in (ptr, stride_bytes):
        if v:
            align = min(align, v & -v)
    return align


def shape(
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    ldc: int,
    batch: int = 1,
    stride_a: int = 0,
    stride_b: int = 0,
    stride_c: int = 0,
    a_ptr: int = 0,
    b_ptr: int = 0,
    c_ptr: int = 0,
) -> Shape:
    """The validated shape key of a product (pointers 0: assumed aligned to 256 bytes).

    Parameters
    ----------
    m, n, k : int
        C is m×n, the inner dimension k (A is k×m, B k×n).
    lda, ldb, ldc : int
        Leading dimensions (elements) of A, B and C, column-major: at least k, k and m.
    batch : int, optional
        Products in the strided batch.
    stride_a, stride_b, stride_c : int, optional
        Elements from one product's A, B, C to the next's; ignored (stored as 0) when
        ``batch`` is 1.
    a_ptr, b_ptr, c_ptr : int, optional
        Device addresses of A, B and C, read only for their alignments.

    Returns
    -------
    Shape
        The arguments, with each alignment the largest power of two up to
        :data:`MAX_ALIGNMENT` bytes that divides its pointer and, when ``batch`` > 1,
        its batch stride in bytes.

    Raises
    ------
    ValueError
        An argument that is not an int, a dimension or batch outside [1, 2**31 - 1], a
        leading dimension below its matrix's rows, or (batch > 1) a negative stride or a
        C stride below ``ldc * n``, which would make outputs overlap.
    """
    dims = {"m": m, "n": n, "k": k, "lda": lda, "ldb": ldb, "ldc": ldc, "batch": batch}
    strides = {"stride_a": stride_a, "stride_b": stride_b, "stride_c": stride_c}
    for name, v in {**dims, **strides, "a_ptr": a_ptr, "b_ptr": b_ptr, "c_ptr": c_ptr}.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{name} must be an int, got {v!r}")
    for name, v in dims.items():
        if not 1 <= v <= _INT32_MAX:
            raise ValueError(f"{name} must be in [1, 2**31 - 1], got {v}")
    for name, v, rows in (("lda", lda, k), ("ldb", ldb, k), ("ldc", ldc, m)):
        if v < rows:
            raise ValueError(f"{name} must be at least {rows} (the rows of its matrix), got {v}")
    if batch == 1:
        stride_a = stride_b = stride_c = 0  # unused: one key for every single product
    else:
        for name, v in strides.items():
            if v < 0:
                raise ValueError(f"{name} must be non-negative, got {v}")
        if stride_c < ldc * n:
            raise ValueError(f"stride_c must be at least ldc*n = {ldc * n} (the outputs would overlap), got {stride_c}")
    return Shape(
        m,
        n,
        k,
        lda,
        ldb,
        ldc,
        batch,
        stride_a,
        stride_b,
        stride_c,
        _alignment(a_ptr, stride_a if batch > 1 else 0),
        _alignment(b_ptr, stride_b if batch > 1 else 0),
        _alignment(c_ptr, 4 * stride_c if batch > 1 else 0),
    )


def _heuristics(dev: int, s: Shape, count: int) -> tuple[Heuristic, ...]:
    key = (dev, s, count)
    with _lock:
        cached = _proposals.get(key)
        if cached is not None:
            return cached
    api = _api()
    desc, a, b, c = _descriptors(s)
    out = ctypes.c_void_p()
    _raise(api.MatmulPreferenceCreate(ctypes.byref(out)), "cublasLtMatmulPreferenceCreate")
    pref = int(out.value or 0)
    try:
        setter, what = api.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute"
        _set(setter, pref, PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES), what + "(MAX_WORKSPACE_BYTES)")
        for attr, align in (
            (PREF_MIN_ALIGNMENT_A_BYTES, s.align_a),
            (PREF_MIN_ALIGNMENT_B_BYTES, s.align_b),
            (PREF_MIN_ALIGNMENT_C_BYTES, s.align_c),
            (PREF_MIN_ALIGNMENT_D_BYTES, s.align_c),
        ):
            _set(setter, pref, attr, ctypes.c_uint32(align), what + "(MIN_ALIGNMENT)")
        results = (HeuristicResult * count)()
        returned = ctypes.c_int(0)
        _raise(
            api.MatmulAlgoGetHeuristic(handle(dev), desc, a, b, c, c, pref, count, results, ctypes.byref(returned)),
            "cublasLtMatmulAlgoGetHeuristic",
        )
    finally:
        api.MatmulPreferenceDestroy(pref)
    found = tuple(
        Heuristic(i, Algo.from_buffer_copy(r.algo), int(r.workspaceSize), int(r.state), float(r.wavesCount))
        for i, r in enumerate(results[: returned.value])
        if r.state == 0 and r.workspaceSize <= WORKSPACE_BYTES
    )
    if not found:
        raise RuntimeError(f"cublasLtMatmulAlgoGetHeuristic proposes no usable int8 TN algorithm for {s}")
    with _lock:
        _proposals[key] = found
    return found


def heuristics(
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    ldc: int,
    batch: int = 1,
    stride_a: int = 0,
    stride_b: int = 0,
    stride_c: int = 0,
    *,
    align_a: int = MAX_ALIGNMENT,
    align_b: int = MAX_ALIGNMENT,
    align_c: int = MAX_ALIGNMENT,
    count: int = 16,
    device: int | None = None,
) -> tuple[Heuristic, ...]:
    """The algorithms cuBLASLt proposes for ``C = Aᵀ·B`` of this shape, best guess first.

    Parameters
    ----------
    m, n, k, lda, ldb, ldc : int
        Shape and leading dimensions (A k×m, B k×n int8; C m×n int32; column-major).
    batch : int, optional
        Products in the strided batch.
    stride_a, stride_b, stride_c : int, optional
        Elements from one product's matrix to the next's (batch > 1).
    align_a, align_b, align_c : int, optional
        Byte alignment the A, B and C pointers (and their batch strides) are known to have.
    count : int, optional
        How many proposals to ask for (cuBLASLt may return fewer).
    device : int, optional
        Default: the current device.

    Returns
    -------
    tuple of Heuristic
        The usable ones (state 0, workspace at most :data:`WORKSPACE_BYTES`), cached per
        (device, shape).  Host-only work: callable during stream capture.
    """
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive int, got {count!r}")
    for name, v in (("align_a", align_a), ("align_b", align_b), ("align_c", align_c)):
        if not isinstance(v, int) or v < 1 or v & (v - 1):
            raise ValueError(f"{name} must be a power of two, got {v!r}")
    s = shape(m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c)
    s = s._replace(
        align_a=min(align_a, s.align_a, MAX_ALIGNMENT),
        align_b=min(align_b, s.align_b, MAX_ALIGNMENT),
        align_c=min(align_c, s.align_c, MAX_ALIGNMENT),
    )
    return _heuristics(_device() if device is None else int(device), s, count)


def _capturing(stream: int) -> bool:
    """Whether ``stream`` is being captured (an unanswerable query counts as yes: no sync then)."""
    import cupy

    try:
        current = cupy.cuda.get_current_stream()
        st = current if current.ptr == stream else cupy.cuda.ExternalStream(stream)
        return bool(st.is_capturing())
    except Exception:
        return True


_ONE = ctypes.c_int32(1)
_ZERO = ctypes.c_int32(0)
_ONE_P, _ZERO_P = ctypes.addressof(_ONE), ctypes.addressof(_ZERO)
#: matmul_i8_tn's prepared calls: (device, stream, shape, low pointer bits) -> (algo argument,
#: (handle, descriptors, algorithm, workspace)); bounded, dropped by clear_caches()
_ready: dict[tuple, tuple] = {}
_READY_MAX = 4096


def _matmul(dev: int, s: Shape, algo: Algo, a_ptr: int, b_ptr: int, c_ptr: int, stream: int) -> None:
    desc, a, b, c = _descriptors(s)
    ws, ws_bytes = workspace(dev, stream)
    _raise(
        _api().Matmul(
            handle(dev),
            desc,
            ctypes.addressof(_ONE),
            a_ptr,
            a,
            b_ptr,
            b,
            ctypes.addressof(_ZERO),
            c_ptr,
            c,
            c_ptr,
            c,
            ctypes.byref(algo),
            ws,
            ws_bytes,
            stream,
        ),
        "cublasLtMatmul",
    )


def _time(
    dev: int, s: Shape, algo: Algo, ptrs: tuple[int, int, int], stream: int, warmups: int, reps: int, bound: float
) -> float:
    """Median seconds of the product with ``algo`` (CUDA events; stops early past ``bound``)."""
    import cupy

    st = cupy.cuda.ExternalStream(stream)
    for _ in range(warmups):
        _matmul(dev, s, algo, *ptrs, stream)
    times: list[float] = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(st)
        _matmul(dev, s, algo, *ptrs, stream)
        stop.record(st)
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        if times[-1] > 1.5 * bound:  # clearly slower than the best so far: not worth the reps
            break
    return float(statistics.median(times))


def best_algo(
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    ldc: int,
    batch: int = 1,
    stride_a: int = 0,
    stride_b: int = 0,
    stride_c: int = 0,
    *,
    a_ptr: int = 0,
    b_ptr: int = 0,
    c_ptr: int = 0,
    stream: int | None = None,
    count: int = 16,
    warmups: int = 2,
    reps: int = 5,
    device: int | None = None,
) -> Heuristic:
    """The fastest of cuBLASLt's proposals for this shape, timed on first use and cached.

    Each proposal runs ``warmups`` untimed and up to ``reps`` timed products (CUDA
    events on ``stream``; median), on the given buffers (their C is overwritten) or,
    with all three pointers 0, on scratch buffers of the shape's size.  The choice is
    cached per (device, shape key) for the process.  The timing synchronises, so on a
    stream being captured the heuristic's first proposal is returned (and not cached).

    Parameters
    ----------
    m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c : int
        As for :func:`matmul_i8_tn`.
    a_ptr, b_ptr, c_ptr : int, optional
        Device buffers to time on (all or none).
    stream : int, optional
        Stream pointer (default: cupy's current stream).
    count : int, optional
        Proposals to ask cuBLASLt for.
    warmups, reps : int, optional
        Untimed and timed products per proposal.
    device : int, optional
        Default: the current device.

    Returns
    -------
    Heuristic
    """
    import cupy

    if (a_ptr == 0) != (b_ptr == 0) or (a_ptr == 0) != (c_ptr == 0):
        raise ValueError("give all of a_ptr, b_ptr and c_ptr, or none of them (scratch buffers)")
    if warmups < 0 or reps < 1:
        raise ValueError(f"warmups must be >= 0 and reps >= 1, got {warmups} and {reps}")
    dev = _device() if device is None else int(device)
    st = cupy.cuda.get_current_stream().ptr if stream is None else int(stream)
    s = shape(m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, a_ptr, b_ptr, c_ptr)
    key = (dev, s)
    with _lock:
        if key in _best:
            return _best[key]
    proposals = _heuristics(dev, s, count)
    if _capturing(st):
        return proposals[0]
    scratch: list[Any] = []
    if a_ptr == 0:
        with cupy.cuda.Device(dev):
            extents = (
                (s.batch - 1) * s.stride_a + s.lda * (s.m - 1) + s.k,
                (s.batch - 1) * s.stride_b + s.ldb * (s.n - 1) + s.k,
                (s.batch - 1) * s.stride_c + s.ldc * (s.n - 1) + s.m,
            )
            scratch = [
                cupy.zeros(extents[0], cupy.int8),
                cupy.zeros(extents[1], cupy.int8),
                cupy.empty(extents[2], cupy.int32),
            ]
        ptrs = (scratch[0].data.ptr, scratch[1].data.ptr, scratch[2].data.ptr)
    else:
        ptrs = (a_ptr, b_ptr, c_ptr)
    rows: list[tuple[int, float | None]] = []
    best, best_t = None, float("inf")
    with cupy.cuda.Device(dev):
        for h in proposals:
            try:
                t = _time(dev, s, h.algo, ptrs, st, warmups, reps, best_t)
            except RuntimeError:  # cuBLASLt refused this one at run time: not a candidate
                rows.append((h.index, None))
                continue
            rows.append((h.index, t))
            if t < best_t:
                best, best_t = h, t
    del scratch
    if best is None:
        raise RuntimeError(f"cublasLtMatmul refused every proposed algorithm for {s}")
    with _lock:
        _best[key] = best
        _timings[key] = tuple(rows)
    return best


def tuned() -> dict[tuple[int, Shape], tuple[tuple[int, float | None], ...]]:
    """(device, shape) -> ((proposal index, median seconds or None if refused), ...) of every timed choice.

    Returns
    -------
    dict
        A copy, keyed by (device ordinal, :class:`Shape`), of the timings
        :func:`best_algo` recorded since the last :func:`clear_caches`: for each
        proposal timed, its index in cuBLASLt's list and the median of its timed runs in
        seconds, or None where ``cublasLtMatmul`` refused it.
    """
    with _lock:
        return dict(_timings)


def matmul_i8_tn(
    m: int,
    n: int,
    k: int,
    a_ptr: int,
    lda: int,
    b_ptr: int,
    ldb: int,
    c_ptr: int,
    ldc: int,
    batch: int = 1,
    stride_a: int = 0,
    stride_b: int = 0,
    stride_c: int = 0,
    stream: int | None = None,
    algo: None | str | Heuristic | Algo = None,
) -> None:
    """``C_i = A_iᵀ·B_i`` for i < batch, int8 → int32, through ``cublasLtMatmul``.

    Parameters
    ----------
    m, n, k : int
        C is m×n, the inner dimension k.
    a_ptr, lda : int
        Device pointer and leading dimension of A (k×m int8, column-major).
    b_ptr, ldb : int
        Of B (k×n int8, column-major).
    c_ptr, ldc : int
        Of C (m×n int32, column-major), written (beta = 0: not read).
    batch : int, optional
        Products in the strided batch (one cuBLASLt call).
    stride_a, stride_b, stride_c : int, optional
        Elements from one product's A, B, C to the next's.
    stream : int, optional
        Stream pointer (default: cupy's current stream).
    algo : None, "best", Heuristic or Algo, optional
        None: the heuristic's first proposal; "best": :func:`best_algo` (timed on this
        call's buffers the first time this shape is seen, outside stream capture); or
        an algorithm from :func:`heuristics`.

    Notes
    -----
    Queues work on ``stream`` without synchronising (except the first ``"best"`` call of
    a shape, which times), so a call can be captured into a CUDA graph.
    """
    import cupy

    dev = _device()
    st = cupy.cuda.get_current_stream().ptr if stream is None else int(stream)
    # repeated calls (the moduli of a call, the calls of a program) skip validation and lookups:
    # the key holds the low pointer bits, which decide the alignment part of the shape key
    fast = (dev, st, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, a_ptr & 255, b_ptr & 255, c_ptr & 255)
    ready = _ready.get(fast) if isinstance(algo, str) or algo is None else None
    if ready is not None and algo == ready[0]:
        h, desc, la, lb, lc, chosen, ws, ws_bytes = ready[1]
        _raise(
            _api().Matmul(
                h,
                desc,
                _ONE_P,
                a_ptr,
                la,
                b_ptr,
                lb,
                _ZERO_P,
                c_ptr,
                lc,
                c_ptr,
                lc,
                ctypes.byref(chosen),
                ws,
                ws_bytes,
                st,
            ),
            "cublasLtMatmul",
        )
        return
    s = shape(m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, a_ptr, b_ptr, c_ptr)
    if algo is None:
        chosen = _heuristics(dev, s, 16)[0].algo
    elif isinstance(algo, str):
        if algo != "best":
            raise ValueError(f"algo must be None, 'best', a Heuristic or an Algo, got {algo!r}")
        args = (m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c)
        chosen = best_algo(*args, a_ptr=a_ptr, b_ptr=b_ptr, c_ptr=c_ptr, stream=st, device=dev).algo
    elif isinstance(algo, Heuristic):
        chosen = algo.algo
    elif isinstance(algo, Algo):
        chosen = algo
    else:
        raise ValueError(f"algo must be None, 'best', a Heuristic or an Algo, got {algo!r}")
    _matmul(dev, s, chosen, a_ptr, b_ptr, c_ptr, st)
    if (algo is None or (dev, s) in _best) and len(_ready) < _READY_MAX:  # not a capture-time stand-in
        desc, la, lb, lc = _descriptors(s)
        ws, ws_bytes = workspace(dev, st)
        _ready[fast] = (algo, (handle(dev), desc, la, lb, lc, chosen, ws, ws_bytes))
