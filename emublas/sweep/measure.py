"""Running the sweep: inputs and exact references per group, each configuration timed and checked.

Time: median of ``reps`` calls after one warm-up (:mod:`emublas.timing`; CUDA
events on the GPU).  On the CPU the sweep sleeps :data:`OPENBLAS_SPIN_S`
before timing a non-native backend that follows OpenBLAS calls: OpenBLAS
worker threads spin for ~0.1 s after each call and would steal a core from
the emulation kernels.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import timing
from .inputs import group_rng, make_inputs, sample_entries
from .plan import Config, Plan, knobs_text
from .results import append_csv, load_rows, metadata, write_csv, write_json

__all__ = ["OPENBLAS_SPIN_S", "run_sweep", "nominal_flops", "error_stats"]

OPENBLAS_SPIN_S = 0.3


def nominal_flops(op: str, dtype: str, shape) -> float:
    """The nominal floating-point operation count of one call.

    gemm ``2mnk``, syrk/herk ``n²k`` (half of the gemm), syr2k/her2k ``2n²k``;
    ×4 for complex.

    Parameters
    ----------
    op, dtype, shape
        The routine, the BLAS prefix of its dtype and ``(m, n, k)``, as in
        :func:`~emublas.sweep.inputs.make_inputs`.

    Returns
    -------
    float
        Operations (real multiplications and additions).
    """
    m, n, k = shape
    base = {
        "gemm": 2.0 * m * n * k,
        "syrk": 1.0 * n * n * k,
        "herk": 1.0 * n * n * k,
        "syr2k": 2.0 * n * n * k,
        "her2k": 2.0 * n * n * k,
    }[op]
    return base * (4 if dtype in "cz" else 1)


def error_stats(values: np.ndarray, ref: np.ndarray, dtype: str) -> dict[str, float]:
    """Relative errors of the sampled entries against the exact reference.

    Parameters
    ----------
    values : numpy.ndarray
        The computed entries at the sampled positions.
    ref : numpy.ndarray
        The exact values there, rounded to complex128 or float64.
    dtype : {"s", "d", "c", "z"}
        The BLAS prefix of the routine's dtype (caps ``bits`` at 24 or 53).

    Returns
    -------
    dict of str to float
        ``max_rel_err`` and ``median_rel_err`` (elementwise; inf where a zero
        reference got a nonzero value, NaN where the result is NaN),
        ``norm_rel_err`` (‖diff‖₂/‖ref‖₂ over the samples) and ``bits``
        (−log2 of the largest elementwise error, within 0 .. the precision).
    """
    values = np.asarray(values).astype(np.complex128 if dtype in "cz" else np.float64)
    diff = np.abs(values - ref)
    mag = np.abs(ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(mag > 0, diff / np.where(mag > 0, mag, 1), np.where(diff == 0, 0.0, np.inf))
    rel = np.where(np.isnan(values), np.nan, rel)
    den = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(diff))
    norm = num / den if den > 0 else (0.0 if num == 0 else math.inf)
    mx = float(np.max(rel))
    cap = 53.0 if dtype in "dz" else 24.0
    if math.isnan(mx):
        bits = math.nan
    elif mx == 0:
        bits = cap
    else:
        bits = float(min(cap, max(0.0, -math.log2(mx))))
    return {"max_rel_err": mx, "median_rel_err": float(np.median(rel)), "norm_rel_err": norm, "bits": bits}


# ---------------------------------------------------------------------------
# running one configuration
# ---------------------------------------------------------------------------


class _Settle:
    """Remembers OpenBLAS activity, to let its threads settle before timing an emulation on the CPU."""

    def __init__(self, device: str):
        self.device = device
        self.blas_dirty = True  # data generation and imports may have used OpenBLAS

    def before(self, backend: str) -> None:
        if self.device == "cpu" and backend != "native" and self.blas_dirty:
            time.sleep(OPENBLAS_SPIN_S)
            self.blas_dirty = False

    def measure(self, fn, reps: int, backend: str) -> tuple[Any, list[float], list[str]]:
        """The warm-up's result, the timed calls' seconds, the warm-up's distinct warnings."""
        self.before(backend)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn()  # warm-up; its result is the one checked
        if backend == "native":
            self.blas_dirty = True
        if self.device == "gpu":
            import cupy

            _, times = timing.cuda_times(cupy, fn, reps, warmup=False, quiet=True)
        else:
            _, times = timing.wall_times(fn, reps, warmup=False, quiet=True)
        if backend == "native":
            self.blas_dirty = True
        msgs = list(dict.fromkeys(str(w.message) for w in caught))
        return out, times, msgs


def _call(cfg: Config, a, b):
    from ..blas import ROUTINES

    fn = ROUTINES[cfg.routine]
    kw = dict(cfg.knobs)
    if cfg.op == "gemm":
        return lambda: fn(1.0, a, b, backend=cfg.backend, **kw)
    if cfg.op in ("syrk", "herk"):
        return lambda: fn(1.0, a, lower=1, backend=cfg.backend, **kw)
    return lambda: fn(1.0, a, b, lower=1, backend=cfg.backend, **kw)


def _run_info(name: str) -> dict | None:
    """The backend's report on its last call (row columns ``moduli_used`` and ``run_info``)."""
    try:
        return _backend(name).last_run()
    except Exception:
        return None


def _backend(name: str):
    from .. import backends

    return backends.get(name)


@dataclass
class _GroupData:
    a: Any
    b: Any
    rows: np.ndarray
    cols: np.ndarray
    ref: np.ndarray
    native: dict | None = None  # {"time_s", errors...} or {"error": msg}


def _prepare_group(cfg: Config) -> _GroupData:
    m, n, k = cfg.shape
    gkey = f"{cfg.routine}|{m}x{n}x{k}|{cfg.family}"
    rng = group_rng(cfg.seed, gkey)
    a, b = make_inputs(cfg.op, cfg.dtype, cfg.shape, cfg.family, rng)
    rows, cols = sample_entries(cfg.op, cfg.shape, cfg.samples, rng)
    from .._reference import exact_entries

    ref = exact_entries(cfg.op, a, b, rows, cols)
    if cfg.device == "gpu":
        import cupy

        a = cupy.asarray(a, order="F")
        b = None if b is None else cupy.asarray(b, order="F")
    return _GroupData(a, b, rows, cols, ref)


def _to_host(x):
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def _measure(cfg: Config, data: _GroupData, timer: _Settle, reps: int) -> dict[str, Any]:
    out, times, msgs = timer.measure(_call(cfg, data.a, data.b), reps, cfg.backend)
    info = _run_info(cfg.backend)
    host = _to_host(out)
    vals = host[data.rows, data.cols]
    t = timing.Timing(tuple(times))
    res = {
        "time_s": t.median,
        "time_min_s": t.min,
        "time_max_s": t.max,
        **error_stats(vals, data.ref, cfg.dtype),
        "warning": " | ".join(msgs),
    }
    if info:
        res["moduli_used"] = info.get("moduli")
        res["run_info"] = json.dumps(info, default=str, sort_keys=True)
    return res


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------


def _progress(i: int, total: int, text: str, stream) -> None:
    width = len(str(total))
    line = f"\r[{i:>{width}}/{total}] {text}"
    stream.write(line[:150].ljust(100))
    stream.flush()


def run_sweep(
    the_plan: Plan, out_dir: str, *, reps: int = 3, argv=None, progress="stderr", retry_failed: bool = False
) -> list[dict[str, Any]]:
    """Run every configuration not already in ``out_dir/results.csv``; return all rows.

    Rows are appended to the CSV as they finish; results.json is rewritten at
    the end and also when interrupted.

    Parameters
    ----------
    the_plan : Plan
        The configurations to run (:func:`~emublas.sweep.plan.plan`).
    out_dir : str
        The output folder, created if missing; what it holds already is kept.
    reps : int, optional
        Timed repetitions after one warm-up (the median is reported).
    argv : list of str, optional
        The command line, recorded in results.json.
    progress : file or None, optional
        A stream for the progress line (default: sys.stderr at call time), or None.
    retry_failed : bool, optional
        Run again the configurations recorded as failed.

    Returns
    -------
    list of dict
        Every row of the folder, old and new: one per configuration, with its
        status, timings and errors.

    Raises
    ------
    ValueError
        ``reps`` below 1.
    """
    if progress == "stderr":
        progress = sys.stderr
    if reps < 1:
        raise ValueError("--reps must be at least 1")
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "results.csv")
    json_path = os.path.join(out_dir, "results.json")
    rows = load_rows(csv_path)
    if retry_failed:
        rows = [r for r in rows if r["status"] != "failed"]
    write_csv(csv_path, rows)  # clean header + valid rows (drops a torn last line)
    done = {r["key"] for r in rows}
    by_key = {r["key"]: r for r in rows}
    todo = [c for c in the_plan.configs if c.key not in done]
    device = the_plan.configs[0].device if the_plan.configs else "cpu"
    meta = metadata(argv, device)
    meta["notes"] = the_plan.notes
    meta["planned"] = len(the_plan.configs)
    meta["skipped_existing"] = len(the_plan.configs) - len(todo)
    # native first inside each group: its numbers go into every row of the group
    groups: dict[tuple, list[Config]] = {}
    for c in todo:
        groups.setdefault(c.group, []).append(c)
    timer = _Settle(device)
    total = len(todo)
    count = 0
    t_start = time.perf_counter()
    try:
        for cfgs in groups.values():
            cfgs.sort(key=lambda c: c.backend != "native")
            first = cfgs[0]
            try:
                data = _prepare_group(first)
                prep_error = None
            except Exception as exc:
                data, prep_error = None, f"{type(exc).__name__}: {exc}"
            native = None
            if data is not None:
                native_cfg = Config(
                    first.op,
                    first.dtype,
                    first.shape,
                    first.family,
                    "native",
                    (),
                    first.device,
                    first.seed,
                    first.samples,
                )
                prev = by_key.get(native_cfg.key)
                if prev and prev["status"] == "ok":
                    native = {
                        k: prev.get(k)
                        for k in (
                            "time_s",
                            "time_min_s",
                            "time_max_s",
                            "max_rel_err",
                            "median_rel_err",
                            "norm_rel_err",
                            "bits",
                        )
                    }
                elif not any(c.backend == "native" for c in cfgs):
                    try:
                        native = _measure(native_cfg, data, timer, reps)
                    except Exception as exc:
                        native = {"error": f"{type(exc).__name__}: {exc}"}
            pending: list[dict[str, Any]] = []  # the group's rows, updated once native is timed again
            for cfg in cfgs:
                count += 1
                if progress is not None:
                    _progress(count, total, cfg.label(), progress)
                row = _base_row(cfg, reps)
                try:
                    if data is None:
                        raise RuntimeError(f"preparing inputs failed: {prep_error}")
                    res = _measure(cfg, data, timer, reps)
                    row.update(res)
                    row["status"] = "ok"
                    if cfg.backend == "native":
                        native = res
                except KeyboardInterrupt:
                    raise
                except Exception as exc:
                    row["status"] = "failed"
                    row["error"] = f"{type(exc).__name__}: {exc}".replace("\n", " ")
                    if cfg.backend == "native":
                        native = {"error": row["error"]}
                _fill_native(row, native, cfg)
                append_csv(csv_path, row)
                rows.append(row)
                by_key[row["key"]] = row
                pending.append(row)
            # native timed again after the group's emulated runs: each ratio then rests on native
            # timings from before and after it, so a burst of load during the group shows as spread
            if data is not None and native and "error" not in native and len(pending) > 1 and reps > 1:
                try:
                    native = _merge_times(native, _measure(native_cfg, data, timer, reps))
                except Exception:
                    native = None
                if native is not None:
                    for row, cfg in zip(pending, cfgs):
                        if cfg.backend == "native" and row["status"] == "ok":
                            row.update({k: native[k] for k in ("time_s", "time_min_s", "time_max_s")})
                        _fill_native(row, native, cfg)
                    write_csv(csv_path, rows)
    finally:
        if progress is not None and total:
            progress.write("\n")
            progress.flush()
        meta["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        meta["completed"] = count
        write_json(json_path, meta, rows)
    return rows


def _merge_times(first: dict, second: dict) -> dict:
    """Native's timings of one group from before and after its emulated runs, as one spread."""
    out = dict(first)
    out["time_min_s"] = min(first.get("time_min_s") or math.inf, second["time_min_s"])
    out["time_max_s"] = max(first.get("time_max_s") or 0.0, second["time_max_s"])
    out["time_s"] = float(np.median([first["time_s"], second["time_s"]]))
    return out


def _base_row(cfg: Config, reps: int) -> dict[str, Any]:
    m, n, k = cfg.shape
    return {
        "key": cfg.key,
        "status": "failed",
        "op": cfg.op,
        "routine": cfg.routine,
        "dtype": cfg.dtype,
        "m": m,
        "n": n,
        "k": k,
        "family": cfg.family,
        "backend": cfg.backend,
        "knobs": knobs_text(cfg.knob_dict),
        "device": cfg.device,
        "seed": cfg.seed,
        "samples": cfg.samples,
        "reps": reps,
    }


def _fill_native(row: dict, native: dict | None, cfg: Config) -> None:
    if native and "error" not in native:
        for k in ("time_s", "time_min_s", "time_max_s", "max_rel_err", "median_rel_err", "norm_rel_err", "bits"):
            row["native_" + k] = native.get(k)
    if row.get("time_s"):
        row["gflops"] = nominal_flops(cfg.op, cfg.dtype, cfg.shape) / row["time_s"] / 1e9
        if row.get("native_time_s"):
            row["speedup"] = row["native_time_s"] / row["time_s"]
