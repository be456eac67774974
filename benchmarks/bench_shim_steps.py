"""Where the interpose shim's per-call time goes on calls it leaves to scipy (``EMUBLAS_BACKEND=auto``).

    OPENBLAS_NUM_THREADS=1 python3 benchmarks/bench_shim_steps.py --runs 10 [--json out.json]

Three measurements in one process, on the CPU:

* **hot**: each step of the shim's fall-through path (``call_dims``, ``policy.route``,
  ``policy.record``) timed alone in a loop (best of 7 batches), on a dtrsm call of the
  scipy program below;
* **in the program**: ``examples/scipy_cholesky.py 1024 64`` run ``--runs`` times under the
  shim with the same three steps wrapped in timers: their mean cost per call there, where the
  BLAS work between calls leaves the caches cold;
* **per call**: the program run ``--runs`` times natively and ``--runs`` times under the shim,
  alternating, with every BLAS function it calls wrapped in a timer; the medians of the same
  call (by position in the program) compared, summed per routine.

The first run of each mode is a warm-up and not counted.  Timed assertions do not belong in
tests: this is where the shim's cost inside a program is measured (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

os.environ.setdefault("EMUBLAS_BACKEND", "auto")
HERE = Path(__file__).resolve().parent
ROUTINES = ("dgemm", "zgemm", "dtrsm", "ztrsm", "dsyrk", "zherk")
STEPS = ("call_dims", "route", "record")


def best_us(fn, reps: int = 3000) -> float:
    for _ in range(100):
        fn()
    batches = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        batches.append((time.perf_counter() - t0) / reps)
    return min(batches) * 1e6


def run_program(prog) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        prog.main()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="program runs per mode (the first one is a warm-up)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.runs < 2:
        ap.error("--runs must be at least 2")

    import scipy.linalg.blas as blas

    import emublas.interpose as shim
    from emublas.interpose import policy, scipy_blas

    sys.path.insert(0, str(HERE.parent / "examples"))
    sys.argv = ["scipy_cholesky.py", "1024", "64"]
    import scipy_cholesky as prog

    # hot: the steps alone, on the program's first panel solve
    shim.install()
    a = np.asfortranarray(np.random.default_rng(0).random((1024, 1024)) + 1024 * np.eye(1024))
    call = (1.0, a[:64, :64], a[64:, :64])
    kw = {"side": 1, "lower": 1, "trans_a": 2}
    dims = scipy_blas.call_dims("dtrsm", call, kw)
    name, opts, _ = policy.route("trsm", "d", dims, "cpu")
    hot = {
        "call_dims": best_us(lambda: scipy_blas.call_dims("dtrsm", call, kw)),
        "route": best_us(lambda: policy.route("trsm", "d", dims, "cpu")),
        "record": best_us(
            lambda: policy.record("dtrsm", dims[:3], np.float64, False, "auto: native", 1e-4, name, opts)
        ),
    }
    hot_call = {
        "shim": best_us(lambda: blas.dtrsm(*call, **kw), 300),
        "scipy": best_us(lambda: blas.dtrsm.__wrapped__(*call, **kw), 300),
    }

    # in the program: the same steps, wrapped
    spent: defaultdict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    originals = {"call_dims": (scipy_blas, scipy_blas.call_dims)}
    originals.update({s: (policy, getattr(policy, s)) for s in STEPS[1:]})

    def timed_step(step, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[step] += time.perf_counter() - t0
                counts[step] += 1

        return wrapper

    for step, (mod, fn) in originals.items():
        setattr(mod, step, timed_step(step, fn))
    for i in range(args.runs):
        if i == 1:
            spent.clear()
            counts.clear()
        run_program(prog)
    for step, (mod, fn) in originals.items():
        setattr(mod, step, fn)
    in_program = {s: spent[s] / counts[s] * 1e6 for s in STEPS if counts[s]}
    shim.uninstall()

    # per call: native against shim, call by call
    log: list[tuple[str, float]] = []

    def timed_call(rname, fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            log.append((rname, time.perf_counter() - t0))
            return out

        return wrapper

    per: dict[str, defaultdict] = {"native": defaultdict(list), "shim": defaultdict(list)}
    elapsed: dict[str, list[float]] = {"native": [], "shim": []}
    for i in range(args.runs):
        for mode in ("native", "shim") if i % 2 == 0 else ("shim", "native"):
            if mode == "shim":
                shim.install()
            saved = {r: getattr(blas, r) for r in ROUTINES}
            for r in ROUTINES:
                setattr(blas, r, timed_call(r, saved[r]))
            log.clear()
            t0 = time.perf_counter()
            run_program(prog)
            took = time.perf_counter() - t0
            for r in ROUTINES:
                setattr(blas, r, saved[r])
            if mode == "shim":
                shim.uninstall()
            if i:
                elapsed[mode].append(took)
                for j, (r, t) in enumerate(log):
                    per[mode][(j, r)].append(t)
    extra: defaultdict[str, float] = defaultdict(float)
    ncalls: Counter[str] = Counter()
    for key, times in per["native"].items():
        extra[key[1]] += statistics.median(per["shim"][key]) - statistics.median(times)
        ncalls[key[1]] += 1

    print("hot, µs per step (best of 7 batches):", ", ".join(f"{s} {v:.2f}" for s, v in hot.items()))
    print(f"hot dtrsm 960x64x64 call: shim {hot_call['shim']:.1f} µs, scipy {hot_call['scipy']:.1f} µs")
    print("in the program, µs per call:", ", ".join(f"{s} {v:.2f}" for s, v in in_program.items()))
    print("| routine | calls | extra under the shim, ms | per call, µs |")
    print("|---|---:|---:|---:|")
    for r in sorted(extra, key=lambda r: -extra[r]):
        print(f"| {r} | {ncalls[r]} | {extra[r] * 1e3:.2f} | {extra[r] / ncalls[r] * 1e6:.1f} |")
    total = sum(extra.values())
    med = {m: statistics.median(v) for m, v in elapsed.items()}
    print(
        f"sum {total * 1e3:.2f} ms over {sum(ncalls.values())} calls; program (BLAS wrapped, {args.runs - 1} runs"
        f" each) native {med['native'] * 1e3:.1f} ms, shim {med['shim'] * 1e3:.1f} ms"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "hot_us": hot,
                    "hot_call_us": hot_call,
                    "in_program_us": in_program,
                    "extra_s": dict(extra),
                    "calls": dict(ncalls),
                    "program_s": elapsed,
                    "argv": sys.argv,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
