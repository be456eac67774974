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
#   bash benchmarks/device_run.sh ab ROUNDS [ARGS]    build; this tree against an older one in the same call:
#                                                     bench_ozaki2_gpu_phases.py ARGS, each tree running its
#                                                     own script and package, alternating new, old ROUNDS
#                                                     times: $OUT/phases_{new,old}_R.json  (carry: .whl, .old)
#         before ab, here: rm -rf .old && mkdir .old && git archive OLD | tar -x -C .old \
#                          && git rev-parse --short OLD >.old/COMMIT
#   bash benchmarks/device_run.sh next-check [ROUNDS] build; in one call what branch next needs before it
#                                                     merges: the GPU tests its changes touch (ozaki2 on cupy
#                                                     bit for bit against the CPU, the shim's cupy side, auto's
#                                                     GPU route cache; 16 workers, at most 300 s), then with
#                                                     .old carried the ab job's alternation (ROUNDS, default 2)
#                                                     at 4096 and 8192, d and z, and zherk 8192 (the triangle
#                                                     W): $OUT/pytest_next.log, $OUT/phases_*  (carry: .whl, .old)
#   bash benchmarks/device_run.sh next-full [ROUNDS]  build; the GPU suite (four parts side by side, 280 s), the CPU
#                                                     kernels' tests on the device's processor (its AVX-512
#                                                     paths), a GPU hunt, next-check's alternation against .old;
#                                                     everything in $OUT/next_full.tgz  (carry: .whl, .old)
#   bash benchmarks/device_run.sh peer COMMIT         build; bench_gemmul8.py at #14's targets (accurate, phi 0.5,
#                                                     4096, 8192, 16384, 8192x8192x2048, 14-18 moduli), then
#                                                     phi 4 and fast mode at 4096/8192: $OUT/peer.tgz
#                                                     (carry: .whl, .peers)
#   bash benchmarks/device_run.sh targets             build; the fixed cost at n = 256, ZHERK/ZGEMM 16384, ztrsm
#                                                     16384, the cupy program under the shim: $OUT/targets.tgz
#   bash benchmarks/device_run.sh one-call COMMIT     build; the GPU suite (200 s), then bench_gemmul8.py at #14's
#                                                     target grid: $OUT/one_call.tgz  (carry: .whl, .peers)
#   bash benchmarks/device_run.sh cpu-mixed [ROUNDS]  build this tree and .old; on the device's processor (16
#                                                     cores): ozaki2 CPU calls alternating with scipy dgemm, this
#                                                     tree against .old (bench_mixed_cpu.py, ROUNDS, default 3):
#                                                     $OUT/mixed_cpu.json  (carry: .whl, .old)
#   bash benchmarks/device_run.sh shim-calls [ROUNDS [PLAIN [OPS [profile]]]]
#                                                     build; bench_shim_calls_gpu.py on examples/cupy_cholesky.py:
#                                                     each cupy.matmul natively and under the shim, paired by
#                                                     call (ROUNDS, default 2), untimed runs of PLAIN_MODES
#                                                     (env, see --plain-modes; PLAIN rounds, default 2), every
#                                                     library call timed alone (OPS rounds, default 0), a
#                                                     cProfile run; $OUT/shim_calls_gpu.{txt,json}  (carry: .whl)
#   bash benchmarks/device_run.sh auto-gpu [ROUNDS]   build; the GPU tests of auto and of the shim's cupy side (120 s); then
#                                                     bench_auto.py --rotate at 64, 256, 1024 and 4096 (AUTO_GPU_SIZES) with this tree's
#                                                     script, this tree's package against .old's, alternating ROUNDS times
#                                                     (default 2); then this tree over the whole grid until second
#                                                     AUTO_GPU_END (env, default 570):
#                                                     $OUT/auto_gpu_{new,old}_R.json, $OUT/auto_gpu_grid.json  (carry: .whl, .old)
#   bash benchmarks/device_run.sh native-small [ROUNDS]
#                                                     build; the GPU tests of native, auto and the shim's cupy
#                                                     side (240 s); the cupy program under the shim with the A/A
#                                                     control; bench_auto_small_gpu.py --parts small at 64 ... 512
#                                                     (NATIVE_SMALL_SIZES), this tree against .old, alternating ROUNDS
#                                                     times (default 2): $OUT/shim_cupy.json, $OUT/small.tgz
#                                                     (carry: .whl, .old)
#   bash benchmarks/device_run.sh auto-small          build; the GPU tests of auto and of the shim's cupy side (120 s);
#                                                     bench_auto_small_gpu.py (auto's steps on small calls, batch order;
#                                                     env AUTO_SMALL_PARTS and AUTO_SMALL_ROUNDS pick its parts and rounds);
#                                                     then bench_auto.py --rotate --gpu-pause 0.2 at 64 ... 16384 until
#                                                     second AUTO_GPU_END (env, default 570):
#                                                     $OUT/auto_small_gpu.json, $OUT/auto_gpu_pause.json  (carry: .whl)
#   bash benchmarks/device_run.sh min-dim [OUT_DIR]   CPU, no build: the sweep behind EMUBLAS_MIN_DIM
#                                                     (BENCHMARKS.md, "The interpose size threshold")
#
# The GPU jobs source _device_setup.sh (installs the carried wheels, builds the package in place,
# sets OUT); extra arguments go to the job's script.
job=${1:-}
shift || true
here="$(dirname "$0")"

# The GPU tests of auto and of the shim's cupy side, within 120 s: $OUT/pytest_auto.log
auto_tests() {
    timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu -n 16 -rf tests/test_auto.py tests/test_interpose_gpu.py \
        >"$OUT/pytest_auto.log" 2>&1
    echo "pytest exit status $? at ${SECONDS} s"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest_auto.log" | head -20
    tail -1 "$OUT/pytest_auto.log"
}

# Sets trees to "new", or to "new old" where .old is carried: then the package is uninstalled so
# that PYTHONPATH picks each tree (as in ab), and .old gets this build's C extension
pick_trees() {
    trees="new"
    [ -f .old/COMMIT ] || return 0
    python3 -m pip uninstall -y -q emublas >/dev/null 2>&1
    cp emublas/_kernels/_cpu*.so .old/emublas/_kernels/
    trees="new old"
    echo "new: this tree, old: $(cat .old/COMMIT)"
}

# The GPU tests in parts side by side, within LIMIT seconds: gpu_tests LIMIT PART...
gpu_tests() {
    local limit=$1 part r rc=0 workers kexpr files
    shift
    [ $# -gt 0 ] || { echo "gpu-tests: give one or more parts, a, b, c or d" >&2; return 2; }
    for part in "$@"; do
        case "$part" in a | b | c | d) ;; *) echo "gpu-tests: the parts are a, b, c and d (got '${part}')" >&2; return 2 ;; esac
    done
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
        (timeout "$limit" python3 -m pytest -v -p no:cacheprovider -m gpu -n "$workers" -rf \
            --durations=25 ${kexpr:+-k "$kexpr"} $files >"$OUT/pytest_gpu_$part.log" 2>&1
        echo $? >"$OUT/pytest_gpu_$part.rc") &
    done
    wait
    for part in "$@"; do
        r=$(cat "$OUT/pytest_gpu_$part.rc")
        echo "part $part: pytest exit status $r at ${SECONDS} s$([ "$r" -eq 124 ] && echo ': cut by the time limit, not complete')"
        grep -cE " PASSED " "$OUT/pytest_gpu_$part.log" | sed 's/^/  passed: /'
        grep -E "(FAILED|ERROR) " "$OUT/pytest_gpu_$part.log" | head -20
        tail -1 "$OUT/pytest_gpu_$part.log"
        [ "$r" -gt "$rc" ] && rc=$r
    done
    return $rc
}

# The GPU tests branch next's changes touch, within LIMIT seconds: next_tests LIMIT
next_tests() {
    timeout "$1" python3 -m pytest -q -p no:cacheprovider -m gpu -n 16 -rf tests/test_ozaki2_gpu.py \
        tests/test_interpose_gpu.py tests/test_auto.py >"$OUT/pytest_next.log" 2>&1
    local rc=$?
    echo "pytest exit status $rc at ${SECONDS} s$([ $rc -eq 124 ] && echo ': cut by the time limit')"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest_next.log" | head -20
    tail -1 "$OUT/pytest_next.log"
}

# This tree against .old, alternating, ROUNDS times, starting no run after DEADLINE seconds of
# the job: 4096 and 8192, d and z, and zherk 8192 (the triangle W): next_ab ROUNDS DEADLINE
next_ab() {
    local rounds=$1 deadline=$2 r t tree
    [ -f .old/COMMIT ] || { echo "no .old carried: the comparison is skipped"; return 0; }
    python3 -m pip uninstall -y -q emublas >/dev/null 2>&1 # as in ab: PYTHONPATH picks the tree
    cp emublas/_kernels/_cpu*.so .old/emublas/_kernels/
    echo "new: $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree'), old: $(cat .old/COMMIT)"
    for r in $(seq "$rounds"); do
        for t in new old; do
            tree=$PWD
            [ "$t" = old ] && tree=$PWD/.old
            [ $SECONDS -gt "$deadline" ] && { echo "out of time after round $((r - 1))"; return 0; }
            PYTHONPATH="$tree:/tmp/site" python3 "$tree/benchmarks/bench_ozaki2_gpu_phases.py" --sizes 4096 8192 \
                --dtypes d z --moduli 16 --json "$OUT/phases_${t}_$r.json" 2>&1 | grep -E "^\| [a-z]+ \|" | sed "s/^/$t /"
            PYTHONPATH="$tree:/tmp/site" python3 "$tree/benchmarks/bench_ozaki2_gpu_phases.py" --sizes 8192 \
                --ops zherk --moduli 16 --json "$OUT/phases_zherk_${t}_$r.json" 2>&1 | grep -E "^\| [a-z]+ \|" | sed "s/^/$t /"
        done
    done
}

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
    source "$here/_device_setup.sh"
    gpu_tests $((570 - SECONDS)) "$@"
    ;;
products)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    python3 -m pytest -q -p no:cacheprovider tests/test_cublaslt.py 2>&1 | tee "$OUT/pytest_cublaslt.log" | tail -3
    python3 benchmarks/bench_int8_products_gpu.py --json "$OUT/products.json" --budget-s $((560 - SECONDS)) "$@" \
        2>&1 | tee "$OUT/products.md"
    ;;
ab)
    rounds=${1:-2}
    shift || true
    [ -f .old/COMMIT ] || { echo "ab: no .old/COMMIT (see the usage at the top) or .old not carried"; exit 1; }
    source "$here/_device_setup.sh"
    # the editable install would shadow PYTHONPATH, so that both runs imported this tree
    python3 -m pip uninstall -y -q emublas >/dev/null 2>&1
    cp emublas/_kernels/_cpu*.so .old/emublas/_kernels/ # the C extension: GPU calls need only its import
    echo "new: $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree'), old: $(cat .old/COMMIT)"
    for r in $(seq "$rounds"); do
        for t in new old; do
            tree=$PWD
            [ "$t" = old ] && tree=$PWD/.old
            PYTHONPATH="$tree:/tmp/site" python3 "$tree/benchmarks/bench_ozaki2_gpu_phases.py" "$@" \
                --json "$OUT/phases_${t}_$r.json" 2>&1 | grep -E "^\| [a-z]+ \|" | sed "s/^/$t /"
        done
    done
    ;;
auto-gpu)
    rounds=${1:-2}
    source "$here/_device_setup.sh"
    nvidia-smi -L
    auto_tests
    pick_trees
    for r in $(seq "$rounds"); do
        for t in $trees; do
            tree=$PWD
            [ "$t" = old ] && tree=$PWD/.old
            PYTHONPATH="$tree:/tmp/site" timeout 120 python3 benchmarks/bench_auto.py --device gpu --rotate \
                --sizes ${AUTO_GPU_SIZES:-64 256 1024 4096} --reps 3 --json "$OUT/auto_gpu_${t}_$r.json" 2>&1 \
                | grep -E "auto->" | sed "s/^/$t /" | cut -c1-200
        done
    done
    end=${AUTO_GPU_END:-570} # the job's last second (env), the grid's budget ending 30 s before it
    [ $((end - SECONDS)) -ge 60 ] || exit 0 # no time left for the grid
    PYTHONPATH="$PWD:/tmp/site" timeout $((end - SECONDS)) python3 benchmarks/bench_auto.py --device gpu --rotate \
        --reps 3 --budget-s $((end - 30 - SECONDS)) --json "$OUT/auto_gpu_grid.json" >"$OUT/auto_grid.log" 2>&1
    tail -n 26 "$OUT/auto_grid.log" | cut -c1-240
    ;;
native-small)
    # native's cuBLAS call path and auto's route memo on small calls (#16): the GPU tests that run
    # native's and auto's cuBLAS calls (240 s); the cupy program under the shim with the native A/A
    # control (300 s; before the trees are set up: the shim needs the installed package); then
    # bench_auto_small_gpu.py --parts small at each of NATIVE_SMALL_SIZES (env, default 64 128 256
    # 512), this tree against .old, alternating ROUNDS times (default 2; 0: none):
    # $OUT/shim_cupy.json, $OUT/small.tgz  (carry: .whl, .old)
    rounds=${1:-2}
    source "$here/_device_setup.sh"
    nvidia-smi -L
    timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu -n 16 -rf -k "native or auto or interpose" \
        tests/test_native_layouts.py tests/test_blas_parity.py tests/test_auto.py tests/test_interpose_gpu.py \
        >"$OUT/pytest_native.log" 2>&1
    echo "pytest exit status $? at ${SECONDS} s"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest_native.log" | head -20
    tail -1 "$OUT/pytest_native.log"
    timeout 300 python3 benchmarks/bench_shim_program.py --device gpu --runs 5 --warmup 1 --control \
        --json "$OUT/shim_cupy.json" 2>&1 | tee "$OUT/shim.log" | tail -8
    [ "$rounds" -gt 0 ] || exit 0
    pick_trees
    mkdir -p "$OUT/small"
    for r in $(seq "$rounds"); do
        for n in ${NATIVE_SMALL_SIZES:-64 128 256 512}; do
            for t in $trees; do
                tree=$PWD
                [ "$t" = old ] && tree=$PWD/.old
                PYTHONPATH="$tree:/tmp/site" timeout 60 python3 benchmarks/bench_auto_small_gpu.py --parts small \
                    --n "$n" --rounds 12 --json "$OUT/small/${t}_${n}_$r.json" 2>&1 | sed "s/^/$t /" | cut -c1-160
            done
        done
    done
    tar czf "$OUT/small.tgz" -C "$OUT" small && rm -rf "$OUT/small" # one file back, not one per run
    ;;
auto-small)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    auto_tests
    # shellcheck disable=SC2086  # AUTO_SMALL_PARTS is a list of words
    timeout 180 python3 benchmarks/bench_auto_small_gpu.py --parts ${AUTO_SMALL_PARTS:-small steps_us profiles order} \
        --rounds "${AUTO_SMALL_ROUNDS:-9}" --json "$OUT/auto_small_gpu.json" 2>&1 \
        | tee "$OUT/auto_small_gpu.log" | grep -v -E "^ +[0-9]" | cut -c1-400
    end=${AUTO_GPU_END:-570}
    timeout $((end - SECONDS)) python3 benchmarks/bench_auto.py --device gpu --rotate --gpu-pause 0.2 \
        --sizes 64 128 256 512 1024 2048 4096 8192 16384 --reps 3 --budget-s $((end - 20 - SECONDS)) \
        --json "$OUT/auto_gpu_pause.json" >"$OUT/auto_pause.log" 2>&1
    tail -n 34 "$OUT/auto_pause.log" | cut -c1-250
    ;;
next-check)
    rounds=${1:-2}
    source "$here/_device_setup.sh"
    nvidia-smi -L
    next_tests 300
    next_ab "$rounds" 540
    ;;
cpu-mixed)
    # the pool's cap beside OpenBLAS's spinning workers on a many-core processor (the
    # development host has 2 vCPUs): each tree with its own C extension
    rounds=${1:-3}
    [ -f .old/COMMIT ] || { echo "cpu-mixed: no .old/COMMIT (see ab above) or .old not carried"; exit 1; }
    source "$here/_device_setup.sh"
    python3 -m pip uninstall -y -q emublas >/dev/null 2>&1 # PYTHONPATH picks the tree
    (cd .old && python3 native/build.py >"$OUT/build_old.log" 2>&1) || { tail -20 "$OUT/build_old.log"; exit 1; }
    nproc; lscpu | grep -E "Model name"
    echo "new: $(git rev-parse --short HEAD 2>/dev/null || echo 'this tree'), old: $(cat .old/COMMIT)"
    PYTHONPATH="$PWD:/tmp/site" timeout 560 python3 benchmarks/bench_mixed_cpu.py --other .old --sizes 128 512 1024 \
        --reps 100 --rounds "$rounds" --json "$OUT/mixed_cpu.json"
    ;;
next-full)
    # branch next's whole check in one call: the GPU suite, the CPU kernels' paths on this
    # machine's processor (AVX-512 there), a GPU hunt, then the alternation against .old;
    # the outputs go back as one archive ($OUT/next_full.tgz), since the tool returns 8 files
    rounds=${1:-1}
    source "$here/_device_setup.sh"
    nvidia-smi -L
    lscpu | grep -o -E "avx512[a-z_]*|amx[a-z_]*" | sort -u | tr '\n' ' '; echo
    gpu_tests 280 a b c d
    timeout 90 python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/test_ozaki_kernels.py \
        tests/test_ozaki2_cpu_loop.py tests/test_i8gemm.py >"$OUT/pytest_cpu.log" 2>&1
    echo "CPU paths: exit status $? at ${SECONDS} s"; tail -1 "$OUT/pytest_cpu.log"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest_cpu.log" | head -10
    timeout 60 python3 benchmarks/bench_hunt.py --cases 100 --kinds gemm,syrk,herk --backends ozaki2 --device gpu \
        --json "$OUT/hunt_gpu.json" >"$OUT/hunt_gpu.log" 2>&1
    echo "GPU hunt: exit status $? at ${SECONDS} s"; tail -3 "$OUT/hunt_gpu.log"
    next_ab "$rounds" 400
    tar czf /tmp/next_full.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/next_full.tgz "$OUT/"
    ;;
peer)
    # #14's comparison in one call: emublas, GEMMul8 (hook mode) and cuBLAS at the targets' grid
    # (accurate, phi 0.5, 4096/8192/16384 and 8192 x 8192 x 2048) first, then phi 4 and fast mode
    # at 4096/8192 with what is left; one archive back ($OUT/peer.tgz)  (carry: .whl, .peers)
    commit=${1:?peer: give the commit measured}
    source "$here/_device_setup.sh"
    LIB="$PWD/.peers/gemmul8/libgemmul8.so"
    [ -f "$LIB" ] || { echo "no $LIB: copy ../shared/peers/gemmul8/libgemmul8.so there and carry .peers"; exit 1; }
    nvidia-smi -L
    for part in targets rest; do
        if [ $part = targets ]; then
            grid=(--shapes 4096,8192,16384,8192x8192x2048 --phis 0.5 --modes accurate --budget-s 250)
        else
            grid=(--shapes 4096,8192 --phis 4,0.5 --modes fast,accurate --budget-s $((530 - SECONDS)))
            [ $SECONDS -gt 420 ] && { echo "peer: no time left for the second grid"; break; }
        fi
        python3 benchmarks/bench_gemmul8.py --gemmul8-lib "$LIB" --commit "$commit" --moduli 14,15,16,17,18 \
            "${grid[@]}" --json "$OUT/gemmul8_$part.json" --tables "$OUT/gemmul8_$part.md" \
            --workdir "/tmp/work_$part" >"$OUT/bench_$part.log" 2>&1
        echo "== $part: exit status $? at ${SECONDS} s"
        grep -E "FAILED|Traceback|Error" "$OUT/bench_$part.log" | grep -v "^\[.*\] {" | head -5
        sed -n '/^=== tables/,$p' "$OUT/bench_$part.log" | cut -c1-220
    done
    tar czf /tmp/peer.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/peer.tgz "$OUT/"
    ;;
targets)
    # the other GPU targets of #14 and #16 in one call: the fixed cost at n = 256 (graphs on and
    # off), ZHERK against ZGEMM at 16384, ztrsm 16384 against cuBLAS, an unchanged cupy program
    # under the shim; one archive back ($OUT/targets.tgz)  (carry: .whl)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    python3 benchmarks/bench_ozaki2_gpu_phases.py --sizes 256 --dtypes d --moduli 16 --graphs auto off \
        --json "$OUT/phases_256.json" 2>&1 | tee "$OUT/phases_256.log" | grep -E "^\| "
    python3 benchmarks/bench_ozaki2_gpu_phases.py --sizes 16384 --ops zherk zgemm --moduli 16 --phi 0 \
        --json "$OUT/phases_zherk_16384.json" 2>&1 | tee "$OUT/phases_zherk.log" | grep -E "^\| "
    timeout $((450 - SECONDS)) python3 benchmarks/bench_trsm_gpu.py --sizes 16384 --dtypes z --reps 2 --columns 4 \
        --json "$OUT/trsm_16384.json" 2>&1 | tee "$OUT/trsm.log" | tail -8
    timeout $((570 - SECONDS)) python3 benchmarks/bench_shim_program.py --device gpu --runs 3 --warmup 1 --routes \
        --json "$OUT/shim_cupy.json" 2>&1 | tee "$OUT/shim.log" | tail -6
    tar czf /tmp/targets.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/targets.tgz "$OUT/"
    ;;
one-call)
    # where device time allows one call: the GPU suite (four parts side by side, 200 s), then
    # bench_gemmul8.py at #14's target grid (accurate, phi 0.5) with what is left; one archive back
    # ($OUT/one_call.tgz)  (carry: .whl, .peers)
    commit=${1:?one-call: give the commit measured}
    source "$here/_device_setup.sh"
    LIB="$PWD/.peers/gemmul8/libgemmul8.so"
    [ -f "$LIB" ] || { echo "no $LIB: copy ../shared/peers/gemmul8/libgemmul8.so there and carry .peers"; exit 1; }
    nvidia-smi -L
    gpu_tests 200 a b c d
    python3 benchmarks/bench_gemmul8.py --gemmul8-lib "$LIB" --commit "$commit" --moduli 14,15,16,17,18 \
        --shapes 4096,8192,16384 --phis 0.5 --modes accurate --budget-s $((540 - SECONDS)) \
        --json "$OUT/gemmul8.json" --tables "$OUT/gemmul8.md" --workdir /tmp/work >"$OUT/bench.log" 2>&1
    echo "== gemmul8: exit status $? at ${SECONDS} s"
    grep -E "FAILED|Traceback|Error" "$OUT/bench.log" | grep -v "^\[.*\] {" | head -5
    sed -n '/^=== tables/,$p' "$OUT/bench.log" | cut -c1-220
    tar czf /tmp/one_call.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/one_call.tgz "$OUT/"
    ;;
shim-calls)
    # #16's cupy program, call by call, natively and under the shim (bench_shim_calls_gpu.py)  (carry: .whl)
    source "$here/_device_setup.sh"
    nvidia-smi -L
    q="--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv"
    nvidia-smi $q
    timeout 540 python3 benchmarks/bench_shim_calls_gpu.py --rounds "${1:-2}" --plain "${2:-2}" --ops "${3:-0}" ${4:+--profile} ${PLAIN_MODES:+--plain-modes "$PLAIN_MODES"} --json "$OUT/shim_calls_gpu.json" >"$OUT/shim_calls_gpu.txt" 2>&1
    nvidia-smi $q | tail -1
    grep -v "^ *[0-9]" "$OUT/shim_calls_gpu.txt" | head -45; grep -A9 "^untimed runs" "$OUT/shim_calls_gpu.txt"; grep -A12 "^each library call" "$OUT/shim_calls_gpu.txt"; grep -A40 "^one run under" "$OUT/shim_calls_gpu.txt" | cut -c1-150
    ;;
min-dim)
    set -euo pipefail
    out=${1:-min-dim-out}
    python3 -m emublas sweep --ops gemm --dtypes d --sizes 32,64,128,256 --backends native,ozaki2 \
        --grid 'ozaki2:moduli=16' --families phi0.5 --reps 5 --no-plots --out "$out"
    ;;
*)
    echo "usage: bash benchmarks/device_run.sh {foundation|ozaki2|gemmul8|products|gpu-tests a|b|c|d|ab|next-check|next-full|peer|targets|one-call|shim-calls|min-dim} [ARGS...]" >&2
    exit 2
    ;;
esac
