"""Elementwise steps on float32 data that keep subnormals on cupy arrays too.

cupy compiles every kernel with ``-ftz=true``, after the caller's options, so its
float32 arithmetic and its conversions to and from float32 flush subnormal inputs
and results to zero, where numpy keeps them.  A factor prepared on the GPU would
then differ from the data, silently.  These helpers do the few elementwise steps
the routines need (a power-of-two scaling, the conjugate, a unit factor, the range
of magnitudes) with the same values on numpy and cupy: float32 goes through PTX
conversions (which the flag leaves alone) to float64, where the arithmetic is exact
or rounded once, and float64 data use the plain operations.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ._arrays import is_cupy

__all__ = ["PTX_CONVERSIONS", "ldexp", "conj", "unit_times", "magnitude_range"]

#: CUDA source of ``emb_f2d``/``emb_d2f`` (float ⇄ double as the IEEE conversions) and
#: ``emb_neg`` (the sign flipped), for a kernel's preamble.
PTX_CONVERSIONS = r"""
__device__ __forceinline__ double emb_f2d(float x)
{
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float emb_d2f(double x)
{
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}
__device__ __forceinline__ float emb_neg(float x) { return __int_as_float(__float_as_int(x) ^ (int)0x80000000u); }
"""


@cache
def _kernel(name: str):
    import cupy

    params, out, body = {
        "widen": ("float32 x", "float64 y", "y = emb_f2d(x)"),
        "narrow": ("float64 x", "float32 y", "y = emb_d2f(x)"),
        "ldexp": ("float32 x, int32 t", "float32 y", "y = emb_d2f(ldexp(emb_f2d(x), t))"),
        "conj": ("complex64 x", "complex64 y", "y = complex<float>(x.real(), emb_neg(x.imag()))"),
    }[name]
    return cupy.ElementwiseKernel(params, out, body, f"emublas_float32_{name}", preamble=PTX_CONVERSIONS)


def _cupy32(x) -> bool:
    return is_cupy(x) and x.dtype in (np.float32, np.complex64)


def _widen(x):
    """A float32 array as float64, exactly (subnormals included)."""
    return _kernel("widen")(x) if is_cupy(x) else x.astype(np.float64)


def _narrow(x):
    """A float64 array rounded once to float32 (subnormal results included)."""
    return _kernel("narrow")(x) if is_cupy(x) else x.astype(np.float32)


def ldexp(x, t: int):
    """``x·2^t`` elementwise, real or complex, exact unless the result leaves the range
    (then rounded once, as ``numpy.ldexp``).

    Parameters
    ----------
    x : numpy.ndarray or cupy.ndarray
        float32, float64, complex64 or complex128 data.
    t : int
        The power of two.

    Returns
    -------
    array
        A new array of ``x``'s dtype and device.
    """
    if x.dtype.kind == "c":
        out = x.copy()
        out.real = ldexp(x.real, t)
        out.imag = ldexp(x.imag, t)
        return out
    if _cupy32(x):
        return _kernel("ldexp")(x, np.int32(t))
    if is_cupy(x):
        import cupy

        return cupy.ldexp(x, t)
    return np.ldexp(x, t)


def conj(x):
    """The complex conjugate (a sign flip of the imaginary parts, exact).

    Parameters
    ----------
    x : numpy.ndarray or cupy.ndarray

    Returns
    -------
    array
        A new array; real input is returned as it is.
    """
    if x.dtype.kind != "c":
        return x
    if _cupy32(x):
        return _kernel("conj")(x)
    return x.conj()


def unit_times(u: complex, x):
    """``u·x`` for a complex scalar ``u`` and complex data ``x``.

    complex64 data: both parts in float64 (each product and sum rounded there, as
    separate operations, so numpy and cupy agree), then rounded once to float32.

    Parameters
    ----------
    u : complex
    x : numpy.ndarray or cupy.ndarray
        complex64 or complex128.

    Returns
    -------
    array
        A new array of ``x``'s dtype and device.
    """
    if x.dtype != np.complex64:
        return u * x
    xr, xi = _widen(x.real), _widen(x.imag)
    re = xr * u.real
    re -= xi * u.imag
    im = xr * u.imag
    im += xi * u.real
    out = x.copy()
    out.real = _narrow(re)
    out.imag = _narrow(im)
    return out


def magnitude_range(x) -> tuple[float, float, bool]:
    """Largest and smallest positive magnitude of the parts of ``x`` (real and imaginary
    parts apart), read from their bits, so that no float operation flushes them.

    Parameters
    ----------
    x : numpy.ndarray or cupy.ndarray

    Returns
    -------
    tuple
        ``(largest, smallest positive, finite)``: 0.0 for both where every part is
        zero; ``finite`` False where a part is NaN or Inf.
    """
    parts = (x.real, x.imag) if x.dtype.kind == "c" else (x,)
    real = parts[0].dtype
    ints, mask, inf = (np.int32, 0x7FFFFFFF, 0x7F800000) if real == np.float32 else (np.int64, 2**63 - 1, 0x7FF << 52)
    hi, lo = 0, 0
    for p in parts:
        if p.size == 0:
            continue
        bits = p.view(ints) & ints(mask)
        top = int(bits.max())
        hi = max(hi, top)
        pos = bits[bits > 0]
        if pos.size:
            low = int(pos.min())
            lo = low if lo == 0 else min(lo, low)
    as_float = np.array([hi, lo], ints).view(real)
    return float(as_float[0]), float(as_float[1]), hi < inf
