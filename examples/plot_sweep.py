"""Re-draw the plots of an ``emublas sweep`` from its results.json.

    python3 examples/plot_sweep.py examples/sweep-out/results.json [--out DIR]

Writes PNG and SVG files into DIR/plots (default: the folder of results.json).
Needs matplotlib (``pip install -e '.[plot]'``).
"""
import argparse
import json
import math
import os
import sys

from emublas.sweep import plot_results


def _floats(row):
    # results.json writes inf as the string "inf" (JSON has no infinity)
    return {k: (math.inf if v == "inf" else -math.inf if v == "-inf" else v) for k, v in row.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="results.json written by emublas sweep")
    p.add_argument("--out", default=None, help="folder for plots/ (default: next to results.json)")
    args = p.parse_args(argv)
    with open(args.results) as fh:
        doc = json.load(fh)
    rows = [_floats(r) for r in doc["rows"]]
    out = args.out or os.path.dirname(os.path.abspath(args.results))
    paths = plot_results(rows, out)
    for path in paths:
        print(path)
    return 0 if paths else 1


if __name__ == "__main__":
    sys.exit(main())
