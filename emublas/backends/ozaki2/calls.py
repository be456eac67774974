"""One ozaki2 call on its device: scaling and planning (shared), then the CPU or the GPU run.

:class:`Prepared` does what every call does before its products: the row statistics and
shifts, the bound product (accurate mode), the plan and job, the certificate.
:func:`run_cpu` and :func:`run_gpu` then drive the pipeline over the stages of the
arrays' device; :mod:`.routines` chooses between them (and the CUDA-graph replay,
:mod:`.graphs`) and records the call in ``last_run()``.
"""

from __future__ import annotations

import time

import numpy as np

from ..._arrays import is_cupy, namespace
from ..._kernels import cpu
from . import certify, cpu_stages, pipeline, scaling
from .planning import fixed_moduli, job_for, job_of, nterms, plan, precision_of

__all__ = ["Prepared", "run_cpu", "run_gpu", "entries", "gpu_budget", "resolve_devices", "PROFILE_GPU"]


class Prepared:
    """What a call's scaling and planning produced: the job, shifts, certificate, record.

    Parameters
    ----------
    routine, recipe_name : str
        The routine (for the record) and its recipe (:mod:`.recipes`).
    family : planning.Family
        Where the moduli come from.
    x, y : numpy.ndarray or cupy.ndarray
        The "rows × k" factors (``y`` may be ``x``).
    out : numpy.ndarray or cupy.ndarray
        The output (its dtype decides the precision).
    conj_x, conj_y, uplo, bounds_from, sides, fallback_factors, unscale
        As in :func:`.routines._execute`'s keywords of the same names.
    moduli, mode, fallback
        The ozaki2 options.

    Attributes
    ----------
    timer : pipeline.Timer
        Started before the scaling, which it has recorded.
    x_shift, y_shift, final_y_shift
        The row shifts of both factors and the column shifts of the final unscaling.
    info : dict
        The plan's part of the last-run record.
    jb : pipeline.Job
        The schedule.
    cert : dict
        The certificate's arrays (:func:`.certify.certificate`).
    """

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
        bits,
    ):
        self.timer = timer = pipeline.Timer()
        t0 = time.perf_counter()
        precision = precision_of(out.dtype)
        bx, by = bounds_from or (x, y)
        shared = bounds_from is not None or y is x  # rank-k: one set of rows (and shifts) for both sides
        complex_data = x.dtype.kind == "c"
        #: runs of residue planes made with the scaling, for the CPU's stages
        self.preset: dict = {}
        made = None
        if mode == "fast" and sides is None and bounds_from is None and not is_cupy(x):
            made = self._scaled_first_run(recipe_name, family, precision, x, y, out, moduli, conj_x, conj_y)
        row_plans = None
        if made is not None:  # fast mode on the CPU: one read of each factor (scaled_first_run)
            left, px, right, py, self.preset = made
            row_plans = (px, py)
        elif sides is not None:
            left, right = sides
        else:
            left = scaling.side(bx, bound=mode != "fast")
            right = left if by is bx else scaling.side(by, bound=mode != "fast")
        wrow = wcol = W = None
        if mode != "fast":
            wrow, wcol, W = scaling.bound_product(left, right, uplo=uplo)
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
            complex_data=complex_data,
            row_plans=row_plans,
            bits=bits,
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
            bits=bits,
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

    @staticmethod
    def _scaled_first_run(recipe_name, family, precision, x, y, out, moduli, conj_x, conj_y):
        """Fast mode on the CPU: the statistics, the row plans and the first run's residue
        planes from one read of each factor (:func:`.cpu_stages.scaled_first_run`); None
        where that run's planes are made in two steps."""
        ms, roots, mset = fixed_moduli(family, precision, moduli)
        jb = job_of(recipe_name, ms, roots, x.shape[1])
        return cpu_stages.scaled_first_run(
            jb,
            x,
            y,
            conj_x=conj_x,
            conj_y=conj_y,
            L=mset.L,
            slack=certify.slack(x.dtype.kind == "c"),
            batch=cpu_stages.batch_for(x, y, out, jb),
        )


def run_gpu(routine, recipe_name, family, x, y, out, alpha, beta, *, devices, split, **kw):
    """A call on cupy arrays, queued on the current stream.

    Parameters
    ----------
    routine, recipe_name, family, x, y, out, alpha, beta
        As for :class:`Prepared`, with the scalars of ``out = alpha·C + beta·out``.
    devices : list of int or None
        GPUs sharing the call (None: the arrays' own).
    split : {"auto", "moduli", "tiles"}
        How several GPUs share it.
    **kw
        :class:`Prepared`'s keywords.

    Returns
    -------
    counters : list
        The certificate's device counters, for :func:`.verdicts.defer`.
    info : dict
        The call's last-run record (``graph`` None: issued directly).
    """
    from . import gpu_engine

    pr = Prepared(routine, recipe_name, family, x, y, out, **kw)
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
        budget=gpu_budget(x, y, out),
        devices=resolve_devices(devices),
        split=split,
        cert=pr.cert,
        final_y_shift=pr.final_y_shift,
    )
    t = pr.timer
    info = {**pr.info, "phases": dict(t.phases), "gpu_plan": t.gpu_plan, "fallback": kw["fallback"], "graph": None}
    return counters, info


def run_cpu(routine, recipe_name, family, x, y, out, alpha, beta, **kw):
    """A call on numpy arrays, through the C kernels; its verdict is reported at once.

    Parameters
    ----------
    routine, recipe_name, family, x, y, out, alpha, beta
        As for :func:`run_gpu`.
    **kw
        :class:`Prepared`'s keywords.

    Returns
    -------
    dict
        The call's last-run record.
    """
    with cpu.held_pool():  # its kernels run back to back: keep the workers awake between them
        return _run_cpu(routine, recipe_name, family, x, y, out, alpha, beta, **kw)


def _run_cpu(routine, recipe_name, family, x, y, out, alpha, beta, **kw):
    pr = Prepared(routine, recipe_name, family, x, y, out, **kw)
    uplo, timer, jb = kw["uplo"], pr.timer, pr.jb
    batch = cpu_stages.batch_for(x, y, out, jb)
    if any(r not in pr.preset for r in pipeline.runs(jb, batch=batch)):  # a residue pass will read them
        x, y = dead_rows_zeroed(x, y, pr.x_shift, pr.y_shift)  # the C kernels read NaN/Inf rows as zeros
    state = cpu_stages.new_state((x.shape[0], y.shape[0]), jb.complex_out)
    stages = cpu_stages.CpuStages(
        x, y, pr.x_shift, pr.y_shift, conj_x=kw["conj_x"], conj_y=kw["conj_y"], uplo=uplo, timer=timer, preset=pr.preset
    )
    pipeline.run(jb, stages, state, batch=batch)
    t0 = time.perf_counter()
    cpu_stages.finalize(state, jb, pr.x_shift, pr.final_y_shift, out, alpha, beta, uplo=uplo, cert=pr.cert)
    timer.add("crt", t0)
    report(routine, pr.cert, pr.info, out.shape, uplo, kw["fallback"])
    return {**pr.info, "phases": dict(timer.phases)}


def dead_rows_zeroed(x, y, x_shift, y_shift):
    """``x``, ``y`` with the rows the plan marked dead (NaN/Inf) set to zero (copies, only if any).

    Parameters
    ----------
    x, y : numpy.ndarray
        The factors (``y`` may be ``x``).
    x_shift, y_shift : numpy.ndarray
        Their row shifts (``scaling.DEAD`` marks a dead row).

    Returns
    -------
    x, y : numpy.ndarray
        The factors, or cleaned copies (``y is x`` kept).
    """

    def clean(f, shift):
        dead = shift == scaling.DEAD
        if not dead.any():
            return f
        f = f.copy()
        f[dead] = 0
        return f

    cx = clean(x, x_shift)
    return cx, (cx if y is x else clean(y, y_shift))


def report(routine, cert, info, shape, uplo, fallback) -> None:
    """Record the certificate's verdict in the call's record and warn when entries failed it.

    Parameters
    ----------
    routine : str
        For the warning.
    cert : dict
        The certificate, with its ``uncertified`` count after the finalize.
    info : dict
        The record, updated in place (``uncertified``, ``fallback``).
    shape : tuple of int
        The output's shape.
    uplo : int
        0: all entries; 1, 2: one triangle.
    fallback : {"dot", "none"}
        What happened to uncertified entries.
    """
    count = cert.get("uncertified", 0)
    info["uncertified"] = count
    info["fallback"] = fallback
    if count:
        certify.warn(
            routine, count, entries(shape, uplo), info["moduli"], info["bits"], fallback, info["required_bits"]
        )


def entries(shape, uplo) -> int:
    """Output entries a call computes (one triangle for the rank-k routines).

    Parameters
    ----------
    shape : tuple of int
        The output's shape.
    uplo : int
        0: all entries; 1, 2: one triangle.

    Returns
    -------
    int
    """
    m, n = shape
    return m * n if not uplo else min(m, n) * (min(m, n) + 1) // 2


#: Record per-phase GPU times with CUDA events in ``last_run()["phases"]``
#: (reading them waits for the device, so it is off unless a benchmark asks).
PROFILE_GPU = False


#: Workspace every GPU call may use whatever its size (padding makes tiny problems' planes
#: larger than twice their operands).
GPU_MIN_WORKSPACE = 64 * 2**20


def resolve_devices(devices):
    """The ``devices`` option as a list of GPU ids (None: the arrays' own device).

    Parameters
    ----------
    devices : None, "all" or list of int
        The option.

    Returns
    -------
    list of int or None

    Raises
    ------
    ValueError
        An id of a GPU that is not visible.
    """
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


def gpu_budget(x, y, out) -> int:
    """GPU workspace limit: eight times the operands and output (at least GPU_MIN_WORKSPACE),
    and at most 60% of what the device and cupy's pool have free.

    The fused final pass keeps every modulus's int32 products, about four to six
    times the operands and output at 16–20 moduli (more when k is much smaller
    than m and n); where that does not fit, the term-plane path needs about twice them.

    Parameters
    ----------
    x, y, out : cupy.ndarray
        The call's factors and output.

    Returns
    -------
    int
        Bytes.
    """
    import cupy

    wanted = max(8 * (x.nbytes + (0 if y is x else y.nbytes) + out.nbytes), GPU_MIN_WORKSPACE)
    free, _ = cupy.cuda.runtime.memGetInfo()
    if wanted > 0.6 * free:  # only then count the pool's cached blocks (a walk of its free lists)
        free += cupy.get_default_memory_pool().free_bytes()
    return int(min(wanted, 0.6 * free))  # headroom: scaling temporaries, the allocator's rounding
