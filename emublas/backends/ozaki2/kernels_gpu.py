"""Python side of the Ozaki-II GPU kernels (``native/cuda/ozaki2.cu``): the loader, the
scaling and residue passes, and the int8 products (cuBLAS / cuBLASLt).

The CRT passes (terms, final pass, fallback) are in :mod:`.kernels_gpu_crt`, the exact
integer products' residues and Garner reconstruction in :mod:`.kernels_gpu_int`.

Everything here runs on cupy's current stream and returns without waiting
for the device, except :func:`row_stats_host`, whose purpose is to bring the
per-row statistics to the host.

Layouts (see the CUDA source): residue and bound planes are
``(planes, rows_pad, cols_pad)`` int8 with the k index contiguous and both
dimensions padded with zeros to multiples of :data:`PAD` (the TN layout of
cuBLAS's int8 tensor-core GEMM); products are column-major int32.
"""

from __future__ import annotations

import threading
from functools import cache, lru_cache

import numpy as np

from ..._kernels import constants, cuda_source
from ..base import choice, env_int, env_value

__all__ = [
    "PAD",
    "pad",
    "row_stats",
    "row_stats_host",
    "bound_planes",
    "row_plan",
    "residues",
    "gemm_tn",
    "gemm_tn_batched",
    "w_maxima",
    "device_constants",
    "MAX_TERMS",
    "FUSED_MAX_TERMS",
]

PAD = constants.OZ_PAD  # also the CUDA kernels' tile edge (one header sets both)
MAX_MODULI = constants.OZ_MAX_MODULI  # per residue pass
RES_TILES = constants.OZ_RES_TILES  # tiles per block of the residue kernels
_OPTIONS = ("--fmad=false",)  # the CRT's two-sum must not be contracted into FMAs
_ptr = np.uintp
_i64 = np.int64
_i32 = np.int32

_OP_N, _OP_T = 0, 1  # cublasOperation_t


def pad(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`PAD` (at least PAD).

    Parameters
    ----------
    n : int
        A row or column count (0 gives PAD).

    Returns
    -------
    int
        The padded count.
    """
    return max(PAD, -(-n // PAD) * PAD)


def _fn(name: str):
    """Kernel ``name`` of ozaki2.cu on the current device (looked up once: a call issues dozens)."""
    import cupy

    return _fn_on(cupy.cuda.runtime.getDevice(), name)


@cache
def _fn_on(device: int, name: str):
    return cuda_source.module("ozaki2.cu", _OPTIONS).get_function(name)


def _views(x):
    """(real-part pointer, imaginary-part pointer or 0, rs, cs, type suffix) of a 2-D cupy array."""
    real = np.dtype(x.dtype.char.lower()) if x.dtype.kind == "c" else x.dtype
    size = real.itemsize
    rs, cs = x.strides[0] // size, x.strides[1] // size
    ptr = x.data.ptr
    im = ptr + size if x.dtype.kind == "c" else 0
    suffix = "f32" if real == np.float32 else "f64"
    return ptr, im, rs, cs, suffix, size


def _by_rows(rs: int, cs: int) -> bool:
    return rs == 1 or (cs != 1 and rs < cs)


def row_stats(x):
    """Per-row max |x| (NaN for rows with NaN/Inf), sum |x|², sum |x| as float64 device arrays
    ``(3, rows)``, queued on the current stream (nothing waits for the device).

    Parameters
    ----------
    x : cupy.ndarray
        2-D factor, float32/float64/complex64/complex128, any strides.

    Returns
    -------
    cupy.ndarray
        float64 ``(3, rows)``: per row max |x|, sum |x|² and sum |x| (|x| the
        modulus of a complex entry); all zero for a zero-column ``x``.
    """
    import cupy

    rows, cols = x.shape
    if not (rows and cols):
        return cupy.zeros((3, rows), np.float64)
    out = cupy.empty((3, rows), np.float64)  # the kernel writes every entry
    xr, xi, rs, cs, suffix, _ = _views(x)
    by_rows = _by_rows(rs, cs)
    per = 32 if by_rows else 8
    p = out.data.ptr
    _fn(f"oz_stats_{suffix}")(
        ((rows + per - 1) // per,),
        (256,),
        (
            _i64(rows),
            _i64(cols),
            _ptr(xr),
            _ptr(xi),
            _i64(rs),
            _i64(cs),
            _i32(by_rows),
            _ptr(p),
            _ptr(p + 8 * rows),
            _ptr(p + 16 * rows),
        ),
    )
    return out


def row_stats_host(x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`row_stats` brought to the host (this waits for the device).

    Parameters
    ----------
    x : cupy.ndarray
        2-D factor, float32/float64/complex64/complex128, any strides.

    Returns
    -------
    tuple of numpy.ndarray
        ``(rowmax, sumsq, l1)``, float64, one entry per row.
    """
    host = row_stats(x).get()
    return host[0], host[1], host[2]


def _grid(rows_pad: int, cols_pad: int) -> tuple[int, int]:
    return cols_pad // PAD, rows_pad // PAD


def bound_planes(x, rowmax_d):
    """``ceil(127·|x|·2^-ea[row])`` as padded k-contiguous int8 ``(rows_pad, cols_pad)``, with ea
    the frexp exponent of ``rowmax_d`` (a float64 device vector); rows with NaN/Inf are zero.

    Parameters
    ----------
    x : cupy.ndarray
        2-D factor, float32/float64/complex64/complex128, any strides.
    rowmax_d : cupy.ndarray
        Per row max |x| (:func:`row_stats`' first row; NaN marks a non-finite row).

    Returns
    -------
    cupy.ndarray
        int8 ``(pad(rows), pad(cols))``, k contiguous, zero-padded: the
        factor's plane for the accurate mode's bound product.
    """
    import cupy

    rows, cols = x.shape
    rp, cp = pad(rows), pad(cols)
    out = cupy.empty((rp, cp), np.int8)
    xr, xi, rs, cs, suffix, _ = _views(x)
    rowmax_d = cupy.ascontiguousarray(rowmax_d, dtype=np.float64)
    _fn(f"oz_bound_{suffix}")(
        _grid(rp, cp), (256,), (_i64(rows), _i64(cols), _ptr(xr), _ptr(xi), _i64(rs), _i64(cs), rowmax_d, out, _i64(cp))
    )
    return out


def row_plan(stats_d, wmax_d, L: float, log2_127sq: float, safety: float, log2k: float, k: int, slack: float):
    """``(shift, err, wsum, budget)``: the plan of every row on the device (``oz_plan``).

    The same formulas, in the same order, as :func:`.scaling.row_plan` on the host.

    Parameters
    ----------
    stats_d : cupy.ndarray
        float64 ``(3, rows)`` from :func:`row_stats`.
    wmax_d : cupy.ndarray or None
        Per row max of the bound product (int64 values), accurate mode; None:
        the fast mode's 2-norm bound.
    L : float
        log2 of the product bound the moduli can reconstruct.
    log2_127sq : float
        ``log2(127²)``: the bound planes' scale, taken back from ``wmax_d``.
    safety : float
        log2 margin against rounding in the norms.
    log2k, k : float
        log2 of k and k, the factor's columns.
    slack : float
        log2 slack added to each row's error term (the certificate's).

    Returns
    -------
    tuple of cupy.ndarray
        Per row: the int32 shift (``scaling.DEAD`` for NaN/Inf rows), the
        float64 log2 error term, the float64 bound-plane sum and the int32 budget
        (bits the row keeps).
    """
    import cupy

    rows = stats_d.shape[1]
    shift = cupy.empty(rows, np.int32)
    err = cupy.empty(rows, np.float64)
    wsum = cupy.empty(rows, np.float64)
    budget = cupy.empty(rows, np.int32)
    if rows:
        st = cupy.ascontiguousarray(stats_d)
        w = 0 if wmax_d is None else cupy.ascontiguousarray(wmax_d, dtype=np.int64).data.ptr
        _fn("oz_plan")(
            ((rows + 255) // 256,),
            (256,),
            (
                _i64(rows),
                _ptr(st.data.ptr),
                _ptr(st.data.ptr + 8 * rows),
                _ptr(st.data.ptr + 16 * rows),
                _ptr(w),
                np.float64(L),
                np.float64(log2_127sq),
                np.float64(safety),
                np.float64(log2k),
                np.float64(k),
                np.float64(slack),
                shift,
                err,
                wsum,
                budget,
            ),
        )
    return shift, err, wsum, budget


def _mod_constants(moduli: tuple[int, ...], roots: tuple[int, ...]):
    """Per-modulus (m, 1/m, bias, 2^49 mod m) and the 2M roots, on the current device (cached)."""
    import cupy

    return _mod_constants_on(cupy.cuda.Device().id, moduli, roots)


@lru_cache(maxsize=128)
def _mod_constants_on(device: int, moduli: tuple[int, ...], roots: tuple[int, ...]):
    import cupy

    rows = []
    for m in moduli:
        c = (1 << 49) % m
        if 2 * c > m:
            c -= m
        rows.append((float(m), 1.0 / m, 0.5 / m if m % 2 == 0 else 0.0, float(c)))
    return cupy.asarray(np.array(rows, np.float64).reshape(-1)), cupy.asarray(np.array(roots, np.float64))


def device_constants(key, make):
    """A small device array built by ``make()`` once per ``key`` (an H2D copy from
    pageable memory waits for the stream, so constants are uploaded once).

    Parameters
    ----------
    key : hashable
        What the array depends on (the current device is added to it).
    make : callable
        Builds the array on the current device when it is not cached.

    Returns
    -------
    cupy.ndarray
        The cached array of ``key`` on the current device (shared: do not
        write to it).
    """
    import cupy

    key = (cupy.cuda.Device().id, key)  # one copy per device
    with _const_lock:
        arr = _const_cache.get(key)
        if arr is None:
            arr = make()
            if len(_const_cache) > 256:
                _const_cache.clear()
            _const_cache[key] = arr
    return arr


_const_lock = threading.Lock()
_const_cache: dict = {}

_KIND_CODE = {"real": "real", "split": "2m", "2m": "2m", "3m": "3m", "split2m": "split2m"}
PLANES = {"real": 1, "2m": 2, "split": 2, "split2m": 4, "3m": 3}


def residues(kind: str, x, shift_d, moduli, roots, conj: bool, out=None):
    """All residue planes of factor ``x`` for the moduli: int8 ``(PL·len(moduli), rows_pad, cols_pad)``.

    ``kind``: ``real`` (real x), ``2m``/``3m`` (complex x), ``split`` (real x:
    its column halves as real and imaginary parts), ``split2m`` (complex x,
    column halves).  ``shift_d``: int32 device array, one shift per row.

    Parameters
    ----------
    kind : {"real", "2m", "3m", "split", "split2m"}
        The plane kind (:data:`PLANES` planes per modulus).
    x : cupy.ndarray
        The factor, rows × k, float32/float64 (complex for 2m/3m/split2m), any strides.
    shift_d : cupy.ndarray
        int32, one power-of-two shift per row (``scaling.DEAD``: a zero row).
    moduli : sequence of int
        The moduli of this pass (at most ``MAX_MODULI``).
    roots : sequence of int or None
        Per modulus its square root of −1 (2M kinds); None or 0 otherwise.
    conj : bool
        Whether to take the residues of ``conj(x)``.
    out : cupy.ndarray, optional
        int8 array of the result's shape to write into; None: a new one.

    Returns
    -------
    cupy.ndarray
        int8 ``(PL·len(moduli), pad(rows), pad(cols))``, k contiguous; modulus
        l's planes are ``PL·l`` to ``PL·l + PL - 1``.
    """
    import cupy

    rows, k = x.shape
    cols = k // 2 if kind in ("split", "split2m") else k
    rp, cp = pad(rows), pad(cols)
    pl = PLANES[kind]
    nmod = len(moduli)
    if nmod > MAX_MODULI:
        raise ValueError(f"at most {MAX_MODULI} moduli per residue pass")
    if out is None:
        out = cupy.empty((pl * nmod, rp, cp), np.int8)
    xr, xi, rs, cs, suffix, size = _views(x)
    half = cols * cs * size  # bytes from column 0 to column `cols` (split kinds' second half)
    if kind == "real":
        srcs = (xr, 0, 0, 0)
    elif kind in ("2m", "3m"):
        srcs = (xr, xi, 0, 0)
    elif kind == "split":
        srcs = (xr, xr + half, 0, 0)
    else:
        srcs = (xr, xi, xr + half, xi + half)
    mods, rts = _mod_constants(tuple(int(m) for m in moduli), tuple(int(r or 0) for r in roots))
    tiles_x = cp // PAD  # a block takes RES_TILES of a tile row in turn
    _fn(f"oz_res_{_KIND_CODE[kind]}_{suffix}")(
        (-(-tiles_x // RES_TILES), rp // PAD),
        (256,),
        (
            _i64(rows),
            _i64(cols),
            *(_ptr(s) for s in srcs),
            _i64(rs),
            _i64(cs),
            shift_d,
            _i32(bool(conj)),
            _i32(nmod),
            mods,
            rts,
            out,
            _i64(rp * cp),
            _i64(cp),
            _i64(tiles_x),
        ),
    )
    return out


#: Which cuBLAS path computes the int8 products: "gemmex" (cublasGemmEx, cuBLAS's own
#: heuristic), "lt" (cuBLASLt with the algorithm chosen by timing on the first call of each
#: shape, see :mod:`emublas._kernels.cublaslt`) or "auto" (the default): cuBLASLt timed from
#: LT_MIN_VOLUME = m·n·k on, where it measured 1.4-4.9% faster per product on the H200;
#: below it cuBLASLt's first heuristic proposal, as fast as gemmEx on the device (1.01× at
#: 4096³) and cheaper on the host (16 µs a call against 28, bench_gpu_host_ops.py), which
#: matters before the residue pass, where the device waits for the host; gemmEx for the
#: column blocks and on a stream being captured (cuBLASLt's workspace is allocated per
#: stream on first use, which must not happen inside a capture).
#: From EMUBLAS_OZAKI2_PRODUCTS.
PRODUCTS = env_value("EMUBLAS_OZAKI2_PRODUCTS", choice("gemmex", "lt", "auto"), "auto")
LT_MIN_VOLUME = 2**37

#: Products wider than this many columns of C are issued as blocks of it (0: never), from
#: m·n·k = SPLIT_MIN_VOLUME on.  On the H200 a 16384³ product ran at 1.33 Pop/s whole
#: (cuBLASLt, timed choice) and 1.37 in blocks of 4096 columns (gemmEx), and whole calls at
#: n = 16384 gained 7-13%; at 8192³ the blocks were slower.  From EMUBLAS_OZAKI2_PRODUCT_COLS.
PRODUCT_COLS = env_int("EMUBLAS_OZAKI2_PRODUCT_COLS", 4096, 0, 1 << 30)
SPLIT_MIN_VOLUME = 2**42


def gemm_tn(a_ptr: int, b_ptr: int, m: int, n: int, k: int, lda: int, ldb: int, c, ldc: int, c_offset: int = 0) -> None:
    """``C = Aᵀ·B`` on cuBLAS int8 tensor cores, on cupy's current stream.

    Parameters
    ----------
    a_ptr, b_ptr : int
        Device addresses of A (k × m, leading dimension ``lda``) and B (k × n, ``ldb``),
        int8 column-major.
    m, n, k : int
        The product's shape.
    lda, ldb : int
        Leading dimensions of A and B (elements).
    c : cupy.ndarray
        int32 output holding C (m × n column-major, leading dimension ``ldc``) from
        element ``c_offset`` on.
    ldc, c_offset : int
        C's leading dimension and its first element within ``c``.
    """
    import cupy

    c_ptr = c.data.ptr + 4 * c_offset
    stream = cupy.cuda.get_current_stream().ptr
    w = PRODUCT_COLS if PRODUCT_COLS and n > PRODUCT_COLS and m * n * k >= SPLIT_MIN_VOLUME else n
    # blocks go through gemmEx under "auto": as fast as the timed cuBLASLt choice, and the
    # same kernel every run (the timed choice varied between processes)
    if PRODUCTS == "lt":
        path = "best"
    elif PRODUCTS == "gemmex" or w < n:
        path = "gemmex"
    elif m * n * k >= LT_MIN_VOLUME:
        path = "best"
    else:
        from ..._kernels import cublaslt

        path = "gemmex" if cublaslt.capturing(stream) else "heuristic"
    for lo in range(0, n, w):  # integer products: the blocks' results are the whole product's, bit for bit
        _gemm_tn(path, stream, a_ptr, b_ptr + lo * ldb, m, min(w, n - lo), k, lda, ldb, c_ptr + 4 * lo * ldc, ldc)


#: Whether the products of a run of moduli may go to cuBLASLt as one strided-batched call
#: ("auto", the default) or always one call per product ("off"): from EMUBLAS_OZAKI2_BATCHED.
#: Under "auto" a batch is formed for products of BATCH_MIN_VOLUME <= m·n·k < BATCH_MAX_VOLUME,
#: outside stream capture.  On the H200 (bench_ozaki2_gpu_phases.py --batched off auto) whole
#: calls at n = 3072 gained 12-14% back to back (their products 20-23%); at 4096 dgemm gained
#: 1-5% and zgemm lost up to 13%, and from 8192³ a batch was slower per product: so the window
#: ends below 4096³.  Below 2048³ calls replay as CUDA graphs, which capture the products one
#: by one.
BATCHED = env_value("EMUBLAS_OZAKI2_BATCHED", choice("auto", "off"), "auto")
BATCH_MIN_VOLUME = 2**33
BATCH_MAX_VOLUME = 2**36


def gemm_tn_batched(
    a_ptr: int,
    b_ptr: int,
    m: int,
    n: int,
    k: int,
    lda: int,
    ldb: int,
    c,
    ldc: int,
    c_offset: int,
    batch: int,
    stride_a: int,
    stride_b: int,
    stride_c: int,
) -> bool:
    """``C_i = A_iᵀ·B_i`` for ``i < batch`` as one strided-batched cuBLASLt call, where it pays.

    The algorithm is chosen by timing on the first call of a shape (which synchronises);
    the integers are :func:`gemm_tn`'s, bit for bit.

    Parameters
    ----------
    a_ptr, b_ptr, m, n, k, lda, ldb, c, ldc, c_offset
        As for :func:`gemm_tn`, for the first product.
    batch : int
        Products.
    stride_a, stride_b, stride_c : int
        Elements from one product's A, B and C to the next's.

    Returns
    -------
    bool
        Whether the products were queued; False (nothing queued) outside the volumes
        where a batch is faster, under ``EMUBLAS_OZAKI2_BATCHED=off`` or a forced
        product path, and on a stream being captured: then the caller issues them one
        by one.
    """
    import cupy

    if BATCHED != "auto" or PRODUCTS != "auto" or batch < 2:
        return False
    if not BATCH_MIN_VOLUME <= m * n * k < BATCH_MAX_VOLUME:
        return False
    from ..._kernels import cublaslt

    stream = cupy.cuda.get_current_stream().ptr
    if cublaslt.capturing(stream):
        return False

    cublaslt.matmul_i8_tn(
        m,
        n,
        k,
        a_ptr,
        lda,
        b_ptr,
        ldb,
        c.data.ptr + 4 * c_offset,
        ldc,
        batch=batch,
        stride_a=stride_a,
        stride_b=stride_b,
        stride_c=stride_c,
        stream=stream,
        algo="best",
    )
    return True


def _gemm_tn(path: str, stream: int, a_ptr, b_ptr, m, n, k, lda, ldb, c_ptr, ldc) -> None:
    if path != "gemmex":
        from ..._kernels import cublaslt

        algo = "best" if path == "best" else None  # None: the heuristic's first proposal
        cublaslt.matmul_i8_tn(m, n, k, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, stream=stream, algo=algo)
        return
    import cupy

    from ..._kernels import cublas_ext

    cublas_ext.gemm_i8(
        cupy.cuda.device.get_cublas_handle(), stream, _OP_T, _OP_N, m, n, k, a_ptr, lda, b_ptr, ldb, c_ptr, ldc
    )


def w_maxima(w, rows: int, nb: int, ld: int, rowmax, colmax) -> None:
    """Fold a block of the bound product W into its row and column maxima (``oz_wmax``).

    ``rowmax[i] = max(rowmax[i], max_j w[j, i])`` and ``colmax[j] = max(colmax[j], max_i w[j, i])``.

    Parameters
    ----------
    w : cupy.ndarray
        int32 ``(nb, ld)`` C-order block of W (its columns as rows).
    rows : int
        Rows of W covered (entries ``i < rows`` of each column).
    nb : int
        Columns of W in the block.
    ld : int
        Leading dimension of ``w`` (elements between consecutive columns of W).
    rowmax, colmax : cupy.ndarray
        int64 maxima (``rows`` and ``nb`` of them, contiguous), updated in place
        (start at 0; W >= 0).

    Notes
    -----
    Queued on cupy's current stream; merged by atomicMax, so blocks may be processed in any order.
    """
    _fn("oz_wmax")(((rows + 255) // 256, (nb + 63) // 64), (256,), (_i64(rows), _i64(nb), w, _i64(ld), rowmax, colmax))


MAX_TERMS = constants.OZ_MAX_TERMS  # oz_crt_final keeps the term constants in shared memory
FUSED_MAX_TERMS = constants.OZ_FUSED_MAX_TERMS  # oz_crt_fused: fewer, beside its ring of products
