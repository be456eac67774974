"""Python side of the CPU C kernels (the cffi extension ``emublas._kernels._cpu``).

The extension is imported lazily and failures are remembered rather than
raised, so ``import emublas`` works where it was not built; ``available()``
and ``load_error()`` say what happened.  Calls into the extension release the
GIL.

int8 GEMM arithmetic contract: products and sums are formed in 32-bit
two's-complement arithmetic that wraps modulo 2**32.  The result is exact
modulo 2**32 always, and exact as int32 whenever the true result fits in
int32 -- always when ``k < 2**17`` (each product is at most 2**14 in size).
The caller is responsible for keeping ``k`` small enough; every
implementation and thread count gives bit-identical results.
"""

from __future__ import annotations

import operator
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

from .._env import env_int
from ..errors import BackendUnavailableError
from .operands import check_operand, elem_strides, ptr

__all__ = [
    "IMPLS",
    "set_auto_kernel",
    "available",
    "load_error",
    "features",
    "default_threads",
    "kernel_name",
    "i8gemm",
    "vnni_peak_probe",
    "avx2_peak_probe",
    "kernel_peak_probe",
    "require",
    "load",
    "threads_for",
    "held_pool",
    "pool_team",
]

#: Valid values of the ``impl`` argument of :func:`i8gemm`.
IMPLS: tuple[str, ...] = ("auto", "generic", "avx2", "vnni", "amx")
_IMPL_CODES = {"auto": 0, "generic": 1, "avx2": 5, "vnni": 2, "amx": 4}

#: Environment variable that sets the default thread count.
ENV_THREADS = "EMUBLAS_NUM_THREADS"

_load_lock = threading.Lock()
_module: ModuleType | None = None
_error: str | None = None
_tried = False
_features: dict[str, bool] | None = None


def load() -> ModuleType | None:
    """Import the extension once; remember the error instead of raising.

    Thread-safe: the first call imports under a lock, later calls return what
    it found.  The error, if any, is kept for :func:`load_error`.

    Returns
    -------
    module or None
        The cffi extension ``emublas._kernels._cpu`` (with ``ffi`` and ``lib``),
        or None when it could not be imported.
    """
    global _module, _error, _tried
    if not _tried:
        with _load_lock:
            if not _tried:
                try:
                    from . import _cpu  # type: ignore[attr-defined]

                    _module = _cpu
                except Exception as exc:  # ImportError, or OSError for a broken .so
                    _error = f"{type(exc).__name__}: {exc}"
                _tried = True
    return _module


def require() -> tuple[Any, Any]:
    """The extension's cffi ``ffi`` and ``lib``, or an error saying why there are none.

    Returns
    -------
    ffi : cffi.FFI
        For casts, pointers and C structs (see :func:`ptr`).
    lib : cffi library
        The C functions and constants of ``native/cpu/emublas_cpu.h``.

    Raises
    ------
    emublas.errors.BackendUnavailableError
        The extension did not load; the message gives the import error and how
        to build it.
    """
    mod = load()
    if mod is None:
        raise BackendUnavailableError(
            f"the emublas C extension (emublas._kernels._cpu) is not available: {_error}; "
            "build it with `pip install -e .` or `python native/build.py`"
        )
    return mod.ffi, mod.lib


def available() -> bool:
    """Whether the C extension could be imported.

    Returns
    -------
    bool
        True when ``emublas._kernels._cpu`` loaded.
    """
    return load() is not None


def load_error() -> str | None:
    """Why the C extension could not be imported.

    Returns
    -------
    str or None
        The exception type and message, or None when it loaded.
    """
    load()
    return _error


def features() -> dict[str, bool]:
    """CPU features the kernels can use here (CPU and OS support).

    Returns
    -------
    dict of str to bool
        ``avx512_vnni`` (avx512f+bw+vl+vnni: the fast int8 GEMM),
        ``avx512_vpopcntdq`` (avx512f+vpopcntdq), ``amx_int8`` (AMX tiles
        with int8 products, the OS having granted the tile state: the
        ``impl="amx"`` kernel, which ``"auto"`` does not pick yet) and ``avx2``
        (avx2+fma: the ``impl="avx2"`` kernel).  All False when the extension is missing.
    """
    global _features
    if _features is None:
        mod = load()
        mask = mod.lib.emublas_cpu_features() if mod is not None else 0
        vnni = mod.lib.EMUBLAS_CPU_AVX512_VNNI if mod is not None else 1
        popc = mod.lib.EMUBLAS_CPU_AVX512_VPOPCNTDQ if mod is not None else 2
        amx = mod.lib.EMUBLAS_CPU_AMX_INT8 if mod is not None else 4
        avx2 = mod.lib.EMUBLAS_CPU_AVX2 if mod is not None else 8
        _features = {
            "avx512_vnni": bool(mask & vnni),
            "avx512_vpopcntdq": bool(mask & popc),
            "amx_int8": bool(mask & amx),
            "avx2": bool(mask & avx2),
        }
    return dict(_features)


#: Largest value accepted for ``EMUBLAS_NUM_THREADS`` (the C kernels cap their pools lower).
MAX_THREADS = 4096

# (raw value of EMUBLAS_NUM_THREADS, thread count): the affinity query is a system call and
# default_threads() runs for every kernel call; a changed variable is read again
_threads_cache: tuple[str | None, int] | None = None


def default_threads() -> int:
    """Thread count used when a call does not give one.

    Returns
    -------
    int
        ``EMUBLAS_NUM_THREADS`` when set and not empty, else the CPUs this
        process may run on (``os.sched_getaffinity``), else ``os.cpu_count()``.
        Cached per process; the cache is keyed on the variable's raw value.

    Raises
    ------
    ValueError
        If ``EMUBLAS_NUM_THREADS`` is set but is not an integer in
        ``[1, MAX_THREADS]``; the message names the variable and the range.
    """
    global _threads_cache
    raw = os.environ.get(ENV_THREADS)
    cached = _threads_cache
    if cached is not None and cached[0] == raw:
        return cached[1]
    n = env_int(ENV_THREADS, 0, 1, MAX_THREADS)
    if n == 0:  # unset or empty
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
    _threads_cache = (raw, n)
    return n


def _impl_code(impl: str) -> int:
    if not isinstance(impl, str) or impl not in _IMPL_CODES:
        raise ValueError(f"impl={impl!r} is not one of {', '.join(map(repr, IMPLS))}")
    return _IMPL_CODES[impl]


def _check_supported(impl: str) -> None:
    if impl == "avx2" and not features()["avx2"]:
        raise RuntimeError(
            "impl='avx2' needs AVX2 and FMA, which this CPU or OS does not provide; use impl='auto' or 'generic'"
        )
    if impl == "vnni" and not features()["avx512_vnni"]:
        raise RuntimeError(
            "impl='vnni' needs AVX-512 VNNI (avx512f, avx512bw, avx512vl, avx512vnni), "
            "which this CPU or OS does not provide; use impl='auto' or 'generic'"
        )
    if impl == "amx" and not features()["amx_int8"]:
        raise RuntimeError(
            "impl='amx' needs AMX int8 tiles (amx-tile, amx-int8, with the OS's permission for"
            " the tile state), which this CPU, OS or build does not provide; use impl='auto',"
            " 'vnni' or 'generic'"
        )


def set_auto_kernel(impl: str = "auto") -> None:
    """Make ``impl="auto"`` mean ``impl`` for every later int8 product of the process.

    The Ozaki-II loop's products included; ``"auto"`` restores the built-in choice
    (AMX, else VNNI, else AVX2, else the portable kernel).  For comparing kernels in one process.

    Parameters
    ----------
    impl : {"auto", "generic", "avx2", "vnni", "amx"}

    Raises
    ------
    ValueError
        ``impl`` is not one of the names.
    RuntimeError
        The kernel cannot run on this CPU (or the OS refused the AMX tile state).
    """
    code = _impl_code(impl)
    _, lib = require()
    _check_supported(impl)
    if lib.emublas_i8gemm_set_auto(code) != lib.EMUBLAS_OK:
        raise RuntimeError(f"impl={impl!r} is not supported on this CPU")


def kernel_name(impl: str = "auto") -> str:
    """Name of the kernel that ``impl`` runs on this CPU.

    Parameters
    ----------
    impl : {"auto", "generic", "avx2", "vnni", "amx"}

    Returns
    -------
    str
        ``"amx_int8"``, ``"avx512_vnni"``, ``"avx2"`` (int16 multiply-adds, vpmaddwd),
        ``"generic_avx2"`` (the portable C kernel, float arithmetic, built for AVX2+FMA) or
        ``"generic"`` (the same C for the baseline ISA).
    """
    code = _impl_code(impl)
    ffi, lib = require()
    _check_supported(impl)
    return ffi.string(lib.emublas_i8gemm_kernel_name(code)).decode()


@contextmanager
def held_pool() -> Iterator[None]:
    """Hold the C kernels' thread pool for a sequence of kernel calls (one emulated GEMM).

    While held, the pool's idle workers wait awake for the next kernel instead of
    sleeping (each for at most 5 ms), and sleeping ones are woken at once: a
    worker's wake-up costs tens of microseconds in a VM, several times per call
    otherwise.  On exit they sleep again, so that the BLAS library called next
    gets the cores.  Holds nest and may come from several threads; results do not
    depend on them.  Does nothing where the extension is not built.

    Yields
    ------
    None
        Inside the ``with`` block the pool is held.
    """
    mod = load()
    if mod is None:
        yield
        return
    mod.lib.emublas_pool_hold(1)
    try:
        yield
    finally:
        mod.lib.emublas_pool_hold(0)


def pool_team(threads: int) -> int:
    """The threads a kernel asking for ``threads`` would run on now.

    A parallel region never runs more threads than the CPUs that nothing else is
    running on when it starts: OpenBLAS's workers, for instance, spin for about
    0.1 s after each of its calls, and kernels sharing their CPUs would run at a
    fraction of their speed and push them onto the caller's CPU.  On Linux, where
    this process may use every online CPU, the count is the machine's runnable
    threads (``/proc/loadavg``) less the caller and the pool's own awake workers,
    the smaller of two readings; elsewhere ``threads`` is used as asked.

    Parameters
    ----------
    threads : int
        The threads asked for (values below 1 count as 1).

    Returns
    -------
    int
        Between 1 and ``threads``; ``threads`` itself where the extension is not built.
    """
    mod = load()
    return threads if mod is None else int(mod.lib.emublas_pool_team(int(threads)))


def threads_for(threads: int | None) -> int:
    """The thread count to pass to a C kernel for a ``threads`` argument.

    Parameters
    ----------
    threads : int or None
        What the caller asked for; None means :func:`default_threads`.

    Returns
    -------
    int
        A positive thread count (the C kernels may still use fewer).

    Raises
    ------
    TypeError
        ``threads`` is not an integer (e.g. a float or a string).
    ValueError
        ``threads`` is zero or negative.
    """
    if threads is None:
        return default_threads()
    n = operator.index(threads)  # TypeError for floats, strings, ...
    if n <= 0:
        raise ValueError(f"threads={threads!r} must be a positive integer")
    return n


def i8gemm(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray | None = None,
    *,
    accumulate: bool = False,
    impl: str = "auto",
    threads: int | None = None,
) -> np.ndarray:
    """int8 x int8 -> int32 matrix product, exact modulo 2**32.

    Computes ``out = a @ b`` (or ``out += a @ b`` with ``accumulate``) in
    wrapping 32-bit integer arithmetic: exact whenever the true result fits in
    int32, which is guaranteed for ``k < 2**17``.

    Parameters
    ----------
    a : numpy.ndarray, int8, shape (m, k)
        Any strides (views, transposes, negative steps); never copied.
    b : numpy.ndarray, int8, shape (k, n)
        Any strides.
    out : numpy.ndarray, int32, shape (m, n), optional
        Written in place (any strides) and returned.  Without it a new
        Fortran-ordered array is returned.
    accumulate : bool, default False
        Add the product to ``out`` instead of overwriting it (needs ``out``).
    impl : {"auto", "generic", "avx2", "vnni", "amx"}, default "auto"
        ``auto`` picks AVX-512 VNNI where available, else the AVX2 integer
        kernel where AVX2 is, else the portable C kernel (``generic``, float
        arithmetic); all give identical results.
    threads : int, optional
        Threads to use; default :func:`default_threads`.  Small products run
        on one thread regardless.

    Returns
    -------
    numpy.ndarray
        ``out``, or the new int32 array.

    Raises
    ------
    TypeError
        Inputs that are not numpy arrays of dtype int8 (``out``: int32).
    ValueError
        Non-2-D inputs, non-conforming shapes, a read-only ``out``, a bad
        ``impl`` or ``threads``, ``accumulate`` without ``out``.
    RuntimeError
        ``impl="vnni"`` on a CPU without AVX-512 VNNI, ``impl="amx"`` without AMX int8,
        ``impl="avx2"`` without AVX2
        (:class:`emublas.errors.BackendUnavailableError`, a RuntimeError,
        when the C extension is missing).
    MemoryError
        Packing buffers could not be allocated.
    """
    code = _impl_code(impl)
    nthreads = threads_for(threads)
    a = check_operand(a, "a", np.int8)
    b = check_operand(b, "b", np.int8)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: a is {m}x{k} (m x k) but b is {k2}x{n} (k x n)")
    if out is None:
        if accumulate:
            raise ValueError("accumulate=True needs an out array to accumulate into")
        out = np.empty((m, n), dtype=np.int32, order="F")
    else:
        out = check_operand(out, "out", np.int32)
        if out.shape != (m, n):
            raise ValueError(
                f"out has shape {out.shape[0]}x{out.shape[1]}, expected m x n = {m}x{n} (a is {m}x{k}, b is {k}x{n})"
            )
        if not out.flags.writeable:
            raise ValueError("out is read-only")
    ffi, lib = require()
    _check_supported(impl)
    if m == 0 or n == 0:
        return out

    # Compute into a scratch array when out's memory cannot be handed to C
    # as it is: unaligned, strides that are not whole elements, elements
    # that alias each other (zero strides), or memory shared with the inputs.
    sc = elem_strides(out)
    direct = (
        sc is not None
        and out.flags.aligned
        and (sc[0] != 0 or m == 1)
        and (sc[1] != 0 or n == 1)
        and not np.may_share_memory(out, a)
        and not np.may_share_memory(out, b)
    )
    target = out if direct else np.empty((m, n), dtype=np.int32, order="F")
    if not direct and accumulate:
        target[...] = out
    rsa, csa = elem_strides(a)  # type: ignore[misc]  # int8: always whole elements
    rsb, csb = elem_strides(b)  # type: ignore[misc]
    rsc, csc = elem_strides(target)  # type: ignore[misc]
    rc = lib.emublas_i8gemm(
        code,
        m,
        n,
        k,
        ptr(ffi, "const int8_t *", a),
        rsa,
        csa,
        ptr(ffi, "const int8_t *", b),
        rsb,
        csb,
        ptr(ffi, "int32_t *", target),
        rsc,
        csc,
        1 if accumulate else 0,
        nthreads,
    )
    if rc != lib.EMUBLAS_OK:
        if rc == lib.EMUBLAS_ENOMEM:
            raise MemoryError(f"emublas i8gemm: cannot allocate packing buffers for {m}x{n}x{k}")
        if rc == lib.EMUBLAS_ENOTSUP:
            raise RuntimeError(f"emublas i8gemm: impl={impl!r} is not supported on this CPU")
        raise ValueError(f"emublas i8gemm: invalid arguments (code {rc}) for {m}x{n}x{k}")
    if not direct:
        out[...] = target
    return out


def avx2_peak_probe(threads: int | None = None, iters: int = 10_000_000) -> float:
    """Measure this machine's ceiling for the AVX2 int8 kernel's arithmetic.

    Runs register-only chains of ``vpmaddwd`` + ``vpaddd`` pairs (16 int16 multiply-adds
    each, the pair the ``impl="avx2"`` kernel issues per product) on ``threads`` threads.

    Parameters
    ----------
    threads : int, optional
        Default :func:`default_threads`.
    iters : int, default 10_000_000
        Loop trips per thread (8 pairs each).

    Returns
    -------
    float
        int8 multiply-adds per second over all threads; 0.0 without AVX2 and FMA.
    """
    return _probe("emublas_avx2_peak_probe", threads, iters)


def kernel_peak_probe(threads: int | None = None, iters: int = 10_000_000) -> tuple[float, str]:
    """The measured ceiling of the arithmetic of the int8 kernel ``impl="auto"`` runs here.

    Parameters
    ----------
    threads : int, optional
        Default :func:`default_threads`.
    iters : int, default 10_000_000
        Loop trips per thread.

    Returns
    -------
    rate : float
        int8 multiply-adds per second over all threads (0.0 where neither probe applies).
    instructions : str
        What was timed: ``"vpdpbusd"`` (AVX-512 VNNI), ``"vpmaddwd+vpaddd"`` (AVX2) or ``""``.
    """
    have = features()
    if have["avx512_vnni"]:
        return vnni_peak_probe(threads, iters), "vpdpbusd"
    if have["avx2"]:
        return avx2_peak_probe(threads, iters), "vpmaddwd+vpaddd"
    return 0.0, ""


def vnni_peak_probe(threads: int | None = None, iters: int = 10_000_000) -> float:
    """Measure this machine's AVX-512 VNNI ceiling.

    Runs a register-only chain of independent 512-bit ``vpdpbusd``
    instructions (64 int8 multiply-adds each) on ``threads`` threads.

    Parameters
    ----------
    threads : int, optional
        Default :func:`default_threads`.
    iters : int, default 10_000_000
        Loop trips per thread (24 instructions each).

    Returns
    -------
    float
        int8 multiply-adds per second over all threads; 0.0 without VNNI.
    """
    return _probe("emublas_vnni_peak_probe", threads, iters)


def _probe(name: str, threads: int | None, iters: int) -> float:
    """Run the C ceiling probe ``name`` (multiply-adds per second over all threads)."""
    nthreads = threads_for(threads)
    if operator.index(iters) <= 0:
        raise ValueError(f"iters={iters!r} must be positive")
    _, lib = require()
    _await_team(nthreads)
    probe = getattr(lib, name)
    probe(nthreads, max(1, iters // 20))  # untimed: starts and places the workers
    return float(probe(nthreads, iters))


def _await_team(threads: int, timeout: float = 0.5) -> None:
    """Wait (at most ``timeout`` seconds) until a region of ``threads`` would get them all:
    a ceiling is the whole team's, and OpenBLAS's workers spin for about 0.1 s after its
    start-up and each of its calls (:func:`pool_team`)."""
    end, full = time.monotonic() + timeout, 0
    while full < 2 and time.monotonic() < end:  # two readings in a row (each serves 1 ms)
        full = full + 1 if pool_team(threads) >= threads else 0
        time.sleep(0.005)
