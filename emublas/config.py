"""Backend selection: per call, ``use()`` blocks, ``set_backend()``, environment.

Precedence, highest first:

1. the call's ``backend=`` keyword;
2. the innermost ``with emublas.use(...)`` block of the current thread;
3. ``emublas.set_backend(...)`` (process-wide);
4. the environment: ``EMUBLAS_BACKEND``;
5. ``"native"``.

Options are layered the same way on top of each backend's defaults: defaults,
then the backend's environment variables (``EMUBLAS_MODULI`` …), then the
options given with the selection that chose the backend (only if it chose this
very backend), then the call's keywords.  Every name and value is validated
where it is read, so a typo in an environment variable fails the first call
that reads it, with a message listing what is valid; nothing falls back
silently.  A variable is read only when it can matter: ``EMUBLAS_BACKEND``
when no call keyword, ``use()`` block or ``set_backend()`` decides, a
backend's option variables only for calls that run on that backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from . import backends as _registry
from ._env import env_converter, env_texts, env_unset
from .backends.base import Backend

__all__ = ["Selection", "set_backend", "use", "get_backend", "explicit_selection", "process_selection", "resolve"]

ENV_BACKEND = "EMUBLAS_BACKEND"
DEFAULT_BACKEND = "native"


@dataclass(frozen=True)
class Selection:
    """A backend name, its options, and where the choice came from.

    Attributes
    ----------
    backend : str
        The backend's name.
    options : mapping
        Its options, by keyword.
    source : {"call", "use", "set_backend", "environment", "default"}
        What made the choice.
    """

    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)
    source: str = "default"


_global: Selection | None = None


class _Local(threading.local):
    """Per thread: the ``use()`` blocks, innermost last (there from the thread's first look:
    a missing attribute costs a caught AttributeError on every call)."""

    def __init__(self) -> None:
        self.stack: list[Selection] = []


_local = _Local()
# use() blocks open in any thread, so that a call with none open need not look at its thread's
# stack (a thread-local lookup, on a path the interpose shim takes per call)
_open_blocks = 0
_open_lock = threading.Lock()


def _stack() -> list[Selection]:
    return _local.stack


def _parse_options(backend: Backend, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate ``raw`` against ``backend.options``; ``where`` names the source in errors."""
    parsed = {}
    for key, value in raw.items():
        spec = backend.options.get(key)
        if spec is None:
            valid = ", ".join(sorted(backend.options)) or "none"
            raise ValueError(f"backend {backend.name!r} has no option {key!r} ({where}); valid options: {valid}")
        try:
            parsed[key] = spec.parse(value)
        except ValueError as exc:
            raise ValueError(
                f"bad value for option {key!r} of backend {backend.name!r} ({where}): {exc}{spec.valid_hint}"
            ) from None
    return parsed


# The environment is read on every call (a change applies at once); only the parsing of the
# texts read is cached, per backend object and tuple of texts (bounded: a program sets few values).
# per backend: its (option, variable) pairs, the variables, the test that none is set (one C
# call: the usual call's whole reading) and the defaults (the options then)
_ENV_VARS: dict[Backend, tuple[tuple[tuple[str, str], ...], tuple[str, ...], Callable[[], bool], dict[str, Any]]] = {}
_ENV_PARSED: dict[tuple[Backend, tuple[str | None, ...]], dict[str, Any]] = {}
_ENV_PARSED_MAX = 256


def _env_options(backend: Backend) -> dict[str, Any]:
    """The backend's defaults overridden by its environment variables (a shared dict: copy it)."""
    entry = _ENV_VARS.get(backend)
    if entry is None:
        pairs = tuple((key, spec.env_var) for key, spec in backend.options.items())
        variables = tuple(var for _, var in pairs)
        defaults = {k: spec.default for k, spec in backend.options.items()}
        entry = _ENV_VARS[backend] = (pairs, variables, env_unset(variables), defaults)
    names, variables, unset, defaults = entry
    if unset():  # the usual call: none of its variables set
        return defaults
    texts = env_texts(variables)
    key = (backend, texts)
    parsed = _ENV_PARSED.get(key)
    if parsed is None:
        parsed = dict(defaults)
        for (opt, var), text in zip(names, texts):
            if text is not None and text.strip() != "":
                parsed.update(_parse_options(backend, {opt: text}, f"environment variable {var}"))
        if len(_ENV_PARSED) < _ENV_PARSED_MAX:
            _ENV_PARSED[key] = parsed
    return parsed


def _make_selection(name: str, options: Mapping[str, Any], source: str) -> Selection:
    backend = _registry.get(name)  # raises ValueError listing valid names
    parsed = _parse_options(backend, options, source)
    return Selection(backend.name, MappingProxyType(parsed), source)


def set_backend(name: str | None, **options: Any) -> None:
    """Select the process-wide backend and its options.

    Parameters
    ----------
    name : str or None
        Backend name; ``None`` clears the process-wide choice so that the
        environment (or ``"native"``) applies again.
    **options
        Backend options, validated now.

    Raises
    ------
    ValueError
        Unknown backend, unknown option or bad value; the message lists the
        valid ones.
    """
    global _global
    if name is None:
        if options:
            raise ValueError("set_backend(None) clears the selection and takes no options")
        _global = None
        return
    _global = _make_selection(name, options, "set_backend")


def process_selection() -> Selection | None:
    """What :func:`set_backend` chose.

    Returns
    -------
    Selection or None
        None when nothing was chosen or the choice was cleared.
    """
    return _global


@contextmanager
def use(name: str, **options: Any) -> Iterator[Selection]:
    """Select a backend for the calls made inside a ``with`` block (this thread only).

    Parameters
    ----------
    name : str
        Backend name (see :func:`emublas.info` for the usable ones).
    **options
        Backend options, validated on entry.

    Yields
    ------
    Selection
        The selection in force inside the block.

    Raises
    ------
    ValueError
        Unknown backend, unknown option or bad value; the message lists the
        valid ones.

    Examples
    --------
    >>> import numpy as np, emublas
    >>> a = np.ones((2, 3))
    >>> with emublas.use("native"):
    ...     c = emublas.dgemm(1.0, a, a.T)
    """
    global _open_blocks
    selection = _make_selection(name, options, "use")
    stack = _stack()
    with _open_lock:
        _open_blocks += 1
    stack.append(selection)
    try:
        yield selection
    finally:
        stack.pop()
        with _open_lock:
            _open_blocks -= 1


def explicit_selection() -> Selection | None:
    """The selection made in code for a call here: the innermost :func:`use` block of this
    thread, else :func:`set_backend`'s choice.

    Selections are immutable and a new call of either function makes a new one, so the
    object's identity can stamp a cache of what depends on the selection.

    Returns
    -------
    Selection or None
        None where neither applies (``EMUBLAS_BACKEND`` or the default decides).
    """
    if not _open_blocks:
        return _global
    stack = _local.stack
    return stack[-1] if stack else _global


def get_backend() -> Selection:
    """The selection that applies to a call made here without ``backend=``.

    The innermost :func:`use` block, else :func:`set_backend`'s choice, else
    ``EMUBLAS_BACKEND`` (read and validated now), else ``"native"``.

    Returns
    -------
    Selection
        Its ``source`` says which of these decided.

    Raises
    ------
    ValueError
        ``EMUBLAS_BACKEND`` names no backend; the message lists the valid ones.
    """
    chosen = explicit_selection()
    return chosen if chosen is not None else _environment_selection()


def _selection_of(text: str | None) -> Selection:
    """The selection ``EMUBLAS_BACKEND`` = ``text`` makes (None or blank: the default's)."""
    name = (text or "").strip()
    if not name:
        return Selection(DEFAULT_BACKEND, MappingProxyType({}), "default")
    try:
        backend = _registry.get(name)
    except ValueError as exc:
        raise ValueError(f"environment variable {ENV_BACKEND}: {exc}") from None
    return Selection(backend.name, MappingProxyType({}), "environment")


# EMUBLAS_BACKEND's selection, read now; Selection is frozen: one object per value serves every call
_environment_selection = env_converter(ENV_BACKEND, _selection_of)


def resolve(backend: str | None = None, options: Mapping[str, Any] | None = None) -> tuple[Backend, dict[str, Any]]:
    """Backend object and fully layered options for one call.

    Parameters
    ----------
    backend : str, optional
        The call's ``backend=`` keyword.
    options : mapping, optional
        The call's option keywords.

    Returns
    -------
    tuple of (Backend, dict)
        The backend and every one of its options: defaults, overridden by the
        environment, by the selection (when it names the same backend) and by
        the call's keywords, in that order.  The dict may be shared with other
        calls (the per-call path builds none): read it, do not modify it.

    Raises
    ------
    ValueError
        Unknown backend, unknown option or bad value.
    """
    # a call's backend= decides alone: EMUBLAS_BACKEND is not read (a typo there cannot break it)
    # explicit_selection() and get_backend() inlined: this runs on every call
    if not _open_blocks:
        chosen = _global
    else:
        stack = _local.stack
        chosen = stack[-1] if stack else _global
    if backend is None:
        if chosen is None:
            chosen = _environment_selection()
        obj = _registry.get(chosen.backend)
    else:
        obj = _registry.get(backend)
    merged = _env_options(obj)  # shared between calls until something is layered on top
    if chosen is not None and chosen.options and chosen.backend == obj.name:
        merged = {**merged, **chosen.options}
    if options:
        merged = {**merged, **_parse_options(obj, options, "call keyword")}
    return obj, merged
