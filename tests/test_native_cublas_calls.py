"""native's cuBLAS call plumbing on the host, against a stand-in for cupy's cuBLAS module.

The GPU suite checks native's cupy results; these check what it cannot see on a handle in
cupy's own state: that a pointer mode set by someone else is restored (also when the call
raises), that cupy's modules are bound once, and which arguments reach cuBLAS (the stream,
the fill mode, and alpha and beta in the real dtype for the Hermitian routines).  They run
everywhere: no GPU is touched.
"""

import sys
import types

import numpy as np
import pytest

from emublas.backends.native import backend as native

HOST, DEVICE = 0, 1  # cuBLAS's pointer modes
LOWER, UPPER = 0, 1  # cuBLAS's fill modes


class FakeCublas(types.ModuleType):
    """cupy_backends.cuda.libs.cublas as far as native uses it, recording every call."""

    CUBLAS_POINTER_MODE_HOST = HOST
    CUBLAS_POINTER_MODE_DEVICE = DEVICE
    CUBLAS_FILL_MODE_LOWER = LOWER
    CUBLAS_FILL_MODE_UPPER = UPPER

    def __init__(self):
        super().__init__("cupy_backends.cuda.libs.cublas")
        self.mode = HOST
        self.calls = []
        for prefix in "sdcz":
            for routine in ("gemm", "syrk"):
                setattr(self, prefix + routine, self._recorder(prefix + routine))

    def _recorder(self, name):
        def record(*args):
            self.calls.append((name, args))

        return record

    def setStream(self, handle, stream):  # noqa: N802 (cuBLAS's name)
        self.calls.append(("setStream", (handle, stream)))

    def getPointerMode(self, handle):  # noqa: N802
        return self.mode

    def setPointerMode(self, handle, mode):  # noqa: N802
        self.calls.append(("setPointerMode", (handle, mode)))
        self.mode = mode


class FakeGpuArray:
    """A numpy array with the attributes native reads from a cupy array."""

    def __init__(self, x):
        self.x = x
        self.data = types.SimpleNamespace(ptr=x.ctypes.data)
        self.shape, self.strides, self.itemsize, self.dtype = x.shape, x.strides, x.itemsize, x.dtype

    @property
    def T(self):  # noqa: N802 (numpy's name)
        return FakeGpuArray(self.x.T)

    def copy(self, order="C"):
        return FakeGpuArray(self.x.copy(order=order))


@pytest.fixture
def cublas(monkeypatch):
    """The stand-in installed as cupy's cuBLAS module, native's bindings made anew from it."""
    fake = FakeCublas()
    stream = types.SimpleNamespace(ptr=4242)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(
        device=types.SimpleNamespace(get_cublas_handle=lambda: 7),
        get_current_stream=lambda: stream,
    )
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas = fake
    modules = {
        "cupy": cupy,
        "cupy_backends": types.ModuleType("cupy_backends"),
        "cupy_backends.cuda": types.ModuleType("cupy_backends.cuda"),
        "cupy_backends.cuda.libs": libs,
        "cupy_backends.cuda.libs.cublas": fake,
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(native, "_CUDA", None)
    return fake


def test_a_call_sets_the_current_stream_and_leaves_host_mode_alone(cublas):
    with native._CublasCall():
        pass
    assert cublas.calls == [("setStream", (7, 4242))]
    assert cublas.mode == HOST


def test_a_device_pointer_mode_is_restored(cublas):
    cublas.mode = DEVICE  # another library's setting on cupy's shared handle
    with native._CublasCall():
        assert cublas.mode == HOST  # alpha and beta are host scalars
    assert cublas.mode == DEVICE
    assert [c for c in cublas.calls if c[0] == "setPointerMode"] == [
        ("setPointerMode", (7, HOST)),
        ("setPointerMode", (7, DEVICE)),
    ]


def test_a_device_pointer_mode_is_restored_when_the_call_raises(cublas):
    cublas.mode = DEVICE
    with pytest.raises(RuntimeError, match="cuBLAS failed"), native._CublasCall():
        raise RuntimeError("cuBLAS failed")
    assert cublas.mode == DEVICE


def test_cupy_is_bound_once(cublas):
    first = native._cuda()
    assert native._cuda() is first
    assert first.cublas is cublas
    assert first.gemm[np.dtype(np.complex64)] is not first.gemm[np.dtype(np.float64)]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [0, 1])
def test_gemm_and_syrk_reach_the_routine_of_their_dtype(cublas, dtype, lower):
    a = FakeGpuArray(np.asfortranarray(np.ones((3, 2), dtype)))
    b = FakeGpuArray(np.asfortranarray(np.ones((2, 4), dtype)))
    c = FakeGpuArray(np.asfortranarray(np.zeros((3, 4), dtype)))
    native.BACKEND._gpu_gemm(1.0, a, b, 0.0, c, 0, 0)
    name, args = cublas.calls[-1]
    assert name == native._PREFIX[np.dtype(dtype)] + "gemm"
    assert args[:6] == (7, 0, 0, 3, 4, 2)
    s = FakeGpuArray(np.asfortranarray(np.zeros((3, 3), dtype)))
    assert native.BACKEND._gpu_rank_k("syrk", 1.0, a, None, 0.0, s, 0, lower) is None
    name, args = cublas.calls[-1]
    assert name == native._PREFIX[np.dtype(dtype)] + "syrk"
    assert args[:5] == (7, LOWER if lower else UPPER, 0, 3, 2)


@pytest.mark.parametrize(
    ("kind", "alpha_dtype", "beta_dtype"),
    [("herk", np.float64, np.float64), ("her2k", np.complex128, np.float64), ("syr2k", np.complex128, np.complex128)],
)
def test_hermitian_routines_get_real_scalars(cublas, monkeypatch, kind, alpha_dtype, beta_dtype):
    """cuBLAS's zherk reads alpha and beta as doubles, zher2k beta only: the host scalars must
    be written in those dtypes (a complex128 written where a double is read gives its real part
    only by luck of the layout)."""
    seen = []
    ext = types.SimpleNamespace(available=lambda kind, prefix: True, call=lambda *args: seen.append(args))
    monkeypatch.setattr(native._cuda(), "ext", ext)
    a = FakeGpuArray(np.asfortranarray(np.ones((3, 2), np.complex128)))
    c = FakeGpuArray(np.asfortranarray(np.zeros((3, 3), np.complex128)))
    b = a if kind.endswith("2k") else None
    native.BACKEND._gpu_rank_k(kind, 0.5, a, b, 0.25, c, 0, 1)
    (args,) = seen
    assert args[:2] == (kind, "z")
    alpha_at, beta_at = args[7], args[-3]

    def value_at(address, dtype):
        buf, first, second = native._SCALARS.buffers[np.dtype(dtype)]
        assert address in (first, second), f"{kind}: a scalar is not in the {np.dtype(dtype)} buffer"
        return buf[0 if address == first else 1]

    assert value_at(alpha_at, alpha_dtype) == 0.5
    assert value_at(beta_at, beta_dtype) == 0.25
