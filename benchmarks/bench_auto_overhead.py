"""Per-call cost of the front and of ``backend="auto"`` on small CPU calls, against scipy.

    OPENBLAS_NUM_THREADS=1 python3 benchmarks/bench_auto_overhead.py --sizes 64 128 256 --rounds 21

For each routine (dgemm, zgemm, zherk by default; dsyrk on request) and size, the same Fortran-order arrays
(page-aligned; ``c`` given, ``overwrite_c=1``) go through scipy's routine, emublas with ``backend="native"``
and with ``backend="auto"`` (which picks native at these sizes).  Each round times the three
once, in the order scipy, native, auto on even rounds and auto, native, scipy on odd ones (a
drift within a round then favours neither); a timing is the best of 3 back-to-back batches of
enough calls for about 10 ms (``elapsed`` of the timing harness).  Printed: medians over the
rounds with their interquartile range [q1–q3], auto's and native's cost over scipy's, and the
median over rounds of auto's time over native's in the same round, with its interquartile
range and [min–max] (paired: drift between rounds, which on a shared host exceeds the effect,
cancels).  Timed assertions do not belong in tests: this is where auto's overhead is measured
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

ROUTINES = ("dgemm", "dsyrk", "zgemm", "zherk")


def per_call(fn, number: int) -> float:
    """Seconds per call: the best of 3 batches of ``number`` calls."""
    return min(elapsed(fn, number) for _ in range(3)) / number


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """(q1, median, q3) of ``xs`` (at least two values)."""
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def page_aligned(x: np.ndarray) -> np.ndarray:
    """A Fortran-order copy of ``x`` that starts on a 4096-byte boundary.

    Where numpy's allocator puts 32 KiB arrays varies from process to process, and OpenBLAS's
    time at n = 64 with it (by a fifth, between two runs of one tree): aligned operands keep
    the comparison of two trees, run in separate processes, about the code.
    """
    buf = np.empty(x.nbytes + 4096, dtype=np.uint8)
    start = -buf.ctypes.data % 4096
    out = buf[start : start + x.nbytes].view(x.dtype).reshape(x.shape, order="F")
    out[...] = x
    return out


def calls(routine: str, n: int, rng) -> dict:
    """scipy's, native's and auto's call of ``routine`` on n x n Fortran-order operands."""
    real = routine[0] == "d"
    dtype = np.float64 if real else np.complex128

    def operand():
        x = rng.random((n, n)) if real else rng.random((n, n)) + 1j * rng.random((n, n))
        return page_aligned(x.astype(dtype))

    a, b = operand(), operand()
    c = page_aligned(np.zeros((n, n), dtype=dtype))
    ours, theirs = getattr(emublas, routine), getattr(sblas, routine)
    if routine.endswith("gemm"):
        return {
            "scipy": lambda: theirs(1.0, a, b, c=c, overwrite_c=1),
            "native": lambda: ours(1.0, a, b, c=c, overwrite_c=1, backend="native"),
            "auto": lambda: ours(1.0, a, b, c=c, overwrite_c=1, backend="auto"),
        }
    return {  # the rank-k routines: one operand
        "scipy": lambda: theirs(1.0, a, c=c, overwrite_c=1),
        "native": lambda: ours(1.0, a, c=c, overwrite_c=1, backend="native"),
        "auto": lambda: ours(1.0, a, c=c, overwrite_c=1, backend="auto"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--routines", nargs="+", default=["dgemm", "zgemm", "zherk"], choices=ROUTINES)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be at least 2 (the quartiles need two)")
    rng = np.random.default_rng(0)
    rows = []
    print(
        "| routine | n | scipy µs | native µs | auto µs | native − scipy µs | auto − native µs"
        " | auto / native, paired [q1–q3] (min–max) |"
    )
    print("|---|---:|---|---|---|---:|---:|---|")
    for routine in args.routines:
        for n in args.sizes:
            fns = calls(routine, n, rng)
            for fn in fns.values():
                fn()  # first calls: imports, table lookup, decision
            number = max(10, int(0.01 / per_call(fns["native"], 10)))
            times: dict[str, list[float]] = {k: [] for k in fns}
            order = list(fns)
            for r in range(args.rounds):
                for name in order if r % 2 == 0 else order[::-1]:
                    times[name].append(per_call(fns[name], number) * 1e6)
            med = {k: statistics.median(v) for k, v in times.items()}
            # per round: auto over native of the same round (drift between rounds cancels)
            paired = [x / y for x, y in zip(times["auto"], times["native"])]
            q1, q2, q3 = quartiles(paired)

            def cell(k):
                lo, mid, hi = quartiles(times[k])
                return f"{mid:.2f} [{lo:.2f}–{hi:.2f}]"

            print(
                f"| {routine} | {n} | {cell('scipy')} | {cell('native')} | {cell('auto')}"
                f" | {med['native'] - med['scipy']:.2f} | {med['auto'] - med['native']:.2f}"
                f" | {q2:.3f} [{q1:.3f}–{q3:.3f}] ({min(paired):.3f}–{max(paired):.3f}) |",
                flush=True,
            )
            rows.append(
                {
                    "routine": routine,
                    "n": n,
                    "calls_per_batch": number,
                    "us": times,
                    "median_us": med,
                    "paired_auto_over_native": paired,
                    "paired_median": q2,
                    "paired_quartiles": [q1, q3],
                }
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "emublas": emublas.__file__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
