"""The per-entry accuracy certificate of Ozaki-II (docs/design.md §4).

Every output entry is checked, inside the finalize kernel, against the error
bound native BLAS guarantees for it, ``k·u·Σ_l |x_il||y_jl|`` (u the unit
roundoff of the output's precision).  The quantities are kept in log2 and in
the units of ``C'``, the exact product of the scaled integer factors
(``X' = trunc(X·2^s)``, ``Y' = trunc(Y·2^t)``), so nothing over- or underflows:

* the error of ``C'_ij`` is at most ``2^{s_i}‖X_i‖₁ + 2^{t_j}‖Y_j‖₁`` (the two
  truncations) plus the reconstruction's own error (:func:`crt_error`: the CRT sum
  is exact but for the weights' rounding where P is wider than ``3β`` bits);
* ``Σ|x||y|`` (in C' units) is bounded below by ``|C'_ij|/2`` where the error
  is at most half of ``|C'_ij|``, and in accurate mode by
  ``2^{u_i+v_j}(W_ij − R_i − S_j)/127²`` with W the bound product and R, S
  upper bounds of the bound planes' row sums (``ceil(127a)·ceil(127b) ≤
  (127a+1)(127b+1)`` summed over k).

With the ``bits`` option the bound is ``2^-bits·Σ_l |x_il||y_jl|`` instead: a
caller who asks for fewer bits than native's is warned only about entries that
miss those.

An entry whose bound is not met is counted and, unless ``fallback="none"``,
recomputed in the same kernel as a float64 dot product in order (which meets
native's bound); :class:`~emublas.OzakiAccuracyWarning` then says how many.
"""

from __future__ import annotations

import math

from ... import _callers
from ...errors import OzakiAccuracyWarning, OzakiFallbackWarning
from .moduli import ModulusSet, crt_split

__all__ = ["certificate", "requirement", "target_log2", "warn", "FALLBACKS"]

#: What happens to an entry the certificate does not cover: recomputed as a
#: float64 dot product (``dot``), or left as it is with a warning (``none``).
FALLBACKS = ("dot", "none")

# log2 of the slack on the sum of the three error terms (3), and for complex
# data of the modulus of a complex truncation (√2), plus rounding in the logs
_SLACK_REAL = math.log2(3.0) + 0.05
_SLACK_COMPLEX = math.log2(3.0 * math.sqrt(2.0)) + 0.05


def crt_error(mset: ModulusSet, nterms: int) -> float:
    """log2 of the exact CRT sum's reconstruction error in C' units, for ``nterms``
    accumulated terms per part (:func:`~.moduli.crt_split`: the weights' rounding
    where P is wider than their three pieces, and the last additions), a factor 2 to spare."""
    return crt_split(mset, nterms).err


def slack(complex_data: bool) -> float:
    """log2 of the slack the row plans add to their error terms."""
    return _SLACK_COMPLEX if complex_data else _SLACK_REAL


def certificate(
    px,
    py,
    mset: ModulusSet,
    nterms: int,
    *,
    k: int,
    precision: int,
    W=None,
    fallback: str = "dot",
    bits: int | None = None,
    L=None,
    R=None,
    conj_l=False,
    conj_r=False,
) -> dict:
    """The certificate arguments of the finalize kernels (``emublas_oz_cert`` in ``emublas_cpu.h``).

    Parameters
    ----------
    px, py : RowPlan
        The :class:`~emublas.backends.ozaki2.scaling.RowPlan` of the rows and the
        columns (their ``err``, ``wsum`` and ``budget`` already carry the slack,
        see :func:`slack`).
    mset : ModulusSet
        The moduli of the call.
    nterms : int
        CRT terms accumulated per part (sets the reconstruction's error).
    k : int
        The inner dimension.
    precision : int
        Significand bits of the routine's dtype (24 or 53).
    W : numpy.ndarray, optional
        The accurate mode's bound product (int32, m × n); None in fast mode.
    fallback : {"dot", "none"}
        Whether uncertified entries are recomputed as dot products.
    bits : int, optional
        Correct bits each entry must have, relative to ``Σ|x||y|``; None: native
        BLAS's bound ``k·u``.
    L, R : array, optional
        The factors the fallback's dot products read (``Σ_l op(L_il)·op(R_jl)``).
    conj_l, conj_r : bool
        Whether ``op`` conjugates ``L``, ``R``.

    Returns
    -------
    dict
        The kernel's arguments by name: row/column error terms, the CRT error
        and the target (log2, in units of the output's scale), ``W`` and its
        row/column sums and budgets when given, and the fallback's operands.
    """
    cplx = L is not None and L.dtype.kind == "c"
    cert = {
        "row_err": px.err,
        "col_err": py.err,
        "crt_err": crt_error(mset, nterms) + slack(cplx),
        "target": target_log2(k, precision, bits),
        "W": W,
        "fix": fallback == "dot",
        "L": L,
        "R": R,
        "conj_l": conj_l,
        "conj_r": conj_r,
    }
    if W is not None:
        cert.update(row_wsum=px.wsum, col_wsum=py.wsum, row_budget=px.budget, col_budget=py.budget)
    return cert


def target_log2(k: int, precision: int, bits: int | None = None) -> float:
    """log2 of the error the certificate allows per unit of ``Σ|x||y|``.

    Parameters
    ----------
    k : int
        The inner dimension.
    precision : int
        Significand bits of the routine's dtype.
    bits : int, optional
        Correct bits asked for; None: native BLAS's bound ``k·u``.

    Returns
    -------
    float
    """
    return math.log2(max(k, 1)) - precision if bits is None else -float(bits)


def requirement(bits: int | None) -> str:
    """What the certificate checks, as a warning names it.

    Parameters
    ----------
    bits : int or None
        The ``bits`` option.

    Returns
    -------
    str
    """
    return "native BLAS's error bound" if bits is None else f"{bits} correct bits (error <= 2^-{bits}*sum|a||b|)"


def warn(
    routine: str, count: int, total: int, moduli: int, bits: float, fallback: str, required: int | None = None
) -> None:
    """The accuracy warning of a call with ``count`` uncertified entries out of ``total``.

    It is attributed to the first frame outside emublas (the user's call, or the
    interposed program's).

    Parameters
    ----------
    routine : str
        The routine's name, as the message shows it.
    count, total : int
        Uncertified entries and all entries of the call.
    moduli : int
        How many moduli the call used.
    bits : float
        The bits those moduli carry (log2 of their product).
    fallback : {"dot", "none"}
        ``"dot"``: the entries were recomputed (:class:`OzakiFallbackWarning`);
        otherwise left as computed (:class:`OzakiAccuracyWarning`).
    required : int, optional
        The ``bits`` option the entries were certified against (None: native's bound).
    """
    category: type[Warning]
    if fallback == "dot":
        what, category = (
            "recomputed as float64 dot products: their error is within native BLAS's bound k*u*sum|a||b|, only slower",
            OzakiFallbackWarning,
        )
    else:
        what, category = (
            f"left as computed (fallback='none'): their error may exceed {requirement(required)}",
            OzakiAccuracyWarning,
        )
    _callers.warn(
        f"ozaki2 {routine}: {count} of {total} entries could not be certified to {requirement(required)}"
        f" with {moduli} moduli ({bits:.0f} bits) and were {what}. More moduli, mode='accurate' or"
        " mode='auto' certify more of them; an exponent span wider than the reconstruction carries never is.",
        category,
    )
