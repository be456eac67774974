"""The C loop of a run of moduli: its int8 products and CRT accumulation in one call.

:class:`RunSchedule` holds what the loop indexes (products and terms per modulus, the
moduli and their CRT constants) as C arrays; :func:`oz_run_products` runs it.  The
arithmetic is :func:`.kernels_crt.oz_crt_accumulate`'s, entry by entry in the same order.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..._kernels.cpu import require, threads_for
from ..._kernels.operands import ptr
from .kernels_cpu import _oz_check
from .kernels_crt import _acc_array, _uplo, _weight

__all__ = ["RunSchedule", "oz_run_products"]


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
    big : array_like of float, shape (nmod, 3)
        The pieces of each modulus's CRT weight ``P/m`` (``CrtSplit.weights``).

    Raises
    ------
    ValueError
        Inconsistent lengths, indices or weights out of range, too many moduli
        or products.
    """

    def __init__(self, planes: int, kk: int, k_chunk: int, products, terms, moduli, big) -> None:
        ffi, lib = require()
        nmod = len(moduli)
        if not 1 <= nmod <= lib.EMUBLAS_OZ_MAX_MODULI:
            raise ValueError(f"a run takes 1 to {lib.EMUBLAS_OZ_MAX_MODULI} moduli, got {nmod}")
        big = np.array(big, np.float64).reshape(-1, 3) if len(big) else np.zeros((0, 3))
        if not (len(products) == len(terms) == len(big) == nmod):
            raise ValueError("products, terms and big need one entry per modulus")
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
            np.ascontiguousarray(big),
        ]
        if not np.isfinite(self._keep[5]).all():
            raise ValueError("big must be finite")
        c = ffi.new("emublas_oz_schedule *")
        c.nmod, c.planes = nmod, int(planes)
        c.kk, c.k_chunk, c.nchunks = int(kk), int(k_chunk), max(1, -(-int(kk) // int(k_chunk)))
        c.prod_off, c.prods, c.term_off, c.terms, c.moduli = (ptr(ffi, "int32_t *", a) for a in self._keep[:5])
        c.big = ptr(ffi, "double *", self._keep[5])
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
    re: np.ndarray,
    *,
    im: np.ndarray | None = None,
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
    re : numpy.ndarray, float64, shape (mx, my, 3), Fortran-ordered
        The real part's three accumulators, updated in place.
    im : numpy.ndarray, optional
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
    acc = [_acc_array(re, "re", (mx, my))]
    if im is not None:
        acc.append(_acc_array(im, "im", (mx, my)))
    elif schedule.complex_out:
        raise ValueError("the schedule has imaginary terms: give im")
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
        ptr(ffi, "double *", acc[0]),
        ptr(ffi, "double *", acc[1]) if len(acc) == 2 else ffi.NULL,
        mx * my,
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
