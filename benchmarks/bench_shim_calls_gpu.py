"""Each cupy product of an unchanged program, natively and under the shim, call by call on the GPU.

    python3 benchmarks/bench_shim_calls_gpu.py [--rounds 2] [--threshold 0.05] [--profile] [--json F] [-- N NB]

Runs ``examples/cupy_cholesky.py`` (``N NB``, default 16384 2048) in fresh processes,
natively and under the shim (``emublas.interpose.install()``, ``EMUBLAS_BACKEND=auto``),
alternating, ``--rounds`` times.  In each process every ``cupy.matmul`` the program
makes is timed from a device synchronisation before it to one after it, so the calls
run one at a time (these are the calls' own times, not the program's, whose calls
overlap): the host time until the call returns and the time until the device is
done.  The program is deterministic, so the calls pair by their index; the table
lists the calls whose device time under the shim exceeds native by more than
``--threshold``, and the sums.  This tells the shim's own host cost of a call from a
native call that runs slower on the GPU under the shim.  ``--profile`` adds one more run under
the shim with cProfile (not timed; its 25 costliest functions by own time are printed), to
name where the shim's host time goes.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import runpy
import statistics
import sys
import time
from pathlib import Path

from _children import run_json_child

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "examples" / "cupy_cholesky.py"


def child(mode: str, program_args: list[str]) -> None:
    """One run of the program, natively or under the shim; prints the calls as JSON.

    ``plain-`` modes leave the program's calls untimed (only its own elapsed_s);
    ``shim-native`` installs the shim with ``EMUBLAS_BACKEND=native`` (its per-call cost
    without any emulated call); ``shim-free`` is ``shim`` with the memory pool's free blocks
    given back after the program's first product (the untimed construction), to tell
    whether the memory an emulated call leaves cached slows what follows."""
    plain = mode.startswith("plain-")
    mode = mode.removeprefix("plain-")
    sys.path.insert(0, str(ROOT))
    import cupy

    if mode in ("shim", "profile", "shim-native", "shim-free"):
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

    if not plain:
        cupy.matmul = timed
    elif mode == "shim-free":

        def first_then_free(a, b, *args, **kwargs):
            out = routed(a, b, *args, **kwargs)
            if cupy.matmul is first_then_free:
                cupy.cuda.Device().synchronize()
                pool.free_all_blocks()
                cupy.matmul = routed
            return out

        cupy.matmul = first_then_free
    sys.argv = [str(PROGRAM), *program_args]
    prof = cProfile.Profile() if mode == "profile" else None
    with contextlib.redirect_stdout(io.StringIO()) as text:
        if prof:
            prof.enable()
        runpy.run_path(str(PROGRAM), run_name="__main__")
        if prof:
            prof.disable()
    report = ""
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        report = buf.getvalue()
    elapsed = next((float(x.split("=")[1]) for x in text.getvalue().splitlines() if x.startswith("elapsed_s")), None)
    print(json.dumps({"calls": calls, "elapsed_s": elapsed, "profile": report, "pool_bytes": pool.total_bytes()}))


def run_child(mode: str, program_args: list[str]) -> dict:
    return run_json_child(__file__, mode, program_args, "native" if mode.endswith("shim-native") else "auto")


def main() -> None:
    argv = sys.argv[1:]
    program_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = ("native", "shim", "shim-native", "shim-free", "profile")
    ap.add_argument("--child", choices=modes + tuple(f"plain-{m}" for m in modes), help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threshold", type=float, default=0.05, help="list calls slower under the shim by this fraction")
    ap.add_argument("--profile", action="store_true", help="one more shim run under cProfile; its top functions")
    ap.add_argument(
        "--plain",
        type=int,
        default=0,
        help="rounds of untimed runs: native, shim, shim-native, shim-free (see child())",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, program_args)
        return
    runs: dict[str, list[dict]] = {"native": [], "shim": []}
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
    plain: dict[str, list[float]] = {"native": [], "shim": [], "shim-native": [], "shim-free": []}
    for r in range(args.plain):
        order = list(plain) if r % 2 == 0 else list(plain)[::-1]
        for mode in order:
            plain[mode].append(run_child(f"plain-{mode}", program_args)["elapsed_s"])
    if args.plain:
        print(f"untimed runs (the program's own elapsed_s, {args.plain} rounds alternating), s:")
        for mode, e in plain.items():
            print(f"  {mode:12s} median {statistics.median(e):.4f}  min {min(e):.4f}  max {max(e):.4f}")
    if args.profile:
        print("one run under the shim with cProfile (whole program, construction included), by own time:")
        print(run_child("profile", program_args)["profile"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"program_args": program_args, "rounds": args.rounds, "calls": rows, "runs": runs, "plain": plain}, f
            )


if __name__ == "__main__":
    main()
