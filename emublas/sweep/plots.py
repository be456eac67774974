"""Plots of ``emublas sweep`` rows: error against each knob, time and rate against size,
accuracy against speed.

Drawn off-screen with matplotlib (Agg).  Every figure uses the Okabe–Ito palette
(distinguishable with the common colour-vision deficiencies) with a marker per
backend or per input family as a second cue, keeps its legend outside the data
panels, and labels every plotted point or line with its knob values, placed so
that no two labels overlap.  Families are never pooled: timings are drawn per
(routine, family) panel.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from .plot_layout import finish_layout, freeze_limits, merge_close, pad_log_x, place_labels, plain_log_axis

__all__ = ["OKABE_ITO", "BACKEND_STYLES", "ERR_FLOOR", "plot_results", "backend_style", "family_styles"]

#: The Okabe–Ito colour-blind-safe palette.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}
_C = OKABE_ITO

#: (colour, marker) of the built-in backends; others take the spare styles in name order.
BACKEND_STYLES: dict[str, tuple[str, str]] = {
    "native": (_C["black"], "*"),
    "ozaki2": (_C["blue"], "o"),
    "boolpack": (_C["orange"], "s"),
    "strassen": (_C["bluish green"], "^"),
}
_SPARE_STYLES = [(_C["reddish purple"], "D"), (_C["sky blue"], "v"), (_C["yellow"], "P")]
_PARETO = _C["vermillion"]  # kept out of the backend styles so the front stands apart
_FAMILY_STYLES = [
    (_C["blue"], "o"),
    (_C["orange"], "s"),
    (_C["bluish green"], "^"),
    (_C["reddish purple"], "D"),
    (_C["vermillion"], "v"),
    (_C["sky blue"], "P"),
    (_C["black"], "X"),
    (_C["yellow"], "h"),
]

ERR_FLOOR = 1e-19  # where an error of exactly 0 is drawn on log axes


def backend_style(name: str, names: list[str] | tuple[str, ...] = ()) -> tuple[str, str]:
    """The colour and marker of a backend.

    Parameters
    ----------
    name : str
        The backend's name.
    names : sequence of str, optional
        Every backend of the figure: unknown ones cycle through the spare styles
        by their position among the unknown names.

    Returns
    -------
    tuple of (str, str)
        ``(colour, marker)`` for matplotlib.
    """
    if name in BACKEND_STYLES:
        return BACKEND_STYLES[name]
    extra = sorted(n for n in set(names) | {name} if n not in BACKEND_STYLES)
    return _SPARE_STYLES[extra.index(name) % len(_SPARE_STYLES)]


def family_styles(families) -> dict[str, tuple[str, str]]:
    """The colour and marker of each input family, the same in every figure of a sweep.

    Parameters
    ----------
    families : iterable of str
        The families present.

    Returns
    -------
    dict of str to (str, str)
        ``{family: (colour, marker)}``, assigned in sorted order.
    """
    return {f: _FAMILY_STYLES[i % len(_FAMILY_STYLES)] for i, f in enumerate(sorted(set(families)))}


# ---------------------------------------------------------------------------
# row helpers
# ---------------------------------------------------------------------------


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _knobs_of(r) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in (r.get("knobs") or "").split(";") if "=" in kv)


def _size_label(r) -> str:
    return str(r["n"]) if r["m"] == r["n"] == r["k"] else f"{r['m']}x{r['n']}x{r['k']}"


def _size(r) -> float:
    return (r["m"] * r["n"] * r["k"]) ** (1 / 3)


def _is_int(v) -> bool:
    x = _num(v)
    return x is not None and math.isfinite(x) and x == int(x)


def _knob_sort_key(text: str):
    """Numeric knob values in numeric order (moduli 8 before 10), words after."""
    return [
        (0, float(v), "") if _num(v) is not None else (1, 0.0, v)
        for v in (kv.split("=", 1)[-1] for kv in text.split(";"))
    ]


def _varying_knobs(rows) -> dict[str, list[str]]:
    """Per backend, the knob names whose values differ among ``rows`` (what a label must show)."""
    out: dict[str, list[str]] = {}
    for be in {r["backend"] for r in rows}:
        seen: dict[str, set] = {}
        for r in rows:
            if r["backend"] == be:
                for k, v in _knobs_of(r).items():
                    seen.setdefault(k, set()).add(v)
        out[be] = sorted(k for k, vals in seen.items() if len(vals) > 1)
    return out


def _point_text(r, knobs: list[str]) -> str:
    """The label of one row: its varying knob values ("16", "16/auto"); the backend name for
    a backend without varying knobs (native)."""
    kn = _knobs_of(r)
    parts = []
    for k in knobs:
        v = kn.get(k, "")
        if k == "moduli" and r.get("moduli_used") is not None and not _is_int(v):
            v = f"{v}→{r['moduli_used']}"  # mode=auto: the count it chose
        parts.append(v)
    return "/".join(parts) if parts else r["backend"]


def _legend_name(be: str, knobs: list[str]) -> str:
    return f"{be} ({'/'.join(knobs)})" if knobs else be


def _pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated (smaller time and more bits is better)."""
    front = []
    for i, (t, b) in enumerate(points):
        if not any((t2 <= t and b2 >= b) and (t2 < t or b2 > b) for j, (t2, b2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


# ---------------------------------------------------------------------------
# layout: legend outside the panels, labels that do not overlap
# ---------------------------------------------------------------------------


def plot_results(rows: list[dict[str, Any]], out_dir: str, stream=None) -> list[str]:
    """Draw the three plot kinds as PNG and SVG into ``out_dir/plots``.

    Parameters
    ----------
    rows : list of dict
        The sweep's rows; those with status ok and a time are drawn.
    out_dir : str
        The sweep's folder (``plots/`` is created in it).
    stream : file, optional
        Where to say that matplotlib is missing (default: sys.stderr).

    Returns
    -------
    list of str
        The PNG paths; empty without matplotlib or without a row to draw.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "emublas sweep: matplotlib is not installed; plots skipped"
            " (pip install 'emublas[plot]', then: emublas plot DIR/results.json)",
            file=stream or sys.stderr,
        )
        return []
    ok = [r for r in rows if r.get("status") == "ok" and _num(r.get("time_s"))]
    if not ok:
        return []
    pdir = os.path.join(out_dir, "plots")
    os.makedirs(pdir, exist_ok=True)
    paths: list[str] = []
    for name, fig in draw_figures(ok):
        for ext in ("png", "svg"):
            fig.savefig(os.path.join(pdir, f"{name}.{ext}"), dpi=110)
        plt.close(fig)
        paths.append(os.path.join(pdir, f"{name}.png"))
    return paths


def draw_figures(ok: list[dict[str, Any]]):
    """Yield ``(name, figure)`` for every plot of the finished rows ``ok`` (the caller closes them)."""
    yield from _error_vs_knob(ok)
    yield "time_rate_vs_size", _time_rate_vs_size(ok)
    yield "accuracy_vs_speed", _accuracy_vs_speed(ok)


def _error_vs_knob(ok):
    """Per backend and numeric knob: panels per (routine, size), one line per family."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker
    from matplotlib.lines import Line2D

    fstyle = family_styles(r["family"] for r in ok)
    for be in sorted({r["backend"] for r in ok if r["backend"] != "native"}):
        brows = [r for r in ok if r["backend"] == be]
        for knob in sorted({k for r in brows for k in _knobs_of(r)}):
            vals = {_num(_knobs_of(r).get(knob)) for r in brows} - {None}
            if len(vals) < 2:
                continue
            integer = all(_is_int(v) for v in vals)
            panels = sorted({(r["routine"], _size_label(r)) for r in brows})
            ncol = min(3, len(panels))
            nrow = math.ceil(len(panels) / ncol)
            fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol, 3.5 * nrow), squeeze=False)
            fams_drawn: set[str] = set()
            for ax, (routine, size) in zip(axes.flat, panels):
                prow = [r for r in brows if r["routine"] == routine and _size_label(r) == size]
                others = {kk: v for r in prow for kk, v in _knobs_of(r).items() if kk != knob}
                for fam in sorted({r["family"] for r in prow}):
                    pts = sorted(
                        (_num(_knobs_of(r).get(knob)), r["max_rel_err"])
                        for r in prow
                        if r["family"] == fam and _num(_knobs_of(r).get(knob)) is not None
                    )
                    if not pts:
                        continue
                    colour, marker = fstyle[fam]
                    x, y = zip(*pts)
                    y = [max(v, ERR_FLOOR) if v is not None and math.isfinite(v) else float("nan") for v in y]
                    ax.semilogy(x, y, marker=marker, ls="-", color=colour, ms=5, lw=1.5)
                    nat = [
                        r["native_max_rel_err"]
                        for r in prow
                        if r["family"] == fam and r.get("native_max_rel_err") is not None
                    ]
                    if nat:
                        ax.axhline(max(nat[0], ERR_FLOOR), color=colour, ls="--", lw=1)
                    fams_drawn.add(fam)
                ax.axhline(ERR_FLOOR, color=_C["black"], ls=":", lw=1, alpha=0.5)
                ax.set_title(
                    f"{routine} n={size}"
                    + (f" ({', '.join(f'{a}={b}' for a, b in others.items())})" if others else ""),
                    fontsize=10,
                )
                ax.set_xlabel(knob)
                ax.set_ylabel("max elementwise rel. error")
                if integer:
                    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
                ax.grid(True, which="major", alpha=0.3)
            for ax in list(axes.flat)[len(panels) :]:
                ax.axis("off")
            handles, labels = [], []
            for fam in sorted(fams_drawn):
                colour, marker = fstyle[fam]
                handles += [
                    Line2D([], [], color=colour, marker=marker, ms=5, lw=1.5),
                    Line2D([], [], color=colour, ls="--", lw=1),
                ]
                labels += [f"{be}, {fam}", f"native, {fam}"]
            handles.append(Line2D([], [], color=_C["black"], ls=":", lw=1, alpha=0.5))
            labels.append("error 0 (exact)")
            finish_layout(fig, handles, labels, f"{be}: error vs {knob} (dashed: native on the same inputs)")
            yield f"error_vs_{knob}_{be}", fig


def _time_rate_vs_size(ok):
    """Time (top) and rate (bottom) against size: one column per (routine, family), one line
    per (backend, knobs), each labelled with its knob values at its largest size."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker
    from matplotlib.lines import Line2D

    names = sorted({r["backend"] for r in ok})
    sizes_of: dict[tuple, set] = {}
    for r in ok:
        sizes_of.setdefault((r["routine"], r["family"]), set()).add(_size(r))
    panels = sorted(p for p, s in sizes_of.items() if len(s) > 1) or sorted(sizes_of)
    panels = panels[:6]
    fig, axes = plt.subplots(2, len(panels), figsize=(4.8 * len(panels), 7.2), squeeze=False)
    labels_todo = []
    for col, (routine, fam) in enumerate(panels):
        prow = [r for r in ok if r["routine"] == routine and r["family"] == fam]
        vary = _varying_knobs(prow)
        series = sorted(
            {(r["backend"], r.get("knobs") or "") for r in prow},
            key=lambda s: (s[0] != "native", s[0], _knob_sort_key(s[1])),
        )
        shared = set.intersection(
            *[set(_knobs_of({"knobs": kn}).items()) for be, kn in series if be != "native"] or [set()]
        )
        items = {0: [], 1: []}
        for be, kn in series:
            srows = sorted((r for r in prow if r["backend"] == be and (r.get("knobs") or "") == kn), key=_size)
            xs = [_size(r) for r in srows]
            t = [1e3 * r["time_s"] for r in srows]
            g = [r["gflops"] for r in srows]
            colour, marker = backend_style(be, names)
            style = dict(color=colour, marker=marker, ms=8 if be == "native" else 5, lw=2 if be == "native" else 1)
            axes[0, col].loglog(xs, t, **style)
            axes[1, col].semilogx(xs, g, **style)
            text = _point_text(srows[-1], vary[be])
            items[0].append((xs[-1], t[-1], text, colour))
            items[1].append((xs[-1], g[-1], text, colour))
        title = f"{routine} {fam}" + (f" ({', '.join(f'{k}={v}' for k, v in sorted(shared))})" if shared else "")
        axes[0, col].set_title(title, fontsize=10)
        axes[0, col].set_ylabel("time [ms] (median of reps)")
        axes[1, col].set_ylabel("GFLOP/s (nominal)")
        xs_all = sorted({_size(r) for r in prow})
        for row in (0, 1):
            ax = axes[row, col]
            ax.set_xlabel("size (m·n·k)^(1/3)")
            ax.grid(True, which="major", alpha=0.3)
            plain_log_axis(ax.xaxis, ticker)
            ax.set_xticks(xs_all, [f"{x:.0f}" for x in xs_all])
            ax.xaxis.set_minor_locator(ticker.NullLocator())
            pad_log_x(ax)
            labels_todo.append((ax, items[row]))
        plain_log_axis(axes[0, col].yaxis, ticker)
    handles, labels = [], []
    for be in sorted(names, key=lambda b: (b != "native", b)):
        colour, marker = backend_style(be, names)
        handles.append(
            Line2D([], [], color=colour, marker=marker, ms=8 if be == "native" else 5, lw=2 if be == "native" else 1)
        )
        labels.append(_legend_name(be, _varying_knobs([r for r in ok if r["backend"] == be]).get(be, [])))
    finish_layout(fig, handles, labels, "time and rate vs size, per input family (labels: knob values)")
    renderer = fig.canvas.get_renderer()
    for ax, items in labels_todo:
        freeze_limits(ax)
        place_labels(ax, items, renderer, prefer_right=True)
    return fig


def _accuracy_vs_speed(ok):
    """Bits against time per (routine, size, family) panel, every point labelled with its knob
    values, the Pareto front joined."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker
    from matplotlib.lines import Line2D

    names = sorted({r["backend"] for r in ok})
    panels = sorted({(r["routine"], _size_label(r), r["family"]) for r in ok})[:16]
    ncol = min(4, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol, 3.8 * nrow), squeeze=False)
    todo = []
    rings: list[list] = []  # Pareto circles: obstacles for labels
    any_front = False
    for ax, (routine, size, fam) in zip(axes.flat, panels):
        prow = [
            r
            for r in ok
            if r["routine"] == routine
            and _size_label(r) == size
            and r["family"] == fam
            and r.get("bits") is not None
            and math.isfinite(r["bits"])
        ]
        vary = _varying_knobs(prow)
        pts = [(1e3 * r["time_s"], r["bits"]) for r in prow]
        per_backend = []
        for be in sorted({r["backend"] for r in prow}, key=lambda b: (b != "native", b)):
            colour, marker = backend_style(be, names)
            sel = sorted(
                ((p, r) for p, r in zip(pts, prow) if r["backend"] == be),
                key=lambda pr: _knob_sort_key(pr[1].get("knobs") or ""),
            )
            ax.scatter(
                [p[0] for p, _ in sel],
                [p[1] for p, _ in sel],
                s=70 if be == "native" else 26,
                marker=marker,
                color=colour,
                zorder=3,
                edgecolors="white" if be != "native" else "none",
                linewidths=0.4,
            )
            per_backend.append([(p[0], p[1], _point_text(r, vary[be]), colour) for p, r in sel])
        front = _pareto(pts)
        if len(front) > 1:
            any_front = True
            ax.plot(
                [pts[i][0] for i in front], [pts[i][1] for i in front], "-", color=_PARETO, lw=1.5, alpha=0.7, zorder=2
            )
            ax.scatter(
                [pts[i][0] for i in front],
                [pts[i][1] for i in front],
                s=110,
                facecolors="none",
                edgecolors=_PARETO,
                lw=1.2,
                zorder=2,
            )
            rings.append([(pts[i][0], pts[i][1], 9.0) for i in front])
        else:
            rings.append([])
        ax.set_xscale("log")
        plain_log_axis(ax.xaxis, ticker)
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.set_xlabel("time [ms]")
        ax.set_ylabel("bits of accuracy")
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.set_title(f"{routine} n={size} {fam}", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        if pts:
            pad_log_x(ax, right=1.5, left=1.4)
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo - 0.06 * (hi - lo), hi + 0.1 * (hi - lo))
        todo.append((ax, per_backend))
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    handles, labels = [], []
    for be in sorted(names, key=lambda b: (b != "native", b)):
        colour, marker = backend_style(be, names)
        handles.append(Line2D([], [], ls="none", color=colour, marker=marker, ms=10 if be == "native" else 6))
        labels.append(_legend_name(be, _varying_knobs([r for r in ok if r["backend"] == be]).get(be, [])))
    if any_front:
        handles.append(Line2D([], [], color=_PARETO, lw=1.5, marker="o", mfc="none", ms=10, alpha=0.8))
        labels.append("Pareto front")
    finish_layout(fig, handles, labels, "accuracy vs speed (labels: knob values)")
    renderer = fig.canvas.get_renderer()
    for (ax, per_backend), ring in zip(todo, rings):
        freeze_limits(ax)
        items = []
        for group in per_backend:
            px = [tuple(ax.transData.transform((x, y))) for x, y, _, _ in group]
            items += merge_close(group, px, radius=9.0)
        dots = [(x, y) for group in per_backend for x, y, _, _ in group]
        place_labels(ax, items, renderer, points=dots + ring)
    return fig
