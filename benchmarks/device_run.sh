#!/usr/bin/env bash
# The benchmarks' runner: one named job per call, on the lent GPU machine (../.library/device)
# or, for the CPU jobs, here.
#
#   bash benchmarks/device_run.sh foundation          build; the whole test suite (GPU tests included);
#                                                     native on cupy (bench_native_gpu.py)   (carry: .whl)
#   bash benchmarks/device_run.sh ozaki2 [--quick]    build; the GPU tests; bench_ozaki2_gpu.py,
#                                                     writing $OUT/ozaki2_gpu.json            (carry: .whl)
#   bash benchmarks/device_run.sh gemmul8 [--quick]   build; emublas against GEMMul8 in hook mode
#                                                     (bench_gemmul8.py): $OUT/gemmul8.json, $OUT/gemmul8.md,
#                                                     the logs and the workers' partial rows ($OUT/work, kept
#                                                     even if the call is cut short)  (carry: .whl, .peers)
#         before gemmul8, here: mkdir -p .peers/gemmul8 && cp ../shared/peers/gemmul8/libgemmul8.so .peers/gemmul8/
#   bash benchmarks/device_run.sh products [ARGS]     build; tests/test_cublaslt.py; the int8 products through
#                                                     gemmEx, strided-batched gemmEx and cuBLASLt (heuristic and
#                                                     timed algorithms), bench_int8_products_gpu.py:
#                                                     $OUT/products.json, $OUT/products.md     (carry: .whl)
#   bash benchmarks/device_run.sh gpu-tests PART...   build; the GPU tests in four parts that each fit one
#                                                     call (a: every file but the parity suite and level 3,
#                                                     b: the parity suite, c: tests/test_level3.py but its
#                                                     boolpack cases, d: those; parts
#                                                     given together run side by side; 16 workers in all,
#                                                     one line per test in $OUT/pytest_gpu_PART.log, the
#                                                     slowest 25 listed; exits with pytest's status)  (carry: .whl)
#   bash benchmarks/device_run.sh min-dim [OUT_DIR]   CPU, no build: the sweep behind EMUBLAS_MIN_DIM
#                                                     (BENCHMARKS.md, "The interpose size threshold")
#
# The GPU jobs source _device_setup.sh (installs the carried wheels, builds the package in place,
# sets OUT); extra arguments go to the job's script.
job=${1:-}
shift || true
here="$(dirname "$0")"

case "$job" in
foundation)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    python3 -m emublas info | tee "$OUT/info.txt"
    python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest.log" | tail -4
    python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tail -1
    python3 benchmarks/bench_native_gpu.py --sizes 4096 8192 --reps 10 --json "$OUT/native_gpu.json" "$@" \
        | tee "$OUT/native_gpu.md"
    ;;
ozaki2)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    python3 -m pytest -q -p no:cacheprovider -m gpu tests >"$OUT/pytest_gpu.log" 2>&1
    tail -3 "$OUT/pytest_gpu.log"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.log" | head -20
    python3 benchmarks/bench_ozaki2_gpu.py --json "$OUT/ozaki2_gpu.json" "$@" 2>&1 | tee "$OUT/bench.log" | cut -c1-400
    ;;
gemmul8)
    source "$here/_device_setup.sh"
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
    ;;
gpu-tests)
    [ $# -gt 0 ] || { echo "gpu-tests: give one or more parts, a, b, c or d" >&2; exit 2; }
    for part in "$@"; do
        case "$part" in a | b | c | d) ;; *) echo "gpu-tests: the parts are a, b, c and d (got '${part}')" >&2; exit 2 ;; esac
    done
    source "$here/_device_setup.sh"
    # parts given together run side by side and share the 16 workers
    workers=$((16 / $#))
    for part in "$@"; do
        kexpr=""
        case "$part" in
        a) files=$(ls tests/test_*.py | grep -v -e test_blas_parity.py -e test_level3.py) ;;
        b) files=tests/test_blas_parity.py ;;
        c) files=tests/test_level3.py kexpr="not boolpack" ;;
        d) files=tests/test_level3.py kexpr="boolpack" ;;
        esac
        # -v: a line per test as it ends, so a call cut short still says which tests passed
        (timeout $((570 - SECONDS)) python3 -m pytest -v -p no:cacheprovider -m gpu -n "$workers" -rf \
            --durations=25 ${kexpr:+-k "$kexpr"} $files >"$OUT/pytest_gpu_$part.log" 2>&1
        echo $? >"$OUT/pytest_gpu_$part.rc") &
    done
    wait
    rc=0
    for part in "$@"; do
        r=$(cat "$OUT/pytest_gpu_$part.rc")
        echo "part $part: pytest exit status $r at ${SECONDS} s$([ "$r" -eq 124 ] && echo ': cut by the time limit, not complete')"
        grep -cE " PASSED " "$OUT/pytest_gpu_$part.log" | sed 's/^/  passed: /'
        grep -E "(FAILED|ERROR) " "$OUT/pytest_gpu_$part.log" | head -20
        tail -1 "$OUT/pytest_gpu_$part.log"
        [ "$r" -gt "$rc" ] && rc=$r
    done
    exit $rc
    ;;
products)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    python3 -m pytest -q -p no:cacheprovider tests/test_cublaslt.py 2>&1 | tee "$OUT/pytest_cublaslt.log" | tail -3
    python3 benchmarks/bench_int8_products_gpu.py --json "$OUT/products.json" --budget-s $((560 - SECONDS)) "$@" \
        2>&1 | tee "$OUT/products.md"
    ;;
min-dim)
    set -euo pipefail
    out=${1:-min-dim-out}
    python3 -m emublas sweep --ops gemm --dtypes d --sizes 32,64,128,256 --backends native,ozaki2 \
        --grid 'ozaki2:moduli=16' --families phi0.5 --reps 5 --no-plots --out "$out"
    ;;
*)
    echo "usage: bash benchmarks/device_run.sh {foundation|ozaki2|gemmul8|products|gpu-tests a|b|c|min-dim} [ARGS...]" >&2
    exit 2
    ;;
esac
