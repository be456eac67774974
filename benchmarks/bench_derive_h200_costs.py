"""Build the shipped H200 cost table (emublas/data/costs_gpu_h200.json) from the H200
figures already measured and recorded in this repository, until ``emublas calibrate
--device gpu`` replaces it with a measurement of its own.

Sources (each entry names its own in ``from``):

* benchmarks/results/ozaki2_gpu_h200.json (bench_ozaki2_gpu.py: dgemm 4096-16384 and
  zgemm 4096/16384 at 13-16 moduli against cuBLAS; zherk n = k = 16384);
* benchmarks/results/ozaki2_gpu_phases_h200.json (bench_ozaki2_gpu_phases.py: d/z gemm
  2048-8192, 16 moduli, back-to-back device time against cuBLAS);
* benchmarks/results/sweep_gpu_h200.json (emublas sweep: d/z gemm 1024 and 4096,
  ozaki2 8-20 moduli; its strassen rows predate the fused kernels and are left out);
* BENCHMARKS.md, "strassen on the GPU (fused CUDA kernels)": d/z gemm 8192/16384.

zherk below n = 16384 was not measured: those entries are zgemm's ratio at the size
times the measured zherk/zgemm ratio at 16384 (marked ``derived``).  dsyrk was not
measured on the GPU at all, so the table has no real rank-k rows (auto keeps those native).

    python3 benchmarks/bench_derive_h200_costs.py [--out emublas/data/costs_gpu_h200.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

# BENCHMARKS.md, "strassen on the GPU (fused CUDA kernels)": (prefix, n, cuBLAS ms, levels, strassen ms)
STRASSEN_FUSED = [
    ("d", 8192, 19.1, 1, 19.1),
    ("d", 8192, 19.1, 2, 19.6),
    ("d", 16384, 157.9, 1, 147.6),
    ("d", 16384, 157.9, 2, 152.4),
    ("z", 8192, 84.8, 1, 79.0),
    ("z", 8192, 84.8, 2, 74.3),
    ("z", 16384, 726.3, 1, 647.5),
    ("z", 16384, 726.3, 2, 606.2),
]


def entry(routine, prefix, n, backend, knob, median_s, native_s, src, min_s=None, derived=False):
    e = {
        "routine": routine,
        "prefix": prefix,
        "n": n,
        "backend": backend,
        "knob": knob,
        "median_s": median_s,
        "min_s": min_s,
        "max_s": None,
        "ratio": median_s / native_s,
        "from": src,
    }
    if derived:
        e["derived"] = True
    return e


def build() -> dict:
    entries: dict[tuple, dict] = {}

    def put(e):  # later sources of the same point do not overwrite earlier, more careful ones
        entries.setdefault((e["routine"], e["prefix"], e["n"], e["backend"], e["knob"]), e)

    oz = json.loads((RESULTS / "ozaki2_gpu_h200.json").read_text())
    native = {}
    for r in oz["rows"]:
        if r.get("impl") == "cuBLAS":
            native[(r["op"][0], r["n"])] = r["t"]
    for r in oz["rows"]:
        impl = r.get("impl", "")
        if impl.startswith("ozaki2 ") and impl.endswith(" moduli"):
            p, n = r["op"][0], r["n"]
            put(entry("gemm", p, n, "ozaki2", int(impl.split()[1]), r["t"], native[(p, n)], "ozaki2_gpu_h200.json"))
    for (p, n), t in native.items():
        put(entry("gemm", p, n, "native", None, t, t, "ozaki2_gpu_h200.json"))
    zherk = next(r for r in oz["rows"] if r["op"] == "zherk")
    zgemm16_16384 = (
        next(
            r["t"] for r in oz["rows"] if r["op"] == "zgemm" and r["n"] == 16384 and r.get("impl") == "ozaki2 16 moduli"
        )
        / native[("z", 16384)]
    )
    herk_factor = (zherk["t_ozaki2"] / zherk["t_native"]) / zgemm16_16384

    ph = json.loads((RESULTS / "ozaki2_gpu_phases_h200.json").read_text())
    for r in ph["rows"] if isinstance(ph, dict) else ph:
        p, n = r["op"][0], r["n"]
        put(entry("gemm", p, n, "native", None, r["native_s"], r["native_s"], "ozaki2_gpu_phases_h200.json"))
        put(entry("gemm", p, n, "ozaki2", r["moduli"], r["device_s"], r["native_s"], "ozaki2_gpu_phases_h200.json"))

    sw = json.loads((RESULTS / "sweep_gpu_h200.json").read_text())
    for r in sw["rows"]:
        if r["status"] != "ok" or r["backend"] not in ("native", "ozaki2"):
            continue
        p, n = r["dtype"], r["m"]
        knob = int(r["knob_values"]["moduli"]) if r["backend"] == "ozaki2" else None
        put(
            entry(
                "gemm",
                p,
                n,
                r["backend"],
                knob,
                r["time_s"],
                r["native_time_s"],
                "sweep_gpu_h200.json",
                r.get("time_min_s"),
            )
        )

    for p, n, nat_ms, lv, ms in STRASSEN_FUSED:
        put(entry("gemm", p, n, "strassen", lv, ms / 1e3, nat_ms / 1e3, "BENCHMARKS.md strassen fused table"))

    # zherk: measured at 16384; elsewhere zgemm's ratio times the measured herk/gemm factor
    put(entry("herk", "z", 16384, "native", None, zherk["t_native"], zherk["t_native"], "ozaki2_gpu_h200.json"))
    put(entry("herk", "z", 16384, "ozaki2", 16, zherk["t_ozaki2"], zherk["t_native"], "ozaki2_gpu_h200.json"))
    for (routine, p, n, backend, knob), e in list(entries.items()):
        if routine == "gemm" and p == "z" and n < 16384 and backend in ("native", "ozaki2"):
            nat = entries[("gemm", "z", n, "native", None)]["median_s"] / 2  # herk: half of gemm's work
            ratio = e["ratio"] * herk_factor if backend == "ozaki2" else 1.0
            put(entry("herk", "z", n, backend, knob, ratio * nat, nat, f"derived from zgemm n={n}", derived=True))

    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rows = sorted(
        entries.values(), key=lambda e: (e["prefix"], e["routine"], e["n"], e["backend"], int(e["knob"] or 0))
    )
    return {
        "format": 1,
        "device": "gpu",
        "hardware": "NVIDIA H200",
        "source": f"BENCHMARKS.md figures of commit {commit} (benchmarks/results/*.json and the strassen fused-kernel"
        " table), not a calibrate run; the lead replaces it with `emublas calibrate --device gpu`",
        "notes": f"zherk below n=16384 derived: zgemm ratio x {herk_factor:.3f} (measured zherk/zgemm ratio at 16384);"
        " no dsyrk figures (real rank-k stays native)",
        "entries": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "emublas" / "data" / "costs_gpu_h200.json"))
    args = ap.parse_args()
    table = build()
    Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(table['entries'])} entries -> {args.out}")


if __name__ == "__main__":
    main()
