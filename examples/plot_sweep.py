"""Re-draw the plots of an ``emublas sweep`` from its results.json (same as ``emublas plot``).

    python3 examples/plot_sweep.py examples/sweep-out/results.json [--out DIR]

Writes PNG and SVG files into DIR/plots (default: the folder of results.json).
Needs matplotlib (``pip install -e '.[plot]'``).
"""

import sys

from emublas.cli import main

if __name__ == "__main__":
    sys.exit(main(["plot", *sys.argv[1:]]))
