"""``python -m emublas.interpose [--backend NAME [--option K=V ...]] (script.py | -m module) [args...]``.

Runs an unchanged program with the shim installed, like ``python -m cProfile``.
Only the options before the script (or ``-m module``) are the runner's: every
argument after it goes to the program untouched, as with ``python -m``; ``--``
ends the runner's options explicitly.  Mistakes in the runner's own arguments
print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys

PROG = "python -m emublas.interpose"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage block: the mistake is the news
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        usage=f"{PROG} [--backend NAME] [--option NAME=VALUE ...] (script.py | -m module) [args ...]",
        description="run a scipy/cupy program with its BLAS-3 calls on emublas; every argument after the"
        " script or -m module goes to the program",
    )
    parser.add_argument("--backend", help="backend for the program (default: EMUBLAS_BACKEND, else native)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="backend option, repeatable (e.g. --option moduli=18)",
    )
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a script")
    return parser


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """The runner's own arguments and the program's (from the script or ``-m MODULE`` on)."""
    takes_value = {"--backend", "--option", "-m"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return argv[:i], argv[i + 1 :]
        if arg in takes_value:
            if arg == "-m":
                return argv[: i + 2], argv[i + 2 :]
            i += 2
            continue
        if arg.startswith("-m") and len(arg) > 2:  # -mpytest, as python accepts
            return argv[:i] + ["-m", arg[2:]], argv[i + 1 :]
        if arg.startswith("-") and arg != "-":
            i += 1  # --backend=x, -h, or an unknown option: argparse reports the latter
            continue
        return argv[:i], argv[i:]
    return argv, []


def _options(parser: argparse.ArgumentParser, backend_name: str | None, items: list[str]) -> dict[str, object]:
    from emublas import backends

    if items and not backend_name:
        parser.error("--option needs --backend")
    if backend_name is None:
        return {}
    try:
        backend = backends.get(backend_name)
    except ValueError as exc:
        parser.error(f"--backend {backend_name}: {exc}")
    options: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            parser.error(f"--option wants NAME=VALUE, got {item!r}")
        spec = backend.options.get(key)
        if spec is None:
            valid = ", ".join(sorted(backend.options)) or "none"
            parser.error(f"--option {item}: backend {backend.name!r} has no option {key!r}; valid options: {valid}")
        try:
            spec.parse(value)
        except ValueError as exc:
            valid = getattr(spec.parse, "valid", "")
            parser.error(f"--option {item}: {exc}" + (f"; valid values: {valid}" if valid else ""))
        options[key] = value
    return options


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, program = _split(argv)
    parser = _parser()
    args = parser.parse_args(own)
    if args.module is None and not program:
        parser.error("give a script or -m module")
    options = _options(parser, args.backend, args.option)
    if args.module is None and not os.path.isfile(program[0]):
        parser.error(f"can't open file {program[0]!r}: no such file")
    if args.module is not None:
        try:
            found = importlib.util.find_spec(args.module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            parser.error(f"-m {args.module}: no module named {args.module!r}")

    from emublas import config

    from . import install
    from .policy import min_dim, verbose

    try:
        install(args.backend, **options)
        config.resolve()  # the chosen backend's option variables (EMUBLAS_MODULI=abc), before the program runs
        min_dim(), verbose()
    except ValueError as exc:  # an environment variable the shim or the selection reads
        parser.error(str(exc))
    if args.module is not None:
        sys.argv = [args.module, *program]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(program)
        sys.path.insert(0, os.path.dirname(os.path.abspath(program[0])))
        runpy.run_path(program[0], run_name="__main__")


if __name__ == "__main__":
    main()
