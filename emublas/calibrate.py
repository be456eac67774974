"""``emublas calibrate``: time the backends on a short grid and store the cost table.

For each prefix (d, z by default), routine (gemm, herk: dsyrk for real data)
and size n (n x n x n), native and each emulated configuration (ozaki2 at a
few moduli counts, strassen at one or two levels) run ``reps`` times,
interleaved per repetition so that a drift of the machine hits all of them
alike.  Each entry of the table keeps the median, minimum and maximum time and
the ratio of its median to native's median of the same run.  On the CPU a
pause precedes each emulated timing (OpenBLAS's idle threads spin for about
0.1 s after each call and would take a core; native right after a strassen call
stalled for up to 20 ms here), so every call is timed after the same pause; on the GPU every call is timed
between device synchronisations.

The table goes to the user cache (:func:`emublas.backends.auto.tables.cache_path`) or to
``--out``; ``backend="auto"`` reads it from there (``emublas info`` says which
table is in use).
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .backends.auto import model, tables

__all__ = ["GRID", "QUICK_GRID", "calibrate", "add_arguments", "command"]

#: Sizes, repetitions and configurations per device (the grid is short on purpose:
#: a few minutes on a 2-core CPU, about one on an H200).
GRID = {
    "cpu": {"sizes": [128, 256, 512, 1024, 2048], "reps": 5, "moduli": [8, 16, 20], "levels": [1, 2]},
    "gpu": {"sizes": [1024, 2048, 4096, 8192, 16384], "reps": 5, "moduli": [8, 16, 20], "levels": [1, 2]},
}
QUICK_GRID = {
    "cpu": {"sizes": [64, 128], "reps": 3, "moduli": [8, 16], "levels": [1]},
    "gpu": {"sizes": [1024, 4096], "reps": 3, "moduli": [8, 16], "levels": [1]},
}
ROUTINES = ("gemm", "herk")
PAUSE_S = 0.3
#: A group whose native times spread more than this (max/min) is measured again, RETRIES times.
NOISY_SPREAD = 2.0
RETRIES = 2
QUICK_PAUSE_S = 0.05


def _inputs(xp, prefix: str, n: int, seed: int):
    """(rand - 0.5) * exp(0.5 * randn): the benchmarks' ordinary data, drawn on the array's
    device (on the host, drawing two 16384 x 16384 complex operands takes about a minute)."""
    import numpy as np

    rng = np.random.default_rng(seed) if xp is np else xp.random.default_rng(seed)
    real = np.float32 if prefix in "sc" else np.float64

    def part():
        return (rng.random((n, n), dtype=real) - 0.5) * xp.exp(0.5 * rng.standard_normal((n, n), dtype=real))

    def one():
        x = part() + 1j * part() if prefix in "cz" else part()
        return xp.asfortranarray(x.astype(costmodel_dtype(prefix)))

    return one(), one()


def costmodel_dtype(prefix: str):
    """The numpy dtype of a BLAS prefix.

    Parameters
    ----------
    prefix : {"s", "d", "c", "z"}

    Returns
    -------
    type
        ``numpy.float32``, ``float64``, ``complex64`` or ``complex128``.
    """
    import numpy as np

    return {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]


def _call(routine: str, prefix: str, a, b, out, backend: str, options: dict) -> Callable[[], Any]:
    import emublas

    if routine == "gemm":
        fn = getattr(emublas, prefix + "gemm")
        return lambda: fn(1.0, a, b, c=out, overwrite_c=1, backend=backend, **options)
    fn = getattr(emublas, prefix + ("herk" if prefix in "cz" else "syrk"))
    return lambda: fn(1.0, a, c=out, overwrite_c=1, lower=1, backend=backend, **options)


def _configs(routine: str, prefix: str, grid: dict, device: str) -> list[tuple[str, Any, dict]]:
    """(backend, knob, options) of every timed configuration, native first."""
    from . import backends

    out: list[tuple[str, Any, dict]] = [("native", None, {})]
    if backends.get("ozaki2").device_readiness(device)[0]:
        # counts below the native default serve bits=N calls, which auto runs without recomputation
        native = model.OZAKI2_NATIVE[prefix]
        out += [
            ("ozaki2", c, {"moduli": c, "mode": "accurate", "fallback": "dot" if c >= native else "none"})
            for c in grid["moduli"]
        ]
    if routine == "gemm":  # strassen has no rank-k path of its own
        out += [("strassen", lv, {"levels": lv}) for lv in grid["levels"]]
    return out


def _timer(device: str, xp, pause: float):
    if device == "cpu":

        def run(fn, backend):
            time.sleep(pause)  # before native too: right after another backend's call it can stall
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
    else:
        import emublas

        def run(fn, backend):
            xp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            fn()
            emublas.synchronize()
            xp.cuda.Device().synchronize()
            return time.perf_counter() - t0

    return run


def calibrate(
    device: str = "cpu",
    *,
    quick: bool = False,
    prefixes: tuple[str, ...] = ("d", "z"),
    sizes: list[int] | None = None,
    reps: int | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Measure the grid and return the table as a dict (see :mod:`emublas.backends.auto.tables`).

    Parameters
    ----------
    device : {"cpu", "gpu"}
        gpu times cupy arrays on the current GPU.
    quick : bool
        The short grid (seconds on a CPU): enough to run, too coarse to trust.
    prefixes : tuple of str
        BLAS prefixes to measure.
    sizes, reps : optional
        Override the grid's sizes and repetitions.
    seed : int, optional
        Seed of the random inputs.
    log : callable, optional
        Called with one line of progress per measured group.

    Returns
    -------
    dict
        The cost table in its JSON form (format, device, hardware, entries, ...),
        ready for :func:`emublas.backends.auto.tables.from_dict`.

    Raises
    ------
    ValueError
        A bad device, prefix, size or repetition count, or a device the native
        backend cannot run on here (a one-line message for the command line).
    """
    import numpy as np

    import emublas

    from .errors import OzakiAccuracyWarning

    if device not in ("cpu", "gpu"):
        raise ValueError(f"--device must be cpu or gpu, got {device!r}")
    for p in prefixes:
        if p not in model.PRECISION:
            raise ValueError(f"unknown prefix {p!r}; valid: s, d, c, z")
    grid: dict[str, Any] = dict((QUICK_GRID if quick else GRID)[device])
    if sizes:
        if any(int(n) < 1 for n in sizes):
            raise ValueError(f"--sizes must be positive, got {sizes}")
        grid["sizes"] = sorted(int(n) for n in sizes)
    if reps is not None:
        if reps < 1:
            raise ValueError(f"--reps must be positive, got {reps}")
        grid["reps"] = int(reps)
    from . import backends
    from .errors import BackendUnavailableError

    try:
        backends.get("native").check(device)
    except BackendUnavailableError as exc:
        raise ValueError(f"calibrate --device {device}: {exc}") from None
    xp: Any = np
    if device == "gpu":
        import cupy

        xp = cupy
    timer = _timer(device, xp, QUICK_PAUSE_S if quick else PAUSE_S)
    say = log or (lambda s: None)
    entries = []
    t_start = time.perf_counter()
    for prefix in prefixes:
        for n in grid["sizes"]:
            a, b = _inputs(xp, prefix, n, seed)
            out = xp.zeros((n, n), dtype=costmodel_dtype(prefix), order="F")
            for routine in ROUTINES:
                cfgs = _configs(routine, prefix, grid, device)
                calls = [(be, knob, _call(routine, prefix, a, b, out, be, opts)) for be, knob, opts in cfgs]
                for attempt in range(1 + RETRIES):
                    times = _measure_group(calls, grid["reps"], timer, OzakiAccuracyWarning)
                    spread = max(times[0]) / min(times[0])
                    if spread <= NOISY_SPREAD:
                        break
                    say(
                        f"{prefix}{routine} n={n}: native's times spread {spread:.1f}x (another process?),"
                        + (" measuring again" if attempt < RETRIES else " kept (marked noisy)")
                    )
                nat = statistics.median(times[0])
                for (be, knob, _), ts in zip(calls, times):
                    med = statistics.median(ts)
                    entries.append(
                        {
                            "routine": routine,
                            "prefix": prefix,
                            "n": n,
                            "backend": be,
                            "knob": knob,
                            "median_s": med,
                            "min_s": min(ts),
                            "max_s": max(ts),
                            "reps": len(ts),
                            "ratio": med / nat,
                            "noisy": spread > NOISY_SPREAD,
                        }
                    )
                    label = prefix + ("syrk" if routine == "herk" and prefix in "sd" else routine)
                    say(
                        f"{label:6s} n={n:6d} {be:8s} {'' if knob is None else knob!s:>3s}"
                        f" median {med * 1e3:10.3f} ms  [{min(ts) * 1e3:.3f}, {max(ts) * 1e3:.3f}]"
                        f"  {med / nat:6.2f}x native time"
                    )
            del a, b, out
    from .info import cpu_model

    hardware = cpu_model() if device == "cpu" else _gpu_name(xp)
    table = {
        "format": tables.FORMAT,
        "device": device,
        "hardware": hardware,
        "source": f"emublas calibrate{' --quick' if quick else ''} on {hardware}",
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "emublas": emublas.__version__,
        "commit": _commit(),
        "threads": _threads(device),
        "grid": grid,
        "elapsed_s": round(time.perf_counter() - t_start, 1),
        "notes": "ratio = median time / native's median time in the same run, interleaved",
        "entries": entries,
    }
    table["min_dim"] = tables.from_dict(table, "<new>", False).min_dim
    return table


def _measure_group(calls, reps: int, timer, quiet_warning) -> list[list[float]]:
    """Times of each call over ``reps`` interleaved rounds; native (first) runs at the start
    and at the end of each round, so a disturbance in the round shows in its spread."""
    import warnings

    times: list[list[float]] = [[] for _ in calls]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", quiet_warning)
        for _, _, fn in calls:
            fn()  # warm-up (and first-use compilation on the GPU)
        for _ in range(reps):
            for i, (be, _, fn) in enumerate(calls):
                times[i].append(timer(fn, be))
            times[0].append(timer(calls[0][2], calls[0][0]))
    return times


def _gpu_name(cp) -> str:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def _threads(device: str) -> int | None:
    if device != "cpu":
        return None
    try:
        from ._kernels import cpu

        return cpu.default_threads() if cpu.available() else os.cpu_count()
    except Exception:
        return os.cpu_count()


def _commit() -> str | None:
    """The git commit of the checkout emublas runs from, when it is one."""
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def add_arguments(p) -> None:
    """The options of ``emublas calibrate`` on an argparse (sub)parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
    """
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="what to time (default cpu)")
    p.add_argument("--quick", action="store_true", help="a short grid (seconds): to try it, not to trust it")
    p.add_argument("--out", default=None, help="table file (default: the user cache, where backend='auto' looks first)")
    p.add_argument("--dtypes", default="d,z", help="BLAS prefixes, comma-separated (default d,z)")
    p.add_argument("--sizes", default=None, help="sizes n, comma-separated (default: the device's grid)")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per configuration")


def command(args) -> int:
    """Run ``emublas calibrate`` with parsed arguments and write the table.

    Parameters
    ----------
    args : argparse.Namespace
        From a parser set up by :func:`add_arguments`.

    Returns
    -------
    int
        The exit status (0).

    Raises
    ------
    ValueError
        Bad ``--sizes`` or any argument :func:`calibrate` rejects.
    """
    prefixes = tuple(p.strip().lower() for p in args.dtypes.split(",") if p.strip())
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()] if args.sizes else None
    except ValueError:
        raise ValueError(f"--sizes must be integers separated by commas, got {args.sizes!r}") from None
    path = Path(args.out) if args.out else tables.cache_path(args.device)
    table = calibrate(
        args.device,
        quick=args.quick,
        prefixes=prefixes,
        sizes=sizes,
        reps=args.reps,
        log=lambda s: print(s, flush=True),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(table, indent=1) + "\n")
    os.replace(tmp, path)
    print(f"cost table written to {path} (min_dim {table['min_dim']}, {table['elapsed_s']} s)", file=sys.stderr)
    return 0
