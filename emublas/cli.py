"""The ``emublas`` command line: ``emublas info``, ``emublas demo``, ``emublas sweep``."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

__all__ = ["main"]


def _cmd_info(args: argparse.Namespace) -> int:
    from .info import format_info, info

    report = info()
    print(json.dumps(report, indent=2, default=str) if args.json else format_info(report))
    return 0 if "selection" in report else 2


def _relerr(x, ref) -> float:
    import numpy as np

    den = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / den) if den else float(np.linalg.norm(x))


def _cmd_demo(args: argparse.Namespace) -> int:
    """Each routine family once on random data, compared with numpy's own product."""
    import numpy as np

    import emublas
    from .info import format_info

    print(format_info())
    print()
    if args.backends is None:
        from . import backends

        args.backends = [b for b in backends.names() if backends.get(b).readiness()["cpu"][0]]
    rng = np.random.default_rng(args.seed)
    n = args.n
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    za = a + 1j * rng.standard_normal((n, n))
    zb = b + 1j * rng.standard_normal((n, n))
    # References from exactly representable integer-valued splits would be exact;
    # here the demo compares with numpy's matmul, which is its own BLAS product.
    cases = [
        ("dgemm", lambda be: emublas.dgemm(1.0, a, b, backend=be), a @ b),
        ("zgemm", lambda be: emublas.zgemm(1.0, za, zb, trans_b=2, backend=be), za @ zb.conj().T),
        ("dsyrk", lambda be: emublas.dsyrk(1.0, a, lower=1, backend=be), np.tril(a @ a.T)),
        ("zherk", lambda be: emublas.zherk(1.0, za, backend=be), np.triu(za @ za.conj().T)),
        ("zher2k", lambda be: emublas.zher2k(0.5, za, zb, backend=be),
         np.triu(0.5 * (za @ zb.conj().T + zb @ za.conj().T))),
    ]
    print(f"{'routine':8s} {'backend':8s} {'n':>6s} {'time [ms]':>10s} {'rel. error vs numpy':>20s}")
    for name, run, ref in cases:
        for be in args.backends:
            run(be)  # warm-up
            t0 = time.perf_counter()
            out = run(be)
            dt = time.perf_counter() - t0
            if name in ("zherk", "zher2k"):
                ref = ref.copy()
                np.fill_diagonal(ref, ref.diagonal().real)
            print(f"{name:8s} {be:8s} {n:6d} {dt * 1e3:10.2f} {_relerr(out, ref):20.3e}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from . import sweep

    return sweep.command(args, argv=["emublas"] + list(args._argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``emublas`` command."""
    parser = argparse.ArgumentParser(prog="emublas", description="BLAS-3 emulation layer")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="version, backends, hardware, active selection")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_info.set_defaults(func=_cmd_info)
    p_demo = sub.add_parser("demo", help="run each routine family once and report time and error")
    p_demo.add_argument("-n", type=int, default=512, help="matrix size (default 512)")
    p_demo.add_argument("--seed", type=int, default=None)
    p_demo.add_argument("--backends", nargs="+", default=None,
                        help="default: native and every other backend usable on the CPU here")
    p_demo.set_defaults(func=_cmd_demo)
    p_sweep = sub.add_parser("sweep", help="accuracy against speed over backends, knobs, sizes and input families")
    from .sweep import add_arguments

    add_arguments(p_sweep)
    p_sweep.set_defaults(func=_cmd_sweep)
    args = parser.parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.func(args)
    except ValueError as exc:  # bad selection or options: say it, no traceback
        print(f"emublas: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
