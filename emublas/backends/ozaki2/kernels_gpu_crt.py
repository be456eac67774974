"""Python side of the Ozaki-II GPU CRT passes (``native/cuda/ozaki2.cu``): int32 products to
int8 CRT terms, the certified final pass and the fallback that recomputes the entries it
flags.

Queued on cupy's current stream; nothing here waits for the device.
"""

from __future__ import annotations

import numpy as np

from ..._kernels.constants import OZ_FIX_SPARSE as FIX_SPARSE
from ..._kernels.constants import OZ_FUSED1_ROWS as FUSED1_ROWS
from .kernels_gpu import FUSED_MAX_TERMS, MAX_TERMS, PAD, _fn, _i32, _i64, _ptr, _views

# oz_fix_entries' grid: enough threads to fill an H200 (132 SMs) a few times over; its
# blocks stride over the list, whose length only the device knows
_FIX_ENTRY_BLOCKS = 132 * 8

__all__ = ["terms", "crt_final", "cert_args", "MAX_TERMS"]


def terms(
    products,
    ldp: int,
    rows: int,
    cols: int,
    r0: int,
    j0: int,
    spec_d,
    nterms: int,
    m: int,
    out,
    plane_offset: int,
    plane_stride: int,
    ldt: int,
    uplo: int,
    transposed: bool,
) -> None:
    """int32 products of one modulus -> int8 CRT term planes ``out[plane_offset + t]``.

    Without transposed sources the vectorised kernel runs (whole padded
    columns; ``ldp`` and ``ldt`` multiples of 4), else the tiled one.

    Parameters
    ----------
    products : list of cupy.ndarray
        The modulus's int32 products (at most 4), column-major with leading
        dimension ``ldp``.
    ldp : int
        Their leading dimension (the block's padded rows).
    rows, cols : int
        The block's rows and columns.
    r0, j0 : int
        The block's first output row and column (the tiled kernel's triangle test).
    spec_d : cupy.ndarray
        int32 term spec, 6 per term (:func:`.gpu_stages.spec`).
    nterms : int
        Terms of the modulus's recipe.
    m : int
        The modulus.
    out : cupy.ndarray
        int8 term planes, written from plane ``plane_offset`` on.
    plane_offset, plane_stride : int
        The first plane written and elements per plane.
    ldt : int
        Leading dimension of a term plane.
    uplo : int
        0: the whole block; 1, 2: the tiled kernel skips the tiles wholly
        outside the upper or lower triangle.
    transposed : bool
        Whether some term reads a product transposed (the tiled kernel).
    """
    ptrs = [p.data.ptr for p in products] + [0] * (4 - len(products))
    inv = 1.0 / m
    bias = 0.5 / m if m % 2 == 0 else 0.0
    dst = _ptr(out.data.ptr + plane_offset * plane_stride)
    if not transposed:
        quads = ldp // 4
        _fn("oz_terms_direct")(
            ((quads + 255) // 256, min(cols, 65535)),
            (256,),
            (
                _i64(quads),
                _i64(cols),
                *(_ptr(p) for p in ptrs),
                _i64(ldp),
                spec_d,
                _i32(nterms),
                np.float64(m),
                np.float64(inv),
                np.float64(bias),
                dst,
                _i64(plane_stride),
                _i64(ldt),
            ),
        )
        return
    grid = ((rows + PAD - 1) // PAD, (cols + PAD - 1) // PAD)
    _fn("oz_terms")(
        grid,
        (256,),
        (
            _i64(rows),
            _i64(cols),
            _i64(r0),
            _i64(j0),
            *(_ptr(p) for p in ptrs),
            _i64(ldp),
            spec_d,
            _i32(nterms),
            np.float64(m),
            np.float64(inv),
            np.float64(bias),
            dst,
            _i64(plane_stride),
            _i64(ldt),
            _i32(uplo),
        ),
    )


def _factor_args(cert) -> tuple:
    """(float64?, Lr, Li, Rr, Ri, strides, k, conj_l, conj_r) of the factors the fallback reads."""
    L, R = cert["L"], cert["R"]
    lr, li, rsl, csl, suffix, _ = _views(L)
    rr, ri, rsr, csr, _, _ = _views(R)
    return (
        _i32(suffix == "f64"),
        _ptr(lr),
        _ptr(li),
        _ptr(rr),
        _ptr(ri),
        _i64(rsl),
        _i64(csl),
        _i64(rsr),
        _i64(csr),
        _i64(L.shape[1]),
        _i32(bool(cert["conj_l"])),
        _i32(bool(cert["conj_r"])),
    )


def cert_args(cert, w_j0: int = 0, flags=None) -> tuple:
    """The certificate's arguments of ``oz_crt_final``, in the kernel's order.

    Parameters
    ----------
    cert : dict or None
        The certificate as device arrays (see :func:`emublas.backends.ozaki2.certify.certificate`;
        ``counter`` a one-element uint64 array); None: no certificate (null pointers and zeros).
    w_j0 : int, optional
        First column of W that ``cert["W"]`` holds (a device-local column block).
    flags : tuple, optional
        ``(mask, tiles, ldm, ntr, ...)``: where the final pass flags the entries
        that :func:`crt_final`'s fix passes recompute (a byte per entry, and a
        count per 32 × 32 tile up to
        :data:`~emublas._kernels.constants.OZ_FIX_SPARSE` + 1); None: no fix pass.

    Returns
    -------
    tuple
        Kernel arguments (numpy scalars and cupy arrays or raw pointers).
    """
    if cert is None:
        return (
            _i32(0),
            _ptr(0),
            _ptr(0),
            np.float64(0),
            np.float64(0),
            _ptr(0),
            _i64(0),
            _ptr(0),
            _ptr(0),
            _ptr(0),
            _ptr(0),
            _i32(0),
            _i32(0),
            _ptr(0),
            _ptr(0),
            _ptr(0),
            _ptr(0),
            _i64(0),
            _i64(0),
            _i64(0),
            _i64(0),
            _i64(0),
            _i32(0),
            _i32(0),
            _ptr(0),
            _ptr(0),
            _ptr(0),
            _i64(0),
            _i64(0),
        )
    W = cert.get("W")
    if W is not None:
        ldw = W.strides[1] // 4
        w = (
            _ptr(W.data.ptr - w_j0 * ldw * 4),
            _i64(ldw),
            _ptr(cert["row_wsum"].data.ptr),
            _ptr(cert["col_wsum"].data.ptr),
            _ptr(cert["row_budget"].data.ptr),
            _ptr(cert["col_budget"].data.ptr),
        )
    else:
        w = (_ptr(0), _i64(0), _ptr(0), _ptr(0), _ptr(0), _ptr(0))
    # the factors travel even without fix: rows with NaN/Inf are always finished from them
    f = (_i32(bool(cert["fix"])), *_factor_args(cert))
    mask, tiles, ldm, ntr = flags[:4]
    return (
        _i32(1),
        _ptr(cert["row_err"].data.ptr),
        _ptr(cert["col_err"].data.ptr),
        np.float64(cert["crt_err"]),
        np.float64(cert["target"]),
        *w,
        *f,
        _ptr(cert["counter"].data.ptr),
        mask,
        tiles,
        _i64(ldm),
        _i64(ntr),
    )


def crt_final(
    term_planes,
    nterms: int,
    plane_stride: int,
    ldt: int,
    part_d,
    weights_d,
    crt,
    row_shift_d,
    col_shift_d,
    rows: int,
    cols: int,
    r0: int,
    j0: int,
    alpha,
    beta,
    out,
    uplo: int,
    out_j0: int = 0,
    cert=None,
    fused=None,
) -> None:
    """The exact CRT sum over the term planes, then ``out = alpha·v + beta·out`` for the block.

    ``out`` holds the output's columns from ``out_j0`` on (a device-local
    column block); indices passed to the kernel stay global.  ``cert``: the
    per-entry certificate on this device (:func:`cert_args`), or None.

    Parameters
    ----------
    term_planes : cupy.ndarray
        int8 CRT term planes of the block, ``nterms`` of them; with ``fused``,
        int32 products instead (every modulus's and k-chunk's, column-major planes).
    nterms : int
        Term planes to sum (at most :data:`MAX_TERMS`).
    plane_stride, ldt : int
        Elements per plane and its leading dimension (a multiple of 4).
    part_d, weights_d : cupy.ndarray
        Per term: int8 part (0 real, 1 imaginary) and the three float64 pieces
        of its CRT weight (:func:`.gpu_stages.job_constants`).
    crt : sequence of 8 floats
        ``CrtSplit.consts`` of the job (the symmetric reduction's constants).
    row_shift_d, col_shift_d : cupy.ndarray
        int32 shifts of the output's rows and columns, undone in the result.
    rows, cols : int
        The block's rows and columns.
    r0, j0 : int
        The block's first output row and column (global).
    alpha, beta : float or complex
        The scalars (``beta == 0``: ``out`` is not read).
    out : cupy.ndarray
        float32/float64/complex64/complex128 output, updated in place.
    uplo : int
        0: every entry; 1 or 2: only the upper or lower triangle.
    out_j0 : int
        The global column of ``out``'s first column.
    cert : dict, optional
        The certificate's device arrays, or None: no certificate, no fix pass.
    fused : tuple, optional
        ``(spec_d, mods_d, single, transposed, paired)`` of
        :func:`.gpu_stages.fused_constants`: ``term_planes`` are the products and
        the fused pass (``oz_crt_fused``; ``oz_crt_fused1`` when ``single``: no term
        reads a second product; ``oz_crt_fused_tr`` when ``transposed``: the rank-k
        terms, the whole square output in one block; ``oz_crt_fused2`` for complex
        output when ``paired``: terms 2u and 2u + 1 read the same two products)
        reduces each term as :func:`terms` would have, so the result is the term
        planes' bit for bit.

    Notes
    -----
    With ``cert``, three more kernels recompute the flagged entries (uncertified,
    or in NaN/Inf rows) as float64 dot products in k order: a 64 × 64 block
    with a 32 × 32 tile holding more than
    :data:`~emublas._kernels.constants.OZ_FIX_SPARSE` of them as a whole,
    register-blocked; the other blocks' entries are listed and then recomputed
    one thread each.  They read the counts on the device, so nothing waits for
    the host; blocks with nothing to do return at once.
    """
    if ldt % 4:
        raise ValueError("term planes need a leading dimension divisible by 4")
    source: tuple = (term_planes, _i64(plane_stride), _i64(ldt))
    kernel = "oz_crt_final"
    transposed = False
    if fused is not None:
        spec_d, mods_d, single, transposed, paired = fused
        source = (*source, spec_d, mods_d, _i32(mods_d.shape[0]))
        kernel = "oz_crt_fused_tr" if transposed else "oz_crt_fused1" if single else "oz_crt_fused"
        if paired and out.dtype.kind == "c":
            kernel = "oz_crt_fused2"
    if nterms > MAX_TERMS:
        raise ValueError(f"ozaki2 on the GPU: {nterms} CRT terms exceed {MAX_TERMS} (k too long)")
    if fused is not None and not transposed and nterms > FUSED_MAX_TERMS:
        raise ValueError(f"the fused final pass holds at most {FUSED_MAX_TERMS} CRT terms, not {nterms}")
    code = {"f": 0, "d": 1, "F": 2, "D": 3}[out.dtype.char]
    size = out.itemsize
    rso, cso = out.strides[0] // size, out.strides[1] // size
    alpha, beta = complex(alpha), complex(beta)
    # 4 (real; oz_crt_fused1: FUSED1_ROWS) or 2 (complex) rows per lane; the block's 8 warps
    # on wpc row segments of 8 / wpc columns, as many segments as the rows fill (up to 8: one
    # column per block)
    cplx = code >= 2
    per_warp = 32 * (2 if cplx else FUSED1_ROWS if kernel == "oz_crt_fused1" else 4)
    wpc = 1
    while wpc < 8 and wpc * per_warp < rows:
        wpc *= 2
    grid = (-(-cols // (8 // wpc)), -(-rows // (wpc * per_warp)))
    if transposed:  # one 32 x 32 output tile per block, as oz_terms
        if r0 or j0 or rows != cols:
            raise ValueError("the transposed fused pass needs the whole square output in one block")
        grid = (-(-rows // 32), -(-cols // 32))
    # the output's arguments, shared by the final pass and the fix passes
    dest = (
        row_shift_d,
        col_shift_d,
        np.float64(alpha.real),
        np.float64(alpha.imag),
        np.float64(beta.real),
        np.float64(beta.imag),
        _i32(beta == 0),
        _i32(code),
        _ptr(out.data.ptr - out_j0 * cso * size),
        _i64(rso),
        _i64(cso),
    )
    flags = None
    if cert is not None:  # entries the final pass cannot vouch for (and NaN/Inf rows), per 32 x 32 tile
        import cupy

        ntr, ntc = (rows + 31) // 32, (cols + 31) // 32
        # the list of the entries of blocks within FIX_SPARSE per tile: at most 4 FIX_SPARSE
        # a block, so it cannot overflow; its first pair's first int counts them
        nblk = ((rows + 63) // 64) * ((cols + 63) // 64)
        entries = cupy.empty((1 + nblk * 4 * FIX_SPARSE, 2), np.int32)
        entries[0, 0] = 0
        flags = (cupy.zeros(rows * cols, np.uint8), cupy.zeros(ntr * ntc, np.int32), rows, ntr, entries)
    _fn(kernel + ("_cplx" if cplx else "_real"))(
        grid,
        (256,),
        (
            _i64(rows),
            _i64(cols),
            _i64(r0),
            _i64(j0),
            *source,
            _i32(nterms),
            part_d,
            weights_d,
            *(np.float64(v) for v in crt),
            *dest,
            _i32(uplo),
            *cert_args(cert, out_j0, flags),
            _i32(wpc.bit_length() - 1),
        ),
    )
    if flags is None:
        return
    mask, tiles, ldm, ntr, entries = flags
    fix = (
        _i64(rows),
        _i64(cols),
        _i64(r0),
        _i64(j0),
        *dest,
        cert["row_err"],
        cert["col_err"],
        *_factor_args(cert),
        mask,
        tiles,
        _i64(ldm),
        _i64(ntr),
    )
    # the flagged entries as float64 dot products: the dense 64 x 64 blocks (2 x 2 flag tiles)
    # whole, the others' entries listed, then one thread each
    blocks = ((rows + 63) // 64, (cols + 63) // 64)
    _fn("oz_fix_tiles")(blocks, (256,), fix)
    _fn("oz_fix_collect")(blocks, (256,), (_i64(rows), _i64(cols), mask, tiles, _i64(ldm), _i64(ntr), entries))
    _fn("oz_fix_entries")((_FIX_ENTRY_BLOCKS,), (256,), (*fix, entries))
