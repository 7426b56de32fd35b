#!/bin/bash
# trial-v3.54-range-call.sh — the device call after the first 3.54 run
# (docs/perf-notes-v3.md, "3.54.3 over its range, and 3.53: prediction"):
# where the 3.54.3 shape of the mid path beats main's kernels (a fine
# batch grid, two orders), its bits, conformance and sanitizers, and the
# item-loop trial 3.53.0/3.53.1 beside main at B = 1-240. Prepared as
# trial-v3.54-mid-call.sh says, plus .carry/bin/i53a and i53b: main with
# bench/trial-v3.53-item-loop.diff applied (RUN = 16 and RUN = 8).
set -u
R=/tmp/o; mkdir -p $R
nvidia-smi -L
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
mkdir -p build && cp -r .carry/b/* build/
H=build/host_stub/auxtrunk-host
T=build/tests/cuda/test_cuda_v3
M=.carry/bin/main/libauxtrunk.so; M3=.carry/bin/mid3/libauxtrunk.so
t0=$(date +%s)
el() { echo "t=$(( $(date +%s)-t0 ))"; tar czf $OUT/res.tgz -C $R .; } # results so far come back even if the call is cut
B=256,272,288,320,352,384,448,512,640,768,896,1024,1152,1280,1408,1536,1792,2047
timeout 120 $H bench --plugin-dir $M --plugin-dir $M3 --batches $B --budget 0.5 --quiet --csv $R/range1.csv > $R/range1.txt 2>&1; sed -n '/^graph step/,$p' $R/range1.txt
timeout 120 $H bench --plugin-dir $M3 --plugin-dir $M --batches $B --budget 0.5 --quiet --csv $R/range2.csv > $R/range2.txt 2>&1; sed -n '/^graph step/,$p' $R/range2.txt
el
S=1,32,64,128,192,240
timeout 60 $H bench --plugin-dir $M --plugin-dir .carry/bin/i53a/libauxtrunk.so --plugin-dir .carry/bin/i53b/libauxtrunk.so --batches $S --budget 0.5 --quiet --csv $R/i53-1.csv > $R/i53-1.txt 2>&1; sed -n '/^graph step/,$p' $R/i53-1.txt
timeout 60 $H bench --plugin-dir .carry/bin/i53b/libauxtrunk.so --plugin-dir .carry/bin/i53a/libauxtrunk.so --plugin-dir $M --batches $S --budget 0.5 --quiet --csv $R/i53-2.csv > $R/i53-2.txt 2>&1; sed -n '/^graph step/,$p' $R/i53-2.txt
el
cp $M3 build/plugins/cuda-v3/libauxtrunk.so
(for c in exact graph fast; do AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=$c timeout 200 $T gpu > $R/test-$c.txt 2>&1; echo "$c rc=$?" >> $R/rc.txt; done) &
pt=$!
timeout 200 build/tests/conform/auxtrunk-conform $M3 > $R/conform.txt 2>&1; echo "conform rc=$?"; tail -4 $R/conform.txt
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 90 $CS --tool $tool --error-exitcode 9 $H bench --plugin-dir $M3 --batches 300,1030 --iters 2 --warmup 1 --min-iters 1 --rotate-mib 0 --quiet > $R/san-$tool.txt 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/san-$tool.txt | tail -1
done
wait $pt; cat $R/rc.txt
for c in exact graph fast; do grep -E "%|rror|differ" $R/test-$c.txt | tail -3; done
el
if [ $(( $(date +%s)-t0 )) -lt 330 ]; then
  cp .carry/bin/i53a/libauxtrunk.so build/plugins/cuda-v3/libauxtrunk.so
  AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=exact timeout 200 $T gpu > $R/test53-exact.txt 2>&1; echo "i53a exact rc=$?"; grep -E "%|rror|differ" $R/test53-exact.txt | tail -3
fi
el
tar czf $OUT/res.tgz -C $R .
