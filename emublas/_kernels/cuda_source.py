"""Finding and compiling the CUDA sources of ``native/cuda`` with cupy.

A wheel ships the sources as package data (``emublas/_kernels/cuda/``, copied
there by setup.py); a source checkout (editable install) reads them from
``native/cuda`` directly.  Modules are compiled for the current device's
architecture on first use and cached per device.
"""
from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["source_path", "module"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = (os.path.join(_HERE, "cuda"), os.path.join(os.path.dirname(os.path.dirname(_HERE)), "native", "cuda"))
_lock = threading.Lock()
_cache: dict[tuple[str, int, tuple[str, ...]], Any] = {}


def source_path(name: str) -> str:
    """Path of the CUDA source ``name`` (e.g. ``"ozaki2.cu"``)."""
    for folder in _CANDIDATES:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"CUDA source {name!r} not found in {', '.join(_CANDIDATES)}")


def module(name: str, options: tuple[str, ...] = ()) -> Any:
    """The ``cupy.RawModule`` of ``native/cuda/<name>`` compiled for the current device.

    ``-std=c++17`` is always passed, ``options`` adds to it.  cupy itself
    names the device's architecture (machine code for ``sm_XY`` of the current
    device, compiled by NVRTC), so no ``-arch`` is given here.
    """
    import cupy

    dev = cupy.cuda.Device()
    key = (name, dev.id, tuple(options))
    with _lock:
        mod = _cache.get(key)
        if mod is None:
            with open(source_path(name)) as fh:
                code = fh.read()
            mod = cupy.RawModule(code=code, options=("-std=c++17", *options))
            _cache[key] = mod
    return mod
