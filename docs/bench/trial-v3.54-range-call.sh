#!/bin/bash
# trial-v3.54-range-call.sh — the device call after the first 3.54 run
# (docs/perf-notes-v3.md, "3.54.3 over its range, and 3.53: prediction"):
# where the 3.54.3 shape of the mid path beats main's kernels (a fine
# batch grid, two orders), its bits, conformance and sanitizers, and the
# item-loop trial 3.53.0/3.53.1 beside main at B = 1-240. Prepared as
# trial-v3.54-mid-call.sh says, plus .carry/bin/i53a and i53b: main with
# bench/trial-v3.53-item-loop.diff applied (RUN = 16 and RUN = 8).
# About 400 s of device time; SLIM=1 cuts it to about 200 (shorter bench
# budgets, 3.53 in one order, no conformance, the 3.53 bits left out).
# Results are saved after each phase, so a call cut short still returns them.
set -u
SLIM=${SLIM:-0}
R=$(mktemp -d)
nvidia-smi -L
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
mkdir -p build && cp -r .carry/b/* build/
H=build/host_stub/auxtrunk-host
T=build/tests/cuda/test_cuda_v3
M=.carry/bin/main/libauxtrunk.so; M3=.carry/bin/mid3/libauxtrunk.so
I53A=.carry/bin/i53a/libauxtrunk.so; I53B=.carry/bin/i53b/libauxtrunk.so
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
if [ "$SLIM" = 1 ]; then BUDGET=0.3 TB=40 TT=150; else BUDGET=0.5 TB=120 TT=200; fi
t0=$(date +%s)
el() { echo "t=$(( $(date +%s)-t0 ))"; tar czf $OUT/res.tgz -C $R .; }
# bench NAME BATCHES PLUGIN...: one table, its graph-step part printed
bench() {
  local name=$1 b=$2; shift 2
  local args=(); for p in "$@"; do args+=(--plugin-dir "$p"); done
  timeout $TB $H bench "${args[@]}" --batches $b --budget $BUDGET --quiet --csv $R/$name.csv > $R/$name.txt 2>&1
  sed -n '/^graph step/,$p' $R/$name.txt
}
# test CASE: test_cuda_v3's case (quick) on the plugin in build/plugins/cuda-v3
test_case() {
  AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=$1 timeout $TT $T gpu > $R/test-$1.txt 2>&1
  echo "$1 rc=$?" >> $R/rc.txt
}
B=256,272,288,320,352,384,448,512,640,768,896,1024,1152,1280,1408,1536,1792,2047
bench range1 $B $M $M3
bench range2 $B $M3 $M
el
S=1,32,64,128,192,240
bench i53-1 $S $M $I53A $I53B
[ "$SLIM" = 1 ] || bench i53-2 $S $I53B $I53A $M
el
cp $M3 build/plugins/cuda-v3/libauxtrunk.so
if [ "$SLIM" = 1 ]; then (test_case exact) & else (for c in exact graph fast; do test_case $c; done) & fi
pt=$!
if [ "$SLIM" != 1 ]; then
  timeout 200 build/tests/conform/auxtrunk-conform $M3 > $R/conform.txt 2>&1; echo "conform rc=$?"; tail -4 $R/conform.txt
fi
for tool in memcheck racecheck synccheck; do
  timeout 60 $CS --tool $tool --error-exitcode 9 $H bench --plugin-dir $M3 --batches 300,1030 --iters 2 --warmup 1 --min-iters 1 --rotate-mib 0 --quiet > $R/san-$tool.txt 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/san-$tool.txt | tail -1
done
el
wait $pt
if [ "$SLIM" = 1 ]; then TT=60; test_case graph; el; test_case fast; fi
cat $R/rc.txt
for f in $R/test-*.txt; do echo "$f"; grep -E "%|rror|differ" "$f" | tail -3; done
el
if [ "$SLIM" != 1 ] && [ $(( $(date +%s)-t0 )) -lt 330 ]; then
  cp $I53A build/plugins/cuda-v3/libauxtrunk.so
  AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=exact timeout 200 $T gpu > $R/test53-exact.txt 2>&1; echo "i53a exact rc=$?"; grep -E "%|rror|differ" $R/test53-exact.txt | tail -3
  el
fi
