"""The backend protocol and option specifications.

A backend is one object with a ``name``, a table of ``options`` and a
``gemm`` method; the rank-k methods are optional.  The front
(:mod:`emublas.blas`) has already checked every argument, converted the
arrays to the routine's dtype, prepared the Fortran-ordered output and handled
the degenerate cases (empty shapes, ``k == 0``, ``alpha == 0``), so a backend
only computes.

Calling convention shared by every compute method:

* ``a``, ``b``: 2-D arrays (numpy or cupy) of the routine's dtype, any strides.
* ``c``: the Fortran-ordered output of the routine's dtype, updated **in place**.
  When ``beta == 0`` the front has already zeroed the part the routine
  writes, so a backend may but need not read it.
* trans codes are 0 (N), 1 (T) or 2 (C, conjugate transpose); real routines
  only ever see 0 and 1.
* ``alpha``/``beta`` are Python ``float`` or ``complex`` (``float`` where BLAS
  takes a real scalar: herk's alpha and beta, her2k's beta).
* the rank-k methods update only the triangle selected by ``lower``.

A rank-k method may return ``NotImplemented`` (for example for an array
library it has no special path for); the front then derives the routine from
``gemm``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

# the value parsers and environment readers live in the lowest layer (the kernels read them too)
from .._env import boolean, env_flag, env_int, env_value, int_range

__all__ = ["Option", "Backend", "choice", "int_range", "boolean", "device_list", "env_value", "env_flag",
           "env_int"]


@dataclass(frozen=True)
class Option:
    """One backend option: its default, its parser and its environment variable.

    Parameters
    ----------
    name : str
        Keyword name, as passed to routines, ``use`` and ``set_backend``.
    default : object
        Value used when nothing else sets it.
    parse : callable
        Converts a raw value (Python object or environment string) to the
        option's value, raising ``ValueError`` that lists the valid values.
    doc : str
        One line for ``emublas info`` and the README.
    env : str, optional
        Environment variable; ``EMUBLAS_<NAME>`` when not given.
    """

    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str
    env: str | None = None

    @property
    def env_var(self) -> str:
        return self.env or "EMUBLAS_" + self.name.upper()


def choice(*values: str) -> Callable[[Any], str]:
    """Parser accepting one of ``values`` (case-insensitive strings)."""

    def parse(raw: Any) -> str:
        text = str(raw).strip().lower()
        if text not in values:
            raise ValueError(f"{raw!r} is not one of {', '.join(values)}")
        return text

    parse.valid = ", ".join(values)  # type: ignore[attr-defined]
    return parse


def device_list(raw: Any) -> tuple[int, ...] | str | None:
    """Parser for a set of GPUs: ``None``/``""``/``"current"`` (the arrays' own device),
    ``"all"``, an integer, or integers separated by commas (``"0,1"``) or in a sequence."""
    if raw is None:
        return None
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in ("", "current", "none"):
            return None
        if text == "all":
            return "all"
        parts = [p for p in text.replace(" ", "").split(",") if p]
    elif isinstance(raw, int) and not isinstance(raw, bool):
        parts = [raw]
    elif isinstance(raw, (list, tuple)):
        parts = list(raw)
    else:
        raise ValueError(f"{raw!r} is not a device list (e.g. 0,1 or all)")
    try:
        ids = tuple(int(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not a device list (e.g. 0,1 or all)") from None
    if not ids or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"{raw!r} is not a device list of distinct non-negative ids")
    return ids


device_list.valid = "current, all, or device ids like 0,1"  # type: ignore[attr-defined]


class Backend:
    """Base class of every backend; subclasses override what they provide."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Option]] = {}

    # -- readiness -----------------------------------------------------------
    def readiness(self) -> dict[str, Any]:
        """What ``emublas.info()`` reports: ``{"cpu": (ok, detail), "gpu": (ok, detail)}``."""
        return {"cpu": (False, "not implemented"), "gpu": (False, "not implemented")}

    def check(self, device: str) -> None:
        """Raise :class:`~emublas.errors.BackendUnavailableError` if ``device`` cannot run."""
        from ..errors import BackendUnavailableError

        ok, detail = self.readiness()[device]
        if not ok:
            raise BackendUnavailableError(
                f"backend {self.name!r} cannot run on the {device.upper()} here: {detail}"
            )

    # -- compute ---------------------------------------------------------------
    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts) -> None:
        raise NotImplementedError

    def syrk(self, alpha, a, beta, c, trans, lower, **opts):
        return NotImplemented

    def herk(self, alpha, a, beta, c, trans, lower, **opts):
        return NotImplemented

    def syr2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return NotImplemented

    def her2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return NotImplemented

    def intmatmul(self, a, b, **opts):
        """Exact int64 product of 2-D integer arrays (``emublas.intmatmul``)."""
        return NotImplemented
