"""Small helpers shared by test modules (tests/ is on sys.path under pytest's default import mode)."""
import numpy as np


def randn(rng, shape, dtype):
    """Standard normal entries of ``dtype`` (independent real and imaginary parts for complex)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)
