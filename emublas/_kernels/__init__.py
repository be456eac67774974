"""The thin Python side of emublas's native code.

``cpu``
    Loader and wrappers for the C extension ``emublas._kernels._cpu`` (built
    from ``native/cpu`` by cffi): CPU feature query and the int8 x int8 ->
    int32 GEMM leaf.  Importing it never fails; ``cpu.available()`` says
    whether the extension could be loaded.
"""
