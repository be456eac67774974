"""An ordinary cupy program: it knows nothing about emublas.

    python3 examples/cupy_program.py
    EMUBLAS_VERBOSE=1 EMUBLAS_BACKEND=native python3 -m emublas.interpose examples/cupy_program.py

Products through ``@``, ``cupy.matmul``, ``cupy.dot`` and ``cupy.cublas.gemm``;
prints sums and the error of one row against a float64 CPU reference with
exact summation (math.fsum of exact two-products is not available in numpy,
so the reference row uses Fractions).
"""

from fractions import Fraction

import cupy as cp
import cupy.cublas  # noqa: F401  (cupy.cublas is a submodule)

rng = cp.random.default_rng(11)
n = 512
a = rng.standard_normal((n, n)) * cp.exp(rng.standard_normal((n, n)))
b = rng.standard_normal((n, n))
c1 = a @ b
c2 = cp.matmul(a, b.T)
c3 = cp.dot(b, a)
c4 = cp.cublas.gemm("N", "T", a, b)
cp.cuda.Device().synchronize()

ah, bh = cp.asnumpy(a), cp.asnumpy(b)
row = [float(sum(Fraction(float(p)) * Fraction(float(q)) for p, q in zip(ah[3], bh[:, j]))) for j in range(0, n, 64)]
err = max(abs(float(c1[3, j]) - r) / abs(r) for j, r in zip(range(0, n, 64), row))
print(f"sum(a@b) = {float(c1.sum()):.17g}, sum(matmul) = {float(c2.sum()):.17g}")
print(f"sum(dot) = {float(c3.sum()):.17g}, sum(cublas.gemm) = {float(c4.sum()):.17g}")
print(f"max relative error of row 3 (sampled) vs exact: {err:.3e}")
