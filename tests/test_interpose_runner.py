"""The shim's runner (``python -m emublas.interpose``) and the shim's own rules, as a user meets them."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
import emublas.interpose as shim
from emublas import config
from emublas.interpose import policy

ORIGINAL_DGEMM = sblas.dgemm

ARGV_SCRIPT = "import sys, json; print(json.dumps(sys.argv))\n"


def _run(args, cwd, env=None):
    full = {**os.environ, **(env or {})}
    full.pop("EMUBLAS_INTERPOSE", None)
    return subprocess.run(
        [sys.executable, "-m", "emublas.interpose", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def clean(monkeypatch):
    for var in ("EMUBLAS_BACKEND", "EMUBLAS_VERBOSE", "EMUBLAS_BOOLPACK_NONFINITE", "EMUBLAS_BOOLPACK_BITS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "0")
    emublas.set_backend(None)
    shim.reset_stats()
    yield
    shim.uninstall()
    emublas.set_backend(None)


# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lead", [[], ["--"]])
def test_script_arguments_pass_through_untouched(tmp_path, lead):
    script = tmp_path / "prog.py"
    script.write_text(ARGV_SCRIPT)
    r = _run(["--backend", "native", *lead, str(script), "-q", "--backend", "x", "-m", "y"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f'["{script}", "-q", "--backend", "x", "-m", "y"]'


def test_module_arguments_pass_through_untouched(tmp_path):
    (tmp_path / "argvmod.py").write_text(ARGV_SCRIPT)
    r = _run(["--backend", "ozaki2", "--option", "moduli=18", "-m", "argvmod", "-q", "tests/", "--", "-x"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith('"-q", "tests/", "--", "-x"]')


def test_script_directory_is_on_sys_path(tmp_path):
    (tmp_path / "helper_mod.py").write_text("VALUE = 7\n")
    (tmp_path / "prog.py").write_text("import helper_mod; print(helper_mod.VALUE)\n")
    r = _run([str(tmp_path / "prog.py")], os.getcwd())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7"


def test_program_exit_status_is_kept(tmp_path):
    (tmp_path / "prog.py").write_text("import sys; sys.exit(5)\n")
    assert _run([str(tmp_path / "prog.py")], tmp_path).returncode == 5


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--backend", "ozaki", "prog.py"], "--backend ozaki: unknown emublas backend 'ozaki'; valid backends:"),
        (["--backend", "native", "missing.py"], "can't open file 'missing.py'"),
        (["--backend", "ozaki2", "--option", "moduli=abc", "prog.py"], "--option moduli=abc: 'abc' is not an integer"),
        (["--backend", "ozaki2", "--option", "modul=3", "prog.py"], "has no option 'modul'; valid options:"),
        (["--backend", "ozaki2", "--option", "moduli", "prog.py"], "--option wants NAME=VALUE"),
        (["--option", "moduli=3", "prog.py"], "--option needs --backend"),
        (["-m", "no_such_module_here"], "no module named 'no_such_module_here'"),
        ([], "give a script or -m module"),
    ],
)
def test_user_mistakes_give_one_line_and_status_2(tmp_path, args, needle):
    (tmp_path / "prog.py").write_text("print('ran')\n")
    r = _run(args, tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("python -m emublas.interpose: error: ") and needle in lines[0], lines[0]
    assert "set_backend" not in lines[0]


def test_bad_environment_for_the_chosen_backend_is_one_line(tmp_path):
    (tmp_path / "prog.py").write_text("print('ran')\n")
    r = _run(["--backend", "ozaki2", "prog.py"], tmp_path, env={"EMUBLAS_MODULI": "abc"})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "EMUBLAS_MODULI" in r.stderr and "ran" not in r.stdout


# ---------------------------------------------------------------------------
# install / uninstall and the selection
# ---------------------------------------------------------------------------


def test_uninstall_restores_the_selection_from_before(clean):
    shim.install("ozaki2", moduli=18)
    assert config.get_backend().backend == "ozaki2"
    shim.uninstall()
    assert config.process_selection() is None and config.get_backend().backend == "native"

    emublas.set_backend("strassen", levels=1)
    shim.install("ozaki2")
    shim.install("boolpack")  # a second install does not lose the original selection
    shim.uninstall()
    sel = config.process_selection()
    assert (sel.backend, dict(sel.options)) == ("strassen", {"levels": 1})


def test_uninstall_keeps_a_selection_the_program_made(clean):
    shim.install("ozaki2")
    emublas.set_backend("strassen")
    shim.uninstall()
    assert config.process_selection().backend == "strassen"


def test_install_without_backend_leaves_selection_alone(clean):
    emublas.set_backend("strassen")
    shim.install()
    shim.uninstall()
    assert config.process_selection().backend == "strassen"


# ---------------------------------------------------------------------------
# boolpack under the shim
# ---------------------------------------------------------------------------


def test_boolpack_under_the_shim_takes_nonfinite_from_native_and_warns_once(clean, rng):
    policy.warned.clear()
    a = rng.standard_normal((70, 66))
    b = rng.standard_normal((66, 68))
    a[3, 5] = np.nan
    b[7, 9] = np.inf
    shim.install("boolpack")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = sblas.dgemm(1.0, a, b)
        again = sblas.dgemm(1.0, a[:, :64] * 0 + 1, b[:64])
    ref = ORIGINAL_DGEMM(1.0, a, b)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))  # native's NaN/Inf pattern
    np.testing.assert_array_equal(out, ref)  # the whole call was native
    assert again.shape == (70, 68)
    quant = [w for w in caught if issubclass(w.category, shim.QuantizationWarning)]
    assert len(quant) == 1
    assert "16 bits" in str(quant[0].message) and "float64 holds 53" in str(quant[0].message)
    assert shim.stats()["dgemm:emulated"] == 2


def test_boolpack_nonfinite_raise_still_chosen_explicitly(clean, rng, monkeypatch):
    monkeypatch.setenv("EMUBLAS_BOOLPACK_NONFINITE", "raise")
    policy.warned.add(16)
    a = rng.standard_normal((64, 64))
    a[0, 0] = np.nan
    shim.install("boolpack")
    with pytest.raises(ValueError, match="NaN or Inf"):
        sblas.dgemm(1.0, a, a)


# ---------------------------------------------------------------------------
# verbose lines and the shim's variables
# ---------------------------------------------------------------------------


def test_verbose_lines_show_the_moduli_used_and_the_shape(clean, rng, monkeypatch, capsys):
    monkeypatch.setenv("EMUBLAS_VERBOSE", "1")
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "64")
    shim.install("ozaki2")
    a = rng.standard_normal((70, 66))
    sblas.dgemm(1.0, a, a.T)
    sblas.dgemm(1.0, a[:5], a.T)
    with pytest.raises(Exception, match="failed for hidden n"):
        sblas.dgemm(1.0, a, a)  # shapes do not conform: scipy's own error
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("emublas: dgemm 70x70x66 float64 -> ozaki2(moduli=16,"), err[0]
    assert "default" not in err[0]
    assert err[1].startswith("emublas: dgemm 5x70x66 float64 -> native [min dim < 64]"), err[1]
    assert "dgemm (shape not checked) float64 -> native [arguments left to the original]" in err[2], err[2]


@pytest.mark.parametrize(
    "value, on",
    [
        ("1", True),
        ("true", True),
        ("yes", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("off", False),
        ("", False),
        ("  ", False),
    ],
)
def test_verbose_reads_booleans_one_way(monkeypatch, value, on):
    monkeypatch.setenv("EMUBLAS_VERBOSE", value)
    assert policy.verbose() is on


def test_bad_boolean_and_integer_variables_name_the_variable(monkeypatch):
    monkeypatch.setenv("EMUBLAS_VERBOSE", "maybe")
    with pytest.raises(ValueError, match=r"EMUBLAS_VERBOSE='maybe'.*valid values: 1/0, true/false"):
        policy.verbose()
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "")
    assert shim.min_dim() == shim.DEFAULT_MIN_DIM
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "99999999999999999999")
    with pytest.raises(ValueError, match=r"EMUBLAS_MIN_DIM='99999999999999999999'.*outside \[0, "):
        shim.min_dim()
    monkeypatch.setenv("EMUBLAS_MIN_DIM", "-1")
    with pytest.raises(ValueError, match="EMUBLAS_MIN_DIM"):
        shim.min_dim()


def test_startup_hook_reads_the_same_false_words():
    from emublas.backends.base import boolean
    from interpose import startup_hook  # noqa: F401  (the source of the .pth line)

    for word in startup_hook.OFF:
        assert word == "" or boolean(word) is False


def test_shim_runs_an_unchanged_program_end_to_end(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        textwrap.dedent("""
        import numpy as np, scipy.linalg.blas as b
        a = np.arange(80 * 70, dtype=float).reshape(80, 70) % 7
        print(float(np.abs(b.dgemm(1.0, a, a.T) - a @ a.T).max()))
    """)
    )
    r = _run(["--backend", "ozaki2", str(prog)], tmp_path, env={"EMUBLAS_VERBOSE": "1"})
    assert r.returncode == 0, r.stderr
    assert float(r.stdout) == 0.0  # small integers: ozaki2 is exact
    assert "-> ozaki2(moduli=16" in r.stderr
