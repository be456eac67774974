#!/usr/bin/env bash
# One call on the lent GPU machine (../.library/device): build the package, run the
# GPU tests (ozaki2 on cupy against the CPU backend, the parity suite on cupy),
# then the ozaki2 GPU benchmark, writing $OUT/ozaki2_gpu.json and the logs.
#   device run:  bash benchmarks/device_ozaki2.sh [--quick]    (carry: .whl)
source "$(dirname "$0")/_device_setup.sh"
nvidia-smi -L
python3 -m pytest -q -p no:cacheprovider -m gpu tests >"$OUT/pytest_gpu.log" 2>&1
tail -3 "$OUT/pytest_gpu.log"
grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.log" | head -20
python3 benchmarks/bench_ozaki2_gpu.py --json "$OUT/ozaki2_gpu.json" "$@" 2>&1 | tee "$OUT/bench.log" | cut -c1-400
