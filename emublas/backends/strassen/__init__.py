"""The ``strassen`` backend: Strassen–Winograd with 7-write chaining over the native GEMM.

``backend``
    The adapter (options, crossovers, the NaN/Inf and overflow guards).
``driver``
    The recursion and its record of the last call (:func:`last_run`).
``kernels_cpu``, ``kernels_gpu``
    The bindings of the C driver (native/cpu/strassen.c) and of the fused CUDA
    kernels (native/cuda/strassen.cu).
"""

from .driver import last_run

__all__ = ["last_run"]
