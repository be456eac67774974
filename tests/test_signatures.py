"""The prefixed routines are real definitions with scipy's documented signatures.

scipy's f2py routines have no ``inspect.signature``; their docstrings document
the positional parameters (first line) and each optional one's default
(``Default:`` lines), and that is what these tests compare against.
"""

import ast
import inspect
import re

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas
from emublas import prefixed, prefixed_2k

FAMILIES = {"gemm": "sdcz", "syrk": "sdcz", "herk": "cz", "syr2k": "sdcz", "her2k": "cz"}
PREFIXED = [p + f for f, ps in FAMILIES.items() for p in ps]


def scipy_signature(name):
    """(parameter names in order, {optional name: default}) from scipy's docstring."""
    doc = getattr(sblas, name).__doc__
    first = doc.strip().splitlines()[0]  # "c = dgemm(alpha,a,b,[beta,c,trans_a,trans_b,overwrite_c])"
    inner = first.split("(", 1)[1].rsplit(")", 1)[0]
    required, _, optional = inner.partition("[")
    names = [n for n in required.split(",") if n] + [n for n in optional.rstrip("]").split(",") if n]
    defaults = {}
    for param, value in re.findall(r"^(\w+) : input [^\n]*, optional\n\s+Default: ([^\n]+)$", doc, re.M):
        value = ast.literal_eval(value)
        defaults[param] = complex(*value) if isinstance(value, tuple) else value
    return names, [n for n in optional.rstrip("]").split(",") if n], defaults


def test_every_prefixed_routine_is_covered():
    assert sorted(prefixed.__all__ + prefixed_2k.__all__) == sorted(PREFIXED)
    for name in ("sherk", "dherk", "sher2k", "dher2k"):
        assert not hasattr(sblas, name) and not hasattr(emublas, name)


@pytest.mark.parametrize("name", PREFIXED)
def test_signature_is_scipys(name):
    names, optional, defaults = scipy_signature(name)
    assert set(optional) <= set(defaults) | {"c"}  # c is the one optional without a default value
    ours = inspect.signature(getattr(emublas, name))
    positional = [p for p in ours.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == names
    for p in positional:
        if p.name in defaults:
            assert p.default == defaults[p.name] and type(p.default) is type(defaults[p.name]), p.name
        elif p.name == "c":
            assert p.default is None
        else:
            assert p.default is inspect.Parameter.empty, p.name  # required in scipy, required here
    extra = {n: p.kind for n, p in ours.parameters.items() if p.kind is not p.POSITIONAL_OR_KEYWORD}
    assert extra == {"backend": inspect.Parameter.KEYWORD_ONLY, "options": inspect.Parameter.VAR_KEYWORD}
    assert ours.parameters["backend"].default is None


@pytest.mark.parametrize("name", PREFIXED)
def test_real_definition_with_numpydoc(name):
    fn = getattr(emublas, name)
    assert fn.__name__ == fn.__qualname__ == name
    assert fn.__module__ in ("emublas.prefixed", "emublas.prefixed_2k")  # a def, not a factory's closure
    assert emublas.blas.ROUTINES[name] is fn
    doc = inspect.getdoc(fn)
    assert f"scipy.linalg.blas.{name}" in doc
    for section in ("Parameters\n----------", "Returns\n-------", "Raises\n------"):
        assert section in doc, section
    names, _, _ = scipy_signature(name)
    for param in names:
        assert re.search(rf"^(\w+, )*{param}(, \w+)* :", doc, re.M), param  # every parameter documented
    hints = inspect.get_annotations(fn, eval_str=True)
    assert set(hints) == set(names) | {"backend", "options", "return"}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_generic_routines_are_real_definitions(name):
    fn = getattr(emublas, name)
    assert fn.__module__ == "emublas.blas" and fn.__name__ == name
    sig = inspect.signature(fn)
    two = name in ("gemm", "syr2k", "her2k")
    first = ["alpha", "a", "b"] if two else ["alpha", "a"]
    rest = (
        ["beta", "c", "trans_a", "trans_b", "overwrite_c"]
        if name == "gemm"
        else ["beta", "c", "trans", "lower", "overwrite_c"]
    )
    assert [p for p in sig.parameters][: len(first + rest)] == first + rest
    assert sig.parameters["beta"].default == 0.0
    doc = inspect.getdoc(fn)
    assert "Parameters\n----------" in doc and "Returns\n-------" in doc


@pytest.mark.parametrize("name", PREFIXED)
def test_defaults_give_scipys_result(name):
    """Called with only the required arguments, as scipy is (the defaults mean the same)."""
    rng = np.random.default_rng(3)
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[name[0]]
    a = rng.standard_normal((4, 3)).astype(dtype)
    if name[0] in "cz":
        a = a + 1j * rng.standard_normal((4, 3)).astype(dtype)
    b = (rng.standard_normal((3, 5)) if name.endswith("gemm") else rng.standard_normal((4, 3))).astype(dtype)
    args = (0.5, a, b) if name.endswith(("gemm", "2k")) else (0.5, a)
    ours = getattr(emublas, name)(*args, backend="native")
    ref = getattr(sblas, name)(*args)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    rtol = 1e-5 if name[0] in "sc" else 1e-12
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=rtol)
