"""Where the time of one ozaki2 GPU call goes: per-call host and device time, and the phase split.

For each size and dtype: 10 back-to-back calls on the same cupy arrays (host
wall time per call, and CUDA-event device time per call over all 10), then one
profiled call (``calls.PROFILE_GPU``: CUDA events between the phases, which
synchronises, so its total is a little longer), beside cuBLAS's time for the
same product.  Inputs rand − 0.5 (complex: both parts), times exp(φ·randn) with
``--phi`` (φ = 4 makes the certificate recompute many entries), Fortran order.
``--products gemmex lt`` times each size once per int8 product path (cublasGemmEx,
cuBLASLt with timed algorithm choice: ``kernels_gpu.PRODUCTS``), in the same run;
``--graphs auto off`` times each with and without the CUDA-graph replay of small
calls (the ``graphs`` option; the profiled call always runs directly); ``--final fused
unpaired planes`` with the fused final pass, with it but 2M's term pairs read term by term
(``gpu_stages.PAIRED_FINAL``), and without it (``gpu_engine.FUSED_FINAL``; the
table's ``final`` column says which ran: a call whose products do not fit uses
the term planes either way); ``--product-cols 0 4096`` with the int8 products whole and
in blocks of 4096 columns of C (``kernels_gpu.PRODUCT_COLS``); ``--batched auto off`` with the
products of a run of moduli as strided-batched calls where they pay, and one by one
(``kernels_gpu.BATCHED``).  ``isolated`` is the
median device time of 5 calls each between its own events after a synchronisation (as
``bench_gemmul8.py`` times): it shows where the GPU waits for the host inside a call,
which back-to-back calls hide.

Usage::

    python3 benchmarks/bench_ozaki2_gpu_phases.py --sizes 4096 8192 --dtypes z d --moduli 16 [--json out.json]
    python3 benchmarks/bench_ozaki2_gpu_phases.py --sizes 128 256 512 1024 --graphs auto off   # the fixed cost
"""

from __future__ import annotations

import argparse
import json
from functools import partial

import emublas
from emublas.backends.ozaki2 import calls, gpu_engine, gpu_stages, kernels_gpu, routines
from emublas.timing import cuda_batch, cuda_times


def _per_call(fn, reps: int = 10) -> tuple[float, float]:
    """(host seconds per call, device seconds per call) over ``reps`` calls after 3 warm-ups."""
    import cupy

    return cuda_batch(cupy, fn, reps, warmups=3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--dtypes", nargs="+", choices=["d", "z"], default=["z", "d"])
    ap.add_argument(
        "--ops",
        nargs="+",
        choices=["dgemm", "zgemm", "zherk"],
        default=None,
        help="routines (default: the --dtypes' gemm); zherk(1, a) is the n x n rank-n update",
    )
    ap.add_argument("--moduli", type=int, default=16)
    ap.add_argument("--products", nargs="+", choices=["gemmex", "lt", "auto"], default=[kernels_gpu.PRODUCTS])
    ap.add_argument("--graphs", nargs="+", choices=["auto", "off"], default=["auto"])
    ap.add_argument(
        "--batched",
        nargs="+",
        choices=["auto", "off"],
        default=[kernels_gpu.BATCHED],
        help="the products of a run of moduli as one strided-batched call where it pays (auto), or one by one",
    )
    ap.add_argument(
        "--final",
        nargs="+",
        choices=["fused", "unpaired", "planes"],
        default=["fused"],
        help="the final pass from resident products where they fit (fused; unpaired: 2M's term pairs read"
        " term by term), or always from int8 term planes",
    )
    ap.add_argument(
        "--product-cols",
        type=int,
        nargs="+",
        default=[kernels_gpu.PRODUCT_COLS],
        help="column-block widths of the int8 products (0: whole)",
    )
    ap.add_argument("--phi", type=float, default=0.0)
    ap.add_argument("--mode", choices=["fast", "accurate"], default=None, help="ozaki2's mode (default: its own)")
    ap.add_argument("--json")
    args = ap.parse_args()

    import cupy

    rng = cupy.random.default_rng(0)
    rows = []
    ops = args.ops or [code + "gemm" for code in args.dtypes]
    for n in args.sizes:
        for op in ops:
            code = op[0]

            def draw():
                x = rng.random((n, n)) - 0.5
                return x * cupy.exp(args.phi * rng.standard_normal((n, n))) if args.phi else x

            a, b = draw(), draw()
            if code == "z":
                a, b = a + 1j * draw(), b + 1j * draw()
            a, b = cupy.asfortranarray(a), cupy.asfortranarray(b)
            f = getattr(emublas, op)
            if op.endswith("herk"):  # one operand: herk(alpha, a)
                b = None
                f = partial(lambda fn, alpha, a, b, **kw: fn(alpha, a, **kw), f)
            _, native = _per_call(partial(f, 1.0, a, b, backend="native"))
            runs = [
                (fi, pa, w, bt)
                for fi in args.final
                for pa in args.products
                for w in args.product_cols
                for bt in args.batched
            ]
            for final, path, cols, batched in runs:
                gpu_engine.FUSED_FINAL = final != "planes"
                gpu_stages.PAIRED_FINAL = final != "unpaired"
                kernels_gpu.PRODUCTS, kernels_gpu.PRODUCT_COLS = path, cols
                kernels_gpu.BATCHED = batched
                for graphs in args.graphs:
                    kw = {"mode": args.mode} if args.mode else {}
                    call = partial(f, 1.0, a, b, backend="ozaki2", moduli=args.moduli, graphs=graphs, **kw)
                    host, dev = _per_call(call)
                    isolated = sorted(cuda_times(cupy, call, 5, warmup=False)[1])[2]
                    replayed = routines.last_run().get("graph")
                    calls.PROFILE_GPU = True
                    try:
                        f(1.0, a, b, backend="ozaki2", moduli=args.moduli, **kw)
                        cupy.cuda.Device().synchronize()
                        phases = dict(routines.last_run()["phases"])
                    finally:
                        calls.PROFILE_GPU = False
                    rows.append(
                        {
                            "op": op,
                            "n": n,
                            "moduli": args.moduli,
                            "phi": args.phi,
                            "products": path,
                            "product_cols": cols,
                            "batched": batched,
                            "graphs": graphs,
                            "final": final,
                            "fused_final": routines.last_run()["gpu_plan"]["fused_final"],
                            "graph": replayed,
                            "host_s": host,
                            "device_s": dev,
                            "isolated_s": isolated,
                            "native_s": native,
                            "vs_native": native / dev,
                            "phases": phases,
                        }
                    )
            gpu_engine.FUSED_FINAL = gpu_stages.PAIRED_FINAL = True
            del a, b
            cupy.get_default_memory_pool().free_all_blocks()
    print(
        f"ozaki2 on {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.moduli} moduli,"
        f" phi = {args.phi}, per call (ms):"
    )
    print(
        "| op | n | products/cols/batched | graphs (last call) | final | host | device | isolated | cuBLAS | × cuBLAS"
        " | scaling | residues | int8 GEMMs | CRT | GEMM share |"
    )
    print("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p = r["phases"]
        total = sum(p.get(k, 0.0) for k in ("scaling", "residues", "gemm", "crt"))
        print(
            f"| {r['op']} | {r['n']} | {r['products']}/{r['product_cols'] or 'whole'}/{r['batched']} |"
            f" {r['graphs']} ({r['graph'] or 'direct'}) |"
            f" {r['final'] if r['fused_final'] else 'planes'} |"
            f" {1e3 * r['host_s']:.3f} | {1e3 * r['device_s']:.3f} | {1e3 * r['isolated_s']:.3f} |"
            f" {1e3 * r['native_s']:.2f} | {r['vs_native']:.2f} |"
            + "".join(f" {1e3 * p.get(k, 0.0):.2f} |" for k in ("scaling", "residues", "gemm", "crt"))
            + f" {p.get('gemm', 0.0) / total:.0%} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
