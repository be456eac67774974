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

from .._kernels import cpu

__all__ = ["Side", "side", "bound_fast", "bound_accurate", "budgets", "needed_bits", "K_CHUNK"]

#: Longest inner dimension of one int8 product whose int32 sum cannot overflow:
#: residues are in [-128, 127], so each term is at most 2^14 in size.
K_CHUNK = 2**17 - 1
_SAFETY = 2.0**-20  # slack against rounding in the floating-point norms


class Side:
    """Per-row data of one factor, rows being the rows of ``op(A)`` or the columns of ``op(B)``.

    Attributes
    ----------
    mag : ndarray, shape (rows, k)
        ``|x|`` (complex modulus for complex data), float64.
    ea : ndarray of int64
        ``max|x_row| < 2^ea``; 0 for an all-zero row.
    zero : ndarray of bool
        All-zero rows.
    log2norm : ndarray of float64
        ``log2 ‖x_row / 2^ea‖₂`` (−inf for zero rows).
    """

    def __init__(self, mag: np.ndarray):
        self.mag = mag
        rowmax = mag.max(axis=1) if mag.shape[1] else np.zeros(mag.shape[0])
        self.zero = rowmax == 0
        _, ea = np.frexp(rowmax)
        self.ea = ea.astype(np.int64)
        with np.errstate(divide="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", mag, mag)) if mag.shape[1] else np.zeros(mag.shape[0])
            self.log2norm = np.log2(norms) - self.ea

    def int8_bound(self) -> np.ndarray:
        """``ceil(127·|x|/2^ea)`` as int8: entrywise upper bounds with 7 bits."""
        scaled = np.ldexp(self.mag, -self.ea[:, None]) * 127.0
        return np.ceil(scaled).astype(np.int8)


def side(x: np.ndarray) -> Side:
    """The :class:`Side` of ``x`` (rows are the scaled units)."""
    return Side(np.abs(x).astype(np.float64, copy=False))


def bound_fast(left: Side, right: Side) -> tuple[np.ndarray, np.ndarray]:
    """log2 of per-row and per-column growth factors for the Cauchy–Schwarz bound."""
    return 2 * left.log2norm + _SAFETY, 2 * right.log2norm + _SAFETY


def bound_accurate(left: Side, right: Side, *, threads=None) -> tuple[np.ndarray, np.ndarray]:
    """log2 of the row and column maxima of the int8 bound product W/127²."""
    a = left.int8_bound()
    b = right.int8_bound()
    k = a.shape[1]
    w = None
    for start in range(0, max(k, 1), K_CHUNK):
        part = cpu.i8gemm(a[:, start:start + K_CHUNK], b[:, start:start + K_CHUNK].T, threads=threads)
        w = part.astype(np.float64) if w is None else w + part
    w /= 127.0 * 127.0
    with np.errstate(divide="ignore"):
        rows = np.log2(w.max(axis=1)) if w.shape[1] else np.full(w.shape[0], -np.inf)
        cols = np.log2(w.max(axis=0)) if w.shape[0] else np.full(w.shape[1], -np.inf)
    return rows + _SAFETY, cols + _SAFETY


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
                samples: int = 256, rng_seed: int = 0x0A2) -> tuple[float, float]:
    """Estimate the ``L`` (log2 of the product bound) the inputs need.

    The truncation error of entry (i, j) is at most
    ``2^{ea_i−u_i}‖B_j‖₁ + 2^{eb_j−v_j}‖A_i‖₁``; it stays below
    ``2^{−precision−1}·Σ_l|A_il||B_lj|`` when both budgets are large enough.
    This is checked on a sample of entries (random ones plus the rows and
    columns with the widest spread of magnitudes).

    Returns
    -------
    (L_exact, L_native)
        ``L`` for errors at the input's own precision, and the ``L`` at which
        the error matches native BLAS's typical error (``√k`` ulps), which is
        what the accuracy warning checks against.
    """
    m, n = left.mag.shape[0], right.mag.shape[0]
    k = left.mag.shape[1]
    if m == 0 or n == 0 or k == 0:
        return 0.0, 0.0
    live_r = np.flatnonzero(~left.zero)
    live_c = np.flatnonzero(~right.zero)
    if live_r.size == 0 or live_c.size == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(rng_seed)
    l1_r = left.mag.sum(axis=1)
    l1_c = right.mag.sum(axis=1)
    # widest spread: the largest entry far above the row's mean magnitude
    spread_r = live_r[np.argsort(np.ldexp(1.0, left.ea[live_r]) * k / np.maximum(l1_r[live_r], 1e-300))[-8:]]
    spread_c = live_c[np.argsort(np.ldexp(1.0, right.ea[live_c]) * k / np.maximum(l1_c[live_c], 1e-300))[-8:]]
    ri = np.concatenate([rng.choice(live_r, samples), np.repeat(spread_r, len(spread_c)),
                         spread_r, rng.choice(live_r, len(spread_c))])
    ci = np.concatenate([rng.choice(live_c, samples), np.tile(spread_c, len(spread_r)),
                         rng.choice(live_c, len(spread_r)), spread_c])
    dots = np.einsum("ij,ij->i", left.mag[ri], right.mag[ci])
    ok = dots > 0
    if not ok.any():
        return 0.0, 0.0
    ri, ci, dots = ri[ok], ci[ok], dots[ok]
    with np.errstate(divide="ignore"):
        s_row = left.ea[ri] + np.log2(l1_c[ci]) - np.log2(dots)  # u_i ≥ p + 1 + s_row
        s_col = right.ea[ci] + np.log2(l1_r[ri]) - np.log2(dots)
    # u_i = floor((L − g_i)/2) ≥ (L − g_i)/2 − 1 must reach p + 1 + s (+1 for the two error terms)
    need_r = 2.0 * (precision + 3 + np.log2(terms) + s_row) + g_rows[ri]
    need_c = 2.0 * (precision + 3 + np.log2(terms) + s_col) + g_cols[ci]
    exact = float(max(need_r.max(), need_c.max()))
    return exact, exact - math.log2(k)
