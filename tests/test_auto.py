"""backend="auto": the choice against synthetic cost tables, explain()/auto_last(), the
calibrate command, EMUBLAS_BACKEND=auto, and auto's results against native's."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg.blas as fblas

import emublas
from emublas.backends.auto import model, tables
from emublas.backends.base import parse_bits
from emublas.backends.ozaki2.moduli import real_set, two_m_set
from emublas.explain import format_decision

SIZES = [64, 256, 1024, 4096]


def _table(ratios, *, min_dim=None, prefixes="dz", strassen=None):
    """A table dict: native n^3 * 1 ns; ozaki2 ratios per (prefix, routine) -> {count: f(n)}."""
    entries = []
    for p in prefixes:
        for routine in ("gemm", "herk"):
            for n in SIZES:
                nat = 1e-9 * n**3
                entries.append(
                    {
                        "routine": routine,
                        "prefix": p,
                        "n": n,
                        "backend": "native",
                        "knob": None,
                        "median_s": nat,
                        "ratio": 1.0,
                    }
                )
                for count, f in ratios.get((p, routine), {}).items():
                    r = f(n)
                    entries.append(
                        {
                            "routine": routine,
                            "prefix": p,
                            "n": n,
                            "backend": "ozaki2",
                            "knob": count,
                            "median_s": r * nat,
                            "ratio": r,
                        }
                    )
                if routine == "gemm" and strassen:
                    for lv, f in strassen.items():
                        entries.append(
                            {
                                "routine": "gemm",
                                "prefix": p,
                                "n": n,
                                "backend": "strassen",
                                "knob": lv,
                                "median_s": f(n) * nat,
                                "ratio": f(n),
                            }
                        )
    t = {"format": 1, "device": "cpu", "hardware": "synthetic", "source": "test", "entries": entries}
    if min_dim is not None:
        t["min_dim_override"] = min_dim
    return t


def _load(tmp_path, table, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(table))
    return tables.load(path), path


# ozaki2 2x faster than native on large complex products, 3x slower on everything real
FAST_Z = {
    ("z", "gemm"): {8: lambda n: 0.3 if n >= 1024 else 4.0, 16: lambda n: 0.5 if n >= 1024 else 5.0},
    ("z", "herk"): {8: lambda n: 0.3 if n >= 1024 else 4.0, 16: lambda n: 0.5 if n >= 1024 else 5.0},
    ("d", "gemm"): {8: lambda n: 2.0, 16: lambda n: 3.0},
    ("d", "herk"): {8: lambda n: 2.0, 16: lambda n: 3.0},
}


def test_small_sizes_native(tmp_path):
    t, _ = _load(tmp_path, _table(FAST_Z))
    assert t.min_dim_for("gemm", "z") == 1024  # from here up an emulated entry beat native at every size
    assert t.min_dim_for("gemm", "d") > 4096  # never

    for n in (8, 64, 256, 1000):
        d = model.decide(t, "gemm", "z", n, n, n)
        assert d.backend == "native" and d.options == {}
        assert "min(m, n, k)" in d.reason
    # a skinny product is judged by its smallest dimension
    assert model.decide(t, "gemm", "z", 4096, 4096, 64).backend == "native"


def test_large_complex_picks_ozaki2_with_native_accuracy(tmp_path):
    t, _ = _load(tmp_path, _table(FAST_Z))
    for routine in ("gemm", "herk", "her2k"):
        d = model.decide(t, routine, "z", 2048, 2048, 2048)
        assert d.backend == "ozaki2"
        # native accuracy: the default count, accurate mode, uncertified entries recomputed
        assert d.options == {"moduli": 16, "mode": "accurate", "fallback": "dot"}
        assert math.isclose(d.chosen.ratio, 0.5)
    # real data: ozaki2 slower, native
    d = model.decide(t, "gemm", "d", 2048, 2048, 2048)
    assert d.backend == "native" and "< 8193" in d.reason  # no size where ozaki2 wins: never emulated


def test_margin_keeps_native_when_gain_is_small(tmp_path):
    t, _ = _load(tmp_path, _table({("z", "gemm"): {16: lambda n: 0.97}}))
    d = model.decide(t, "gemm", "z", 4096, 4096, 4096)
    assert d.backend == "native"  # 0.97 > MARGIN: a 3% predicted gain does not pay for the model's error
    t, _ = _load(tmp_path, _table({("z", "gemm"): {16: lambda n: 0.9}}), "t2.json")
    assert model.decide(t, "gemm", "z", 4096, 4096, 4096).backend == "ozaki2"


def test_bits_respected(tmp_path):
    t, _ = _load(tmp_path, _table(FAST_Z))
    k = 2048
    d = model.decide(t, "gemm", "z", k, k, k, bits=20)
    assert d.backend == "ozaki2"
    count = d.options["moduli"]
    assert count < 16
    assert two_m_set(count).bits >= 2 * 20 + math.log2(k) + model.OZAKI2_SLACK_BITS
    assert two_m_set(count - 1).bits < 2 * 20 + math.log2(k) + model.OZAKI2_SLACK_BITS
    # certified to the 20 bits asked for (native's bound, stricter, would fail every entry)
    assert d.options["fallback"] == "dot" and d.options["bits"] == 20
    # more bits than native's bound guarantees at this k: native does not qualify, ozaki2 is
    # chosen even though it is predicted slower
    d = model.decide(t, "gemm", "d", k, k, k, bits=50)
    nat = d.candidates[0]
    assert not nat.qualifies and d.backend == "ozaki2"
    assert real_set(d.options["moduli"]).bits >= 2 * 50 + math.log2(k) + model.OZAKI2_SLACK_BITS
    assert d.options["fallback"] == "dot" and d.options["bits"] == 50
    # bits within native's bound on a real product where ozaki2 is slower: native
    assert model.decide(t, "gemm", "d", k, k, k, bits=30).backend == "native"
    with pytest.raises(ValueError, match="bits=54"):
        model.decide(t, "gemm", "d", k, k, k, bits=54)
    with pytest.raises(ValueError, match="bits=25"):
        model.decide(t, "gemm", "s", k, k, k, bits=25)
    assert parse_bits("none") is None and parse_bits("12") == 12
    with pytest.raises(ValueError):
        parse_bits(0)
    with pytest.raises(ValueError):
        parse_bits("x")


def test_ozaki2_count_for_bits_monotone():
    counts = [model.ozaki2_count_for_bits(b, 1024, False) for b in range(1, 54)]
    assert counts == sorted(counts) and counts[-1] <= 22
    # native's own bits at k = 256 (53 - 8) take no more than the documented native default
    assert model.ozaki2_count_for_bits(45, 256, False) <= model.OZAKI2_NATIVE["d"]
    assert model.ozaki2_count_for_bits(45, 256, True) <= model.OZAKI2_NATIVE["z"]


def test_strassen_only_normwise_with_bits(tmp_path):
    t, _ = _load(tmp_path, _table(FAST_Z, strassen={1: lambda n: 0.8, 2: lambda n: 0.7}))
    n = 4096
    d = model.decide(t, "gemm", "d", n, n, n)
    assert d.backend == "native"
    assert all(not c.qualifies for c in d.candidates if c.backend == "strassen")
    assert model.decide(t, "gemm", "d", n, n, n, bits=20).backend == "native"  # per entry: no strassen
    d = model.decide(t, "gemm", "d", n, n, n, bits=20, accuracy="normwise")
    assert d.backend == "strassen" and d.options == {"levels": 2}
    # a requirement two levels cannot meet but one can
    bits = int(53 - 12 - 1.5 * model.STRASSEN_BITS_PER_LEVEL)
    d = model.decide(t, "gemm", "d", n, n, n, bits=bits, accuracy="normwise")
    assert d.backend == "strassen" and d.options == {"levels": 1}
    # rank-k routines never go to strassen
    assert model.decide(t, "herk", "d", n, n, n, bits=20, accuracy="normwise").backend == "native"


def test_unmeasured_prefix_and_unusable_backend(tmp_path):
    t, _ = _load(tmp_path, _table(FAST_Z))
    d = model.decide(t, "gemm", "c", 4096, 4096, 4096)
    assert d.backend == "native" and "no cgemm measurements" in d.reason
    d = model.decide(t, "gemm", "z", 4096, 4096, 4096, usable=())
    assert d.backend == "native"


def test_interpolation_between_sizes_and_counts(tmp_path):
    t, _ = _load(tmp_path, _table({("z", "gemm"): {8: lambda n: 1.0 + 8 / n**0.5, 16: lambda n: 2.0}}))
    # between measured sizes: between their ratios
    r = t.ratio("ozaki2", 8, "gemm", "z", 512.0**3)
    assert 1.0 + 8 / 1024**0.5 < r < 1.0 + 8 / 256**0.5
    # a count between measured counts: linear in the count
    r12 = t.ratio("ozaki2", 12, "gemm", "z", 4096.0**3)
    assert math.isclose(r12, (t.ratio("ozaki2", 8, "gemm", "z", 4096.0**3) + 2.0) / 2)
    assert t.ratio("strassen", 1, "gemm", "z", 1e9) is None
    # native seconds scale with the work outside the grid
    assert math.isclose(t.native_seconds("gemm", "z", 8192.0**3), 1e-9 * 8192**3, rel_tol=1e-9)


def test_bad_tables(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not an emublas cost table"):
        tables.load(bad)
    with pytest.raises(ValueError, match="does not exist"):
        tables.table_for("cpu", str(tmp_path / "missing.json"))
    gpu = _table(FAST_Z)
    gpu["device"] = "gpu"
    _, path = _load(tmp_path, gpu, "gpu.json")
    with pytest.raises(ValueError, match="for the GPU"):
        tables.table_for("cpu", str(path))


@pytest.fixture
def forced(tmp_path, monkeypatch):
    """A table under which auto emulates every d/z product from n = 16 (ozaki2 predicted 2x faster)."""
    ratios = {(p, r): {8: lambda n: 0.5, 16: lambda n: 0.5} for p in "dz" for r in ("gemm", "herk")}
    table = _table(ratios, min_dim=16)
    table["entries"] = [dict(e, n=e["n"] // 64 or 1) for e in table["entries"]]  # sizes 1..64
    path = tmp_path / "forced.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv(tables.ENV_TABLE, str(path))
    return path


def test_explain_and_auto_last(forced):
    a = np.ones((40, 30)) + 1j
    d = emublas.explain("zgemm", 1.0, a, a, trans_b=2)
    assert (d["m"], d["n"], d["k"]) == (40, 40, 30)
    assert d["backend"] == "ozaki2" and d["options"]["moduli"] == 16
    assert d["table"] == str(forced) and "native accuracy" in d["requirement"]
    names = [c["backend"] for c in d["candidates"]]
    assert names[:2] == ["native", "ozaki2"]
    nat, oz = d["candidates"][:2]
    assert nat["predicted_s"] > 0 and math.isclose(oz["predicted_s"] / nat["predicted_s"], 0.5)
    text = format_decision(d)
    assert "zgemm 40x40x30" in text and "ozaki2(moduli=16" in text and "reason:" in text
    # bits through explain; rank-k shapes
    d = emublas.explain("dsyrk", 1.0, np.ones((20, 50)), trans=1, bits=10)
    assert (d["m"], d["n"], d["k"]) == (50, 50, 20) and d["options"]["moduli"] < 16
    d = emublas.explain("ztrsm", 1.0, np.eye(24), np.ones((24, 5)))
    assert d["routine"] == "ztrsm" and d["k"] == 24
    with pytest.raises(ValueError, match="unknown routine"):
        emublas.explain("xgemm", 1.0, a, a)
    # the record of a call that ran
    emublas.zgemm(1.0, a, a, trans_b=2, backend="auto")
    last = emublas.auto_last()
    assert last["backend"] == "ozaki2" and last["routine"] == "zgemm" and last["candidates"]
    emublas.zgemm(1.0, a[:8, :8], a[:8, :8], backend="auto")
    assert emublas.auto_last()["backend"] == "native"  # below the table's min_dim


def test_env_backend_auto(forced, monkeypatch, rng):
    monkeypatch.setenv("EMUBLAS_BACKEND", "auto")
    a, b = rng.standard_normal((64, 48)), rng.standard_normal((48, 32))
    c = emublas.dgemm(1.0, a, b)
    assert emublas.get_backend().backend == "auto"
    assert emublas.auto_last()["backend"] == "ozaki2"
    np.testing.assert_allclose(c, a @ b, rtol=0, atol=48 * 2**-52 * np.abs(a).max() * np.abs(b).max() * 48)
    monkeypatch.setenv("EMUBLAS_AUTO_BITS", "12")
    emublas.dgemm(1.0, a, b)
    assert emublas.auto_last()["options"]["moduli"] < 16
    monkeypatch.setenv("EMUBLAS_AUTO_BITS", "77")
    with pytest.raises(ValueError, match="EMUBLAS_AUTO_BITS"):
        emublas.dgemm(1.0, a, b)


def _bound(kind, a, b, k, u):
    """native's entrywise bound k*u*|a||b| (with a factor 4 for complex arithmetic)."""
    return 4 * k * u * (np.abs(a) @ np.abs(b))


FAMILIES = ["gemm", "syrk", "herk", "syr2k", "her2k", "symm", "hemm", "trmm", "trsm"]


@pytest.mark.parametrize("prefix", ["d", "z"])
@pytest.mark.parametrize("kind", FAMILIES)
def test_auto_equals_native_within_accuracy(forced, rng, prefix, kind):
    if kind in ("herk", "her2k", "hemm") and prefix == "d":
        pytest.skip("complex-only routine")
    dt = np.float64 if prefix == "d" else np.complex128
    u = 2.0**-53

    def rand(*shape):
        x = rng.standard_normal(shape) * np.exp(0.5 * rng.standard_normal(shape))
        if prefix == "z":
            x = x + 1j * rng.standard_normal(shape)
        return np.asfortranarray(x.astype(dt))

    n, k = 40, 36
    name = prefix + kind
    ours, ref = getattr(emublas, name), getattr(fblas, name)
    if kind == "gemm":
        a, b = rand(n, k), rand(k, n)
        args, bound = (1.0, a, b), _bound(kind, a, b, k, u)
    elif kind in ("syrk", "herk"):
        a = rand(n, k)
        args, bound = (1.0, a), _bound(kind, a, a.conj().T, k, u)
    elif kind in ("syr2k", "her2k"):
        a, b = rand(n, k), rand(n, k)
        args, bound = (1.0, a, b), 2 * (_bound(kind, a, b.conj().T, k, u) + _bound(kind, b, a.conj().T, k, u))
    elif kind in ("symm", "hemm"):
        a, b = rand(n, n), rand(n, k)
        full = np.triu(a) + np.triu(a, 1).conj().T if kind == "hemm" else np.triu(a) + np.triu(a, 1).T
        args, bound = (1.0, a, b), _bound(kind, full, b, n, u)
    else:
        a = rand(n, n) + 8 * n * np.eye(n)  # well conditioned for trsm
        b = rand(n, k)
        args, bound = (1.0, a, b), _bound(kind, np.triu(a), b, n, u)
    got = ours(*args, backend="auto")
    assert emublas.auto_last()["backend"] == "ozaki2", "the table forces the emulated path"
    want = ref(*args)
    if kind in ("syrk", "herk", "syr2k", "her2k"):
        got, want, bound = np.triu(got), np.triu(want), np.triu(bound)
    if kind == "trsm":
        # backward error: a_upper @ x reproduces b as well as native's solution does
        res_got = np.abs(np.triu(a) @ got - b).max()
        res_want = np.abs(np.triu(a) @ want - b).max()
        assert res_got <= 8 * max(res_want, n * u * np.abs(b).max())
    else:
        assert np.all(np.abs(got - want) <= 2 * bound)  # each within native's bound of the exact value


def test_s_and_c_stay_native_without_measurements(forced, rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(emublas.sgemm(1.0, a, a, backend="auto"), fblas.sgemm(1.0, a, a))
    assert emublas.auto_last()["backend"] == "native"


def test_interpose_verbose_names_table(forced):
    from emublas.interpose import _used_options

    a = np.ones((32, 32))
    emublas.dgemm(1.0, a, a, backend="auto")
    shown = _used_options("auto", {"accuracy": "native", "bits": None, "table": None})
    assert shown == {"chose": "ozaki2:16", "table": str(forced)}


def test_info_names_table(forced):
    r = emublas.info()
    assert r["auto_tables"]["cpu"] == str(forced)
    assert r["backends"]["auto"]["cpu"]["usable"]


def test_sweep_declares_auto():
    from emublas import backends
    from emublas.sweep import GRIDS, QUICK_GRIDS, validate_grid

    for table in (GRIDS, QUICK_GRIDS):
        assert validate_grid(backends.get("auto"), table["auto"], "test") == {"accuracy": ["native"]}


def _run(args, env):
    return subprocess.run(
        [sys.executable, "-m", "emublas", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_calibrate_quick_subprocess(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop(tables.ENV_TABLE, None)
    r = _run(["calibrate", "--quick", "--dtypes", "d", "--sizes", "16,32", "--reps", "1"], env)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "cache" / "emublas" / "costs-cpu.json"
    assert path.is_file() and str(path) in r.stderr
    raw = json.loads(path.read_text())
    assert raw["device"] == "cpu" and raw["format"] == tables.FORMAT
    got = {(e["routine"], e["n"], e["backend"], e["knob"]) for e in raw["entries"]}
    assert ("gemm", 32, "native", None) in got and ("herk", 16, "ozaki2", 16) in got
    assert ("gemm", 16, "strassen", 1) in got
    for e in raw["entries"]:
        assert e["min_s"] <= e["median_s"] <= e["max_s"] and e["ratio"] > 0
    table = tables.load(path)
    assert table.label == str(path)
    # emublas info names the table calibrate wrote
    r = _run(["info"], env)
    assert r.returncode == 0 and f"cpu: {path}" in r.stdout
    # --out elsewhere; bad arguments are one-line errors
    out = tmp_path / "elsewhere.json"
    r = _run(["calibrate", "--quick", "--dtypes", "z", "--sizes", "16", "--reps", "1", "--out", str(out)], env)
    assert r.returncode == 0 and json.loads(out.read_text())["entries"]
    r = _run(["calibrate", "--quick", "--dtypes", "q"], env)
    assert r.returncode == 2 and "unknown prefix 'q'" in r.stderr
    try:
        import cupy  # noqa: F401

        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        has_gpu = False
    if not has_gpu:  # a one-line error, no traceback
        r = _run(["calibrate", "--device", "gpu", "--quick"], env)
        assert r.returncode == 2 and "calibrate --device gpu" in r.stderr and "Traceback" not in r.stderr


def test_tiny_sweep_with_auto(forced, tmp_path, monkeypatch):
    from emublas import sweep

    monkeypatch.setattr(sweep, "OPENBLAS_SPIN_S", 0.0)
    p = sweep.plan(sizes="32", backends="native,auto", samples=8, families="phi0.5")
    assert [c.backend for c in p.configs] == ["native", "auto"]
    rows = sweep.run_sweep(p, str(tmp_path / "sw"), reps=1, progress=None)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert rows[1]["knobs"] == "accuracy=native" and rows[1]["bits"] > 40


def test_shipped_tables_load_and_h200_table_is_a_calibration():
    for device in ("cpu", "gpu"):
        t = tables.load(tables.shipped_path(device), shipped=True)
        assert t.device == device and t.label.startswith("shipped default for ")
        assert t.has("gemm", "d") and t.has("gemm", "z")
    shipped = json.loads(tables.shipped_path("gpu").read_text())
    assert shipped["source"] == "emublas calibrate on NVIDIA H200"
    assert shipped["grid"]["sizes"] == [1024, 2048, 4096, 8192, 16384]
    # what the calibration measured on the H200: zgemm emulated from 4096 (0.92x cuBLAS's time
    # at 16 moduli), dgemm only at 16384 (0.91x), zherk from 8192
    t = tables.load(tables.shipped_path("gpu"), shipped=True)
    assert model.decide(t, "gemm", "z", 8192, 8192, 8192).backend == "ozaki2"
    assert model.decide(t, "gemm", "z", 2048, 2048, 2048).backend == "native"
    assert all(model.decide(t, "gemm", "d", n, n, n).backend == "native" for n in (1024, 4096, 8192))
    assert model.decide(t, "gemm", "d", 16384, 16384, 16384).backend == "ozaki2"
    assert model.decide(t, "herk", "z", 16384, 16384, 16384).backend == "ozaki2"


def test_shipped_cpu_table_follows_the_cpu_model(monkeypatch):
    """Each shipped CPU table is chosen on the CPU model it was measured on; any other model
    gets the default table."""
    shipped = sorted(tables.shipped_path("gpu").parent.glob("costs_cpu*.json"))
    assert len(shipped) >= 2
    models = {}
    for path in shipped:
        t = tables.load(path, shipped=True)
        assert t.device == "cpu" and t.has("gemm", "d") and t.has("gemm", "z")
        assert t.hardware not in models, f"two shipped tables for {t.hardware}"
        models[t.hardware] = path
    for hardware, path in models.items():
        monkeypatch.setattr(tables, "cpu_model", lambda h=hardware: h)
        assert tables.shipped_path("cpu") == path
        assert tables.table_source("cpu", read_env=False) in ((path, True), (tables.cache_path("cpu"), False))
    monkeypatch.setattr(tables, "cpu_model", lambda: "a CPU no table was measured on")
    assert tables.shipped_path("cpu").name == "costs_cpu.json"
    assert tables.shipped_path("gpu").name == "costs_gpu_h200.json"


def test_decision_cache_follows_shape_table_and_options(forced, tmp_path, monkeypatch):
    """The per-shape decision cache: each call's own record, a new table option or bits seen at
    once, a changed table file seen within RECHECK_S, and bounded in size."""
    from emublas.backends.auto import backend as auto_backend

    auto = auto_backend.BACKEND
    a = np.ones((40, 40)) + 1j
    for n, want in ((40, "ozaki2"), (8, "native"), (40, "ozaki2"), (8, "native")):
        emublas.zgemm(1.0, a[:n, :n], a[:n, :n], backend="auto")
        last = emublas.auto_last()
        assert (last["m"], last["backend"]) == (n, want)
    # a table under which nothing is emulated, given per call: applies at once, same shape
    never = tmp_path / "never.json"
    never.write_text(json.dumps(_table({})))
    emublas.zgemm(1.0, a, a, backend="auto", table=str(never))
    assert emublas.auto_last()["backend"] == "native" and emublas.auto_last()["table"] == str(never)
    emublas.zgemm(1.0, a, a, backend="auto", bits=10)
    assert emublas.auto_last()["options"]["moduli"] < 16
    emublas.zgemm(1.0, a, a, backend="auto")
    assert emublas.auto_last()["options"]["moduli"] == 16
    # the forced table's file rewritten (nothing emulated): seen once RECHECK_S has passed
    monkeypatch.setattr(tables, "RECHECK_S", 0.0)
    # route()'s memo holds the re-check time made with the old RECHECK_S: forget it, as that
    # time passing would
    monkeypatch.setattr(auto, "_last_route", auto_backend._NO_ROUTE)
    forced.write_text(json.dumps(_table({})))
    os.utime(forced, (1, 1))  # a new mtime even within the clock's resolution
    emublas.zgemm(1.0, a, a, backend="auto")
    assert emublas.auto_last()["backend"] == "native"
    # bounded
    monkeypatch.setattr(auto_backend, "CACHE_SIZE", 5)
    for n in range(1, 20):
        emublas.dgemm(1.0, np.ones((n, 3)), np.ones((3, 2)), backend="auto")
        assert len(auto._decisions) <= 5
        assert (emublas.auto_last()["m"], emublas.auto_last()["n"]) == (n, 2)


def test_route_keeps_each_threads_last_decision():
    """route()'s shortcut writes a thread's record (auto_last) only when another thread took the
    entry last; any other delivery of a decision (choice(), as the shim asks) makes the next
    route() of that thread write it again.  Each thread's auto_last is its own last call."""
    import threading

    from emublas.backends.auto import backend as auto_backend

    auto = auto_backend.BACKEND
    opts = emublas.config.resolve("auto")[1]
    out = np.zeros((300, 300), order="F")

    def route(m):
        auto.route("gemm", "d", m, 300, 300, out, opts)
        return emublas.auto_last()["m"]

    assert route(300) == 300
    assert route(300) == 300  # the shortcut, nothing written
    auto.choice("gemm", "d", 7, 300, 300, "cpu", opts)  # another record for this thread
    assert emublas.auto_last()["m"] == 7
    assert route(300) == 300  # written again, though the shape is the last one route() saw
    seen = {}

    def other():
        seen["first"] = emublas.auto_last()  # a new thread has no record yet
        seen["routed"] = route(300)  # the entry another thread took last: written for this one
        seen["again"] = route(300)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"first": None, "routed": 300, "again": 300}
    assert route(300) == 300  # the other thread took the entry last: this one's record still right
    auto.choice("gemm", "d", 9, 300, 300, "cpu", opts)
    t = threading.Thread(target=lambda: seen.update(late=route(300)))
    t.start()
    t.join()
    assert seen["late"] == 300 and emublas.auto_last()["m"] == 9  # each thread its own
    assert route(300) == 300


def test_route_reuses_the_last_entry_only_for_the_same_array_type(monkeypatch):
    """route()'s shortcut (the last call's entry) is taken for the same shape, options dict and
    array type, so a call of the same shape on another device's arrays is decided for that
    device; the decisions are the cached ones either way."""
    from emublas.backends.auto import backend as auto_backend

    class Other(np.ndarray):  # stands in for cupy's array type (a GPU is not needed here)
        pass

    auto = auto_backend.BACKEND
    monkeypatch.setattr(auto, "_last_route", auto_backend._NO_ROUTE)  # no call remembered from other tests
    monkeypatch.setattr(auto_backend, "_device", lambda c: "gpu" if isinstance(c, Other) else "cpu")
    asked = []
    real = auto._cached
    monkeypatch.setattr(auto, "_cached", lambda *a: asked.append(a[2]) or real(*a))
    opts = emublas.config.resolve("auto")[1]
    out = np.zeros((300, 300), order="F")
    other = out.view(Other)
    for c in (out, out, other, other, out):
        auto.route("gemm", "d", 300, 300, 300, c, opts)
    assert asked == ["cpu", "gpu", "cpu"]
    auto.route("gemm", "d", 300, 300, 301, out, opts)  # another shape: decided (cached) anew
    assert asked == ["cpu", "gpu", "cpu", "cpu"]


def test_cached_decision_still_warns_every_call(tmp_path, monkeypatch):
    """A call no backend qualifies for warns on every call, not only when first decided."""
    t = _table(FAST_Z)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(t))
    monkeypatch.setenv(tables.ENV_TABLE, str(path))
    monkeypatch.setattr(emublas.backends.get("auto"), "_usable", {"cpu": ()})  # native only
    a = np.ones((8, 8))
    for _ in range(2):
        with pytest.warns(UserWarning, match="no backend here meets") as caught:
            emublas.dgemm(1.0, a, a, backend="auto", bits=53)
        assert {w.filename for w in caught} == {__file__}  # the caller's line, cached or not
    for call in (  # the rank-k and level-3 fronts route through auto too
        lambda: emublas.dsyrk(1.0, a, backend="auto", bits=53),
        lambda: emublas.dtrsm(1.0, a + 8 * np.eye(8), a, backend="auto", bits=53),
        lambda: emublas.gemm(1.0, a, a, backend="auto", bits=53),
    ):
        with pytest.warns(UserWarning, match="no backend here meets") as caught:
            call()
        assert {w.filename for w in caught} == {__file__}
