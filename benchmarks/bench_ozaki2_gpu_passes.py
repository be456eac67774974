"""Each pass of an ozaki2 GPU call against the device's copy bandwidth: bytes, time, ratio.

    python3 benchmarks/bench_ozaki2_gpu_passes.py --ops d z --n 4096 --moduli 16 --json passes.json

1. Measures the device's copy bandwidth: a device-to-device copy of ``--copy-gib``
   GiB (``dst[...] = src``), CUDA events, median of 10; bandwidth = bytes read +
   written over the time.
2. Runs ``bench_ozaki2_gpu_kernels.py --no-warmup`` (one emulated call, one process
   per op) under Nsight Compute (``ncu``) for every kernel's duration and DRAM bytes read and
   written (``gpu__time_duration.sum``, ``dram__bytes_read.sum``, ``dram__bytes_write.sum``:
   the bytes are the hardware's count, not an estimate from the shapes).
3. Prints per op and kernel: launches per call, µs per launch, MB moved per launch, the
   time those bytes take at the measured copy bandwidth, and the ratio (time over
   that); cuBLAS's int8 GEMMs are grouped as one row and rated in 10^15 op/s instead.

Needs ``ncu`` on PATH (the CUDA toolkit's); ``--ncu`` names another binary.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
# ncu writes units both ways ("ns" or "nsecond", "MB" or "Mbyte")
_TIME = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "B": 1, "KB": 1e3, "MB": 1e6}
_BYTES.update({"GB": 1e9, "TB": 1e12, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30})


def copy_bandwidth(gib: float) -> float:
    """Bytes per second of a device-to-device copy (read + write) of ``gib`` GiB."""
    import cupy

    sys.path.insert(0, HERE)
    from _timing import cuda_times

    n = int(gib * 2**30) // 8
    src = cupy.ones(n, cupy.float64)
    dst = cupy.empty_like(src)

    def copy():
        dst[...] = src

    _, times = cuda_times(cupy, copy, 10)
    return 2 * n * 8 / statistics.median(times)


def _value(row: dict, key: str) -> str:
    for k, v in row.items():
        if k and k.strip().lower() == key:
            return v
    raise KeyError(key)


def profile(ncu: str, op: str, n: int, moduli: int, mode: str) -> list[dict]:
    """One row per kernel launch of one call of ``op``: name, seconds, bytes read, bytes written."""
    cmd = [
        ncu,
        "--csv",
        "--metrics",
        ",".join(METRICS),
        sys.executable,
        os.path.join(HERE, "bench_ozaki2_gpu_kernels.py"),
        "--ops",
        op,
        "--n",
        str(n),
        "--moduli",
        str(moduli),
        "--mode",
        mode,
        "--no-warmup",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"ncu failed ({res.returncode}):\n{res.stderr[-3000:]}")
    text = res.stdout[res.stdout.find('"ID"') :]
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text)):
        key = _value(row, "id")
        one = launches.setdefault(key, {"name": _value(row, "kernel name")})
        metric, unit = _value(row, "metric name"), _value(row, "metric unit")
        value = float(_value(row, "metric value").replace(",", ""))
        scale = _TIME.get(unit) if metric.startswith("gpu__time") else _BYTES.get(unit)
        if scale is None:
            raise ValueError(f"unknown unit {unit!r} of {metric}")
        one[metric] = value * scale
    return [launches[k] for k in sorted(launches, key=int)]


def _group(name: str) -> str:
    if name.startswith("oz_"):
        return name.split("(")[0]
    if "gemm" in name.lower() or "xmma" in name.lower() or "cutlass" in name.lower():
        return "int8 GEMM (cuBLAS)"
    return name.split("(")[0][:40]


def summarize(per_op: dict[str, list[dict]], n: int, bandwidth: float) -> list[dict]:
    """Per op and kernel group: launches, µs, MB, µs at the copy bandwidth, ratio (and Pop/s of the GEMMs)."""
    rows = []
    for op, call in per_op.items():
        groups: dict[str, list[dict]] = {}
        for ln in call:
            groups.setdefault(_group(ln["name"]), []).append(ln)
        for g, lns in groups.items():
            t = sum(ln["gpu__time_duration.sum"] for ln in lns)
            by = sum(ln["dram__bytes_read.sum"] + ln["dram__bytes_write.sum"] for ln in lns)
            row = {"op": op + "gemm", "n": n, "kernel": g, "launches": len(lns), "us": t * 1e6, "mb": by / 1e6}
            row["us_at_copy_bw"] = by / bandwidth * 1e6
            row["ratio"] = row["us"] / row["us_at_copy_bw"] if by else None
            if g.startswith("int8"):
                flops = 2.0 * n**3 * len(lns)  # the products are n x n x n (one k-chunk at these sizes)
                row["pops"] = flops / t / 1e15
            rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", choices=["d", "z"], default=["d", "z"])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--mode", default="accurate")
    ap.add_argument("--copy-gib", type=float, default=2.0)
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--json")
    args = ap.parse_args()

    bw = copy_bandwidth(args.copy_gib)
    launches = {op: profile(args.ncu, op, args.n, args.moduli, args.mode) for op in args.ops}
    rows = summarize(launches, args.n, bw)
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s (read + write); {args.mode}, {args.moduli} moduli, n = {args.n}")
    print(f"{'op':6s} {'kernel':28s} {'calls':>5s} {'us':>9s} {'MB':>9s} {'us@bw':>8s} {'ratio':>6s}")
    for r in rows:
        extra = f"  {r['pops']:.2f} Pop/s" if "pops" in r else ""
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        print(
            f"{r['op']:6s} {r['kernel']:28s} {r['launches']:5d} {r['us']:9.1f} {r['mb']:9.1f}"
            f" {r['us_at_copy_bw']:8.1f} {ratio:>6s}{extra}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "copy_bandwidth": bw, "rows": rows, "launches": launches}, fh, indent=1)


if __name__ == "__main__":
    main()
