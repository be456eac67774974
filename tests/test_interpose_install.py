"""The ``EMUBLAS_INTERPOSE`` start-up hook, installed for real.

A copy of this source tree is installed into fresh virtual environments
(``--system-site-packages``, so numpy, scipy, setuptools, wheel and cffi come
from this interpreter) with ``pip install --no-build-isolation --no-deps
--no-index``: once as a regular wheel and once editable (setuptools' PEP 660
editable wheel).  Either way ``emublas-interpose.pth`` must sit in the root of
the environment's site-packages and

* with ``EMUBLAS_INTERPOSE=1`` the scipy BLAS-3 entry points are the shim's
  as soon as the program imports scipy.linalg.blas, with no message from the
  hook, and nothing is imported at start-up;
* with the variable unset (or ``0``) scipy's originals are untouched and
  nothing of emublas is imported (checked with ``-X importtime``: the hook may
  not even import numpy).

The copy (not the checkout itself) is installed so that the builds write
neither build/ nor the compiled extension into the working tree.  Nothing is
downloaded; where venv, pip or a build requirement is missing the tests are
skipped with the reason.  About 20 s on 2 cores (two cffi builds).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PTH = "emublas-interpose.pth"
MARK = "emublas interpose:"  # how the shim's replacements' docstrings begin
COPY_IGNORE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.so",
    "*.o",
    ".pytest_cache",
    ".hypothesis",
    "out",
    "sweep-out",
    ".whl",
    "_cpu.c",
)


def _why_not() -> str | None:
    if sys.prefix != sys.base_prefix:
        return (
            "running inside a virtual environment: a venv made from it with --system-site-packages"
            " sees the base interpreter's packages, not this environment's numpy/scipy"
        )
    if not (ROOT / "setup.py").is_file() or not (ROOT / "interpose" / PTH).is_file():
        return "not a source checkout (setup.py or interpose/emublas-interpose.pth missing)"
    for name in ("venv", "pip", "setuptools", "wheel", "cffi"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not importable by {sys.executable}: an offline --no-build-isolation install needs it"
    from importlib.metadata import version  # (importing setuptools here would clash with distutils)

    have = int(version("setuptools").split(".")[0])
    if have < SETUPTOOLS_NEEDED:
        return (
            f"setuptools {version('setuptools')} < {SETUPTOOLS_NEEDED}, the build requirement of"
            " pyproject.toml (an SPDX license string), and offline the build cannot fetch a newer one"
        )
    return None


#: pyproject.toml's ``[build-system] requires`` floor for setuptools (kept equal by
#: :func:`test_setuptools_floor_matches_pyproject`).
SETUPTOOLS_NEEDED = 77


def test_setuptools_floor_matches_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"setuptools>={SETUPTOOLS_NEEDED}"' in text


offline_build = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EMUBLAS_", "PIP_")) and k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return env


def _run(args, cwd, env=None, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("src") / "emublas-src"
    shutil.copytree(ROOT, dest, ignore=COPY_IGNORE)
    return dest


def _venv(where: Path) -> Path:
    """A venv seeing this interpreter's packages (pip included); returns its python."""
    made = _run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", where], cwd=where.parent)
    if made.returncode != 0:
        pytest.skip(f"python -m venv does not work here: {made.stderr.strip()[-300:]}")
    python = where / "bin" / "python"
    probe = _run([python, "-m", "pip", "--version"], cwd=where.parent)
    if probe.returncode != 0:
        pytest.skip(f"pip does not run inside a --system-site-packages venv: {probe.stderr.strip()[-300:]}")
    return python


def _install(python: Path, source: Path, editable: bool, cwd: Path) -> Path:
    args = [python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index"]
    done = _run(args + (["-e", source] if editable else [source]), cwd=cwd)
    assert done.returncode == 0, f"pip install failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=cwd)
    return Path(purelib.stdout.strip())


PROBE = f"""
import json, sys
import scipy.linalg.blas as b, scipy.linalg._fblas as f
print(json.dumps({{
    "blas": (b.dgemm.__doc__ or "").startswith({MARK!r}),
    "fblas": (f.zherk.__doc__ or "").startswith({MARK!r}),
    "emublas": sys.modules["emublas"].__file__ if "emublas" in sys.modules else None,
    "interpose": sys.modules["emublas.interpose"].__file__ if "emublas.interpose" in sys.modules else None,
}}))
"""


def _probe(python: Path, cwd: Path, **env: str) -> dict:
    done = _run([python, "-c", PROBE], cwd=cwd, env=_env(**env), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", f"the hook or the shim wrote to stderr:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _imported_at_start(python: Path, cwd: Path, **env: str) -> list[str]:
    """Modules imported by ``python -X importtime -c pass`` (site and the .pth files included)."""
    done = _run([python, "-X", "importtime", "-c", "pass"], cwd=cwd, env=_env(**env), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    names = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.append(line.rsplit("|", 1)[1].strip())
    assert names, f"no -X importtime output:\n{done.stderr[-2000:]}"
    return names


def _check_hook(python: Path, purelib: Path, cwd: Path, emublas_under: Path) -> None:
    hook = purelib / PTH
    assert hook.is_file(), f"{PTH} not installed at the root of {purelib}: {sorted(os.listdir(purelib))}"
    assert hook.read_text() == (ROOT / "interpose" / PTH).read_text()
    assert not list(purelib.glob(f"emublas/**/{PTH}")), "the hook must not also be installed as package data"

    on = _probe(python, cwd, EMUBLAS_INTERPOSE="1")
    assert on["blas"] and on["fblas"], f"shim not active with EMUBLAS_INTERPOSE=1: {on}"
    assert Path(on["emublas"]).resolve().is_relative_to(emublas_under.resolve()), on
    assert Path(on["interpose"]).resolve().is_relative_to(emublas_under.resolve()), on

    for env in ({}, {"EMUBLAS_INTERPOSE": "0"}, {"EMUBLAS_INTERPOSE": ""}):
        off = _probe(python, cwd, **env)
        assert not off["blas"] and not off["fblas"], f"shim active with {env or 'EMUBLAS_INTERPOSE unset'}: {off}"
        assert off["emublas"] is None and off["interpose"] is None, off

        names = _imported_at_start(python, cwd, **env)
        leaked = [n for n in names if n.split(".")[0] in ("emublas", "numpy", "scipy")]
        assert not leaked, f"imported at start-up with {env or 'EMUBLAS_INTERPOSE unset'}: {leaked}"

    # switched on, the hook still imports nothing until the program imports scipy.linalg.blas or cupy
    names = _imported_at_start(python, cwd, EMUBLAS_INTERPOSE="1")
    leaked = [n for n in names if n.split(".")[0] in ("emublas", "numpy", "scipy")]
    assert not leaked, f"imported at start-up with EMUBLAS_INTERPOSE=1: {leaked}"


@offline_build
def test_pth_hook_regular_install(source, tmp_path):
    python = _venv(tmp_path / "venv")
    purelib = _install(python, source, editable=False, cwd=tmp_path)
    _check_hook(python, purelib, tmp_path, emublas_under=purelib)


@offline_build
def test_pth_hook_editable_install(source, tmp_path):
    python = _venv(tmp_path / "venv")
    purelib = _install(python, source, editable=True, cwd=tmp_path)
    assert list(purelib.glob("__editable__*")), "not an editable (PEP 660) install"
    _check_hook(python, purelib, tmp_path, emublas_under=source)
