"""ozaki2's CPU scaling passes: one read of each operand against the separate passes.

    python3 benchmarks/bench_scaling_cpu.py --sizes 1024 2048 4096 --reps 11 [--json out.json]

For each size, layout (C: rows contiguous, the left factor of ``A @ B``; F: the rows
are the unit-stride side, the right factor's rows of ``Bᵀ``) and dtype (float64,
complex128), times in turns (:func:`emublas.timing.interleaved`):

* ``one read``: ``kernels_cpu.oz_stats_bound`` (what accurate mode runs now);
* ``two passes``: ``oz_row_stats``, the exponents in numpy, then ``oz_bound_int8`` (what
  it ran before);
* ``stats alone``: ``oz_row_stats`` (a pass that only reads), for scale;

and fast mode's first run (16 moduli, real or 2M planes):

* ``one read``: ``kernels_cpu.oz_scaled_residues`` (statistics, plan and residues);
* ``three passes``: ``oz_row_stats``, ``oz_row_plan``, then the residues.

Prints medians with [min-max] in ms and the ratios; each pair's results are checked
equal first.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emublas.backends.ozaki2 import cpu_stages, kernels_cpu, scaling  # noqa: E402
from emublas.backends.ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, TWO_M_ROOTS  # noqa: E402

L_FAST, SLACK = 110.0, 1.0  # a bound and a slack of the size a 16-modulus call uses

from _timing import interleaved, summary  # noqa: E402


def two_passes(x):
    st = kernels_cpu.oz_row_stats(x)
    ea = np.frexp(np.where(st[0] <= np.finfo(np.float64).max, st[0], 0.0))[1].astype(np.int32)
    return st, ea, kernels_cpu.oz_bound_int8(x, ea)


def fast_args(x):
    """The 16 moduli and roots of x's plane kind (real or 2M)."""
    if x.dtype.kind == "c":
        ms = tuple(TWO_M_MODULI[:16])
        return "2m", ms, tuple(TWO_M_ROOTS[m] for m in ms)
    return "real", tuple(REAL_MODULI[:16]), (0,) * 16


def fast_one(x):
    kind, ms, rs = fast_args(x)
    return kernels_cpu.oz_scaled_residues(kind, x, ms, rs, conj=False, L=L_FAST, safety=scaling.SAFETY, slack=SLACK)


def fast_three(x):
    kind, ms, rs = fast_args(x)
    st = kernels_cpu.oz_row_stats(x)
    k = x.shape[1]
    plan = kernels_cpu.oz_row_plan(st, None, L_FAST, scaling.LOG2_127SQ, scaling.SAFETY, math.log2(k), k, SLACK)
    return st, plan, cpu_stages.residues(kind, x, plan[0], ms, rs, False)


def commit() -> str:
    """This checkout's commit (with ``+`` when the tree has changes), or ``unknown``."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return rev.stdout.strip() + ("+" if dirty.stdout.strip() else "") if rev.returncode == 0 else "unknown"


def cases(rng, sizes):
    """``(n, layout, dtype name, x)``: square standard-normal operands of each size, layout and dtype."""
    for n in sizes:
        for order in "CF":
            for dtype in (np.float64, np.complex128):
                x = rng.standard_normal((n, n))
                if dtype == np.complex128:
                    x = x + 1j * rng.standard_normal((n, n))
                yield n, order, np.dtype(dtype).name, np.asarray(x, order=order)


def timed_row(rows, fns, reps, head, extra=None):
    """Time ``fns`` in turns, print a table row ``head | cells | first / second``, keep it in ``rows``."""
    times = interleaved(fns, reps)
    s = {k: summary(v) for k, v in times.items()}
    names = list(fns)
    ratio = s[names[0]]["median"] / s[names[1]]["median"]
    rows.append({**head, **(extra or {}), **s, "ratio": ratio})
    cells = " | ".join(f"{s[k]['median'] * 1e3:.1f} [{s[k]['min'] * 1e3:.1f}-{s[k]['max'] * 1e3:.1f}]" for k in names)
    print(f"| {head['n']} | {head['layout']} | {head['dtype']} | {cells} | {ratio:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows: list[dict] = []
    print(f"CPU: {platform.processor() or platform.machine()}, kernels {kernels_cpu.oz_kernel_name()}")
    print("| n | layout | dtype | one read ms | two passes ms | stats alone ms | one read / two passes |")
    print("|---:|---|---|---|---|---|---:|")
    for n, order, dtype, x in cases(rng, args.sizes):
        *st, ea, bound = kernels_cpu.oz_stats_bound(x)
        st2, ea2, bound2 = two_passes(x)
        assert all(np.array_equal(a, b) for a, b in zip(st, st2))
        assert np.array_equal(ea, ea2) and np.array_equal(bound, bound2)
        fns = {
            "one": lambda: kernels_cpu.oz_stats_bound(x),
            "two": lambda: two_passes(x),
            "stats": lambda: kernels_cpu.oz_row_stats(x),
        }
        timed_row(rows, fns, args.reps, {"n": n, "layout": order, "dtype": dtype})
    print()
    print("Fast mode's first run (16 moduli)")
    print("| n | layout | dtype | one read ms | three passes ms | one read / three passes |")
    print("|---:|---|---|---|---|---:|")
    for n, order, dtype, x in cases(rng, args.sizes):
        one, three = fast_one(x), fast_three(x)
        assert all(np.array_equal(a, b) for a, b in zip(one[0] + one[1], three[0] + three[1]))
        assert np.array_equal(one[2], three[2])
        fns = {"one": lambda: fast_one(x), "three": lambda: fast_three(x)}
        timed_row(rows, fns, args.reps, {"n": n, "layout": order, "dtype": dtype}, {"fast": True})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv, "commit": commit(), "cpu": platform.processor(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
