"""The Ozaki-II C kernels (``native/cpu/ozaki_*.c``) on numpy arrays: residues, row
statistics, bound planes, CRT accumulation and the certified finalize.

Thin, checked wrappers over the cffi extension that :mod:`emublas._kernels.cpu`
loads; every array argument is validated here once, so the stages
(:mod:`.cpu_stages`) pass arrays straight through.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..._kernels.cpu import check_operand, elem_strides, ptr, require, threads_for

__all__ = ["oz_kernel_name", "oz_residues", "oz_row_stats", "oz_bound_int8", "oz_residues_cplx", "oz_residues_3m",
           "oz_crt_accumulate", "oz_crt_finalize"]

_OUT_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1,
               np.dtype(np.complex64): 2, np.dtype(np.complex128): 3}


def oz_kernel_name() -> str:
    """``"avx512"`` or ``"generic"``: the implementation the ``oz_*`` kernels use here."""
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
        raise TypeError(f"{name} must have dtype float32 or float64, got {x.dtype} "
                        "(pass complex arrays as .real and .imag views)")
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
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{name} has values outside int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def _moduli_vector(moduli: Any) -> np.ndarray:
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
        code, rows, cols, ptr(ffi, "const void *", x), rs, cs,
        ptr(ffi, "const int32_t *", sh), ax, mods.size, ptr(ffi, "const int32_t *", mods),
        ptr(ffi, "int8_t *", out), ps, rso, cso, nthreads)
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
        rts = _int32_vector(roots, mods.size, "roots")
        bad = [(int(m), int(s)) for m, s in zip(mods, rts) if (int(s) * int(s) + 1) % int(m)]
        if bad:
            raise ValueError(f"roots must satisfy s*s == -1 (mod m); not so for (m, s) = {bad}")
    out = _planes_out(out, per * mods.size, rows, cols, xr)
    ffi, lib = require()
    if out.size == 0:
        return out
    ps, rso, cso = out.strides
    args_x = (code, rows, cols, ptr(ffi, "const void *", xr), ptr(ffi, "const void *", xi), rs, cs,
              ptr(ffi, "const int32_t *", sh), ax, 1 if conj else 0, mods.size,
              ptr(ffi, "const int32_t *", mods))
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

    ``carry``: the statistics of the columns to the left of ``x`` (as returned
    by an earlier call); the sums continue from them, column by column, so
    feeding the column blocks of a matrix in order gives results bit-identical
    to one call on the whole matrix.  New arrays are returned either way.
    """
    nthreads = threads_for(threads)
    xr, xi, code, rs, cs = _oz_parts(x)
    rows, cols = xr.shape
    if carry is None:
        out = [np.empty(rows) for _ in range(3)]
    else:
        out = [np.array(v, dtype=np.float64, copy=True) for v in carry]
        if any(o.shape != (rows,) for o in out):
            raise ValueError(f"carry must be three float64 vectors of length {rows}")
    ffi, lib = require()
    kernel = lib.emublas_oz_row_stats if carry is None else lib.emublas_oz_row_stats_carry
    rc = kernel(
        code, rows, cols, ptr(ffi, "const void *", xr),
        ffi.NULL if xi is None else ptr(ffi, "const void *", xi), rs, cs,
        *(ptr(ffi, "double *", o) for o in out), nthreads)
    _oz_check(rc, "oz_row_stats")
    return out[0], out[1], out[2]


def oz_bound_int8(x: np.ndarray, ea: Any, *, threads: int | None = None) -> np.ndarray:
    """``ceil(127·|x|·2**-ea[row])`` as a C-ordered int8 matrix (entrywise upper bounds)."""
    nthreads = threads_for(threads)
    xr, xi, code, rs, cs = _oz_parts(x)
    rows, cols = xr.shape
    e = _int32_vector(ea, rows, "ea")
    out = np.empty((rows, cols), np.int8)
    ffi, lib = require()
    rc = lib.emublas_oz_bound_int8(
        code, rows, cols, ptr(ffi, "const void *", xr),
        ffi.NULL if xi is None else ptr(ffi, "const void *", xi), rs, cs,
        ptr(ffi, "const int32_t *", e), ptr(ffi, "int8_t *", out), cols, 1, nthreads)
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
    (symmetric int8).  ``xr``/``xi`` are float32/float64 arrays of one shape
    and dtype (``z.real``/``z.imag`` views of a complex array work, as do two
    column blocks of one real matrix).  ``out``: int8, shape
    (2*len(moduli), rows, cols), any strides.
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
    """3M residues: planes ``3l, 3l+1, 3l+2`` = ``yr, yi, yr + yi`` mod ``moduli[l]``
    (see :func:`oz_residues_cplx`).  ``out``: int8, shape (3*len(moduli), rows, cols)."""
    return _oz_cplx("3m", xr, xi, shift, axis, moduli, None, conj, out, threads)


def _acc_array(a: Any, name: str, shape: tuple[int, int]) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != np.float64:
        raise TypeError(f"{name} must have dtype float64, got {a.dtype}")
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    m = shape[0]
    if a.size and not (a.flags.f_contiguous or (a.strides[0] == 8 and (shape[1] <= 1 or a.strides[1] == 8 * m))):
        raise ValueError(f"{name} must be Fortran-ordered (column-major, leading dimension m)")
    if not a.flags.aligned:
        raise ValueError(f"{name} must be aligned")
    return a


def _uplo(uplo: Any) -> int:
    codes = {0: 0, 1: 1, 2: 2, "A": 0, "U": 1, "L": 2}
    if isinstance(uplo, str):
        uplo = uplo.upper()
    if uplo not in codes:
        raise ValueError(f"uplo must be 0 (all), 1/'U' (i <= j) or 2/'L' (i >= j), got {uplo!r}")
    return codes[uplo]


def _int32_matrix(x: Any, name: str) -> tuple[np.ndarray, int, int]:
    x = check_operand(x, name, np.int32)
    st = elem_strides(x)
    if st is None or not x.flags.aligned:
        x = np.array(x, order="F")
        st = elem_strides(x)
    return x, st[0], st[1]  # type: ignore[index]


def _weight(w: Any, name: str) -> int:
    w = operator.index(w)
    if not -(2**16) < w < 2**16:
        raise ValueError(f"{name}={w} out of range (|w| < 2**16)")
    return w


def oz_crt_accumulate(
    x1: np.ndarray,
    w1: int,
    modulus: int,
    big_hi: float,
    big_lo: float,
    acc_hi: np.ndarray,
    acc_lo: np.ndarray,
    *,
    x2: np.ndarray | None = None,
    w2: int = 0,
    first: bool = False,
    uplo: Any = 0,
    threads: int | None = None,
) -> None:
    """Fused ``t = (w1*x1 + w2*x2) mod modulus`` and double-double CRT accumulation.

    ``(acc_hi, acc_lo) = (first ? 0 : (acc_hi, acc_lo)) + t * (big_hi + big_lo)``
    in place, for all entries (``uplo=0``), ``i <= j`` (1 or ``'U'``) or
    ``i >= j`` (2 or ``'L'``); others are left alone.

    Parameters
    ----------
    x1 : numpy.ndarray, int32, shape (m, n)
        Any strides.
    w1, w2 : int
        Weights, ``|w| < 2**16``.
    modulus : int
        ``2 <= modulus < 2**31``.
    big_hi, big_lo : float
        ``P/m`` split into two doubles.
    acc_hi, acc_lo : numpy.ndarray, float64, shape (m, n), Fortran-ordered
    x2 : numpy.ndarray, int32, shape (m, n), optional
        May share memory with x1 (e.g. ``x1.T``).
    """
    nthreads = threads_for(threads)
    x1, rs1, cs1 = _int32_matrix(x1, "x1")
    m, n = x1.shape
    w1 = _weight(w1, "w1")
    w2 = _weight(w2, "w2")
    if x2 is not None:
        x2, rs2, cs2 = _int32_matrix(x2, "x2")
        if x2.shape != (m, n):
            raise ValueError(f"x2 has shape {x2.shape}, expected {(m, n)}")
    else:
        rs2 = cs2 = 0
    modulus = operator.index(modulus)
    if not 2 <= modulus < 2**31:
        raise ValueError(f"modulus={modulus} must be in 2 .. 2**31-1")
    acc_hi = _acc_array(acc_hi, "acc_hi", (m, n))
    acc_lo = _acc_array(acc_lo, "acc_lo", (m, n))
    for a in (acc_hi, acc_lo):
        if not a.flags.writeable:
            raise ValueError("acc_hi and acc_lo must be writeable")
    if np.may_share_memory(acc_hi, acc_lo):
        raise ValueError("acc_hi and acc_lo must not overlap")
    code = _uplo(uplo)
    ffi, lib = require()
    if m == 0 or n == 0:
        return
    rc = lib.emublas_oz_crt_accumulate(
        m, n, ptr(ffi, "const int32_t *", x1), rs1, cs1, w1,
        ptr(ffi, "const int32_t *", x2) if x2 is not None else ffi.NULL, rs2, cs2, w2,
        modulus, float(big_hi), float(big_lo),
        ptr(ffi, "double *", acc_hi), ptr(ffi, "double *", acc_lo),
        1 if first else 0, code, nthreads)
    _oz_check(rc, "oz_crt_accumulate")


def _cert_struct(ffi, cert: dict, m: int, n: int):
    """The ``emublas_oz_cert`` struct of a certificate dict, and the arrays it points into."""
    c = ffi.new("emublas_oz_cert *")
    keep = []

    def vec(key, dtype, size):
        v = np.require(cert[key], dtype, ["C", "A"])
        if v.shape != (size,):
            raise ValueError(f"cert[{key!r}] must have length {size}, got shape {v.shape}")
        keep.append(v)
        return ptr(ffi, "double *" if dtype == np.float64 else "int32_t *", v)

    c.row_err, c.col_err = vec("row_err", np.float64, m), vec("col_err", np.float64, n)
    c.crt_err, c.target = float(cert["crt_err"]), float(cert["target"])
    w = cert.get("W")
    if w is not None:
        w = np.require(w, np.int32, ["F", "A"])
        if w.shape != (m, n):
            raise ValueError(f"cert['W'] must have shape {(m, n)}, got {w.shape}")
        keep.append(w)
        c.W, c.ldw = ptr(ffi, "int32_t *", w), m
        c.row_wsum, c.col_wsum = vec("row_wsum", np.float64, m), vec("col_wsum", np.float64, n)
        c.row_budget, c.col_budget = vec("row_budget", np.int32, m), vec("col_budget", np.int32, n)
    c.fix = int(bool(cert.get("fix")))
    if cert.get("L") is not None:  # the fallback, also for rows with NaN/Inf whatever fix says
        L, R = cert["L"], cert["R"]
        if L.shape[0] != m or R.shape[0] != n or L.shape[1] != R.shape[1]:
            raise ValueError(f"cert factors must be ({m}, k) and ({n}, k), got {L.shape} and {R.shape}")
        lr, li, code, rsl, csl = _oz_parts(L)
        rr, ri, code_r, rsr, csr = _oz_parts(R)
        if code != code_r or (li is None) != (ri is None):
            raise TypeError("cert factors must share one dtype")
        keep += [lr, li, rr, ri]
        c.dtype, c.k = code, L.shape[1]
        c.Lr, c.Rr = ptr(ffi, "void *", lr), ptr(ffi, "void *", rr)
        c.Li = ffi.NULL if li is None else ptr(ffi, "void *", li)
        c.Ri = ffi.NULL if ri is None else ptr(ffi, "void *", ri)
        c.rsl, c.csl, c.rsr, c.csr = rsl, csl, rsr, csr
        c.conj_l, c.conj_r = int(bool(cert.get("conj_l"))), int(bool(cert.get("conj_r")))
    c.uncertified = 0
    return c, keep


def oz_crt_finalize(
    re_hi: np.ndarray,
    re_lo: np.ndarray,
    P_hi: float,
    P_lo: float,
    row_shift: Any,
    col_shift: Any,
    out: np.ndarray,
    *,
    im_hi: np.ndarray | None = None,
    im_lo: np.ndarray | None = None,
    alpha: complex = 1.0,
    beta: complex = 0.0,
    uplo: Any = 0,
    cert: dict | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """CRT finalize: symmetric representative, unscaling, alpha/beta, write-out.

    For each selected entry, ``C' = S - round(S/P)*P`` (S = hi + lo, needs
    ``|C'| <= P/4``), ``v = C' * 2**-(row_shift[i] + col_shift[j])`` and
    ``out = alpha*v + beta*out`` computed in double and rounded once to
    ``out``'s dtype.  ``beta == 0`` means ``out`` is not read.

    Parameters
    ----------
    re_hi, re_lo : numpy.ndarray, float64, shape (m, n), Fortran-ordered
        The accumulated real part (from :func:`oz_crt_accumulate`).
    P_hi, P_lo : float
        The product of the moduli split into two doubles.
    row_shift, col_shift : sequences of int, lengths m and n
    out : numpy.ndarray, 2-D float32/float64/complex64/complex128, shape (m, n)
        Any strides; written in place and returned.
    im_hi, im_lo : numpy.ndarray, optional
        The imaginary part (complex ``out`` only).
    alpha, beta : complex
        Imaginary parts ignored for real ``out``.
    uplo : 0, 1/'U' (i <= j) or 2/'L' (i >= j)
    cert : dict, optional
        The per-entry accuracy certificate (``emublas_oz_cert`` in
        ``emublas_cpu.h``): ``row_err``, ``col_err`` (float64 vectors),
        ``crt_err``, ``target`` (floats), ``W`` (int32 (m, n) Fortran array or
        None), ``row_wsum``, ``col_wsum`` (float64), ``row_budget``,
        ``col_budget`` (int32), ``fix`` (bool), ``L``, ``R`` (the factors,
        (m, k) and (n, k)), ``conj_l``, ``conj_r``.  On return
        ``cert["uncertified"]`` holds the number of entries that failed it.
    """
    nthreads = threads_for(threads)
    if not isinstance(re_hi, np.ndarray):
        raise TypeError(f"re_hi must be a numpy.ndarray, got {type(re_hi).__name__}")
    if re_hi.ndim != 2:
        raise ValueError(f"re_hi must be 2-D, got shape {re_hi.shape}")
    m, n = re_hi.shape
    re_hi = _acc_array(re_hi, "re_hi", (m, n))
    re_lo = _acc_array(re_lo, "re_lo", (m, n))
    if (im_hi is None) != (im_lo is None):
        raise ValueError("give both im_hi and im_lo, or neither")
    if im_hi is not None:
        im_hi = _acc_array(im_hi, "im_hi", (m, n))
        im_lo = _acc_array(im_lo, "im_lo", (m, n))
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype not in _OUT_DTYPES:
        raise TypeError(f"out must be float32, float64, complex64 or complex128, got {out.dtype}")
    if out.shape != (m, n):
        raise ValueError(f"out has shape {out.shape}, expected {(m, n)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    dcode = _OUT_DTYPES[out.dtype]
    if im_hi is not None and dcode < 2:
        raise ValueError(f"an imaginary part needs a complex out, got {out.dtype}")
    rsh = _int32_vector(row_shift, m, "row_shift")
    csh = _int32_vector(col_shift, n, "col_shift")
    alpha = complex(alpha)
    beta = complex(beta)
    code = _uplo(uplo)
    ffi, lib = require()
    if m == 0 or n == 0:
        return out
    st = elem_strides(out)
    target = out
    if st is None or not out.flags.aligned or any(
        np.may_share_memory(out, a) for a in (re_hi, re_lo, im_hi, im_lo) if a is not None
    ):
        target = np.array(out, order="F")
        st = elem_strides(target)
    cstruct, keep = (ffi.NULL, ()) if cert is None else _cert_struct(ffi, cert, m, n)
    rc = lib.emublas_oz_crt_finalize(
        m, n, ptr(ffi, "const double *", re_hi), ptr(ffi, "const double *", re_lo),
        ptr(ffi, "const double *", im_hi) if im_hi is not None else ffi.NULL,
        ptr(ffi, "const double *", im_lo) if im_lo is not None else ffi.NULL,
        float(P_hi), float(P_lo),
        ptr(ffi, "const int32_t *", rsh), ptr(ffi, "const int32_t *", csh),
        alpha.real, alpha.imag, beta.real, beta.imag,
        dcode, ptr(ffi, "void *", target), st[0], st[1], code, cstruct, nthreads)  # type: ignore[index]
    _oz_check(rc, "oz_crt_finalize")
    del keep
    if cert is not None:
        cert["uncertified"] = int(cstruct.uncertified)
    if target is not out:
        out[...] = target
    return out
