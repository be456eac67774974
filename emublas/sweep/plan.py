"""The sweep's plan: arguments parsed and validated, configurations listed, before any work.

Knob grids come from the backends themselves (``sweep_grid``,
``sweep_quick_grid``, ``sweep_quick_rank_k_grid`` on
:class:`emublas.backends.Backend`), parsed with the backend's own ``Option``
parsers; ``--grid`` replaces a backend's grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .grids import (  # noqa: F401  (OPS, declared_grids, ... are also read as plan.<name>)
    OPS,
    backend_named,
    declared_grid,
    declared_grids,
    knob_product,
    knobs_shown,
    knobs_text,
    parse_choices,
    parse_grid_specs,
    parse_shapes,
    split_list,
    validate_grid,
)
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
    explicit_backends = split_list(backends) if isinstance(backends, str) else list(backends or [])
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
            be = backend_named(name)
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
                n for n in candidates if n != "native" and (backend_named(n).quick_grid() is not None)
            ]
        for name in candidates:
            be = backend_named(name)
            ok, detail = be.device_readiness(device)
            if ok:
                names.append(be.name)
            else:
                notes.append(f"backend {be.name} skipped: cannot run on the {device.upper()} here ({detail})")
        for name in grid_specs:
            be = backend_named(name)
            if be.name not in names:
                raise ValueError(f"--grid names backend {be.name!r}, which cannot run here or is not selected")
    for name in grid_specs:
        if backend_named(name).name not in names:
            raise ValueError(f"--grid names backend {name!r}, which is not in --backends ({', '.join(names)})")
    base_grids = {}
    for name in names:
        be = backend_named(name)
        if name in grid_specs:
            base_grids[name] = validate_grid(be, grid_specs[name], "--grid")
        else:
            base_grids[name] = validate_grid(
                be, declared_grid(be, quick), f"{be.name}'s {'sweep_quick_grid' if quick else 'sweep_grid'}"
            )
    if quick:
        blocks = QUICK_PLAN
    else:
        fams = split_list(families) or ["phi0.5"]
        shapes = parse_shapes(sizes, mnk) or [(256, 256, 256)]
        blocks = [
            {
                "ops": parse_choices(ops, OPS, "operation") or ["gemm"],
                "dtypes": parse_choices(dtypes, DTYPES, "dtype") or ["d"],
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
                    be = backend_named(name)
                    block_grids[name] = validate_grid(
                        be, declared_grid(be, quick, rank_k=True), f"{be.name}'s sweep_quick_rank_k_grid"
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
                            for combo in knob_product(block_grids[name]):
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
