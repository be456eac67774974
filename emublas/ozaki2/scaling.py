"""Power-of-two scaling of Ozaki-II operands (DESIGN §3, step 1).

Row i of the left factor is scaled by 2^e_i and column j of the right factor
by 2^f_j, then truncated to integers.  ``u_i = e_i + ea_i`` is the bit budget
of row i (``ea_i`` the exponent of the row's largest magnitude); the budgets
are chosen so that every entry of the integer product satisfies
``|C'_ij| ≤ 2^L ≤ P/4``, which keeps the CRT reconstruction unambiguous.

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

import numpy as np

from .._arrays import is_cupy, namespace
from .._kernels import cpu

__all__ = ["Side", "side", "bound_fast", "bound_accurate", "bound_from_maxima", "budgets", "needed_bits",
           "K_CHUNK"]

#: Longest inner dimension of one int8 product whose int32 sum cannot overflow:
#: residues are in [-128, 127], so each term is at most 2^14 in size.
K_CHUNK = 2**17 - 32  # a multiple of the GPU planes' padding, so that chunks start aligned
_SAFETY = 2.0**-20  # slack against rounding in the floating-point norms


class Side:
    """Per-row data of one factor, rows being the rows of ``op(A)`` or the columns of ``op(B)``.

    Computed in one pass by the C kernel ``oz_row_stats``, or from ``stats``
    given by the caller (the distributed path reduces them over k-blocks).

    Attributes
    ----------
    x : ndarray, shape (rows, k)
        The factor itself (real or complex, any strides).
    finite : ndarray of bool
        Rows without NaN/Inf.
    ea : ndarray of int64
        ``max|x_row| < 2^ea``; 0 for an all-zero row.
    zero : ndarray of bool
        All-zero rows.
    log2norm : ndarray of float64
        ``log2 ‖x_row / 2^ea‖₂`` (−inf for zero rows).
    log2l1 : ndarray of float64
        ``log2 ‖x_row‖₁``.
    """

    def __init__(self, x, stats=None):
        self.x = x
        self.gpu = is_cupy(x)
        if stats is not None:
            rowmax, sumsq, l1 = stats  # per-row max|x|, sum|x|^2, sum|x|, as oz_row_stats gives them
        elif self.gpu:
            from .._kernels import ozaki_gpu

            rowmax, sumsq, l1 = ozaki_gpu.row_stats_host(x)  # the per-row data comes to the host here
        else:
            rowmax, sumsq, l1 = cpu.oz_row_stats(x)
        self.finite = np.isfinite(rowmax)
        rowmax = np.where(self.finite, rowmax, 0.0)
        self.zero = rowmax == 0
        _, ea = np.frexp(rowmax)
        self.ea = ea.astype(np.int64)
        with np.errstate(divide="ignore"):
            self.log2norm = 0.5 * np.log2(sumsq) - self.ea
            self.log2l1 = np.log2(l1)
        # rows of extreme magnitude whose plain sums over- or underflowed: redo them scaled
        redo = self.finite & ~self.zero & ~(np.isfinite(self.log2norm) & np.isfinite(self.log2l1))
        for i in np.flatnonzero(redo):
            row = _host(self.scaled_mag(np.array([i]))[0])
            self.log2norm[i] = 0.5 * np.log2(np.dot(row, row))
            self.log2l1[i] = np.log2(row.sum()) + self.ea[i]

    def int8_bound(self):
        """``ceil(127·|x|/2^ea)`` as int8: entrywise upper bounds with 7 bits.

        numpy: a (rows, k) array; cupy: padded k-contiguous planes for cuBLAS
        (see :mod:`emublas._kernels.ozaki_gpu`).
        """
        if self.gpu:
            from .._kernels import ozaki_gpu

            return ozaki_gpu.bound_planes(self.x, self.ea)
        return cpu.oz_bound_int8(self.x, self.ea)

    def scaled_mag(self, rows):
        """``|x|/2^ea`` of the given rows (host index array), float64, on x's device."""
        xp = namespace(x=self.x)
        idx = xp.asarray(rows)
        mag = xp.abs(self.x[idx]).astype(np.float64, copy=False)
        return xp.ldexp(mag, xp.asarray(-self.ea[rows], dtype=np.int32)[:, None])


def _host(a) -> np.ndarray:
    return a.get() if is_cupy(a) else np.asarray(a)


def side(x) -> Side:
    """The :class:`Side` of ``x`` (rows are the scaled units)."""
    return Side(x)


def bound_fast(left: Side, right: Side) -> tuple[np.ndarray, np.ndarray]:
    """log2 of per-row and per-column growth factors for the Cauchy–Schwarz bound."""
    return 2 * left.log2norm + _SAFETY, 2 * right.log2norm + _SAFETY


def bound_accurate(left: Side, right: Side, *, threads=None, keep: bool = False):
    """log2 of the row and column maxima of the int8 bound product W/127².

    ``keep``: also return W itself, saturated to int32 (a lower bound where it
    saturates), for the per-entry accuracy certificate: ``(g_rows, g_cols, W)``.
    """
    if left.gpu:
        return _bound_accurate_gpu(left, right, keep)
    a = left.int8_bound()
    b = a if right is left else right.int8_bound()
    k = a.shape[1]
    w = None
    for start in range(0, max(k, 1), K_CHUNK):
        part = cpu.i8gemm(a[:, start:start + K_CHUNK], b[:, start:start + K_CHUNK].T, threads=threads)
        w = part if w is None else w.astype(np.int64) + part
    g = bound_from_maxima(_axis_max(w, 1), _axis_max(w, 0))
    if not keep:
        return g
    if w.dtype != np.int32:
        w = np.minimum(w, np.iinfo(np.int32).max).astype(np.int32)
    return g[0], g[1], np.asfortranarray(w)


def _axis_max(w: np.ndarray, axis: int) -> np.ndarray:
    """Maxima along ``axis``; 0 (log2 → −inf) where that axis is empty."""
    return w.max(axis=axis) if w.shape[axis] else np.zeros(w.shape[1 - axis], np.int64)


def bound_from_maxima(w_rowmax: np.ndarray, w_colmax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The accurate mode's growth factors from the row and column maxima of the
    int8 bound product W (exact integers; 0 for an all-zero row or column)."""
    scale = np.log2(127.0 * 127.0)
    with np.errstate(divide="ignore"):
        rows = np.log2(np.asarray(w_rowmax).astype(np.float64)) - scale
        cols = np.log2(np.asarray(w_colmax).astype(np.float64)) - scale
    return rows + _SAFETY, cols + _SAFETY


def _bound_accurate_gpu(left: Side, right: Side, keep: bool = False):
    """The GPU form: W on cuBLAS int8 (k chunks summed exactly in int64, columns
    in blocks of bounded memory), its row and column maxima brought to the host;
    with ``keep`` also W (m × n, Fortran, int32 saturated) on the device."""
    import cupy

    from .._kernels import ozaki_gpu as kg

    a = left.int8_bound()
    b = a if right is left else right.int8_bound()
    m, n = left.x.shape[0], right.x.shape[0]
    rp, kp = a.shape
    block = max(kg.PAD, min(b.shape[0], (2**28 // (4 * rp)) // kg.PAD * kg.PAD))  # ≤ 1 GiB of int32 per block
    rowmax = cupy.zeros(rp, np.int64)
    colmax = []
    w = cupy.empty((block, rp), np.int32)
    kept = cupy.empty((n, m), np.int32) if keep else None  # W transposed, C order: W in Fortran order
    for j0 in range(0, b.shape[0], block):
        nb = min(block, b.shape[0] - j0)
        acc = None
        for c0 in range(0, kp, K_CHUNK):
            ck = min(kp, c0 + K_CHUNK) - c0
            kg.gemm_tn(a.data.ptr + c0, b.data.ptr + j0 * kp + c0, rp, nb, ck, kp, kp, w, rp)
            part = w[:nb].astype(np.int64)
            acc = part if acc is None else acc + part
        rowmax = cupy.maximum(rowmax, acc.max(axis=0))
        colmax.append(acc.max(axis=1))
        if keep and j0 < n:
            j1 = min(n, j0 + nb)
            kept[j0:j1] = cupy.minimum(acc[:j1 - j0, :m], np.iinfo(np.int32).max)
    rows = rowmax[:m].get().astype(np.float64)
    cols = cupy.concatenate(colmax)[:n].get().astype(np.float64)
    scale = np.log2(127.0 * 127.0)
    with np.errstate(divide="ignore"):
        g = np.log2(rows) - scale + _SAFETY, np.log2(cols) - scale + _SAFETY
    return (*g, kept.T) if keep else g


def budgets(L: float, g_rows: np.ndarray, g_cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bit budgets u (rows), v (columns) with ``u_i + v_j + (g_i + g_j)/2 ≤ L``.

    ``g`` are the log2 growth factors from :func:`bound_fast` or
    :func:`bound_accurate`; rows with ``g = −inf`` (all zero) get budget 0.
    """
    def one(g):
        u = np.floor((L - g) / 2.0)
        return np.where(np.isfinite(u), u, 0).astype(np.int64)

    return one(g_rows), one(g_cols)


def needed_bits(left: Side, right: Side, g_rows, g_cols, precision: int, *, terms: int = 1,
                samples: int = 256, rng_seed: int = 0x0A2) -> float:
    """Estimate the ``L`` (log2 of the product bound) the inputs need: ``auto`` mode's choice.

    The truncation error of entry (i, j) is at most
    ``2^{ea_i−u_i}‖B_j‖₁ + 2^{eb_j−v_j}‖A_i‖₁``; it stays below
    ``2^{−precision−1}·Σ_l|A_il||B_lj|`` when both budgets are large enough.
    This is checked on a sample of entries (random ones plus the rows and
    columns with the widest spread of magnitudes), with ``Σ|A||B|`` computed
    in log2 so that no magnitude over- or underflows.  It only picks the
    count: every entry is certified afterwards (:mod:`.certify`).
    """
    m, n = left.x.shape[0], right.x.shape[0]
    k = left.x.shape[1]
    if m == 0 or n == 0 or k == 0:
        return 0.0
    live_r = np.flatnonzero(~left.zero)
    live_c = np.flatnonzero(~right.zero)
    if live_r.size == 0 or live_c.size == 0:
        return 0.0
    rng = np.random.default_rng(rng_seed)
    # widest spread: the largest entry far above the row's mean magnitude
    spread_r = live_r[np.argsort(left.ea[live_r] - left.log2l1[live_r])[-8:]]
    spread_c = live_c[np.argsort(right.ea[live_c] - right.log2l1[live_c])[-8:]]
    ri = np.concatenate([rng.choice(live_r, samples), np.repeat(spread_r, len(spread_c)),
                         spread_r, rng.choice(live_r, len(spread_c))])
    ci = np.concatenate([rng.choice(live_c, samples), np.tile(spread_c, len(spread_r)),
                         rng.choice(live_c, len(spread_r)), spread_c])
    log2dot = _log2_abs_dots(left.x, right.x, ri, ci)
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


def _log2_abs_dots(x, y, ri, ci) -> np.ndarray:
    """``log2 Σ_l |x[ri]||y[ci]|`` per sampled pair, in log2 throughout (−inf for 0)."""
    xp = namespace(x=x)
    with np.errstate(divide="ignore"):
        lx = xp.log2(xp.abs(x[xp.asarray(ri)]).astype(np.float64))
        ly = xp.log2(xp.abs(y[xp.asarray(ci)]).astype(np.float64))
        t = lx + ly
        top = t.max(axis=1)
        safe = xp.where(xp.isfinite(top), top, 0.0)
        total = xp.log2(xp.exp2(t - safe[:, None]).sum(axis=1)) + safe
    return _host(xp.where(xp.isfinite(top), total, -np.inf))
