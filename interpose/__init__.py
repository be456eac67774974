"""The interpose shim: unchanged scipy and cupy programs run on an emublas backend.

Importable as ``emublas.interpose`` (installs map this folder there).  Three
ways to switch it on:

* ``python -m emublas.interpose [--backend NAME] (script.py | -m module) [args...]``;
* ``EMUBLAS_INTERPOSE=1`` in the environment: a ``.pth`` hook installed with the
  package (``startup_hook.py``) calls :func:`install` as soon as the program
  imports ``scipy.linalg.blas`` or ``cupy``, and imports nothing when the
  variable is unset;
* :func:`install` / :func:`uninstall` from code.

What is swapped: ``scipy.linalg.blas`` and ``scipy.linalg._fblas``
``{s,d,c,z}{gemm,syrk,syr2k,symm,trmm,trsm}`` and ``{c,z}{herk,her2k,hemm}`` (``get_blas_funcs``'s
memo is cleared so its callers get the replacements), and on the GPU side
``cupy.matmul``, ``cupy.dot``, ``cupy.ndarray.__matmul__``/``__rmatmul__``/``dot``
where cupy allows it, and ``cupy.cublas.gemm``/``syrk``.

Routing: a call goes to the backend selected as usual (``EMUBLAS_BACKEND``,
``emublas.set_backend``, ``emublas.use`` blocks of the calling thread) unless
it falls through to the original: the selected backend is ``native``; the
smallest of m, n, k is below ``EMUBLAS_MIN_DIM``; the arguments are ones the
original would reject or treat specially (so scipy's own errors and warnings
are kept); or, for cupy, stacked, 1-D, mixed-dtype, integer or ``out=`` calls.
Errors raised inside emulation propagate.  ``EMUBLAS_VERBOSE=1`` prints one
line per intercepted call to stderr; :func:`stats` returns counters.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable

import numpy as np

__all__ = ["install", "uninstall", "installed", "stats", "reset_stats", "min_dim", "QuantizationWarning",
           "SHIM_DEFAULTS"]

ENV_ON = "EMUBLAS_INTERPOSE"
ENV_MIN_DIM = "EMUBLAS_MIN_DIM"
ENV_VERBOSE = "EMUBLAS_VERBOSE"
#: Calls whose smallest dimension is below this run natively.  Measured
#: (BENCHMARKS.md, "The interpose size threshold"): an ozaki2 call costs at
#: least about 1 ms, 50–65× native dgemm below n = 64.
DEFAULT_MIN_DIM = 64

SCIPY_NAMES = tuple(p + r for r in ("gemm", "syrk", "syr2k", "symm", "trmm", "trsm") for p in "sdcz") + (
    "cherk", "zherk", "cher2k", "zher2k", "chemm", "zhemm")
_FBLAS_ATTRS = ("typecode", "dtype", "prefix", "module_name", "int_dtype")

_lock = threading.RLock()
_originals: dict[tuple[Any, str], Any] = {}
_counts: Counter = Counter()
_before: list = []       # [selection before install()] while install() holds one it chose
_ours: list = []         # [the selection install() made], to see whether the program changed it since
_warned: set = set()     # quantization warnings already given (once per backend and bit count)

#: Option defaults under the shim, where the backend's own default would break unchanged
#: programs: boolpack takes NaN/Inf rows and columns from native BLAS (as ozaki2 does)
#: instead of raising.  An environment variable or the selection's options still win.
SHIM_DEFAULTS: dict[str, dict[str, Any]] = {"boolpack": {"nonfinite": "native"}}


class QuantizationWarning(UserWarning):
    """An interposed call computes with fewer bits than the program's floats hold (boolpack)."""


# ---------------------------------------------------------------------------
# settings read per call (so tests and programs can change them at run time)
# ---------------------------------------------------------------------------

def min_dim() -> int:
    """The current size threshold (``EMUBLAS_MIN_DIM``, default 64; empty means unset)."""
    from emublas.backends.base import env_int

    return env_int(ENV_MIN_DIM, DEFAULT_MIN_DIM, 0, 2**62)


def _verbose() -> bool:
    from emublas.backends.base import env_flag

    return env_flag(ENV_VERBOSE)


def stats() -> dict[str, int]:
    """Counters of intercepted calls: ``"<routine>:emulated"`` and ``"<routine>:native"``."""
    with _lock:
        return dict(_counts)


def reset_stats() -> None:
    """Zero the counters."""
    with _lock:
        _counts.clear()


def _record(routine: str, shape: tuple, dtype, emulated: bool, why: str, seconds: float, backend: str,
            options: dict) -> None:
    with _lock:
        _counts[f"{routine}:{'emulated' if emulated else 'native'}"] += 1
    if _verbose():
        opts = ",".join(f"{k}={v}" for k, v in _used_options(backend, options).items())
        target = f"{backend}({opts})" if emulated and opts else (backend if emulated else f"native [{why}]")
        dims = "x".join(str(d) for d in shape) if shape else "(shape not checked)"
        print(f"emublas: {routine} {dims} {np.dtype(dtype).name} -> {target} {seconds * 1e3:.3f} ms",
              file=sys.stderr)


def _used_options(backend: str, options: dict) -> dict:
    """The options as the last call used them: ozaki2's moduli count instead of ``default``."""
    shown = {k: ("current" if v is None else v) for k, v in options.items()}
    if backend == "auto":  # what auto chose, and the cost table it chose from
        try:
            from emublas import auto_last

            info = auto_last()
            if info:
                picked = info["options"].get("moduli", info["options"].get("levels"))
                shown = {"chose": info["backend"] + ("" if picked is None else f":{picked}"),
                         "table": info["table"]}
        except Exception:  # a report must not break the call
            pass
    if backend == "ozaki2":
        try:
            from emublas.ozaki2 import last_run

            info = last_run()
            if info and "moduli" in info:
                shown["moduli"] = info["moduli"]
        except Exception:  # a report must not break the call
            pass
    return shown


def _shim_options(backend: str, selection_options) -> dict[str, Any]:
    """Call keywords the shim adds: :data:`SHIM_DEFAULTS` not set by the environment or selection."""
    from emublas import backends

    extra = {}
    for key, value in SHIM_DEFAULTS.get(backend, {}).items():
        spec = backends.get(backend).options.get(key)
        if spec is None or key in selection_options or os.environ.get(spec.env_var, "").strip():
            continue
        extra[key] = value
    return extra


def _warn_quantized(backend: str, opts: dict, dtype) -> None:
    """Once per bit count: boolpack rounds the program's floats (it is not an exact product)."""
    if backend != "boolpack" or np.dtype(dtype).kind not in "fc":
        return
    bits = opts.get("bits")
    with _lock:
        if bits in _warned:
            return
        _warned.add(bits)
    import warnings

    mantissa = 24 if np.dtype(dtype) in (np.float32, np.complex64) else 53
    warnings.warn(f"emublas.interpose: boolpack keeps {bits} bits (sign included) of each float input,"
                  f" scaled per row/column of its largest entry, where {np.dtype(dtype).name} holds"
                  f" {mantissa}; results are accurate to about 2^-{int(bits) - 1} of the row/column scale"
                  " (set EMUBLAS_BOOLPACK_BITS or --option bits=N; warned once per bit count)",
                  QuantizationWarning, stacklevel=3)


def _selection(device: str = "cpu"):
    """Backend name, options and whether it can run on ``device``, for this call (thread-aware)."""
    from emublas import config

    backend, opts = config.resolve(None, None)
    return backend.name, opts, backend.readiness()[device][0]


def _explicit_options(backend: str) -> dict:
    from emublas import config

    chosen = config.get_backend()
    return dict(chosen.options) if chosen.backend == backend else {}


def _fallthrough_reason(backend: str, usable: bool, dims) -> str:
    if backend == "native":
        return "backend native"
    if not usable:
        return f"{backend} cannot run on this device"
    if dims is None:
        return "arguments left to the original"
    if min(dims[:3]) < min_dim():
        return f"min dim < {min_dim()}"
    return ""


# ---------------------------------------------------------------------------
# scipy.linalg.blas
# ---------------------------------------------------------------------------

def _dims_scipy(name: str, args: tuple, kwargs: dict):
    """(m, n, k, dtype) of a scipy BLAS call, or None where scipy should handle it itself."""
    from emublas import blas as front

    if name[1:] in ("symm", "hemm", "trmm", "trsm"):
        from emublas import level3

        return level3.scipy_dims(name, args, kwargs)
    sig = _SIGNATURES[name[1:]]
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    p = bound.arguments
    dtype = front.DTYPES[name[0]]
    try:
        a = np.asarray(p["a"])
        if a.ndim != 2 or a.dtype.kind not in "biufc":
            return None
        if name.endswith("gemm"):
            b = np.asarray(p["b"])
            ta, tb = int(p["trans_a"]), int(p["trans_b"])
            if b.ndim != 2 or b.dtype.kind not in "biufc" or ta not in (0, 1, 2) or tb not in (0, 1, 2):
                return None
            m, k = a.shape[::-1] if ta else a.shape
            kb, n = b.shape[::-1] if tb else b.shape
            if k != kb:
                return None
        else:
            trans, lower = int(p["trans"]), int(p["lower"])
            legal = {"herk": (0, 2), "her2k": (0, 2)}.get(name[1:], (0, 1, 2) if name[0] in "sd" else (0, 1))
            if trans not in legal or lower not in (0, 1):
                return None  # scipy's own handling (BLAS's warning) is kept
            if name.endswith("2k"):
                b = np.asarray(p["b"])
                if b.shape != a.shape:
                    return None
            n, k = a.shape[::-1] if trans else a.shape
            m = n
        c = p.get("c")
        if c is not None:
            c = np.asarray(c)
            if c.shape != (m, n):
                return None
        if isinstance(p["alpha"], str) or isinstance(p.get("beta"), str):
            return None
    except (TypeError, ValueError):
        return None
    return m, n, k, dtype


def _scipy_replacement(name: str, original: Callable) -> Callable:
    from emublas import blas as front

    routine = front.ROUTINES[name]

    @functools.wraps(original)
    def emulated(*args, **kwargs):
        t0 = time.perf_counter()
        dims = _dims_scipy(name, args, kwargs)
        backend, opts, usable = _selection("cpu")
        why = _fallthrough_reason(backend, usable, dims)
        if why:
            try:
                return original(*args, **kwargs)  # scipy's own errors and warnings, unchanged
            finally:
                _record(name, dims[:3] if dims else (), front.DTYPES[name[0]], False, why,
                        time.perf_counter() - t0, backend, opts)
        extra = _shim_options(backend, _explicit_options(backend))
        _warn_quantized(backend, {**opts, **extra}, dims[3])
        out = routine(*args, **kwargs, **extra)  # errors inside emulation propagate
        _record(name, dims[:3], dims[3], True, "", time.perf_counter() - t0, backend, {**opts, **extra})
        return out

    emulated.__doc__ = (f"emublas interpose: ``{name}`` routed to the selected emublas backend"
                        f" (falls through to scipy's original below EMUBLAS_MIN_DIM or with the native"
                        f" backend).\n\n" + (original.__doc__ or ""))
    emulated.__wrapped__ = original
    emulated.__name__ = emulated.__qualname__ = name
    for attr in _FBLAS_ATTRS:
        if hasattr(original, attr):
            setattr(emulated, attr, getattr(original, attr))
    return emulated


def _scipy_targets():
    import scipy.linalg._fblas as fblas
    import scipy.linalg.blas as blas

    return (blas, fblas)


def _clear_blas_memo() -> None:
    import scipy.linalg.blas as blas

    memo = getattr(blas.get_blas_funcs, "memo", None)
    if isinstance(memo, dict):
        memo.clear()


# ---------------------------------------------------------------------------
# install / uninstall
# ---------------------------------------------------------------------------

def _swap(module, attr: str, new) -> None:
    key = (module, attr)
    if key not in _originals:
        _originals[key] = getattr(module, attr)
    setattr(module, attr, new)


def installed() -> bool:
    """Whether the shim is active."""
    with _lock:
        return bool(_originals)


def install(backend: str | None = None, **options: Any) -> None:
    """Swap the scipy (and, where cupy is imported or importable, cupy) entry points.

    Idempotent.  ``backend`` (with ``options``), if given, becomes the
    process-wide selection (:func:`emublas.set_backend`) until :func:`uninstall`,
    which restores the one before; otherwise the usual selection applies per call.
    """
    from emublas import config

    with _lock:
        if backend is not None:
            before = config.process_selection()
            config.set_backend(backend, **options)
            if not _before:
                _before.append(before)
            _ours[:] = [config.process_selection()]
        if _originals:
            return
        replacements: dict[str, Callable] = {}
        for module in _scipy_targets():
            for name in SCIPY_NAMES:
                original = getattr(module, name, None)
                if original is None:
                    continue
                if name not in replacements:
                    replacements[name] = _scipy_replacement(name, original)
                _swap(module, name, replacements[name])
        _clear_blas_memo()
        from . import gpu

        for module, attr, new in gpu.replacements():
            _swap(module, attr, new)


def uninstall() -> None:
    """Restore every swapped object exactly, and the backend selection from before :func:`install` (idempotent).

    The selection is restored only if :func:`install` made one and the program did
    not change it since.
    """
    from emublas import config

    with _lock:
        if _before:
            before = _before.pop()
            if _ours and config.process_selection() is _ours[0]:
                if before is None:
                    config.set_backend(None)
                else:
                    config.set_backend(before.backend, **before.options)
            _ours.clear()
        for (module, attr), original in reversed(list(_originals.items())):
            setattr(module, attr, original)
        _originals.clear()
        _clear_blas_memo()
        from . import gpu

        gpu.disarm()


import inspect as _inspect  # noqa: E402  (signatures of the scipy routines, from emublas's own front)


def _sig(fn):
    params = [p for p in _inspect.signature(fn).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    return _inspect.Signature(params)


def _make_signatures():
    from emublas import blas as front

    return {k: _sig(front.ROUTINES["d" + k] if k in ("gemm", "syrk", "syr2k") else front.ROUTINES["z" + k])
            for k in ("gemm", "syrk", "syr2k", "herk", "her2k")}


_SIGNATURES = _make_signatures()
