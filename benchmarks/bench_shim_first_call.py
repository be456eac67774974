"""The first intercepted BLAS call of a program under the interpose shim, against scipy's own first call.

Each run is a fresh process: a tiny program times its first and second ``dgemm``
(and ``zgemm``) of ``--n`` × ``--n`` matrices with ``time.perf_counter`` and prints
them; it runs natively and under ``python3 -m emublas.interpose`` with each
``EMUBLAS_BACKEND`` of ``--backends``, the cells interleaved run by run.  Printed:
median [min–max] milliseconds per cell.  What the shim's first call pays beyond
scipy's (imports, readiness, cost tables) shows as the first call's excess over
native; the second call is the steady per-call cost.

    python3 benchmarks/bench_shim_first_call.py --runs 9 --json first_call.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = """
import time
import numpy as np
from scipy.linalg import blas
n = {n}
a = np.asfortranarray(np.random.default_rng(0).random((n, n)))
z = a + 0.5j * a
out = []
for fn, x in ((blas.dgemm, a), (blas.dgemm, a), (blas.zgemm, z)):
    t = time.perf_counter()
    fn(1.0, x, x)
    out.append(time.perf_counter() - t)
print("times_s", *out)
"""
LABELS = ("first dgemm", "second dgemm", "first zgemm")
CLEARED = ("EMUBLAS_INTERPOSE", "EMUBLAS_BACKEND", "EMUBLAS_VERBOSE")


def run(program: str, backend: str | None) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    cmd = [sys.executable, program]
    if backend is not None:
        env["EMUBLAS_BACKEND"] = backend
        cmd = [sys.executable, "-m", "emublas.interpose", program]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("times_s"))
    return [float(v) for v in line.split()[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--backends", nargs="+", default=["native", "auto"])
    ap.add_argument("--json")
    args = ap.parse_args()
    cells: dict[str, list[list[float]]] = {"scipy": [], **{f"shim {b}": [] for b in args.backends}}
    with tempfile.TemporaryDirectory() as tmp:
        program = os.path.join(tmp, "first_call.py")
        with open(program, "w") as fh:
            fh.write(PROGRAM.format(n=args.n))
        run(program, None)  # warm the file cache
        for _ in range(args.runs):
            cells["scipy"].append(run(program, None))
            for b in args.backends:
                cells[f"shim {b}"].append(run(program, b))
    print(f"| ms, n = {args.n} | " + " | ".join(LABELS) + " |")
    print("|---|" + "---:|" * len(LABELS))
    for name, rows in cells.items():
        cols = list(zip(*rows))
        print(
            f"| {name} | "
            + " | ".join(f"{statistics.median(c) * 1e3:.3f} [{min(c) * 1e3:.3f}–{max(c) * 1e3:.3f}]" for c in cols)
            + " |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "labels": LABELS, "cells": cells}, fh, indent=1)


if __name__ == "__main__":
    main()
