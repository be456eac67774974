"""The BLAS-3 front: scipy.linalg.blas signatures, argument rules, dispatch.

Every routine here checks and converts its arguments exactly once, prepares
the Fortran-ordered result, settles the cases where no product is needed
(empty results, ``k == 0``, ``alpha == 0``: reference-BLAS quick returns, so
``a`` and ``b`` are then not read) and hands the product to the selected
backend.  Rank-k routines a backend has no special path for are derived here
from its ``gemm``; the untouched triangle, beta scaling and the real diagonal
of Hermitian results are enforced here for every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _triangles as tri
from . import config
from ._arrays import (
    Matrix,
    Operand,
    as_matrix,
    complex_scalar,
    device_of,
    flag,
    namespace,
    overwrite_flag,
    real_scalar,
)
from ._front import (
    DTYPES,
    device_name,
    given,
    prefix_of,
    prepare_out,
    scale_out,
    trans_codes,
)
from .derived import backend_gemm, derived_rank_k

__all__: list[str] = ["gemm", "syrk", "herk", "syr2k", "her2k"]


# ---------------------------------------------------------------------------
# gemm
# ---------------------------------------------------------------------------


def _gemm(prefix: str | None, alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, backend, options):
    xp = namespace(a=a, b=b, c=c)
    if prefix is None:
        prefix = prefix_of(a=a, b=b, c=c)
    dtype = DTYPES[prefix]
    scalar = real_scalar if prefix in "sd" else complex_scalar
    alpha = scalar(alpha, "alpha")
    beta = scalar(0.0 if beta is None else beta, "beta")  # None: the default, as in scipy
    overwrite_c = overwrite_flag(overwrite_c)
    trans_a = trans_codes(prefix, "gemm", trans_a, "trans_a")
    trans_b = trans_codes(prefix, "gemm", trans_b, "trans_b")
    be, opts = config.resolve(backend, options)
    with device_of(xp, a, b, c):
        a_in, b_in = a, b
        a = as_matrix(a, dtype, xp, "a")
        b = as_matrix(b, dtype, xp, "b")
        m, ka = a.shape[::-1] if trans_a else a.shape
        kb, n = b.shape[::-1] if trans_b else b.shape
        if ka != kb:
            raise ValueError(
                f"{prefix}gemm: inner dimensions differ: op(a) is {m}x{ka}"
                f" (a is {given(a_in, a)}, trans_a={trans_a})"
                f" but op(b) is {kb}x{n} (b is {given(b_in, b)}, trans_b={trans_b})"
            )
        be.check(device_name(xp))
        out, alias = prepare_out(c, (m, n), dtype, xp, bool(overwrite_c), a, b)
        if m == 0 or n == 0:
            return out
        if ka == 0 or alpha == 0:
            scale_out(out, beta, xp)
            return out
        target = out.copy(order="F") if alias else out
        routed = be.route("gemm", prefix, m, n, ka, target, opts)  # auto: the concrete backend, once
        if routed is not None:
            be, _, opts = routed
        if beta == 0 and c is not None and not be.ignores_c_when_beta_zero:
            target.fill(0)
        if be.handles_nonfinite:  # the backend's own gemm: no wrapper to build per call
            be.gemm(alpha, a, b, beta, target, trans_a, trans_b, **opts)
        else:
            backend_gemm(be, opts, xp)(alpha, a, b, beta, target, trans_a, trans_b)
        if alias:
            out[...] = target
        return out


# ---------------------------------------------------------------------------
# rank-k and rank-2k updates
# ---------------------------------------------------------------------------


def _rank_k(kind: str, prefix: str | None, alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options):
    two = kind in ("syr2k", "her2k")
    xp = namespace(a=a, b=b, c=c) if two else namespace(a=a, c=c)
    if prefix is None:
        prefix = prefix_of(a=a, b=b, c=c) if two else prefix_of(a=a, c=c)
    real = prefix in "sd"
    if kind in ("herk", "her2k") and real:
        kind = kind.replace("he", "sy")  # a Hermitian update of real data is the symmetric one
    herm = kind in ("herk", "her2k")
    name = prefix + kind
    dtype = DTYPES[prefix]
    if real or (herm and kind == "herk"):
        alpha = real_scalar(alpha, "alpha")
    else:
        alpha = complex_scalar(alpha, "alpha")
    beta = 0.0 if beta is None else beta  # None: the default, as in scipy
    beta = real_scalar(beta, "beta") if (real or herm) else complex_scalar(beta, "beta")
    overwrite_c = overwrite_flag(overwrite_c)
    trans = trans_codes(prefix, kind, trans)
    lower = flag(lower, "lower", (0, 1))
    be, opts = config.resolve(backend, options)
    with device_of(xp, a, b, c):
        a = as_matrix(a, dtype, xp, "a")
        if two:
            b = as_matrix(b, dtype, xp, "b")
            if b.shape != a.shape:
                raise ValueError(
                    f"{name}: a and b must have the same shape, got a {a.shape[0]}x{a.shape[1]}"
                    f" and b {b.shape[0]}x{b.shape[1]}"
                )
        n, k = a.shape[::-1] if trans else a.shape
        be.check(device_name(xp))
        inputs = (a, b) if two else (a,)
        out, alias = prepare_out(c, (n, n), dtype, xp, bool(overwrite_c), *inputs)
        if n == 0:
            return out
        target = out.copy(order="F") if alias else out
        routed = be.route(kind, prefix, n, n, k, target, opts)  # auto: the concrete backend, once
        if routed is not None:
            be, _, opts = routed
        if beta == 0 and c is not None and (k == 0 or alpha == 0 or not be.ignores_c_when_beta_zero):
            tri.fill(target, lower, 0)
        if k == 0 or alpha == 0:
            if beta not in (0, 1):
                tri.scale(target, lower, beta)
        else:
            args = (alpha, a, b) if two else (alpha, a)
            # a backend that leaves NaN/Inf to the front gets them through its (patched) gemm
            own = be.handles_nonfinite or all(bool(xp.isfinite(x).all()) for x in inputs)
            done = getattr(be, kind)(*args, beta, target, trans, lower, **opts) if own else NotImplemented
            if done is NotImplemented:
                tri.copy(target, derived_rank_k(be, kind, alpha, a, b, beta, target, trans, opts), lower)
        if herm:
            tri.real_diagonal(target)
        if alias:
            out[...] = target
        return out


# ---------------------------------------------------------------------------
# public routines
# ---------------------------------------------------------------------------


# Parameter entries of the docstrings that emublas.level3 builds (plain text, no format
# fields: they are joined into templates that are formatted later).
def gemm(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0.0,
    c: Operand | None = None,
    trans_a: int = 0,
    trans_b: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """Matrix product ``C = alpha*op(a)*op(b) + beta*c``, the dtype chosen from the inputs.

    The prefix (s, d, c, z) is the one ``scipy.linalg.get_blas_funcs`` would
    pick for ``a``, ``b`` and ``c``; then as ``scipy.linalg.blas.dgemm`` and the
    others, the product computed by the selected emublas backend.

    Parameters
    ----------
    alpha : scalar
    a, b : array_like, 2-D
        numpy arrays compute on the CPU, cupy arrays on their GPU.
    beta : scalar, optional
        ``beta == 0`` means ``c`` is not read (NaN in it cannot appear in the result).
    c : array_like, optional
        Added term, shape ``(m, n)``; zeros when omitted.
    trans_a, trans_b : {0, 1, 2}, optional
        0: no transpose, 1: transpose, 2: conjugate transpose.
    overwrite_c : int, optional
        If nonzero and ``c`` is a Fortran-contiguous array of the routine's dtype,
        ``c`` is updated in place and returned.  Otherwise ``c`` is not modified.
    backend : str, optional
        Backend for this call (see :func:`emublas.use`).
    **options
        Backend options for this call.

    Returns
    -------
    ndarray
        Fortran-ordered ``(m, n)`` result of the routine's dtype, on the inputs' device.

    Raises
    ------
    ValueError
        Non-conforming shapes, illegal codes, unknown backend or option.
    TypeError
        numpy and cupy arrays mixed.
    """
    return _gemm(None, alpha, a, b, beta, c, trans_a, trans_b, overwrite_c, backend, options)


def syrk(
    alpha: complex,
    a: Operand,
    beta: complex = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """Symmetric rank-k update ``C = alpha*op(a)*op(a).T + beta*c``, the dtype chosen from the inputs.

    As ``scipy.linalg.blas.dsyrk`` / ``zsyrk``: only the triangle selected by
    ``lower`` is computed, the other keeps ``c``'s values (zeros when ``c`` is
    omitted).

    Parameters
    ----------
    alpha : scalar
    a : array_like, 2-D
        numpy arrays compute on the CPU, cupy arrays on their GPU.
    beta : scalar, optional
        ``beta == 0`` means ``c`` is not read.
    c : array_like, optional
        Square ``(n, n)`` array updated in its referenced triangle.
    trans : int, optional
        0: a a^T, 1: a^T a (2 is the same as 1 for real data, illegal for complex).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        If nonzero and ``c`` is a Fortran-contiguous array of the routine's dtype,
        ``c`` is updated in place and returned.
    backend : str, optional
        Backend for this call (see :func:`emublas.use`).
    **options
        Backend options for this call.

    Returns
    -------
    ndarray
        Fortran-ordered ``(n, n)`` result of the routine's dtype, on the inputs' device.

    Raises
    ------
    ValueError
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("syrk", None, alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def herk(
    alpha: complex,
    a: Operand,
    beta: complex = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """Hermitian rank-k update ``C = alpha*op(a)*op(a)^H + beta*c`` (alpha, beta real).

    As ``scipy.linalg.blas.zherk``: only the triangle selected by ``lower`` is
    computed, the other keeps ``c``'s values (zeros when ``c`` is omitted).  The
    diagonal of the result is exactly real.  Real inputs give the real
    symmetric update (``dsyrk``).

    Parameters
    ----------
    alpha : scalar
        Only its real part is used.
    a : array_like, 2-D
        numpy arrays compute on the CPU, cupy arrays on their GPU.
    beta : scalar, optional
        Only its real part is used; ``beta == 0`` means ``c`` is not read.
    c : array_like, optional
        Square ``(n, n)`` array updated in its referenced triangle.
    trans : int, optional
        0: a a^H, 2: a^H a (1 is illegal for complex data).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        If nonzero and ``c`` is a Fortran-contiguous array of the routine's dtype,
        ``c`` is updated in place and returned.
    backend : str, optional
        Backend for this call (see :func:`emublas.use`).
    **options
        Backend options for this call.

    Returns
    -------
    ndarray
        Fortran-ordered ``(n, n)`` result of the routine's dtype, on the inputs' device.

    Raises
    ------
    ValueError
        Illegal codes, a ``c`` of the wrong shape, unknown backend or option.
    """
    return _rank_k("herk", None, alpha, a, None, beta, c, trans, lower, overwrite_c, backend, options)


def syr2k(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """Symmetric rank-2k update ``C = alpha*(op(a)*op(b).T + op(b)*op(a).T) + beta*c``.

    The dtype is chosen from the inputs; then as ``scipy.linalg.blas.dsyr2k`` /
    ``zsyr2k``: only the triangle selected by ``lower`` is computed, the other
    keeps ``c``'s values (zeros when ``c`` is omitted).

    Parameters
    ----------
    alpha : scalar
    a, b : array_like, 2-D
        Of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    beta : scalar, optional
        ``beta == 0`` means ``c`` is not read.
    c : array_like, optional
        Square ``(n, n)`` array updated in its referenced triangle.
    trans : int, optional
        0: a b^T + b a^T, 1: a^T b + b^T a (2 is the same as 1 for real data, illegal for complex).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        If nonzero and ``c`` is a Fortran-contiguous array of the routine's dtype,
        ``c`` is updated in place and returned.
    backend : str, optional
        Backend for this call (see :func:`emublas.use`).
    **options
        Backend options for this call.

    Returns
    -------
    ndarray
        Fortran-ordered ``(n, n)`` result of the routine's dtype, on the inputs' device.

    Raises
    ------
    ValueError
        ``a`` and ``b`` of different shapes, illegal codes, unknown backend or option.
    """
    return _rank_k("syr2k", None, alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


def her2k(
    alpha: complex,
    a: Operand,
    b: Operand,
    beta: complex = 0.0,
    c: Operand | None = None,
    trans: int = 0,
    lower: int = 0,
    overwrite_c: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> Matrix:
    """Hermitian rank-2k update ``C = alpha*op(a)*op(b)^H + conj(alpha)*op(b)*op(a)^H + beta*c`` (beta real).

    As ``scipy.linalg.blas.zher2k``: only the triangle selected by ``lower`` is
    computed, the other keeps ``c``'s values (zeros when ``c`` is omitted).  The
    diagonal of the result is exactly real.  Real inputs give the real
    symmetric update (``dsyr2k``).

    Parameters
    ----------
    alpha : scalar
    a, b : array_like, 2-D
        Of one shape; numpy arrays compute on the CPU, cupy arrays on their GPU.
    beta : scalar, optional
        Only its real part is used; ``beta == 0`` means ``c`` is not read.
    c : array_like, optional
        Square ``(n, n)`` array updated in its referenced triangle.
    trans : int, optional
        0: a b^H + b a^H, 2: a^H b + b^H a (1 is illegal for complex data).
    lower : {0, 1}, optional
        0 updates the upper triangle, 1 the lower.
    overwrite_c : int, optional
        If nonzero and ``c`` is a Fortran-contiguous array of the routine's dtype,
        ``c`` is updated in place and returned.
    backend : str, optional
        Backend for this call (see :func:`emublas.use`).
    **options
        Backend options for this call.

    Returns
    -------
    ndarray
        Fortran-ordered ``(n, n)`` result of the routine's dtype, on the inputs' device.

    Raises
    ------
    ValueError
        ``a`` and ``b`` of different shapes, illegal codes, unknown backend or option.
    """
    return _rank_k("her2k", None, alpha, a, b, beta, c, trans, lower, overwrite_c, backend, options)


# The prefixed routines (real definitions with scipy's signatures) call the ones above.
from . import prefixed as _prefixed  # noqa: E402
from . import prefixed_2k as _prefixed_2k  # noqa: E402

ROUTINES: dict[str, Callable[..., Matrix]] = {"gemm": gemm, "syrk": syrk, "herk": herk, "syr2k": syr2k, "her2k": her2k}
ROUTINES.update((name, getattr(_prefixed, name)) for name in _prefixed.__all__)
ROUTINES.update((name, getattr(_prefixed_2k, name)) for name in _prefixed_2k.__all__)

# symm, hemm, trmm, trsm live in emublas.level3, which builds on the helpers above
from . import level3 as _level3  # noqa: E402

symm, hemm, trmm, trsm = (_level3.ROUTINES[k] for k in ("symm", "hemm", "trmm", "trsm"))
ROUTINES.update(_level3.ROUTINES)
__all__ += ["symm", "hemm", "trmm", "trsm"]
