#!/usr/bin/env bash
# run_on_gpu.sh — build the CUDA v1 plugin and its tests on a machine with a
# CUDA GPU, run them with ctest, then run the GPU test binary under
# compute-sanitizer memcheck and racecheck (quick mode). Logs go to $OUT (or
# build-gpu/logs); the last lines printed are a summary. Exit status 0 only if
# every step passed.
#
#   tests/cuda/run_on_gpu.sh            from anywhere inside a copy of the repo
#
# Check (the test library) may come from the system or from a carried prefix:
# .carry/check/{include,lib} is used automatically when it exists.
# Environment: OUT (log folder), AUXTRUNK_SEED (inputs; default: the clock),
# AUXTRUNK_GPU_BUILD (build folder, default build-gpu),
# AUXTRUNK_GPU_EXTRA=1 (also synccheck and initcheck),
# AUXTRUNK_GPU_DEADLINE (seconds for everything, default 540).
# Expected: about 1 min build, 1 min ctest, 1-2 min per sanitizer.
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
targets=(auxtrunk_plugin_cuda-v1 test_cuda_scan test_cuda_v1 auxtrunk_cuda_v1_ptx
         auxtrunk_cuda_atomic_fixture_ptx)
cmake --build "$build" --target help 2>/dev/null | grep -q 'auxtrunk_plugin_cpu' &&
    targets+=(auxtrunk_plugin_cpu) # the CPU plugin the GPU tests compare with
step build "$out/build.log" 240 \
    cmake --build "$build" -j "$jobs" --target "${targets[@]}" || finish
[ -x "$cuobjdump" ] &&
    "$cuobjdump" --dump-resource-usage "$build/plugins/cuda-v1/libauxtrunk.so" \
        > "$out/resource-usage.txt" 2>&1

# --- Tests ----------------------------------------------------------------------
step ctest "$out/ctest.log" 300 \
    ctest --test-dir "$build" -R '^(cuda_(v1|scan)_|symbols_cuda-v1$)' --output-on-failure -V \
        --timeout 280
# ctest counts a skip as a pass; here the GPU cases must really have run.
if ! grep -qE 'cuda_v1_gpu \.+ +Passed' "$out/ctest.log"; then
    summary+=("$(printf '%-16s %-22s' gpu-cases "DID NOT RUN OR FAILED")")
    failed=1
fi

# --- Sanitizers (quick mode, one process: CK_FORK=no) -----------------------------
bin=$build/tests/cuda/test_cuda_v1
san=(env CK_FORK=no AUXTRUNK_CUDA_TEST_QUICK=1 "$sanitizer" --error-exitcode 86 --print-limit 100)
if [ -x "$sanitizer" ]; then
    step memcheck "$out/memcheck.log" 150 "${san[@]}" --tool memcheck --leak-check full "$bin" gpu
    step racecheck "$out/racecheck.log" 150 "${san[@]}" --tool racecheck --racecheck-report all "$bin" gpu
    if [ "${AUXTRUNK_GPU_EXTRA:-0}" = 1 ]; then
        step synccheck "$out/synccheck.log" 120 "${san[@]}" --tool synccheck "$bin" gpu
        step initcheck "$out/initcheck.log" 120 "${san[@]}" --tool initcheck "$bin" gpu
    fi
else
    echo "compute-sanitizer not found" | tee "$out/sanitizer.log"
    summary+=("sanitizers       MISSING (no compute-sanitizer)")
    failed=1
fi
finish
