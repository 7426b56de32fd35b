#!/bin/bash
# trial-v3.56-call.sh — the mid path's next shape (bench/trial-v3.56-mid-shape.diff:
# blocks of 256 threads, a thread 1 x 4 outputs of a 32 x 32 layer or hidden
# tile and 4 x 2 of a 64 x 32 weight tile; h1/h2 for ELU' read before the
# reduction; the chunk tree in registers; the path up to B = 1,792) beside
# main (3.55.0) in both orders, its bits (test_cuda_v3's exact case, quick,
# which holds exact_mid_batches' sweep at 1,026-1,792, then graph and fast),
# ncu's stall reasons at B = 1,024, memcheck and racecheck
# (docs/perf-notes-v3.md, "3.56: prediction").
# Carry .carry: check/ (tests/cuda/run_on_gpu.sh says how), b/ (main's build:
# host_stub/auxtrunk-host, host_stub/libauxtrunk_bench_cublas.so,
# plugins/{cpu,cuda-v2,cuda-v3}/libauxtrunk.so, tests/cuda/test_cuda_v3),
# bin/main (main's cuda-v3), bin/v356 (main with the diff applied) and
# bin/w96 (3.55.1: main with bench/trial-v3.55.1-v2-wave.diff, cuda-v2's
# 64 x 64 tiles from 96 blocks instead of 128, benched beside them). About
# 600 s of device time (racecheck last, cut off first where time is short:
# run it again alone then); results saved after each phase.
set -u
R=$(mktemp -d)
nvidia-smi -L
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
mkdir -p build && cp -r .carry/b/* build/
H=build/host_stub/auxtrunk-host
T=build/tests/cuda/test_cuda_v3
M=.carry/bin/main/libauxtrunk.so; V=.carry/bin/v356/libauxtrunk.so; W=.carry/bin/w96/libauxtrunk.so
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t0=$(date +%s)
el() { echo "t=$(( $(date +%s)-t0 ))"; tar czf $OUT/res.tgz -C $R .; }
bench() {
  local name=$1 b=$2; shift 2
  local args=(); for p in "$@"; do args+=(--plugin-dir "$p"); done
  timeout 150 $H bench "${args[@]}" --batches $b --budget 0.5 --quiet --csv $R/$name.csv > $R/$name.txt 2>&1
  sed -n '/^graph step/,$p' $R/$name.txt
}
B=257,384,512,768,1024,1280,1408,1536,1792,1984
bench order1 $B $M $V $W
bench order2 $B $W $V $M
el
cp $V build/plugins/cuda-v3/libauxtrunk.so
for c in exact graph fast; do
  AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=$c timeout 200 $T gpu > $R/test-$c.txt 2>&1
  echo "$c rc=$?"; grep -E "1792|%|rror|differ" $R/test-$c.txt | tail -6
done
el
timeout 90 $NCU --clock-control none -k regex:mid_ --launch-skip 6 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  $H bench --plugin-dir $V --batches 1024 --iters 4 --warmup 2 --min-iters 1 --quiet > $R/ncu-stalls.txt 2>&1
grep -E "mid_|Duration|No Eligible|Active Warps Per|Warp Cycles Per Issued|short_scoreboard|long_scoreboard|barrier_per" $R/ncu-stalls.txt | head -24
el
for tool in memcheck racecheck; do
  CK_FORK=no AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=exact timeout 150 $CS --tool $tool --error-exitcode 86 $T gpu > $R/san-$tool.txt 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks" $R/san-$tool.txt | tail -2
  el
done
