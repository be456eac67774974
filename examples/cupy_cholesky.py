"""An ordinary cupy program doing BLAS-3 work of many sizes: it knows nothing about emublas.

    python3 examples/cupy_cholesky.py [n] [block]
    EMUBLAS_BACKEND=auto python3 -m emublas.interpose examples/cupy_cholesky.py

A right-looking blocked Cholesky factorization of a complex Hermitian
positive definite matrix (default n = 16384, block 2048) and of a real one of
half the order: diagonal blocks by cuSOLVER (``cupy.linalg.cholesky``),
panels by ``cupyx.scipy.linalg.solve_triangular``, trailing updates by
``cupy.matmul`` (whose sizes shrink block by block: the products the shim can
route; ``@`` is routed only where cupy lets the shim patch ``ndarray``), then a
few steps of power iteration on the real matrix (products of 4 different
sizes).  Prints its own time (``elapsed_s``, device synchronized), a checksum
and the relative residual of a solve with each factor.

Before its clock starts it runs each library routine once on one block of each
dtype: the first call of cuSOLVER, or of cuBLAS's kernels for a dtype, in a
process loads and initialises them (tens of milliseconds), a one-time cost that
the timed work should not include.  Without this the timer caught that cost for
whichever library the set-up had not yet used, which depends on how the set-up's
products were computed.
"""

import sys
import time

import cupy as cp
import cupyx.scipy.linalg


def cholesky(a, nb):
    """Lower Cholesky factor of ``a`` (overwritten), block size ``nb``."""
    n = a.shape[0]
    for j in range(0, n, nb):
        e = min(n, j + nb)
        a[j:e, j:e] = cp.linalg.cholesky(a[j:e, j:e])
        if e == n:
            break
        l11 = a[j:e, j:e]
        # L21 = A21 L11^-H, as the solve of L11 L21^H = A21^H
        a[e:, j:e] = cupyx.scipy.linalg.solve_triangular(l11, a[e:, j:e].conj().T, lower=True).conj().T
        l21 = a[e:, j:e]
        a[e:, e:] -= cp.matmul(l21, l21.conj().T)
    return cp.tril(a)


def hpd(n, rng, cplx):
    x = rng.standard_normal((n, n // 2))
    if cplx:
        x = x + 1j * rng.standard_normal((n, n // 2))
    return cp.matmul(x, x.conj().T) / n + cp.eye(n)


def warm_up(mats, nb):
    """Each routine the timed part calls, once on an nb x nb block per dtype (results unused)."""
    for a in mats.values():
        m = min(nb, a.shape[0])
        blk = a[:m, :m].copy()
        low = cp.linalg.cholesky(blk)
        x = cupyx.scipy.linalg.solve_triangular(low, blk, lower=True)
        x = cupyx.scipy.linalg.solve_triangular(low, x, lower=True, trans="C")
        blk -= cp.matmul(x, x.conj().T)
        cp.linalg.norm(blk)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    nb = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    rng = cp.random.default_rng(5)
    mats = {"z": hpd(n, rng, True), "d": hpd(n // 2, rng, False)}
    rhs = {p: rng.standard_normal((m.shape[0], 256)).astype(m.dtype) for p, m in mats.items()}
    warm_up(mats, nb)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    out = {}
    for p, a in mats.items():
        low = cholesky(a.copy(), nb)
        y = cupyx.scipy.linalg.solve_triangular(low, rhs[p], lower=True)
        x = cupyx.scipy.linalg.solve_triangular(low, y, lower=True, trans="C")
        res = cp.matmul(a, x) - rhs[p]
        out[p] = (low, float(cp.linalg.norm(res) / (cp.linalg.norm(a) * cp.linalg.norm(x))))
    # power iteration on the real matrix with blocks of 4 widths
    a = mats["d"]
    lam = []
    for width in (64, 512, 2048, a.shape[0]):
        v = rng.standard_normal((a.shape[0], width))
        for _ in range(4):
            v = cp.matmul(a, v)
            v /= cp.linalg.norm(v, axis=0)
        lam.append(float(cp.mean(cp.sum(v * cp.matmul(a, v), axis=0))))
    cp.cuda.Device().synchronize()
    elapsed = time.perf_counter() - t0
    checksum = sum(float(cp.abs(low).sum()) for low, _ in out.values()) + sum(lam)
    print(f"elapsed_s = {elapsed:.6f}")
    print(f"clock_start = {t0:.9f}")  # time.perf_counter() where the clock started (for tools timing calls)
    print(f"checksum = {checksum:.12e}")
    for p, (_, r) in out.items():
        print(f"{p} relative residual = {r:.3e}")


main()
