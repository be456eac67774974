"""scipy entry points of the interpose shim: ``scipy.linalg.blas`` and ``scipy.linalg._fblas``.

Each of :data:`SCIPY_NAMES` is replaced by a function with scipy's name,
docstring and ``_fblas`` attributes that sends the call to emublas's routine of
the same name, or to scipy's original where :mod:`.policy` says so (arguments
scipy would reject or treat specially included, so that scipy's own errors and
warnings are kept).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import policy

__all__ = ["SCIPY_NAMES", "call_dims", "level3_dims", "replacement", "replacements", "clear_blas_memo"]

SCIPY_NAMES = tuple(p + r for r in ("gemm", "syrk", "syr2k", "symm", "trmm", "trsm") for p in "sdcz") + (
    "cherk",
    "zherk",
    "cher2k",
    "zher2k",
    "chemm",
    "zhemm",
)
_FBLAS_ATTRS = ("typecode", "dtype", "prefix", "module_name", "int_dtype")


class _Binder:
    """``inspect.Signature.bind`` plus ``apply_defaults`` for the fronts' signatures, without
    their cost on every intercepted call: the arguments by name, defaults filled in (a
    ``**options`` catch-all as a dict), or None where ``bind`` would raise ``TypeError``.
    ``scipy_only``: the positional-or-keyword parameters alone (scipy's signature, without the
    front's keyword-only ``backend`` and ``**options``)."""

    def __init__(self, fn, scipy_only: bool = False):
        params = [
            p for p in inspect.signature(fn).parameters.values() if not scipy_only or p.kind is p.POSITIONAL_OR_KEYWORD
        ]
        self.positional = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
        self.named = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        self.varkw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.required = tuple(n for n in self.named if n not in self.defaults)
        # the usual call gives every required parameter by position: len(args) alone says so
        self.leading = len(self.required) if set(self.required) == set(self.positional[: len(self.required)]) else None

    def __call__(self, args: tuple, kwargs: dict) -> dict | None:
        # on every intercepted call, with the caches cold from the BLAS work between calls:
        # C-level dict operations rather than a Python loop per parameter
        if len(args) > len(self.positional):
            return None
        out = dict(zip(self.positional, args))
        extra: dict = {}
        if kwargs:
            if not out.keys().isdisjoint(kwargs):
                return None  # given twice
            if self.named.issuperset(kwargs):
                out.update(kwargs)
            elif self.varkw is None:
                return None
            else:
                for key, value in kwargs.items():
                    if key in self.named:
                        out[key] = value
                    else:
                        extra[key] = value
        if self.leading is None or len(args) < self.leading:
            for key in self.required:
                if key not in out:
                    return None
        out = {**self.defaults, **out}
        if self.varkw is not None:
            out[self.varkw] = extra
        return out


def _make_signatures():
    """The scipy routines' argument binders, from emublas's own fronts (which have scipy's
    signatures; level-3 ones with the fronts' ``backend`` and ``**options``, so that a call
    naming them is seen and left to scipy), made once: the signatures are the same for every prefix."""
    from emublas import blas as front
    from emublas import level3

    def routine(k):
        return front.ROUTINES["d" + k] if k in ("gemm", "syrk", "syr2k") else front.ROUTINES["z" + k]

    binders = {k: _Binder(routine(k), scipy_only=True) for k in ("gemm", "syrk", "syr2k", "herk", "her2k")}
    binders.update({k: _Binder(level3.ROUTINES[("z" if k == "hemm" else "d") + k]) for k in LEVEL3_KINDS})
    return binders


LEVEL3_KINDS = ("symm", "hemm", "trmm", "trsm")
_SIGNATURES = _make_signatures()
_DTYPES = policy.emublas_module("blas").DTYPES
_NDARRAY = np.ndarray


def _array(x):
    """``np.asarray(x)``, without its call for an ndarray (the usual argument)."""
    return x if type(x) is _NDARRAY else np.asarray(x)


def call_dims(name: str, args: tuple, kwargs: dict):
    """The sizes of a scipy BLAS call, for the shim's size policy.

    Parameters
    ----------
    name, args, kwargs
        The prefixed scipy routine (any of :data:`SCIPY_NAMES`) and the call's
        arguments.

    Returns
    -------
    tuple or None
        ``(m, n, k, dtype)``; None where scipy should handle the call itself.
    """
    kind = name[1:]
    if kind in LEVEL3_KINDS:
        return level3_dims(name, args, kwargs)
    p = _SIGNATURES[kind](args, kwargs)
    if p is None:
        return None
    dtype = _DTYPES[name[0]]
    try:
        a = _array(p["a"])
        if a.ndim != 2 or a.dtype.kind not in "biufc":
            return None
        if kind == "gemm":
            b = _array(p["b"])
            ta, tb = int(p["trans_a"]), int(p["trans_b"])
            if b.ndim != 2 or b.dtype.kind not in "biufc" or ta not in (0, 1, 2) or tb not in (0, 1, 2):
                return None
            m, k = a.shape[::-1] if ta else a.shape
            kb, n = b.shape[::-1] if tb else b.shape
            if k != kb:
                return None
        else:
            trans, lower = int(p["trans"]), int(p["lower"])
            legal = {"herk": (0, 2), "her2k": (0, 2)}.get(kind, (0, 1, 2) if name[0] in "sd" else (0, 1))
            if trans not in legal or lower not in (0, 1):
                return None  # scipy's own handling (BLAS's warning) is kept
            if kind.endswith("2k"):
                b = _array(p["b"])
                if b.shape != a.shape:
                    return None
            n, k = a.shape[::-1] if trans else a.shape
            m = n
        c = p.get("c")
        if c is not None:
            c = _array(c)
            if c.shape != (m, n):
                return None
        if isinstance(p["alpha"], str) or isinstance(p.get("beta"), str):
            return None
    except (TypeError, ValueError):
        return None
    return m, n, k, dtype


def replacement(name: str, original: Callable) -> Callable:
    """The function that stands in for scipy's ``name``.

    Parameters
    ----------
    name : str
        The prefixed routine.
    original : callable
        scipy's function, called for the calls the policy leaves to it.

    Returns
    -------
    callable
        A wrapper with ``original``'s name and docstring that runs the emublas
        routine when the policy allows, records the call, and otherwise calls
        ``original``.
    """
    from emublas import blas as front

    routine = front.ROUTINES[name]
    kind, prefix, dtype = name[1:], name[0], front.DTYPES[name[0]]
    tick, native_below = policy.counter(name), policy.native_below

    @functools.wraps(original)
    def emulated(*args, **kwargs):
        # most calls of a program are small: one operand's smallest side (``a`` is the second
        # argument of every routine) can settle the route before the arguments are bound
        a = args[1] if len(args) > 1 else None
        if type(a) is _NDARRAY and a.ndim == 2 and min(a.shape) < native_below(kind, prefix):
            tick()
            return original(*args, **kwargs)
        t0 = time.perf_counter()
        dims = call_dims(name, args, kwargs)
        backend, opts, why = policy.route(kind, prefix, dims, "cpu")
        if why:
            try:
                return original(*args, **kwargs)  # scipy's own errors and warnings, unchanged
            finally:
                policy.record(
                    name, dims[:3] if dims else (), dtype, False, why, time.perf_counter() - t0, backend, opts
                )
        extra = policy.shim_options(backend, policy.explicit_options(backend))
        policy.warn_quantized(backend, {**opts, **extra}, dims[3])
        out = routine(*args, **kwargs, **extra)  # errors inside emulation propagate
        policy.record(name, dims[:3], dims[3], True, "", time.perf_counter() - t0, backend, {**opts, **extra})
        return out

    emulated.__doc__ = (
        f"emublas interpose: ``{name}`` routed to the selected emublas backend"
        f" (falls through to scipy's original below EMUBLAS_MIN_DIM or with the native"
        f" backend).\n\n" + (original.__doc__ or "")
    )
    emulated.__wrapped__ = original  # type: ignore[attr-defined]
    emulated.__name__ = emulated.__qualname__ = name
    for attr in _FBLAS_ATTRS:
        if hasattr(original, attr):
            setattr(emulated, attr, getattr(original, attr))
    return emulated


def replacements() -> list[tuple[Any, str, Any]]:
    """One replacement per routine of :data:`SCIPY_NAMES`, for each module that holds it.

    Returns
    -------
    list of (module, str, callable)
        ``(module, name, replacement)`` for ``scipy.linalg.blas`` and
        ``scipy.linalg._fblas``.
    """
    import scipy.linalg._fblas as fblas
    import scipy.linalg.blas as blas

    made: dict[str, Callable] = {}
    swaps = []
    for module in (blas, fblas):
        for name in SCIPY_NAMES:
            original = getattr(module, name, None)
            if original is None:
                continue
            if name not in made:
                made[name] = replacement(name, original)
            swaps.append((module, name, made[name]))
    return swaps


def clear_blas_memo() -> None:
    """Empty ``get_blas_funcs``'s memo, so that its callers look the routines up again."""
    import scipy.linalg.blas as blas

    memo = getattr(blas.get_blas_funcs, "memo", None)
    if isinstance(memo, dict):
        memo.clear()


def level3_dims(name: str, args: tuple, kwargs: dict):
    """The sizes of a scipy ``{symm,hemm,trmm,trsm}`` call, for the interpose shim's size policy.

    Parameters
    ----------
    name : str
        The prefixed routine, e.g. ``"dtrsm"``.
    args : tuple
        The call's positional arguments.
    kwargs : dict
        Its keyword arguments.

    Returns
    -------
    tuple or None
        ``(m, n, k, dtype)``; None where the arguments are ones scipy should
        handle itself (bad codes or shapes, non-2-D operands, emublas-only keywords).
    """
    p = _SIGNATURES[name[1:]](args, kwargs)
    if p is None:
        return None
    if p.get("backend") is not None or p.get("options"):
        return None
    try:
        a, b = _array(p["a"]), _array(p["b"])
        if a.ndim != 2 or b.ndim != 2 or a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
            return None
        if isinstance(p["alpha"], str) or isinstance(p.get("beta"), str):
            return None
        side, lower = int(p.get("side", 0)), int(p.get("lower", 0))
        if side not in (0, 1) or lower not in (0, 1):
            return None
        m, n = b.shape
        k = n if side else m
        if name[1:] in ("symm", "hemm"):
            if a.shape != (k, k):
                return None
            c = p.get("c")
            if c is not None and np.shape(c) != (m, n):
                return None
        else:
            if int(p.get("trans_a", 0)) not in (0, 1, 2) or int(p.get("diag", 0)) not in (0, 1):
                return None
            if a.shape != (k, k):
                return None  # trmm's larger a is left to scipy
    except (TypeError, ValueError):
        return None
    return m, n, k, _DTYPES[name[0]]
