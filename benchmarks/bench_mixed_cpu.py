"""ozaki2 on the CPU between native BLAS calls, as in a program that mixes the two.

    python3 benchmarks/bench_mixed_cpu.py --sizes 128 512 --reps 300
    python3 benchmarks/bench_mixed_cpu.py --other /tmp/old --rounds 5 --json out.json

OpenBLAS's worker threads keep spinning for a while (about 0.1 s) after each of
its calls.  In a program that calls scipy's BLAS or LAPACK between emulated calls
(a blocked factorisation under the shim, auto routing some calls to native), the
emulated call's kernels share the CPUs with those workers, and the native call
after it finds them where the kernels left them.  This script measures both:
each subprocess alternates, ``--reps`` times per size, one ozaki2 dgemm (16
moduli, accurate mode) and one scipy dgemm on the same arrays, timing each call
alone; then it times the ozaki2 call back to back, with no native call between
(medians of batches of about 50 ms, as in ``bench_against_commit.py``).

Printed per tree and size: the alternating calls' medians and means (a mean far
above the median is a few calls that stalled) and the native calls slower than
1 ms plus five times their median ("stalls"), then the back-to-back time.  With
``--other``, each round runs one subprocess per tree, alternating; ``--env NAME=VALUE``
adds this tree once more with that variable set (e.g. ``OPENBLAS_THREAD_TIMEOUT=4``, which
has OpenBLAS's workers sleep almost at once after each call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKER = r"""
import json, statistics, sys, time, warnings
sys.path.insert(0, {bench!r})
import numpy as np
import scipy.linalg.blas as sblas
import emublas
from _timing import batched_median
warnings.simplefilter("ignore")
rng = np.random.default_rng(1)
out = {{"emublas": emublas.__file__}}
for n in {sizes!r}:
    a = np.asfortranarray(rng.random((n, n)) - 0.5)
    b = np.asfortranarray(rng.random((n, n)) - 0.5)
    emu = lambda: emublas.dgemm(1.0, a, b, backend="ozaki2", moduli=16)
    nat = lambda: sblas.dgemm(1.0, a, b)
    for _ in range(3):
        emu(); nat()
    te, tn = [], []
    for _ in range({reps}):
        t0 = time.perf_counter(); emu(); t1 = time.perf_counter(); nat(); t2 = time.perf_counter()
        te.append(t1 - t0); tn.append(t2 - t1)
    alone = batched_median(emu, 9, pause=0.2, batch_s=0.05)
    out[str(n)] = {{"emulated": te, "native": tn, "emulated_alone": alone}}
print(json.dumps(out))
"""


def run(tree: str, sizes, reps: int, extra_env: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p))
    env.update(extra_env or {})
    code = WORKER.format(bench=HERE, sizes=tuple(sizes), reps=reps)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd="/")
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def summary(rows: list[dict], n: int) -> dict:
    """Medians over the rounds of each round's statistics for size ``n``."""
    per = []
    for r in rows:
        e, t, alone = r[str(n)]["emulated"], r[str(n)]["native"], r[str(n)]["emulated_alone"]
        med_t = statistics.median(t)
        per.append(
            {
                "emulated_median": statistics.median(e),
                "emulated_mean": statistics.fmean(e),
                "native_median": med_t,
                "native_mean": statistics.fmean(t),
                "stalls": sum(x > 1e-3 + 5 * med_t for x in t),
                "emulated_alone": alone,
            }
        )
    return {k: statistics.median(p[k] for p in per) for k in per[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--reps", type=int, default=300, help="alternating pairs per size and subprocess")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--other", help="root of another commit's built checkout, run alternately with this one")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="a variant of this tree")
    ap.add_argument("--json")
    args = ap.parse_args()
    trees = {"this": ROOT}
    envs: dict[str, dict] = {"this": {}}
    if args.other:
        trees["other"] = os.path.abspath(args.other)
        envs["other"] = {}
    if args.env:
        pairs = [e.split("=", 1) for e in args.env]
        if any(len(p) != 2 or not p[0] for p in pairs):
            ap.error(f"--env takes NAME=VALUE, got {args.env}")
        trees["this_env"] = ROOT
        envs["this_env"] = dict(pairs)
    # the ceiling of the int8 kernel's arithmetic, beside the run (this checkout's probe)
    from emublas._kernels import cpu

    rate, instructions = cpu.kernel_peak_probe()
    threads = cpu.default_threads()
    print(f"measured int8 ceiling ({instructions or 'none'}) {2 * rate / 1e9:.0f} GOPS, {threads} threads")
    rows: dict[str, list] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for t, path in trees.items():
            rows[t].append(run(path, args.sizes, args.reps, envs[t]))
    print(
        f"ozaki2 dgemm (16 moduli, accurate) and scipy dgemm alternating, {args.reps} pairs a size;"
        f" medians over {args.rounds} rounds; ms"
    )
    print("| n | tree | emulated median | emulated mean | native median | native mean | stalls | emulated alone |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    table = {}
    for n in args.sizes:
        for t in trees:
            s = table[f"{t}_{n}"] = summary(rows[t], n)
            print(
                f"| {n} | {t} | {s['emulated_median'] * 1e3:.3f} | {s['emulated_mean'] * 1e3:.3f} |"
                f" {s['native_median'] * 1e3:.3f} | {s['native_mean'] * 1e3:.3f} | {s['stalls']:g} |"
                f" {s['emulated_alone'] * 1e3:.3f} |"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"args": vars(args), "int8_peak_gops": 2 * rate / 1e9, "summary": table, "rows": rows}, fh, indent=1
            )


if __name__ == "__main__":
    main()
