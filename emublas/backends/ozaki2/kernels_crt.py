"""The Ozaki-II CRT passes in C (``native/cpu/ozaki_accumulate.c``, ``ozaki_finalize.c``) on
numpy arrays: the fused residue-term and exact three-piece CRT accumulation, the products and
accumulation of a whole run of moduli in one call (``ozaki_product.c``), and the certified
finalize.  Thin, checked wrappers over the cffi extension, as :mod:`.kernels_cpu`.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..._kernels.cpu import require, threads_for
from ..._kernels.operands import check_operand, elem_strides, ptr
from .kernels_cpu import _int32_vector, _oz_check, _oz_parts

__all__ = ["oz_crt_accumulate", "oz_crt_finalize"]

_OUT_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.complex64): 2, np.dtype(np.complex128): 3}


def _acc_array(a: Any, name: str, shape: tuple[int, int]) -> np.ndarray:
    """An accumulator: float64 ``shape + (3,)`` in Fortran order (three column-major planes)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != np.float64:
        raise TypeError(f"{name} must have dtype float64, got {a.dtype}")
    if a.shape != (*shape, 3):
        raise ValueError(f"{name} has shape {a.shape}, expected {(*shape, 3)}")
    if a.size and not a.flags.f_contiguous:
        raise ValueError(f"{name} must be Fortran-ordered (three column-major planes, leading dimension m)")
    if not a.flags.aligned:
        raise ValueError(f"{name} must be aligned")
    return a


def _pieces(big: Any, name: str) -> tuple[float, float, float]:
    vals = tuple(float(v) for v in np.asarray(big, np.float64).reshape(-1))
    if len(vals) != 3 or not all(np.isfinite(vals)):
        raise ValueError(f"{name} must be three finite floats (the weight's pieces), got {big!r}")
    return vals  # type: ignore[return-value]


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
    big: Any,
    acc: np.ndarray,
    *,
    x2: np.ndarray | None = None,
    w2: int = 0,
    first: bool = False,
    uplo: Any = 0,
    threads: int | None = None,
) -> None:
    """Fused ``t = (w1*x1 + w2*x2) mod modulus`` and the exact three-piece CRT accumulation.

    ``acc[..., s] = fma(t, big[s], first ? 0 : acc[..., s])`` for s = 0, 1, 2 in place
    (exact: :func:`~.moduli.crt_split`), for all entries (``uplo=0``), ``i <= j``
    (1 or ``'U'``) or ``i >= j`` (2 or ``'L'``); others are left alone.

    Parameters
    ----------
    x1 : numpy.ndarray, int32, shape (m, n)
        Any strides.
    w1, w2 : int
        Weights, ``|w| < 2**16``.
    modulus : int
        ``2 <= modulus < 2**31``.
    big : sequence of three floats
        The pieces of the CRT weight ``P/m`` (``CrtSplit.weights`` row).
    acc : numpy.ndarray, float64, shape (m, n, 3), Fortran-ordered
        The three accumulators of each entry.
    x2 : numpy.ndarray, int32, shape (m, n), optional
        May share memory with x1 (e.g. ``x1.T``).
    first : bool
        Start the accumulators (their old values are not read).
    uplo : 0, 1/'U' or 2/'L'
        The entries to update.
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.
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
    pieces = _pieces(big, "big")
    acc = _acc_array(acc, "acc", (m, n))
    if not acc.flags.writeable:
        raise ValueError("acc must be writeable")
    code = _uplo(uplo)
    ffi, lib = require()
    if m == 0 or n == 0:
        return
    rc = lib.emublas_oz_crt_accumulate(
        m,
        n,
        ptr(ffi, "const int32_t *", x1),
        rs1,
        cs1,
        w1,
        ptr(ffi, "const int32_t *", x2) if x2 is not None else ffi.NULL,
        rs2,
        cs2,
        w2,
        modulus,
        ffi.new("double[3]", pieces),
        ptr(ffi, "double *", acc),
        m * n,
        1 if first else 0,
        code,
        nthreads,
    )
    _oz_check(rc, "oz_crt_accumulate")


def crt_struct(ffi, consts):
    """The ``emublas_oz_crt`` struct of ``CrtSplit.consts``."""
    k = ffi.new("emublas_oz_crt *")
    k.P = list(consts[:3])
    k.Pinv, k.u1, k.iu1, k.u2, k.iu2 = consts[3:]
    return k


def _cert_struct(ffi, cert: dict, m: int, n: int):
    """The ``emublas_oz_cert`` struct of a certificate dict, and the arrays it points into."""
    c = ffi.new("emublas_oz_cert *")
    keep = []

    def vec(key, dtype, size):
        v = cert[key]
        if not (isinstance(v, np.ndarray) and v.dtype == dtype and v.flags.c_contiguous and v.flags.aligned):
            v = np.require(v, dtype, ["C", "A"])
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
    re: np.ndarray,
    crt: Any,
    row_shift: Any,
    col_shift: Any,
    out: np.ndarray,
    *,
    im: np.ndarray | None = None,
    alpha: complex = 1.0,
    beta: complex = 0.0,
    uplo: Any = 0,
    cert: dict | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """CRT finalize: symmetric representative, unscaling, alpha/beta, write-out.

    For each selected entry, ``C' = S − round(S/P)·P`` from its three exact sums S
    (the carries and the steps of ``emublas_oz_crt_finalize`` in emublas_cpu.h; needs
    ``|C'|`` just under P/2, see :data:`.moduli.MARGIN_BITS`),
    ``v = C' * 2**-(row_shift[i] + col_shift[j])`` and ``out = alpha*v + beta*out``
    computed in double and rounded once to ``out``'s dtype.  ``beta == 0`` means
    ``out`` is not read.

    Parameters
    ----------
    re : numpy.ndarray, float64, shape (m, n, 3), Fortran-ordered
        The accumulated real part (from :func:`oz_crt_accumulate`).
    crt : sequence of 8 floats
        ``CrtSplit.consts`` of the moduli and term count the sums were made with.
    row_shift, col_shift : sequences of int, lengths m and n
    out : numpy.ndarray, 2-D float32/float64/complex64/complex128, shape (m, n)
        Any strides; written in place and returned.
    im : numpy.ndarray, optional
        The imaginary part (complex ``out`` only), as ``re``.
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
        ``cert["uncertified"]`` holds the number of entries that failed it
        (with ``fix``, those entries were recomputed as float64 dot products
        of ``L`` and ``R``).
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.

    Returns
    -------
    numpy.ndarray
        ``out`` itself, its selected entries overwritten (through a
        Fortran-ordered copy when its strides are not whole elements, it is
        unaligned or it overlaps an accumulator); the others untouched.

    Raises
    ------
    TypeError
        Arguments that are not numpy arrays, or of the wrong dtype.
    ValueError
        Shapes that disagree, accumulators not Fortran-ordered, a read-only
        ``out``, an imaginary part with a real ``out``, a bad ``uplo``, shift
        vector or ``crt``, or a malformed ``cert``.
    """
    nthreads = threads_for(threads)
    if not isinstance(re, np.ndarray):
        raise TypeError(f"re must be a numpy.ndarray, got {type(re).__name__}")
    if re.ndim != 3:
        raise ValueError(f"re must be 3-D (m, n, 3), got shape {re.shape}")
    m, n = re.shape[:2]
    re = _acc_array(re, "re", (m, n))
    if im is not None:
        im = _acc_array(im, "im", (m, n))
    consts = tuple(float(v) for v in crt)
    if len(consts) != 8 or not all(np.isfinite(consts)):
        raise ValueError(f"crt must be the 8 finite constants of CrtSplit.consts, got {crt!r}")
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype not in _OUT_DTYPES:
        raise TypeError(f"out must be float32, float64, complex64 or complex128, got {out.dtype}")
    if out.shape != (m, n):
        raise ValueError(f"out has shape {out.shape}, expected {(m, n)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    dcode = _OUT_DTYPES[out.dtype]
    if im is not None and dcode < 2:
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
    if st is None or not out.flags.aligned or any(np.may_share_memory(out, a) for a in (re, im) if a is not None):
        target = np.array(out, order="F")
        st = elem_strides(target)
    assert st is not None  # a fresh Fortran-order array always has element strides
    cstruct, keep = (ffi.NULL, ()) if cert is None else _cert_struct(ffi, cert, m, n)
    rc = lib.emublas_oz_crt_finalize(
        m,
        n,
        ptr(ffi, "const double *", re),
        ptr(ffi, "const double *", im) if im is not None else ffi.NULL,
        m * n,
        crt_struct(ffi, consts),
        ptr(ffi, "const int32_t *", rsh),
        ptr(ffi, "const int32_t *", csh),
        alpha.real,
        alpha.imag,
        beta.real,
        beta.imag,
        dcode,
        ptr(ffi, "void *", target),
        st[0],
        st[1],
        code,
        cstruct,
        nthreads,
    )
    _oz_check(rc, "oz_crt_finalize")
    del keep
    if cert is not None:
        cert["uncertified"] = int(cstruct.uncertified)
    if target is not out:
        out[...] = target
    return out
