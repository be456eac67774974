"""scipy's argument rules, case by case, against scipy.linalg.blas itself.

``SAME``: emublas accepts what scipy accepts (with the same result) and raises the
same exception type where scipy raises.  ``DIFFERENT``: the deliberate differences
listed in the README's table ("Where emublas differs from scipy"), each with what
emublas does instead; the test checks both sides so the table cannot go stale.
"""

import warnings

import numpy as np
import pytest
import scipy.linalg._fblas as fblas

import emublas

A = np.arange(1.0, 10.0).reshape(3, 3) / 7
B = np.arange(2.0, 11.0).reshape(3, 3).T / 5
C = np.linspace(-1, 1, 9).reshape(3, 3)


def _call(module, name, *args, **kwargs):
    fn = getattr(module, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return fn(*args, **kwargs)


def _outcome(module, name, args, kwargs):
    try:
        return "ok", _call(module, name, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001  (the exception type is the point)
        return "raises", exc


# (id, routine, args, kwargs): emublas must do what scipy does
SAME = [
    ("trans_a=1.5", "dgemm", (1.0, A, B), {"trans_a": 1.5}),
    ("trans_a=2.9", "dgemm", (1.0, A, B), {"trans_a": 2.9}),
    ("trans_a=-0.5", "dgemm", (1.0, A, B), {"trans_a": -0.5}),
    ("trans_a=np.int8(1)", "dgemm", (1.0, A, B), {"trans_a": np.int8(1)}),
    ("trans_a=True", "dgemm", (1.0, A, B), {"trans_a": True}),
    ("trans_a=None", "dgemm", (1.0, A, B), {"trans_a": None}),
    ("lower=None", "dsyrk", (1.0, A), {"lower": None}),
    ("lower=1.5", "dsyrk", (1.0, A), {"lower": 1.5}),
    ("trans=1.0 syrk", "dsyrk", (1.0, A), {"trans": 1.0}),
    ("alpha=None", "dgemm", (None, A, B), {}),
    ("alpha=None zgemm", "zgemm", (None, A, B), {}),
    ("alpha='x' zgemm", "zgemm", ("x", A, B), {}),
    ("alpha='x'", "dgemm", ("x", A, B), {}),
    ("alpha='2'", "dgemm", ("2", A, B), {}),
    ("alpha=np.float32(2)", "dgemm", (np.float32(2), A, B), {}),
    ("alpha=1j real routine", "dgemm", (1j, A, B), {}),
    ("beta=None", "dgemm", (1.0, A, B), {"beta": None, "c": C}),
    ("beta='x'", "dgemm", (1.0, A, B), {"beta": "x", "c": C}),
    ("overwrite_c='x'", "dgemm", (1.0, A, B), {"c": C, "overwrite_c": "x"}),
    ("overwrite_c=None", "dgemm", (1.0, A, B), {"c": C, "overwrite_c": None}),
    ("overwrite_c=1.5", "dgemm", (1.0, A, B), {"c": C, "overwrite_c": 1.5}),
    ("overwrite_c=5", "dgemm", (1.0, A, B), {"c": C.copy(order="F"), "overwrite_c": 5}),
    ("overwrite_c=np.int8(0)", "dgemm", (1.0, A, B), {"c": C, "overwrite_c": np.int8(0)}),
    ("complex list as c of dgemm", "dgemm", (1.0, A, B), {"beta": 1.0, "c": (C * 1j).tolist()}),
    ("complex list as a of dgemm", "dgemm", (1.0, (A * 1j).tolist(), B), {}),
    ("complex scalar as c of dgemm", "dgemm", (1.0, A[:1, :1], B[:1, :1]), {"beta": 1.0, "c": 1j}),
    ("complex list as a of dsyrk", "dsyrk", (1.0, (A * 1j).tolist()), {}),
    ("complex array as c of dgemm (ComplexWarning)", "dgemm", (1.0, A, B), {"beta": 1.0, "c": C * (1 + 1j)}),
    ("complex list for zgemm", "zgemm", (1.0, (A * 1j).tolist(), B), {}),
    ("bool a", "dgemm", (1.0, A > 0.5, B), {}),
    ("list of strings a", "dgemm", (1.0, [["1", "2", "3"]] * 3, B), {}),
    ("string a", "dgemm", (1.0, "abc", B), {}),
    ("object a", "dgemm", (1.0, np.array([[object()]]), B[:1, :1]), {}),
    ("scalar a", "dgemm", (1.0, 2.0, B[:1]), {}),
    ("1-D a as a column", "dgemm", (1.0, np.arange(3.0), B[:1]), {}),
    ("1-D b as a column", "dgemm", (1.0, A, np.arange(3.0)), {}),
    ("zero-size m", "dgemm", (1.0, np.ones((0, 3)), B), {}),
    ("zero-size n", "dgemm", (1.0, A, np.ones((3, 0))), {}),
    ("zero-size k", "dgemm", (1.0, np.ones((3, 0)), np.ones((0, 3))), {}),
    ("zero-size k with c", "dgemm", (1.0, np.ones((3, 0)), np.ones((0, 3))), {"beta": 2.0, "c": C}),
    ("zero-size everything", "dgemm", (1.0, np.ones((0, 0)), np.ones((0, 0))), {}),
    ("syrk k = 0", "dsyrk", (1.0, np.ones((3, 0))), {}),
    ("syrk trans k = 0", "dsyrk", (1.0, np.ones((0, 3))), {"trans": 1}),
    ("herk k = 0", "zherk", (1.0, np.ones((3, 0))), {}),
]


@pytest.mark.parametrize("name, args, kwargs", [c[1:] for c in SAME], ids=[c[0] for c in SAME])
def test_emublas_follows_scipys_rule(name, args, kwargs):
    kw_s = {k: (v.copy(order="F") if isinstance(v, np.ndarray) and k == "c" else v) for k, v in kwargs.items()}
    kw_e = {k: (v.copy(order="F") if isinstance(v, np.ndarray) and k == "c" else v) for k, v in kwargs.items()}
    got_s, val_s = _outcome(fblas, name, args, kw_s)
    got_e, val_e = _outcome(emublas, name, args, {**kw_e, "backend": "native"})
    assert got_e == got_s, f"scipy {got_s} ({val_s!r}), emublas {got_e} ({val_e!r})"
    if got_s == "ok":
        assert np.shape(val_e) == np.shape(val_s) and np.asarray(val_e).dtype == np.asarray(val_s).dtype
        np.testing.assert_allclose(val_e, val_s, rtol=1e-13, atol=1e-13)
    else:
        # the same family of exception, so `except TypeError` / `except ValueError` code keeps working
        family = TypeError if isinstance(val_s, TypeError) else ValueError
        assert isinstance(val_e, family), f"scipy {type(val_s).__name__}: {val_s}; emublas {val_e!r}"


def test_the_shape_error_names_a_1d_operand_as_given():
    with pytest.raises(ValueError, match=r"a is 1-D of length 70, read as a 70x1 column"):
        emublas.dgemm(1.0, np.ones(70), np.ones((70, 70)), backend="native")


# (id, routine, args, kwargs, what scipy does, what emublas does instead): the README's table
def _scipy_ok(val):
    return val[0] == "ok"


DIFFERENT = [
    ("illegal trans of csyrk", "csyrk", (1.0, A * 1j), {"trans": 2}, _scipy_ok, ValueError),
    ("illegal trans of zherk", "zherk", (1.0, A * 1j), {"trans": 1}, _scipy_ok, ValueError),
    (
        "alpha = 0 with NaN in a",
        "dgemm",
        (0.0, np.full((3, 3), np.nan), B),
        {},
        # OpenBLAS propagates the NaN with some CPUs' kernels (seen on Intel Xeons) and returns
        # zeros with others (seen on an AMD EPYC without AVX-512): scipy's side depends on the host
        lambda v: v[0] == "ok" and (np.isnan(v[1]).all() or (v[1] == 0).all()),
        "zeros",
    ),
    ("3-D a with axes of length 1", "dgemm", (1.0, A.reshape(3, 3, 1), B), {}, _scipy_ok, ValueError),
    ("alpha = [1, 2] (scipy takes the first)", "dgemm", ([1.0, 2.0], A, B), {}, _scipy_ok, ValueError),
    ("trans_a = [1] (a sequence)", "dgemm", (1.0, A, B), {"trans_a": [1]}, _scipy_ok, TypeError),
    ("trans_a = '1' (a string)", "dgemm", (1.0, A, B), {"trans_a": "1"}, _scipy_ok, TypeError),
    ("3-D c", "dgemm", (1.0, A, B), {"beta": 1.0, "c": C.reshape(3, 3, 1)}, _scipy_ok, ValueError),
    (
        "1-D c",
        "dgemm",
        (1.0, A[:, :1], B[:1, :1]),
        {"beta": 1.0, "c": np.ones(3)},
        lambda v: v[0] == "ok" and v[1].shape == (3,),
        lambda out: out.shape == (3, 1),
    ),
]


@pytest.mark.parametrize(
    "name, args, kwargs, scipy_does, emublas_does", [c[1:] for c in DIFFERENT], ids=[c[0] for c in DIFFERENT]
)
def test_deliberate_difference_from_scipy(name, args, kwargs, scipy_does, emublas_does, capfd):
    assert scipy_does(_outcome(fblas, name, args, dict(kwargs)))
    capfd.readouterr()  # BLAS's own "illegal value" line on stderr belongs to scipy's side
    if emublas_does == "zeros":
        out = getattr(emublas, name)(*args, **kwargs, backend="native")
        np.testing.assert_array_equal(out, np.zeros((3, 3)))
    elif not isinstance(emublas_does, type):
        assert emublas_does(getattr(emublas, name)(*args, **kwargs, backend="native"))
    else:
        with pytest.raises(emublas_does):
            getattr(emublas, name)(*args, **kwargs, backend="native")


def test_readme_lists_every_deliberate_difference():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = text.split("### Where emublas differs from scipy", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| case")]
    assert len(rows) == len(DIFFERENT) + 1  # + zero-size rank-k calls (scipy's BLAS prints a warning)
