"""How the interpose shim replaces functions: every swap remembered, every one undone exactly.

One lock guards the table of originals; the scipy and cupy parts hand their
``(module, attribute, replacement)`` triples to :func:`swap` (or, for swaps
that arrive later, from the cupy import hook, :func:`swap_while_installed`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["lock", "swap", "swap_while_installed", "installed", "restore_all"]

#: Held while the shim installs or removes swaps (re-entrant: install holds it around its parts).
lock = threading.RLock()
_originals: dict[tuple[Any, str], Any] = {}


def swap(module: Any, attr: str, new: Any) -> None:
    """Set ``module.attr = new``, remembering the first original seen for :func:`restore_all`.

    Parameters
    ----------
    module : object
        The module (or class) that holds the attribute.
    attr : str
        The attribute's name.
    new : object
        Its replacement.
    """
    with lock:
        key = (module, attr)
        if key not in _originals:
            _originals[key] = getattr(module, attr)
        setattr(module, attr, new)


def swap_while_installed(make_swaps: Callable[[], Iterable[tuple[Any, str, Any]]]) -> None:
    """:func:`swap` each triple ``make_swaps()`` gives, unless the shim was uninstalled meanwhile.

    Parameters
    ----------
    make_swaps : callable
        Returns ``(module, attr, new)`` triples; not called when the shim is not installed.
    """
    with lock:
        if not _originals:
            return
        for module, attr, new in make_swaps():
            swap(module, attr, new)


def installed() -> bool:
    """Whether the shim is active.

    Returns
    -------
    bool
        True while some swap is in place.
    """
    with lock:
        return bool(_originals)


def restore_all() -> None:
    """Put every original back, last swap first, and forget them."""
    with lock:
        for (module, attr), original in reversed(list(_originals.items())):
            setattr(module, attr, original)
        _originals.clear()
