"""``emublas.intmatmul``: exact integer matrix products, served by the backends."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import config
from ._arrays import namespace
from .backends.integer_bound import product_bound  # the backends share it; public here

__all__ = ["intmatmul", "product_bound"]


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
