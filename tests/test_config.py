"""Backend selection: precedence, options, environment, validation, threads."""

import threading

import numpy as np
import pytest

import emublas
from emublas import backends
from emublas.backends.base import Backend, Option, boolean, choice, int_range
from emublas.backends.native.backend import BACKEND as NATIVE


class Recorder(Backend):
    """A backend that computes with native gemm and records the options it was given."""

    name = "recorder"
    description = "test double"
    options = {
        "level": Option("level", 2, int_range(0, 5, also=("auto",)), "an integer knob", env="EMUBLAS_TEST_LEVEL"),
        "mode": Option("mode", "fast", choice("fast", "accurate"), "a choice knob"),
        "flag": Option("flag", False, boolean, "an on/off knob"),
    }

    def __init__(self):
        self.seen = []

    def readiness(self):
        return {"cpu": (True, "test"), "gpu": (False, "test double has no GPU path")}

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts):
        self.seen.append(dict(opts))
        NATIVE.gemm(alpha, a, b, beta, c, trans_a, trans_b)


@pytest.fixture
def recorder(monkeypatch):
    for var in ("EMUBLAS_BACKEND", "EMUBLAS_TEST_LEVEL", "EMUBLAS_MODE", "EMUBLAS_FLAG"):
        monkeypatch.delenv(var, raising=False)
    rec = Recorder()
    backends.register(rec)
    emublas.set_backend(None)
    yield rec
    emublas.set_backend(None)
    backends.unregister("recorder")


def _call(**kw):
    a = np.random.default_rng().standard_normal((3, 2))
    return emublas.dgemm(1.0, a, a, trans_b=1, **kw)


def test_default_is_native(recorder):
    sel = emublas.get_backend()
    assert (sel.backend, sel.source) == ("native", "default")
    _call()
    assert recorder.seen == []


def test_precedence_call_over_use_over_set_over_env(recorder, monkeypatch):
    monkeypatch.setenv("EMUBLAS_BACKEND", "recorder")
    assert emublas.get_backend().source == "environment"
    _call()
    assert recorder.seen[-1] == {"level": 2, "mode": "fast", "flag": False}
    emublas.set_backend("native")
    _call()
    assert len(recorder.seen) == 1  # set_backend beats the environment
    with emublas.use("recorder", level=4):
        _call()
        assert recorder.seen[-1]["level"] == 4
        _call(backend="native")  # the call beats use()
        assert len(recorder.seen) == 2
        _call(level=1)  # call options beat use() options
        assert recorder.seen[-1]["level"] == 1
    _call()
    assert len(recorder.seen) == 3


def test_options_layering_env_then_selection_then_call(recorder, monkeypatch):
    monkeypatch.setenv("EMUBLAS_TEST_LEVEL", "5")
    monkeypatch.setenv("EMUBLAS_MODE", "ACCURATE")
    _call(backend="recorder")
    assert recorder.seen[-1] == {"level": 5, "mode": "accurate", "flag": False}
    emublas.set_backend("recorder", flag="yes")
    _call()
    assert recorder.seen[-1] == {"level": 5, "mode": "accurate", "flag": True}
    with emublas.use("recorder", level="auto"):
        _call(mode="fast")
    assert recorder.seen[-1] == {"level": "auto", "mode": "fast", "flag": False}


def test_options_of_other_backend_selection_do_not_leak(recorder):
    with emublas.use("recorder", level=0):
        with emublas.use("native"):
            _call(backend="recorder")
    assert recorder.seen[-1]["level"] == 2


def test_nested_use_restores(recorder):
    with emublas.use("recorder"):
        with emublas.use("native"):
            assert emublas.get_backend().backend == "native"
        assert emublas.get_backend().backend == "recorder"
    assert emublas.get_backend().backend == "native"


def test_use_restores_after_exception(recorder):
    with pytest.raises(RuntimeError):
        with emublas.use("recorder"):
            raise RuntimeError("boom")
    assert emublas.get_backend().backend == "native"


def test_use_is_thread_local(recorder):
    seen = {}

    def worker():
        seen["other"] = emublas.get_backend().backend

    with emublas.use("recorder"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        seen["self"] = emublas.get_backend().backend
    assert seen == {"other": "native", "self": "recorder"}


def test_set_backend_is_process_wide(recorder):
    emublas.set_backend("recorder")
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("b", emublas.get_backend().backend))
    t.start()
    t.join()
    assert out["b"] == "recorder"


@pytest.mark.parametrize(
    "make",
    [
        lambda: emublas.set_backend("nope"),
        lambda: emublas.use("nope").__enter__(),
        lambda: _call(backend="nope"),
    ],
)
def test_unknown_backend_lists_valid(recorder, make):
    with pytest.raises(ValueError, match="valid backends: .*native"):
        make()


def test_unknown_backend_in_env_fails_on_read(recorder, monkeypatch):
    monkeypatch.setenv("EMUBLAS_BACKEND", "ozaky")
    with pytest.raises(ValueError, match="EMUBLAS_BACKEND.*ozaky.*native"):
        _call()


@pytest.mark.parametrize(
    "opts, pattern",
    [
        ({"levle": 1}, "no option 'levle'.*valid options: flag, level, mode"),
        ({"level": 9}, "outside.*valid values: integers 0..5 or auto"),
        ({"level": 1.5}, "not an integer"),
        ({"mode": "slow"}, "'slow' is not one of fast, accurate"),
        ({"flag": "maybe"}, "not a boolean"),
    ],
)
def test_bad_options_rejected_everywhere(recorder, opts, pattern):
    with pytest.raises(ValueError, match=pattern):
        emublas.set_backend("recorder", **opts)
    with pytest.raises(ValueError, match=pattern):
        with emublas.use("recorder", **opts):
            pass
    with pytest.raises(ValueError, match=pattern):
        _call(backend="recorder", **opts)
    assert recorder.seen == []


def test_bad_env_option_fails_on_read(recorder, monkeypatch):
    monkeypatch.setenv("EMUBLAS_TEST_LEVEL", "many")
    _call()  # native: the variable is not read
    with pytest.raises(ValueError, match="EMUBLAS_TEST_LEVEL.*valid values"):
        _call(backend="recorder")


def test_native_has_no_options(recorder):
    with pytest.raises(ValueError, match="no option 'level'.*valid options: none"):
        _call(level=3)


def test_unavailable_device_is_an_error_not_a_fallback(recorder):
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no GPU")
    except Exception:
        pytest.skip("no usable CUDA driver")
    a = cupy.ones((2, 2))
    with pytest.raises(emublas.BackendUnavailableError, match="recorder.*GPU"):
        emublas.dgemm(1.0, a, a, backend="recorder")


def test_registry_rules(recorder):
    with pytest.raises(ValueError, match="already registered"):
        backends.register(Recorder())
    with pytest.raises(ValueError, match="built in"):
        backends.unregister("native")
    assert "recorder" in backends.names() and "native" in backends.names()


def test_set_backend_none_takes_no_options(recorder):
    with pytest.raises(ValueError, match="no options"):
        emublas.set_backend(None, level=1)


def test_ozaki2_devices_option_parses():
    from emublas.backends.base import device_list

    assert device_list(None) is None and device_list("current") is None and device_list("") is None
    assert device_list("all") == "all"
    assert device_list("0, 1") == (0, 1) and device_list([2, 0]) == (2, 0) and device_list(3) == (3,)
    for bad in ("a,b", "-1", "0,0", [], 1.5, True):
        with pytest.raises(ValueError, match="device"):
            device_list(bad)


def test_ozaki2_devices_from_environment(emublas, monkeypatch):
    monkeypatch.setenv("EMUBLAS_DEVICES", "0,1")
    monkeypatch.setenv("EMUBLAS_MULTI_GPU_SPLIT", "tiles")
    be, opts = emublas.config.resolve("ozaki2", {})
    assert opts["devices"] == (0, 1) and opts["split"] == "tiles"
    monkeypatch.setenv("EMUBLAS_MULTI_GPU_SPLIT", "diagonal")
    with pytest.raises(ValueError, match="moduli"):
        emublas.config.resolve("ozaki2", {})


# ---------------------------------------------------------------------------
# EMUBLAS_NUM_THREADS and the shared environment parsers
# ---------------------------------------------------------------------------


def test_env_parsers_live_below_backends_and_kernels():
    import ast
    import pathlib

    from emublas import _env
    from emublas.backends import base

    for name in ("int_range", "boolean", "env_value", "env_flag", "env_int", "env_reader"):
        assert getattr(base, name) is getattr(_env, name)  # the old public names still work
    path = pathlib.Path(emublas.__file__).parent / "_kernels" / "cpu.py"
    tree = ast.parse(path.read_text())
    mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert "_env" in mods and not [m for m in mods if "backends" in m]  # no import up the layers
    src = (pathlib.Path(emublas.__file__).parent / "_env.py").read_text()
    assert "from ." not in src and "import emublas" not in src


def test_env_reader_follows_the_variable_and_raises_on_every_bad_read(monkeypatch):
    """A reader parses each value once, yet sees a change at once and a bad value every time."""
    from emublas.backends.base import env_reader

    var = "EMUBLAS_TEST_READER"
    monkeypatch.delenv(var, raising=False)
    read = env_reader(var, int_range(0, 9), 4)
    assert read() == 4
    for text, want in (("7", 7), ("", 4), (" 3 ", 3), ("7", 7)):
        monkeypatch.setenv(var, text)
        assert read() == want
    monkeypatch.setenv(var, "12")
    for _ in range(2):  # not cached as a value: the second read raises too
        with pytest.raises(ValueError, match=f"environment variable {var}='12'.*0, 9"):
            read()
    monkeypatch.delenv(var)
    assert read() == 4


@pytest.mark.parametrize("name", backends.names())
def test_ready_is_the_readiness_verdict(name):
    be = backends.get(name)
    assert be.ready("cpu") is bool(be.device_readiness("cpu")[0])


def test_auto_is_not_ready_with_a_bad_cost_table(monkeypatch, tmp_path):
    from emublas.backends.auto import tables

    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    monkeypatch.setenv(tables.ENV_TABLE, str(bad))
    auto = backends.get("auto")
    assert auto.device_readiness("cpu")[0] is False and auto.ready("cpu") is False


@pytest.fixture
def threads_env(monkeypatch):
    from emublas._kernels import cpu

    monkeypatch.delenv(cpu.ENV_THREADS, raising=False)
    monkeypatch.setattr(cpu, "_threads_cache", None)
    return cpu


@pytest.mark.parametrize("raw", ["99999999999999999999", "0", "-3", "4097", "two", "1.5", "1e3"])
def test_num_threads_out_of_range_names_variable_and_range(threads_env, monkeypatch, raw):
    cpu = threads_env
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", raw)
    with pytest.raises(ValueError) as info:
        cpu.default_threads()
    msg = str(info.value)
    assert f"EMUBLAS_NUM_THREADS={raw!r}" in msg and f"1..{cpu.MAX_THREADS}" in msg, msg


def test_num_threads_too_big_fails_cleanly_through_a_kernel_call(threads_env, monkeypatch):
    cpu = threads_env
    if not cpu.available():
        pytest.skip(cpu.load_error())
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "99999999999999999999")
    a = np.ones((4, 4), np.int8)
    with pytest.raises(ValueError, match=r"EMUBLAS_NUM_THREADS=.*outside \[1, 4096\]"):
        cpu.i8gemm(a, a)
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "2")
    assert (cpu.i8gemm(a, a) == 4).all()


def test_num_threads_empty_means_unset(threads_env, monkeypatch):
    cpu = threads_env
    unset = cpu.default_threads()
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "")
    assert cpu.default_threads() == unset
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "  ")
    assert cpu.default_threads() == unset
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", " 3 ")
    assert cpu.default_threads() == 3


def test_default_threads_is_cached_and_rereads_a_changed_variable(threads_env, monkeypatch):
    import os

    cpu = threads_env
    calls = []

    def affinity(pid):
        calls.append(pid)
        return {0, 1, 2, 3, 4}

    monkeypatch.setattr(os, "sched_getaffinity", affinity, raising=False)
    assert [cpu.default_threads() for _ in range(20)] == [5] * 20
    assert len(calls) == 1  # one system call per process, not one per kernel call
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "7")
    assert cpu.default_threads() == 7
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "2")
    assert cpu.default_threads() == 2
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="EMUBLAS_NUM_THREADS"):
        cpu.default_threads()  # a bad value is never served from the cache
    with pytest.raises(ValueError, match="EMUBLAS_NUM_THREADS"):
        cpu.default_threads()
    monkeypatch.delenv("EMUBLAS_NUM_THREADS")
    assert cpu.default_threads() == 5 and len(calls) == 2
