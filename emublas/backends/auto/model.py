"""The per-call choice of ``backend="auto"``: the accuracy model and the decision.

:func:`decide` keeps to the accuracy the caller asked for and to two rules that
bound the damage of a wrong prediction: a call is native when its smallest
dimension is below the measured threshold of its routine and prefix (the
smallest size from which some emulated backend beat native at every larger
measured size, so a single noisy point does not count), and an emulated backend
is chosen over native only where it is predicted at least :data:`MARGIN` faster.
The times come from a measured table (:mod:`.tables`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .tables import Table

__all__ = [
    "MARGIN",
    "PRECISION",
    "OZAKI2_NATIVE",
    "OZAKI2_SLACK_BITS",
    "STRASSEN_BITS_PER_LEVEL",
    "MODEL_ROUTINE",
    "Candidate",
    "Decision",
    "decide",
    "ozaki2_count_for_bits",
    "requirement_text",
]

#: An emulated backend must be predicted this much faster than native to be chosen
#: (the model's own error stays inside "never more than 5% slower than native").
MARGIN = 0.95
#: Significand bits per BLAS prefix.
PRECISION = {"s": 24, "d": 53, "c": 24, "z": 53}
#: ozaki2 default moduli counts, the counts its docs give for native accuracy on ordinary data.
OZAKI2_NATIVE = {"s": 8, "d": 16, "c": 8, "z": 16}
#: Extra product bits ozaki2 needs past 2·N + log2(k) for N correct bits per entry
#: (relative to sum|a||b|), so that its certificate (ozaki2's ``bits`` option) passes every
#: entry of ordinary data; an entry it cannot pass is recomputed, slower and with a warning.
#: Measured with ``benchmarks/bench_auto_bits.py --probe`` (phi = 0.5, k = 40 ... 4096, dgemm at
#: 7 and 11 moduli, zgemm at 7, slack in steps of 2 bits): every probe passed every entry at
#: 13.0 bits of slack or less; entries failed at up to 11.0 (zgemm, k = 40).  The actual errors need less
#: (about 10 bits past 2N + log2 k on BENCHMARKS.md's accuracy-against-moduli tables).
OZAKI2_SLACK_BITS = 13.0
#: Bits strassen may lose per level against the classical product, normwise: the Winograd
#: variant's bound grows about 4.5x per level relative to the classical bound (Higham,
#: Accuracy and Stability of Numerical Algorithms, 23.2.2); measured on this project's data
#: the error grew 2.3x, 2.6x, 1.9x, 1.9x per level (BENCHMARKS.md, strassen error growth).
STRASSEN_BITS_PER_LEVEL = math.log2(4.5)
#: Which measured routine predicts which call (syr2k/her2k: two products, same ratio as herk).
MODEL_ROUTINE = {
    "gemm": "gemm",
    "syrk": "herk",
    "herk": "herk",
    "syr2k": "herk",
    "her2k": "herk",
    "symm": "gemm",
    "hemm": "gemm",
    "trmm": "gemm",
    "trsm": "gemm",
}


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------


def ozaki2_count_for_bits(bits: int, k: int, complex_data: bool) -> int | None:
    """Smallest ozaki2 moduli count that reaches ``bits`` correct bits at depth ``k``.

    The product of the moduli (``ModulusSet.bits``; the 2M list for complex
    data) must cover ``2·bits + log2(k) + OZAKI2_SLACK_BITS``.

    Parameters
    ----------
    bits : int
        Required correct bits.
    k : int
        Inner dimension of the product.
    complex_data : bool
        Whether the 2M moduli list applies.

    Returns
    -------
    int or None
        None when no count does.
    """
    from ..ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, real_set, two_m_set

    need = 2.0 * bits + math.log2(max(k, 1)) + OZAKI2_SLACK_BITS
    make, top = (two_m_set, len(TWO_M_MODULI)) if complex_data else (real_set, len(REAL_MODULI))
    for count in range(1, top + 1):
        if make(count).bits >= need:
            return count
    return None


# ---------------------------------------------------------------------------
# the choice
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One backend configuration considered for a call.

    Attributes
    ----------
    backend : str
        The backend's name.
    options : tuple of (str, object)
        ``(name, value)`` pairs the backend would be called with.
    qualifies : bool
        Whether it meets the call's accuracy requirement.
    accuracy : str
        Why it does or does not meet it.
    ratio : float or None
        Predicted time over native's; None where the table has no measurement.
    seconds : float or None
        Predicted time in seconds.
    """

    backend: str
    options: tuple  # ((name, value), ...), what the backend is called with
    qualifies: bool
    accuracy: str  # why it does or does not meet the requirement
    ratio: float | None  # predicted time / native's (None: not measured)
    seconds: float | None  # predicted time

    def as_dict(self) -> dict:
        """The candidate as a JSON-ready dict.

        Returns
        -------
        dict
            backend, options, qualifies, accuracy, predicted_ratio, predicted_s.
        """
        return {
            "backend": self.backend,
            "options": dict(self.options),
            "qualifies": self.qualifies,
            "accuracy": self.accuracy,
            "predicted_ratio": self.ratio,
            "predicted_s": self.seconds,
        }


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`decide`: the chosen candidate and the reasoning.

    Attributes
    ----------
    routine : str
        The prefixed routine, e.g. ``"dgemm"``.
    shape : tuple of int
        ``(m, n, k)`` as given to :func:`decide`.
    device : {"cpu", "gpu"}
        The table's device.
    requirement : str
        The accuracy requirement, in words.
    table : str
        Which cost table was read (its label).
    chosen : Candidate
        The candidate that runs the call.
    candidates : tuple of Candidate
        Every candidate considered, the chosen one included.
    reason : str
        Why the chosen one won.
    """

    routine: str
    shape: tuple[int, int, int]
    device: str
    requirement: str
    table: str
    chosen: Candidate
    candidates: tuple[Candidate, ...]
    reason: str

    @property
    def backend(self) -> str:
        """Name of the chosen backend.

        Returns
        -------
        str
        """
        return self.chosen.backend

    @property
    def options(self) -> dict:
        """Options the chosen backend is called with.

        Returns
        -------
        dict
        """
        return dict(self.chosen.options)

    def as_dict(self) -> dict:
        """The decision as a JSON-ready dict (what :func:`emublas.explain` returns).

        Returns
        -------
        dict
            routine, m, n, k, device, requirement, table, backend, options, reason
            and the candidates (see :meth:`Candidate.as_dict`).
        """
        return {
            "routine": self.routine,
            "m": self.shape[0],
            "n": self.shape[1],
            "k": self.shape[2],
            "device": self.device,
            "requirement": self.requirement,
            "table": self.table,
            "backend": self.chosen.backend,
            "options": dict(self.chosen.options),
            "reason": self.reason,
            "candidates": [c.as_dict() for c in self.candidates],
        }


def _model_work(routine: str, m: int, n: int, k: int) -> tuple[float, int]:
    """(work of the product the ratio is read at, smallest dimension that matters).

    symm/hemm/trmm/trsm on an emulating backend are recursions whose largest products are
    the half-size off-diagonal blocks: the ratio is read at that block's size.
    """
    if routine in ("symm", "hemm", "trmm", "trsm"):
        half = max(k // 2, 1)
        other = n if m == k else m
        return float(half) * half * other, min(half, other)
    return float(m) * n * k, min(m, n, k)


def requirement_text(accuracy: str, bits: int | None) -> str:
    """The accuracy requirement in words.

    Parameters
    ----------
    accuracy : {"native", "normwise"}
    bits : int or None
        Required correct bits; None: native BLAS's accuracy.

    Returns
    -------
    str
    """
    if bits is None:
        return "native accuracy (each entry within native BLAS's error bound)"
    kind = "normwise, relative to k*max|a|*max|b|" if accuracy == "normwise" else "per entry, relative to sum|a||b|"
    return f"{bits} bits ({kind})"


@lru_cache(maxsize=4096)
def _decide(
    table: Table,
    routine: str,
    prefix: str,
    m: int,
    n: int,
    k: int,
    accuracy: str,
    bits: int | None,
    usable: tuple[str, ...],
) -> Decision:
    p = PRECISION[prefix]
    cplx = prefix in "cz"
    mr = MODEL_ROUTINE[routine]
    work, small = _model_work(routine, m, n, k)
    measured = table.has(mr, prefix)
    nat_s = table.native_seconds(mr, prefix, work) if measured else None
    native_bits = p - math.log2(max(k, 1))
    cands: list[Candidate] = []

    def add(backend, options, ok, why, knob=None):
        if backend == "native":
            ratio = 1.0 if measured else None
        else:
            ratio = table.ratio(backend, knob, mr, prefix, work) if measured else None
        secs = None if ratio is None or nat_s is None else ratio * nat_s
        cands.append(Candidate(backend, tuple(options), ok, why, ratio, secs))

    # native
    if bits is None:
        add("native", (), True, "native BLAS: the reference accuracy")
    else:
        ok = bits <= native_bits
        add(
            "native", (), ok, f"native's bound k*u gives {native_bits:.1f} bits at k={k}" + ("" if ok else f" < {bits}")
        )
    # ozaki2
    count: int | None
    if "ozaki2" in usable:
        if bits is None:
            count = OZAKI2_NATIVE[prefix]
            add(
                "ozaki2",
                (("moduli", count), ("mode", "accurate"), ("fallback", "dot")),
                True,
                f"{count} moduli, accurate mode: every entry certified against native's bound"
                " (uncertified entries recomputed)",
                count,
            )
        else:
            count = ozaki2_count_for_bits(bits, k, cplx)
            if count is None:
                add("ozaki2", (), False, f"no moduli count reaches {bits} bits at k={k}")
            else:
                why = (
                    f"{count} moduli cover 2*{bits} + log2(k) + {OZAKI2_SLACK_BITS:g} product bits; every entry"
                    f" certified to {bits} bits (uncertified entries recomputed)"
                )
                # the certificate checks the bits asked for, not native's bound, which fewer moduli
                # than native's count never meet: it warns only about entries that miss the request
                options = (("moduli", count), ("mode", "accurate"), ("fallback", "dot"), ("bits", bits))
                add("ozaki2", options, True, why, count)
    # strassen: gemm only (its rank-k and level-3 forms would run through full products)
    if "strassen" in usable and routine == "gemm":
        for levels in table.knobs("strassen", mr, prefix) or [1, 2]:
            if bits is None:
                ok, why = (
                    False,
                    (
                        "normwise error 2.3x the classical product's at one level, more per level"
                        " (BENCHMARKS.md), and no per-entry bound: below native accuracy"
                    ),
                )
            elif accuracy != "normwise":
                ok, why = False, "only a normwise bound: qualifies only with accuracy='normwise'"
            else:
                sb = native_bits - levels * STRASSEN_BITS_PER_LEVEL
                ok = bits <= sb
                why = f"normwise bound {sb:.1f} bits at {levels} level(s)" + ("" if ok else f" < {bits}")
            if max(1, min(m, n, k) >> levels) < 16:
                ok, why = False, f"blocks too small for {levels} level(s)"
            add("strassen", (("levels", levels),), ok, why, levels)

    native = cands[0]
    emulated = [c for c in cands[1:] if c.qualifies]
    if not measured:
        chosen = native if native.qualifies or not emulated else emulated[0]
        reason = (
            f"no {prefix}{mr} measurements in the table: native"
            if chosen is native
            else f"no {prefix}{mr} measurements and native does not meet the requirement: {chosen.backend}"
        )
    elif not native.qualifies:
        timed = [(c.seconds, c) for c in emulated if c.seconds is not None]
        if not timed and not emulated:
            chosen, reason = native, "NO backend meets the requirement here: native (a warning says so)"
        else:
            chosen = min(timed, key=lambda t: t[0])[1] if timed else emulated[0]
            reason = "native does not meet the requirement: the fastest predicted qualifying backend"
    elif small < table.min_dim_for(mr, prefix):
        edge, largest = table.min_dim_for(mr, prefix), table.largest_measured(mr, prefix)
        why = (
            f"no emulated {prefix}{mr} beat native at the largest measured size, {largest}"
            if largest is not None and edge > largest and table.fixed_min_dim is None
            else f"from this size up an emulated {prefix}{mr} beat native at every measured size"
            if table.fixed_min_dim is None
            else "the table's fixed threshold"
        )
        chosen, reason = native, f"min(m, n, k) = {small} < {edge} ({why})"
    else:
        ratios = [(c.ratio, c) for c in emulated if c.ratio is not None]
        best_ratio, best = min(ratios, key=lambda t: t[0]) if ratios else (None, None)
        if best is not None and best_ratio is not None and best_ratio <= MARGIN:
            chosen, reason = best, f"predicted at {1 / best_ratio:.2f}x native's speed (needs >= {1 / MARGIN:.2f}x)"
        else:
            chosen = native
            reason = (
                "no qualifying emulated backend"
                if best_ratio is None
                else f"best qualifying emulated backend predicted at {1 / best_ratio:.2f}x native's speed"
                f" (needs >= {1 / MARGIN:.2f}x)"
            )
    return Decision(
        prefix + routine,
        (m, n, k),
        table.device,
        requirement_text(accuracy, bits),
        table.label,
        chosen,
        tuple(cands),
        reason,
    )


def decide(
    table: Table,
    routine: str,
    prefix: str,
    m: int,
    n: int,
    k: int,
    *,
    accuracy: str = "native",
    bits: int | None = None,
    usable: tuple[str, ...] = ("ozaki2", "strassen"),
) -> Decision:
    """Choose the backend of one call.

    Parameters
    ----------
    table : Table
    routine : str
        Routine kind without prefix: gemm, syrk, herk, syr2k, her2k, symm, hemm, trmm, trsm.
    prefix : {"s", "d", "c", "z"}
    m, n, k : int
        The product's dimensions (rank-k: n, n, k; symm/trmm/trsm: b's m, n and a's order k).
    accuracy : {"native", "normwise"}
        ``native``: per-entry requirement; ``normwise``: also accepts a normwise bound
        (strassen), which only matters with ``bits``.
    bits : int, optional
        Required correct bits (1 up to the precision); None: native BLAS's accuracy.
    usable : tuple of str
        Emulating backends that can run here.

    Returns
    -------
    Decision
        The chosen candidate, every candidate considered and the reason.

    Raises
    ------
    ValueError
        ``bits`` beyond the dtype's precision, unknown routine or accuracy.
    """
    if routine not in MODEL_ROUTINE:
        raise ValueError(f"auto: unknown routine kind {routine!r}; valid: {', '.join(MODEL_ROUTINE)}")
    if accuracy not in ("native", "normwise"):
        raise ValueError(f"auto: accuracy must be native or normwise, got {accuracy!r}")
    if bits is not None and not 1 <= bits <= PRECISION[prefix]:
        raise ValueError(f"auto: bits={bits} is outside 1..{PRECISION[prefix]}, the precision of prefix {prefix!r}")
    return _decide(table, routine, prefix, int(m), int(n), int(k), accuracy, bits, tuple(sorted(usable)))
