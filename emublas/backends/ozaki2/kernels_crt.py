"""The Ozaki-II CRT passes in C (``native/cpu/ozaki_accumulate.c``, ``ozaki_finalize.c``) on
numpy arrays: the fused residue-term and double-double accumulation, the products and
accumulation of a whole run of moduli in one call (``ozaki_product.c``), and the certified
finalize.  Thin, checked wrappers over the cffi extension, as :mod:`.kernels_cpu`.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..._kernels.cpu import check_operand, elem_strides, ptr, require, threads_for
from .kernels_cpu import _int32_vector, _oz_check, _oz_parts

__all__ = ["oz_crt_accumulate", "oz_crt_finalize", "RunSchedule", "oz_run_products"]

_OUT_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.complex64): 2, np.dtype(np.complex128): 3}


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
        float(big_hi),
        float(big_lo),
        ptr(ffi, "double *", acc_hi),
        ptr(ffi, "double *", acc_lo),
        1 if first else 0,
        code,
        nthreads,
    )
    _oz_check(rc, "oz_crt_accumulate")


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
        ``out``, an imaginary part with a real ``out``, a bad ``uplo`` or
        shift vector, or a malformed ``cert``.
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
    if (
        st is None
        or not out.flags.aligned
        or any(np.may_share_memory(out, a) for a in (re_hi, re_lo, im_hi, im_lo) if a is not None)
    ):
        target = np.array(out, order="F")
        st = elem_strides(target)
    assert st is not None  # a fresh Fortran-order array always has element strides
    cstruct, keep = (ffi.NULL, ()) if cert is None else _cert_struct(ffi, cert, m, n)
    rc = lib.emublas_oz_crt_finalize(
        m,
        n,
        ptr(ffi, "const double *", re_hi),
        ptr(ffi, "const double *", re_lo),
        ptr(ffi, "const double *", im_hi) if im_hi is not None else ffi.NULL,
        ptr(ffi, "const double *", im_lo) if im_lo is not None else ffi.NULL,
        float(P_hi),
        float(P_lo),
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


class RunSchedule:
    """The constant part of :func:`oz_run_products` for one run of moduli.

    Checked and packed once (the CPU stages keep one per job and run on the job's
    ``memo``); read-only afterwards, so calls on several threads may share it.

    Parameters
    ----------
    planes : int
        Residue planes per modulus of each factor.
    kk : int
        Columns of the planes that the products read.
    k_chunk : int
        Columns per k-chunk (int32 sums stay exact within one).
    products : sequence of sequences of (int, int)
        Per modulus, the plane pairs ``(a, b)`` of its products ``X_a·Y_bᵀ``
        (indices within the modulus's planes).
    terms : sequence of sequences of 7-tuples
        Per modulus, its CRT terms ``(part, p1, t1, w1, p2, t2, w2)`` as in
        :attr:`emublas.backends.ozaki2.pipeline.Job.terms` (part ``"re"``/``"im"``,
        ``p2`` None for one-product terms).
    moduli : sequence of int
    big_hi, big_lo : sequences of float
        ``P/m`` of each modulus split into two doubles.

    Raises
    ------
    ValueError
        Inconsistent lengths, indices or weights out of range, too many moduli
        or products.
    """

    def __init__(self, planes: int, kk: int, k_chunk: int, products, terms, moduli, big_hi, big_lo) -> None:
        ffi, lib = require()
        nmod = len(moduli)
        if not 1 <= nmod <= lib.EMUBLAS_OZ_MAX_MODULI:
            raise ValueError(f"a run takes 1 to {lib.EMUBLAS_OZ_MAX_MODULI} moduli, got {nmod}")
        if not (len(products) == len(terms) == len(big_hi) == len(big_lo) == nmod):
            raise ValueError("products, terms, big_hi and big_lo need one entry per modulus")
        if planes < 1 or kk < 0 or k_chunk < 1:
            raise ValueError(f"bad sizes: planes={planes}, kk={kk}, k_chunk={k_chunk}")
        prod_off, prods, term_off, table = [0], [], [0], []
        self.complex_out = self.transposed = False  # an "im" term / a term reading a product transposed
        for l in range(nmod):
            pl = list(products[l])
            if not 1 <= len(pl) <= lib.EMUBLAS_OZ_RUN_MAX_PRODS:
                raise ValueError(f"modulus {l}: 1 to {lib.EMUBLAS_OZ_RUN_MAX_PRODS} products, got {len(pl)}")
            for a, b in pl:
                if not (0 <= a < planes and 0 <= b < planes):
                    raise ValueError(f"modulus {l}: product planes ({a}, {b}) outside 0..{planes - 1}")
                prods += [a, b]
            prod_off.append(len(prods) // 2)
            for part, p1, t1, w1, p2, t2, w2 in terms[l]:
                if part not in ("re", "im"):
                    raise ValueError(f"modulus {l}: term part must be 're' or 'im', got {part!r}")
                if not 0 <= p1 < len(pl) or (p2 is not None and not 0 <= p2 < len(pl)):
                    raise ValueError(f"modulus {l}: term products ({p1}, {p2}) outside 0..{len(pl) - 1}")
                self.complex_out |= part == "im"
                table += [
                    int(part == "im"),
                    p1,
                    int(bool(t1)),
                    _weight(w1, "w1"),
                    -1 if p2 is None else p2,
                    int(bool(t2)),
                    _weight(w2, "w2"),
                ]
                self.transposed |= bool(t1) or (p2 is not None and bool(t2))
            term_off.append(len(table) // 7)
        mods = [operator.index(m) for m in moduli]
        if any(not 2 <= m < 2**31 for m in mods):
            raise ValueError("every modulus must be in 2 .. 2**31-1")
        self.planes, self.nmod, self.kk = int(planes), nmod, int(kk)
        i32 = np.int32
        self._keep: list[np.ndarray] = [
            np.array(prod_off, i32),
            np.array(prods, i32),
            np.array(term_off, i32),
            np.array(table, i32),
            np.array(mods, i32),
            np.array(big_hi, np.float64),
            np.array(big_lo, np.float64),
        ]
        if not (np.isfinite(self._keep[5]).all() and np.isfinite(self._keep[6]).all()):
            raise ValueError("big_hi and big_lo must be finite")
        c = ffi.new("emublas_oz_schedule *")
        c.nmod, c.planes = nmod, int(planes)
        c.kk, c.k_chunk, c.nchunks = int(kk), int(k_chunk), max(1, -(-int(kk) // int(k_chunk)))
        c.prod_off, c.prods, c.term_off, c.terms, c.moduli = (ptr(ffi, "int32_t *", a) for a in self._keep[:5])
        c.big_hi, c.big_lo = (ptr(ffi, "double *", a) for a in self._keep[5:])
        self.cstruct = c


def _plane_stack(x: Any, name: str, planes: int, kk: int) -> tuple[np.ndarray, int, int, int]:
    """An int8 (planes, rows, >= kk) array C can read: (array, plane, row and column strides)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != np.int8:
        raise TypeError(f"{name} must have dtype int8, got {x.dtype}")
    if x.ndim != 3 or x.shape[0] < planes or x.shape[2] < kk:
        raise ValueError(f"{name} must be 3-D with at least {planes} planes of {kk} columns, got shape {x.shape}")
    return x, x.strides[0], x.strides[1], x.strides[2]  # int8: byte strides are element strides


def oz_run_products(
    schedule: RunSchedule,
    px: np.ndarray,
    py: np.ndarray,
    re_hi: np.ndarray,
    re_lo: np.ndarray,
    *,
    im_hi: np.ndarray | None = None,
    im_lo: np.ndarray | None = None,
    first: tuple[bool, bool] = (True, True),
    uplo: Any = 0,
    group: int = 1,
    threads: int | None = None,
) -> tuple[tuple[bool, bool], tuple[float, float]]:
    """The int8 products and CRT accumulation of a run of moduli in one C call.

    For each modulus ``l`` of the run and each k-chunk, the products
    ``P_q = px[a]·py[b]ᵀ`` (``(a, b)`` the schedule's pairs, offset by
    ``l·planes``), then each term folded into the accumulators exactly as
    :func:`oz_crt_accumulate` would, in the same order: the results are
    bit-identical to that loop, on one thread team.

    Parameters
    ----------
    schedule : RunSchedule
    px, py : numpy.ndarray, int8, shape (nmod·planes, mx, >= kk) and (nmod·planes, my, >= kk)
        Residue planes of the two factors, any strides (may be the same array).
    re_hi, re_lo : numpy.ndarray, float64, shape (mx, my), Fortran-ordered
        Accumulators of the real part, updated in place.
    im_hi, im_lo : numpy.ndarray, optional
        The imaginary part's (needed when a term has part ``"im"``).
    first : (bool, bool)
        Whether the real / imaginary accumulators are still to be started (their
        first term overwrites instead of adding).
    uplo : 0, 1/'U' (i <= j) or 2/'L' (i >= j)
    group : int, default 1
        Moduli whose products may be held at once (``group`` times the largest
        product count times ``mx·my`` int32 of scratch, a numpy array), their terms then folded
        in one pass over the accumulators: the same order per entry, the same
        bits, fewer passes over memory.  Used with one k-chunk and no transposed
        terms where the CPU has AVX-512; 1 otherwise.
    threads : int, optional

    Returns
    -------
    first : (bool, bool)
        The flags after the run.
    seconds : (float, float)
        Wall time of the calling thread in the products and in the accumulation.

    Raises
    ------
    TypeError, ValueError
        Arrays of the wrong type, shape or layout.
    """
    nthreads = threads_for(threads)
    if not isinstance(schedule, RunSchedule):
        raise TypeError(f"schedule must be a RunSchedule, got {type(schedule).__name__}")
    planes = schedule.nmod * schedule.planes
    px, xps, xrs, xcs = _plane_stack(px, "px", planes, schedule.kk)
    py, yps, yrs, ycs = _plane_stack(py, "py", planes, schedule.kk)
    mx, my = px.shape[1], py.shape[1]
    if schedule.transposed and mx != my:
        raise ValueError(f"transposed terms need a square output, got {mx}x{my}")
    acc = [_acc_array(re_hi, "re_hi", (mx, my)), _acc_array(re_lo, "re_lo", (mx, my))]
    if (im_hi is None) != (im_lo is None):
        raise ValueError("give both im_hi and im_lo, or neither")
    if im_hi is not None:
        acc += [_acc_array(im_hi, "im_hi", (mx, my)), _acc_array(im_lo, "im_lo", (mx, my))]
    elif schedule.complex_out:
        raise ValueError("the schedule has imaginary terms: give im_hi and im_lo")
    for a in acc:
        if not a.flags.writeable:
            raise ValueError("the accumulators must be writeable")
    if any(np.may_share_memory(a, b) for i, a in enumerate(acc) for b in acc[i + 1 :]):
        raise ValueError("the accumulators must not overlap")
    code = _uplo(uplo)
    group = operator.index(group)
    if group < 1:
        raise ValueError(f"group={group} must be a positive integer")
    ffi, lib = require()
    flags = np.array([bool(first[0]), bool(first[1])], np.int32)
    seconds = np.zeros(2)
    if mx == 0 or my == 0:
        return (bool(flags[0]), bool(flags[1])), (0.0, 0.0)
    # the products' buffer from numpy, so that it counts where Python's memory is traced
    scratch = np.empty(lib.emublas_oz_run_scratch(schedule.cstruct, mx, my, group), np.int32)
    rc = lib.emublas_oz_run_products(
        schedule.cstruct,
        mx,
        my,
        ptr(ffi, "const int8_t *", px),
        xps,
        xrs,
        xcs,
        ptr(ffi, "const int8_t *", py),
        yps,
        yrs,
        ycs,
        *(ptr(ffi, "double *", a) for a in acc),
        *((ffi.NULL, ffi.NULL) if len(acc) == 2 else ()),
        ptr(ffi, "int32_t *", flags),
        code,
        group,
        ptr(ffi, "int32_t *", scratch),
        scratch.size,
        ptr(ffi, "double *", seconds),
        nthreads,
    )
    _oz_check(rc, "oz_run_products")
    return (bool(flags[0]), bool(flags[1])), (float(seconds[0]), float(seconds[1]))
