"""The host's CPU model, in words (a low layer: the cost tables pick theirs by it)."""

from __future__ import annotations

import platform
from functools import cache

__all__ = ["cpu_model"]


@cache
def cpu_model() -> str:
    """The CPU's model name (read once per process).

    Returns
    -------
    str
        From /proc/cpuinfo where there is one, else what :mod:`platform` says.
    """
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
