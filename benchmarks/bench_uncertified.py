"""How many entries ozaki2's certificate rejects, against the moduli count (CPU).

    python3 benchmarks/bench_uncertified.py --n 1024 4096 --phi 4 --moduli 14 16 18 20 22

The inputs are bench_gemmul8.py's own (``(rand − 0.5)·exp(φ·randn)``, the same seed), so
the fractions explain that benchmark's fallback costs.  Each call runs with
``fallback="none"`` (the rejected entries are counted, not recomputed: the count is the
certificate's alone, and the call stays fast); the CPU and the GPU certify the same entries.
Printed: a table of the rejected fraction per op, n and moduli count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_gemmul8 import input_seed, wide  # noqa: E402

import emublas  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1024])
    ap.add_argument("--phi", type=float, default=4.0)
    ap.add_argument("--ops", nargs="+", default=["dgemm", "zgemm"], choices=["dgemm", "zgemm"])
    ap.add_argument("--moduli", type=int, nargs="+", default=[14, 16, 18, 20])
    ap.add_argument("--mode", default="accurate", choices=["fast", "accurate"])
    ap.add_argument("--seed", type=int, default=20251, help="bench_gemmul8.py's default")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    print(f"| op | n | φ | mode | {' | '.join(f'{m} moduli' for m in args.moduli)} |")
    print("|---|---:|---:|---|" + "---:|" * len(args.moduli))
    for op in args.ops:
        cplx = op == "zgemm"
        for n in args.n:
            shape = (n, n, n)
            a = wide(input_seed(args.seed, op, shape, args.phi, 0), (n, n), args.phi, cplx, "C")
            b = wide(input_seed(args.seed, op, shape, args.phi, 1), (n, n), args.phi, cplx, "C")
            cells = []
            for m in args.moduli:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    getattr(emublas, op)(1.0, a, b, backend="ozaki2", moduli=m, mode=args.mode, fallback="none")
                count = emublas.ozaki2.last_run()["uncertified"]
                rows.append({"op": op, "n": n, "phi": args.phi, "mode": args.mode, "moduli": m, "uncertified": count})
                cells.append(f"{count / (n * n):.3g} ({count})")
            print(f"| {op} | {n} | {args.phi:g} | {args.mode} | {' | '.join(cells)} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"argv": sys.argv, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
