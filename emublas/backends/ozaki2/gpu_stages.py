"""The Ozaki-II stages on cupy arrays (CUDA kernels + cuBLAS int8): what :mod:`.pipeline` runs on a GPU.

On the CPU each int32 product is folded at once into the exact three-piece
CRT accumulators; here each product is reduced to int8 *terms*
``(w1·X1 + w2·X2) mod m`` (``oz_terms``) as soon as cuBLAS has produced it,
and one ``oz_crt_final`` pass runs the same exact three-piece sum over all
terms of all moduli in registers and the CPU's finalize, and writes
``alpha·C + beta·c``: the results are the CPU's bit for bit.

* :class:`GpuStages` -- one output block (rows ``[r0, r1)`` × columns
  ``[j0, j1)``) of a call on one device;
* the workspace's plan (column blocks, moduli per residue pass) is in
  :mod:`.gpu_workspace`;
* the stages cut for the Dask block tasks are in :mod:`.gpu_blocks`.

Everything is queued on cupy's current stream; nothing here waits for the
device (constants are uploaded once per job and device and cached).
"""

from __future__ import annotations

import numpy as np

from . import kernels_gpu as kg
from . import kernels_gpu_crt as kc
from . import pipeline
from .recipes import PLANES_PER_MODULUS

__all__ = [
    "GpuStages",
    "Events",
    "job_constants",
    "fused_table",
    "TRANSPOSED",
    "fused_constants",
    "spec",
    "final",
]


class Events:
    """Phase times from CUDA events (only when profiling: reading them synchronises).

    Parameters
    ----------
    timer : pipeline.Timer, optional
        Where :meth:`finish` adds the times; events are recorded only when it
        is given and its ``gpu_profile`` is set (otherwise every call is a no-op).
    """

    def __init__(self, timer=None):
        self.timer = timer
        self.on = timer is not None and timer.gpu_profile
        self.marks: list = []

    def mark(self, phase):
        """Record an event on the current stream: the work queued since the last mark is ``phase``'s.

        Parameters
        ----------
        phase : str
            The phase the interval ending here is charged to (``residues``,
            ``gemm``, ``crt``).
        """
        if self.on:
            import cupy

            ev = cupy.cuda.Event()
            ev.record()
            self.marks.append((phase, ev))

    def finish(self):
        """Wait for the last mark and add the intervals between marks to the timer's phases.

        Notes
        -----
        This synchronises with the device, hence only when profiling.
        """
        if not self.on or not self.marks:
            return
        import cupy

        self.marks[-1][1].synchronize()
        for (_, a), (phase, b) in zip(self.marks, self.marks[1:]):
            self.timer.phases[phase] = self.timer.phases.get(phase, 0.0) + cupy.cuda.get_elapsed_time(a, b) / 1e3


def spec(jb: pipeline.Job, l: int, swap: bool):
    """``(spec, transposed)``: the oz_terms spec of modulus l (6 ints per term) on the current
    device (cached), and whether a term reads a product transposed.  With ``swap`` a
    transposed read is a second product computed transposed (a column-blocked rank-k call).

    Parameters
    ----------
    jb : pipeline.Job
        The schedule.
    l : int
        The modulus.
    swap : bool
        Whether transposed reads come from the second set of products
        (indices ``nprod`` on) rather than transposing the first.

    Returns
    -------
    tuple of (cupy.ndarray, bool)
        The int32 spec, ``(src1, tr1, w1, src2, tr2, w2)`` per recipe term
        (``src2 = -1`` for one-product terms), and whether any term still reads
        a product transposed (then ``oz_terms`` runs its tiled kernel).
    """
    import cupy

    key = ("spec", l, swap, cupy.cuda.Device().id)
    got = jb.memo.get(key)
    if got is None:
        rows = []
        for _, p1, t1, w1, p2, t2, w2 in jb.terms[l]:
            src1, tr1 = (jb.nprod + p1, 0) if (swap and t1) else (p1, int(t1))
            if p2 is None:
                src2, tr2, w2 = -1, 0, 0
            else:
                src2, tr2 = (jb.nprod + p2, 0) if (swap and t2) else (p2, int(t2))
            rows.append((src1, tr1, w1, src2, tr2, w2))
        flat = [v for r in rows for v in r]
        got = jb.memo[key] = (cupy.asarray(np.array(flat, np.int32)), any(r[1] or r[4] for r in rows))
    return got


def job_constants(jb: pipeline.Job):
    """The final pass's term table (part, CRT weight pieces) on the current device, cached per job.

    Parameters
    ----------
    jb : pipeline.Job
        The schedule whose ``part`` and ``crt.weights`` (per term slot, its modulus's) are uploaded.

    Returns
    -------
    tuple of cupy.ndarray
        ``(part, weights)``, per term slot: int8 (0 real, 1 imaginary) and the
        three float64 pieces of the CRT weight (``(nterms, 3)``, C order).
    """
    import cupy

    key = ("table", cupy.cuda.Device().id)
    got = jb.memo.get(key)
    if got is None:
        per_slot = np.repeat(jb.crt.weights, np.diff(jb.slot), axis=0)
        got = jb.memo[key] = (
            cupy.asarray(np.array(jb.part, np.int8)),
            cupy.asarray(np.ascontiguousarray(per_slot, np.float64)),
        )
    return got


#: Added to a fused term's second product where the term reads it transposed (bit 30).
TRANSPOSED = 1 << 30


def fused_table(jb: pipeline.Job) -> tuple[np.ndarray, np.ndarray]:
    """The fused final pass's term table and moduli (host arrays).

    Parameters
    ----------
    jb : pipeline.Job
        The schedule (a term may read its second product transposed: the rank-k
        recipes, for ``oz_crt_fused_tr``).

    Returns
    -------
    tuple of numpy.ndarray
        ``(spec, mods)``: int32 ``(nterms, 4)``, per term slot in the job's slot
        order ``(product 1, product 2 or -1, w1 + 2**16·w2, modulus)``, product 2
        with :data:`TRANSPOSED` added where the term reads it transposed, with
        products numbered ``(l·nchunks + c)·nprod + p`` as :meth:`GpuStages.products`
        stores them resident (``|w| < 2**15``: the kernel splits the third field
        as two int16); float64 ``(nmod, 3)``, per modulus ``(m, 1/m, bias)`` as
        :func:`.kernels_gpu_crt.terms` reduces with them.
    """
    rows = []
    for l in range(jb.nmod):
        for c in range(jb.nchunks):
            base = (l * jb.nchunks + c) * jb.nprod
            for _, p1, t1, w1, p2, t2, w2 in jb.terms[l]:
                if t1:
                    raise ValueError("the fused final pass reads only a term's second product transposed")
                second = -1 if p2 is None else (base + p2) | (TRANSPOSED if t2 else 0)
                rows.append((base + p1, second, (w1 & 0xFFFF) | (w2 << 16), l))
    mods = [(float(m), 1.0 / m, 0.5 / m if m % 2 == 0 else 0.0) for m in jb.moduli]
    return np.array(rows, np.int32).reshape(-1, 4), np.array(mods, np.float64).reshape(-1, 3)


def fused_constants(jb: pipeline.Job):
    """:func:`fused_table` on the current device, cached per job.

    Parameters
    ----------
    jb : pipeline.Job
        The schedule (no term may read a product transposed).

    Returns
    -------
    tuple
        ``(spec, mods)`` of :func:`fused_table` as cupy arrays, whether every
        term reads a single product (the kernel then keeps no second values),
        whether some term reads one transposed (``oz_crt_fused_tr``) and whether
        the terms come in pairs that read the same two products (2M's real and
        imaginary terms of a modulus: ``oz_crt_fused2`` loads them once a pair).
    """
    import cupy

    key = ("fused", cupy.cuda.Device().id)
    got = jb.memo.get(key)
    if got is None:
        spec, mods = fused_table(jb)
        single = bool((spec[:, 1] < 0).all())
        pairs = spec.reshape(-1, 2, 4) if len(spec) % 2 == 0 else None
        paired = bool(
            pairs is not None
            and not jb.transposed
            and (spec[:, 1] >= 0).all()
            and (pairs[:, 0, :2] == pairs[:, 1, :2]).all()
        )
        got = jb.memo[key] = (cupy.asarray(spec), cupy.asarray(mods), single, bool(jb.transposed), paired)
    return got


class GpuStages:
    """One output block's stages on one device.

    ``on``: the inputs there (``x``, ``y``, their shifts ``xs``, ``ys``); the block's term
    planes (the driver's state) are written from term slot ``slot0`` of the job on.  A column-blocked
    rank-k call (``swap``) computes the transposed products a term reads as products of
    their own (the block holds only its columns).

    Parameters
    ----------
    on : object
        The inputs on this device (``gpu_engine``'s per-device copy: ``x``,
        ``y`` cupy factors and their int32 device shifts ``xs``, ``ys``).
    r0, r1 : int
        The block's output rows ``[r0, r1)``.
    j0, j1 : int
        The block's output columns ``[j0, j1)``.
    blocked : bool
        Whether the output is split into column blocks (then the right factor's
        residues are those of the block's columns only).
    transposed : bool
        Whether the job has terms that read a product transposed (rank-k).
    same : bool
        Whether both factors are one array with one shift and conjugation
        (its residues are then computed once).
    conj_x, conj_y : bool
        Whether each factor is conjugated.
    uplo : int
        0: the whole output; 1 or 2: only its upper or lower triangle (rank-k),
        for the kernels that skip the other one.
    slot0 : int
        The job's term slot that the state's first plane holds (a device with a
        share of the moduli holds only their terms).
    events : Events, optional
        Phase marks (None: no profiling).
    resident : cupy.ndarray, optional
        int32 ``(fused_products(jb), cols_pad, rows_pad)``: where every product of
        the block stays for the fused :func:`final` (then :meth:`reduce` does nothing);
        None: one modulus's products at a time, reduced to term planes.
    """

    def __init__(
        self,
        on,
        r0,
        r1,
        j0,
        j1,
        *,
        blocked,
        transposed,
        same,
        conj_x,
        conj_y,
        uplo,
        slot0=0,
        events=None,
        resident=None,
    ):
        self.on, self.r0, self.r1, self.j0, self.j1 = on, r0, r1, j0, j1
        self.resident = resident
        self.blocked, self.same, self.conj_x, self.conj_y, self.uplo = blocked, same, conj_x, conj_y, uplo
        self.swap = blocked and transposed
        self.slot0, self.ev = slot0, events or Events()
        self.rp, self.bp = kg.pad(r1 - r0), kg.pad(j1 - j0)
        self.P: list = []  # one modulus's products (unless resident), allocated by the first products()

    def planes(self, jb: pipeline.Job, start: int, stop: int):
        """Residue planes of the block's rows of both factors for moduli ``[start, stop)``.

        Parameters
        ----------
        jb : pipeline.Job
            The schedule.
        start, stop : int
            A run of moduli sharing one plane kind (:func:`pipeline.runs`).

        Returns
        -------
        tuple
            ``(px, py, px_b, py_r)``: int8 cupy planes ``(PL·(stop - start),
            rows_pad, kk_pad)`` of ``x``'s rows ``[r0, r1)`` and ``y``'s rows
            ``[j0, j1)`` (``py`` is ``px`` for one factor, unblocked); with
            ``swap`` also ``x``'s rows ``[j0, j1)`` and ``y``'s rows ``[r0, r1)``,
            else None.
        """
        kind = jb.recipes[start].planes
        ms, rs = jb.moduli[start:stop], jb.roots[start:stop]
        on, r0, r1, j0, j1 = self.on, self.r0, self.r1, self.j0, self.j1

        def planes(f, sh, a, b, conj):
            return kg.residues(kind, f[a:b], sh[a:b], ms, rs, conj)

        px = planes(on.x, on.xs, r0, r1, self.conj_x)
        py = px if (self.same and not self.blocked) else planes(on.y, on.ys, j0, j1, self.conj_y)
        px_b = py_r = None
        if self.swap:
            px_b = py if self.same else planes(on.x, on.xs, j0, j1, self.conj_x)
            py_r = px if self.same else planes(on.y, on.ys, r0, r1, self.conj_y)
        self.ev.mark("residues")
        return px, py, px_b, py_r

    def products(self, planes, jb: pipeline.Job, j: int, l: int, c: int):
        """The recipe's int8 products of modulus l over k-chunk c (cuBLAS, int32 results).

        Parameters
        ----------
        planes : tuple
            What :meth:`planes` returned for the run holding modulus l.
        jb : pipeline.Job
            The schedule.
        j : int
            The modulus's place within that run (``l - start``).
        l : int
            The modulus.
        c : int
            The k-chunk.

        Returns
        -------
        list of cupy.ndarray
            int32 ``(cols_pad, rows_pad)`` arrays (column-major block products),
            ``nprod`` of them (twice that with ``swap``: the transposed ones
            after).  The buffers are the stage's own, overwritten by the next call.
        """
        px, py, px_b, py_r = planes
        resident = self.resident
        if not self.P and resident is None:
            import cupy

            self.P = [cupy.empty((self.bp, self.rp), np.int32) for _ in range(jb.nprod * (2 if self.swap else 1))]
        rec = jb.recipes[l]
        per = PLANES_PER_MODULUS[rec.planes]
        c0, c1 = jb.chunk(c, px.shape[2])
        ck = c1 - c0
        first = (l * jb.nchunks + c) * jb.nprod  # this modulus and chunk's first resident product
        for idx, (a, b) in enumerate(rec.products):
            if resident is not None:
                target, offset = resident, (first + idx) * self.bp * self.rp
            else:
                target, offset = self.P[idx], 0
            kg.gemm_tn(
                _plane(px, per * j + a) + c0,
                _plane(py, per * j + b) + c0,
                self.rp,
                self.bp,
                ck,
                px.shape[2],
                py.shape[2],
                target,
                self.rp,
                offset,
            )
            if self.swap:
                kg.gemm_tn(
                    _plane(py_r, per * j + b) + c0,
                    _plane(px_b, per * j + a) + c0,
                    self.rp,
                    self.bp,
                    ck,
                    py_r.shape[2],
                    px_b.shape[2],
                    self.P[jb.nprod + idx],
                    self.rp,
                )
        self.ev.mark("gemm")
        return self.P if resident is None else resident[first : first + jb.nprod]

    def run_products(self, T, planes, jb: pipeline.Job, start: int, stop: int) -> None:
        """The products (and reductions) of a run of moduli, in :func:`pipeline.run`'s place.

        Resident products of one recipe product and k-chunk lie at a constant stride over
        the run's moduli, as their planes do, so each such set is one strided-batched
        call where :func:`.kernels_gpu.gemm_tn_batched` takes it; otherwise (and for the
        term-plane path) each modulus's products are formed and reduced in the driver's order.

        Parameters
        ----------
        T : cupy.ndarray
            The block's term planes or resident products (the driver's state).
        planes : tuple
            What :meth:`planes` returned for the run.
        jb : pipeline.Job
            The schedule.
        start, stop : int
            The run's moduli.
        """
        if self.resident is not None and not self.swap and stop - start > 1:
            px, py = planes[0], planes[1]
            rec = jb.recipes[start]  # one plane kind, hence one recipe, per run
            per = PLANES_PER_MODULUS[rec.planes]
            plane = self.bp * self.rp
            left = []
            for c in range(jb.nchunks):
                c0, c1 = jb.chunk(c, px.shape[2])
                done = all(
                    kg.gemm_tn_batched(
                        _plane(px, a) + c0,
                        _plane(py, b) + c0,
                        self.rp,
                        self.bp,
                        c1 - c0,
                        px.shape[2],
                        py.shape[2],
                        self.resident,
                        self.rp,
                        ((start * jb.nchunks + c) * jb.nprod + idx) * plane,
                        stop - start,
                        per * px.shape[1] * px.shape[2],
                        per * py.shape[1] * py.shape[2],
                        jb.nchunks * jb.nprod * plane,
                    )
                    for idx, (a, b) in enumerate(rec.products)
                )  # all or none: the test does not depend on the product
                if not done:
                    left.append(c)
            self.ev.mark("gemm")
        else:
            left = list(range(jb.nchunks))
        for l in range(start, stop):
            for c in left:
                self.reduce(T, self.products(planes, jb, l - start, l, c), jb, l, c)

    def reduce(self, T, prods, jb: pipeline.Job, l: int, c: int) -> None:
        """Turn modulus l's products of k-chunk c into its int8 CRT term planes in ``T``.

        Parameters
        ----------
        T : cupy.ndarray
            The block's term planes, int8 ``(terms, cols, rows_pad)``, from term
            slot ``slot0`` on; written in place.
        prods : list of cupy.ndarray
            What :meth:`products` returned.
        jb : pipeline.Job
            The schedule.
        l : int
            The modulus.
        c : int
            The k-chunk.
        """
        if self.resident is not None:
            return  # the products stay where they are for the fused final pass
        spec_d, tr = spec(jb, l, self.swap)
        nt = len(jb.terms[l])
        mr, nbk = self.r1 - self.r0, self.j1 - self.j0
        kc.terms(
            prods,
            self.rp,
            mr,
            nbk,
            self.r0,
            self.j0,
            spec_d,
            nt,
            jb.moduli[l],
            T,
            jb.slot[l] - self.slot0 + c * nt,
            nbk * self.rp,
            self.rp,
            self.uplo,
            tr,
        )
        self.ev.mark("crt")


def final(jb: pipeline.Job, on, T, r0, r1, j0, j1, alpha, beta, out, uplo, out_j0=0, cert=None) -> None:
    """The one CRT pass over a block's term planes: ``out = alpha·C + beta·out``, certified.

    Parameters
    ----------
    jb : pipeline.Job
        The schedule.
    on : object
        The inputs on this device (its int32 device shifts ``xs`` of the rows
        and ``yf`` of the columns unscale the result).
    T : cupy.ndarray
        The block's int8 term planes ``(jb.nterms, j1 - j0, rows_pad)``, or its
        resident int32 products ``(fused_products(jb), cols_pad, rows_pad)``
        (:class:`GpuStages` ``resident``): then the fused pass reads them.
    r0, r1, j0, j1 : int
        The block: output rows ``[r0, r1)``, columns ``[j0, j1)``.
    alpha, beta : float or complex
        The scalars.
    out : cupy.ndarray
        The output (Fortran order), updated in place within the block.
    uplo : int
        0: the whole block; 1 or 2: only the entries in the upper or lower triangle.
    out_j0 : int
        The global column that ``out``'s first column holds (a device-local
        column block); 0 when ``out`` is the whole output.
    cert : dict, optional
        The certificate's arrays on this device, or None.
    """
    rp = kg.pad(r1 - r0)
    part, weights = job_constants(jb)
    fused = T.dtype == np.int32  # resident products (GpuStages ``resident``), not term planes
    kc.crt_final(
        T,
        jb.nterms,
        T.shape[1] * T.shape[2] if fused else (j1 - j0) * rp,
        rp,
        part,
        weights,
        jb.crt.consts,
        on.xs,
        on.yf,
        r1 - r0,
        j1 - j0,
        r0,
        j0,
        alpha,
        beta,
        out,
        uplo,
        out_j0,
        cert=cert,
        fused=_fused_args(jb) if fused else None,
    )


#: Whether a complex table of term pairs takes the pair-wise fused pass (``oz_crt_fused2``);
#: off, it takes ``oz_crt_fused`` term by term, with the same result (the tests compare them).
PAIRED_FINAL = True


def _fused_args(jb: pipeline.Job) -> tuple:
    spec, mods, single, transposed, paired = fused_constants(jb)
    return spec, mods, single, transposed, paired and PAIRED_FINAL


def _plane(planes, idx: int) -> int:
    """Device address of plane ``idx`` of a (planes, rows, cols) int8 array."""
    return planes.data.ptr + idx * planes.shape[1] * planes.shape[2]
