"""emublas GEMM on ``dask.array`` inputs, computed blockwise on the workers.

>>> import dask.array as da, emublas.dask
>>> a = da.random.random((4000, 3000), chunks=1000)
>>> b = da.random.random((3000, 2000), chunks=1000)
>>> c = emublas.dask.matmul(a, b, backend="ozaki2").compute()

``backend="ozaki2"``: the partial products over k-blocks are summed as exact
residues and the CRT runs once per output block, so the result is bit for bit
the single-process ``emublas.gemm(..., backend="ozaki2")`` result on the
whole arrays, whatever the chunks and the cluster (see
:mod:`emublas.backends.ozaki2.distributed`).  Other backends: one emublas gemm per
(i, j, l) block triple, accumulated over the k-blocks in floating point
(``beta = 1`` into the previous partial), like any distributed float GEMM.

Needs the optional dependencies ``dask[array]`` and ``distributed``
(``pip install emublas[dask]``).  Works with the default scheduler or a
``dask.distributed`` client.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _front, config
from ._arrays import as_2d, complex_scalar, is_cupy, real_scalar

try:
    import dask.array as da
    from dask import delayed
except ImportError as exc:  # pragma: no cover - exercised only without dask
    raise ImportError(
        "emublas.dask needs dask: pip install 'emublas[dask]' (or pip install 'dask[array]' distributed)"
    ) from exc

__all__ = ["matmul", "gemm"]


def matmul(a: Any, b: Any, *, backend: str | None = None, **options: Any) -> da.Array:
    """``a @ b`` for 2-D Dask arrays with an emublas backend.

    Shorthand for ``gemm(1.0, a, b, backend=backend, **options)``; see :func:`gemm`.

    Parameters
    ----------
    a : dask.array.Array or array-like, shape (m, k)
    b : dask.array.Array or array-like, shape (k, n)
    backend : str, optional
        An emublas backend name; the selection rules of :func:`emublas.gemm`
        otherwise (``emublas.use``, ``set_backend``, ``EMUBLAS_BACKEND``), read
        here, on the client.
    **options
        The backend's options (``moduli=``, ``mode=`` for ``ozaki2``).

    Returns
    -------
    dask.array.Array, shape (m, n)
    """
    return gemm(1.0, a, b, backend=backend, **options)


def gemm(
    alpha: complex,
    a: Any,
    b: Any,
    beta: complex = 0.0,
    c: Any = None,
    trans_a: int = 0,
    trans_b: int = 0,
    *,
    backend: str | None = None,
    **options: Any,
) -> da.Array:
    """``alpha·op(a)·op(b) + beta·c`` for Dask arrays, as :func:`emublas.gemm` defines it.

    Parameters
    ----------
    alpha, beta : scalar
        ``beta == 0`` means ``c`` is not read (NaN in ``c`` does not appear).
    a, b : dask.array.Array or array-like
        2-D (a 1-D array is a column, as in scipy), with numpy chunks or cupy
        chunks (computed on the GPU of each block, on its current stream), not
        both.  The dtype of the result follows scipy's rules
        (float32/float64/complex64/complex128).
    c : dask.array.Array or array-like, optional, shape (m, n)
    trans_a, trans_b : {0, 1, 2}
        N, T, C (C is T for real data).
    backend : str, optional
    **options
        Backend options, validated here (on the client; the workers get the
        resolved values, whatever their environment).  For ``ozaki2`` the
        numeric options (``moduli``, ``mode``) apply; ``devices``/``split``
        do not (each block is computed on the device that holds it: spreading
        work over GPUs is the scheduler's job here).

    Returns
    -------
    dask.array.Array, shape (m, n)
        Lazy; chunked by the row chunks of ``op(a)`` and the column chunks of
        ``op(b)``.  With ``ozaki2``, the scaling pass (statistics and bound
        product: the moduli and shifts depend on all the data) is computed when
        ``gemm`` is called, the products when the result is computed; inputs
        that are expensive to compute are best persisted first.

    Raises
    ------
    ValueError
        Shapes that do not match (the message names the dimensions); bad
        ``trans`` codes, scalars or options.
    TypeError
        numpy chunks and cupy chunks in the same call.

    Notes
    -----
    Chunks: the k chunks of ``op(b)`` are rechunked to those of ``op(a)`` when
    they differ, and ``c`` to the result's chunks.

    ``ozaki2`` gives the single-process result bit for bit, for every
    chunking and k (the k-chunk splitting of the engine, at ``K_CHUNK``
    columns, is reproduced across blocks): in every mode with numpy chunks;
    with cupy chunks in ``accurate`` mode (the default), while ``fast`` and
    ``auto`` choose shifts from row norms summed block by block on the GPU,
    whose last bits can differ from one pass over whole rows.  NaN/Inf: as in the
    single-process routine, the entries in the rows and columns they touch come
    from a float product (of the original blocks here, summed over k-blocks:
    the same positions are non-finite; NaN versus ±Inf can differ only where
    finite partial sums overflow), the rest from emulation of the inputs with
    those entries set to zero (bit-identical).
    """
    a, b = _as_dask(a, "a"), _as_dask(b, "b")
    c = None if c is None else _as_dask(c, "c")
    _same_chunk_type(a=a, b=b, c=c)
    prefix = _front.prefix_of(a=a, b=b, c=c)
    dtype = _front.DTYPES[prefix]
    scalar = real_scalar if prefix in "sd" else complex_scalar
    alpha, beta = scalar(alpha, "alpha"), scalar(beta, "beta")
    trans_a = _front.trans_codes(prefix, "gemm", trans_a, "trans_a")
    trans_b = _front.trans_codes(prefix, "gemm", trans_b, "trans_b")
    be, opts = config.resolve(backend, options)
    a, b = a.astype(dtype), b.astype(dtype)
    x = a if trans_a == 0 else a.T  # op(a) up to conjugation, m × k
    y = b.T if trans_b == 0 else b  # op(b)ᵀ up to conjugation, n × k
    (m, ka), (n, kb) = x.shape, y.shape
    if ka != kb:
        raise ValueError(
            f"{prefix}gemm: inner dimensions differ: op(a) is {m}x{ka}"
            f" (a is {a.shape[0]}x{a.shape[1]}, trans_a={trans_a})"
            f" but op(b) is {kb}x{n} (b is {b.shape[0]}x{b.shape[1]}, trans_b={trans_b})"
        )
    if c is not None:
        if c.shape != (m, n):
            raise ValueError(f"c has shape {c.shape[0]}x{c.shape[1]} but the result is {m}x{n}")
        c = c.astype(dtype) if beta != 0 else None  # beta == 0: c is not read
    if y.chunks[1] != x.chunks[1]:
        y = y.rechunk((y.chunks[0], x.chunks[1]))  # op(b)'s k chunks follow op(a)'s
    if c is not None and c.chunks != (x.chunks[0], y.chunks[0]):
        c = c.rechunk((x.chunks[0], y.chunks[0]))
    if m == 0 or n == 0 or ka == 0 or alpha == 0:
        return _quick(c, beta, (x.chunks[0], y.chunks[0]), dtype, x)
    conj_x, conj_y = trans_a == 2, trans_b == 2
    whole = be.dask_gemm(alpha, x, y, beta, c, conj_x=conj_x, conj_y=conj_y, dtype=dtype, **opts)
    if whole is not NotImplemented:  # the backend's own blockwise scheme (ozaki2: exact residues)
        return whole
    return _blockwise(prefix, be.name, opts, alpha, x, y, beta, c, conj_x, conj_y, dtype)


def _as_dask(x: Any, name: str) -> da.Array:
    if not isinstance(x, da.Array):
        x = da.asarray(x)
    x = as_2d(x, name)
    if x.dtype.kind not in "biufc":
        raise TypeError(f"{name} has dtype {x.dtype}, which is not numeric")
    return x


def _same_chunk_type(**arrays) -> None:
    """numpy chunks and cupy chunks do not mix (as numpy and cupy arrays do not in emublas.gemm)."""
    gpu = {name: is_cupy(x._meta) for name, x in arrays.items() if x is not None}
    if len(set(gpu.values())) > 1:
        on_gpu = ", ".join(n for n, g in gpu.items() if g)
        on_cpu = ", ".join(n for n, g in gpu.items() if not g)
        raise TypeError(
            f"emublas.dask: {on_gpu} {'has' if ',' not in on_gpu else 'have'} cupy chunks but {on_cpu}"
            f" {'has' if ',' not in on_cpu else 'have'} numpy chunks; convert with"
            " x.map_blocks(cupy.asarray) or x.map_blocks(cupy.asnumpy)"
        )


def _quick(c, beta, chunks, dtype, like) -> da.Array:
    """No product to compute (reference BLAS's quick return): ``beta·c`` or zeros, chunks like ``like``'s."""
    if c is None or beta == 0:
        zeros = da.zeros(tuple(sum(ch) for ch in chunks), dtype=dtype, chunks=chunks)
        if is_cupy(like._meta):
            import cupy

            zeros = zeros.map_blocks(cupy.asarray, dtype=dtype, meta=cupy.empty((0, 0), dtype))
        return zeros
    return c if beta == 1 else (c * beta).astype(dtype)


def _block_gemm(prefix: str, backend: str, opts: dict, alpha, xb, yb, beta, cb, conj_x: bool, conj_y: bool):
    """One block product ``alpha·op(x)·op(y)ᵀ + beta·c`` through the emublas front."""
    from . import blas as front

    # op(a) = x, or conj(x) = (x.T)ᴴ; op(b) = yᵀ, or conj(y)ᵀ = yᴴ
    a, ta = (xb.T, 2) if conj_x else (xb, 0)
    tb = 2 if conj_y else 1
    return front.ROUTINES[prefix + "gemm"](alpha, a, yb, beta, cb, ta, tb, backend=backend, **opts)


def _blockwise(prefix, backend, opts, alpha, x, y, beta, c, conj_x, conj_y, dtype) -> da.Array:
    """Other backends: a chain of emublas gemms over the k-blocks per output block."""
    xb, yb = x.to_delayed(), y.to_delayed()
    cb = None if c is None else c.to_delayed()
    meta = x._meta if x._meta is not None else np.empty((0, 0), dtype)
    rows = []
    for i in range(xb.shape[0]):
        row = []
        for j in range(yb.shape[0]):
            acc = None if cb is None else cb[i, j]
            scale = beta
            for l in range(xb.shape[1]):
                acc = delayed(_block_gemm, pure=True)(
                    prefix, backend, opts, alpha, xb[i, l], yb[j, l], scale, acc, conj_x, conj_y
                )
                scale = 1.0
            shape = (x.chunks[0][i], y.chunks[0][j])
            row.append(da.from_delayed(acc, shape, dtype=dtype, meta=meta.astype(dtype)[:0, :0]))
        rows.append(row)
    return da.block(rows)
