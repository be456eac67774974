"""The backend protocol: a new backend is one class and one registry line.

A toy backend (numpy's matmul, with a knob that must reach it) is registered
and then used through the front (gemm, a rank-k routine derived from its gemm,
a level-3 routine built on it), the quick sweep, ``emublas.info()`` and
``emublas.dask``; the built-in backends declare what their callers read.
"""

import os
import re

import numpy as np
import pytest

import emublas
from emublas import backends, sweep
from emublas.backends import Backend, Option
from emublas.backends.base import int_range

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Toy(Backend):
    name = "toytest"
    description = "numpy matmul, rounded to `digits` decimal digits (a test backend)"
    options = {"digits": Option("digits", 12, int_range(1, 16), "decimal digits kept", env="EMUBLAS_TOYTEST_DIGITS")}
    sweep_grid = {"digits": (4, 8, 12)}
    sweep_quick_grid = {"digits": (4, 8)}
    handles_nonfinite = True  # numpy's matmul gives the IEEE pattern

    def __init__(self):
        self.calls = []

    def readiness(self):
        return {"cpu": (True, "numpy"), "gpu": (False, "cpu only")}

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, digits=12, **opts):
        self.calls.append(digits)
        op = {0: lambda x: x, 1: lambda x: x.T, 2: lambda x: x.conj().T}
        prod = np.round(alpha * (op[trans_a](a) @ op[trans_b](b)), digits)
        c[...] = prod + (beta * c if beta != 0 else 0)

    def last_run(self):
        return {"digits": self.calls[-1] if self.calls else None}


@pytest.fixture
def toy():
    be = _Toy()
    backends.register(be)
    yield be
    backends.unregister("toytest")


def test_base_declares_every_default():
    be = Backend()
    assert be.sweep_grid is None and be.sweep_quick_grid is None and be.quick_grid() is None
    assert be.last_run() is None and be.route("symm", "d", 2, 2, 2, None, {}) is None
    assert not be.handles_nonfinite and not be.native_level3 and not be.quantizes_floats
    assert not be.ignores_c_when_beta_zero  # the safe default: the front clears c
    assert be.dask_gemm(1.0, None, None, 0.0, None, conj_x=False, conj_y=False, dtype=np.float64) is NotImplemented
    assert be.syrk(1.0, None, 0.0, None, 0, 0) is NotImplemented


def test_built_in_backends_declare_what_callers_read():
    for name in backends.names():
        be = backends.get(name)
        assert be.handles_nonfinite, name  # each one gives native BLAS's NaN/Inf pattern itself
        assert be.sweep_grid is not None, name
        for grid in (be.sweep_grid, be.quick_grid(), be.quick_grid(rank_k=True)):
            assert sweep.validate_grid(be, grid, "test") is not None
    assert [n for n in backends.names() if backends.get(n).native_level3] == ["native"]
    assert [n for n in backends.names() if backends.get(n).quantizes_floats] == ["boolpack"]
    assert [n for n in backends.names() if backends.get(n).ignores_c_when_beta_zero] == ["native"]
    assert backends.get("ozaki2").quick_grid(rank_k=True)["moduli"] == (8, 16)
    assert backends.get("strassen").quick_grid() == {"levels": (1, 2)}


def test_last_run_reports_through_the_backend():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((20, 12)), rng.standard_normal((12, 9))
    emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=9)
    assert backends.get("ozaki2").last_run()["moduli"] == 9
    emublas.dgemm(1.0, a, b, backend="strassen", levels=1)
    assert backends.get("strassen").last_run() is not None
    assert backends.get("native").last_run() is None


def test_toy_backend_runs_through_the_front(toy):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 6))
    got = emublas.dgemm(2.0, a, b, backend="toytest", digits=3)
    assert np.array_equal(got, np.round(2.0 * (a @ b), 3)) and toy.calls[-1] == 3
    # the rank-k routine it does not provide is derived from its gemm
    s = emublas.dsyrk(1.0, a, lower=1, backend="toytest")
    assert np.allclose(np.tril(s), np.tril(a @ a.T), rtol=0, atol=1e-11) and toy.calls[-1] == 12
    # a level-3 routine is a recursion over its gemm, not the platform's own routine
    sym = a[:5, :5] + a[:5, :5].T
    before = len(toy.calls)
    out = emublas.dsymm(1.0, sym, b, backend="toytest")
    assert len(toy.calls) > before and np.allclose(out, sym @ b, rtol=0, atol=1e-11)
    with pytest.raises(ValueError, match="digits"):
        emublas.dgemm(1.0, a, b, backend="toytest", digits=99)


def test_toy_backend_in_the_quick_sweep(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep.measure, "OPENBLAS_SPIN_S", 0.0)
    p = sweep.plan(quick=True)
    mine = [c for c in p.configs if c.backend == "toytest"]
    assert {dict(c.knobs)["digits"] for c in mine} == {4, 8}
    assert {c.routine for c in mine} == {"dgemm", "zgemm", "zherk"}
    assert sweep.QUICK_GRIDS["toytest"] == {"digits": [4, 8]} and sweep.GRIDS["toytest"] == {"digits": [4, 8, 12]}
    # run the first group's toy and native rows (the rest of the quick grid is the same code)
    group = mine[0].group
    small = sweep.Plan([c for c in p.configs if c.group == group and c.backend in ("toytest", "native")])
    rows = sweep.run_sweep(small, str(tmp_path), reps=1, progress=None)
    by = {r["knobs"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    assert by["digits=4"]["max_rel_err"] > by["digits=8"]["max_rel_err"]  # the knob reached the backend
    assert '"digits": 4' in by["digits=4"]["run_info"]  # its last_run() report, stored with the row


def test_toy_backend_in_info(toy):
    report = emublas.info()["backends"]["toytest"]
    assert report["description"].startswith("numpy matmul")
    assert report["options"]["digits"]["env"] == "EMUBLAS_TOYTEST_DIGITS"
    assert report["cpu"] == {"usable": True, "detail": "numpy"} and not report["gpu"]["usable"]


def test_toy_backend_in_dask(toy):
    pytest.importorskip("dask.array")
    import dask.array as da

    import emublas.dask

    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((8, 6)), rng.standard_normal((6, 4))
    got = emublas.dask.matmul(
        da.from_array(a, chunks=4), da.from_array(b, chunks=3), backend="toytest", digits=6
    ).compute(scheduler="synchronous")
    assert np.allclose(got, a @ b, rtol=0, atol=1e-5) and set(toy.calls) == {6}  # blockwise through the front


def test_no_caller_checks_a_backend_name():
    """Capabilities are declared attributes: nothing compares ``<backend>.name`` with a literal."""
    names = "|".join(map(re.escape, backends.names()))
    pattern = re.compile(rf"\.name\s*[!=]=\s*['\"]({names})['\"]")
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "emublas")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                with open(path) as fh:
                    found += [f"{path}:{i}" for i, line in enumerate(fh, 1) if pattern.search(line)]
    assert found == []


class _Zeroing(_Toy):
    """A backend that does not handle NaN/Inf: it computes with them replaced by zero."""

    name = "toyzero"
    handles_nonfinite = False

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, digits=12, **opts):
        assert np.isfinite(a).all() and np.isfinite(b).all()  # the front hands it finite operands only
        super().gemm(alpha, a, b, beta, c, trans_a, trans_b, digits=digits)


@pytest.mark.parametrize("routine", ["gemm", "syrk", "syr2k"])
def test_front_gives_nonfinite_the_native_pattern_for_a_backend_that_leaves_it(routine):
    be = _Zeroing()
    backends.register(be)
    try:
        rng = np.random.default_rng(3)
        a, b = rng.standard_normal((8, 6)), rng.standard_normal((6, 8))
        a[2, 1], b[4, 5] = np.nan, np.inf
        if routine == "gemm":
            args = (1.0, a, b)
        elif routine == "syrk":
            args = (1.0, a)
        else:
            args = (1.0, a, b.T.copy())
        got = getattr(emublas, "d" + routine)(*args, backend="toyzero")
        ref = getattr(emublas, "d" + routine)(*args, backend="native")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
        fin = np.isfinite(ref)
        np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-11, atol=1e-11)
    finally:
        backends.unregister("toyzero")


@pytest.mark.parametrize("name", ["native", "ozaki2", "strassen", "boolpack", "auto"])
def test_a_cpu_call_never_looks_for_the_gpu(name):
    """check() asks only the call's own device: a numpy call does not try to import cupy."""
    import sys

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    emublas.dgemm(1.0, a, b, backend=name)  # warm: lazy imports of the backend itself
    asked = []

    class Spy:
        def find_spec(self, fullname, path=None, target=None):
            asked.append(fullname)
            return None

    spy = Spy()
    sys.meta_path.insert(0, spy)
    try:
        emublas.dgemm(1.0, a, b, backend=name)
    finally:
        sys.meta_path.remove(spy)
    assert not [m for m in asked if m.split(".")[0] == "cupy"], asked
