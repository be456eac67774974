"""The Ozaki-II driver: one loop over moduli and k-chunks, with stages per device.

A product ``C = X·Yᵀ`` of two "rows × k" factors (already scaled to integers
by their row shifts) runs as

1. residue planes of both factors for a *run* of moduli (consecutive moduli
   sharing one plane kind, at most ``batch`` of them);
2. per modulus and per k-chunk (at most ``K_CHUNK`` columns, so that int32
   sums stay exact), the recipe's int8 plane products;
3. each chunk's products *reduced* at once: folded into the exact three-piece
   CRT accumulators (CPU), or turned into int8 CRT term planes (GPU), in the order
   modulus, k-chunk, recipe term (the sums are exact, so the order only decides
   when each term is formed);
4. one final pass (the stage's ``finalize``) writes ``alpha·C + beta·c``.

What a device does at each step is its *stages* object (:mod:`.cpu_stages`,
:mod:`.gpu_stages`); this module owns the order, which is what makes the
results bit-identical between the CPU, the GPU, several GPUs and Dask blocks.
A stages object with a ``run_products(state, planes, job, start, stop)`` method
runs steps 2 and 3 of a whole run of moduli itself (the CPU's: one C call, in the
order above; the GPU's: one strided-batched product per recipe product and k-chunk
where that is faster, whose exact int32 results stay resident for the final pass,
so their order does not matter); :func:`run` calls it instead of the per-modulus loop.

The :class:`Job` is everything about a call that depends only on its recipe,
moduli and k: the per-term CRT factors, the term table of the GPU's final pass.
It is cached (:func:`job`), so a repeated call does no per-modulus Python
arithmetic.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from . import scaling
from .moduli import CrtSplit, ModulusSet, crt_split
from .recipes import PLANES_PER_MODULUS, SPLIT_KINDS, Recipe, factor

__all__ = ["Job", "job", "runs", "run", "reduce_group", "k_pieces", "run_plane", "Timer"]


@dataclass
class Timer:
    """Seconds spent per phase (reported by ``emublas.ozaki2.last_run()``).

    Attributes
    ----------
    phases : dict of str to float
        Seconds per phase: ``residues``, ``gemm``, ``crt`` and whatever else
        :meth:`add` is given (``scaling``).
    gpu_profile : bool
        Whether the GPU stages time their phases with CUDA events (reading
        them waits for the device, so off by default).
    gpu_plan : dict or None
        The GPU engine's plan of the call (column block, moduli per pass,
        devices, split); None on the CPU.
    """

    phases: dict = field(default_factory=lambda: {"residues": 0.0, "gemm": 0.0, "crt": 0.0})
    gpu_profile: bool = False
    gpu_plan: dict | None = None

    def add(self, phase: str, t0: float) -> float:
        """Add the time since ``t0`` to ``phase``.

        Parameters
        ----------
        phase : str
            The phase's name (a new one starts at zero).
        t0 : float
            The phase's start, from :func:`time.perf_counter`.

        Returns
        -------
        float
            Now (``time.perf_counter()``), the start of the next phase.
        """
        t1 = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + (t1 - t0)
        return t1


@dataclass(frozen=True)
class Job:
    """The schedule of one product: recipes, moduli and the constants the stages read.

    ``terms[l]``: per recipe term of modulus l, ``(part, p1, t1, w1, p2, t2, w2)``
    with the CRT factors ``w`` already reduced modulo the modulus (``p2`` None for
    one-product terms).  ``part``, ``slot`` and ``crt``: the term table of the
    final pass.  Made by :func:`job`, not directly.

    Attributes
    ----------
    recipes : tuple of Recipe
        The recipe of each modulus (all of one family).
    moduli : tuple of int
        The moduli, in CRT order.
    roots : tuple of int
        Per modulus a square root of −1 modulo it (2M moduli), or 0 where it has none.
    mset : ModulusSet
        The moduli's CRT constants.
    k : int
        Columns of the factors.
    kk : int
        Columns of the residue planes: ``k``, or ``k // 2`` for the split kinds.
    nchunks : int
        k-chunks per modulus (at least 1).
    k_chunk : int
        Columns per k-chunk (``scaling.K_CHUNK`` when the job was made), so
        that a chunk's int32 sums stay exact.
    terms : tuple of tuple
        Per modulus, its recipe terms ``(part, p1, t1, w1, p2, t2, w2)``: which
        products (``p``), read transposed or not (``t``), times which CRT
        factors (``w``, reduced modulo the modulus) make the term.
    part : tuple of int
        Per CRT term slot (modulus, k-chunk, recipe term): 0 real part, 1 imaginary.
    crt : CrtSplit
        The exact CRT sum's constants: each modulus's weight in three pieces, for
        the job's most terms per part (:func:`~.moduli.crt_split`).
    slot : tuple of int
        First term slot of each modulus, plus the total at the end.
    nprod : int
        The most int8 products any modulus's recipe forms.
    planes_per_modulus : int
        The most residue planes per factor any modulus's recipe needs.
    transposed : bool
        Whether some term reads a product transposed (rank-k recipes).
    complex_out : bool
        Whether the output is complex.
    memo : dict
        Per-job cache of derived device constants (keyed by device), not
        compared, hashed or pickled.
    """

    recipes: tuple[Recipe, ...]
    moduli: tuple[int, ...]
    roots: tuple[int, ...]  # 0 where a modulus has no square root of −1
    mset: ModulusSet
    k: int  # columns of the factors
    kk: int  # columns of the residue planes (k, or k/2 for the split kinds)
    nchunks: int
    k_chunk: int  # columns per k-chunk (``scaling.K_CHUNK`` when the job was made)
    terms: tuple[tuple, ...]
    part: tuple[int, ...]
    crt: CrtSplit
    slot: tuple[int, ...]
    nprod: int
    planes_per_modulus: int
    transposed: bool  # some term reads a product transposed (rank-k)
    complex_out: bool
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __reduce__(self):
        # rebuilt from its key where it lands (a Dask worker): its cache, not the sender's device constants
        return _job, (self.recipes, self.moduli, self.roots, self.k, self.k_chunk)

    @property
    def nmod(self) -> int:
        """The number of moduli."""
        return len(self.moduli)

    @property
    def nterms(self) -> int:
        """The number of CRT term slots over all moduli and k-chunks."""
        return len(self.part)

    def chunk(self, c: int, width: int | None = None) -> tuple[int, int]:
        """Columns ``[c0, c1)`` of k-chunk ``c`` within planes of ``width`` columns (default kk).

        Parameters
        ----------
        c : int
            The k-chunk, ``0 <= c < nchunks``.
        width : int, optional
            Columns of the planes (padded planes are wider than ``kk``); None: ``kk``.

        Returns
        -------
        tuple of int
            ``(c0, c1)``, ``c1`` clipped to ``width``.
        """
        width = self.kk if width is None else width
        c0 = c * self.k_chunk
        return c0, min(width, c0 + self.k_chunk)


def job(recipes: Sequence[Recipe], moduli: Sequence[int], roots: Sequence, k: int) -> Job:
    """The (cached) :class:`Job` of ``recipes`` (one per modulus) over ``moduli`` for
    factors of ``k`` columns.

    Parameters
    ----------
    recipes : sequence of Recipe
        One recipe per modulus (:mod:`.recipes`).
    moduli : sequence of int
        The moduli.
    roots : sequence of int or None
        Per modulus its square root of −1 (2M moduli); None or 0 where it has none.
    k : int
        Columns of the factors (before a split kind halves them).

    Returns
    -------
    Job
        The schedule, shared by every call with the same arguments and k-chunk
        (its ``memo`` keeps the device constants between calls).
    """
    return _job(
        tuple(recipes), tuple(int(m) for m in moduli), tuple(int(r or 0) for r in roots), int(k), scaling.K_CHUNK
    )


@lru_cache(maxsize=512)
def _job(recipes, moduli, roots, k, k_chunk) -> Job:
    mset = ModulusSet.from_moduli(moduli)
    kk = k // 2 if recipes[0].planes in SPLIT_KINDS else k
    nchunks = max(1, -(-kk // k_chunk))
    terms: list = []
    part: list[int] = []
    slot: list[int] = []
    for l, rec in enumerate(recipes):
        m, s, wl = moduli[l], roots[l] or 1, mset.weights[l]
        terms.append(
            tuple(
                (t.part, t.p1, t.t1, factor(t.f1, wl, m, s), t.p2, t.t2, 0 if t.p2 is None else factor(t.f2, wl, m, s))
                for t in rec.terms
            )
        )
        slot.append(len(part))
        for _ in range(nchunks):
            for t in rec.terms:
                part.append(1 if t.part == "im" else 0)
    slot.append(len(part))
    per_part = sum(max(sum(t.part == p for t in r.terms) for p in ("re", "im")) for r in recipes) * nchunks
    return Job(
        recipes,
        moduli,
        roots,
        mset,
        k,
        kk,
        nchunks,
        k_chunk,
        tuple(terms),
        tuple(part),
        crt_split(mset, per_part),
        tuple(slot),
        max(len(r.products) for r in recipes),
        max(PLANES_PER_MODULUS[r.planes] for r in recipes),
        any(t.t1 or t.t2 for r in recipes for t in r.terms),
        recipes[0].complex_out,
    )


def runs(jb: Job, lo: int = 0, hi: int | None = None, batch: int | None = None):
    """``(start, stop)``: consecutive moduli of ``[lo, hi)`` sharing one plane kind, at most
    ``batch`` of them (one residue pass each).

    Parameters
    ----------
    jb : Job
        The schedule.
    lo, hi : int
        The moduli to cover (``hi`` None: all of them from ``lo`` on).
    batch : int, optional
        The most moduli per run (a GPU's memory budget); None: no limit.

    Yields
    ------
    tuple of int
        ``(start, stop)`` of each run, in order, covering ``[lo, hi)``.
    """
    hi = jb.nmod if hi is None else hi
    batch = batch or jb.nmod
    start = lo
    while start < hi:
        kind = jb.recipes[start].planes
        stop = start + 1
        while stop < hi and stop - start < batch and jb.recipes[stop].planes == kind:
            stop += 1
        yield start, stop
        start = stop


def k_pieces(k0: int, width: int) -> list[tuple[int, int, int]]:
    """``(c, start, stop)``: the local columns of a k-block at global offset ``k0`` that
    fall into the driver's k-chunk ``c`` (the Dask blocks sum their products per chunk).

    Parameters
    ----------
    k0 : int
        Global index of the block's first column.
    width : int
        Columns of the block.

    Returns
    -------
    list of tuple of int
        ``(c, start, stop)`` per k-chunk the block meets, with ``[start, stop)``
        local to the block; empty for an empty block.
    """
    if width == 0:
        return []
    K = scaling.K_CHUNK
    pieces = []
    for c in range(k0 // K, (k0 + width - 1) // K + 1):
        lo, hi = max(c * K, k0), min((c + 1) * K, k0 + width)
        pieces.append((c, lo - k0, hi - k0))
    return pieces


def run_plane(runs, l: int, kind: str, idx: int):
    """Plane ``idx`` of modulus l in a block's residue runs ``[(start, stop, planes)]``.

    Parameters
    ----------
    runs : iterable of (int, int, array)
        Residue runs: moduli ``[start, stop)`` and their planes stacked on axis 0
        (numpy or cupy, ``PLANES_PER_MODULUS[kind]`` per modulus).
    l : int
        The modulus.
    kind : str
        Its plane kind (the recipe's ``planes``).
    idx : int
        The plane within the modulus.

    Returns
    -------
    array
        The 2-D plane, a view into its run's array.

    Raises
    ------
    IndexError
        When no run holds modulus ``l``.
    """
    per = PLANES_PER_MODULUS[kind]
    for start, stop, arr in runs:
        if start <= l < stop:
            return arr[per * (l - start) + idx]
    raise IndexError(l)


def run(jb: Job, stages, state, *, lo: int = 0, hi: int | None = None, batch: int | None = None) -> None:
    """Moduli ``[lo, hi)`` of the product through ``stages`` into ``state``: residues per
    run of moduli, then per modulus and k-chunk the int8 products, reduced at once.

    Parameters
    ----------
    jb : Job
        The schedule.
    stages : object
        The device's stages: ``planes(jb, start, stop)``, ``products(planes, jb,
        j, l, c)`` and ``reduce(state, products, jb, l, c)``, or
        ``run_products(state, planes, jb, start, stop)`` in place of the last two
        (``j = l - start``: the modulus's place in its run's planes).
    state : object
        What the reductions write into (CPU: the three-piece accumulators; GPU:
        int8 term planes), updated in place.
    lo, hi : int
        The moduli to run (``hi`` None: all from ``lo`` on).
    batch : int, optional
        The most moduli per residue pass; None: no limit.
    """
    fused = getattr(stages, "run_products", None)  # the whole run in one call, in this order
    for start, stop in runs(jb, lo, hi, batch):
        planes = stages.planes(jb, start, stop)
        if fused is not None:
            fused(state, planes, jb, start, stop)
        else:
            for l in range(start, stop):
                for c in range(jb.nchunks):
                    stages.reduce(state, stages.products(planes, jb, l - start, l, c), jb, l, c)
        del planes


def reduce_group(jb: Job, stages, state, products, lo: int, hi: int) -> None:
    """Reduce moduli ``[lo, hi)`` whose products were formed elsewhere (a Dask block:
    ``products[c][l - lo]``, summed over its k-blocks) in the driver's order.

    Parameters
    ----------
    jb : Job
        The schedule.
    stages : object
        Anything with the ``reduce(state, products, jb, l, c)`` stage.
    state : object
        What the reductions write into, updated in place.
    products : sequence
        ``products[c][l - lo]``: the int32 products of modulus l in k-chunk c.
    lo, hi : int
        The moduli to reduce.
    """
    for l in range(lo, hi):
        for c in range(jb.nchunks):
            stages.reduce(state, products[c][l - lo], jb, l, c)
