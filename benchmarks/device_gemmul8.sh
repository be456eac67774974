#!/usr/bin/env bash
# One call on the lent GPU machine (../.library/device): build the package, then time
# emublas against GEMMul8 in hook mode (benchmarks/bench_gemmul8.py), writing
# $OUT/gemmul8.json, $OUT/gemmul8.md (the tables), the logs and the workers' partial rows
# ($OUT/work, kept even if the call is cut short); the tables are printed last.
#   here:        mkdir -p .peers/gemmul8 && cp ../shared/peers/gemmul8/libgemmul8.so .peers/gemmul8/
#   device run:  bash benchmarks/device_gemmul8.sh [--quick]    (carry: .whl, .peers)
source "$(dirname "$0")/_device_setup.sh"
LIB="$PWD/.peers/gemmul8/libgemmul8.so"
[ -f "$LIB" ] || { echo "no $LIB: copy ../shared/peers/gemmul8/libgemmul8.so there and carry .peers"; exit 1; }
nvidia-smi -L
# the workers' budget: what is left of the device call's 600 s after setup, less a margin for the tables
python3 benchmarks/bench_gemmul8.py --gemmul8-lib "$LIB" --json "$OUT/gemmul8.json" --tables "$OUT/gemmul8.md" \
    --workdir "$OUT/work" --budget-s $((520 - SECONDS)) "$@" >"$OUT/bench.log" 2>&1
rc=$?
grep -E "FAILED|Traceback|Error" "$OUT/bench.log" | grep -v "^\[.*\] {" | head -10
sed -n '/^=== tables/,$p' "$OUT/bench.log"
[ $rc -eq 0 ] || { echo "bench_gemmul8.py exit status $rc; last lines:"; tail -20 "$OUT/bench.log"; }
exit $rc
