"""``emublas sweep``: accuracy against speed over backends, knobs, shapes and input families.

One *configuration* is (operation, dtype, shape, input family, backend, knob
values).  Configurations sharing (operation, dtype, shape, family) form a
*group*: they see the same inputs, the same sampled entries and the same exact
reference, and every row of a group carries native's time and error on those
inputs (``native_*`` columns), so each row compares with native on its own.

Adding a backend: it declares ``sweep_grid`` / ``sweep_quick_grid`` (knob name
-> list of values) on its class (:class:`emublas.backends.Backend`); the sweep
reads nothing else.  A backend without them is swept at its option defaults
and left out of ``--quick``.  Values are parsed with the backend's own
``Option`` parsers before any work starts.

Measurements (see README "Sweeps"):

* time: median of ``reps`` calls after one warm-up (:mod:`emublas.timing`;
  CUDA events on the GPU), with min and max beside it.
* rate: nominal flops / time; gemm ``2mnk``, syrk/herk ``n²k`` (half of the
  gemm), syr2k/her2k ``2n²k``; ×4 for complex.
* errors: on ``samples`` sampled entries (from the referenced triangle for
  rank-k routines) against exact values (:mod:`emublas._reference`): max and
  median elementwise relative error, normwise relative error over the samples,
  and bits = −log2(max relative error) capped at 53 (float64/complex128) or 24.

Calls use ``alpha = 1``, ``beta = 0``, ``trans = 0``, ``lower = 1``.

The modules: :mod:`~emublas.sweep.plan` (arguments and configurations),
:mod:`~emublas.sweep.inputs` (input families, sampled entries),
:mod:`~emublas.sweep.measure` (the run loop), :mod:`~emublas.sweep.results`
(results.csv / results.json), :mod:`~emublas.sweep.report` (the table),
:mod:`~emublas.sweep.plots` and :mod:`~emublas.sweep.cli`.
"""

from __future__ import annotations

from typing import Any

from .cli import add_arguments, command, replot
from .inputs import CANCEL_DELTA, DTYPES, FAMILIES_HELP, make_inputs, parse_family, sample_entries
from .measure import OPENBLAS_SPIN_S, error_stats, nominal_flops, run_sweep
from .plan import (
    OPS,
    QUICK_PLAN,
    Config,
    Plan,
    declared_grids,
    knobs_shown,
    knobs_text,
    parse_grid_specs,
    plan,
    validate_grid,
)
from .plots import plot_results
from .report import NOISY_SPREAD, format_table, noisy
from .results import COLUMNS, json_row, load_rows, metadata

__all__ = [
    "GRIDS",
    "QUICK_GRIDS",
    "QUICK_PLAN",
    "Config",
    "Plan",
    "plan",
    "run_sweep",
    "add_arguments",
    "command",
    "make_inputs",
    "parse_family",
    "plot_results",
    "COLUMNS",
    "declared_grids",
    "validate_grid",
    "parse_grid_specs",
    "format_table",
    "load_rows",
    "replot",
    "sample_entries",
    "error_stats",
    "nominal_flops",
    "noisy",
    "knobs_text",
    "knobs_shown",
    "json_row",
    "metadata",
    "OPS",
    "DTYPES",
    "FAMILIES_HELP",
    "CANCEL_DELTA",
    "NOISY_SPREAD",
    "OPENBLAS_SPIN_S",
]


def __getattr__(name: str) -> Any:
    # GRIDS / QUICK_GRIDS: the registered backends' declared grids, read now (plug-ins included)
    if name == "GRIDS":
        return declared_grids(quick=False)
    if name == "QUICK_GRIDS":
        return declared_grids(quick=True)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
