"""emublas.info() and the command line."""

import json
import subprocess
import sys

import pytest

import emublas
from emublas.cli import main


def test_info_reports_everything(monkeypatch):
    monkeypatch.delenv("EMUBLAS_BACKEND", raising=False)
    r = emublas.info()
    assert r["version"] == emublas.__version__
    assert r["cpu"]["extension"]["built"] is True, r["cpu"]["extension"]
    assert set(r["cpu"]["extension"]["features"]) >= {"avx512_vnni", "avx512_vpopcntdq"}
    from emublas._kernels import cpu

    kern = r["cpu"]["extension"]["kernels"]
    assert kern["int8_gemm"] == cpu.kernel_name()
    assert kern["ozaki2_passes"] in ("avx512", "avx2", "generic")
    ext = r["cpu"]["extension"]
    assert ext["threads"] == cpu.default_threads()
    assert 1 <= ext["threads_free"] <= ext["threads"]
    from emublas.info import format_info

    assert f"threads: {ext['threads']} ({ext['threads_free']} free now)" in format_info(r)
    assert r["backends"]["native"]["cpu"]["usable"] is True
    assert "usable" in r["backends"]["native"]["gpu"]
    assert r["selection"] == {"backend": "native", "options": {}, "source": "default"}
    assert isinstance(r["gpu"]["devices"], list)


def test_info_reports_bad_environment_instead_of_crashing(monkeypatch):
    monkeypatch.setenv("EMUBLAS_BACKEND", "bogus")
    r = emublas.info()
    assert "selection" not in r
    assert "bogus" in r["selection_error"] and "native" in r["selection_error"]


def test_info_selection_follows_use():
    with emublas.use("native"):
        assert emublas.info()["selection"]["source"] == "use"


def test_cli_info_text_and_json(capsys, monkeypatch):
    monkeypatch.delenv("EMUBLAS_BACKEND", raising=False)
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "emublas " + emublas.__version__ in text and "native" in text and "selected: native" in text
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["selection"]["backend"] == "native"


def test_cli_bad_backend_exits_2(capsys, monkeypatch):
    monkeypatch.setenv("EMUBLAS_BACKEND", "bogus")
    assert main(["info"]) == 2
    assert "INVALID" in capsys.readouterr().out
    assert main(["demo", "-n", "8", "--backends", "nope"]) == 2
    assert "valid backends" in capsys.readouterr().err


def test_cli_demo_runs_small(capsys):
    assert main(["demo", "-n", "16", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("dgemm", "zgemm", "dsyrk", "zherk", "zher2k"):
        assert name in out
    # boolpack quantizes floats to `bits` bits (not exact by design): its error is not bounded here
    errors = [
        float(line.split()[-1])
        for line in out.splitlines()
        if line.split()[:1]
        and line.split()[0] in ("dgemm", "zgemm", "dsyrk", "zherk", "zher2k")
        and line.split()[1] != "boolpack"
    ]
    assert errors and max(errors) < 1e-13


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "emublas", "info", "--json"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == emublas.__version__


@pytest.mark.parametrize("name", ["sgemm", "dgemm", "cgemm", "zgemm", "ssyrk", "zherk", "zher2k", "dsyr2k"])
def test_signatures_match_scipy(name):
    import inspect

    import scipy.linalg.blas as sblas

    ours = inspect.signature(getattr(emublas, name))
    params = [p for p in ours.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    doc_line = getattr(sblas, name).__doc__.splitlines()[0]  # "c = dgemm(alpha,a,b,[beta,c,...])"
    scipy_names = doc_line.split("(", 1)[1].rstrip(")").replace("[", "").replace("]", "").split(",")
    assert [p.name for p in params] == scipy_names
    assert "backend" in ours.parameters and ours.parameters["backend"].kind is inspect.Parameter.KEYWORD_ONLY
    assert getattr(emublas, name).__doc__ and name in getattr(emublas, name).__doc__


# ---------------------------------------------------------------------------
# issue 18: the CLI as a new user meets it (through a subprocess, as typed)
# ---------------------------------------------------------------------------


def _cli(*args, env=None):
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith("EMUBLAS_")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "emublas", *args], env=full, capture_output=True, text=True, timeout=300
    )


def test_cli_version_and_bare_help():
    from emublas._version import __version__

    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"emublas {__version__}"
    r = _cli()
    assert r.returncode == 0 and "info" in r.stdout and "sweep" in r.stdout and "plot" in r.stdout


def test_cli_demo_bad_backend_fails_before_printing_anything():
    r = _cli("demo", "-n", "8", "--backends", "native,ozaki")
    assert r.returncode == 2 and r.stdout == ""
    assert "unknown emublas backend 'ozaki'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("form", [["native,strassen"], ["native", "strassen"]])
def test_cli_demo_takes_comma_and_space_lists(form):
    r = _cli("demo", "-n", "8", "--backends", *form)
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("rel. error vs numpy", 1)[1]
    assert table.count(" native ") == 5 and table.count(" strassen ") == 5


def test_cli_info_shows_a_bad_option_variable_of_the_selected_backend():
    r = _cli("info", env={"EMUBLAS_BACKEND": "ozaki2", "EMUBLAS_MODULI": "abc"})
    assert r.returncode == 2
    assert "selected: INVALID" in r.stdout and "EMUBLAS_MODULI" in r.stdout and "selected: ozaki2" not in r.stdout


def test_cli_info_prints_readable_defaults():
    r = _cli("info")
    assert r.returncode == 0
    assert "default default" not in r.stdout and "default None" not in r.stdout
    assert "option devices = current by default" in r.stdout
    # a None default by what it means: native accuracy for bits, the calibrated table
    assert r.stdout.count("option bits = native by default") == 2  # auto's and ozaki2's
    assert "option table = (calibrated, else shipped) by default" in r.stdout
    assert "current by default, $EMUBLAS_AUTO_BITS" not in r.stdout


def test_call_backend_and_use_block_do_not_read_a_bad_backend_variable(monkeypatch):
    import numpy as np

    import emublas

    monkeypatch.setenv("EMUBLAS_BACKEND", "ozaki")
    emublas.set_backend(None)
    a = np.eye(3)
    np.testing.assert_array_equal(emublas.dgemm(1.0, a, a, backend="native"), a)
    with emublas.use("native"):
        np.testing.assert_array_equal(emublas.dgemm(1.0, a, a), a)
    with pytest.raises(ValueError, match="environment variable EMUBLAS_BACKEND: unknown emublas backend 'ozaki'"):
        emublas.dgemm(1.0, a, a)  # here the variable decides, and is validated


@pytest.mark.parametrize(
    "value, verbose", [("false", False), ("no", False), ("off", False), ("0", False), ("", False), ("on", True)]
)
def test_cli_shim_verbose_words(tmp_path, value, verbose):
    prog = tmp_path / "p.py"
    prog.write_text("import numpy as np, scipy.linalg.blas as b; b.dgemm(1.0, np.ones((70, 70)), np.ones((70, 70)))\n")
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("EMUBLAS_")}
    env["EMUBLAS_VERBOSE"] = value
    r = subprocess.run(
        [sys.executable, "-m", "emublas.interpose", "--backend", "ozaki2", str(prog)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert ("emublas: dgemm 70x70x70" in r.stderr) is verbose


def test_env_parsers_treat_empty_as_unset_and_name_the_range(monkeypatch):
    from emublas.backends.base import env_flag, env_int

    monkeypatch.setenv("EMUBLAS_X", "")
    assert env_flag("EMUBLAS_X", True) is True and env_int("EMUBLAS_X", 4, 1, 8) == 4
    monkeypatch.setenv("EMUBLAS_X", "99999999999999999999")
    with pytest.raises(ValueError, match=r"EMUBLAS_X='99999999999999999999'.*outside \[1, 8\]"):
        env_int("EMUBLAS_X", 4, 1, 8)
