"""An ordinary scipy program doing BLAS-3 work of many sizes: it knows nothing about emublas.

    python3 examples/scipy_cholesky.py [n] [block]
    EMUBLAS_BACKEND=auto python3 -m emublas.interpose examples/scipy_cholesky.py

A right-looking blocked Cholesky factorization of a real SPD matrix and of a
complex Hermitian one (diagonal blocks by LAPACK; panels by trsm, trailing
updates by syrk/herk and gemm, whose sizes shrink block by block), then a
solve with the factor (trsm) and its residual (gemm).  Prints its own time
(``elapsed_s``), a checksum of the factors and the relative residuals
``||A x - b|| / (||A|| ||x||)``.
"""

import sys
import time

import numpy as np
import scipy.linalg
from scipy.linalg import blas


def cholesky(a, nb, p):
    """Lower Cholesky factor of ``a`` (overwritten), block size ``nb``, BLAS prefix ``p``."""
    trsm, gemm = getattr(blas, p + "trsm"), getattr(blas, p + "gemm")
    rank_k = blas.dsyrk if p == "d" else blas.zherk
    n = a.shape[0]
    for j in range(0, n, nb):
        e = min(n, j + nb)
        a[j:e, j:e] = scipy.linalg.cholesky(a[j:e, j:e], lower=True)
        if e == n:
            break
        # panel: L21 = A21 L11^-H
        a[e:, j:e] = trsm(1.0, a[j:e, j:e], a[e:, j:e], side=1, lower=1, trans_a=2)
        # trailing update A22 -= L21 L21^H: the diagonal block by syrk/herk, the rest by gemm
        f = min(n, e + nb)
        a[e:f, e:f] = rank_k(-1.0, a[e:f, j:e], beta=1.0, c=a[e:f, e:f], lower=1)
        if f < n:
            a[f:, e:] = gemm(-1.0, a[f:, j:e], a[e:, j:e], beta=1.0, c=a[f:, e:], trans_b=2)
    return np.tril(a)


def spd(n, rng, cplx):
    x = rng.standard_normal((n, n // 2))
    if cplx:
        x = x + 1j * rng.standard_normal((n, n // 2))
    return np.asfortranarray(x @ x.conj().T / n + np.eye(n))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1536
    nb = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    rng = np.random.default_rng(3)
    mats = {p: spd(n if p == "d" else n // 2, rng, p == "z") for p in "dz"}
    rhs = {p: np.asfortranarray(rng.standard_normal((m.shape[0], 64)).astype(m.dtype)) for p, m in mats.items()}
    t0 = time.perf_counter()
    out = {}
    for p, a in mats.items():
        trsm, gemm = getattr(blas, p + "trsm"), getattr(blas, p + "gemm")
        low = cholesky(np.array(a, order="F"), nb, p)
        y = trsm(1.0, low, rhs[p], lower=1)
        x = trsm(1.0, low, y, lower=1, trans_a=2)
        res = gemm(1.0, a, x, beta=-1.0, c=rhs[p])
        out[p] = (low, x, np.linalg.norm(res) / (np.linalg.norm(a) * np.linalg.norm(x)))
    elapsed = time.perf_counter() - t0
    checksum = sum(float(np.abs(low).sum()) for low, _, _ in out.values())
    print(f"elapsed_s = {elapsed:.6f}")
    print(f"checksum = {checksum:.12e}")
    for p, (_, _, r) in out.items():
        print(f"{p} relative residual = {r:.3e}")


main()
