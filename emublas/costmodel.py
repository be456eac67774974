"""The cost model behind ``backend="auto"``: measured tables and the per-call choice.

A *table* (JSON, written by ``emublas calibrate``) holds, for one device, the
median time of each backend on a grid of square products (gemm and herk, per
BLAS prefix) with its spread, and each emulated time as a *ratio* to native's
median measured in the same run, interleaved with it.  Ratios travel between
hosts of one kind better than absolute rates (the int8 ceiling of a VM host
varies from session to session; ozaki2 and native move less relative to each
other), so the model predicts a call's native time from the table's native
times and every other candidate's time as native's times its ratio.

Which table is used, first match wins:

1. ``EMUBLAS_COST_TABLE`` (or the auto backend's ``table`` option): a path;
2. the user cache, ``<platformdirs user_cache_dir>/emublas/costs-<device>.json``,
   written by ``emublas calibrate``;
3. the table shipped in ``emublas/data`` for the device.

The choice (:func:`decide`) keeps to the accuracy the caller asked for and to
two rules that bound the damage of a wrong prediction: a call is native when
its smallest dimension is below the measured threshold of its routine and
prefix (the smallest size from which some emulated backend beat native at every
larger measured size, so a single noisy point does not count), and an
emulated backend is chosen over native only where it is predicted at least
:data:`MARGIN` faster.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

__all__ = ["FORMAT", "MARGIN", "ENV_TABLE", "Table", "Candidate", "Decision", "load", "table_for", "table_source",
           "cache_path", "shipped_path", "decide", "ozaki2_count_for_bits", "PRECISION", "STRASSEN_BITS_PER_LEVEL",
           "MODEL_ROUTINE"]

FORMAT = 1
ENV_TABLE = "EMUBLAS_COST_TABLE"
#: An emulated backend must be predicted this much faster than native to be chosen
#: (the model's own error stays inside "never more than 5% slower than native").
MARGIN = 0.95
#: Significand bits per BLAS prefix.
PRECISION = {"s": 24, "d": 53, "c": 24, "z": 53}
#: ozaki2 default moduli counts, the counts its docs give for native accuracy on ordinary data.
OZAKI2_NATIVE = {"s": 8, "d": 16, "c": 8, "z": 16}
#: Extra product bits ozaki2 needs past 2·N + log2(k) for N correct bits per entry
#: (relative to sum|a||b|).  Fitted on BENCHMARKS.md's accuracy-against-moduli tables:
#: CPU n = 256, phi = 0.5, 8/10/12/14 moduli gave 2^-21.7/-28.6/-36/-45 relative to |c|,
#: 12-15 bits past 2N + log2 k, about 4 fewer (sqrt k) relative to sum|a||b|, and 16
#: moduli were exact; H200 n = 8192: 8 and 12 moduli 2^-17.7 and 2^-33.9 relative to |c|
#: (about 6.5 fewer bits against sum|a||b|), 6-9 bits past.  10 covers them all and gives
#: the documented 16 moduli for native float64 accuracy at k = 256.
OZAKI2_SLACK_BITS = 10.0
#: Bits strassen may lose per level against the classical product, normwise: the Winograd
#: variant's bound grows about 4.5x per level relative to the classical bound (Higham,
#: Accuracy and Stability of Numerical Algorithms, 23.2.2); measured on this project's data
#: the error grew 2.3x, 2.6x, 1.9x, 1.9x per level (BENCHMARKS.md, strassen error growth).
STRASSEN_BITS_PER_LEVEL = math.log2(4.5)
#: Which measured routine predicts which call (syr2k/her2k: two products, same ratio as herk).
MODEL_ROUTINE = {"gemm": "gemm", "syrk": "herk", "herk": "herk", "syr2k": "herk", "her2k": "herk",
                 "symm": "gemm", "hemm": "gemm", "trmm": "gemm", "trsm": "gemm"}
_DATA = Path(__file__).with_name("data")
_SHIPPED = {"cpu": "costs_cpu.json", "gpu": "costs_gpu_h200.json"}


# ---------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------

@dataclass(eq=False)  # identity hash: tables key the decision cache
class Table:
    """One device's measurements (see the module docstring for the JSON layout)."""

    device: str
    hardware: str
    source: str
    entries: list[dict]
    min_dim: int
    path: str
    shipped: bool
    meta: dict = field(default_factory=dict)
    fixed_min_dim: int | None = None   # the table's "min_dim_override", replacing the measured thresholds

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
        for routine, prefix in natives:
            sizes = sorted(natives[(routine, prefix)])
            wins = {int(e["n"]) for e in self.entries if e["routine"] == routine and e["prefix"] == prefix
                    and e["backend"] != "native" and float(e["ratio"]) < 1.0}
            edge = 2 * sizes[-1] + 1
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
        return sorted({k[1] for k in self._series if k[0] == backend and k[2] == routine and k[3] == prefix
                       and k[1] is not None})

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
    table = Table(raw["device"], str(raw.get("hardware", "unknown hardware")), str(raw.get("source", "")),
                  entries, 0, path, shipped, meta, fixed)
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
    """The table shipped with emublas for ``device``.

    Parameters
    ----------
    device : {"cpu", "gpu"}

    Returns
    -------
    pathlib.Path
    """
    return _DATA / _SHIPPED[device]


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
    key = (device, explicit, os.environ.get(ENV_TABLE, "") if read_env else None)
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


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------

def ozaki2_count_for_bits(bits: int, k: int, complex_data: bool) -> int | None:
    """Smallest ozaki2 moduli count that reaches ``bits`` correct bits at depth ``k``.

    The product of the moduli (``ModulusSet.bits``; the 2M list for complex
    data) must cover ``2·bits + log2(k) + OZAKI2_SLACK_BITS``.

    Parameters
    ----------
    bits : int
        Required correct bits.
    k : int
        Inner dimension of the product.
    complex_data : bool
        Whether the 2M moduli list applies.

    Returns
    -------
    int or None
        None when no count does.
    """
    from .backends.ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, real_set, two_m_set

    need = 2.0 * bits + math.log2(max(k, 1)) + OZAKI2_SLACK_BITS
    make, top = (two_m_set, len(TWO_M_MODULI)) if complex_data else (real_set, len(REAL_MODULI))
    for count in range(1, top + 1):
        if make(count).bits >= need:
            return count
    return None


# ---------------------------------------------------------------------------
# the choice
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """One backend configuration considered for a call."""

    backend: str
    options: tuple          # ((name, value), ...), what the backend is called with
    qualifies: bool
    accuracy: str           # why it does or does not meet the requirement
    ratio: float | None     # predicted time / native's (None: not measured)
    seconds: float | None   # predicted time

    def as_dict(self) -> dict:
        """The candidate as a JSON-ready dict.

        Returns
        -------
        dict
            backend, options, qualifies, accuracy, predicted_ratio, predicted_s.
        """
        return {"backend": self.backend, "options": dict(self.options), "qualifies": self.qualifies,
                "accuracy": self.accuracy, "predicted_ratio": self.ratio, "predicted_s": self.seconds}


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`decide`: the chosen candidate and the reasoning."""

    routine: str
    shape: tuple[int, int, int]
    device: str
    requirement: str
    table: str
    chosen: Candidate
    candidates: tuple[Candidate, ...]
    reason: str

    @property
    def backend(self) -> str:
        """Name of the chosen backend.

        Returns
        -------
        str
        """
        return self.chosen.backend

    @property
    def options(self) -> dict:
        """Options the chosen backend is called with.

        Returns
        -------
        dict
        """
        return dict(self.chosen.options)

    def as_dict(self) -> dict:
        """The decision as a JSON-ready dict (what :func:`emublas.explain` returns).

        Returns
        -------
        dict
            routine, m, n, k, device, requirement, table, backend, options, reason
            and the candidates (see :meth:`Candidate.as_dict`).
        """
        return {"routine": self.routine, "m": self.shape[0], "n": self.shape[1], "k": self.shape[2],
                "device": self.device, "requirement": self.requirement, "table": self.table,
                "backend": self.chosen.backend, "options": dict(self.chosen.options), "reason": self.reason,
                "candidates": [c.as_dict() for c in self.candidates]}


def _model_work(routine: str, m: int, n: int, k: int) -> tuple[float, int]:
    """(work of the product the ratio is read at, smallest dimension that matters).

    symm/hemm/trmm/trsm on an emulating backend are recursions whose largest products are
    the half-size off-diagonal blocks: the ratio is read at that block's size.
    """
    if routine in ("symm", "hemm", "trmm", "trsm"):
        half = max(k // 2, 1)
        other = n if m == k else m
        return float(half) * half * other, min(half, other)
    return float(m) * n * k, min(m, n, k)


def requirement_text(accuracy: str, bits: int | None) -> str:
    """The accuracy requirement in words.

    Parameters
    ----------
    accuracy : {"native", "normwise"}
    bits : int or None
        Required correct bits; None: native BLAS's accuracy.

    Returns
    -------
    str
    """
    if bits is None:
        return "native accuracy (each entry within native BLAS's error bound)"
    kind = "normwise, relative to k*max|a|*max|b|" if accuracy == "normwise" else "per entry, relative to sum|a||b|"
    return f"{bits} bits ({kind})"


@lru_cache(maxsize=4096)
def _decide(table: Table, routine: str, prefix: str, m: int, n: int, k: int, accuracy: str, bits: int | None,
            usable: tuple[str, ...]) -> Decision:
    p = PRECISION[prefix]
    cplx = prefix in "cz"
    mr = MODEL_ROUTINE[routine]
    work, small = _model_work(routine, m, n, k)
    measured = table.has(mr, prefix)
    nat_s = table.native_seconds(mr, prefix, work) if measured else None
    native_bits = p - math.log2(max(k, 1))
    cands: list[Candidate] = []

    def add(backend, options, ok, why, knob=None):
        if backend == "native":
            ratio = 1.0 if measured else None
        else:
            ratio = table.ratio(backend, knob, mr, prefix, work) if measured else None
        secs = None if ratio is None or nat_s is None else ratio * nat_s
        cands.append(Candidate(backend, tuple(options), ok, why, ratio, secs))

    # native
    if bits is None:
        add("native", (), True, "native BLAS: the reference accuracy")
    else:
        ok = bits <= native_bits
        add("native", (), ok, f"native's bound k*u gives {native_bits:.1f} bits at k={k}"
            + ("" if ok else f" < {bits}"))
    # ozaki2
    count: int | None
    if "ozaki2" in usable:
        if bits is None:
            count = OZAKI2_NATIVE[prefix]
            add("ozaki2", (("moduli", count), ("mode", "accurate"), ("fallback", "dot")), True,
                f"{count} moduli, accurate mode: every entry certified against native's bound"
                " (uncertified entries recomputed)", count)
        else:
            count = ozaki2_count_for_bits(bits, k, cplx)
            if count is None:
                add("ozaki2", (), False, f"no moduli count reaches {bits} bits at k={k}")
            else:
                why = (f"{count} moduli cover 2*{bits} + log2(k) + {OZAKI2_SLACK_BITS:g} product bits"
                       + ("; the certificate covers native's bound too" if bits <= native_bits else ""))
                # below native's bound the certificate's target is stricter than asked: no recomputation
                fallback = "none" if bits <= native_bits else "dot"
                add("ozaki2", (("moduli", count), ("mode", "accurate"), ("fallback", fallback)), True, why, count)
    # strassen: gemm only (its rank-k and level-3 forms would run through full products)
    if "strassen" in usable and routine == "gemm":
        for levels in table.knobs("strassen", mr, prefix) or [1, 2]:
            if bits is None:
                ok, why = False, ("normwise error 2.3x the classical product's at one level, more per level"
                                  " (BENCHMARKS.md), and no per-entry bound: below native accuracy")
            elif accuracy != "normwise":
                ok, why = False, "only a normwise bound: qualifies only with accuracy='normwise'"
            else:
                sb = native_bits - levels * STRASSEN_BITS_PER_LEVEL
                ok = bits <= sb
                why = f"normwise bound {sb:.1f} bits at {levels} level(s)" + ("" if ok else f" < {bits}")
            if max(1, min(m, n, k) >> levels) < 16:
                ok, why = False, f"blocks too small for {levels} level(s)"
            add("strassen", (("levels", levels),), ok, why, levels)

    native = cands[0]
    emulated = [c for c in cands[1:] if c.qualifies]
    if not measured:
        chosen = native if native.qualifies or not emulated else emulated[0]
        reason = (f"no {prefix}{mr} measurements in the table: native" if chosen is native
                  else f"no {prefix}{mr} measurements and native does not meet the requirement: {chosen.backend}")
    elif not native.qualifies:
        timed = [(c.seconds, c) for c in emulated if c.seconds is not None]
        if not timed and not emulated:
            chosen, reason = native, "NO backend meets the requirement here: native (a warning says so)"
        else:
            chosen = min(timed, key=lambda t: t[0])[1] if timed else emulated[0]
            reason = "native does not meet the requirement: the fastest predicted qualifying backend"
    elif small < table.min_dim_for(mr, prefix):
        chosen, reason = native, (f"min(m, n, k) = {small} < {table.min_dim_for(mr, prefix)} (from this size up"
                                  f" an emulated {prefix}{mr} beat native at every measured size)")
    else:
        ratios = [(c.ratio, c) for c in emulated if c.ratio is not None]
        best_ratio, best = min(ratios, key=lambda t: t[0]) if ratios else (None, None)
        if best is not None and best_ratio is not None and best_ratio <= MARGIN:
            chosen, reason = best, f"predicted at {1 / best_ratio:.2f}x native's speed (needs >= {1 / MARGIN:.2f}x)"
        else:
            chosen = native
            reason = ("no qualifying emulated backend" if best_ratio is None
                      else f"best qualifying emulated backend predicted at {1 / best_ratio:.2f}x native's speed"
                           f" (needs >= {1 / MARGIN:.2f}x)")
    return Decision(prefix + routine, (m, n, k), table.device, requirement_text(accuracy, bits), table.label,
                    chosen, tuple(cands), reason)


def decide(table: Table, routine: str, prefix: str, m: int, n: int, k: int, *, accuracy: str = "native",
           bits: int | None = None, usable: tuple[str, ...] = ("ozaki2", "strassen")) -> Decision:
    """Choose the backend of one call.

    Parameters
    ----------
    table : Table
    routine : str
        Routine kind without prefix: gemm, syrk, herk, syr2k, her2k, symm, hemm, trmm, trsm.
    prefix : {"s", "d", "c", "z"}
    m, n, k : int
        The product's dimensions (rank-k: n, n, k; symm/trmm/trsm: b's m, n and a's order k).
    accuracy : {"native", "normwise"}
        ``native``: per-entry requirement; ``normwise``: also accepts a normwise bound
        (strassen), which only matters with ``bits``.
    bits : int, optional
        Required correct bits (1 up to the precision); None: native BLAS's accuracy.
    usable : tuple of str
        Emulating backends that can run here.

    Returns
    -------
    Decision
        The chosen candidate, every candidate considered and the reason.

    Raises
    ------
    ValueError
        ``bits`` beyond the dtype's precision, unknown routine or accuracy.
    """
    if routine not in MODEL_ROUTINE:
        raise ValueError(f"auto: unknown routine kind {routine!r}; valid: {', '.join(MODEL_ROUTINE)}")
    if accuracy not in ("native", "normwise"):
        raise ValueError(f"auto: accuracy must be native or normwise, got {accuracy!r}")
    if bits is not None and not 1 <= bits <= PRECISION[prefix]:
        raise ValueError(f"auto: bits={bits} is outside 1..{PRECISION[prefix]}, the precision of prefix {prefix!r}")
    return _decide(table, routine, prefix, int(m), int(n), int(k), accuracy, bits, tuple(sorted(usable)))
