"""Ozaki-II BLAS-3 routines on numpy and cupy arrays: gemm (real, 2M complex, hybrid), rank-k.

Each routine turns its operands into "rows × k" factors, picks the moduli and
the power-of-two shifts, runs the driver (:mod:`.pipeline`) over the stages
of the arrays' device and lets the final pass write ``alpha·C + beta·c``.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ..._arrays import is_cupy, namespace
from . import certify, cpu_stages, pipeline, scaling, verdicts
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
        ``needed_bits`` (auto mode only, else None), ``phases`` (seconds per
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
    )
    if not is_cupy(out):
        _run_cpu(routine, recipe_name, family, x, y, out, alpha, beta, **kw)
        return

    def direct(x, y, out):
        return _run_gpu(routine, recipe_name, family, x, y, out, alpha, beta, devices=devices, split=split, **kw)

    sig = None
    if (
        graphs == "auto"
        and mode != "auto"  # auto mode reads its sample on the host
        and devices is None
        and not PROFILE_GPU
        and bounds_from is None
        and sides is None
        and fallback_factors is None
        and not unscale
    ):
        from . import graphs as cuda_graphs

        fixed = (conj_x, conj_y, uplo, moduli, mode, fallback, split)
        sig = cuda_graphs.signature(routine, recipe_name, (family.name, family.maximum), x, y, out, alpha, beta, fixed)
    if sig is None:
        counters, info = direct(x, y, out)
    else:
        counters, info = cuda_graphs.run(sig, x, y, out, direct, read_out=beta != 0 or uplo != 0)
    _last.info = info
    verdicts.defer(counters, routine=routine, total=_entries(out.shape, uplo), info=info, fallback=fallback)


class _Prepared:
    """What a call's scaling and planning produced: the job, shifts, certificate, record."""

    def __init__(
        self,
        routine,
        recipe_name,
        family,
        x,
        y,
        out,
        *,
        conj_x,
        conj_y,
        uplo,
        bounds_from,
        sides,
        fallback_factors,
        unscale,
        moduli,
        mode,
        fallback,
    ):
        self.timer = timer = pipeline.Timer()
        t0 = time.perf_counter()
        precision = precision_of(out.dtype)
        bx, by = bounds_from or (x, y)
        shared = bounds_from is not None or y is x  # rank-k: one set of rows (and shifts) for both sides
        if sides is not None:
            left, right = sides
        else:
            left = scaling.side(bx)
            right = left if by is bx else scaling.side(by)
        wrow = wcol = W = None
        if mode != "fast":
            wrow, wcol, W = scaling.bound_product(left, right)
        p = plan(
            routine,
            family,
            precision,
            left,
            right,
            wrow,
            wcol,
            moduli=moduli,
            mode=mode,
            shared=shared,
            complex_data=x.dtype.kind == "c",
        )
        self.x_shift, self.y_shift, self.info = p.x_shift, p.y_shift, p.info
        self.jb = job_for(recipe_name, p, x.shape[1])
        fl, fr = fallback_factors or (bx, by)
        self.cert = certify.certificate(
            p.px,
            p.py,
            p.mset,
            nterms(self.jb),
            k=bx.shape[1],
            precision=precision,
            W=W,
            fallback=fallback,
            L=fl,
            R=fr,
            conj_l=conj_x,
            conj_r=(not conj_y) if recipe_name == "herk" else conj_y,
        )
        # the final pass unscales by 2^-(x_shift + final_y_shift)
        self.final_y_shift = self.y_shift
        if unscale:
            xp = namespace(out=out)
            ys = self.y_shift
            self.final_y_shift = xp.where(ys == scaling.DEAD, ys, ys + unscale).astype(np.int32)
        self.t0 = timer.add("scaling", t0)


def _run_gpu(routine, recipe_name, family, x, y, out, alpha, beta, *, devices, split, **kw):
    """A call on cupy arrays, queued on the current stream: (certificate counters, last-run record)."""
    from . import gpu_engine

    pr = _Prepared(routine, recipe_name, family, x, y, out, **kw)
    pr.timer.gpu_profile = PROFILE_GPU
    counters = gpu_engine.run(
        pr.jb,
        x,
        y,
        pr.x_shift,
        pr.y_shift,
        out,
        alpha,
        beta,
        conj_x=kw["conj_x"],
        conj_y=kw["conj_y"],
        uplo=kw["uplo"],
        timer=pr.timer,
        budget=_gpu_budget(x, y, out),
        devices=_resolve_devices(devices),
        split=split,
        cert=pr.cert,
        final_y_shift=pr.final_y_shift,
    )
    t = pr.timer
    info = {**pr.info, "phases": dict(t.phases), "gpu_plan": t.gpu_plan, "fallback": kw["fallback"], "graph": None}
    return counters, info


def _run_cpu(routine, recipe_name, family, x, y, out, alpha, beta, **kw):
    """A call on numpy arrays, through the C kernels; its verdict is reported at once."""
    pr = _Prepared(routine, recipe_name, family, x, y, out, **kw)
    x, y = _dead_rows_zeroed(x, y, pr.x_shift, pr.y_shift)  # the C kernels read NaN/Inf rows as zeros
    uplo, timer, jb = kw["uplo"], pr.timer, pr.jb
    state = cpu_stages.new_state((x.shape[0], y.shape[0]), jb.complex_out)
    stages = cpu_stages.CpuStages(
        x, y, pr.x_shift, pr.y_shift, conj_x=kw["conj_x"], conj_y=kw["conj_y"], uplo=uplo, timer=timer
    )
    pipeline.run(jb, stages, state, batch=cpu_stages.batch_for(x, y, out, jb))
    t0 = time.perf_counter()
    cpu_stages.finalize(state, jb, pr.x_shift, pr.final_y_shift, out, alpha, beta, uplo=uplo, cert=pr.cert)
    timer.add("crt", t0)
    _report(routine, pr.cert, pr.info, out.shape, uplo, kw["fallback"])
    _last.info = {**pr.info, "phases": dict(timer.phases)}


def _dead_rows_zeroed(x, y, x_shift, y_shift):
    """``x``, ``y`` with the rows the plan marked dead (NaN/Inf) set to zero (copies, only if any)."""

    def clean(f, shift):
        dead = shift == scaling.DEAD
        if not dead.any():
            return f
        f = f.copy()
        f[dead] = 0
        return f

    cx = clean(x, x_shift)
    return cx, (cx if y is x else clean(y, y_shift))


def _report(routine, cert, info, shape, uplo, fallback) -> None:
    """Record the certificate's verdict in ``last_run()`` and warn when entries failed it."""
    count = cert.get("uncertified", 0)
    info["uncertified"] = count
    info["fallback"] = fallback
    if count:
        certify.warn(routine, count, _entries(shape, uplo), info["moduli"], info["bits"], fallback)


def _entries(shape, uplo) -> int:
    """Output entries a call computes (one triangle for the rank-k routines)."""
    m, n = shape
    return m * n if not uplo else min(m, n) * (min(m, n) + 1) // 2


#: Record per-phase GPU times with CUDA events in ``last_run()["phases"]``
#: (reading them waits for the device, so it is off unless a benchmark asks).
PROFILE_GPU = False


#: Workspace every GPU call may use whatever its size (padding makes tiny problems' planes
#: larger than twice their operands).
GPU_MIN_WORKSPACE = 64 * 2**20


def _resolve_devices(devices):
    """The ``devices`` option as a list of GPU ids (None: the arrays' own device)."""
    if devices is None:
        return None
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    if devices == "all":
        return list(range(count))
    bad = [d for d in devices if d >= count]
    if bad:
        raise ValueError(f"ozaki2: devices={list(devices)} but only {count} GPU(s) are visible")
    return list(devices)


def _gpu_budget(x, y, out) -> int:
    """GPU workspace limit: twice the operands and output (at least GPU_MIN_WORKSPACE),
    and at most 60% of what the device and cupy's pool have free."""
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    free += cupy.get_default_memory_pool().free_bytes()
    wanted = max(2 * (x.nbytes + (0 if y is x else y.nbytes) + out.nbytes), GPU_MIN_WORKSPACE)
    return int(min(wanted, 0.6 * free))  # headroom: scaling temporaries, the allocator's rounding


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
    moduli, mode, fallback, devices, split, graphs
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
    if kind == "syrk" and not cplx:
        if x.shape[1] % 2:
            x = xp.concatenate([x, xp.zeros((x.shape[0], 1), x.dtype)], axis=1)
        _execute(
            "syrk",
            "syrk",
            Family("split", MAX_2M),
            x,
            x,
            c,
            alpha,
            beta,
            uplo=uplo,
            moduli=moduli,
            mode=mode,
            fallback=fallback,
            devices=devices,
            split=split,
            graphs=graphs,
        )
    elif kind == "syrk":
        if x.shape[1] % 2:
            x = xp.concatenate([x, xp.zeros((x.shape[0], 1), x.dtype)], axis=1)
        _execute(
            "syrk",
            "csyrk",
            Family("2m", MAX_2M),
            x,
            x,
            c,
            alpha,
            beta,
            uplo=uplo,
            moduli=moduli,
            mode=mode,
            fallback=fallback,
            devices=devices,
            split=split,
            graphs=graphs,
        )
    elif kind == "herk":
        _execute(
            "herk",
            "herk",
            Family("2m", MAX_2M),
            x,
            x,
            c,
            alpha,
            beta,
            conj_x=conj,
            conj_y=conj,
            uplo=uplo,
            moduli=moduli,
            mode=mode,
            fallback=fallback,
            devices=devices,
            split=split,
            graphs=graphs,
        )
    elif kind == "her2k":
        if conj:
            x, y = xp.conj(x), xp.conj(y)
        if alpha != alpha.real:
            # α X Yᴴ + conj(α) Y Xᴴ = |α| ((uX) Yᴴ + Y (uX)ᴴ) with u = α/|α|: a unit factor
            # keeps X's magnitude, so the shared row shifts lose nothing
            unit = alpha / abs(alpha)
            x, alpha = unit * x, abs(alpha)
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
            uplo=uplo,
            fallback_factors=orig,
            unscale=t,
            moduli=moduli,
            mode=mode,
            fallback=fallback,
            devices=devices,
            split=split,
            graphs=graphs,
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
            uplo=uplo,
            bounds_from=both,
            fallback_factors=orig,
            unscale=t,
            moduli=moduli,
            mode=mode,
            fallback=fallback,
            devices=devices,
            split=split,
            graphs=graphs,
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
    xp = namespace(x=x)
    ax, ay = xp.abs(x), xp.abs(y)
    mx = float(ax.max()) if ax.size else 0.0
    my = float(ay.max()) if ay.size else 0.0
    if mx == 0 or my == 0 or not (np.isfinite(mx) and np.isfinite(my)):
        return x, y, 0
    t = int(np.frexp(mx)[1] - np.frexp(my)[1])
    if abs(t) < 8:
        return x, y, 0
    info = np.finfo(y.real.dtype)
    smallest = float(ay[ay > 0].min())
    if np.frexp(my)[1] + t >= info.maxexp - 1 or np.frexp(smallest)[1] + t <= info.minexp:
        return x, y, 0
    if abs(t) > 1020:  # the gain 2^-t goes into alpha, which must keep its bits
        return x, y, 0
    # ldexp, not y·2.0**t: 2.0**t alone overflows float32 (and float64 past 1023) where y·2^t fits
    if y.dtype.kind == "c":
        scaled = xp.empty_like(y)
        scaled.real = xp.ldexp(y.real, t)
        scaled.imag = xp.ldexp(y.imag, t)
    else:
        scaled = xp.ldexp(y, t)
    return x, scaled, t
