"""The interpose shim's own time on each call of a one-shot program, this tree against another.

    OPENBLAS_NUM_THREADS=1 python3 benchmarks/bench_shim_calls.py --rounds 9 [--other /tmp/old] [--json F] [-- N NB]

Each round starts one process per tree (alternating their order) that runs
``examples/scipy_cholesky.py 1024 64`` (or the sizes after ``--``) once under the shim (``EMUBLAS_BACKEND=auto``),
as a user's program runs: every call has a shape of its own, so nothing the shim
remembers per shape helps, and the BLAS work between calls leaves the caches cold.
Around each BLAS function the program calls, the process times the shim's
replacement and, inside it, scipy's original; the shim's time of a call is the
difference.  Reported per tree: the median over calls (the first call of each
routine left out), the first calls' sum, and the whole program's sum, each as the
median over rounds with min/max.

``--other`` is the root of another checkout (its C extension built in place, e.g. a
``git worktree``); its ``emublas`` and ``interpose`` folders are imported instead of
this tree's.  Timed assertions do not belong in tests: this is where the shim's cost
per call is measured (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _children import run_json_child

ROOT = Path(__file__).resolve().parent.parent
ROUTINES = ("dgemm", "zgemm", "dtrsm", "ztrsm", "dsyrk", "zherk")


def child(tree: str, program_args: list[str]) -> None:
    """One program run under the shim of ``tree``; prints the per-call times as JSON."""
    sys.path.insert(0, tree)
    import emublas  # noqa: F401  (the tree's own, before its interpose is mapped in)

    spec = importlib.util.spec_from_file_location(
        "emublas.interpose",
        os.path.join(tree, "interpose", "__init__.py"),
        submodule_search_locations=[os.path.join(tree, "interpose")],
    )
    shim = importlib.util.module_from_spec(spec)
    sys.modules["emublas.interpose"] = shim
    spec.loader.exec_module(shim)
    import scipy.linalg.blas as blas

    inner: list[float] = []
    outer: list[tuple[str, float]] = []

    def timed_original(fn):
        def original(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                inner.append(time.perf_counter() - t0)

        return original

    for r in ROUTINES:  # the shim takes these as scipy's originals
        setattr(blas, r, timed_original(getattr(blas, r)))
    shim.install()

    def timed_shim(r, fn):
        def call(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                outer.append((r, time.perf_counter() - t0))

        return call

    for r in ROUTINES:
        setattr(blas, r, timed_shim(r, getattr(blas, r)))
    sys.argv = ["scipy_cholesky.py", *program_args]
    sys.path.insert(0, str(ROOT / "examples"))
    with contextlib.redirect_stdout(io.StringIO()):
        import scipy_cholesky  # noqa: F401  (runs the program)
    if len(inner) != len(outer):
        raise RuntimeError(f"{len(outer)} shim calls but {len(inner)} original calls: a call did not reach scipy")
    print(json.dumps([(r, o - i) for (r, o), i in zip(outer, inner)]))


def run_child(tree: str, program_args: list[str]) -> list[tuple[str, float]]:
    return run_json_child(__file__, tree, program_args, "auto")


def summary(calls: list[tuple[str, float]]) -> dict[str, float]:
    seen: set[str] = set()
    first, rest = [], []
    for r, t in calls:
        (rest if r in seen else first).append(t)
        seen.add(r)
    return {
        "calls": len(calls),
        "median_us": statistics.median(rest) * 1e6,
        "first_calls_us": sum(first) * 1e6,
        "program_us": sum(t for _, t in calls) * 1e6,
    }


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--other", default=None, help="root of another built checkout to compare with")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    program_args = ["1024", "64"]
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1 :]
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, program_args)
        return
    trees = {"this": str(ROOT)}
    if args.other:
        trees["other"] = os.path.abspath(args.other)
    got: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in order:
            got[name].append(summary(run_child(trees[name], program_args)))
    print(
        f"program: examples/scipy_cholesky.py {' '.join(program_args)} under the shim (auto); {args.rounds} rounds; µs"
    )
    print("| tree | calls | shim per call (median) | first calls (sum) | whole program (sum) |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in got.items():
        col = {k: [row[k] for row in rows] for k in rows[0]}
        print(
            f"| {name} ({trees[name]}) | {rows[0]['calls']} | {spread(col['median_us'])} |"
            f" {spread(col['first_calls_us'])} | {spread(col['program_us'])} |"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"trees": trees, "program_args": program_args, "rounds": got, "argv": sys.argv}, indent=1)
        )


if __name__ == "__main__":
    main()
