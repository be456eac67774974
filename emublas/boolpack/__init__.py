"""The boolpack engine (docs/design.md §6): bit planes over a Boolean AND + popcount leaf.

* :mod:`.planes` -- exact integer products through bit planes (``intmatmul``);
* :mod:`.quantize` -- BLAS gemm on float data quantized to ``bits`` bits.
"""
