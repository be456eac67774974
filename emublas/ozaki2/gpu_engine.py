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
        self.on = timer is not None and getattr(timer, "gpu_profile", False)
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


def device_spec(rec, weights_l, m, s, swap, nprod):
    """``(spec, transposed)``: the oz_terms spec of one modulus as a device array (cached),
    and whether any of its terms reads a product transposed."""
    import cupy

    spec = _spec(rec, weights_l, m, s, swap, nprod)
    spec_d = kg.device_constants(("spec", spec), lambda: cupy.asarray(np.array(spec, np.int32)))
    return spec_d, any(spec[6 * t + 1] or spec[6 * t + 4] for t in range(len(rec.terms)))


def term_table(recipes, big_hi, big_lo, nchunks: int):
    """``(part, bhi, blo, slot)``: per CRT term in the engine's order (modulus, k-chunk,
    recipe term -- the CPU's accumulation order) its part (0 real, 1 imaginary) and its
    modulus's CRT weight (hi, lo); ``slot[l]``, the first term of modulus l (and the end)."""
    part, bhi, blo, slot = [], [], [], []
    for l, rec in enumerate(recipes):
        slot.append(len(part))
        for _ in range(nchunks):
            for t in rec.terms:
                part.append(1 if t.part == "im" else 0)
                bhi.append(big_hi[l])
                blo.append(big_lo[l])
    slot.append(len(part))
    return part, bhi, blo, slot


class _Problem:
    """Everything about one call that does not depend on the device."""

    def __init__(self, recipes, moduli, roots, mset, x, y, conj_x, conj_y, uplo, same):
        self.recipes, self.moduli, self.roots, self.mset = recipes, moduli, roots, mset
        self.conj_x, self.conj_y, self.uplo, self.same = conj_x, conj_y, uplo, same
        self.m, self.n = x.shape[0], y.shape[0]
        split = recipes[0].planes in ("split", "split2m")
        self.kk = x.shape[1] // 2 if split else x.shape[1]
        self.kp = kg.pad(self.kk)
        self.chunks = list(range(0, self.kp, K_CHUNK))
        self.nmod = len(moduli)
        self.nprod = max(len(r.products) for r in recipes)
        self.pl = max(PLANES_PER_MODULUS[r.planes] for r in recipes)
        self.transposed = any(t.t1 or t.t2 for r in recipes for t in r.terms)
        self.part, self.bhi, self.blo, self.slot = term_table(recipes, mset.big_hi, mset.big_lo, len(self.chunks))
        self.nterms = len(self.part)
        if self.nterms > kg.MAX_TERMS:
            raise ValueError(f"ozaki2 on the GPU: k = {x.shape[1]} needs {self.nterms} CRT terms with"
                             f" {self.nmod} moduli, more than {kg.MAX_TERMS}; use fewer moduli or split k")
        self.key = (tuple(moduli), tuple(r.terms for r in recipes), len(self.chunks))

    def rows_of(self, j0, j1, blocked):
        """Row range of an output column block (rank-k: only the triangle's rows)."""
        if blocked and self.uplo == 1:
            return 0, min(self.m, j1)
        if blocked and self.uplo == 2:
            return min(j0, self.m), self.m
        return 0, self.m


class _On:
    """The inputs and constants of a problem on one device (copied there when it is not theirs)."""

    def __init__(self, pb, device, x, y, x_shift, y_shift, home, cert=None, final_y_shift=None):
        import cupy

        self.device = device
        with cupy.cuda.Device(device):
            self.x = x if device == home else _to_device(x, device, home)
            self.y = self.x if (pb.same and y is x) else (y if device == home else _to_device(y, device, home))
            self.xs = _here(x_shift, np.int32, device, home)
            self.ys = self.xs if pb.same else _here(y_shift, np.int32, device, home)
            # the final pass's column shifts (syr2k/her2k fold their balancing into them)
            self.yf = self.ys if final_y_shift is None or final_y_shift is y_shift else _here(
                final_y_shift, np.int32, device, home)
            self.cert = None if cert is None else self._cert(cert, x, y, home)
            self.part = kg.device_constants(("part",) + pb.key, lambda: cupy.asarray(np.array(pb.part, np.int8)))
            self.bhi = kg.device_constants(("bhi",) + pb.key, lambda: cupy.asarray(np.array(pb.bhi, np.float64)))
            self.blo = kg.device_constants(("blo",) + pb.key, lambda: cupy.asarray(np.array(pb.blo, np.float64)))

    def _cert(self, cert, x, y, home):
        """The certificate's arrays on this device (W only at home: other devices get
        the column blocks they finalize, :meth:`cert_for`), with its own counter."""
        import cupy

        mine = {key: cert[key] for key in ("crt_err", "target", "fix", "conj_l", "conj_r")}
        for key, t in (("row_err", np.float64), ("col_err", np.float64), ("row_wsum", np.float64),
                       ("col_wsum", np.float64), ("row_budget", np.int32), ("col_budget", np.int32)):
            if key in cert:
                mine[key] = _here(cert[key], t, self.device, home)
        here = self.device == home

        def factor(f):
            if f is x:
                return self.x
            if f is y:
                return self.y
            return f if here else _to_device(f, self.device, home)

        mine["L"], mine["R"] = factor(cert["L"]), factor(cert["R"])
        self.W = cert["W"]
        mine["W"] = self.W if here else None
        mine["counter"] = cupy.zeros(1, np.uint64)
        return mine

    def cert_for(self, j0, j1, home):
        """The certificate for output columns [j0, j1) finalized here (W's block copied in)."""
        import cupy

        if self.cert is None or self.device == home or self.W is None:
            return self.cert
        with cupy.cuda.Device(home):
            block = cupy.asfortranarray(self.W[:, j0:j1])
        return {**self.cert, "W": _to_device(block, self.device, home)}


def _here(v, dtype, device, home):
    """A small per-row vector (host array, or device array on ``home``) on ``device``."""
    import cupy

    if isinstance(v, cupy.ndarray):
        v = v.astype(dtype, copy=False)
        return v if device == home else _to_device(cupy.ascontiguousarray(v), device, home)
    return cupy.asarray(np.ascontiguousarray(v, dtype))


_peers: set = set()


def _enable_peer(a: int, b: int) -> bool:
    """Let devices a and b read each other's memory directly (NVLink/PCIe P2P), once per pair.

    Without it a peer copy may be staged through host memory, ten times slower."""
    import cupy

    rt = cupy.cuda.runtime
    for src, dst in ((a, b), (b, a)):
        if (src, dst) in _peers:
            continue
        if not rt.deviceCanAccessPeer(src, dst):
            return False
        with cupy.cuda.Device(src):
            try:
                rt.deviceEnablePeerAccess(dst)
            except rt.CUDARuntimeError as exc:  # already enabled (by cupy or an earlier call)
                if "AlreadyEnabled" not in str(exc) and "already" not in str(exc).lower():
                    raise
        _peers.add((src, dst))
    return True


def _to_device(x, device, home):
    """A copy of cupy array ``x`` (on ``home``) on ``device``: peer copy (NVLink/PCIe P2P where the
    devices allow it, staged through the host otherwise), queued after ``home``'s pending work."""
    import cupy

    with cupy.cuda.Device(home):
        src = x if (x.flags.c_contiguous or x.flags.f_contiguous) else cupy.ascontiguousarray(x)
        ready = cupy.cuda.Event()
        ready.record()
    dst = cupy.empty(src.shape, src.dtype, order="C" if src.flags.c_contiguous else "F")
    stream = cupy.cuda.get_current_stream()
    stream.wait_event(ready)
    cupy.cuda.runtime.memcpyPeerAsync(dst.data.ptr, device, src.data.ptr, home, src.nbytes, stream.ptr)
    return dst


def _block_terms(pb, on, T, slot0, lo, hi, r0, r1, j0, j1, blocked, batch, ev):
    """Terms of moduli [lo, hi) for output rows [r0, r1) × columns [j0, j1) into T (planes from slot0)."""
    import cupy

    mr, nbk = r1 - r0, j1 - j0
    swap = blocked and pb.transposed
    rp, bp = kg.pad(mr), kg.pad(nbk)
    ps = nbk * rp
    P = [cupy.empty((bp, rp), np.int32) for _ in range(pb.nprod * (2 if swap else 1))]
    x, y, xs, ys = on.x, on.y, on.xs, on.ys
    start = lo
    while start < hi:
        kind = pb.recipes[start].planes
        stop = start + 1
        while stop < hi and stop - start < batch and pb.recipes[stop].planes == kind:
            stop += 1
        ms = list(pb.moduli[start:stop])
        rs_ = [pb.roots[i] or 0 for i in range(start, stop)]
        per = PLANES_PER_MODULUS[kind]

        def planes(f, sh, a, b, conj):
            return kg.residues(kind, f[a:b], sh[a:b], ms, rs_, conj)

        px = planes(x, xs, r0, r1, pb.conj_x)
        py = px if (pb.same and not blocked) else planes(y, ys, j0, j1, pb.conj_y)
        if swap:
            px_b = py if pb.same else planes(x, xs, j0, j1, pb.conj_x)
            py_r = px if pb.same else planes(y, ys, r0, r1, pb.conj_y)
        ev.mark("residues")
        for jj, l in enumerate(range(start, stop)):
            rec, mod, s = pb.recipes[l], pb.moduli[l], pb.roots[l] or 1
            spec_d, tr = device_spec(rec, pb.mset.weights[l], mod, s, swap, pb.nprod)
            nt = len(rec.terms)
            slot = pb.slot[l] - slot0
            for c0 in pb.chunks:
                ck = min(pb.kp, c0 + K_CHUNK) - c0
                for idx, (a, b) in enumerate(rec.products):
                    kg.gemm_tn(_plane(px, per * jj + a) + c0, _plane(py, per * jj + b) + c0, rp, bp, ck,
                               px.shape[2], py.shape[2], P[idx], rp)
                    if swap:
                        kg.gemm_tn(_plane(py_r, per * jj + b) + c0, _plane(px_b, per * jj + a) + c0, rp, bp, ck,
                                   py_r.shape[2], px_b.shape[2], P[pb.nprod + idx], rp)
                ev.mark("gemm")
                kg.terms(P, rp, mr, nbk, r0, j0, spec_d, nt, mod, T, slot, ps, rp, pb.uplo, tr)
                ev.mark("crt")
                slot += nt
        del px, py
        start = stop


def _final(pb, on, T, r0, r1, j0, j1, alpha, beta, out, out_j0=0, cert=None):
    rp = kg.pad(r1 - r0)
    kg.crt_final(T, pb.nterms, (j1 - j0) * rp, rp, on.part, on.bhi, on.blo, pb.mset.P_hi, pb.mset.P_lo, on.xs,
                 on.yf, r1 - r0, j1 - j0, r0, j0, alpha, beta, out, pb.uplo, out_j0, cert=cert or on.cert)


def _peer_copy(dst, dst_dev, src, src_dev, nbytes, after):
    """Queue ``dst ← src`` (raw device addresses) on the current stream of ``dst_dev`` after event ``after``."""
    import cupy

    with cupy.cuda.Device(dst_dev):
        stream = cupy.cuda.get_current_stream()
        stream.wait_event(after)
        cupy.cuda.runtime.memcpyPeerAsync(dst, dst_dev, src, src_dev, nbytes, stream.ptr)


def _event():
    import cupy

    ev = cupy.cuda.Event()
    ev.record()
    return ev


def choose_split(pb, devices, itemsize_in, itemsize_out) -> str:
    """``moduli`` or ``tiles`` for several devices: the one that moves fewer bytes between
    devices (rank-k recipes that read a product transposed always split moduli: column
    tiles would double their GEMM work)."""
    d = len(devices)
    if pb.transposed or pb.nmod < d:
        return "moduli" if pb.nmod >= d else "tiles"
    inputs = (pb.m + pb.n) * pb.kk * itemsize_in * (d - 1)
    moduli = inputs + pb.nterms * pb.m * pb.n * (d - 1) / d
    tiles = (pb.m * pb.kk * itemsize_in * (d - 1) + pb.n * pb.kk * itemsize_in * (d - 1) / d
             + 2 * pb.m * pb.n * itemsize_out * (d - 1) / d)
    return "moduli" if moduli <= tiles else "tiles"


def run(recipes, moduli, roots, mset, x, y, x_shift, y_shift, out, alpha, beta, *, conj_x=False, conj_y=False,
        uplo=0, timer, budget: int, devices=None, split="auto", cert=None, final_y_shift=None) -> list:
    """``out = alpha·(x·yᵀ) + beta·out`` (or the recipe's rank-k form) through the moduli.

    ``devices``: GPU ids to spread the work over (None: the arrays' own device).
    The arrays live on the first; the others get copies of the inputs and either
    a share of the moduli (their int8 term planes are copied back for the one
    CRT pass) or a share of the output's column blocks (computed whole there and
    copied back), as ``split`` says (``auto``: :func:`choose_split`).  Every
    device computes exactly the terms one device would, so the result is
    bit-identical whatever the devices.

    ``cert``: the per-entry accuracy certificate (:mod:`.certify`), checked in
    the final pass.  Returns the certificate's device counters (one per device
    that finalized output), for the caller to read when they are ready.
    """
    import cupy

    ev = _Events(timer)
    home = out.device.id
    devices = [home] + [d for d in (devices or []) if d != home]
    same = y is x and y_shift is x_shift and conj_x == conj_y
    pb = _Problem(recipes, moduli, roots, mset, x, y, conj_x, conj_y, uplo, same)
    m, n = pb.m, pb.n
    if len(devices) > 1 and split == "auto":
        split = choose_split(pb, devices, x.itemsize, out.itemsize)
    if len(devices) == 1:
        split = "tiles"
    ndev = len(devices) if split == "tiles" else 1
    nb, batch = plan(m, -(-n // ndev) if ndev > 1 else n, pb.kk, pb.nterms, pb.nprod, pb.pl, pb.nmod,
                     pb.transposed, same, uplo, budget)
    if ndev > 1:
        nb = min(nb, -(-n // ndev))
    peer = all(_enable_peer(home, d) for d in devices[1:])
    ons = {home: _On(pb, home, x, y, x_shift, y_shift, home, cert, final_y_shift)}
    ev.mark("crt")
    blocks = [(j0, min(n, j0 + nb)) for j0 in range(0, n, nb)]
    blocked = nb < n
    if split == "moduli" and len(devices) > 1 and not blocked:
        _run_moduli_split(pb, devices, ons, x, y, x_shift, y_shift, home, batch, alpha, beta, out, ev)
    else:
        pending = []
        for b, (j0, j1) in enumerate(blocks):
            dev = devices[b % ndev] if ndev > 1 else home
            r0, r1 = pb.rows_of(j0, j1, blocked)
            if r1 <= r0:
                continue
            with cupy.cuda.Device(dev):
                on = ons.get(dev) or ons.setdefault(dev, _On(pb, dev, x, y, x_shift, y_shift, home, cert, final_y_shift))
                T = cupy.empty((pb.nterms, j1 - j0, kg.pad(r1 - r0)), np.int8)
                _block_terms(pb, on, T, 0, 0, pb.nmod, r0, r1, j0, j1, blocked, batch, ev)
                if dev == home:
                    _final(pb, on, T, r0, r1, j0, j1, alpha, beta, out)
                else:  # the column block computed on dev, starting from out's values there
                    local = cupy.empty((m, j1 - j0), out.dtype, order="F")
                    with cupy.cuda.Device(home):
                        src = cupy.asfortranarray(out[:, j0:j1])
                        ready = _event()
                    _peer_copy(local.data.ptr, dev, src.data.ptr, home, src.nbytes, ready)
                    _final(pb, on, T, r0, r1, j0, j1, alpha, beta, local, out_j0=j0, cert=on.cert_for(j0, j1, home))
                    pending.append((dev, local, j0, j1, _event(), src))
                ev.mark("crt")
                del T
        for dev, local, j0, j1, done, src in pending:
            with cupy.cuda.Device(home):
                _peer_copy(src.data.ptr, home, local.data.ptr, dev, local.nbytes, done)
                out[:, j0:j1] = src
    ev.finish()
    timer.gpu_plan = {"column_block": nb, "moduli_per_pass": batch, "terms": pb.nterms, "devices": devices,
                      "split": split if len(devices) > 1 else None, "peer_access": peer if len(devices) > 1 else None}
    return [(dev, on.cert["counter"]) for dev, on in ons.items() if on.cert is not None]


def _run_moduli_split(pb, devices, ons, x, y, x_shift, y_shift, home, batch, alpha, beta, out, ev):
    """Moduli shared out over the devices; their term planes come home for one CRT pass."""
    import cupy

    m, n = pb.m, pb.n
    rp = kg.pad(m)
    d = len(devices)
    share = [round(pb.nmod * i / d) for i in range(d + 1)]
    T = cupy.empty((pb.nterms, n, rp), np.int8)
    plane = n * rp
    copies = []
    # the other devices first, so that they work while home does its share
    for i in list(range(1, d)) + [0]:
        dev, lo, hi = devices[i], share[i], share[i + 1]
        if hi <= lo:
            continue
        with cupy.cuda.Device(dev):
            on = ons.get(dev) or ons.setdefault(dev, _On(pb, dev, x, y, x_shift, y_shift, home))
            if dev == home:
                _block_terms(pb, on, T, 0, lo, hi, 0, m, 0, n, False, batch, ev)
                continue
            local = cupy.empty((pb.slot[hi] - pb.slot[lo], n, rp), np.int8)
            _block_terms(pb, on, local, pb.slot[lo], lo, hi, 0, m, 0, n, False, batch, _Events(None))
            copies.append((dev, local, pb.slot[lo], _event()))
    for dev, local, first, done in copies:
        _peer_copy(T.data.ptr + first * plane, home, local.data.ptr, dev, local.nbytes, done)
    _final(pb, ons[home], T, 0, m, 0, n, alpha, beta, out)
    ev.mark("crt")
    del copies


def _plane(planes, idx: int) -> int:
    """Device address of plane ``idx`` of a (planes, rows, cols) int8 array."""
    return planes.data.ptr + idx * planes.shape[1] * planes.shape[2]
