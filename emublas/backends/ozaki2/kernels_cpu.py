"""The Ozaki-II C kernels (``native/cpu/ozaki_*.c``) on numpy arrays: residues, row
statistics and bound planes (the CRT passes are in :mod:`.kernels_crt`).

Thin, checked wrappers over the cffi extension that :mod:`emublas._kernels.cpu`
loads; every array argument is validated here once, so the stages
(:mod:`.cpu_stages`) pass arrays straight through.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from ..._kernels.cpu import require, threads_for
from ..._kernels.operands import elem_strides, ptr

__all__ = [
    "oz_kernel_name",
    "oz_residues",
    "oz_row_stats",
    "oz_bound_int8",
    "oz_stats_bound",
    "oz_row_plan",
    "oz_scaled_residues",
    "oz_residues_cplx",
    "oz_residues_3m",
]


def oz_kernel_name() -> str:
    """The implementation the ``oz_*`` kernels use on this CPU.

    Returns
    -------
    str
        ``"avx512"`` (AVX-512 F/VL/DQ/BW present and not forced off),
        ``"avx2"`` (AVX2+FMA without AVX-512, or forced) or ``"generic"``
        (the portable C); all give bit-identical results.
    """
    ffi, lib = require()
    return ffi.string(lib.emublas_oz_kernel_name()).decode()


def _oz_check(rc: int, what: str) -> None:
    _, lib = require()
    if rc == lib.EMUBLAS_OK:
        return
    if rc == lib.EMUBLAS_ENOMEM:
        raise MemoryError(f"emublas {what}: out of memory")
    if rc == lib.EMUBLAS_ERANGE:
        raise ValueError(f"emublas {what}: non-finite input (NaN/Inf, or x * 2**shift overflowed)")
    raise ValueError(f"emublas {what}: invalid arguments (code {rc})")


def _oz_float_input(x: Any, name: str) -> tuple[np.ndarray, int, int, int]:
    """A 2-D float32/float64 array C can read: (array, dtype code, rs, cs)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(
            f"{name} must have dtype float32 or float64, got {x.dtype} (pass complex arrays as .real and .imag views)"
        )
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    st = elem_strides(x)
    if st is None or not x.flags.aligned:
        x = np.array(x, order="F")
        st = elem_strides(x)
    return x, (1 if x.dtype == np.float64 else 0), st[0], st[1]  # type: ignore[index]


def _int32_vector(v: Any, length: int, name: str) -> np.ndarray:
    a = np.asarray(v)
    if a.ndim != 1 or a.shape[0] != length:
        raise ValueError(f"{name} must be 1-D of length {length}, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    if a.dtype == np.int32:  # the usual case (the plans' shifts): in range by its type
        return np.ascontiguousarray(a)
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{name} has values outside int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def _moduli_vector(moduli: Any) -> np.ndarray:
    """The moduli as a checked int32 vector (read-only; checked once per tuple of moduli)."""
    if _int_tuple(moduli):
        return _moduli_cached(moduli)
    return _moduli_check(moduli)


def _int_tuple(v: Any) -> bool:
    # only a tuple of Python ints is a cache key (2.0 == 2 would share an entry)
    return isinstance(v, tuple) and all(type(e) is int for e in v)


@lru_cache(maxsize=256)
def _moduli_cached(moduli: tuple) -> np.ndarray:
    mods = _moduli_check(moduli)
    mods.flags.writeable = False
    return mods


def _moduli_check(moduli: Any) -> np.ndarray:
    mods = np.asarray(moduli)
    if mods.ndim != 1:
        raise ValueError(f"moduli must be a 1-D sequence, got shape {mods.shape}")
    if mods.size and mods.dtype.kind not in "iu":
        raise TypeError(f"moduli must be integers, got dtype {mods.dtype}")
    limit = require()[1].EMUBLAS_OZ_MAX_MODULI  # the compiled kernels' (native/include/emublas_constants.h)
    if mods.size > limit:
        raise ValueError(f"at most {limit} moduli per call, got {mods.size}")
    if mods.size and (mods.min() < 2 or mods.max() > 256):
        raise ValueError("every modulus must be in 2..256")
    return np.ascontiguousarray(mods, dtype=np.int32)


def _roots_vector(roots: Any, mods: np.ndarray, moduli: Any) -> np.ndarray:
    """The 2M roots as a checked int32 vector (``s*s == -1 mod m``; checked once per tuple pair)."""
    if _int_tuple(roots) and _int_tuple(moduli):
        return _roots_cached(roots, moduli)
    return _roots_check(roots, mods)


@lru_cache(maxsize=256)
def _roots_cached(roots: tuple, moduli: tuple) -> np.ndarray:
    rts = _roots_check(roots, _moduli_vector(moduli))
    rts.flags.writeable = False
    return rts


def _roots_check(roots: Any, mods: np.ndarray) -> np.ndarray:
    rts = _int32_vector(roots, mods.size, "roots")
    bad = [(int(m), int(s)) for m, s in zip(mods, rts) if (int(s) * int(s) + 1) % int(m)]
    if bad:
        raise ValueError(f"roots must satisfy s*s == -1 (mod m); not so for (m, s) = {bad}")
    return rts


def _planes_out(out: Any, planes: int, rows: int, cols: int, like: np.ndarray) -> np.ndarray:
    if out is None:
        if abs(like.strides[0]) <= abs(like.strides[1]):  # column-major-ish input: F planes
            return np.empty((planes, cols, rows), dtype=np.int8).transpose(0, 2, 1)
        return np.empty((planes, rows, cols), dtype=np.int8)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != np.int8:
        raise TypeError(f"out must have dtype int8, got {out.dtype}")
    if out.shape != (planes, rows, cols):
        raise ValueError(f"out has shape {out.shape}, expected {(planes, rows, cols)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


def _axis(axis: Any) -> int:
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (shift per row) or 1 (shift per column), got {axis!r}")
    return int(axis)


def oz_residues(
    x: np.ndarray,
    shift: Any,
    axis: int,
    moduli: Any,
    out: np.ndarray | None = None,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """Symmetric int8 residues of ``trunc(x * 2**shift)`` for each modulus.

    Parameters
    ----------
    x : numpy.ndarray, float32 or float64, shape (rows, cols)
        Finite values, any strides.
    shift : sequence of int
        ``rows`` shifts (``axis=0``: one per row) or ``cols`` (``axis=1``).
    axis : {0, 1}
    moduli : sequence of int
        Each in 2..256, at most 64.
    out : numpy.ndarray, int8, shape (len(moduli), rows, cols), optional
        Any strides (e.g. planes of a bigger buffer).  New array otherwise.
    threads : int, optional

    Returns
    -------
    numpy.ndarray
        ``out[l, i, j] = y mod moduli[l]`` in [-(m-1)/2, (m-1)/2] (odd m) or
        [-m/2, m/2-1] (even m), y the exact ``trunc(x[i, j] * 2**shift)``.

    Raises
    ------
    ValueError
        Bad shapes or moduli, or a non-finite scaled element.
    """
    nthreads = threads_for(threads)
    x, code, rs, cs = _oz_float_input(x, "x")
    rows, cols = x.shape
    ax = _axis(axis)
    sh = _int32_vector(shift, rows if ax == 0 else cols, "shift")
    mods = _moduli_vector(moduli)
    out = _planes_out(out, mods.size, rows, cols, x)
    ffi, lib = require()
    if out.size == 0:
        return out
    ps, rso, cso = out.strides
    rc = lib.emublas_oz_residues(
        code,
        rows,
        cols,
        ptr(ffi, "const void *", x),
        rs,
        cs,
        ptr(ffi, "const int32_t *", sh),
        ax,
        mods.size,
        ptr(ffi, "const int32_t *", mods),
        ptr(ffi, "int8_t *", out),
        ps,
        rso,
        cso,
        nthreads,
    )
    _oz_check(rc, "oz_residues")
    return out


def _complex_parts(xr: Any, xi: Any) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    xr, code, rs, cs = _oz_float_input(xr, "xr")
    xi, code_i, rs_i, cs_i = _oz_float_input(xi, "xi")
    if xr.shape != xi.shape:
        raise ValueError(f"xr and xi shapes differ: {xr.shape} vs {xi.shape}")
    if code != code_i:
        raise TypeError(f"xr and xi dtypes differ: {xr.dtype} vs {xi.dtype}")
    if (rs, cs) != (rs_i, cs_i):  # e.g. a transposed xi: give both one layout
        xr = np.asfortranarray(xr)
        xi = np.asfortranarray(xi)
        rs, cs = elem_strides(xr)  # type: ignore[misc]
    return xr, xi, code, rs, cs


def _oz_cplx(kind: str, xr, xi, shift, axis, moduli, roots, conj, out, threads) -> np.ndarray:
    nthreads = threads_for(threads)
    xr, xi, code, rs, cs = _complex_parts(xr, xi)
    rows, cols = xr.shape
    ax = _axis(axis)
    sh = _int32_vector(shift, rows if ax == 0 else cols, "shift")
    mods = _moduli_vector(moduli)
    per = 2 if kind == "2m" else 3
    if kind == "2m":
        rts = _roots_vector(roots, mods, moduli)
    out = _planes_out(out, per * mods.size, rows, cols, xr)
    ffi, lib = require()
    if out.size == 0:
        return out
    ps, rso, cso = out.strides
    args_x = (
        code,
        rows,
        cols,
        ptr(ffi, "const void *", xr),
        ptr(ffi, "const void *", xi),
        rs,
        cs,
        ptr(ffi, "const int32_t *", sh),
        ax,
        1 if conj else 0,
        mods.size,
        ptr(ffi, "const int32_t *", mods),
    )
    args_o = (ptr(ffi, "int8_t *", out), ps, rso, cso, nthreads)
    if kind == "2m":
        rc = lib.emublas_oz_residues_cplx(*args_x, ptr(ffi, "const int32_t *", rts), *args_o)
    else:
        rc = lib.emublas_oz_residues_3m(*args_x, *args_o)
    _oz_check(rc, f"oz_residues_{'cplx' if kind == '2m' else '3m'}")
    return out


def _oz_parts(x: np.ndarray):
    """(xr, xi or None, dtype code, row stride, column stride) of a real or complex matrix."""
    if x.dtype.kind == "c":
        xr, xi, code, rs, cs = _complex_parts(x.real, x.imag)
        return xr, xi, code, rs, cs
    xr, code, rs, cs = _oz_float_input(x, "x")
    return xr, None, code, rs, cs


def _factor_args(x: np.ndarray):
    """A factor as the scaling kernels' leading arguments.

    Returns ``(keep, rows, cols, args)``: ``args`` is ``(dtype code, rows, cols, real part,
    imaginary part or NULL, row stride, column stride)``; ``keep`` holds the arrays the
    pointers point into (a copy where ``x`` could not be read in place), to be kept alive
    until the call returns.
    """
    xr, xi, code, rs, cs = _oz_parts(x)
    ffi, _ = require()
    rows, cols = xr.shape
    args = (
        code,
        rows,
        cols,
        ptr(ffi, "const void *", xr),
        ffi.NULL if xi is None else ptr(ffi, "const void *", xi),
        rs,
        cs,
    )
    return (xr, xi), rows, cols, args


def oz_row_stats(
    x: np.ndarray,
    *,
    threads: int | None = None,
    carry: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row ``max|x|``, ``sum|x|^2`` and ``sum|x|`` in one pass (|x| the complex modulus).

    A row holding NaN or Inf gets a non-finite maximum.  The sums may
    overflow or underflow for rows of extreme magnitude; the caller redoes
    those with scaling.

    Parameters
    ----------
    x : numpy.ndarray, shape (rows, cols)
        float32, float64, complex64 or complex128, any strides (copied only
        when a stride is not a whole element or the data is unaligned).
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.
    carry : tuple of three numpy.ndarray, optional
        The statistics of the columns to the left of ``x`` (as returned by an
        earlier call; float64 vectors of length ``rows``, not modified); the
        sums continue from them, column by column, so feeding the column
        blocks of a matrix in order gives results bit-identical to one call on
        the whole matrix.

    Returns
    -------
    rowmax, sumsq, l1 : numpy.ndarray, float64, shape (rows,)
        New arrays (also with ``carry``): each row's largest magnitude (NaN
        for a row holding NaN or Inf), sum of squared magnitudes and sum of
        magnitudes, the sums accumulated in double over the columns in order.

    Raises
    ------
    TypeError
        ``x`` is not a numpy array of a float or complex dtype.
    ValueError
        ``x`` is not 2-D, or ``carry`` has the wrong shapes.
    """
    nthreads = threads_for(threads)
    keep, rows, cols, args = _factor_args(x)
    if carry is None:
        out = [np.empty(rows) for _ in range(3)]
    else:
        out = [np.array(v, dtype=np.float64, copy=True) for v in carry]
        if any(o.shape != (rows,) for o in out):
            raise ValueError(f"carry must be three float64 vectors of length {rows}")
    ffi, lib = require()
    kernel = lib.emublas_oz_row_stats if carry is None else lib.emublas_oz_row_stats_carry
    rc = kernel(
        *args,
        *(ptr(ffi, "double *", o) for o in out),
        nthreads,
    )
    _oz_check(rc, "oz_row_stats")
    return out[0], out[1], out[2]


def oz_stats_bound(x: np.ndarray, *, threads: int | None = None):
    """:func:`oz_row_stats` and :func:`oz_bound_int8` in one read of ``x``.

    The rows are taken in blocks small enough to stay in the core's cache between
    the statistics and the bounds, so that ``x`` comes from memory once; the
    results are bit-identical to the two separate passes.

    Parameters
    ----------
    x : numpy.ndarray, shape (rows, cols)
        float32, float64, complex64 or complex128, any strides; NaN/Inf allowed
        (such a row gets a NaN maximum and zero bounds).
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.

    Returns
    -------
    rowmax, sumsq, l1 : numpy.ndarray, float64, shape (rows,)
        As :func:`oz_row_stats` returns them.
    ea : numpy.ndarray, int32, shape (rows,)
        The frexp exponent of each row's largest magnitude (``max|x_row| < 2**ea``);
        0 for a zero row and for a row holding NaN/Inf.
    bound : numpy.ndarray, int8, shape (rows, cols)
        :func:`oz_bound_int8` of ``x`` with those exponents, its rows holding
        NaN/Inf zeroed; Fortran-ordered where ``x``'s rows run along its unit stride,
        else C-ordered.

    Raises
    ------
    TypeError, ValueError
        ``x`` of the wrong type or not 2-D.
    """
    nthreads = threads_for(threads)
    keep, rows, cols, args = _factor_args(x)
    stats = [np.empty(rows) for _ in range(3)]
    ea = np.empty(rows, np.int32)
    rs, cs = args[5], args[6]
    # the bounds in the input's order: written across the input's unit stride they cost
    # several times the statistics (the bound product reads any order)
    by_cols = rs == 1 or rs < cs
    out = np.empty((cols, rows), np.int8).T if by_cols else np.empty((rows, cols), np.int8)
    ffi, lib = require()
    rc = lib.emublas_oz_stats_bound(
        *args,
        *(ptr(ffi, "double *", o) for o in stats),
        ptr(ffi, "int32_t *", ea),
        ptr(ffi, "int8_t *", out),
        *((1, rows) if by_cols else (cols, 1)),
        nthreads,
    )
    _oz_check(rc, "oz_stats_bound")
    return stats[0], stats[1], stats[2], ea, out


def oz_row_plan(stats, wmax, L: float, log2_127sq: float, safety: float, log2k: float, k: int, slack: float):
    """Each row's scaling plan from its statistics (the formulas of ``emublas_oz_row_plan``).

    Parameters
    ----------
    stats : sequence of three numpy.ndarray
        ``rowmax`` (non-finite for a row holding NaN/Inf), ``sumsq`` and ``l1``,
        float64 vectors of one length (:func:`oz_row_stats`).
    wmax : numpy.ndarray or None
        The accurate mode's bound-product row maxima (integers); None: fast mode.
    L, log2_127sq, safety, log2k, slack : float
        The product bound's log2, the constants of the growth formula and the
        certificate's slack.
    k : int
        Columns of the factor.

    Returns
    -------
    shift : numpy.ndarray of int32
    err, wsum : numpy.ndarray of float64
    budget : numpy.ndarray of int32
        Per row, as :class:`emublas.backends.ozaki2.scaling.RowPlan` holds them.
    """
    rowmax, sumsq, l1 = (np.ascontiguousarray(v, dtype=np.float64) for v in stats)
    rows = rowmax.shape[0]
    if sumsq.shape != (rows,) or l1.shape != (rows,):
        raise ValueError(
            f"stats must be three float64 vectors of one length, got {rowmax.shape}, {sumsq.shape}, {l1.shape}"
        )
    ffi, lib = require()
    w = ffi.NULL
    if wmax is not None:
        wv = np.ascontiguousarray(wmax, dtype=np.int64)
        if wv.shape != (rows,):
            raise ValueError(f"wmax must be 1-D of length {rows}, got shape {wv.shape}")
        w = ptr(ffi, "const int64_t *", wv)
    shift, budget = np.empty(rows, np.int32), np.empty(rows, np.int32)
    err, wsum = np.empty(rows), np.empty(rows)
    rc = lib.emublas_oz_row_plan(
        rows,
        ptr(ffi, "const double *", rowmax),
        ptr(ffi, "const double *", sumsq),
        ptr(ffi, "const double *", l1),
        w,
        L,
        log2_127sq,
        safety,
        log2k,
        float(k),
        slack,
        ptr(ffi, "int32_t *", shift),
        ptr(ffi, "double *", err),
        ptr(ffi, "double *", wsum),
        ptr(ffi, "int32_t *", budget),
    )
    _oz_check(rc, "oz_row_plan")
    return shift, err, wsum, budget


#: Plane kinds :func:`oz_scaled_residues` makes, with their code in the C kernel and planes per modulus.
SCALED_KINDS = {"real": (0, 1), "2m": (1, 2), "3m": (2, 3), "split": (3, 2)}


def oz_scaled_residues(
    kind: str,
    x: np.ndarray,
    moduli: Any,
    roots: Any,
    *,
    conj: bool,
    L: float,
    safety: float,
    slack: float,
    threads: int | None = None,
):
    """Fast mode's scaling and the residue planes of a run of moduli, from one read of ``x``.

    The rows are taken in blocks that stay in the core's cache: each block's statistics
    (:func:`oz_row_stats`), its plan (:func:`oz_row_plan` without a bound product), then
    its residues with those shifts; the results are those of the three calls, bit for bit.

    Parameters
    ----------
    kind : {"real", "2m", "3m", "split"}
        The plane kind (``split``: a real ``x`` whose column halves are the parts of 2M
        residues, as :func:`emublas.backends.ozaki2.cpu_stages.residues` makes them).
    x : numpy.ndarray, shape (rows, k)
        Real (``real``, ``split``; ``k`` even for ``split``) or complex (``2m``, ``3m``);
        NaN/Inf allowed: such a row gets the dead shift and zero residues.
    moduli, roots : sequence of int
        The run's moduli and their square roots of -1 (read by ``2m`` and ``split``).
    conj : bool
        Residues of ``conj(x)`` (``2m``, ``3m``).
    L, safety, slack : float
        The product bound's log2, the growth's safety term and the certificate's slack.
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.

    Returns
    -------
    stats : tuple of three numpy.ndarray
        ``rowmax``, ``sumsq``, ``l1`` (:func:`oz_row_stats`).
    plan : tuple
        ``shift``, ``err``, ``wsum``, ``budget`` (:func:`oz_row_plan`).
    planes : numpy.ndarray, int8, shape (planes·len(moduli), rows, kk)
        As :func:`emublas.backends.ozaki2.cpu_stages.residues` returns them.

    Raises
    ------
    TypeError, ValueError
        A bad kind, dtype, shape or modulus, or a non-finite scaled element.
    """
    if kind not in SCALED_KINDS:
        raise ValueError(f"kind must be one of {sorted(SCALED_KINDS)}, got {kind!r}")
    code_kind, per = SCALED_KINDS[kind]
    if (x.dtype.kind == "c") != (kind in ("2m", "3m")):
        raise TypeError(f"kind {kind!r} takes {'complex' if kind in ('2m', '3m') else 'real'} data, got {x.dtype}")
    nthreads = threads_for(threads)
    keep, rows, cols, args = _factor_args(x)
    if kind == "split" and cols % 2:
        raise ValueError(f"the split kind needs an even number of columns, got {cols}")
    mods = _moduli_vector(tuple(moduli))
    ffi, lib = require()
    rts = _roots_vector(tuple(roots), mods, tuple(moduli)) if kind in ("2m", "split") else None
    kk = cols // 2 if kind == "split" else cols
    out = _planes_out(None, per * mods.size, rows, kk, keep[0])
    stats = [np.empty(rows) for _ in range(3)]
    shift, budget = np.empty(rows, np.int32), np.empty(rows, np.int32)
    err, wsum = np.empty(rows), np.empty(rows)
    ps, rso, cso = out.strides
    rc = lib.emublas_oz_scaled_residues(
        code_kind,
        *args,
        1 if conj and kind in ("2m", "3m") else 0,
        mods.size,
        ptr(ffi, "const int32_t *", mods),
        ffi.NULL if rts is None else ptr(ffi, "const int32_t *", rts),
        ptr(ffi, "int8_t *", out) if out.size else ffi.NULL,
        ps,
        rso,
        cso,
        L,
        safety,
        math.log2(max(cols, 1)),
        slack,
        *(ptr(ffi, "double *", v) for v in stats),
        ptr(ffi, "int32_t *", shift),
        ptr(ffi, "double *", err),
        ptr(ffi, "double *", wsum),
        ptr(ffi, "int32_t *", budget),
        nthreads,
    )
    _oz_check(rc, "oz_scaled_residues")
    return tuple(stats), (shift, err, wsum, budget), out


def oz_bound_int8(x: np.ndarray, ea: Any, *, threads: int | None = None) -> np.ndarray:
    """``ceil(127·|x|·2**-ea[row])`` as a C-ordered int8 matrix (entrywise upper bounds).

    Parameters
    ----------
    x : numpy.ndarray, shape (rows, cols)
        float32, float64, complex64 or complex128 (|x| the complex modulus),
        any strides; finite, with ``|x[i, j]| <= 2**ea[i]`` so that every
        bound fits in 0..127.
    ea : sequence of int, length rows
        Each row's exponent (int32 range), e.g. ``max|x_row| < 2**ea``.  Rows
        of subnormal magnitude (very negative ``ea``) are scaled in two steps
        so that ``127·2**-ea`` does not overflow.
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.

    Returns
    -------
    numpy.ndarray, int8, shape (rows, cols), C-ordered
        ``ceil(127·|x[i, j]|·2**-ea[i])``, at least 1 for every nonzero entry
        (also where the product underflows), 0 exactly for zero entries: the
        product of two such matrices, unscaled, bounds ``Σ_l |x_il|·|y_jl|``
        entrywise from 7-bit entries.

    Raises
    ------
    TypeError, ValueError
        ``x`` of the wrong type or not 2-D, ``ea`` of the wrong length or not
        integers.
    """
    nthreads = threads_for(threads)
    keep, rows, cols, args = _factor_args(x)
    e = _int32_vector(ea, rows, "ea")
    out = np.empty((rows, cols), np.int8)
    ffi, lib = require()
    rc = lib.emublas_oz_bound_int8(
        *args,
        ptr(ffi, "const int32_t *", e),
        ptr(ffi, "int8_t *", out),
        cols,
        1,
        nthreads,
    )
    _oz_check(rc, "oz_bound_int8")
    return out


def oz_residues_cplx(
    xr: np.ndarray,
    xi: np.ndarray,
    shift: Any,
    axis: int,
    moduli: Any,
    roots: Any,
    *,
    conj: bool = False,
    out: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """2M residues of a complex matrix given as real and imaginary parts.

    With ``yr = trunc(xr * 2**shift)``, ``yi = ±trunc(xi * 2**shift)`` (minus
    when ``conj``) and ``s = roots[l]`` (``s*s == -1 mod m``), plane ``2l`` is
    ``(yr + s*yi) mod m`` and plane ``2l+1`` is ``(yr - s*yi) mod m``
    (symmetric int8).

    Parameters
    ----------
    xr, xi : numpy.ndarray, float32 or float64, shape (rows, cols)
        The real and imaginary parts, one shape and dtype, finite, any strides
        (``z.real``/``z.imag`` views of a complex array work, as do two column
        blocks of one real matrix).
    shift : sequence of int
        ``rows`` shifts (``axis=0``: one per row) or ``cols`` (``axis=1``).
    axis : {0, 1}
    moduli : sequence of int
        Each in 2..256, at most 64 (``EMUBLAS_OZ_MAX_MODULI``).
    roots : sequence of int, length len(moduli)
        ``roots[l]`` a square root of -1 modulo ``moduli[l]``.
    conj : bool, default False
        Take the residues of the conjugate (``yi`` negated).
    out : numpy.ndarray, int8, shape (2*len(moduli), rows, cols), optional
        Any strides (e.g. planes of a bigger buffer).  New array otherwise.
    threads : int, optional

    Returns
    -------
    numpy.ndarray, int8, shape (2*len(moduli), rows, cols)
        ``out`` or the new array: the two planes of each modulus, each entry the
        symmetric residue as in :func:`oz_residues`.

    Raises
    ------
    TypeError
        ``xr`` and ``xi`` of other dtypes, or of different dtypes.
    ValueError
        Bad shapes, moduli or roots, or a non-finite scaled element.
    """
    return _oz_cplx("2m", xr, xi, shift, axis, moduli, roots, conj, out, threads)


def oz_residues_3m(
    xr: np.ndarray,
    xi: np.ndarray,
    shift: Any,
    axis: int,
    moduli: Any,
    *,
    conj: bool = False,
    out: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """3M residues: planes ``3l, 3l+1, 3l+2`` = ``yr, yi, yr + yi`` mod ``moduli[l]``.

    ``yr``, ``yi`` as in :func:`oz_residues_cplx` (``yi`` negated when
    ``conj``); the three planes feed the Karatsuba-style products of 3M moduli,
    which need no square root of -1.

    Parameters
    ----------
    xr, xi : numpy.ndarray, float32 or float64, shape (rows, cols)
        The real and imaginary parts, one shape and dtype, finite, any strides.
    shift : sequence of int
        ``rows`` shifts (``axis=0``: one per row) or ``cols`` (``axis=1``).
    axis : {0, 1}
    moduli : sequence of int
        Each in 2..256, at most 64 (``EMUBLAS_OZ_MAX_MODULI``).
    conj : bool, default False
        Take the residues of the conjugate (``yi`` negated).
    out : numpy.ndarray, int8, shape (3*len(moduli), rows, cols), optional
        Any strides.  New array otherwise.
    threads : int, optional

    Returns
    -------
    numpy.ndarray, int8, shape (3*len(moduli), rows, cols)
        ``out`` or the new array: three planes per modulus, each entry the
        symmetric residue as in :func:`oz_residues`.

    Raises
    ------
    TypeError
        ``xr`` and ``xi`` of other dtypes, or of different dtypes.
    ValueError
        Bad shapes or moduli, or a non-finite scaled element.
    """
    return _oz_cplx("3m", xr, xi, shift, axis, moduli, None, conj, out, threads)
