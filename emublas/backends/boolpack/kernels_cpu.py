"""Python side of the boolpack CPU kernels (native/cpu/boolpack.c).

0/1 matrix products as AND + popcount of packed uint64 words.  :func:`pack`
turns rows of A (``side=0``) or columns of B (``side=1``) into the kernel's
panel layout -- one plane for 0/1 data, or the bit planes of int64 data --
and :func:`gemm` multiplies two packed operands into an int32 or int64
output, optionally adding ``weight`` times the product (bit-plane sums).
:func:`matmul01` does both for two 0/1 matrices.  Calls release the GIL
(cffi does for out-of-line API calls).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._kernels import cpu
from ..._kernels.operands import ptr

__all__ = ["IMPLS", "Packed", "kernel_name", "pack", "gemm", "matmul01"]

#: Valid values of the ``impl`` argument.
IMPLS: tuple[str, ...] = ("auto", "generic", "vpopcntdq")
_IMPL_CODES = {"auto": 0, "generic": 1, "vpopcntdq": 2}


class Packed:
    """A packed operand: ``words[p]`` holds plane p of ``rows`` vectors of length ``k``.

    Parameters
    ----------
    words : numpy.ndarray of uint64
        Shape (nplanes, words per plane): the bits of each plane, vector after vector.
    rows : int
        How many vectors: rows of A or columns of B.
    k : int
        The length of each vector (the product's inner dimension), in bits.
    side : {0, 1}
        0: rows of the left operand; 1: columns of the right one.
    """

    __slots__ = ("words", "rows", "k", "side")

    def __init__(self, words: np.ndarray, rows: int, k: int, side: int):
        self.words, self.rows, self.k, self.side = words, rows, k, side

    @property
    def nplanes(self) -> int:
        """How many bit planes ``words`` holds."""
        return self.words.shape[0]

    def nonzero_planes(self) -> np.ndarray:
        """Which planes hold at least one 1 (the others can be skipped).

        Returns
        -------
        numpy.ndarray of bool
            Shape (nplanes,).
        """
        return np.asarray(self.words.any(axis=1))


def _impl_code(impl: str) -> int:
    if not isinstance(impl, str) or impl not in _IMPL_CODES:
        raise ValueError(f"impl={impl!r} is not one of {', '.join(map(repr, IMPLS))}")
    return _IMPL_CODES[impl]


def kernel_name(impl: str = "auto") -> str:
    """Name of the micro-kernel ``impl`` runs here.

    Parameters
    ----------
    impl : {"auto", "generic", "vpopcntdq"}

    Returns
    -------
    str
        ``"avx512_vpopcntdq"``, ``"generic_popcnt"`` or ``"generic"``.

    Raises
    ------
    RuntimeError
        ``impl="vpopcntdq"`` on a CPU without AVX-512 VPOPCNTDQ.
    """
    code = _impl_code(impl)
    ffi, lib = cpu.require()
    name = lib.emublas_bp_kernel_name(code)
    if name == ffi.NULL:
        raise RuntimeError(f"impl={impl!r} needs AVX-512 VPOPCNTDQ, which this CPU or OS lacks")
    return ffi.string(name).decode()


def pack(x: np.ndarray, side: int, nplanes: int = 1, *, threads: int | None = None) -> Packed:
    """Pack rows of A (``side=0``) or columns of B (``side=1``) along k.

    Parameters
    ----------
    x : numpy.ndarray, 2-D
        ``side=0``: A, shape (m, k); ``side=1``: B, shape (k, n).  1-byte
        dtypes (bool, int8, uint8) are read as 0/1 (any nonzero is 1, one
        plane); int64 data gives planes 0..nplanes-1 of its two's complement.
        Any strides; packing reads fastest when k is the contiguous axis.
    side : {0, 1}
    nplanes : int, default 1
        1..64 for int64 data; must be 1 for 1-byte data.
    threads : int, optional

    Returns
    -------
    Packed
    """
    if not isinstance(x, np.ndarray) or x.ndim != 2:
        raise ValueError("pack: x must be a 2-D numpy array")
    if side not in (0, 1):
        raise ValueError(f"pack: side must be 0 (rows of A) or 1 (columns of B), got {side!r}")
    if x.dtype.itemsize == 1 and x.dtype.kind in "biu":
        src = 0
        if nplanes != 1:
            raise ValueError("pack: 1-byte data is read as 0/1 and has one plane")
    elif x.dtype == np.int64:
        src = 1
        if not 1 <= nplanes <= 64:
            raise ValueError(f"pack: nplanes={nplanes} is outside 1..64")
    else:
        raise TypeError(f"pack: dtype {x.dtype} is not a 1-byte integer/bool or int64")
    nthreads = cpu.threads_for(threads)
    ffi, lib = cpu.require()
    if x.strides[0] % x.itemsize or x.strides[1] % x.itemsize or not x.flags.aligned:
        x = np.array(x, order="F")
    rs, cs = x.strides[0] // x.itemsize, x.strides[1] // x.itemsize
    if side == 0:
        rows, k = x.shape
    else:
        k, rows = x.shape
        rs, cs = cs, rs
    words = lib.emublas_bp_packed_words(side, rows, k)
    out = np.empty((nplanes, words), dtype=np.uint64)
    rc = lib.emublas_bp_pack(
        src,
        side,
        rows,
        k,
        ptr(ffi, "const void *", x),
        rs,
        cs,
        nplanes,
        ptr(ffi, "uint64_t *", out),
        words,
        nthreads,
    )
    if rc != lib.EMUBLAS_OK:
        raise ValueError(f"emublas_bp_pack: invalid arguments (code {rc})")
    return Packed(out, rows, k, side)


def gemm(
    a: Packed,
    b: Packed,
    out: np.ndarray | None = None,
    *,
    plane_a: int = 0,
    plane_b: int = 0,
    weight: int = 1,
    accumulate: bool = False,
    out_dtype: Any = np.int64,
    impl: str = "auto",
    threads: int | None = None,
) -> np.ndarray:
    """``out (+)= weight * popcount(A_plane AND B_plane)``, exact (wrapping modulo 2**64).

    Parameters
    ----------
    a : Packed
        From ``pack(A, 0)``: m rows.
    b : Packed
        From ``pack(B, 1)``: n columns, the same k.
    out : numpy.ndarray, int32 or int64, shape (m, n), optional
        Any whole-element strides; a new C-ordered array of ``out_dtype``
        otherwise.
    plane_a, plane_b : int
        Which planes to multiply.
    weight : int, default 1
        Multiplier, taken modulo 2**64 (so -2**63 and 2**63 are the same);
        int32 output needs 1.
    accumulate : bool
        Add to ``out`` instead of overwriting it (needs ``out``).
    out_dtype : {numpy.int64, numpy.int32}
        Dtype of a new output.
    impl : {"auto", "generic", "vpopcntdq"}
    threads : int, optional

    Returns
    -------
    numpy.ndarray
        ``out`` or the new array.
    """
    code = _impl_code(impl)
    nthreads = cpu.threads_for(threads)
    if not (isinstance(a, Packed) and isinstance(b, Packed) and a.side == 0 and b.side == 1):
        raise TypeError("gemm: a must come from pack(A, 0) and b from pack(B, 1)")
    if a.k != b.k:
        raise ValueError(f"gemm: inner dimensions differ ({a.k} and {b.k})")
    m, n, k = a.rows, b.rows, a.k
    if out is None:
        if accumulate:
            raise ValueError("accumulate=True needs an out array to accumulate into")
        out = np.empty((m, n), dtype=out_dtype)
    if not isinstance(out, np.ndarray) or out.dtype not in (np.int32, np.int64) or out.shape != (m, n):
        raise ValueError(f"gemm: out must be an int32 or int64 array of shape {(m, n)}")
    if (
        not out.flags.writeable
        or not out.flags.aligned
        or out.strides[0] % out.itemsize
        or out.strides[1] % out.itemsize
    ):
        raise ValueError("gemm: out must be writeable, aligned, with whole-element strides")
    w = int(weight) % 2**64
    w = w - 2**64 if w >= 2**63 else w
    if out.dtype == np.int32 and (w != 1 or k > 2**31 - 1):
        raise ValueError("gemm: int32 output needs weight 1 and k < 2**31")
    ffi, lib = cpu.require()
    kernel_name(impl)  # RuntimeError for an impl this CPU cannot run
    ap = a.words[plane_a]
    bp = b.words[plane_b]
    otype = lib.EMUBLAS_BP_OUT_I64 if out.dtype == np.int64 else lib.EMUBLAS_BP_OUT_I32
    rc = lib.emublas_bp_gemm(
        code,
        m,
        n,
        k,
        ptr(ffi, "const uint64_t *", ap),
        ptr(ffi, "const uint64_t *", bp),
        otype,
        ptr(ffi, "void *", out),
        out.strides[0] // out.itemsize,
        out.strides[1] // out.itemsize,
        w,
        1 if accumulate else 0,
        nthreads,
    )
    if rc != lib.EMUBLAS_OK:
        raise ValueError(f"emublas_bp_gemm: invalid arguments (code {rc}) for {m}x{n}x{k}")
    return out


def _as01(x: np.ndarray) -> np.ndarray:
    """A 1-byte view or copy of 0/1 (or bool) data."""
    if x.dtype == np.bool_:
        return x.view(np.uint8)
    if x.dtype.itemsize == 1 and x.dtype.kind in "iu":
        return x
    return x.astype(np.uint8)


def matmul01(
    a: np.ndarray, b: np.ndarray, *, out_dtype: Any = np.int64, impl: str = "auto", threads: int | None = None
) -> np.ndarray:
    """Exact product of two 0/1 matrices (any nonzero counts as 1 for 1-byte dtypes).

    Parameters
    ----------
    a : numpy.ndarray, shape (m, k)
    b : numpy.ndarray, shape (k, n)
        bool, 1-byte integers, or other dtypes holding only 0 and 1.
    out_dtype : {numpy.int64, numpy.int32}
    impl : {"auto", "generic", "vpopcntdq"}
    threads : int, optional

    Returns
    -------
    numpy.ndarray, shape (m, n)
    """
    a, b = _as01(np.asarray(a)), _as01(np.asarray(b))
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul01: shapes {a.shape} and {b.shape} do not conform")
    # C-ordered B needs no copy: the pack transposes 8 x 8 bit blocks itself.
    pa = pack(a, 0, threads=threads)
    pb = pack(b, 1, threads=threads)
    return gemm(pa, pb, out_dtype=out_dtype, impl=impl, threads=threads)
