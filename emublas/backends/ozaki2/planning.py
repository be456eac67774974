"""Ozaki-II planning: the moduli families, the choice of the moduli count, the row shifts.

A call's plan (:class:`Plan`) is its moduli, their CRT constants and the power-of-two
shifts of each row of both factors; :func:`job_for` turns it into the driver's cached
:class:`~.pipeline.Job`.  Pure host arithmetic on the factors' statistics (numpy or, for
the shifts on a GPU, the device kernels behind :mod:`.scaling`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import certify, pipeline, scaling
from . import recipes as recipe_table
from .moduli import HYBRID_EXTRA, MARGIN_BITS, REAL_MODULI, TWO_M_MODULI, TWO_M_ROOTS, ModulusSet

__all__ = [
    "MODES",
    "DEFAULT_MODULI",
    "Family",
    "Plan",
    "plan",
    "fixed_moduli",
    "job_for",
    "job_of",
    "nterms",
    "precision_of",
]

MODES = ("fast", "accurate", "auto")
#: Default moduli counts, per family and precision: enough for native accuracy
#: on ordinary data (real list: 16 → 125 bits; 2M list: 16 → 118, 17 → 124.5).
DEFAULT_MODULI = {("real", 53): 16, ("real", 24): 8, ("2m", 53): 16, ("2m", 24): 8, ("split", 53): 17, ("split", 24): 9}
MAX_REAL = len(REAL_MODULI)
MAX_2M = len(TWO_M_MODULI)
MAX_HYBRID = MAX_2M + len(HYBRID_EXTRA)


@dataclass
class Family:
    """A list of moduli a routine draws its first ``count`` from.

    Attributes
    ----------
    name : {"real", "2m", "split"}
        "real": the real moduli; "2m": the 2M moduli (complex data; hybrid moduli
        without a square root of −1 past the 2M list); "split": the 2M moduli for
        real rank-k calls.
    maximum : int
        The largest count the routine may use.
    """

    name: str
    maximum: int

    def modulus_list(self, count: int) -> tuple[list[int], list[int | None]]:
        """The first ``count`` moduli and, for the 2M lists, each one's square root of −1 (None if it has none).

        Parameters
        ----------
        count : int

        Returns
        -------
        moduli : list of int
        roots : list of int or None
        """
        if self.name == "real":
            return list(REAL_MODULI[:count]), [None] * count
        ms = list(TWO_M_MODULI[:count]) + list(HYBRID_EXTRA[: max(0, count - MAX_2M)])
        return ms, [TWO_M_ROOTS.get(m) for m in ms]

    def bits(self, count: int) -> float:
        """log2 of the product of the first ``count`` moduli.

        Parameters
        ----------
        count : int

        Returns
        -------
        float
        """
        return ModulusSet.from_moduli(self.modulus_list(count)[0]).bits

    def smallest_for(self, L: float) -> int | None:
        """The smallest count whose moduli reconstruct a product bound of 2^L, None if none up to the maximum.

        Parameters
        ----------
        L : float
            Bits needed.

        Returns
        -------
        int or None
        """
        for count in range(1, self.maximum + 1):
            if self.bits(count) - MARGIN_BITS >= L:
                return count
        return None


def precision_of(dtype) -> int:
    """Significand bits of a floating dtype: 53 for float64/complex128, 24 for float32/complex64.

    Parameters
    ----------
    dtype : numpy dtype or type

    Returns
    -------
    int
    """
    return 53 if np.dtype(dtype) in (np.float64, np.complex128) else 24


def fixed_moduli(family: Family, precision: int, moduli) -> tuple[list[int], list[int | None], ModulusSet]:
    """The moduli of a call whose count does not depend on its data (``fast`` and ``accurate`` modes).

    Parameters
    ----------
    family : Family
    precision : int
        Significand bits of the data (:func:`precision_of`).
    moduli : int or "default"
        The option.

    Returns
    -------
    moduli : list of int
    roots : list of int or None
    mset : ModulusSet

    Raises
    ------
    ValueError
        More moduli than the family has.
    """
    count, _, _ = _choose(family, precision, moduli, "accurate", None, None, None, None)
    ms, roots = family.modulus_list(count)
    return ms, roots, ModulusSet.from_moduli(ms)


def _choose(family: Family, precision: int, moduli, mode: str, left, right, g_r, g_c, bits=None):
    """``(count, L_exact, chose)``: the number of moduli; in auto mode picked from the
    estimate of :func:`~.scaling.needed_bits` (the only mode that computes it), for the data's
    precision, or for ``bits`` correct bits per entry where given.  The estimate sizes for an
    error of ``2^-(precision+1)·Σ|a||b|`` where the certificate allows ``k·2^-precision·Σ|a||b|``;
    ``bits`` keeps that margin of ``log2 k`` bits over its target ``2^-bits·Σ|a||b|``."""
    if mode == "auto":
        k = left.x.shape[1]
        sized = precision if bits is None else bits + math.ceil(math.log2(max(k, 1)))
        L_exact = scaling.needed_bits(left, right, g_r, g_c, sized)
        cap = family.maximum if moduli == "default" else min(int(moduli), family.maximum)
        count = family.smallest_for(L_exact)
        if count is None or count > cap:
            count = cap
        return count, L_exact, True
    count = DEFAULT_MODULI[(family.name, precision)] if moduli == "default" else int(moduli)
    if count > family.maximum:
        raise ValueError(f"ozaki2: at most {family.maximum} moduli here, got {count}")
    return count, None, False


def nterms(jb: pipeline.Job) -> int:
    """Accumulated CRT terms per part of the output (the reconstruction's error grows with it).

    Parameters
    ----------
    jb : pipeline.Job

    Returns
    -------
    int
        Terms summed into the real (or imaginary) part of each entry, over all k-chunks.
    """
    return jb.crt.nterms


@dataclass
class Plan:
    """The moduli and the row plans of one call (what the engine needs besides the data).

    Attributes
    ----------
    moduli : list of int
    roots : list of int or None
        The 2M square roots of −1 (None for real moduli).
    mset : ModulusSet
        Their CRT constants.
    px, py : scaling.RowPlan
        The plans of the left and right factor's rows (``py is px`` when both share rows).
    info : dict
        The part of ``last_run()`` fixed by the scaling.
    """

    moduli: list[int]
    roots: list[int | None]
    mset: ModulusSet
    px: scaling.RowPlan  # rows of the left factor
    py: scaling.RowPlan  # rows of the right factor (``px`` itself when both sides share rows)
    info: dict  # the part of last_run() fixed by the scaling

    @property
    def x_shift(self):
        """The left factor's row shifts (int32, on its device)."""
        return self.px.shift

    @property
    def y_shift(self):
        """The right factor's row shifts (int32, on its device)."""
        return self.py.shift


def plan(
    routine: str,
    family: Family,
    precision: int,
    left,
    right,
    wrow,
    wcol,
    *,
    moduli="default",
    mode="accurate",
    shared=False,
    complex_data=False,
    row_plans=None,
    bits=None,
) -> Plan:
    """Moduli count, moduli and row plans from the sides' statistics and, in accurate
    mode, the bound product's row and column maxima ``wrow``, ``wcol`` (None: fast mode).

    Shared by :func:`_execute` and the distributed path (:mod:`emublas.ozaki2.distributed`),
    which reduces the statistics and W over k-blocks exactly: the same inputs give the
    same plan, hence the same products.  Only ``auto`` mode reads anything on the host.

    Parameters
    ----------
    routine : str
        Named in the report (``last_run()["routine"]``).
    family : Family
    precision : int
        Significand bits of the data (:func:`precision_of`).
    left, right : scaling.Side
        Per-row statistics of the two factors.
    wrow, wcol : array or None
        Row and column maxima of the bound product W (None: fast mode).
    moduli : int or "default", optional
        The count, or the cap in auto mode.
    mode : {"fast", "accurate", "auto"}, optional
    shared : bool, optional
        Both factors are one (rank-k): one row plan.
    complex_data : bool, optional
        Widens the certificate's slack for complex products.
    row_plans : tuple of scaling.RowPlan, optional
        Both factors' row plans, already made with this plan's bound and slack (the CPU's
        fast mode makes them in the pass that makes the first residues); not with ``auto``.
    bits : int, optional
        Correct bits per entry the call is certified to (the ``bits`` option; None:
        native's bound): ``auto`` mode sizes the count for them.

    Returns
    -------
    Plan

    Raises
    ------
    ValueError
        ``bits`` above the data's precision.
    """
    if bits is not None and bits > precision:
        raise ValueError(f"ozaki2: bits={bits} is outside 1..{precision}, the significand bits of this call's data")
    g_r = g_c = None
    if mode == "auto":
        g_r, g_c = scaling.growth(left, wrow), scaling.growth(right, wcol)
    count, L_exact, chose = _choose(family, precision, moduli, mode, left, right, g_r, g_c, bits)
    ms, roots = family.modulus_list(count)
    mset = ModulusSet.from_moduli(ms)
    slack = certify.slack(complex_data)
    if row_plans is not None:
        px, py = row_plans
    else:
        px = scaling.row_plan(left, mset.L, slack, wrow)
        py = px if shared else scaling.row_plan(right, mset.L, slack, wcol)
    info = {
        "routine": routine,
        "moduli": count,
        "mode": mode,
        "auto_chose": chose,
        "bits": mset.bits,
        "needed_bits": None if L_exact is None else L_exact + MARGIN_BITS,
        "required_bits": bits,
    }
    return Plan(ms, roots, mset, px, py, info)


def job_for(recipe_name: str, p: Plan, k: int) -> pipeline.Job:
    """The driver's (cached) job for a plan: the recipe per modulus over factors of k columns.

    Parameters
    ----------
    recipe_name : str
        A key of :data:`.recipes.RECIPES` ("real", "2m", "herk", ...).
    p : Plan
    k : int
        Columns of the factors.

    Returns
    -------
    pipeline.Job
    """
    return job_of(recipe_name, p.moduli, p.roots, k)


def job_of(recipe_name: str, moduli, roots, k: int) -> pipeline.Job:
    """The driver's (cached) job for a recipe over given moduli and factors of k columns.

    Parameters
    ----------
    recipe_name : str
        A key of :data:`.recipes.RECIPES`.
    moduli : sequence of int
    roots : sequence of int or None
        As :meth:`Family.modulus_list` gives them.
    k : int

    Returns
    -------
    pipeline.Job
    """
    # keyed by small ints, so a repeated call does not hash the recipes again (pipeline.job's key)
    return _job_for(recipe_name, tuple(int(m) for m in moduli), tuple(roots), int(k), scaling.K_CHUNK)


@lru_cache(maxsize=512)
def _job_for(recipe_name: str, moduli: tuple, roots: tuple, k: int, k_chunk: int) -> pipeline.Job:
    # k_chunk is part of the key only: pipeline.job reads scaling.K_CHUNK itself
    return pipeline.job(recipe_table.for_moduli(recipe_name, list(roots)), moduli, roots, k)
