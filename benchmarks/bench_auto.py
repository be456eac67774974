"""backend="auto" against native and against the fastest backend that meets the same accuracy.

For d and z gemm and herk (dsyrk for real data) at each size, times native, auto
and every configuration that meets native accuracy (native; ozaki2 with the
default moduli in accurate mode; strassen never qualifies under accuracy="native",
see emublas/backends/auto/model.py), interleaved per repetition, with a 0.3 s pause before
every timing (OpenBLAS's idle threads spin for about 0.1 s after a call; the
same pause before native and auto keeps their comparison fair).  Calls shorter
than 50 ms are timed as back-to-back batches of at least 50 ms (the per-call time
is the batch's over its count), as programs make them: a lone call after a pause
runs cold, and its time says more about the pause than about the call.
Reports medians with min/max, auto's choice, auto/native and auto/fastest, and
whether the targets hold: auto <= 1.05x the fastest qualifying backend and never
more than 5% slower than native, at every size.

    python3 benchmarks/bench_auto.py --sizes 64 128 256 512 1024 2048 4096 --reps 5 --wait-idle --json auto.json

With ``--device gpu`` the same comparison runs on cupy arrays (sizes 64 ... 16384 by
default) against the GPU's cost table: every batch starts on an idle device and
its wall time ends after ``emublas.synchronize()`` and a device synchronization
(ozaki2 calls return before the GPU finishes, like cuBLAS), so it is the time a
program waits for; no pause unless ``--gpu-pause`` asks for one (no OpenBLAS threads
to settle, but a batch may inherit the clocks the batch before it left).  Calls slower than
``--slow-s`` get at most ``--slow-reps`` repetitions, and ``--budget-s`` skips the
(routine, size) points whose predicted time (the previous size's measured time
scaled by n^3) does not fit in what is left, and lists them:

    python3 benchmarks/bench_auto.py --device gpu --reps 5 --budget-s 400 --json auto_gpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings

import numpy as np

import emublas
from emublas.backends.auto import model, tables
from emublas.errors import OzakiAccuracyWarning
from emublas.timing import settled_time, wall_times

PAUSE = 0.3
BATCH_S = 0.05
CPU_SIZES = [64, 128, 256, 512, 1024, 2048]
GPU_SIZES = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def timed(fn, count: int, wait_idle: bool, tries: int = 3) -> float:
    """Seconds per call of ``count`` back-to-back calls after the pause; with ``wait_idle``
    the pause repeats while others use more than 10% of a core, and a batch they disturbed
    (more than 5% of a core) is timed again, up to ``tries`` times."""
    return settled_time(fn, count=count, pause=PAUSE, wait_idle=wait_idle, tries=tries, idle_tries=tries, slack=0.005)


def gpu_timed(cp, fn, count: int, pause: float = 0.0) -> float:
    """Seconds per call of ``count`` back-to-back calls on an idle GPU (idle for ``pause``
    seconds first), up to the moment every queued kernel and deferred accuracy verdict is
    done (wall clock)."""
    cp.cuda.Device().synchronize()
    if pause:
        time.sleep(pause)
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    emublas.synchronize()
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / count


def gpu_inputs(cp, prefix, n, seed):
    """The CPU inputs' distribution, generated on the GPU (16384^2 complex on the host is slow)."""
    rng = cp.random.default_rng(seed)

    def part():
        return (rng.random((n, n)) - 0.5) * cp.exp(0.5 * rng.standard_normal((n, n)))

    def one():
        x = part()
        if prefix == "z":
            x = x + 1j * part()
        return cp.asfortranarray(x)

    return one(), one()


def inputs(prefix, n, rng):
    def one():
        x = (rng.random((n, n)) - 0.5) * np.exp(0.5 * rng.standard_normal((n, n)))
        if prefix == "z":
            x = x + 1j * (rng.random((n, n)) - 0.5) * np.exp(0.5 * rng.standard_normal((n, n)))
        return np.asfortranarray(x)

    return one(), one()


def call(routine, prefix, a, b, out, backend, opts):
    if routine == "gemm":
        fn = getattr(emublas, prefix + "gemm")
        return lambda: fn(1.0, a, b, c=out, overwrite_c=1, backend=backend, **opts)
    fn = getattr(emublas, prefix + ("herk" if prefix == "z" else "syrk"))
    return lambda: fn(1.0, a, c=out, overwrite_c=1, lower=1, backend=backend, **opts)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (sizes default by device)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="numpy arrays, or cupy arrays")
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="default: 64..2048 (cpu), 64..16384 (gpu), powers of 2"
    )
    ap.add_argument("--dtypes", nargs="+", default=["d", "z"], choices=("d", "z"))
    ap.add_argument("--routines", nargs="+", default=["gemm", "herk"], choices=("gemm", "herk"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument(
        "--slow-s", type=float, default=0.2, help="calls slower than this (s) get at most --slow-reps repetitions"
    )
    ap.add_argument("--slow-reps", type=int, default=3)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="skip the points predicted not to fit in what is left of this many seconds (and list them)",
    )
    ap.add_argument(
        "--rotate",
        action="store_true",
        help="start each repetition with the next configuration (native, auto, ozaki2 in turn), so that"
        " no configuration always follows the same one",
    )
    ap.add_argument(
        "--gpu-pause",
        type=float,
        default=0.0,
        help="GPU: seconds the device stays idle before every batch, so that no batch inherits the"
        " clocks a heavy batch before it left (see bench_auto_small_gpu.py)",
    )
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--wait-idle",
        action="store_true",
        help="CPU: time only while other processes and guests leave the CPUs idle (Linux /proc/stat)",
    )
    args = ap.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(CPU_SIZES if args.device == "cpu" else GPU_SIZES)
    if args.reps < 1 or args.slow_reps < 1:
        ap.error("--reps and --slow-reps must be at least 1")
    if any(n < 1 for n in args.sizes):
        ap.error("--sizes must be positive")
    return args


def predicted_s(prev: tuple[int, float] | None, n: int, args: argparse.Namespace) -> float | None:
    """Seconds a point of size ``n`` is predicted to take, from the previous size's
    ``prev = (n0, seconds of one call of each configuration, summed)``: that scaled by
    (n/n0)^3, times the calls of a point (4 warm-up calls and the repetitions), and at
    least the batches' floor (3 configurations x (reps + 1) x BATCH_S); None without one."""
    if prev is None:
        return None
    n0, per_call = prev
    scaled = per_call * (n / n0) ** 3
    reps = args.reps if scaled / 3 <= args.slow_s else min(args.reps, args.slow_reps)
    return max(scaled * (4 + reps), 3 * (args.reps + 1) * BATCH_S)


def main(argv=None) -> int:
    args = parse_args(argv)
    gpu = args.device == "gpu"
    cp = None
    if gpu:
        import cupy as cp
    rng = np.random.default_rng(0)
    table = tables.table_for(args.device)
    print(f"device: {args.device}; cost table: {table.label} (min_dim {table.min_dim}; source: {table.source})")
    rows: list[dict] = []
    skipped: list[dict] = []
    start = time.perf_counter()
    for prefix in args.dtypes:
        for routine in args.routines:
            name = prefix + ("syrk" if routine == "herk" and prefix == "d" else routine)
            prev: tuple[int, float] | None = None  # (n, seconds of one call per configuration, summed)
            for n in sorted(args.sizes):
                left = None if args.budget_s is None else args.budget_s - (time.perf_counter() - start)
                guess = predicted_s(prev, n, args)
                if left is not None and (left <= 0 or (guess is not None and guess > left)):
                    why = (
                        f"predicted {guess:.0f} s, {max(left, 0):.0f} s of --budget-s left"
                        if guess is not None
                        else "--budget-s spent"
                    )
                    skipped.append({"routine": name, "n": n, "why": why})
                    print(f"{name:6s} {n:5d} SKIPPED: {why}", flush=True)
                    continue
                t_point = time.perf_counter()
                row = measure(args, cp, prefix, routine, name, n, rng)
                row["point_s"] = time.perf_counter() - t_point
                row["predicted_point_s"] = guess
                prev = (n, row["call_s"])
                rows.append(row)
    held = bool(rows) and all(r["ok"] for r in rows)
    missed = ", ".join(f"{r['routine']} {r['n']}" for r in rows if not r["ok"])
    print(
        "targets (auto <= 1.05x the fastest qualifying backend and <= 1.05x native at every size): "
        + ("held" if held else f"MISSED at {missed}" if missed else "nothing measured")
        + (f" ({len(skipped)} points skipped for the budget)" if skipped else "")
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": args.device,
                    "table": table.label,
                    "table_source": table.source,
                    "budget_s": args.budget_s,
                    "rotate": args.rotate,
                    "gpu_pause_s": args.gpu_pause,
                    "elapsed_s": time.perf_counter() - start,
                    "targets_held": held,
                    "rows": rows,
                    "skipped": skipped,
                },
                fh,
                indent=1,
            )
    return 0


def measure(args, cp, prefix: str, routine: str, name: str, n: int, rng) -> dict:
    """One (routine, prefix, size) point: native, auto and ozaki2 interleaved; the row."""
    gpu = cp is not None
    if gpu:
        a, b = gpu_inputs(cp, prefix, n, 1000 * n + ord(prefix))
        out = cp.zeros((n, n), dtype=a.dtype, order="F")
    else:
        a, b = inputs(prefix, n, rng)
        out = np.zeros((n, n), dtype=a.dtype, order="F")
    cfgs = [
        ("native", {}),
        ("auto", {}),
        ("ozaki2", {"moduli": model.OZAKI2_NATIVE[prefix], "mode": "accurate"}),
    ]
    fns = [call(routine, prefix, a, b, out, be, o) for be, o in cfgs]
    times: list[list[float]] = [[] for _ in cfgs]
    sync = None
    if gpu:

        def sync():
            emublas.synchronize()
            cp.cuda.Device().synchronize()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OzakiAccuracyWarning)
        counts = []
        slowest = per_call = 0.0
        for fn in fns:
            _, once = wall_times(fn, 3, sync=sync)  # a warm-up, then 3 single calls
            slowest = max(slowest, min(once))
            per_call += min(once)
            # small calls are timed in back-to-back batches of >= BATCH_S, as programs make them
            counts.append(max(1, round(BATCH_S / max(min(once), 1e-7))))
        counts[1] = counts[0]  # auto: the same batch as native, whatever it picks
        reps = args.reps if slowest <= args.slow_s else min(args.reps, args.slow_reps)
        emublas.zgemm(1.0, np.ones((1, 1)), np.ones((1, 1)), backend="native")
        fns[1]()
        choice = emublas.auto_last()
        for rep in range(reps):
            first = rep % len(fns) if args.rotate else 0
            for i in [*range(first, len(fns)), *range(first)]:
                fn = fns[i]
                if gpu:
                    times[i].append(gpu_timed(cp, fn, counts[i], args.gpu_pause))
                else:
                    # the same pause before every batch: auto often runs native
                    times[i].append(timed(fn, counts[i], args.wait_idle))
    if gpu:
        del a, b, out, fns
        cp.get_default_memory_pool().free_all_blocks()
    row = summarize(cfgs, times, counts, choice, name, n, reps)
    row["call_s"] = per_call
    return row


def summarize(cfgs, times, counts, choice, name: str, n: int, reps: int) -> dict:
    """The row of one point from its repetitions, printed as one line."""
    med = {be: statistics.median(t) for (be, _), t in zip(cfgs, times)}
    spread = {be: (min(t), max(t)) for (be, _), t in zip(cfgs, times)}
    fastest = min(("native", "ozaki2"), key=lambda be: med[be])
    opts = choice["options"]
    chosen = choice["backend"] + (f":{opts['moduli']}" if "moduli" in opts else "")
    row = {
        "routine": name,
        "n": n,
        "reps": reps,
        "auto_chose": chosen,
        "median_s": med,
        "min_max_s": spread,
        "fastest": fastest,
        "times_s": {be: t for (be, _), t in zip(cfgs, times)},
        "batch": dict(zip(med, counts)),
        "auto_vs_native": med["auto"] / med["native"],
        "auto_vs_fastest": med["auto"] / med[fastest],
    }
    # best-of ratios beside the medians: on a shared machine a disturbed repetition moves a
    # median of 5 by more than the 5% the targets allow
    row["best_auto_vs_native"] = spread["auto"][0] / spread["native"][0]
    row["best_auto_vs_fastest"] = spread["auto"][0] / min(spread["native"][0], spread["ozaki2"][0])
    # paired: each repetition's auto time over the native (fastest) time next to it, so a
    # disturbance that lasts a repetition cancels; the median of those ratios
    t_nat, t_auto, t_oz = times
    row["paired_auto_vs_native"] = statistics.median(x / y for x, y in zip(t_auto, t_nat))
    row["paired_auto_vs_fastest"] = statistics.median(x / min(y, z) for x, y, z in zip(t_auto, t_nat, t_oz))
    row["ok"] = row["auto_vs_fastest"] <= 1.05 and row["auto_vs_native"] <= 1.05
    print(
        f"{name:6s} {n:5d} auto->{chosen:10s} native {med['native'] * 1e3:9.2f} ms"
        f" [{spread['native'][0] * 1e3:.2f}, {spread['native'][1] * 1e3:.2f}]"
        f"  auto {med['auto'] * 1e3:9.2f} [{spread['auto'][0] * 1e3:.2f}, {spread['auto'][1] * 1e3:.2f}]"
        f"  ozaki2 {med['ozaki2'] * 1e3:9.2f} [{spread['ozaki2'][0] * 1e3:.2f},"
        f" {spread['ozaki2'][1] * 1e3:.2f}]  auto/native {row['auto_vs_native']:.3f}"
        f"  auto/fastest({fastest}) {row['auto_vs_fastest']:.3f}"
        f"  best-of auto/native {row['best_auto_vs_native']:.3f}"
        f"  paired auto/native {row['paired_auto_vs_native']:.3f}  {'ok' if row['ok'] else 'MISSED'}",
        flush=True,
    )
    return row


if __name__ == "__main__":
    sys.exit(main())
