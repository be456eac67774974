"""An unchanged cupy program natively and under the shim, taken apart call by call on the GPU.

    python3 benchmarks/bench_shim_calls_gpu.py [--rounds 2] [--plain R] [--plain-modes M,...]
        [--ops R] [--threshold 0.05] [--profile] [--json F] [-- N NB]

Runs ``examples/cupy_cholesky.py`` (``N NB``, default 16384 2048) in fresh processes,
natively and under the shim (``emublas.interpose.install()``, ``EMUBLAS_BACKEND=auto``),
alternating, in three ways:

- ``--rounds``: every ``cupy.matmul`` timed from a device synchronisation before it to
  one after it (the calls' own times, not the program's, whose calls overlap): host time
  until it returns, device time until done.  The program is deterministic, so the calls
  pair by index; the table lists those slower under the shim by more than
  ``--threshold``, then the sums and the memory pool's size.
- ``--plain``: the program untimed (its own ``elapsed_s``) in the ``--plain-modes``:
  ``native``, ``shim``, ``shim-native`` (the shim with backend native: its per-call cost
  alone), ``shim-free`` (the pool's cached blocks freed after the set-up's first product),
  ``shim-sleep`` (3 s of idle GPU after it); any mode may end in ``-eager``
  (``CUDA_MODULE_LOADING=EAGER``) or ``-gemmex`` (ozaki2's products without cuBLASLt).
- ``--ops``: every library call the program makes (products, Cholesky, triangular solves,
  norms, triangles) timed alone, summed by kind over the part the program times (from
  its printed ``clock_start``), after one warm-up process per mode.

``--profile`` adds one run under the shim with cProfile (its 25 costliest functions).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import runpy
import statistics
import sys
import time
from pathlib import Path

from _children import run_json_child

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "examples" / "cupy_cholesky.py"


#: the processes' set-ups: native, or the shim installed (see child())
SHIM_MODES = ("shim", "shim-native", "shim-free", "shim-sleep", "profile")
MODES = ("native", *SHIM_MODES)
#: what a mode's ending adds to its child's environment
ENDINGS = {"-eager": {"CUDA_MODULE_LOADING": "EAGER"}, "-gemmex": {"EMUBLAS_OZAKI2_PRODUCTS": "gemmex"}}


def parse_mode(name: str) -> tuple[str, str, dict[str, str]]:
    """``(view, set-up, environment)`` of a child's mode name.

    The view is ``"plain"`` (``plain-``: the program untimed), ``"ops"`` (``ops-``: every
    library call timed) or ``"calls"`` (each product timed); the set-up one of :data:`MODES`;
    an ending ``-eager`` loads every CUDA module at start (``CUDA_MODULE_LOADING=EAGER``), one
    ``-gemmex`` makes ozaki2's products without cuBLASLt.
    """
    view = "calls"
    for prefix in ("plain-", "ops-"):
        if name.startswith(prefix):
            view, name = prefix[:-1], name.removeprefix(prefix)
    env: dict[str, str] = {}
    for ending, more in ENDINGS.items():
        if name.endswith(ending):
            env.update(more)
            name = name.removesuffix(ending)
    return view, name, env


def child(mode: str, program_args: list[str]) -> None:
    """One run of the program, natively or under the shim; prints the calls as JSON.

    ``shim-native`` installs the shim with ``EMUBLAS_BACKEND=native`` (its per-call cost
    without any emulated call); ``shim-free`` and ``shim-sleep`` are ``shim`` with the memory
    pool's free blocks given back, or 3 s of idle GPU, after the program's first product (the
    untimed set-up), to tell whether what an emulated call leaves behind slows what follows."""
    view, mode, _ = parse_mode(mode)  # the parent set the environment
    sys.path.insert(0, str(ROOT))
    import cupy

    if mode in SHIM_MODES:
        import emublas.interpose

        emublas.interpose.install()
    routed = cupy.matmul  # under the shim, its replacement
    pool = cupy.get_default_memory_pool()
    calls: list[tuple] = []

    def timed(a, b, *args, **kwargs):
        dev = cupy.cuda.Device()
        dev.synchronize()
        t0 = time.perf_counter()
        out = routed(a, b, *args, **kwargs)
        t1 = time.perf_counter()
        dev.synchronize()
        t2 = time.perf_counter()
        # the memory pool's size after the call: growth in the timed region means fresh cudaMallocs
        calls.append((list(a.shape), list(b.shape), str(a.dtype), t1 - t0, t2 - t0, pool.total_bytes()))
        return out

    if view == "ops":
        _time_every_op(cupy, calls)
    elif view == "calls":
        cupy.matmul = timed
    elif mode in ("shim-sleep", "shim-free"):
        settle = (lambda: time.sleep(3.0)) if mode == "shim-sleep" else pool.free_all_blocks

        def first_then_settle(a, b, *args, **kwargs):
            """The set-up's first product, then 3 s of idle GPU or the pool's cached blocks freed."""
            out = routed(a, b, *args, **kwargs)
            if cupy.matmul is first_then_settle:
                cupy.cuda.Device().synchronize()
                settle()
                cupy.matmul = routed
            return out

        cupy.matmul = first_then_settle
    sys.argv = [str(PROGRAM), *program_args]
    prof = cProfile.Profile() if mode == "profile" else None
    cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as text:
        if prof:
            prof.enable()
        runpy.run_path(str(PROGRAM), run_name="__main__")
        if prof:
            prof.disable()
    cpu1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall0
    busy = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    report = ""
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        report = buf.getvalue()
    said = dict(line.split(" = ", 1) for line in text.getvalue().splitlines() if " = " in line)
    elapsed = float(said["elapsed_s"]) if "elapsed_s" in said else None
    answer = {"calls": calls, "elapsed_s": elapsed, "profile": report, "pool_bytes": pool.total_bytes()}
    answer["clock_start"] = float(said.get("clock_start", "-inf"))  # the program's perf_counter at its t0
    # the process's CPU time over the program's wall time (several busy threads show as > 1) and its threads
    answer.update(cpu_per_wall=busy / wall, threads=len(os.listdir("/proc/self/task")))
    print(json.dumps(answer))


def _time_every_op(cupy, calls: list) -> None:
    """Time each of the program's library calls (products, factorizations, solves, norms,
    triangles) from a synchronisation before it to one after: ``(name, device seconds, start)``."""
    import cupyx.scipy.linalg

    def wrap(owner, name):
        fn = getattr(owner, name)

        def timed_op(*args, **kwargs):
            dev = cupy.cuda.Device()
            dev.synchronize()
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            dev.synchronize()
            calls.append((name, time.perf_counter() - t0, t0))
            return out

        setattr(owner, name, timed_op)

    for owner, name in (
        (cupy, "matmul"),
        (cupy.linalg, "cholesky"),
        (cupy.linalg, "norm"),
        (cupy, "tril"),
        (cupyx.scipy.linalg, "solve_triangular"),
    ):
        wrap(owner, name)


def run_child(mode: str, program_args: list[str]) -> dict:
    """One child process in ``mode`` (:func:`parse_mode`), its JSON answer."""
    _, setup, env = parse_mode(mode)
    return run_json_child(__file__, mode, program_args, "native" if setup == "shim-native" else "auto", env=env)


def op_table(rounds: int, program_args: list[str]) -> dict[str, list[dict]]:
    """Every library call of the program timed on its own, natively and under the shim: sums by
    kind of those after the program's clock started, and the program's time outside them."""
    got: dict[str, list[dict]] = {"native": [], "shim": []}
    for mode in got:  # warm-up: the first processes compile and cache cupy's kernels
        run_child(f"ops-{mode}", program_args)
    for r in range(rounds):
        for mode in ("native", "shim") if r % 2 == 0 else ("shim", "native"):
            got[mode].append(run_child(f"ops-{mode}", program_args))

    def sums(answer: dict) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, seconds, start in answer["calls"]:
            if start >= answer["clock_start"]:  # not the set-up's calls, before the program's clock
                out[name] = out.get(name, 0.0) + seconds
        out["(outside these calls)"] = answer["elapsed_s"] - sum(out.values())
        out["(elapsed_s)"] = answer["elapsed_s"]
        return out

    table = {mode: [sums(a) for a in answers] for mode, answers in got.items()}
    print(f"each library call timed alone (synchronised around it), {rounds} rounds, medians, ms:")
    print("| calls of | native | shim | shim - native |")
    print("|---|---:|---:|---:|")
    for name in table["native"][0]:
        n = statistics.median(t[name] for t in table["native"]) * 1e3
        s = statistics.median(t[name] for t in table["shim"]) * 1e3
        print(f"| {name} | {n:.1f} | {s:.1f} | {s - n:+.1f} |")
    for mode, answers in got.items():
        each = [[f"{t * 1e3:.1f}" for name, t, start in a["calls"] if name == "cholesky"] for a in answers]
        print(f"cholesky calls one by one (set-up's included), {mode} (ms): " + " / ".join(" ".join(e) for e in each))
    return got


def matmul_table(args, program_args: list[str], runs: dict[str, list[dict]]) -> list[dict]:
    """Each cupy.matmul of the program timed alone, natively and under the shim, paired by index."""
    for r in range(args.rounds):
        for mode in ("native", "shim") if r % 2 == 0 else ("shim", "native"):
            runs[mode].append(run_child(mode, program_args))
    counts = {len(x["calls"]) for m in runs.values() for x in m}
    if len(counts) != 1:
        raise RuntimeError(f"the runs made different numbers of matmul calls: {sorted(counts)}")
    n = counts.pop()

    def med(mode: str, i: int, field: int) -> float:
        return statistics.median(x["calls"][i][field] for x in runs[mode])

    print(f"program: {PROGRAM.name} {' '.join(program_args)}; {n} matmul calls, {args.rounds} rounds, medians (ms)")
    print("| call | a | b | dtype | host native | host shim | device native | device shim | shim/native |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|")
    rows = []
    for i in range(n):
        a, b, dt = runs["native"][0]["calls"][i][:3]
        hn, hs, dn, ds = med("native", i, 3), med("shim", i, 3), med("native", i, 4), med("shim", i, 4)
        rows.append({"a": a, "b": b, "dtype": dt, "host": [hn, hs], "device": [dn, ds]})
        if ds > dn * (1 + args.threshold):
            times = f"{hn * 1e3:.3f} | {hs * 1e3:.3f} | {dn * 1e3:.2f} | {ds * 1e3:.2f}"
            print(f"| {i} | {a} | {b} | {dt} | {times} | {ds / dn:.3f} |")
    for name in ("host", "device"):
        sn = sum(r[name][0] for r in rows) * 1e3
        ss = sum(r[name][1] for r in rows) * 1e3
        print(f"sum of {name} times: native {sn:.1f} ms, shim {ss:.1f} ms, difference {ss - sn:+.1f} ms")
    for mode in runs:
        grown = [(x["calls"][-1][5] - x["calls"][0][5]) / 2**30 for x in runs[mode]]
        print(
            f"{mode}: memory pool {runs[mode][0]['calls'][0][5] / 2**30:.1f} GiB after the first call (a construction),"
            f" grown by {statistics.median(grown):.1f} GiB to the last"
        )
        e = [x["elapsed_s"] for x in runs[mode] if x["elapsed_s"] is not None]
        if e:
            print(f"{mode}: the program's own elapsed_s (calls synchronised), median {statistics.median(e):.4f} s")
    return rows


def main() -> None:
    argv = sys.argv[1:]
    program_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    children = MODES + tuple(f"plain-{m}{e}" for m in MODES for e in ("", *ENDINGS)) + tuple(f"ops-{m}" for m in MODES)
    ap.add_argument("--child", choices=children, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threshold", type=float, default=0.05, help="list calls slower under the shim by this fraction")
    ap.add_argument("--profile", action="store_true", help="one more shim run under cProfile; its top functions")
    ap.add_argument(
        "--plain",
        type=int,
        default=0,
        help="rounds of untimed runs: native, shim, shim-native, shim-free, shim-sleep (see child())",
    )
    ap.add_argument(
        "--ops", type=int, default=0, help="rounds timing every library call of the program, native and shim"
    )
    ap.add_argument(
        "--plain-modes",
        default="native,shim,shim-native,shim-free,shim-sleep",
        help="the untimed runs' modes, comma-separated (each may end in -eager)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, program_args)
        return
    ops = op_table(args.ops, program_args) if args.ops else {}
    runs: dict[str, list[dict]] = {"native": [], "shim": []}
    rows = matmul_table(args, program_args, runs) if args.rounds else []
    plain: dict[str, list[dict]] = {m: [] for m in args.plain_modes.split(",")}
    for r in range(args.plain):
        order = list(plain) if r % 2 == 0 else list(plain)[::-1]
        for mode in order:
            plain[mode].append(run_child(f"plain-{mode}", program_args))
    if args.plain:
        print(f"untimed runs (the program's own elapsed_s, {args.plain} rounds alternating), s;")
        print("  the process's CPU time per wall second of the program, and its threads at the end:")
        for mode, got in plain.items():
            e = [x["elapsed_s"] for x in got]
            cpu = statistics.median(x["cpu_per_wall"] for x in got)
            threads = max(x["threads"] for x in got)
            print(
                f"  {mode:12s} median {statistics.median(e):.4f}  min {min(e):.4f}  max {max(e):.4f}"
                f"  cpu/wall {cpu:.2f}  threads {threads}"
            )
    if args.profile:
        print("one run under the shim with cProfile (whole program, construction included), by own time:")
        print(run_child("profile", program_args)["profile"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "program_args": program_args,
                    "rounds": args.rounds,
                    "calls": rows,
                    "runs": runs,
                    "plain": plain,
                    "ops": ops,
                },
                f,
            )


if __name__ == "__main__":
    main()
