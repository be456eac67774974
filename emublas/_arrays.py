"""Array-library plumbing shared by the front and the backends.

numpy arrays compute on the CPU, cupy arrays on their GPU.  cupy is never
imported unless a cupy array is actually passed in, so ``import emublas`` and
every CPU call stay free of the CUDA start-up cost.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import numpy as np

__all__ = [
    "is_cupy",
    "namespace",
    "device_of",
    "as_matrix",
    "real_scalar",
    "complex_scalar",
    "flag",
    "overwrite_flag",
    "Operand",
    "Matrix",
]

#: What the routines accept as an operand: a numpy or cupy array, or anything
#: ``numpy.asarray`` reads (cupy has no type information, hence ``Any``).
Operand = Any
#: What the routines return: a 2-D ``numpy.ndarray`` or ``cupy.ndarray``.
Matrix = Any


def is_cupy(x: Any) -> bool:
    """True for a ``cupy.ndarray`` (checked without importing cupy).

    Parameters
    ----------
    x : object

    Returns
    -------
    bool
    """
    t = type(x)
    known = _CUPY_TYPE.get(t)
    if known is None:  # the front asks several times per call: the answer per type is kept
        known = _CUPY_TYPE[t] = t.__module__.split(".", 1)[0] == "cupy" and hasattr(t, "__cuda_array_interface__")
    return known


_CUPY_TYPE: dict[type, bool] = {np.ndarray: False, type(None): False}


def namespace(**arrays: Any):
    """The array module (numpy or cupy) that the named arguments live in.

    Lists, scalars and ``None`` follow the others; numpy and cupy arrays in
    the same call are an error, and so are cupy arrays on different devices.

    Parameters
    ----------
    **arrays
        The call's operands by argument name (the names appear in errors).

    Returns
    -------
    module
        ``numpy``, or ``cupy`` when any operand is a cupy array.

    Raises
    ------
    TypeError
        numpy and cupy arrays mixed; the message names the arguments.
    ValueError
        cupy arrays on different GPUs.
    """
    for x in arrays.values():
        if x is not None and type(x) is not np.ndarray:
            break
    else:
        return np  # the common numpy call, without building the error's tables
    on_gpu: dict[str, int] = {}  # name: device id (the pointer's, without building a Device)
    on_cpu = []
    for name, x in arrays.items():
        if is_cupy(x):
            on_gpu[name] = x.data.device_id
        elif isinstance(x, np.ndarray):
            on_cpu.append(name)
    if not on_gpu:
        return np
    if on_cpu:
        raise TypeError(
            f"emublas: {', '.join(on_cpu)} {'is a numpy.ndarray' if len(on_cpu) == 1 else 'are numpy.ndarrays'}"
            f" but {', '.join(on_gpu)} {'is a cupy.ndarray' if len(on_gpu) == 1 else 'are cupy.ndarrays'};"
            " pass all arrays on the same device (cupy.asarray / cupy.asnumpy)"
        )
    if len(set(on_gpu.values())) > 1:
        where = ", ".join(f"{n} on GPU {d}" for n, d in on_gpu.items())
        raise ValueError(f"emublas: arrays live on different GPUs ({where})")
    import cupy

    return cupy


_NO_DEVICE = contextlib.nullcontext()  # reusable: it holds no state


def device_of(xp, *arrays: Any):
    """Context manager that makes the arrays' GPU current (no-op on the CPU).

    Parameters
    ----------
    xp : module
        The namespace :func:`namespace` returned.
    *arrays
        The operands; the first cupy array among them decides the device.

    Returns
    -------
    context manager
        A ``cupy.cuda.Device`` (the current one when no operand is a cupy
        array), or a null context for numpy.
    """
    if xp is np:
        return _NO_DEVICE
    for x in arrays:
        if is_cupy(x):
            return x.device
    return xp.cuda.Device()


def as_2d(arr: Any, name: str) -> Any:
    """A scalar as 1×1, a 1-D array as a column, a 2-D array as is.

    Parameters
    ----------
    arr : array
        A numpy, cupy or dask array.
    name : str
        The argument's name, for the error message.

    Returns
    -------
    array
        A 2-D view of ``arr``.

    Raises
    ------
    ValueError
        ``arr`` has more than two dimensions.
    """
    if arr.ndim == 0:
        return arr.reshape(1, 1)
    if arr.ndim == 1:
        return arr.reshape(-1, 1)
    if arr.ndim != 2:
        # scipy's wrapper folds away axes of length 1 here; emublas does not guess a layout
        raise ValueError(
            f"{name} must be a 2-D array (a scalar or 1-D array is read as a column), got"
            f" {arr.ndim}-D with shape {arr.shape}; reshape it to 2-D"
        )
    return arr


def as_matrix(x: Any, dtype: np.dtype, xp, name: str):
    """Convert ``x`` to a 2-D array of ``dtype`` the way scipy's BLAS wrappers do.

    A scalar becomes 1×1 and a 1-D array a column; the memory layout is kept
    (no copy when the dtype already matches), so transposed views stay views.

    Parameters
    ----------
    x : array_like
        The operand as the caller passed it.
    dtype : numpy.dtype
        The routine's dtype.
    xp : module
        numpy or cupy (lists and scalars go to this namespace).
    name : str
        The argument's name, for error messages.

    Returns
    -------
    array
        2-D, of ``dtype``, in ``xp``.

    Raises
    ------
    TypeError
        Python complex numbers for a real routine, or a non-numeric dtype.
    ValueError
        More than two dimensions, or strings that do not parse as numbers.
    """
    if xp is np:
        arr = np.asarray(x)
    else:
        arr = x if is_cupy(x) else xp.asarray(np.asarray(x))
    if dtype.kind == "f" and arr.dtype.kind == "c" and not (isinstance(x, np.ndarray) or is_cupy(x)):
        # as scipy: Python complex numbers cannot become real (a complex array only warns, below)
        raise TypeError(
            f"{name} holds complex numbers but the routine is real ({dtype}); pass the real part,"
            " or use the complex routine"
        )
    if arr.dtype.kind not in "biufc":
        # Let numpy raise its own conversion error for strings; reject the rest.
        if arr.dtype.kind in "USO":
            arr = arr.astype(dtype)
        else:
            raise TypeError(f"{name} has dtype {arr.dtype}, which is not numeric")
    arr = as_2d(arr, name)
    if arr.dtype != dtype:
        arr = arr.astype(dtype)  # complex -> real warns (ComplexWarning), as in scipy
    return arr


def _item(value: Any, name: str) -> Any:
    if isinstance(value, (int, float, complex)):
        return value
    if (
        value is None
        or not isinstance(value, (str, np.ndarray, np.generic, list, tuple))
        and not hasattr(value, "__float__")
        and not hasattr(value, "__complex__")
        and not hasattr(value, "item")
    ):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        return value.item()
    arr = np.asarray(value)
    if arr.size != 1:
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    return arr.reshape(()).item()


_PLAIN_NUMBERS = (float, int, complex)


def real_scalar(value: Any, name: str) -> float:
    """A real BLAS scalar; complex input keeps only its real part, as BLAS reads it.

    Parameters
    ----------
    value : number or array_like of one element
    name : str
        The argument's name (``alpha``, ``beta``), for error messages.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        Not a number (``None``, other objects), as scipy.
    ValueError
        A string that does not parse, or an array of more than one element.
    """
    kind = type(value)
    if kind is float:  # the usual calls (exact types: subclasses take the general path)
        return value
    if kind is int:
        return float(value)
    v = _item(value, name)
    try:
        return float(v.real) if isinstance(v, complex) else float(v)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name} = {value!r} cannot be converted to a real number") from exc


def complex_scalar(value: Any, name: str) -> complex:
    """A complex BLAS scalar.

    Parameters
    ----------
    value : number or array_like of one element
    name : str
        The argument's name (``alpha``, ``beta``), for error messages.

    Returns
    -------
    complex

    Raises
    ------
    TypeError
        Strings and what is not a number, as scipy.
    ValueError
        An array of more than one element.
    """
    if type(value) in _PLAIN_NUMBERS:  # the usual call: what _item returns unchanged
        return complex(value)
    v = _item(value, name)
    if isinstance(v, str):
        raise TypeError(f"{name} = {value!r} is a string, not a complex number")
    try:
        return complex(v)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} = {value!r} cannot be converted to a complex number") from exc


def flag(value: Any, name: str, allowed: tuple[int, ...], default: int = 0) -> int:
    """An integer code (trans, lower, side, diag) restricted to ``allowed``.

    As scipy's wrapper reads it: ``None`` is the default, a real number is
    truncated toward zero (``1.5`` is 1).

    Parameters
    ----------
    value : int, float or None
    name : str
        The argument's name, for error messages.
    allowed : tuple of int
        The legal codes.
    default : int, optional
        The code ``None`` stands for.

    Returns
    -------
    int
        One of ``allowed``.

    Raises
    ------
    TypeError
        Strings, complex numbers and what is not a number.
    ValueError
        A code outside ``allowed`` (NaN and infinities included).
    """
    if type(value) is int and value in allowed:  # the usual call (bool is not int here)
        return value
    if value is None:
        return default
    try:
        code = operator.index(value)
    except TypeError:
        if isinstance(value, (str, bytes, complex)) or not hasattr(value, "__float__"):
            raise TypeError(f"{name} must be an integer code {allowed}, got {type(value).__name__} {value!r}") from None
        real = float(value)
        if real != real or abs(real) == float("inf"):
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}") from None
        code = int(real)
    if code not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return code


def overwrite_flag(value: Any) -> bool:
    """``overwrite_c`` as scipy reads it: any nonzero integer is on.

    Parameters
    ----------
    value : int

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        Not an integer.
    """
    try:
        return operator.index(value) != 0
    except TypeError:
        raise TypeError(f"overwrite_c must be an integer (0 or 1), got {type(value).__name__} {value!r}") from None
