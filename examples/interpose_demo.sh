#!/usr/bin/env bash
# Each unchanged program natively, then under emulation with the routing lines shown.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== scipy program, native =="
python3 examples/scipy_program.py
echo "== scipy program, ozaki2 (16 moduli, default) =="
EMUBLAS_VERBOSE=1 python3 -m emublas.interpose --backend ozaki2 examples/scipy_program.py
echo "== scipy program, ozaki2, 20 moduli =="
EMUBLAS_VERBOSE=1 python3 -m emublas.interpose --backend ozaki2 --option moduli=20 examples/scipy_program.py
if python3 -c "import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0" 2>/dev/null; then
    echo "== cupy program, native =="
    python3 examples/cupy_program.py
    echo "== cupy program, through the shim (native backend: every call falls through, shown) =="
    EMUBLAS_VERBOSE=1 python3 -m emublas.interpose examples/cupy_program.py
fi
