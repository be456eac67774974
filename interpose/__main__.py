"""``python -m emublas.interpose [--backend NAME [--option K=V ...]] (script.py | -m module) [args...]``.

Runs an unchanged program with the shim installed, like ``python -m cProfile``.
"""
from __future__ import annotations

import argparse
import runpy
import sys


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m emublas.interpose",
                                     description="run a scipy/cupy program with its BLAS-3 calls on emublas")
    parser.add_argument("--backend", help="backend for the program (default: EMUBLAS_BACKEND, else native)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="backend option, repeatable (e.g. --option moduli=18)")
    parser.add_argument("-m", dest="module", help="run a module as a script")
    parser.add_argument("target", nargs=argparse.REMAINDER, help="script.py [args...] (or the module's args)")
    args = parser.parse_args(argv)
    if not args.module and not args.target:
        parser.error("give a script or -m module")
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--option wants NAME=VALUE, got {item!r}")
        options[key] = value
    if options and not args.backend:
        parser.error("--option needs --backend")

    from . import install

    install(args.backend, **options)  # bad names and values raise here, before the program starts
    if args.module:
        sys.argv = [args.module, *args.target]
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args.target)
        runpy.run_path(args.target[0], run_name="__main__")


if __name__ == "__main__":
    main()
