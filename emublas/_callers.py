"""Warnings attributed to the caller's line.

A warning raised deep in a backend names the first frame outside the emublas package and
its interpose shim: the line of the user's program (or of scipy, under the shim) that
called emublas, however many layers routed the call.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_OURS = (_PACKAGE + os.sep, os.path.join(os.path.dirname(_PACKAGE), "interpose") + os.sep)


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` at the first frame outside emublas.

    Parameters
    ----------
    message : str
        The warning's text.
    category : type of Warning
        Its class.
    """
    level = 2  # the caller of this function
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_OURS):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
