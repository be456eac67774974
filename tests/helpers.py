"""Small helpers shared by test modules (tests/ is on sys.path under pytest's default import mode)."""

import numpy as np
import pytest


def randn(rng, shape, dtype):
    """Standard normal entries of ``dtype`` (independent real and imaginary parts for complex)."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def skip_unless_ready(request, backend: str) -> None:
    """Skip the test where ``backend`` cannot run on the device of its ``xp`` fixture (if it has one)."""
    import emublas.backends

    if "xp" in request.fixturenames:
        xp = request.getfixturevalue("xp")
        device = "cpu" if xp is np else "gpu"
        ok, why = emublas.backends.get(backend).readiness()[device]
        if not ok:
            pytest.skip(f"{backend} on {device}: {why}")
