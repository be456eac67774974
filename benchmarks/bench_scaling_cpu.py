"""ozaki2's CPU scaling pass: statistics and bound planes from one read against two passes.

    python3 benchmarks/bench_scaling_cpu.py --sizes 1024 2048 4096 --reps 11 [--json out.json]

For each size, layout (C: rows contiguous, the left factor of ``A @ B``; F: the rows
are the unit-stride side, the right factor's rows of ``Bᵀ``) and dtype (float64,
complex128), times in turns (:func:`emublas.timing.interleaved`):

* ``one read``: ``kernels_cpu.oz_stats_bound`` (what accurate mode runs now);
* ``two passes``: ``oz_row_stats``, the exponents in numpy, then ``oz_bound_int8`` (what
  it ran before);
* ``stats alone``: ``oz_row_stats`` (a pass that only reads), for scale.

Prints medians with [min-max] in ms and the ratio one read / two passes; the two results
are checked equal first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emublas.backends.ozaki2 import kernels_cpu  # noqa: E402

from _timing import interleaved, summary  # noqa: E402


def two_passes(x):
    st = kernels_cpu.oz_row_stats(x)
    ea = np.frexp(np.where(st[0] <= np.finfo(np.float64).max, st[0], 0.0))[1].astype(np.int32)
    return st, ea, kernels_cpu.oz_bound_int8(x, ea)


def commit() -> str:
    """This checkout's commit (with ``+`` when the tree has changes), or ``unknown``."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return rev.stdout.strip() + ("+" if dirty.stdout.strip() else "") if rev.returncode == 0 else "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(f"CPU: {platform.processor() or platform.machine()}, kernels {kernels_cpu.oz_kernel_name()}")
    print("| n | layout | dtype | one read ms | two passes ms | stats alone ms | one read / two passes |")
    print("|---:|---|---|---|---|---|---:|")
    for n in args.sizes:
        for order in "CF":
            for dtype in (np.float64, np.complex128):
                x = rng.standard_normal((n, n))
                if dtype == np.complex128:
                    x = x + 1j * rng.standard_normal((n, n))
                x = np.asarray(x, order=order)
                *st, ea, bound = kernels_cpu.oz_stats_bound(x)
                st2, ea2, bound2 = two_passes(x)
                assert all(np.array_equal(a, b) for a, b in zip(st, st2))
                assert np.array_equal(ea, ea2) and np.array_equal(bound, bound2)
                times = interleaved(
                    {
                        "one": lambda: kernels_cpu.oz_stats_bound(x),
                        "two": lambda: two_passes(x),
                        "stats": lambda: kernels_cpu.oz_row_stats(x),
                    },
                    args.reps,
                )
                s = {k: summary(v) for k, v in times.items()}
                ratio = s["one"]["median"] / s["two"]["median"]
                rows.append({"n": n, "layout": order, "dtype": np.dtype(dtype).name, **s, "ratio": ratio})
                cells = " | ".join(
                    f"{s[k]['median'] * 1e3:.1f} [{s[k]['min'] * 1e3:.1f}-{s[k]['max'] * 1e3:.1f}]"
                    for k in ("one", "two", "stats")
                )
                print(f"| {n} | {order} | {np.dtype(dtype).name} | {cells} | {ratio:.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv, "commit": commit(), "cpu": platform.processor(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
