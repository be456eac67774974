"""The CPU's fused C loop over moduli and k-chunks (``CpuStages.run_products``,
``oz_run_products``) against the per-modulus Python loop it replaces: the same
bits for every routine, plane kind, chunking, triangle and thread count."""

from __future__ import annotations

import re
from fractions import Fraction

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


@pytest.mark.parametrize("name,cplx,kw", [CASES[0], CASES[1], CASES[4], CASES[6]])
def test_fused_loop_paths_bit_identical(name, cplx, kw):
    """The portable C, AVX2 and run-time dispatched passes (the AVX2 one folding several
    moduli per pass over the accumulators, as AVX-512 does): the same bits."""
    from emublas._kernels import cpu

    _, lib = cpu.require()
    outs = []
    for flag in (1, 2, 0):
        call = _call(name, cplx, kw, np.random.default_rng(11), lower=0 if name.endswith("gemm") else 1)
        old = lib.emublas_oz_force_generic(flag)
        try:
            outs.append(call())
        finally:
            lib.emublas_oz_force_generic(old)
    for got in outs[1:]:
        assert got.dtype == outs[0].dtype
        np.testing.assert_array_equal(got, outs[0])
    assert np.isfinite(outs[0]).all()


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


@pytest.mark.parametrize("routine", ["dgemm", "zgemm", "dsyrk", "zherk"])
@pytest.mark.parametrize("m, k, n", [(24, 40, 30), (70, 66, 80), (128, 128, 128)])
def test_small_calls_threads(monkeypatch, routine, m, k, n):
    """Sizes whose kernels run on one thread when the pool is cold and are split when a call
    holds it (its workers awake): the same bits as one thread."""
    rng = np.random.default_rng(m + k + n)
    cplx = routine[0] == "z"
    a, b = _data(rng, (m, k), cplx), _data(rng, (k, n), cplx)
    args = (1.0, a, b) if routine.endswith("gemm") else (1.0, a)
    outs = []
    for threads in ("1", "2"):
        monkeypatch.setenv("EMUBLAS_NUM_THREADS", threads)
        outs.append(getattr(emublas, routine)(*args, backend="ozaki2"))
    np.testing.assert_array_equal(outs[1], outs[0])
    assert np.isfinite(outs[0]).all()


def _schedule(**over):
    args = dict(planes=1, kk=8, k_chunk=8, products=[[(0, 0)]], terms=[[("re", 0, False, 1, None, False, 0)]])
    args.update(moduli=[251], big=[[1.0, 0.0, 0.0]])
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
    with pytest.raises(ValueError, match="products, terms and big need one entry per modulus"):
        _schedule(moduli=[251, 241])
    with pytest.raises(ValueError, match="products, terms and big need one entry per modulus"):
        _schedule(big=[[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="big must be finite"):
        _schedule(big=[[1.0, np.inf, 0.0]])
    with pytest.raises(ValueError, match="modulus must be"):
        _schedule(moduli=[1])


def test_run_products_checks():
    s = _schedule()
    px = np.zeros((1, 4, 8), np.int8)
    acc = np.zeros((4, 4, 3), order="F")
    with pytest.raises(ValueError, match="py must be 3-D"):
        kernels_run.oz_run_products(s, px, np.zeros((1, 3, 7), np.int8), acc)
    with pytest.raises(TypeError, match="px must have dtype int8"):
        kernels_run.oz_run_products(s, px.astype(np.int16), px, acc)
    with pytest.raises(ValueError, match=re.escape("re has shape (4, 3, 3), expected (4, 4, 3)")):
        kernels_run.oz_run_products(s, px, px, np.zeros((4, 3, 3), order="F"))
    with pytest.raises(ValueError, match=re.escape("re has shape (4, 4), expected (4, 4, 3)")):
        kernels_run.oz_run_products(s, px, px, np.zeros((4, 4), order="F"))
    with pytest.raises(ValueError, match="im has shape"):
        kernels_run.oz_run_products(s, px, px, acc, im=np.zeros((4, 4, 2), order="F"))
    with pytest.raises(ValueError, match="Fortran"):
        kernels_run.oz_run_products(s, px, px, np.zeros((4, 4, 3)))
    with pytest.raises(ValueError, match="must not overlap"):
        kernels_run.oz_run_products(s, px, px, acc, im=acc)
    with pytest.raises(ValueError, match="the schedule has imaginary terms: give im"):
        si = _schedule(terms=[[("im", 0, False, 1, None, False, 0)]])
        kernels_run.oz_run_products(si, px, px, acc)


def test_run_products_small_exact():
    """A hand-checkable run: two moduli, one product each, t = X·Yᵀ mod m accumulated."""
    rng = np.random.default_rng(3)
    mods = [7, 5]
    x = rng.integers(-3, 4, (2, 6, 9)).astype(np.int8)
    y = rng.integers(-2, 3, (2, 4, 9)).astype(np.int8)
    big = np.array([[1.0, 0.5, -0.25], [10.0, -2.0, 0.125]])  # each accumulator its own piece
    s = kernels_run.RunSchedule(1, 9, 4, [[(0, 0)], [(0, 0)]], [[("re", 0, False, 1, None, False, 0)]] * 2, mods, big)
    acc = np.full((6, 4, 3), np.nan, order="F")
    first, secs = kernels_run.oz_run_products(s, x, y, acc)
    assert first == (False, True) and min(secs) >= 0
    want = np.zeros((6, 4, 3))
    for l, m in enumerate(mods):
        for c0 in range(0, 9, 4):  # one term per k-chunk
            p = x[l][:, c0 : c0 + 4].astype(np.int64) @ y[l][:, c0 : c0 + 4].T.astype(np.int64)
            r = p % m
            r[r > m // 2] -= m
            want += r[:, :, None] * big[l]
    np.testing.assert_array_equal(acc, want)


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
    for rows, cols in ((1, 1), (13, 7), (37, 64), (77, 3), (300, 5)):
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
    the bits of one modulus at a time, for remainders, triangles and carried sums, and
    the exact sums of the terms (computed with integers)."""
    from emublas.backends.ozaki2.moduli import TWO_M_MODULI, ModulusSet, crt_split

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
    # one term per modulus and part (one k-chunk); carried sums hold as many again
    crt = crt_split(mset, 2 * len(mods))
    s = kernels_run.RunSchedule(2, 70, 1000, [[(0, 0), (1, 1)]] * 5, terms, mods, crt.weights)
    # the terms as integers: t[part][l] = (w1·P1 + w2·P2) mod m, symmetric
    t = np.zeros((2, len(mods), rows, rows), np.int64)
    for l, m in enumerate(mods):
        prods = [x[2 * l + q].astype(np.int64) @ y[2 * l + q].T.astype(np.int64) for q in (0, 1)]
        for part, p1, _, w1, p2, _, w2 in terms[l]:
            v = (w1 * prods[p1] + (0 if p2 is None else w2 * prods[p2])) % m
            t[int(part == "im"), l] = np.where(v > m // 2, v - m, v)
    # carried sums: as from an earlier call with the same number of terms (so exact)
    start = [np.asfortranarray(np.einsum("lij,ls->ijs", rng.permutation(t[p]), crt.weights)) for p in (0, 1)]
    results = []
    for group in (1, 2, 5, 8):
        acc = [a.copy(order="F") for a in start]
        flags, _ = kernels_run.oz_run_products(
            s, x, y, acc[0], im=acc[1], first=first, uplo=uplo, group=group, threads=2
        )
        assert flags == (False, False)
        results.append(acc)
    for acc in results[1:]:
        for got, want in zip(acc, results[0]):
            np.testing.assert_array_equal(got, want)
    inside = np.ones((rows, rows), bool)
    if uplo:  # the other triangle untouched
        inside = np.triu(inside) if uplo == 1 else np.tril(inside)
        for got, was in zip(results[-1], start):
            np.testing.assert_array_equal(got[~inside], was[~inside])
    assert not np.array_equal(results[-1][0], start[0])
    # every fma exact: each accumulator is the exact sum of its terms times its pieces
    units = [Fraction(2) ** (mset.P.bit_length() - s_ * crt.beta) for s_ in (1, 2, 3)]
    pieces = [[Fraction(float(b)) / u for b, u in zip(row, units)] for row in crt.weights]
    assert all(q.denominator == 1 for row in pieces for q in row)  # whole units of their grids
    for p in (0, 1):
        for s_ in range(3):
            k = np.array([int(pieces[l][s_]) for l in range(len(mods))], np.int64)
            want = np.einsum("lij,l->ij", t[p], k)  # |sum| < 2^53: exact in int64 and float64
            if not first[p]:
                want = want + np.rint(start[p][:, :, s_] / float(units[s_])).astype(np.int64)
            got = results[0][p][:, :, s_]
            np.testing.assert_array_equal(got[inside], want[inside].astype(np.float64) * float(units[s_]))


FAST_CASES = [(name, cplx) for name, cplx, _ in CASES if not _] + [("dgemm", False), ("sgemm", False), ("cgemm", True)]


@pytest.mark.parametrize("name,cplx", sorted(set(FAST_CASES)))
@pytest.mark.parametrize("moduli", [5, "default", 24])
def test_fast_mode_one_read_bit_identical(monkeypatch, name, cplx, moduli):
    """Fast mode on the CPU makes its statistics, row plans and first residue planes in one
    read of each factor (``cpu_stages.scaled_first_run``): the same bits and the same record
    as the scaling and residue passes it replaces, with a row holding NaN (its entries come
    from the certificate's fallback), a row of another magnitude, and a second run of moduli
    (24 complex moduli: 3M past the 2M list)."""
    if moduli == 24 and not cplx:
        pytest.skip("24 moduli: the complex hybrid")
    rng = np.random.default_rng(abs(hash((name, str(moduli)))) % 2**32)
    a = _data(rng, (37, 62), cplx)
    a[5] *= 2.0**40
    a[7, 3] = np.nan
    if name[0] in "sc":
        a = a.astype(np.complex64 if cplx else np.float32)
    a0 = a.copy()
    kw = {"backend": "ozaki2", "mode": "fast", "moduli": moduli}
    if name.endswith("gemm"):
        b = _data(rng, (62, 29), cplx).astype(a.dtype)
        call = lambda: getattr(emublas, name)(1.0, a, b, **kw)  # noqa: E731
    elif name.endswith("2k"):
        b = _data(rng, (37, 62), cplx).astype(a.dtype)
        call = lambda: getattr(emublas, name)(1.0, a, b, lower=1, **kw)  # noqa: E731
    else:
        call = lambda: getattr(emublas, name)(1.0, a, lower=1, **kw)  # noqa: E731
    made = []
    real = cpu_stages.scaled_first_run
    with monkeypatch.context() as mp:
        mp.setattr(cpu_stages, "scaled_first_run", lambda *x, **k: made.append(r := real(*x, **k)) or r)
        got = call()
        got_info = emublas.backends.get("ozaki2").last_run()
    # syr2k scales by its two factors side by side, and complex syrk's split2m planes are
    # made in two steps: both keep the two-pass form
    if not name.endswith("syr2k") and name != "zsyrk":
        assert made and made[0] is not None
    with monkeypatch.context() as mp:
        mp.setattr(cpu_stages, "scaled_first_run", lambda *x, **k: None)  # the two-pass form
        want = call()
        want_info = emublas.backends.get("ozaki2").last_run()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, a0)  # inputs untouched
    for key in ("moduli", "bits", "uncertified", "mode"):
        assert got_info[key] == want_info[key]


@pytest.mark.parametrize("chunk", [None, 48])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("name", ["dsyrk", "ssyrk", "zherk", "csyrk", "dsyr2k", "zher2k"])
def test_rank_k_bound_triangle_bit_identical(monkeypatch, name, lower, chunk):
    """Accurate mode's bound product of a rank-k call made as its one triangle in column blocks
    (scaling.TRIANGLE_MIN from 1 here) gives the bits and the record of the whole product:
    its maxima come from the triangle and its mirror, and the certificate reads W only in the
    triangle it finalizes; also with k in several chunks (int64 sums), NaN and huge rows."""
    rng = np.random.default_rng(abs(hash((name, lower, chunk))) % 2**32)
    cplx = name[0] in "cz"
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[name[0]]
    a = _data(rng, (45, 130), cplx)
    a[6] *= 2.0**60
    a[9, 4] = np.nan
    a = a.astype(dtype)
    b = _data(rng, (45, 130), cplx).astype(dtype)
    fn = getattr(emublas, name)
    args = (1.0, a, b) if name.endswith("2k") else (1.0, a)
    if chunk:
        monkeypatch.setattr(scaling, "K_CHUNK", chunk)

    def run():
        out = fn(*args, lower=lower, backend="ozaki2", mode="accurate")
        return out, emublas.backends.get("ozaki2").last_run()

    monkeypatch.setattr(scaling, "TRIANGLE_MIN", 2**62)
    want, want_info = run()
    made = []
    real = scaling._bound_triangle
    monkeypatch.setattr(scaling, "TRIANGLE_MIN", 1)
    monkeypatch.setattr(scaling, "_bound_triangle", lambda *x: made.append(1) or real(*x))
    got, got_info = run()
    assert made, "the triangle path ran"
    np.testing.assert_array_equal(got, want)
    for key in ("moduli", "bits", "uncertified"):
        assert got_info[key] == want_info[key]


@pytest.mark.parametrize("uplo", [1, 2])
def test_bound_triangle_entries_and_maxima(uplo):
    """_bound_triangle's W equals the whole product in its triangle (elsewhere zero or the
    whole product's value: the diagonal blocks are made whole), and its maxima are the whole
    product's, for B·Bᵀ and for a rank-2k pair, with one and with several k chunks."""
    rng = np.random.default_rng(uplo)
    x, y = rng.integers(0, 128, (37, 150)), rng.integers(0, 128, (37, 150))
    pairs = [(x, x), (np.hstack([x, y]), np.hstack([y, x]))]
    tri = np.triu if uplo == 1 else np.tril
    for (a, b), chunk in [(p, c) for p in pairs for c in (scaling.K_CHUNK, 64)]:
        a, b = a.astype(np.int8), b.astype(np.int8)
        full = a.astype(np.int64) @ b.astype(np.int64).T
        np.testing.assert_array_equal(full, full.T)  # symmetric, as every rank-k call's W is
        saved = scaling.K_CHUNK
        scaling.K_CHUNK = chunk
        try:
            wrow, wcol, w = scaling._bound_triangle(a, b, uplo, None)
        finally:
            scaling.K_CHUNK = saved
        np.testing.assert_array_equal(tri(w), tri(full))
        assert ((w == 0) | (w == full)).all()
        assert w.dtype == np.int32 and w.flags.f_contiguous
        np.testing.assert_array_equal(wrow, full.max(axis=1))
        np.testing.assert_array_equal(wcol, full.max(axis=0))
