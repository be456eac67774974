"""ztrsm and dtrsm through ozaki2 against native (cuBLAS) on the same cupy arrays: time and error.

For each dtype and size n, one triangular a (n x n, well conditioned: the
diagonal 1 + |u|/2, the off-diagonal entries of its triangle uniform in
(-1, 1) * scale / n, so every row is diagonally dominant for scale <= 1 and
its condition number stays small; the other triangle holds garbage the solve
must not read) and n x n right-hand sides b with entries of both signs and a
spread of magnitudes.  ``emublas.<p>trsm(alpha, a, b, ..., backend=B)`` runs
for B = native (cuBLAS) and ozaki2, interleaved per repetition; each call is
timed on an idle device up to ``emublas.synchronize()`` and a device
synchronization (wall clock: what the program waits for).

Errors, side by side for both backends:

* backward error ``||op(a) x - alpha b||_F / (||a||_F ||x||_F + ||alpha b||_F)``
  (or ``x op(a)`` for side 1), the residual formed in float64/complex128 on the
  GPU with cuBLAS gemm: its own rounding is about u * ||a|| ||x||, the size of
  what it measures, so read it as "a few u" rather than to the last digit;
* the same sampled solution vectors' backward errors with their residuals
  ``alpha rhs - M x`` formed in long double on the host (below), so that the
  residual's own rounding is 2^-11 of what it measures: normwise
  ``||r||_2 / (||M||_F ||x||_2 + |alpha| ||rhs||_2)`` and componentwise
  ``max_i |r_i| / (|M| |x| + |alpha| |rhs|)_i`` (Oettli–Prager), the largest over
  the vectors.  The GPU residual above shares cuBLAS's gemm with the native
  solve's own updates, so its rounding errors need not be independent of the
  native solution's; these are;
* forward error ``max |x - x_ref| / max |x_ref|`` over ``--columns`` sampled
  solution vectors (columns for side 0, rows for side 1), against a reference
  solved on the host: scipy's float64 solve refined twice, each residual
  ``alpha rhs - M x`` computed in long double (numpy longdouble: 64-bit
  significand on x86, so the residual is 11 bits more exact than float64),
  each correction solved in float64.  For a matrix of small condition number
  the refined vector is exact to about 2^-64 relative, far below either
  backend's error; ``longdouble_bits`` in the JSON says what the host had.

    python3 benchmarks/bench_trsm_gpu.py --sizes 4096 8192 16384 --reps 3 --budget-s 500 --json trsm.json

``--device cpu`` runs the same on numpy arrays (scipy against ozaki2 on the CPU;
small sizes only: the check of the script's plumbing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg

import emublas
import emublas.level3

DTYPES = {"d": np.float64, "z": np.complex128}
BACKENDS = ("native", "ozaki2")
#: ``--with-recursion``: emublas's own recursion (ozaki2's blocks and leaves) with native gemm
#: updates, through strassen at zero levels, which is exactly the native gemm.
RECURSION = "recursion"


def parse_args(argv=None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384])
    ap.add_argument("--dtypes", nargs="+", choices=tuple(DTYPES), default=["z", "d"])
    ap.add_argument("--reps", type=int, default=3, help="timed calls per backend (after one warm-up)")
    ap.add_argument("--side", type=int, choices=(0, 1), default=0)
    ap.add_argument("--lower", type=int, choices=(0, 1), default=1)
    ap.add_argument("--trans-a", type=int, choices=(0, 1, 2), default=0)
    ap.add_argument("--diag", type=int, choices=(0, 1), default=0, help="1: unit diagonal (not read)")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--scale", type=float, default=1.0, help="off-diagonal entries uniform in (-1, 1) * scale / n")
    ap.add_argument("--moduli", type=int, default=None, help="ozaki2 moduli count (default: ozaki2's)")
    ap.add_argument(
        "--with-recursion",
        action="store_true",
        help="also time emublas's blocked recursion over native gemm (strassen, levels=0): where the"
        " recursion itself, not ozaki2's products, sets the error",
    )
    ap.add_argument(
        "--leaf",
        type=int,
        default=None,
        help="emublas.level3.TRSM_LEAF for the device: the largest diagonal block solved natively (default: emublas's)",
    )
    ap.add_argument("--columns", type=int, default=4, help="solution vectors checked against the reference")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="skip the points predicted not to fit in what is left of this many seconds (and list them)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.reps < 1 or args.columns < 1:
        ap.error("--reps and --columns must be at least 1")
    if any(n < 2 for n in args.sizes):
        ap.error("--sizes must be at least 2")
    return args


class Device:
    """numpy or cupy, with the synchronization a timing needs."""

    def __init__(self, name: str):
        self.gpu = name == "gpu"
        if self.gpu:
            import cupy

            self.xp = cupy
        else:
            self.xp = np

    def sync(self) -> None:
        emublas.synchronize()
        if self.gpu:
            self.xp.cuda.Device().synchronize()

    def host(self, x) -> np.ndarray:
        return self.xp.asnumpy(x) if self.gpu else np.asarray(x)

    def free(self) -> None:
        if self.gpu:
            self.xp.get_default_memory_pool().free_all_blocks()


def operands(dev: Device, prefix: str, n: int, args):
    """(a with garbage in its other triangle, its triangle as a full matrix, b)."""
    xp = dev.xp
    rng = xp.random.default_rng(args.seed * 1000003 + n * 7 + ord(prefix))
    cplx = prefix == "z"

    def uniform(shape):
        x = 2 * rng.random(shape) - 1
        return x + 1j * (2 * rng.random(shape) - 1) if cplx else x

    off = uniform((n, n)) * (args.scale / n)
    tri = xp.tril(off, -1) if args.lower else xp.triu(off, 1)
    diag = xp.ones(n) if args.diag else 1 + 0.5 * xp.abs(rng.random(n))
    tri = tri + xp.diag(diag.astype(tri.dtype))
    other = xp.triu(xp.full((n, n), 7.0, dtype=tri.dtype), 1)  # never read
    if not args.lower:
        other = other.T
    a = (
        xp.asfortranarray(tri + other)
        if not args.diag
        else xp.asfortranarray(tri - xp.diag(diag) + 3 * xp.eye(n) + other)
    )
    b = uniform((n, n)) * xp.exp(rng.standard_normal((n, n)))
    return a, xp.asfortranarray(tri), xp.asfortranarray(b)


def op(x, trans: int):
    return x if trans == 0 else x.T if trans == 1 else x.conj().T


def backward_error(dev: Device, tri, x, b, args) -> float:
    """||op(a) x - alpha b|| / (||a|| ||x|| + ||alpha b||), Frobenius norms, in the working precision."""
    xp = dev.xp
    prod = op(tri, args.trans_a) @ x if args.side == 0 else x @ op(tri, args.trans_a)
    res = prod - args.alpha * b
    num = float(xp.linalg.norm(res))
    del prod, res
    return num / (float(xp.linalg.norm(tri)) * float(xp.linalg.norm(x)) + abs(args.alpha) * float(xp.linalg.norm(b)))


def system(tri_h: np.ndarray, args) -> tuple[np.ndarray, bool]:
    """(M, M lower): every sampled solution vector v solves M v = alpha rhs (side 0: op(a);
    side 1: rows of x, x op(a) = alpha b, so M = op(a)^T)."""
    m = op(tri_h, args.trans_a)
    low = bool(args.lower) != (args.trans_a != 0)
    if args.side == 1:
        m = m.T
        low = not low
    return np.asfortranarray(m), low


def residual_ld(m: np.ndarray, low: bool, rhs_ld: np.ndarray, x_ld: np.ndarray, chunk: int = 512) -> np.ndarray:
    """rhs - M x in long double, by blocks of rows (only the columns the triangle touches), the
    blocks on the host's cores (numpy's long double products run without BLAS and release the GIL)."""
    n = m.shape[0]
    out = np.empty_like(rhs_ld)
    ld = np.clongdouble if np.iscomplexobj(m) else np.longdouble

    def block(r0: int) -> None:
        r1 = min(n, r0 + chunk)
        c0, c1 = (0, r1) if low else (r0, n)
        out[r0:r1] = rhs_ld[r0:r1] - m[r0:r1, c0:c1].astype(ld) @ x_ld[c0:c1]

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(block, range(0, n, chunk)))
    return out


def reference(m: np.ndarray, low: bool, rhs: np.ndarray, alpha: float, steps: int = 2) -> np.ndarray:
    """Solutions of M v = alpha rhs (columns of ``rhs``): float64 solve, refined ``steps`` times with
    long double residuals; returned in long double."""
    ld = np.clongdouble if np.iscomplexobj(m) else np.longdouble
    rhs_ld = rhs.astype(ld) * alpha
    x = scipy.linalg.solve_triangular(m, alpha * rhs, lower=low).astype(ld)
    for _ in range(steps):
        r = residual_ld(m, low, rhs_ld, x)
        x = x + scipy.linalg.solve_triangular(m, r.astype(m.dtype), lower=low).astype(ld)
    return x


def sampled_backward(m: np.ndarray, low: bool, rhs: np.ndarray, alpha: float, x_h: np.ndarray) -> tuple[float, float]:
    """(normwise, componentwise) backward errors of the solution vectors x_h of M v = alpha rhs,
    their residuals in long double; the largest over the vectors."""
    ld = np.clongdouble if np.iscomplexobj(m) else np.longdouble
    x = x_h.astype(ld)
    rhs_ld = rhs.astype(ld) * alpha
    r = np.abs(residual_ld(m, low, rhs_ld, x))
    scale = residual_ld(np.abs(m), low, np.abs(rhs_ld), -np.abs(x))  # |M| |x| + |alpha rhs|
    norm_m = float(np.linalg.norm(np.tril(m) if low else np.triu(m)))
    normwise = np.linalg.norm(r, axis=0) / (norm_m * np.linalg.norm(x, axis=0) + np.linalg.norm(rhs_ld, axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        comp = np.where(scale > 0, r / scale, np.where(r > 0, np.inf, 0.0))
    return float(np.max(normwise)), float(np.max(comp))


def forward_error(x_h: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(x_h.astype(ref.dtype) - ref)) / np.max(np.abs(ref)))


def measure(dev: Device, prefix: str, n: int, args) -> dict:
    """One (dtype, size) point: both backends timed interleaved, then their errors."""
    fn = getattr(emublas, prefix + "trsm")
    a, tri, b = operands(dev, prefix, n, args)
    kw = {"side": args.side, "lower": args.lower, "trans_a": args.trans_a, "diag": args.diag}
    opts = {
        "native": {},
        "ozaki2": {} if args.moduli is None else {"moduli": args.moduli},
        RECURSION: {"levels": 0},
    }
    names = BACKENDS + ((RECURSION,) if args.with_recursion else ())
    routed = {RECURSION: "strassen"}
    caught: dict[str, list[str]] = {}
    xs = {}
    t0 = time.perf_counter()
    for be in names:  # the warm-up call; its result is the one checked
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            xs[be] = fn(args.alpha, a, b, backend=routed.get(be, be), **kw, **opts[be])
            dev.sync()
        caught[be] = sorted({f"{x.category.__name__}: {str(x.message)[:160]}" for x in w})
    times: dict[str, list[float]] = {be: [] for be in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warm-up's warnings are recorded above
        for _ in range(args.reps):
            for be in names:
                dev.sync()
                t = time.perf_counter()
                out = fn(args.alpha, a, b, backend=routed.get(be, be), **kw, **opts[be])
                dev.sync()
                times[be].append(time.perf_counter() - t)
                del out
    gpu_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = {be: backward_error(dev, tri, xs[be], b, args) for be in names}
    # forward error on sampled solution vectors, against the long-double-refined reference
    pick = np.unique(np.linspace(0, n - 1, min(args.columns, n)).astype(int))
    tri_h = dev.host(tri)
    b_h = dev.host(b)
    m, low = system(tri_h, args)
    del tri_h
    rhs = b_h[:, pick] if args.side == 0 else b_h[pick, :].T
    ref = reference(m, low, np.ascontiguousarray(rhs), args.alpha)
    fwd, back_ld, back_cw = {}, {}, {}
    idx = dev.xp.asarray(pick)  # cupy indexes with its own arrays
    for be in names:
        x_h = dev.host(xs[be][:, idx] if args.side == 0 else xs[be][idx, :].T)
        fwd[be] = forward_error(x_h, ref)
        back_ld[be], back_cw[be] = sampled_backward(m, low, np.ascontiguousarray(rhs), args.alpha, x_h)
    ref_s = time.perf_counter() - t0
    del a, tri, b, xs
    dev.free()
    med = {be: statistics.median(t) for be, t in times.items()}
    row = {
        "routine": prefix + "trsm",
        "n": n,
        "reps": args.reps,
        "median_s": med,
        "min_max_s": {be: (min(t), max(t)) for be, t in times.items()},
        "times_s": times,
        "ozaki2_vs_native": med["ozaki2"] / med["native"],
        "backward_error": back,
        "backward_error_sampled": back_ld,
        "backward_error_componentwise": back_cw,
        "forward_error": fwd,
        "forward_columns": [int(i) for i in pick],
        "warnings": caught,
        "timing_s": gpu_s,
        "reference_s": ref_s,
    }
    row["faster_than_native"] = row["ozaki2_vs_native"] < 1.0
    row["error_no_worse"] = back["ozaki2"] <= back["native"] and fwd["ozaki2"] <= fwd["native"]
    row["error_no_worse_sampled"] = (
        back_ld["ozaki2"] <= back_ld["native"]
        and back_cw["ozaki2"] <= back_cw["native"]
        and fwd["ozaki2"] <= fwd["native"]
    )
    print(
        f"{row['routine']} {n:6d}  native {med['native'] * 1e3:9.2f} ms"
        f" [{row['min_max_s']['native'][0] * 1e3:.2f}, {row['min_max_s']['native'][1] * 1e3:.2f}]"
        f"  ozaki2 {med['ozaki2'] * 1e3:9.2f} ms"
        f" [{row['min_max_s']['ozaki2'][0] * 1e3:.2f}, {row['min_max_s']['ozaki2'][1] * 1e3:.2f}]"
        f"  ozaki2/native {row['ozaki2_vs_native']:.3f}"
        f"  backward native {back['native']:.2e} ozaki2 {back['ozaki2']:.2e}"
        f"  sampled (long double) native {back_ld['native']:.2e} ozaki2 {back_ld['ozaki2']:.2e}"
        f"  componentwise native {back_cw['native']:.2e} ozaki2 {back_cw['ozaki2']:.2e}"
        f"  forward native {fwd['native']:.2e} ozaki2 {fwd['ozaki2']:.2e}"
        + (
            f"\n    recursion over native gemm {med[RECURSION] * 1e3:9.2f} ms"
            f"  backward {back[RECURSION]:.2e}  sampled {back_ld[RECURSION]:.2e}"
            f"  componentwise {back_cw[RECURSION]:.2e}  forward {fwd[RECURSION]:.2e}"
            if RECURSION in names
            else ""
        )
        + ("".join(f"\n    {be} warned: {w}" for be in names for w in caught[be])),
        flush=True,
    )
    return row


def predicted_s(prev: dict | None, n: int) -> float | None:
    """A point's seconds from the previous size's: its timing part scaled by n^3, its reference
    part (host, O(n^2) per vector) by n^2."""
    if prev is None:
        return None
    r = n / prev["n"]
    return prev["timing_s"] * r**3 + prev["reference_s"] * r**2


def main(argv=None) -> int:
    args = parse_args(argv)
    dev = Device(args.device)
    if args.leaf is not None:
        emublas.level3.TRSM_LEAF[args.device] = args.leaf
    start = time.perf_counter()
    rows: list[dict] = []
    skipped: list[dict] = []
    print(
        f"device {args.device}; leaf {emublas.level3.TRSM_LEAF[args.device]}; side={args.side} lower={args.lower}"
        f" trans_a={args.trans_a} diag={args.diag}"
        f" alpha={args.alpha}; long double: {np.finfo(np.longdouble).nmant + 1} significand bits",
        flush=True,
    )
    for prefix in args.dtypes:
        prev = None
        for n in sorted(args.sizes):
            left = None if args.budget_s is None else args.budget_s - (time.perf_counter() - start)
            guess = predicted_s(prev, n)
            if left is not None and (left <= 0 or (guess is not None and guess > left)):
                why = (
                    f"predicted {guess:.0f} s, {max(left, 0):.0f} s of --budget-s left"
                    if guess is not None
                    else "--budget-s spent"
                )
                skipped.append({"routine": prefix + "trsm", "n": n, "why": why})
                print(f"{prefix}trsm {n:6d} SKIPPED: {why}", flush=True)
                continue
            row = measure(dev, prefix, n, args)
            row["predicted_point_s"] = guess
            rows.append(row)
            prev = row
    for r in rows:
        print(
            f"{r['routine']} {r['n']}: ozaki2 {'faster' if r['faster_than_native'] else 'NOT faster'} than native"
            f" ({r['ozaki2_vs_native']:.3f}x), error {'no worse' if r['error_no_worse'] else 'WORSE'} than native's"
            f" (GPU residual), {'no worse' if r['error_no_worse_sampled'] else 'WORSE'} (long double residuals)"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": args.device,
                    "args": vars(args),
                    "longdouble_bits": int(np.finfo(np.longdouble).nmant + 1),
                    "elapsed_s": time.perf_counter() - start,
                    "rows": rows,
                    "skipped": skipped,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
