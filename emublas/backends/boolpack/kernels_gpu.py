"""Python side of the boolpack CUDA kernels (native/cuda/boolpack.cu), through cupy.

The source is compiled with ``cupy.RawModule`` for the current device's
compute capability.  Packing uses warp ballots (``bp_pack``); the GEMM is
the binary tensor-core kernel ``bp_gemm_mma`` (``mma.sync ... .b1.b1.s32.and.popc``,
m16n8k256) on compute capability 8.0 .. 9.0 and the ``__popc`` tiled kernel
``bp_gemm_popc`` elsewhere.  Everything runs on cupy's current stream.

Packed operands are padded as the kernels expect: rows to a multiple of 128
(zero rows) and k to a multiple of 512 bits (zero bits).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from ..._kernels import cuda_source

__all__ = ["GpuPacked", "GpuLeaf", "source_path", "kernel_for", "pack", "gemm", "matmul01"]

_ROW_PAD = 128
_K_WORDS = 16  # BKW in the .cu: words per pipeline stage
_THREADS = 256


def source_path() -> str:
    """Where the CUDA source is (see :mod:`emublas._kernels.cuda_source`).

    Returns
    -------
    str
        The path of ``boolpack.cu``.
    """
    return cuda_source.source_path("boolpack.cu")


def _cc() -> int:
    import cupy

    return int(cupy.cuda.Device().compute_capability)


def _module(cc: int):
    # compiled by cupy for the current device (cc only keeps the call sites' signature)
    return cuda_source.module("boolpack.cu")


def kernel_for(cc: int) -> str:
    """The product kernel for a compute capability.

    Parameters
    ----------
    cc : int
        The device's compute capability as ``10·major + minor`` (90 for sm_90).

    Returns
    -------
    {"mma", "popc"}
        ``"mma"`` (binary tensor cores, native on sm_80 .. sm_90), else ``"popc"``.
    """
    return "mma" if 80 <= cc <= 90 else "popc"


class GpuPacked:
    """A packed operand on the GPU: 32-bit words holding ``rows`` 0/1 vectors of length ``k``.

    Parameters
    ----------
    words : cupy.ndarray of uint32
        Shape (rows padded, words per row): the bits of each vector along k.
    rows : int
        How many vectors: rows of A or columns of B.
    k : int
        The length of each vector, in bits.
    """

    __slots__ = ("words", "rows", "k")

    def __init__(self, words: Any, rows: int, k: int):
        self.words, self.rows, self.k = words, rows, k


def pack(x: Any, side: int) -> GpuPacked:
    """Pack rows of A (``side=0``, x is m × k) or columns of B (``side=1``, x is k × n).

    Parameters
    ----------
    x : cupy.ndarray
        2-D 0/1 data: bool, int8 and uint8 are read without conversion, any
        nonzero byte counting as 1; other dtypes are converted to uint8.
    side : {0, 1}
        Which operand ``x`` is.

    Returns
    -------
    GpuPacked
        The vectors along k, 32 bits a word.

    Raises
    ------
    ValueError
        ``x`` not 2-D or ``side`` not 0 or 1.
    """
    import cupy

    if x.ndim != 2 or side not in (0, 1):
        raise ValueError("pack: x must be 2-D and side 0 or 1")
    if x.dtype == cupy.bool_:
        x = x.view(cupy.uint8)
    elif not (x.dtype.itemsize == 1 and x.dtype.kind in "iu"):
        x = x.astype(cupy.uint8)
    v = x if side == 0 else x.T  # rows x k
    v = cupy.ascontiguousarray(v)  # k contiguous: coalesced ballots
    rows, k = v.shape
    ldw = -(-k // (32 * _K_WORDS)) * _K_WORDS
    words = cupy.zeros((-(-max(rows, 1) // _ROW_PAD) * _ROW_PAD, ldw), dtype=cupy.uint32)
    if rows and ldw:
        blocks = min(-(-rows // (_THREADS // 32)), 8192)
        _module(_cc()).get_function("bp_pack")(
            (blocks,),
            (_THREADS,),
            (v, np.int64(rows), np.int64(k), np.int64(v.strides[0]), np.int64(1), words, np.int64(ldw)),
        )
    return GpuPacked(words, rows, k)


def gemm(a: GpuPacked, b: GpuPacked, out: Any = None, *, kernel: str = "auto") -> Any:
    """``out = popcount(A_i AND B_j)`` as int32 (m × n, C-ordered), exact for k < 2**31.

    Parameters
    ----------
    a, b : GpuPacked
        From ``pack(A, 0)`` and ``pack(B, 1)``.
    out : cupy.ndarray, int32, C-contiguous (m, n), optional
        Where to write; a new array when None.
    kernel : {"auto", "mma", "popc"}
        ``auto``: :func:`kernel_for` the current device.

    Returns
    -------
    cupy.ndarray
        ``out``: the m × n int32 counts.

    Raises
    ------
    ValueError
        Different k, a wrong ``out`` or an unknown ``kernel``.
    """
    import cupy

    if a.k != b.k:
        raise ValueError(f"gemm: inner dimensions differ ({a.k} and {b.k})")
    m, n = a.rows, b.rows
    if out is None:
        out = cupy.empty((m, n), dtype=cupy.int32)
    if out.dtype != cupy.int32 or out.shape != (m, n) or not out.flags.c_contiguous:
        raise ValueError(f"gemm: out must be a C-contiguous int32 array of shape {(m, n)}")
    if m == 0 or n == 0:
        return out
    if a.k == 0:
        out.fill(0)
        return out
    cc = _cc()
    kind = kernel_for(cc) if kernel == "auto" else kernel
    if kind not in ("mma", "popc"):
        raise ValueError(f"kernel={kernel!r} is not one of 'auto', 'mma', 'popc'")
    tile = 128 if kind == "mma" else 64
    grid = (-(-n // tile), -(-m // tile))
    _module(cc).get_function("bp_gemm_" + kind)(
        grid, (_THREADS,), (a.words, b.words, np.int64(a.words.shape[1]), out, np.int64(m), np.int64(n), np.int64(n))
    )
    return out


def matmul01(a: Any, b: Any, *, kernel: str = "auto") -> Any:
    """Exact product of two 0/1 cupy matrices.

    Parameters
    ----------
    a, b : cupy.ndarray
        2-D, conforming; any nonzero entry counts as 1 (see :func:`pack`).
    kernel : {"auto", "mma", "popc"}, optional
        As in :func:`gemm`.

    Returns
    -------
    cupy.ndarray
        The m × n int32 product.

    Raises
    ------
    ValueError
        Shapes that do not conform.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul01: shapes {a.shape} and {b.shape} do not conform")
    return gemm(pack(a, 0), pack(b, 1), kernel=kernel)


@cache
def _accumulate_kernel():
    """``o += c · w`` over uint64 (wrapping), c the int32 counts of one plane product: one
    launch where astype, multiply and add were three (the leaf runs one per plane pair)."""
    import cupy

    return cupy.ElementwiseKernel(
        "int32 c, uint64 w", "uint64 o", "o += (unsigned long long)c * w", "emublas_bp_accumulate"
    )


class GpuLeaf:
    """The leaf of :func:`.planes.plane_product` for cupy arrays."""

    def pack_planes(self, x: Any, side: int, nplanes: int) -> list[GpuPacked]:
        """Bit planes 0..nplanes-1 of an integer cupy matrix, each packed by :func:`pack`.

        Parameters
        ----------
        x : cupy.ndarray
            2-D integer data (two's complement bits).
        side : {0, 1}
            0: the left operand (rows), 1: the right one (columns).
        nplanes : int
            How many planes, from the lowest.

        Returns
        -------
        list of GpuPacked
            One packed operand per plane.
        """
        return [pack(((x >> p) & 1).astype("uint8"), side) for p in range(nplanes)]

    def nonzero(self, packed: list[GpuPacked]) -> list[bool]:
        """Which packed planes hold any 1.

        Parameters
        ----------
        packed : list of GpuPacked
            From :meth:`pack_planes`.

        Returns
        -------
        list of bool
            One flag per plane (all read from the device at once).
        """
        import cupy

        if not packed:
            return []
        return [bool(f) for f in cupy.stack([p.words.any() for p in packed]).get()]

    def zeros(self, m: int, n: int) -> Any:
        """An int64 accumulator of zeros on the current GPU.

        Parameters
        ----------
        m, n : int
            Its shape.

        Returns
        -------
        cupy.ndarray
            m × n int64 zeros.
        """
        import cupy

        return cupy.zeros((m, n), dtype=cupy.int64)

    def accumulate(self, pa, p: int, pb, q: int, out: Any, weight: int, first: bool) -> None:
        """``out += weight · A_p·B_q`` for one pair of planes, in wrapping 64-bit arithmetic.

        Parameters
        ----------
        pa, pb : list of GpuPacked
            The packed planes of each operand.
        p, q : int
            The plane of each.
        out : cupy.ndarray
            int64 accumulator from :meth:`zeros`, updated in place.
        weight : int
            ``±2^(p+q)``, taken modulo 2^64.
        first : bool
            Part of the leaf's interface; here ``out`` starts at zero, so the
            first product is added like the others.
        """
        import cupy

        counts = gemm(pa[p], pb[q])  # popcounts: never negative
        w = np.uint64(int(weight) % 2**64)  # wrapping arithmetic, as on the CPU
        _accumulate_kernel()(counts, w, out.view(cupy.uint64))
