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
from types import ModuleType
from typing import Any

import numpy as np

from .._env import env_int
from ..errors import BackendUnavailableError

__all__ = [
    "IMPLS",
    "available",
    "load_error",
    "features",
    "default_threads",
    "kernel_name",
    "i8gemm",
    "vnni_peak_probe",
    "oz_kernel_name",
    "oz_residues",
    "oz_row_stats",
    "oz_bound_int8",
    "oz_residues_cplx",
    "oz_residues_3m",
    "oz_crt_accumulate",
    "oz_crt_finalize",
]

#: Valid values of the ``impl`` argument of :func:`i8gemm`.
IMPLS: tuple[str, ...] = ("auto", "generic", "vnni")
_IMPL_CODES = {"auto": 0, "generic": 1, "vnni": 2}

#: Environment variable that sets the default thread count.
ENV_THREADS = "EMUBLAS_NUM_THREADS"

_load_lock = threading.Lock()
_module: ModuleType | None = None
_error: str | None = None
_tried = False
_features: dict[str, bool] | None = None


def _load() -> ModuleType | None:
    """Import the extension once; remember the error instead of raising."""
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


def _require() -> tuple[Any, Any]:
    mod = _load()
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
    return _load() is not None


def load_error() -> str | None:
    """Why the C extension could not be imported.

    Returns
    -------
    str or None
        The exception type and message, or None when it loaded.
    """
    _load()
    return _error


def features() -> dict[str, bool]:
    """CPU features the kernels can use here (CPU and OS support).

    Returns
    -------
    dict of str to bool
        ``avx512_vnni`` (avx512f+bw+vl+vnni: the fast int8 GEMM) and
        ``avx512_vpopcntdq`` (avx512f+vpopcntdq).  All False when the
        extension is missing.
    """
    global _features
    if _features is None:
        mod = _load()
        mask = mod.lib.emublas_cpu_features() if mod is not None else 0
        vnni = mod.lib.EMUBLAS_CPU_AVX512_VNNI if mod is not None else 1
        popc = mod.lib.EMUBLAS_CPU_AVX512_VPOPCNTDQ if mod is not None else 2
        _features = {"avx512_vnni": bool(mask & vnni), "avx512_vpopcntdq": bool(mask & popc)}
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


def _check_vnni(impl: str) -> None:
    if impl == "vnni" and not features()["avx512_vnni"]:
        raise RuntimeError(
            "impl='vnni' needs AVX-512 VNNI (avx512f, avx512bw, avx512vl, avx512vnni), "
            "which this CPU or OS does not provide; use impl='auto' or 'generic'"
        )


def kernel_name(impl: str = "auto") -> str:
    """Name of the kernel that ``impl`` runs on this CPU.

    Parameters
    ----------
    impl : {"auto", "generic", "vnni"}

    Returns
    -------
    str
        ``"avx512_vnni"``, ``"generic_avx2"`` (the portable C kernel built for
        AVX2+FMA) or ``"generic"`` (the same C for the baseline ISA).
    """
    code = _impl_code(impl)
    ffi, lib = _require()
    _check_vnni(impl)
    return ffi.string(lib.emublas_i8gemm_kernel_name(code)).decode()


def _threads(threads: int | None) -> int:
    if threads is None:
        return default_threads()
    n = operator.index(threads)  # TypeError for floats, strings, ...
    if n <= 0:
        raise ValueError(f"threads={threads!r} must be a positive integer")
    return n


def _check_operand(x: Any, name: str, dtype: type) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != dtype:
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    return x


def _elem_strides(x: np.ndarray) -> tuple[int, int] | None:
    """Element strides, or None when a byte stride is not a whole element."""
    s0, s1 = x.strides
    size = x.itemsize
    if s0 % size or s1 % size:
        return None
    return s0 // size, s1 // size


def _ptr(ffi: Any, ctype: str, x: np.ndarray) -> Any:
    return ffi.cast(ctype, x.__array_interface__["data"][0])


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
    impl : {"auto", "generic", "vnni"}, default "auto"
        ``auto`` picks AVX-512 VNNI where available, else the portable C
        kernel; all give identical results.
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
        ``impl="vnni"`` on a CPU without AVX-512 VNNI
        (:class:`emublas.errors.BackendUnavailableError`, a RuntimeError,
        when the C extension is missing).
    MemoryError
        Packing buffers could not be allocated.
    """
    code = _impl_code(impl)
    nthreads = _threads(threads)
    a = _check_operand(a, "a", np.int8)
    b = _check_operand(b, "b", np.int8)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(
            f"inner dimensions differ: a is {m}x{k} (m x k) but b is {k2}x{n} (k x n)"
        )
    if out is None:
        if accumulate:
            raise ValueError("accumulate=True needs an out array to accumulate into")
        out = np.empty((m, n), dtype=np.int32, order="F")
    else:
        out = _check_operand(out, "out", np.int32)
        if out.shape != (m, n):
            raise ValueError(
                f"out has shape {out.shape[0]}x{out.shape[1]}, expected m x n = {m}x{n} "
                f"(a is {m}x{k}, b is {k}x{n})"
            )
        if not out.flags.writeable:
            raise ValueError("out is read-only")
    ffi, lib = _require()
    _check_vnni(impl)
    if m == 0 or n == 0:
        return out

    # Compute into a scratch array when out's memory cannot be handed to C
    # as it is: unaligned, strides that are not whole elements, elements
    # that alias each other (zero strides), or memory shared with the inputs.
    sc = _elem_strides(out)
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
    rsa, csa = _elem_strides(a)  # type: ignore[misc]  # int8: always whole elements
    rsb, csb = _elem_strides(b)  # type: ignore[misc]
    rsc, csc = _elem_strides(target)  # type: ignore[misc]
    rc = lib.emublas_i8gemm(
        code, m, n, k,
        _ptr(ffi, "const int8_t *", a), rsa, csa,
        _ptr(ffi, "const int8_t *", b), rsb, csb,
        _ptr(ffi, "int32_t *", target), rsc, csc,
        1 if accumulate else 0, nthreads,
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
    nthreads = _threads(threads)
    if operator.index(iters) <= 0:
        raise ValueError(f"iters={iters!r} must be positive")
    _, lib = _require()
    return float(lib.emublas_vnni_peak_probe(nthreads, iters))



# ---------------------------------------------------------------------------
# Ozaki scheme II: the passes around the int8 GEMMs (native/cpu/ozaki_*.c)
# ---------------------------------------------------------------------------

_OUT_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1,
               np.dtype(np.complex64): 2, np.dtype(np.complex128): 3}


def oz_kernel_name() -> str:
    """``"avx512"`` or ``"generic"``: the implementation the ``oz_*`` kernels use here."""
    ffi, lib = _require()
    return ffi.string(lib.emublas_oz_kernel_name()).decode()


def _oz_check(rc: int, what: str) -> None:
    _, lib = _require()
    if rc == lib.EMUBLAS_OK:
        return
    if rc == lib.EMUBLAS_ENOMEM:
        raise MemoryError(f"emublas {what}: out of memory")
    if rc == lib.EMUBLAS_ERANGE:
        raise ValueError(f"emublas {what}: non-finite input (NaN/Inf, or x * 2**shift overflowed)")
    raise ValueError(f"emublas {what}: invalid arguments (code {rc})")


def _oz_float_input(x: Any, name: str) -> tuple[np.ndarray, int, int, int]:
    """A 2-D float32/float64 array C can read: (array, dtype code, rs, cs)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must have dtype float32 or float64, got {x.dtype} "
                        "(pass complex arrays as .real and .imag views)")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    st = _elem_strides(x)
    if st is None or not x.flags.aligned:
        x = np.array(x, order="F")
        st = _elem_strides(x)
    return x, (1 if x.dtype == np.float64 else 0), st[0], st[1]  # type: ignore[index]


def _int32_vector(v: Any, length: int, name: str) -> np.ndarray:
    a = np.asarray(v)
    if a.ndim != 1 or a.shape[0] != length:
        raise ValueError(f"{name} must be 1-D of length {length}, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{name} has values outside int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def _moduli_vector(moduli: Any) -> np.ndarray:
    mods = np.asarray(moduli)
    if mods.ndim != 1:
        raise ValueError(f"moduli must be a 1-D sequence, got shape {mods.shape}")
    if mods.size and mods.dtype.kind not in "iu":
        raise TypeError(f"moduli must be integers, got dtype {mods.dtype}")
    limit = _require()[1].EMUBLAS_OZ_MAX_MODULI  # the compiled kernels' (native/include/emublas_constants.h)
    if mods.size > limit:
        raise ValueError(f"at most {limit} moduli per call, got {mods.size}")
    if mods.size and (mods.min() < 2 or mods.max() > 256):
        raise ValueError("every modulus must be in 2..256")
    return np.ascontiguousarray(mods, dtype=np.int32)


def _planes_out(out: Any, planes: int, rows: int, cols: int, like: np.ndarray) -> np.ndarray:
    if out is None:
        if abs(like.strides[0]) <= abs(like.strides[1]):  # column-major-ish input: F planes
            return np.empty((planes, cols, rows), dtype=np.int8).transpose(0, 2, 1)
        return np.empty((planes, rows, cols), dtype=np.int8)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != np.int8:
        raise TypeError(f"out must have dtype int8, got {out.dtype}")
    if out.shape != (planes, rows, cols):
        raise ValueError(f"out has shape {out.shape}, expected {(planes, rows, cols)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


def _axis(axis: Any) -> int:
    if axis not in (0, 1):
        raise ValueError(f"axis must be 0 (shift per row) or 1 (shift per column), got {axis!r}")
    return int(axis)


def oz_residues(
    x: np.ndarray,
    shift: Any,
    axis: int,
    moduli: Any,
    out: np.ndarray | None = None,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """Symmetric int8 residues of ``trunc(x * 2**shift)`` for each modulus.

    Parameters
    ----------
    x : numpy.ndarray, float32 or float64, shape (rows, cols)
        Finite values, any strides.
    shift : sequence of int
        ``rows`` shifts (``axis=0``: one per row) or ``cols`` (``axis=1``).
    axis : {0, 1}
    moduli : sequence of int
        Each in 2..256, at most 64.
    out : numpy.ndarray, int8, shape (len(moduli), rows, cols), optional
        Any strides (e.g. planes of a bigger buffer).  New array otherwise.
    threads : int, optional

    Returns
    -------
    numpy.ndarray
        ``out[l, i, j] = y mod moduli[l]`` in [-(m-1)/2, (m-1)/2] (odd m) or
        [-m/2, m/2-1] (even m), y the exact ``trunc(x[i, j] * 2**shift)``.

    Raises
    ------
    ValueError
        Bad shapes or moduli, or a non-finite scaled element.
    """
    nthreads = _threads(threads)
    x, code, rs, cs = _oz_float_input(x, "x")
    rows, cols = x.shape
    ax = _axis(axis)
    sh = _int32_vector(shift, rows if ax == 0 else cols, "shift")
    mods = _moduli_vector(moduli)
    out = _planes_out(out, mods.size, rows, cols, x)
    ffi, lib = _require()
    if out.size == 0:
        return out
    ps, rso, cso = out.strides
    rc = lib.emublas_oz_residues(
        code, rows, cols, _ptr(ffi, "const void *", x), rs, cs,
        _ptr(ffi, "const int32_t *", sh), ax, mods.size, _ptr(ffi, "const int32_t *", mods),
        _ptr(ffi, "int8_t *", out), ps, rso, cso, nthreads)
    _oz_check(rc, "oz_residues")
    return out


def _complex_parts(xr: Any, xi: Any) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    xr, code, rs, cs = _oz_float_input(xr, "xr")
    xi, code_i, rs_i, cs_i = _oz_float_input(xi, "xi")
    if xr.shape != xi.shape:
        raise ValueError(f"xr and xi shapes differ: {xr.shape} vs {xi.shape}")
    if code != code_i:
        raise TypeError(f"xr and xi dtypes differ: {xr.dtype} vs {xi.dtype}")
    if (rs, cs) != (rs_i, cs_i):  # e.g. a transposed xi: give both one layout
        xr = np.asfortranarray(xr)
        xi = np.asfortranarray(xi)
        rs, cs = _elem_strides(xr)  # type: ignore[misc]
    return xr, xi, code, rs, cs


def _oz_cplx(kind: str, xr, xi, shift, axis, moduli, roots, conj, out, threads) -> np.ndarray:
    nthreads = _threads(threads)
    xr, xi, code, rs, cs = _complex_parts(xr, xi)
    rows, cols = xr.shape
    ax = _axis(axis)
    sh = _int32_vector(shift, rows if ax == 0 else cols, "shift")
    mods = _moduli_vector(moduli)
    per = 2 if kind == "2m" else 3
    if kind == "2m":
        rts = _int32_vector(roots, mods.size, "roots")
        bad = [(int(m), int(s)) for m, s in zip(mods, rts) if (int(s) * int(s) + 1) % int(m)]
        if bad:
            raise ValueError(f"roots must satisfy s*s == -1 (mod m); not so for (m, s) = {bad}")
    out = _planes_out(out, per * mods.size, rows, cols, xr)
    ffi, lib = _require()
    if out.size == 0:
        return out
    ps, rso, cso = out.strides
    args_x = (code, rows, cols, _ptr(ffi, "const void *", xr), _ptr(ffi, "const void *", xi), rs, cs,
              _ptr(ffi, "const int32_t *", sh), ax, 1 if conj else 0, mods.size,
              _ptr(ffi, "const int32_t *", mods))
    args_o = (_ptr(ffi, "int8_t *", out), ps, rso, cso, nthreads)
    if kind == "2m":
        rc = lib.emublas_oz_residues_cplx(*args_x, _ptr(ffi, "const int32_t *", rts), *args_o)
    else:
        rc = lib.emublas_oz_residues_3m(*args_x, *args_o)
    _oz_check(rc, f"oz_residues_{'cplx' if kind == '2m' else '3m'}")
    return out


def _oz_parts(x: np.ndarray):
    """(xr, xi or None, dtype code, row stride, column stride) of a real or complex matrix."""
    if x.dtype.kind == "c":
        xr, xi, code, rs, cs = _complex_parts(x.real, x.imag)
        return xr, xi, code, rs, cs
    xr, code, rs, cs = _oz_float_input(x, "x")
    return xr, None, code, rs, cs


def oz_row_stats(
    x: np.ndarray,
    *,
    threads: int | None = None,
    carry: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row ``max|x|``, ``sum|x|^2`` and ``sum|x|`` in one pass (|x| the complex modulus).

    A row holding NaN or Inf gets a non-finite maximum.  The sums may
    overflow or underflow for rows of extreme magnitude; the caller redoes
    those with scaling.

    ``carry``: the statistics of the columns to the left of ``x`` (as returned
    by an earlier call); the sums continue from them, column by column, so
    feeding the column blocks of a matrix in order gives results bit-identical
    to one call on the whole matrix.  New arrays are returned either way.
    """
    nthreads = _threads(threads)
    xr, xi, code, rs, cs = _oz_parts(x)
    rows, cols = xr.shape
    if carry is None:
        out = [np.empty(rows) for _ in range(3)]
    else:
        out = [np.array(v, dtype=np.float64, copy=True) for v in carry]
        if any(o.shape != (rows,) for o in out):
            raise ValueError(f"carry must be three float64 vectors of length {rows}")
    ffi, lib = _require()
    kernel = lib.emublas_oz_row_stats if carry is None else lib.emublas_oz_row_stats_carry
    rc = kernel(
        code, rows, cols, _ptr(ffi, "const void *", xr),
        ffi.NULL if xi is None else _ptr(ffi, "const void *", xi), rs, cs,
        *(_ptr(ffi, "double *", o) for o in out), nthreads)
    _oz_check(rc, "oz_row_stats")
    return out[0], out[1], out[2]


def oz_bound_int8(x: np.ndarray, ea: Any, *, threads: int | None = None) -> np.ndarray:
    """``ceil(127·|x|·2**-ea[row])`` as a C-ordered int8 matrix (entrywise upper bounds)."""
    nthreads = _threads(threads)
    xr, xi, code, rs, cs = _oz_parts(x)
    rows, cols = xr.shape
    e = _int32_vector(ea, rows, "ea")
    out = np.empty((rows, cols), np.int8)
    ffi, lib = _require()
    rc = lib.emublas_oz_bound_int8(
        code, rows, cols, _ptr(ffi, "const void *", xr),
        ffi.NULL if xi is None else _ptr(ffi, "const void *", xi), rs, cs,
        _ptr(ffi, "const int32_t *", e), _ptr(ffi, "int8_t *", out), cols, 1, nthreads)
    _oz_check(rc, "oz_bound_int8")
    return out


def oz_residues_cplx(
    xr: np.ndarray,
    xi: np.ndarray,
    shift: Any,
    axis: int,
    moduli: Any,
    roots: Any,
    *,
    conj: bool = False,
    out: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """2M residues of a complex matrix given as real and imaginary parts.

    With ``yr = trunc(xr * 2**shift)``, ``yi = ±trunc(xi * 2**shift)`` (minus
    when ``conj``) and ``s = roots[l]`` (``s*s == -1 mod m``), plane ``2l`` is
    ``(yr + s*yi) mod m`` and plane ``2l+1`` is ``(yr - s*yi) mod m``
    (symmetric int8).  ``xr``/``xi`` are float32/float64 arrays of one shape
    and dtype (``z.real``/``z.imag`` views of a complex array work, as do two
    column blocks of one real matrix).  ``out``: int8, shape
    (2*len(moduli), rows, cols), any strides.
    """
    return _oz_cplx("2m", xr, xi, shift, axis, moduli, roots, conj, out, threads)


def oz_residues_3m(
    xr: np.ndarray,
    xi: np.ndarray,
    shift: Any,
    axis: int,
    moduli: Any,
    *,
    conj: bool = False,
    out: np.ndarray | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """3M residues: planes ``3l, 3l+1, 3l+2`` = ``yr, yi, yr + yi`` mod ``moduli[l]``
    (see :func:`oz_residues_cplx`).  ``out``: int8, shape (3*len(moduli), rows, cols)."""
    return _oz_cplx("3m", xr, xi, shift, axis, moduli, None, conj, out, threads)


def _acc_array(a: Any, name: str, shape: tuple[int, int]) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != np.float64:
        raise TypeError(f"{name} must have dtype float64, got {a.dtype}")
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    m = shape[0]
    if a.size and not (a.flags.f_contiguous or (a.strides[0] == 8 and (shape[1] <= 1 or a.strides[1] == 8 * m))):
        raise ValueError(f"{name} must be Fortran-ordered (column-major, leading dimension m)")
    if not a.flags.aligned:
        raise ValueError(f"{name} must be aligned")
    return a


def _uplo(uplo: Any) -> int:
    codes = {0: 0, 1: 1, 2: 2, "A": 0, "U": 1, "L": 2}
    if isinstance(uplo, str):
        uplo = uplo.upper()
    if uplo not in codes:
        raise ValueError(f"uplo must be 0 (all), 1/'U' (i <= j) or 2/'L' (i >= j), got {uplo!r}")
    return codes[uplo]


def _int32_matrix(x: Any, name: str) -> tuple[np.ndarray, int, int]:
    x = _check_operand(x, name, np.int32)
    st = _elem_strides(x)
    if st is None or not x.flags.aligned:
        x = np.array(x, order="F")
        st = _elem_strides(x)
    return x, st[0], st[1]  # type: ignore[index]


def _weight(w: Any, name: str) -> int:
    w = operator.index(w)
    if not -(2**16) < w < 2**16:
        raise ValueError(f"{name}={w} out of range (|w| < 2**16)")
    return w


def oz_crt_accumulate(
    x1: np.ndarray,
    w1: int,
    modulus: int,
    big_hi: float,
    big_lo: float,
    acc_hi: np.ndarray,
    acc_lo: np.ndarray,
    *,
    x2: np.ndarray | None = None,
    w2: int = 0,
    first: bool = False,
    uplo: Any = 0,
    threads: int | None = None,
) -> None:
    """Fused ``t = (w1*x1 + w2*x2) mod modulus`` and double-double CRT accumulation.

    ``(acc_hi, acc_lo) = (first ? 0 : (acc_hi, acc_lo)) + t * (big_hi + big_lo)``
    in place, for all entries (``uplo=0``), ``i <= j`` (1 or ``'U'``) or
    ``i >= j`` (2 or ``'L'``); others are left alone.

    Parameters
    ----------
    x1 : numpy.ndarray, int32, shape (m, n)
        Any strides.
    w1, w2 : int
        Weights, ``|w| < 2**16``.
    modulus : int
        ``2 <= modulus < 2**31``.
    big_hi, big_lo : float
        ``P/m`` split into two doubles.
    acc_hi, acc_lo : numpy.ndarray, float64, shape (m, n), Fortran-ordered
    x2 : numpy.ndarray, int32, shape (m, n), optional
        May share memory with x1 (e.g. ``x1.T``).
    """
    nthreads = _threads(threads)
    x1, rs1, cs1 = _int32_matrix(x1, "x1")
    m, n = x1.shape
    w1 = _weight(w1, "w1")
    w2 = _weight(w2, "w2")
    if x2 is not None:
        x2, rs2, cs2 = _int32_matrix(x2, "x2")
        if x2.shape != (m, n):
            raise ValueError(f"x2 has shape {x2.shape}, expected {(m, n)}")
    else:
        rs2 = cs2 = 0
    modulus = operator.index(modulus)
    if not 2 <= modulus < 2**31:
        raise ValueError(f"modulus={modulus} must be in 2 .. 2**31-1")
    acc_hi = _acc_array(acc_hi, "acc_hi", (m, n))
    acc_lo = _acc_array(acc_lo, "acc_lo", (m, n))
    for a in (acc_hi, acc_lo):
        if not a.flags.writeable:
            raise ValueError("acc_hi and acc_lo must be writeable")
    if np.may_share_memory(acc_hi, acc_lo):
        raise ValueError("acc_hi and acc_lo must not overlap")
    code = _uplo(uplo)
    ffi, lib = _require()
    if m == 0 or n == 0:
        return
    rc = lib.emublas_oz_crt_accumulate(
        m, n, _ptr(ffi, "const int32_t *", x1), rs1, cs1, w1,
        _ptr(ffi, "const int32_t *", x2) if x2 is not None else ffi.NULL, rs2, cs2, w2,
        modulus, float(big_hi), float(big_lo),
        _ptr(ffi, "double *", acc_hi), _ptr(ffi, "double *", acc_lo),
        1 if first else 0, code, nthreads)
    _oz_check(rc, "oz_crt_accumulate")


def _cert_struct(ffi, cert: dict, m: int, n: int):
    """The ``emublas_oz_cert`` struct of a certificate dict, and the arrays it points into."""
    c = ffi.new("emublas_oz_cert *")
    keep = []

    def vec(key, dtype, size):
        v = np.require(cert[key], dtype, ["C", "A"])
        if v.shape != (size,):
            raise ValueError(f"cert[{key!r}] must have length {size}, got shape {v.shape}")
        keep.append(v)
        return _ptr(ffi, "double *" if dtype == np.float64 else "int32_t *", v)

    c.row_err, c.col_err = vec("row_err", np.float64, m), vec("col_err", np.float64, n)
    c.crt_err, c.target = float(cert["crt_err"]), float(cert["target"])
    w = cert.get("W")
    if w is not None:
        w = np.require(w, np.int32, ["F", "A"])
        if w.shape != (m, n):
            raise ValueError(f"cert['W'] must have shape {(m, n)}, got {w.shape}")
        keep.append(w)
        c.W, c.ldw = _ptr(ffi, "int32_t *", w), m
        c.row_wsum, c.col_wsum = vec("row_wsum", np.float64, m), vec("col_wsum", np.float64, n)
        c.row_budget, c.col_budget = vec("row_budget", np.int32, m), vec("col_budget", np.int32, n)
    c.fix = int(bool(cert.get("fix")))
    if cert.get("L") is not None:  # the fallback, also for rows with NaN/Inf whatever fix says
        L, R = cert["L"], cert["R"]
        if L.shape[0] != m or R.shape[0] != n or L.shape[1] != R.shape[1]:
            raise ValueError(f"cert factors must be ({m}, k) and ({n}, k), got {L.shape} and {R.shape}")
        lr, li, code, rsl, csl = _oz_parts(L)
        rr, ri, code_r, rsr, csr = _oz_parts(R)
        if code != code_r or (li is None) != (ri is None):
            raise TypeError("cert factors must share one dtype")
        keep += [lr, li, rr, ri]
        c.dtype, c.k = code, L.shape[1]
        c.Lr, c.Rr = _ptr(ffi, "void *", lr), _ptr(ffi, "void *", rr)
        c.Li = ffi.NULL if li is None else _ptr(ffi, "void *", li)
        c.Ri = ffi.NULL if ri is None else _ptr(ffi, "void *", ri)
        c.rsl, c.csl, c.rsr, c.csr = rsl, csl, rsr, csr
        c.conj_l, c.conj_r = int(bool(cert.get("conj_l"))), int(bool(cert.get("conj_r")))
    c.uncertified = 0
    return c, keep


def oz_crt_finalize(
    re_hi: np.ndarray,
    re_lo: np.ndarray,
    P_hi: float,
    P_lo: float,
    row_shift: Any,
    col_shift: Any,
    out: np.ndarray,
    *,
    im_hi: np.ndarray | None = None,
    im_lo: np.ndarray | None = None,
    alpha: complex = 1.0,
    beta: complex = 0.0,
    uplo: Any = 0,
    cert: dict | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """CRT finalize: symmetric representative, unscaling, alpha/beta, write-out.

    For each selected entry, ``C' = S - round(S/P)*P`` (S = hi + lo, needs
    ``|C'| <= P/4``), ``v = C' * 2**-(row_shift[i] + col_shift[j])`` and
    ``out = alpha*v + beta*out`` computed in double and rounded once to
    ``out``'s dtype.  ``beta == 0`` means ``out`` is not read.

    Parameters
    ----------
    re_hi, re_lo : numpy.ndarray, float64, shape (m, n), Fortran-ordered
        The accumulated real part (from :func:`oz_crt_accumulate`).
    P_hi, P_lo : float
        The product of the moduli split into two doubles.
    row_shift, col_shift : sequences of int, lengths m and n
    out : numpy.ndarray, 2-D float32/float64/complex64/complex128, shape (m, n)
        Any strides; written in place and returned.
    im_hi, im_lo : numpy.ndarray, optional
        The imaginary part (complex ``out`` only).
    alpha, beta : complex
        Imaginary parts ignored for real ``out``.
    uplo : 0, 1/'U' (i <= j) or 2/'L' (i >= j)
    cert : dict, optional
        The per-entry accuracy certificate (``emublas_oz_cert`` in
        ``emublas_cpu.h``): ``row_err``, ``col_err`` (float64 vectors),
        ``crt_err``, ``target`` (floats), ``W`` (int32 (m, n) Fortran array or
        None), ``row_wsum``, ``col_wsum`` (float64), ``row_budget``,
        ``col_budget`` (int32), ``fix`` (bool), ``L``, ``R`` (the factors,
        (m, k) and (n, k)), ``conj_l``, ``conj_r``.  On return
        ``cert["uncertified"]`` holds the number of entries that failed it.
    """
    nthreads = _threads(threads)
    if not isinstance(re_hi, np.ndarray):
        raise TypeError(f"re_hi must be a numpy.ndarray, got {type(re_hi).__name__}")
    if re_hi.ndim != 2:
        raise ValueError(f"re_hi must be 2-D, got shape {re_hi.shape}")
    m, n = re_hi.shape
    re_hi = _acc_array(re_hi, "re_hi", (m, n))
    re_lo = _acc_array(re_lo, "re_lo", (m, n))
    if (im_hi is None) != (im_lo is None):
        raise ValueError("give both im_hi and im_lo, or neither")
    if im_hi is not None:
        im_hi = _acc_array(im_hi, "im_hi", (m, n))
        im_lo = _acc_array(im_lo, "im_lo", (m, n))
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype not in _OUT_DTYPES:
        raise TypeError(f"out must be float32, float64, complex64 or complex128, got {out.dtype}")
    if out.shape != (m, n):
        raise ValueError(f"out has shape {out.shape}, expected {(m, n)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    dcode = _OUT_DTYPES[out.dtype]
    if im_hi is not None and dcode < 2:
        raise ValueError(f"an imaginary part needs a complex out, got {out.dtype}")
    rsh = _int32_vector(row_shift, m, "row_shift")
    csh = _int32_vector(col_shift, n, "col_shift")
    alpha = complex(alpha)
    beta = complex(beta)
    code = _uplo(uplo)
    ffi, lib = _require()
    if m == 0 or n == 0:
        return out
    st = _elem_strides(out)
    target = out
    if st is None or not out.flags.aligned or any(
        np.may_share_memory(out, a) for a in (re_hi, re_lo, im_hi, im_lo) if a is not None
    ):
        target = np.array(out, order="F")
        st = _elem_strides(target)
    cstruct, keep = (ffi.NULL, ()) if cert is None else _cert_struct(ffi, cert, m, n)
    rc = lib.emublas_oz_crt_finalize(
        m, n, _ptr(ffi, "const double *", re_hi), _ptr(ffi, "const double *", re_lo),
        _ptr(ffi, "const double *", im_hi) if im_hi is not None else ffi.NULL,
        _ptr(ffi, "const double *", im_lo) if im_lo is not None else ffi.NULL,
        float(P_hi), float(P_lo),
        _ptr(ffi, "const int32_t *", rsh), _ptr(ffi, "const int32_t *", csh),
        alpha.real, alpha.imag, beta.real, beta.imag,
        dcode, _ptr(ffi, "void *", target), st[0], st[1], code, cstruct, nthreads)  # type: ignore[index]
    _oz_check(rc, "oz_crt_finalize")
    del keep
    if cert is not None:
        cert["uncertified"] = int(cstruct.uncertified)
    if target is not out:
        out[...] = target
    return out
