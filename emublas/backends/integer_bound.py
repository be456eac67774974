"""An upper bound of an integer matrix product's entries, shared by the backends' ``intmatmul``.

The bound decides whether an int64 product can wrap: native multiplies in int64
when it cannot, ozaki2 picks the number of moduli from it and boolpack checks
its accumulator with it.  The front re-exports it as ``emublas.integer.product_bound``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._arrays import is_cupy

__all__ = ["product_bound"]


def product_bound(a: Any, b: Any) -> int:
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
