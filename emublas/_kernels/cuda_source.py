"""Finding and compiling the CUDA sources of ``native/cuda`` with cupy.

A wheel ships the sources as package data (``emublas/_kernels/cuda/`` and the
shared header in ``emublas/_kernels/include/``, copied there by setup.py); a
source checkout (editable install) reads them from ``native/cuda`` and
``native/include`` directly.  Modules are compiled for the current device's
architecture on first use and cached per device.

A source includes the shared header as ``#include "../include/<name>.h"``
(what nvcc resolves next to the file); NVRTC compiles a string, so
:func:`source_text` pastes the header's text in place of that line, which
also makes cupy's kernel cache (keyed by the source text) see header edits.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from .constants import header_path

__all__ = ["source_path", "source_text", "module"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_NATIVE = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "native")
_CANDIDATES = (os.path.join(_HERE, "cuda"), os.path.join(_NATIVE, "cuda"))
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"\.\./include/([\w.]+)".*$', re.M)
_lock = threading.Lock()
_cache: dict[tuple[str, int, tuple[str, ...]], Any] = {}


def source_path(name: str) -> str:
    """Path of the CUDA source ``name`` (package data in a wheel, ``native/cuda`` in a checkout).

    Parameters
    ----------
    name : str
        The file name, e.g. ``"ozaki2.cu"``.

    Returns
    -------
    str
        The path of the first copy found.

    Raises
    ------
    FileNotFoundError
        When neither place holds it.
    """
    for folder in _CANDIDATES:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"CUDA source {name!r} not found in {', '.join(_CANDIDATES)}")


def source_text(name: str) -> str:
    """The text of ``native/cuda/<name>`` with its ``../include/`` headers pasted in.

    NVRTC compiles from a string, so the shared headers are inlined here.

    Parameters
    ----------
    name : str
        The CUDA source's file name.

    Returns
    -------
    str
        The source, ready for ``cupy.RawModule``.
    """
    with open(source_path(name)) as fh:
        code = fh.read()

    def paste(match: re.Match[str]) -> str:
        with open(header_path(match.group(1))) as fh:
            return fh.read()

    return _INCLUDE.sub(paste, code)


def module(name: str, options: tuple[str, ...] = ()) -> Any:
    """The ``cupy.RawModule`` of ``native/cuda/<name>`` compiled for the current device.

    ``-std=c++17`` is always passed, ``options`` adds to it.  cupy itself
    names the device's architecture (machine code for ``sm_XY`` of the current
    device, compiled by NVRTC), so no ``-arch`` is given here.  Compiled once
    per source, device and options.

    Parameters
    ----------
    name : str
        The CUDA source's file name.
    options : tuple of str, optional
        More NVRTC options (``-D`` defines, for example).

    Returns
    -------
    cupy.RawModule
        The compiled module (cached).
    """
    import cupy

    dev = cupy.cuda.Device()
    key = (name, dev.id, tuple(options))
    with _lock:
        mod = _cache.get(key)
        if mod is None:
            mod = cupy.RawModule(code=source_text(name), options=("-std=c++17", *options))
            _cache[key] = mod
    return mod
