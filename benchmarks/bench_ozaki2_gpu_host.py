"""Where the host time of a direct ozaki2 call on cupy arrays goes: a timeline and cProfile.

For each routine and size: 3 warm-up calls; the host ms per call over ``--calls``
back-to-back direct calls (``graphs="off"``); the host timeline of one call (ms from its
entry at which each step starts: row statistics, bound product, plan, certificate,
engine, driver, residue pass, first int8 product; medians of 5 calls, each after a
synchronisation); the isolated device time of one call between its own events (as
``bench_gemmul8.py`` times it); then ``--calls`` calls under cProfile, with the
functions of most own and cumulative time; and the last timeline call's trace (when each
kernel wrapper and cupy allocation up to the residue pass was called, and its time).
Every scaling kernel is queued when the residue pass starts and the device's work before
it is short, so a call whose host is slower up to there leaves the GPU waiting: the
isolated time then exceeds the device's own work by about the difference.

Usage::

    python3 benchmarks/bench_ozaki2_gpu_host.py --sizes 256 4096 --ops dgemm zgemm --moduli 16 [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from functools import partial

import emublas
from emublas import blas
from emublas.backends.ozaki2 import calls, certify, gpu_engine, kernels_gpu, pipeline, scaling, verdicts
from emublas.timing import cuda_times

#: (label, module, attribute) of the steps whose first call the timeline stamps
STEPS = [
    ("stats", scaling, "side"),
    ("bound", scaling, "bound_product"),
    ("plan", calls, "plan"),
    ("certificate", certify, "certificate"),
    ("engine", gpu_engine, "run"),
    ("driver", pipeline, "run"),
    ("residues", kernels_gpu, "residues"),
    ("products", kernels_gpu, "gemm_tn"),
]


#: functions every call of which the trace stamps (module attribute names)
TRACED = [
    ("row_stats", kernels_gpu, "row_stats"),
    ("bound_planes", kernels_gpu, "bound_planes"),
    ("w_maxima", kernels_gpu, "w_maxima"),
    ("row_plan", kernels_gpu, "row_plan"),
    ("gemm_tn", kernels_gpu, "gemm_tn"),
    ("residues", kernels_gpu, "residues"),
    ("prepare_out", blas, "prepare_out"),
    ("verdicts.check", verdicts, "check"),
    ("certificate", certify, "certificate"),
    ("gpu_budget", calls, "gpu_budget"),
    ("workspace_plan", gpu_engine, "workspace_plan"),
    ("_On", gpu_engine, "_On"),
    ("GpuStages", gpu_engine, "GpuStages"),
]


def timeline(call, sync, calls_: int = 5) -> tuple[dict, list]:
    """Median ms from a call's entry to the first call of each step (and to its return, ``end``),
    and the last call's trace: ``(label, ms from entry, ms spent inside)`` of every traced call."""
    import cupy

    stamps: dict = {}
    trace: list = []

    def spy(label, fn):
        def wrapped(*a, **k):
            stamps.setdefault(label, time.perf_counter())
            return fn(*a, **k)

        return wrapped

    def tracer(label, fn):
        def wrapped(*a, **k):
            t = time.perf_counter()
            out = fn(*a, **k)
            trace.append((label, t, time.perf_counter() - t))
            return out

        return wrapped

    # (an older tree may lack some of them: bench_against_commit-style comparisons run this script on it)
    traced = [t for t in TRACED if hasattr(t[1], t[2])] + [("cupy.empty", cupy, "empty"), ("cupy.zeros", cupy, "zeros")]
    originals = [(mod, attr, getattr(mod, attr)) for _, mod, attr in STEPS + traced]
    marks: dict = {label: [] for label, _, _ in STEPS}
    marks["end"] = []
    for label, mod, attr in STEPS:
        setattr(mod, attr, spy(label, getattr(mod, attr)))
    for label, mod, attr in traced:
        setattr(mod, attr, tracer(label, getattr(mod, attr)))
    try:
        for _ in range(calls_):
            stamps.clear()
            trace.clear()
            s0 = time.perf_counter()
            call()
            s1 = time.perf_counter()
            stamps["end"] = s1
            for label in marks:
                marks[label].append(1e3 * (stamps.get(label, s1) - s0))
            sync()
    finally:
        for mod, attr, fn in originals:
            setattr(mod, attr, fn)
    last = [(label, 1e3 * (t - s0), 1e3 * d) for label, t, d in trace]
    return {label: sorted(v)[len(v) // 2] for label, v in marks.items()}, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 4096])
    ap.add_argument("--ops", nargs="+", choices=["dgemm", "zgemm"], default=["dgemm", "zgemm"])
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--mode", choices=["fast", "accurate"], default="accurate")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

    import cupy

    sync = cupy.cuda.Device().synchronize
    rng = cupy.random.default_rng(0)
    summary = []
    for n in args.sizes:
        for op in args.ops:
            a = rng.random((n, n)) - 0.5
            b = rng.random((n, n)) - 0.5
            if op[0] == "z":
                a, b = a + 1j * (rng.random((n, n)) - 0.5), b + 1j * (rng.random((n, n)) - 0.5)
            a, b = cupy.asfortranarray(a), cupy.asfortranarray(b)
            call = partial(
                getattr(emublas, op), 1.0, a, b, backend="ozaki2", moduli=args.moduli, mode=args.mode, graphs="off"
            )
            for _ in range(3):
                call()
            sync()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                call()
            host = (time.perf_counter() - t0) / args.calls
            sync()
            tl, trace = timeline(call, sync)
            print(f"== {op} n = {n}: the last timed call's trace (ms from entry, ms inside), up to the residues")
            upto = next((i for i, row in enumerate(trace) if row[0] == "residues"), len(trace))
            print("  ".join(f"{label}@{t:.3f}({d:.3f})" for label, t, d in trace[: upto + 1]))
            iso = sorted(cuda_times(cupy, call, 5, warmup=False)[1])[2]
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                call()
            prof.disable()
            sync()
            summary.append((op, n, 1e3 * host, tl, 1e3 * iso))
            for key in ("tottime", "cumulative"):
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
                print(f"== {op} n = {n}, {args.calls} calls, sorted by {key}")
                print("\n".join(line for line in buf.getvalue().splitlines() if line.strip()))
            del a, b
            cupy.get_default_memory_pool().free_all_blocks()
    labels = [label for label, _, _ in STEPS] + ["end"]
    print(f"ozaki2, {args.moduli} moduli, {args.mode}, graphs off: ms per call; timeline: ms from entry to each step")
    print("| op | n | host | isolated device | " + " | ".join(labels) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(labels))
    for op, n, host, tl, iso in summary:
        print(f"| {op} | {n} | {host:.3f} | {iso:.3f} | " + " | ".join(f"{tl[k]:.3f}" for k in labels) + " |")


if __name__ == "__main__":
    main()
