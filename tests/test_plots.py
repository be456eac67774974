"""Sweep plots (emublas.sweep.plots): drawn from a small results.json with matplotlib's Agg
backend, checked on the Axes: every backend labelled, labels apart, legends outside the data,
integer ticks for integer knobs, Okabe–Ito colours with a marker per backend, no pooling of
input families."""

import itertools
import json
import math
import os

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402

from emublas import sweep  # noqa: E402
from emublas.sweep import plots as sweep_plots  # noqa: E402

PALETTE = {c.lower() for c in sweep_plots.OKABE_ITO.values()}
GRID = {
    "native": [""],
    "ozaki2": [f"moduli={m};mode=accurate" for m in range(8, 23, 2)],
    "boolpack": ["bits=4", "bits=8", "bits=12"],
    "strassen": ["levels=1", "levels=2"],
}
FAMILIES = {"phi0.5": 1.0, "cancel": 3.0}  # cancel rows are slower: a pooled median would show


def _rows():
    rows = []
    for (fam, slow), n, (be, knobs) in itertools.product(
        FAMILIES.items(), (128, 256), [(b, k) for b, ks in GRID.items() for k in ks]
    ):
        kn = dict(kv.split("=") for kv in knobs.split(";") if kv)
        if be == "ozaki2":
            m = int(kn["moduli"])
            # 18..22 all reach 53 bits at nearly the same time: their markers pile up
            t, err = (1e-3 * (10 + m) if m < 18 else 2.8e-2 + 1e-5 * m), (0.0 if m >= 18 else 10.0 ** (-m))
        elif be == "boolpack":
            t, err = 1e-3 * int(kn["bits"]), 2.0 ** -int(kn["bits"])
        elif be == "strassen":
            t, err = 1e-3 * (3 - int(kn["levels"])), 1e-14 * int(kn["levels"])
        else:
            t, err = 2e-3, 1e-15
        t *= slow * (n / 128) ** 3
        bits = 53.0 if err == 0 else min(53.0, -math.log2(err))
        rows.append(
            {
                "key": f"gemm|d|{n}|{fam}|{be}|{knobs}",
                "status": "ok",
                "op": "gemm",
                "routine": "dgemm",
                "dtype": "d",
                "m": n,
                "n": n,
                "k": n,
                "family": fam,
                "backend": be,
                "knobs": knobs,
                "time_s": t,
                "max_rel_err": err,
                "bits": bits,
                "native_max_rel_err": 1e-15,
                "native_time_s": 2e-3,
                "gflops": 2 * n**3 / t / 1e9,
                "moduli_used": int(kn["moduli"]) if be == "ozaki2" else None,
            }
        )
    return rows


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    """The figures drawn from rows read back from a results.json (as `emublas plot` does)."""
    path = tmp_path_factory.mktemp("plots") / "results.json"
    path.write_text(json.dumps({"metadata": {}, "rows": _rows()}))
    rows = [sweep.json_row(r) for r in json.loads(path.read_text())["rows"]]
    figs = dict(sweep_plots.draw_figures(rows))
    for fig in figs.values():
        fig.canvas.draw()
    yield figs
    for fig in figs.values():
        plt.close(fig)


def _panels(fig):
    return [ax for ax in fig.axes if ax.axison]


def _labels(ax):
    return [t for t in ax.texts if isinstance(t, Annotation)]


def _hex(c):
    return mcolors.to_hex(c).lower()


def test_replot_writes_every_plot_from_results_json(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"metadata": {}, "rows": _rows()}))
    assert sweep.replot(str(tmp_path / "results.json")) == 0
    names = sorted(os.listdir(tmp_path / "plots"))
    for stem in (
        "accuracy_vs_speed",
        "time_rate_vs_size",
        "error_vs_moduli_ozaki2",
        "error_vs_bits_boolpack",
        "error_vs_levels_strassen",
    ):
        assert f"{stem}.png" in names and f"{stem}.svg" in names
        assert (tmp_path / "plots" / f"{stem}.png").stat().st_size > 10_000


def test_every_backend_point_is_labelled_with_its_knob_values(figures):
    fig = figures["accuracy_vs_speed"]
    panels = _panels(fig)
    assert len(panels) == 4  # dgemm x {128, 256} x {cancel, phi0.5}
    want = {
        "native": {"native"},
        "ozaki2": {str(m) for m in range(8, 23, 2)},
        "boolpack": {"4", "8", "12"},
        "strassen": {"1", "2"},
    }
    for ax in panels:
        got: dict[str, set] = {}
        for t in _labels(ax):
            be = next(b for b in want if _hex(sweep_plots.backend_style(b)[0]) == _hex(t.get_color()))
            got.setdefault(be, set()).update(t.get_text().split(","))
        assert got == want, ax.get_title()
        # the piled-up ozaki2 points at 53 bits share one label instead of four overlapping ones
        assert any("18,20,22" in t.get_text() for t in _labels(ax))
    fig = figures["time_rate_vs_size"]
    for ax in _panels(fig):
        texts = sorted(t.get_text() for t in _labels(ax))
        assert texts == sorted(["native", *map(str, range(8, 23, 2)), "4", "8", "12", "1", "2"])


def test_labels_do_not_overlap_and_stay_inside_their_panel(figures):
    checked = 0
    for fig in figures.values():
        renderer = fig.canvas.get_renderer()
        for ax in _panels(fig):
            frame = ax.get_window_extent(renderer)
            boxes = [Text.get_window_extent(t, renderer) for t in _labels(ax)]  # the text, not its leader
            for b in boxes:
                assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
            for a, b in itertools.combinations(boxes, 2):
                assert not a.overlaps(b), (ax.get_title(), a, b)
            checked += len(boxes)
    assert checked > 80


def test_legends_are_outside_every_panel(figures):
    for name, fig in figures.items():
        renderer = fig.canvas.get_renderer()
        assert all(ax.get_legend() is None for ax in fig.axes), name
        assert len(fig.legends) == 1, name
        box = fig.legends[0].get_window_extent(renderer)
        assert box.x1 <= fig.bbox.x1 + 1  # inside the saved figure
        for ax in _panels(fig):
            assert not box.overlaps(ax.get_window_extent(renderer)), (name, ax.get_title())
        assert fig.legends[0].get_texts(), name


def test_integer_knobs_get_integer_ticks(figures):
    for name in ("error_vs_moduli_ozaki2", "error_vs_bits_boolpack", "error_vs_levels_strassen"):
        for ax in _panels(figures[name]):
            assert isinstance(ax.xaxis.get_major_locator(), ticker.MaxNLocator), name
            lo, hi = ax.get_xlim()
            ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
            assert ticks and all(float(t).is_integer() for t in ticks), (name, ticks)
    strassen = _panels(figures["error_vs_levels_strassen"])[0]
    lo, hi = strassen.get_xlim()
    assert [t for t in strassen.get_xticks() if lo <= t <= hi] == [1.0, 2.0]  # not 1.0, 1.2, 1.4, ...
    for ax in _panels(figures["accuracy_vs_speed"]):
        assert all(float(t).is_integer() for t in ax.get_yticks())  # bits


def test_colours_from_the_palette_and_a_marker_per_backend(figures):
    for name, fig in figures.items():
        for ax in _panels(fig):
            for line in ax.lines:
                assert _hex(line.get_color()) in PALETTE, (name, line.get_color())
            for coll in ax.collections:
                assert isinstance(coll, PathCollection)
                for c in list(coll.get_facecolors()) + list(coll.get_edgecolors()):
                    assert c[3] == 0 or _hex(c) in PALETTE or _hex(c) == "#ffffff", (name, c)
            for t in _labels(ax):
                assert _hex(t.get_color()) in PALETTE
    legend = figures["accuracy_vs_speed"].legends[0]
    entries = {t.get_text().split(" ")[0]: h for t, h in zip(legend.get_texts(), legend.legend_handles)}
    backends = ["native", "ozaki2", "boolpack", "strassen"]
    assert set(backends) <= set(entries)
    assert len({entries[b].get_marker() for b in backends}) == 4
    assert len({_hex(entries[b].get_color()) for b in backends}) == 4
    assert sweep_plots.backend_style("newbe", ["newbe"]) != sweep_plots.backend_style("ozaki2")


def test_no_median_over_families_one_line_per_family(figures):
    for name, fig in figures.items():
        for artist in fig.findobj():
            label = artist.get_label()
            assert not (isinstance(label, str) and "median" in label.lower()), (name, artist)
        assert "over input families" not in fig.get_suptitle()
    rows = _rows()
    fig = figures["time_rate_vs_size"]
    top = [ax for ax in _panels(fig) if "time" in ax.get_ylabel()]
    assert sorted(ax.get_title().split()[1] for ax in top) == sorted(FAMILIES)  # a column per family
    for ax in top:
        fam = ax.get_title().split()[1]
        series = {(r["backend"], r["knobs"]) for r in rows if r["family"] == fam}
        assert len(ax.lines) == len(series)
        want = sorted(
            tuple(
                1e3 * r["time_s"]
                for r in sorted(rows, key=lambda r: r["n"])
                if r["family"] == fam and (r["backend"], r["knobs"]) == s
            )
            for s in series
        )
        assert sorted(tuple(line.get_ydata()) for line in ax.lines) == pytest.approx(want)
    # the error plots draw one solid line per family and the native line of the same colour
    for ax in _panels(figures["error_vs_moduli_ozaki2"]):
        solid = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
        dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
        assert len(solid) == len(dashed) == len(FAMILIES)
        assert {_hex(ln.get_color()) for ln in solid} == {_hex(ln.get_color()) for ln in dashed}
        assert len({_hex(ln.get_color()) for ln in solid}) == len(FAMILIES)
        assert len({ln.get_marker() for ln in solid}) == len(FAMILIES)
