"""ozaki2's ``bits`` option: each entry certified to N correct bits relative to Σ|a||b|.

Checked against exact products (Fractions): every entry the certificate passes is within
``2^-N·Σ|a||b|``, the warning names the request and counts only the entries that miss it,
and auto's bits requests reach ozaki2 as that option (no warning about a bound nobody asked for).
"""

import json
import warnings

import numpy as np
import pytest
from test_auto import _table
from test_ozaki2 import exact_product, hard

import emublas
from emublas.backends.auto import backend as auto_backend
from emublas.backends.auto import tables
from emublas.backends.ozaki2 import last_run


def _bound(a, b, bits):
    """2^-bits·Σ_l |a_il||b_lj| (the sum rounded up a little: float64 sums of positive terms)."""
    return 2.0**-bits * (np.abs(a) @ np.abs(b)) * (1 + 2.0**-40)


def _run(fn, *args, **kw):
    """``fn(*args, **kw)`` and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kw)
    return out, [w for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("prefix", ["d", "z"])
@pytest.mark.parametrize("bits", [12, 24, 36])
def test_certified_entries_hold_the_bits_asked(rng, prefix, bits):
    dtype = np.float64 if prefix == "d" else np.complex128
    a, b = hard(rng, (14, 40), 1.0, dtype), hard(rng, (40, 11), 1.0, dtype)
    ref = exact_product(a, b)
    gemm = getattr(emublas, prefix + "gemm")
    # a count well short of native's 16: only the bits asked for can be certified
    out, caught = _run(gemm, 1.0, a, b, backend="ozaki2", moduli=8, fallback="none", bits=bits)
    info = last_run()
    assert info["required_bits"] == bits and info["moduli"] == 8
    err = np.abs(out - ref)
    if info["uncertified"] == 0:
        assert not caught
        assert np.all(err <= _bound(a, b, bits))
    else:  # too few moduli for these bits: the warning says so, and names the request
        assert any(f"{bits} correct bits" in str(w.message) for w in caught)
    # with the fallback every entry holds them: recomputed entries carry native's bound
    fixed, _ = _run(gemm, 1.0, a, b, backend="ozaki2", moduli=8, bits=bits)
    assert np.all(np.abs(fixed - ref) <= _bound(a, b, bits))


def test_few_bits_need_no_warning_where_native_bound_fails_every_entry(rng):
    a, b = hard(rng, (20, 48), 0.5), hard(rng, (48, 16), 0.5)
    ref = exact_product(a, b)
    # 6 moduli: 48 product bits, 18 past 2*12 + log2 k (the certificate needs about 13)
    _, caught = _run(emublas.dgemm, 1.0, a, b, backend="ozaki2", moduli=6, fallback="none")
    assert last_run()["uncertified"] == a.shape[0] * b.shape[1]  # native's bound: none certified
    assert any("native BLAS's error bound" in str(w.message) for w in caught)
    out, caught = _run(emublas.dgemm, 1.0, a, b, backend="ozaki2", moduli=6, fallback="none", bits=12)
    assert last_run()["uncertified"] == 0 and not caught
    assert np.all(np.abs(out - ref) <= _bound(a, b, 12))


@pytest.mark.parametrize("fallback", ["none", "dot"])
def test_wide_exponent_span_one_odd_row(rng, fallback):
    """Adversarial: exponents across the range in one row; the certificate must catch what
    the reconstruction cannot carry, at the bits asked for."""
    a, b = hard(rng, (10, 64), 4.0), hard(rng, (64, 9), 4.0)
    a[3] *= np.exp2(rng.integers(-400, 400, a.shape[1]).astype(float))
    ref = exact_product(a, b)
    out, caught = _run(emublas.dgemm, 1.0, a, b, backend="ozaki2", moduli=8, fallback=fallback, bits=20)
    missed = last_run()["uncertified"]
    assert missed > 0 and any("20 correct bits" in str(w.message) for w in caught)
    ok = np.abs(out - ref) <= _bound(a, b, 20)
    if fallback == "dot":
        assert ok.all()
    else:  # exactly the entries left as computed may miss, and the warning counted at least those
        assert (~ok).sum() <= missed
    # fewer entries miss 20 bits than native's bound
    _run(emublas.dgemm, 1.0, a, b, backend="ozaki2", moduli=8, fallback=fallback)
    assert last_run()["uncertified"] > missed


def test_rank_k_and_mode_auto_honour_bits(rng):
    a = hard(rng, (12, 30), 1.0, np.complex128)
    ref = exact_product(a, a.conj().T)
    lower = np.tril(np.ones((12, 12), bool))
    out, caught = _run(emublas.zherk, 1.0, a, backend="ozaki2", moduli=7, fallback="none", bits=14, lower=1)
    assert last_run()["required_bits"] == 14 and last_run()["uncertified"] == 0 and not caught
    assert np.all((np.abs(out - ref) <= _bound(a, a.conj().T, 14))[lower])
    _run(emublas.zgemm, 1.0, a, a, trans_b=2, backend="ozaki2", mode="auto")
    native_count = last_run()["moduli"]
    out, caught = _run(emublas.zgemm, 1.0, a, a, trans_b=2, backend="ozaki2", mode="auto", bits=14)
    assert last_run()["moduli"] < native_count
    # the count comes from a sample of rows: an entry it misjudged is recomputed, never left
    assert all(issubclass(w.category, emublas.OzakiFallbackWarning) for w in caught)
    assert np.all(np.abs(out - ref) <= _bound(a, a.conj().T, 14))


def test_bits_are_checked_against_the_data(rng, monkeypatch):
    a = rng.standard_normal((8, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r"bits=30 is outside 1\.\.24"):
        emublas.sgemm(1.0, a, a, backend="ozaki2", bits=30)
    with pytest.raises(ValueError, match="bits"):
        emublas.dgemm(1.0, a, a, backend="ozaki2", bits=0)
    monkeypatch.setenv("EMUBLAS_OZAKI_BITS", "17")
    emublas.dgemm(1.0, a.astype(np.float64), a.astype(np.float64), backend="ozaki2")
    assert last_run()["required_bits"] == 17
    monkeypatch.setenv("EMUBLAS_OZAKI_BITS", "native")
    emublas.dgemm(1.0, a.astype(np.float64), a.astype(np.float64), backend="ozaki2")
    assert last_run()["required_bits"] is None


@pytest.fixture
def forced(tmp_path, monkeypatch):
    """A cost table under which auto emulates every d/z product from n = 16."""
    ratios = {(p, r): {8: lambda n: 0.5, 16: lambda n: 0.5} for p in "dz" for r in ("gemm", "herk")}
    table = _table(ratios, min_dim=16)
    table["entries"] = [dict(e, n=e["n"] // 64 or 1) for e in table["entries"]]
    path = tmp_path / "forced.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv(tables.ENV_TABLE, str(path))
    monkeypatch.setattr(auto_backend.BACKEND, "_decisions", {})


@pytest.mark.parametrize("phi", [0.5, 4.0])
def test_auto_bits_reach_ozaki2(forced, rng, phi):
    """auto with bits=N runs ozaki2 certified to N bits: no warning about native's bound on
    friendly data, and on a wide exponent span the entries that miss N bits are recomputed
    (with a warning), never left wrong in silence."""
    a, b = hard(rng, (24, 40), phi), hard(rng, (40, 20), phi)
    ref = exact_product(a, b)
    out, caught = _run(emublas.dgemm, 1.0, a, b, backend="auto", bits=20)
    assert emublas.auto_last()["backend"] == "ozaki2" and emublas.auto_last()["options"]["bits"] == 20
    assert last_run()["required_bits"] == 20
    assert np.all(np.abs(out - ref) <= _bound(a, b, 20))
    left = [w for w in caught if w.category is emublas.OzakiAccuracyWarning]  # left as computed
    assert not left
    if last_run()["uncertified"]:
        assert any(issubclass(w.category, emublas.OzakiFallbackWarning) for w in caught)
    else:
        assert not caught
