"""``emublas sweep``: accuracy against speed over backends, knobs, shapes and input families.

One *configuration* is (operation, dtype, shape, input family, backend, knob
values).  Configurations sharing (operation, dtype, shape, family) form a
*group*: they see the same inputs, the same sampled entries and the same exact
reference, and every row of a group carries native's time and error on those
inputs (``native_*`` columns), so each row compares with native on its own.

Adding a backend: give it an entry in :data:`GRIDS` / :data:`QUICK_GRIDS`
(knob name -> list of values), or let the backend object declare
``sweep_grid`` / ``sweep_quick_grid`` attributes of the same form; the sweep
core reads nothing else.  A backend without either is swept at its option
defaults.  Values are parsed with the backend's own ``Option`` parsers before
any work starts.

Measurements (see README "Sweeps"):

* time: median of ``reps`` calls after one warm-up (CUDA events on the GPU).
  On the CPU the sweep sleeps 0.3 s before timing a non-native backend that
  follows OpenBLAS calls: OpenBLAS worker threads spin for ~0.1 s after each
  call and would steal a core from the emulation kernels.
* rate: nominal flops / time; gemm ``2mnk``, syrk/herk ``n²k`` (half of the
  gemm), syr2k/her2k ``2n²k``; ×4 for complex.
* errors: on ``samples`` sampled entries (from the referenced triangle for
  rank-k routines) against exact values (:mod:`emublas._reference`): max and
  median elementwise relative error, normwise relative error over the samples,
  and bits = −log2(max relative error) capped at 53 (float64/complex128) or 24.

Calls use ``alpha = 1``, ``beta = 0``, ``trans = 0``, ``lower = 1``.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
import time
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from .sweep_plots import plot_results

__all__ = ["GRIDS", "QUICK_GRIDS", "QUICK_PLAN", "Config", "plan", "run_sweep", "add_arguments", "command",
           "make_inputs", "parse_family", "plot_results", "COLUMNS"]

# ---------------------------------------------------------------------------
# per-backend knob grids: the only place a new backend needs to appear
# ---------------------------------------------------------------------------

#: Knob grid swept by default (without ``--quick`` and without ``--grid``).
GRIDS: dict[str, dict[str, list]] = {
    "native": {},
    # fallback=none: the scheme's own error against the moduli (the default fallback=dot
    # recomputes what the certificate cannot vouch for, so its error never exceeds native's)
    "ozaki2": {"moduli": list(range(6, 23, 2)), "mode": ["accurate"], "fallback": ["none"]},
    "boolpack": {"bits": [4, 8, 12, 16, 20, 24]},
    "strassen": {"levels": [1, 2, 3]},
    "auto": {"accuracy": ["native"]},  # what auto picks per size, against the others
}
#: Knob grid of the ``--quick`` sweep.
QUICK_GRIDS: dict[str, dict[str, list]] = {
    "native": {},
    "ozaki2": {"moduli": list(range(8, 23, 2)), "mode": ["accurate"], "fallback": ["none"]},
    "boolpack": {"bits": [4, 8, 12, 16]},
    "strassen": {"levels": [1, 2]},
    "auto": {"accuracy": ["native"]},
}

#: Blocks of the ``--quick`` sweep.  ``grid`` replaces a backend's quick grid
#: inside one block (backends not named there use QUICK_GRIDS).
QUICK_PLAN: list[dict[str, Any]] = [
    {"ops": ["gemm"], "dtypes": ["d", "z"], "shapes": [(256, 256, 256)], "families": ["phi0.5", "phi2", "cancel"]},
    {"ops": ["gemm"], "dtypes": ["d", "z"], "shapes": [(512, 512, 512)], "families": ["phi0.5"]},
    {"ops": ["herk"], "dtypes": ["z"], "shapes": [(256, 256, 256)], "families": ["phi0.5", "phi2"],
     "grid": {"ozaki2": {"moduli": [8, 16], "mode": ["accurate"], "fallback": ["none"]}}},
]

OPS = ("gemm", "syrk", "herk", "syr2k", "her2k")
DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
FAMILIES_HELP = "phi<φ> (e.g. phi0.5, phi2), uniform, integer, cancel"
CANCEL_DELTA = {"d": 2.0 ** -20, "z": 2.0 ** -20, "s": 2.0 ** -8, "c": 2.0 ** -8}
OPENBLAS_SPIN_S = 0.3

COLUMNS = ["key", "status", "op", "routine", "dtype", "m", "n", "k", "family", "backend", "knobs", "device",
           "seed", "samples", "reps", "time_s", "time_min_s", "time_max_s", "gflops", "speedup", "max_rel_err",
           "median_rel_err", "norm_rel_err", "bits", "native_time_s", "native_max_rel_err",
           "native_median_rel_err", "native_norm_rel_err", "native_bits", "native_time_min_s", "native_time_max_s", "moduli_used", "run_info",
           "warning", "error"]
_INT_COLS = {"m", "n", "k", "seed", "samples", "reps", "moduli_used"}
_FLOAT_COLS = {"time_s", "time_min_s", "time_max_s", "native_time_min_s", "native_time_max_s", "gflops", "speedup", "max_rel_err", "median_rel_err", "norm_rel_err",
               "bits", "native_time_s", "native_max_rel_err", "native_median_rel_err", "native_norm_rel_err",
               "native_bits"}


# ---------------------------------------------------------------------------
# parsing and validation (everything here runs before any work)
# ---------------------------------------------------------------------------

def parse_family(name: str) -> tuple[str, float | None]:
    """``("phi", φ)``, ``("uniform", None)``, ... ; ValueError naming the valid families."""
    text = str(name).strip().lower()
    if text in ("uniform", "integer", "cancel"):
        return text, None
    m = re.fullmatch(r"phi([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)", text)
    if m:
        return "phi", float(m.group(1))
    raise ValueError(f"unknown input family {name!r}; valid families: {FAMILIES_HELP}")


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _parse_ops(text) -> list[str]:
    ops = [o.lower() for o in _split(text)]
    for o in ops:
        if o not in OPS:
            raise ValueError(f"unknown operation {o!r}; valid operations: {', '.join(OPS)}")
    return ops


def _parse_dtypes(text) -> list[str]:
    ds = [d.lower() for d in _split(text)]
    for d in ds:
        if d not in DTYPES:
            raise ValueError(f"unknown dtype {d!r}; valid dtypes: {', '.join(DTYPES)}")
    return ds


def _parse_shapes(sizes: str | None, mnk: str | None) -> list[tuple[int, int, int]]:
    shapes = []
    for s in _split(sizes):
        if not s.isdigit() or int(s) < 1:
            raise ValueError(f"bad size {s!r} in --sizes: positive integers, comma-separated")
        shapes.append((int(s),) * 3)
    for s in _split(mnk):
        parts = s.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"bad shape {s!r} in --mnk: write MxNxK, e.g. 300x200x500")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def _expand_values(text: str) -> list[str]:
    """``8,12`` / ``8..22`` / ``8..22:2`` -> list of raw strings."""
    out = []
    for item in _split(text):
        m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?::(-?\d+))?", item)
        if m:
            lo, hi, step = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
            if step < 1:
                raise ValueError(f"bad range {item!r}: the step must be a positive integer (LO..HI:STEP)")
            if hi < lo:
                raise ValueError(f"bad range {item!r}: LO..HI needs LO <= HI")
            out.extend(str(v) for v in range(lo, hi + 1, step))
        else:
            out.append(item)
    return out


def parse_grid_specs(specs: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """``["ozaki2:moduli=8,12;mode=accurate", ...]`` -> {backend: {knob: [raw values]}} (not validated)."""
    grids: dict[str, dict[str, list[str]]] = {}
    for spec in specs:
        if ":" not in spec:
            raise ValueError(f"bad --grid {spec!r}: write BACKEND:KNOB=V1,V2;KNOB=V (e.g. ozaki2:moduli=8,12,16)")
        name, body = spec.split(":", 1)
        knobs = grids.setdefault(name.strip().lower(), {})
        for part in body.split(";"):
            if not part.strip():
                continue
            if "=" not in part:
                raise ValueError(f"bad --grid part {part!r} in {spec!r}: write KNOB=V1,V2")
            key, vals = part.split("=", 1)
            values = _expand_values(vals)
            if not values:
                raise ValueError(f"--grid {spec!r}: knob {key.strip()!r} has no values")
            knobs[key.strip().lower()] = values
    return grids


def _backend(name: str):
    from . import backends

    return backends.get(name)  # ValueError listing the valid backends


def _declared_grid(be, quick: bool) -> dict[str, list]:
    table = QUICK_GRIDS if quick else GRIDS
    if be.name in table:
        return table[be.name]
    attr = getattr(be, "sweep_quick_grid" if quick else "sweep_grid", None)
    if attr is None and quick:
        attr = getattr(be, "sweep_grid", None)
    return dict(attr or {})


def validate_grid(be, grid: dict[str, list], where: str) -> dict[str, list]:
    """Parse every value with the backend's Option parser; knobs not given stay at their defaults.

    Returns {knob: [parsed values]} in the backend's option order.
    """
    for key in grid:
        if key not in be.options:
            valid = ", ".join(be.options) or "none"
            raise ValueError(f"backend {be.name!r} has no knob {key!r} ({where}); valid knobs: {valid}")
    parsed: dict[str, list] = {}
    for key, spec in be.options.items():
        raw = grid.get(key)
        if raw is None:
            continue
        vals = []
        for v in raw:
            try:
                p = spec.parse(v)
            except ValueError as exc:
                valid = getattr(spec.parse, "valid", "")
                hint = f"; valid values: {valid}" if valid else ""
                raise ValueError(f"bad value {v!r} for knob {key!r} of backend {be.name!r} ({where}): {exc}{hint}") \
                    from None
            if p not in vals:
                vals.append(p)
        parsed[key] = vals
    return parsed


def _knob_product(grid: dict[str, list]) -> list[dict[str, Any]]:
    combos: list[dict[str, Any]] = [{}]
    for key, vals in grid.items():
        combos = [{**c, key: v} for c in combos for v in vals]
    return combos


def knobs_text(knobs: dict[str, Any]) -> str:
    """How a configuration's knobs are stored (``moduli=8;mode=accurate``)."""
    return ";".join(f"{k}={v}" for k, v in knobs.items())


def knobs_shown(text: str | None) -> str:
    """Stored knobs as a person reads them: ``moduli=8, mode=accurate``."""
    return ", ".join(kv for kv in (text or "").split(";") if kv)


# ---------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    op: str
    dtype: str
    shape: tuple[int, int, int]
    family: str
    backend: str
    knobs: tuple = ()          # ((name, value), ...) in option order
    device: str = "cpu"
    seed: int = 0
    samples: int = 64

    @property
    def routine(self) -> str:
        # as emublas.herk/her2k do: a Hermitian update of real data is the symmetric one
        if self.op in ("herk", "her2k") and self.dtype in "sd":
            return self.dtype + self.op.replace("he", "sy")
        return self.dtype + self.op

    @property
    def knob_dict(self) -> dict[str, Any]:
        return dict(self.knobs)

    @property
    def group(self) -> tuple:
        return (self.op, self.dtype, self.shape, self.family, self.device, self.seed, self.samples)

    @property
    def key(self) -> str:
        m, n, k = self.shape
        return "|".join([self.routine, f"{m}x{n}x{k}", self.family, self.backend, knobs_text(self.knob_dict),
                         self.device, f"seed={self.seed}", f"samples={self.samples}"])

    def label(self) -> str:
        m, n, k = self.shape
        size = f"n={n}" if m == n == k else f"{m}x{n}x{k}"
        kn = " ".join(f"{a}={b}" for a, b in self.knobs)
        return f"{self.routine} {size} {self.family} {self.backend}" + (f" {kn}" if kn else "")


@dataclass
class Plan:
    configs: list[Config]
    notes: list[str] = field(default_factory=list)


def _valid_combo(op: str, dtype: str, shape) -> str | None:
    """Why (op, dtype, shape) is skipped, or None."""
    if op != "gemm" and shape[0] != shape[1]:
        return f"{dtype}{op} needs m == n (got {shape[0]}x{shape[1]}x{shape[2]})"
    return None


def plan(*, ops=None, dtypes=None, sizes=None, mnk=None, backends=None, grid=(), families=None,
         device="cpu", seed=0, samples=64, quick=False) -> Plan:
    """Validate everything and list the configurations; raises ValueError before any work."""
    from . import backends as registry

    if device not in ("cpu", "gpu"):
        raise ValueError(f"unknown device {device!r}; valid devices: cpu, gpu")
    if samples < 1:
        raise ValueError("--samples must be at least 1")
    if device == "gpu":
        _cupy_or_error()
    grid_specs = parse_grid_specs(grid)
    explicit_backends = _split(backends) if isinstance(backends, str) else list(backends or [])
    notes: list[str] = []
    if quick:
        clash = [n for n, v in (("--ops", ops), ("--dtypes", dtypes), ("--sizes", sizes), ("--mnk", mnk),
                                ("--families", families), ("--grid", grid_specs)) if v]
        if clash:
            raise ValueError(f"--quick sets its own grid; drop {', '.join(clash)} (or drop --quick)")
    # backends
    if explicit_backends:
        names = []
        for name in explicit_backends:
            be = _backend(name)
            ok, detail = be.readiness()[device]
            if not ok:
                raise ValueError(f"backend {be.name!r} cannot run on the {device.upper()} here: {detail}")
            if be.name not in names:
                names.append(be.name)
    else:
        names = []
        candidates = ["native"] + [n for n in registry.names() if n != "native"]
        if quick:
            candidates = ["native"] + [n for n in candidates if n != "native" and (
                n in QUICK_GRIDS or getattr(_backend(n), "sweep_quick_grid", None) is not None
                or getattr(_backend(n), "sweep_grid", None) is not None)]
        for name in candidates:
            be = _backend(name)
            ok, detail = be.readiness()[device]
            if ok:
                names.append(be.name)
            else:
                notes.append(f"backend {be.name} skipped: cannot run on the {device.upper()} here ({detail})")
        for name in grid_specs:
            be = _backend(name)
            if be.name not in names:
                raise ValueError(f"--grid names backend {be.name!r}, which cannot run here or is not selected")
    for name in grid_specs:
        if _backend(name).name not in names:
            raise ValueError(f"--grid names backend {name!r}, which is not in --backends ({', '.join(names)})")
    base_grids = {}
    for name in names:
        be = _backend(name)
        if name in grid_specs:
            base_grids[name] = validate_grid(be, grid_specs[name], "--grid")
        else:
            base_grids[name] = validate_grid(be, _declared_grid(be, quick),
                                             f"sweep {'QUICK_GRIDS' if quick else 'GRIDS'} table")
    if quick:
        blocks = QUICK_PLAN
    else:
        fams = _split(families) or ["phi0.5"]
        shapes = _parse_shapes(sizes, mnk) or [(256, 256, 256)]
        blocks = [{"ops": _parse_ops(ops) or ["gemm"], "dtypes": _parse_dtypes(dtypes) or ["d"],
                   "shapes": shapes, "families": fams}]
    configs: list[Config] = []
    seen = set()
    for block in blocks:
        for fam in block["families"]:
            parse_family(fam)
        block_grids = dict(base_grids)
        for name, g in block.get("grid", {}).items():
            if name in block_grids:
                block_grids[name] = validate_grid(_backend(name), g, "QUICK_PLAN block grid")
        for op in block["ops"]:
            for dt in block["dtypes"]:
                for shape in block["shapes"]:
                    why = _valid_combo(op, dt, shape)
                    if why:
                        notes.append(f"skipped: {why}")
                        continue
                    if op in ("herk", "her2k") and dt in "sd":
                        notes.append(f"{op} on real data ({dt}) is the symmetric update {dt}{op.replace('he', 'sy')},"
                                     f" as emublas.{op} computes it")
                    for fam in block["families"]:
                        fam_name = fam.strip().lower()
                        for name in names:
                            for combo in _knob_product(block_grids[name]):
                                c = Config(op, dt, tuple(shape), fam_name, name, tuple(combo.items()), device,
                                           seed, samples)
                                if c.key not in seen:
                                    seen.add(c.key)
                                    configs.append(c)
    if not configs:
        raise ValueError("the sweep has no configurations (" + "; ".join(notes or ["empty grid"]) + ")")
    return Plan(configs, list(dict.fromkeys(notes)))


def _cupy_or_error():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        return cupy
    except Exception as exc:
        raise ValueError(f"--device gpu needs cupy and a CUDA GPU: {type(exc).__name__}: {exc}") from None


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

def _group_rng(seed: int, group_key: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(group_key.encode())])


def _real_family(rng, kind: str, phi, shape) -> np.ndarray:
    if kind == "phi":
        return (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if kind == "uniform":
        return rng.random(shape) - 0.5
    if kind == "integer":
        return rng.integers(-8, 9, size=shape).astype(np.float64)
    raise AssertionError(kind)


def make_inputs(op: str, dtype: str, shape, family: str, rng) -> tuple[np.ndarray, np.ndarray | None]:
    """Host inputs ``(a, b)`` of the routine's dtype for one group (b None for syrk/herk).

    Families: ``phi<φ>``: (rand−0.5)·exp(φ·randn) (φ sets the exponent spread);
    ``uniform``: rand−0.5; ``integer``: integers in [−8, 8]; ``cancel``: see
    :func:`_cancel_inputs`.  Complex data have independent real and imaginary parts.
    """
    m, n, k = shape
    kind, phi = parse_family(family)
    cplx = dtype in "cz"
    if op == "gemm":
        shapes = [(m, k), (k, n)]
    elif op in ("syrk", "herk"):
        shapes = [(n, k)]
    else:
        shapes = [(n, k), (n, k)]
    if kind == "cancel":
        arrays = _cancel_inputs(op, shapes, cplx, CANCEL_DELTA[dtype], rng)
    else:
        def draw(s):
            x = _real_family(rng, kind, phi, s)
            return x + 1j * _real_family(rng, kind, phi, s) if cplx else x
        arrays = [draw(s) for s in shapes]
    arrays = [np.asfortranarray(x.astype(DTYPES[dtype])) for x in arrays]
    return arrays[0], (arrays[1] if len(arrays) > 1 else None)


def _cancel_inputs(op, shapes, cplx, delta, rng):
    """Cancellation-heavy inputs: every entry of the product is ~1/delta times smaller than its terms.

    gemm (and syr2k/her2k, row-wise): with h = k//2, ``a = [P P]`` and
    ``b = [Q; −Q + δR]`` (k odd: one zero column/row more), the same random
    permutation applied to the k index of both.  The exact product is
    ``δ·P·R`` (up to the rounding of −Q + δR, which the exact reference sees),
    while the terms are of size |P||Q|: a method whose error is relative to
    the terms loses log2(1/δ) bits (δ = 2^-20 for d/z, 2^-8 for s/c).
    syrk/herk (a·aᵀ is never small on the diagonal): ``a = U + δR`` where U has
    orthonormal rows (needs n ≤ k; for n > k, orthonormal columns and only mild
    cancellation), so the off-diagonal entries are O(δ) against O(1) terms.
    """
    def g(s):
        x = rng.random(s) - 0.5
        return x + 1j * (rng.random(s) - 0.5) if cplx else x

    if op in ("syrk", "herk"):
        n, k = shapes[0]
        z = g((max(n, k), min(n, k)))
        q, _ = np.linalg.qr(z)
        u = q.T if n <= k else q
        return [u + delta * g((n, k))]
    k = shapes[0][1]
    h = k // 2
    perm = rng.permutation(k)
    if op == "gemm":
        m, n = shapes[0][0], shapes[1][1]
        p, q, r = g((m, h)), g((h, n)), g((h, n))
        a = np.zeros((m, k), dtype=p.dtype)
        b = np.zeros((k, n), dtype=p.dtype)
        a[:, :h], a[:, h:2 * h] = p, p
        b[:h], b[h:2 * h] = q, -q + delta * r
        return [a[:, perm], b[perm, :]]
    n = shapes[0][0]
    p, q, r = g((n, h)), g((n, h)), g((n, h))
    a = np.zeros((n, k), dtype=p.dtype)
    b = np.zeros((n, k), dtype=p.dtype)
    a[:, :h], a[:, h:2 * h] = p, p
    b[:, :h], b[:, h:2 * h] = q, -q + delta * r
    return [a[:, perm], b[:, perm]]


def sample_entries(op: str, shape, samples: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Distinct entry indices; from the lower triangle (the referenced one) for rank-k routines."""
    m, n, _ = shape
    if op == "gemm":
        flat = rng.choice(m * n, size=min(samples, m * n), replace=False)
        return flat // n, flat % n
    tri = n * (n + 1) // 2
    flat = rng.choice(tri, size=min(samples, tri), replace=False)
    i = ((np.sqrt(8.0 * flat + 1) - 1) // 2).astype(np.int64)  # row of the t-th lower-triangle entry
    i -= (i * (i + 1) // 2 > flat)
    i += ((i + 1) * (i + 2) // 2 <= flat)
    j = flat - i * (i + 1) // 2
    return i, j


def nominal_flops(op: str, dtype: str, shape) -> float:
    m, n, k = shape
    base = {"gemm": 2.0 * m * n * k, "syrk": 1.0 * n * n * k, "herk": 1.0 * n * n * k,
            "syr2k": 2.0 * n * n * k, "her2k": 2.0 * n * n * k}[op]
    return base * (4 if dtype in "cz" else 1)


def error_stats(values: np.ndarray, ref: np.ndarray, dtype: str) -> dict[str, float]:
    """Max/median elementwise and normwise relative error over the samples, and bits."""
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

class _Timer:
    """Median-of-reps timing; remembers OpenBLAS activity to let its threads settle."""

    def __init__(self, device: str):
        self.device = device
        self.blas_dirty = True  # data generation and imports may have used OpenBLAS

    def settle(self, backend: str) -> None:
        if self.device == "cpu" and backend != "native" and self.blas_dirty:
            time.sleep(OPENBLAS_SPIN_S)
            self.blas_dirty = False

    def measure(self, fn, reps: int, backend: str) -> tuple[Any, list[float], list[str]]:
        self.settle(backend)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn()  # warm-up; its result is the one checked
        if backend == "native":
            self.blas_dirty = True
        times = []
        if self.device == "gpu":
            import cupy

            for _ in range(reps):
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fn()
                end.record()
                end.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        else:
            for _ in range(reps):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
        if backend == "native":
            self.blas_dirty = True
        msgs = list(dict.fromkeys(str(w.message) for w in caught))
        return out, times, msgs


def _call(cfg: Config, a, b):
    from .blas import ROUTINES

    fn = ROUTINES[cfg.routine]
    kw = dict(cfg.knobs)
    if cfg.op == "gemm":
        return lambda: fn(1.0, a, b, backend=cfg.backend, **kw)
    if cfg.op in ("syrk", "herk"):
        return lambda: fn(1.0, a, lower=1, backend=cfg.backend, **kw)
    return lambda: fn(1.0, a, b, lower=1, backend=cfg.backend, **kw)


#: Per-backend hooks returning extra facts about the last call (row columns
#: ``moduli_used`` and ``run_info``).  A backend may instead provide ``last_run()``.
def _ozaki2_info() -> dict | None:
    from .ozaki2.routines import last_run

    return last_run()


RUN_INFO = {"ozaki2": _ozaki2_info}


def _run_info(name: str) -> dict | None:
    hook = RUN_INFO.get(name)
    if hook is None:
        be = _backend(name)
        hook = getattr(be, "last_run", None)
    try:
        return hook() if hook else None
    except Exception:
        return None


@dataclass
class _GroupData:
    a: Any
    b: Any
    rows: np.ndarray
    cols: np.ndarray
    ref: np.ndarray
    native: dict | None = None   # {"time_s", errors...} or {"error": msg}


def _prepare_group(cfg: Config) -> _GroupData:
    m, n, k = cfg.shape
    gkey = f"{cfg.routine}|{m}x{n}x{k}|{cfg.family}"
    rng = _group_rng(cfg.seed, gkey)
    a, b = make_inputs(cfg.op, cfg.dtype, cfg.shape, cfg.family, rng)
    rows, cols = sample_entries(cfg.op, cfg.shape, cfg.samples, rng)
    from ._reference import exact_entries

    ref = exact_entries(cfg.op, a, b, rows, cols)
    if cfg.device == "gpu":
        import cupy

        a = cupy.asarray(a, order="F")
        b = None if b is None else cupy.asarray(b, order="F")
    return _GroupData(a, b, rows, cols, ref)


def _to_host(x):
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def _measure(cfg: Config, data: _GroupData, timer: _Timer, reps: int) -> dict[str, Any]:
    out, times, msgs = timer.measure(_call(cfg, data.a, data.b), reps, cfg.backend)
    info = _run_info(cfg.backend) if cfg.backend != "native" else None
    host = _to_host(out)
    vals = host[data.rows, data.cols]
    res = {"time_s": float(np.median(times)), "time_min_s": float(np.min(times)),
           "time_max_s": float(np.max(times)), **error_stats(vals, data.ref, cfg.dtype),
           "warning": " | ".join(msgs)}
    if info:
        res["moduli_used"] = info.get("moduli")
        res["run_info"] = json.dumps(info, default=str, sort_keys=True)
    return res


# ---------------------------------------------------------------------------
# results files
# ---------------------------------------------------------------------------

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
    """Valid rows of an existing results.csv (a torn last line is dropped)."""
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


def _write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: _csv_value(r.get(c)) for c in COLUMNS})
    os.replace(tmp, path)


def _append_csv(path: str, row: dict[str, Any]) -> None:
    with open(path, "a", newline="") as fh:
        csv.DictWriter(fh, fieldnames=COLUMNS).writerow({c: _csv_value(row.get(c)) for c in COLUMNS})
        fh.flush()
        os.fsync(fh.fileno())


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _write_json(path: str, metadata: dict, rows: list[dict[str, Any]]) -> None:
    tmp = path + ".tmp"
    doc = {"metadata": metadata, "columns": COLUMNS,
           "rows": [{k: _json_safe(v) for k, v in r.items()} for r in rows]}
    for r in doc["rows"]:
        r["knob_values"] = dict(kv.split("=", 1) for kv in (r.get("knobs") or "").split(";") if "=" in kv)
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    os.replace(tmp, path)


def metadata(argv: list[str] | None, device: str) -> dict[str, Any]:
    import platform

    import scipy

    from ._version import __version__
    from .info import _gpu, cpu_model

    meta: dict[str, Any] = {
        "command": " ".join(argv) if argv is not None else " ".join(sys.argv),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": cpu_model(), "cpus": os.cpu_count(), "device": device,
        "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
        "emublas": __version__,
    }
    try:
        meta["gpu"] = _gpu()
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


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------

def _progress(i: int, total: int, text: str, stream) -> None:
    width = len(str(total))
    line = f"\r[{i:>{width}}/{total}] {text}"
    stream.write(line[:150].ljust(100))
    stream.flush()


def run_sweep(the_plan: Plan, out_dir: str, *, reps: int = 3, argv=None, progress="stderr",
              retry_failed: bool = False) -> list[dict[str, Any]]:
    """Run every configuration not already in ``out_dir/results.csv``; return all rows.

    Rows are appended to the CSV as they finish; results.json is rewritten at
    the end and also when interrupted.  ``progress``: a stream for the progress
    line (default: sys.stderr at call time), or None.
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
    _write_csv(csv_path, rows)  # clean header + valid rows (drops a torn last line)
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
    timer = _Timer(device)
    total = len(todo)
    count = 0
    t_start = time.perf_counter()
    try:
        for gkey, cfgs in groups.items():
            cfgs.sort(key=lambda c: c.backend != "native")
            first = cfgs[0]
            try:
                data = _prepare_group(first)
                prep_error = None
            except Exception as exc:
                data, prep_error = None, f"{type(exc).__name__}: {exc}"
            native = None
            if data is not None:
                native_cfg = Config(first.op, first.dtype, first.shape, first.family, "native", (), first.device,
                                    first.seed, first.samples)
                prev = by_key.get(native_cfg.key)
                if prev and prev["status"] == "ok":
                    native = {k: prev.get(k) for k in ("time_s", "time_min_s", "time_max_s", "max_rel_err",
                                                       "median_rel_err", "norm_rel_err", "bits")}
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
                    if prep_error:
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
                _append_csv(csv_path, row)
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
                    _write_csv(csv_path, rows)
    finally:
        if progress is not None and total:
            progress.write("\n")
            progress.flush()
        meta["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        meta["completed"] = count
        _write_json(json_path, meta, rows)
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
    return {"key": cfg.key, "status": "failed", "op": cfg.op, "routine": cfg.routine, "dtype": cfg.dtype,
            "m": m, "n": n, "k": k, "family": cfg.family, "backend": cfg.backend,
            "knobs": knobs_text(cfg.knob_dict), "device": cfg.device, "seed": cfg.seed, "samples": cfg.samples,
            "reps": reps}


def _fill_native(row: dict, native: dict | None, cfg: Config) -> None:
    if native and "error" not in native:
        for k in ("time_s", "time_min_s", "time_max_s", "max_rel_err", "median_rel_err", "norm_rel_err", "bits"):
            row["native_" + k] = native.get(k)
    if row.get("time_s"):
        row["gflops"] = nominal_flops(cfg.op, cfg.dtype, cfg.shape) / row["time_s"] / 1e9
        if row.get("native_time_s"):
            row["speedup"] = row["native_time_s"] / row["time_s"]


# ---------------------------------------------------------------------------
# table
# ---------------------------------------------------------------------------

def _fmt(v, spec: str, width: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-".rjust(width)
    return format(v, spec).rjust(width)


#: A timing whose slowest repetition is more than this times its fastest is too noisy
#: for the speedup beside it to mean anything (marked ``~`` in the table).
NOISY_SPREAD = 1.5


def noisy(row: dict[str, Any]) -> bool:
    """Whether the spread of this row's or native's timings makes its speedup meaningless."""
    for pre in ("", "native_"):
        lo, hi = row.get(pre + "time_min_s"), row.get(pre + "time_max_s")
        if lo and hi and hi > NOISY_SPREAD * lo:
            return True
    return False


def format_table(rows: list[dict[str, Any]]) -> str:
    """The sweep's table: one row per configuration, with a legend saying what each column is."""
    head = (f"{'routine':7s} {'n':>11s} {'family':8s} {'backend':8s} {'knobs':26s} {'median ms':>9s}"
            f" {'min..max ms':>17s} {'speedup':>8s} {'max rel':>9s} {'norm rel':>9s} {'native max':>10s}"
            f" {'bits':>5s}")
    lines = [head, "-" * len(head)]
    marked = False
    for r in rows:
        m, n, k = r["m"], r["n"], r["k"]
        size = str(n) if m == n == k else f"{m}x{n}x{k}"
        knobs = knobs_shown(r.get("knobs"))
        if r.get("moduli_used") is not None and "auto" in knobs:
            knobs += f" (used {r['moduli_used']})"
        ms = lambda v: None if v is None else v * 1e3  # noqa: E731
        spread = "-"
        if r.get("time_min_s") is not None and r.get("time_max_s") is not None:
            spread = f"{r['time_min_s'] * 1e3:.2f}..{r['time_max_s'] * 1e3:.2f}"
        speed = _fmt(r.get("speedup"), ".2f", 7) + ("~" if noisy(r) and r.get("speedup") else " ")
        marked |= speed.endswith("~")
        line = (f"{r['routine']:7s} {size:>11s} {r['family']:8s} {r['backend']:8s} {knobs:26s}"
                f" {_fmt(ms(r.get('time_s')), '.2f', 9)} {spread:>17s} {speed:>8s}"
                f" {_fmt(r.get('max_rel_err'), '.1e', 9)} {_fmt(r.get('norm_rel_err'), '.1e', 9)}"
                f" {_fmt(r.get('native_max_rel_err'), '.1e', 10)} {_fmt(r.get('bits'), '.1f', 5)}")
        if r["status"] != "ok":
            line += f"  FAILED: {r.get('error') or ''}"
        lines.append(line)
    lines.append("")
    lines.append("median ms / min..max ms: this configuration's time over the timed repetitions;"
                 " speedup: native's median time / this one's (same inputs);")
    lines.append("max rel / norm rel: largest elementwise and normwise relative error on the sampled entries"
                 " against the exact product; native max: native's max rel on the same inputs;"
                 " bits: -log2(max rel)")
    if marked:
        lines.append(f"~: the slowest repetition of this row or of native took over {NOISY_SPREAD}x the fastest;"
                     " the speedup is not meaningful (a busy machine): rerun with more --reps on a quiet one")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------

def _floats(row: dict[str, Any]) -> dict[str, Any]:
    # results.json writes inf as the string "inf" (JSON has no infinity)
    return {k: (math.inf if v == "inf" else -math.inf if v == "-inf" else v) for k, v in row.items()}


def replot(results: str, out: str | None = None) -> int:
    """Draw the plots of a finished sweep from its ``results.json`` (``emublas plot``); 0 when drawn."""
    with open(results) as fh:
        doc = json.load(fh)
    rows = [_floats(r) for r in doc.get("rows", [])]
    paths = plot_results(rows, out or os.path.dirname(os.path.abspath(results)))
    for path in paths:
        print(path)
    return 0 if paths else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ops", default=None, help="comma list of gemm,syrk,herk,syr2k,her2k (default gemm)")
    p.add_argument("--dtypes", default=None, help="comma list of s,d,c,z (default d)")
    p.add_argument("--sizes", default=None, help="square sizes, comma list (default 256)")
    p.add_argument("--mnk", default=None, help="shapes MxNxK, comma list (rank-k routines need M == N)")
    p.add_argument("--backends", nargs="+", default=None, metavar="NAME",
                   help="backends, comma- or space-separated (default: native and every backend usable here)")
    p.add_argument("--grid", action="append", default=[], metavar="BACKEND:KNOB=V1,V2;KNOB=V",
                   help="knob grid of one backend, repeatable; values may be ranges LO..HI[:STEP]"
                        " (default: the sweep's per-backend table)")
    p.add_argument("--families", default=None, help=f"comma list of input families: {FAMILIES_HELP} (default phi0.5)")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--reps", type=int, default=3, help="timed repetitions after one warm-up (median; default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=64, help="entries checked against the exact reference (default 64)")
    p.add_argument("--quick", action="store_true", help="the built-in small grid (under 2 minutes on 2 CPU cores)")
    p.add_argument("--retry-failed", action="store_true", help="rerun configurations recorded as failed")
    p.add_argument("--no-plots", action="store_true", help="do not draw plots")
    p.add_argument("--out", required=True, help="output folder (results.csv, results.json, plots/); resumable")


def command(args: argparse.Namespace, argv=None) -> int:
    names = args.backends if args.backends is None or isinstance(args.backends, str) else ",".join(args.backends)
    the_plan = plan(ops=args.ops, dtypes=args.dtypes, sizes=args.sizes, mnk=args.mnk, backends=names,
                    grid=args.grid, families=args.families, device=args.device, seed=args.seed,
                    samples=args.samples, quick=args.quick)
    if args.reps < 1:
        raise ValueError("--reps must be at least 1")
    for note in the_plan.notes:
        print(f"emublas sweep: {note}", file=sys.stderr)
    prior = {r["key"]: r["status"] for r in load_rows(os.path.join(args.out, "results.csv"))}
    t0 = time.perf_counter()
    try:
        rows = run_sweep(the_plan, args.out, reps=args.reps, argv=argv, retry_failed=args.retry_failed)
    except KeyboardInterrupt:
        print(f"\nemublas sweep: interrupted; finished rows are in {args.out}/results.csv and results.json;"
              " run the same command again to resume", file=sys.stderr)
        return 130
    elapsed = time.perf_counter() - t0
    keys = {c.key for c in the_plan.configs}
    mine = [r for r in rows if r["key"] in keys]
    print(format_table(mine))
    failed = sum(r["status"] != "ok" for r in mine)
    print(f"\n{len(mine)} configurations ({failed} failed) in {elapsed:.1f} s; results in {args.out}/results.csv"
          " and results.json")
    planned = {c.key for c in the_plan.configs}
    kept_ok = sum(1 for k in planned if prior.get(k) == "ok")
    kept_failed = 0 if args.retry_failed else sum(1 for k in planned if prior.get(k) == "failed")
    if kept_ok or kept_failed:
        hint = "; --retry-failed reruns the failed ones" if kept_failed else ""
        print(f"{kept_ok + kept_failed} not rerun, already in {args.out}: {kept_ok} finished, {kept_failed}"
              f" failed{hint}")
    if not args.no_plots:
        paths = plot_results(rows, args.out)
        if paths:
            print(f"plots: {os.path.join(args.out, 'plots')}/ ({', '.join(os.path.basename(p) for p in paths)}"
                  " and .svg)")
    return 0
