"""What the front asks of a backend's gemm: this call's options bound, NaN/Inf handled for a
backend that leaves them to the front, and the rank-k routines a backend does not provide
built from it.
"""

from __future__ import annotations

from collections.abc import Callable

from . import backends
from ._arrays import Matrix, namespace
from .backends.base import split_nonfinite

__all__ = ["backend_gemm", "derived_rank_k"]


def backend_gemm(be, opts: dict, xp) -> Callable[..., None]:
    """The backend's gemm bound to this call's options, with NaN/Inf handled where the backend leaves them.

    A backend that does not declare :attr:`~emublas.backends.base.Backend.handles_nonfinite`
    gets NaN/Inf handled here, once for every caller: the rows and columns they touch
    come from the native backend (:func:`~emublas.backends.base.split_nonfinite`), the
    rest from the backend on finite operands.

    Parameters
    ----------
    be : Backend
        The call's backend.
    opts : dict
        Its options for this call, parsed.
    xp : module
        The arrays' namespace (numpy or cupy).

    Returns
    -------
    callable
        ``f(alpha, a, b, beta, c, trans_a, trans_b)`` updating ``c`` in place, in
        the convention of :meth:`~emublas.backends.base.Backend.gemm`.
    """

    def gemm(alpha, a, b, beta, c, trans_a, trans_b):
        be.gemm(alpha, a, b, beta, c, trans_a, trans_b, **opts)

    if be.handles_nonfinite:
        return gemm

    def patched(alpha, a, b, beta, c, trans_a, trans_b):
        if bool(xp.isfinite(a).all()) and bool(xp.isfinite(b).all()):
            gemm(alpha, a, b, beta, c, trans_a, trans_b)
        else:
            split_nonfinite(gemm, backends.get("native").gemm, alpha, a, b, beta, c, trans_a, trans_b, xp)

    return patched


def derived_rank_k(be, kind: str, alpha, a, b, beta, out, trans: int, opts) -> Matrix:
    """A rank-k routine built from the backend's gemm, written into a full temporary.

    trans codes of the two factors: N·op(N) for trans 0, op(A)·N for trans 1/2,
    where op is T for the symmetric kinds and C for the Hermitian ones.

    Parameters
    ----------
    be : Backend
        The call's backend.
    kind : {"syrk", "herk", "syr2k", "her2k"}
        The routine.
    alpha, beta : float or complex
        The scalars (the second product of a 2k routine uses ``alpha`` conjugated
        for the Hermitian kind).
    a, b : array
        The factors; ``b`` is not read for syrk and herk.
    out : array
        The n × n output; read (not written) when ``beta != 0``.
    trans : int
        The routine's trans code.
    opts : dict
        The backend's options for this call.

    Returns
    -------
    array
        A Fortran-ordered n × n array holding the full update (both triangles);
        the caller copies the referenced triangle into ``out``.
    """
    herm = kind in ("herk", "her2k")
    t = 2 if herm else 1
    ta, tb = (0, t) if trans == 0 else (t, 0)
    xp = namespace(out=out)
    tmp = out.copy(order="F") if beta != 0 else xp.zeros_like(out, order="F")
    gemm = backend_gemm(be, opts, xp)
    if kind in ("syrk", "herk"):
        gemm(alpha, a, a, beta, tmp, ta, tb)
    else:
        gemm(alpha, a, b, beta, tmp, ta, tb)
        second = alpha.conjugate() if herm else alpha
        gemm(second, b, a, 1.0, tmp, ta, tb)
    return tmp
