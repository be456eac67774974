"""The benchmarks' timing: :mod:`emublas.timing` of this checkout, loaded by path.

Loaded by file path rather than imported, so that a script's timing is this
checkout's whichever emublas it imports (bench_against_commit.py times another
commit's build) and importing it never imports the emublas package (the
GEMMul8 workers of bench_gemmul8.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emublas", "timing.py")
_spec = importlib.util.spec_from_file_location("_emublas_timing", _PATH)
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod  # dataclasses look their module up by name
_spec.loader.exec_module(_mod)

__all__ = list(_mod.__all__)
globals().update({name: getattr(_mod, name) for name in __all__})
