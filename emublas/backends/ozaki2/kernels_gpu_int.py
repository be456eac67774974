"""Python side of the exact integer products on the GPU (``native/cuda/ozaki2.cu``): residues of
int64 matrices, modular accumulation of the int32 products and Garner's reconstruction (the
GPU half of :func:`emublas.intmatmul` through ozaki2).

Queued on cupy's current stream; nothing here waits for the device.
"""

from __future__ import annotations

import numpy as np

from .kernels_gpu import _fn, _grid, _i32, _i64, _mod_constants, device_constants, pad

__all__ = ["int_residues", "int_accumulate", "int_garner"]


def int_residues(x, moduli: tuple[int, ...]):
    """Symmetric residues of an int64 cupy matrix for each modulus: int8 ``(nmod, rows_pad, cols_pad)``.

    Parameters
    ----------
    x : cupy.ndarray
        int64 matrix, rows × k, any strides.
    moduli : tuple of int
        The moduli.

    Returns
    -------
    cupy.ndarray
        int8 ``(len(moduli), pad(rows), pad(k))``, k contiguous, zero-padded.
    """
    import cupy

    rows, cols = x.shape
    rp, cp = pad(rows), pad(cols)
    nmod = len(moduli)
    out = cupy.empty((nmod, rp, cp), np.int8)
    mods, _ = _mod_constants(tuple(moduli), (0,) * nmod)
    c32 = device_constants(
        ("c32", tuple(moduli)), lambda: cupy.asarray(np.array([(1 << 32) % m for m in moduli], np.float64))
    )
    size = x.itemsize
    _fn("oz_int_residues")(
        _grid(rp, cp),
        (256,),
        (
            _i64(rows),
            _i64(cols),
            x,
            _i64(x.strides[0] // size),
            _i64(x.strides[1] // size),
            _i32(nmod),
            mods,
            c32,
            out,
            _i64(rp * cp),
            _i64(cp),
        ),
    )
    return out


def int_accumulate(prod, acc, m: int, first: bool) -> None:
    """``acc = (acc + prod) mod m``, symmetric (int32 arrays of one size).

    Parameters
    ----------
    prod : cupy.ndarray
        int32 product of one k-chunk.
    acc : cupy.ndarray
        int32 accumulator, updated in place.
    m : int
        The modulus.
    first : bool
        Whether this is the first chunk: then ``acc = prod mod m`` (``acc``'s
        old contents are not read).
    """
    n = prod.size
    _fn("oz_int_accumulate")(
        ((n + 255) // 256,),
        (256,),
        (
            _i64(n),
            prod,
            acc,
            np.float64(m),
            np.float64(1.0 / m),
            np.float64(0.5 / m if m % 2 == 0 else 0.0),
            _i32(first),
        ),
    )


def int_garner(res, moduli: tuple[int, ...], rows: int, cols: int):
    """Garner reconstruction of (nmod, cols, ld) int32 residue planes (column-major m×n with
    leading dimension ld) into an int64 (rows, cols) array, plus a suspect mask and count
    (entries whose value may not fit int64, for an exact check on the host).

    Parameters
    ----------
    res : cupy.ndarray
        int32 symmetric residues ``(nmod, cols, ld)``, one plane per modulus
        (a slice of larger planes keeps their strides); at most 24 moduli.
    moduli : tuple of int
        The moduli, in the planes' order.
    rows, cols : int
        The result's shape (``rows <= ld``).

    Returns
    -------
    tuple of cupy.ndarray
        ``(value, suspect, count)``: int64 ``(rows, cols)`` Fortran-ordered
        values (wrapping where they overflow), a uint8 mask of the entries
        whose approximation reached 2^62, and a one-element int32 count of them.
    """
    import cupy

    nmod = res.shape[0]
    ps, ld = res.strides[0] // 4, res.strides[1] // 4  # a slice of bigger planes keeps their strides
    if nmod > 24:
        raise ValueError("intmatmul on the GPU: at most 24 moduli")
    mods, _ = _mod_constants(tuple(moduli), (0,) * nmod)
    inv = device_constants(
        ("garner", tuple(moduli)),
        lambda: cupy.asarray(
            np.array(
                [[pow(mj, -1, ml) if j < l else 0 for j, mj in enumerate(moduli)] for l, ml in enumerate(moduli)],
                np.float64,
            ).reshape(-1)
        ),
    )
    out = cupy.empty((rows, cols), np.int64, order="F")
    suspect = cupy.zeros((rows, cols), np.uint8, order="F")
    count = cupy.zeros(1, np.int32)
    n = ld * cols
    _fn("oz_int_garner")(
        ((n + 255) // 256,),
        (256,),
        (
            _i64(rows),
            _i64(cols),
            _i64(ld),
            res,
            _i64(ps),
            _i32(nmod),
            mods,
            inv,
            out,
            _i64(1),
            _i64(rows),
            suspect,
            count,
        ),
    )
    return out, suspect, count
