"""The ``auto`` backend: per call, native, ozaki2 (with its moduli count) or strassen
(with its levels), whichever the measured cost model (:mod:`.model` over the tables of :mod:`.tables`)
predicts fastest among those that meet the accuracy asked for.

``accuracy="native"`` (the default) asks for native BLAS's accuracy: native, or
ozaki2 with the default moduli in accurate mode, whose certificate checks every
entry against native's error bound and recomputes the entries it cannot
certify.  Strassen never qualifies there (its normwise error is 2.3x the
classical product's at one level, and it has no per-entry bound).  ``bits=N``
asks for N correct bits per entry relative to ``sum|a||b|`` instead; with
``accuracy="normwise"`` a normwise bound of N bits (relative to
``k*max|a|*max|b|``) is enough, which lets strassen in.

:func:`emublas.auto_last` says what the last call of this thread chose and why;
:func:`emublas.explain` says it for a call without running it.

A call pays for its decision once per shape: decisions are kept per (routine, device,
dtype, m, n, k, accuracy, bits, table option), at most :data:`CACHE_SIZE` of them, each
valid while the table it was made with is still the one in force (which
:func:`.tables.table_for` re-resolves at most every ``tables.RECHECK_S`` seconds), so the
common small call costs one dict lookup over native's, or none when it repeats the shape and
options of the last CPU call routed (:meth:`AutoBackend.route`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from ... import _callers
from ..._arrays import is_cupy
from ..base import Backend, Option, choice, parse_bits
from . import model, tables

__all__ = ["AutoBackend", "BACKEND", "last_run"]

_PREFIX_OF_CHAR = {"f": "s", "d": "d", "F": "c", "D": "z"}  # numpy's dtype chars: the BLAS prefixes
_last = threading.local()
_monotonic = time.monotonic  # bound once: route() reads it on every call
_get_ident = threading.get_ident
#: route()'s memo when no call is remembered: (options dict, array type, kind, prefix, m, n, k,
#: re-check time, the entry's (backend, name, options), its warning, its last-run record, thread
#: that last had the entry delivered); flat, so that a repeated call compares its fields without
#: building a key and reads nothing else
_NO_ROUTE: tuple = (None, None, None, None, -1, -1, -1, 0.0, None, "", None, None)
#: Decisions kept per (routine, device, dtype, m, n, k, accuracy, bits, table option);
#: the oldest goes when full.  Each entry holds the table it was made with and is used only
#: while that is still the table in force.
CACHE_SIZE = 4096


def _text(raw: Any) -> str | None:
    if raw is None or str(raw).strip() == "":
        return None
    return str(raw).strip()


_text.valid = "a path to a cost table JSON file"  # type: ignore[attr-defined]
_text.none = "(calibrated, else shipped)"  # type: ignore[attr-defined]


def last_run() -> dict | None:
    """What the last ``auto`` call of this thread chose.

    Returns
    -------
    dict or None
        The decision's record (:meth:`.model.Decision.as_dict`: chosen backend,
        candidates, reason); None before the first call.
    """
    call = getattr(_last, "call", None)
    if call is None:
        return None
    table, routine, prefix, m, n, k, accuracy, bits, usable = call
    return model.decide(table, routine, prefix, m, n, k, accuracy=accuracy, bits=bits, usable=usable).as_dict()


def _deliver(hit: tuple) -> tuple:
    """What every call of a cached decision does: its record becomes this thread's last (the
    call's facts; :func:`last_run` turns them into the decision when asked), and its warning,
    if any, is raised at the caller's line."""
    _last.call = hit[4]
    if hit[5]:
        _callers.warn(hit[5], UserWarning)
    return hit


def _device(c) -> str:
    """The device an array computes on."""
    return "gpu" if is_cupy(c) else "cpu"


_NATIVE: list[Backend] = []


def _native():
    if not _NATIVE:
        from ..native.backend import BACKEND

        _NATIVE.append(BACKEND)
    return _NATIVE[0]


class AutoBackend(Backend):
    """Chooses native, ozaki2 or strassen per call from the measured cost table."""

    name = "auto"
    description = "per call: native, ozaki2 or strassen, the fastest meeting the accuracy asked (measured cost table)"
    sweep_grid = {"accuracy": ("native",)}  # what auto picks per size, against the others
    handles_nonfinite = True  # every backend it may pick does
    options = {
        "accuracy": Option(
            "accuracy",
            "native",
            choice("native", "normwise"),
            "native: each entry within native BLAS's error bound (or bits per entry);"
            " normwise: a normwise bound of `bits` is enough (lets strassen in)",
            env="EMUBLAS_AUTO_ACCURACY",
        ),
        "bits": Option(
            "bits",
            None,
            parse_bits,
            "correct bits required (relative to sum|a||b| per entry, or normwise); none: native's accuracy",
            env="EMUBLAS_AUTO_BITS",
        ),
        "table": Option(
            "table",
            None,
            _text,
            "cost table file (default: emublas calibrate's in the user cache, else the shipped one)",
            env=tables.ENV_TABLE,
        ),
    }

    def __init__(self):
        self._usable: dict[str, tuple[str, ...]] = {}
        self._decisions: dict[tuple, tuple] = {}
        # (options dict, device, its (accuracy, bits, table, device)): the front hands every
        # call of a process the same shared dict, so the three lookups are made once per dict
        self._opts_key: tuple = (None, None, None)
        # the last call :meth:`route` took (see _NO_ROUTE); any other delivery clears it
        self._last_route: tuple = _NO_ROUTE
        self._gpu_checked = False

    # -- readiness -----------------------------------------------------------
    def device_readiness(self, device):
        from ..native.backend import BACKEND as NATIVE

        ok, detail = NATIVE.device_readiness(device)
        if ok:
            try:
                detail = f"cost table: {self.table(device).label}"
            except ValueError as exc:
                ok, detail = False, str(exc)
        return ok, detail

    def ready(self, device: str) -> bool:
        # device_readiness's verdict without formatting its detail (the interpose shim asks per call)
        if not _native().ready(device):
            return False
        try:
            self.table(device)
        except ValueError:
            return False
        return True

    def check(self, device: str) -> None:
        # native's CPU BLAS is scipy's, a hard dependency: nothing to check there; a process's
        # GPUs stay usable once they were (native's rule), so a GPU is checked once
        if device == "cpu" or self._gpu_checked:
            return
        _native().check(device)
        self._gpu_checked = True

    def table(self, device: str, path: str | None = None) -> tables.Table:
        """The cost table used on ``device``.

        Parameters
        ----------
        device : {"cpu", "gpu"}
            The device of the call.
        path : str, optional
            A table file given by the call (the ``table`` option); None: the
            environment, the user's calibrated table or the shipped one.

        Returns
        -------
        Table
            The table, as :func:`.tables.table_for` resolves it.
        """
        return tables.table_for(device, path)

    def usable(self, device: str) -> tuple[str, ...]:
        """The emulating backends that can run on ``device`` (asked once per process).

        Parameters
        ----------
        device : {"cpu", "gpu"}
            The device of the call.

        Returns
        -------
        tuple of str
            Names among ``("ozaki2", "strassen")`` whose readiness there is ok.
        """
        if device not in self._usable:
            from .. import get

            names = []
            for name in ("ozaki2", "strassen"):
                try:
                    if get(name).device_readiness(device)[0]:
                        names.append(name)
                except Exception:  # a backend that cannot even report is not a candidate
                    pass
            self._usable[device] = tuple(names)
        return self._usable[device]

    def prepare(self, device: str, opts: dict) -> None:
        """Settle now what the first decision on ``device`` would otherwise pay for.

        The emulating backends it may choose from (their imports and readiness) and the cost
        table as the decisions resolve it (file lookups, parsing): the interpose shim asks
        at install, so that the program's first BLAS call does not pay them.

        Parameters
        ----------
        device : {"cpu", "gpu"}
            The device.
        opts : dict
            The ``auto`` options the calls will have (their ``table``).

        Raises
        ------
        ValueError
            The table cannot be read (as the first call would raise).
        """
        self.usable(device)
        tables.table_for(device, opts.get("table"), read_env=False)

    # -- the choice ------------------------------------------------------------
    def decide(
        self,
        routine: str,
        prefix: str,
        m: int,
        n: int,
        k: int,
        device: str,
        *,
        accuracy="native",
        bits=None,
        table=None,
    ) -> model.Decision:
        """The decision for one call, as :func:`.model.decide` makes it with this device's table.

        Parameters
        ----------
        routine : str
            Routine kind without prefix (gemm, syrk, ..., trsm).
        prefix : {"s", "d", "c", "z"}
            The BLAS precision prefix.
        m, n, k : int
            The product's dimensions (see :func:`.model.decide`).
        device : {"cpu", "gpu"}
            Where the call runs: which table and which backends are usable.
        accuracy : {"native", "normwise"}, optional
            Whether a normwise bound is accepted (matters only with ``bits``).
        bits : int, optional
            Required correct bits; None: native BLAS's accuracy.
        table : str, optional
            A cost-table file instead of the device's default.

        Returns
        -------
        Decision
            The chosen candidate, the candidates considered and the reason.
        """
        return model.decide(
            self.table(device, table),
            routine,
            prefix,
            m,
            n,
            k,
            accuracy=accuracy,
            bits=bits,
            usable=self.usable(device),
        )

    def native_below(self, routine: str, prefix: str, device: str, opts: dict) -> int:
        """The smallest dimension below which every call of ``prefix`` + ``routine`` is native.

        The table's floor for the routine (where no emulation was measured faster), or 0 where
        ``bits`` is given (then the model decides every size).  The interpose shim asks it to
        send a small call to the program's own routine without binding its arguments.

        Parameters
        ----------
        routine : str
            Routine kind without prefix (gemm, syrk, ..., trsm).
        prefix : {"s", "d", "c", "z"}
        device : {"cpu", "gpu"}
        opts : dict
            The call's ``auto`` options, resolved.

        Returns
        -------
        int
            A call whose m, n or k is below this is native; :func:`last_run` is not updated
            by such a call when the shim sends it on without asking :meth:`choice`.
        """
        if opts.get("bits") is not None:
            return 0
        table = tables.table_for(device, opts.get("table"), read_env=False)
        return table.min_dim_for(model.MODEL_ROUTINE[routine], prefix)

    def _choose(self, routine: str, c, m: int, n: int, k: int, opts: dict) -> tuple:
        """The cached decision of a call: ``(time, table, backend, options, record, warning,
        (backend, name, options))``, the last being what :meth:`route` returns."""
        return self._cached(routine, _PREFIX_OF_CHAR[c.dtype.char], _device(c), m, n, k, opts)

    def choice(self, routine: str, prefix: str, m: int, n: int, k: int, device: str, opts: dict) -> str:
        """The backend a call of this shape goes to, as the call itself would decide it (the same
        cache, the same record for :func:`last_run`), without its arrays.

        The interpose shim asks first, so that a call auto leaves to native goes to the
        program's own routine directly.

        Parameters
        ----------
        routine : str
            Routine kind without prefix (gemm, syrk, ..., trsm).
        prefix : {"s", "d", "c", "z"}
            The BLAS precision prefix.
        m, n, k : int
            The product's dimensions, as :meth:`route` takes them.
        device : {"cpu", "gpu"}
            Where the call runs.
        opts : dict
            The call's ``auto`` options, resolved.

        Returns
        -------
        str
            The chosen backend's name.
        """
        return self._cached(routine, prefix, device, m, n, k, opts)[2].name

    def _cached(self, routine, prefix, device, m, n, k, opts) -> tuple:
        """The decision of a call shape (see :meth:`_choose`), cached, delivered (:func:`_deliver`)."""
        seen = self._opts_key  # one read: another thread may replace it meanwhile
        if seen[0] is opts and seen[1] == device:
            key = (routine, prefix, m, n, k, seen[2])
        else:
            key = (routine, prefix, m, n, k, self._options_key(opts, device))
        hit = self._decisions.get(key)
        now = _monotonic()
        # a decision younger than RECHECK_S was made with the table in use now: no table lookup
        if hit is None or now - hit[0] >= tables.RECHECK_S:
            hit = self._refresh(key, hit, now)
        self._last_route = _NO_ROUTE  # this thread's record changes here: route() may not skip it
        return _deliver(hit)

    def _options_key(self, opts: dict, device: str) -> tuple:
        """``(accuracy, bits, table, device)``: the decision key's tail, kept with the options
        dict's identity and the device (the front hands every call of a process the same dict)."""
        tail = (opts.get("accuracy", "native"), opts.get("bits"), opts.get("table"), device)
        self._opts_key = (opts, device, tail)  # holds opts alive, so its identity cannot be reused
        return tail

    def _refresh(self, key: tuple, hit: tuple | None, now: float) -> tuple:
        """The cache entry of ``key`` made anew or confirmed: the slow path of :meth:`_cached`."""
        routine, prefix, m, n, k, (accuracy, bits, path, device) = key
        # the front's option resolution has already read EMUBLAS_COST_TABLE into opts (the
        # ``table`` option's variable), so table_for need not read it again; it re-resolves
        # the files at most every RECHECK_S (the one cache of tables)
        table = tables.table_for(device, path, read_env=False)
        if hit is not None and hit[1] is table:
            hit = (now, *hit[1:])
        else:
            be, options, record, warning = self._decide_call(table, routine, device, prefix, m, n, k, accuracy, bits)
            hit = (now, table, be, options, record, warning, (be, be.name, options))
            while self._decisions and len(self._decisions) >= CACHE_SIZE:
                self._decisions.pop(next(iter(self._decisions)), None)
        self._decisions[key] = hit
        return hit

    def _decide_call(self, table, routine, device, prefix, m, n, k, accuracy, bits):
        """(backend, options, last-run record, warning or "") of one call shape: the slow path."""
        usable = self.usable(device)
        record = (table, routine, prefix, m, n, k, accuracy, bits, usable)
        if bits is None and min(m, n, k) < table.min_dim_for(model.MODEL_ROUTINE[routine], prefix):
            return _native(), {}, record, ""  # the common small call: no model lookup at all
        decision = model.decide(table, routine, prefix, m, n, k, accuracy=accuracy, bits=bits, usable=usable)
        warning = ""
        if not decision.chosen.qualifies:
            warning = (
                f"emublas auto: no backend here meets {decision.requirement} for {prefix}{routine}"
                f" {m}x{n}x{k}; computed natively (emublas.auto_last() has the reasoning)"
            )
        from .. import get

        return get(decision.backend), decision.options, record, warning

    def route(self, kind: str, prefix: str, m: int, n: int, k: int, out, opts: dict):
        """The concrete backend that runs a whole call (gemm, rank-k or level-3 routine).

        The front of :mod:`emublas.level3` asks, so that the recursion runs on one
        concrete backend chosen by the cost model.

        Parameters
        ----------
        kind : {"gemm", "syrk", "herk", "syr2k", "her2k", "symm", "hemm", "trmm", "trsm"}
            The routine (the gemm and rank-k fronts route before they clear ``c``).
        prefix : {"s", "d", "c", "z"}
            Its precision prefix.
        m, n : int
            The shape of the output.
        k : int
            The order of the square operand.
        out : array
            The output (its dtype and device pick the table).
        opts : dict
            This call's ``auto`` options.

        Returns
        -------
        tuple
            ``(backend, name, options)``: the chosen backend, its name and the
            options to call it with.
        """
        # This runs on every auto call of the fronts, so its repeated-call path touches little
        # (a small cupy call is all host time, and between two calls the CUDA launch path leaves
        # little of this in the caches): the last call's entry serves a call of the same options
        # dict, array type and shape (the front's prefix is out's dtype, the array type fixes
        # the device) until its re-check time; this thread's record (last_run) is written only
        # when another thread took the entry last, as _cached clears the memo whenever it
        # delivers a record.
        (
            last_opts,
            last_type,
            last_kind,
            last_prefix,
            last_m,
            last_n,
            last_k,
            until,
            routed,
            warning,
            record,
            thread,
        ) = self._last_route  # one read: another thread may replace it meanwhile
        if (
            last_opts is opts
            and last_type is type(out)
            and last_m == m
            and last_n == n
            and last_k == k
            and last_kind == kind
            and last_prefix == prefix
            and _monotonic() < until
        ):
            if thread != _get_ident():
                _last.call = record
                memo = (opts, last_type, kind, prefix, m, n, k, until, routed, warning, record, _get_ident())
                self._last_route = memo
            if warning:
                _callers.warn(warning, UserWarning)
            return routed  # (backend, name, options): callers only read it
        array_type = type(out)
        device = "cpu" if array_type is np.ndarray else _device(out)
        hit = self._cached(kind, prefix, device, m, n, k, opts)
        # holds opts alive, so its identity stays its own
        until = hit[0] + tables.RECHECK_S
        self._last_route = (opts, array_type, kind, prefix, m, n, k, until, hit[6], hit[5], hit[4], _get_ident())
        return hit[6]

    # -- compute ---------------------------------------------------------------
    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts) -> None:
        m, n = c.shape
        k = a.shape[0] if trans_a else a.shape[1]
        be, options = self._choose("gemm", c, m, n, k, opts)[2:4]
        be.gemm(alpha, a, b, beta, c, trans_a, trans_b, **options)

    def _rank(self, kind, args, beta, c, trans, lower, opts):
        a = args[1]
        n = c.shape[0]
        k = a.shape[0] if trans else a.shape[1]
        be, options = self._choose(kind, c, n, n, k, opts)[2:4]
        # NotImplemented: the front derives the routine from this backend's gemm (decided anew)
        return getattr(be, kind)(*args, beta, c, trans, lower, **options)

    def syrk(self, alpha, a, beta, c, trans, lower, **opts):
        return self._rank("syrk", (alpha, a), beta, c, trans, lower, opts)

    def herk(self, alpha, a, beta, c, trans, lower, **opts):
        return self._rank("herk", (alpha, a), beta, c, trans, lower, opts)

    def syr2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return self._rank("syr2k", (alpha, a, b), beta, c, trans, lower, opts)

    def her2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        return self._rank("her2k", (alpha, a, b), beta, c, trans, lower, opts)

    def last_run(self) -> dict | None:
        """The sweep's hook: the last decision of this thread.

        Returns
        -------
        dict or None
            As :func:`last_run`.
        """
        return last_run()


BACKEND = AutoBackend()
