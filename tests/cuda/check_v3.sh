#!/usr/bin/env bash
# check_v3.sh — on a machine with an H200 (sm_90): the checks and
# measurements of cuda-v3's fused path in one command, for
# docs/perf-notes-v3.md. Builds only the targets it needs, then runs:
#   test_cuda_v3 gpu (quick mode): bit identity, conformance of the adapter;
#   auxtrunk-trace-v3: the per-phase trace at B = 32, 128, 256, 512;
#   the bench: cuda-v2, cuda-v3 and cuBLAS side by side (cuda-v3 runs its
#   fused kernels up to V3_FUSED_MAX_BATCH (V3_FUSED_TM1_MAX_BATCH where one
#   row a thread fits), cuda-v2's above; the trace runs
#   the fused kernels at every batch it is given);
#   compute-sanitizer racecheck of the fused kernels at every TM and both
#   tree shapes (auxtrunk-trace-v3 --once), run to the end.
# Everything goes to one log, $OUT/check_v3.log (default build-gpu/), plus
# $OUT/bench.csv; the last lines are a summary. Exit status 0 only if every
# step passed. Each step has its own time limit; together they fit in four
# minutes on a 16-core host with a cold build.
#
#   tests/cuda/check_v3.sh        (AUXTRUNK_GPU_BUILD: build folder, default build-gpu)
#
# Check may come from .carry/check (used when it exists), as in run_on_gpu.sh.
set -u -o pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
build=${AUXTRUNK_GPU_BUILD:-$root/build-gpu}
out=${OUT:-$build}
mkdir -p "$out" || exit 2
log=$out/check_v3.log
export AUXTRUNK_SEED=${AUXTRUNK_SEED:-$(date +%s)}
summary=()
failed=0

# step NAME LIMIT_S CMD...: CMD's output goes to the log and the terminal.
step() {
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    echo "=== $name: $*" | tee -a "$log"
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    [ "$rc" != 0 ] && failed=1
    summary+=("$(printf '%-16s exit %-4s %4ds' "$name" "$rc" $((SECONDS - t0)))")
}

: > "$log"
{
    date -u '+%Y-%m-%d %H:%M:%S UTC'
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    echo "seed $AUXTRUNK_SEED"
} 2>&1 | tee -a "$log"
prefix=()
[ -d "$root/.carry/check" ] && prefix=(-DCMAKE_PREFIX_PATH="$root/.carry/check")
step configure 60 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DAUXTRUNK_SANITIZER_TESTS=OFF "${prefix[@]}"
step build 150 cmake --build "$build" -j"$(nproc)" --target test_cuda_v3 auxtrunk-host \
    auxtrunk_plugin_cpu auxtrunk_plugin_cuda-v2 auxtrunk_plugin_cuda-v3 auxtrunk-trace-v3
# The cuBLAS column's module exists only where the toolkit has cuBLAS.
cmake --build "$build" -j"$(nproc)" --target auxtrunk_bench_cublas >> "$log" 2>&1 ||
    echo "(no cuBLAS module: the bench has no cuBLAS column)" | tee -a "$log"
if [ "$failed" = 0 ]; then
    trace=$build/tests/cuda/trace_v3/auxtrunk-trace-v3
    step test_cuda_v3 90 env AUXTRUNK_CUDA_TEST_QUICK=1 "$build/tests/cuda/test_cuda_v3" gpu
    step trace 45 "$trace" --batches 32,128,256,512
    step bench 60 "$build/host_stub/auxtrunk-host" bench --plugin-dir "$build/plugins/cuda-v2" \
        --plugin-dir "$build/plugins/cuda-v3" --cublas --batches 32,128,256,512 --budget 0.12 \
        --quiet --csv "$out/bench.csv"
    san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    step racecheck 150 "$san" --tool racecheck --racecheck-report all --error-exitcode 86 \
        --print-limit 50 "$trace" --once --batches 1,17,32,100,128,200,256,300,512,513,1000,1024
fi
echo "=== summary (seed $AUXTRUNK_SEED, log $log)" | tee -a "$log"
printf '%s\n' "${summary[@]}" | tee -a "$log"
exit "$failed"
