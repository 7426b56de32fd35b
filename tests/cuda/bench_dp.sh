#!/usr/bin/env bash
# bench_dp.sh — scaling of `auxtrunk-host train --gpus N` (a benchmark, not a
# test): production topology, cuda-v2, for each global batch the plain
# one-GPU run and --gpus N for each N, RUNS runs of STEPS steps each; prints
# a Markdown table of the median step time, the speedup over one GPU at the
# same global batch and the efficiency (speedup / N), and whether each run's
# checkpoint is byte-identical to the one-GPU run's.
#
#   tests/cuda/bench_dp.sh BUILD_DIR [OUT_DIR]
# Environment: STEPS (default 5000), RUNS (default 3), BATCHES (default
# "512 2048 8192"), GPUS (default: 1 and every power of two up to the
# devices present), PLUGIN (default cuda-v2), EXTRA (more train options,
# e.g. --no-graph).
set -u -o pipefail
build=${1:?usage: bench_dp.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/logs}
mkdir -p "$out" || exit 2
steps=${STEPS:-5000}
runs=${RUNS:-3}
plugin=${PLUGIN:-cuda-v2}
host=$build/host_stub/auxtrunk-host
devices=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ -z "${GPUS:-}" ]; then
    GPUS=1
    for n in 2 4 8 16; do [ "$n" -le "$devices" ] && GPUS="$GPUS $n"; done
fi
# median_us LOG...: the median of the runs' microseconds per step.
median_us() {
    for log in "$@"; do
        grep -E '^summary: [0-9]+ steps \(' "$log" | sed -E 's/.* ([0-9.]+) steps\/s$/\1/' |
            awk '{ printf "%.1f\n", 1e6 / $1 }'
    done | sort -n | sed -n "$((($# + 1) / 2))p"
}
rows=()
for batch in ${BATCHES:-512 2048 8192}; do
    base=""
    for n in plain $GPUS; do
        logs=()
        for r in $(seq "$runs"); do
            log=$out/dp-$batch-$n-$r.log
            ck=$out/dp-$batch-$n.ck
            gpus=()
            [ "$n" != plain ] && gpus=(--gpus "$n")
            "$host" train --plugin-dir "$build/plugins/$plugin" --batch "$batch" \
                --steps "$steps" --quiet --checkpoint "$ck" --overwrite "${gpus[@]}" ${EXTRA:-} \
                > "$log" 2>&1 || { echo "FAILED: batch $batch, $n (see $log)"; cat "$log"; exit 1; }
            logs+=("$log")
        done
        us=$(median_us "${logs[@]}")
        if [ "$n" = plain ]; then
            base=$us
            rows+=("| $batch | 1 (plain) | $us | 1.00 | 1.00 | reference |")
            continue
        fi
        same="differs"
        cmp -s "$out/dp-$batch-plain.ck" "$out/dp-$batch-$n.ck" && same="identical"
        exact=$(grep -o 'NOT bit-identical\|bit-identical to one GPU on the full batch' "${logs[0]}" |
            head -1)
        rows+=("$(awk -v b="$batch" -v n="$n" -v us="$us" -v base="$base" -v s="$same" -v e="$exact" \
            'BEGIN { sp = base / us; printf "| %s | %s | %s | %.2f | %.2f | %s (%s) |", b, n, us, sp, sp / n, s, e }')")
    done
done
echo
echo "$plugin, $steps steps, median of $runs runs; speedup and efficiency against one GPU at the same global batch"
echo
echo "| global batch | GPUs | us/step | speedup | efficiency | checkpoint vs 1 GPU |"
echo "|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
