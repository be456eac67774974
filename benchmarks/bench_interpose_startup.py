"""Interpreter start-up cost of the ``EMUBLAS_INTERPOSE`` ``.pth`` hook.

Times whole interpreter runs (``python -c PROGRAM``, wall clock, process
start to exit) with the hook installed, ``EMUBLAS_INTERPOSE`` unset vs ``1``,
for ``pass`` and for ``import scipy.linalg``; prints the median and the spread
of ``--runs`` runs per cell (the cells are interleaved, run by run, so slow
drifts of the machine hit every cell alike).  The cost of the hook itself with
the variable unset is below what whole-process timings resolve, so it is also
timed in-process: site's ``exec`` of the hook's ``import`` line, read from the
installed file.

    python3 benchmarks/bench_interpose_startup.py [--runs 20] [--python PATH]

The hook must be installed for ``--python`` (``pip install [-e] .``); the
script checks that and that the shim is really on when the variable is set.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys

from _timing import elapsed  # emublas.timing, without importing emublas in the timing process

PROGRAMS = {"pass": "pass", "import scipy.linalg": "import scipy.linalg"}
LINE_COST = """
import os, site, timeit
path = next(os.path.join(d, "emublas-interpose.pth") for d in site.getsitepackages()
            if os.path.isfile(os.path.join(d, "emublas-interpose.pth")))
line = next(x for x in open(path) if x.startswith("import"))
n = 20000
print(f"{min(timeit.repeat(lambda: exec(line), number=n, repeat=5)) / n * 1e6:.2f}")
"""
CHECK = (
    "import sys, scipy.linalg.blas as b; "
    "print(sys.modules.get('emublas.interpose') is not None, (b.dgemm.__doc__ or '').startswith('emublas'))"
)


def _env(on: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMUBLAS_")}
    if on:
        env["EMUBLAS_INTERPOSE"] = "1"
    return env


def _time(python: str, program: str, env: dict[str, str], flags=()) -> float:
    return elapsed(
        lambda: subprocess.run([python, *flags, "-c", program], env=env, check=True, stdout=subprocess.DEVNULL)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()

    hook = subprocess.run(
        [
            args.python,
            "-c",
            "import os, site; print(any(os.path.isfile(os.path.join(d, "
            "'emublas-interpose.pth')) for d in site.getsitepackages()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if hook != "True":
        sys.exit(f"emublas-interpose.pth is not installed for {args.python}: pip install -e . first")
    for on, expect in ((False, "False False"), (True, "True True")):
        got = subprocess.run([args.python, "-c", CHECK], env=_env(on), capture_output=True, text=True).stdout.strip()
        if got != expect:
            sys.exit(f"EMUBLAS_INTERPOSE={'1' if on else 'unset'}: expected shim state {expect!r}, got {got!r}")

    line_cost = subprocess.run(
        [args.python, "-c", LINE_COST], env=_env(False), capture_output=True, text=True, check=True
    ).stdout.strip()

    cells = [(name, on) for name in PROGRAMS for on in (False, True)]
    times: dict[tuple[str, bool], list[float]] = {cell: [] for cell in cells}
    for cell in cells:  # one warm-up run each (page cache, .pyc files)
        _time(args.python, PROGRAMS[cell[0]], _env(cell[1]))
    for _ in range(args.runs):
        for cell in cells:
            times[cell].append(_time(args.python, PROGRAMS[cell[0]], _env(cell[1])))

    print(
        f"python {platform.python_version()} ({args.python}), {os.cpu_count()} CPUs, "
        f"{args.runs} runs per cell, wall time of the whole process"
    )
    print()
    print(
        "| program | EMUBLAS_INTERPOSE unset: median ms (min-max) | EMUBLAS_INTERPOSE=1: median ms (min-max) "
        "| difference (ms) |"
    )
    print("|---|---|---|---|")
    for name in PROGRAMS:
        off, on = times[(name, False)], times[(name, True)]
        fmt = lambda xs: f"{statistics.median(xs) * 1e3:.1f} ({min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f})"  # noqa: E731
        print(
            f'| `python -c "{PROGRAMS[name]}"` | {fmt(off)} | {fmt(on)} '
            f"| {(statistics.median(on) - statistics.median(off)) * 1e3:+.1f} |"
        )
    print()
    print(f"The hook's line with EMUBLAS_INTERPOSE unset, exec'd in-process: {line_cost} µs (best of 5 x 20000).")


if __name__ == "__main__":
    main()
