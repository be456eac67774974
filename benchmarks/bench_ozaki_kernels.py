"""Time the Ozaki-II CPU kernels around the int8 GEMMs (emublas.backends.ozaki2.kernels_cpu.oz_*).

At n x n (default 2048, float64 input, 16 moduli, column-major everywhere) it
reports the median time of each kernel on 1 and 2 threads, the bytes moved per
second (reads + writes of the arrays touched once) and ns per element per
modulus (per plane for the complex residues).

Usage::

    python benchmarks/bench_ozaki_kernels.py [--n 2048] [--moduli 16] [--reps 7]
"""

from __future__ import annotations

import argparse

import numpy as np

from emublas.backends.ozaki2 import kernels_cpu, kernels_crt
from emublas.backends.ozaki2.moduli import REAL_MODULI, TWO_M_MODULI, TWO_M_ROOTS, crt_split, real_set
from emublas.timing import median_time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--reps", type=int, default=7)
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
    print(f"n = {n}, {L} moduli, kernel = {kernels_cpu.oz_kernel_name()}, median of {args.reps}")
    print(f"{'kernel':32s} {'thr':>3s} {'ms':>8s} {'GB/s':>7s} {'ns/elt/mod':>10s}")
    for name, fn, nbytes, work in cases:
        for t in (1, 2):
            s = median_time(lambda: fn(t), args.reps)
            print(f"{name:32s} {t:3d} {s * 1e3:8.2f} {nbytes / s / 1e9:7.1f} {s / work * 1e9:10.3f}")


if __name__ == "__main__":
    main()
