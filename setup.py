"""Build hook: setuptools needs ``cffi_modules`` passed through ``setup()``.

All metadata lives in pyproject.toml; this file only attaches the cffi builder
(out-of-line API mode) so that ``pip install .`` compiles ``native/cpu``.
"""
from setuptools import setup

setup(cffi_modules=["native/build.py:ffibuilder"])
