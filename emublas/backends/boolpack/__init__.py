"""The ``boolpack`` backend (docs/design.md §6): bit planes over a Boolean AND + popcount leaf.

* :mod:`.backend` -- the adapter (options, readiness, NaN/Inf policy);
* :mod:`.planes` -- exact integer products through bit planes (``intmatmul``);
* :mod:`.quantize` -- BLAS gemm on float data quantized to ``bits`` bits;
* :mod:`.kernels_cpu`, :mod:`.kernels_gpu` -- the bindings of native/cpu/boolpack.c
  and native/cuda/boolpack.cu.
"""
