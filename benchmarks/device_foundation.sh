#!/usr/bin/env bash
# One call on the lent GPU machine (see ../.library/device): build the package,
# run the whole test suite (GPU tests included), time the native backend on cupy.
#   device run:  bash benchmarks/device_foundation.sh    (carry: .whl)
source "$(dirname "$0")/_device_setup.sh"
nvidia-smi -L
python3 -m emublas info | tee "$OUT/info.txt"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest.log" | tail -4
python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -1
python3 benchmarks/bench_native_gpu.py --sizes 4096 8192 --reps 10 --json "$OUT/native_gpu.json" | tee "$OUT/native_gpu.md"
