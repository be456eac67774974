"""emublas against GEMMul8 (hook mode), side by side in one run, paired at equal accuracy.

    bash benchmarks/device_run.sh gemmul8                (on the GPU machine; carry .whl and .peers)
    python3 benchmarks/bench_gemmul8.py --gemmul8-lib .peers/gemmul8/libgemmul8.so --json out.json [--quick]
    python3 benchmarks/bench_gemmul8.py --dry-run        (no GPU: numpy stand-ins, checks the plumbing)

GEMMul8's hook replaces cuBLAS's DGEMM/ZGEMM for a whole process, so the driver
runs each library in a worker subprocess of its own (``--worker emublas`` /
``--worker gemmul8``; only the second gets ``LD_PRELOAD`` and
``GEMMUL8_BACKEND=INT8``), one pair of workers per routine, one after the other
on the same GPU.  Both build bit-identical inputs on the host from the same
seeds (numpy ``default_rng``; a digest of each input is compared across the
processes) and upload them in the same memory order.  Each worker also times
cupy's ``a @ b`` on plain cuBLAS (in the GEMMul8 worker with
``GEMMUL8_NUM_MOD_*=0``, which passes the call through) on the same arrays, so
every time is also given relative to the native run of its own process.

Grid: DGEMM and ZGEMM at n = 4096, 8192, 16384 and m = n = 8192, k = 2048 (the
trailing update of a blocked factorisation with panel width 2048: the O(mn)
scaling/residue/CRT passes weigh four times more against the O(mnk) int8
products than at square 8192, so it shows per-call overhead rather than the
product rate); inputs (rand − 0.5)·exp(φ·randn) at φ = 0.5 and 4 (complex:
independent real and imaginary parts); 14–18 moduli in both libraries (emublas
runs its 2M products per modulus on complex data, GEMMul8 its 3M); fast and
accurate modes.  A time is the median of CUDA-event timings after one
synchronised warm-up call (min and max reported too); the warm-up's result
gives the error: max and median relative error of sampled entries against the
exact product (emublas/_reference.py), the same entries in both processes, the
exact values computed once per input and cached on the host.

Printed last: (a) per routine, shape and φ, time, ratio to own cuBLAS and max
error for each library, mode and moduli count; (b) the pairing at equal
accuracy: for each emublas configuration the cheapest GEMMul8 one of the same
mode whose max error is no larger (and the other way round), with the time
ratio emublas/GEMMul8; then the proof that the hook ran and the issue's targets,
met or not.  The full grid should take about 3–4 GPU minutes and 5–6 wall minutes
on an H200 (an estimate from the issue's timings, not yet measured);
``--budget-s`` guards the device call's limit.  ``--dry-run`` runs the same driver, workers and tables at tiny
sizes on numpy: emublas's CPU ozaki2 for emublas, numpy's matmul standing in
for cuBLAS and for GEMMul8 (so its "hook ran" check fails there, as it should).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

from _timing import cuda_times, wall_times  # benchmarks/ is on sys.path when a script runs

OPS = ("dgemm", "zgemm")
MODES = ("accurate", "fast")
SHAPES_FULL = ((4096, 4096, 4096), (8192, 8192, 2048), (8192, 8192, 8192), (16384, 16384, 16384))
SHAPES_QUICK = ((1024, 1024, 1024), (2048, 2048, 512), (2048, 2048, 2048))
SHAPES_DRY = ((16, 16, 16), (32, 32, 32), (32, 32, 8))
BLOCK_ROWS = 256  # generation block: fixed, so the values do not depend on the thread count

# The issue's targets.  Paired (accurate mode, emublas time / GEMMul8 time at
# equal accuracy, upper bounds) and against cuBLAS (φ = 0.5, cuBLAS time /
# emublas time at native accuracy or better, lower bounds).
PAIR_TARGETS = {
    ("dgemm", 4096): 0.95,
    ("dgemm", 8192): 0.95,
    ("dgemm", 16384): 1.0,
    ("zgemm", 4096): 0.75,
    ("zgemm", 8192): 0.75,
    ("zgemm", 16384): 0.75,
}
NATIVE_TARGETS = {("dgemm", 16384): 1.35, ("zgemm", 16384): 2.9, ("zgemm", 4096): 1.6}


# ---- inputs ----------------------------------------------------------------------


def input_seed(seed: int, op: str, shape, phi: float, which: int) -> np.random.SeedSequence:
    """The seed of one operand (``which`` 0: A, 1: B, 2: the sampled entries)."""
    m, n, k = shape
    return np.random.SeedSequence([seed, OPS.index(op), m, n, k, int(round(phi * 1000)), which])


def wide(seq: np.random.SeedSequence, shape, phi: float, cplx: bool, order: str) -> np.ndarray:
    """(rand − 0.5)·exp(φ·randn) on the host, bit-identical for a given seed.

    Row blocks of ``BLOCK_ROWS`` each draw from their own child generator, in
    threads (numpy releases the GIL while it fills arrays).
    """
    rows, cols = shape
    out = np.empty(shape, np.complex128 if cplx else np.float64)
    starts = range(0, rows, BLOCK_ROWS)
    children = seq.spawn(len(starts))

    def part(rng, r):
        x = rng.random((r, cols))
        x -= 0.5
        g = rng.standard_normal((r, cols))
        g *= phi
        np.exp(g, out=g)
        x *= g
        return x

    def fill(t):
        r0 = starts[t]
        r = min(BLOCK_ROWS, rows - r0)
        rng = np.random.default_rng(children[t])
        if cplx:
            out.real[r0 : r0 + r] = part(rng, r)
            out.imag[r0 : r0 + r] = part(rng, r)
        else:
            out[r0 : r0 + r] = part(rng, r)

    with concurrent.futures.ThreadPoolExecutor(max(1, min(16, os.cpu_count() or 1))) as pool:
        list(pool.map(fill, range(len(starts))))
    return np.asfortranarray(out) if order == "F" else out


def digest(a: np.ndarray, b: np.ndarray) -> str:
    """A short fingerprint of both operands (every 7919th element of each, in memory order)."""
    h = hashlib.sha256()
    for x in (a, b):
        h.update(np.ascontiguousarray(x.ravel(order="K")[::7919]).tobytes())
        h.update(repr((x.shape, x.dtype.str)).encode())
    return h.hexdigest()[:16]


def exact_sampled(cache: str, key: str, a, b, rows, cols, dig: str):
    """Exact (once-rounded) entries ``(rows[t], cols[t])`` of ``a @ b``, cached on the host.

    Returns the values and whether the cached digest (written by the first
    process to need this input) matches this process's inputs.
    """
    path = os.path.join(cache, key + ".npz")
    if os.path.exists(path):
        with np.load(path) as f:
            return f["exact"], str(f["digest"]) == dig
    from emublas._reference import exact_entries

    idx = np.arange(len(rows))
    exact = exact_entries("gemm", a[rows, :], b[:, cols], idx, idx)
    tmp = path + f".{os.getpid()}.tmp.npz"
    np.savez(tmp, exact=exact, digest=np.array(dig))
    os.replace(tmp, path)
    return exact, True


def rel_errors(vals: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    rel = np.abs(vals - exact) / np.maximum(np.abs(exact), np.finfo(np.float64).tiny)
    return float(rel.max()), float(np.median(rel))


def work(op: str, shape) -> float:
    """Relative cost of one input, to share the time budget (complex costs about 2.5x here)."""
    m, n, k = shape
    return m * n * k * (2.5 if op == "zgemm" else 1.0)


def reps_for(shape, dry: bool) -> int:
    if dry:
        return 3
    big = max(shape)
    return 5 if big >= 16384 else 10 if big >= 8192 else 20


# ---- devices: cupy with CUDA events, or numpy with the wall clock (dry run) --------


class Gpu:
    def __init__(self):
        import cupy

        self.cp = cupy

    def upload(self, x):
        return self.cp.array(x, order="K")

    def run(self, fn, reps):
        """``fn()``'s warm-up result and the seconds of ``reps`` further calls (CUDA events)."""
        return cuda_times(self.cp, fn, reps)

    def take(self, c, rows, cols):
        cp = self.cp
        return cp.asnumpy(c[cp.asarray(rows), cp.asarray(cols)])

    def differs(self, c, ref) -> bool:
        return bool((c != ref).any())

    def free(self):
        self.cp.get_default_memory_pool().free_all_blocks()

    def meta(self):
        cp = self.cp
        from cupy_backends.cuda.libs import cublas

        return {
            "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
            "cupy": cp.__version__,
            "cublas": cublas.getVersion(cp.cuda.device.get_cublas_handle()),
        }


class Host:
    """The dry run's stand-in for the GPU: numpy arrays, wall-clock times."""

    def upload(self, x):
        return x.copy(order="K")

    def run(self, fn, reps):
        """``fn()``'s warm-up result and the wall-clock seconds of ``reps`` further calls."""
        return wall_times(fn, reps)

    def take(self, c, rows, cols):
        return np.asarray(c[rows, cols])

    def differs(self, c, ref) -> bool:
        return bool((c != ref).any())

    def free(self):
        pass

    def meta(self):
        return {"gpu": None, "dry_run": True}


# ---- workers -------------------------------------------------------------------------


def gemmul8_env(mode: str | None, moduli: int):
    """Point GEMMul8 (read at every call) at a moduli count and mode; 0 moduli is plain cuBLAS."""
    for suffix in ("D", "Z"):
        os.environ[f"GEMMUL8_NUM_MOD_{suffix}"] = str(moduli)
        os.environ[f"GEMMUL8_FASTMODE_{suffix}"] = "1" if mode == "fast" else "0"


def preloaded() -> bool:
    """Whether libgemmul8 is mapped into this process."""
    try:
        with open("/proc/self/maps") as fh:
            return "gemmul8" in fh.read()
    except OSError:
        return False


def worker(kind: str, spec_path: str, rows_path: str) -> None:
    with open(spec_path) as fh:
        spec = json.load(fh)
    dry = spec["dry_run"]
    dev = Host() if dry else Gpu()
    import emublas

    meta = {"worker": kind, "pid": os.getpid(), "emublas": emublas.__version__, **dev.meta()}
    if kind == "gemmul8":
        meta["preloaded"] = preloaded()
        meta["ld_preload"] = os.environ.get("LD_PRELOAD")
        meta["gemmul8_backend"] = os.environ.get("GEMMUL8_BACKEND")
    doc = {"meta": meta, "rows": [], "skipped": [], "errors": []}

    def save():
        tmp = rows_path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, rows_path)

    def emit(row):
        doc["rows"].append(row)
        print(f"[{kind}] " + json.dumps(row), flush=True)

    deadline = spec.get("deadline")
    save()
    for inp in spec["inputs"]:  # smallest first: a run cut short still has the small sizes
        op, shape, phi = inp["op"], tuple(inp["shape"]), inp["phi"]
        # Past its share of the budget a worker starts nothing new (no prediction: the small
        # sizes' fixed costs would wrongly predict that the large ones cannot fit).
        if deadline is not None and time.time() > deadline:
            doc["skipped"].append(inp)
            print(f"[{kind}] skipped {op} {shape} phi={phi}: over the time budget", flush=True)
            save()
            continue
        try:
            run_input(kind, spec, dev, emublas, op, shape, phi, emit)
        except Exception as exc:  # record and go on to the next input
            doc["errors"].append(
                {**inp, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
            )
            print(f"[{kind}] FAILED {op} {shape} phi={phi}: {exc}", flush=True)
        dev.free()
        save()


def run_input(kind, spec, dev, emublas, op, shape, phi, emit):
    """Every configuration of one routine on one input, native cuBLAS first and last."""
    m, n, k = shape
    cplx = op == "zgemm"
    dry = spec["dry_run"]
    seed, samples, order = spec["seed"], spec["samples"], spec["order"]
    ah = wide(input_seed(seed, op, shape, phi, 0), (m, k), phi, cplx, order)
    bh = wide(input_seed(seed, op, shape, phi, 1), (k, n), phi, cplx, order)
    srng = np.random.default_rng(input_seed(seed, op, shape, phi, 2))
    rows, cols = srng.integers(0, m, samples), srng.integers(0, n, samples)
    dig = digest(ah, bh)
    key = f"{op}_{m}x{n}x{k}_phi{phi:g}_{order}_s{seed}_{samples}"
    exact, same_input = exact_sampled(spec["cache"], key, ah, bh, rows, cols, dig)
    a, b = dev.upload(ah), dev.upload(bh)
    del ah, bh
    reps = reps_for(shape, dry)
    base = {
        "op": op,
        "m": m,
        "n": n,
        "k": k,
        "phi": phi,
        "order": order,
        "digest": dig,
        "input_matches_cache": same_input,
    }

    def native():
        return a @ b

    def emulated(mode, count):
        """The call to time; GEMMul8's settings are made here, outside the timed calls."""
        if kind == "emublas":
            fn = emublas.zgemm if cplx else emublas.dgemm
            return lambda: fn(1.0, a, b, backend="ozaki2", moduli=count, mode=mode)
        gemmul8_env(mode, count)
        return native  # hooked cuBLAS (in the dry run numpy's matmul stands in for it)

    if kind == "gemmul8":
        gemmul8_env(None, 0)
    c_nat, t_nat = dev.run(native, reps)
    e_nat = rel_errors(dev.take(c_nat, rows, cols), exact)
    nat_med = statistics.median(t_nat)
    nat_row = {
        **base,
        "worker": kind,
        "lib": "cublas",
        "mode": None,
        "moduli": None,
        "reps": reps,
        "t_med": nat_med,
        "t_min": min(t_nat),
        "t_max": max(t_nat),
        "vs_native": 1.0,
        "err_max": e_nat[0],
        "err_med": e_nat[1],
        "differs_from_native": False,
        "warnings": 0,
    }
    for mode in spec["modes"]:
        for count in spec["moduli"]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                c, t = dev.run(emulated(mode, count), reps)
            e = rel_errors(dev.take(c, rows, cols), exact)
            med = statistics.median(t)
            emit(
                {
                    **base,
                    "worker": kind,
                    "lib": kind,
                    "mode": mode,
                    "moduli": count,
                    "reps": reps,
                    "t_med": med,
                    "t_min": min(t),
                    "t_max": max(t),
                    "native_t_med": nat_med,
                    "vs_native": nat_med / med,
                    "err_max": e[0],
                    "err_med": e[1],
                    "differs_from_native": dev.differs(c, c_nat),
                    "warnings": len(caught),
                }
            )
            del c
    if kind == "gemmul8":
        gemmul8_env(None, 0)
    _, t_end = dev.run(native, max(3, reps // 2))  # the clock drifted if this differs much
    nat_row["t_med_end"] = statistics.median(t_end)
    emit(nat_row)


# ---- driver --------------------------------------------------------------------------


def parse_shapes(text: str):
    out = []
    for item in text.split(","):
        dims = [int(d) for d in item.lower().split("x")]
        if len(dims) == 1:
            dims *= 3
        if len(dims) != 3 or min(dims) < 1:
            raise argparse.ArgumentTypeError(f"--shapes: {item!r} is neither n nor mxnxk")
        out.append(tuple(dims))
    return out


def git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def driver(args) -> dict:
    dry = args.dry_run
    shapes = args.shapes or (SHAPES_DRY if dry else SHAPES_QUICK if args.quick else SHAPES_FULL)
    moduli = args.moduli or ((14, 16) if dry or args.quick else (14, 15, 16, 17, 18))
    lib = os.path.abspath(args.gemmul8_lib) if args.gemmul8_lib else None
    if not dry and not (lib and os.path.isfile(lib)):
        sys.exit(f"--gemmul8-lib: no GEMMul8 library at {args.gemmul8_lib!r} (needed unless --dry-run)")
    workdir = args.workdir or tempfile.mkdtemp(prefix="bench_gemmul8_")
    cache = os.path.join(workdir, "exact")
    os.makedirs(cache, exist_ok=True)
    t0 = time.time()
    global_deadline = t0 + args.budget_s if args.budget_s else None
    meta = {
        "command": " ".join(sys.argv),
        "commit": args.commit or git_commit(),
        "dry_run": dry,
        "quick": args.quick,
        "seed": args.seed,
        "samples": args.samples,
        "order": args.order,
        "moduli": list(moduli),
        "modes": list(args.modes),
        "phis": list(args.phis),
        "shapes": [list(s) for s in shapes],
        "gemmul8_lib": lib,
        "budget_s": args.budget_s,
        "workers": [],
    }
    rows, skipped, errors = [], [], []
    plan = [(op, kind) for op in args.ops for kind in ("emublas", "gemmul8")]
    weights = [sum(work(op, s) for s in shapes) * len(args.phis) for op, _ in plan]
    for i, (op, kind) in enumerate(plan):
        inputs = [{"op": op, "shape": list(s), "phi": phi} for s in shapes for phi in args.phis]
        deadline = timeout = None
        if global_deadline is not None:
            left = global_deadline - time.time()
            deadline = time.time() + left * weights[i] / sum(weights[i:])
            timeout = max(1.0, left + 30.0)
        spec = {
            "dry_run": dry,
            "seed": args.seed,
            "samples": args.samples,
            "order": args.order,
            "moduli": list(moduli),
            "modes": list(args.modes),
            "inputs": inputs,
            "cache": cache,
            "deadline": deadline,
        }
        spec_path = os.path.join(workdir, f"spec_{op}_{kind}.json")
        rows_path = os.path.join(workdir, f"rows_{op}_{kind}.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("GEMMUL8_")}
        if kind == "gemmul8" and not dry:
            env.update(LD_PRELOAD=lib, GEMMUL8_BACKEND="INT8")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--spec", spec_path, "--rows", rows_path]
        print(f"--- worker {kind} {op} ({len(inputs)} inputs)", flush=True)
        started = time.time()
        try:
            rc = subprocess.run(cmd, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        wmeta = {"op": op, "kind": kind, "rc": rc, "wall_s": round(time.time() - started, 1)}
        try:
            with open(rows_path) as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as exc:
            doc = {"meta": {}, "rows": [], "skipped": [], "errors": [{"op": op, "error": f"no rows: {exc}"}]}
        wmeta.update(doc["meta"])
        meta["workers"].append(wmeta)
        rows += doc["rows"]
        skipped += [{**s, "worker": kind} for s in doc["skipped"]]
        errors += [{**e, "worker": kind} for e in doc["errors"]]
        if rc != 0:
            errors.append({"op": op, "worker": kind, "error": f"worker exit status {rc}"})
    meta["wall_s"] = round(time.time() - t0, 1)
    return {"meta": meta, "rows": rows, "skipped": skipped, "errors": errors}


# ---- tables --------------------------------------------------------------------------


def shape_name(r) -> str:
    return str(r["m"]) if r["m"] == r["n"] == r["k"] else f"{r['m']}x{r['n']}x{r['k']}"


def groups(rows):
    """Rows keyed by (op, m, n, k, φ), in the order first seen."""
    out: dict = {}
    for r in rows:
        out.setdefault((r["op"], r["m"], r["n"], r["k"], r["phi"]), []).append(r)
    return out


def pick(rs, lib, mode=None, moduli=None):
    for r in rs:
        if r["lib"] == lib and r["mode"] == mode and r["moduli"] == moduli:
            return r
    return None


def native_of(rs, worker):
    for r in rs:
        if r["lib"] == "cublas" and r["worker"] == worker:
            return r
    return None


def ms(r) -> str:
    return f"{r['t_med'] * 1e3:.3g} [{r['t_min'] * 1e3:.3g}–{r['t_max'] * 1e3:.3g}]"


def table_times(rows, modes, moduli) -> list[str]:
    out = [
        "## (a) time (ms, median [min–max]), speed against the own process's cuBLAS (×, higher is faster),"
        " max relative error of the sampled entries"
    ]
    for (op, _m, _n, _k, phi), rs in groups(rows).items():
        out += [
            "",
            f"### {op} {shape_name(rs[0])}, φ = {phi:g}",
            "",
            "| mode | moduli | emublas ms | × | max err | GEMMul8 ms | × | max err |",
            "|---|---|---|---|---|---|---|---|",
        ]
        cells = []
        for w in ("emublas", "gemmul8"):
            r = native_of(rs, w)
            cells.append(f"{ms(r)} | 1.00 | {r['err_max']:.1e}" if r else "– | – | –")
        out.append(f"| cuBLAS | – | {cells[0]} | {cells[1]} |")
        for mode in modes:
            for count in moduli:
                cells = []
                for w in ("emublas", "gemmul8"):
                    r = pick(rs, w, mode, count)
                    cells.append(f"{ms(r)} | {r['vs_native']:.2f} | {r['err_max']:.1e}" if r else "– | – | –")
                out.append(f"| {mode} | {count} | {cells[0]} | {cells[1]} |")
    return out


def pairs(rs, mode, src, dst):
    """For each ``src`` configuration of ``mode``, the cheapest ``dst`` one of that mode at least as accurate.

    Yields (src row, dst row or None, emublas/GEMMul8 time ratio, the same ratio
    with each time first divided by its own process's cuBLAS time).
    """
    cand = [r for r in rs if r["lib"] == dst and r["mode"] == mode]
    for s in sorted((r for r in rs if r["lib"] == src and r["mode"] == mode), key=lambda r: r["moduli"]):
        ok = [r for r in cand if r["err_max"] <= s["err_max"]]
        d = min(ok, key=lambda r: r["t_med"]) if ok else None
        if d is None:
            yield s, None, None, None
            continue
        e, g = (s, d) if src == "emublas" else (d, s)
        yield s, d, e["t_med"] / g["t_med"], (e["t_med"] / e["native_t_med"]) / (g["t_med"] / g["native_t_med"])


def table_pairs(rows, modes, moduli) -> list[str]:
    out = []
    for src, dst, letter in (("emublas", "gemmul8", "G"), ("gemmul8", "emublas", "E")):
        out += [
            "",
            f"## (b) pairing at equal accuracy: for each {src} configuration (column: its moduli), the cheapest"
            f" {dst} one of the same mode with max error no larger ({letter}<moduli>) and the time ratio"
            " emublas/GEMMul8 (lower: emublas faster; '–': none as accurate)",
            "",
            "| op | shape | φ | mode | " + " | ".join(f"{src} {c}" for c in moduli) + " |",
            "|---|---|---|---|" + "---|" * len(moduli),
        ]
        for (op, _m, _n, _k, phi), rs in groups(rows).items():
            for mode in modes:
                found = {
                    s["moduli"]: ("–" if d is None else f"{letter}{d['moduli']} {ratio:.2f}")
                    for s, d, ratio, _ in pairs(rs, mode, src, dst)
                }
                if found:
                    out.append(
                        f"| {op} | {shape_name(rs[0])} | {phi:g} | {mode} | "
                        + " | ".join(found.get(c, "n/a") for c in moduli)
                        + " |"
                    )
    return out


def hook_proof(doc) -> list[str]:
    out = ["", "## hook and inputs"]
    for w in doc["meta"]["workers"]:
        if w.get("kind") == "gemmul8":
            out.append(
                f"- {w['op']}: GEMMul8 worker pid {w.get('pid')} libgemmul8 mapped: {w.get('preloaded')},"
                f" GEMMUL8_BACKEND={w.get('gemmul8_backend')}, exit {w['rc']}, {w['wall_s']} s"
            )
    for op in OPS:
        g8 = [r for r in doc["rows"] if r["op"] == op and r["lib"] == "gemmul8"]
        if not g8:
            continue
        differ = sum(r["differs_from_native"] for r in g8)
        lo, hi = min(r["moduli"] for r in g8), max(r["moduli"] for r in g8)
        growth = []
        for (o, _m, _n, _k, _phi), rs in groups(doc["rows"]).items():
            for mode in MODES:
                a, b = pick(rs, "gemmul8", mode, lo), pick(rs, "gemmul8", mode, hi)
                if o == op and a and b and lo != hi:
                    growth.append(b["t_med"] / a["t_med"])
        slower = sum(x > 1.0 for x in growth)
        ran = differ == len(g8) and growth and statistics.median(growth) > 1.05
        out.append(
            f"- {op}: GEMMul8 results differing from cuBLAS's: {differ}/{len(g8)}; time at {hi} moduli over"
            f" time at {lo}: {slower}/{len(growth)} inputs×modes slower"
            + (f" (median {statistics.median(growth):.2f}×)" if growth else "")
            + f" → hook ran: {'yes' if ran else 'NOT SHOWN'}"
        )
    by_input: dict = {}
    for r in doc["rows"]:
        by_input.setdefault((r["op"], r["m"], r["n"], r["k"], r["phi"]), set()).add(r["digest"])
    same = sum(len(d) == 1 for d in by_input.values())
    cache_ok = all(r["input_matches_cache"] for r in doc["rows"])
    out.append(
        f"- inputs identical in both processes: {same}/{len(by_input)} digests agree;"
        f" every process matched the cached exact reference's input: {cache_ok}"
    )
    drift = [abs(r["t_med_end"] / r["t_med"] - 1) for r in doc["rows"] if r["lib"] == "cublas" and "t_med_end" in r]
    if drift:
        out.append(f"- cuBLAS timed again after each input's configurations: largest change {max(drift):.1%}")
    nat_pairs = []
    for rs in groups(doc["rows"]).values():
        a, b = native_of(rs, "emublas"), native_of(rs, "gemmul8")
        if a and b:
            nat_pairs.append((a["t_med"] / b["t_med"], a["err_max"] == b["err_max"]))
    if nat_pairs:
        out.append(
            f"- cuBLAS in the emublas process over cuBLAS in the GEMMul8 process: time"
            f" {min(p[0] for p in nat_pairs):.2f}–{max(p[0] for p in nat_pairs):.2f}×,"
            f" same error on {sum(p[1] for p in nat_pairs)}/{len(nat_pairs)} inputs"
        )
    warned = [r for r in doc["rows"] if r["lib"] == "emublas" and r["warnings"]]
    if warned:
        out.append(
            f"- emublas warned (OzakiAccuracyWarning or other) on {len(warned)} configurations: "
            + ", ".join(
                sorted({f"{r['op']} {shape_name(r)} φ={r['phi']:g} {r['mode']} {r['moduli']}" for r in warned})[:12]
            )
            + (" …" if len(warned) > 12 else "")
        )
    for s in doc["skipped"]:
        out.append(f"- SKIPPED (time budget): {s['worker']} {s['op']} {s['shape']} φ={s['phi']:g}")
    for e in doc["errors"]:
        out.append(f"- ERROR: {e.get('worker')} {e.get('op')} {e.get('shape', '')} {e['error']}")
    return out


def target_sizes(doc) -> dict:
    """The square size measured for each of the issue's sizes.

    Itself on the full grid; a quick or dry run stands its square sizes in by
    rank (smallest for 4096, largest for 16384), so that the verdicts are exercised.
    """
    issue = (4096, 8192, 16384)
    squares = sorted({r["m"] for r in doc["rows"] if r["m"] == r["n"] == r["k"]})
    if set(issue) <= set(squares) or not squares or not (doc["meta"]["dry_run"] or doc["meta"]["quick"]):
        return {n: n for n in issue}
    return {n: squares[round(i * (len(squares) - 1) / 2)] for i, n in enumerate(issue)}


def targets(doc) -> list[str]:
    out = ["", "## the issue's targets"]
    g = groups(doc["rows"])
    size = target_sizes(doc)
    if any(size[n] != n for n in size):
        out.append("- (not the issue's sizes: " + ", ".join(f"n={n} measured at {size[n]}" for n in size) + ")")
    for (op, n), bound in PAIR_TARGETS.items():
        ratios, unpaired, worst = [], 0, None
        for (o, m, nn, k, phi), rs in g.items():
            if o != op or not m == nn == k == size[n]:
                continue
            for src, dst in (("emublas", "gemmul8"), ("gemmul8", "emublas")):
                for s, d, ratio, _ in pairs(rs, "accurate", src, dst):
                    if d is None:
                        unpaired += 1
                        continue
                    ratios.append(ratio)
                    e, q = (s, d) if src == "emublas" else (d, s)
                    if worst is None or ratio > worst[0]:
                        worst = (ratio, f"emublas {e['moduli']} vs GEMMul8 {q['moduli']} at φ={phi:g}")
        if not ratios:
            out.append(f"- {op} n={n}, accurate, emublas/GEMMul8 at equal accuracy ≤ {bound}: NOT MEASURED")
            continue
        met = sum(r <= bound for r in ratios)
        out.append(
            f"- {op} n={n}, accurate, emublas/GEMMul8 at equal accuracy ≤ {bound}: "
            f"{'MET' if met == len(ratios) else 'NOT MET'} ({met}/{len(ratios)} pairs; best"
            f" {min(ratios):.2f}, worst {worst[0]:.2f}: {worst[1]}; {unpaired} configurations unpaired)"
        )
    for (op, n), bound in NATIVE_TARGETS.items():
        line = f"- {op} n={n}, φ=0.5, speed against cuBLAS at native accuracy or better ≥ {bound}×: "
        rs = g.get((op, size[n], size[n], size[n], 0.5))
        nat = native_of(rs or [], "emublas")
        if nat is None:
            out.append(line + "NOT MEASURED")
            continue
        parts = []
        for lib in ("emublas", "gemmul8"):
            ok = [r for r in rs if r["lib"] == lib and r["err_max"] <= nat["err_max"]]
            best = max(ok, key=lambda r: r["vs_native"]) if ok else None
            parts.append((lib, best))
        e = parts[0][1]
        verdict = (
            "NOT MET (no emublas configuration as accurate as cuBLAS)"
            if e is None
            else (
                ("MET" if e["vs_native"] >= bound else "NOT MET")
                + f" ({e['vs_native']:.2f}× with {e['mode']} {e['moduli']} moduli, max err {e['err_max']:.1e}"
                f" against cuBLAS's {nat['err_max']:.1e})"
            )
        )
        g8 = parts[1][1]
        out.append(
            line
            + verdict
            + ("; GEMMul8: " + (f"{g8['vs_native']:.2f}× ({g8['mode']} {g8['moduli']})" if g8 else "none as accurate"))
        )
    return out


def render(doc) -> str:
    m = doc["meta"]
    w = next((x for x in m["workers"] if x.get("gpu") or x.get("dry_run")), {})
    head = [
        f"=== tables: emublas against GEMMul8 (commit {m['commit']}, {w.get('gpu') or 'dry run on numpy'},"
        f" cupy {w.get('cupy')}, cuBLAS {w.get('cublas')}, order {m['order']}, {m['samples']} sampled entries,"
        f" seed {m['seed']}, wall {m['wall_s']} s)"
    ]
    return "\n".join(
        head
        + table_times(doc["rows"], m["modes"], m["moduli"])
        + table_pairs(doc["rows"], m["modes"], m["moduli"])
        + hook_proof(doc)
        + targets(doc)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the merged rows here")
    p.add_argument("--tables", default=None, help="also write the tables (markdown) here")
    p.add_argument("--quick", action="store_true", help="smoke grid: n = 1024, 2048, 2048x2048x512, 2 moduli counts")
    p.add_argument("--dry-run", action="store_true", help="numpy stand-ins at tiny sizes, no GPU")
    p.add_argument("--gemmul8-lib", default=".peers/gemmul8/libgemmul8.so")
    p.add_argument(
        "--commit",
        default=None,
        help="the commit measured, for the tables (default: git rev-parse HEAD beside the script, which names"
        " the enclosing checkout's HEAD when the script runs from a git archive unpacked inside it)",
    )
    p.add_argument("--shapes", type=parse_shapes, default=None, help="comma list of n or mxnxk")
    p.add_argument("--ops", type=lambda s: s.split(","), default=list(OPS))
    p.add_argument("--phis", type=lambda s: [float(x) for x in s.split(",")], default=[0.5, 4.0])
    p.add_argument("--moduli", type=lambda s: [int(x) for x in s.split(",")], default=None)
    p.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--seed", type=int, default=20251)
    p.add_argument("--order", choices=("C", "F"), default="C")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="wall seconds for all workers: each gets a share (by nominal work) and starts no input past it;"
        " a worker still running 30 s after the whole budget is ended (its finished inputs are kept)",
    )
    p.add_argument("--workdir", default=None, help="specs, worker rows and the exact-reference cache")
    p.add_argument("--worker", choices=("emublas", "gemmul8"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    p.add_argument("--rows", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.spec, args.rows)
        return
    for name, vals, valid in (("--ops", args.ops, OPS), ("--modes", args.modes, MODES)):
        bad = [v for v in vals if v not in valid]
        if bad:
            p.error(f"{name}: {bad} not among {list(valid)}")
    doc = driver(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    text = render(doc)
    if args.tables:
        with open(args.tables, "w") as fh:
            fh.write(text + "\n")
    print(text, flush=True)


if __name__ == "__main__":
    main()
