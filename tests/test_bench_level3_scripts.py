"""bench_auto.py, bench_trsm_gpu.py and bench_shim_program.py on the CPU: their command lines, their
budgets and what they report (no timings asserted), and the trsm script's reference solve."""

import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg.blas as fblas

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
EXAMPLES = os.path.join(os.path.dirname(BENCH), "examples")
sys.path.insert(0, BENCH)

import bench_auto  # noqa: E402
import bench_shim_program  # noqa: E402
import bench_trsm_gpu  # noqa: E402


def test_bench_auto_arguments():
    assert bench_auto.parse_args([]).sizes == bench_auto.CPU_SIZES
    gpu = bench_auto.parse_args(["--device", "gpu"])
    assert gpu.sizes == [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384] and gpu.budget_s is None
    assert bench_auto.parse_args(["--device", "gpu", "--sizes", "96"]).sizes == [96]
    for bad in (["--reps", "0"], ["--sizes", "0"], ["--device", "tpu"], ["--dtypes", "s"]):
        with pytest.raises(SystemExit):
            bench_auto.parse_args(bad)
    args = bench_auto.parse_args(["--reps", "5", "--slow-s", "0.2", "--slow-reps", "2"])
    assert bench_auto.predicted_s(None, 64, args) is None
    # 3 configurations of 1 ms at n = 64 predicted at n = 128: 8x, 4 warm-ups + 5 reps
    assert bench_auto.predicted_s((64, 3e-3), 128, args) == pytest.approx(max(24e-3 * 9, 18 * bench_auto.BATCH_S))
    # slow calls: the repetitions drop to --slow-reps
    assert bench_auto.predicted_s((64, 3.0), 128, args) == pytest.approx(24.0 * 6)


def test_bench_auto_cpu_run_and_budget(tmp_path, capsys):
    out = tmp_path / "auto.json"
    argv = ["--sizes", "8", "100000", "--dtypes", "d", "--routines", "gemm", "herk", "--reps", "1"]
    assert bench_auto.main([*argv, "--budget-s", "60", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and doc["budget_s"] == 60
    assert [(r["routine"], r["n"]) for r in doc["rows"]] == [("dgemm", 8), ("dsyrk", 8)]
    # n = 100000 is predicted from n = 8 (over 10^12 times the work) and skipped, never allocated
    assert [(s["routine"], s["n"]) for s in doc["skipped"]] == [("dgemm", 100000), ("dsyrk", 100000)]
    assert all("predicted" in s["why"] for s in doc["skipped"])
    for r in doc["rows"]:
        assert r["auto_chose"] == "native"  # n = 8 is below every table's threshold
        assert set(r["median_s"]) == {"native", "auto", "ozaki2"} and r["reps"] == 1
        assert r["min_max_s"]["auto"][0] <= r["median_s"]["auto"] <= r["min_max_s"]["auto"][1]
        assert r["auto_vs_native"] == pytest.approx(r["median_s"]["auto"] / r["median_s"]["native"])
        assert isinstance(r["ok"], bool) and r["call_s"] > 0
    text = capsys.readouterr().out
    assert "SKIPPED" in text and "targets (" in text and "points skipped for the budget" in text
    # a budget already spent: nothing measured, and said so
    assert bench_auto.main([*argv, "--budget-s", "0", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["rows"] == [] and len(doc["skipped"]) == 4 and doc["targets_held"] is False


def test_bench_trsm_arguments():
    args = bench_trsm_gpu.parse_args([])
    assert (args.device, args.sizes, args.dtypes) == ("gpu", [4096, 8192, 16384], ["z", "d"])
    assert (args.side, args.lower, args.trans_a, args.diag, args.reps) == (0, 1, 0, 0, 3)
    for bad in (["--reps", "0"], ["--columns", "0"], ["--sizes", "1"], ["--trans-a", "3"], ["--dtypes", "c"]):
        with pytest.raises(SystemExit):
            bench_trsm_gpu.parse_args(bad)
    prev = {"n": 100, "timing_s": 2.0, "reference_s": 1.0}
    assert bench_trsm_gpu.predicted_s(prev, 200) == pytest.approx(2.0 * 8 + 1.0 * 4)


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_bench_trsm_system_matches_trsm(side, lower, trans, rng):
    """The reference's system M v = alpha rhs is the one trsm solves, for every side/lower/trans."""
    n = 9
    args = bench_trsm_gpu.parse_args(["--device", "cpu", "--side", str(side), "--lower", str(lower)])
    args.trans_a = trans
    tri = np.tril(rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) + 4 * np.eye(n)
    if not lower:
        tri = tri.T.copy()
    b = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    x = fblas.ztrsm(1.5, tri, b, side=side, lower=lower, trans_a=trans)
    m, low = bench_trsm_gpu.system(tri, args)
    assert np.array_equal(m, np.tril(m) if low else np.triu(m))
    vecs = x if side == 0 else x.T
    rhs = b if side == 0 else b.T
    np.testing.assert_allclose(m @ vecs, 1.5 * rhs, rtol=0, atol=1e-12)


def _exact(v) -> Fraction:
    """A long double as a Fraction: its float64 part and the float64 remainder (exact for 64 bits)."""
    hi = float(v)
    return Fraction(hi) + Fraction(float(v - np.longdouble(hi)))


def test_bench_trsm_reference_is_exact_to_long_double(rng):
    """The refined reference against an exact rational solve: far below float64's error."""
    n = 24
    m = np.tril(rng.standard_normal((n, n))) / n + np.diag(1 + rng.random(n))
    rhs = rng.standard_normal((n, 2)) * np.exp(rng.standard_normal((n, 2)))
    ref = bench_trsm_gpu.reference(np.asfortranarray(m), True, rhs, 0.75)
    for j in range(2):
        x: list[Fraction] = []
        for i in range(n):
            s = Fraction(0.75) * Fraction(float(rhs[i, j])) - sum(Fraction(float(m[i, p])) * x[p] for p in range(i))
            x.append(s / Fraction(float(m[i, i])))
        scale = max(abs(v) for v in x)
        err = max(abs(_exact(ref[i, j]) - x[i]) for i in range(n)) / scale
        assert err < 2.0**-60 if np.finfo(np.longdouble).nmant >= 63 else err < 2.0**-50


def test_bench_trsm_cpu_run(tmp_path):
    out = tmp_path / "trsm.json"
    argv = ["--device", "cpu", "--sizes", "48", "10000", "--dtypes", "z", "--reps", "1", "--columns", "3"]
    assert bench_trsm_gpu.main([*argv, "--lower", "0", "--budget-s", "60", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["n"] for r in doc["rows"]] == [48] and [s["n"] for s in doc["skipped"]] == [10000]
    r = doc["rows"][0]
    assert r["routine"] == "ztrsm" and len(r["forward_columns"]) == 3
    for be in ("native", "ozaki2"):
        assert 0 < r["backward_error"][be] < 1e-15  # a few u for a well-conditioned triangle
        assert r["forward_error"][be] < 1e-14
        assert len(r["times_s"][be]) == 1
    assert isinstance(r["faster_than_native"], bool) and isinstance(r["error_no_worse"], bool)


def test_bench_shim_program_arguments_and_commands(tmp_path, monkeypatch):
    args = bench_shim_program.parse_args(["--runs", "2", "--", "96", "32"])
    assert args.program.endswith(os.path.join("examples", "scipy_cholesky.py")) and args.program_args == ["96", "32"]
    assert bench_shim_program.parse_args(["--device", "gpu"]).program.endswith("cupy_cholesky.py")
    for bad in (["--runs", "0"], ["--warmup", "-1"], ["--program", str(tmp_path / "none.py")]):
        with pytest.raises(SystemExit):
            bench_shim_program.parse_args(bad)
    monkeypatch.setenv("EMUBLAS_INTERPOSE", "1")
    monkeypatch.setenv("EMUBLAS_BACKEND", "ozaki2")
    cmds = bench_shim_program.commands(args)
    argv, env = cmds["native"]
    assert argv[1:] == [args.program, "96", "32"] and "EMUBLAS_INTERPOSE" not in env and "EMUBLAS_BACKEND" not in env
    argv, env = cmds["shim"]
    assert argv[1:4] == ["-m", "emublas.interpose", args.program] and env["EMUBLAS_BACKEND"] == "auto"
    assert "EMUBLAS_INTERPOSE" not in env


def test_bench_shim_program_runs_both(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import os, sys\n"
        "print('elapsed_s = 0.25')\n"
        "print('checksum = 42')\n"
        "print('shim', 'emublas.interpose' in sys.modules, os.environ.get('EMUBLAS_BACKEND'), sys.argv[1:])\n"
    )
    out = tmp_path / "shim.json"
    argv = ["--program", str(prog), "--runs", "2", "--warmup", "1", "--json", str(out), "--", "x"]
    assert bench_shim_program.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["checksums"] == {"native": ["42"], "shim": ["42"]}
    assert doc["shim_vs_native"] == 1.0 and doc["target_held"] is True
    assert all("shim False None ['x']" in r["stdout"] for r in doc["runs"]["native"])
    assert all("shim True auto ['x']" in r["stdout"] for r in doc["runs"]["shim"])
    bad = tmp_path / "bad.py"
    bad.write_text("print('no time here')\n")
    with pytest.raises(RuntimeError, match="elapsed_s"):
        bench_shim_program.main(["--program", str(bad), "--runs", "1"])


def test_bench_shim_program_routes_summary(tmp_path):
    """--routes: an untimed shim run under EMUBLAS_VERBOSE=1, its lines counted per routine
    and target, emulated calls listed; other stderr lines ignored."""
    got = bench_shim_program.parse_routes(
        "emublas: dgemm 64x64x64 float64 -> native [auto(chose=native,table=t)] 0.020 ms\n"
        "a warning line\n"
        "emublas: dgemm 64x64x64 float64 -> native [auto(chose=native,table=t)] 0.030 ms\n"
        "emublas: zgemm 4096x4096x4096 complex128 -> ozaki2(moduli=16) 6.500 ms\n"
    )
    native = got["by_route"]["dgemm -> native [auto(chose=native,table=t)]"]
    assert native["calls"] == 2 and native["ms"] == pytest.approx(0.05)
    assert got["by_route"]["zgemm -> ozaki2(moduli=16)"] == {"calls": 1, "ms": 6.5}
    assert got["emulated"] == [
        {"routine": "zgemm", "dims": "4096x4096x4096", "dtype": "complex128", "target": "ozaki2(moduli=16)", "ms": 6.5}
    ]
    # a real program under the shim, end to end (the scipy example at a small size)
    out = tmp_path / "shim.json"
    argv = ["--runs", "1", "--routes", "--json", str(out), "--", "96", "32"]
    assert bench_shim_program.main(argv) == 0
    doc = json.loads(out.read_text())
    calls = sum(v["calls"] for v in doc["routes"]["by_route"].values())
    assert calls > 0 and all(k.split(" -> ")[0][0] in "sdcz" for k in doc["routes"]["by_route"])


def test_scipy_cholesky_example_is_right():
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "scipy_cholesky.py"), "100", "32"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" = ") for line in proc.stdout.splitlines())
    assert float(lines["elapsed_s"]) > 0 and float(lines["checksum"]) > 0
    assert float(lines["d relative residual"]) < 1e-14 and float(lines["z relative residual"]) < 1e-14


FAKE_CUPY = '''"""numpy dressed as cupy: the GPU branches of the scripts run on the CPU (plumbing only)."""
import numpy as _np
from numpy import *  # noqa: F403
from numpy import linalg  # noqa: F401

calls = {"sync": 0}


class _Rng:
    def __init__(self, seed):
        self._g = _np.random.default_rng(seed)

    def random(self, shape):
        return self._g.random(shape)

    def standard_normal(self, shape):
        return self._g.standard_normal(shape)


class random:  # noqa: N801
    default_rng = _Rng


class _Device:
    def synchronize(self):
        calls["sync"] += 1


class cuda:  # noqa: N801
    Device = _Device


class _Pool:
    def free_all_blocks(self):
        pass


def get_default_memory_pool():
    return _Pool()


def asnumpy(x):
    return _np.asarray(x)
'''


@pytest.fixture
def fake_cupy(tmp_path):
    """PYTHONPATH entries with a numpy-backed ``cupy`` and ``cupyx.scipy.linalg``."""
    root = tmp_path / "fake"
    (root / "cupyx" / "scipy" / "linalg").mkdir(parents=True)
    (root / "cupy.py").write_text(FAKE_CUPY)
    (root / "cupyx" / "__init__.py").write_text("")
    (root / "cupyx" / "scipy" / "__init__.py").write_text("")
    (root / "cupyx" / "scipy" / "linalg" / "__init__.py").write_text("from scipy.linalg import solve_triangular\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    return env


def test_gpu_branches_on_a_numpy_cupy(tmp_path, fake_cupy):
    """--device gpu of bench_auto and bench_trsm_gpu, and the cupy example, on numpy dressed as cupy:
    the GPU code paths run end to end (no GPU timing or GPU kernel is exercised)."""
    out = tmp_path / "auto_gpu.json"
    cmd = [sys.executable, os.path.join(BENCH, "bench_auto.py"), "--device", "gpu", "--sizes", "16", "65536"]
    cmd += ["--dtypes", "z", "--routines", "gemm", "--reps", "2", "--budget-s", "60", "--json", str(out)]
    proc = subprocess.run(cmd, env=fake_cupy, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["device"] == "gpu" and "H200" in doc["table"]
    assert [r["n"] for r in doc["rows"]] == [16] and [s["n"] for s in doc["skipped"]] == [65536]
    assert len(doc["rows"][0]["times_s"]["auto"]) == 2
    out = tmp_path / "trsm_gpu.json"
    cmd = [sys.executable, os.path.join(BENCH, "bench_trsm_gpu.py"), "--sizes", "40", "--dtypes", "d", "z"]
    cmd += ["--reps", "1", "--columns", "2", "--side", "1", "--diag", "1", "--json", str(out)]
    proc = subprocess.run(cmd, env=fake_cupy, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["device"] == "gpu" and [r["routine"] for r in doc["rows"]] == ["dtrsm", "ztrsm"]
    for r in doc["rows"]:
        assert max(r["backward_error"].values()) < 1e-15 and max(r["forward_error"].values()) < 1e-14
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "cupy_cholesky.py"), "300", "64"],
        env=fake_cupy,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" = ") for line in proc.stdout.splitlines())
    assert float(lines["z relative residual"]) < 1e-14 and float(lines["d relative residual"]) < 1e-14


FAKE_CUPY_PACKAGE = {
    "__init__.py": '''"""numpy dressed as cupy, as a package the shim can swap entry points in (no GPU: the
shim finds none, so every call stays native)."""
from numpy import *  # noqa: F403
from numpy import linalg, ndarray  # noqa: F401

from . import cublas, cuda  # noqa: F401

__version__ = "0-fake"


class _Rng:
    def __init__(self, seed):
        import numpy

        self._g = numpy.random.default_rng(seed)

    def standard_normal(self, shape):
        return self._g.standard_normal(shape)


class random:  # noqa: N801
    default_rng = _Rng


def get_default_memory_pool():
    return cuda.POOL
''',
    "cuda.py": """class Device:
    def synchronize(self):
        pass


class _Pool:
    def total_bytes(self):
        return 0

    def free_all_blocks(self):
        pass


POOL = _Pool()


class runtime:  # noqa: N801
    @staticmethod
    def getDeviceCount():
        return 0
""",
    "cublas.py": """def gemm(*args, **kwargs):
    raise NotImplementedError


def syrk(*args, **kwargs):
    raise NotImplementedError
""",
}


def test_shim_calls_gpu_runs_on_a_numpy_cupy(tmp_path):
    """bench_shim_calls_gpu.py end to end on numpy dressed as a cupy package: its children
    (native, under the shim, the shim with the pool freed), the per-product pairing and the
    op-by-op table (plumbing only: no GPU is timed)."""
    root = tmp_path / "fake"
    (root / "cupy").mkdir(parents=True)
    (root / "cupyx" / "scipy" / "linalg").mkdir(parents=True)
    for name, text in FAKE_CUPY_PACKAGE.items():
        (root / "cupy" / name).write_text(text)
    (root / "cupyx" / "__init__.py").write_text("")
    (root / "cupyx" / "scipy" / "__init__.py").write_text("")
    (root / "cupyx" / "scipy" / "linalg" / "__init__.py").write_text("from scipy.linalg import solve_triangular\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "calls.json"
    cmd = [sys.executable, os.path.join(BENCH, "bench_shim_calls_gpu.py"), "--rounds", "1", "--plain", "1"]
    cmd += ["--plain-modes", "native,shim-free", "--ops", "1", "--json", str(out), "--", "96", "32"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    # 2 constructions, 2 warm-ups, trailing updates (z: 3 blocks of 32, d: 2), 2 residuals, 4 x 4 + 4 power steps
    assert len(doc["calls"]) == 2 + 2 + (2 + 1) + 2 + 20
    assert all(len(r["device"]) == 2 and min(r["device"]) >= 0 for r in doc["calls"])
    assert set(doc["plain"]) == {"native", "shim-free"}
    assert all(x["elapsed_s"] > 0 and x["threads"] >= 1 for runs in doc["plain"].values() for x in runs)
    for mode in ("native", "shim"):
        (answer,) = doc["ops"][mode]
        names = [name for name, _, start in answer["calls"]]
        timed = [name for name, _, start in answer["calls"] if start >= answer["clock_start"]]
        assert names.count("cholesky") == 2 + 3 + 2 and timed.count("cholesky") == 3 + 2  # warm-ups untimed
    assert "cholesky calls one by one (set-up's included), shim" in proc.stdout
