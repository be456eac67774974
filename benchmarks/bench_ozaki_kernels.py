"""Time the Ozaki-II CPU kernels around the int8 GEMMs (emublas.backends.ozaki2.kernels_cpu.oz_*).

At n x n (default 2048, float64 input, 16 moduli, column-major everywhere) it
reports the median time of each kernel on 1 and 2 threads, the bytes it must
move (reads + writes of the arrays touched once), those bytes per second, ns per
element per modulus (per plane for the complex residues), and the ratio of its
time to the time those bytes take at this machine's copy bandwidth, measured
beside it with the same number of threads (numpy's copy of 256 MiB, split over
that many Python threads: numpy releases the GIL while it copies; best of 5).

Usage::

    python benchmarks/bench_ozaki_kernels.py [--n 2048] [--moduli 16] [--reps 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import numpy as np

from emublas.backends.ozaki2 import kernels_cpu, kernels_crt
from emublas.backends.ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, TWO_M_ROOTS, crt_split, real_set
from emublas.timing import median_time


def copy_bandwidth(threads: int, nbytes: int = 256 * 2**20, reps: int = 5) -> float:
    """Bytes moved per second (read + written) by a copy of ``nbytes`` split over ``threads``
    Python threads, best of ``reps``."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    parts = np.array_split(np.arange(src.size), threads)
    spans = [(int(p[0]), int(p[-1]) + 1) for p in parts if p.size]

    def one(lo: int, hi: int) -> None:
        np.copyto(dst[lo:hi], src[lo:hi])

    best = float("inf")
    for _ in range(reps + 1):  # the first copy faults the pages in
        ts = [threading.Thread(target=one, args=span) for span in spans]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n, L = args.n, args.moduli
    rng = np.random.default_rng(0)
    x = np.asfortranarray(rng.standard_normal((n, n)))
    z = np.asfortranarray(x + 1j * rng.standard_normal((n, n)))
    shift = np.full(n, 60, np.int32)
    mods = list(REAL_MODULI[:L])
    mods2 = list(TWO_M_MODULI[:L])
    roots = [TWO_M_ROOTS[m] for m in mods2]
    out = np.empty((L, n, n), np.int8).transpose(0, 2, 1)  # F-ordered planes
    out2 = np.empty((2 * L, n, n), np.int8).transpose(0, 2, 1)
    out3 = np.empty((3 * L, n, n), np.int8).transpose(0, 2, 1)
    ms = real_set(L)
    crt = crt_split(ms, L)  # one term per modulus
    big = crt.weights[3 % L]
    X1 = np.asfortranarray(rng.integers(-(2**31), 2**31, size=(n, n), dtype=np.int64).astype(np.int32))
    acc = np.zeros((n, n, 3), order="F")  # the three exact sums of each entry
    acc_im = np.zeros((n, n, 3), order="F")
    res = np.empty((n, n), order="F")
    resz = np.empty((n, n), np.complex128, order="F")
    zero = np.zeros(n, np.int32)
    e = n * n
    cases = [
        # name, fn(threads), bytes moved, element-moduli
        (
            "residues f64 (16 planes)",
            lambda t: kernels_cpu.oz_residues(x, shift, 1, mods, out=out, threads=t),
            e * (8 + L),
            e * L,
        ),
        (
            "residues 2M z128 (32 planes)",
            lambda t: kernels_cpu.oz_residues_cplx(z.real, z.imag, shift, 1, mods2, roots, out=out2, threads=t),
            e * (16 + 2 * L),
            e * 2 * L,
        ),
        (
            "residues 3M z128 (48 planes)",
            lambda t: kernels_cpu.oz_residues_3m(z.real, z.imag, shift, 1, mods, out=out3, threads=t),
            e * (16 + 3 * L),
            e * 3 * L,
        ),
        (
            "accumulate 1 modulus",
            lambda t: kernels_crt.oz_crt_accumulate(X1, ms.weights[3 % L], ms.moduli[3 % L], big, acc, threads=t),
            e * (4 + 48),
            e,
        ),
        (
            "accumulate first=True",
            lambda t: kernels_crt.oz_crt_accumulate(
                X1, ms.weights[3 % L], ms.moduli[3 % L], big, acc, first=True, threads=t
            ),
            e * (4 + 24),
            e,
        ),
        (
            "accumulate X2=X1^T, uplo=U",
            lambda t: kernels_crt.oz_crt_accumulate(X1, 5, 241, big, acc, x2=X1.T, w2=7, uplo=1, threads=t),
            e * (4 + 4 + 48) // 2,
            e // 2,
        ),
        (
            "finalize f64 beta=0",
            lambda t: kernels_crt.oz_crt_finalize(acc, crt.consts, zero, zero, res, threads=t),
            e * (24 + 8),
            e,
        ),
        (
            "finalize f64 beta!=0",
            lambda t: kernels_crt.oz_crt_finalize(acc, crt.consts, zero, zero, res, alpha=2.0, beta=0.5, threads=t),
            e * (24 + 16),
            e,
        ),
        (
            "finalize c128 beta!=0",
            lambda t: kernels_crt.oz_crt_finalize(
                acc, crt.consts, zero, zero, resz, im=acc_im, alpha=2.0, beta=0.5j, threads=t
            ),
            e * (48 + 32),
            e,
        ),
    ]
    bw = {t: copy_bandwidth(t) for t in (1, 2)}
    print(f"n = {n}, {L} moduli, kernel = {kernels_cpu.oz_kernel_name()}, median of {args.reps}")
    print("copy bandwidth (read + write): " + ", ".join(f"{t} thread(s) {v / 1e9:.1f} GB/s" for t, v in bw.items()))
    print(f"{'kernel':32s} {'thr':>3s} {'MB':>7s} {'ms':>8s} {'GB/s':>7s} {'ns/elt/mod':>10s} {'x copy':>7s}")
    rows = []
    for name, fn, nbytes, work in cases:
        for t in (1, 2):
            s = median_time(lambda: fn(t), args.reps)
            ratio = s / (nbytes / bw[t])
            rows.append({"kernel": name, "threads": t, "bytes": nbytes, "seconds": s, "vs_copy": ratio})
            print(
                f"{name:32s} {t:3d} {nbytes / 1e6:7.1f} {s * 1e3:8.2f} {nbytes / s / 1e9:7.1f}"
                f" {s / work * 1e9:10.3f} {ratio:7.2f}"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "copy_bandwidth": bw, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
