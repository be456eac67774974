"""Triangle operations on square Fortran-ordered results, for numpy and cupy.

The rank-k routines write one triangle and must leave the other exactly as it
was.  numpy works column by column (each column of a Fortran array is
contiguous, and nothing n×n is allocated); cupy uses one fused elementwise
kernel per operation instead of the several full-size temporaries that
``triu``/``tril`` arithmetic would make.  Its scaling keeps float32 subnormals:
cupy compiles every kernel with ``-ftz=true``, which would flush them to zero
where numpy and cuBLAS keep them.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ._float32 import PTX_CONVERSIONS

__all__ = ["fill", "scale", "copy", "real_diagonal"]


def _column_ranges(n: int, lower: int):
    """Row range of the referenced part of each column."""
    for j in range(n):
        yield j, (slice(j, n) if lower else slice(0, j + 1))


# float32 products through float64 and PTX conversions, which -ftz=true leaves alone (two floats'
# product is exact in float64: rounding it once is float32's own)
_IEEE_MUL = (
    PTX_CONVERSIONS
    + r"""
template <typename T> __device__ __forceinline__ T emb_mul(T a, T b) { return a * b; }
template <> __device__ __forceinline__ float emb_mul<float>(float a, float b)
{
    return emb_d2f(emb_f2d(a) * emb_f2d(b));
}
template <> __device__ __forceinline__ complex<float> emb_mul<complex<float> >(complex<float> a, complex<float> b)
{
    const double ar = emb_f2d(a.real()), ai = emb_f2d(a.imag()), br = emb_f2d(b.real()), bi = emb_f2d(b.imag());
    return complex<float>(emb_d2f(ar * br - ai * bi), emb_d2f(ar * bi + ai * br));
}
"""
)


@cache
def _kernel(op: str):
    import cupy

    body = {
        "fill": "if (ref) out[i] = value;",
        "scale": "if (ref) out[i] = emb_mul(out[i], value);",
        "copy": "if (ref) out[i] = src[i];",
        "realdiag": "if (row == col) out[i] = T(out[i].real());",
    }[op]
    return cupy.ElementwiseKernel(
        "raw T src, T value, int64 nrows, int32 lower",
        "raw T out",
        "const long long row = i % nrows, col = i / nrows;\n"
        "const bool ref = lower < 0 || (lower ? row >= col : row <= col);\n" + body,
        f"emublas_triangle_{op}",
        preamble=_IEEE_MUL if op == "scale" else "",
    )


def _gpu(op: str, out, lower: int, value=0, src=None) -> None:
    # 1-D views in memory order: a raw 2-D cupy array would be indexed in C order;
    # lower < 0: every entry (out need not be square then)
    assert out.flags.f_contiguous and (src is None or src.flags.f_contiguous)
    n = out.shape[0]
    flat = out.reshape(-1, order="F")
    flat_src = flat if src is None else src.reshape(-1, order="F")
    _kernel(op)(flat_src, out.dtype.type(value), n, int(lower), flat, size=out.size)


def fill(out, lower: int, value=0) -> None:
    """Set the referenced triangle (diagonal included) to ``value``.

    Parameters
    ----------
    out : array
        Square, Fortran-ordered numpy or cupy array, updated in place.
    lower : {0, 1}
        0: the upper triangle, 1: the lower.
    value : scalar, optional
    """
    if isinstance(out, np.ndarray):
        for j, rows in _column_ranges(out.shape[0], lower):
            out[rows, j] = value
    else:
        _gpu("fill", out, lower, value)


def scale(out, lower: int | None, factor) -> None:
    """Multiply the referenced triangle (diagonal included) by ``factor``.

    Parameters
    ----------
    out : array
        Square, Fortran-ordered numpy or cupy array, updated in place.
    lower : {0, 1} or None
        0: the upper triangle, 1: the lower, None: every entry (``out`` any
        Fortran-ordered matrix then).
    factor : scalar
    """
    if isinstance(out, np.ndarray):
        if lower is None:
            out *= factor
            return
        for j, rows in _column_ranges(out.shape[0], lower):
            out[rows, j] *= factor
    else:
        _gpu("scale", out, -1 if lower is None else lower, factor)


def copy(out, src, lower: int) -> None:
    """Copy the referenced triangle of ``src`` into ``out``; the rest of ``out`` stays.

    Parameters
    ----------
    out : array
        Square, Fortran-ordered numpy or cupy array, updated in place.
    src : array
        Same shape, dtype, layout and device as ``out``.
    lower : {0, 1}
        0: the upper triangle, 1: the lower.
    """
    if isinstance(out, np.ndarray):
        for j, rows in _column_ranges(out.shape[0], lower):
            out[rows, j] = src[rows, j]
    else:
        _gpu("copy", out, lower, 0, src)


def real_diagonal(out) -> None:
    """Zero the imaginary part of the diagonal (Hermitian results).

    Parameters
    ----------
    out : array
        Square complex, Fortran-ordered numpy or cupy array, updated in place.
    """
    if isinstance(out, np.ndarray):
        if out.flags.f_contiguous:  # the front's results: every n+1-th element of the transpose's rows
            diag = out.T.reshape(-1)[:: out.shape[0] + 1]  # a view (C-contiguous), cheaper than einsum's
        else:
            diag = np.einsum("ii->i", out)  # a writeable view of the diagonal
        diag.imag = 0
    else:
        _gpu("realdiag", out, 0)
