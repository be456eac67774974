"""The Ozaki-II pipeline on cupy arrays: residues, cuBLAS int8 products, CRT terms, one final pass.

The recipes are those of :mod:`.engine` (the CPU pipeline); what differs is
where the int32 products go.  On the CPU each product is folded at once into
double-double accumulators; here each product is reduced to int8 *terms*
``(w1·X1 + w2·X2) mod m`` by ``oz_terms`` as soon as cuBLAS has produced it,
and a single ``oz_crt_final`` pass runs the same double-double sum over all
terms of all moduli in registers, in the CPU's term order, and writes
``alpha·C + beta·c``.  The results are the CPU backend's bit for bit.

Memory.  The workspace is the term planes (one byte per output entry per
term), the products of one modulus (int32) and the residue planes of a batch
of moduli.  It is kept within ``budget`` bytes by blocking over the output's
columns (the left factor's residues are then recomputed per block) and by
smaller batches of moduli; rank-k recipes that read a product transposed
compute the transposed block as a second product when blocked.  When even
the smallest plan does not fit, :class:`MemoryError` says how much it needs.

Streams.  Everything is queued on cupy's current stream; nothing here waits
for the device (constants are uploaded once and cached).
"""
from __future__ import annotations

import numpy as np

from .._kernels import ozaki_gpu as kg
from .engine import PLANES_PER_MODULUS, _factor
from .scaling import K_CHUNK

__all__ = ["run", "plan"]


class _Events:
    """Phase times from CUDA events (only when profiling: reading them synchronises)."""

    def __init__(self, timer):
        self.timer = timer
        self.on = getattr(timer, "gpu_profile", False)
        self.marks = []

    def mark(self, phase):
        if self.on:
            import cupy

            ev = cupy.cuda.Event()
            ev.record()
            self.marks.append((phase, ev))

    def finish(self):
        if not self.on or not self.marks:
            return
        import cupy

        self.marks[-1][1].synchronize()
        for (_, a), (phase, b) in zip(self.marks, self.marks[1:]):
            self.timer.phases[phase] = self.timer.phases.get(phase, 0.0) + cupy.cuda.get_elapsed_time(a, b) / 1e3


def _workspace(nterms, mr, nb, nprod, swap, kinds_pl, batch, kk, same_single, swap_sets):
    """Bytes of one block's workspace."""
    rp, bp, kp = kg.pad(mr), kg.pad(nb), kg.pad(kk)
    terms = nterms * rp * nb
    prods = nprod * (2 if swap else 1) * rp * bp * 4
    per_mod = kinds_pl * kp * (rp + (0 if same_single else bp) + (rp + bp if swap_sets else 0))
    return terms + prods + batch * per_mod


def plan(m, n, kk, nterms, nprod, pl, nmod, transposed, same, uplo, budget):
    """``(nb, batch)``: output columns per block and moduli per residue pass within ``budget``."""
    nb = n
    while True:
        blocked = nb < n
        swap = blocked and transposed
        mr = m  # a block's row range is at most all rows
        for batch in range(nmod, 0, -1):
            need = _workspace(nterms, mr, nb, nprod, swap, pl, batch, kk, same and not blocked, swap)
            if need <= budget:
                return nb, batch
        if nb <= kg.PAD:
            need = _workspace(nterms, mr, nb, nprod, swap, pl, 1, kk, False, swap)
            raise MemoryError(
                f"ozaki2 on the GPU: even {nb}-column blocks with one modulus per pass need"
                f" {need / 2**20:.2f} MiB of workspace, more than the {budget / 2**20:.2f} MiB allowed;"
                " use fewer moduli or the native backend")
        nb = max(kg.PAD, (nb // 2 + kg.PAD - 1) // kg.PAD * kg.PAD)


def _spec(rec, weights_l, m, s, swap, nprod):
    """The oz_terms spec (6 ints per term) of one modulus."""
    rows = []
    for t in rec.terms:
        w1 = _factor(t.f1, weights_l, m, s)
        src1, tr1 = (nprod + t.p1, 0) if (swap and t.t1) else (t.p1, int(t.t1))
        if t.p2 is None:
            src2, tr2, w2 = -1, 0, 0
        else:
            w2 = _factor(t.f2, weights_l, m, s)
            src2, tr2 = (nprod + t.p2, 0) if (swap and t.t2) else (t.p2, int(t.t2))
        rows.append((src1, tr1, w1, src2, tr2, w2))
    return tuple(v for r in rows for v in r)


def run(recipes, moduli, roots, mset, x, y, x_shift, y_shift, out, alpha, beta, *, conj_x=False, conj_y=False,
        uplo=0, timer, budget: int) -> None:
    """``out = alpha·(x·yᵀ) + beta·out`` (or the recipe's rank-k form) through the moduli."""
    import cupy

    ev = _Events(timer)
    m, n = x.shape[0], y.shape[0]
    same = y is x and y_shift is x_shift and conj_x == conj_y
    xs_d = cupy.asarray(np.asarray(x_shift, np.int32))
    ys_d = xs_d if same else cupy.asarray(np.asarray(y_shift, np.int32))
    split = recipes[0].planes in ("split", "split2m")
    kk = x.shape[1] // 2 if split else x.shape[1]
    kp = kg.pad(kk)
    chunks = list(range(0, kp, K_CHUNK))
    nmod = len(moduli)
    nprod = max(len(r.products) for r in recipes)
    pl = max(PLANES_PER_MODULUS[r.planes] for r in recipes)
    transposed = any(t.t1 or t.t2 for r in recipes for t in r.terms)

    # term order: modulus, k chunk, recipe term -- the CPU's accumulation order
    part, bhi, blo = [], [], []
    for l, rec in enumerate(recipes):
        for _ in chunks:
            for t in rec.terms:
                part.append(1 if t.part == "im" else 0)
                bhi.append(mset.big_hi[l])
                blo.append(mset.big_lo[l])
    nterms = len(part)
    if nterms > kg.MAX_TERMS:
        raise ValueError(f"ozaki2 on the GPU: k = {x.shape[1]} needs {nterms} CRT terms with {nmod} moduli,"
                         f" more than {kg.MAX_TERMS}; use fewer moduli or split k")
    key = (tuple(moduli), tuple(r.terms for r in recipes), len(chunks))
    part_d = kg.device_constants(("part",) + key, lambda: cupy.asarray(np.array(part, np.int8)))
    bhi_d = kg.device_constants(("bhi",) + key, lambda: cupy.asarray(np.array(bhi, np.float64)))
    blo_d = kg.device_constants(("blo",) + key, lambda: cupy.asarray(np.array(blo, np.float64)))

    nb, batch = plan(m, n, kk, nterms, nprod, pl, nmod, transposed, same, uplo, budget)
    ev.mark("crt")
    for j0 in range(0, n, nb):
        j1 = min(n, j0 + nb)
        blocked = nb < n
        r0, r1 = 0, m
        if blocked and uplo == 1:
            r1 = min(m, j1)
        elif blocked and uplo == 2:
            r0 = min(j0, m)
        mr, nbk = r1 - r0, j1 - j0
        if mr <= 0:
            continue
        swap = blocked and transposed
        rp, bp = kg.pad(mr), kg.pad(nbk)
        T = cupy.empty((nterms, nbk, rp), np.int8)  # padded rows: 4-byte accesses in the kernels
        ps = nbk * rp
        P = [cupy.empty((bp, rp), np.int32) for _ in range(nprod * (2 if swap else 1))]
        slot = 0
        start = 0
        while start < nmod:
            kind = recipes[start].planes
            stop = start + 1
            while stop < nmod and stop - start < batch and recipes[stop].planes == kind:
                stop += 1
            ms = list(moduli[start:stop])
            rs_ = [roots[i] or 0 for i in range(start, stop)]
            per = PLANES_PER_MODULUS[kind]

            def planes(f, sh, lo, hi, conj):
                return kg.residues(kind, f[lo:hi], sh[lo:hi], ms, rs_, conj)

            px = planes(x, xs_d, r0, r1, conj_x)
            py = px if (same and not blocked) else planes(y, ys_d, j0, j1, conj_y)
            if swap:
                px_b = py if same else planes(x, xs_d, j0, j1, conj_x)
                py_r = px if same else planes(y, ys_d, r0, r1, conj_y)
            ev.mark("residues")
            for jj, l in enumerate(range(start, stop)):
                rec, mod, s = recipes[l], moduli[l], roots[l] or 1
                spec = _spec(rec, mset.weights[l], mod, s, swap, nprod)
                spec_d = kg.device_constants(("spec", spec), lambda: cupy.asarray(np.array(spec, np.int32)))
                nt = len(rec.terms)
                for c0 in chunks:
                    ck = min(kp, c0 + K_CHUNK) - c0
                    for idx, (a, b) in enumerate(rec.products):
                        kg.gemm_tn(_plane(px, per * jj + a) + c0, _plane(py, per * jj + b) + c0, rp, bp, ck,
                                   px.shape[2], py.shape[2], P[idx], rp)
                        if swap:
                            kg.gemm_tn(_plane(py_r, per * jj + b) + c0, _plane(px_b, per * jj + a) + c0, rp, bp,
                                       ck, py_r.shape[2], px_b.shape[2], P[nprod + idx], rp)
                    ev.mark("gemm")
                    kg.terms(P, rp, mr, nbk, r0, j0, spec_d, nt, mod, T, slot, ps, rp, uplo,
                             any(spec[6 * t + 1] or spec[6 * t + 4] for t in range(nt)))
                    ev.mark("crt")
                    slot += nt
            del px, py
            start = stop
        kg.crt_final(T, nterms, ps, rp, part_d, bhi_d, blo_d, mset.P_hi, mset.P_lo, xs_d, ys_d, mr, nbk, r0, j0,
                     alpha, beta, out, uplo)
        ev.mark("crt")
        del T, P
    ev.finish()
    timer.gpu_plan = {"column_block": nb, "moduli_per_pass": batch, "terms": nterms}


def _plane(planes, idx: int) -> int:
    """Device address of plane ``idx`` of a (planes, rows, cols) int8 array."""
    return planes.data.ptr + idx * planes.shape[1] * planes.shape[2]
