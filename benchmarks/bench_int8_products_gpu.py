"""Rate of the Ozaki-II int8 products on the GPU through each cuBLAS path, against gemmEx.

For each shape (m, n, k) it times ``batch`` products ``C_i = A_iᵀ·B_i`` (A k×m, B k×n
int8 column-major, C m×n int32; the planes of consecutive products at constant strides,
as the moduli of one emulated call lie) on identical seeded int8 data in [-127, 127]:

* ``gemmEx loop``          one ``cublasGemmEx`` per product (emublas's path today), the
                           reference of the ratios;
* ``gemmEx strided``       one ``cublasGemmStridedBatchedEx`` for the batch;
* ``Lt heuristic loop``    one ``cublasLtMatmul`` per product, the heuristic's first algorithm;
* ``Lt heuristic batched`` one strided-batched ``cublasLtMatmul`` for the batch;
* ``Lt timed loop`` / ``Lt timed batched``  the same with the algorithm chosen by timing
                           every proposal (``cublaslt.best_algo``; its tuning time is reported);
* ``gemmEx cols/W``, ``Lt timed cols/W``  each product as ``ceil(n / W)`` products of W
                           columns of C (``--split-cols``), ``… rows/W`` of W rows
                           (``--split-rows``): the same bytes of output, smaller launches.

Every variant's int32 output is compared with gemmEx's, exactly (an assertion).  Times are
CUDA events around a whole batch (median of ``--reps`` after one warm-up), reported per
product with the spread (slowest / fastest rep), the rate 2mnk/t in 10¹⁵ op/s and the speed
relative to the gemmEx loop (> 1: faster).  Shapes that would not finish within
``--budget-s`` are skipped, and the output says so.

Usage::

    python3 benchmarks/bench_int8_products_gpu.py --shapes 4096 8192 16384 16384x4096x16384 \\
        --batch 16 --json products.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emublas._kernels import cublas_ext, cublaslt
from emublas.timing import Timing, cuda_times

DEFAULT_SHAPES = ["4096", "8192x8192x8192", "16384x16384x16384", "16384x4096x16384"]
PAD = 16
OP_N, OP_T = 0, 1


def parse_shape(text: str) -> tuple[int, int, int]:
    """ "N" or "MxNxK" as (m, n, k)."""
    parts = text.lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be N or MxNxK, got {text!r}") from None
    if len(dims) == 1:
        dims *= 3
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"shape must be N or MxNxK with positive sizes, got {text!r}")
    return dims[0], dims[1], dims[2]


def pad(x: int) -> int:
    return -(-x // PAD) * PAD


def footprint(m: int, n: int, k: int, batch: int) -> int:
    """Bytes of the A and B planes and of two int32 outputs (reference and variant)."""
    return batch * (pad(k) * m + pad(k) * n + 2 * 4 * pad(m) * n)


def commit() -> str:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def fill_int8(cp, rs, n_elems: int, chunk: int = 1 << 28):
    """A flat int8 device array of uniform integers in [-127, 127], drawn in chunks."""
    out = cp.empty(n_elems, dtype=cp.int8)
    for lo in range(0, n_elems, chunk):
        hi = min(n_elems, lo + chunk)
        out[lo:hi] = rs.randint(-127, 128, size=hi - lo, dtype=cp.int32).astype(cp.int8)
    return out


def spot_check(cp, a, b, c, m, n, k, lda, ldb, ldc, sa, sb, sc, batch, count: int = 16) -> None:
    """Assert ``count`` random entries of the gemmEx output against exact int64 dot products."""
    pick = __import__("numpy").random.default_rng(1)
    for _ in range(count):
        z, i, j = int(pick.integers(batch)), int(pick.integers(m)), int(pick.integers(n))
        col_a = a[z * sa + i * lda : z * sa + i * lda + k].astype(cp.int64)
        col_b = b[z * sb + j * ldb : z * sb + j * ldb + k].astype(cp.int64)
        want, got = int((col_a * col_b).sum()), int(c[z * sc + j * ldc + i])
        assert want == got, f"gemmEx C[{i}, {j}] of product {z}: {got}, exact {want}"


def run_shape(cp, m: int, n: int, k: int, batch: int, args) -> dict[str, Any]:
    lda = ldb = pad(k)
    ldc = pad(m)
    sa, sb, sc = m * lda, n * ldb, n * ldc  # elements between consecutive planes
    rs = cp.random.RandomState(args.seed)
    a = fill_int8(cp, rs, batch * sa)
    b = fill_int8(cp, rs, batch * sb)
    ref = cp.empty(batch * sc, dtype=cp.int32)
    out = cp.empty(batch * sc, dtype=cp.int32)
    pa, pb = a.data.ptr, b.data.ptr
    handle = cp.cuda.device.get_cublas_handle()
    stream = cp.cuda.get_current_stream().ptr

    def gemmex_loop(c) -> None:
        pc = c.data.ptr
        for i in range(batch):
            cublas_ext.gemm_i8(
                handle, stream, OP_T, OP_N, m, n, k, pa + i * sa, lda, pb + i * sb, ldb, pc + 4 * i * sc, ldc
            )

    def gemmex_strided(c) -> None:
        cublas_ext.gemm_i8_strided_batched(
            handle, stream, OP_T, OP_N, m, n, k, pa, lda, sa, pb, ldb, sb, c.data.ptr, ldc, sc, batch
        )

    def lt_loop(algo) -> Callable[[Any], None]:
        def call(c) -> None:
            pc = c.data.ptr
            for i in range(batch):
                cublaslt.matmul_i8_tn(
                    m, n, k, pa + i * sa, lda, pb + i * sb, ldb, pc + 4 * i * sc, ldc, stream=stream, algo=algo
                )

        return call

    def lt_batched(algo) -> Callable[[Any], None]:
        def call(c) -> None:
            cublaslt.matmul_i8_tn(
                m, n, k, pa, lda, pb, ldb, c.data.ptr, ldc, batch, sa, sb, sc, stream=stream, algo=algo
            )

        return call

    # the timed choices, outside the timed batches (the tuning time is reported on its own)
    tuning: dict[str, Any] = {}
    choices = [("loop", 1, (0, 0, 0))] + ([] if args.no_batched else [("batched", batch, (sa, sb, sc))])
    for label, bt, strides in choices:
        t0 = time.perf_counter()
        best = cublaslt.best_algo(
            m,
            n,
            k,
            lda,
            ldb,
            ldc,
            bt,
            *strides,
            a_ptr=pa,
            b_ptr=pb,
            c_ptr=out.data.ptr,
            stream=stream,
            warmups=args.tune_warmups,
            reps=args.tune_reps,
        )
        key = cublaslt.shape(m, n, k, lda, ldb, ldc, bt, *strides, pa, pb, out.data.ptr)
        rows = cublaslt.tuned().get((cp.cuda.runtime.getDevice(), key), ())
        tuning[label] = {
            "seconds": time.perf_counter() - t0,
            "chosen_index": best.index,
            "chosen_workspace": best.workspace,
            "proposals": [{"index": i, "median_s": t} for i, t in rows],
        }

    def blocked(path: str, cols: bool, w: int) -> Callable[[Any], None]:
        """Each product as blocks of w columns (or rows) of C, through gemmEx or timed cuBLASLt."""
        extent = n if cols else m
        blocks = [(lo, min(w, extent - lo)) for lo in range(0, extent, w)]

        def call(c) -> None:
            pc = c.data.ptr
            for i in range(batch):
                for lo, width in blocks:
                    if cols:
                        mm, nn, ap, bp, cp_ = (
                            m,
                            width,
                            pa + i * sa,
                            pb + i * sb + lo * ldb,
                            pc + 4 * (i * sc + lo * ldc),
                        )
                    else:
                        mm, nn, ap, bp, cp_ = width, n, pa + i * sa + lo * lda, pb + i * sb, pc + 4 * (i * sc + lo)
                    if path == "gemmEx":
                        cublas_ext.gemm_i8(handle, stream, OP_T, OP_N, mm, nn, k, ap, lda, bp, ldb, cp_, ldc)
                    else:
                        cublaslt.matmul_i8_tn(mm, nn, k, ap, lda, bp, ldb, cp_, ldc, stream=stream, algo="best")

        return call

    variants: list[tuple[str, Callable[[Any], None]]] = [
        ("gemmEx loop", gemmex_loop),
        ("gemmEx strided", gemmex_strided),
        ("Lt heuristic loop", lt_loop(None)),
        ("Lt heuristic batched", lt_batched(None)),
        ("Lt timed loop", lt_loop("best")),
        ("Lt timed batched", lt_batched("best")),
    ]
    if args.no_batched:
        variants = [v for v in variants if "batched" not in v[0] and "strided" not in v[0]]
    for cols, widths in ((True, args.split_cols), (False, args.split_rows)):
        for w in widths:
            if w < (n if cols else m):
                for path in ("gemmEx", "Lt timed"):
                    variants.append((f"{path} {'cols' if cols else 'rows'}/{w}", blocked(path, cols, w)))
    ops = 2.0 * m * n * k
    results = []
    t_ref = None
    for name, fn in variants:
        target = ref if t_ref is None else out
        target.fill(-(2**31))  # a value no product of [-127, 127] planes reaches: unwritten entries show
        _, times = cuda_times(cp, lambda fn=fn, target=target: fn(target), args.reps)
        t = Timing(tuple(times))
        cp.cuda.Device().synchronize()
        if t_ref is None:
            t_ref = t.median
            spot_check(cp, a, b, ref, m, n, k, lda, ldb, ldc, sa, sb, sc, batch)
        else:
            equal = bool(cp.array_equal(out.reshape(batch, n, ldc)[:, :, :m], ref.reshape(batch, n, ldc)[:, :, :m]))
            assert equal, f"{name}: int32 output differs from gemmEx's at m={m} n={n} k={k} batch={batch}"
        per = t.median / batch
        results.append(
            {
                "variant": name,
                "ms_per_product": per * 1e3,
                "ms_per_product_min": t.min / batch * 1e3,
                "ms_per_product_max": t.max / batch * 1e3,
                "spread": t.spread,
                "rate_pops": ops / per / 1e15,
                "speed_vs_gemmex_loop": t_ref / t.median,
                "equal_to_gemmex": True if name != "gemmEx loop" else "reference (16 entries checked exactly)",
                "times_s": list(t.times),
            }
        )
    del a, b, ref, out
    cp.get_default_memory_pool().free_all_blocks()
    return {
        "m": m,
        "n": n,
        "k": k,
        "lda": lda,
        "ldb": ldb,
        "ldc": ldc,
        "batch": batch,
        "variants": results,
        "tuning": tuning,
    }


def estimate_s(m: int, n: int, k: int, batch: int, args, rate: float = 0.9e15) -> float:
    """A pessimistic guess of a shape's seconds: every variant's reps and the tuning of 2 × 16 proposals."""
    product = 2.0 * m * n * k / rate
    nvar = (2 if args.no_batched else 6) + 2 * (len(args.split_cols) + len(args.split_rows))
    timing = nvar * (args.reps + 1) * batch * product
    tune = 16 * (args.tune_warmups + args.tune_reps) * (batch + 1) * product
    return timing + tune + 2.0


def print_shape(row: dict[str, Any], peak: float) -> None:
    m, n, k, batch = row["m"], row["n"], row["k"], row["batch"]
    print(f"\n### m={m} n={n} k={k} (lda=ldb={row['lda']}, ldc={row['ldc']}), batch {batch}")
    print("| variant | ms/product | min–max ms | spread | 10^15 op/s | of peak | speed vs gemmEx loop |")
    print("|---|---|---|---|---|---|---|")
    for v in row["variants"]:
        print(
            f"| {v['variant']} | {v['ms_per_product']:.4f} "
            f"| {v['ms_per_product_min']:.4f}–{v['ms_per_product_max']:.4f} | {v['spread']:.3f} "
            f"| {v['rate_pops']:.3f} | {v['rate_pops'] / peak:.0%} | {v['speed_vs_gemmex_loop']:.3f} |"
        )
    for label, tun in row["tuning"].items():
        timed = [p for p in tun["proposals"] if p["median_s"] is not None]
        first = next((p["median_s"] for p in tun["proposals"] if p["index"] == 0), None)
        best = min((p["median_s"] for p in timed), default=None)
        gain = f"{first / best:.3f}× the first proposal" if first and best else "n/a"
        print(
            f"tuning ({label}): {len(tun['proposals'])} proposals timed in {tun['seconds']:.2f} s, "
            f"chose #{tun['chosen_index']} (workspace {tun['chosen_workspace']} B): {gain}"
        )
    print("all variants' int32 outputs equal gemmEx's exactly (asserted)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", type=parse_shape, default=[parse_shape(s) for s in DEFAULT_SHAPES])
    ap.add_argument("--batch", type=int, default=16, help="products per batch (moduli of one call)")
    ap.add_argument(
        "--batch-big", type=int, default=8, help="the batch of shapes whose buffers at --batch exceed --max-gb"
    )
    ap.add_argument("--max-gb", type=float, default=60.0, help="device memory (GB) a shape may take at --batch")
    ap.add_argument("--reps", type=int, default=10, help="timed batches per variant (after one warm-up)")
    ap.add_argument("--tune-warmups", type=int, default=1, help="untimed calls per proposal when tuning")
    ap.add_argument("--tune-reps", type=int, default=3, help="timed calls per proposal when tuning")
    ap.add_argument("--peak", type=float, default=1.98, help="dense int8 peak in 10^15 op/s (H200: about 1.98)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="skip the shapes that would end past this")
    ap.add_argument("--split-cols", type=int, nargs="*", default=[], help="column-block widths W to time")
    ap.add_argument("--split-rows", type=int, nargs="*", default=[], help="row-block heights W to time")
    ap.add_argument("--no-batched", action="store_true", help="leave out the strided-batched variants")
    ap.add_argument(
        "--commit",
        default=None,
        help="the commit measured (default: git rev-parse beside the script, which names the enclosing"
        " checkout's HEAD when the script runs from a git archive unpacked inside it)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    for name in ("batch", "batch_big", "reps", "tune_reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")

    t_start = time.perf_counter()
    import cupy as cp

    if not cublaslt.available():
        print("libcublasLt cannot be loaded: nothing to time", file=sys.stderr)
        return 1
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    meta = {
        "script": "bench_int8_products_gpu.py",
        "commit": args.commit or commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "cublaslt_version": cublaslt.version(),
        "cupy": cp.__version__,
        "workspace_bytes": cublaslt.WORKSPACE_BYTES,
        "args": {k: (v if not isinstance(v, Path) else str(v)) for k, v in vars(args).items()},
    }
    print(
        f"# int8 products C = Aᵀ·B on {device}; cuBLASLt {meta['cublaslt_version']}, CUDA runtime "
        f"{meta['cuda_runtime']}, commit {meta['commit']}; medians of {args.reps} batches, per product"
    )
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for m, n, k in args.shapes:
        batch = args.batch
        if footprint(m, n, k, batch) > args.max_gb * 1e9:
            batch = min(batch, args.batch_big)
            print(
                f"\nm={m} n={n} k={k}: batch {args.batch} would take "
                f"{footprint(m, n, k, args.batch) / 1e9:.1f} GB > --max-gb {args.max_gb:g}; batch {batch}"
            )
        spent = time.perf_counter() - t_start
        guess = estimate_s(m, n, k, batch, args)
        if spent + guess > args.budget_s:
            print(
                f"\nm={m} n={n} k={k} batch {batch}: skipped (budget: {spent:.0f} s spent, "
                f"about {guess:.0f} s more needed, --budget-s {args.budget_s:g})"
            )
            skipped.append({"m": m, "n": n, "k": k, "batch": batch, "reason": "budget"})
            continue
        t0 = time.perf_counter()
        row = run_shape(cp, m, n, k, batch, args)
        row["wall_s"] = time.perf_counter() - t0
        rows.append(row)
        print_shape(row, args.peak)
        if args.json:  # written after every shape: a call cut short keeps what it measured
            args.json.write_text(json.dumps({**meta, "rows": rows, "skipped": skipped}, indent=1))
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s; {len(rows)} shapes timed, {len(skipped)} skipped")
    if args.json:
        args.json.write_text(json.dumps({**meta, "rows": rows, "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
