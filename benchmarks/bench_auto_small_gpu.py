"""Where auto's time goes on small GPU calls, and whether a GPU batch's time depends on the batch before it.

Part 1, small calls (all host time): for dgemm, dsyrk, zgemm and zherk at ``--n`` (64) on
Fortran-order cupy operands (``c`` given, ``overwrite_c=1``, as bench_auto.py calls them),
``--rounds`` rounds of back-to-back batches of ``--batch`` calls, native and auto in turn (the
order swapped every round), each batch's wall time ending after a device synchronization.
Printed per routine: the medians per call, auto − native in µs and the median of the paired
ratios.  Then the steps auto adds to native's path, each timed alone (best of 5 timeit runs):
``config.resolve`` for each backend, auto's ``route`` and ``check``, on a cupy and on a numpy
output; then the 12 functions with the most own time in a cProfile of ``--profile`` auto calls
and as many native calls.

Part 2, order: for dgemm and dsyrk at ``--big`` (4096), ``--seq-rounds`` times the batch
sequence native, native, auto, auto (each batch about 50 ms of back-to-back calls), first with
no pause between batches and then with ``--pause`` seconds of idle GPU before every batch.
Printed: the median per-call time of each configuration by the configuration that ran just
before it.  If a native batch after a native batch is as slow as an auto batch after one,
the order, not auto, made bench_auto.py's auto/native ratios there.

Part 3, ``--parts stubs`` (not run by default): for dgemm and dsyrk at ``--n``, native, auto,
auto with its ``route`` replaced by a function that returns the decision and nothing else, and
with ``check`` replaced too, in rotating order: how much of auto's extra time in a loop each
step is.

    python3 benchmarks/bench_auto_small_gpu.py --json auto_small_gpu.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
import timeit
import warnings

import numpy as np

import emublas
from emublas import config
from emublas.errors import OzakiAccuracyWarning
from emublas.timing import elapsed

ROUTINES = ("dgemm", "dsyrk", "zgemm", "zherk")


def operands(cp, name: str, n: int):
    """(a, b, out) Fortran-ordered on the GPU, the distribution of bench_auto.py."""
    rng = cp.random.default_rng(n)
    dtype = np.complex128 if name[0] == "z" else np.float64

    def one():
        x = rng.random((n, n)) - 0.5
        if dtype == np.complex128:
            x = x + 1j * (rng.random((n, n)) - 0.5)
        return cp.asfortranarray(x)

    return one(), one(), cp.zeros((n, n), dtype=dtype, order="F")


def caller(name: str, a, b, out, backend: str):
    fn = getattr(emublas, name)
    if name.endswith("gemm"):
        return lambda: fn(1.0, a, b, c=out, overwrite_c=1, backend=backend)
    return lambda: fn(1.0, a, c=out, overwrite_c=1, lower=1, backend=backend)


def batch(cp, fn, count: int) -> float:
    """Seconds per call of ``count`` back-to-back calls on an idle device, to the end of its work."""
    sync = cp.cuda.Device().synchronize
    sync()
    return elapsed(fn, count, sync) / count


def best_us(fn, number: int) -> float:
    """µs per call of ``fn``: the best of 5 timeit runs of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def small_calls(cp, args) -> dict:
    rows = {}
    for name in ROUTINES:
        a, b, out = operands(cp, name, args.n)
        fns = {be: caller(name, a, b, out, be) for be in ("native", "auto")}
        for fn in fns.values():
            for _ in range(20):
                fn()
        times: dict[str, list[float]] = {"native": [], "auto": []}
        for r in range(args.rounds):
            for be in ("native", "auto") if r % 2 == 0 else ("auto", "native"):
                times[be].append(batch(cp, fns[be], args.batch))
        med = {be: statistics.median(t) for be, t in times.items()}
        paired = statistics.median(x / y for x, y in zip(times["auto"], times["native"]))
        rows[name] = {"times_s": times, "median_s": med, "paired_auto_vs_native": paired}
        print(
            f"{name} {args.n}: native {med['native'] * 1e6:7.2f} us  auto {med['auto'] * 1e6:7.2f} us"
            f"  auto - native {(med['auto'] - med['native']) * 1e6:5.2f} us  paired auto/native {paired:.3f}",
            flush=True,
        )
    return rows


def steps(cp, args) -> dict:
    """The steps auto adds, timed alone, on a cupy and on a numpy output."""
    auto, opts = config.resolve("auto", None)
    native, _ = config.resolve("native", None)
    out = {}
    for label, xp in (("cupy", cp), ("numpy", np)):
        c = xp.zeros((args.n, args.n), order="F")
        auto.route("syrk", "d", args.n, args.n, args.n, c, opts)
        device = "gpu" if xp is cp else "cpu"
        out[label] = {
            "resolve_auto": best_us(lambda: config.resolve("auto", None), 200_000),
            "resolve_native": best_us(lambda: config.resolve("native", None), 200_000),
            "route_auto": best_us(lambda c=c: auto.route("syrk", "d", args.n, args.n, args.n, c, opts), 200_000),
            "route_native": best_us(lambda c=c: native.route("syrk", "d", args.n, args.n, args.n, c, opts), 200_000),
            "check_auto": best_us(lambda d=device: auto.check(d), 200_000),
            "check_native": best_us(lambda d=device: native.check(d), 200_000),
            "empty_lambda": best_us(lambda: None, 200_000),
        }
        print(f"steps on {label} ({device}), us: " + "  ".join(f"{k} {v:.3f}" for k, v in out[label].items()))
    return out


def profiles(cp, args) -> dict:
    """cProfile's top own-time functions of auto's and native's dsyrk calls."""
    a, b, out = operands(cp, "dsyrk", args.n)
    texts, counts = {}, {}
    for be in ("native", "auto"):
        fn = caller("dsyrk", a, b, out, be)
        fn()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.profile):
            fn()
        prof.disable()
        cp.cuda.Device().synchronize()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
        texts[be] = buf.getvalue()
        stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        counts[be] = {f"{key[0].rsplit('/', 1)[-1]}:{key[1]} {key[2]}": v[1] for key, v in stats.items()}
        print(f"--- cProfile, {args.profile} dsyrk {args.n} calls, backend={be}, by own time")
        print("\n".join(line for line in texts[be].splitlines() if line.strip())[:3000])
    extra = {
        f: (counts["native"].get(f, 0), counts["auto"].get(f, 0))
        for f in set(counts["native"]) | set(counts["auto"])
        if counts["native"].get(f, 0) != counts["auto"].get(f, 0)
    }
    print("calls that differ (native, auto): " + "; ".join(f"{f} {v}" for f, v in sorted(extra.items())))
    return {"text": texts, "calls_that_differ": extra}


def order(cp, args) -> dict:
    """Each configuration's per-call time by the configuration of the batch before it."""
    rows = {}
    for name in ("dgemm", "dsyrk"):
        a, b, out = operands(cp, name, args.big)
        fns = {be: caller(name, a, b, out, be) for be in ("native", "auto")}
        once = min(batch(cp, fns["native"], 1) for _ in range(3))
        count = max(1, round(0.05 / once))
        for fn in fns.values():
            batch(cp, fn, count)
        for pause in (0.0, args.pause):
            seen: dict[str, list[float]] = {}
            prev = "start"
            for _ in range(args.seq_rounds):
                for be in ("native", "native", "auto", "auto"):
                    if pause:
                        cp.cuda.Device().synchronize()
                        time.sleep(pause)
                    seen.setdefault(f"{be} after {prev}", []).append(batch(cp, fns[be], count))
                    prev = be
            med = {k: statistics.median(v) for k, v in seen.items()}
            rows[f"{name} {args.big} pause {pause}"] = {"count": count, "times_s": seen, "median_s": med}
            print(
                f"{name} {args.big} pause {pause:.2f} s, batches of {count}: "
                + "  ".join(f"{k} {v * 1e3:.3f} ms" for k, v in sorted(med.items())),
                flush=True,
            )
    return rows


def stubs(cp, args) -> dict:
    """auto's extra time with its steps replaced, one at a time, by stand-ins that do nothing:
    how much of it each step is, inside a loop of real calls."""
    auto, opts = config.resolve("auto", None)
    rows = {}
    for name in ("dgemm", "dsyrk"):
        a, b, out = operands(cp, name, args.n)
        fns = {be: caller(name, a, b, out, be) for be in ("native", "auto")}
        fns["auto"]()
        kind = "gemm" if name.endswith("gemm") else "syrk"
        routed = auto.route(kind, "d", args.n, args.n, args.n, out, opts)
        variants = {
            "native": ({}, "native"),
            "auto": ({}, "auto"),
            "auto, route stubbed": ({"route": lambda *a: routed}, "auto"),
            "auto, route and check stubbed": ({"route": lambda *a: routed, "check": lambda d: None}, "auto"),
        }
        times: dict[str, list[float]] = {v: [] for v in variants}
        for r in range(args.rounds):
            order = list(variants)[r % len(variants) :] + list(variants)[: r % len(variants)]
            for v in order:
                patch, be = variants[v]
                for attr, fn in patch.items():
                    setattr(auto, attr, fn)  # an instance attribute hides the method
                try:
                    times[v].append(batch(cp, fns[be], args.batch))
                finally:
                    for attr in patch:
                        delattr(auto, attr)
        med = {v: statistics.median(t) for v, t in times.items()}
        rows[name] = {"times_s": times, "median_s": med}
        print(
            f"{name} {args.n} stubs: "
            + "  ".join(f"{v} {(m - med['native']) * 1e6:+.2f} us" for v, m in med.items() if v != "native"),
            flush=True,
        )
    return rows


PARTS = {"small": small_calls, "steps_us": steps, "profiles": profiles, "order": order, "stubs": stubs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--profile", type=int, default=2000)
    ap.add_argument("--big", type=int, default=4096)
    ap.add_argument("--seq-rounds", type=int, default=6)
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--parts", nargs="+", default=["small", "steps_us", "profiles", "order"], choices=list(PARTS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import cupy as cp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OzakiAccuracyWarning)
        result = {"args": vars(args), **{part: PARTS[part](cp, args) for part in args.parts}}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
