"""The sweep's files: results.csv (appended row by row, resumable) and results.json."""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from typing import Any

import numpy as np

__all__ = ["COLUMNS", "load_rows", "write_csv", "append_csv", "write_json", "metadata", "json_row"]

#: The columns of results.csv, in order (results.json's rows carry the same keys).
COLUMNS = [
    "key",
    "status",
    "op",
    "routine",
    "dtype",
    "m",
    "n",
    "k",
    "family",
    "backend",
    "knobs",
    "device",
    "seed",
    "samples",
    "reps",
    "time_s",
    "time_min_s",
    "time_max_s",
    "gflops",
    "speedup",
    "max_rel_err",
    "median_rel_err",
    "norm_rel_err",
    "bits",
    "native_time_s",
    "native_max_rel_err",
    "native_median_rel_err",
    "native_norm_rel_err",
    "native_bits",
    "native_time_min_s",
    "native_time_max_s",
    "moduli_used",
    "run_info",
    "warning",
    "error",
]
_INT_COLS = {"m", "n", "k", "seed", "samples", "reps", "moduli_used"}
_FLOAT_COLS = {
    "time_s",
    "time_min_s",
    "time_max_s",
    "native_time_min_s",
    "native_time_max_s",
    "gflops",
    "speedup",
    "max_rel_err",
    "median_rel_err",
    "norm_rel_err",
    "bits",
    "native_time_s",
    "native_max_rel_err",
    "native_median_rel_err",
    "native_norm_rel_err",
    "native_bits",
}


def _typed(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col in COLUMNS:
        v = row.get(col, "")
        if v in ("", None):
            out[col] = None
        elif col in _INT_COLS:
            out[col] = int(float(v))
        elif col in _FLOAT_COLS:
            out[col] = float(v)
        else:
            out[col] = v
    return out


def load_rows(csv_path: str) -> list[dict[str, Any]]:
    """Valid rows of an existing results.csv (a torn last line is dropped).

    Parameters
    ----------
    csv_path : str
        The file; a missing one has no rows.

    Returns
    -------
    list of dict
        The rows with their values typed (numbers, None for empty cells).
    """
    if not os.path.exists(csv_path):
        return []
    rows = []
    with open(csv_path, newline="") as fh:
        reader = csv.DictReader(fh)
        for r in reader:
            if not r.get("key") or r.get("status") not in ("ok", "failed") or None in r.values():
                continue
            try:
                rows.append(_typed(r))
            except ValueError:
                continue
    return rows


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


def write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` as results.csv (through a temporary file: never a half-written file).

    Parameters
    ----------
    path : str
        The CSV file.
    rows : list of dict
        The rows; columns are :data:`COLUMNS`.
    """
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: _csv_value(r.get(c)) for c in COLUMNS})
    os.replace(tmp, path)


def append_csv(path: str, row: dict[str, Any]) -> None:
    """Append one finished row and sync it to disk (an interrupted sweep keeps it).

    Parameters
    ----------
    path : str
        The CSV file, with its header already written.
    row : dict
        The row.
    """
    with open(path, "a", newline="") as fh:
        csv.DictWriter(fh, fieldnames=COLUMNS).writerow({c: _csv_value(row.get(c)) for c in COLUMNS})
        fh.flush()
        os.fsync(fh.fileno())


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def write_json(path: str, metadata: dict, rows: list[dict[str, Any]]) -> None:
    """Write results.json: the metadata, the columns and the rows (inf as ``"inf"``, NaN as null).

    Parameters
    ----------
    path : str
        The JSON file (written through a temporary file).
    metadata : dict
        From :func:`metadata`.
    rows : list of dict
        The rows; each gains ``knob_values``, its knobs as a dict.
    """
    tmp = path + ".tmp"
    doc = {"metadata": metadata, "columns": COLUMNS, "rows": [{k: _json_safe(v) for k, v in r.items()} for r in rows]}
    for r in doc["rows"]:
        r["knob_values"] = dict(kv.split("=", 1) for kv in (r.get("knobs") or "").split(";") if "=" in kv)
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    os.replace(tmp, path)


def metadata(argv: list[str] | None, device: str) -> dict[str, Any]:
    """The machine and the software a sweep ran on, and its command line.

    Parameters
    ----------
    argv : list of str or None
        The command line; None: ``sys.argv``.
    device : {"cpu", "gpu"}
        The sweep's device.

    Returns
    -------
    dict
        Command, start time, CPU and core count, device, GPUs, Python, numpy,
        scipy and emublas versions, and the BLAS libraries (threadpoolctl's
        report, else numpy's build configuration).
    """
    import platform

    import scipy

    from .._version import __version__
    from ..info import cpu_model, gpu_devices

    meta: dict[str, Any] = {
        "command": " ".join(argv) if argv is not None else " ".join(sys.argv),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "device": device,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "emublas": __version__,
    }
    try:
        meta["gpu"] = gpu_devices()
    except Exception as exc:
        meta["gpu"] = {"error": str(exc)}
    try:
        import threadpoolctl

        meta["blas"] = threadpoolctl.threadpool_info()
    except ImportError:
        try:
            cfg = np.show_config(mode="dicts")
            meta["blas"] = cfg.get("Build Dependencies", {}).get("blas", cfg)
        except Exception as exc:
            meta["blas"] = f"unknown ({exc})"
    return meta


def json_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of results.json with its infinities back (JSON has none: they are written as ``"inf"``).

    Parameters
    ----------
    row : dict
        A row as read from the JSON file.

    Returns
    -------
    dict
        The row with ``"inf"``/``"-inf"`` as floats.
    """
    return {k: (math.inf if v == "inf" else -math.inf if v == "-inf" else v) for k, v in row.items()}
