"""The sweep's inputs: input families, the entries sampled for the exact reference."""

from __future__ import annotations

import re
import zlib

import numpy as np

__all__ = ["DTYPES", "FAMILIES_HELP", "CANCEL_DELTA", "parse_family", "make_inputs", "sample_entries", "group_rng"]

DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
FAMILIES_HELP = "phi<φ> (e.g. phi0.5, phi2), uniform, integer, cancel"
CANCEL_DELTA = {"d": 2.0**-20, "z": 2.0**-20, "s": 2.0**-8, "c": 2.0**-8}


def parse_family(name: str) -> tuple[str, float | None]:
    """Parse an input family's name.

    Parameters
    ----------
    name : str
        ``phi<φ>`` (e.g. ``phi0.5``), ``uniform``, ``integer`` or ``cancel``, case-insensitive.

    Returns
    -------
    kind : str
        ``"phi"``, ``"uniform"``, ``"integer"`` or ``"cancel"``.
    phi : float or None
        φ for the ``phi`` family, else None.

    Raises
    ------
    ValueError
        Naming the valid families.
    """
    text = str(name).strip().lower()
    if text in ("uniform", "integer", "cancel"):
        return text, None
    m = re.fullmatch(r"phi([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)", text)
    if m:
        return "phi", float(m.group(1))
    raise ValueError(f"unknown input family {name!r}; valid families: {FAMILIES_HELP}")


def group_rng(seed: int, group_key: str) -> np.random.Generator:
    """The random generator of one group of configurations, the same on every run.

    Parameters
    ----------
    seed : int
        The sweep's ``--seed``.
    group_key : str
        The group's key (routine, dtype, shape, family).

    Returns
    -------
    numpy.random.Generator
        Seeded with the seed and the key's CRC-32.
    """
    return np.random.default_rng([seed, zlib.crc32(group_key.encode())])


def _real_family(rng, kind: str, phi, shape) -> np.ndarray:
    if kind == "phi":
        return (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if kind == "uniform":
        return rng.random(shape) - 0.5
    if kind == "integer":
        return rng.integers(-8, 9, size=shape).astype(np.float64)
    raise AssertionError(kind)


def make_inputs(op: str, dtype: str, shape, family: str, rng) -> tuple[np.ndarray, np.ndarray | None]:
    """Host inputs of the routine's dtype for one group.

    Families: ``phi<φ>``: (rand−0.5)·exp(φ·randn) (φ sets the exponent spread);
    ``uniform``: rand−0.5; ``integer``: integers in [−8, 8]; ``cancel``: see
    :func:`_cancel_inputs`.  Complex data have independent real and imaginary parts.

    Parameters
    ----------
    op : {"gemm", "syrk", "herk", "syr2k", "her2k"}
        The routine.
    dtype : {"s", "d", "c", "z"}
        The BLAS prefix of its dtype.
    shape : tuple of int
        ``(m, n, k)``.
    family : str
        The input family, as :func:`parse_family` reads it.
    rng : numpy.random.Generator
        The group's generator (:func:`group_rng`).

    Returns
    -------
    a : numpy.ndarray
        Fortran-ordered: m × k for gemm, n × k for the rank-k routines.
    b : numpy.ndarray or None
        k × n for gemm, n × k for syr2k/her2k; None for syrk/herk.
    """
    m, n, k = shape
    kind, phi = parse_family(family)
    cplx = dtype in "cz"
    if op == "gemm":
        shapes = [(m, k), (k, n)]
    elif op in ("syrk", "herk"):
        shapes = [(n, k)]
    else:
        shapes = [(n, k), (n, k)]
    if kind == "cancel":
        arrays = _cancel_inputs(op, shapes, cplx, CANCEL_DELTA[dtype], rng)
    else:

        def draw(s):
            x = _real_family(rng, kind, phi, s)
            return x + 1j * _real_family(rng, kind, phi, s) if cplx else x

        arrays = [draw(s) for s in shapes]
    arrays = [np.asfortranarray(x.astype(DTYPES[dtype])) for x in arrays]
    return arrays[0], (arrays[1] if len(arrays) > 1 else None)


def _cancel_inputs(op, shapes, cplx, delta, rng):
    """Cancellation-heavy inputs: every entry of the product is ~1/delta times smaller than its terms.

    gemm (and syr2k/her2k, row-wise): with h = k//2, ``a = [P P]`` and
    ``b = [Q; −Q + δR]`` (k odd: one zero column/row more), the same random
    permutation applied to the k index of both.  The exact product is
    ``δ·P·R`` (up to the rounding of −Q + δR, which the exact reference sees),
    while the terms are of size |P||Q|: a method whose error is relative to
    the terms loses log2(1/δ) bits (δ = 2^-20 for d/z, 2^-8 for s/c).
    syrk/herk (a·aᵀ is never small on the diagonal): ``a = U + δR`` where U has
    orthonormal rows (needs n ≤ k; for n > k, orthonormal columns and only mild
    cancellation), so the off-diagonal entries are O(δ) against O(1) terms.
    """

    def g(s):
        x = rng.random(s) - 0.5
        return x + 1j * (rng.random(s) - 0.5) if cplx else x

    if op in ("syrk", "herk"):
        n, k = shapes[0]
        z = g((max(n, k), min(n, k)))
        q, _ = np.linalg.qr(z)
        u = q.T if n <= k else q
        return [u + delta * g((n, k))]
    k = shapes[0][1]
    h = k // 2
    perm = rng.permutation(k)
    if op == "gemm":
        m, n = shapes[0][0], shapes[1][1]
        p, q, r = g((m, h)), g((h, n)), g((h, n))
        a = np.zeros((m, k), dtype=p.dtype)
        b = np.zeros((k, n), dtype=p.dtype)
        a[:, :h], a[:, h : 2 * h] = p, p
        b[:h], b[h : 2 * h] = q, -q + delta * r
        return [a[:, perm], b[perm, :]]
    n = shapes[0][0]
    p, q, r = g((n, h)), g((n, h)), g((n, h))
    a = np.zeros((n, k), dtype=p.dtype)
    b = np.zeros((n, k), dtype=p.dtype)
    a[:, :h], a[:, h : 2 * h] = p, p
    b[:, :h], b[:, h : 2 * h] = q, -q + delta * r
    return [a[:, perm], b[:, perm]]


def sample_entries(op: str, shape, samples: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Distinct entry indices to check against the exact reference.

    Parameters
    ----------
    op : str
        The routine; the rank-k ones sample the lower triangle (the one referenced).
    shape : tuple of int
        ``(m, n, k)``.
    samples : int
        How many entries, at most (all of them when fewer exist).
    rng : numpy.random.Generator
        The generator to draw with.

    Returns
    -------
    i, j : numpy.ndarray of int64
        Row and column indices.
    """
    m, n, _ = shape
    if op == "gemm":
        flat = rng.choice(m * n, size=min(samples, m * n), replace=False)
        return flat // n, flat % n
    tri = n * (n + 1) // 2
    flat = rng.choice(tri, size=min(samples, tri), replace=False)
    i = ((np.sqrt(8.0 * flat + 1) - 1) // 2).astype(np.int64)  # row of the t-th lower-triangle entry
    i -= i * (i + 1) // 2 > flat
    i += (i + 1) * (i + 2) // 2 <= flat
    j = flat - i * (i + 1) // 2
    return i, j
