"""ozaki2's small calls on the CPU, on all threads and on one, beside OpenBLAS called alone.

    python3 benchmarks/bench_small_calls_cpu.py --sizes 128 256 512 --calls 50 --rounds 3

Each configuration runs in a subprocess of its own, so that no other library's
threads are awake in it: OpenBLAS's dgemm alone; emublas's dgemm through ozaki2
(16 moduli, accurate, φ = 0.5 inputs from one seed) with its default threads and
on one thread (``EMUBLAS_NUM_THREADS=1``).  A subprocess makes a warm-up call, then
``--calls`` calls back to back, and reports their median; rounds take the
configurations in turn, and the table gives the median over rounds with
[min–max].  ``PYTHONPATH=/path/to/other/checkout`` times another commit's build.
Back-to-back calls are what a program issuing many small products sees; a pause
before each call would measure the threads' wake-up instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, statistics, sys, time
import numpy as np
import scipy.linalg.blas as sblas
import emublas
print(json.dumps(emublas.__file__))
n, count, config = {n}, {calls}, {config!r}
rng = np.random.default_rng(1)
a = np.asfortranarray(rng.random((n, n)) - 0.5)
b = np.asfortranarray(rng.random((n, n)) - 0.5)
if config == "openblas":
    fn = lambda: sblas.dgemm(1.0, a, b)
else:
    fn = lambda: emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=16)
fn()
times = []
for _ in range(count):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
print(json.dumps(statistics.median(times)))
"""

CONFIGS = ("openblas", "threads", "one_thread")


def run(config: str, n: int, calls: int) -> tuple[str, float]:
    env = dict(os.environ)
    if config == "one_thread":
        env["EMUBLAS_NUM_THREADS"] = "1"
    code = WORKER.format(n=n, calls=calls, config=config)
    # cwd "/": the emublas imported is PYTHONPATH's (another commit's build) or the installed one
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd="/")
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    lines = res.stdout.strip().splitlines()
    return json.loads(lines[0]), float(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--calls", type=int, default=50, help="timed calls per subprocess")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    rows, where = [], ""
    for n in args.sizes:
        got: dict[str, list[float]] = {c: [] for c in CONFIGS}
        for r in range(args.rounds):
            order = CONFIGS if r % 2 == 0 else CONFIGS[::-1]
            for config in order:
                where, t = run(config, n, args.calls)
                got[config].append(t)
        rows.append({"n": n, **{c: got[c] for c in CONFIGS}})

    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; dgemm, ozaki2 16 moduli")
    print(f"emublas: {where}")
    print(f"median of {args.calls} back-to-back calls per subprocess; median over {args.rounds} rounds [min-max], ms")
    print("| n | OpenBLAS alone | ozaki2 | ozaki2, one thread | ozaki2 / OpenBLAS |")
    print("|---:|---|---|---|---:|")
    for row in rows:

        def cell(c, row=row):
            v = row[c]
            return f"{1e3 * statistics.median(v):.3f} [{1e3 * min(v):.3f}–{1e3 * max(v):.3f}]"

        ratio = statistics.median(row["threads"]) / statistics.median(row["openblas"])
        cells = " | ".join(cell(c) for c in CONFIGS)
        print(f"| {row['n']} | {cells} | {ratio:.1f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"emublas": where, "calls": args.calls, "rounds": args.rounds, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
