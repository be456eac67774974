"""ozaki2: this checkout against another commit's build, in one run (CPU or GPU).

    git worktree add /tmp/old <commit> && (cd /tmp/old && python3 setup.py build_ext --inplace)
    python3 benchmarks/bench_against_commit.py --other /tmp/old --n 2048 --rounds 3
    python3 benchmarks/bench_against_commit.py --other /tmp/old --device gpu --n 8192 --rounds 3

Each round runs one subprocess per tree (alternating, so that a change in the
machine's load hits both), and each subprocess times dgemm and zgemm (on the CPU,
``--ops`` may add or name dsyrk and zherk, upper triangle) through
ozaki2 (16 moduli, accurate mode unless ``--mode fast``, inputs (rand − 0.5)·exp(φ·randn) from one seed, φ = 0.5 unless
``--phi``) and through the
native BLAS on the same arrays (OpenBLAS on numpy arrays; cuBLAS on cupy arrays
with ``--device gpu``): medians of ``--reps`` calls after a warm-up (wall clock
on the CPU, each after a 0.2 s pause, a call shorter than 50 ms as a back-to-back batch of
about 50 ms so that the pause's thread wake-up does not land on it; CUDA events on the
GPU; emublas.timing via benchmarks/_timing.py),
with [min–max] over the rounds.  Printed: each tree's time, its ratio to the
native BLAS in the same process, and this tree over the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
#: CPU calls shorter than this are timed as back-to-back batches of about this length
BATCH_S = 0.05
#: the routines --ops may name (the GPU worker times the first two)
OPS = ("dgemm", "zgemm", "dsyrk", "zherk")
ROOT = os.path.dirname(HERE)

WORKER = r"""
import json, statistics, sys, time, warnings
sys.path.insert(0, {bench!r})
import numpy as np
import scipy.linalg.blas as sblas
import emublas
from _timing import batched_median
warnings.simplefilter("ignore")
def timed(fn):
    # short calls in back-to-back batches: a lone call after the pause pays the pools' wake-up
    return batched_median(fn, reps, pause=0.2, batch_s={batch_s})
n, reps = {n}, {reps}
rng = np.random.default_rng(1)
def wide(shape, cplx):
    x = (rng.random(shape) - 0.5) * np.exp({phi} * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp({phi} * rng.standard_normal(shape))
    return np.asfortranarray(x)
out = {{"emublas": emublas.__file__}}
for name in {ops!r}:
    cplx, native, fn = name[0] == "z", getattr(sblas, name), getattr(emublas, name)
    a, b = wide((n, n), cplx), wide((n, n), cplx)
    args = (1.0, a) if name.endswith(("syrk", "herk")) else (1.0, a, b)  # rank-k: the upper triangle
    out[name] = timed(lambda: fn(*args, backend="ozaki2", moduli=16, mode={mode!r}))
    out[name + "_native"] = timed(lambda: native(*args))
print(json.dumps(out))
"""

GPU_WORKER = r"""
import json, sys, warnings
sys.path.insert(0, {bench!r})
import cupy as cp
import numpy as np
import emublas
from _timing import cuda_median_time
warnings.simplefilter("ignore")
n, reps = {n}, {reps}
rng = np.random.default_rng(1)
def wide(shape, cplx):
    x = (rng.random(shape) - 0.5) * np.exp({phi} * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp({phi} * rng.standard_normal(shape))
    return cp.asarray(np.asfortranarray(x))
out = {{"emublas": emublas.__file__}}
for name, cplx in (("dgemm", False), ("zgemm", True)):
    a, b = wide((n, n), cplx), wide((n, n), cplx)
    fn = getattr(emublas, name)
    out[name] = cuda_median_time(cp, lambda: fn(1.0, a, b, backend="ozaki2", moduli=16, mode={mode!r}), reps)
    out[name + "_native"] = cuda_median_time(cp, lambda: fn(1.0, a, b, backend="native"), reps)
    del a, b
    cp.get_default_memory_pool().free_all_blocks()
print(json.dumps(out))
"""


def run(
    tree: str, n: int, reps: int, device: str = "cpu", phi: float = 0.5, mode: str = "accurate", ops=OPS[:2]
) -> dict:
    # the tree first; what the caller's PYTHONPATH held (carried wheels on the device) after it
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p))
    code = (GPU_WORKER if device == "gpu" else WORKER).format(
        bench=HERE, n=n, reps=reps, phi=float(phi), batch_s=BATCH_S, mode=mode, ops=tuple(ops)
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd="/")
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", required=True, help="root of the other commit's built checkout")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="numpy (OpenBLAS) or cupy (cuBLAS) arrays")
    ap.add_argument("--phi", type=float, default=0.5, help="the inputs' exponent spread (4: wide spans, the fallback)")
    ap.add_argument("--mode", choices=("accurate", "fast"), default="accurate", help="ozaki2's scaling mode")
    ap.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS[:2]), help="CPU routines (GPU: dgemm zgemm)")
    ap.add_argument("--json")
    args = ap.parse_args()
    trees = {"this": ROOT, "other": os.path.abspath(args.other)}
    rows = {t: [] for t in trees}
    for _ in range(args.rounds):
        for t, path in trees.items():
            rows[t].append(run(path, args.n, args.reps, args.device, args.phi, args.mode, args.ops))
    native = "cuBLAS" if args.device == "gpu" else "OpenBLAS"
    print(
        f"{args.device}, n = {args.n}, 16 moduli, {args.mode}, phi = {args.phi:g};"
        f" medians over {args.rounds} rounds [min-max]"
    )
    for op in args.ops if args.device == "cpu" else OPS[:2]:
        med = {}
        for t in trees:
            v = [r[op] for r in rows[t]]
            nat = [r[op + "_native"] for r in rows[t]]
            med[t] = statistics.median(v)
            print(
                f"{op} {t:5s}: {med[t] * 1e3:9.3f} ms [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}]"
                f"  {native} {statistics.median(nat) * 1e3:8.3f} ms  ratio {med[t] / statistics.median(nat):.2f}"
            )
        print(f"{op} this/other: {med['this'] / med['other']:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
