"""The sweep's plan: arguments parsed and validated, configurations listed, before any work.

Knob grids come from the backends themselves (``sweep_grid``,
``sweep_quick_grid``, ``sweep_quick_rank_k_grid`` on
:class:`emublas.backends.Backend`), parsed with the backend's own ``Option``
parsers; ``--grid`` replaces a backend's grid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .inputs import DTYPES, parse_family

__all__ = [
    "OPS",
    "QUICK_PLAN",
    "Config",
    "Plan",
    "plan",
    "declared_grids",
    "validate_grid",
    "parse_grid_specs",
    "knobs_text",
    "knobs_shown",
]

#: Blocks of the ``--quick`` sweep.  ``rank_k``: the block takes each backend's
#: ``sweep_quick_rank_k_grid`` (fewer values for the slower rank-k routines).
QUICK_PLAN: list[dict[str, Any]] = [
    {"ops": ["gemm"], "dtypes": ["d", "z"], "shapes": [(256, 256, 256)], "families": ["phi0.5", "phi2", "cancel"]},
    {"ops": ["gemm"], "dtypes": ["d", "z"], "shapes": [(512, 512, 512)], "families": ["phi0.5"]},
    {"ops": ["herk"], "dtypes": ["z"], "shapes": [(256, 256, 256)], "families": ["phi0.5", "phi2"], "rank_k": True},
]

OPS = ("gemm", "syrk", "herk", "syr2k", "her2k")


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
        shapes.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return shapes


def _expand_values(text: str) -> list[str]:
    """``8,12`` / ``8..22`` / ``8..22:2`` -> list of raw strings."""
    out: list[str] = []
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
    """Split ``--grid`` specs into raw values (not validated).

    Parameters
    ----------
    specs : iterable of str
        ``"BACKEND:KNOB=V1,V2;KNOB=V"``, e.g. ``"ozaki2:moduli=8,12;mode=accurate"``;
        values may be ranges ``LO..HI[:STEP]``.

    Returns
    -------
    dict
        ``{backend: {knob: [raw values]}}``, names lower-cased.

    Raises
    ------
    ValueError
        A spec without ``BACKEND:``, a part without ``=``, or a knob without values.
    """
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
    from .. import backends

    return backends.get(name)  # ValueError listing the valid backends


def _declared_grid(be, quick: bool, rank_k: bool = False) -> dict[str, list]:
    """The backend's own grid (``{}``, the option defaults, where it declares none)."""
    grid = be.quick_grid(rank_k) if quick else be.sweep_grid
    return {key: list(values) for key, values in (grid or {}).items()}


def declared_grids(quick: bool = False) -> dict[str, dict[str, list]]:
    """Every registered backend's declared grid, derived from the registry.

    Backends that declare no grid are left out (a full sweep runs them at
    their option defaults; ``--quick`` leaves them out).

    Parameters
    ----------
    quick : bool, optional
        The quick sweep's grids instead of the full ones.

    Returns
    -------
    dict
        ``{backend: {knob: [parsed values]}}``.
    """
    from .. import backends as registry

    out = {}
    for name in registry.names():
        be = registry.get(name)
        if (be.quick_grid() if quick else be.sweep_grid) is not None:
            out[name] = _declared_grid(be, quick)
    return out


def validate_grid(be, grid: dict[str, list], where: str) -> dict[str, list]:
    """Parse every value of a knob grid with the backend's option parser.

    Parameters
    ----------
    be : Backend
        The backend the grid is for.
    grid : dict of str to list
        ``{knob: [raw values]}``; knobs not given stay at their defaults.
    where : str
        Where the grid came from, for error messages (e.g. ``"--grid"``).

    Returns
    -------
    dict of str to list
        ``{knob: [parsed values]}`` in the backend's option order, duplicates dropped.

    Raises
    ------
    ValueError
        An unknown knob or a bad value, naming the backend and the valid ones.
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
                raise ValueError(
                    f"bad value {v!r} for knob {key!r} of backend {be.name!r} ({where}): {exc}{hint}"
                ) from None
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
    """How a configuration's knobs are stored.

    Parameters
    ----------
    knobs : dict
        ``{option: value}``.

    Returns
    -------
    str
        ``moduli=8;mode=accurate``.
    """
    return ";".join(f"{k}={v}" for k, v in knobs.items())


def knobs_shown(text: str | None) -> str:
    """Stored knobs as a person reads them.

    Parameters
    ----------
    text : str or None
        As :func:`knobs_text` writes them.

    Returns
    -------
    str
        ``moduli=8, mode=accurate``; empty for none.
    """
    return ", ".join(kv for kv in (text or "").split(";") if kv)


# ---------------------------------------------------------------------------
# configurations
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One configuration of a sweep: a routine, shape and input family on one backend with fixed knobs.

    Attributes
    ----------
    op : {"gemm", "syrk", "herk", "syr2k", "her2k"}
        The routine without prefix.
    dtype : {"s", "d", "c", "z"}
        The BLAS prefix of its dtype.
    shape : tuple of int
        ``(m, n, k)``.
    family : str
        The input family (:func:`~emublas.sweep.inputs.parse_family`).
    backend : str
        The backend's name.
    knobs : tuple of (str, object)
        ``(option, value)`` pairs in the backend's option order.
    device : {"cpu", "gpu"}
        Where it runs.
    seed : int
        The sweep's seed (inputs are the same for every backend of a group).
    samples : int
        Entries checked against the exact reference.
    """

    op: str
    dtype: str
    shape: tuple[int, int, int]
    family: str
    backend: str
    knobs: tuple = ()  # ((name, value), ...) in option order
    device: str = "cpu"
    seed: int = 0
    samples: int = 64

    @property
    def routine(self) -> str:
        # as emublas.herk/her2k do: a Hermitian update of real data is the symmetric one
        """The prefixed routine; a Hermitian update of real data is the symmetric one, as in ``emublas.herk``."""
        if self.op in ("herk", "her2k") and self.dtype in "sd":
            return self.dtype + self.op.replace("he", "sy")
        return self.dtype + self.op

    @property
    def knob_dict(self) -> dict[str, Any]:
        """The knobs as a dict, in option order."""
        return dict(self.knobs)

    @property
    def group(self) -> tuple:
        """What configurations sharing inputs and a native baseline have in common."""
        return (self.op, self.dtype, self.shape, self.family, self.device, self.seed, self.samples)

    @property
    def key(self) -> str:
        """The configuration's unique key in results.csv (what a resumed sweep skips)."""
        m, n, k = self.shape
        return "|".join(
            [
                self.routine,
                f"{m}x{n}x{k}",
                self.family,
                self.backend,
                knobs_text(self.knob_dict),
                self.device,
                f"seed={self.seed}",
                f"samples={self.samples}",
            ]
        )

    def label(self) -> str:
        """The configuration in one line, for progress and errors.

        Returns
        -------
        str
            Routine, size, family, backend and knobs.
        """
        m, n, k = self.shape
        size = f"n={n}" if m == n == k else f"{m}x{n}x{k}"
        kn = " ".join(f"{a}={b}" for a, b in self.knobs)
        return f"{self.routine} {size} {self.family} {self.backend}" + (f" {kn}" if kn else "")


@dataclass
class Plan:
    """What a sweep runs.

    Attributes
    ----------
    configs : list of Config
        Every configuration, in run order.
    notes : list of str
        Remarks for the user (backends left out and why, grids adjusted).
    """

    configs: list[Config]
    notes: list[str] = field(default_factory=list)


def _valid_combo(op: str, dtype: str, shape) -> str | None:
    """Why (op, dtype, shape) is skipped, or None."""
    if op != "gemm" and shape[0] != shape[1]:
        return f"{dtype}{op} needs m == n (got {shape[0]}x{shape[1]}x{shape[2]})"
    return None


def plan(
    *,
    ops=None,
    dtypes=None,
    sizes=None,
    mnk=None,
    backends=None,
    grid=(),
    families=None,
    device="cpu",
    seed=0,
    samples=64,
    quick=False,
) -> Plan:
    """Validate every option and list the configurations; raises ValueError before any work.

    Parameters
    ----------
    ops : str, optional
        Comma list of gemm, syrk, herk, syr2k, her2k (default gemm).
    dtypes : str, optional
        Comma list of s, d, c, z (default d).
    sizes : str, optional
        Square sizes, comma list (default 256).
    mnk : str, optional
        Shapes ``MxNxK``, comma list (rank-k routines need M == N).
    backends : str or sequence of str, optional
        Backend names; default native and every backend usable on ``device``.
    grid : sequence of str, optional
        ``--grid`` specs (:func:`parse_grid_specs`); a backend without one
        takes its declared grid.
    families : str, optional
        Comma list of input families (default phi0.5).
    device : {"cpu", "gpu"}, optional
        Where to run.
    seed : int, optional
        Seed of the inputs.
    samples : int, optional
        Entries checked per configuration (at least 1).
    quick : bool, optional
        The built-in small grid; excludes ops, dtypes, sizes, mnk, families and grid.

    Returns
    -------
    Plan
        The configurations and notes.

    Raises
    ------
    ValueError
        For any bad or clashing value, naming the option and the valid values.
    """
    from .. import backends as registry

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
        clash = [
            n
            for n, v in (
                ("--ops", ops),
                ("--dtypes", dtypes),
                ("--sizes", sizes),
                ("--mnk", mnk),
                ("--families", families),
                ("--grid", grid_specs),
            )
            if v
        ]
        if clash:
            raise ValueError(f"--quick sets its own grid; drop {', '.join(clash)} (or drop --quick)")
    # backends
    if explicit_backends:
        names = []
        for name in explicit_backends:
            be = _backend(name)
            ok, detail = be.device_readiness(device)
            if not ok:
                raise ValueError(f"backend {be.name!r} cannot run on the {device.upper()} here: {detail}")
            if be.name not in names:
                names.append(be.name)
    else:
        names = []
        candidates = ["native"] + [n for n in registry.names() if n != "native"]
        if quick:
            candidates = ["native"] + [
                n for n in candidates if n != "native" and (_backend(n).quick_grid() is not None)
            ]
        for name in candidates:
            be = _backend(name)
            ok, detail = be.device_readiness(device)
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
            base_grids[name] = validate_grid(
                be, _declared_grid(be, quick), f"{be.name}'s {'sweep_quick_grid' if quick else 'sweep_grid'}"
            )
    if quick:
        blocks = QUICK_PLAN
    else:
        fams = _split(families) or ["phi0.5"]
        shapes = _parse_shapes(sizes, mnk) or [(256, 256, 256)]
        blocks = [
            {
                "ops": _parse_ops(ops) or ["gemm"],
                "dtypes": _parse_dtypes(dtypes) or ["d"],
                "shapes": shapes,
                "families": fams,
            }
        ]
    configs: list[Config] = []
    seen = set()
    for block in blocks:
        for fam in block["families"]:
            parse_family(fam)
        block_grids = dict(base_grids)
        if block.get("rank_k"):
            for name in block_grids:
                if name not in grid_specs:
                    be = _backend(name)
                    block_grids[name] = validate_grid(
                        be, _declared_grid(be, quick, rank_k=True), f"{be.name}'s sweep_quick_rank_k_grid"
                    )
        for op in block["ops"]:
            for dt in block["dtypes"]:
                for shape in block["shapes"]:
                    why = _valid_combo(op, dt, shape)
                    if why:
                        notes.append(f"skipped: {why}")
                        continue
                    if op in ("herk", "her2k") and dt in "sd":
                        notes.append(
                            f"{op} on real data ({dt}) is the symmetric update {dt}{op.replace('he', 'sy')},"
                            f" as emublas.{op} computes it"
                        )
                    for fam in block["families"]:
                        fam_name = fam.strip().lower()
                        for name in names:
                            for combo in _knob_product(block_grids[name]):
                                c = Config(
                                    op, dt, tuple(shape), fam_name, name, tuple(combo.items()), device, seed, samples
                                )
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
