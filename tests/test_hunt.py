"""Adversarial hunt for silent errors: every routine, prefix and backend, every entry exact-checked.

hypothesis draws each case's structure (routine, prefix, family, exponents across
the whole float32/float64 range, sizes, odd row, scalars); the bulk of the
matrices comes from a numpy generator seeded by hypothesis, so failures
reproduce.  The targets and the families are described in ``hunt_cases.py``.

The normal run checks a few hundred cases (seconds); the long hunt is marked
``slow`` and runs only when selected: ``python3 -m pytest -m slow tests/test_hunt.py``.
``benchmarks/bench_hunt.py`` counts over many more cases.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hunt_cases as H


class DrawRng:
    """The few scalar draws of ``make_case`` come from hypothesis (so it explores and
    shrinks them); arrays come from a numpy generator with a hypothesis-drawn seed."""

    def __init__(self, data):
        self.data = data
        self.np = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))

    def integers(self, lo, hi=None, size=None):
        if size is not None:
            return self.np.integers(lo, hi, size)
        if hi is None:
            lo, hi = 0, lo
        return self.data.draw(st.integers(int(lo), int(hi) - 1))

    def random(self, size=None):
        if size is not None:
            return self.np.random(size)
        return self.data.draw(st.floats(0, 1, exclude_max=True))

    def uniform(self, lo, hi, size=None):
        if size is not None:
            return self.np.uniform(lo, hi, size)
        return self.data.draw(st.floats(lo, hi))

    def standard_normal(self, size=None):
        if size is not None:
            return self.np.standard_normal(size)
        return self.data.draw(st.floats(-4, 4))

    def choice(self, values, size=None):
        if size is not None:
            return self.np.choice(values, size)
        return self.data.draw(st.sampled_from(list(values)))


def _hunt(data, kind, backend, options=None):
    rng = DrawRng(data)
    prefix = data.draw(st.sampled_from(H.PREFIXES), label="prefix")
    family = data.draw(st.sampled_from(H.FAMILIES), label="family")
    case = H.make_case(rng, kind, prefix, backend, family, options)
    outcome = H.run_and_check(case)
    assert outcome.silent == 0, (case.describe(), outcome.crash, outcome.bad[:3])


def _params(slow: bool):
    out = []
    for backend in H.BACKENDS:
        for kind in H.KINDS:
            marks = []
            if slow:
                marks.append(pytest.mark.slow)
            out.append(pytest.param(kind, backend, marks=marks, id=f"{backend}-{kind}"))
    return out


_FAST = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_SLOW = settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.mark.parametrize("kind,backend", _params(slow=False))
@_FAST
@given(data=st.data())
def test_hunt(kind, backend, data):
    _hunt(data, kind, backend)


@pytest.mark.parametrize("kind,backend", _params(slow=True))
@_SLOW
@given(data=st.data())
def test_hunt_long(kind, backend, data, request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the long hunt runs with -m slow")
    _hunt(data, kind, backend)


@pytest.mark.parametrize("kind", [k for k in H.KINDS if k != "trsm"])
@_FAST
@given(data=st.data())
def test_hunt_ozaki2_bits(kind, data):
    """ozaki2 certified to fewer bits than native's, with few moduli: an entry outside
    2^-N·S (plus native's bound) must come with a warning."""
    bits = data.draw(st.sampled_from([8, 20]), label="bits")
    moduli = data.draw(st.sampled_from([4, 6, 8]), label="moduli")
    mode = data.draw(st.sampled_from(["fast", "accurate", "auto"]), label="mode")
    _hunt(data, kind, "ozaki2", {"bits": bits, "moduli": moduli, "mode": mode})


# -- the checker itself finds what it should -----------------------------------


@pytest.mark.parametrize("kind", H.KINDS)
@pytest.mark.parametrize("prefix", list(H.PREFIXES))
def test_checker_flags_a_wrong_entry_and_passes_native(kind, prefix):
    rng = np.random.default_rng(7)
    case = H.make_case(rng, kind, prefix, "native", "phi")
    out, warned = H.run(case)
    assert H.check(case, out, warned).silent == 0
    i, j = (out.shape[0] - 1, 0) if (kind == "gemm" or case.lower) else (0, out.shape[1] - 1)
    wrong = out.copy()
    exact = wrong[i, j]
    wrong[i, j] = exact * (1 + 1e-3) + (1e-30 if exact == 0 else 0)
    found = H.check(case, wrong, False)
    # trsm's check is its residual, which a wrong entry of X moves along a row or column
    assert found.silent >= 1 and (kind == "trsm" or found.bad[0][:2] == (i, j))
    assert H.check(case, wrong, True).silent == 0  # a warning covers the call


def test_checker_overflow_and_untouched_triangle():
    a = np.full((2, 2), 1e300)
    case = H.Case("gemm", "d", "native", {}, a, np.eye(2), np.zeros((2, 2), order="F"), 4e8, 0.0, (0, 0))
    out, _ = H.run(case)
    assert np.isinf(out).all() and H.check(case, out, False).silent == 0  # exact 4e308 overflows
    assert H.check(case, np.full((2, 2), np.finfo(float).max), False).silent == 0  # largest finite
    assert H.check(case, np.full((2, 2), 1e308), False).silent == 4
    assert H.check(case, -out, False).silent == 4  # wrong sign of Inf
    rk = H.Case(
        "syrk", "d", "native", {}, np.eye(3), None, np.asfortranarray(np.full((3, 3), 5.0)), 1.0, 1.0, (0,), lower=1
    )
    out, _ = H.run(rk)
    assert H.check(rk, out, False).silent == 0
    out[0, 2] = 0.0  # the upper triangle is not referenced: it must keep c's values
    assert H.check(rk, out, False).silent == 1
