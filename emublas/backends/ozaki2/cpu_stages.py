"""The Ozaki-II stages on numpy arrays (cffi C kernels): what :mod:`.pipeline` runs on the CPU.

* :class:`CpuStages` -- one call: residue planes of a run of moduli, then the
  int8 products of every modulus and k-chunk of the run, each folded at once
  into the exact three-piece CRT accumulators, in one C call (:meth:`CpuStages.run_products`,
  ``oz_run_products``: the driver's loop moved into C, with the arithmetic and
  order of ``i8gemm`` + ``oz_crt_accumulate`` per modulus, which the per-modulus
  :meth:`~CpuStages.products` and :meth:`~CpuStages.reduce` still do);
* :func:`finalize` -- ``alpha·C + beta·c`` from the accumulators, certified entry
  by entry (``oz_crt_finalize``);
* the same stages cut for the Dask block tasks are in :mod:`.cpu_blocks`.
"""

from __future__ import annotations

import time

import numpy as np

from ..._kernels import cpu
from . import kernels_cpu, kernels_crt, kernels_run, pipeline, scaling
from .recipes import PLANES_PER_MODULUS

__all__ = ["CpuStages", "new_state", "finalize", "residues", "scaled_first_run"]


def residues(kind: str, x, shift, moduli, roots, conj: bool, threads=None) -> np.ndarray:
    """Residue planes of one factor for a run of moduli: int8 array (planes·count, rows, kk).

    Parameters
    ----------
    kind : {"real", "2m", "split", "split2m", "3m"}
        The recipe's plane kind (:mod:`.recipes`): ``real`` one plane of a real
        factor; ``2m`` ``Xr ± s·Xi``; ``split`` ``P ± s·Q`` for the left and right
        column halves ``P``, ``Q`` of a real factor (``conj`` is not used);
        ``split2m`` that split applied to each of the two 2M planes; ``3m``
        ``Xr``, ``Xi``, ``Xr + Xi``.
    x : numpy.ndarray, shape (rows, k)
        The factor, rows × k (a right factor transposed), unscaled: float32 or
        float64 for ``real`` and ``split`` (``k`` even there), complex64 or
        complex128 otherwise (``k`` even for ``split2m``); finite.
    shift : numpy.ndarray or sequence of int, length rows
        Row ``i`` is taken as ``trunc(x[i] · 2**shift[i])``.
    moduli : sequence of int
        The run's moduli (2..256), one plane kind for all.
    roots : sequence of int
        Per modulus a square root of -1 modulo it (read by ``2m``, ``split`` and
        ``split2m``).
    conj : bool
        Take the residues of ``conj(x)`` (complex kinds but ``split``).
    threads : int, optional
        Default :func:`emublas._kernels.cpu.default_threads`.

    Returns
    -------
    numpy.ndarray, int8, shape (planes·len(moduli), rows, kk)
        ``planes`` = :data:`~.recipes.PLANES_PER_MODULUS` of ``kind`` (1, 2, 2, 4,
        3), consecutive per modulus; ``kk = k`` except ``k // 2`` for the split
        kinds.  Entries are symmetric residues.

    Raises
    ------
    ValueError
        An unknown ``kind``, or what the residue kernels raise (bad shapes or
        moduli, a non-finite scaled element).
    """
    rows, k = x.shape
    moduli, roots = tuple(moduli), tuple(roots)  # tuples: the kernels check them once, then reuse
    if kind == "real":
        return kernels_cpu.oz_residues(x, shift, 0, moduli, threads=threads)
    if kind == "2m":
        return kernels_cpu.oz_residues_cplx(x.real, x.imag, shift, 0, moduli, roots, conj=conj, threads=threads)
    if kind == "3m":
        return kernels_cpu.oz_residues_3m(x.real, x.imag, shift, 0, moduli, conj=conj, threads=threads)
    if kind == "split":
        h = k // 2
        return kernels_cpu.oz_residues_cplx(x[:, :h], x[:, h:], shift, 0, moduli, roots, threads=threads)
    if kind == "split2m":
        two = kernels_cpu.oz_residues_cplx(x.real, x.imag, shift, 0, moduli, roots, conj=conj, threads=threads)
        h = k // 2
        out = np.empty((4 * len(moduli), rows, h), np.int8)
        for l, (m, s) in enumerate(zip(moduli, roots)):
            for half in range(2):
                y = two[2 * l + half].astype(np.int32)
                p, q = y[:, :h], y[:, h:] * s
                for sign, slot in ((1, 0), (-1, 1)):
                    r = (p + sign * q) % m
                    r[r > (m - 1) // 2] -= m
                    out[4 * l + 2 * half + slot] = r
        return out
    raise ValueError(kind)


def scaled_first_run(jb: pipeline.Job, x, y, *, conj_x: bool, conj_y: bool, L: float, slack: float, batch: int):
    """Fast mode's scaling and its first run's residue planes in one read of each factor.

    A factor whose rows are contiguous (C-like) is read once (``oz_scaled_residues``); one
    whose rows run along the unit stride goes through the separate passes, which measured
    faster for that layout on a 2-vCPU AVX2 host (the residues of a block of 32–64 rows,
    stored per column, lose more than the second read costs).  The results are the same
    either way.

    Parameters
    ----------
    jb : pipeline.Job
        The call's schedule (its moduli fixed by the options, not by the data).
    x, y : numpy.ndarray
        The factors, rows × k, unscaled, NaN/Inf allowed (``y`` may be ``x``).
    conj_x, conj_y : bool
        Conjugation of each factor.
    L, slack : float
        The product bound's log2 and the certificate's slack.
    batch : int
        Moduli per residue pass (:func:`batch_for`).

    Returns
    -------
    tuple or None
        ``(side_x, plan_x, side_y, plan_y, preset)``: each factor's :class:`.scaling.Side`
        and :class:`.scaling.RowPlan` (the same objects for ``y is x``) and
        ``{(start, stop): (planes of x, planes of y)}`` for :class:`CpuStages`; None where
        the first run's plane kind is made in two steps (``split2m``).
    """
    start, stop = next(pipeline.runs(jb, batch=batch))
    kind = jb.recipes[start].planes
    if kind not in kernels_cpu.SCALED_KINDS:
        return None
    ms, rs = jb.moduli[start:stop], jb.roots[start:stop]

    def one(f, conj):
        if _rows_contiguous(f):
            stats, plan, planes = kernels_cpu.oz_scaled_residues(
                kind, f, ms, rs, conj=conj, L=L, safety=scaling.SAFETY, slack=slack
            )
            return scaling.Side(f, stats=stats), scaling.RowPlan(*plan), planes
        # rows along the unit stride: the separate passes (measured faster there, see the docs)
        side = scaling.Side(f)
        rp = scaling.row_plan(side, L, slack)
        return side, rp, residues(kind, dead_zeroed(f, rp.shift == scaling.DEAD), rp.shift, ms, rs, conj)

    sx, plx, px = one(x, conj_x)
    if y is not x:
        sy, ply, py = one(y, conj_y)
    else:
        sy, ply, py = sx, plx, px
        if conj_y != conj_x and kind in ("2m", "3m"):  # the other conjugate: a second residue pass
            py = residues(kind, dead_zeroed(x, plx.shift == scaling.DEAD), plx.shift, ms, rs, conj_y)
    return sx, plx, sy, ply, {(start, stop): (px, py)}


def _rows_contiguous(x: np.ndarray) -> bool:
    """Whether a row's elements are closer together than a column's (C-like): the layout
    where the one-read scaling pass measured no slower than the separate passes."""
    s0, s1 = (abs(v) for v in x.strides)
    return s1 < s0


def new_state(shape, complex_out: bool) -> dict:
    """Zeroed CRT accumulators for an output of ``shape``.

    Parameters
    ----------
    shape : tuple of (int, int)
        ``(rows of x, rows of y)``: the output's shape.
    complex_out : bool
        Whether the output has an imaginary part (the job's ``complex_out``).

    Returns
    -------
    dict
        ``re`` (and ``im`` with ``complex_out``): float64 zeros of ``shape + (3,)``
        in Fortran order, the three exact sums of each part's CRT terms
        (:func:`~.moduli.crt_split`); ``first_re``, ``first_im``: True, so that
        each part's first term overwrites its accumulators rather than adding to them.
    """
    parts = ("re", "im") if complex_out else ("re",)
    state: dict = {p: np.zeros((*shape, 3), order="F") for p in parts}
    state.update(first_re=True, first_im=True)
    return state


def accumulate(state: dict, prods, jb: pipeline.Job, l: int, uplo: int = 0, threads=None) -> None:
    """Fold modulus l's int32 products of one k-chunk into the accumulators, term by term."""
    m, big = jb.moduli[l], jb.crt.weights[l]
    for part, p1, t1, w1, p2, t2, w2 in jb.terms[l]:
        kw = {} if p2 is None else {"x2": prods[p2].T if t2 else prods[p2], "w2": w2}
        kernels_crt.oz_crt_accumulate(
            prods[p1].T if t1 else prods[p1],
            w1,
            m,
            big,
            state[part],
            first=state["first_" + part],
            uplo=uplo,
            threads=threads,
            **kw,
        )
        state["first_" + part] = False


class CpuStages:
    """The CPU's stages of one call ``x·yᵀ`` (``x``, ``y`` scaled by their row shifts
    inside the residue kernels; ``y is x`` and equal shifts share one set of planes).

    :func:`.pipeline.run` drives it: :meth:`planes` once per run of moduli, then
    :meth:`run_products` (one C call), or per modulus and k-chunk
    :meth:`products` and :meth:`reduce`.

    Parameters
    ----------
    x, y : numpy.ndarray, shape (mx, k) and (my, k)
        The two factors as rows × k (the right one transposed), unscaled, finite
        (rows holding NaN/Inf already zeroed); real or complex as the recipe's
        plane kind needs (see :func:`residues`).  ``y`` may be ``x``.
    x_shift, y_shift : numpy.ndarray of int32, lengths mx and my
        Per-row power-of-two scalings applied in the residue kernels.
    conj_x, conj_y : bool, default False
        Use the conjugate of a complex factor.
    uplo : int, default 0
        The accumulated entries: 0 all, 1 ``i <= j``, 2 ``i >= j``.
    threads : int, optional
        Threads of every kernel of the call; default
        :func:`emublas._kernels.cpu.default_threads` (read once here).
    timer : pipeline.Timer, optional
        Gets the seconds spent in the ``residues``, ``gemm`` and ``crt`` phases.
    preset : dict, optional
        ``{(start, stop): (planes of x, planes of y)}``: runs whose planes were made with
        the scaling (:func:`scaled_first_run`), used instead of a residue pass.
    """

    def __init__(
        self, x, y, x_shift, y_shift, *, conj_x=False, conj_y=False, uplo=0, threads=None, timer=None, preset=None
    ):
        self.x, self.y, self.xs, self.ys = x, y, x_shift, y_shift
        self.preset = dict(preset or {})
        self.conj_x, self.conj_y, self.uplo, self.timer = conj_x, conj_y, uplo, timer
        self.threads = cpu.threads_for(threads)  # once per call, not once per kernel
        self.same = y is x and y_shift is x_shift and conj_x == conj_y
        self.buf: list[np.ndarray] = []
        self.t0 = time.perf_counter()

    def _tick(self, phase: str) -> None:
        if self.timer is not None:
            self.t0 = self.timer.add(phase, self.t0)

    def planes(self, jb: pipeline.Job, start: int, stop: int):
        """Residue planes of both factors for moduli ``[start, stop)`` (one run: one plane kind).

        Parameters
        ----------
        jb : pipeline.Job
        start, stop : int
            The run's moduli.

        Returns
        -------
        px, py : numpy.ndarray, int8
            The planes of ``x`` and of ``y`` (:func:`residues`); ``py is px`` when
            both factors and their shifts and conjugation are the same.
        """
        made = self.preset.pop((start, stop), None)
        if made is not None:  # made with the scaling (scaled_first_run)
            return made
        kind = jb.recipes[start].planes
        ms, rs = jb.moduli[start:stop], jb.roots[start:stop]
        px = residues(kind, self.x, self.xs, ms, rs, self.conj_x, self.threads)
        py = px if self.same else residues(kind, self.y, self.ys, ms, rs, self.conj_y, self.threads)
        self._tick("residues")
        return px, py

    def products(self, planes, jb: pipeline.Job, j: int, l: int, c: int) -> list[np.ndarray]:
        """The int8 products ``X_a·Y_bᵀ`` of modulus ``l`` over k-chunk ``c``, exact in int32.

        Parameters
        ----------
        planes : tuple of numpy.ndarray
            The run's planes ``(px, py)`` from :meth:`planes`.
        jb : pipeline.Job
        j : int
            The modulus's place in its run (``l - start``): its planes are
            ``per·j .. per·j + per - 1``.
        l : int
            The modulus (its recipe's plane pairs).
        c : int
            The k-chunk (columns :meth:`pipeline.Job.chunk`).

        Returns
        -------
        list of numpy.ndarray, int32, shape (mx, my), Fortran-ordered
            One per product of the recipe, in its order.  The buffers belong to
            this object and are overwritten by the next call.
        """
        px, py = planes
        rec = jb.recipes[l]
        per = PLANES_PER_MODULUS[rec.planes]
        c0, c1 = jb.chunk(c)
        while len(self.buf) < len(rec.products):
            self.buf.append(np.empty((px.shape[1], py.shape[1]), np.int32, order="F"))
        for idx, (a, b) in enumerate(rec.products):
            cpu.i8gemm(px[per * j + a][:, c0:c1], py[per * j + b][:, c0:c1].T, out=self.buf[idx], threads=self.threads)
        self._tick("gemm")
        return self.buf

    def reduce(self, state: dict, prods, jb: pipeline.Job, l: int, c: int) -> None:
        """Fold modulus ``l``'s products of one k-chunk into the accumulators, term by term.

        Parameters
        ----------
        state : dict
            The accumulators of :func:`new_state`, updated in place.
        prods : list of numpy.ndarray
            The int32 products from :meth:`products`.
        jb : pipeline.Job
        l : int
            The modulus (its CRT terms and constants).
        c : int
            The k-chunk (not needed here: every chunk folds the same way).
        """
        accumulate(state, prods, jb, l, self.uplo, self.threads)
        self._tick("crt")

    def run_products(self, state: dict, planes, jb: pipeline.Job, start: int, stop: int) -> None:
        """Products and reductions of moduli ``[start, stop)`` (one run) in one C call.

        Parameters
        ----------
        state : dict
            The accumulators of :func:`new_state`, updated in place (with their
            ``first_re`` / ``first_im`` flags).
        planes : tuple of numpy.ndarray
            The run's residue planes of both factors (:meth:`planes`).
        jb : pipeline.Job
        start, stop : int
            The run's moduli.

        Notes
        -----
        The phase times come from the C loop: its products count as ``gemm``, the
        rest of the call as ``crt``.
        """
        px, py = planes
        first, (t_gemm, _) = kernels_run.oz_run_products(
            schedule(jb, start, stop),
            px,
            py,
            state["re"],
            im=state.get("im"),
            first=(state["first_re"], state["first_im"]),
            uplo=self.uplo,
            group=group_for(self.x, self.y, state["re"].nbytes // 3, jb),
            threads=self.threads,
        )
        state["first_re"], state["first_im"] = first
        if self.timer is not None:
            t1 = time.perf_counter()
            self.timer.phases["gemm"] = self.timer.phases.get("gemm", 0.0) + t_gemm
            self.timer.phases["crt"] = self.timer.phases.get("crt", 0.0) + (t1 - self.t0 - t_gemm)
            self.t0 = t1


def schedule(jb: pipeline.Job, start: int, stop: int) -> kernels_run.RunSchedule:
    """The C loop's schedule of moduli ``[start, stop)`` of ``jb`` (one run: one plane kind).

    Parameters
    ----------
    jb : pipeline.Job
    start, stop : int

    Returns
    -------
    kernels_run.RunSchedule
        Built once and kept in ``jb.memo`` under ``("cpu_schedule", start, stop)``:
        it depends only on the job (recipes, moduli, k, chunk width), which is the
        job's cache key, and on the run's bounds.
    """
    key = ("cpu_schedule", start, stop)
    sched = jb.memo.get(key)
    if sched is None:
        recs = jb.recipes[start:stop]
        sched = kernels_run.RunSchedule(
            PLANES_PER_MODULUS[recs[0].planes],
            jb.kk,
            jb.k_chunk,
            [r.products for r in recs],
            jb.terms[start:stop],
            jb.moduli[start:stop],
            jb.crt.weights[start:stop],
        )
        jb.memo[key] = sched
    return sched


def finalize(state: dict, jb: pipeline.Job, x_shift, y_shift, out, alpha, beta, *, uplo=0, cert=None) -> None:
    """``out = alpha·C + beta·out`` from the accumulators, certified entry by entry (``cert``).

    Parameters
    ----------
    state : dict
        The accumulators of :func:`new_state` after every modulus.
    jb : pipeline.Job
        Gives the CRT constants (``jb.crt``).
    x_shift, y_shift : numpy.ndarray of int32, lengths m and n
        Entry ``(i, j)`` is unscaled by ``2**-(x_shift[i] + y_shift[j])``.
    out : numpy.ndarray, shape (m, n)
        float32, float64, complex64 or complex128, written in place (its old
        values count only when ``beta`` is nonzero).
    alpha, beta : complex
        The BLAS scalars (imaginary parts ignored for a real ``out``).
    uplo : int, default 0
        The entries written: 0 all, 1 ``i <= j``, 2 ``i >= j``.
    cert : dict, optional
        The accuracy certificate of :func:`.kernels_crt.oz_crt_finalize`; its
        ``uncertified`` count is set on return.
    """
    kernels_crt.oz_crt_finalize(
        state["re"],
        jb.crt.consts,
        x_shift,
        y_shift,
        out,
        im=state.get("im"),
        alpha=alpha,
        beta=beta,
        uplo=uplo,
        cert=cert,
    )


#: Most moduli whose int32 products the C loop holds at once (:func:`group_for`).  Two
#: already cut the accumulation's passes over memory by half (n = 2048 dgemm: 69 -> 45 ms
#: measured in the C loop); four saved a little more (40 ms) for 48 MiB more.
GROUP = 2


def group_for(x, y, out_nbytes: int, jb: pipeline.Job) -> int:
    """Moduli whose products the C loop holds at once, their terms then folded in one
    pass over the accumulators: at most :data:`GROUP`, their buffers within the size of
    the inputs and the output (or one modulus's).

    Parameters
    ----------
    x, y : numpy.ndarray
        The factors.
    out_nbytes : int
        Bytes of the output (or of one accumulator, its equal or larger).
    jb : pipeline.Job

    Returns
    -------
    int
        At least 1.
    """
    one = 4 * jb.nprod * x.shape[0] * y.shape[0]
    size = x.nbytes + (0 if y is x else y.nbytes) + out_nbytes
    return int(max(1, min(GROUP, jb.nmod, size // max(one, 1))))


def batch_for(x, y, out, jb: pipeline.Job) -> int:
    """Moduli per residue pass so that extra memory stays within 3× the inputs and output."""
    budget = 3 * (x.nbytes + y.nbytes + out.nbytes)
    m, n = x.shape[0], y.shape[0]
    fixed = m * n * (8 * (6 if jb.complex_out else 3) + 4 * jb.nprod * group_for(x, y, 8 * m * n, jb))
    per = jb.planes_per_modulus * (x.size + (0 if y is x else y.size))
    return max(1, (budget - fixed) // max(per, 1))


def dead_zeroed(x: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """``x`` with the rows flagged ``dead`` (NaN/Inf somewhere in the row) set to zero
    (a copy, only if any): the C kernels would read them."""
    if not dead.any():
        return x
    x = x.copy()
    x[dead] = 0
    return x
