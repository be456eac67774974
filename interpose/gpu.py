"""cupy entry points of the interpose shim.

cupy is not imported by the shim: if it is already imported when the shim is
installed its entry points are swapped at once, otherwise the import hook
(:mod:`.import_hook`) swaps them right after the program imports cupy (so a
scipy-only program pays no CUDA start-up cost).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import policy, swapping
from .import_hook import AfterImport

__all__ = ["not_swapped", "replacements", "disarm"]

_FLOATS = "fdFD"
_PREFIXES = {"f": "s", "d": "d", "F": "c", "D": "z"}
_TRANS = {"N": 0, "n": 0, "T": 1, "t": 1, "H": 2, "h": 2, "C": 2, "c": 2, 0: 0, 1: 1, 2: 2}
#: ndarray methods cupy does not let us replace (a C extension type), for stats()/docs
not_swapped: list[str] = []
# cupy.dot calls ndarray.dot, cupy.matmul may call __matmul__: one user call is routed
# (and counted) once; calls made from inside a routed call go straight to the originals
_inside = threading.local()


def _dispatch(name: str, dims, dtype, native: Callable, emulate: Callable):
    """Route one call: the original (``native()``) or emublas (``emulate()``), and record it."""
    t0 = time.perf_counter()
    backend, opts, usable = policy.selection("gpu")
    prefix = _PREFIXES.get(getattr(dtype, "char", None)) if dims is not None else None
    routine = "syrk" if name.endswith("syrk") else "gemm"  # every other routed call is a product
    why = policy.fallthrough_reason(backend, usable, dims, routine, prefix, "gpu", opts)
    result = native() if why else emulate()  # errors inside emulation propagate
    policy.record(name, dims or (), dtype, not why, why, time.perf_counter() - t0, backend, opts)
    return result


def _plain_pair(a, b, out, kwargs) -> bool:
    import cupy

    return (
        isinstance(a, cupy.ndarray)
        and isinstance(b, cupy.ndarray)
        and a.ndim == 2
        and b.ndim == 2
        and a.dtype == b.dtype
        and a.dtype.char in _FLOATS
        and out is None
        and not kwargs
        and a.shape[1] == b.shape[0]
    )


def _product(name: str, original: Callable) -> Callable:
    """matmul / dot: 2-D float products of one dtype go to emublas.gemm."""

    @functools.wraps(original)
    def emulated(a, b, out=None, **kwargs):
        if getattr(_inside, "active", False):
            return original(a, b, out=out, **kwargs) if out is not None else original(a, b, **kwargs)
        _inside.active = True
        try:
            return _route(a, b, out, kwargs)
        finally:
            _inside.active = False

    def _route(a, b, out, kwargs):
        import cupy

        import emublas

        dims = (a.shape[0], b.shape[1], a.shape[1]) if _plain_pair(a, b, out, kwargs) else None
        return _dispatch(
            name,
            dims,
            getattr(a, "dtype", np.float64),
            lambda: original(a, b, out=out, **kwargs) if out is not None else original(a, b, **kwargs),
            lambda: cupy.ascontiguousarray(emublas.gemm(1.0, a, b)),
        )  # cupy returns C order

    emulated.__doc__ = f"emublas interpose: cupy.{name} routed to the selected emublas backend.\n\n" + (
        getattr(original, "__doc__", None) or ""
    )
    return emulated


def _method(name: str, original: Callable, reflected: bool = False) -> Callable:
    """``__matmul__``/``__rmatmul__``/``dot`` with the original's signature."""
    product = _product(name, lambda a, b, **kw: original(b, a) if reflected else original(a, b))

    if name == "dot":

        @functools.wraps(original)
        def dot(self, b, out=None):
            return original(self, b, out) if out is not None else product(self, b)

        return dot

    @functools.wraps(original)
    def method(self, other):
        return product(other, self) if reflected else product(self, other)

    return method


def _cublas_gemm(original: Callable) -> Callable:
    @functools.wraps(original)
    def gemm(transa, transb, a, b, out=None, alpha=1.0, beta=0.0):
        import emublas

        ta, tb = _TRANS.get(transa), _TRANS.get(transb)
        ok = (
            ta is not None
            and tb is not None
            and a.ndim == 2
            and b.ndim == 2
            and a.dtype == b.dtype
            and a.dtype.char in _FLOATS
            and np.isscalar(alpha)
            and np.isscalar(beta)
        )
        dims = None
        if ok:
            m, k = a.shape[::-1] if ta else a.shape
            kb, n = b.shape[::-1] if tb else b.shape
            dims = (m, n, k) if k == kb and (out is None or out.shape == (m, n)) else None

        def emulate():
            result = emublas.gemm(alpha, a, b, beta if out is not None else 0.0, out, ta, tb, overwrite_c=1)
            if out is not None and result is not out:
                out[...] = result
                return out
            return result

        return _dispatch(
            "cublas.gemm",
            dims,
            a.dtype,
            lambda: original(transa, transb, a, b, out=out, alpha=alpha, beta=beta),
            emulate,
        )

    gemm.__doc__ = "emublas interpose: cupy.cublas.gemm routed to emublas.\n\n" + (original.__doc__ or "")
    return gemm


def _cublas_syrk(original: Callable) -> Callable:
    @functools.wraps(original)
    def syrk(trans, a, out=None, alpha=1.0, beta=0.0, lower=False):
        import emublas

        t = _TRANS.get(trans)
        ok = t in (0, 1) and a.ndim == 2 and a.dtype.char in _FLOATS and np.isscalar(alpha) and np.isscalar(beta)
        dims = None
        if ok:
            n, k = a.shape[::-1] if t else a.shape
            dims = (n, n, k) if out is None or out.shape == (n, n) else None

        def emulate():
            result = emublas.syrk(alpha, a, beta if out is not None else 0.0, out, t, int(bool(lower)), overwrite_c=1)
            if out is not None and result is not out:
                out[...] = result
                return out
            return result

        return _dispatch(
            "cublas.syrk",
            dims,
            a.dtype,
            lambda: original(trans, a, out=out, alpha=alpha, beta=beta, lower=lower),
            emulate,
        )

    syrk.__doc__ = "emublas interpose: cupy.cublas.syrk routed to emublas.\n\n" + (original.__doc__ or "")
    return syrk


def _cupy_swaps(cupy) -> list[tuple[Any, str, Any]]:
    import cupy.cublas

    swaps = [
        (cupy, "matmul", _product("matmul", cupy.matmul)),
        (cupy, "dot", _product("dot", cupy.dot)),
        (cupy.cublas, "gemm", _cublas_gemm(cupy.cublas.gemm)),
        (cupy.cublas, "syrk", _cublas_syrk(cupy.cublas.syrk)),
    ]
    for attr, reflected in (("__matmul__", False), ("__rmatmul__", True), ("dot", False)):
        original = getattr(cupy.ndarray, attr)
        try:  # cupy.ndarray is an extension type in some versions: then it cannot be patched
            setattr(cupy.ndarray, attr, original)
        except (TypeError, AttributeError):
            if attr not in not_swapped:
                not_swapped.append(attr)
            continue
        swaps.append((cupy.ndarray, attr, _method(attr, original, reflected)))
    return swaps


def _on_cupy(cupy) -> None:
    swapping.swap_while_installed(lambda: _cupy_swaps(cupy))  # nothing if uninstalled meanwhile


_hook = AfterImport(("cupy",), _on_cupy, "emublas-interpose-cupy")


def replacements() -> list[tuple[Any, str, Any]]:
    """Swaps for an already imported cupy; otherwise arm the import hook that makes them on import.

    Returns
    -------
    list of (object, str, object)
        ``(owner, attribute, replacement)`` for ``cupy.matmul``, ``cupy.dot``,
        ``cupy.cublas.gemm``/``syrk`` and the ndarray methods that can be patched;
        empty when cupy is not imported yet.
    """
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return _cupy_swaps(cupy)
    _hook.arm()
    return []


def disarm() -> None:
    """Remove the import hook (uninstall)."""
    _hook.disarm()
