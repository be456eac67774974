"""Benchmark scripts' plumbing on the CPU (no timings asserted: only what the scripts report)."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
ROW_KEYS = {
    "op",
    "m",
    "n",
    "k",
    "phi",
    "order",
    "digest",
    "input_matches_cache",
    "worker",
    "lib",
    "mode",
    "moduli",
    "reps",
    "t_med",
    "t_min",
    "t_max",
    "vs_native",
    "err_max",
    "err_med",
    "differs_from_native",
    "warnings",
}


def test_bench_gemmul8_dry_run(tmp_path):
    out = tmp_path / "g8.json"
    cmd = [
        sys.executable,
        os.path.join(BENCH, "bench_gemmul8.py"),
        "--dry-run",
        "--shapes",
        "8,8x8x4",
        "--moduli",
        "14,15",
        "--phis",
        "0.5",
        "--samples",
        "6",
        "--json",
        str(out),
        "--workdir",
        str(tmp_path / "w"),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.skip("bench_gemmul8.py --dry-run took over 20 s on this machine")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert set(doc) == {"meta", "rows", "skipped", "errors"}
    assert doc["errors"] == [] and doc["skipped"] == []
    assert [(w["op"], w["kind"], w["rc"]) for w in doc["meta"]["workers"]] == [
        ("dgemm", "emublas", 0),
        ("dgemm", "gemmul8", 0),
        ("zgemm", "emublas", 0),
        ("zgemm", "gemmul8", 0),
    ]
    rows = doc["rows"]
    # per routine and shape: cuBLAS in both processes, and 2 modes x 2 moduli counts per library
    assert len(rows) == 2 * 2 * (2 + 2 * 2 * 2)
    for r in rows:
        assert ROW_KEYS <= set(r), ROW_KEYS - set(r)
        assert r["input_matches_cache"] and r["t_min"] <= r["t_med"] <= r["t_max"]
    for key in {(r["op"], r["m"], r["k"]) for r in rows}:
        same = [r for r in rows if (r["op"], r["m"], r["k"]) == key]
        assert len({r["digest"] for r in same}) == 1  # both processes built the same inputs
        assert {(r["lib"], r["mode"], r["moduli"]) for r in same} == {
            ("cublas", None, None),
            *((lib, mode, c) for lib in ("emublas", "gemmul8") for mode in ("accurate", "fast") for c in (14, 15)),
        }
        assert all(r["err_max"] < 1e-12 for r in same)
    text = proc.stdout
    for heading in ("## (a) time", "## (b) pairing", "## hook and inputs", "## the issue's targets"):
        assert heading in text
    assert "hook ran: NOT SHOWN" in text  # numpy's matmul stands in for GEMMul8 in the dry run

    # The reported error is the exact one: rebuild one input and emublas's result here.
    sys.path.insert(0, BENCH)
    try:
        import bench_gemmul8 as bg
    finally:
        sys.path.remove(BENCH)
    import emublas
    from emublas._reference import exact_entries

    shape, phi, seed = (8, 8, 4), 0.5, doc["meta"]["seed"]
    a = bg.wide(bg.input_seed(seed, "zgemm", shape, phi, 0), (8, 4), phi, True, "C")
    b = bg.wide(bg.input_seed(seed, "zgemm", shape, phi, 1), (4, 8), phi, True, "C")
    srng = np.random.default_rng(bg.input_seed(seed, "zgemm", shape, phi, 2))
    ri, ci = srng.integers(0, 8, 6), srng.integers(0, 8, 6)
    exact = exact_entries("gemm", a[ri], b[:, ci], np.arange(6), np.arange(6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the worker recorded (and counted) the same warning
        got = emublas.zgemm(1.0, a, b, backend="ozaki2", moduli=15, mode="accurate")[ri, ci]
    row = [
        r
        for r in rows
        if (r["op"], r["k"], r["lib"], r["mode"], r["moduli"]) == ("zgemm", 4, "emublas", "accurate", 15)
    ]
    assert row[0]["err_max"] == bg.rel_errors(got, exact)[0]
    assert row[0]["digest"] == bg.digest(a, b)


def test_scripts_follow_one_naming_convention():
    """Benchmark scripts are bench_*.py beside the shared helpers (_*.py); device runs go
    through one runner, device_run.sh <job>."""
    names = sorted(os.listdir(BENCH))
    helpers = [n for n in names if n.endswith(".py") and n.startswith("_")]
    assert helpers == ["_children.py", "_timing.py"], helpers
    scripts = [n for n in names if n.endswith(".py") and not n.startswith("_")]
    assert scripts and all(n.startswith("bench_") for n in scripts), scripts
    assert [n for n in names if n.endswith(".sh")] == ["_device_setup.sh", "device_run.sh"]
    proc = subprocess.run(
        ["bash", os.path.join(BENCH, "device_run.sh"), "nosuchjob"], capture_output=True, text=True, timeout=20
    )
    assert proc.returncode == 2
    for job in ("foundation", "ozaki2", "gemmul8", "products", "gpu-tests", "min-dim"):
        assert job in proc.stderr


def test_timing_loader_is_emublas_timing_without_emublas():
    """benchmarks/_timing.py is emublas/timing.py, loaded without importing the emublas package."""
    code = (
        f"import sys; sys.path.insert(0, {BENCH!r}); import _timing; "
        "out, t = _timing.time_call(lambda: 7, 3); "
        "assert out == 7 and len(t.times) == 3 and t.min <= t.median <= t.max; "
        "assert 'emublas' not in sys.modules; print(sorted(_timing.__all__))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    from emublas import timing

    assert proc.stdout.strip() == str(sorted(timing.__all__))


def test_children_runner_reads_the_last_line_and_reports_a_failure(tmp_path, monkeypatch):
    """benchmarks/_children.py: the child's last stdout line as JSON, its environment as asked
    (the shim's variables cleared), and a failed child's stderr in the error."""
    monkeypatch.syspath_prepend(BENCH)
    from _children import run_json_child

    script = tmp_path / "child.py"
    script.write_text(
        "import json, os, sys\n"
        "if sys.argv[2] == 'fail':\n"
        "    sys.exit('the child says no')\n"
        "print('noise')\n"
        "keys = ('EMUBLAS_BACKEND', 'EMUBLAS_VERBOSE', 'EXTRA')\n"
        "print(json.dumps({'args': sys.argv[3:], 'env': [os.environ.get(k) for k in keys]}))\n"
    )
    monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
    got = run_json_child(str(script), "ok", ["7"], "native", env={"EXTRA": "x"})
    assert got == {"args": ["--", "7"], "env": ["native", None, "x"]}
    with pytest.raises(RuntimeError, match="the child says no"):
        run_json_child(str(script), "fail", [], "auto")
