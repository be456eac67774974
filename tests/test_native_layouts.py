"""The native backend on every memory layout: no layout may change a result.

The backend avoids copies by flipping transposes of C-ordered operands and by
reading strided views in place (cuBLAS leading dimensions); these tests make
sure each of those shortcuts computes the same product as a plain reference.
"""

import itertools

import numpy as np
import pytest
import scipy.linalg.blas as sblas

import emublas

from helpers import randn

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _layouts(base):
    """Views of the same values with different memory layouts (each a 2-D array equal to base)."""
    rows, cols = base.shape
    big = np.zeros((rows + 3, 2 * cols + 1), dtype=base.dtype)
    big[1 : rows + 1, 0 : 2 * cols : 2] = base  # strided view: column step 2
    bigf = np.asfortranarray(np.zeros((rows + 5, cols + 2), dtype=base.dtype))
    bigf[2 : rows + 2, 1 : cols + 1] = base  # Fortran view with ld > rows
    bigc = np.zeros((rows + 2, cols + 4), dtype=base.dtype)
    bigc[1 : rows + 1, 2 : cols + 2] = base  # C view with ld > cols
    rev = np.ascontiguousarray(base[::-1, ::-1])
    return {
        "F": np.asfortranarray(base),
        "C": np.ascontiguousarray(base),
        "strided": big[1 : rows + 1, 0 : 2 * cols : 2],
        "F-ld": bigf[2 : rows + 2, 1 : cols + 1],
        "C-ld": bigc[1 : rows + 1, 2 : cols + 2],
        "reversed": rev[::-1, ::-1],
    }


def _ref(a, b, ta, tb):
    op = {0: lambda x: x, 1: lambda x: x.T, 2: lambda x: x.conj().T}
    return op[ta](a.astype(np.complex128)) @ op[tb](b.astype(np.complex128))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "layout_a, layout_b",
    [("F", "C"), ("C", "F"), ("strided", "F-ld"), ("C-ld", "reversed"), ("reversed", "strided"), ("F-ld", "C-ld")],
)
def test_gemm_layouts(xp, rng, dtype, layout_a, layout_b):
    m, n, k = 6, 5, 7
    for ta, tb in itertools.product((0, 1, 2), repeat=2):
        a0 = randn(rng, (m, k) if ta == 0 else (k, m), dtype)
        b0 = randn(rng, (k, n) if tb == 0 else (n, k), dtype)
        a = _layouts(a0)[layout_a]
        b = _layouts(b0)[layout_b]
        if xp is not np:
            # keep the layout on the GPU: copy the parent buffer and take the same view
            a = _to_gpu_view(xp, a)
            b = _to_gpu_view(xp, b)
        out = emublas.gemm(1.5, a, b, trans_a=ta, trans_b=tb)
        got = out if xp is np else xp.asnumpy(out)
        ref = (
            _ref(
                a0,
                b0,
                ta if np.dtype(dtype).kind == "c" else min(ta, 1),
                tb if np.dtype(dtype).kind == "c" else min(tb, 1),
            )
            * 1.5
        )
        tol = 20 * k * np.finfo(dtype).eps * np.abs(ref).max()
        assert np.abs(got - ref).max() <= tol, (ta, tb)
        assert out.flags.f_contiguous


def _to_gpu_view(cp, view):
    """A cupy array with the same shape and strides as the numpy view (negative ones too)."""
    base = view
    while isinstance(base.base, np.ndarray):
        base = base.base
    gbase = cp.array(base, order="K")
    assert gbase.strides == base.strides
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return cp.ndarray(view.shape, dtype=view.dtype, memptr=gbase.data + offset, strides=view.strides)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "strided", "F-ld", "reversed"])
def test_rank_k_layouts(xp, rng, dtype, layout):
    complex_ = np.dtype(dtype).kind == "c"
    n, k = 6, 4
    for trans, lower in itertools.product((0, 1), (0, 1)):
        a0 = randn(rng, (n, k) if trans == 0 else (k, n), dtype)
        b0 = randn(rng, a0.shape, dtype)
        a, b = _layouts(a0)[layout], _layouts(b0)[layout]
        if xp is not np:
            a, b = _to_gpu_view(xp, a), _to_gpu_view(xp, b)
        tri = np.tril if lower else np.triu
        got = emublas.syrk(1.0, a, trans=trans, lower=lower)
        got = got if xp is np else xp.asnumpy(got)
        ref = tri(_ref(a0, a0, trans, 1 - trans))
        assert np.abs(got - ref).max() <= 20 * k * np.finfo(dtype).eps * np.abs(ref).max()
        got = emublas.syr2k(1.0, a, b, trans=trans, lower=lower)
        got = got if xp is np else xp.asnumpy(got)
        ref = tri(_ref(a0, b0, trans, 1 - trans) + _ref(b0, a0, trans, 1 - trans))
        assert np.abs(got - ref).max() <= 40 * k * np.finfo(dtype).eps * np.abs(ref).max()
        if complex_:
            ht = 2 * trans
            got = emublas.herk(1.0, a, trans=ht, lower=lower)
            got = got if xp is np else xp.asnumpy(got)
            ref = tri(_ref(a0, a0, ht, 2 - ht))
            assert np.abs(got - ref).max() <= 20 * k * np.finfo(dtype).eps * np.abs(ref).max()
            assert np.all(np.diagonal(got).imag == 0)


@pytest.mark.parametrize("backend", ["native", "ozaki2"])
def test_overwrite_c_overlapping_an_input(xp, rng, backend):
    """c given in place while it overlaps an operand (the same array, a view of it, or a
    reversed view): the product of the old values, on numpy and on cupy."""
    base = randn(rng, (6, 6), np.float64)
    big = np.asfortranarray(randn(rng, (6, 12), np.float64))
    cases = {
        "same": lambda y: (y, y, y),
        "column view": lambda y: (y[:, 1:4], y[:3, :3], y[:, 3:]),  # c's first column is a's last
        "reversed": lambda y: (y[::-1, :], y, y),
    }
    for label, make in cases.items():
        y_host = np.array(base, order="F")
        a_h, b_h, c_h = make(y_host)
        expected = a_h @ b_h + 2.0 * c_h  # the old values
        y = xp.asarray(y_host, order="F") if xp is not np else y_host
        a, b, c = make(y)
        if not c.flags.f_contiguous:
            continue  # in place only for a Fortran c (else c is never modified)
        out = emublas.dgemm(1.0, a, b, 2.0, c, overwrite_c=1, backend=backend)
        assert out is c, label
        got = out if xp is np else xp.asnumpy(out)
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13, err_msg=label)
    # disjoint pieces of one buffer do not overlap: c is updated in place without a temporary
    yb = xp.asarray(big, order="F") if xp is not np else big.copy(order="F")
    a, c = yb[:, :6], yb[:, 6:]
    out = emublas.dgemm(1.0, a, a, 1.0, c, overwrite_c=1, backend=backend)
    assert out is c
    got = yb if xp is np else xp.asnumpy(yb)
    np.testing.assert_allclose(got[:, 6:], big[:, :6] @ big[:, :6] + big[:, 6:], rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(got[:, :6], big[:, :6])  # a untouched


@pytest.mark.parametrize("routine", ["sgemm", "zgemm", "cherk", "zher2k", "csyr2k", "dsyrk"])
def test_native_scalars_of_mixed_dtypes(xp, rng, routine):
    """alpha and beta of different precisions and kinds in successive calls (herk: real
    scalars; her2k: complex alpha, real beta) reach cuBLAS unchanged on every call."""
    prefix = routine[0]
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
    fn = getattr(emublas, routine)
    two = routine.endswith("2k")
    for alpha, beta in ((0.5, 2.0), (-3.0, 0.25), (1.5, -1.0)):
        if prefix in "cz" and not routine.endswith(("herk",)):
            alpha = alpha + 0.75j
        a = randn(rng, (5, 4), dtype)
        b = randn(rng, (5, 4) if not routine.endswith("gemm") else (4, 3), dtype)
        n = 5
        c = randn(rng, (n, 3) if routine.endswith("gemm") else (n, n), dtype)
        if routine.endswith("herk") or routine.endswith("her2k"):
            c = (c + c.conj().T) / 2
        args = (alpha, a, b) if (two or routine.endswith("gemm")) else (alpha, a)
        expected = getattr(sblas, routine)(*args, beta, np.array(c, order="F"))
        conv = (lambda x: xp.asarray(x)) if xp is not np else (lambda x: x)
        got = fn(*[conv(x) if isinstance(x, np.ndarray) else x for x in args], beta, conv(c), backend="native")
        got = got if xp is np else xp.asnumpy(got)
        tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
        if not routine.endswith("gemm"):
            expected, got = np.triu(expected), np.triu(got)
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
