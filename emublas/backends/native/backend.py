"""The ``native`` backend: the platform BLAS, the reference for every other backend.

numpy arrays go to scipy's BLAS (OpenBLAS, MKL, ... whatever scipy was built
with); cupy arrays go to cuBLAS on cupy's handle and current stream.  cupy
wraps only gemm and syrk at the level we need, so herk, syr2k and her2k on the
GPU are derived from cuBLAS gemm by the front.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import scipy.linalg.blas as fblas

from ..._arrays import is_cupy
from ..base import Backend
from ..integer_bound import product_bound

_INT_MAX = 2**31 - 1  # LP64 BLAS and the 32-bit cuBLAS API take int dimensions
_PREFIX = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}


def _rows_of_op(x, trans: int, sl: slice):
    """Rows ``sl`` of op(x), as a view of x."""
    return x[sl, :] if trans == 0 else x[:, sl]


def _cols_of_op(x, trans: int, sl: slice):
    """Columns ``sl`` of op(x), as a view of x."""
    return x[:, sl] if trans == 0 else x[sl, :]


# ---------------------------------------------------------------------------
# CPU: scipy.linalg.blas
# ---------------------------------------------------------------------------


def _cpu_operand(x, trans: int):
    """Hand f2py a Fortran-contiguous operand where a flipped transpose gives one for free."""
    if not x.flags.f_contiguous and x.flags.c_contiguous and trans in (0, 1):
        return x.T, 1 - trans
    return x, trans


def _fblas(name: str):
    """scipy's own BLAS routine, also while the interpose shim has replaced it (its
    replacements keep the original as ``__wrapped__``): native must never route back.
    Kept per name: the original never changes, and the lookup of a missing
    ``__wrapped__`` costs a microsecond per call."""
    fn = _ORIGINAL.get(name)
    if fn is None:
        fn = getattr(fblas, name)
        fn = _ORIGINAL[name] = getattr(fn, "__wrapped__", fn)
    return fn


_ORIGINAL: dict[str, Any] = {}


def _cpu_call(fn, alpha, a, b, beta, c, trans: int, lower: int) -> None:
    """scipy's rank-k routine ``fn`` into ``c`` (``b`` None for syrk and herk).

    Positional: f2py parses keywords about 0.3 us slower per call, and scipy's order
    (``alpha, a, [b,] beta, c, trans, lower, overwrite_c``) is the BLAS one.
    """
    if b is None:
        result = fn(alpha, a, beta, c, trans, lower, 1)
    else:
        result = fn(alpha, a, b, beta, c, trans, lower, 1)
    if result is not c:  # only when f2py had to copy c; the front prevents that
        c[...] = result


# ---------------------------------------------------------------------------
# GPU: cuBLAS through cupy's handle
# ---------------------------------------------------------------------------


def _gpu_layout(x):
    """``(order, ld)`` if cuBLAS can read ``x`` in place, else None."""
    rows, cols = x.shape
    it = x.itemsize
    s0, s1 = x.strides
    if (rows <= 1 or s0 == it) and s1 > 0 and s1 % it == 0:
        ld = s1 // it if cols > 1 else max(1, rows)
        if ld >= max(1, rows):
            return "F", ld
    if (cols <= 1 or s1 == it) and s0 > 0 and s0 % it == 0:
        ld = s0 // it if rows > 1 else max(1, cols)
        if ld >= max(1, cols):
            return "C", ld
    return None


def _gpu_operand(x, trans: int, flip_ok: bool = True):
    """``(array, trans, ld)`` for cuBLAS: in place when the layout allows, else a Fortran copy."""
    layout = _gpu_layout(x)
    if layout is not None:
        order, ld = layout
        if order == "F":
            return x, trans, ld
        if flip_ok and trans in (0, 1):
            return x.T, 1 - trans, ld
    x = x.copy(order="F")
    return x, trans, max(1, x.shape[0])


class _Cuda:
    """What every cuBLAS call of this backend uses, bound on the first GPU call (a numpy-only
    program never imports cupy): a small call is all host time, and an ``import`` statement
    in a function, even of a loaded module, costs a fraction of a microsecond per call."""

    def __init__(self):
        import cupy
        from cupy_backends.cuda.libs import cublas

        from ..._kernels import cublas_ext

        self.cupy = cupy
        self.cublas = cublas
        self.ext = cublas_ext
        self.get_handle = cupy.cuda.device.get_cublas_handle
        self.get_stream = cupy.cuda.get_current_stream
        self.host_mode = cublas.CUBLAS_POINTER_MODE_HOST
        self.lower = cublas.CUBLAS_FILL_MODE_LOWER
        self.upper = cublas.CUBLAS_FILL_MODE_UPPER
        self.gemm = {dt: getattr(cublas, p + "gemm") for dt, p in _PREFIX.items()}
        self.syrk = {dt: getattr(cublas, p + "syrk") for dt, p in _PREFIX.items()}


_CUDA: _Cuda | None = None  # hot paths read ``_CUDA or _cuda()``: one global load once bound


def _cuda() -> _Cuda:
    global _CUDA
    if _CUDA is None:
        _CUDA = _Cuda()
    return _CUDA


class _CublasCall:
    """cupy's cuBLAS handle on the current stream in host pointer mode; a mode the handle had
    before is restored afterwards (cupy's own is host mode, so the common call sets none)."""

    __slots__ = ("cuda", "handle", "mode")

    def __enter__(self) -> _Cuda:
        cuda = self.cuda = _CUDA or _cuda()
        cublas = cuda.cublas
        handle = self.handle = cuda.get_handle()
        cublas.setStream(handle, cuda.get_stream().ptr)
        mode = self.mode = cublas.getPointerMode(handle)
        if mode != cuda.host_mode:
            cublas.setPointerMode(handle, cuda.host_mode)
        return cuda

    def __exit__(self, *exc):
        if self.mode != self.cuda.host_mode:
            self.cuda.cublas.setPointerMode(self.handle, self.mode)
        return False


def _cupy():
    return _cuda().cupy


_REAL = {  # a dtype's real part, as cuBLAS's herk/her2k take alpha and beta
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
    np.dtype(np.complex64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.float64),
}


class _HostScalars(threading.local):
    """alpha and beta in host memory for cuBLAS's host pointer mode, which reads them before
    the call returns: one two-slot buffer per dtype and thread, its addresses taken once
    (numpy's ``ctypes.data`` builds an object per access)."""

    def __init__(self):
        self.buffers: dict[np.dtype, tuple[np.ndarray, int, int]] = {}

    def addresses(self, alpha, alpha_dtype, beta, beta_dtype) -> tuple[int, int]:
        return self._put(0, alpha, alpha_dtype), self._put(1, beta, beta_dtype)

    def _put(self, slot: int, value, dtype) -> int:
        entry = self.buffers.get(dtype)
        if entry is None:
            buf = np.zeros(2, dtype=dtype)
            address = buf.ctypes.data
            entry = self.buffers[dtype] = (buf, address, address + buf.itemsize)
        buf, first, second = entry
        buf[slot] = value
        return second if slot else first


_SCALARS = _HostScalars()


# ---------------------------------------------------------------------------
# the backend
# ---------------------------------------------------------------------------


class NativeBackend(Backend):
    """scipy's BLAS on numpy arrays, cuBLAS on cupy arrays."""

    name = "native"
    description = "the platform BLAS: scipy.linalg.blas on the CPU, cuBLAS through cupy on the GPU"
    options = {}
    sweep_grid = {}  # no knobs: one configuration, the reference of every sweep group
    handles_nonfinite = True  # the platform BLAS's pattern is, by definition, its own
    native_level3 = True
    ignores_c_when_beta_zero = True  # scipy's BLAS and cuBLAS do not read c when beta == 0

    def device_readiness(self, device):
        if device == "cpu":
            import scipy

            return (True, f"scipy {scipy.__version__} BLAS")
        try:
            import cupy

            count = cupy.cuda.runtime.getDeviceCount()
            return (count > 0, f"cupy {cupy.__version__}, {count} GPU(s)" if count else "cupy found, no GPU")
        except Exception as exc:  # ImportError, CUDA driver errors: report, don't fail
            return (False, f"cupy/GPU not usable: {type(exc).__name__}: {exc}".splitlines()[0])

    def ready(self, device: str) -> bool:
        return device == "cpu" or self.device_readiness(device)[0]  # scipy is a hard dependency

    def check(self, device: str) -> None:
        if device == "cpu" or self._gpu_checked:
            return  # scipy is a hard dependency; a process's GPUs stay usable once they were
        super().check(device)
        self._gpu_checked = True

    _gpu_checked = False

    # -- gemm ------------------------------------------------------------------
    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts) -> None:
        m, n = c.shape
        k = a.shape[0] if trans_a else a.shape[1]
        # Split dimensions beyond the 32-bit BLAS interface; each piece is a plain call.
        if k > _INT_MAX:
            for i, start in enumerate(range(0, k, _INT_MAX)):
                sl = slice(start, start + _INT_MAX)
                self.gemm(
                    alpha,
                    _cols_of_op(a, trans_a, sl),
                    _rows_of_op(b, trans_b, sl),
                    beta if i == 0 else 1.0,
                    c,
                    trans_a,
                    trans_b,
                )
            return
        if m > _INT_MAX or n > _INT_MAX:
            half = slice(0, (m + 1) // 2) if m > _INT_MAX else slice(0, (n + 1) // 2)
            rest = slice(half.stop, None)
            for sl in (half, rest):
                if m > _INT_MAX:
                    self.gemm(alpha, _rows_of_op(a, trans_a, sl), b, beta, c[sl, :], trans_a, trans_b)
                else:
                    self.gemm(alpha, a, _cols_of_op(b, trans_b, sl), beta, c[:, sl], trans_a, trans_b)
            return
        if is_cupy(c):
            self._gpu_gemm(alpha, a, b, beta, c, trans_a, trans_b)
            return
        fn = _fblas(_PREFIX[c.dtype] + "gemm")
        a, trans_a = _cpu_operand(a, trans_a)
        b, trans_b = _cpu_operand(b, trans_b)
        # positional, in scipy's order (alpha, a, b, beta, c, trans_a, trans_b, overwrite_c):
        # f2py parses keywords about 0.3 us slower per call
        result = fn(alpha, a, b, beta, c, trans_a, trans_b, 1)
        if result is not c:
            c[...] = result

    def _gpu_gemm(self, alpha, a, b, beta, c, trans_a, trans_b) -> None:
        m, n = c.shape
        k = a.shape[0] if trans_a else a.shape[1]
        layout = _gpu_layout(c)
        if layout is None or layout[0] != "F":  # a piece of a split call: go through a temporary
            tmp = c.copy(order="F")
            self._gpu_gemm(alpha, a, b, beta, tmp, trans_a, trans_b)
            c[...] = tmp
            return
        ldc = layout[1]
        a, trans_a, lda = _gpu_operand(a, trans_a)
        b, trans_b, ldb = _gpu_operand(b, trans_b)
        al, be = _SCALARS.addresses(alpha, c.dtype, beta, c.dtype)
        call = _CublasCall()
        with call as cuda:
            cuda.gemm[c.dtype](
                call.handle,
                trans_a,
                trans_b,
                m,
                n,
                k,
                al,
                a.data.ptr,
                lda,
                b.data.ptr,
                ldb,
                be,
                c.data.ptr,
                ldc,
            )

    # -- rank-k ------------------------------------------------------------------
    def _gpu_rank_k(self, kind, alpha, a, b, beta, c, trans, lower):
        """cuBLAS syrk (through cupy) or herk/syr2k/her2k (through ctypes) into ``c``."""
        ext = (_CUDA or _cuda()).ext
        prefix = _PREFIX[c.dtype]
        if kind != "syrk" and not ext.available(kind, prefix):
            return NotImplemented  # the front derives it from gemm
        n = c.shape[0]
        k = a.shape[0] if trans else a.shape[1]
        herm = kind in ("herk", "her2k")
        if b is None:
            a, trans, lda = _gpu_operand(a, trans, flip_ok=not herm)
        else:
            # one trans code serves both operands: flip both (free for C-ordered pairs) or neither
            if not herm and trans in (0, 1) and all((_gpu_layout(x) or ("",))[0] == "C" for x in (a, b)):
                a, b, trans = a.T, b.T, 1 - trans
            a, trans, lda = _gpu_operand(a, trans, flip_ok=False)
            b, _, ldb = _gpu_operand(b, trans, flip_ok=False)
        real_dt = _REAL[c.dtype]
        al, be = _SCALARS.addresses(alpha, real_dt if kind == "herk" else c.dtype, beta, real_dt if herm else c.dtype)
        call = _CublasCall()
        with call as cuda:
            head = (call.handle, cuda.lower if lower else cuda.upper, trans, n, k, al, a.data.ptr, lda)
            tail = (be, c.data.ptr, max(1, n))
            if kind == "syrk":
                cuda.syrk[c.dtype](*head, *tail)
            elif b is None:
                ext.call(kind, prefix, *head, *tail)
            else:
                ext.call(kind, prefix, *head, b.data.ptr, ldb, *tail)
        return None

    def _rank_k(self, kind, alpha, a, b, beta, c, trans, lower):
        if max(a.shape) > _INT_MAX:
            return NotImplemented  # the front derives it from gemm, which splits
        if is_cupy(c):
            return self._gpu_rank_k(kind, alpha, a, b, beta, c, trans, lower)
        fn = _fblas(_PREFIX[c.dtype] + kind)
        if (
            kind.startswith("sy")
            and trans in (0, 1)
            and all(x.flags.c_contiguous and not x.flags.f_contiguous for x in (a, b) if x is not None)
        ):
            a, b, trans = a.T, (None if b is None else b.T), 1 - trans  # free transposes for f2py
        _cpu_call(fn, alpha, a, b, beta, c, trans, lower)
        return None

    def syrk(self, alpha, a, beta, c, trans, lower, **opts):
        return self._rank_k("syrk", alpha, a, None, beta, c, trans, lower)

    def herk(self, alpha, a, beta, c, trans, lower, **opts):
        return self._rank_k("herk", alpha, a, None, beta, c, trans, lower)

    def syr2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return self._rank_k("syr2k", alpha, a, b, beta, c, trans, lower)

    def her2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return self._rank_k("her2k", alpha, a, b, beta, c, trans, lower)

    # -- exact integers ------------------------------------------------------------
    def intmatmul(self, a, b, **opts):
        if product_bound(a, b) <= 2**63 - 1:
            return a.astype(np.int64) @ b.astype(np.int64)  # no entry can wrap
        if is_cupy(a):  # exact big-integer products exist only on the host
            return _cupy().asarray(self.intmatmul(a.get(), b.get()))
        exact = a.astype(object) @ b.astype(object)
        if exact.size and (exact.max() > 2**63 - 1 or exact.min() < -(2**63)):
            raise OverflowError("intmatmul: the exact product does not fit int64")
        return exact.astype(np.int64)


BACKEND = NativeBackend()
