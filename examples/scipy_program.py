"""An ordinary scipy program: it knows nothing about emublas.

Run it natively and under emulation (see examples/interpose_demo.sh):

    python3 examples/scipy_program.py
    EMUBLAS_VERBOSE=1 python3 -m emublas.interpose --backend ozaki2 examples/scipy_program.py

It forms a Gram matrix with dsyrk, a product with dgemm and a Hermitian
update with zherk, and reports the error of a few entries against exact
rational arithmetic, so the two runs can be compared.
"""

from fractions import Fraction

import numpy as np
from scipy.linalg import blas

rng = np.random.default_rng(7)
n, k = 300, 400
a = (rng.random((n, k)) - 0.5) * np.exp(2.0 * rng.standard_normal((n, k)))  # wide exponent span
b = (rng.random((k, n)) - 0.5) * np.exp(2.0 * rng.standard_normal((k, n)))
z = a + 1j * (rng.random((n, k)) - 0.5)

gram = blas.dsyrk(1.0, a)  # upper triangle of a a^T
prod = blas.dgemm(1.0, a, b)
herm = blas.zherk(1.0, z, lower=1)  # lower triangle of z z^H
gemm = blas.get_blas_funcs("gemm", (a, b))  # the way scipy.linalg itself finds BLAS
prod2 = gemm(2.0, a, b)


def exact(x, y):
    return float(sum(Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x, y)))


worst = 0.0
for i, j in [(0, 1), (5, 250), (123, 77), (299, 298)]:
    ref = exact(a[i], b[:, j])
    worst = max(worst, abs(prod[i, j] - ref) / abs(ref), abs(prod2[i, j] - 2 * ref) / abs(2 * ref))
    r, c = min(i, j), max(i, j)
    ref = exact(a[r], a[c])
    worst = max(worst, abs(gram[r, c] - ref) / abs(ref))
print(f"trace(gram) = {np.trace(gram):.17g}")
print(f"sum(prod)   = {prod.sum():.17g}")
print(f"herm[7, 3]  = {herm[7, 3]:.17g}")
print(f"max relative error of sampled entries vs exact: {worst:.3e}")
