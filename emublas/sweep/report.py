"""The sweep's table: one line per configuration, with a legend saying what each column is."""

from __future__ import annotations

import math
from typing import Any

from .plan import knobs_shown

__all__ = ["NOISY_SPREAD", "noisy", "format_table"]


def _fmt(v, spec: str, width: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-".rjust(width)
    return format(v, spec).rjust(width)


#: A timing whose slowest repetition is more than this times its fastest is too noisy
#: for the speedup beside it to mean anything (marked ``~`` in the table).
NOISY_SPREAD = 1.5


def noisy(row: dict[str, Any]) -> bool:
    """Whether the spread of this row's or native's timings makes its speedup meaningless.

    Parameters
    ----------
    row : dict
        A sweep row (``time_min_s``, ``time_max_s`` and the ``native_`` ones).

    Returns
    -------
    bool
        True when max exceeds ``NOISY_SPREAD`` times min for either.
    """
    for pre in ("", "native_"):
        lo, hi = row.get(pre + "time_min_s"), row.get(pre + "time_max_s")
        if lo and hi and hi > NOISY_SPREAD * lo:
            return True
    return False


def format_table(rows: list[dict[str, Any]]) -> str:
    """The sweep's table: one row per configuration, with a legend saying what each column is.

    Parameters
    ----------
    rows : list of dict
        The sweep's rows.

    Returns
    -------
    str
        The table, header and legend included.
    """
    head = (
        f"{'routine':7s} {'n':>11s} {'family':8s} {'backend':8s} {'knobs':26s} {'median ms':>9s}"
        f" {'min..max ms':>17s} {'speedup':>8s} {'max rel':>9s} {'norm rel':>9s} {'native max':>10s}"
        f" {'bits':>5s}"
    )
    lines = [head, "-" * len(head)]
    marked = False
    for r in rows:
        m, n, k = r["m"], r["n"], r["k"]
        size = str(n) if m == n == k else f"{m}x{n}x{k}"
        knobs = knobs_shown(r.get("knobs"))
        if r.get("moduli_used") is not None and "auto" in knobs:
            knobs += f" (used {r['moduli_used']})"
        ms = lambda v: None if v is None else v * 1e3  # noqa: E731
        spread = "-"
        if r.get("time_min_s") is not None and r.get("time_max_s") is not None:
            spread = f"{r['time_min_s'] * 1e3:.2f}..{r['time_max_s'] * 1e3:.2f}"
        speed = _fmt(r.get("speedup"), ".2f", 7) + ("~" if noisy(r) and r.get("speedup") else " ")
        marked |= speed.endswith("~")
        line = (
            f"{r['routine']:7s} {size:>11s} {r['family']:8s} {r['backend']:8s} {knobs:26s}"
            f" {_fmt(ms(r.get('time_s')), '.2f', 9)} {spread:>17s} {speed:>8s}"
            f" {_fmt(r.get('max_rel_err'), '.1e', 9)} {_fmt(r.get('norm_rel_err'), '.1e', 9)}"
            f" {_fmt(r.get('native_max_rel_err'), '.1e', 10)} {_fmt(r.get('bits'), '.1f', 5)}"
        )
        if r["status"] != "ok":
            line += f"  FAILED: {r.get('error') or ''}"
        lines.append(line)
    lines.append("")
    lines.append(
        "median ms / min..max ms: this configuration's time over the timed repetitions;"
        " speedup: native's median time / this one's (same inputs);"
    )
    lines.append(
        "max rel / norm rel: largest elementwise and normwise relative error on the sampled entries"
        " against the exact product; native max: native's max rel on the same inputs;"
        " bits: -log2(max rel)"
    )
    if marked:
        lines.append(
            f"~: the slowest repetition of this row or of native took over {NOISY_SPREAD}x the fastest;"
            " the speedup is not meaningful (a busy machine): rerun with more --reps on a quiet one"
        )
    return "\n".join(lines)
