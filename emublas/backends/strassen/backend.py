"""The ``strassen`` backend: Strassen–Winograd with 7-write chaining over the native GEMM.

On numpy arrays the whole recursion runs in the C driver (native/cpu/strassen.c:
fused operand sums and chain writes on both cores, scipy's OpenBLAS ``?gemm``
as the leaf, no Python per block); on cupy arrays the recursion in
:mod:`.driver` runs the fused CUDA kernels (native/cuda/strassen.cu)
around cuBLAS leaves.  Without the extension (or where the CUDA kernels do
not compile) the reference recursion with array expressions runs instead;
the chaining, the peeling and the semantics are the same.

Accuracy: Strassen's error bound is normwise, not per entry: an entry errs by up
to about ``(k0² + 6·k0)·18^L·u·max|op(a)|·max|op(b)|`` (L levels, k0 = k/2^L;
Higham, Accuracy and Stability of Numerical Algorithms, §23.2), so small
entries beside large ones lose relative accuracy.  Special values: NaN/Inf in
a or b, and non-finite alpha or beta, give native BLAS's pattern; finite data
near the overflow threshold (where a block sum might overflow, by a bound on
max|a|, max|b|, max|c|) takes a checked path whose non-finite rows are
recomputed natively, so no NaN/Inf appears where native gives a finite result.
"""

from __future__ import annotations

import math

from ..base import Backend, Option, int_range, split_nonfinite
from ..native.backend import BACKEND as NATIVE
from . import driver

#: Smallest block edge worth another level, per device and kind of data (None:
#: never); an entry per BLAS prefix, e.g. ("cpu", "s"), overrides its kind's.
#: Measured (BENCHMARKS.md):
#: CPU (2-core Zen 4, C driver over OpenBLAS): one level beats OpenBLAS from
#: 2048-blocks for real data (sgemm/dgemm at n = 4096: 1.08×/see BENCHMARKS;
#: two levels at n = 8192 dgemm 1.15×) but not from 1024-blocks (0.84–0.90×
#: at n = 2048); complex data from 1024-blocks (cgemm/zgemm at n = 2048, one
#: level: 1.06×/1.10×; n = 4096, two levels: 1.16×/1.21×).  s and d agree, so
#: no per-prefix entries.  H200 (fused CUDA kernels, cuBLAS leaf): dgemm one
#: level 1.07× at n = 16384, 1.00× at 8192, two levels never better, so
#: 8192-blocks; sgemm two levels 1.05× at 8192 and 1.12× at 16384, so
#: 2048-blocks; zgemm two levels 1.14× at 8192 and 1.20× at 16384, so
#: 2048-blocks (cgemm not measured apart: the complex entry).  ``auto`` uses
#: at most AUTO_MAX_LEVELS, the most measured.
CROSSOVER = {
    ("cpu", "real"): 2048,
    ("cpu", "complex"): 1024,
    ("gpu", "real"): 2048,
    ("gpu", "d"): 8192,
    ("gpu", "complex"): 2048,
}
AUTO_MAX_LEVELS = 2


def crossover(device: str, dtype) -> int | None:
    """The smallest block edge worth another Strassen level, from the ``CROSSOVER`` table.

    Parameters
    ----------
    device : {"cpu", "gpu"}
        Where the call runs.
    dtype : numpy.dtype
        The routine's dtype (float32, float64, complex64 or complex128).

    Returns
    -------
    int or None
        The BLAS prefix's own entry (``"s"``, ``"d"``, ``"c"``, ``"z"``) where
        measured apart, else the kind's (``"real"``, ``"complex"``); None: no
        level ever pays off.
    """
    prefix = {"f4": "s", "f8": "d", "c8": "c", "c16": "z"}[f"{dtype.kind}{dtype.itemsize}"]
    key = (device, prefix)
    if key in CROSSOVER:
        return CROSSOVER[key]
    return CROSSOVER[(device, "complex" if dtype.kind == "c" else "real")]


def _leaf(alpha, a, b, beta, c) -> None:
    NATIVE.gemm(alpha, a, b, beta, c, 0, 0)


def _leaf_trans(alpha, a, b, beta, c, trans_a, trans_b) -> None:
    NATIVE.gemm(alpha, a, b, beta, c, trans_a, trans_b)


class StrassenBackend(Backend):
    """Strassen–Winograd, chained accumulation, recursive to ``levels``."""

    name = "strassen"
    description = "Strassen-Winograd with 7-write chained accumulation over the native GEMM"
    sweep_grid = {"levels": (1, 2, 3)}
    sweep_quick_grid = {"levels": (1, 2)}
    handles_nonfinite = True  # the rows and columns NaN/Inf touch come from the platform BLAS
    options = {
        "levels": Option(
            "levels",
            "auto",
            int_range(0, 6, also=("auto",)),
            "recursion levels (auto: while blocks stay above the device's crossover)",
            env="EMUBLAS_STRASSEN_LEVELS",
        ),
    }

    def device_readiness(self, device):
        return NATIVE.device_readiness(device)

    def check(self, device: str) -> None:
        NATIVE.check(device)

    def last_run(self) -> dict | None:
        """What this thread's last strassen call did.

        Returns
        -------
        dict or None
            Levels used, output writes per level and natively recomputed rows
            (:func:`.driver.last_run`); None before the first call.
        """
        return driver.last_run()

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, *, levels="auto", **opts):
        from ..._arrays import is_cupy

        m, n = c.shape
        k = a.shape[0] if trans_a else a.shape[1]
        if levels == "auto":
            edge = crossover("gpu" if is_cupy(c) else "cpu", c.dtype)
            levels = 0 if edge is None else driver.levels_for(m, n, k, edge, AUTO_MAX_LEVELS)
        levels = int(levels)
        if levels == 0 or not (_finite(alpha) and _finite(beta)):
            # Inf/NaN scalars: native BLAS's pattern (Strassen's sums would turn inf·0 into NaN
            # in entries where native keeps ±Inf)
            _leaf_trans(alpha, a, b, beta, c, trans_a, trans_b)
            return
        xp = driver._namespace(c)
        amax, bmax = _abs_max(a, xp), _abs_max(b, xp)  # NaN/Inf propagate
        if math.isfinite(amax) and math.isfinite(bmax):
            _guarded(alpha, a, b, beta, c, trans_a, trans_b, levels, amax, bmax, xp)
            return

        # NaN/Inf: Strassen's block sums would spread them to other rows and columns; the
        # rows and columns they touch come from the platform BLAS, so the pattern is native's
        def finite(alpha, a, b, beta, c, trans_a, trans_b):
            _guarded(alpha, a, b, beta, c, trans_a, trans_b, levels, _abs_max(a, xp), _abs_max(b, xp), xp)

        split_nonfinite(finite, _leaf_trans, alpha, a, b, beta, c, trans_a, trans_b, xp)


def _op(x, trans: int):
    return x if trans == 0 else (x.T if trans == 1 else x.conj().T)


def _finite(z) -> bool:
    return math.isfinite(z.real) and math.isfinite(z.imag) if isinstance(z, complex) else math.isfinite(z)


def _abs_max(x, xp) -> float:
    """Largest |real part| or |imaginary part| of x (NaN if x holds a NaN, Inf if an Inf):
    a max and a min over the memory in order, without an |x| temporary."""
    if x.dtype.kind == "c":
        y = x if x.flags.c_contiguous else x.T
        x = y.view(y.real.dtype) if y.flags.c_contiguous else xp.stack([x.real, x.imag])
    return float(xp.maximum(x.max(), -x.min()))


def _exponent(x: float) -> int:
    """e with x < 2^e (x >= 0 finite); very negative for 0."""
    return math.frexp(x)[1] if x > 0 else -(10**6)


def may_overflow(
    alpha, amax: float, bmax: float, beta, cmax: float, k: int, levels: int, cplx: bool, safe_exp: int
) -> bool:
    """Whether some intermediate of the recursion may reach ``2^safe_exp``.

    ``safe_exp`` lies a few binades below the dtype's overflow threshold, so that
    rounding cannot carry a value to Inf.  Bounds, per level: the operand sums
    (s1..s4, t1..t4) grow the entry maximum at most 4x; each chain sum and output
    update holds at most 9·k·max|a|·max|b| of its level, and a sub-product's own
    intermediates add at most 4.5x that per level below, so every value is under
    ``|beta|·max|c| + 16·5^levels·max(|alpha|, 1)·k·max|a|·max|b|`` (2x for complex
    parts; the leaves' sums come before alpha).  The test uses 64^levels:
    generous, and still only data within about 2^-30 of the overflow threshold
    take the checked path.

    Parameters
    ----------
    alpha, beta : float or complex
        The call's scalars.
    amax, bmax, cmax : float
        The largest magnitude in ``a``, ``b`` and ``c``.
    k : int
        The inner dimension.
    levels : int
        Strassen levels the call would use.
    cplx : bool
        Whether the data are complex.
    safe_exp : int
        The binary exponent no intermediate may reach.

    Returns
    -------
    bool
        True when the bound does not rule overflow out (the call takes the checked path).
    """
    ea, eb, eal = _exponent(amax), _exponent(bmax), _exponent(abs(alpha))
    grow = 2 * levels + 2  # 4^levels operand growth, and alpha applied to either operand
    # the leaves sum their products before scaling by alpha: a tiny alpha does not help them
    prod = max(eal, 1) + ea + eb + int(k).bit_length() + 6 * levels + 5 + int(cplx)
    return (
        max(ea, eb) + grow > safe_exp
        or eal + max(ea, eb) + grow > safe_exp
        or prod > safe_exp
        or _exponent(abs(beta)) + _exponent(cmax) + 1 > safe_exp
    )


def _guarded(alpha, a, b, beta, c, trans_a, trans_b, levels, amax, bmax, xp) -> None:
    """Strassen on finite a and b; where an intermediate sum may overflow (data near the
    overflow threshold), the rows that came back non-finite are recomputed natively."""
    k = a.shape[0] if trans_a else a.shape[1]
    cmax = _abs_max(c, xp) if beta != 0 else 0.0
    safe_exp = 1021 if c.dtype.itemsize // (2 if c.dtype.kind == "c" else 1) == 8 else 125
    risky = not math.isfinite(cmax) or may_overflow(
        alpha, amax, bmax, beta, cmax, k, levels, c.dtype.kind == "c", safe_exp
    )
    if not risky:
        driver.gemm(alpha, a, b, beta, c, trans_a, trans_b, levels=levels, leaf=_leaf)
        return
    saved = c.copy(order="F") if beta != 0 else None
    driver.gemm(alpha, a, b, beta, c, trans_a, trans_b, levels=levels, leaf=_leaf)
    rows = xp.flatnonzero(~xp.isfinite(c).all(axis=1))
    if rows.size:
        # an overflowed sum reaches only the entries it feeds, and Inf/NaN never turn finite
        # again, so every finite entry is Strassen's; the rest is the platform BLAS's
        part = (
            xp.asfortranarray(saved[rows, :])
            if saved is not None
            else xp.zeros((int(rows.size), c.shape[1]), c.dtype, order="F")
        )
        _leaf(alpha, _op(a, trans_a)[rows, :], _op(b, trans_b), beta, part)
        c[rows, :] = part
        driver.note(native_rows=int(rows.size))


BACKEND = StrassenBackend()
