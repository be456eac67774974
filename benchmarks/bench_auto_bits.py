"""auto with ``bits``: entries beyond 2^-bits·Σ|a||b| and the warnings that came with them.

    python3 benchmarks/bench_auto_bits.py --seeds 30 --phi 4 --bits 20
    python3 benchmarks/bench_auto_bits.py --probe --phi 0.5 --moduli 7   # the slack the certificate needs
    PYTHONPATH=.old python3 benchmarks/bench_auto_bits.py --seeds 30 --phi 4 --bits 20   # an older tree

Each seed draws (rand − 0.5)·exp(φ·randn) operands, runs ``dgemm`` with ``backend="auto"``
under a cost table that makes auto emulate (ozaki2 predicted twice as fast as native from
n = 16), and compares every entry with its exact value (Fractions).  Per seed it counts the
entries beyond the bits asked for and the warnings by class: an entry beyond them is silent
where the call raised no warning, and it is hidden where the same warning comes with every
call (the table shows both).  ``--probe`` calls ozaki2 directly instead, to find how many
product bits past ``2·bits + log2 k`` its certificate needs on ordinary data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def _table() -> dict:
    """A cost table (format 1) under which auto emulates every d/z gemm and herk from n = 16:
    native n^3 ns, ozaki2 half of it at every count measured."""
    entries = []
    for prefix in "dz":
        for routine in ("gemm", "herk"):
            for n in (1, 4, 16, 64):
                nat = 1e-9 * n**3
                entries.append(
                    dict(routine=routine, prefix=prefix, n=n, backend="native", knob=None, median_s=nat, ratio=1.0)
                )
                for count in (8, 16):
                    entries.append(
                        dict(
                            routine=routine,
                            prefix=prefix,
                            n=n,
                            backend="ozaki2",
                            knob=count,
                            median_s=nat / 2,
                            ratio=0.5,
                        )
                    )
    return {
        "format": 1,
        "device": "cpu",
        "hardware": "synthetic",
        "source": "bench_auto_bits",
        "entries": entries,
        "min_dim_override": 16,
    }


def probe(shapes, bits_list, moduli: int, draws: int, phi: float, prefix: str = "d") -> list[dict]:
    """ozaki2 called directly with ``bits`` at a fixed count: the entries its certificate leaves
    (fallback none), against the slack ``P − 2·bits − log2 k`` of the moduli's product P."""
    import math

    from test_ozaki2 import hard

    import emublas
    from emublas.backends.ozaki2 import last_run

    rows = []
    for m, k, n in shapes:
        for bits in bits_list:
            left = 0
            for seed in range(draws):
                rng = np.random.default_rng(seed)
                dtype = np.complex128 if prefix == "z" else np.float64
                a, b = hard(rng, (m, k), phi, dtype), hard(rng, (k, n), phi, dtype)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    emublas.gemm(1.0, a, b, backend="ozaki2", moduli=moduli, bits=bits, fallback="none")
                left += last_run()["uncertified"]
            slack = last_run()["bits"] - 2 * bits - math.log2(k)
            rows.append(dict(m=m, k=k, n=n, bits=bits, moduli=moduli, slack=round(slack, 2), uncertified=left))
            print(
                f"{m}x{k}x{n} bits {bits:2d} moduli {moduli}: slack {slack:5.1f}  uncertified {left} of {draws * m * n}"
            )
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=30)
    p.add_argument("--phi", type=float, default=4.0)
    p.add_argument("--bits", type=int, default=20)
    p.add_argument("--shape", type=int, nargs=3, default=(24, 40, 20), metavar=("M", "K", "N"))
    p.add_argument("--json")
    p.add_argument(
        "--probe",
        action="store_true",
        help="instead: ozaki2 with bits at --moduli, for --probe-bits over --probe-shapes"
        " (the slack its certificate needs)",
    )
    p.add_argument("--moduli", type=int, default=7)
    p.add_argument("--probe-bits", type=int, nargs="+", default=[21, 20, 19, 18, 17, 16])
    p.add_argument("--probe-shapes", nargs="+", default=["24x40x20", "256x256x256", "128x1024x128", "64x4096x64"])
    p.add_argument("--draws", type=int, default=6)
    p.add_argument("--prefix", choices=("d", "z"), default="d", help="--probe: dgemm or zgemm")
    args = p.parse_args(argv)
    if args.probe:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.probe_shapes]
        rows = probe(shapes, args.probe_bits, args.moduli, args.draws, args.phi, args.prefix)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"argv": sys.argv, "rows": rows}, fh, indent=1)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "forced.json")
        with open(path, "w") as fh:
            json.dump(_table(), fh)
        os.environ["EMUBLAS_COST_TABLE"] = path
        from test_ozaki2 import exact_product, hard

        import emublas

        m, k, n = args.shape
        rows = []
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            a, b = hard(rng, (m, k), args.phi), hard(rng, (k, n), args.phi)
            ref = exact_product(a, b)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = emublas.dgemm(1.0, a, b, backend="auto", bits=args.bits)
            beyond = int((np.abs(out - ref) > 2.0**-args.bits * (np.abs(a) @ np.abs(b))).sum())
            names = sorted({w.category.__name__ for w in caught})
            last = emublas.auto_last()
            rows.append(
                dict(seed=seed, beyond=beyond, warnings=names, backend=last["backend"], options=last["options"])
            )
    total = sum(r["beyond"] for r in rows)
    silent = sum(1 for r in rows if r["beyond"] and not r["warnings"])
    warned = sum(1 for r in rows if r["warnings"])
    print(f"emublas from {os.path.dirname(emublas.__file__)}")
    print(f"auto chose {rows[-1]['backend']} {rows[-1]['options']}")
    print(
        f"{args.seeds} seeds, phi {args.phi}, {m}x{k}x{n}, bits {args.bits}: {total} entries beyond 2^-{args.bits}"
        f" sum|a||b|; calls warned: {warned}; calls with such entries and no warning: {silent}"
    )
    kinds = sorted({name for r in rows for name in r["warnings"]})
    print("warning classes raised: " + (", ".join(kinds) or "none"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"argv": sys.argv, "rows": rows, "beyond": total, "silent": silent, "warned": warned}, fh, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
