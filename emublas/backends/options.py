"""Backend options: the :class:`Option` record and the parsers backends declare them with.

Re-exported by :mod:`emublas.backends.base`, where a backend imports them from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Grid", "Option", "choice", "device_list", "parse_bits"]

#: A knob grid: option name -> the values to sweep (raw values, parsed by the option's parser).
Grid = Mapping[str, Sequence[Any]]


@dataclass(frozen=True)
class Option:
    """One backend option: its default, its parser and its environment variable.

    Parameters
    ----------
    name : str
        Keyword name, as passed to routines, ``use`` and ``set_backend``.
    default : object
        Value used when nothing else sets it.
    parse : callable
        Converts a raw value (Python object or environment string) to the
        option's value, raising ``ValueError`` that lists the valid values.
    doc : str
        One line for ``emublas info`` and the README.
    env : str, optional
        Environment variable; ``EMUBLAS_<NAME>`` when not given.
    """

    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str
    env: str | None = None

    @property
    def env_var(self) -> str:
        """The environment variable read for the default: ``env`` if set, else ``EMUBLAS_<NAME>``."""
        return self.env or "EMUBLAS_" + self.name.upper()

    @property
    def default_text(self) -> str:
        """The default as ``emublas info`` writes it: a ``None`` default by what its parser
        says None means (``current`` device, ``native`` accuracy, ...)."""
        if self.default is None:
            return str(getattr(self.parse, "none", "none"))
        if isinstance(self.default, (tuple, list)):
            return ",".join(map(str, self.default))
        return str(self.default)

    @property
    def valid_hint(self) -> str:
        """``"; valid values: ..."`` for an error message, or "" when the parser lists none."""
        valid = getattr(self.parse, "valid", "")
        return f"; valid values: {valid}" if valid else ""


def choice(*values: str) -> Callable[[Any], str]:
    """An option parser that accepts one of ``values``, case-insensitively.

    Parameters
    ----------
    *values : str
        The valid values, lower case.

    Returns
    -------
    callable
        ``parse(raw) -> str``: the lower-cased value; raises ValueError naming the
        valid ones otherwise (listed again in its ``valid`` attribute).
    """

    def parse(raw: Any) -> str:
        text = str(raw).strip().lower()
        if text not in values:
            raise ValueError(f"{raw!r} is not one of {', '.join(values)}")
        return text

    parse.valid = ", ".join(values)  # type: ignore[attr-defined]
    return parse


def device_list(raw: Any) -> tuple[int, ...] | str | None:
    """Parse a set of GPUs.

    Parameters
    ----------
    raw : None, str, int or sequence of int
        ``None``, ``""`` or ``"current"`` (the arrays' own device), ``"all"``, an
        integer, or integers separated by commas (``"0,1"``) or in a sequence.

    Returns
    -------
    tuple of int, "all" or None
        The distinct device ids in the order given, ``"all"``, or None for the
        arrays' own device.

    Raises
    ------
    ValueError
        For anything else, negative or repeated ids.
    """
    if raw is None:
        return None
    parts: list[Any]
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in ("", "current", "none"):
            return None
        if text == "all":
            return "all"
        parts = [p for p in text.replace(" ", "").split(",") if p]
    elif isinstance(raw, int) and not isinstance(raw, bool):
        parts = [raw]
    elif isinstance(raw, (list, tuple)):
        parts = list(raw)
    else:
        raise ValueError(f"{raw!r} is not a device list (e.g. 0,1 or all)")
    try:
        ids = tuple(int(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not a device list (e.g. 0,1 or all)") from None
    if not ids or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"{raw!r} is not a device list of distinct non-negative ids")
    return ids


device_list.valid = "current, all, or device ids like 0,1"  # type: ignore[attr-defined]
device_list.none = "current"  # type: ignore[attr-defined]


def parse_bits(raw: Any) -> int | None:
    """Parse a ``bits`` option: correct bits per entry, or native BLAS's accuracy.

    Parameters
    ----------
    raw : int, str or None
        An integer 1..53 (checked against the call's precision when it runs), or
        None, ``""``, ``"none"``, ``"native"`` for native BLAS's accuracy.

    Returns
    -------
    int or None
        The number of bits, or None for native accuracy.

    Raises
    ------
    ValueError
        For anything else (booleans and non-integral numbers included).
    """
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none", "native")):
        return None
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number of bits")
    try:
        value = int(raw.strip()) if isinstance(raw, str) else int(raw)
        if not isinstance(raw, str) and value != raw:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{raw!r} is not a number of bits (1..53) or none") from None
    if not 1 <= value <= 53:
        raise ValueError(f"bits={value} is outside 1..53")
    return value


parse_bits.valid = "integers 1..53 (24 for float32 data) or none"  # type: ignore[attr-defined]
parse_bits.none = "native"  # type: ignore[attr-defined]
