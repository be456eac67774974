"""Exact reference values for sampled entries of BLAS-3 products.

Every finite float is ``m·2^e`` exactly with an integer ``m`` (53 bits for
float64, and float32/complex64 data are widened to float64 first, which is
exact).  A dot product ``Σ u_k·v_k`` is therefore ``Σ m_k·2^(e_k)`` with
integer ``m_k = m(u_k)·m(v_k)``; shifting every term to the smallest exponent
makes the whole sum one Python integer ``N·2^E``, computed without any
rounding.  It is rounded once, to nearest-even float64, at the very end
(CPython's ``int / int`` and ``float(int)`` are correctly rounded, including
underflow to subnormals; overflow gives ±inf).

Complex dot products are two real ones (the real part
``Σ ur·vr + (−ui)·vi``, the imaginary part ``Σ ur·vi + ui·vr``; negation is
exact), each rounded once.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["exact_dot", "round_scaled", "exact_entries", "entry_vectors"]


def _parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer mantissas (int64, |m| < 2^53) and exponents with x == m·2^e exactly."""
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ValueError("exact reference: inputs must be finite")
    frac, exp = np.frexp(x)  # frac in ±[0.5, 1) (or 0), exact for subnormals too
    return np.ldexp(frac, 53).astype(np.int64), exp.astype(np.int64) - 53


def _scaled_dot(u: np.ndarray, v: np.ndarray) -> tuple[int, int]:
    """``(N, E)`` with ``Σ u_k v_k == N·2^E`` exactly (real float vectors)."""
    mu, eu = _parts(u)
    mv, ev = _parts(v)
    nz = (mu != 0) & (mv != 0)
    if not nz.any():
        return 0, 0
    e = (eu + ev)[nz]
    emin = int(e.min())
    total = 0
    for a, b, s in zip(mu[nz].tolist(), mv[nz].tolist(), (e - emin).tolist()):
        total += (a * b) << s
    return total, emin


def round_scaled(n: int, e: int) -> float:
    """``n·2^e`` rounded once to the nearest float64 (ties to even; ±inf on overflow).

    Parameters
    ----------
    n, e : int
        The exact value's integer and power of two.

    Returns
    -------
    float
    """
    if n == 0:
        return 0.0
    try:
        if e >= 0:
            return float(n << e)
        return n / (1 << -e)  # int/int true division is correctly rounded in CPython
    except OverflowError:
        return math.copysign(math.inf, n)


def exact_dot(u, v) -> float | complex:
    """``Σ u_k·v_k`` exactly, rounded once per real/imaginary part to float64.

    Parameters
    ----------
    u, v : array_like
        1-D (raveled otherwise) float32/float64 or complex64/complex128 vectors
        of one length; no implicit conjugation.

    Returns
    -------
    float or complex
        complex when either vector is complex.

    Raises
    ------
    ValueError
        The lengths differ, or an entry is NaN or infinite.
    """
    u = np.asarray(u).ravel()
    v = np.asarray(v).ravel()
    if u.shape != v.shape:
        raise ValueError(f"exact_dot: lengths differ ({u.size} and {v.size})")
    if u.dtype.kind != "c" and v.dtype.kind != "c":
        return round_scaled(*_scaled_dot(u, v))
    ur, ui = np.real(u).astype(np.float64), np.imag(u).astype(np.float64)
    vr, vi = np.real(v).astype(np.float64), np.imag(v).astype(np.float64)
    re = round_scaled(*_scaled_dot(np.concatenate([ur, -ui]), np.concatenate([vr, vi])))
    im = round_scaled(*_scaled_dot(np.concatenate([ur, ui]), np.concatenate([vi, vr])))
    return complex(re, im)


def entry_vectors(op: str, a, b, i: int, j: int):
    """The vectors whose dot product is entry ``(i, j)`` of the untransposed product.

    gemm: ``a[i,:]·b[:,j]``; syrk: ``a[i]·a[j]``; herk: ``a[i]·conj(a[j])``;
    syr2k: ``[a[i] b[i]]·[b[j] a[j]]``; her2k: ``[a[i] b[i]]·conj([b[j] a[j]])``
    (trans=0, alpha=1, beta=0).

    Parameters
    ----------
    op : {"gemm", "syrk", "herk", "syr2k", "her2k"}
    a, b : numpy.ndarray
        The operands (``b`` unused by syrk and herk).
    i, j : int
        The entry.

    Returns
    -------
    tuple of numpy.ndarray
        ``(u, v)`` for :func:`exact_dot`.

    Raises
    ------
    ValueError
        Unknown ``op``.
    """
    if op == "gemm":
        return a[i, :], b[:, j]
    if op == "syrk":
        return a[i, :], a[j, :]
    if op == "herk":
        return a[i, :], np.conj(a[j, :])
    if op == "syr2k":
        return np.concatenate([a[i], b[i]]), np.concatenate([b[j], a[j]])
    if op == "her2k":
        return np.concatenate([a[i], b[i]]), np.conj(np.concatenate([b[j], a[j]]))
    raise ValueError(f"unknown operation {op!r}")


def exact_entries(op: str, a, b, rows, cols) -> np.ndarray:
    """Exact (once-rounded) entries ``(rows[t], cols[t])`` of the product of ``op``.

    Parameters
    ----------
    op : {"gemm", "syrk", "herk", "syr2k", "her2k"}
    a, b : array_like
        The untransposed operands, finite (``b`` None for syrk and herk).
    rows, cols : sequence of int
        The entries, pairwise.

    Returns
    -------
    numpy.ndarray
        float64, or complex128 when an operand is complex; one value per entry.

    Raises
    ------
    ValueError
        Unknown ``op`` or a non-finite operand entry.
    """
    a = np.asarray(a)
    b = None if b is None else np.asarray(b)
    cplx = a.dtype.kind == "c" or (b is not None and b.dtype.kind == "c")
    out = np.empty(len(rows), dtype=np.complex128 if cplx else np.float64)
    for t, (i, j) in enumerate(zip(rows, cols)):
        out[t] = exact_dot(*entry_vectors(op, a, b, int(i), int(j)))
    return out
