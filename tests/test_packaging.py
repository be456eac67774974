"""pyproject.toml ships every package and the PEP 561 marker."""

import pathlib

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _setuptools():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_is_listed():
    listed = set(_setuptools()["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "emublas").rglob("__init__.py")}
    assert found, "no package found under emublas/"
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"
    assert "emublas.interpose" in listed and _setuptools()["package-dir"]["emublas.interpose"] == "interpose"
    assert (ROOT / "interpose" / "__init__.py").is_file()


def test_py_typed_is_shipped():
    assert (ROOT / "emublas" / "py.typed").is_file()
    assert "py.typed" in _setuptools()["package-data"]["emublas"]
