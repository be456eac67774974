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

Besides computing, a backend declares what the rest of the package may ask of
it; every item has a default on :class:`Backend`, so a new backend overrides
only what it has:

* readiness per device (:meth:`Backend.readiness`, :meth:`Backend.check`) and
  :attr:`Backend.options` -- the front, ``emublas info``, the interpose shim;
* :attr:`Backend.sweep_grid`, :attr:`Backend.sweep_quick_grid`,
  :attr:`Backend.sweep_quick_rank_k_grid` and :meth:`Backend.last_run` --
  ``emublas sweep``;
* :attr:`Backend.handles_nonfinite` -- whether NaN/Inf input is the
  backend's business (:func:`split_nonfinite` is the shared patch);
* :attr:`Backend.native_level3` and :meth:`Backend.route` -- the level-3 front
  (symm, hemm, trmm, trsm), and the gemm and rank-k fronts, which route a delegating
  backend's call before it prepares the output;
* :attr:`Backend.ignores_c_when_beta_zero` -- whether the gemm and rank-k fronts must
  clear ``c`` first when ``beta`` is 0;
* :meth:`Backend.dask_gemm` -- :mod:`emublas.dask`;
* :attr:`Backend.quantizes_floats` -- the interpose shim's warning.

No caller looks at a backend's ``name`` to decide what it can do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

# the value parsers and environment readers live in the lowest layer (the kernels read them too)
from .._env import boolean, env_flag, env_int, env_reader, env_tokens, env_value, int_range
from .options import Grid, Option, choice, device_list, parse_bits

__all__ = [
    "Option",
    "Backend",
    "choice",
    "int_range",
    "boolean",
    "device_list",
    "parse_bits",
    "env_value",
    "env_flag",
    "env_int",
    "env_reader",
    "env_tokens",
    "split_nonfinite",
]


class Backend:
    """Base class of every backend; subclasses override what they provide.

    A new backend is a subclass (usually one module exposing ``BACKEND``) and
    one line in the registry (:mod:`emublas.backends`), or a call to
    :func:`emublas.backends.register`; the front, ``emublas info``, the sweep
    and :mod:`emublas.dask` then use it through the attributes and methods
    below.
    """

    #: Name used by ``backend=``, ``emublas.use`` and ``EMUBLAS_BACKEND``.
    name: ClassVar[str] = ""
    #: One line for ``emublas info``.
    description: ClassVar[str] = ""
    #: The options a call may pass (``moduli=``, ``bits=``, ...), by keyword.
    options: Mapping[str, Option] = {}

    #: Knob grid of a full ``emublas sweep`` (without ``--grid``): option name
    #: -> values.  ``{}``: swept once, at the option defaults.  ``None``: no
    #: grid declared; swept at the option defaults, and left out of ``--quick``.
    sweep_grid: ClassVar[Grid | None] = None
    #: Knob grid of ``emublas sweep --quick``; ``None``: :attr:`sweep_grid`.
    sweep_quick_grid: ClassVar[Grid | None] = None
    #: Knob grid of the quick sweep's rank-k block (fewer values keep it short);
    #: ``None``: :attr:`sweep_quick_grid`.
    sweep_quick_rank_k_grid: ClassVar[Grid | None] = None

    #: True when :meth:`gemm` and the rank-k methods give the platform BLAS's
    #: NaN/Inf pattern themselves (every built-in backend does).  False: the
    #: backend computes finite data only, and non-finite input is to be patched
    #: around it with :func:`split_nonfinite`.
    handles_nonfinite: ClassVar[bool] = False
    #: True for the backend whose level-3 routines (symm, hemm, trmm, trsm) are
    #: the platform's own; every other backend gets them as recursions over its
    #: gemm (:mod:`emublas.level3`).
    native_level3: ClassVar[bool] = False
    #: True when :meth:`gemm` with ``beta == 0`` never reads ``c`` (the BLAS rule, which
    #: the platform BLAS keeps); False: the front zeroes ``c`` first, so that NaN/Inf
    #: left in it cannot reach the result.
    ignores_c_when_beta_zero: ClassVar[bool] = False
    #: True when float inputs are rounded to fewer bits than their dtype holds
    #: (an accuracy knob, not an emulation of the dtype's product); the
    #: interpose shim warns about it.
    quantizes_floats: ClassVar[bool] = False

    @classmethod
    def quick_grid(cls, rank_k: bool = False) -> Grid | None:
        """The grid of ``emublas sweep --quick``, with the fallbacks above applied.

        Parameters
        ----------
        rank_k : bool
            The grid of the quick sweep's rank-k block.

        Returns
        -------
        mapping or None
            None when the backend declares no grid (it is not in the quick sweep).
        """
        if rank_k and cls.sweep_quick_rank_k_grid is not None:
            return cls.sweep_quick_rank_k_grid
        return cls.sweep_quick_grid if cls.sweep_quick_grid is not None else cls.sweep_grid

    # -- readiness -----------------------------------------------------------
    def device_readiness(self, device: str) -> tuple[bool, str]:
        """``(ok, detail)`` for one device, ``"cpu"`` or ``"gpu"``.

        A call asks only for its own device (:meth:`check`), so a CPU call never
        probes the GPU.  Backends override this; one that overrides only
        :meth:`readiness` is read through it.

        Parameters
        ----------
        device : {"cpu", "gpu"}
            The device a call would run on.

        Returns
        -------
        ok : bool
            Whether the backend can run there now.
        detail : str
            What it uses there, or why not (shown by ``emublas info``).
        """
        if type(self).readiness is not Backend.readiness:
            return self.readiness()[device]
        return (False, "not implemented")

    def readiness(self) -> dict[str, Any]:
        """What ``emublas.info()`` reports for both devices.

        Returns
        -------
        dict
            ``{"cpu": (ok, detail), "gpu": (ok, detail)}`` from :meth:`device_readiness`.
        """
        return {device: self.device_readiness(device) for device in ("cpu", "gpu")}

    def check(self, device: str) -> None:
        """Raise unless the backend can run on ``device``.

        Parameters
        ----------
        device : {"cpu", "gpu"}
            The device of the call's arrays.

        Raises
        ------
        BackendUnavailableError
            With the detail :meth:`device_readiness` gives.
        """
        from ..errors import BackendUnavailableError

        ok, detail = self.device_readiness(device)
        if not ok:
            raise BackendUnavailableError(f"backend {self.name!r} cannot run on the {device.upper()} here: {detail}")

    def ready(self, device: str) -> bool:
        """:meth:`device_readiness`'s verdict without its detail (the shim asks on every call).

        Backends whose detail costs more to format than the verdict to decide override this.

        Parameters
        ----------
        device : {"cpu", "gpu"}
            The device of the call.

        Returns
        -------
        bool
            Whether the backend can run there now.
        """
        return self.device_readiness(device)[0]

    # -- reports ---------------------------------------------------------------
    def last_run(self) -> dict | None:
        """What the last call of this thread did (moduli, levels, phase times, ...).

        The sweep stores it with each row (``run_info``; its ``moduli`` entry,
        if any, as ``moduli_used``).

        Returns
        -------
        dict or None
            None (the default) when there is nothing to report.
        """
        return None

    # -- routing ---------------------------------------------------------------
    def route(self, kind: str, prefix: str, m: int, n: int, k: int, out, opts: dict):
        """The backend that runs a whole call, for a backend that delegates per call.

        A backend like ``auto`` picks the concrete backend here, so that the
        level-3 recursion runs on one backend.

        Parameters
        ----------
        kind : {"gemm", "syrk", "herk", "syr2k", "her2k", "symm", "hemm", "trmm", "trsm"}
            The routine (the gemm and rank-k fronts route before they clear ``c``).
        prefix : {"s", "d", "c", "z"}
            Its BLAS precision prefix.
        m, n : int
            The shape of the routine's output.
        k : int
            The order of the square operand ``a`` (m or n, by ``side``).
        out : array
            The routine's output array (its array library and device).
        opts : dict
            This call's options for this backend.

        Returns
        -------
        tuple or None
            ``(backend, name, options)`` to run the call with; None (the default):
            this backend runs it itself.
        """
        return None

    # -- compute ---------------------------------------------------------------
    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, **opts) -> None:
        """``c = alpha·op(a)·op(b) + beta·c`` in place, following the module's calling convention.

        Parameters
        ----------
        alpha, beta : float or complex
            The scalars, already converted to Python numbers.
        a, b : array
            2-D operands of the routine's dtype, numpy or cupy, any strides.
        c : array
            The m × n Fortran-ordered output, updated in place (zeroed by the
            front when ``beta == 0``).
        trans_a, trans_b : int
            0 (N), 1 (T) or 2 (C, conjugate transpose) for ``op(a)``, ``op(b)``.
        **opts
            This backend's options, already parsed.
        """
        raise NotImplementedError

    def syrk(self, alpha, a, beta, c, trans, lower, **opts):
        """Symmetric rank-k update ``c = alpha·a·aᵀ + beta·c`` (or ``aᵀ·a``) of ``c``'s ``lower`` triangle.

        Parameters
        ----------
        alpha, beta : float or complex
            The scalars of the update (float where BLAS takes a real one).
        a : array
            2-D operand of the routine's dtype, numpy or cupy, any strides:
            n × k for ``trans == 0``, k × n otherwise.
        c : array
            The n × n Fortran-ordered output, updated in place in its ``lower``
            triangle only.
        trans : int
            0: ``a·aᵀ``; 1: ``aᵀ·a`` (2, conjugate transpose, for the Hermitian kinds).
        lower : bool
            Which triangle of ``c`` is referenced and written.
        **opts
            This backend's options, already parsed.

        Returns
        -------
        None or NotImplemented
            None when ``c`` holds the result; NotImplemented (the default) lets
            the front derive the routine from :meth:`gemm`.
        """
        return NotImplemented

    def herk(self, alpha, a, beta, c, trans, lower, **opts):
        """Hermitian rank-k update ``c = alpha·a·aᴴ + beta·c`` (or ``aᴴ·a``) of ``c``'s ``lower`` triangle.

        Parameters
        ----------
        alpha, a, beta, c, trans, lower, **opts
            As in :meth:`syrk`, with ``alpha`` and ``beta`` real and trans 2 for ``aᴴ·a``.

        Returns
        -------
        None or NotImplemented
            As in :meth:`syrk`.
        """
        return NotImplemented

    def syr2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        """Symmetric rank-2k update ``c = alpha·(a·bᵀ + b·aᵀ) + beta·c`` of ``c``'s ``lower`` triangle.

        Parameters
        ----------
        alpha, a, beta, c, trans, lower, **opts
            As in :meth:`syrk` (trans 1: ``aᵀ·b + bᵀ·a``).
        b : array
            The second operand, of ``a``'s shape and dtype.

        Returns
        -------
        None or NotImplemented
            As in :meth:`syrk`.
        """
        return NotImplemented

    def her2k(self, alpha, a, b, beta, c, trans, lower, **opts):
        """Hermitian rank-2k update ``c = alpha·a·bᴴ + conj(alpha)·b·aᴴ + beta·c`` of ``c``'s ``lower`` triangle.

        Parameters
        ----------
        alpha, a, b, beta, c, trans, lower, **opts
            As in :meth:`syr2k`, with ``beta`` real and trans 2 for ``aᴴ·b + bᴴ·a``.

        Returns
        -------
        None or NotImplemented
            As in :meth:`syrk`.
        """
        return NotImplemented

    def intmatmul(self, a, b, **opts):
        """Exact product of 2-D integer arrays, for ``emublas.intmatmul``.

        Parameters
        ----------
        a, b : array
            2-D integer (or bool) arrays with ``a.shape[1] == b.shape[0]``, numpy or cupy.
        **opts
            This backend's options, already parsed.

        Returns
        -------
        array or NotImplemented
            The m × n int64 product (same array library as the inputs);
            NotImplemented (the default) when the backend has no integer product.

        Raises
        ------
        OverflowError
            An entry of the exact product does not fit int64.
        """
        return NotImplemented

    def dask_gemm(self, alpha, x, y, beta, c, *, conj_x: bool, conj_y: bool, dtype, **opts):
        """A whole :func:`emublas.dask.gemm` call as a lazy Dask array, or NotImplemented.

        Parameters
        ----------
        alpha, beta : float or complex
            Already parsed; ``alpha != 0``.
        x, y : dask.array.Array
            ``op(a)`` (m × k) and ``op(b)ᵀ`` (n × k), both up to conjugation,
            of ``dtype``, with the same k chunks; ``k > 0``.
        c : dask.array.Array or None
            m × n, chunked like the result; None when ``beta == 0``.
        conj_x, conj_y : bool
            Whether ``x`` and ``y`` are to be conjugated.
        dtype : numpy.dtype
        **opts
            The backend's options, resolved on the client.

        Returns
        -------
        dask.array.Array or NotImplemented
            NotImplemented (the default): :mod:`emublas.dask` runs one front
            gemm per block triple and sums the k-blocks in floating point.
        """
        return NotImplemented


def split_nonfinite(compute, reference, alpha, a, b, beta, c, trans_a: int, trans_b: int, xp) -> None:
    """``c = alpha·op(a)·op(b) + beta·c`` with NaN/Inf in ``a`` or ``b`` given the platform BLAS's pattern.

    The rows of ``op(a)`` and columns of ``op(b)`` that hold a non-finite value
    are computed by ``reference``; everything else by ``compute`` on copies of
    ``a`` and ``b`` whose non-finite entries are zero (those entries reach only
    the rows and columns ``reference`` recomputes).

    Parameters
    ----------
    compute, reference : callable
        ``f(alpha, a, b, beta, c, trans_a, trans_b)`` updating ``c`` in place;
        ``compute`` sees finite operands only.
    alpha, a, b, beta, c, trans_a, trans_b
        As in :meth:`Backend.gemm`.
    xp : module
        The arrays' namespace (numpy or cupy).
    """
    bad_a = ~xp.isfinite(a).all(axis=0 if trans_a else 1)  # rows of op(a)
    bad_b = ~xp.isfinite(b).all(axis=1 if trans_b else 0)  # columns of op(b)
    rows, cols = xp.flatnonzero(bad_a), xp.flatnonzero(bad_b)
    keep_r, keep_c = c[rows, :].copy(), c[:, cols].copy()
    compute(alpha, xp.where(xp.isfinite(a), a, 0), xp.where(xp.isfinite(b), b, 0), beta, c, trans_a, trans_b)
    opa, opb = _op(a, trans_a), _op(b, trans_b)
    if rows.size:
        part = xp.asfortranarray(keep_r)
        reference(alpha, opa[rows, :], opb, beta, part, 0, 0)
        c[rows, :] = part
    if cols.size:
        part = xp.asfortranarray(keep_c)
        reference(alpha, opa, opb[:, cols], beta, part, 0, 0)
        c[:, cols] = part


def _op(x, trans: int):
    return x if trans == 0 else (x.T if trans == 1 else x.conj().T)
