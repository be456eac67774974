"""The GPU workspace of one Ozaki-II call: output columns per block, moduli per residue
pass, and whether the int32 products stay resident for the fused final pass.

Pure arithmetic on the shapes (no device is touched), cached per shape: the engine
asks once per call, and the CPU tests check the choices.
"""

from __future__ import annotations

from functools import lru_cache

from . import kernels_gpu as kg
from . import pipeline

__all__ = ["workspace_plan", "fused_products"]


def _workspace(nterms, mr, nb, nprod, swap, pl, batch, kk, same_single):
    """Bytes of one block's workspace: term planes, int32 products, residue planes of a batch."""
    rp, bp, kp = kg.pad(mr), kg.pad(nb), kg.pad(kk)
    terms = nterms * rp * nb
    prods = nprod * (2 if swap else 1) * rp * bp * 4
    return terms + prods + batch * _planes_per_modulus(rp, bp, kp, pl, swap, same_single)


def _planes_per_modulus(rp, bp, kp, pl, swap, same_single):
    return pl * kp * (rp + (0 if same_single else bp) + (rp + bp if swap else 0))


def fused_products(jb: pipeline.Job) -> int:
    """int32 product planes the fused final pass reads: every modulus's, per k-chunk.

    Parameters
    ----------
    jb : pipeline.Job
        The schedule.

    Returns
    -------
    int
        ``nmod · nchunks · nprod``.
    """
    return jb.nmod * jb.nchunks * jb.nprod


@lru_cache(maxsize=256)
def workspace_plan(m, n, kk, nterms, nprod, pl, nmod, transposed, same, budget, resident=0) -> tuple[int, int, bool]:
    """``(nb, batch, fused)``: output columns per block, moduli per residue pass and whether
    the products stay resident for the fused final pass, within ``budget`` bytes (blocking
    over columns recomputes the left factor's residues per block).

    ``resident`` is :func:`fused_products` of the job, or 0 where the fused pass does not
    apply (the moduli shared out over devices; transposed terms over several devices).
    It is chosen when the whole output and every modulus in one residue pass fit: it
    saves writing and reading the int8 term planes, and several residue passes would
    cost more than that saves.  Rank-k terms that read a product transposed then find
    it in the same resident block (the whole square output), so they fuse too.
    """
    if resident:
        rp, bp, kp = kg.pad(m), kg.pad(n), kg.pad(kk)
        if resident * rp * bp * 4 + nmod * _planes_per_modulus(rp, bp, kp, pl, False, same) <= budget:
            return n, nmod, True
    nb = n
    while True:
        swap = nb < n and transposed
        for batch in range(nmod, 0, -1):
            if _workspace(nterms, m, nb, nprod, swap, pl, batch, kk, same and nb == n) <= budget:
                return nb, batch, False
        if nb <= kg.PAD:
            need = _workspace(nterms, m, nb, nprod, swap, pl, 1, kk, False)
            raise MemoryError(
                f"ozaki2 on the GPU: even {nb}-column blocks with one modulus per pass need"
                f" {need / 2**20:.2f} MiB of workspace, more than the {budget / 2**20:.2f} MiB allowed;"
                " use fewer moduli or the native backend"
            )
        nb = max(kg.PAD, (nb // 2 + kg.PAD - 1) // kg.PAD * kg.PAD)
