"""The measured cost tables behind ``backend="auto"``: their JSON form, loading and which one applies.

A *table* (JSON, written by ``emublas calibrate``) holds, for one device, the
median time of each backend on a grid of square products (gemm and herk, per
BLAS prefix) with its spread, and each emulated time as a *ratio* to native's
median measured in the same run, interleaved with it.  Ratios travel between
hosts of one kind better than absolute rates (the int8 ceiling of a VM host
varies from session to session; ozaki2 and native move less relative to each
other), so the model (:mod:`.model`) predicts a call's native time from the
table's native times and every other candidate's time as native's times its ratio.

Which table is used, first match wins:

1. ``EMUBLAS_COST_TABLE`` (or the auto backend's ``table`` option): a path;
2. the user cache, ``<platformdirs user_cache_dir>/emublas/costs-<device>.json``,
   written by ``emublas calibrate``;
3. the table shipped in ``emublas/data`` for the device; on the CPU, the one whose
   ``hardware`` is this CPU's model name where there is one (``costs_cpu_*.json``), else
   ``costs_cpu.json``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..._env import env_texts
from ..._hardware import cpu_model

__all__ = [
    "FORMAT",
    "ENV_TABLE",
    "RECHECK_S",
    "Table",
    "from_dict",
    "load",
    "table_for",
    "table_source",
    "cache_path",
    "shipped_path",
]

FORMAT = 1
ENV_TABLE = "EMUBLAS_COST_TABLE"
# package data of emublas (emublas/data), two levels above this package
_DATA = Path(__file__).parents[2] / "data"
_SHIPPED = {"cpu": "costs_cpu.json", "gpu": "costs_gpu_h200.json"}


@dataclass(eq=False)  # identity hash: tables key the decision cache
class Table:
    """One device's measurements (see the module docstring for the JSON layout).

    Attributes
    ----------
    device : {"cpu", "gpu"}
        The device the measurements are for.
    hardware : str
        The machine they were taken on, in words.
    source : str
        How they were made (e.g. the calibration command).
    entries : list of dict
        The measured rows: backend, knob, routine, prefix, n, median_s, ratio.
    min_dim : int
        The smallest dimension at which any emulated entry beat native (set after
        loading; calls below it skip the model).
    path : str
        The file it was read from.
    shipped : bool
        Whether it is one of the tables shipped with the package.
    meta : dict
        The file's other top-level fields.
    fixed_min_dim : int or None
        The table's ``min_dim_override``, replacing the measured thresholds.
    """

    device: str
    hardware: str
    source: str
    entries: list[dict]
    min_dim: int
    path: str
    shipped: bool
    meta: dict = field(default_factory=dict)
    fixed_min_dim: int | None = None  # the table's "min_dim_override", replacing the measured thresholds

    def __post_init__(self):
        # (backend, knob, routine, prefix) -> sorted [(log work, ratio, native seconds)]
        self._series: dict[tuple, list[tuple[float, float, float]]] = {}
        natives: dict[tuple, dict[int, float]] = {}
        for e in self.entries:
            if e["backend"] == "native":
                natives.setdefault((e["routine"], e["prefix"]), {})[int(e["n"])] = float(e["median_s"])
        for e in self.entries:
            nat = natives.get((e["routine"], e["prefix"]), {}).get(int(e["n"]))
            if nat is None:
                continue
            key = (e["backend"], e.get("knob"), e["routine"], e["prefix"])
            self._series.setdefault(key, []).append((3 * math.log(int(e["n"])), float(e["ratio"]), nat))
        for s in self._series.values():
            s.sort()
        # per (routine, prefix): the smallest size from which every larger measured size has an
        # emulated entry that beat native (an isolated noisy win below does not count)
        self._min_dims: dict[tuple[str, str], int] = {}
        self._largest: dict[tuple[str, str], int] = {}  # the largest measured size
        for routine, prefix in natives:
            sizes = sorted(natives[(routine, prefix)])
            wins = {
                int(e["n"])
                for e in self.entries
                if e["routine"] == routine
                and e["prefix"] == prefix
                and e["backend"] != "native"
                and float(e["ratio"]) < 1.0
            }
            self._largest[(routine, prefix)] = sizes[-1]
            edge = 2 * sizes[-1] + 1  # no win at the largest size: native up to twice it
            for n in reversed(sizes):
                if n not in wins:
                    break
                edge = n
            self._min_dims[(routine, prefix)] = edge if self.fixed_min_dim is None else self.fixed_min_dim

    @property
    def label(self) -> str:
        """What ``emublas info`` and the shim's verbose lines say about the table.

        Returns
        -------
        str
            The hardware of a shipped table, else the file's path.
        """
        return f"shipped default for {self.hardware}" if self.shipped else self.path

    def min_dim_for(self, routine: str, prefix: str) -> int:
        """Below this smallest dimension a call of ``prefix``+``routine`` (as measured) is native.

        Parameters
        ----------
        routine : str
            Routine kind without prefix, as the table names it (``gemm``, ``herk``, ...).
        prefix : {"s", "d", "c", "z"}

        Returns
        -------
        int
            The threshold (huge when nothing emulated ever beat native).
        """
        return self._min_dims.get((routine, prefix), 2**62)

    def largest_measured(self, routine: str, prefix: str) -> int | None:
        """The largest size measured for ``prefix``+``routine`` (None: not measured).

        Parameters
        ----------
        routine : str
            Routine kind without prefix, as the table names it.
        prefix : {"s", "d", "c", "z"}

        Returns
        -------
        int or None
        """
        return self._largest.get((routine, prefix))

    def knobs(self, backend: str, routine: str, prefix: str) -> list:
        """The knob values measured for ``backend`` (moduli counts, levels), sorted.

        Parameters
        ----------
        backend : str
        routine : str
            Routine kind without prefix, as the table names it (``gemm``, ``herk``, ...).
        prefix : {"s", "d", "c", "z"}

        Returns
        -------
        list
        """
        return sorted(
            {k[1] for k in self._series if k[0] == backend and k[2] == routine and k[3] == prefix and k[1] is not None}
        )

    def has(self, routine: str, prefix: str) -> bool:
        """Whether native was measured for ``prefix``+``routine`` (so ratios can be read).

        Parameters
        ----------
        routine : str
            Routine kind without prefix, as the table names it (``gemm``, ``herk``, ...).
        prefix : {"s", "d", "c", "z"}

        Returns
        -------
        bool
        """
        return ("native", None, routine, prefix) in self._series

    def native_seconds(self, routine: str, prefix: str, work: float) -> float:
        """Native time of a product of ``work`` multiply-adds.

        Scaled from the nearest measured size by work (n³ for the n-grid), with
        the measured rate held outside the measured range.

        Parameters
        ----------
        routine : str
            Routine kind without prefix, as the table names it (``gemm``, ``herk``, ...).
        prefix : {"s", "d", "c", "z"}
        work : float
            Multiply-adds of the product.

        Returns
        -------
        float
            Seconds.
        """
        s = self._series[("native", None, routine, prefix)]
        x = math.log(max(work, 1.0))
        rates = [(lx, math.exp(lx) / t) for lx, _, t in s]
        return math.exp(x) / _interp(rates, x)

    def ratio(self, backend: str, knob, routine: str, prefix: str, work: float) -> float | None:
        """Predicted time ratio to native at ``work``, or None where nothing was measured.

        Piecewise linear in log(work) between measured sizes, held constant outside them;
        for ozaki2 counts that were not measured, linear in the count between (or past)
        the two nearest measured counts (its phases grow linearly with the count).

        Parameters
        ----------
        backend : str
        knob : int or None
            The moduli count or levels (None for a backend without a knob).
        routine : str
            Routine kind without prefix, as the table names it (``gemm``, ``herk``, ...).
        prefix : {"s", "d", "c", "z"}
        work : float
            Multiply-adds of the product.

        Returns
        -------
        float or None
        """
        x = math.log(max(work, 1.0))
        key = (backend, knob, routine, prefix)
        if key in self._series:
            return _interp([(lx, r) for lx, r, _ in self._series[key]], x)
        if backend != "ozaki2" or knob is None:
            return None
        have = self.knobs(backend, routine, prefix)
        if len(have) < 2:
            return None
        lo = max([c for c in have if c <= knob] or have[:1])
        hi = min([c for c in have if c > lo and c >= knob] or [c for c in have if c > lo][-1:])
        if lo == hi:
            lo, hi = have[-2], have[-1]
        r_lo = self.ratio(backend, lo, routine, prefix, work)
        r_hi = self.ratio(backend, hi, routine, prefix, work)
        if r_lo is None or r_hi is None:  # lo and hi are measured knobs: not expected
            return None
        r = r_lo + (knob - lo) * (r_hi - r_lo) / (hi - lo)
        return max(r, 0.5 * min(r_lo, r_hi))


def _interp(points: list[tuple[float, float]], x: float) -> float:
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (x - x0) * (y1 - y0) / (x1 - x0)
    return points[-1][1]


def from_dict(raw: dict, path: str, shipped: bool) -> Table:
    """A :class:`Table` from its JSON form, checked enough to fail with a clear message.

    Parameters
    ----------
    raw : dict
        The parsed JSON.
    path : str
        Where it came from (for messages and :attr:`Table.label`).
    shipped : bool
        Whether it is one of the tables shipped with emublas.

    Returns
    -------
    Table

    Raises
    ------
    ValueError
        Not a cost table of this format, or an entry lacks a field.
    """
    where = f"cost table {path}"
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f"{where}: not an emublas cost table of format {FORMAT}")
    entries = raw.get("entries")
    if raw.get("device") not in ("cpu", "gpu") or not isinstance(entries, list):
        raise ValueError(f"{where}: needs 'device' (cpu or gpu) and a list of 'entries'")
    for e in entries:
        missing = {"routine", "prefix", "n", "backend", "median_s", "ratio"} - set(e)
        if missing:
            raise ValueError(f"{where}: an entry lacks {', '.join(sorted(missing))}: {e}")
    meta = {k: v for k, v in raw.items() if k != "entries"}
    # "min_dim_override" (hand-made tables, tests) replaces the measured thresholds
    fixed = int(raw["min_dim_override"]) if raw.get("min_dim_override") is not None else None
    table = Table(
        raw["device"],
        str(raw.get("hardware", "unknown hardware")),
        str(raw.get("source", "")),
        entries,
        0,
        path,
        shipped,
        meta,
        fixed,
    )
    table.min_dim = min(table._min_dims.values(), default=2**62)
    return table


_lock = threading.Lock()
_loaded: dict[str, tuple[float, Table]] = {}


def load(path: str | os.PathLike, *, shipped: bool = False) -> Table:
    """Read a table file (cached until the file changes).

    Parameters
    ----------
    path : str or os.PathLike
    shipped : bool, optional
        Whether it is one of the tables shipped with emublas.

    Returns
    -------
    Table

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not JSON, or not a cost table (see :func:`from_dict`).
    """
    p = str(path)
    mtime = os.stat(p).st_mtime
    with _lock:
        hit = _loaded.get(p)
        if hit and hit[0] == mtime:
            return hit[1]
    with open(p) as fh:
        try:
            raw = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"cost table {p}: not JSON ({exc})") from None
    table = from_dict(raw, p, shipped)
    with _lock:
        _loaded[p] = (mtime, table)
    return table


def cache_path(device: str) -> Path:
    """Where ``emublas calibrate`` stores the table of ``device``.

    Parameters
    ----------
    device : {"cpu", "gpu"}

    Returns
    -------
    pathlib.Path
        In the user cache directory (platformdirs).
    """
    import platformdirs

    return Path(platformdirs.user_cache_dir("emublas")) / f"costs-{device}.json"


def shipped_path(device: str) -> Path:
    """The table shipped with emublas for ``device``: on the CPU, the one measured on this CPU
    model where emublas ships one, else the default.

    Parameters
    ----------
    device : {"cpu", "gpu"}

    Returns
    -------
    pathlib.Path
    """
    if device == "cpu":
        own = _shipped_cpu_tables().get(cpu_model())
        if own is not None:
            return own
    return _DATA / _SHIPPED[device]


@cache
def _shipped_cpu_tables() -> dict[str, Path]:
    """The shipped CPU tables by the CPU model they were measured on (their ``hardware``)."""
    found: dict[str, Path] = {}
    for path in sorted(_DATA.glob("costs_cpu*.json")):
        try:
            with open(path) as fh:
                found.setdefault(json.load(fh).get("hardware", ""), path)
        except (OSError, ValueError):
            continue  # a damaged file is reported where it is loaded, not here
    return found


def table_source(device: str, explicit: str | None = None, *, read_env: bool = True) -> tuple[Path, bool]:
    """Which table a call on ``device`` uses (see the module docstring).

    The explicit path, else ``EMUBLAS_COST_TABLE``, else the calibrated table
    in the user cache, else the shipped one.

    Parameters
    ----------
    device : {"cpu", "gpu"}
    explicit : str, optional
        A path given by the call or the selection (the ``table`` option).
    read_env : bool, optional
        Whether ``EMUBLAS_COST_TABLE`` is consulted.

    Returns
    -------
    tuple of (pathlib.Path, bool)
        The path, and whether it is the shipped table.
    """
    if explicit:
        return Path(explicit), False
    env = os.environ.get(ENV_TABLE, "").strip() if read_env else ""
    if env:
        return Path(env), False
    cached = cache_path(device)
    if cached.is_file():
        return cached, False
    return shipped_path(device), True


#: How long a resolved table is reused before the files are looked at again (a call
#: must not pay for path lookups and stat calls; a new calibration is seen within this).
RECHECK_S = 2.0
_resolved: dict[tuple, tuple[float, Table]] = {}
_TABLE_VAR = (ENV_TABLE,)


def table_for(device: str, explicit: str | None = None, *, read_env: bool = True) -> Table:
    """The table a call on ``device`` uses, resolved at most every ``RECHECK_S`` seconds.

    Parameters
    ----------
    device : {"cpu", "gpu"}
    explicit : str, optional
        A path given by the call or the selection (the ``table`` option).
    read_env : bool, optional
        False when ``explicit`` already reflects ``EMUBLAS_COST_TABLE`` (the auto
        backend's ``table`` option reads that variable), so it is not read again.

    Returns
    -------
    Table

    Raises
    ------
    ValueError
        A named file that is missing or bad, or a table for the other device.
    """
    # env_texts: os.environ.get of an unset variable costs a caught KeyError, and the shim
    # asks for the table on every call it intercepts
    key = (device, explicit, (env_texts(_TABLE_VAR)[0] or "") if read_env else None)
    hit = _resolved.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < RECHECK_S:
        return hit[1]
    table = _table_for(device, explicit, read_env)
    _resolved[key] = (now, table)
    return table


def _table_for(device: str, explicit: str | None, read_env: bool) -> Table:
    path, shipped = table_source(device, explicit, read_env=read_env)
    try:
        table = load(path, shipped=shipped)
    except FileNotFoundError:
        raise ValueError(f"cost table {path} does not exist (set by {ENV_TABLE} or the table option)") from None
    if table.device != device:
        raise ValueError(f"cost table {path} is for the {table.device.upper()}, not the {device.upper()}")
    return table
