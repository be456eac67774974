#!/usr/bin/env bash
# The measurement behind EMUBLAS_MIN_DIM (BENCHMARKS.md, "The interpose size threshold").
set -euo pipefail
out=${1:-min-dim-out}
python3 -m emublas sweep --ops gemm --dtypes d --sizes 32,64,128,256 --backends native,ozaki2 \
    --grid 'ozaki2:moduli=16' --families phi0.5 --reps 5 --no-plots --out "$out"
