"""Value parsers and the one reader of emublas's environment variables.

The lowest layer of the package: it imports nothing from emublas, so the
kernels (:mod:`emublas._kernels`) and the backends (:mod:`emublas.backends`)
read their variables the same way.  Empty means unset everywhere.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

__all__ = [
    "int_range",
    "boolean",
    "env_value",
    "env_flag",
    "env_int",
    "env_texts",
    "env_unset",
    "env_probe",
    "env_tokens",
    "env_decode",
    "env_reader",
    "env_converter",
]


def int_range(lo: int, hi: int, *, also: tuple[str, ...] = ()) -> Callable[[Any], int | str]:
    """Parser accepting an integer in ``[lo, hi]`` or one of the words ``also``.

    Parameters
    ----------
    lo, hi : int
        The inclusive range.
    also : tuple of str, optional
        Words accepted as well (lower-cased), such as ``"auto"``.

    Returns
    -------
    callable
        ``parse(raw) -> int | str``; it raises ``ValueError`` naming the range
        (booleans, non-integral numbers and out-of-range values included), and
        its ``valid`` attribute describes the valid values for error messages.
    """

    def parse(raw: Any) -> int | str:
        if isinstance(raw, str) and raw.strip().lower() in also:
            return raw.strip().lower()
        if isinstance(raw, bool):
            raise ValueError(f"{raw!r} is not an integer in [{lo}, {hi}]")
        try:
            value = int(str(raw).strip()) if isinstance(raw, str) else int(raw)
            if value != raw and not isinstance(raw, str):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            words = f" or one of {', '.join(also)}" if also else ""
            raise ValueError(f"{raw!r} is not an integer in [{lo}, {hi}]{words}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside [{lo}, {hi}]")
        return value

    parse.valid = f"integers {lo}..{hi}" + (f" or {', '.join(also)}" if also else "")  # type: ignore[attr-defined]
    return parse


def boolean(raw: Any) -> bool:
    """Parser for on/off options (``1/0``, ``true/false``, ``yes/no``, ``on/off``).

    Parameters
    ----------
    raw : bool, str or int

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        Any other value; the message lists the accepted words.
    """
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not a boolean (1/0, true/false, yes/no, on/off)")


boolean.valid = "1/0, true/false, yes/no, on/off"  # type: ignore[attr-defined]


# ``os.environ.get`` of an unset variable raises and catches a KeyError inside (about 1 us);
# the front reads several variables on every call, so it looks them up in the mapping
# ``os.environ`` keeps of the process environment (CPython, POSIX: bytes keys), which
# ``os.environ`` itself updates on every assignment, ``putenv`` included.
_RAW = getattr(os.environ, "_data", None)
_RAW_OK = isinstance(_RAW, dict) and os.name == "posix"
_KEYS: dict[tuple[str, ...], tuple[bytes, ...]] = {}  # the names' keys in that mapping


def env_texts(names: tuple[str, ...]) -> tuple[str | None, ...]:
    """The values of environment variables ``names`` (None where unset), read now.

    Parameters
    ----------
    names : tuple of str
        Variable names.

    Returns
    -------
    tuple of (str or None)
        One entry per name, as ``os.environ.get`` gives it.
    """
    if not _RAW_OK:
        return tuple(os.environ.get(n) for n in names)
    keys = _KEYS.get(names)
    if keys is None:
        keys = _KEYS[names] = tuple(os.fsencode(n) for n in names)
    raws = tuple(map(_RAW.get, keys))  # type: ignore[union-attr]
    if raws.count(None) == len(raws):  # the usual call: nothing set
        return raws
    return tuple(None if raw is None else _decoded(raw) for raw in raws)


def env_unset(names: tuple[str, ...]) -> Callable[[], bool]:
    """A test, of no arguments, of whether none of environment variables ``names`` is set now.

    For a caller that looks at the same variables on every call: on POSIX CPython the test is
    one C call (no Python frame, no tuple of values), which is what such a call mostly needs.

    Parameters
    ----------
    names : tuple of str
        Variable names.

    Returns
    -------
    callable
        ``unset() -> bool``: True when no name is set (an empty value counts as set here).
    """
    if not _RAW_OK:
        return lambda: all(os.environ.get(n) is None for n in names)
    return functools.partial(_RAW.keys().isdisjoint, tuple(os.fsencode(n) for n in names))  # type: ignore[union-attr]


def env_probe(name: str) -> Callable[[], object]:
    """A reader, of no arguments, of environment variable ``name``'s value as a token.

    Equal tokens are equal values (None: unset), so a token can key a cache of what the
    value parses to; :func:`env_decode` gives its text.  On POSIX CPython one C call.

    Parameters
    ----------
    name : str
        The variable's name.

    Returns
    -------
    callable
        ``probe() -> object``, hashable.
    """
    if not _RAW_OK:
        return functools.partial(os.environ.get, name)
    return functools.partial(_RAW.get, os.fsencode(name))  # type: ignore[union-attr]


def env_tokens(names: tuple[str, ...]) -> Callable[[], tuple]:
    """A reader, of no arguments, of environment variables ``names`` as a tuple of tokens.

    Equal tuples are equal values (None: unset), so the tuple can key a cache of what depends
    on those variables; on POSIX CPython it is one lookup per name in C, without decoding.

    Parameters
    ----------
    names : tuple of str
        Variable names.

    Returns
    -------
    callable
        ``read() -> tuple``, one hashable token per name (:func:`env_decode` gives its text).
    """
    if not _RAW_OK:
        return lambda: tuple(map(os.environ.get, names))
    keys = tuple(os.fsencode(n) for n in names)
    get = _RAW.get  # type: ignore[union-attr]
    return lambda: tuple(map(get, keys))


def env_decode(token: object) -> str | None:
    """The text of a token of :func:`env_probe` (None when the variable was unset).

    Parameters
    ----------
    token : object
        What a probe returned.

    Returns
    -------
    str or None
        As ``os.environ.get`` gives it.
    """
    if token is None or isinstance(token, str):
        return token
    return _decoded(token)  # type: ignore[arg-type]


_DECODED: dict[bytes, str] = {}  # the values seen, decoded (bounded: a program sets few)


def _decoded(raw: bytes) -> str:
    text = _DECODED.get(raw)
    if text is None:
        text = os.fsdecode(raw)
        if len(_DECODED) < 256:
            _DECODED[raw] = text
    return text


def env_value(var: str, parse: Callable[[Any], Any], default: Any) -> Any:
    """``parse`` applied to environment variable ``var``; ``default`` when unset or empty.

    Parameters
    ----------
    var : str
        The variable's name.
    parse : callable
        A parser such as :func:`int_range` or :func:`boolean`.
    default : object
        Returned when the variable is unset or blank.

    Returns
    -------
    object
        What ``parse`` returns, or ``default``.

    Raises
    ------
    ValueError
        The value does not parse; the message names the variable and the valid values.
    """
    (text,) = env_texts((var,))
    return _parsed(var, text, parse, default)


def _parsed(var: str, text: str | None, parse: Callable[[Any], Any], default: Any) -> Any:
    """:func:`env_value` of a text already read."""
    if text is None or text.strip() == "":
        return default
    try:
        return parse(text)
    except ValueError as exc:
        valid = getattr(parse, "valid", "")
        hint = f"; valid values: {valid}" if valid else ""
        raise ValueError(f"environment variable {var}={text!r}: {exc}{hint}") from None


def env_reader(var: str, parse: Callable[[Any], Any], default: Any) -> Callable[[], Any]:
    """A reader, of no arguments, of :func:`env_value` ``(var, parse, default)``, read now.

    For a variable looked at on every call (see :func:`env_converter`).

    Parameters
    ----------
    var : str
        The variable's name.
    parse : callable
        A parser such as :func:`int_range` or :func:`boolean`.
    default : object
        The value when the variable is unset or blank.

    Returns
    -------
    callable
        ``read() -> object``.
    """
    return env_converter(var, lambda text: _parsed(var, text, parse, default))


def env_converter(var: str, convert: Callable[[str | None], Any]) -> Callable[[], Any]:
    """A reader, of no arguments, of ``convert(text)`` for environment variable ``var``'s text.

    Each call reads the variable (one C call on POSIX CPython) and converts a text only the
    first time it is seen, so a change applies at once; a text whose conversion raises is not
    kept, so it raises on every read.

    Parameters
    ----------
    var : str
        The variable's name.
    convert : callable
        ``convert(text) -> value``, text None when the variable is unset; it raises for a bad
        value, naming the variable.

    Returns
    -------
    callable
        ``read() -> object``.
    """
    probe = env_probe(var)
    converted: dict[object, Any] = {}
    missing = object()

    def read() -> Any:
        token = probe()
        value = converted.get(token, missing)
        if value is missing:
            value = convert(env_decode(token))
            if len(converted) < 64:  # a program sets few values
                converted[token] = value
        return value

    return read


def env_flag(var: str, default: bool = False) -> bool:
    """A boolean environment variable (see :func:`boolean`); empty means unset.

    Parameters
    ----------
    var : str
    default : bool, optional

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        The value is not one of the boolean words.
    """
    return env_value(var, boolean, default)


def env_int(var: str, default: int, lo: int, hi: int) -> int:
    """An integer environment variable in ``[lo, hi]``; empty means unset.

    Parameters
    ----------
    var : str
    default : int
    lo, hi : int
        The inclusive range.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Not an integer in the range; the message names the variable.
    """
    return env_value(var, int_range(lo, hi), default)
