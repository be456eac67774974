"""strassen against native (OpenBLAS) gemm on the CPU: same run, interleaved, medians.

    python3 benchmarks/bench_strassen.py --sizes 4096 8192 --levels 1 2 --dtypes d --reps 7 --wait-idle [--out reuse]

Each repetition times native and then every level count once, each call after
a 0.3 s pause (OpenBLAS's idle threads spin for about 0.1 s after a call and
would steal a core from the next one); interleaving keeps slow drifts of a
shared machine out of the ratios.  Both sides go through the emublas front
(the same output allocation); ``impl`` is the strassen path that ran (``c``:
the C driver of native/cpu/strassen.c).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import emublas
from emublas.backends import strassen
from emublas.info import cpu_model
from emublas.timing import settled_time

PAUSE = 0.3


def _timed(fn, wait_idle: bool, tries: int = 20) -> float:
    """Seconds of one ``fn()`` after the pause; with ``wait_idle`` (Linux), the pause is
    repeated while other processes use the CPUs, and a call they disturbed (more than
    5% of a core) is timed again, up to ``tries`` times."""
    return settled_time(fn, pause=PAUSE, wait_idle=wait_idle, tries=tries, slack=0.01)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dtypes", nargs="+", default=["d"])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument(
        "--out",
        choices=["fresh", "reuse"],
        default="fresh",
        help="fresh: a new output per call (c=None); reuse: one preallocated output "
        "(c=out, overwrite_c=True), as BLAS users call it",
    )
    p.add_argument(
        "--wait-idle", action="store_true", help="time only while no other process uses the CPUs (shared machines)"
    )
    args = p.parse_args()
    rng = np.random.default_rng(1)
    print(f"CPU: {cpu_model()}")
    print(
        "| routine | n | native [s] | levels | strassen [s] | speed vs native | (best: native, strassen, ratio) "
        "| normwise diff | impl | workspace [MiB] |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for prefix in args.dtypes:
        dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[prefix]
        gemm = getattr(emublas, prefix + "gemm")
        for n in args.sizes:
            a = np.asfortranarray(rng.standard_normal((n, n)).astype(dtype))
            b = np.asfortranarray(rng.standard_normal((n, n)).astype(dtype))
            if prefix in "cz":
                a += 1j * rng.standard_normal((n, n)).astype(dtype)
                b += 1j * rng.standard_normal((n, n)).astype(dtype)
            out = np.zeros((n, n), dtype=dtype, order="F") if args.out == "reuse" else None
            runs = {
                "native": lambda gemm=gemm, a=a, b=b, out=out: gemm(
                    1.0, a, b, c=out, overwrite_c=True, backend="native"
                )
            }
            for lv in args.levels:
                runs[lv] = lambda lv=lv, gemm=gemm, a=a, b=b, out=out: gemm(
                    1.0, a, b, c=out, overwrite_c=True, backend="strassen", levels=lv
                )
            for fn in runs.values():  # warm-up (and the workspace's first allocation)
                fn()
            times: dict = {key: [] for key in runs}
            for _ in range(args.reps):
                for key, fn in runs.items():
                    times[key].append(_timed(fn, args.wait_idle))
            t_nat = statistics.median(times["native"])
            ref = runs["native"]().copy()
            for lv in args.levels:
                res = runs[lv]()
                info = strassen.last_run()
                ws = sum(info.get("workspace_bytes", {}).values()) / 2**20
                diff = np.linalg.norm(res - ref) / np.linalg.norm(ref)
                t = statistics.median(times[lv])
                best_nat, best = min(times["native"]), min(times[lv])
                print(
                    f"| {prefix}gemm | {n} | {t_nat:.3f} | {lv} | {t:.3f} | {t_nat / t:.3f} "
                    f"| {best_nat:.3f}, {best:.3f}, {best_nat / best:.3f} | {diff:.1e} "
                    f"| {info['impl']} | {ws:.0f} |",
                    flush=True,
                )
            a = b = ref = res = out = None


if __name__ == "__main__":
    main()
