"""``emublas sweep`` and ``emublas plot`` on the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from . import measure
from .inputs import FAMILIES_HELP
from .plan import plan
from .plots import plot_results
from .report import format_table
from .results import json_row, load_rows

__all__ = ["add_arguments", "command", "replot"]


def replot(results: str, out: str | None = None) -> int:
    """Draw the plots of a finished sweep from its ``results.json`` (``emublas plot``).

    Parameters
    ----------
    results : str
        The path of ``results.json``.
    out : str, optional
        The folder for ``plots/``; None: the one holding ``results``.

    Returns
    -------
    int
        0 when some plot was drawn, else 1.
    """
    with open(results) as fh:
        doc = json.load(fh)
    rows = [json_row(r) for r in doc.get("rows", [])]
    paths = plot_results(rows, out or os.path.dirname(os.path.abspath(results)))
    for path in paths:
        print(path)
    return 0 if paths else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the options of ``emublas sweep`` to a parser.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The ``sweep`` sub-command's parser.
    """
    p.add_argument("--ops", default=None, help="comma list of gemm,syrk,herk,syr2k,her2k (default gemm)")
    p.add_argument("--dtypes", default=None, help="comma list of s,d,c,z (default d)")
    p.add_argument("--sizes", default=None, help="square sizes, comma list (default 256)")
    p.add_argument("--mnk", default=None, help="shapes MxNxK, comma list (rank-k routines need M == N)")
    p.add_argument(
        "--backends",
        nargs="+",
        default=None,
        metavar="NAME",
        help="backends, comma- or space-separated (default: native and every backend usable here)",
    )
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="BACKEND:KNOB=V1,V2;KNOB=V",
        help="knob grid of one backend, repeatable; values may be ranges LO..HI[:STEP]"
        " (default: the backend's own sweep_grid)",
    )
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
    """Run ``emublas sweep``: plan, measure (resuming from what the output folder holds), print the table and plot.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of :func:`add_arguments`.
    argv : list of str, optional
        The command line, recorded in results.json.

    Returns
    -------
    int
        The exit status: 0, or 130 when interrupted (finished rows are kept).

    Raises
    ------
    ValueError
        An option value the plan does not accept (the message names it).
    """
    names = args.backends if args.backends is None or isinstance(args.backends, str) else ",".join(args.backends)
    the_plan = plan(
        ops=args.ops,
        dtypes=args.dtypes,
        sizes=args.sizes,
        mnk=args.mnk,
        backends=names,
        grid=args.grid,
        families=args.families,
        device=args.device,
        seed=args.seed,
        samples=args.samples,
        quick=args.quick,
    )
    if args.reps < 1:
        raise ValueError("--reps must be at least 1")
    for note in the_plan.notes:
        print(f"emublas sweep: {note}", file=sys.stderr)
    prior = {r["key"]: r["status"] for r in load_rows(os.path.join(args.out, "results.csv"))}
    t0 = time.perf_counter()
    try:
        rows = measure.run_sweep(the_plan, args.out, reps=args.reps, argv=argv, retry_failed=args.retry_failed)
    except KeyboardInterrupt:
        print(
            f"\nemublas sweep: interrupted; finished rows are in {args.out}/results.csv and results.json;"
            " run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    elapsed = time.perf_counter() - t0
    keys = {c.key for c in the_plan.configs}
    mine = [r for r in rows if r["key"] in keys]
    print(format_table(mine))
    failed = sum(r["status"] != "ok" for r in mine)
    print(
        f"\n{len(mine)} configurations ({failed} failed) in {elapsed:.1f} s; results in {args.out}/results.csv"
        " and results.json"
    )
    planned = {c.key for c in the_plan.configs}
    kept_ok = sum(1 for k in planned if prior.get(k) == "ok")
    kept_failed = 0 if args.retry_failed else sum(1 for k in planned if prior.get(k) == "failed")
    if kept_ok or kept_failed:
        hint = "; --retry-failed reruns the failed ones" if kept_failed else ""
        print(
            f"{kept_ok + kept_failed} not rerun, already in {args.out}: {kept_ok} finished, {kept_failed} failed{hint}"
        )
    if not args.no_plots:
        paths = plot_results(rows, args.out)
        if paths:
            print(
                f"plots: {os.path.join(args.out, 'plots')}/ ({', '.join(os.path.basename(p) for p in paths)} and .svg)"
            )
    return 0
