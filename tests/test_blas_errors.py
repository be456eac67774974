"""Error paths of emublas's BLAS-3 front: clear exceptions where scipy raises
cryptic f2py errors or (for an illegal trans) prints a warning and returns garbage."""

import numpy as np
import pytest

DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
FAMILIES = {"gemm": "sdcz", "syrk": "sdcz", "herk": "cz", "syr2k": "sdcz", "her2k": "cz"}
ROUTINES = [p + f for f, ps in FAMILIES.items() for p in ps]
GENERICS = list(FAMILIES)
GEMMS = [n for n in ROUTINES if n.endswith("gemm")]
RANKK = [n for n in ROUTINES if not n.endswith("gemm")]
TWO_OPERAND = [n for n in RANKK if n.endswith("2k")]


def fam(name):
    return name if name in FAMILIES else name[1:]


def has_b(name):
    return fam(name) in ("gemm", "syr2k", "her2k")


def both(*numbers):
    """regex: every number appears as a whole word somewhere in the message"""
    return "(?s)" + "".join(rf"(?=.*(?<!\d){n}(?!\d))" for n in numbers)


def arr(xp, shape, name="d", seed=0):
    dt = DTYPES[name[0]] if name[0] in DTYPES and name not in FAMILIES else np.float64
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 1.5, shape)
    if np.issubdtype(dt, np.complexfloating):
        x = x + 1j * rng.uniform(0.5, 1.5, shape)
    x = np.asfortranarray(x.astype(dt))
    return x if xp is np else xp.asfortranarray(xp.asarray(x))


def good_args(xp, name, n=3, k=4):
    """A legal (alpha, a[, b]) for the routine: a is n x k."""
    a = arr(xp, (n, k), name, 1)
    if fam(name) == "gemm":
        return [1.0, a, arr(xp, (k, 5), name, 2)]
    if has_b(name):
        return [1.0, a, arr(xp, (n, k), name, 2)]
    return [1.0, a]


# --------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (2, 2)])
@pytest.mark.parametrize("name", GEMMS + ["gemm"])
def test_gemm_inner_dimension_mismatch(emublas, xp, name, trans):
    ta, tb = trans
    a = arr(xp, (3, 4) if ta == 0 else (4, 3), name)  # op(a): 3 x 4
    b = arr(xp, (5, 2) if tb == 0 else (2, 5), name)  # op(b): 5 x 2
    with pytest.raises(ValueError, match=both(4, 5)):
        getattr(emublas, name)(1.0, a, b, trans_a=ta, trans_b=tb)


@pytest.mark.parametrize("name", TWO_OPERAND + ["syr2k", "her2k"])
def test_syr2k_a_b_shapes_differ(emublas, xp, name):
    with pytest.raises(ValueError, match=both(4, 5)):
        getattr(emublas, name)(1.0, arr(xp, (3, 4), name), arr(xp, (3, 5), name))
    with pytest.raises(ValueError, match=both(3, 6)):
        getattr(emublas, name)(1.0, arr(xp, (3, 4), name), arr(xp, (6, 4), name))


@pytest.mark.parametrize("name", GEMMS + ["gemm"])
def test_gemm_c_wrong_shape(emublas, xp, name):
    a, b = arr(xp, (3, 4), name), arr(xp, (4, 5), name)
    with pytest.raises(ValueError, match=both(6, 7)):
        getattr(emublas, name)(1.0, a, b, 1.0, arr(xp, (6, 7), name))
    # the transposed shape is wrong too
    with pytest.raises(ValueError, match=both(5, 3)):
        getattr(emublas, name)(1.0, a, b, 1.0, arr(xp, (5, 3), name))


@pytest.mark.parametrize("name", RANKK + ["syrk", "herk", "syr2k", "her2k"])
def test_rank_k_c_wrong_shape(emublas, xp, name):
    args = good_args(xp, name, n=3, k=5)  # result is 3 x 3
    fn = getattr(emublas, name)
    with pytest.raises(ValueError, match=both(6, 7)):
        fn(*args, beta=1.0, c=arr(xp, (6, 7), name))
    with pytest.raises(ValueError, match=both(4)):
        fn(*args, beta=1.0, c=arr(xp, (4, 4), name))
    with pytest.raises(ValueError, match=both(3)):
        # trans=T-like: a^T a is 5 x 5, a 3 x 3 c is wrong
        trans = 2 if fam(name) in ("herk", "her2k") else 1
        fn(*args, beta=1.0, c=arr(xp, (3, 3), name), trans=trans)


@pytest.mark.parametrize("which", ["a", "b", "c"])
@pytest.mark.parametrize("name", ["dgemm", "zgemm", "ssyrk", "cherk", "dsyr2k", "zher2k", "gemm"])
def test_ndim_above_two(emublas, xp, name, which):
    if which == "b" and not has_b(name):
        pytest.skip("no b")
    args = good_args(xp, name)
    kw = {}
    if which == "a":
        args[1] = arr(xp, (3, 4, 2), name)
    elif which == "b":
        args[2] = arr(xp, (4, 5, 2) if fam(name) == "gemm" else (3, 4, 2), name)
    else:
        kw = {"beta": 1.0, "c": arr(xp, (3, 5, 1) if fam(name) == "gemm" else (3, 3, 1), name)}
    with pytest.raises(ValueError, match=r"(?i)dim|2-?d|matri|rank|shape"):
        getattr(emublas, name)(*args, **kw)


# --------------------------------------------------------------------------
# trans / lower
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [3, -1, 7])
@pytest.mark.parametrize("which", ["trans_a", "trans_b"])
@pytest.mark.parametrize("name", GEMMS + ["gemm"])
def test_gemm_illegal_trans(emublas, xp, name, which, bad):
    a, b = arr(xp, (4, 4), name), arr(xp, (4, 4), name)
    with pytest.raises(ValueError, match="trans"):
        getattr(emublas, name)(1.0, a, b, **{which: bad})


def _illegal_trans(name):
    f = fam(name)
    if f in ("herk", "her2k"):
        return [1, 3, -1]
    if name[0] in "cz":  # complex syrk/syr2k: no conjugate-transpose form
        return [2, 3, -1]
    return [3, -1]


@pytest.mark.parametrize(
    "name,bad", [(n, t) for n in RANKK for t in _illegal_trans(n)] + [("syrk", 3), ("syr2k", -1), ("herk", 3)]
)
def test_rank_k_illegal_trans(emublas, xp, name, bad, capfd):
    args = good_args(xp, name, n=4, k=4)
    with pytest.raises(ValueError, match="trans"):
        getattr(emublas, name)(*args, trans=bad)
    # emublas raises instead of letting BLAS print its XERBLA warning
    assert "illegal value" not in capfd.readouterr().out


@pytest.mark.parametrize("name", ["zherk", "cher2k", "herk", "her2k"])
def test_herk_trans_1_complex_data(emublas, xp, name):
    dt = "z" if name in ("herk", "her2k") else name
    a = arr(xp, (4, 3), dt)
    args = [1.0, a] + ([arr(xp, (4, 3), dt)] if has_b(name) else [])
    with pytest.raises(ValueError, match="trans"):
        getattr(emublas, name)(*args, trans=1)


@pytest.mark.parametrize("bad", [2, -1, 5])
@pytest.mark.parametrize("name", RANKK + ["syrk", "herk", "syr2k", "her2k"])
def test_rank_k_illegal_lower(emublas, xp, name, bad):
    with pytest.raises(ValueError, match="lower"):
        getattr(emublas, name)(*good_args(xp, name), lower=bad)


# --------------------------------------------------------------------------
# non-numeric data
# --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["a", "b", "c", "alpha", "beta"])
@pytest.mark.parametrize("name", ["dgemm", "zgemm", "ssyrk", "zherk", "csyr2k", "gemm", "her2k"])
def test_strings_rejected(emublas, name, where):
    if where == "b" and not has_b(name):
        pytest.skip("no b")
    args = good_args(np, name)
    kw = {}
    if where == "a":
        args[1] = [["x", "y"], ["z", "w"]]
    elif where == "b":
        args[2] = np.array([["x", "y"], ["z", "w"]])
    elif where == "c":
        kw = {"beta": 1.0, "c": "not a matrix"}
    elif where == "alpha":
        args[0] = "one"
    else:
        kw = {"beta": "half"}
    with pytest.raises((ValueError, TypeError)):
        getattr(emublas, name)(*args, **kw)


# --------------------------------------------------------------------------
# backend selection and options
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ROUTINES + GENERICS)
def test_unknown_backend_lists_valid_names(emublas, name):
    with pytest.raises(ValueError, match="native"):
        getattr(emublas, name)(*good_args(np, name), backend="no-such-backend")


@pytest.mark.parametrize("name", ROUTINES + GENERICS)
def test_unknown_option_named(emublas, name):
    with pytest.raises(ValueError, match="bogus"):
        getattr(emublas, name)(*good_args(np, name), backend="native", bogus=3)


def test_unknown_option_default_backend(emublas):
    a = arr(np, (3, 3))
    with pytest.raises(ValueError, match="bogus_option"):
        emublas.dgemm(1.0, a, a, bogus_option=1)


# --------------------------------------------------------------------------
# numpy / cupy mixing (GPU only)
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("gpu_side", ["a", "b", "c"])
@pytest.mark.parametrize("name", ["dgemm", "cgemm", "zsyr2k", "zher2k", "gemm"])
def test_mixing_numpy_and_cupy(emublas, cupy, name, gpu_side):
    args = good_args(np, name)
    c = arr(np, (3, 5) if fam(name) == "gemm" else (3, 3), name)
    if gpu_side == "a":
        args[1] = cupy.asarray(args[1])
    elif gpu_side == "b":
        args[2] = cupy.asarray(args[2])
    else:
        c = cupy.asarray(c)
    with pytest.raises(TypeError, match=r"(?is)(?=.*numpy)(?=.*cupy)"):
        getattr(emublas, name)(*args, beta=1.0, c=c)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ssyrk", "zherk", "syrk"])
def test_mixing_numpy_and_cupy_rank_k(emublas, cupy, name):
    args = good_args(np, name)
    args[1] = cupy.asarray(args[1])
    with pytest.raises(TypeError, match=r"(?is)(?=.*numpy)(?=.*cupy)"):
        getattr(emublas, name)(*args, beta=1.0, c=arr(np, (3, 3), name))
