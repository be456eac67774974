"""An unchanged program natively and under the interpose shim with ``EMUBLAS_BACKEND=auto``: both times.

Runs ``python3 PROGRAM [ARGS]`` and ``EMUBLAS_BACKEND=auto python3 -m emublas.interpose
PROGRAM [ARGS]`` in turns (``--runs`` rounds after ``--warmup`` untimed ones; the
order alternates per round so that a drift of the machine lands on both), each
in a fresh process.  The
program prints its own time as ``elapsed_s = X`` (the work, without the
interpreter's and the imports' start-up) and a ``checksum = Y``; the script
reports the medians with min/max of that time and of the whole process's wall
time, the ratios shim/native, whether the checksums agree, and whether the
target holds (shim median <= native median x (1 + ``--tolerance``)).

    python3 benchmarks/bench_shim_program.py --device cpu --runs 5 --json shim_cpu.json
    python3 benchmarks/bench_shim_program.py --device gpu --runs 3 --json shim_gpu.json

With ``--control`` each round also runs the native command a second time (the three
modes rotate their order): native_again/native is what two identical modes give on
this host, the yardstick for shim/native.

Default programs: ``examples/scipy_cholesky.py`` (cpu), ``examples/cupy_cholesky.py``
(gpu); ``--program FILE`` and ``-- ARGS...`` give another (it must print
``elapsed_s = X``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = {"cpu": "examples/scipy_cholesky.py", "gpu": "examples/cupy_cholesky.py"}
ELAPSED = re.compile(r"^elapsed_s\s*=\s*([0-9.eE+-]+)\s*$", re.M)
CHECKSUM = re.compile(r"^checksum\s*=\s*(\S+)\s*$", re.M)
# variables that would put the "native" run under the shim or change the shim's run
CLEARED = ("EMUBLAS_INTERPOSE", "EMUBLAS_BACKEND", "EMUBLAS_VERBOSE")


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (everything after ``--`` goes to the program)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    program_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="picks the default program")
    ap.add_argument("--program", default=None, help="the program (default: the device's, see above)")
    ap.add_argument("--runs", type=int, default=5, help="rounds; each runs the program natively and under the shim")
    ap.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed rounds first (kernel caches on disk, page cache: the first process pays them)",
    )
    ap.add_argument("--backend", default="auto", help="EMUBLAS_BACKEND of the shim's runs")
    ap.add_argument("--tolerance", type=float, default=0.0, help="the target allows shim <= native x (1 + this)")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per process")
    ap.add_argument(
        "--routes",
        action="store_true",
        help="after the timed runs, run the shim once more with EMUBLAS_VERBOSE=1 (not timed) and"
        " summarise where its calls went: calls and milliseconds per routine and target, the"
        " emulated calls one by one",
    )
    ap.add_argument(
        "--control",
        action="store_true",
        help="also run the native command a second time per round (mode 'native_again'; the three"
        " modes rotate their order): the ratio of two identical modes is what noise alone gives",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        ap.error("--runs must be at least 1 and --warmup at least 0")
    args.program = args.program or os.path.join(ROOT, PROGRAMS[args.device])
    if not os.path.isfile(args.program):
        ap.error(f"--program {args.program}: no such file")
    args.program_args = program_args
    return args


def commands(args) -> dict[str, tuple[list[str], dict[str, str]]]:
    """``{"native": (argv, env), "shim": (argv, env)}``."""
    base = {k: v for k, v in os.environ.items() if k not in CLEARED}
    prog = [args.program, *args.program_args]
    cmds = {
        "native": ([sys.executable, *prog], base),
        "shim": ([sys.executable, "-m", "emublas.interpose", *prog], {**base, "EMUBLAS_BACKEND": args.backend}),
    }
    if getattr(args, "control", False):
        cmds["native_again"] = cmds["native"]
    return cmds


def _process(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """One run of the program, its output captured; RuntimeError if it failed."""
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def run_once(argv: list[str], env: dict[str, str], timeout: float) -> dict:
    """One process: its reported time and checksum, and its wall time."""
    t0 = time.perf_counter()
    proc = _process(argv, env, timeout)
    wall = time.perf_counter() - t0
    found = ELAPSED.search(proc.stdout)
    if found is None:
        raise RuntimeError(f"{' '.join(argv)} printed no 'elapsed_s = X' line:\n{proc.stdout[-2000:]}")
    checksum = CHECKSUM.search(proc.stdout)
    return {
        "elapsed_s": float(found.group(1)),
        "wall_s": wall,
        "checksum": checksum.group(1) if checksum else None,
        "stdout": proc.stdout[-2000:],
    }


#: the shim's verbose line (interpose.policy.record): routine, dims, dtype, target, milliseconds
ROUTE = re.compile(r"^emublas: (\S+) (\S+) (\S+) -> (.+) ([0-9.]+) ms$")


def routes(argv: list[str], env: dict[str, str], timeout: float) -> dict:
    """One untimed shim run under ``EMUBLAS_VERBOSE=1``: its calls by routine and target."""
    return parse_routes(_process(argv, {**env, "EMUBLAS_VERBOSE": "1"}, timeout).stderr)


def parse_routes(stderr: str) -> dict:
    """The shim's verbose lines in ``stderr``: calls and ms per routine and target, and the
    emulated calls one by one (other lines are ignored)."""
    by: dict[str, dict[str, float]] = {}
    emulated = []
    for line in stderr.splitlines():
        got = ROUTE.match(line.strip())
        if got is None:
            continue
        routine, dims, dtype, target, ms = got.groups()
        entry = by.setdefault(f"{routine} -> {target}", {"calls": 0, "ms": 0.0})
        entry["calls"] += 1
        entry["ms"] += float(ms)
        if not target.startswith("native"):
            emulated.append({"routine": routine, "dims": dims, "dtype": dtype, "target": target, "ms": float(ms)})
    return {"by_route": by, "emulated": emulated}


def spread(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main(argv=None) -> int:
    args = parse_args(argv)
    cmds = commands(args)
    modes = list(cmds)
    runs: dict[str, list[dict]] = {name: [] for name in modes}
    print(
        f"program: {os.path.relpath(args.program, ROOT)} {' '.join(args.program_args)}; shim: EMUBLAS_BACKEND="
        + args.backend
    )
    for _ in range(args.warmup):
        for name in modes:
            got = run_once(*cmds[name], args.timeout_s)
            print(f"warm-up {name:6s} elapsed {got['elapsed_s']:.4f} s  process {got['wall_s']:.3f} s", flush=True)
    for r in range(args.runs):
        # two modes alternate; three rotate, so each follows each other equally often
        order = modes[r % len(modes) :] + modes[: r % len(modes)] if len(modes) > 2 else modes[:: 1 - 2 * (r % 2)]
        for name in order:
            got = run_once(*cmds[name], args.timeout_s)
            runs[name].append(got)
            print(f"run {r} {name:12s} elapsed {got['elapsed_s']:.4f} s  process {got['wall_s']:.3f} s", flush=True)
    summary = {
        name: {key: spread([x[key] for x in rs]) for key in ("elapsed_s", "wall_s")} for name, rs in runs.items()
    }
    ratio = summary["shim"]["elapsed_s"]["median"] / summary["native"]["elapsed_s"]["median"]
    wall_ratio = summary["shim"]["wall_s"]["median"] / summary["native"]["wall_s"]["median"]
    paired = statistics.median(s["elapsed_s"] / n["elapsed_s"] for s, n in zip(runs["shim"], runs["native"]))
    sums = {name: sorted({x["checksum"] for x in rs}) for name, rs in runs.items()}
    held = ratio <= 1.0 + args.tolerance
    for name in modes:
        e, w = summary[name]["elapsed_s"], summary[name]["wall_s"]
        print(
            f"{name:12s} elapsed median {e['median']:.4f} s [{e['min']:.4f}, {e['max']:.4f}]"
            f"  process {w['median']:.3f} s [{w['min']:.3f}, {w['max']:.3f}]"
            f"  checksum {', '.join(map(str, sums[name]))}"
        )
    print(
        f"shim/native: elapsed {ratio:.3f} (paired {paired:.3f}), process {wall_ratio:.3f};"
        f" target (shim <= native x {1 + args.tolerance:g}): {'held' if held else 'MISSED'}"
    )
    control = None
    if "native_again" in runs:
        again = runs["native_again"]
        control = {
            "native_again_vs_native": summary["native_again"]["elapsed_s"]["median"]
            / summary["native"]["elapsed_s"]["median"],
            "paired_native_again_vs_native": statistics.median(
                a["elapsed_s"] / n["elapsed_s"] for a, n in zip(again, runs["native"])
            ),
        }
        print(
            f"control, native_again/native (the same command twice): {control['native_again_vs_native']:.3f}"
            f" (paired {control['paired_native_again_vs_native']:.3f})"
        )
    routed = None
    if args.routes:
        routed = routes(*cmds["shim"], args.timeout_s)
        print("routes of one more shim run (EMUBLAS_VERBOSE=1, not timed): calls, ms")
        for key, v in sorted(routed["by_route"].items()):
            print(f"  {key}: {v['calls']}, {v['ms']:.1f}")
        for e in routed["emulated"]:
            print(f"  emulated: {e['routine']} {e['dims']} {e['dtype']} -> {e['target']} {e['ms']:.3f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": args.device,
                    "program": os.path.relpath(args.program, ROOT),
                    "program_args": args.program_args,
                    "backend": args.backend,
                    "commands": {k: v[0] for k, v in cmds.items()},
                    # what both modes inherit that moves their times (threads, glibc's allocator)
                    "environment": {
                        k: v for k, v in os.environ.items() if k.startswith(("OPENBLAS_", "OMP_", "MALLOC_"))
                    },
                    "summary": summary,
                    "shim_vs_native": ratio,
                    "paired_shim_vs_native": paired,
                    "process_shim_vs_native": wall_ratio,
                    "checksums": sums,
                    "target_held": held,
                    "control": control,
                    "runs": runs,
                    "routes": routed,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
