"""Exact integer matrix products with Ozaki-II: ``intmatmul`` for integer arrays.

Integers need no scaling: the product is computed modulo enough moduli to
cover the largest possible |entry|, reconstructed exactly with Garner's
mixed-radix digits and evaluated in wrapping int64 arithmetic (exact whenever
the true value fits int64; values that do not fit raise ``OverflowError``).
"""

from __future__ import annotations

import numpy as np

from ..._arrays import is_cupy
from ..._kernels import cpu
from ..integer_bound import product_bound
from .moduli import REAL_MODULI
from .scaling import K_CHUNK

__all__ = ["intmatmul"]

_INT64_MAX = 2**63 - 1


def _residues(x: np.ndarray, m: int) -> np.ndarray:
    r = np.mod(x, m)  # in [0, m)
    r = r.astype(np.int16)
    r[r > (m - 1) // 2] -= m
    return r.astype(np.int8)


def intmatmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact ``a @ b`` for 2-D integer arrays, as int64.

    ``a`` and ``b`` are reduced modulo the first Ozaki-II moduli, as many as it takes for
    the moduli's product to exceed four times :func:`~emublas.backends.integer_bound.product_bound`; the residues are
    multiplied as int8 matrices (k in chunks of ``K_CHUNK``) and each entry is rebuilt
    from its residues with Garner's mixed-radix digits.  On the CPU, operands with
    every entry in [-127, 127], ``k`` at most ``K_CHUNK`` and a bound below 2**31 take
    one int8 GEMM instead.  cupy inputs are computed on their GPU (int8 products on cuBLAS).

    Parameters
    ----------
    a : numpy.ndarray or cupy.ndarray
        m×k integer (or bool) array; any integer dtype, uint64 included.
    b : numpy.ndarray or cupy.ndarray
        k×n integer (or bool) array, on the same device as ``a``.

    Returns
    -------
    numpy.ndarray or cupy.ndarray
        The m×n int64 product, exact in every entry, on the inputs' device (zeros when
        ``k`` is 0).

    Raises
    ------
    OverflowError
        Some entry of the exact product does not fit int64, or (cupy inputs) a uint64
        operand holds a value above 2**63 - 1.
    """
    m, k = a.shape
    n = b.shape[1]
    bound = product_bound(a, b)
    if is_cupy(a):
        return _intmatmul_gpu(a, b, bound)
    if k == 0 or bound == 0:
        return np.zeros((m, n), np.int64)
    small = bound < 2**31 and k <= K_CHUNK
    if small and int(np.abs(a).max()) <= 127 and int(np.abs(b).max()) <= 127:
        return cpu.i8gemm(a.astype(np.int8), b.astype(np.int8)).astype(np.int64)
    moduli = _moduli_for(bound)
    count = len(moduli)
    a64 = a.astype(np.int64) if a.dtype != np.uint64 else a.astype(object)
    b64 = b.astype(np.int64) if b.dtype != np.uint64 else b.astype(object)
    res = np.empty((count, m, n), np.int64)
    buf = np.empty((m, n), np.int32, order="F")
    for l, mod in enumerate(moduli):
        ra, rb = _residues(a64, mod), _residues(b64, mod)
        acc = np.zeros((m, n), np.int64)
        for c0 in range(0, k, K_CHUNK):
            cpu.i8gemm(ra[:, c0 : c0 + K_CHUNK], rb[c0 : c0 + K_CHUNK, :], out=buf)
            acc += buf
        res[l] = np.mod(acc, mod)
    return _garner(res, moduli)


def _moduli_for(bound: int) -> tuple[int, ...]:
    count, P = 0, 1
    while P <= 4 * bound:  # the symmetric range (−P/2, P/2) must hold every entry
        P *= REAL_MODULI[count]
        count += 1
    return REAL_MODULI[:count]


def _intmatmul_gpu(a, b, bound: int):
    """The cupy form: residues and Garner on the device, products on cuBLAS int8."""
    import cupy

    from . import kernels_gpu as kg
    from . import kernels_gpu_int as ki

    m, k = a.shape
    n = b.shape[1]
    if k == 0 or bound == 0:
        return cupy.zeros((m, n), np.int64)
    for name, x in (("a", a), ("b", b)):
        if x.dtype == np.uint64 and x.size and int(x.max()) > _INT64_MAX:
            raise OverflowError(f"intmatmul on the GPU: {name} holds uint64 values above 2**63 - 1")
    moduli = _moduli_for(bound)
    ra = ki.int_residues(a.astype(np.int64, copy=False), moduli)
    rb = ki.int_residues(b.T.astype(np.int64, copy=False), moduli)
    mp, nq, kp = ra.shape[1], rb.shape[1], ra.shape[2]
    prod = cupy.empty((nq, mp), np.int32)
    res = cupy.empty((len(moduli), nq, mp), np.int32)
    for l, mod in enumerate(moduli):
        for c0 in range(0, kp, K_CHUNK):
            ck = min(kp, c0 + K_CHUNK) - c0
            kg.gemm_tn(ra.data.ptr + l * mp * kp + c0, rb.data.ptr + l * nq * kp + c0, mp, nq, ck, kp, kp, prod, mp)
            ki.int_accumulate(prod, res[l], mod, c0 == 0)
    value, suspect, count = ki.int_garner(res[:, :n, :], moduli, m, n)
    if int(count.get()[0]):  # entries near or past the int64 range: decide exactly on the host
        where = [w.get() for w in cupy.nonzero(suspect)]
        sel = res[:, cupy.asarray(where[1]), cupy.asarray(where[0])].get().astype(np.int64)
        _garner(sel[:, :, None], moduli)  # raises OverflowError for a value outside int64
    return value


def _garner(res, moduli, xp=np):
    """Symmetric mixed-radix digits, then the value in wrapping int64 with an overflow check."""
    digits = []
    for l, ml in enumerate(moduli):
        t = res[l].copy()
        for j, d in enumerate(digits):
            t = xp.mod((t - d) * pow(moduli[j] % ml, -1, ml), ml)
        t[t > (ml - 1) // 2] -= ml
        digits.append(t)
    with np.errstate(over="ignore"):
        value = digits[-1].copy()
        approx = digits[-1].astype(np.float64)
        for l in range(len(moduli) - 2, -1, -1):
            value = value * np.int64(moduli[l]) + digits[l]  # exact modulo 2^64
            approx = approx * moduli[l] + digits[l]
    suspect = xp.abs(approx) >= 2.0**62
    if suspect.any():
        where = [np.asarray(w.get() if xp is not np else w) for w in xp.nonzero(suspect)]
        host = [np.asarray(d.get() if xp is not np else d) for d in digits]
        for i, j in zip(*where):
            exact = 0
            for l in range(len(moduli) - 1, -1, -1):
                exact = exact * moduli[l] + int(host[l][i, j])
            if not -_INT64_MAX - 1 <= exact <= _INT64_MAX:
                raise OverflowError(
                    f"intmatmul: entry ({i}, {j}) of the exact product is {exact}, which does not fit int64"
                )
    return value
