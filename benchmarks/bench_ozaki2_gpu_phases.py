"""Where the time of one ozaki2 GPU call goes: per-call host and device time, and the phase split.

For each size and dtype: 10 back-to-back calls on the same cupy arrays (host
wall time per call, and CUDA-event device time per call over all 10), then one
profiled call (``routines.PROFILE_GPU``: CUDA events between the phases, which
synchronises, so its total is a little longer), beside cuBLAS's time for the
same product.  Inputs rand − 0.5 (complex: both parts), Fortran order.

Usage::

    python3 benchmarks/bench_ozaki2_gpu_phases.py --sizes 4096 8192 --dtypes z d --moduli 16 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
from functools import partial

import emublas
from emublas.backends.ozaki2 import routines
from emublas.timing import cuda_batch


def _per_call(fn, reps: int = 10) -> tuple[float, float]:
    """(host seconds per call, device seconds per call) over ``reps`` calls after 3 warm-ups."""
    import cupy

    return cuda_batch(cupy, fn, reps, warmups=3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--dtypes", nargs="+", choices=["d", "z"], default=["z", "d"])
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--json")
    args = ap.parse_args()

    import cupy

    rng = cupy.random.default_rng(0)
    rows = []
    for n in args.sizes:
        for code in args.dtypes:
            a, b = rng.random((n, n)) - 0.5, rng.random((n, n)) - 0.5
            if code == "z":
                a, b = a + 1j * (rng.random((n, n)) - 0.5), b + 1j * (rng.random((n, n)) - 0.5)
            a, b = cupy.asfortranarray(a), cupy.asfortranarray(b)
            f = getattr(emublas, code + "gemm")
            host, dev = _per_call(partial(f, 1.0, a, b, backend="ozaki2", moduli=args.moduli))
            _, native = _per_call(partial(f, 1.0, a, b, backend="native"))
            routines.PROFILE_GPU = True
            try:
                f(1.0, a, b, backend="ozaki2", moduli=args.moduli)
                cupy.cuda.Device().synchronize()
                phases = dict(routines.last_run()["phases"])
            finally:
                routines.PROFILE_GPU = False
            rows.append(
                {
                    "op": code + "gemm",
                    "n": n,
                    "moduli": args.moduli,
                    "host_s": host,
                    "device_s": dev,
                    "native_s": native,
                    "vs_native": native / dev,
                    "phases": phases,
                }
            )
    print(
        f"ozaki2 on {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.moduli} moduli, per call (ms):"
    )
    print("| op | n | host | device | cuBLAS | × cuBLAS | scaling | residues | int8 GEMMs | CRT | GEMM share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p = r["phases"]
        total = sum(p.get(k, 0.0) for k in ("scaling", "residues", "gemm", "crt"))
        print(
            f"| {r['op']} | {r['n']} | {1e3 * r['host_s']:.2f} | {1e3 * r['device_s']:.2f} |"
            f" {1e3 * r['native_s']:.2f} | {r['vs_native']:.2f} |"
            + "".join(f" {1e3 * p.get(k, 0.0):.2f} |" for k in ("scaling", "residues", "gemm", "crt"))
            + f" {p.get('gemm', 0.0) / total:.0%} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
