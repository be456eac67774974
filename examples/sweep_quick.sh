#!/usr/bin/env bash
# The quick accuracy-against-speed sweep (under 2 minutes on 2 CPU cores):
# dgemm/zgemm at n=256 (phi0.5, phi2, cancel) and 512, native vs ozaki2 over
# moduli 8..22, zherk at 8 and 16 moduli.  Resumable: rerun to finish an
# interrupted sweep; delete examples/sweep-out to start over.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m emublas sweep --quick --out examples/sweep-out "$@"
