"""The backend registry.

A backend is one module exposing ``BACKEND``, an instance of a
:class:`~emublas.backends.base.Backend` subclass.  Adding one is adding its
module and a line to ``_MODULES``; modules are imported on first use so that
``import emublas`` stays cheap.  :func:`register` adds backends at run time
(plugins, tests).
"""

from __future__ import annotations

import importlib

from .base import Backend, Option

__all__ = ["Backend", "Option", "names", "get", "register", "unregister"]

_MODULES: dict[str, str] = {
    "auto": "emublas.backends.auto.backend",
    "boolpack": "emublas.backends.boolpack.backend",
    "native": "emublas.backends.native.backend",
    "ozaki2": "emublas.backends.ozaki2.backend",
    "strassen": "emublas.backends.strassen.backend",
}
_loaded: dict[str, Backend] = {}


def names() -> list[str]:
    """Names of every known backend, built-in and registered.

    Returns
    -------
    list of str
        Sorted names.
    """
    return sorted(set(_MODULES) | set(_loaded))


def get(name: str) -> Backend:
    """Return the backend called ``name``, importing its module on first use.

    Parameters
    ----------
    name : str
        A backend name, case-insensitive and stripped.

    Returns
    -------
    Backend
        The backend instance (one per process).

    Raises
    ------
    ValueError
        If no backend has that name; the message lists the valid names.
    """
    hit = _loaded.get(name)  # the usual call names a loaded backend exactly: no string work
    if hit is not None:
        return hit
    key = str(name).strip().lower() if isinstance(name, str) else name
    if key in _loaded:
        return _loaded[key]
    if key not in _MODULES:
        raise ValueError(f"unknown emublas backend {name!r}; valid backends: {', '.join(names())}")
    backend = importlib.import_module(_MODULES[key]).BACKEND
    _loaded[key] = backend
    return backend


def register(backend: Backend, *, replace: bool = False) -> None:
    """Make ``backend`` selectable by its ``name``.

    Parameters
    ----------
    backend : Backend
        An instance with a non-empty ``name``.
    replace : bool, optional
        Replace a registered backend of that name instead of refusing.

    Raises
    ------
    ValueError
        An empty name, or a name already taken (built-in ones included) without ``replace``.
    """
    if not backend.name:
        raise ValueError("a backend needs a non-empty name")
    if not replace and backend.name in names():
        raise ValueError(f"backend {backend.name!r} is already registered")
    _loaded[backend.name] = backend


def unregister(name: str) -> None:
    """Remove a backend added with :func:`register`; an unknown name is ignored.

    Parameters
    ----------
    name : str
        The backend's name.

    Raises
    ------
    ValueError
        For a built-in backend.
    """
    if name in _MODULES:
        raise ValueError(f"{name!r} is built in and cannot be unregistered")
    _loaded.pop(name, None)
