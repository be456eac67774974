"""The ``emublas`` command line: ``emublas info``, ``demo``, ``sweep``, ``plot`` and ``calibrate``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

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

    from . import backends
    from .info import format_info

    if args.n < 1:
        raise ValueError(f"-n must be a positive matrix size, got {args.n}")
    if args.backends is None:
        args.backends = [b for b in backends.names() if backends.get(b).device_readiness("cpu")[0]]
    else:  # every name checked before anything is printed
        args.backends = [backends.get(b).name for b in backend_list(args.backends) or []]
    print(format_info())
    print()
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
        (
            "zher2k",
            lambda be: emublas.zher2k(0.5, za, zb, backend=be),
            np.triu(0.5 * (za @ zb.conj().T + zb @ za.conj().T)),
        ),
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


def backend_list(values: Sequence[str] | str | None) -> list[str] | None:
    """Backend names given as ``a,b``, ``a b`` or both (the same form for every verb)."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    return [name.strip() for v in values for name in v.split(",") if name.strip()]


def _cmd_sweep(args: argparse.Namespace) -> int:
    from . import sweep

    return sweep.command(args, argv=["emublas"] + list(args._argv))


def _cmd_plot(args: argparse.Namespace) -> int:
    from . import sweep

    return sweep.replot(args.results, args.out)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from . import calibrate

    return calibrate.command(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``emublas`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; None: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status.
    """
    from ._version import __version__

    parser = argparse.ArgumentParser(prog="emublas", description="BLAS-3 emulation layer")
    parser.add_argument("--version", action="version", version=f"emublas {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{info,demo,sweep,plot,calibrate}")
    p_info = sub.add_parser("info", help="version, backends, hardware, active selection")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_info.set_defaults(func=_cmd_info)
    p_demo = sub.add_parser("demo", help="run each routine family once and report time and error")
    p_demo.add_argument("-n", type=int, default=512, help="matrix size (default 512)")
    p_demo.add_argument("--seed", type=int, default=None)
    p_demo.add_argument(
        "--backends",
        nargs="+",
        default=None,
        metavar="NAME",
        help="backends, comma- or space-separated (default: native and every other backend usable on the CPU here)",
    )
    p_demo.set_defaults(func=_cmd_demo)
    p_sweep = sub.add_parser("sweep", help="accuracy against speed over backends, knobs, sizes and input families")
    from .sweep import add_arguments

    add_arguments(p_sweep)
    p_sweep.set_defaults(func=_cmd_sweep)
    p_plot = sub.add_parser("plot", help="draw the plots of a finished sweep from its results.json")
    p_plot.add_argument("results", help="results.json written by emublas sweep")
    p_plot.add_argument("--out", default=None, help="folder for plots/ (default: the folder of results.json)")
    p_plot.set_defaults(func=_cmd_plot)
    p_cal = sub.add_parser("calibrate", help="time the backends on a short grid: the cost table of backend='auto'")
    from .calibrate import add_arguments as calibrate_arguments

    calibrate_arguments(p_cal)
    p_cal.set_defaults(func=_cmd_calibrate)
    args = parser.parse_args(argv)
    if args.command is None:  # a bare ``emublas``: say what there is
        parser.print_help()
        return 0
    args._argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:  # bad selection, options or file: say it, no traceback
        print(f"emublas: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
