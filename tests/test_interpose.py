"""The interpose shim in-process: swapping, routing, fall-through, threads, stats."""

import threading

import numpy as np
import pytest
import scipy.linalg._fblas as fblas
import scipy.linalg.blas as sblas

import emublas
import emublas.interpose as shim

ORIGINALS = {name: getattr(sblas, name) for name in shim.SCIPY_NAMES}


@pytest.fixture
def active(monkeypatch):
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "0")
    monkeypatch.delenv("EMUBLAS_VERBOSE", raising=False)
    monkeypatch.delenv("EMUBLAS_BACKEND", raising=False)
    emublas.set_backend(None)
    shim.reset_stats()
    shim.install("ozaki2")
    yield
    shim.uninstall()
    emublas.set_backend(None)


def test_install_uninstall_restore_identity():
    shim.install()
    shim.install()  # idempotent
    assert shim.installed()
    for name in shim.SCIPY_NAMES:
        assert sblas.__dict__[name] is not ORIGINALS[name]
        assert getattr(fblas, name) is sblas.__dict__[name]
        assert "emublas interpose" in sblas.__dict__[name].__doc__
    shim.uninstall()
    shim.uninstall()
    assert not shim.installed()
    for name in shim.SCIPY_NAMES:
        assert getattr(sblas, name) is ORIGINALS[name]
        assert getattr(fblas, name) is ORIGINALS[name]


def test_get_blas_funcs_returns_replacements_with_scipy_attributes(active, rng):
    a = rng.standard_normal((70, 70))
    f = sblas.get_blas_funcs("gemm", (a,))
    assert f is sblas.dgemm and f.__name__ == "dgemm"
    assert (f.typecode, f.prefix, f.module_name) == ("d", "d", "fblas")
    assert f.dtype == np.float64
    shim.uninstall()
    g = sblas.get_blas_funcs("gemm", (a,))
    assert g is ORIGINALS["dgemm"]  # memo cleared again on uninstall


def test_routed_calls_are_emulated_and_correct(active, rng):
    a, b = rng.standard_normal((80, 70)), rng.standard_normal((70, 90))
    za = a[:, :64] + 1j * rng.standard_normal((80, 64))
    out = sblas.dgemm(1.5, a, b)
    np.testing.assert_allclose(out, 1.5 * a @ b, rtol=1e-12, atol=1e-12)
    h = sblas.zherk(1.0, za, lower=1)
    np.testing.assert_allclose(np.tril(h), np.tril(za @ za.conj().T), rtol=1e-12, atol=1e-12)
    assert shim.stats() == {"dgemm:emulated": 1, "zherk:emulated": 1}
    assert emublas.ozaki2.last_run()["routine"] == "herk"


def test_min_dim_falls_through(active, rng, monkeypatch):
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "64")
    a = rng.standard_normal((10, 100))
    sblas.dgemm(1.0, a, a, trans_b=1)  # 10x10x100: m < 64
    sblas.dgemm(1.0, a.T, a)  # 100x100x10: k < 64
    assert shim.stats() == {"dgemm:native": 2}
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "-3")
    with pytest.raises(ValueError, match="EMUBLAS_MIN_DIM"):
        sblas.dgemm(1.0, a, a, trans_b=1)


def test_native_backend_falls_through(active, rng):
    emublas.set_backend("native")
    a = rng.standard_normal((70, 70))
    assert np.array_equal(sblas.dgemm(1.0, a, a), ORIGINALS["dgemm"](1.0, a, a))
    assert shim.stats() == {"dgemm:native": 1}


def test_scipy_errors_and_warnings_kept(active, rng):
    a = rng.standard_normal((70, 60))
    with pytest.raises(Exception) as ours:
        sblas.dgemm(1.0, a, a)
    with pytest.raises(Exception) as theirs:
        ORIGINALS["dgemm"](1.0, a, a)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    with pytest.raises(Exception) as ours:
        sblas.dgemm(1.0, a, a.T, trans_a=5)
    assert "trans_a" in str(ours.value)
    assert shim.stats() == {"dgemm:native": 2}


def test_errors_inside_emulation_propagate(active, rng, monkeypatch):
    monkeypatch.setenv("EMUBLAS_MODULI", "zero")
    a = rng.standard_normal((70, 70))
    with pytest.raises(ValueError, match="EMUBLAS_MODULI"):
        sblas.dgemm(1.0, a, a)


def test_threads_keep_their_own_use_context(active, rng):
    emublas.set_backend("native")
    a = rng.standard_normal((70, 70))
    seen = {}

    def worker(name, backend):
        with emublas.use(backend):
            sblas.dgemm(1.0, a, a)
            seen[name] = emublas.get_backend().backend

    threads = [threading.Thread(target=worker, args=(f"t{i}", b)) for i, b in enumerate(["ozaki2", "native"] * 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"t0": "ozaki2", "t1": "native", "t2": "ozaki2", "t3": "native"}
    assert shim.stats() == {"dgemm:emulated": 2, "dgemm:native": 2}


def test_verbose_lines(active, rng, monkeypatch, capsys):
    monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
    a = rng.standard_normal((70, 66))
    sblas.dgemm(1.0, a, a, trans_b=1)
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "100")
    sblas.dsyrk(1.0, a)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("emublas: dgemm 70x70x66 float64 -> ozaki2(") and err[0].endswith(" ms")
    assert err[1].startswith("emublas: dsyrk 70x70x66 float64 -> native [min dim < 100]")


def test_runner_module(tmp_path, rng):
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, numpy as np, scipy.linalg.blas as b\n"
        "a = np.arange(80 * 80, dtype=float).reshape(80, 80) / 7\n"
        "c = b.dgemm(1.0, a, a)\n"
        "import emublas.interpose as s\n"
        "print(sys.argv[1:], s.stats(), float(abs(c - a @ a).max() / abs(a @ a).max()) < 1e-14)\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "emublas.interpose",
            "--backend",
            "ozaki2",
            "--option",
            "moduli=18",
            str(script),
            "x",
            "y",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "EMUBLAS_MIN_DIM": "0"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['x', 'y'] {'dgemm:emulated': 1} True"
    bad = subprocess.run(
        [sys.executable, "-m", "emublas.interpose", "--backend", "nope", str(script)], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "valid backends" in bad.stderr


def test_pth_file_matches_its_source():
    """interpose/emublas-interpose.pth is generated from interpose/startup_hook.py."""
    import importlib.util
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "interpose"
    spec = importlib.util.spec_from_file_location("startup_hook", folder / "startup_hook.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert (folder / "emublas-interpose.pth").read_text() == hook.pth_text(), (
        "regenerate with: python3 interpose/startup_hook.py"
    )


def test_one_import_hook_behind_the_pth_file_and_the_cupy_part(tmp_path, monkeypatch):
    """Both users of the import hook run import_hook.AfterImport; two such hooks on one
    trigger (an older .pth copy in a parent environment, say) both fire, without asking
    each other forever, and leave sys.meta_path."""
    import sys
    from pathlib import Path

    from emublas.interpose import import_hook

    pth = (Path(__file__).resolve().parents[1] / "interpose" / "emublas-interpose.pth").read_text()
    assert "class AfterImport" in pth and "arm_startup()" in pth
    (tmp_path / "emublas_hook_probe.py").write_text("X = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hooks = [
        import_hook.AfterImport(("emublas_hook_probe",), lambda m, t=t: seen.append((t, m.X)), f"probe-{t}")
        for t in "ab"
    ]
    for hook in hooks:
        hook.arm()
        hook.arm()  # once
    assert sum(h in sys.meta_path for h in hooks) == 2
    try:
        import emublas_hook_probe  # noqa: F401
    finally:
        for hook in hooks:
            hook.disarm()
        sys.modules.pop("emublas_hook_probe", None)
    assert sorted(seen) == [("a", 7), ("b", 7)]
    assert not any(h in sys.meta_path for h in hooks)


def test_shim_modules_import_no_private_names_of_each_other():
    import ast
    from pathlib import Path

    for path in (Path(__file__).resolve().parents[1] / "interpose").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, (path.name, private)


def test_auto_choosing_native_calls_the_original(active, rng, monkeypatch, capsys):
    """Under auto, a call the cost model leaves to native goes to scipy's routine itself (counted
    as native, its verbose line naming auto's choice and table); its result is scipy's."""
    shim.install("auto")
    monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
    a = rng.standard_normal((70, 66))
    expected = sblas.dgemm.__wrapped__(1.0, a, a, trans_b=1)
    chosen = emublas.backends.get("auto").choice("gemm", "d", 70, 70, 66, "cpu", emublas.config.resolve("auto")[1])
    got = sblas.dgemm(1.0, a, a, trans_b=1)
    err = capsys.readouterr().err.splitlines()
    if chosen == "native":
        np.testing.assert_array_equal(got, expected)
        assert shim.stats() == {"dgemm:native": 1}
        assert "-> native [auto(chose=native,table=" in err[0]
    else:  # a calibrated table here may pick an emulating backend: then the call is emulated
        assert shim.stats() == {"dgemm:emulated": 1}
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "prefix, kind, m, n, k", [("d", "gemm", 70, 50, 66), ("z", "herk", 90, 90, 64), ("s", "trsm", 65, 80, 65)]
)
def test_auto_choice_is_the_calls_own(prefix, kind, m, n, k):
    """choice() without arrays names the backend route() picks for the same call shape."""
    auto = emublas.backends.get("auto")
    opts = emublas.config.resolve("auto")[1]
    out = np.zeros((m, n), dtype=emublas.blas.DTYPES[prefix], order="F")
    assert auto.choice(kind, prefix, m, n, k, "cpu", opts) == auto.route(kind, prefix, m, n, k, out, opts)[1]


def test_call_dims_binds_as_scipy_does(rng):
    """The shim's argument binding: scipy's signature, defaults filled, anything scipy would
    reject (a repeated, unknown or missing argument, too many) left to scipy (None)."""
    from emublas.interpose.scipy_blas import call_dims

    a, b, c = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), np.zeros((5, 3))
    f8 = np.dtype(np.float64)
    assert call_dims("dgemm", (1.0, a, b), {}) == (5, 3, 4, f8)
    assert call_dims("dgemm", (1.0, a.T, b), {"trans_a": 1}) == (5, 3, 4, f8)
    assert call_dims("dgemm", (1.0,), {"a": a, "b": b, "beta": 2.0, "c": c}) == (5, 3, 4, f8)
    assert call_dims("dgemm", (1.0, a, b, 0.0, c, 0, 0, 1), {}) == (5, 3, 4, f8)
    assert call_dims("dsyrk", (1.0, a), {"trans": 1, "lower": 1}) == (4, 4, 5, f8)
    assert call_dims("dgemm", (1.0, a, b), {"a": a}) is None  # given twice
    assert call_dims("dgemm", (1.0, a, b), {"backend": "native"}) is None  # not scipy's keyword
    assert call_dims("dgemm", (1.0, a), {}) is None  # b missing
    assert call_dims("dgemm", (1.0, a, b, 0.0, c, 0, 0, 1, 9), {}) is None  # too many
    t = np.tril(rng.standard_normal((5, 5))) + 5 * np.eye(5)
    assert call_dims("dtrsm", (1.0, t, c), {"lower": 1}) == (5, 3, 5, f8)
    assert call_dims("dtrsm", (1.0, t, c), {"backend": "ozaki2"}) is None
    assert call_dims("dtrsm", (1.0, t), {}) is None


def _run_under_shim(tmp_path, program: str, backend: str):
    import os
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items() if k not in ("EMUBLAS_VERBOSE", "EMUBLAS_INTERPOSE")}
    env["EMUBLAS_BACKEND"] = backend
    return subprocess.run(
        [sys.executable, "-m", "emublas.interpose", str(script)], capture_output=True, text=True, env=env
    )


def test_first_intercepted_call_imports_nothing_under_auto(tmp_path):
    """install() has already loaded what auto's first decision needs (its backend, cost table
    and candidates' readiness), so the program's first BLAS call imports no module."""
    run = _run_under_shim(
        tmp_path,
        "import sys, numpy as np, scipy.linalg.blas as b\n"
        "a = np.ones((80, 80))\n"
        "before = set(sys.modules)\n"
        "c = b.dgemm(1.0, a, a)\n"
        "print(sorted(set(sys.modules) - before), float(c[0, 0]))\n",
        "auto",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[] 80.0"


def test_bad_backend_variable_fails_the_first_call_not_install(monkeypatch, rng):
    """install() from code (the runner checks the variable itself, up front) does not raise
    for a bad EMUBLAS_BACKEND: the first intercepted call does, naming the variable."""
    monkeypatch.setenv("EMUBLAS_BACKEND", "nope")
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "0")
    emublas.set_backend(None)
    shim.install()
    try:
        a = rng.standard_normal((8, 8))
        with pytest.raises(ValueError, match="EMUBLAS_BACKEND.*valid backends"):
            sblas.dgemm(1.0, a, a)
    finally:
        shim.uninstall()


def test_binder_agrees_with_inspect_bind():
    """The shim's fast binder gives what ``inspect.Signature.bind`` + ``apply_defaults`` give,
    and None exactly where ``bind`` raises, on every routine's signature and argument mixes
    (positional, by keyword, repeated, unknown, missing, too many, the fronts' own keywords)."""
    import inspect
    import itertools

    from emublas.interpose import scipy_blas

    for kind, binder in scipy_blas._SIGNATURES.items():
        names = binder.positional
        # the binder's signature: the scipy parameters, plus the level-3 fronts' keywords
        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
        for p in params:
            if p.name in binder.defaults:
                params[params.index(p)] = p.replace(default=binder.defaults[p.name])
        extra_named = sorted(binder.named - set(names))
        params += [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=binder.defaults.get(n)) for n in extra_named
        ]
        if binder.varkw:
            params.append(inspect.Parameter(binder.varkw, inspect.Parameter.VAR_KEYWORD))
        sig = inspect.Signature(params)
        words = [*names, *extra_named, "nope"]
        cases = 0
        for npos in range(len(names) + 2):
            args = tuple(f"p{i}" for i in range(npos))
            for chosen in itertools.chain.from_iterable(itertools.combinations(words, r) for r in range(3)):
                kwargs = {w: f"k_{w}" for w in chosen}
                try:
                    bound = sig.bind(*args, **kwargs)
                    bound.apply_defaults()
                    want = dict(bound.arguments)
                except TypeError:
                    want = None
                got = binder(args, kwargs)
                assert got == want, (kind, args, kwargs)
                cases += 1
        assert cases > 100


def test_route_is_selection_and_fallthrough_reason(monkeypatch, rng):
    """route() answers what selection() and fallthrough_reason() answer, for every backend and
    the cases that send a call to the original (native, min dim, arguments, auto's choice)."""
    from emublas.interpose import policy

    f8 = np.dtype(np.float64)
    cases = [
        ("gemm", "d", (70, 50, 66, f8)),
        ("gemm", "d", (70, 50, 8, f8)),
        ("herk", "z", (90, 90, 64, np.dtype(np.complex128))),
        ("trsm", "s", (65, 80, 65, np.dtype(np.float32))),
        ("gemm", "d", None),
        ("gemm", None, (70, 50, 66, f8)),
    ]
    monkeypatch.delenv("EMUBLAS_BACKEND", raising=False)
    try:
        for backend in ("native", "ozaki2", "strassen", "auto"):
            emublas.set_backend(backend)
            for floor in ("0", "64", "100"):
                monkeypatch.setenv("EMUBLAS_MIN_DIM", floor)
                for routine, prefix, dims in cases:
                    name, opts, usable = policy.selection("cpu")
                    why = policy.fallthrough_reason(name, usable, dims, routine, prefix, "cpu", opts)
                    assert policy.route(routine, prefix, dims, "cpu") == (name, opts, why), (backend, floor, dims)
    finally:
        emublas.set_backend(None)


def test_auto_prepare_resolves_the_table_its_decisions_use(tmp_path):
    """auto.prepare() reads the cost table as the decisions do (a table option given is the one
    read, a missing file raises as the first call would); after it, a decision reads no file."""
    from emublas.backends.auto import tables

    auto = emublas.backends.get("auto")
    opts = emublas.config.resolve("auto")[1]
    auto.prepare("cpu", opts)
    before = dict(tables._resolved)
    auto.choice("gemm", "d", 300, 300, 300, "cpu", opts)
    assert tables._resolved == before  # nothing resolved anew
    with pytest.raises(ValueError, match="does not exist"):
        auto.prepare("cpu", {**opts, "table": str(tmp_path / "missing.json")})


def test_native_below_is_a_floor_of_route(monkeypatch):
    """Every call whose smallest dimension is below native_below() is one route() sends to the
    original, for every backend, EMUBLAS_MIN_DIM and routine; native gets everything, verbose
    nothing (each call's line needs the full route)."""
    from emublas.interpose import policy

    monkeypatch.delenv("EMUBLAS_BACKEND", raising=False)
    monkeypatch.delenv("EMUBLAS_VERBOSE", raising=False)
    kinds = [("gemm", "d"), ("gemm", "z"), ("herk", "z"), ("syrk", "s"), ("trsm", "d"), ("hemm", "c")]
    try:
        for backend in ("native", "ozaki2", "strassen", "auto"):
            emublas.set_backend(backend)
            for floor in ("0", "64", "100"):
                monkeypatch.setenv("EMUBLAS_MIN_DIM", floor)
                for routine, prefix in kinds:
                    below = policy.native_below(routine, prefix)
                    if backend == "native":
                        assert below == 2**62
                    else:
                        assert below >= int(floor)
                    dt = np.dtype(emublas.blas.DTYPES[prefix])
                    for small in {0, 1, int(floor) - 1, min(below, 2**20) - 1} - {-1}:
                        if small < below:
                            dims = (small, 4096, 4096, dt)
                            assert policy.route(routine, prefix, dims, "cpu")[2], (backend, floor, routine, small)
        monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
        assert policy.native_below("gemm", "d") == 0
    finally:
        emublas.set_backend(None)


def test_native_below_kept_answer_follows_what_it_depends_on(monkeypatch):
    """native_below() keeps its answer, but a use() block (in its own thread only), a new
    set_backend(), a changed variable and, after the cost table's re-reading time, a changed
    table floor each give the answer worked out anew."""
    from emublas.backends.auto import tables
    from emublas.interpose import policy

    monkeypatch.delenv("EMUBLAS_BACKEND", raising=False)
    monkeypatch.delenv("EMUBLAS_VERBOSE", raising=False)
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "64")
    clock = [1000.0]
    monkeypatch.setattr(policy, "_monotonic", lambda: clock[0])
    auto = emublas.backends.get("auto")
    table_floor = [300]
    monkeypatch.setattr(auto, "native_below", lambda *a: table_floor[0])
    try:
        emublas.set_backend("ozaki2")
        assert policy.native_below("gemm", "d") == 64
        seen = {}

        def other_thread():
            with emublas.use("native"):
                seen["inside"] = policy.native_below("gemm", "d")
            seen["after"] = policy.native_below("gemm", "d")

        worker = threading.Thread(target=other_thread)
        with emublas.use("auto"):
            assert policy.native_below("gemm", "d") == 300
            worker.start()
            worker.join()
        assert seen == {"inside": 2**62, "after": 64}
        assert policy.native_below("gemm", "d") == 64
        emublas.set_backend("auto")
        assert policy.native_below("gemm", "d") == 300
        monkeypatch.setenv("EMUBLAS_MIN_DIM", "500")
        assert policy.native_below("gemm", "d") == 500
        monkeypatch.setenv("EMUBLAS_MIN_DIM", "64")
        table_floor[0] = 900  # as if emublas calibrate wrote a new table
        assert policy.native_below("gemm", "d") == 300  # kept within the re-reading time
        clock[0] += tables.RECHECK_S
        assert policy.native_below("gemm", "d") == 900
        table_floor[0] = 950
        monkeypatch.setenv("EMUBLAS_AUTO_BITS", "30")  # one of auto's variables: asked anew at once
        assert policy.native_below("gemm", "d") == 950
        monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
        assert policy.native_below("gemm", "d") == 0
        monkeypatch.setenv("EMUBLAS_MIN_DIM", "x")
        monkeypatch.delenv("EMUBLAS_VERBOSE")
        for _ in range(2):  # a bad value raises on every call, it is never kept
            with pytest.raises(ValueError, match="EMUBLAS_MIN_DIM"):
                policy.native_below("gemm", "d")
    finally:
        emublas.set_backend(None)


def test_stats_count_exactly_across_threads():
    """Calls counted from many threads at once are all counted; reading the counts changes
    none; reset_stats zeroes them."""
    from emublas.interpose import policy

    shim.reset_stats()
    tick = policy.counter("sgemm")
    start = threading.Barrier(8)

    def work():
        start.wait()
        for i in range(20000):
            tick()
            if i % 5000 == 0:
                shim.stats()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    policy.count("sgemm", emulated=True)
    assert shim.stats() == shim.stats() == {"sgemm:native": 160000, "sgemm:emulated": 1}
    shim.reset_stats()
    assert shim.stats() == {}
    tick()
    assert shim.stats() == {"sgemm:native": 1}
    shim.reset_stats()


def test_small_calls_go_to_scipy_without_binding(active, rng, monkeypatch, capsys):
    """Below the floor a call reaches scipy's routine without its arguments being bound (its
    result and errors are scipy's, it is counted); given ``a`` by keyword, or under
    EMUBLAS_VERBOSE, it takes the full route."""
    from emublas.interpose import scipy_blas

    monkeypatch.setenv("EMUBLAS_MIN_DIM", "64")
    bound = []
    real = scipy_blas.call_dims
    monkeypatch.setattr(scipy_blas, "call_dims", lambda *a: bound.append(a[0]) or real(*a))
    a, b = rng.standard_normal((40, 70)), rng.standard_normal((70, 90))
    np.testing.assert_array_equal(sblas.dgemm(2.0, a, b), ORIGINALS["dgemm"](2.0, a, b))
    np.testing.assert_array_equal(
        sblas.dtrsm(1.0, a[:, :40] + 40 * np.eye(40), b[:40]),
        ORIGINALS["dtrsm"](1.0, a[:, :40] + 40 * np.eye(40), b[:40]),
    )
    with pytest.raises(Exception) as ours:
        sblas.dgemm(1.0, a, a)  # 40x70 times 40x70: scipy's own error
    with pytest.raises(Exception) as theirs:
        ORIGINALS["dgemm"](1.0, a, a)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    assert bound == [] and shim.stats() == {"dgemm:native": 2, "dtrsm:native": 1}
    sblas.dgemm(2.0, a=a, b=b)
    assert bound == ["dgemm"]
    monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
    sblas.dgemm(2.0, a, b)
    assert bound == ["dgemm", "dgemm"]
    assert "dgemm 40x90x70 float64 -> native [min dim < 64]" in capsys.readouterr().err
    assert shim.stats() == {"dgemm:native": 4, "dtrsm:native": 1}
