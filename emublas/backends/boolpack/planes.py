"""Exact integer products through bit planes over the 0/1 leaf.

An integer matrix of width w is ``X = Σ_p s_p 2^p X_p`` with 0/1 planes
``X_p``; unsigned data uses ``s_p = +1``, signed data two's complement (the top
plane weighs ``-2^(w-1)``).  Then ``A·B = Σ_{p,q} s_p s_q 2^(p+q) A_p·B_q``:
one Boolean product per pair of planes that are not all zero, each added
with its weight into an int64 accumulator in wrapping arithmetic.  The sum
is therefore exact modulo 2^64 -- exact whenever the true entry fits int64,
which :func:`check_overflow` makes sure of.  Only the planes themselves (0/1
by construction) reach the leaf.

The leaf is a small object (:class:`CpuLeaf`, or the GPU one in
:mod:`.kernels_gpu`) with ``pack(x01_or_int64, side, nplanes)`` and
 ``accumulate(pa, p, pb, q, out, weight, first)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._arrays import is_cupy
from ..integer_bound import product_bound
from . import kernels_cpu

__all__ = ["CpuLeaf", "width", "is_binary", "intmatmul", "plane_product", "check_overflow"]

_INT64_MAX = 2**63 - 1


class CpuLeaf:
    """The C kernels of :mod:`.kernels_cpu` as a leaf of the plane products.

    Parameters
    ----------
    impl : {"auto", "generic", "vpopcntdq"}, optional
        Which micro-kernel runs the popcount products (:data:`.kernels_cpu.IMPLS`).
    threads : int, optional
        Threads for packing and products; None: the package default.
    """

    def __init__(self, impl: str = "auto", threads: int | None = None):
        self.impl, self.threads = impl, threads

    def pack_planes(self, x: np.ndarray, side: int, nplanes: int) -> kernels_cpu.Packed:
        # No layout copies: 1-byte data packs C-ordered B 8 x 8 bits at a time,
        # and int64 planes cost the same along either axis (measured).
        """Bit planes of an integer (or 0/1) matrix, packed for the C kernel.

        Parameters
        ----------
        x : numpy.ndarray
            int64 (two's complement bits) or 1-byte 0/1 data.
        side : {0, 1}
            0: the left operand (planes along rows), 1: the right one (along columns).
        nplanes : int
            Planes to extract (:func:`width`).

        Returns
        -------
        kernels_cpu.Packed
        """
        return kernels_cpu.pack(x, side, nplanes, threads=self.threads)

    def nonzero(self, packed: kernels_cpu.Packed) -> list[bool]:
        """Which packed planes hold any 1.

        Parameters
        ----------
        packed : kernels_cpu.Packed

        Returns
        -------
        list of bool
            One per plane.
        """
        return [bool(v) for v in packed.nonzero_planes()]

    def zeros(self, m: int, n: int) -> np.ndarray:
        """An int64 accumulator of zeros.

        Parameters
        ----------
        m, n : int

        Returns
        -------
        numpy.ndarray
        """
        return np.zeros((m, n), np.int64)

    def accumulate(self, pa, p: int, pb, q: int, out: np.ndarray, weight: int, first: bool) -> None:
        """``out (+)= weight · A_p·B_q`` for one pair of planes, in wrapping int64.

        Parameters
        ----------
        pa, pb : kernels_cpu.Packed
            The packed operands.
        p, q : int
            The planes of each.
        out : numpy.ndarray
            int64 accumulator, updated in place.
        weight : int
            ``±2^(p+q)``.
        first : bool
            Whether this product overwrites ``out`` instead of adding to it.
        """
        kernels_cpu.gemm(
            pa, pb, out, plane_a=p, plane_b=q, weight=weight, accumulate=not first, impl=self.impl, threads=self.threads
        )


def is_binary(x: Any) -> bool:
    """Whether an integer/bool array holds only 0 and 1.

    Parameters
    ----------
    x : array
        numpy or cupy, integer or bool.

    Returns
    -------
    bool
        True for bool arrays and empty ones.
    """
    if x.dtype == bool:
        return True
    return x.size == 0 or (int(x.min()) >= 0 and int(x.max()) <= 1)


def width(lo: int, hi: int) -> tuple[int, bool]:
    """Planes needed for values in [lo, hi], and whether the top one is a sign plane.

    Parameters
    ----------
    lo, hi : int
        The smallest and largest values.

    Returns
    -------
    tuple of (int, bool)
        The plane count (two's complement when ``lo < 0``), and whether it is signed.
    """
    if lo >= 0:
        return max(hi.bit_length(), 1), False
    # two's complement: w bits hold -2^(w-1)..2^(w-1)-1 (INT64_MIN alone needs 64, not 65)
    return max(max(hi, 0).bit_length(), (-lo - 1).bit_length()) + 1, True


def _weights(w: int, signed: bool) -> list[int]:
    ws = [1 << p for p in range(w)]
    if signed:
        ws[-1] = -ws[-1]
    return ws


def plane_product(a64: Any, b64: Any, wa: tuple[int, bool], wb: tuple[int, bool], leaf: Any) -> Any:
    """``a64 @ b64`` modulo 2^64 from the bit planes.

    Planes that are all zero are skipped.

    Parameters
    ----------
    a64, b64 : array
        int64 (two's complement bits), numpy or cupy as the leaf expects.
    wa, wb : tuple of (int, bool)
        :func:`width` of each operand.
    leaf : CpuLeaf or GpuLeaf
        The 0/1 product kernels.

    Returns
    -------
    array
        int64, right modulo 2^64 (exact when the true entries fit int64).
    """
    m, n = a64.shape[0], b64.shape[1]
    pa = leaf.pack_planes(a64, 0, wa[0])
    pb = leaf.pack_planes(b64, 1, wb[0])
    out = leaf.zeros(m, n)
    first = True
    nz_b = leaf.nonzero(pb)  # once: on a GPU the flags are one read from the device
    for p, (sa, nza) in enumerate(zip(_weights(*wa), leaf.nonzero(pa))):
        if not nza:
            continue
        for q, (sb, nzb) in enumerate(zip(_weights(*wb), nz_b)):
            if not nzb:
                continue
            leaf.accumulate(pa, p, pb, q, out, sa * sb, first)
            first = False
    return out


def check_overflow(a: np.ndarray, b: np.ndarray, result: np.ndarray) -> None:
    """Raise OverflowError when an entry of the exact ``a @ b`` does not fit int64.

    Only entries whose bound ``Σ|a_il||b_lj|`` may exceed int64 are recomputed
    exactly (Python integers).

    Parameters
    ----------
    a, b : numpy.ndarray
        The integer operands.
    result : numpy.ndarray or None
        The product modulo 2^64 (not read: the check is on the operands).

    Raises
    ------
    OverflowError
        Naming the first entry found that does not fit.
    """
    k = a.shape[1]
    amax = max(abs(int(a.min())), abs(int(a.max()))) if a.size else 0
    bmax = max(abs(int(b.min())), abs(int(b.max()))) if b.size else 0
    if k * amax * bmax <= _INT64_MAX or product_bound(a, b) <= _INT64_MAX:  # cheap test first
        return
    with np.errstate(over="ignore"):
        s = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    suspect = s * (1 + 4 * k * 2.0**-53) >= 2.0**63 - 2**11
    if not suspect.any():
        return
    ao, bo = a.astype(object), b.astype(object)
    for i, j in zip(*np.nonzero(suspect)):
        exact = int(np.dot(ao[i, :], bo[:, j])) if k else 0
        if not -_INT64_MAX - 1 <= exact <= _INT64_MAX:
            raise OverflowError(
                f"intmatmul(backend='boolpack'): entry ({i}, {j}) of the exact product is {exact},"
                " which does not fit int64; use narrower integers or split the product"
            )


def intmatmul(a: np.ndarray, b: np.ndarray, *, impl: str = "auto", threads: int | None = None) -> np.ndarray:
    """Exact ``a @ b`` as int64 for 2-D integer or bool arrays.

    0/1 data (any integer dtype, or bool) takes the binary path: one packed
    product.  Other data goes through bit planes (:func:`plane_product`).

    Parameters
    ----------
    a, b : array
        2-D integer or bool numpy arrays (cupy arrays take the GPU leaf), with
        ``a.shape[1] == b.shape[0]``.
    impl : {"auto", "generic", "vpopcntdq"}, optional
        The CPU micro-kernel (``"auto"``: AVX-512 VPOPCNTDQ where the CPU has it).
    threads : int, optional
        CPU threads; None: the default (``EMUBLAS_NUM_THREADS``).

    Returns
    -------
    array
        int64, ``(m, n)``, on the operands' device.

    Raises
    ------
    OverflowError
        Some entry of the exact product does not fit int64.
    """
    m, k = a.shape
    n = b.shape[1]
    if is_cupy(a):
        return _intmatmul_gpu(a, b)
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.int64)
    if is_binary(a) and is_binary(b):
        leaf = CpuLeaf(impl, threads)
        return kernels_cpu.gemm(
            leaf.pack_planes(_u8(a), 0, 1), leaf.pack_planes(_u8(b), 1, 1), impl=impl, threads=threads
        )
    wa = width(int(a.min()), int(a.max()))
    wb = width(int(b.min()), int(b.max()))
    # astype wraps uint64 >= 2^63 to the same bits: with 64 unsigned planes the
    # top one weighs 2^63 == -2^63 (mod 2^64), so the sum is still right mod 2^64.
    a64 = a.astype(np.int64, copy=False)
    b64 = b.astype(np.int64, copy=False)
    out = plane_product(a64, b64, wa, wb, CpuLeaf(impl, threads))
    check_overflow(a, b, out)
    return out


def _intmatmul_gpu(a, b):
    """The cupy form: binary tensor-core leaf, bit planes on the GPU; the overflow check
    (only where the cheap bound fails) on host copies."""
    import cupy

    from . import kernels_gpu

    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or k == 0:
        return cupy.zeros((m, n), np.int64)
    if is_binary(a) and is_binary(b):
        return kernels_gpu.matmul01(a, b).astype(np.int64, copy=False)
    wa = width(int(a.min()), int(a.max()))
    wb = width(int(b.min()), int(b.max()))
    out = plane_product(a.astype(np.int64, copy=False), b.astype(np.int64, copy=False), wa, wb, kernels_gpu.GpuLeaf())
    amax = max(abs(int(a.min())), abs(int(a.max())))
    bmax = max(abs(int(b.min())), abs(int(b.max())))
    if k * amax * bmax > _INT64_MAX:
        check_overflow(a.get(), b.get(), None)
    return out


def _u8(x: np.ndarray) -> np.ndarray:
    if x.dtype == bool:
        return x.view(np.uint8)
    if x.dtype.itemsize == 1:
        return x
    return x.astype(np.uint8)
