"""The native backend on every memory layout: no layout may change a result.

The backend avoids copies by flipping transposes of C-ordered operands and by
reading strided views in place (cuBLAS leading dimensions); these tests make
sure each of those shortcuts computes the same product as a plain reference.
"""

import itertools

import numpy as np
import pytest

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
