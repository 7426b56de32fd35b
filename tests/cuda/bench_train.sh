#!/usr/bin/env bash
# bench_train.sh — throughput of `auxtrunk-host train` on CUDA plugins (a
# benchmark, not a test): production topology, batch 256, each plugin in
# graph and eager (--no-graph) mode, RUNS runs of STEPS steps each; prints a
# Markdown table of the median steps/s and the timing breakdown of the
# median run (the summary lines of auxtrunk-host).
#
#   tests/cuda/bench_train.sh BUILD_DIR [OUT_DIR]
# Environment: STEPS (default 20000), RUNS (default 3), BATCH (default 256),
# PLUGINS (default "cuda-v2 cuda-v1").
set -u -o pipefail
build=${1:?usage: bench_train.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/logs}
mkdir -p "$out" || exit 2
steps=${STEPS:-20000}
runs=${RUNS:-3}
batch=${BATCH:-256}
host=$build/host_stub/auxtrunk-host
rows=()
for p in ${PLUGINS:-cuda-v2 cuda-v1}; do
    for mode in graph eager; do
        flag=()
        [ "$mode" = eager ] && flag=(--no-graph)
        rates=()
        for r in $(seq "$runs"); do
            log=$out/train-$p-$mode-$r.log
            "$host" train --plugin-dir "$build/plugins/$p" --batch "$batch" --steps "$steps" \
                --quiet "${flag[@]}" > "$log" 2>&1 || { echo "FAILED: $p $mode (see $log)"; cat "$log"; exit 1; }
            rate=$(grep -E '^summary: [0-9]+ steps \(' "$log" | sed -E 's/.* ([0-9.]+) steps\/s$/\1/')
            rates+=("$rate $log")
        done
        median=$(printf '%s\n' "${rates[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
        rate=${median%% *}
        mlog=${median#* }
        us=$(awk -v r="$rate" 'BEGIN { printf "%.1f", 1e6 / r }')
        rows+=("| $p | $mode | $rate | $us | $(tr '\n' ' ' < <(printf '%s ' "${rates[@]%% *}")) |")
        echo "=== $p $mode (median run: $mlog)"
        grep '^summary:' "$mlog"
    done
done
echo
echo "| plugin | mode | steps/s (median of $runs) | us/step | runs |"
echo "|---|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"
