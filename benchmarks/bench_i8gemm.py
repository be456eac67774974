"""Benchmark the int8 GEMM leaf against OpenBLAS sgemm, in one run.

For each size n it times n x n x n products:

* ``i8gemm`` (emublas._kernels.cpu) with each requested implementation on
  int8 data, into a preallocated int32 output;
* ``scipy.linalg.blas.sgemm`` on float32 data of the same shape, into a
  preallocated float32 output;

all operands Fortran-ordered (BLAS's native layout, so f2py copies nothing);
``--layout planes`` gives i8gemm the layout of ozaki2's products instead (A and B
C-ordered, the int32 output Fortran-ordered: residue planes of a factor and of a
transposed factor, k contiguous in one and not in the other).
It reports the median time, GOPS = 2mnk/t, the fraction of the machine's
int8 ceiling measured in the same run by a register-only probe of the dispatched
kernel's arithmetic (``vpdpbusd`` with AVX-512 VNNI, else ``vpmaddwd`` + ``vpaddd``),
and the speed relative to sgemm.  It also checks that an sgemm issued right
after an i8gemm call is not slowed (emublas's idle threads sleep), and the
converse.

OpenBLAS's idle threads busy-wait for a while after each call (about 2**28
cycles unless OPENBLAS_THREAD_TIMEOUT is set), so i8gemm is timed only after
a pause that lets them go to sleep; the converse check above shows the cost
of not pausing.

Usage::

    python benchmarks/bench_i8gemm.py --sizes 1024 2048 --reps 7 --json out.json
    python benchmarks/bench_i8gemm.py --sizes 256 512 1024 --impls amx --layout planes
    python benchmarks/bench_i8gemm.py --sizes 512 1024 2048 --impls generic avx2 --reps 7
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy
import scipy.linalg.blas as sblas

from emublas._kernels import cpu
from emublas.info import cpu_model
from emublas.timing import elapsed, wall_times


def blas_info() -> Any:
    """The BLAS behind numpy/scipy: threadpoolctl if installed, else show_config."""
    try:
        import threadpoolctl

        return threadpoolctl.threadpool_info()
    except ImportError:
        pass
    out: dict[str, Any] = {"source": "show_config (threadpoolctl not installed)"}
    for mod in (np, scipy):
        try:
            cfg = mod.show_config(mode="dicts")
            deps = cfg.get("Build Dependencies", {})
            out[mod.__name__] = {k: deps.get(k) for k in ("blas", "lapack")}
        except TypeError:  # older versions: text only
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                mod.show_config()
            out[mod.__name__] = buf.getvalue()
    return out


def blas_name(info: Any) -> str:
    """A one-line name for the BLAS that scipy uses."""
    if isinstance(info, list):  # threadpoolctl
        names = [f"{d.get('internal_api')} {d.get('version')}" for d in info if d.get("user_api") == "blas"]
        return ", ".join(names) or "unknown"
    sc = info.get("scipy")
    if isinstance(sc, dict) and sc.get("blas"):
        b = sc["blas"]
        return f"{b.get('name')} {b.get('version')}"
    return "see JSON"


def openblas_core() -> str | None:
    """Kernel set ("core") that the loaded OpenBLAS picked, via ctypes; best effort."""
    import ctypes
    import re

    try:
        with open("/proc/self/maps") as fh:
            libs = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", fh.read())))
    except OSError:
        return None
    found = []
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("openblas_get_config", "scipy_openblas_get_config", "scipy_openblas_get_config64_"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                found.append(f"{os.path.basename(path)}: {fn().decode()}")
                break
    return "; ".join(found) or None


SETTLE_S = 0.3  # pause after OpenBLAS calls so that its spinning threads sleep


def blas_limiter(threads: int) -> contextlib.AbstractContextManager[Any]:
    """Limit the BLAS to `threads` threads when threadpoolctl is available."""
    try:
        import threadpoolctl

        return threadpoolctl.threadpool_limits(threads, user_api="blas")
    except ImportError:
        return contextlib.nullcontext()


WARMUP_S = 0.25  # after idle the cores need tens of ms to reach full speed


def time_call(fn: Callable[[], Any], reps: int) -> list[float]:
    """Wall times of reps calls, after warm-up calls for at least WARMUP_S."""
    return wall_times(fn, reps, warmup_s=WARMUP_S)[1]


def interference(i8: Callable[[], Any], sg: Callable[[], Any], reps: int) -> dict[str, float]:
    """Median sgemm time alone vs right after an i8gemm call, and vice versa."""
    sg_alone = statistics.median(time_call(sg, reps))
    time.sleep(SETTLE_S)
    i8_alone = statistics.median(time_call(i8, reps))
    sg_after, i8_after = [], []
    for _ in range(reps):
        i8()
        sg_after.append(elapsed(sg))
        i8_after.append(elapsed(i8))
    return {
        "sgemm_alone_s": sg_alone,
        "sgemm_after_i8gemm_s": statistics.median(sg_after),
        "sgemm_slowdown": statistics.median(sg_after) / sg_alone,
        "i8gemm_alone_s": i8_alone,
        "i8gemm_after_sgemm_s": statistics.median(i8_after),
        "i8gemm_slowdown": statistics.median(i8_after) / i8_alone,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048], help="n for n x n x n products")
    ap.add_argument("--reps", type=int, default=7, help="timed calls per measurement (median reported)")
    ap.add_argument("--threads", type=int, default=None, help="threads (default: emublas default_threads())")
    ap.add_argument("--impls", nargs="+", default=["vnni", "generic"], choices=list(cpu.IMPLS))
    ap.add_argument("--probe-iters", type=int, default=20_000_000, help="loop trips of the peak probe")
    ap.add_argument("--layout", choices=["fortran", "planes"], default="fortran", help="i8gemm's operand layout")
    ap.add_argument("--json", metavar="PATH", help="also write all results and metadata as JSON")
    args = ap.parse_args(argv)

    if not cpu.available():
        print(f"emublas C extension not available: {cpu.load_error()}", file=sys.stderr)
        return 1
    threads = args.threads or cpu.default_threads()
    needs = {"vnni": "avx512_vnni", "amx": "amx_int8", "avx2": "avx2"}  # kernels this CPU may lack
    impls = [i for i in args.impls if i not in needs or cpu.features()[needs[i]]]
    openblas_env = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")}
    binfo = blas_info()
    meta: dict[str, Any] = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "cpu": cpu_model(),
        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": binfo,
        "blas_name": blas_name(binfo),
        "blas_threads_limited": "threadpoolctl" in sys.modules,
        "openblas_env": openblas_env,
        "openblas_config": None,  # filled in once sgemm has loaded it
        "features": cpu.features(),
        "kernels": {i: cpu.kernel_name(i) for i in impls},
        "loadavg_start": os.getloadavg(),
        "layout": args.layout,
    }

    # the ceiling of the dispatched kernel's arithmetic: vpdpbusd (VNNI), else vpmaddwd+vpaddd (AVX2)
    probed = [cpu.kernel_peak_probe(threads, args.probe_iters) for _ in range(3)]
    probes = [rate for rate, _ in probed]
    instructions = probed[0][1]
    peak = max(probes)  # a ceiling: the best of three
    meta["int8_peak_macs_per_s"] = peak
    meta["int8_peak_probe_runs"] = probes
    meta["int8_peak_instructions"] = instructions

    rng = np.random.default_rng(20240601)
    rows: list[dict[str, Any]] = []
    checks: dict[int, Any] = {}
    with blas_limiter(threads):
        for n in args.sizes:
            a8 = np.asfortranarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
            b8 = np.asfortranarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
            if args.layout == "planes":
                a8, b8 = np.ascontiguousarray(a8), np.ascontiguousarray(b8)
            c32 = np.empty((n, n), dtype=np.int32, order="F")
            a32, b32 = np.asfortranarray(a8, dtype=np.float32), np.asfortranarray(b8, dtype=np.float32)
            cf = np.empty((n, n), dtype=np.float32, order="F")
            flops = 2.0 * n * n * n

            def sg() -> Any:
                return sblas.sgemm(1.0, a32, b32, beta=0.0, c=cf, overwrite_c=1)

            timed: dict[str, float] = {}
            for impl in impls:

                def i8(impl: str = impl) -> Any:
                    return cpu.i8gemm(a8, b8, c32, impl=impl, threads=threads)

                time.sleep(SETTLE_S)
                timed[impl] = statistics.median(time_call(i8, args.reps))
            t_sg = statistics.median(time_call(sg, args.reps))
            for impl in impls:
                t = timed[impl]
                rows.append(
                    {
                        "n": n,
                        "op": f"i8gemm {impl} ({cpu.kernel_name(impl)})",
                        "median_s": t,
                        "gops": flops / t / 1e9,
                        "frac_peak": (flops / 2 / t) / peak if peak else None,
                        "vs_sgemm": t_sg / t,
                    }
                )
            rows.append(
                {
                    "n": n,
                    "op": "OpenBLAS sgemm (float32)",
                    "median_s": t_sg,
                    "gops": flops / t_sg / 1e9,
                    "frac_peak": None,
                    "vs_sgemm": 1.0,
                }
            )
            # Interference checks, and a spot check that the output is exact.
            i8_best = lambda: cpu.i8gemm(a8, b8, c32, impl=impls[0], threads=threads)  # noqa: E731
            i8_best()
            checks[n] = interference(i8_best, sg, args.reps)
            checks[n]["exact_spot_check"] = bool(
                np.array_equal(c32[:64, :64], a8[:64].astype(np.int64) @ b8[:, :64].astype(np.int64))
            )
    meta["loadavg_end"] = os.getloadavg()
    meta["openblas_config"] = openblas_core()

    # ---- report ---------------------------------------------------------------------
    env_txt = ", ".join(f"{k}={v}" for k, v in openblas_env.items()) or "no OPENBLAS* variables set"
    print(
        f"CPU: {meta['cpu']}, {threads} threads; numpy {np.__version__}, scipy {scipy.__version__}, "
        f"BLAS: {meta['blas_name']}; {env_txt}"
    )
    print(f"OpenBLAS: {meta['openblas_config']}")
    if not meta["blas_threads_limited"] and args.threads:
        print(
            f"note: threadpoolctl is not installed, so OpenBLAS ran on its own thread count, "
            f"not --threads {args.threads}"
        )
    if peak:
        print(
            f"int8 ceiling probe (register-only {instructions}, {threads} threads, best of 3): "
            f"{peak / 1e9:.0f} G int8 multiply-adds/s = {2 * peak / 1e9:.0f} GOPS"
        )
    print()
    print(f"| n | operation | median time (ms) | GOPS | % of the {instructions or 'int8'} ceiling | speed vs sgemm |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        frac = f"{100 * r['frac_peak']:.0f}%" if r["frac_peak"] is not None else "-"
        print(f"| {r['n']} | {r['op']} | {1e3 * r['median_s']:.2f} | {r['gops']:.0f} | {frac} | {r['vs_sgemm']:.2f}x |")
    print()
    for n, c in checks.items():
        print(
            f"n={n}: sgemm right after i8gemm: {c['sgemm_slowdown']:.2f}x its time alone; "
            f"i8gemm right after sgemm (OpenBLAS threads still spinning): {c['i8gemm_slowdown']:.2f}x; "
            f"exact spot check: {c['exact_spot_check']}"
        )
    print(f"load average start {meta['loadavg_start'][0]:.2f}, end {meta['loadavg_end'][0]:.2f}")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows, "interference": checks}, fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
