"""The CPU's fused C loop over moduli and k-chunks (``CpuStages.run_products``,
``oz_run_products``) against the per-modulus Python loop it replaces: the same
bits for every routine, plane kind, chunking, triangle and thread count."""

from __future__ import annotations

import numpy as np
import pytest

import emublas
from emublas.backends.ozaki2 import cpu_stages, kernels_run, scaling


def _unfused(monkeypatch):
    """Run the driver's per-modulus loop (no ``run_products`` on the CPU stages)."""

    class PerModulus(cpu_stages.CpuStages):
        run_products = None

    monkeypatch.setattr(cpu_stages, "CpuStages", PerModulus)


def _data(rng, shape, cplx, phi=2.0):
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x


CASES = [
    ("dgemm", False, {}),
    ("zgemm", True, {}),
    ("zgemm", True, {"moduli": 24}),  # hybrid: 3M moduli past the 2M list, two runs
    ("dgemm", False, {"moduli": 5, "mode": "fast"}),
    ("dsyrk", False, {}),
    ("zsyrk", True, {}),
    ("zherk", True, {}),
    ("dsyr2k", False, {}),
    ("zsyr2k", True, {}),
    ("zher2k", True, {}),
]


def _call(name, cplx, kw, rng, m=37, n=29, k=61, lower=0):
    a = _data(rng, (m, k), cplx)
    if name.endswith("gemm"):
        b = _data(rng, (k, n), cplx)
        return lambda: getattr(emublas, name)(1.0, a, b, backend="ozaki2", **kw)
    if name.endswith("2k"):
        b = _data(rng, (m, k), cplx)
        return lambda: getattr(emublas, name)(1.0, a, b, lower=lower, backend="ozaki2", **kw)
    return lambda: getattr(emublas, name)(1.0, a, lower=lower, backend="ozaki2", **kw)


@pytest.mark.parametrize("name,cplx,kw", CASES)
@pytest.mark.parametrize("chunk", [None, 16])
def test_fused_loop_bit_identical(monkeypatch, name, cplx, kw, chunk):
    if chunk is not None:  # several k-chunks per modulus (k = 61): one CRT term per chunk
        monkeypatch.setattr(scaling, "K_CHUNK", chunk)
    rng = np.random.default_rng(hash((name, chunk)) % 2**32)
    call = _call(name, cplx, kw, rng, lower=0 if name.endswith("gemm") else 1)
    calls = []
    real = kernels_run.oz_run_products
    with monkeypatch.context() as mp:
        mp.setattr(kernels_run, "oz_run_products", lambda *a, **k: calls.append(1) or real(*a, **k))
        got = call()
    assert calls  # the fused loop ran
    with monkeypatch.context() as mp:
        _unfused(mp)
        mp.setattr(kernels_run, "oz_run_products", None)  # and now it cannot
        want = call()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).all()


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_fused_loop_threads(monkeypatch, threads):
    """One team for the whole loop, any size: the same bits as one thread."""
    rng = np.random.default_rng(7)
    a, b = _data(rng, (300, 260), True), _data(rng, (260, 170), True)
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", "1")
    want = emublas.zgemm(1.0, a, b, backend="ozaki2")
    monkeypatch.setenv("EMUBLAS_NUM_THREADS", threads)
    got = emublas.zgemm(1.0, a, b, backend="ozaki2")
    np.testing.assert_array_equal(got, want)
    ref = a @ b
    assert np.max(np.abs(got - ref)) <= 1e-13 * np.max(np.abs(ref))


def _schedule(**over):
    args = dict(planes=1, kk=8, k_chunk=8, products=[[(0, 0)]], terms=[[("re", 0, False, 1, None, False, 0)]])
    args.update(moduli=[251], big_hi=[1.0], big_lo=[0.0])
    args.update(over)
    return kernels_run.RunSchedule(**args)


def test_schedule_checks():
    with pytest.raises(ValueError, match="product planes"):
        _schedule(products=[[(0, 1)]])
    with pytest.raises(ValueError, match="term products"):
        _schedule(terms=[[("re", 1, False, 1, None, False, 0)]])
    with pytest.raises(ValueError, match="part"):
        _schedule(terms=[[("xx", 0, False, 1, None, False, 0)]])
    with pytest.raises(ValueError, match="w1"):
        _schedule(terms=[[("re", 0, False, 2**16, None, False, 0)]])
    with pytest.raises(ValueError, match="one entry per modulus"):
        _schedule(moduli=[251, 241])
    with pytest.raises(ValueError, match="modulus must be"):
        _schedule(moduli=[1])


def test_run_products_checks():
    s = _schedule()
    px = np.zeros((1, 4, 8), np.int8)
    acc = [np.zeros((4, 3), order="F") for _ in range(2)]
    with pytest.raises(ValueError, match="py must be 3-D"):
        kernels_run.oz_run_products(s, px, np.zeros((1, 3, 7), np.int8), *acc)
    with pytest.raises(TypeError, match="px must have dtype int8"):
        kernels_run.oz_run_products(s, px.astype(np.int16), px, *acc)
    with pytest.raises(ValueError, match="re_hi has shape"):
        kernels_run.oz_run_products(s, px, px, *acc)
    with pytest.raises(ValueError, match="must not overlap"):
        sq = np.zeros((4, 4), order="F")
        kernels_run.oz_run_products(s, px, px, sq, sq)
    with pytest.raises(ValueError, match="im_hi and im_lo"):
        si = _schedule(terms=[[("im", 0, False, 1, None, False, 0)]])
        kernels_run.oz_run_products(si, px, px, np.zeros((4, 4), order="F"), np.zeros((4, 4), order="F"))


def test_run_products_small_exact():
    """A hand-checkable run: two moduli, one product each, t = X·Yᵀ mod m accumulated."""
    rng = np.random.default_rng(3)
    mods = [7, 5]
    x = rng.integers(-3, 4, (2, 6, 9)).astype(np.int8)
    y = rng.integers(-2, 3, (2, 4, 9)).astype(np.int8)
    s = kernels_run.RunSchedule(
        1, 9, 4, [[(0, 0)], [(0, 0)]], [[("re", 0, False, 1, None, False, 0)]] * 2, mods, [1.0, 10.0], [0.0, 0.0]
    )
    hi, lo = np.zeros((6, 4), order="F"), np.zeros((6, 4), order="F")
    first, secs = kernels_run.oz_run_products(s, x, y, hi, lo)
    assert first == (False, True) and min(secs) >= 0
    want = np.zeros((6, 4))
    for l, m in enumerate(mods):
        for c0 in range(0, 9, 4):  # one term per k-chunk
            p = x[l][:, c0 : c0 + 4].astype(np.int64) @ y[l][:, c0 : c0 + 4].T.astype(np.int64)
            r = p % m
            r[r > m // 2] -= m
            want += r * (1.0 if l == 0 else 10.0)
    np.testing.assert_array_equal(hi + lo, want)


# ---------------------------------------------------------------------------
# the scaling pass's AVX-512 path (ozaki_scale.c) against its scalar loops
# ---------------------------------------------------------------------------


def _scalar(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the kernels' scalar path."""
    from emublas._kernels import cpu

    _, lib = cpu.require()
    old = lib.emublas_oz_force_generic(1)
    try:
        return fn(*args, **kwargs)
    finally:
        lib.emublas_oz_force_generic(old)


def _scale_inputs(rng):
    """Factors that reach every branch: both layouts, float32/float64, real/complex,
    NaN/Inf rows, all-zero rows, subnormal and huge rows, row counts off the 8 lanes."""
    out = []
    for rows, cols in ((1, 1), (13, 7), (37, 64), (300, 5)):
        for dtype in (np.float64, np.float32, np.complex128, np.complex64):
            x = _data(rng, (rows, cols), np.dtype(dtype).kind == "c", phi=3.0).astype(dtype)
            if rows > 5:
                x[1, cols // 2] = np.nan
                x[2, 0] = np.inf
                x[3] = 0
                x[4] *= np.finfo(x.real.dtype).tiny / 4  # subnormal row: the two-step bound
                x[5] = (rng.random(cols) - 0.5) * np.finfo(x.real.dtype).max
            for view in (x, np.asfortranarray(x), np.asfortranarray(x.T).T[:, ::-1], x[::2]):
                out.append(view)
    return out


def test_scale_simd_matches_scalar():
    from emublas.backends.ozaki2 import kernels_cpu

    rng = np.random.default_rng(11)
    for x in _scale_inputs(rng):
        for threads in (1, 3):
            got = kernels_cpu.oz_row_stats(x, threads=threads)
            want = _scalar(kernels_cpu.oz_row_stats, x, threads=threads)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
            half = x[:, : x.shape[1] // 2]
            carry = kernels_cpu.oz_row_stats(half)
            rest = x[:, x.shape[1] // 2 :]
            got = kernels_cpu.oz_row_stats(rest, carry=carry, threads=threads)
            want = _scalar(kernels_cpu.oz_row_stats, rest, carry=carry, threads=threads)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
            rowmax = np.abs(x).max(axis=1) if x.size else np.zeros(x.shape[0])
            live = np.isfinite(rowmax)
            ea = np.frexp(np.where(live, rowmax, 0.0))[1]
            clean = x.copy()
            clean[~live] = 0
            got = kernels_cpu.oz_bound_int8(clean, ea, threads=threads)
            want = _scalar(kernels_cpu.oz_bound_int8, clean, ea, threads=threads)
            np.testing.assert_array_equal(got, want)
            assert (got[live] >= 0).all() and (got[np.abs(clean) > 0] >= 1).all()


@pytest.mark.parametrize("uplo", [0, 1, 2])
@pytest.mark.parametrize("first", [(True, True), (False, False)])
def test_run_products_groups(uplo, first):
    """Terms of several moduli folded in one pass over the accumulators (``group``):
    the bits of one modulus at a time, for remainders, triangles and carried sums."""
    from emublas.backends.ozaki2.moduli import TWO_M_MODULI, ModulusSet

    rng = np.random.default_rng(5)
    mods = list(TWO_M_MODULI[:5])
    mset = ModulusSet.from_moduli(mods)
    rows = 45
    x = rng.integers(-60, 61, (2 * len(mods), rows, 70)).astype(np.int8)
    y = rng.integers(-60, 61, (2 * len(mods), rows, 70)).astype(np.int8)
    terms = [
        [
            ("re", 0, False, int(rng.integers(-99, 99)), 1, False, int(rng.integers(-99, 99))),
            ("im", 1, False, 3, None, False, 0),
        ]
        for _ in mods
    ]
    s = kernels_run.RunSchedule(2, 70, 1000, [[(0, 0), (1, 1)]] * 5, terms, mods, mset.big_hi, mset.big_lo)
    start = [np.asfortranarray(rng.standard_normal((rows, rows)) * 1e6) for _ in range(4)]
    results = []
    for group in (1, 2, 5, 8):
        acc = [a.copy(order="F") for a in start]
        flags, _ = kernels_run.oz_run_products(
            s, x, y, acc[0], acc[1], im_hi=acc[2], im_lo=acc[3], first=first, uplo=uplo, group=group, threads=2
        )
        assert flags == (False, False)
        results.append(acc)
    for acc in results[1:]:
        for got, want in zip(acc, results[0]):
            np.testing.assert_array_equal(got, want)
    if uplo:  # the other triangle untouched
        off = np.tril(np.ones((rows, rows), bool), -1) if uplo == 1 else np.triu(np.ones((rows, rows), bool), 1)
        np.testing.assert_array_equal(results[-1][0][off], start[0][off])
    assert not np.array_equal(results[-1][0], start[0])
