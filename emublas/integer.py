"""``emublas.intmatmul``: exact integer matrix products, served by the backends."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import config
from ._arrays import is_cupy, namespace

__all__ = ["intmatmul", "product_bound"]


def product_bound(a, b) -> int:
    """An upper bound of ``max |(a·b)_ij|``.

    Exact integer arithmetic on numpy arrays; on cupy arrays float64 sums
    rounded upwards by their error bound.

    Parameters
    ----------
    a, b : array
        2-D integer (or bool) arrays with ``a.shape[1] == b.shape[0]``, both on
        the CPU or both on one GPU.

    Returns
    -------
    int
        ``min(max_i ‖a_i‖₁ · max|b|, max|a| · max_j ‖b_j‖₁)``: exact on numpy,
        rounded up on cupy; 0 for empty operands.
    """
    if a.size == 0 or b.size == 0:
        return 0
    if is_cupy(a):
        import math

        absa, absb = abs(a.astype(np.float64)), abs(b.astype(np.float64))
        slack = 1.0 + (max(a.shape[1], 1) + 2) * 2.0**-52
        row1 = float(absa.sum(axis=1).max()) * slack
        col1 = float(absb.sum(axis=0).max()) * slack
        amax, bmax = float(absa.max()) * slack, float(absb.max()) * slack
        return int(math.ceil(min(row1 * bmax, amax * col1) * slack)) + 1
    absa = np.abs(a.astype(object))
    absb = np.abs(b.astype(object))
    row1 = max(int(v) for v in absa.sum(axis=1))  # max_i ‖a_i‖₁
    col1 = max(int(v) for v in absb.sum(axis=0))  # max_j ‖b_j‖₁
    return min(row1 * int(absb.max()), int(absa.max()) * col1)


def intmatmul(a: Any, b: Any, *, backend: str | None = None, **options: Any) -> np.ndarray:
    """Exact product of two integer (or bool) matrices, as int64.

    Parameters
    ----------
    a, b : array_like, 2-D, integer or bool dtype
    backend : str, optional
        ``native`` (numpy, exact through a bound check) or ``ozaki2`` (int8
        products modulo enough moduli for the bound, Garner reconstruction).
    **options
        Backend options.

    Returns
    -------
    ndarray of int64 (cupy.ndarray for cupy inputs)

    Raises
    ------
    OverflowError
        An entry of the exact product does not fit int64 (never wraps).
    TypeError
        Non-integer input.
    ValueError
        Non-conforming shapes, or a backend without an integer product.
    """
    xp = namespace(a=a, b=b)
    a, b = xp.asarray(a), xp.asarray(b)
    for name, x in (("a", a), ("b", b)):
        if x.dtype.kind not in "biu":
            raise TypeError(f"intmatmul: {name} has dtype {x.dtype}; integer or bool arrays only")
        if x.ndim != 2:
            raise ValueError(f"intmatmul: {name} must be 2-D, got shape {x.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"intmatmul: a is {a.shape[0]}x{a.shape[1]} but b is {b.shape[0]}x{b.shape[1]}")
    be, opts = config.resolve(backend, options)
    be.check("cpu" if xp is np else "gpu")
    result = be.intmatmul(a, b, **opts)
    if result is NotImplemented:
        raise ValueError(f"backend {be.name!r} has no exact integer product; use native or ozaki2")
    return result
