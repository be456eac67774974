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
import statistics
from typing import Any

from .cublaslt_api import (  # noqa: F401 (the enumerations are re-exported: callers read them here)
    CUBLAS_COMPUTE_32I,
    CUBLAS_OP_N,
    CUBLAS_OP_T,
    CUDA_R_8I,
    CUDA_R_32I,
    LAYOUT_BATCH_COUNT,
    LAYOUT_STRIDED_BATCH_OFFSET,
    MATMUL_DESC_TRANSA,
    MATMUL_DESC_TRANSB,
    MAX_ALIGNMENT,
    PREF_MAX_WORKSPACE_BYTES,
    PREF_MIN_ALIGNMENT_A_BYTES,
    PREF_MIN_ALIGNMENT_B_BYTES,
    PREF_MIN_ALIGNMENT_C_BYTES,
    PREF_MIN_ALIGNMENT_D_BYTES,
    WORKSPACE_BYTES,
    Algo,
    HeuristicResult,
    Shape,
    _api,
    _descriptors,
    _descs,
    _device,
    _lock,
    _raise,
    available,
    handle,
    library,
    version,
    workspace,
)
from .cublaslt_heuristics import Heuristic, _heuristics, _proposals, heuristics, shape

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
    "capturing",
]

_best: dict[tuple[int, Shape], Heuristic] = {}
_timings: dict[tuple[int, Shape], tuple[tuple[int, float | None], ...]] = {}


def capturing(stream: int) -> bool:
    """Whether ``stream`` is being captured into a CUDA graph.

    Parameters
    ----------
    stream : int
        The stream (``cudaStream_t`` as an int).

    Returns
    -------
    bool
        The runtime's answer; an unanswerable query counts as yes (callers then take
        the path that is safe under capture: no synchronisation, no allocation).
    """
    import cupy

    try:  # the runtime's query on the pointer: no stream object (cupy deprecates ExternalStream)
        return bool(cupy.cuda.runtime.streamIsCapturing(stream))
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

    record = cupy.cuda.runtime.eventRecord
    for _ in range(warmups):
        _matmul(dev, s, algo, *ptrs, stream)
    times: list[float] = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        record(start.ptr, stream)
        _matmul(dev, s, algo, *ptrs, stream)
        record(stop.ptr, stream)
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
    if capturing(st):
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
