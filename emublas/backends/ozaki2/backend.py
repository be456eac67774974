"""The ``ozaki2`` backend: Ozaki scheme II on int8 products (docs/design.md §2–4).

numpy arrays run on the C kernels of :mod:`.kernels_cpu`; cupy arrays
on cuBLAS int8 GEMMs and the CUDA kernels of ``native/cuda/ozaki2.cu``
(:mod:`emublas.ozaki2.gpu_engine`), with the same moduli, scaling and CRT, so
both give the same results.
"""

from __future__ import annotations

from ..._kernels import cpu
from ..base import Backend, Option, choice, device_list, int_range, parse_bits


class Ozaki2Backend(Backend):
    """Ozaki-II: real GEMM, 2M complex GEMM (hybrid 3M past 22 moduli), rank-k paths."""

    name = "ozaki2"
    description = "Ozaki scheme II: exact int8 GEMMs modulo small moduli, CRT; complex via 2M"
    # fallback=none: the scheme's own error against the moduli (the default fallback=dot recomputes
    # what the certificate cannot vouch for, so its error never exceeds native's)
    sweep_grid = {"moduli": tuple(range(6, 23, 2)), "mode": ("accurate",), "fallback": ("none",)}
    sweep_quick_grid = {"moduli": tuple(range(8, 23, 2)), "mode": ("accurate",), "fallback": ("none",)}
    sweep_quick_rank_k_grid = {"moduli": (8, 16), "mode": ("accurate",), "fallback": ("none",)}
    handles_nonfinite = True  # NaN/Inf rows and columns from a float product (emublas.ozaki2.routines)

    def __init__(self):
        from .moduli import HYBRID_EXTRA, REAL_MODULI, TWO_M_MODULI

        max_real, max_hybrid = len(REAL_MODULI), len(TWO_M_MODULI) + len(HYBRID_EXTRA)

        self.options = {
            "moduli": Option(
                "moduli",
                "default",
                int_range(1, max(max_real, max_hybrid), also=("default",)),
                "number of moduli (default: 16 for float64/complex128 data, 8 for float32/complex64;"
                " with mode=auto, the largest count auto may pick)",
                env="EMUBLAS_MODULI",
            ),
            "mode": Option(
                "mode",
                "accurate",
                choice("fast", "accurate", "auto"),
                "scaling bound: fast (Cauchy-Schwarz), accurate (one extra int8 product),"
                " auto (accurate, and the moduli count chosen from the inputs)",
                env="EMUBLAS_OZAKI_MODE",
            ),
            "fallback": Option(
                "fallback",
                "dot",
                choice("dot", "none"),
                "entries the accuracy certificate does not cover: recomputed as float64 dot"
                " products (dot), or left as computed (none); either way a warning says how many",
                env="EMUBLAS_OZAKI_FALLBACK",
            ),
            "bits": Option(
                "bits",
                None,
                parse_bits,
                "what the certificate checks each entry against: native BLAS's error bound (none), or"
                " N correct bits relative to sum|a||b|; mode=auto sizes the moduli count for it",
                env="EMUBLAS_OZAKI_BITS",
            ),
            "devices": Option(
                "devices",
                None,
                device_list,
                "GPUs that share one call on cupy arrays: current (default), all, or ids like 0,1"
                " (the arrays stay on their own device; results are bit-identical)",
                env="EMUBLAS_DEVICES",
            ),
            "split": Option(
                "split",
                "auto",
                choice("auto", "moduli", "tiles"),
                "how several GPUs share a call: by moduli, by column tiles of C, or auto (fewer bytes between devices)",
                env="EMUBLAS_MULTI_GPU_SPLIT",
            ),
            "graphs": Option(
                "graphs",
                "auto",
                choice("auto", "off"),
                "small calls on cupy arrays: from a signature's second call on, replayed as a CUDA graph"
                " captured once (auto; bit-identical, see emublas.backends.ozaki2.graphs), or always issued"
                " kernel by kernel (off)",
                env="EMUBLAS_OZAKI2_GRAPHS",
            ),
        }

    def device_readiness(self, device):
        if device == "gpu":
            return _gpu_state()
        if cpu.available():
            feats = [k for k, v in cpu.features().items() if v]
            return (True, "C kernels built" + (f" ({', '.join(feats)})" if feats else " (portable C)"))
        return (False, f"C extension not built: {cpu.load_error()}")

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts):
        from . import routines

        routines.gemm(alpha, a, b, beta, c, trans_a, trans_b, **opts)

    def _rank(self, kind, alpha, a, b, beta, c, trans, lower, opts):
        from . import routines

        return routines.rank_k(kind, alpha, a, b, beta, c, trans, lower, **opts)

    def syrk(self, alpha, a, beta, c, trans, lower, **opts):
        return self._rank("syrk", alpha, a, None, beta, c, trans, lower, opts)

    def herk(self, alpha, a, beta, c, trans, lower, **opts):
        return self._rank("herk", alpha, a, None, beta, c, trans, lower, opts)

    def syr2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return self._rank("syr2k", alpha, a, b, beta, c, trans, lower, opts)

    def her2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return self._rank("her2k", alpha, a, b, beta, c, trans, lower, opts)

    def intmatmul(self, a, b, **opts):
        from .integer import intmatmul

        return intmatmul(a, b)

    def last_run(self) -> dict | None:
        """Moduli, mode, bits and phase times of this thread's last ozaki2 call.

        Returns
        -------
        dict or None
            The record of :func:`.routines.last_run`; None before the first call.
        """
        from .routines import last_run

        return last_run()

    def dask_gemm(self, alpha, x, y, beta, c, *, conj_x, conj_y, dtype, **opts):
        """A whole Dask gemm: exact residues summed over the k-blocks, one CRT per output block.

        The result is the single-process one bit for bit (:mod:`.distributed`).
        ``moduli``, ``mode``, ``fallback`` and ``bits`` apply; ``devices``/``split`` do not
        (each block runs on the device that holds it).

        Parameters
        ----------
        alpha, beta, x, y, c, conj_x, conj_y, dtype
            As in :meth:`emublas.backends.base.Backend.dask_gemm`.
        **opts
            The ozaki2 options, resolved on the client.

        Returns
        -------
        dask.array.Array
            The lazy m × n result.
        """
        from . import distributed

        return distributed.gemm(
            alpha,
            x,
            y,
            beta,
            c,
            conj_x=conj_x,
            conj_y=conj_y,
            dtype=dtype,
            moduli=opts.get("moduli", "default"),
            mode=opts.get("mode", "accurate"),
            fallback=opts.get("fallback", "dot"),
            bits=opts.get("bits"),
        )


def _gpu_state() -> tuple[bool, str]:
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no cupy, no driver, no device
        return False, f"cupy/GPU not usable: {type(exc).__name__}: {exc}".splitlines()[0]
    if not count:
        return False, "cupy found, no GPU"
    try:
        from ..._kernels.cuda_source import source_path

        source_path("ozaki2.cu")
    except FileNotFoundError as exc:
        return False, str(exc)
    return True, f"cuBLAS int8 GEMM + CUDA kernels on {count} GPU(s) (compiled on first use)"


BACKEND = Ozaki2Backend()
