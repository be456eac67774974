"""The shim's cupy entry points (run on the device; skipped without cupy and a GPU)."""

import subprocess
import sys

import numpy as np
import pytest

import emublas
import emublas.interpose as shim
from emublas import backends
from emublas.backends.base import Backend
from emublas.backends.native.backend import BACKEND as NATIVE

pytestmark = pytest.mark.gpu


class GpuEcho(Backend):
    """Computes with native cuBLAS gemm but counts as an emulation backend for routing."""

    name = "gpuecho"
    description = "test double"

    def __init__(self):
        self.calls = 0

    def readiness(self):
        return {"cpu": (True, "test"), "gpu": (True, "test")}

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts):
        self.calls += 1
        NATIVE.gemm(alpha, a, b, beta, c, trans_a, trans_b)


@pytest.fixture
def gpu_shim(cupy, monkeypatch):
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "0")
    monkeypatch.delenv("EMUBLAS_VERBOSE", raising=False)
    be = GpuEcho()
    backends.register(be)
    shim.reset_stats()
    shim.install("gpuecho")
    yield be
    shim.uninstall()
    emublas.set_backend(None)
    backends.unregister("gpuecho")


def test_cupy_entry_points_routed(gpu_shim, cupy, rng):
    a = cupy.asarray(rng.standard_normal((70, 50)))
    b = cupy.asarray(rng.standard_normal((50, 60)))
    ref = cupy.asnumpy(a) @ cupy.asnumpy(b)
    for out in (cupy.matmul(a, b), cupy.dot(a, b), cupy.cublas.gemm("N", "N", a, b)):
        assert isinstance(out, cupy.ndarray)
        np.testing.assert_allclose(cupy.asnumpy(out), ref, rtol=1e-12, atol=1e-12)
    assert cupy.matmul(a, b).flags.c_contiguous
    c = cupy.zeros((50, 50), order="F")
    cupy.cublas.syrk("T", a, out=c, alpha=2.0)
    ah = cupy.asnumpy(a)
    np.testing.assert_allclose(np.triu(cupy.asnumpy(c)), np.triu(2 * ah.T @ ah), rtol=1e-12, atol=1e-12)
    counts = shim.stats()
    assert counts["matmul:emulated"] >= 2 and counts["dot:emulated"] == 1 and counts["cublas.gemm:emulated"] == 1
    assert gpu_shim.calls >= 5


def test_operator_and_fallthrough(gpu_shim, cupy, rng):
    a = cupy.asarray(rng.standard_normal((64, 64)))
    before = gpu_shim.calls
    c = a @ a
    np.testing.assert_allclose(cupy.asnumpy(c), cupy.asnumpy(a) @ cupy.asnumpy(a), rtol=1e-12, atol=1e-12)
    routed = gpu_shim.calls - before
    assert routed == 1 or "__matmul__" in shim.gpu.not_swapped
    s = shim.stats()
    stacked = cupy.ones((2, 8, 8))
    cupy.matmul(stacked, stacked)  # batched: falls through
    cupy.matmul(a.astype(cupy.int32), a.astype(cupy.int32))  # integers: fall through
    cupy.matmul(a, a.astype(cupy.float32))  # mixed dtypes
    after = shim.stats()
    assert after.get("matmul:native", 0) - s.get("matmul:native", 0) == 3
    out = cupy.empty((64, 64))
    r = cupy.dot(a, a, out=out)  # cupy.dot calls a.dot(b, out): the method keeps that signature
    assert r is out
    np.testing.assert_allclose(cupy.asnumpy(a.dot(a)), cupy.asnumpy(out), rtol=1e-12, atol=1e-12)


def test_uninstall_restores_cupy(cupy):
    import cupy.cublas  # a submodule: an attribute of cupy only once imported (the shim imports it too)

    originals = (cupy.matmul, cupy.dot, cupy.cublas.gemm, cupy.cublas.syrk, cupy.ndarray.__matmul__)
    shim.install()
    assert cupy.matmul is not originals[0]
    shim.uninstall()
    assert (cupy.matmul, cupy.dot, cupy.cublas.gemm, cupy.cublas.syrk, cupy.ndarray.__matmul__) == originals


def test_import_hook_swaps_cupy_imported_later(cupy):
    code = (
        "import sys, emublas.interpose as s; s.install(); assert 'cupy' not in sys.modules;"
        " import cupy; print(cupy.matmul.__doc__.splitlines()[0]); s.uninstall();"
        " print(cupy.matmul.__doc__ is None or 'emublas' not in cupy.matmul.__doc__.splitlines()[0])"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.splitlines()
    assert first.startswith("emublas interpose: cupy.matmul") and second == "True"
