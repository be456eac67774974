"""Ozaki scheme II: exact int8 products modulo small moduli, rebuilt by CRT.

``moduli`` the tables and CRT constants, ``scaling`` the power-of-two shifts and
bounds, ``recipes`` the per-modulus recipes (2M, rank-k identities),
``pipeline`` the one driver (residues → int8 products → reduce → finalize) with
the stages of each device in ``cpu_stages`` and ``gpu_stages``, ``gpu_engine``
where a GPU call runs (one device or several), ``certify`` and ``verdicts`` the
per-entry accuracy check, ``routines`` the BLAS routines, ``integer`` the exact
integer product, ``distributed`` the Dask path (the same stages per block).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

__all__ = ["DEFAULT_MODULI", "MODES", "last_run"]

_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__))


def __getattr__(name: str) -> Any:
    # the routines (and the pipeline under them) load on first use, as do the submodules:
    # ``import emublas`` and a program the interpose shim leaves native need none of them
    if name in __all__:
        return getattr(importlib.import_module(".routines", __name__), name)
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
