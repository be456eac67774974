"""Power-of-two scaling of Ozaki-II operands (docs/design.md §2.1).

Row i of the left factor is scaled by 2^e_i and column j of the right factor
by 2^f_j, then truncated to integers.  ``u_i = e_i + ea_i`` is the bit budget
of row i (``ea_i`` the exponent of the row's largest magnitude); the budgets
are chosen so that every entry of the integer product satisfies
``|C'_ij| ≤ 2^L``, ``L = log2 P − MARGIN_BITS`` (just under P/2), which keeps the CRT
reconstruction unambiguous.

* ``fast``: Cauchy–Schwarz, ``|C'_ij| ≤ 2^{u_i}‖Ā_i‖₂ · 2^{v_j}‖B̄_j‖₂`` with
  ``Ā_i = |A_i|/2^{ea_i}`` (entries below 1).
* ``accurate``: one extra int8 product ``W = ceil(127·Ā)·ceil(127·B̄)`` gives
  ``Σ_l Ā_il B̄_lj ≤ W_ij/127²`` entry by entry; the budgets come from the row
  and column maxima of W, and ``W_ij ≤ sqrt(rowmax_i·colmax_j)`` makes them
  safe.

The only error of the scheme is the truncation of the scaled operands, so the
budgets also decide the accuracy; :func:`needed_bits` estimates, from a
sample of output entries, how many bits of P the inputs need (``auto`` mode
and the accuracy warning).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ..._arrays import is_cupy, namespace
from ..._kernels import constants, cpu
from . import kernels_cpu

__all__ = [
    "Side",
    "side",
    "RowPlan",
    "row_plan",
    "bound_product",
    "growth",
    "needed_bits",
    "K_CHUNK",
    "DEAD",
    "SAFETY",
    "TRIANGLE_MIN",
    "TRIANGLE_BLOCKS",
]

#: Longest inner dimension of one int8 product whose int32 sum cannot overflow:
#: residues are in [-128, 127], so each term is at most 2^14 in size.
K_CHUNK = constants.OZ_K_CHUNK  # below the int8 GEMM's exact k, a multiple of the GPU planes' padding
#: Added to each row's log2 growth, against rounding in the floating-point norms.
SAFETY = 2.0**-20
LOG2_127SQ = float(np.log2(127.0 * 127.0))
#: The shift of a row holding NaN or Inf: its residues are zero and its entries come
#: from a float64 dot product of the original data (the certificate's fallback).
DEAD = -(2**31)
_BIG = float(np.finfo(np.float64).max)


class Side:
    """Per-row statistics of one factor, rows being the rows of ``op(A)`` or the columns of ``op(B)``.

    ``stats`` is a (3, rows) float64 array on the factor's device: max|x| (NaN
    for a row holding NaN/Inf), Σ|x|², Σ|x| (one pass of ``oz_row_stats``, or
    given by the caller: the distributed path reduces them over k-blocks).
    Computing them queues work and waits for nothing; the host attributes
    below (``auto`` mode's estimate, the Dask planner) copy them to the host on
    first use.

    Parameters
    ----------
    x : numpy.ndarray or cupy.ndarray, shape (rows, k)
        The factor (real or complex, any strides).
    stats : array, optional
        Its (3, rows) statistics when the caller has them; None: computed here.
    bound : bool, optional
        The bound planes (:meth:`int8_bound`) will be needed: on the CPU they are
        made in the same read of ``x`` as the statistics (accurate mode's scaling
        then reads each operand twice in all, with the residues).

    Attributes
    ----------
    x : ndarray, shape (rows, k)
        The factor itself (real or complex, any strides).
    clean : ndarray
        What the residues and bounds read: ``x``, or on the CPU a copy with the
        NaN/Inf rows zeroed (the GPU kernels skip such rows themselves).
    finite, zero : ndarray of bool
        Rows without NaN/Inf; all-zero rows.
    ea : ndarray of int64
        ``max|x_row| < 2^ea``; 0 for an all-zero row.
    log2norm, log2l1 : ndarray of float64
        ``log2 ‖x_row / 2^ea‖₂`` (−inf for zero rows) and ``log2 ‖x_row‖₁``.
    """

    def __init__(self, x, stats=None, bound=False):
        self.x = x
        self.gpu = is_cupy(x)
        self._bound = None
        if stats is None and bound and not self.gpu:
            # one read of x for the statistics and the bound planes (kernels_cpu.oz_stats_bound)
            *st, _, self._bound = kernels_cpu.oz_stats_bound(x)
            self.stats = np.stack(st)
        elif stats is not None:
            xp = namespace(x=x) if self.gpu else np
            self.stats = xp.stack([xp.asarray(v, dtype=np.float64) for v in stats])
        elif self.gpu:
            from . import kernels_gpu

            self.stats = kernels_gpu.row_stats(x)
        else:
            self.stats = np.stack(kernels_cpu.oz_row_stats(x))
        self._host = None
        self._clean = None

    @property
    def rows(self) -> int:
        """The number of rows (scaled units) of the factor."""
        return self.stats.shape[1]

    def host(self) -> np.ndarray:
        """The statistics on the host (a copy from the device, made once).

        Returns
        -------
        numpy.ndarray
            The (3, rows) float64 statistics: max|x|, Σ|x|², Σ|x| per row.
        """
        if self._host is None:
            self._host = _host(self.stats)
        return self._host

    @property
    def clean(self):
        """``x``, or on the CPU a copy with the NaN/Inf rows zeroed (made once, when first read)."""
        if self._clean is None:
            self._clean = self.x
            if not self.gpu and not self.finite.all():
                self._clean = self.x.copy()
                self._clean[~self.finite] = 0
        return self._clean

    @cached_property
    def finite(self) -> np.ndarray:
        return self.host()[0] <= _BIG

    @cached_property
    def zero(self) -> np.ndarray:
        return self.host()[0] == 0

    @cached_property
    def ea(self) -> np.ndarray:
        rm = np.where(self.finite, self.host()[0], 0.0)
        return np.frexp(rm)[1].astype(np.int64)

    @cached_property
    def log2l1(self) -> np.ndarray:
        l1 = self.host()[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                l1 <= _BIG, np.log2(np.where(l1 <= _BIG, l1, 1.0)), self.ea + math.log2(max(self.x.shape[1], 1))
            )

    @cached_property
    def log2norm(self) -> np.ndarray:
        s = self.host()[1]
        ok = (s > 0) & (s <= _BIG)
        with np.errstate(divide="ignore"):
            v = np.where(ok, 0.5 * np.log2(np.where(ok, s, 1.0)) - self.ea, 0.5 * math.log2(max(self.x.shape[1], 1)))
        return np.where(self.zero, -np.inf, v)

    def int8_bound(self):
        """``ceil(127·|x|/2^ea)`` as int8: entrywise upper bounds with 7 bits, zero for rows with NaN/Inf.

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            numpy: a (rows, k) int8 array; cupy: padded k-contiguous planes for
            cuBLAS (see :mod:`.kernels_gpu`).
        """
        if self.gpu:
            from . import kernels_gpu

            return kernels_gpu.bound_planes(self.x, self.stats[0])
        if self._bound is not None:
            return self._bound
        return kernels_cpu.oz_bound_int8(self.clean, self.ea)

    def fetch_rows(self, rows):
        """Some rows of the factor, on its device.

        Parameters
        ----------
        rows : numpy.ndarray of int
            Row indices (on the host).

        Returns
        -------
        numpy.ndarray or cupy.ndarray
            ``x[rows]``, shape (len(rows), k).
        """
        xp = namespace(x=self.x)
        return self.x[xp.asarray(rows)]


def _host(a) -> np.ndarray:
    return a.get() if is_cupy(a) else np.asarray(a)


def side(x, bound: bool = False) -> Side:
    """The :class:`Side` of ``x`` (rows are the scaled units).

    Parameters
    ----------
    x : numpy.ndarray or cupy.ndarray
        A 2-D factor, rows × k.
    bound : bool, optional
        Its bound planes will be needed (accurate and auto modes): on the CPU
        they come from the same read of ``x`` as the statistics.

    Returns
    -------
    Side
        Its row statistics (computed without waiting on the device).
    """
    return Side(x, bound=bound)


#: A rank-k call's W is made in column blocks of its triangle from this size on (on the CPU),
#: at most TRIANGLE_BLOCKS of them: 8 blocks compute 36/64 of the square.
TRIANGLE_MIN = 512
TRIANGLE_BLOCKS = 8


def bound_product(left: Side, right: Side, *, threads=None, uplo: int = 0):
    """The accurate mode's bound product ``W = ceil(127·Ā)·ceil(127·B̄)ᵀ``, on the factors' device.

    The integers are exact (k chunks summed in int64); nothing waits for them.

    Parameters
    ----------
    left, right : Side
        The two factors (``right`` may be ``left`` for the rank-k routines).
    threads : int, optional
        Threads of the CPU's int8 products; None: the package default.
    uplo : {0, 1, 2}, optional
        The triangle of the output the call computes (1: ``i <= j``, 2: ``i >= j``; 0: all
        of it).  Only the rank-k routines compute one, and their W is symmetric: ``B·Bᵀ``,
        or for the rank-2k forms ``B₁·B₂ᵀ`` with ``B₂`` ``B₁``'s column halves swapped (the
        same rows, so the same row scaling).  The call reads W only in its triangle, so on
        the CPU, from :data:`TRIANGLE_MIN` rows on, only that triangle is made, in column
        blocks (the diagonal blocks whole, the rest zero), and the maxima come from it and
        its mirror: the same integers where they are read, the same maxima.

    Returns
    -------
    wrow, wcol : array of int64
        W's row and column maxima.
    W : array of int32
        W itself (Fortran-ordered on the CPU), saturated to int32: a lower bound
        where it saturates, which the certificate reads.
    """
    if left.gpu:
        return _bound_product_gpu(left, right)
    a = left.int8_bound()
    b = a if right is left else right.int8_bound()
    if uplo in (1, 2) and a.shape[0] >= TRIANGLE_MIN:
        return _bound_triangle(a, b, uplo, threads)
    k = a.shape[1]
    w = None
    for start in range(0, max(k, 1), K_CHUNK):
        part = cpu.i8gemm(a[:, start : start + K_CHUNK], b[:, start : start + K_CHUNK].T, threads=threads)
        w = part if w is None else w.astype(np.int64) + part
    assert w is not None  # the loop runs at least once
    wrow, wcol = axis_max(w, 1).astype(np.int64), axis_max(w, 0).astype(np.int64)
    if w.dtype != np.int32:
        w = np.minimum(w, np.iinfo(np.int32).max).astype(np.int32)
    return wrow, wcol, np.asfortranarray(w)


def _bound_triangle(a: np.ndarray, b: np.ndarray, uplo: int, threads):
    """:func:`bound_product`'s symmetric ``W = a·bᵀ``, the ``uplo`` triangle only, in column blocks.

    A row's maximum is the larger of its part in the triangle and the matching column's:
    the maxima are exactly the whole product's.
    """
    m, k = a.shape
    chunks = range(0, max(k, 1), K_CHUNK)
    w = np.zeros((m, m), np.int32 if len(chunks) == 1 else np.int64, order="F")
    width = -(-m // TRIANGLE_BLOCKS)
    for j0 in range(0, m, width):
        j1 = min(m, j0 + width)
        r0, r1 = (0, j1) if uplo == 1 else (j0, m)
        for start in chunks:
            rows, cols = a[r0:r1, start : start + K_CHUNK], b[j0:j1, start : start + K_CHUNK]
            if len(chunks) == 1:
                cpu.i8gemm(rows, cols.T, out=w[r0:r1, j0:j1], threads=threads)
            else:
                w[r0:r1, j0:j1] += cpu.i8gemm(rows, cols.T, threads=threads)
    wmax = np.maximum(axis_max(w, 1), axis_max(w, 0)).astype(np.int64)
    if w.dtype != np.int32:
        w = np.minimum(w, np.iinfo(np.int32).max).astype(np.int32)
    return wmax, wmax, np.asfortranarray(w)


def axis_max(w: np.ndarray, axis: int) -> np.ndarray:
    """Maxima along ``axis``; 0 (log2 → −inf) where that axis is empty."""
    return w.max(axis=axis) if w.shape[axis] else np.zeros(w.shape[1 - axis], np.int64)


def _bound_product_gpu(left: Side, right: Side):
    """The GPU form: W on cuBLAS int8 (k chunks summed exactly in int64, columns in
    blocks of bounded memory), kept as int32 m × n (Fortran) for the certificate."""
    import cupy

    from . import kernels_gpu as kg

    a = left.int8_bound()
    b = a if right is left else right.int8_bound()
    m, n = left.x.shape[0], right.x.shape[0]
    rp, kp = a.shape
    bp = b.shape[0]
    block = max(kg.PAD, min(bp, (2**28 // (4 * rp)) // kg.PAD * kg.PAD))  # ≤ 1 GiB of int32 per block
    maxima = cupy.zeros(rp + bp, np.int64)  # W's row maxima, then its column maxima: one memset
    rowmax, colmax = maxima[:rp], maxima[rp:]
    w = cupy.empty((block, rp), np.int32)
    chunks = range(0, kp, K_CHUNK)
    whole = block >= bp and len(chunks) == 1  # one product is all of W: keep it, no copy
    kept = w[:n, :m] if whole else cupy.empty((n, m), np.int32)  # W transposed, C order: W in Fortran order
    for j0 in range(0, bp, block):
        nb = min(block, bp - j0)
        acc = None
        for c0 in chunks:
            ck = min(kp, c0 + K_CHUNK) - c0
            kg.gemm_tn(a.data.ptr + c0, b.data.ptr + j0 * kp + c0, rp, nb, ck, kp, kp, w, rp)
            if len(chunks) == 1:
                acc = w[:nb]
            else:
                part = w[:nb].astype(np.int64)
                acc = part if acc is None else acc + part
        assert acc is not None  # at least one k-chunk
        if acc.dtype == np.int32:  # one kernel for both maxima: cupy's reductions cost more host time
            kg.w_maxima(acc, rp, nb, rp, rowmax, colmax[j0 : j0 + nb])
        else:
            cupy.maximum(rowmax, acc.max(axis=0), out=rowmax)
            colmax[j0 : j0 + nb] = acc.max(axis=1)
        if j0 < n and not whole:
            j1 = min(n, j0 + nb)
            kept[j0:j1] = acc[: j1 - j0, :m] if len(chunks) == 1 else cupy.minimum(acc[: j1 - j0, :m], 2**31 - 1)
    return rowmax[:m], colmax[:n], kept.T


def growth(side: Side, wmax=None) -> np.ndarray:
    """log2 of each row's growth factor g, on the host: the formula of :func:`row_plan`.

    For ``auto`` mode's estimate: from the bound product's row maxima
    (accurate) or the row's 2-norm (fast, Cauchy–Schwarz).

    Parameters
    ----------
    side : Side
        The factor's statistics.
    wmax : array, optional
        The bound product's row maxima; None: the 2-norm bound.

    Returns
    -------
    numpy.ndarray of float64
        One value per row; −inf for zero rows.
    """
    rowmax, sumsq, _ = side.host()
    return _growth(
        np.where(rowmax <= _BIG, rowmax, 0.0),
        sumsq,
        None if wmax is None else _host(wmax),
        side.ea,
        math.log2(max(side.x.shape[1], 1)),
    )


def _growth(rm, sumsq, wmax, ea, log2k):
    with np.errstate(divide="ignore", invalid="ignore"):
        if wmax is not None:
            w = np.asarray(wmax, np.float64)
            g = np.where(w > 0, (np.log2(np.where(w > 0, w, 1.0)) - LOG2_127SQ) + SAFETY, -np.inf)
        else:
            ok = (sumsq > 0) & (sumsq <= _BIG)
            g = np.where(ok, (np.log2(np.where(ok, sumsq, 1.0)) - 2.0 * ea) + SAFETY, log2k + SAFETY)
    return np.where(rm == 0, -np.inf, g)


class RowPlan:
    """The plan of each row of one factor, on the factor's device.

    Parameters
    ----------
    shift : array of int32
        The row's scaling exponent; :data:`DEAD` for rows with NaN/Inf.
    err : array of float64
        For the certificate: log2 of the row's truncation error term in C' units
        plus the slack; +inf for NaN/Inf rows, −inf for zero rows.
    wsum : array of float64
        Upper bound of the row's bound-plane sum.
    budget : array of int32
        ``shift + ea``: the bits the row keeps.
    """

    __slots__ = ("shift", "err", "wsum", "budget")

    def __init__(self, shift, err, wsum, budget):
        self.shift, self.err, self.wsum, self.budget = shift, err, wsum, budget


def row_plan(side: Side, L: float, slack: float, wmax=None) -> RowPlan:
    """The :class:`RowPlan` of a factor for the product bound 2^L.

    ``u = floor((L − g)/2)``, ``shift = u − ea``, with g from :func:`growth`'s
    formula.  On cupy arrays the ``oz_plan`` kernel computes it on the device
    (no wait for the host); on numpy the C kernel ``oz_row_plan``, with the same
    formulas in the same order.

    Parameters
    ----------
    side : Side
        The factor's statistics.
    L : float
        log2 of the product bound the moduli can reconstruct.
    slack : float
        log2 slack added to each row's error term (:func:`.certify.slack`).
    wmax : array, optional
        The row maxima of the accurate mode's bound product (:func:`bound_product`);
        None: fast mode's 2-norm bound.

    Returns
    -------
    RowPlan
        Shifts, error terms, bound-plane sums and budgets per row.
    """
    k = side.x.shape[1]
    log2k = math.log2(max(k, 1))
    if side.gpu:
        from . import kernels_gpu

        return RowPlan(*kernels_gpu.row_plan(side.stats, wmax, L, LOG2_127SQ, SAFETY, log2k, k, slack))
    return RowPlan(*kernels_cpu.oz_row_plan(side.stats, wmax, L, LOG2_127SQ, SAFETY, log2k, k, slack))


def needed_bits(
    left: Side,
    right: Side,
    g_rows,
    g_cols,
    precision: int,
    *,
    terms: int = 1,
    samples: int = 256,
    rng_seed: int = 0x0A2,
) -> float:
    """Estimate the ``L`` (log2 of the product bound) the inputs need: ``auto`` mode's choice.

    The truncation error of entry (i, j) is at most
    ``2^{ea_i−u_i}‖B_j‖₁ + 2^{eb_j−v_j}‖A_i‖₁``; it stays below
    ``2^{−precision−1}·Σ_l|A_il||B_lj|`` when both budgets are large enough.
    This is checked on a sample of entries (random ones plus the rows and
    columns with the widest spread of magnitudes), with ``Σ|A||B|`` computed
    in log2 so that no magnitude over- or underflows.  It only picks the
    count: every entry is certified afterwards (:mod:`.certify`).

    Parameters
    ----------
    left, right : Side
        The two factors.
    g_rows, g_cols : numpy.ndarray of float64
        :func:`growth` of each factor's rows.
    precision : int
        Significand bits of the routine's dtype (24 or 53).
    terms : int, optional
        Products summed into each entry (their errors add up).
    samples : int, optional
        Random entries checked, besides the widest-spread rows and columns.
    rng_seed : int, optional
        Seed of the sample (the choice is reproducible).

    Returns
    -------
    float
        The L needed over the sample; 0.0 for empty or all-zero inputs.
    """
    m, n = left.x.shape[0], right.x.shape[0]
    k = left.x.shape[1]
    if m == 0 or n == 0 or k == 0:
        return 0.0
    live_r = np.flatnonzero(~left.zero & left.finite)
    live_c = np.flatnonzero(~right.zero & right.finite)
    if live_r.size == 0 or live_c.size == 0:
        return 0.0
    rng = np.random.default_rng(rng_seed)
    # widest spread: the largest entry far above the row's mean magnitude
    spread_r = live_r[np.argsort(left.ea[live_r] - left.log2l1[live_r])[-8:]]
    spread_c = live_c[np.argsort(right.ea[live_c] - right.log2l1[live_c])[-8:]]
    ri = np.concatenate(
        [rng.choice(live_r, samples), np.repeat(spread_r, len(spread_c)), spread_r, rng.choice(live_r, len(spread_c))]
    )
    ci = np.concatenate(
        [rng.choice(live_c, samples), np.tile(spread_c, len(spread_r)), rng.choice(live_c, len(spread_r)), spread_c]
    )
    log2dot = _log2_abs_dots(left.fetch_rows(ri), right.fetch_rows(ci))
    ok = np.isfinite(log2dot)
    if not ok.any():
        return 0.0
    ri, ci, log2dot = ri[ok], ci[ok], log2dot[ok]
    s_row = left.ea[ri] + right.log2l1[ci] - log2dot  # u_i ≥ p + 1 + s_row
    s_col = right.ea[ci] + left.log2l1[ri] - log2dot
    # u_i = floor((L − g_i)/2) ≥ (L − g_i)/2 − 1 must reach p + 1 + s (+1 for the two error terms)
    need_r = 2.0 * (precision + 3 + np.log2(terms) + s_row) + g_rows[ri]
    need_c = 2.0 * (precision + 3 + np.log2(terms) + s_col) + g_cols[ci]
    return float(max(need_r.max(), need_c.max()))


def _log2_abs_dots(xr, yr) -> np.ndarray:
    """``log2 Σ_l |xr_l||yr_l|`` per pair of rows, in log2 throughout (−inf for 0)."""
    xp = namespace(x=xr)
    with np.errstate(divide="ignore", invalid="ignore"):
        lx = xp.log2(xp.abs(xr).astype(np.float64))
        ly = xp.log2(xp.abs(yr).astype(np.float64))
        t = lx + ly
        top = t.max(axis=1)
        safe = xp.where(xp.isfinite(top), top, 0.0)
        total = xp.log2(xp.exp2(t - safe[:, None]).sum(axis=1)) + safe
    return _host(xp.where(xp.isfinite(top), total, -np.inf))
