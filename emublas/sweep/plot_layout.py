"""Layout helpers of the sweep's plots: labels that do not overlap, log axes, legends outside the panels."""

from __future__ import annotations

import math

__all__ = ["LABEL_SIZE", "place_labels", "merge_close", "plain_log_axis", "finish_layout", "freeze_limits", "pad_log_x"]

LABEL_SIZE = 7


def plain_log_axis(axis, ticker) -> None:
    """Ticks of a log axis at 1, 2 and 5 times the powers of ten, written as plain numbers.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        The x or y axis.
    ticker : module
        ``matplotlib.ticker`` (imported by the caller: matplotlib is optional).
    """
    axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def finish_layout(fig, handles, labels, title: str) -> None:
    """Title on top, one legend in a column of its own right of every panel, panels laid out in what is left.

    The figure widens by the legend's width, so that the panels keep their size.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    handles, labels : list
        The legend's entries.
    title : str
        The figure's title.
    """
    fig.suptitle(title, fontsize=11)
    legend = fig.legend(
        handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False, borderaxespad=0.0
    )
    renderer = fig.canvas.get_renderer()
    w_in = legend.get_window_extent(renderer).width / fig.dpi + 0.25
    fig_w, fig_h = fig.get_size_inches()
    fig.set_size_inches(fig_w + w_in, fig_h)
    right = 1.0 - w_in / (fig_w + w_in)
    fig.tight_layout(rect=(0.0, 0.0, right, 1.0))
    legend.set_bbox_to_anchor((right + 0.1 / (fig_w + w_in), 0.5), transform=fig.transFigure)


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def _candidate_offsets(prefer_right: bool) -> list[tuple[float, float]]:
    """Label offsets from a point in typographic points, nearest first; with ``prefer_right``
    (labels at the end of a line) the left half-plane comes last."""
    steps = (0, 4, 8, 13, 19, 26, 34)
    offs = {(sx * dx, sy * dy) for dx in steps for dy in steps for sx in (1, -1) for sy in (1, -1)}
    offs.discard((0, 0))

    def cost(o):
        return math.hypot(o[0], o[1] * 1.2) + (40 if prefer_right and o[0] <= 0 else 0)

    return sorted(offs, key=lambda o: (cost(o), -o[0], -o[1]))


_OFFSETS = {side: _candidate_offsets(side) for side in (False, True)}


def place_labels(
    ax,
    items,
    renderer,
    *,
    points=(),
    fontsize: float = LABEL_SIZE,
    marker_px: float = 4.0,
    pad_px: float = 2.0,
    prefer_right: bool = False,
) -> list:
    """Label data points where the labels overlap nothing.

    Each ``(x, y, text, colour)`` is written next to its point where it overlaps
    no other label (with ``pad_px`` to spare), no plotted point (those of
    ``items`` and ``points``) and stays inside the axes.  Candidates are tried
    nearest first around the point (right of it first with ``prefer_right``); a
    label too far from its point to read as its own gets a thin leader line.
    When no place is free, the least-overlapping one is taken.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes, with its limits final.
    items : list of (float, float, str, str)
        ``(x, y, text, colour)`` in data coordinates.
    renderer : matplotlib renderer
        The figure's renderer (text extents are measured with it).
    points : sequence of tuple, optional
        More points to keep clear: ``(x, y)`` or ``(x, y, radius_px)`` for larger marks.
    fontsize : float, optional
        The labels' font size in points.
    marker_px : float, optional
        The radius kept clear around each point, in pixels.
    pad_px : float, optional
        Space kept between labels, in pixels.
    prefer_right : bool, optional
        Try places right of the point first.

    Returns
    -------
    list of matplotlib.text.Text
        The text artists, in the order of ``items``.
    """
    from matplotlib.transforms import Bbox

    frame = ax.get_window_extent(renderer)
    trans = ax.transData
    px = [tuple(trans.transform((x, y))) for x, y, _, _ in items]
    dots = [(u, v, marker_px) for u, v in px]
    dots += [(*trans.transform(p[:2]), p[2] if len(p) > 2 else marker_px) for p in points]
    markers = [Bbox.from_extents(u - r, v - r, u + r, v + r) for u, v, r in dots]
    placed: list = []
    artists = []
    scale = renderer.points_to_pixels(1.0)
    for (x, y, text, colour), (u, v) in zip(items, px):
        probe = ax.annotate(
            text, (x, y), xytext=(0, 0), textcoords="offset points", fontsize=fontsize, ha="left", va="bottom"
        )
        ext = probe.get_window_extent(renderer)
        w, h = ext.width, ext.height
        probe.remove()
        best = None
        for ox, oy in _OFFSETS[prefer_right]:
            x0 = u + ox * scale - (0 if ox > 0 else w if ox < 0 else w / 2)
            y0 = v + oy * scale - (0 if oy > 0 else h if oy < 0 else h / 2)
            box = Bbox.from_bounds(x0, y0, w, h)
            inside = (
                box.x0 >= frame.x0 + 1 and box.x1 <= frame.x1 - 1 and box.y0 >= frame.y0 + 1 and box.y1 <= frame.y1 - 1
            )
            cost = sum(_overlap(box.padded(pad_px), b) for b in placed) + sum(_overlap(box, m) for m in markers)
            cost += 0.0 if inside else 1e9
            if best is None or cost < best[0]:
                best = (cost, (ox, oy), box)
            if cost == 0.0:
                break
        assert best is not None  # the candidate offsets are never empty
        _, (ox, oy), box = best
        far = math.hypot(ox, oy) > 10
        ann = ax.annotate(
            text,
            (x, y),
            xytext=(ox, oy),
            textcoords="offset points",
            fontsize=fontsize,
            color=colour,
            zorder=5,
            annotation_clip=False,
            ha="left" if ox > 0 else "right" if ox < 0 else "center",
            va="bottom" if oy > 0 else "top" if oy < 0 else "center",
            arrowprops=dict(arrowstyle="-", color=colour, lw=0.5, alpha=0.6, shrinkA=0, shrinkB=marker_px / scale)
            if far
            else None,
        )
        placed.append(box)
        artists.append(ann)
    return artists


def freeze_limits(ax) -> None:
    """Keep the axes' current limits when more is drawn (labels, leader lines).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes.
    """
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())


def pad_log_x(ax, right: float = 1.6, left: float = 1.25) -> None:
    """Widen a log x axis, to leave room for labels at the first and last points.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes.
    right : float, optional
        Factor the upper limit is multiplied by.
    left : float, optional
        Factor the lower limit is divided by.
    """
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo / left, hi * right)


# ---------------------------------------------------------------------------
# the three plot kinds
# ---------------------------------------------------------------------------


def merge_close(items, px, radius: float):
    """One label for the points of one backend drawn on top of each other (``"18,20,22"``).

    Points closer than ``radius`` pixels form clusters (chained); each cluster's
    label lists the texts in the order of ``items``.

    Parameters
    ----------
    items : list of (float, float, str, str)
        ``(x, y, text, colour)`` in data coordinates.
    px : list of (float, float)
        The same points in pixels.
    radius : float
        The distance, in pixels, below which points merge.

    Returns
    -------
    list of (float, float, str, str)
        One item per cluster, anchored at its rightmost-topmost point.
    """
    parent = list(range(len(items)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(items)):
        for j in range(i):
            if math.hypot(px[i][0] - px[j][0], px[i][1] - px[j][1]) < radius:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(items)):
        groups.setdefault(root(i), []).append(i)
    out = []
    for g in groups.values():
        # anchor the label at the cluster's rightmost-topmost point
        x, y, _, colour = items[max(g, key=lambda i: (px[i][1], px[i][0]))]
        out.append((x, y, ",".join(items[i][2] for i in g), colour))
    return out
