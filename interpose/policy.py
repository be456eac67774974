"""Which calls the interpose shim hands to emublas, and what it reports about them.

Everything here is read per call, so tests and programs can change the
environment at run time: the selected backend (``EMUBLAS_BACKEND``,
``emublas.set_backend``, ``emublas.use``), the size threshold
``EMUBLAS_MIN_DIM``, the option defaults the shim adds (:data:`SHIM_DEFAULTS`)
and the per-call line of ``EMUBLAS_VERBOSE``.  The scipy and cupy parts ask
:func:`route` (:func:`selection` and :func:`fallthrough_reason` in one step) before a
call and :func:`record` after it.
"""

from __future__ import annotations

import importlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "ENV_ON",
    "ENV_MIN_DIM",
    "ENV_VERBOSE",
    "DEFAULT_MIN_DIM",
    "SHIM_DEFAULTS",
    "QuantizationWarning",
    "min_dim",
    "verbose",
    "emublas_module",
    "selection",
    "route",
    "native_below",
    "counter",
    "count",
    "explicit_options",
    "fallthrough_reason",
    "shim_options",
    "warn_quantized",
    "used_options",
    "record",
    "stats",
    "reset_stats",
    "warned",
]

ENV_ON = "EMUBLAS_INTERPOSE"
ENV_MIN_DIM = "EMUBLAS_MIN_DIM"
ENV_VERBOSE = "EMUBLAS_VERBOSE"
#: Calls whose smallest dimension is below this run natively.  Measured
#: (BENCHMARKS.md, "The interpose size threshold"): an ozaki2 call costs at
#: least about 1 ms, 50–65× native dgemm below n = 64.
DEFAULT_MIN_DIM = 64

#: Option defaults under the shim, where the backend's own default would break unchanged
#: programs: boolpack takes NaN/Inf rows and columns from native BLAS (as ozaki2 does)
#: instead of raising.  An environment variable or the selection's options still win.
SHIM_DEFAULTS: dict[str, dict[str, Any]] = {"boolpack": {"nonfinite": "native"}}

#: Quantization warnings already given (bit counts): one per bit count per process.
warned: set = set()

_lock = threading.Lock()
# per (routine, emulated): [itertools.count ticked once per call, reads, calls at the last reset]
_tallies: dict[tuple[str, bool], list] = {}
_monotonic = time.monotonic


class QuantizationWarning(UserWarning):
    """An interposed call computes with fewer bits than the program's floats hold (boolpack)."""


def min_dim() -> int:
    """The current size threshold (``EMUBLAS_MIN_DIM``, default 64; empty means unset).

    Returns
    -------
    int
        Calls with a dimension below it go to the original routine.

    Raises
    ------
    ValueError
        When the variable is not a non-negative integer (the message names it).
    """
    read = _READERS.get(ENV_MIN_DIM)
    if read is None:
        from emublas.backends.base import env_reader, int_range

        read = _READERS[ENV_MIN_DIM] = env_reader(ENV_MIN_DIM, int_range(0, 2**62), DEFAULT_MIN_DIM)
    return read()


def verbose() -> bool:
    """Whether ``EMUBLAS_VERBOSE`` asks for one line per intercepted call on stderr.

    Returns
    -------
    bool
        The variable's value.

    Raises
    ------
    ValueError
        When the variable is not a boolean (the message names it and the valid values).
    """
    read = _READERS.get(ENV_VERBOSE)
    if read is None:
        from emublas.backends.base import boolean, env_reader

        read = _READERS[ENV_VERBOSE] = env_reader(ENV_VERBOSE, boolean, False)
    return read()


# Readers of the shim's variables, made on first use (importing interpose stays light): each
# call reads its variable and parses a value only the first time it is seen.
_READERS: dict[str, Any] = {}


_MODULES: dict[str, Any] = {}


def emublas_module(name: str) -> Any:
    """The module ``emublas.<name>``, imported on first use (importing interpose stays light).

    An ``import`` statement inside a function costs about half a microsecond on every call,
    and the shim's steps run on every BLAS call it intercepts.

    Parameters
    ----------
    name : str
        The submodule, e.g. ``"config"``.

    Returns
    -------
    module
    """
    mod = _MODULES.get(name)
    if mod is None:
        mod = _MODULES[name] = importlib.import_module("emublas." + name)
    return mod


def selection(device: str = "cpu") -> tuple[str, dict, bool]:
    """The backend selected for this call (thread-aware) and whether it can run on ``device``.

    Parameters
    ----------
    device : {"cpu", "gpu"}, optional
        The device of the intercepted call.

    Returns
    -------
    name : str
        The backend's name.
    options : dict
        Its options, resolved.
    usable : bool
        Whether it is ready on ``device``.
    """
    backend, opts = emublas_module("config").resolve(None, None)
    return backend.name, opts, backend.ready(device)


def prepare(device: str = "cpu") -> None:
    """Do once, at install, what the first intercepted call on ``device`` would otherwise pay.

    The selected backend's imports, its readiness and, for ``auto``, its cost table and the
    emulating backends it may choose from, and the readers of the shim's own variables:
    several milliseconds that would land inside the program's first BLAS call.  Errors are
    left for that call to raise, with its context (an unknown ``EMUBLAS_BACKEND`` must not
    stop the program from starting).

    Parameters
    ----------
    device : {"cpu", "gpu"}, optional
        The device whose readiness is settled (``"gpu"`` imports cupy).
    """
    try:
        min_dim()
        verbose()
        _make_floor_memo()
        name, opts, usable = selection(device)
        if name == "auto" and usable:
            from emublas import backends

            backends.get("auto").prepare(device, opts)
    except Exception:  # noqa: BLE001 - reported by the call that needs the selection
        pass


def explicit_options(backend: str) -> dict:
    """The options given with the process-wide selection, if ``backend`` is the one selected.

    Parameters
    ----------
    backend : str
        A backend name.

    Returns
    -------
    dict
        Those options; empty for another backend.
    """
    from emublas import config

    chosen = config.get_backend()
    return dict(chosen.options) if chosen.backend == backend else {}


def fallthrough_reason(
    backend: str,
    usable: bool,
    dims: tuple | None,
    routine: str | None = None,
    prefix: str | None = None,
    device: str = "cpu",
    options: dict | None = None,
) -> str:
    """Why a call goes to the original routine.

    Parameters
    ----------
    backend : str
        The selected backend's name.
    usable : bool
        Whether it can run on the call's device.
    dims : tuple or None
        ``(m, n, k, ...)`` of the call, or None where the arguments are left to the original.
    routine, prefix : str, optional
        The call's routine kind (gemm, syrk, ..., trsm) and BLAS prefix: with them a call
        ``auto`` would compute natively goes to the original directly (``"auto: native"``),
        without the emublas front's own argument handling.
    device : {"cpu", "gpu"}, optional
        The call's device.
    options : dict, optional
        The selection's resolved options (``auto``'s, for its choice).

    Returns
    -------
    str
        The reason, as the verbose line shows it; ``""`` when the call is emulated.
    """
    if backend == "native":
        return "backend native"
    if not usable:
        return f"{backend} cannot run on this device"
    if dims is None:
        return "arguments left to the original"
    if min(dims[:3]) < min_dim():
        return f"min dim < {min_dim()}"
    if backend == "auto" and routine is not None and prefix is not None:
        m, n, k = dims[:3]
        auto = emublas_module("backends").get("auto")
        if auto.choice(routine, prefix, m, n, k, device, options or {}) == "native":
            return "auto: native"
    return ""


def route(routine: str, prefix: str, dims: tuple | None, device: str = "cpu") -> tuple[str, dict, str]:
    """:func:`selection` and :func:`fallthrough_reason` in one step: what each intercepted call asks.

    In a program whose BLAS work between calls leaves the caches cold, the shim's cost grows
    with the code it runs: the two steps share one reading of the selection.

    Parameters
    ----------
    routine : str
        The routine kind (gemm, syrk, ..., trsm).
    prefix : {"s", "d", "c", "z"} or None
        Its BLAS prefix (None: auto is not asked, as for :func:`fallthrough_reason`).
    dims : tuple or None
        ``(m, n, k, ...)`` of the call, or None where its arguments are left to the original.
    device : {"cpu", "gpu"}, optional
        The call's device.

    Returns
    -------
    backend : str
        The selected backend's name.
    options : dict
        Its options, resolved (shared between calls: read it, do not modify it).
    why : str
        :func:`fallthrough_reason`'s answer: ``""`` when the call is emulated.
    """
    config = _MODULES.get("config") or emublas_module("config")
    obj, opts = config.resolve(None, None)
    why = fallthrough_reason(obj.name, obj.ready(device), dims, routine, prefix, device, opts)
    return obj.name, opts, why


def native_below(routine: str, prefix: str, device: str = "cpu") -> int:
    """A size below which :func:`route` sends every call of ``prefix`` + ``routine`` to the original.

    The shim's shortcut for small calls: where one operand's smallest side is below this,
    the call's smallest dimension is too (every operand's sides are among m, n and k), so
    the call goes to the original without binding its arguments or asking ``auto`` for its
    shape.  0 under ``EMUBLAS_VERBOSE`` (each call's line needs the full route).

    Parameters
    ----------
    routine : str
        The routine kind (gemm, syrk, ..., trsm).
    prefix : {"s", "d", "c", "z"}
        Its BLAS prefix.
    device : {"cpu", "gpu"}, optional
        The call's device.

    Returns
    -------
    int
        ``EMUBLAS_MIN_DIM``, raised to ``auto``'s cost-table floor where ``auto`` is selected;
        ``2**62`` where the selected backend is native or cannot run on ``device``; 0 under
        ``EMUBLAS_VERBOSE``.
    """
    # Asked before every small call, with the caches cold from the program's BLAS work, where
    # every object touched costs (bench_shim_calls.py): the answer is kept, stamped with what it
    # depends on (the selection made in code, the variables read, and time for the cost
    # table's re-reading), so a repeated question reads those and one dict entry.
    memo = _FLOOR_MEMO
    if not memo:
        _make_floor_memo()
    chosen = memo["selection"]()
    tokens = memo["tokens"]()
    key = (routine, prefix, device, tokens)
    now = _monotonic()
    hit = memo["floors"].get(key)
    if hit is not None and hit[0] is chosen and now < hit[1]:
        return hit[2]
    floor = _native_below(routine, prefix, device)
    floors = memo["floors"]
    if len(floors) >= 256:  # a program has few routines and settings
        floors.clear()
    floors[key] = (chosen, now + memo["recheck_s"], floor)
    return floor


_FLOOR_MEMO: dict[str, Any] = {}


def _make_floor_memo() -> None:
    from emublas import backends, config
    from emublas.backends.auto import tables
    from emublas.backends.base import env_tokens

    names = (config.ENV_BACKEND, ENV_MIN_DIM, ENV_VERBOSE)
    names += tuple(spec.env_var for spec in backends.get("auto").options.values() if spec.env_var)
    _FLOOR_MEMO.update(
        selection=config.explicit_selection, tokens=env_tokens(names), recheck_s=tables.RECHECK_S, floors={}
    )


def _native_below(routine: str, prefix: str, device: str) -> int:
    """:func:`native_below`, worked out from the selection, the variables and the table."""
    if verbose():
        return 0
    config = _MODULES.get("config") or emublas_module("config")
    obj, opts = config.resolve(None, None)
    if obj.name == "native" or not obj.ready(device):
        return 2**62
    floor = min_dim()
    if obj.name == "auto":
        floor = max(floor, obj.native_below(routine, prefix, device, opts))
    return floor


def counter(routine: str, emulated: bool = False) -> Callable[[], object]:
    """The counting step of one kind of intercepted call: each call of it counts one in :func:`stats`.

    For the path every small call takes: one call in C, exact without a lock (``next`` of an
    :class:`itertools.count` is atomic under the GIL), where a lock and a dict touch several
    objects, each of them costly with the caches cold.

    Parameters
    ----------
    routine : str
        The scipy or cupy routine's name.
    emulated : bool, optional
        Whether emublas ran the calls counted.

    Returns
    -------
    callable
        ``tick()``; its return value means nothing.
    """
    tally = _tallies.get((routine, emulated))
    if tally is None:
        with _lock:
            tally = _tallies.setdefault((routine, emulated), [itertools.count(), 0, 0])
    return tally[0].__next__


def count(routine: str, emulated: bool = False) -> None:
    """Count one intercepted call in :func:`stats` (what :func:`record` does without a line).

    Parameters
    ----------
    routine : str
        The scipy or cupy routine's name.
    emulated : bool, optional
        Whether emublas ran it.
    """
    counter(routine, emulated)()


def _tally_now(tally: list) -> int:
    """The calls counted by ``tally`` (``[ticks, reads, base]``) since the last reset; hold ``_lock``.

    Reading takes one tick itself: a read's ``next`` returns the calls and the reads before it."""
    calls = next(tally[0]) - tally[1]
    tally[1] += 1
    return calls - tally[2]


def shim_options(backend: str, selection_options) -> dict[str, Any]:
    """Call keywords the shim adds: :data:`SHIM_DEFAULTS` not set by the environment or selection.

    Parameters
    ----------
    backend : str
        The selected backend's name.
    selection_options : mapping
        The options the selection gives.

    Returns
    -------
    dict
        The defaults to add, by keyword.
    """
    from emublas import backends

    extra = {}
    for key, value in SHIM_DEFAULTS.get(backend, {}).items():
        spec = backends.get(backend).options.get(key)
        if spec is None or key in selection_options or os.environ.get(spec.env_var, "").strip():
            continue
        extra[key] = value
    return extra


def warn_quantized(backend: str, opts: dict, dtype) -> None:
    """Once per bit count: warn that a backend that rounds the program's floats (boolpack) is not an exact product.

    Called by the routine that replaced the program's function, so that the warning
    points at the program's call.  Nothing for backends that do not quantize, or
    for integer data.

    Parameters
    ----------
    backend : str
        The backend's name.
    opts : dict
        The call's options (``bits`` is read).
    dtype : numpy.dtype
        The call's dtype.
    """
    from emublas import backends

    if not backends.get(backend).quantizes_floats or np.dtype(dtype).kind not in "fc":
        return
    bits: Any = opts.get("bits")
    with _lock:
        if bits in warned:
            return
        warned.add(bits)
    import warnings

    mantissa = 24 if np.dtype(dtype) in (np.float32, np.complex64) else 53
    warnings.warn(
        f"emublas.interpose: boolpack keeps {bits} bits (sign included) of each float input,"
        f" scaled per row/column of its largest entry, where {np.dtype(dtype).name} holds"
        f" {mantissa}; results are accurate to about 2^-{int(bits) - 1} of the row/column scale"
        " (set EMUBLAS_BOOLPACK_BITS or --option bits=N; warned once per bit count)",
        QuantizationWarning,
        stacklevel=3,
    )


def used_options(backend: str, options: dict) -> dict:
    """The options as the last call used them, for the verbose line.

    Parameters
    ----------
    backend : str
        The backend's name.
    options : dict
        The call's options.

    Returns
    -------
    dict
        The options with None shown as ``"current"``; for ozaki2 the moduli
        count used instead of ``default``; for auto what it chose and from which table.
    """
    shown = {k: ("current" if v is None else v) for k, v in options.items()}
    if backend == "auto":  # what auto chose, and the cost table it chose from
        try:
            from emublas import auto_last

            info = auto_last()
            if info:
                picked = info["options"].get("moduli", info["options"].get("levels"))
                shown = {"chose": info["backend"] + ("" if picked is None else f":{picked}"), "table": info["table"]}
        except Exception:  # a report must not break the call
            pass
    if backend == "ozaki2":
        try:
            from emublas import backends

            info = backends.get("ozaki2").last_run()
            if info and "moduli" in info:
                shown["moduli"] = info["moduli"]
        except Exception:  # a report must not break the call
            pass
    return shown


def record(
    routine: str, shape: tuple, dtype, emulated: bool, why: str, seconds: float, backend: str, options: dict
) -> None:
    """Count one intercepted call and, under ``EMUBLAS_VERBOSE``, print its line on stderr.

    Parameters
    ----------
    routine : str
        The scipy or cupy routine's name.
    shape : tuple
        The call's dimensions (empty where not checked).
    dtype : numpy.dtype
        The call's dtype.
    emulated : bool
        Whether emublas ran it.
    why : str
        Why not, when it went to the original.
    seconds : float
        The call's wall time.
    backend : str
        The selected backend's name.
    options : dict
        The call's options.
    """
    count(routine, emulated)  # formatted by stats(): not on every call
    if verbose():
        opts = ",".join(f"{k}={v}" for k, v in used_options(backend, options).items())
        if emulated:
            target = f"{backend}({opts})" if opts else backend
        elif why == "auto: native":  # auto's choice, and the table it chose from
            target = f"native [auto({opts})]"
        else:
            target = f"native [{why}]"
        dims = "x".join(str(d) for d in shape) if shape else "(shape not checked)"
        print(f"emublas: {routine} {dims} {np.dtype(dtype).name} -> {target} {seconds * 1e3:.3f} ms", file=sys.stderr)


def stats() -> dict[str, int]:
    """Counters of intercepted calls.

    Returns
    -------
    dict of str to int
        ``"<routine>:emulated"`` and ``"<routine>:native"`` counts (a copy).
    """
    with _lock:
        counts = {key: _tally_now(tally) for key, tally in _tallies.items()}
    return {f"{routine}:{'emulated' if emulated else 'native'}": n for (routine, emulated), n in counts.items() if n}


def reset_stats() -> None:
    """Zero the counters."""
    with _lock:
        for tally in _tallies.values():
            tally[2] += _tally_now(tally)
