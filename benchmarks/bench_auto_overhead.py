"""Per-call cost of the front and of ``backend="auto"`` on small CPU calls, against scipy.

    OPENBLAS_NUM_THREADS=1 python3 benchmarks/bench_auto_overhead.py --sizes 64 128 256 --rounds 15

For each size, dgemm on the same Fortran-order arrays (``c`` given, ``overwrite_c=1``)
through scipy's ``dgemm``, emublas with ``backend="native"`` and with ``backend="auto"``
(which picks native at these sizes), interleaved per round; each round takes the best of
3 back-to-back batches of enough calls for about 20 ms (``elapsed`` of the timing harness).
Printed: medians over the rounds with [min–max], auto's and native's cost over scipy's,
and the median over rounds of auto's time over the native batch timed just before it
(paired: drift between rounds, which on a shared host exceeds the effect, cancels).
Timed assertions do not belong in tests: this is where auto's overhead is measured
(BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np
import scipy.linalg.blas as sblas

import emublas
from emublas.timing import elapsed


def per_call(fn, number: int) -> float:
    """Seconds per call: the best of 3 batches of ``number`` calls."""
    return min(elapsed(fn, number) for _ in range(3)) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(
        "| n | scipy µs | native µs | auto µs | native − scipy | auto − native | auto / native"
        " | auto / native, paired [min–max] |"
    )
    print("|---:|---|---|---|---:|---:|---:|---|")
    for n in args.sizes:
        a = np.asfortranarray(rng.random((n, n)))
        b = np.asfortranarray(rng.random((n, n)))
        c = np.zeros((n, n), order="F")
        fns = {
            "scipy": lambda: sblas.dgemm(1.0, a, b, c=c, overwrite_c=1),
            "native": lambda: emublas.dgemm(1.0, a, b, c=c, overwrite_c=1, backend="native"),
            "auto": lambda: emublas.dgemm(1.0, a, b, c=c, overwrite_c=1, backend="auto"),
        }
        for fn in fns.values():
            fn()  # first calls: imports, table lookup, decision
        number = max(10, int(0.02 / per_call(fns["native"], 10)))
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                times[name].append(per_call(fn, number) * 1e6)
        med = {k: statistics.median(v) for k, v in times.items()}
        # per round: auto over the native batch timed just before it (drift between rounds cancels)
        paired = [x / y for x, y in zip(times["auto"], times["native"])]

        def cell(k):
            return f"{med[k]:.2f} [{min(times[k]):.2f}–{max(times[k]):.2f}]"

        print(
            f"| {n} | {cell('scipy')} | {cell('native')} | {cell('auto')} | {med['native'] - med['scipy']:.2f}"
            f" | {med['auto'] - med['native']:.2f} | {med['auto'] / med['native']:.3f}"
            f" | {statistics.median(paired):.3f} [{min(paired):.3f}–{max(paired):.3f}] |"
        )
        rows.append({"n": n, "us": times, "median_us": med, "paired_auto_over_native": paired})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
