"""The ``boolpack`` backend: bit planes over an AND + popcount leaf (docs/design.md §6).

* ``intmatmul``: exact int64 products of bool/integer arrays; 0/1 data takes
  one packed Boolean product, wider integers go through bit planes.
* BLAS ``gemm`` on float data: quantized to ``bits`` bits per row/column
  (accuracy knob, not exact); NaN/Inf raise unless ``nonfinite="native"``.
  Rank-k routines are derived from gemm by the front.

numpy arrays run on the C kernels (:mod:`.kernels_cpu`),
cupy arrays on the CUDA kernels (:mod:`.kernels_gpu`).

Default ``bits`` = 16: on the benchmark's n=2048 CPU sweep (BENCHMARKS.md,
boolpack) the time grows about as bits² (one Boolean product per pair of
planes) while the relative error falls as 2^-bits; 16 bits gives about
1e-5 relative error -- float32-class results on well-scaled data -- at a
cost still below float64 Ozaki-II on this CPU only for narrower widths, so
lower ``bits`` is the way to trade accuracy for speed.
"""

from __future__ import annotations

from ..._arrays import is_cupy
from ..._kernels import cpu
from ..base import Backend, Option, choice, int_range

_MIN_BITS, _MAX_BITS = 2, 24


def _cupy_state() -> tuple[bool, str]:
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, or no driver/device
        return False, f"cupy or a CUDA device is not available: {type(exc).__name__}: {exc}"
    if n == 0:
        return False, "cupy sees no CUDA device"
    return True, "cupy with a CUDA device (kernels compiled on first use)"


class BoolpackBackend(Backend):
    """Boolean AND + popcount products: exact integer products, quantized float gemm."""

    name = "boolpack"
    description = "bit planes over AND+popcount (AVX-512 VPOPCNTDQ / binary tensor cores); floats quantized"
    sweep_grid = {"bits": (4, 8, 12, 16, 20, 24)}
    sweep_quick_grid = {"bits": (4, 8, 12, 16)}
    handles_nonfinite = True  # raises, or computes the call natively (nonfinite="native")
    quantizes_floats = True

    def __init__(self):
        self.options = {
            "bits": Option(
                "bits",
                16,
                int_range(_MIN_BITS, _MAX_BITS),
                "bits (sign included) each float input is rounded to, per row/column scale;"
                " the error falls about 2x per bit, the time grows about as bits^2",
                env="EMUBLAS_BOOLPACK_BITS",
            ),
            "nonfinite": Option(
                "nonfinite",
                "raise",
                choice("raise", "native"),
                "NaN/Inf in float input: raise ValueError, or compute that call natively",
                env="EMUBLAS_BOOLPACK_NONFINITE",
            ),
        }

    def device_readiness(self, device):
        if device == "gpu":
            return _cupy_state()
        if cpu.available():
            from . import kernels_cpu

            return (True, f"C kernels built ({kernels_cpu.kernel_name()})")
        return (False, f"C extension not built: {cpu.load_error()}")

    def _leaf(self, x):
        if is_cupy(x):
            from . import kernels_gpu

            return kernels_gpu.GpuLeaf()
        from .planes import CpuLeaf

        return CpuLeaf()

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, bits=16, nonfinite="raise", **opts):
        from ..._arrays import namespace
        from . import quantize

        xp = namespace(a=a, b=b, c=c)
        if not (bool(xp.isfinite(a).all()) and bool(xp.isfinite(b).all())):
            if nonfinite == "native":
                from ..native.backend import BACKEND as NATIVE

                NATIVE.gemm(alpha, a, b, beta, c, trans_a, trans_b)
                return
            raise ValueError(
                "boolpack gemm: a or b holds NaN or Inf, which quantization to integers"
                " cannot represent; pass nonfinite='native' (or set"
                " EMUBLAS_BOOLPACK_NONFINITE=native) to compute such calls natively"
            )
        quantize.gemm(alpha, a, b, beta, c, trans_a, trans_b, bits=int(bits), leaf=self._leaf(c))

    def intmatmul(self, a, b, **opts):
        from .planes import intmatmul

        return intmatmul(a, b)


BACKEND = BoolpackBackend()
