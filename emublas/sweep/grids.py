"""The sweep's knob grids and list arguments: parsed, taken from the backends, validated, shown.

Knob grids come from the backends themselves (``sweep_grid``,
``sweep_quick_grid``, ``sweep_quick_rank_k_grid`` on
:class:`emublas.backends.Backend`), parsed with the backend's own ``Option``
parsers; ``--grid`` replaces a backend's grid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "OPS",
    "split_list",
    "parse_choices",
    "parse_shapes",
    "parse_grid_specs",
    "backend_named",
    "declared_grid",
    "declared_grids",
    "validate_grid",
    "knob_product",
    "knobs_text",
    "knobs_shown",
]

OPS = ("gemm", "syrk", "herk", "syr2k", "her2k")


def split_list(text: str | None) -> list[str]:
    """The items of a comma list, stripped, empty ones dropped.

    Parameters
    ----------
    text : str or None

    Returns
    -------
    list of str
    """
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def parse_choices(text, valid, what: str) -> list[str]:
    """A comma list of names (``--ops``, ``--dtypes``), lower-cased and checked.

    Parameters
    ----------
    text : str or None
        The list.
    valid : collection of str
        The names allowed.
    what : str
        The kind of name, for the message ("operation", "dtype").

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        A name not in ``valid`` (the message lists the valid ones).
    """
    names = [t.lower() for t in split_list(text)]
    for t in names:
        if t not in valid:
            raise ValueError(f"unknown {what} {t!r}; valid {what}s: {', '.join(valid)}")
    return names


def parse_shapes(sizes: str | None, mnk: str | None) -> list[tuple[int, int, int]]:
    """The shapes of ``--sizes`` (n, as n×n×n) and ``--mnk`` (m×n×k triples).

    Parameters
    ----------
    sizes, mnk : str or None
        Comma lists.

    Returns
    -------
    list of (int, int, int)

    Raises
    ------
    ValueError
        A size that is not a positive integer, or a malformed triple.
    """
    shapes = []
    for s in split_list(sizes):
        if not s.isdigit() or int(s) < 1:
            raise ValueError(f"bad size {s!r} in --sizes: positive integers, comma-separated")
        shapes.append((int(s),) * 3)
    for s in split_list(mnk):
        parts = s.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"bad shape {s!r} in --mnk: write MxNxK, e.g. 300x200x500")
        shapes.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return shapes


def _expand_values(text: str) -> list[str]:
    """``8,12`` / ``8..22`` / ``8..22:2`` -> list of raw strings."""
    out: list[str] = []
    for item in split_list(text):
        m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?::(-?\d+))?", item)
        if m:
            lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
            if step < 1:
                raise ValueError(f"bad range {item!r}: the step must be a positive integer (LO..HI:STEP)")
            if hi < lo:
                raise ValueError(f"bad range {item!r}: LO..HI needs LO <= HI")
            out.extend(str(v) for v in range(lo, hi + 1, step))
        else:
            out.append(item)
    return out


def parse_grid_specs(specs: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """Split ``--grid`` specs into raw values (not validated).

    Parameters
    ----------
    specs : iterable of str
        ``"BACKEND:KNOB=V1,V2;KNOB=V"``, e.g. ``"ozaki2:moduli=8,12;mode=accurate"``;
        values may be ranges ``LO..HI[:STEP]``.

    Returns
    -------
    dict
        ``{backend: {knob: [raw values]}}``, names lower-cased.

    Raises
    ------
    ValueError
        A spec without ``BACKEND:``, a part without ``=``, or a knob without values.
    """
    grids: dict[str, dict[str, list[str]]] = {}
    for spec in specs:
        if ":" not in spec:
            raise ValueError(f"bad --grid {spec!r}: write BACKEND:KNOB=V1,V2;KNOB=V (e.g. ozaki2:moduli=8,12,16)")
        name, body = spec.split(":", 1)
        knobs = grids.setdefault(name.strip().lower(), {})
        for part in body.split(";"):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"bad --grid part {part!r} in {spec!r}: write KNOB=V1,V2")
            key, vals = part.split("=", 1)
            values = _expand_values(vals)
            if not values:
                raise ValueError(f"--grid {spec!r}: knob {key.strip()!r} has no values")
            knobs[key.strip().lower()] = values
    return grids


def backend_named(name: str):
    """The registered backend called ``name``.

    Parameters
    ----------
    name : str

    Returns
    -------
    Backend

    Raises
    ------
    ValueError
        An unknown name (the message lists the valid ones).
    """
    from .. import backends

    return backends.get(name)  # ValueError listing the valid backends


def declared_grid(be, quick: bool, rank_k: bool = False) -> dict[str, list]:
    """The backend's own grid (``{}``, the option defaults, where it declares none).

    Parameters
    ----------
    be : Backend
    quick : bool
        The ``--quick`` grid instead of the full one.
    rank_k : bool, optional
        The quick grid of the rank-k routines.

    Returns
    -------
    dict of str to list
    """
    grid = be.quick_grid(rank_k) if quick else be.sweep_grid
    return {key: list(values) for key, values in (grid or {}).items()}


def declared_grids(quick: bool = False) -> dict[str, dict[str, list]]:
    """Every registered backend's declared grid, derived from the registry.

    Backends that declare no grid are left out (a full sweep runs them at
    their option defaults; ``--quick`` leaves them out).

    Parameters
    ----------
    quick : bool, optional
        The quick sweep's grids instead of the full ones.

    Returns
    -------
    dict
        ``{backend: {knob: [parsed values]}}``.
    """
    from .. import backends as registry

    out = {}
    for name in registry.names():
        be = registry.get(name)
        if (be.quick_grid() if quick else be.sweep_grid) is not None:
            out[name] = declared_grid(be, quick)
    return out


def validate_grid(be, grid: dict[str, list], where: str) -> dict[str, list]:
    """Parse every value of a knob grid with the backend's option parser.

    Parameters
    ----------
    be : Backend
        The backend the grid is for.
    grid : dict of str to list
        ``{knob: [raw values]}``; knobs not given stay at their defaults.
    where : str
        Where the grid came from, for error messages (e.g. ``"--grid"``).

    Returns
    -------
    dict of str to list
        ``{knob: [parsed values]}`` in the backend's option order, duplicates dropped.

    Raises
    ------
    ValueError
        An unknown knob or a bad value, naming the backend and the valid ones.
    """
    for key in grid:
        if key not in be.options:
            valid = ", ".join(be.options) or "none"
            raise ValueError(f"backend {be.name!r} has no knob {key!r} ({where}); valid knobs: {valid}")
    parsed: dict[str, list] = {}
    for key, spec in be.options.items():
        raw = grid.get(key)
        if raw is None:
            continue
        vals = []
        for v in raw:
            try:
                p = spec.parse(v)
            except ValueError as exc:
                raise ValueError(
                    f"bad value {v!r} for knob {key!r} of backend {be.name!r} ({where}): {exc}{spec.valid_hint}"
                ) from None
            if p not in vals:
                vals.append(p)
        parsed[key] = vals
    return parsed


def knob_product(grid: dict[str, list]) -> list[dict[str, Any]]:
    """Every combination of a grid's knob values, in the grid's order.

    Parameters
    ----------
    grid : dict of str to list

    Returns
    -------
    list of dict
    """
    combos: list[dict[str, Any]] = [{}]
    for key, vals in grid.items():
        combos = [{**c, key: v} for c in combos for v in vals]
    return combos


def knobs_text(knobs: dict[str, Any]) -> str:
    """How a configuration's knobs are stored.

    Parameters
    ----------
    knobs : dict
        ``{option: value}``.

    Returns
    -------
    str
        ``moduli=8;mode=accurate``.
    """
    return ";".join(f"{k}={v}" for k, v in knobs.items())


def knobs_shown(text: str | None) -> str:
    """Stored knobs as a person reads them.

    Parameters
    ----------
    text : str or None
        As :func:`knobs_text` writes them.

    Returns
    -------
    str
        ``moduli=8, mode=accurate``; empty for none.
    """
    return ", ".join(kv for kv in (text or "").split(";") if kv)
