#!/bin/bash
# trial-v3.54-range-slim.sh — trial-v3.54-range-call.sh cut to what fits
# about 200 s of device time: the range bench in both orders, 3.53 beside
# main, then 3.54.3's exact case (quick) beside memcheck, racecheck and
# synccheck, then its graph and fast cases while time is left. Prepared as
# trial-v3.54-range-call.sh says.
set -u
R=/tmp/o; mkdir -p $R
nvidia-smi -L
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
mkdir -p build && cp -r .carry/b/* build/
H=build/host_stub/auxtrunk-host
T=build/tests/cuda/test_cuda_v3
M=.carry/bin/main/libauxtrunk.so; M3=.carry/bin/mid3/libauxtrunk.so
t0=$(date +%s)
el() { echo "t=$(( $(date +%s)-t0 ))"; tar czf $OUT/res.tgz -C $R .; }
B=256,272,288,320,352,384,448,512,640,768,896,1024,1152,1280,1408,1536,1792,2047
timeout 40 $H bench --plugin-dir $M --plugin-dir $M3 --batches $B --budget 0.3 --quiet --csv $R/range1.csv > $R/range1.txt 2>&1; sed -n '/^graph step/,$p' $R/range1.txt
timeout 40 $H bench --plugin-dir $M3 --plugin-dir $M --batches $B --budget 0.3 --quiet --csv $R/range2.csv > $R/range2.txt 2>&1; sed -n '/^graph step/,$p' $R/range2.txt
el
S=1,32,64,128,192,240
timeout 30 $H bench --plugin-dir $M --plugin-dir .carry/bin/i53a/libauxtrunk.so --plugin-dir .carry/bin/i53b/libauxtrunk.so --batches $S --budget 0.3 --quiet --csv $R/i53-1.csv > $R/i53-1.txt 2>&1; sed -n '/^graph step/,$p' $R/i53-1.txt
el
cp $M3 build/plugins/cuda-v3/libauxtrunk.so
(AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=exact timeout 150 $T gpu > $R/test-exact.txt 2>&1; echo "exact rc=$?" >> $R/rc.txt) &
pt=$!
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  timeout 60 $CS --tool $tool --error-exitcode 9 $H bench --plugin-dir $M3 --batches 300,1030 --iters 2 --warmup 1 --min-iters 1 --rotate-mib 0 --quiet > $R/san-$tool.txt 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $R/san-$tool.txt | tail -1
done
el
wait $pt; cat $R/rc.txt; grep -E "%|rror|differ" $R/test-exact.txt | tail -3
el
for c in graph fast; do AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=$c timeout 60 $T gpu > $R/test-$c.txt 2>&1; echo "$c rc=$?"; grep -E "%|rror|differ" $R/test-$c.txt | tail -2; el; done
