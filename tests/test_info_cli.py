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
    errors = [float(line.split()[-1]) for line in out.splitlines() if line.split()[:1] and line.split()[0] in
              ("dgemm", "zgemm", "dsyrk", "zherk", "zher2k") and line.split()[1] != "boolpack"]
    assert errors and max(errors) < 1e-13


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "emublas", "info", "--json"], capture_output=True, text=True,
                          check=False)
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
