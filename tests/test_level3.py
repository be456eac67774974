"""symm, hemm, trmm, trsm: parity with scipy.linalg.blas, argument rules, trsm's error.

Every routine is called as its scipy namesake and compared with scipy's result
on numpy copies of the inputs, for every prefix, side, lower, trans_a, diag and
the shapes 1, 3, 17, 64, 130; the triangle a routine does not reference (and a
unit diagonal, and the imaginary part of hemm's diagonal) holds NaN, so reading
it would show.  On the emulating backends the recursion's leaf is made small
(``LEAF`` and ``TRSM_LEAF`` 16 on both devices) so that 17, 64 and 130 recurse several levels with odd splits;
one test runs the default leaf on a larger matrix.
"""

import warnings

import numpy as np
import pytest
import scipy.linalg.blas as sblas

from helpers import randn, skip_unless_ready

BACKENDS = ["native", "ozaki2", "strassen", "boolpack"]
DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
SIZES = (1, 3, 17, 64, 130)
BOOLPACK_BITS = 16


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    import emublas.level3

    monkeypatch.setenv("EMUBLAS_STRASSEN_LEVELS", "1")  # small blocks: make strassen recurse
    monkeypatch.setenv("EMUBLAS_BOOLPACK_BITS", str(BOOLPACK_BITS))
    if request.param != "native":
        monkeypatch.setattr(emublas.level3, "LEAF", {"cpu": 16, "gpu": 16})
        monkeypatch.setattr(emublas.level3, "TRSM_LEAF", {"cpu": 16, "gpu": 16})
    skip_unless_ready(request, request.param)
    return request.param


def _np(x):
    return x if isinstance(x, np.ndarray) else x.get()


def _ulps(backend, xp, dtype, k):
    """Normwise tolerance factor (times max|op(A)| max|B|): a few ulps per term natively, more
    for another summation order, the quantization of boolpack."""
    eps = float(np.finfo(dtype).eps)
    if backend == "boolpack":
        cplx = 2.0 if np.dtype(dtype).kind == "c" else 1.0
        return cplx * 2.0 ** (3 - BOOLPACK_BITS) * k + 16 * eps * k
    ulps = {"native": 8}.get(backend, 256) * (1 if xp is np else 8)
    return ulps * eps * k


def _nan_outside(a, lower, diag, herm=False):
    """a with NaN in the triangle not referenced (and on a unit diagonal, and as the imaginary
    part of a Hermitian diagonal): any read of those shows in the result."""
    a = a.copy()
    k = a.shape[0]
    i, j = np.indices((k, k))
    a[(i < j) if lower else (i > j)] = np.nan
    d = np.arange(k)
    if diag:
        a[d, d] = np.nan
    elif herm:
        a.imag[d, d] = np.nan
    return a


def _triangular(rng, k, dtype, lower, diag):
    """A well-conditioned triangle (diagonal 1..2 in magnitude, small off-diagonal) with NaN outside."""
    a = randn(rng, (k, k), dtype) / k
    d = np.arange(k)
    a[d, d] = (1 + rng.random(k)) * np.where(rng.random(k) < 0.5, -1, 1)
    return _nan_outside(a, lower, diag)


def _check_layout(r, xp, dtype, shape):
    assert type(r) is type(xp.empty(0)), type(r)
    assert r.dtype == dtype and r.shape == shape and r.flags.f_contiguous


# --------------------------------------------------------------------------
# trmm, trsm
# --------------------------------------------------------------------------

TRI = [p + f for f in ("trmm", "trsm") for p in "sdcz"]


@pytest.mark.parametrize("diag", [0, 1])
@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("name", TRI)
def test_triangular_parity(emublas, xp, backend, rng, name, side, lower, trans, diag):
    dtype = DTYPES[name[0]]
    fn, ref_fn = getattr(emublas, name), getattr(sblas, name)
    alpha = -1.5 + (0.5j if name[0] in "cz" else 0)
    for k in SIZES:
        other = int(rng.integers(1, 9))
        a = _triangular(rng, k, dtype, lower, diag)
        b = randn(rng, (k, other) if side == 0 else (other, k), dtype)
        b = b if rng.random() < 0.5 else np.asfortranarray(b)
        ref = ref_fn(alpha, a, b, side=side, lower=lower, trans_a=trans, diag=diag)
        da, db = xp.asarray(a), xp.asarray(b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", emublas.OzakiAccuracyWarning)  # judged by the tolerance here
            r = fn(alpha, da, db, side=side, lower=lower, trans_a=trans, diag=diag, backend=backend)
        _check_layout(r, xp, dtype, b.shape)
        assert np.array_equal(_np(da), a, equal_nan=True) and np.array_equal(_np(db), b)
        err = np.abs(_np(r) - ref).max()
        scale = 2 * np.abs(ref).max() + 2 * abs(alpha) * np.abs(b).max()  # max|op(A)| <= 2
        assert np.isfinite(_np(r)).all(), (k, "NaN from the unreferenced part of a")
        assert err <= _ulps(backend, xp, dtype, k) * scale, (k, err, scale)


@pytest.mark.parametrize("name", ["dtrsm", "ztrsm", "strmm", "ctrmm"])
def test_triangular_default_leaf_larger(emublas, rng, name):
    """The default leaf on a matrix that recurses past it, on every emulating backend."""
    dtype = DTYPES[name[0]]
    k = 300
    a = _triangular(rng, k, dtype, 1, 0)
    b = randn(rng, (k, 40), dtype)
    ref = getattr(sblas, name)(2.0, a, b, lower=1, trans_a=1)
    for be in ("ozaki2", "strassen"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", emublas.OzakiAccuracyWarning)
            r = getattr(emublas, name)(2.0, a, b, lower=1, trans_a=1, backend=be)
        err = np.abs(r - ref).max() / np.abs(ref).max()
        assert err <= 64 * k * np.finfo(dtype).eps, (be, err)


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_triangular_overwrite_b(emublas, xp, backend, rng, kind):
    a = _triangular(rng, 5, np.float64, 0, 0)
    fn = getattr(emublas, "d" + kind)
    b = xp.asarray(np.asfortranarray(randn(rng, (5, 3), np.float64)))
    expect = fn(1.0, a, _np(b), backend="native")
    keep = b.copy()
    r = fn(1.0, xp.asarray(a), b, backend=backend)  # overwrite_b=0: b untouched
    assert r is not b and bool((b == keep).all())
    r = fn(1.0, xp.asarray(a), b, overwrite_b=1, backend=backend)
    assert r is b
    assert np.allclose(_np(b), expect, rtol=1e-3, atol=1e-3)
    for other in (xp.asarray(np.ascontiguousarray(_np(keep))), keep.astype(np.float32)):
        before = other.copy()
        r = fn(1.0, xp.asarray(a), other, overwrite_b=1, backend=backend)  # C order, other dtype: copied
        assert r is not other and bool((other == before).all())
    if xp is np:  # scipy: a 1-D b is a column, the result has b's shape, overwrite_b updates it
        v = rng.standard_normal(5)
        r = fn(1.0, a, v, backend=backend)
        assert r.shape == (5,) and np.allclose(r, getattr(sblas, "d" + kind)(1.0, a, v), rtol=1e-3, atol=1e-3)
        r = fn(1.0, a, v, overwrite_b=1, backend=backend)
        assert r is v


def test_triangular_a_aliasing_b(emublas, backend, rng):
    """scipy.stats calls trmm(1., CA, CA, ...): b is a copy unless overwrite_b; with it, a is read
    before b is written."""
    a = np.asfortranarray(_triangular(rng, 20, np.float64, 1, 0))
    a[np.isnan(a)] = 0
    ref = sblas.dtrmm(1.0, a, a.copy(order="F"), side=1, lower=1, trans_a=1)
    for overwrite in (0, 1):
        x = a.copy(order="F")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = emublas.dtrmm(1.0, x, x, side=1, lower=1, trans_a=True, overwrite_b=overwrite, backend=backend)
        assert np.abs(r - ref).max() <= _ulps(backend, np, np.float64, 20) * 4 * np.abs(ref).max()


@pytest.mark.parametrize("kind", ["trmm", "trsm"])
def test_triangular_alpha_zero_and_empty(emublas, xp, backend, kind):
    fn = getattr(emublas, "z" + kind)
    a = xp.asarray(np.full((4, 4), np.nan + 0j))
    b = xp.asarray(np.full((4, 3), np.nan + 0j))
    r = fn(0.0, a, b, backend=backend)  # reference BLAS: zeros, a and b not read
    assert bool((r == 0).all()) and r.shape == (4, 3)
    assert fn(1.0, xp.zeros((0, 0)), xp.zeros((0, 3)), backend=backend).shape == (0, 3)
    assert fn(1.0, xp.ones((2, 2)), xp.zeros((2, 0)), backend=backend).shape == (2, 0)


def test_trmm_larger_a_like_scipy(emublas, backend):
    """scipy's trmm takes a with rows >= columns >= k and uses its leading k x k block."""
    a2 = np.array([[1, 1, 2, 3], [0, 1, 4, 5], [0, 0, 1, 6], [0, 0, 0, 1]], dtype=float, order="F")
    b2 = np.array([[1, 4], [2, 5], [3, 6], [7, 8], [9, 10]], dtype=float, order="F")
    r = emublas.dtrmm(1.0, a2, b2, side=1, backend=backend)
    assert np.allclose(r, b2 @ a2[:2, :2])
    with pytest.raises(ValueError, match="a must be 5x5"):
        emublas.dtrmm(1.0, a2, b2, backend=backend)
    with pytest.raises(ValueError, match="rows >= columns"):
        emublas.dtrmm(1.0, np.ones((4, 5)), np.ones((4, 3)), backend=backend)


# --------------------------------------------------------------------------
# symm, hemm
# --------------------------------------------------------------------------

SYM = [p + "symm" for p in "sdcz"] + ["chemm", "zhemm"]


@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("name", SYM)
def test_symm_parity(emublas, xp, backend, rng, name, side, lower):
    dtype = DTYPES[name[0]]
    herm = name.endswith("hemm")
    fn, ref_fn = getattr(emublas, name), getattr(sblas, name)
    cplx = name[0] in "cz"
    for k in SIZES:
        other = int(rng.integers(1, 9))
        a = _nan_outside(randn(rng, (k, k), dtype), lower, 0, herm)
        shape = (k, other) if side == 0 else (other, k)
        b = randn(rng, shape, dtype)
        c = randn(rng, shape, dtype)
        for alpha, beta in ((1.0, 0.0), (0.5 - 2j * cplx, 1.5 + 1j * cplx), (0.0, 2.0)):
            ref = ref_fn(alpha, a, b, beta, c, side=side, lower=lower)
            da, db, dc = xp.asarray(a), xp.asarray(b), xp.asarray(c)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", emublas.OzakiAccuracyWarning)
                r = fn(alpha, da, db, beta, dc, side=side, lower=lower, backend=backend)
            _check_layout(r, xp, dtype, shape)
            assert np.array_equal(_np(da), a, equal_nan=True) and np.array_equal(_np(dc), c)
            scale = abs(alpha) * np.abs(np.nan_to_num(a)).max() * np.abs(b).max() + abs(beta) * np.abs(c).max()
            err = np.abs(_np(r) - ref).max()
            assert err <= _ulps(backend, xp, dtype, k) * scale + 1e-30, (k, alpha, beta, err)
        # without c, and beta == 0 with NaN in c: c is not read
        ref = ref_fn(2.0, a, b, side=side, lower=lower)
        r = fn(
            2.0,
            xp.asarray(a),
            xp.asarray(b),
            0.0,
            xp.asarray(np.full(shape, np.nan, dtype)),
            side=side,
            lower=lower,
            backend=backend,
        )
        bound = _ulps(backend, xp, dtype, k) * 2 * np.abs(np.nan_to_num(a)).max() * np.abs(b).max()
        assert np.abs(_np(r) - ref).max() <= bound


def test_symm_overwrite_c_and_generic(emublas, backend, rng):
    a = randn(rng, (6, 6), np.complex128)
    b = randn(rng, (6, 4), np.complex128)
    c = np.asfortranarray(randn(rng, (6, 4), np.complex128))
    ref = sblas.zhemm(1.0, a, b, 1.0, c)
    r = emublas.zhemm(1.0, a, b, 1.0, c, overwrite_c=1, backend=backend)
    # normwise, as every backend's accuracy is stated: an entry near zero may carry all of it
    bound = _ulps(backend, np, np.complex128, 6) * np.abs(a).max() * np.abs(b).max()
    assert r is c and np.abs(c - ref).max() <= bound
    # dtype-generic forms, promoted like scipy; hemm of real data is symm
    ar, br = a.real.astype(np.float32), b.real.astype(np.float32)
    r = emublas.hemm(1.0, ar, br, backend=backend)
    bound = _ulps(backend, np, np.float32, 6) * np.abs(ar).max() * np.abs(br).max()
    assert r.dtype == np.float32 and np.abs(r - sblas.ssymm(1.0, ar, br)).max() <= bound
    assert emublas.symm(1.0, ar, b, backend=backend).dtype == np.complex128
    assert emublas.trsm(1.0, np.eye(3, dtype=np.float32), np.ones((3, 2)), backend=backend).dtype == np.float64
    assert (
        emublas.trmm(1.0, np.eye(3, dtype=np.complex64), np.ones((3, 2), np.float32), backend=backend).dtype
        == np.complex64
    )


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


@pytest.mark.parametrize("arg,bad", [("side", 2), ("lower", -1), ("trans_a", 3), ("diag", 2), ("trans_a", "x")])
@pytest.mark.parametrize("name", ["dtrmm", "ztrsm", "trsm"])
def test_triangular_bad_codes(emublas, name, arg, bad):
    with pytest.raises((TypeError, ValueError), match=rf"{arg} must be"):
        getattr(emublas, name)(1.0, np.eye(3), np.ones((3, 2)), **{arg: bad})


@pytest.mark.parametrize("arg,bad", [("side", 2), ("lower", 5), ("side", -1)])
@pytest.mark.parametrize("name", ["ssymm", "zhemm", "hemm"])
def test_symm_bad_codes(emublas, name, arg, bad):
    with pytest.raises(ValueError, match=rf"{arg} must be one of"):
        getattr(emublas, name)(1.0, np.eye(3), np.ones((3, 2)), **{arg: bad})


def test_shape_errors(emublas):
    with pytest.raises(ValueError, match=r"dtrsm: a must be square 4x4.*a 4x5"):
        emublas.dtrsm(1.0, np.ones((4, 5)), np.ones((4, 4)))
    with pytest.raises(ValueError, match=r"a must be square 3x3 \(the columns of b"):
        emublas.dtrsm(1.0, np.eye(4), np.ones((4, 3)), side=1)
    with pytest.raises(ValueError, match=r"dsymm: a must be square 3x3 \(the columns of b, side=1\), got a 2x2"):
        emublas.dsymm(1.0, np.eye(2), np.ones((2, 3)), side=1)
    with pytest.raises(ValueError, match=r"c has shape 3x3 but the result is 2x3"):
        emublas.zhemm(1.0, np.eye(2), np.ones((2, 3)), 1.0, np.ones((3, 3)))
    with pytest.raises(ValueError, match="alpha"):
        emublas.dtrsm("x", np.eye(2), np.ones((2, 3)))
    with pytest.raises(ValueError, match="must be a 2-D array"):
        emublas.dtrmm(1.0, np.eye(2), np.ones((2, 3, 1)))
    with pytest.raises(ValueError, match="unknown emublas backend"):
        emublas.dtrsm(1.0, np.eye(2), np.ones((2, 3)), backend="nope")
    with pytest.raises(ValueError, match="no option 'moduli'"):
        emublas.dtrsm(1.0, np.eye(2), np.ones((2, 3)), backend="native", moduli=3)


def test_scipy_test_shapes_raise_like_scipy(emublas):
    """The size mismatches scipy's own test_trsm / test_symm_wrong_side expect to fail."""
    rng = np.random.default_rng(1234)
    a, b = rng.random((4, 5)), rng.random((4, 4))
    for aa in (a, a.T):
        with pytest.raises(ValueError):
            emublas.dtrsm(1.0, aa, b)
    with pytest.raises(ValueError):
        emublas.dsymm(1, np.ones((2, 2)), np.ones((2, 3)), side=1)


# --------------------------------------------------------------------------
# trsm's error on ill-conditioned triangles, emulated against native
# --------------------------------------------------------------------------


def _ill_triangle(rng, k, dtype, lower):
    """D (I + N/sqrt(k)) with D spanning 1..1e-8 in random order: condition numbers of 1e8 and
    more, solutions of 1e8 in magnitude, without overflowing growth."""
    cplx = np.dtype(dtype).kind == "c"
    d = np.logspace(0, -8, k)[rng.permutation(k)]
    a = d[:, None] * (np.eye(k) + randn(rng, (k, k), np.complex128 if cplx else np.float64) / np.sqrt(k))
    a = np.tril(a) if lower else np.triu(a)
    return a.astype(dtype)


def backward_error(a, x, b, alpha, side, lower, trans, diag):
    """max |op(A) x - alpha b| / (|op(A)| |x| + |alpha b|) entrywise, in extended precision
    (long double: 64-bit mantissa; float64 for single-precision data)."""
    wide = np.clongdouble if a.dtype.kind == "c" else np.longdouble
    if a.dtype.itemsize <= 8 and a.dtype != np.complex128:
        wide = np.complex128 if a.dtype.kind == "c" else np.float64
    t = np.tril(a) if lower else np.triu(a)
    if diag:
        np.fill_diagonal(t, 1)
    t = t.astype(wide)
    op = t if trans == 0 else (t.T if trans == 1 else t.conj().T)
    x, b = x.astype(wide), b.astype(wide)
    res = op @ x - alpha * b if side == 0 else x @ op - alpha * b
    size = (np.abs(op) @ np.abs(x) if side == 0 else np.abs(x) @ np.abs(op)) + abs(alpha) * np.abs(b)
    return float(np.max(np.abs(res) / size))


TRSM_CASES = [(p, side, lower, trans) for p in "dz" for side in (0, 1) for lower in (0, 1) for trans in (0, 2)]


@pytest.mark.parametrize("emulated", ["ozaki2", "strassen"])
@pytest.mark.parametrize("prefix,side,lower,trans", TRSM_CASES)
def test_trsm_backward_error_within_native(emublas, emulated, prefix, side, lower, trans):
    """Emulated trsm (native 128-row diagonal solves, emulated gemm updates) is backward stable:
    its componentwise backward error is within a small factor of native trsm's."""
    rng = np.random.default_rng(20260 + side + 2 * lower + 4 * trans)
    dtype = DTYPES[prefix]
    k = 400
    a = _ill_triangle(rng, k, dtype, lower)
    b = randn(rng, (k, 24) if side == 0 else (24, k), dtype)
    alpha = 0.75
    args = dict(side=side, lower=lower, trans_a=trans)
    x_native = getattr(emublas, prefix + "trsm")(alpha, a, b, backend="native", **args)
    native = backward_error(a, x_native, b, alpha, side, lower, trans, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", emublas.OzakiAccuracyWarning)
        x = getattr(emublas, prefix + "trsm")(alpha, a, b, backend=emulated, **args)
    emu = backward_error(a, x, b, alpha, side, lower, trans, 0)
    eps = float(np.finfo(dtype).eps)
    assert native < 10 * k * eps  # the measure itself is sane
    assert emu <= 4 * max(native, eps), (emu, native)


# --------------------------------------------------------------------------
# GPU: the native cuBLAS paths against scipy (run where a GPU is; skipped here)
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["dtrsm", "ztrmm", "csymm", "zhemm"])
def test_gpu_native_views(emublas, cupy, rng, name):
    """cuBLAS on non-contiguous views and C-ordered operands goes through Fortran temporaries."""
    dtype = DTYPES[name[0]]
    a = _triangular(rng, 40, dtype, 1, 0)
    a[np.isnan(a)] = 0
    big = randn(rng, (80, 30), dtype)
    b = big[::2, :]  # strided rows
    fn, ref_fn = getattr(emublas, name), getattr(sblas, name)
    r = fn(1.0, cupy.asarray(a), cupy.asarray(big)[::2, :], backend="native")
    ref = ref_fn(1.0, a, b)
    assert np.allclose(r.get(), ref, rtol=1e-4, atol=1e-4)
