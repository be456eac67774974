"""Per-call cost of the interpose shim on small scipy BLAS calls: scipy's own routine against
the same call under the shim with ``EMUBLAS_BACKEND=native`` and ``=auto`` (auto picks native
at these sizes on the CPU tables shipped), in one process.

    OPENBLAS_NUM_THREADS=1 python3 benchmarks/bench_shim_overhead.py --sizes 64 128 --rounds 9

For each routine and size the three variants are timed in turns per round (each the best of 3
batches of enough calls for about 20 ms); printed are medians over the rounds with [min–max] and
each variant's cost over scipy's in µs.  Timed assertions do not belong in tests: this is where
the shim's per-call cost is measured (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np
import scipy.linalg.blas as sblas

from emublas.timing import elapsed

ROUTINES = ("dgemm", "zgemm", "dsyrk", "zherk", "dtrsm")


def calls(name: str, n: int, rng, fn):
    """A call of routine ``name`` at order n through ``fn`` (scipy's or the shim's)."""
    a = np.asfortranarray(rng.standard_normal((n, n)))
    if name[0] == "z":
        a = np.asfortranarray(a + 1j * rng.standard_normal((n, n)))
    if name.endswith("gemm"):
        return lambda: fn(1.0, a, a)
    if name.endswith("trsm"):
        t = np.asfortranarray(np.tril(a) / n + 2 * np.eye(n))
        return lambda: fn(1.0, t, a, lower=1)
    return lambda: fn(1.0, a)


def per_call(f, number: int) -> float:
    return min(elapsed(f, number) for _ in range(3)) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--routines", nargs="+", default=list(ROUTINES), choices=ROUTINES)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--json")
    args = ap.parse_args()
    originals = {name: getattr(sblas, name) for name in args.routines}
    import emublas.interpose as shim

    shim.install()
    rng = np.random.default_rng(0)
    rows = []
    print("| routine | n | scipy µs | shim native µs | shim auto µs | native − scipy | auto − scipy |")
    print("|---|---:|---|---|---|---:|---:|")
    for name in args.routines:
        for n in args.sizes:
            fns = {
                "scipy": calls(name, n, rng, originals[name]),
                "native": calls(name, n, rng, getattr(sblas, name)),
                "auto": calls(name, n, rng, getattr(sblas, name)),
            }
            times: dict[str, list[float]] = {k: [] for k in fns}
            for key, f in fns.items():
                os.environ["EMUBLAS_BACKEND"] = "auto" if key == "auto" else "native"
                f()
            number = max(10, int(0.02 / per_call(fns["scipy"], 10)))
            for _ in range(args.rounds):
                for key, f in fns.items():
                    os.environ["EMUBLAS_BACKEND"] = "auto" if key == "auto" else "native"
                    times[key].append(per_call(f, number))
            med = {k: statistics.median(v) for k, v in times.items()}
            span = {k: (min(v), max(v)) for k, v in times.items()}
            rows.append({"routine": name, "n": n, "median_s": med, "min_max_s": span, "number": number})
            cell = {k: f"{med[k] * 1e6:.1f} [{span[k][0] * 1e6:.1f}–{span[k][1] * 1e6:.1f}]" for k in med}
            print(
                f"| {name} | {n} | {cell['scipy']} | {cell['native']} | {cell['auto']}"
                f" | {(med['native'] - med['scipy']) * 1e6:.1f} | {(med['auto'] - med['scipy']) * 1e6:.1f} |",
                flush=True,
            )
    os.environ.pop("EMUBLAS_BACKEND", None)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "args": vars(args)}, fh, indent=1)


if __name__ == "__main__":
    main()
