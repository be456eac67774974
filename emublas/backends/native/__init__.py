"""The ``native`` backend: the platform BLAS (scipy's for numpy arrays, cuBLAS for cupy arrays).

``backend``
    The adapter, the reference every other backend is tested against; its
    cuBLAS calls beyond cupy's wrappers go through :mod:`emublas._kernels.cublas_ext`.
"""
