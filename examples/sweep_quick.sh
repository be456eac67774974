#!/usr/bin/env bash
# The quick accuracy-against-speed sweep, the same run as the README's first command:
# dgemm/zgemm at n=256 (phi0.5, phi2, cancel) and 512, native against ozaki2 over
# moduli 8..22, boolpack over bits, strassen over levels; zherk at 8 and 16 moduli
# (emublas.sweep.QUICK_PLAN and each backend's sweep_quick_grid).  Resumable: rerun to finish an
# interrupted sweep; delete examples/sweep-out to start over.  138 configurations:
# 116 s measured on a shared 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m emublas sweep --quick --out examples/sweep-out "$@"
