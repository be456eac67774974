"""Count silent errors: N adversarial cases per routine family, precision and backend.

    python3 benchmarks/bench_hunt.py --cases 10000                      # every family, prefix, backend
    python3 benchmarks/bench_hunt.py --cases 500 --backends ozaki2 --kinds gemm,syr2k --show 5
    python3 benchmarks/bench_hunt.py --cases 300 --backends ozaki2 --device gpu   # cupy operands
    python3 benchmarks/bench_hunt.py --cases 2000 --backends ozaki2 --kinds syrk,herk,syr2k,her2k --triangle-from 1
    python3 benchmarks/bench_hunt.py --cases 500 --backends ozaki2 --options bits=20 moduli=6   # fixed options

Each case (tests/hunt_cases.py: structured matrices at exponents across the whole
float32/float64 range) is run and every written entry is compared with its exact
value.  Per (family, prefix, backend) it prints: cases, entries checked, silent
errors (cases with an entry out of target and no emublas warning, crashes
included), crashes alone, and warned cases.  The issue's target: >= 10,000 cases
per family with zero silent errors.  Exit status 1 if any silent error was found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import numpy as np  # noqa: E402

import hunt_cases as H  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=1000, help="cases per (family, prefix, backend)")
    p.add_argument("--kinds", default=",".join(H.KINDS))
    p.add_argument("--prefixes", default=H.PREFIXES)
    p.add_argument("--backends", default=",".join(H.BACKENDS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show", type=int, default=3, help="silent cases to describe per row")
    p.add_argument("--json", help="write the counts here")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="gpu: the operands as cupy arrays")
    p.add_argument(
        "--triangle-from",
        type=int,
        default=None,
        help="ozaki2's rank-k bound product as a triangle from this many rows (scaling.TRIANGLE_MIN;"
        " 1 puts the hunt's small cases on that path)",
    )
    p.add_argument(
        "--options",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="backend options for every case instead of the drawn ones (integers as integers)",
    )
    args = p.parse_args(argv)
    fixed = None
    if args.options:
        fixed = {}
        for item in args.options:
            key, sep, value = item.partition("=")
            if not sep or not key:
                p.error(f"--options: expected KEY=VALUE, got {item!r}")
            fixed[key] = int(value) if value.lstrip("-").isdigit() else value
    if args.triangle_from is not None:
        from emublas.backends.ozaki2 import scaling

        scaling.TRIANGLE_MIN = args.triangle_from
    rows = []
    print(
        f"{'family':6} {'pfx':3} {'backend':9} {'cases':>7} {'entries':>9} {'silent':>7} "
        f"{'crashes':>7} {'warned':>7} {'s':>6}"
    )
    for backend in args.backends.split(","):
        for kind in args.kinds.split(","):
            for prefix in args.prefixes.replace(",", ""):
                rng = np.random.default_rng(
                    [args.seed, H.KINDS.index(kind), "sdcz".index(prefix), H.BACKENDS.index(backend)]
                )
                count = dict(cases=0, entries=0, silent=0, crashes=0, warned=0)
                shown = []
                t0 = time.perf_counter()
                for _ in range(args.cases):
                    case = H.make_case(rng, kind, prefix, backend, options=fixed)
                    out = H.run_and_check(case, args.device)
                    count["cases"] += 1
                    count["entries"] += out.entries
                    count["warned"] += bool(out.warned)
                    count["crashes"] += out.crash is not None
                    if out.silent:
                        count["silent"] += 1
                        if len(shown) < args.show:
                            shown.append(f"    {case.describe()}: {out.crash or out.bad[:2]}")
                dt = time.perf_counter() - t0
                print(
                    f"{kind:6} {prefix:3} {backend:9} {count['cases']:7d} {count['entries']:9d} "
                    f"{count['silent']:7d} {count['crashes']:7d} {count['warned']:7d} {dt:6.1f}",
                    flush=True,
                )
                for line in shown:
                    print(line)
                rows.append(dict(kind=kind, prefix=prefix, backend=backend, seconds=round(dt, 2), **count))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"argv": sys.argv, "options": fixed, "rows": rows}, fh, indent=1)
    return 1 if any(r["silent"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
