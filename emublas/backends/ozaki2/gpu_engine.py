"""Ozaki-II calls on cupy arrays: one device, or several GPUs of one host.

The work itself is :func:`emublas.ozaki2.pipeline.run` over the GPU's stages
(:mod:`.gpu_stages`); this module decides where it runs.  Memory: where every
product of every modulus fits within ``budget`` bytes beside one residue pass
(and no term reads a product transposed), the products stay resident and the
fused final pass reads them directly; otherwise the workspace (term planes, one
modulus's products, a batch's residue planes) is kept within ``budget`` by
blocking over the output's columns and by smaller batches of moduli
(:func:`~.gpu_workspace.workspace_plan`); when even the smallest plan does not
fit, :class:`MemoryError` says how much it needs.

Several devices: the arrays live on the first; the others get copies of the
inputs and either a share of the moduli (their int8 term planes come home for
the one CRT pass) or a share of the output's column blocks.  Every device
computes exactly the terms one device would, so the result is bit-identical.

Streams.  Everything is queued on cupy's current stream; nothing here waits
for the device.
"""

from __future__ import annotations

import numpy as np

from . import kernels_gpu as kg
from . import pipeline
from .gpu_stages import Events, GpuStages, final
from .gpu_workspace import fused_products, workspace_plan

__all__ = ["run", "FUSED_FINAL"]

#: Whether a call may keep its products resident for the fused final pass (where they
#: fit); False forces the term planes (benchmarks compare the two; results are identical).
FUSED_FINAL = True


class _Call:
    """The shape of one call (what the stages need besides the job)."""

    def __init__(self, jb, x, y, conj_x, conj_y, uplo, same):
        self.m, self.n = x.shape[0], y.shape[0]
        self.conj_x, self.conj_y, self.uplo, self.same = conj_x, conj_y, uplo, same
        if jb.nterms > kg.MAX_TERMS:
            raise ValueError(
                f"ozaki2 on the GPU: k = {x.shape[1]} needs {jb.nterms} CRT terms with"
                f" {jb.nmod} moduli, more than {kg.MAX_TERMS}; use fewer moduli or split k"
            )

    def rows_of(self, j0, j1, blocked):
        """Row range of an output column block (rank-k: only the triangle's rows)."""
        if blocked and self.uplo == 1:
            return 0, min(self.m, j1)
        if blocked and self.uplo == 2:
            return min(j0, self.m), self.m
        return 0, self.m

    def stages(self, jb, on, r0, r1, j0, j1, blocked, slot0=0, events=None, resident=None):
        return GpuStages(
            on,
            r0,
            r1,
            j0,
            j1,
            blocked=blocked,
            transposed=jb.transposed,
            same=self.same,
            conj_x=self.conj_x,
            conj_y=self.conj_y,
            uplo=self.uplo,
            slot0=slot0,
            events=events,
            resident=resident,
        )


class _On:
    """The inputs and constants of a problem on one device (copied there when it is not theirs)."""

    def __init__(self, call, device, x, y, x_shift, y_shift, home, cert=None, final_y_shift=None):
        import cupy

        self.device = device
        with cupy.cuda.Device(device):
            self.x = x if device == home else _to_device(x, device, home)
            self.y = self.x if (call.same and y is x) else (y if device == home else _to_device(y, device, home))
            self.xs = _here(x_shift, np.int32, device, home)
            self.ys = self.xs if call.same else _here(y_shift, np.int32, device, home)
            # the final pass's column shifts (syr2k/her2k fold their balancing into them)
            self.yf = (
                self.ys
                if final_y_shift is None or final_y_shift is y_shift
                else _here(final_y_shift, np.int32, device, home)
            )
            self.cert = None if cert is None else self._cert(cert, x, y, home)

    def _cert(self, cert, x, y, home):
        """The certificate's arrays on this device (W only at home: other devices get
        the column blocks they finalize, :meth:`cert_for`), with its own counter."""
        import cupy

        mine = {key: cert[key] for key in ("crt_err", "target", "fix", "conj_l", "conj_r")}
        for key, t in (
            ("row_err", np.float64),
            ("col_err", np.float64),
            ("row_wsum", np.float64),
            ("col_wsum", np.float64),
            ("row_budget", np.int32),
            ("col_budget", np.int32),
        ):
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


def choose_split(jb, call, devices, itemsize_in, itemsize_out) -> str:
    """``moduli`` or ``tiles`` for several devices: the one that moves fewer bytes between
    devices (rank-k recipes that read a product transposed always split moduli: column
    tiles would double their GEMM work)."""
    d = len(devices)
    m, n = call.m, call.n
    if jb.transposed or jb.nmod < d:
        return "moduli" if jb.nmod >= d else "tiles"
    inputs = (m + n) * jb.kk * itemsize_in * (d - 1)
    moduli = inputs + jb.nterms * m * n * (d - 1) / d
    tiles = (
        m * jb.kk * itemsize_in * (d - 1)
        + n * jb.kk * itemsize_in * (d - 1) / d
        + 2 * m * n * itemsize_out * (d - 1) / d
    )
    return "moduli" if moduli <= tiles else "tiles"


def run(
    jb: pipeline.Job,
    x,
    y,
    x_shift,
    y_shift,
    out,
    alpha,
    beta,
    *,
    conj_x=False,
    conj_y=False,
    uplo=0,
    timer,
    budget: int,
    devices=None,
    split="auto",
    cert=None,
    final_y_shift=None,
) -> list:
    """``out = alpha·(x·yᵀ) + beta·out`` (or the job's rank-k form) through the job's moduli.

    ``devices``: GPU ids to spread the work over (None: the arrays' own device);
    ``split``: ``moduli``, ``tiles`` or ``auto`` (:func:`choose_split`).  ``cert``:
    the per-entry accuracy certificate (:mod:`.certify`), checked in the final
    pass.  Returns the certificate's device counters (one per device that
    finalized output), for the caller to read when they are ready.

    Parameters
    ----------
    jb : pipeline.Job
        The schedule: recipes, moduli and k of the product.
    x, y : cupy.ndarray
        The "rows × k" factors (m × k and n × k, float32/float64/complex, any
        strides), unscaled, on ``out``'s device; ``y`` may be ``x`` itself (rank-k).
    x_shift, y_shift : numpy.ndarray or cupy.ndarray
        Per-row power-of-two shifts of ``x`` and ``y`` (int32 values;
        ``scaling.DEAD`` marks rows with NaN/Inf).
    out : cupy.ndarray
        The m × n Fortran-ordered output, updated in place; its device is "home".
    alpha, beta : float or complex
        The scalars of ``out = alpha·C + beta·out``.
    conj_x, conj_y : bool
        Whether each factor is conjugated.
    uplo : int
        0: the whole output; 1: only its upper triangle; 2: only its lower one.
    timer : pipeline.Timer
        Receives the plan (``gpu_plan``) and, with ``gpu_profile``, per-phase times.
    budget : int
        Bytes of workspace allowed per device.
    devices : list of int, optional
        GPU ids to share the call (home is always one of them); None: home only.
    split : {"auto", "moduli", "tiles"}
        How several devices share the work.
    cert : dict, optional
        The certificate's arrays (:func:`.certify.certificate`, on home), or None.
    final_y_shift : numpy.ndarray or cupy.ndarray, optional
        The column shifts of the final unscaling when they differ from
        ``y_shift`` (syr2k/her2k's balancing); None: ``y_shift``.

    Returns
    -------
    list of (int, cupy.ndarray)
        ``(device, one-element uint64 counter of uncertified entries)`` per
        device that finalized output; empty without ``cert``.

    Notes
    -----
    Queued on each device's current stream; only profiling (``timer.gpu_profile``)
    waits for the device.  Raises :class:`MemoryError` when even the smallest
    workspace plan exceeds ``budget``, :class:`ValueError` when k needs more
    CRT terms than the final pass holds (``kernels_gpu.MAX_TERMS``).
    """
    import cupy

    ev = Events(timer)
    home = out.device.id
    devices = [home] + [d for d in (devices or []) if d != home]
    same = y is x and y_shift is x_shift and conj_x == conj_y
    call = _Call(jb, x, y, conj_x, conj_y, uplo, same)
    m, n = call.m, call.n
    if len(devices) > 1 and split == "auto":
        split = choose_split(jb, call, devices, x.itemsize, out.itemsize)
    if len(devices) == 1:
        split = "tiles"
    ndev = len(devices) if split == "tiles" else 1
    moduli_split = split == "moduli" and len(devices) > 1
    nb, batch, fused = workspace_plan(
        m,
        -(-n // ndev) if ndev > 1 else n,
        jb.kk,
        jb.nterms,
        jb.nprod,
        jb.planes_per_modulus,
        jb.nmod,
        jb.transposed,
        same,
        budget,
        # transposed terms need the whole square output on one device (oz_crt_fused_tr);
        # oz_crt_fused holds at most FUSED_MAX_TERMS terms
        fused_products(jb)
        if FUSED_FINAL
        and not moduli_split
        and not (jb.transposed and ndev > 1)
        and (jb.transposed or jb.nterms <= kg.FUSED_MAX_TERMS)
        else 0,
    )
    if ndev > 1:
        nb = min(nb, -(-n // ndev))
    peer = all(_enable_peer(home, d) for d in devices[1:])
    ons = {home: _On(call, home, x, y, x_shift, y_shift, home, cert, final_y_shift)}
    ev.mark("crt")
    blocked = nb < n
    if moduli_split and not blocked:
        _run_moduli_split(jb, call, devices, ons, x, y, x_shift, y_shift, home, batch, alpha, beta, out, ev)
    else:
        pending = []
        for b, j0 in enumerate(range(0, n, nb)):
            j1 = min(n, j0 + nb)
            dev = devices[b % ndev] if ndev > 1 else home
            r0, r1 = call.rows_of(j0, j1, blocked)
            if r1 <= r0:
                continue
            with cupy.cuda.Device(dev):
                on = ons.get(dev) or ons.setdefault(
                    dev, _On(call, dev, x, y, x_shift, y_shift, home, cert, final_y_shift)
                )
                if fused:  # every product stays resident for the fused final pass
                    T = cupy.empty((fused_products(jb), kg.pad(j1 - j0), kg.pad(r1 - r0)), np.int32)
                    stages = call.stages(jb, on, r0, r1, j0, j1, blocked, events=ev, resident=T)
                else:  # one modulus's products at a time, reduced to int8 term planes
                    T = cupy.empty((jb.nterms, j1 - j0, kg.pad(r1 - r0)), np.int8)
                    stages = call.stages(jb, on, r0, r1, j0, j1, blocked, events=ev)
                pipeline.run(jb, stages, T, batch=batch)
                if dev == home:
                    final(jb, on, T, r0, r1, j0, j1, alpha, beta, out, uplo, cert=on.cert)
                else:  # the column block computed on dev, starting from out's values there
                    local = cupy.empty((m, j1 - j0), out.dtype, order="F")
                    with cupy.cuda.Device(home):
                        src = cupy.asfortranarray(out[:, j0:j1])
                        ready = _event()
                    _peer_copy(local.data.ptr, dev, src.data.ptr, home, src.nbytes, ready)
                    final(
                        jb, on, T, r0, r1, j0, j1, alpha, beta, local, uplo, out_j0=j0, cert=on.cert_for(j0, j1, home)
                    )
                    pending.append((dev, local, j0, j1, _event(), src))
                ev.mark("crt")
                del T
        for dev, local, j0, j1, done, src in pending:
            with cupy.cuda.Device(home):
                _peer_copy(src.data.ptr, home, local.data.ptr, dev, local.nbytes, done)
                out[:, j0:j1] = src
    ev.finish()
    timer.gpu_plan = {
        "column_block": nb,
        "moduli_per_pass": batch,
        "terms": jb.nterms,
        "fused_final": fused,
        "devices": devices,
        "split": split if len(devices) > 1 else None,
        "peer_access": peer if len(devices) > 1 else None,
    }
    return [(dev, on.cert["counter"]) for dev, on in ons.items() if on.cert is not None]


def _run_moduli_split(jb, call, devices, ons, x, y, x_shift, y_shift, home, batch, alpha, beta, out, ev):
    """Moduli shared out over the devices; their term planes come home for one CRT pass."""
    import cupy

    m, n = call.m, call.n
    rp = kg.pad(m)
    d = len(devices)
    share = [round(jb.nmod * i / d) for i in range(d + 1)]
    T = cupy.empty((jb.nterms, n, rp), np.int8)
    plane = n * rp
    copies = []
    # the other devices first, so that they work while home does its share
    for i in list(range(1, d)) + [0]:
        dev, lo, hi = devices[i], share[i], share[i + 1]
        if hi <= lo:
            continue
        with cupy.cuda.Device(dev):
            on = ons.get(dev) or ons.setdefault(dev, _On(call, dev, x, y, x_shift, y_shift, home))
            if dev == home:
                pipeline.run(jb, call.stages(jb, on, 0, m, 0, n, False, events=ev), T, lo=lo, hi=hi, batch=batch)
                continue
            local = cupy.empty((jb.slot[hi] - jb.slot[lo], n, rp), np.int8)
            pipeline.run(
                jb, call.stages(jb, on, 0, m, 0, n, False, slot0=jb.slot[lo]), local, lo=lo, hi=hi, batch=batch
            )
            copies.append((dev, local, jb.slot[lo], _event()))
    for dev, local, first, done in copies:
        _peer_copy(T.data.ptr + first * plane, home, local.data.ptr, dev, local.nbytes, done)
    final(jb, ons[home], T, 0, m, 0, n, alpha, beta, out, call.uplo, cert=ons[home].cert)
    ev.mark("crt")
    del copies
