"""emublas sweep: the exact reference, the sweep files, resume, failures, validation."""

import csv
import json
import math
import os
from fractions import Fraction

import numpy as np
import pytest

from emublas import backends, sweep
from emublas._reference import exact_dot, exact_entries, round_scaled
from emublas.backends.base import Backend, Option, int_range
from emublas.cli import main

# ---------------------------------------------------------------------------
# exact reference
# ---------------------------------------------------------------------------


def _fraction_dot(u, v):
    u = np.asarray(u)
    v = np.asarray(v)
    if u.dtype.kind == "c" or v.dtype.kind == "c":
        re = sum(
            Fraction(float(x.real)) * Fraction(float(y.real)) - Fraction(float(x.imag)) * Fraction(float(y.imag))
            for x, y in zip(u.astype(complex), v.astype(complex))
        )
        im = sum(
            Fraction(float(x.real)) * Fraction(float(y.imag)) + Fraction(float(x.imag)) * Fraction(float(y.real))
            for x, y in zip(u.astype(complex), v.astype(complex))
        )
        return complex(float(re), float(im))
    return float(sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(u, v)))


def _wild(rng, n, dtype=np.float64):
    """Values of very different magnitudes (2^-300 .. 2^300), some subnormal, some zero."""
    x = (rng.random(n) - 0.5) * np.exp2(rng.integers(-300, 300, n).astype(float))
    x[rng.random(n) < 0.1] = 0.0
    x[:2] = [5e-324 * rng.integers(1, 1000), -2.2e-308 * rng.random()]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exact_dot_matches_fractions_real(rng, dtype):
    for _ in range(20):
        n = int(rng.integers(2, 60))
        if dtype == np.float32:
            u = ((rng.random(n) - 0.5) * np.exp2(rng.integers(-60, 60, n))).astype(dtype)
            v = ((rng.random(n) - 0.5) * np.exp2(rng.integers(-60, 60, n))).astype(dtype)
        else:
            u, v = _wild(rng, n), _wild(rng, n)
        assert exact_dot(u, v) == _fraction_dot(u, v)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_exact_dot_matches_fractions_complex(rng, dtype):
    for _ in range(10):
        n = int(rng.integers(1, 40))
        u = (
            rng.standard_normal(n) * np.exp(4 * rng.standard_normal(n))
            + 1j * rng.standard_normal(n) * np.exp(4 * rng.standard_normal(n))
        ).astype(dtype)
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n) * 1e-9).astype(dtype)
        assert exact_dot(u, v) == _fraction_dot(u, v)


def test_exact_dot_cancellation_and_rounding():
    big, tiny = 2.0**200, 2.0**-200
    assert exact_dot(np.array([big, tiny, -big]), np.array([1.0, 1.0, 1.0])) == tiny  # float sum gives 0
    x = np.array([0.1, 0.7, -0.3, 1e300, 1e-300])
    assert exact_dot(np.concatenate([x, -x]), np.concatenate([x, x])) == 0.0  # exactly zero
    # one rounding only: 1 + 2^-53 + 2^-106 rounds up to 1 + 2^-52 (two roundings would give 1)
    assert exact_dot(np.array([1.0, 2.0**-53, 2.0**-106]), np.ones(3)) == 1.0 + 2.0**-52
    assert round_scaled(1, -1080) == 0.0 and round_scaled(3, -1075) == 5e-324 * 2  # subnormal rounding (ties even)
    assert round_scaled(1, 2000) == math.inf and round_scaled(-1, 2000) == -math.inf


def test_exact_entries_of_each_routine(rng):
    a = rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))
    b = rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))
    rows, cols = np.array([0, 3, 4]), np.array([0, 1, 4])
    full = {
        "syrk": a @ a.T,
        "herk": a @ a.conj().T,
        "syr2k": a @ b.T + b @ a.T,
        "her2k": a @ b.conj().T + b @ a.conj().T,
        "gemm": a @ b.T,
    }
    for op, ref in full.items():
        got = exact_entries(op, a, b.T if op == "gemm" else b, rows, cols)
        np.testing.assert_allclose(got, ref[rows, cols], rtol=1e-13)


def test_sampled_entries_lie_in_the_lower_triangle(rng):
    i, j = sweep.sample_entries("herk", (30, 30, 7), 200, rng)
    assert len(set(zip(i.tolist(), j.tolist()))) == 200
    assert (i >= j).all() and (i < 30).all() and (j >= 0).all()
    i, j = sweep.sample_entries("gemm", (3, 4, 5), 64, rng)
    assert len(i) == 12  # all entries, once each


def test_cancel_family_cancels(rng):
    a, b = sweep.make_inputs("gemm", "d", (20, 20, 64), "cancel", rng)
    exact = exact_entries("gemm", a, b, np.arange(20), np.arange(20))
    terms = np.abs(a) @ np.abs(b)
    assert np.max(np.abs(exact) / np.diag(terms)) < 2.0**-15


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------


def _tiny(**kw):
    args = dict(sizes="16", backends="native,ozaki2", grid=["ozaki2:moduli=16;mode=accurate"], samples=8)
    args.update(kw)
    return sweep.plan(**args)


def _csv_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def count_measure(monkeypatch):
    calls = []
    real = sweep.measure._measure

    def counting(cfg, *a, **k):
        calls.append(cfg.key)
        return real(cfg, *a, **k)

    monkeypatch.setattr(sweep.measure, "_measure", counting)
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    return calls


def test_tiny_sweep_writes_csv_and_json(tmp_path, count_measure):
    p = _tiny()
    assert [c.backend for c in p.configs] == ["native", "ozaki2"]
    rows = sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    csv_rows = _csv_rows(tmp_path / "results.csv")
    assert [r["backend"] for r in csv_rows] == ["native", "ozaki2"]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["metadata"]["cpu"] and doc["metadata"]["numpy"] == np.__version__ and "blas" in doc["metadata"]
    oz = doc["rows"][1]
    assert oz["knob_values"] == {"moduli": "16", "mode": "accurate"} and oz["moduli_used"] == 16
    assert oz["bits"] > 40 and oz["native_bits"] > 40 and oz["speedup"] > 0 and oz["gflops"] > 0
    assert oz["native_max_rel_err"] == doc["rows"][0]["max_rel_err"]
    assert "dgemm" in sweep.format_table(rows)


def test_resume_skips_done_rows_and_recomputes_a_deleted_one(tmp_path, count_measure):
    p = _tiny(families="phi0.5,uniform")
    sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    assert len(count_measure) == 4
    count_measure.clear()
    rows = sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    assert count_measure == [] and len(rows) == 4 and len(_csv_rows(tmp_path / "results.csv")) == 4
    # delete one ozaki2 row: only that one is recomputed (native's numbers come from its CSV row)
    path = tmp_path / "results.csv"
    kept = [line for line in path.read_text().splitlines(keepends=True) if not ("uniform" in line and "ozaki2" in line)]
    path.write_text("".join(kept))
    rows = sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    assert len(count_measure) == 1 and "uniform|ozaki2" in count_measure[0]
    assert len(_csv_rows(path)) == 4 and rows[-1]["native_bits"] is not None


def test_torn_csv_line_is_dropped_and_recomputed(tmp_path, count_measure):
    p = _tiny()
    sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    path = tmp_path / "results.csv"
    text = path.read_text()
    path.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 20])  # half of the last row
    count_measure.clear()
    sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    assert len(count_measure) == 1 and len(_csv_rows(path)) == 2


def test_interrupt_leaves_valid_files(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    real = sweep.measure._measure
    calls = []

    def stop_second(cfg, *a, **k):
        calls.append(cfg)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(cfg, *a, **k)

    monkeypatch.setattr(sweep.measure, "_measure", stop_second)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(_tiny(), str(tmp_path), reps=1, progress=None)
    assert len(_csv_rows(tmp_path / "results.csv")) == 1
    assert len(json.loads((tmp_path / "results.json").read_text())["rows"]) == 1


class _Boom(Backend):
    name = "boomtest"
    description = "test backend whose gemm raises"
    options = {"level": Option("level", 1, int_range(1, 3), "a knob")}
    sweep_grid = {"level": [1, 2]}

    def readiness(self):
        return {"cpu": (True, "test"), "gpu": (False, "test")}

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts):
        raise RuntimeError(f"boom at level {opts['level']}")


@pytest.fixture
def boom():
    backends.register(_Boom())
    yield
    backends.unregister("boomtest")


def test_failed_rows_are_recorded_and_the_sweep_goes_on(tmp_path, boom, monkeypatch):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    p = sweep.plan(sizes="16", backends="boomtest,native", samples=4)  # grid from the backend's sweep_grid
    assert [(c.backend, c.knobs) for c in p.configs] == [
        ("boomtest", (("level", 1),)),
        ("boomtest", (("level", 2),)),
        ("native", ()),
    ]
    rows = sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    by = {(r["backend"], r["knobs"]): r for r in rows}
    assert by[("native", "")]["status"] == "ok"
    assert by[("boomtest", "level=2")]["status"] == "failed"
    assert "RuntimeError: boom at level 2" in by[("boomtest", "level=2")]["error"]
    assert by[("boomtest", "level=2")]["native_bits"] is not None
    assert "FAILED" in sweep.format_table(rows)
    assert {r["status"] for r in _csv_rows(tmp_path / "results.csv")} == {"ok", "failed"}
    # a rerun skips them; --retry-failed reruns only them
    assert len(sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)) == 3
    rows = sweep.run_sweep(p, str(tmp_path), reps=1, progress=None, retry_failed=True)
    assert len(rows) == 3 and len(_csv_rows(tmp_path / "results.csv")) == 3


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(backends="native,nope"), ["nope", "ozaki2"]),
        (dict(grid=["ozaki2:bogus=1"]), ["bogus", "moduli", "mode"]),
        (dict(grid=["ozaki2:moduli=8,999"]), ["999", "1..49"]),
        (dict(grid=["ozaki2:mode=fastest"]), ["fastest", "fast, accurate, auto"]),
        (dict(families="phi0.5,gauss"), ["gauss", "uniform", "cancel"]),
        (dict(ops="gemm,trmm"), ["trmm", "her2k"]),
        (dict(dtypes="q"), ["q", "s, d, c, z"]),
        (dict(grid=["nope:x=1"]), ["nope"]),
        (dict(sizes="16", backends="native", grid=["ozaki2:moduli=8"]), ["not in --backends"]),
    ],
)
def test_bad_input_fails_before_any_work(kw, words):
    args = dict(sizes="16", backends="native,ozaki2")
    args.update(kw)
    with pytest.raises(ValueError) as exc:
        sweep.plan(**args)
    for w in words:
        assert w in str(exc.value)


def test_cli_bad_input_writes_nothing(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["sweep", "--sizes", "16", "--grid", "ozaki2:moduli=0", "--out", str(out)]) == 2
    assert "moduli" in capsys.readouterr().err and not out.exists()


def test_cli_tiny_sweep_prints_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    out = tmp_path / "o"
    assert (
        main(
            [
                "sweep",
                "--ops",
                "gemm,herk",
                "--dtypes",
                "d,z",
                "--sizes",
                "16",
                "--backends",
                "native",
                "--samples",
                "4",
                "--reps",
                "1",
                "--out",
                str(out),
                "--no-plots",
            ]
        )
        == 0
    )
    text = capsys.readouterr()
    assert "zherk" in text.err and "herk on real data (d) is the symmetric update dsyrk" in text.err
    assert "dsyrk" in text.out  # the API's herk on real data: the real symmetric update, as a row
    assert text.out.count("native") >= 3 and os.path.exists(out / "results.json")
    meta = json.loads((out / "results.json").read_text())["metadata"]
    assert "--ops gemm,herk" in meta["command"]


def test_quick_plan_uses_the_per_backend_table():
    p = sweep.plan(quick=True)
    moduli = sorted({dict(c.knobs)["moduli"] for c in p.configs if c.backend == "ozaki2" and c.op == "gemm"})
    assert moduli == sweep.QUICK_GRIDS["ozaki2"]["moduli"]
    assert {c.routine for c in p.configs} == {"dgemm", "zgemm", "zherk"}
    with pytest.raises(ValueError, match="--quick"):
        sweep.plan(quick=True, sizes="16")


def test_plots_are_skipped_with_a_message_without_matplotlib(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    rows = [{"status": "ok", "time_s": 1.0}]
    assert sweep.plot_results(rows, str(tmp_path)) == []
    assert "matplotlib is not installed; plots skipped" in capsys.readouterr().err


def test_plots_are_drawn(tmp_path, count_measure):
    pytest.importorskip("matplotlib")
    p = _tiny(grid=["ozaki2:moduli=8,16"], sizes="16,24")
    rows = sweep.run_sweep(p, str(tmp_path), reps=1, progress=None)
    names = {os.path.basename(x) for x in sweep.plot_results(rows, str(tmp_path))}
    assert names == {"error_vs_moduli_ozaki2.png", "time_rate_vs_size.png", "accuracy_vs_speed.png"}
    assert (tmp_path / "plots" / "accuracy_vs_speed.svg").exists()


# ---------------------------------------------------------------------------
# issue 18: what a first sweep shows
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grid, needle",
    [
        ("ozaki2:moduli=8..22:0", "step must be a positive integer"),
        ("ozaki2:moduli=8..22:-2", "step must be a positive integer"),
        ("ozaki2:moduli=22..8", "LO <= HI"),
    ],
)
def test_grid_range_with_bad_step_is_rejected(grid, needle):
    with pytest.raises(ValueError, match=needle):
        sweep.plan(sizes="16", backends="native,ozaki2", grid=[grid])


def test_rows_carry_time_spread_and_native_is_timed_around_the_group(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    rows = sweep.run_sweep(_tiny(), str(tmp_path), reps=2, progress=None)
    for r in rows:
        assert r["time_min_s"] <= r["time_s"] <= r["time_max_s"]
        assert r["native_time_min_s"] <= r["native_time_s"] <= r["native_time_max_s"]
    nat = next(r for r in rows if r["backend"] == "native")
    emu = next(r for r in rows if r["backend"] == "ozaki2")
    assert emu["speedup"] == pytest.approx(emu["native_time_s"] / emu["time_s"])
    assert nat["time_s"] == emu["native_time_s"]  # one native figure for the whole group
    on_disk = {r["key"]: r for r in sweep.load_rows(str(tmp_path / "results.csv"))}
    assert on_disk[emu["key"]]["native_time_max_s"] == pytest.approx(emu["native_time_max_s"])


def test_table_says_what_columns_are_and_marks_noisy_rows():
    row = {
        "key": "k",
        "status": "ok",
        "routine": "dgemm",
        "m": 8,
        "n": 8,
        "k": 8,
        "family": "phi0.5",
        "backend": "ozaki2",
        "knobs": "moduli=8;mode=accurate",
        "time_s": 1e-3,
        "time_min_s": 1e-3,
        "time_max_s": 1.1e-3,
        "native_time_min_s": 1e-3,
        "native_time_max_s": 5e-3,
        "speedup": 2.0,
        "max_rel_err": 1e-10,
        "norm_rel_err": 1e-12,
        "native_max_rel_err": 1e-15,
        "bits": 33.2,
    }
    text = sweep.format_table([row])
    assert "moduli=8, mode=accurate" in text and "1.00..1.10" in text
    assert "2.00~" in text and "not meaningful" in text
    assert "native max: native's max rel" in text and "1.0e-12" in text  # normwise beside elementwise
    quiet = sweep.format_table([{**row, "native_time_max_s": 1.2e-3}])
    assert "~" not in quiet


def test_failed_rows_are_counted_on_rerun_with_the_retry_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    out = str(tmp_path / "o")
    long_message = "unknown emulation failure " + "x" * 200

    def boom(cfg, *a, **k):
        raise RuntimeError(long_message)

    args = [
        "sweep",
        "--sizes",
        "16",
        "--backends",
        "native",
        "--samples",
        "4",
        "--reps",
        "1",
        "--out",
        out,
        "--no-plots",
    ]
    monkeypatch.setattr(sweep.measure, "_measure", boom)
    assert main(args) == 0
    first = capsys.readouterr().out
    assert long_message in first  # not cut
    assert main(args) == 0
    again = capsys.readouterr().out
    assert "1 not rerun, already in" in again and "0 finished, 1 failed" in again and "--retry-failed" in again


def test_backends_take_comma_or_space_lists(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    common = ["sweep", "--sizes", "16", "--samples", "4", "--reps", "1", "--no-plots", "--grid", "ozaki2:moduli=8"]
    assert main(common + ["--backends", "native", "ozaki2", "--out", str(tmp_path / "a")]) == 0
    assert main(common + ["--backends", "native,ozaki2", "--out", str(tmp_path / "b")]) == 0
    a = {r["backend"] for r in sweep.load_rows(str(tmp_path / "a" / "results.csv"))}
    assert a == {"native", "ozaki2"}


def test_plot_verb_redraws_from_results_json(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    sweep.run_sweep(_tiny(), str(tmp_path), reps=1, progress=None)
    assert main(["plot", str(tmp_path / "results.json"), "--out", str(tmp_path / "re")]) == 0
    assert os.listdir(tmp_path / "re" / "plots")
    assert main(["plot", str(tmp_path / "missing.json")]) == 2
