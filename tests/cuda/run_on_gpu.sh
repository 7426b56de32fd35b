#!/usr/bin/env bash
# run_on_gpu.sh — on a machine with a CUDA GPU: build everything, run the
# whole ctest suite (GPU cases of cuda-v1, cuda-v2 and cuda-v3 included, and
# the conformance runner against every plugin), run each CUDA plugin's GPU
# test binary under compute-sanitizer memcheck and racecheck (quick mode),
# print the hardware floors (auxtrunk-floors, docs/floors-h200.md;
# AUXTRUNK_GPU_FLOORS=0 skips it), then the benchmark (cuda-v2, cuda-v3,
# cuBLAS side by side; AUXTRUNK_GPU_BENCH=0 skips it). Logs go to $OUT (or
# build-gpu/logs); the last lines printed are a summary. Exit status 0 only if
# every step passed.
#
#   tests/cuda/run_on_gpu.sh            from anywhere inside a copy of the repo
#
# Check (the test library) may come from the system or from a carried prefix:
# .carry/check/{include,lib} is used automatically when it exists. Debian's
# static libcheck_pic.a calls into libsubunit: carry libsubunit.a in lib/ too,
# or the test programs fail to link.
# Environment: OUT (log folder), AUXTRUNK_SEED (inputs; default: the clock),
# AUXTRUNK_GPU_BUILD (build folder, default build-gpu),
# AUXTRUNK_GPU_EXTRA=1 (also synccheck and initcheck), AUXTRUNK_GPU_SANITIZE
# (the plugins to run the sanitizers on, default "v1 v2 v3"),
# AUXTRUNK_GPU_RACECHECK_CASES (the test cases racecheck runs, default every
# case the binary lists: "exact graph fast" for cuda-v2),
# AUXTRUNK_GPU_BATCHES, AUXTRUNK_GPU_BUDGET (the bench's --batches and --budget),
# AUXTRUNK_GPU_SANITIZE_HOST=0 (skip the sanitizers on the host's own kernels),
# AUXTRUNK_GPU_TRAIN_BENCH=0 (skip the training throughput table,
# tests/cuda/bench_train.sh), AUXTRUNK_GPU_TARGETS (build only these targets),
# AUXTRUNK_GPU_CTEST=0 (skip the ctest step),
# AUXTRUNK_GPU_CTEST_REGEX (run only the tests matching it),
# AUXTRUNK_GPU_CTEST_EXCLUDE (leave out the tests matching it; default
# '^sanitize_', the CPU job's clang builds),
# AUXTRUNK_GPU_DEADLINE (seconds for everything, default 540).
# Each plugin's GPU test runs as one ctest per test case (cuda_v3_gpu_exact,
# cuda_v3_gpu_graph, cuda_v3_gpu_fast, …), side by side. Measured on one
# H100 (2026-12-06, the cases run by hand side by side): about 25 s build;
# cuda-v3's exact case about 4 min, its graph and fast cases together
# about 1.5 min, cuda-v2's whole test about 3 min, then the conformance
# runs, which run alone, about 1.5 min; memcheck and each racecheck case up
# to their 150 s. So the whole script does not fit one 10-minute device
# call: run it in two, e.g. AUXTRUNK_GPU_SANITIZE= AUXTRUNK_GPU_BENCH=0
# AUXTRUNK_GPU_TRAIN_BENCH=0 AUXTRUNK_GPU_FLOORS=0 in one and
# AUXTRUNK_GPU_CTEST=0 (no ctest) in the other.
set -u -o pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
build=${AUXTRUNK_GPU_BUILD:-$root/build-gpu}
out=${OUT:-$build/logs}
mkdir -p "$out" || exit 2
export AUXTRUNK_SEED=${AUXTRUNK_SEED:-$(date +%s)}
jobs=$(nproc 2>/dev/null || echo 8)
summary=()
failed=0

# Every step also stops at the overall deadline, so the script as a whole
# stays inside one device-machine command (10 min) and its logs come back.
deadline=${AUXTRUNK_GPU_DEADLINE:-540}

# step NAME LOG TIMEOUT_S CMD...: runs CMD with output to the terminal and LOG.
step() {
    local name=$1 log=$2 limit=$3
    shift 3
    local t0=$SECONDS rc left=$((deadline - SECONDS))
    if [ "$left" -lt 15 ]; then
        summary+=("$(printf '%-16s %-22s' "$name" "NOT RUN (deadline)")")
        failed=1
        return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "=== $name: $*" | tee "$log"
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    local verdict="ok"
    case $rc in
    0) ;;
    124) verdict="TIMED OUT after ${limit}s" ;;
    77) verdict="SKIPPED (no device)" ;;
    *) verdict="FAILED (exit $rc)" ;;
    esac
    [ "$rc" != 0 ] && failed=1
    summary+=("$(printf '%-16s %-22s %4ds  %s' "$name" "$verdict" $((SECONDS - t0)) "$log")")
    return "$rc"
}

finish() {
    echo
    echo "=== summary (seed $AUXTRUNK_SEED, logs in $out)"
    printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
    exit "$failed"
}

# --- The machine ----------------------------------------------------------------
{
    date -u '+%Y-%m-%d %H:%M:%S UTC'
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    command -v nvcc >/dev/null && nvcc --version | tail -2
    cmake --version | head -1
} | tee "$out/machine.txt"

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)

# --- Build ----------------------------------------------------------------------
prefix=()
[ -d "$root/.carry/check/include" ] && prefix=(-DCMAKE_PREFIX_PATH="$root/.carry/check")
step configure "$out/configure.log" 120 \
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" || finish
targets=()
for t in ${AUXTRUNK_GPU_TARGETS:-}; do targets+=(--target "$t"); done
step build "$out/build.log" 300 cmake --build "$build" -j "$jobs" "${targets[@]}" || finish
for v in cuda-v1 cuda-v2 cuda-v3; do
    [ -x "$cuobjdump" ] &&
        "$cuobjdump" --dump-resource-usage "$build/plugins/$v/libauxtrunk.so" \
            > "$out/resource-usage-$v.txt" 2>&1
done

# --- Tests: the whole suite, GPU cases included ------------------------------------
# (but the clang sanitizer builds, sanitize_*, which are the CPU job's: a GPU
# machine need not have clang; AUXTRUNK_GPU_CTEST_EXCLUDE replaces that rule)
if [ "${AUXTRUNK_GPU_CTEST:-1}" = 1 ]; then
    ctest_only=(-E "${AUXTRUNK_GPU_CTEST_EXCLUDE:-^sanitize_}")
    [ -n "${AUXTRUNK_GPU_CTEST_REGEX:-}" ] && ctest_only+=(-R "$AUXTRUNK_GPU_CTEST_REGEX")
    step ctest "$out/ctest.log" 420 \
        ctest --test-dir "$build" -j 6 --output-on-failure --timeout 400 "${ctest_only[@]}"
    # ctest counts a skip as a pass; here the GPU cases must really have run
    # (host_dist_gpu2 and host_dist_gpu2_swap need 2 GPUs and are not required here).
    gpu_cases="cuda_v1_gpu_exact cuda_v1_gpu_graph cuda_v2_gpu_exact cuda_v2_gpu_graph cuda_v2_gpu_fast
    cuda_v3_gpu_exact cuda_v3_gpu_graph cuda_v3_gpu_fast host_step_gpu host_step_kernels host_dist_gpu1
    host_dist_gpu1_swap"
    [ -n "${AUXTRUNK_GPU_CTEST_REGEX:-}" ] &&
        gpu_cases=$(printf '%s\n' $gpu_cases | grep -E "$AUXTRUNK_GPU_CTEST_REGEX")
    [ -n "${AUXTRUNK_GPU_CTEST_EXCLUDE:-}" ] &&
        gpu_cases=$(printf '%s\n' $gpu_cases | grep -vE "$AUXTRUNK_GPU_CTEST_EXCLUDE")
    for v in $gpu_cases; do
        if ! grep -qE "${v} \.+ +Passed" "$out/ctest.log"; then
            summary+=("$(printf '%-16s %-22s' "$v" "DID NOT RUN OR FAILED")")
            failed=1
        fi
    done
    # Every test's own output (sizes, seeds, the GPU cases' figures), for the record.
    cp "$build/Testing/Temporary/LastTest.log" "$out/ctest-output.log" 2>/dev/null || true
fi

# --- Sanitizers (quick mode, one process: CK_FORK=no) -----------------------------
san=(env CK_FORK=no AUXTRUNK_CUDA_TEST_QUICK=1 "$sanitizer" --error-exitcode 86 --print-limit 100)
if [ -x "$sanitizer" ]; then
    for v in ${AUXTRUNK_GPU_SANITIZE-v1 v2 v3}; do
        bin=$build/tests/cuda/test_cuda_$v
        step "memcheck-$v" "$out/memcheck-$v.log" 150 "${san[@]}" --tool memcheck --leak-check full "$bin" gpu
        # racecheck is the slowest tool: one run per test case ("$bin" cases).
        for c in ${AUXTRUNK_GPU_RACECHECK_CASES:-$("$bin" cases)}; do
            step "racecheck-$v-$c" "$out/racecheck-$v-$c.log" 150 env CK_RUN_CASE="$c" \
                "${san[@]}" --tool racecheck --racecheck-report all "$bin" gpu
        done
        if [ "${AUXTRUNK_GPU_EXTRA:-0}" = 1 ]; then
            step "synccheck-$v" "$out/synccheck-$v.log" 120 "${san[@]}" --tool synccheck "$bin" gpu
            step "initcheck-$v" "$out/initcheck-$v.log" 120 "${san[@]}" --tool initcheck "$bin" gpu
        fi
    done
    # The host's own kernels (host_stub/step_cuda.cu) against the host path.
    host_bin=$build/tests/host/test_step
    if [ "${AUXTRUNK_GPU_SANITIZE_HOST:-1}" = 1 ] && [ -x "$host_bin" ]; then
        for tool in memcheck racecheck; do
            extra=()
            [ $tool = memcheck ] && extra=(--leak-check full)
            [ $tool = racecheck ] && extra=(--racecheck-report all)
            step "$tool-host" "$out/$tool-host.log" 150 env CK_RUN_CASE=kernels \
                "${san[@]}" --tool $tool "${extra[@]}" "$host_bin"
        done
    fi
else
    echo "compute-sanitizer not found" | tee "$out/sanitizer.log"
    summary+=("sanitizers       MISSING (no compute-sanitizer)")
    failed=1
fi

# --- Hardware floors ---------------------------------------------------------------
if [ "${AUXTRUNK_GPU_FLOORS:-1}" = 1 ]; then
    step floors "$out/floors.md" 120 "$build/tests/cuda/floors/auxtrunk-floors" all
fi

# --- Benchmark: cuda-v2, cuda-v3 and the cuBLAS equivalent, side by side -------------
if [ "${AUXTRUNK_GPU_BENCH:-1}" = 1 ]; then
    step bench "$out/bench.log" 300 "$build/host_stub/auxtrunk-host" bench \
        --plugin-dir "$build/plugins/cuda-v2" --plugin-dir "$build/plugins/cuda-v3" --cublas \
        --batches "${AUXTRUNK_GPU_BATCHES:-32,128,256,1024,4096,16384,65536}" \
        --budget "${AUXTRUNK_GPU_BUDGET:-1}" --csv "$out/bench.csv" --svg "$out/bench.svg"
fi
# --- Training throughput: auxtrunk-host train, batch 256, graph and eager ----------
if [ "${AUXTRUNK_GPU_TRAIN_BENCH:-1}" = 1 ]; then
    step train-bench "$out/train-bench.log" 240 "$root/tests/cuda/bench_train.sh" "$build" "$out"
fi
finish
