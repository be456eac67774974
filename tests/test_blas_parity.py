"""Parity of emublas's BLAS-3 front with scipy.linalg.blas.

Every emublas routine is called exactly as its scipy.linalg.blas namesake and the
result is compared with scipy's (run on numpy copies of the inputs):

* values in the referenced part to a per-backend normwise tolerance;
* the triangle not referenced by syrk/herk/syr2k/her2k: exactly c's values with
  ``c`` given, exactly zero without;
* herk/her2k diagonals exactly real;
* Fortran order, dtype, array type and device of the result;
* ``overwrite_c`` (``r is c`` exactly when c is a Fortran-contiguous array of the
  routine's dtype) and inputs never modified otherwise;
* NaN in ``c`` with ``beta == 0`` never read; NaN/Inf in a/b propagated like scipy;
* k = 0, alpha = 0, lists, scalars, the dtype-generic routines.

Backends: ``DEFAULT_BACKENDS`` below, overridden by ``EMUBLAS_TEST_BACKENDS``
(comma separated) or ``--emublas-backends``.  Each backend has a tolerance
function in ``TOLERANCES``; backends without one get ``default_tol``.
"""

import os

import numpy as np
import pytest
import scipy.linalg.blas as sblas
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import skip_unless_ready

# --------------------------------------------------------------------------
# backends and tolerances
# --------------------------------------------------------------------------

DEFAULT_BACKENDS = ["native", "ozaki2", "strassen", "boolpack"]
BACKENDS = [b.strip() for b in os.environ.get("EMUBLAS_TEST_BACKENDS", "").split(",") if b.strip()] or list(
    DEFAULT_BACKENDS
)


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    """The backend name; skipped where it cannot run on the device of the test's arrays."""
    # the parity shapes are small: make strassen recurse instead of calling its leaf at once
    monkeypatch.setenv("EMUBLAS_STRASSEN_LEVELS", "2")
    # boolpack quantizes (tolerance below) and raises on NaN/Inf unless told to go native
    monkeypatch.setenv("EMUBLAS_BOOLPACK_BITS", str(BOOLPACK_BITS))
    monkeypatch.setenv("EMUBLAS_BOOLPACK_NONFINITE", "native")

    skip_unless_ready(request, request.param)
    return request.param


def _xp_name(xp):
    return "numpy" if xp is np else "cupy"


def native_tol(xp_name, dtype, k, terms, alpha, beta, amax, bmax, cmax):
    """Normwise bound: a few ulps (numpy: scipy itself; cupy: cuBLAS sums in
    another order, so a few hundred) of terms*k*|alpha|*max|a|*max|b| + |beta|*max|c|."""
    ulps = 8 if xp_name == "numpy" else 256
    eps = float(np.finfo(dtype).eps)
    # GPU elementwise kernels flush float32 subnormal results to zero
    flush = 0.0 if xp_name == "numpy" else float(np.finfo(dtype).tiny)
    return ulps * eps * (terms * k * abs(alpha) * amax * bmax + abs(beta) * cmax) + flush


def default_tol(xp_name, dtype, k, terms, alpha, beta, amax, bmax, cmax):
    """For backends without their own entry: EMUBLAS_TEST_ULPS ulps (default 256)."""
    ulps = float(os.environ.get("EMUBLAS_TEST_ULPS", "256"))
    if xp_name != "numpy":
        ulps *= 2
    eps = float(np.finfo(dtype).eps)
    # GPU float32 kernels flush subnormal results to zero, and an emulating backend has more
    # roundings per entry than cuBLAS (strassen's chained sums, each part of a complex entry):
    # each flushed one is off by at most tiny
    cplx = 2 if np.dtype(dtype).kind == "c" else 1
    flush = 0.0 if xp_name == "numpy" else cplx * (terms * k + 1) * float(np.finfo(dtype).tiny)
    # another evaluation order rounds differently in the subnormal range, where an ulp is absolute
    subnormal = 4 * float(np.finfo(dtype).smallest_subnormal)
    return ulps * eps * (terms * k * abs(alpha) * amax * bmax + abs(beta) * cmax) + flush + subnormal


BOOLPACK_BITS = 16  # the default


def boolpack_tol(xp_name, dtype, k, terms, alpha, beta, amax, bmax, cmax):
    """Quantization: each input is off by at most 2^(1-bits) of its row's (column's)
    largest magnitude, so each product term by 2^(2-bits)·amax·bmax (a quantizing
    backend: not exact by design), plus the rounding of the final scaling.  A complex
    term is two real products per part, each quantized so: twice that."""
    cplx = 2.0 if np.dtype(dtype).kind == "c" else 1.0
    quant = cplx * 2.0 ** (2 - BOOLPACK_BITS) * terms * k * abs(alpha) * amax * bmax
    # the rank-2k forms are two gemm calls whose outputs the GPU may each flush (native_tol
    # allows one flush; every further part of the sum can be off by tiny as well)
    flushes = 0.0 if xp_name == "numpy" else (cplx * terms - 1) * float(np.finfo(dtype).tiny)
    # the final scaling rounds in another order than BLAS: in the subnormal range an ulp is
    # absolute (alpha = 2^-149 on a float32 sum near 2.5 gave 2 ulps where scipy gave 3)
    subnormal = 4 * float(np.finfo(dtype).smallest_subnormal)
    return quant + flushes + subnormal + native_tol(xp_name, dtype, k, terms, alpha, beta, amax, bmax, cmax)


TOLERANCES = {"native": native_tol, "boolpack": boolpack_tol}


def tolerance(backend, *args):
    return TOLERANCES.get(backend, default_tol)(*args)


# --------------------------------------------------------------------------
# routine table
# --------------------------------------------------------------------------

DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
FAMILIES = {"gemm": "sdcz", "syrk": "sdcz", "herk": "cz", "syr2k": "sdcz", "her2k": "cz"}
ROUTINES = [p + f for f, ps in FAMILIES.items() for p in ps]
OTHER_DTYPE = {"s": np.float64, "d": np.float32, "c": np.complex128, "z": np.complex64}


def fam(name):
    return name[1:]


def is_cplx(name):
    return name[0] in "cz"


def has_b(name):
    return fam(name) in ("gemm", "syr2k", "her2k")


def rank_k(name):
    return fam(name) != "gemm"


def herm(name):
    return fam(name) in ("herk", "her2k")


def legal_trans(name):
    if fam(name) == "gemm":
        return [(ta, tb) for ta in (0, 1, 2) for tb in (0, 1, 2)]
    if herm(name):
        return [0, 2]
    return [0, 1] if is_cplx(name) else [0, 1, 2]


GEMM_SHAPES = [  # (m, n, k)
    (1, 1, 1),
    (1, 1, 0),
    (4, 3, 1),
    (4, 3, 0),
    (1, 6, 5),
    (6, 1, 5),
    (7, 5, 3),
    (17, 4, 9),
    (33, 31, 65),
    (70, 65, 129),
]
RANKK_SHAPES = [  # (n, k)
    (1, 1),
    (1, 0),
    (4, 1),
    (5, 0),
    (1, 6),
    (7, 3),
    (17, 9),
    (33, 65),
    (31, 4),
    (67, 130),
]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def is_cupy_array(x):
    return type(x).__module__.split(".")[0] == "cupy"


def to_np(x):
    if is_cupy_array(x):
        return x.get()
    return np.array(x)  # always a copy


def rand(rng, shape, dtype):
    x = rng.uniform(-1.0, 1.0, shape) + 0.25 * np.sign(rng.uniform(-1, 1, shape))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * (rng.uniform(-1.0, 1.0, shape) + 0.25)
    return x.astype(dtype)


def place(x, layout, xp):
    """Put numpy array x in xp memory with layout C, F or S (strided view)."""
    if layout == "C":
        y = np.ascontiguousarray(x)
    elif layout == "F":
        y = np.asfortranarray(x)
    elif layout == "S":
        m, n = x.shape
        big = np.zeros((2 * m + 1, 3 * n + 2), dtype=x.dtype, order="F")
        if xp is not np:
            big = xp.asfortranarray(xp.asarray(big))
        big[1::2, 2::3] = xp.asarray(x) if xp is not np else x
        return big[1::2, 2::3]
    else:
        raise AssertionError(layout)
    if xp is np:
        return y
    z = xp.asarray(y)
    z = xp.asfortranarray(z) if layout == "F" else xp.ascontiguousarray(z)
    return z


def op_shape(shape, t):
    return shape if t == 0 else shape[::-1]


def make_inputs(name, dims, trans, rng, xp, layouts=("C", "F", "F"), with_c=True):
    """dims: (m, n, k) for gemm, (n, k) for the rank-k routines."""
    dt = DTYPES[name[0]]
    if fam(name) == "gemm":
        m, n, k = dims
        a = rand(rng, op_shape((m, k), trans[0]), dt)
        b = rand(rng, op_shape((k, n), trans[1]), dt)
        cshape = (m, n)
    else:
        n, k = dims
        a = rand(rng, op_shape((n, k), trans), dt)
        b = rand(rng, op_shape((n, k), trans), dt) if has_b(name) else None
        cshape = (n, n)
    c = rand(rng, cshape, dt) if with_c else None
    a = place(a, layouts[0], xp)
    b = place(b, layouts[1], xp) if b is not None else None
    c = place(c, layouts[2], xp) if c is not None else None
    return a, b, c


def call(fn, name, alpha, a, b=None, beta=None, c=None, trans=None, lower=None, overwrite_c=None, **kw):
    args = [alpha, a] + ([b] if has_b(name) else [])
    if beta is not None:
        kw["beta"] = beta
    if c is not None:
        kw["c"] = c
    if trans is not None:
        if fam(name) == "gemm":
            kw["trans_a"], kw["trans_b"] = trans
        else:
            kw["trans"] = trans
    if lower is not None:
        kw["lower"] = lower
    if overwrite_c is not None:
        kw["overwrite_c"] = overwrite_c
    return fn(*args, **kw)


def inner_k(name, a_np, trans):
    if a_np.ndim < 2:
        return 1
    if fam(name) == "gemm":
        t = (trans or (0, 0))[0]
    else:
        t = trans or 0
    return a_np.shape[1] if t == 0 else a_np.shape[0]


def _amax(x):
    if x is None or x.size == 0:
        return 0.0
    v = np.abs(x[np.isfinite(x)])
    return float(v.max()) if v.size else 0.0


def ref_mask(name, shape, lower):
    if not rank_k(name):
        return np.ones(shape, dtype=bool)
    n = shape[0]
    return np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))


def eff_alpha(name, alpha):
    return complex(alpha).real if fam(name) == "herk" else alpha


def eff_beta(name, beta):
    return complex(beta).real if herm(name) else beta


def scipy_ref(name, alpha, a, b, beta, c, trans, lower):
    """scipy on numpy copies.  With k == 0 and a transposed operand, scipy passes
    lda = 0 to BLAS (XERBLA: "parameter 7 had an illegal value") and returns garbage,
    so then the same empty product is asked for untransposed."""
    an = to_np(a)
    bn = to_np(b) if b is not None else None
    cn = to_np(c) if c is not None else None
    if an.ndim == 2 and an.size == 0 and trans not in (None, 0, (0, 0)):
        if fam(name) == "gemm":
            m, n = (an.shape[1] if trans[0] else an.shape[0]), (bn.shape[0] if trans[1] else bn.shape[1])
            an, bn = np.zeros((m, 0), an.dtype), np.zeros((0, n), bn.dtype)
            trans = (0, 0)
        else:
            an = np.zeros((an.shape[1], 0), an.dtype)
            bn = np.zeros(an.shape, bn.dtype) if bn is not None else None
            trans = 0
    return call(getattr(sblas, name), name, alpha, an, bn, beta, cn, trans, lower, 0)


def run_case(
    emublas,
    backend,
    xp,
    name,
    alpha,
    a,
    b=None,
    beta=None,
    c=None,
    trans=None,
    lower=None,
    overwrite_c=None,
    ctx="",
    nonfinite=False,
    check_values=True,
):
    """Call emublas and scipy the same way, check everything the contract says.
    Returns (result, reference) as numpy arrays."""
    dt = np.dtype(DTYPES[name[0]])
    a0, b0, c0 = to_np(a), (to_np(b) if b is not None else None), (to_np(c) if c is not None else None)
    ref = scipy_ref(name, alpha, a, b, beta, c, trans, lower)
    ctx = (
        f"[{name} backend={backend} xp={_xp_name(xp)} trans={trans} lower={lower} "
        f"alpha={alpha!r} beta={beta!r} overwrite_c={overwrite_c} "
        f"a{getattr(a0, 'shape', '')} c={'None' if c is None else c0.shape}] {ctx}"
    )

    r = call(getattr(emublas, name), name, alpha, a, b, beta, c, trans, lower, overwrite_c, backend=backend)

    # ---- type, device, dtype, order, shape
    if xp is np:
        assert type(r) is np.ndarray, f"{ctx}: result type {type(r)}"
    else:
        assert isinstance(r, xp.ndarray), f"{ctx}: result type {type(r)}, expected cupy"
        dev = a.device.id if is_cupy_array(a) else xp.cuda.Device().id
        assert r.device.id == dev, f"{ctx}: result on device {r.device.id}, inputs on {dev}"
    assert r.dtype == dt, f"{ctx}: result dtype {r.dtype}, expected {dt}"
    assert r.shape == ref.shape, f"{ctx}: result shape {r.shape}, expected {ref.shape}"
    assert r.flags.f_contiguous, f"{ctx}: result is not Fortran-ordered"

    # ---- overwrite_c / inputs untouched
    in_place = (
        overwrite_c
        and c is not None
        and (isinstance(c, np.ndarray) if xp is np else is_cupy_array(c))
        and c.dtype == dt
        and c.ndim == 2
        and c.flags.f_contiguous
    )
    if in_place:
        assert r is c, f"{ctx}: overwrite_c=1 with a Fortran {dt} c must return c itself"
    else:
        assert r is not c, f"{ctx}: returned c itself although it may not be overwritten"
        if c is not None:
            np.testing.assert_array_equal(to_np(c), c0, err_msg=f"{ctx}: c was modified")
    np.testing.assert_array_equal(to_np(a), a0, err_msg=f"{ctx}: a was modified")
    if b is not None:
        np.testing.assert_array_equal(to_np(b), b0, err_msg=f"{ctx}: b was modified")

    rn = to_np(r)
    mask = ref_mask(name, rn.shape, lower)

    # ---- triangle not referenced: c's values exactly, or zero
    if rank_k(name):
        if c is not None:
            expect = np.asarray(c0).astype(dt).reshape(rn.shape)
        else:
            expect = np.zeros(rn.shape, dt)
        np.testing.assert_array_equal(
            rn[~mask], expect[~mask], err_msg=f"{ctx}: unreferenced triangle must be {'c' if c is not None else 'zero'}"
        )

    # ---- herk/her2k: exactly real diagonal.  Where reference BLAS / scipy take the
    #      quick return ((alpha == 0 or k == 0) and beta == 1) they hand back c
    #      untouched, complex diagonal included; emublas's contract is a real
    #      diagonal always, so there only the real part is compared with scipy.
    quick = False
    diag_ok = np.ones(rn.shape[0], bool)
    if herm(name) and rn.size:
        k = inner_k(name, np.atleast_2d(a0), trans)
        quick = (
            c is not None
            and eff_beta(name, 0 if beta is None else beta) == 1
            and (k == 0 or eff_alpha(name, alpha) == 0)
        )
        d = rn.diagonal()
        fin = np.isfinite(ref.diagonal())
        ok = d.imag == 0
        assert np.all(ok | ~fin), f"{ctx}: herk/her2k diagonal not real: {d[~ok]}"
        if quick:
            diag_ok = ~np.eye(rn.shape[0], dtype=bool)

    if not check_values:
        return rn, ref

    # ---- non-finite pattern in the referenced part
    if xp is np:
        for f in (np.isnan, np.isinf):
            bad = (f(rn) != f(ref)) & mask
            assert not bad.any(), (
                f"{ctx}: {f.__name__} pattern differs from scipy at {np.argwhere(bad)[:5].tolist()}"
                f" got {rn[bad][:5]} expected {ref[bad][:5]}"
            )
    else:
        bad = (np.isfinite(rn) != np.isfinite(ref)) & mask
        assert not bad.any(), f"{ctx}: non-finite pattern differs from scipy at {np.argwhere(bad)[:5].tolist()}"
    if not nonfinite:
        assert np.all(np.isfinite(rn[mask])), f"{ctx}: unexpected non-finite values"

    # ---- values in the referenced part
    wide = np.complex128 if np.issubdtype(dt, np.complexfloating) else np.float64
    sel = mask & np.isfinite(ref)
    if quick and rn.size:
        np.testing.assert_array_equal(
            rn.diagonal().real, ref.diagonal().real, err_msg=f"{ctx}: beta=1 quick return must keep diag(c)"
        )
        sel &= diag_ok
    if sel.any():
        k = inner_k(name, np.atleast_2d(a0), trans)
        terms = 2 if fam(name) in ("syr2k", "her2k") else 1
        cmax = _amax(np.asarray(c0)) if c is not None else 0.0
        eb = eff_beta(name, 0 if beta is None else beta)
        tol = tolerance(
            backend,
            _xp_name(xp),
            dt,
            k,
            terms,
            eff_alpha(name, alpha),
            eb if eb != 0 else 0,
            _amax(np.asarray(a0)),
            _amax(np.asarray(b0)) if b is not None else _amax(np.asarray(a0)),
            cmax,
        )
        err = np.abs(rn.astype(wide)[sel] - ref.astype(wide)[sel])
        emax = float(err.max())
        if emax > tol:
            i = int(err.argmax())
            pos = np.argwhere(sel)[i].tolist()
            pytest.fail(
                f"{ctx}: max |emublas - scipy| = {emax:.3e} > tol {tol:.3e} at {pos}: "
                f"got {rn[tuple(pos)]!r} expected {ref[tuple(pos)]!r}"
            )
    return rn, ref


def scalar_value(kind, rng, name):
    if kind == "0":
        return 0
    if kind == "1":
        return 1
    if kind == "real":
        return float(rng.choice([-1, 1]) * rng.uniform(0.5, 2.0))
    if kind == "complex":
        return complex(rng.choice([-1, 1]) * rng.uniform(0.5, 2.0), rng.uniform(-2.0, 2.0))
    raise AssertionError(kind)


# --------------------------------------------------------------------------
# 1. every routine x every legal trans x lower x shape
# --------------------------------------------------------------------------


def _grid_cases():
    out = []
    for name in ROUTINES:
        shapes = GEMM_SHAPES if fam(name) == "gemm" else RANKK_SHAPES
        lowers = [None] if fam(name) == "gemm" else [0, 1]
        for trans in legal_trans(name):
            for lower in lowers:
                for i, dims in enumerate(shapes):
                    with_c = (i % 2 == 0) != (lower == 1)
                    tid = "t%s" % ("".join(map(str, trans)) if isinstance(trans, tuple) else trans)
                    lid = "" if lower is None else f"-L{lower}"
                    out.append(
                        pytest.param(
                            name,
                            trans,
                            lower,
                            dims,
                            with_c,
                            id=f"{name}-{tid}{lid}-{'x'.join(map(str, dims))}-{'c' if with_c else 'noc'}",
                        )
                    )
    return out


@pytest.mark.parametrize("name,trans,lower,dims,with_c", _grid_cases())
def test_trans_lower_shapes(emublas, backend, xp, rng, seed, name, trans, lower, dims, with_c):
    layouts = ("C", "F", "F") if sum(dims) % 2 else ("F", "C", "F")
    a, b, c = make_inputs(name, dims, trans, rng, xp, layouts, with_c)
    alpha = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    beta = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    run_case(emublas, backend, xp, name, alpha, a, b, beta, c, trans, lower, 0, ctx=f"seed={seed} layouts={layouts}")


# --------------------------------------------------------------------------
# 2. alpha x beta x with/without c x overwrite_c
# --------------------------------------------------------------------------


def _scalar_cases():
    out = []
    for name in ROUTINES:
        kinds = ["0", "1", "real"] + (["complex"] if is_cplx(name) else [])
        for ak in kinds:
            for bk in kinds:
                for with_c in (True, False):
                    if not with_c and bk != "real":
                        continue  # beta without c only scales zeros: one case is enough
                    for ow in (0, 1):
                        out.append(
                            pytest.param(
                                name, ak, bk, with_c, ow, id=f"{name}-a{ak}-b{bk}-{'c' if with_c else 'noc'}-ow{ow}"
                            )
                        )
    return out


@pytest.mark.parametrize("name,alpha_kind,beta_kind,with_c,overwrite_c", _scalar_cases())
def test_alpha_beta_c_overwrite(emublas, backend, xp, rng, seed, name, alpha_kind, beta_kind, with_c, overwrite_c):
    trans = (2, 1) if fam(name) == "gemm" else legal_trans(name)[-1]
    lower = None if fam(name) == "gemm" else int(rng.integers(2))
    dims = (7, 5, 3) if fam(name) == "gemm" else (7, 3)
    a, b, c = make_inputs(name, dims, trans, rng, xp, ("F", "C", "F"), with_c)
    alpha = scalar_value(alpha_kind, rng, name)
    beta = scalar_value(beta_kind, rng, name)
    run_case(emublas, backend, xp, name, alpha, a, b, beta, c, trans, lower, overwrite_c, ctx=f"seed={seed}")


@pytest.mark.parametrize("name", [n for n in ROUTINES if herm(n)])
def test_herm_scalars_use_real_part(emublas, backend, xp, rng, seed, name):
    """herk: alpha and beta, her2k: beta -- only the real part counts."""
    dims = (9, 4)
    for lower in (0, 1):
        a, b, c = make_inputs(name, dims, 0, rng, xp)
        alpha = complex(1.25, -0.75)
        beta = complex(-0.5, 1.5)
        r1 = call(getattr(emublas, name), name, alpha, a, b, beta, c, 0, lower, 0, backend=backend)
        alpha2 = alpha.real if fam(name) == "herk" else alpha
        r2 = call(getattr(emublas, name), name, alpha2, a, b, beta.real, c, 0, lower, 0, backend=backend)
        np.testing.assert_array_equal(
            to_np(r1), to_np(r2), err_msg=f"{name} lower={lower} seed={seed}: complex scalar differs from its real part"
        )
        run_case(emublas, backend, xp, name, alpha, a, b, beta, c, 0, lower, 0, ctx=f"seed={seed}")


# --------------------------------------------------------------------------
# 3. overwrite_c with every kind of c
# --------------------------------------------------------------------------

C_KINDS = ["F", "C", "S", "other_dtype", "list"]


@pytest.mark.parametrize("overwrite_c", [0, 1])
@pytest.mark.parametrize("c_kind", C_KINDS)
@pytest.mark.parametrize("name", ROUTINES)
def test_overwrite_c_kinds(emublas, backend, xp, rng, seed, name, c_kind, overwrite_c):
    if c_kind == "list" and xp is not np:
        pytest.skip("list c is a numpy-path input")
    trans = (0, 0) if fam(name) == "gemm" else 0
    lower = None if fam(name) == "gemm" else 1 - overwrite_c
    dims = (6, 5, 4) if fam(name) == "gemm" else (6, 4)
    a, b, _ = make_inputs(name, dims, trans, rng, xp, ("C", "F", "F"), with_c=False)
    cshape = dims[:2] if fam(name) == "gemm" else (dims[0], dims[0])
    cn = rand(rng, cshape, DTYPES[name[0]])
    if c_kind in ("F", "C", "S"):
        c = place(cn, c_kind, xp)
    elif c_kind == "other_dtype":
        c = place(cn.astype(OTHER_DTYPE[name[0]]), "F", xp)
    else:
        c = cn.tolist()
    alpha = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    beta = scalar_value("real", rng, name)
    c_before = to_np(c)
    run_case(
        emublas, backend, xp, name, alpha, a, b, beta, c, trans, lower, overwrite_c, ctx=f"seed={seed} c_kind={c_kind}"
    )
    if c_kind == "list":
        np.testing.assert_array_equal(np.array(c), c_before)


# --------------------------------------------------------------------------
# 4. k = 0 and alpha = 0
# --------------------------------------------------------------------------


@pytest.mark.parametrize("with_c", [True, False])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("name", ROUTINES)
def test_k_zero(emublas, backend, xp, rng, seed, name, lower, with_c):
    trans = legal_trans(name)[-1]
    dims = (5, 4, 0) if fam(name) == "gemm" else (5, 0)
    lw = None if fam(name) == "gemm" else lower
    a, b, c = make_inputs(name, dims, trans, rng, xp, ("F", "F", "F"), with_c)
    alpha = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    beta = 0.75 if not is_cplx(name) else complex(0.75, -0.5)
    rn, _ = run_case(emublas, backend, xp, name, alpha, a, b, beta, c, trans, lw, 0, ctx=f"seed={seed}")
    dt = DTYPES[name[0]]
    mask = ref_mask(name, rn.shape, lw)
    if with_c:
        expect = (dt(eff_beta(name, beta)) * to_np(c)).astype(dt)
        if herm(name):
            expect[np.diag_indices(expect.shape[0])] = expect.diagonal().real
    else:
        expect = np.zeros(rn.shape, dt)
    eps = np.finfo(dt).eps
    scale = max(_amax(to_np(c)) if with_c else 0.0, 1.0)
    np.testing.assert_allclose(
        rn[mask], expect[mask], rtol=0, atol=4 * eps * scale, err_msg=f"{name}: k=0 must give beta*C (seed={seed})"
    )


@pytest.mark.parametrize("with_c", [True, False])
@pytest.mark.parametrize("name", ROUTINES)
def test_alpha_zero_reads_no_a_b(emublas, backend, xp, rng, seed, name, with_c):
    """emublas documents the reference-BLAS rule: alpha == 0 -> a, b not read."""
    trans = legal_trans(name)[0]
    dims = (6, 5, 4) if fam(name) == "gemm" else (6, 4)
    lower = None if fam(name) == "gemm" else 1
    a, b, c = make_inputs(name, dims, trans, rng, xp, ("F", "F", "F"), with_c)
    a[1, 2] = np.nan
    a[0, 0] = np.inf
    if b is not None:
        b[2, 1] = np.nan
    beta = 1.5 if not is_cplx(name) else complex(1.5, 0.25)
    alpha = 0 if fam(name) != "herk" else complex(0, 1.0)  # herk: real part is 0
    r = call(getattr(emublas, name), name, alpha, a, b, beta, c, trans, lower, 0, backend=backend)
    rn = to_np(r)
    dt = DTYPES[name[0]]
    assert rn.dtype == dt and r.flags.f_contiguous
    mask = ref_mask(name, rn.shape, lower)
    assert np.all(np.isfinite(rn)), (
        f"{name}: alpha=0 must not read a/b (NaN/Inf leaked at {np.argwhere(~np.isfinite(rn)).tolist()}, seed={seed})"
    )
    if with_c:
        cn = to_np(c)
        expect = (dt(eff_beta(name, beta)) * cn).astype(dt)
        if herm(name):
            expect[np.diag_indices(expect.shape[0])] = expect.diagonal().real
        expect[~mask] = cn[~mask]
    else:
        expect = np.zeros(rn.shape, dt)
    np.testing.assert_allclose(
        rn, expect, rtol=4 * np.finfo(dt).eps, atol=0, err_msg=f"{name}: alpha=0 must give beta*C (seed={seed})"
    )


# --------------------------------------------------------------------------
# 5. NaN in c with beta == 0; NaN/Inf in a and b
# --------------------------------------------------------------------------


@pytest.mark.parametrize("overwrite_c", [0, 1])
@pytest.mark.parametrize("lower", [0, 1])
@pytest.mark.parametrize("name", ROUTINES)
def test_beta_zero_ignores_nan_c(emublas, backend, xp, rng, seed, name, lower, overwrite_c):
    trans = legal_trans(name)[-1]
    dims = (7, 6, 5) if fam(name) == "gemm" else (7, 5)
    lw = None if fam(name) == "gemm" else lower
    a, b, _ = make_inputs(name, dims, trans, rng, xp, ("C", "F", "F"), with_c=False)
    dt = DTYPES[name[0]]
    cshape = dims[:2] if fam(name) == "gemm" else (dims[0], dims[0])
    cn = np.full(cshape, np.nan, dt)
    if is_cplx(name):
        cn = cn + 1j * np.nan
    c = place(cn.astype(dt), "F", xp)
    alpha = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    rn, _ = run_case(emublas, backend, xp, name, alpha, a, b, 0, c, trans, lw, overwrite_c, ctx=f"seed={seed}")
    mask = ref_mask(name, rn.shape, lw)
    assert np.all(np.isfinite(rn[mask])), f"{name}: beta=0 read the NaN c (seed={seed})"


def _nonfinite_cases():
    out = []
    for name in ROUTINES:
        transes = [(0, 0), (1, 2), (2, 0)] if fam(name) == "gemm" else legal_trans(name)
        lowers = [None] if fam(name) == "gemm" else [0, 1]
        for where in ["a", "b"] if has_b(name) else ["a"]:
            for trans in transes:
                for lower in lowers:
                    out.append(pytest.param(name, where, trans, lower, id=f"{name}-{where}-t{trans}-L{lower}"))
    return out


@pytest.mark.parametrize("name,where,trans,lower", _nonfinite_cases())
def test_nan_inf_propagation(emublas, backend, xp, rng, seed, name, where, trans, lower):
    dims = (7, 6, 5) if fam(name) == "gemm" else (7, 5)
    a, b, c = make_inputs(name, dims, trans, rng, xp, ("F", "F", "F"), with_c=True)
    x = a if where == "a" else b
    # distinct rows and columns of the stored matrix for NaN, +Inf and -Inf
    rows = rng.permutation(x.shape[0])[:3]
    cols = rng.permutation(x.shape[1])[:3]
    x[int(rows[0]), int(cols[0])] = np.nan
    x[int(rows[1]), int(cols[1])] = np.inf
    x[int(rows[2]), int(cols[2])] = -np.inf
    alpha, beta = 1.5, -0.5  # real scalars: complex scaling of Inf is order-dependent
    run_case(
        emublas,
        backend,
        xp,
        name,
        alpha,
        a,
        b,
        beta,
        c,
        trans,
        lower,
        0,
        ctx=f"seed={seed} nonfinite in {where}",
        nonfinite=True,
    )


# --------------------------------------------------------------------------
# 6. defaults, lists, scalars, mixed input dtypes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ROUTINES)
def test_defaults_only(emublas, backend, xp, rng, seed, name):
    dims = (5, 4, 3) if fam(name) == "gemm" else (5, 3)
    trans = (0, 0) if fam(name) == "gemm" else 0
    a, b, _ = make_inputs(name, dims, trans, rng, xp, ("C", "C", "F"), with_c=False)
    alpha = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    run_case(emublas, backend, xp, name, alpha, a, b, ctx=f"seed={seed}")


def test_default_backend_is_used_without_keyword(emublas, rng, seed):
    a, b = rand(rng, (6, 4), np.float64), rand(rng, (4, 5), np.float64)
    r = emublas.dgemm(1.0, a, b)
    ref = sblas.dgemm(1.0, a, b)
    be = os.environ.get("EMUBLAS_BACKEND", "native")
    tol = tolerance(be, "numpy", np.float64, 4, 1, 1.0, 0.0, _amax(a), _amax(b), 0.0)
    assert r.flags.f_contiguous and r.dtype == np.float64
    assert np.max(np.abs(r - ref)) <= tol, f"seed={seed}"


@pytest.mark.parametrize("name", ROUTINES)
def test_nested_lists(emublas, backend, rng, seed, name):
    dims = (4, 3, 2) if fam(name) == "gemm" else (3, 2)
    trans = (1, 0) if fam(name) == "gemm" else legal_trans(name)[-1]
    lower = None if fam(name) == "gemm" else 1
    a, b, c = make_inputs(name, dims, trans, rng, np)
    conv = (lambda x: x.tolist()) if is_cplx(name) else (lambda x: x.astype(np.float64).tolist())
    alpha = scalar_value("complex" if is_cplx(name) else "real", rng, name)
    run_case(
        emublas,
        backend,
        np,
        name,
        alpha,
        conv(a),
        conv(b) if b is not None else None,
        0.5,
        conv(c),
        trans,
        lower,
        0,
        ctx=f"seed={seed} lists",
    )
    # python ints as well
    ai = rng.integers(-5, 6, size=a.shape).tolist()
    bi = rng.integers(-5, 6, size=b.shape).tolist() if b is not None else None
    run_case(emublas, backend, np, name, 2, ai, bi, None, None, trans, lower, ctx=f"seed={seed} int lists")


def _scalar_inputs(name):
    if is_cplx(name):
        return [(2.0 + 1.0j, -1.5 + 0.5j), (np.complex128(0.5 - 2j), np.array(1.5 + 1j))]
    return [(2.0, -3.0), (np.float64(1.5), np.array(-0.25)), (3, 4)]


@pytest.mark.parametrize("name", ROUTINES)
def test_scalar_a_b_act_as_1x1(emublas, backend, name):
    for av, bv in _scalar_inputs(name):
        b = bv if has_b(name) else None
        lower = None if fam(name) == "gemm" else 0
        run_case(emublas, backend, np, name, 1.25, av, b, ctx=f"scalars {av!r} {bv!r}")
        run_case(
            emublas,
            backend,
            np,
            name,
            -0.5,
            av,
            b,
            2.0,
            [[0.75]],
            None,
            lower,
            ctx=f"scalars {av!r} {bv!r} with list c",
        )


@pytest.mark.parametrize("name", ["dgemm", "zgemm", "ssyrk", "zherk", "dsyr2k", "cher2k"])
def test_input_dtype_cast_to_routine(emublas, backend, xp, rng, seed, name):
    """a, b of another dtype are cast to the routine's dtype, like scipy."""
    other = OTHER_DTYPE[name[0]]
    dims = (5, 4, 3) if fam(name) == "gemm" else (5, 3)
    trans = (0, 1) if fam(name) == "gemm" else 0
    a, b, c = make_inputs(name, dims, trans, rng, np)
    a = place(a.astype(other), "C", xp)
    b = place(b.astype(other), "F", xp) if b is not None else None
    c = place(c, "F", xp)
    lower = None if fam(name) == "gemm" else 0
    run_case(emublas, backend, xp, name, 1.5, a, b, 0.5, c, trans, lower, 0, ctx=f"seed={seed}")


# --------------------------------------------------------------------------
# 7. the dtype-generic routines
# --------------------------------------------------------------------------

F32, F64, C64, C128, I64, I32 = (np.float32, np.float64, np.complex64, np.complex128, np.int64, np.int32)
GENERIC_COMBOS = {
    "gemm": [
        (F32, F32, None),
        (F64, F64, None),
        (C64, C64, None),
        (C128, C128, None),
        (F32, F64, None),
        (F32, C64, None),
        (F64, C64, None),
        (F32, F32, F64),
        (F32, F32, C64),
        (I64, I64, None),
        (I32, F32, None),
        (C64, F32, C128),
        (F64, F64, F32),
        (C64, C64, F64),
    ],
    "syrk": [
        (F32, None),
        (F64, None),
        (C64, None),
        (C128, None),
        (F32, F64),
        (F64, C64),
        (I64, None),
        (C64, C128),
        (F32, C64),
    ],
}
GENERIC_COMBOS["syr2k"] = GENERIC_COMBOS["gemm"]
GENERIC_COMBOS["her2k"] = GENERIC_COMBOS["gemm"]
GENERIC_COMBOS["herk"] = GENERIC_COMBOS["syrk"]


def _generic_cases():
    out = []
    for f, combos in GENERIC_COMBOS.items():
        for combo in combos:
            out.append(
                pytest.param(f, combo, id=f + "-" + "-".join("none" if t is None else np.dtype(t).name for t in combo))
            )
    return out


def _rand_any(rng, shape, t):
    if np.issubdtype(t, np.integer):
        return rng.integers(-6, 7, size=shape).astype(t)
    return rand(rng, shape, t)


@pytest.mark.parametrize("family,combo", _generic_cases())
def test_generic_prefix(emublas, backend, xp, rng, seed, family, combo):
    nb = family in ("gemm", "syr2k", "her2k")
    ta, tb, tc = combo if nb else (combo[0], None, combo[1])
    if family == "gemm":
        an, bn, cshape = _rand_any(rng, (5, 3), ta), _rand_any(rng, (3, 4), tb), (5, 4)
    else:
        an = _rand_any(rng, (5, 3), ta)
        bn = _rand_any(rng, (5, 3), tb) if nb else None
        cshape = (5, 5)
    cn = _rand_any(rng, cshape, tc) if tc is not None else None
    arrays = [x for x in (an, bn, cn) if x is not None]
    prefix = sblas.find_best_blas_type(arrays)[0]
    concrete = family
    if family in ("herk", "her2k") and prefix in "sd":
        concrete = {"herk": "syrk", "her2k": "syr2k"}[family]
    name = prefix + concrete
    a = place(an, "C", xp)
    b = place(bn, "F", xp) if bn is not None else None
    c = place(cn, "F", xp) if cn is not None else None
    lower = None if family == "gemm" else 1
    alpha = 1.5 if prefix in "sd" or family == "herk" else complex(1.5, -0.5)
    beta = 0.5
    # call the generic emublas function, compare with the concrete scipy routine
    dt = np.dtype(DTYPES[prefix])
    r = call(getattr(emublas, family), "x" + family, alpha, a, b, beta, c, None, lower, backend=backend)
    ref = call(getattr(sblas, name), name, alpha, an, bn, beta, cn, None, lower)
    assert r.dtype == dt, (
        f"{family}{[np.dtype(t).name if t else None for t in combo]}: result dtype {r.dtype}, "
        f"scipy's find_best_blas_type gives {prefix} ({dt})"
    )
    assert r.flags.f_contiguous
    rn = to_np(r)
    assert rn.shape == ref.shape
    mask = ref_mask(name, rn.shape, lower)
    if rank_k(name):
        expect = cn.astype(dt) if cn is not None else np.zeros(rn.shape, dt)
        np.testing.assert_array_equal(rn[~mask], expect[~mask])
    wide = np.complex128 if dt.kind == "c" else np.float64
    err = float(np.max(np.abs(rn.astype(wide)[mask] - ref.astype(wide)[mask])))
    tol = tolerance(
        backend,
        _xp_name(xp),
        dt,
        3,
        2 if nb and family != "gemm" else 1,
        abs(alpha),
        beta,
        _amax(an.astype(wide)),
        _amax(bn.astype(wide)) if bn is not None else _amax(an.astype(wide)),
        _amax(cn.astype(wide)) if cn is not None else 0.0,
    )
    assert err <= tol, f"{family} -> {name}: error {err:.3e} > {tol:.3e} (seed={seed})"


@pytest.mark.parametrize("family", ["gemm", "syrk", "herk", "syr2k", "her2k"])
def test_generic_with_lists_and_scalars(emublas, backend, family):
    nb = family in ("gemm", "syr2k", "her2k")
    fn = getattr(emublas, family)
    concrete = {"herk": "syrk", "her2k": "syr2k"}.get(family, family)
    ref_fn = getattr(sblas, "d" + concrete)
    a = [[1.0, 2.0], [3.0, -1.0]]
    b = [[0.5, -2.0], [1.5, 4.0]]
    args = (1.5, a, b) if nb else (1.5, a)
    r = fn(*args, backend=backend)
    ref = ref_fn(*args)
    assert r.dtype == np.float64 and r.flags.f_contiguous
    np.testing.assert_allclose(r, ref, rtol=1e-14, atol=0)
    sargs = (2.0, 3.0, -1.0) if nb else (2.0, 3.0)
    r = fn(*sargs, backend=backend)
    np.testing.assert_allclose(r, ref_fn(*sargs), rtol=1e-14, atol=0)
    assert r.shape == (1, 1) and r.dtype == np.float64
    # complex lists pick z
    za = [[1 + 1j, 2.0], [0.5j, -1.0]]
    zref = getattr(sblas, "z" + family)
    zargs = (1.5, za, za) if nb else (1.5, za)
    r = fn(*zargs, backend=backend)
    assert r.dtype == np.complex128
    np.testing.assert_allclose(r, zref(*zargs), rtol=1e-14, atol=1e-15)


# --------------------------------------------------------------------------
# 8. hypothesis: random routine/shape/trans/lower/scalars/layouts
# --------------------------------------------------------------------------


def _scalar_strategy(cplx):
    real = st.one_of(
        st.sampled_from([0.0, 1.0, -1.0]), st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=32)
    )
    if not cplx:
        return real
    return st.one_of(real, st.builds(complex, real, real))


@settings(
    max_examples=int(os.environ.get("EMUBLAS_TEST_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_property_random_calls(emublas, backend, xp, data):
    name = data.draw(st.sampled_from(ROUTINES), label="routine")
    trans = data.draw(st.sampled_from(legal_trans(name)), label="trans")
    lower = None if fam(name) == "gemm" else data.draw(st.sampled_from([0, 1]), label="lower")
    m = data.draw(st.integers(1, 40), label="m")
    k = data.draw(st.integers(0, 70), label="k")
    dims = (m, data.draw(st.integers(1, 40), label="n"), k) if fam(name) == "gemm" else (m, k)
    lay = data.draw(st.tuples(*[st.sampled_from("CFS")] * 3), label="layouts(a,b,c)")
    with_c = data.draw(st.booleans(), label="with_c")
    ow = data.draw(st.sampled_from([0, 1]), label="overwrite_c")
    alpha = data.draw(_scalar_strategy(is_cplx(name)), label="alpha")
    beta = data.draw(_scalar_strategy(is_cplx(name)), label="beta")
    seed = data.draw(st.integers(0, 2**63 - 1), label="seed")
    rng = np.random.default_rng(seed)
    a, b, c = make_inputs(name, dims, trans, rng, xp, lay, with_c)
    run_case(
        emublas, backend, xp, name, alpha, a, b, beta, c, trans, lower, ow, ctx=f"hypothesis seed={seed} layouts={lay}"
    )
