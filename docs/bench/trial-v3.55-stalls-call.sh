#!/bin/bash
# trial-v3.55-stalls-call.sh — where the mid path's warps wait (3.55.0 at
# B = 1,024: ncu's stall reasons per issued instruction, and its per-SASS
# stall samples), and its test_cuda_v3 (quick) under memcheck and racecheck.
# Builds into build-gpu unless a call before it on the same machine did
# (tests/cuda/run_on_gpu.sh); carry .carry/check. About 250 s of device time.
set -u
R=$(mktemp -d)
B=build-gpu
nvidia-smi -L
t0=$(date +%s)
el() { echo "t=$(( $(date +%s)-t0 ))"; tar czf $OUT/res.tgz -C $R .; }
if [ ! -x $B/plugins/cuda-v3/libauxtrunk.so ] || [ ! -x $B/tests/cuda/test_cuda_v3 ]; then
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.carry/check > $R/cfg.txt 2>&1
  cmake --build $B -j 16 --target auxtrunk-host auxtrunk_plugin_cuda-v3 test_cuda_v3 > $R/build.txt 2>&1
  echo "build rc=$?"
fi
H=$B/host_stub/auxtrunk-host
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
RUN=($H bench --plugin-dir $B/plugins/cuda-v3 --batches 1024 --iters 4 --warmup 2 --min-iters 1 --quiet)
SEL=(--clock-control none -k regex:mid_ --launch-skip 6 --launch-count 2)
SEC=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy)
# the stall reasons as metrics; without them if this ncu refuses the regex
timeout 90 $NCU "${SEL[@]}" "${SEC[@]}" \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' "${RUN[@]}" \
  > $R/ncu-stalls.txt 2>&1 || timeout 90 $NCU "${SEL[@]}" "${SEC[@]}" "${RUN[@]}" > $R/ncu-stalls.txt 2>&1
grep -E "mid_|Duration|Issue Slots|No Eligible|Active Warps|Eligible Warps|Warp Cycles Per Issued|stalled" $R/ncu-stalls.txt | head -60
el
timeout 120 $NCU "${SEL[@]}" --section SourceCounters --export $R/mid-1024 "${RUN[@]}" \
  > $R/ncu-source.txt 2>&1
[ -f $R/mid-1024.ncu-rep ] && timeout 60 $NCU --import $R/mid-1024.ncu-rep --page source --csv \
  --print-source sass > $R/ncu-sass.csv 2>&1
grep -E "Warp Stall|stall|Sampling" $R/ncu-source.txt | head -20; wc -c $R/ncu-sass.csv
el
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
T=$B/tests/cuda/test_cuda_v3
for tool in memcheck racecheck; do
  CK_FORK=no AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=exact timeout 150 $CS --tool $tool --error-exitcode 86 $T gpu > $R/san-$tool.txt 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks" $R/san-$tool.txt | tail -2
  el
done
