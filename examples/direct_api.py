"""The direct API: scipy.linalg.blas calls, routed through emublas.

Run:  python3 examples/direct_api.py
Each routine family is called through emublas and through scipy with the same
arguments, and the largest difference is printed (native: rounding only).
"""

import numpy as np
import scipy.linalg.blas as sblas

import emublas

rng = np.random.default_rng(2026)
a = rng.standard_normal((300, 200))
b = rng.standard_normal((200, 250))
za = a + 1j * rng.standard_normal(a.shape)
zb = rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)
c = rng.standard_normal((300, 300)) + 1j * rng.standard_normal((300, 300))

calls = {
    "dgemm": ((1.5, a, b), {}),
    "zgemm": ((1 - 2j, za, zb), {"trans_b": 2}),
    "dsyrk": ((1.0, a), {"lower": 1}),
    "zherk": ((0.5, za, 2.0, c), {}),
    "zher2k": ((1 + 1j, za, zb, 0.5, c), {"lower": 1}),
}
print(emublas.info()["selection"])
for name, (args, kw) in calls.items():
    ours = getattr(emublas, name)(*args, **kw)
    ref = getattr(sblas, name)(*args, **kw)
    print(f"{name:7s} shape {ours.shape}  max |emublas - scipy| = {np.abs(ours - ref).max():.2e}")

with emublas.use("native"):
    print("inside use('native'):", emublas.get_backend())
