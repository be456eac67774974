"""cuBLASLt's shape keys and algorithm proposals for the int8 TN products of
:mod:`emublas._kernels.cublaslt`.

:func:`shape` validates a product's dimensions, batch strides and pointers into the
:class:`~emublas._kernels.cublaslt_api.Shape` key the caches use; :func:`heuristics`
asks ``cublasLtMatmulAlgoGetHeuristic`` for the algorithms of a shape (with the pointers'
alignments in the preference) and keeps the usable ones per (device, shape, count), until
:func:`emublas._kernels.cublaslt.clear_caches`.  Host-only work: callable during stream capture.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from .cublaslt_api import (
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
    _device,
    _lock,
    _raise,
    _set,
    handle,
)

__all__ = ["Heuristic", "shape", "heuristics"]

_INT32_MAX = 2**31 - 1


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


_proposals: dict[tuple[int, Shape, int], tuple[Heuristic, ...]] = {}


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
