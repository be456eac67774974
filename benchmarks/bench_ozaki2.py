"""Ozaki-II on the CPU: accuracy against moduli count, and speed against OpenBLAS.

Accuracy: inputs (rand − 0.5)·exp(φ·randn), errors as the max elementwise
relative error over sampled entries against exact products (Fractions),
native's error on the same inputs beside each row.

Speed: medians of repeated timings at one size, emulated and native in the same
process, each after a 0.3 s pause (OpenBLAS's idle threads spin for about 0.1 s
after a call and would steal a core); a call shorter than 50 ms is timed as a
back-to-back batch of about 50 ms, as a program's calls run, so that the pause's
thread wake-up does not land on it alone.  The phase split is the median of each
phase over ``--reps`` back-to-back calls (``emublas.ozaki2.last_run()``); then the
int8 leaf's share of the measured ceiling of its kernel's arithmetic (VNNI, else
AVX2), and peak extra memory (tracemalloc) against the size of A, B and C.

Usage::

    python3 benchmarks/bench_ozaki2.py --n 2048 --acc-n 256 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import scipy.linalg.blas as sblas

import emublas
from emublas._kernels import cpu
from emublas.backends.ozaki2 import last_run
from emublas.info import cpu_model
from emublas.timing import batched_median


def family(rng, shape, phi, cplx):
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x


def exact_entries(a, b, idx):
    """Exact (a@b)[i, j] for the sampled (i, j), rounded once."""
    out = []
    for i, j in idx:

        def dot(x, y):
            return float(sum(Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x, y)))

        if np.iscomplexobj(a):
            re = dot(np.concatenate([a[i].real, -a[i].imag]), np.concatenate([b[:, j].real, b[:, j].imag]))
            im = dot(np.concatenate([a[i].real, a[i].imag]), np.concatenate([b[:, j].imag, b[:, j].real]))
            out.append(complex(re, im))
        else:
            out.append(dot(a[i], b[:, j]))
    return np.array(out)


def max_rel(x, idx, ref):
    got = np.array([x[i, j] for i, j in idx])
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


def accuracy(args, rng):
    rows = []
    n = args.acc_n
    idx = [(int(i), int(j)) for i, j in zip(rng.integers(0, n, args.samples), rng.integers(0, n, args.samples))]
    for prefix in ("d", "z"):
        cplx = prefix == "z"
        for phi in (0.5, 2.0, 4.0):
            a, b = family(rng, (n, n), phi, cplx), family(rng, (n, n), phi, cplx)
            ref = exact_entries(a, b, idx)
            nat = max_rel(getattr(sblas, prefix + "gemm")(1.0, a, b), idx, ref)
            for count in range(8, 23, 2):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = getattr(emublas, prefix + "gemm")(1.0, a, b, backend="ozaki2", moduli=count)
                rows.append(
                    {
                        "routine": prefix + "gemm",
                        "phi": phi,
                        "moduli": count,
                        "mode": "accurate",
                        "err": max_rel(out, idx, ref),
                        "native_err": nat,
                    }
                )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = getattr(emublas, prefix + "gemm")(1.0, a, b, backend="ozaki2", mode="auto")
            rows.append(
                {
                    "routine": prefix + "gemm",
                    "phi": phi,
                    "moduli": last_run()["moduli"],
                    "mode": "auto",
                    "err": max_rel(out, idx, ref),
                    "native_err": nat,
                }
            )
    return rows


def peak_extra(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def phase_medians(fn, reps: int) -> tuple[dict, dict]:
    """The last-run record of ``reps`` back-to-back calls: the last record, and each phase's median."""
    seen: dict[str, list[float]] = {}
    info: dict = {}
    for _ in range(reps):
        fn()
        info = last_run()
        for k, v in info["phases"].items():
            seen.setdefault(k, []).append(v)
    return info, {k: statistics.median(v) for k, v in seen.items()}


def speed(args, rng, peak_gops):
    n = args.n
    a, b = family(rng, (n, n), 0.5, False), family(rng, (n, n), 0.5, False)
    za, zb = family(rng, (n, n), 0.5, True), family(rng, (n, n), 0.5, True)
    a, b, za, zb = (np.asfortranarray(x) for x in (a, b, za, zb))
    cases = [
        ("dgemm", lambda: sblas.dgemm(1.0, a, b), lambda: emublas.dgemm(1.0, a, b, backend="ozaki2"), 3 * 8 * n * n),
        (
            "zgemm",
            lambda: sblas.zgemm(1.0, za, zb),
            lambda: emublas.zgemm(1.0, za, zb, backend="ozaki2"),
            3 * 16 * n * n,
        ),
        ("dsyrk", lambda: sblas.dsyrk(1.0, a), lambda: emublas.dsyrk(1.0, a, backend="ozaki2"), 2 * 8 * n * n),
        ("zherk", lambda: sblas.zherk(1.0, za), lambda: emublas.zherk(1.0, za, backend="ozaki2"), 2 * 16 * n * n),
    ]
    rows = []
    for name, native, ours, io_bytes in cases:
        t_nat = batched_median(native, args.reps, pause=0.3)
        t_ours = batched_median(ours, args.reps, pause=0.3)
        info, phases = phase_medians(ours, args.reps)
        # int8 products actually run: the recipe's GEMMs per modulus, with their inner sizes
        per_mod = {"dgemm": 2 * n**3, "zgemm": 4 * n**3, "dsyrk": n**3, "zherk": 2 * n**3}[name]
        int8_ops = per_mod * info["moduli"]
        mem = peak_extra(ours)
        rows.append(
            {
                "routine": name,
                "n": n,
                "native_s": t_nat,
                "ozaki2_s": t_ours,
                "ratio": t_ours / t_nat,
                "moduli": info["moduli"],
                "phases": phases,
                "int8_gops": int8_ops / phases["gemm"] / 1e9,
                "leaf_peak_frac": int8_ops / phases["gemm"] / 1e9 / peak_gops,
                "peak_extra_mb": mem / 2**20,
                "inputs_mb": io_bytes / 2**20,
            }
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2048, help="size of the speed runs")
    p.add_argument("--acc-n", type=int, default=256, help="size of the accuracy runs")
    p.add_argument("--samples", type=int, default=64, help="exactly computed entries per accuracy run")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    rng = np.random.default_rng(2026)
    # the ceiling of the dispatched int8 kernel's arithmetic (VNNI, else AVX2), beside the run
    rate, instructions = cpu.kernel_peak_probe()
    peak = 2 * rate / 1e9 if rate else float("nan")
    acc = [] if args.skip_accuracy else accuracy(args, rng)
    spd = speed(args, rng, peak)
    meta = {
        "cpu": cpu_model(),
        "int8_peak_gops": peak,
        "int8_peak_instructions": instructions,
        "numpy": np.__version__,
        "emublas": emublas.__version__,
        "threads": cpu.default_threads(),
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "accuracy": acc, "speed": spd}, fh, indent=2)
    ceiling = f"measured int8 ceiling ({instructions or 'none'}) {peak:.0f} GOPS"
    print(f"CPU: {meta['cpu']}, {ceiling}, threads {meta['threads']}")
    if acc:
        print(f"\nAccuracy (n = {args.acc_n}, max relative error over {args.samples} exactly computed entries)")
        print("| routine | φ | moduli | mode | ozaki2 error | native error |")
        print("|---|---|---|---|---|---|")
        for r in acc:
            print(
                f"| {r['routine']} | {r['phi']} | {r['moduli']} | {r['mode']} | {r['err']:.2e}"
                f" | {r['native_err']:.2e} |"
            )
    print(f"\nSpeed (n = {args.n}, medians of {args.reps}; default moduli, accurate mode; phases in ms)")
    print(
        "| routine | native [ms] | ozaki2 [ms] | ozaki2/native time | moduli | scaling | residues | int8 GEMMs |"
        " CRT | leaf GOPS (% peak) | peak extra MiB (× A+B+C) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in spd:
        ph = {k: 1e3 * v for k, v in r["phases"].items()}
        print(
            f"| {r['routine']} | {1e3 * r['native_s']:.4g} | {1e3 * r['ozaki2_s']:.4g} | {r['ratio']:.2f} |"
            f" {r['moduli']} | {ph['scaling']:.4g} | {ph['residues']:.4g} | {ph['gemm']:.4g} | {ph['crt']:.4g} |"
            f" {r['int8_gops']:.0f} ({100 * r['leaf_peak_frac']:.0f}%) |"
            f" {r['peak_extra_mb']:.0f} ({r['peak_extra_mb'] / r['inputs_mb']:.1f}×) |"
        )


if __name__ == "__main__":
    main()
