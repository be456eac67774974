"""Ozaki-II BLAS-3 routines on numpy and cupy arrays: gemm (real, 2M complex, hybrid), rank-k.

Each routine turns its operands into "rows × k" factors, picks the moduli and
the power-of-two shifts, runs the driver (:mod:`.pipeline`) over the stages
of the arrays' device and lets the final pass write ``alpha·C + beta·c``.
"""

from __future__ import annotations

import threading

import numpy as np

from ... import _float32 as f32
from ..._arrays import is_cupy, namespace
from . import calls, verdicts
from . import graphs as cuda_graphs  # the name graphs is _execute's option
from .planning import (  # noqa: F401  (MAX_HYBRID, MAX_REAL, plan, ... are also read as routines.<name>)
    DEFAULT_MODULI,
    MAX_2M,
    MAX_HYBRID,
    MAX_REAL,
    MODES,
    Family,
    job_for,
    nterms,
    plan,
    precision_of,
)

__all__ = ["gemm", "rank_k", "last_run", "DEFAULT_MODULI", "MODES"]

_last = threading.local()


def last_run() -> dict | None:
    """What the last ozaki2 call of this thread did: moduli, mode, bits, phase times.

    Returns
    -------
    dict or None
        The record of this thread's last call: ``routine``, ``moduli`` (count),
        ``mode``, ``auto_chose``, ``bits`` (of the moduli's product),
        ``needed_bits`` (auto mode only, else None), ``required_bits`` (the
        ``bits`` option the entries were certified to; None: native's bound), ``phases`` (seconds per
        phase), ``fallback``, ``uncertified`` (entries the certificate did not
        cover) and, on cupy arrays, ``gpu_plan`` and ``graph`` (None: issued
        directly; "captured" or "replayed": through a CUDA graph, :mod:`.graphs`).
        None before the thread's first call.

    Notes
    -----
    On cupy arrays ``uncertified`` is None until the device counter has been
    read, which happens without waiting for the device (:mod:`.verdicts`).
    """
    return getattr(_last, "info", None)


def _execute(
    routine: str,
    recipe_name: str,
    family: Family,
    x,
    y,
    out,
    alpha,
    beta,
    *,
    conj_x=False,
    conj_y=False,
    uplo=0,
    bounds_from=None,
    sides=None,
    fallback_factors=None,
    unscale=0,
    moduli="default",
    mode="accurate",
    fallback="dot",
    bits=None,
    devices=None,
    split="auto",
    graphs="auto",
):
    """Scale, choose moduli, run the engine and finalize into ``out`` (updated in place).

    ``bounds_from``: factors whose row shifts and product bound to use instead of
    ``x, y`` (syr2k: ``[X|Y]`` and ``[Y|X]``, so that both terms share shifts).
    The finalize certifies every entry (:mod:`.certify`) against those factors; its
    fallback reads ``fallback_factors`` (default: those factors).  ``unscale``: the
    product of the scaled integers is ``2^unscale`` times the result (syr2k/her2k's
    balancing), taken back in the final unscaling.  ``graphs``: "auto" lets a small
    call on cupy arrays replay as a CUDA graph (:mod:`.graphs`), "off" never.
    """
    verdicts.check()  # earlier GPU calls' warnings, where ready
    kw = dict(
        conj_x=conj_x,
        conj_y=conj_y,
        uplo=uplo,
        bounds_from=bounds_from,
        sides=sides,
        fallback_factors=fallback_factors,
        unscale=unscale,
        moduli=moduli,
        mode=mode,
        fallback=fallback,
        bits=bits,
    )
    if not is_cupy(out):
        _last.info = calls.run_cpu(routine, recipe_name, family, x, y, out, alpha, beta, **kw)
        return

    def direct(x, y, out):
        return calls.run_gpu(routine, recipe_name, family, x, y, out, alpha, beta, devices=devices, split=split, **kw)

    sig = None
    if (
        graphs == "auto"
        and mode != "auto"  # auto mode reads its sample on the host
        and devices is None
        and not calls.PROFILE_GPU
        and bounds_from is None
        and sides is None
        and fallback_factors is None
        and not unscale
    ):
        fixed = (conj_x, conj_y, uplo, moduli, mode, fallback, bits, split)
        sig = cuda_graphs.signature(routine, recipe_name, (family.name, family.maximum), x, y, out, alpha, beta, fixed)
    if sig is None:
        counters, info = direct(x, y, out)
    else:
        counters, info = cuda_graphs.run(sig, x, y, out, direct, read_out=beta != 0 or uplo != 0)
    _last.info = info
    verdicts.defer(counters, routine=routine, total=calls.entries(out.shape, uplo), info=info, fallback=fallback)


# ---------------------------------------------------------------------------
# public routines (called by the backend with the front's conventions)
# ---------------------------------------------------------------------------


def gemm(
    alpha,
    a,
    b,
    beta,
    c,
    trans_a,
    trans_b,
    *,
    moduli="default",
    mode="accurate",
    fallback="dot",
    bits=None,
    devices=None,
    split="auto",
    graphs="auto",
) -> None:
    """``c = alpha·op(a)·op(b) + beta·c`` with Ozaki-II (c Fortran-ordered, updated in place).

    Parameters
    ----------
    alpha, beta : float or complex
        The scalars, as Python numbers.
    a, b : numpy.ndarray or cupy.ndarray
        2-D operands of ``c``'s dtype (float32, float64, complex64, complex128),
        on the same device as ``c``; any strides.
    c : numpy.ndarray or cupy.ndarray
        The m × n Fortran-ordered output, overwritten with the result.
    trans_a, trans_b : int
        0 (N), 1 (T) or 2 (C, conjugate transpose) for ``op(a)``, ``op(b)``.
    moduli : int or "default"
        Number of moduli (the cap in ``auto`` mode); "default": :data:`DEFAULT_MODULI`.
    mode : {"fast", "accurate", "auto"}
        The scaling bound (see :data:`MODES`).
    fallback : {"dot", "none"}
        Entries the accuracy certificate does not cover: recomputed as float64
        dot products, or left as computed (a warning counts them either way).
    bits : int or None
        Correct bits per entry, relative to ``Σ|a||b|``, that the certificate checks
        (None: native BLAS's bound ``k·u``); ``auto`` mode sizes the count for them.
    devices : None, "all" or list of int
        GPUs sharing a cupy call (None: the arrays' own device); ignored for numpy.
    split : {"auto", "moduli", "tiles"}
        How several GPUs share the call.
    graphs : {"auto", "off"}
        Whether a small call on cupy arrays may replay as a CUDA graph (:mod:`.graphs`).

    Notes
    -----
    On cupy arrays the work is queued on the current stream and this returns
    without waiting for the device; the accuracy warning comes later.
    """
    x = a if trans_a == 0 else a.T
    y = b.T if trans_b == 0 else b
    conj_x, conj_y = trans_a == 2, trans_b == 2
    cplx = c.dtype.kind == "c"
    family = Family("2m", MAX_HYBRID) if cplx else Family("real", MAX_REAL)
    recipe = "2m" if cplx else "real"
    # NaN/Inf need no path of their own: their rows are dead in the plan and the final
    # pass takes their entries from a float64 dot product, native BLAS's pattern
    _execute(
        "gemm",
        recipe,
        family,
        x,
        y,
        c,
        alpha,
        beta,
        conj_x=conj_x,
        conj_y=conj_y,
        moduli=moduli,
        mode=mode,
        fallback=fallback,
        bits=bits,
        devices=devices,
        split=split,
        graphs=graphs,
    )


def rank_k(
    kind: str,
    alpha,
    a,
    b,
    beta,
    c,
    trans,
    lower,
    *,
    moduli="default",
    mode="accurate",
    fallback="dot",
    bits=None,
    devices=None,
    split="auto",
    graphs="auto",
):
    """syrk/herk/syr2k/her2k with their own Ozaki-II paths; NotImplemented where the
    front should derive the routine from gemm (more moduli than the 2M list has).

    Parameters
    ----------
    kind : {"syrk", "herk", "syr2k", "her2k"}
        The routine.
    alpha, beta : float or complex
        The scalars, as Python numbers (real where BLAS takes a real one).
    a : numpy.ndarray or cupy.ndarray
        2-D operand of ``c``'s dtype, on ``c``'s device; any strides.
    b : numpy.ndarray or cupy.ndarray or None
        The second operand of syr2k/her2k, shaped like ``a``; None for syrk/herk.
    c : numpy.ndarray or cupy.ndarray
        The n × n Fortran-ordered output; only its ``lower`` (or upper)
        triangle is read and written.
    trans : int
        0: ``op(a) = a``; 1: ``a``'s transpose; 2: its conjugate transpose
        for herk/her2k (a plain transpose for syrk/syr2k).
    lower : bool
        Which triangle of ``c`` to update.
    moduli, mode, fallback, bits, devices, split, graphs
        As in :func:`gemm`.

    Returns
    -------
    None or NotImplemented
        None once ``c`` holds the result; NotImplemented (``c`` untouched) when
        ``moduli`` exceeds what this routine's own path supports.

    Notes
    -----
    Real syrk runs on the 2M moduli with the columns of ``a`` split into a
    complex pair (an odd k is padded with a zero column); syr2k/her2k may scale
    ``b`` by a power of two (taken back exactly at the end) so that both factors
    can share one row shift without ``b`` losing its bits.
    """
    cplx = c.dtype.kind == "c"
    herm = kind in ("herk", "her2k")
    x = a if trans == 0 else a.T
    conj = herm and trans == 2
    y = None if b is None else (b if trans == 0 else b.T)
    xp = namespace(c=c)
    limit = MAX_2M if (cplx or kind == "syrk") else MAX_REAL
    if moduli != "default" and int(moduli) > limit:
        return NotImplemented
    uplo = 2 if lower else 1
    opts = dict(
        uplo=uplo, moduli=moduli, mode=mode, fallback=fallback, bits=bits, devices=devices, split=split, graphs=graphs
    )
    if kind == "syrk":
        if x.shape[1] % 2:
            x = xp.concatenate([x, xp.zeros((x.shape[0], 1), x.dtype)], axis=1)
        # complex syrk: the split applied to X+ and X-; real: to X itself (docs/design.md §3.5-3.6)
        recipe, fam = ("csyrk", Family("2m", MAX_2M)) if cplx else ("syrk", Family("split", MAX_2M))
        _execute("syrk", recipe, fam, x, x, c, alpha, beta, **opts)
    elif kind == "herk":
        _execute("herk", "herk", Family("2m", MAX_2M), x, x, c, alpha, beta, conj_x=conj, conj_y=conj, **opts)
    elif kind == "her2k":
        if conj:
            x, y = f32.conj(x), f32.conj(y)
        if alpha != alpha.real:
            # α X Yᴴ + conj(α) Y Xᴴ = |α| ((uX) Yᴴ + Y (uX)ᴴ) with u = α/|α|: a unit factor
            # keeps X's magnitude, so the shared row shifts lose nothing
            unit = alpha / abs(alpha)
            x, alpha = f32.unit_times(unit, x), abs(alpha)
        xb, yb, t = _balanced(x, y)
        left = xp.concatenate([xb, yb], axis=1)
        right = xp.concatenate([yb, xb], axis=1)
        orig = (xp.concatenate([x, y], axis=1), xp.concatenate([y, x], axis=1)) if t else (left, right)
        _execute(
            "her2k",
            "herk",
            Family("2m", MAX_2M),
            left,
            right,
            c,
            alpha.real,
            beta,
            fallback_factors=orig,
            unscale=t,
            **opts,
        )
    else:  # syr2k
        fam = Family("2m", MAX_2M) if cplx else Family("real", MAX_REAL)
        xb, yb, t = _balanced(x, y)
        both = (xp.concatenate([xb, yb], axis=1), xp.concatenate([yb, xb], axis=1))  # shared row shifts
        orig = (xp.concatenate([x, y], axis=1), xp.concatenate([y, x], axis=1)) if t else both
        _execute(
            "syr2k",
            "csyr2k" if cplx else "syr2k",
            fam,
            xb,
            yb,
            c,
            alpha,
            beta,
            bounds_from=both,
            fallback_factors=orig,
            unscale=t,
            **opts,
        )
    return None


def _balanced(x, y):
    """``(x, y·2^t, t)`` with the power of two t that brings y's magnitude to x's.

    The rank-2k routines give both factors of a row one shift; a factor far
    smaller than the other would lose its bits to it.  Scaling by a power of two
    is exact; it is skipped where it would overflow or underflow.  The caller takes the
    2^-t back in the final unscaling (:func:`_execute`'s ``unscale``), not in alpha, so
    that no intermediate value over- or underflows.
    """
    # magnitudes from the parts' bits and an exact scaling, the same on numpy and cupy (whose
    # float32 kernels would flush subnormals: emublas._float32)
    mx, _, fx = f32.magnitude_range(x)
    my, smallest, fy = f32.magnitude_range(y)
    if mx == 0 or my == 0 or not (fx and fy):
        return x, y, 0
    t = int(np.frexp(mx)[1] - np.frexp(my)[1])
    if abs(t) < 8:
        return x, y, 0
    info = np.finfo(y.real.dtype)
    if np.frexp(my)[1] + t >= info.maxexp - 1 or np.frexp(smallest)[1] + t <= info.minexp:
        return x, y, 0
    if abs(t) > 1020:  # the gain 2^-t goes into alpha, which must keep its bits
        return x, y, 0
    # ldexp, not y·2.0**t: 2.0**t alone overflows float32 (and float64 past 1023) where y·2^t fits
    return x, f32.ldexp(y, t), t
