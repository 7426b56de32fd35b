#!/bin/bash
# trial-v3.54-mid-call.sh — the device call that measures the mid path
# (docs/perf-notes-v3.md, "A persistent mid-batch path (3.54)"); written
# 2026-12-07, not run (no device machine was lent). Before the call, on a
# machine with nvcc, from the repository root:
#   - .carry/check: Check's headers and static libraries (tests/cuda/run_on_gpu.sh);
#   - a Release build of main (AUXTRUNK_SANITIZER_TESTS=OFF): auxtrunk-host,
#     libauxtrunk_bench_cublas.so, the cpu, cuda-v2 and cuda-v3 plugins,
#     auxtrunk-conform and test_cuda_v3, copied into .carry/b/ under their
#     build-tree paths (host_stub/, plugins/NAME/, tests/conform/, tests/cuda/);
#   - .carry/bin/main/libauxtrunk.so: main's cuda-v3;
#   - .carry/bin/mid/: main with docs/bench/trial-v3.54-mid.diff applied (3.54.0);
#     mid2: the same with AUXTRUNK_V3_MID_PER_SM 2 (3.54.1); mid3 and mid4:
#     AUXTRUNK_V3_MID_NT 128 with PER_SM 2 and 4 (3.54.3, 3.54.4); midlo:
#     mid_takes(batch) = 33 <= batch <= V3_MID_MAX_BATCH, checked before
#     fused_takes in v3_forward and v3_backward_forked, V3_MID_MIN_BATCH 33
#     (3.54.2); each with its own VERSION in plugin/cuda_v3/CMakeLists.txt.
# test_cuda_v3 opens the plugins by their absolute build paths, so the
# script links the checkout to the path the binaries were built under.
# Then: run (carry .carry) `bash docs/bench/trial-v3.54-mid-call.sh`.
# one call: the mid path (3.54.0..4) — smoke, bits (exact/graph/fast quick cases in the background),
# speed beside main 3.51.1 and cuBLAS, sanitizers, ncu if time is left
set -u
R=/tmp/o; mkdir -p $R
nvidia-smi -L
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
mkdir -p build && cp -r .carry/b/* build/
cp .carry/bin/mid/libauxtrunk.so build/plugins/cuda-v3/libauxtrunk.so
H=build/host_stub/auxtrunk-host
T=build/tests/cuda/test_cuda_v3
t0=$(date +%s)
el() { echo "t=$(( $(date +%s)-t0 ))"; }
echo "== smoke"; timeout 30 $H bench --plugin-dir .carry/bin/mid/libauxtrunk.so --batches 300,1030 --iters 3 --warmup 1 --min-iters 1 --quiet; rc=$?; echo "smoke rc=$rc"
if [ $rc -ne 0 ]; then nvidia-smi; exit 0; fi
B=256,384,512,1024,2048,4096,8192,16383
timeout 150 $H bench --plugin-dir .carry/bin/main/libauxtrunk.so --plugin-dir .carry/bin/mid/libauxtrunk.so --plugin-dir .carry/bin/mid2/libauxtrunk.so --plugin-dir .carry/bin/mid3/libauxtrunk.so --plugin-dir .carry/bin/mid4/libauxtrunk.so --cublas --batches $B --budget 1 --quiet --csv $R/mid-ab1.csv > $R/mid-ab1.txt 2>&1; cat $R/mid-ab1.txt
el
timeout 100 $H bench --plugin-dir .carry/bin/mid4/libauxtrunk.so --plugin-dir .carry/bin/mid3/libauxtrunk.so --plugin-dir .carry/bin/mid2/libauxtrunk.so --plugin-dir .carry/bin/mid/libauxtrunk.so --plugin-dir .carry/bin/main/libauxtrunk.so --batches 256,1024,4096 --budget 1 --quiet --csv $R/mid-ab2.csv > $R/mid-ab2.txt 2>&1; cat $R/mid-ab2.txt
el
timeout 60 $H bench --plugin-dir .carry/bin/main/libauxtrunk.so --plugin-dir .carry/bin/midlo/libauxtrunk.so --batches 64,128,192,240 --budget 1 --quiet --csv $R/midlo.csv > $R/midlo.txt 2>&1; cat $R/midlo.txt
el
(for c in exact graph fast; do AUXTRUNK_CUDA_TEST_QUICK=1 CK_RUN_CASE=$c timeout 200 $T gpu > $R/test-$c.txt 2>&1; echo "$c rc=$?" >> $R/rc.txt; done) &
pt=$!
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
  [ $(( $(date +%s)-t0 )) -lt 420 ] || break
  timeout 90 $CS --tool $tool --error-exitcode 9 $H bench --plugin-dir .carry/bin/mid/libauxtrunk.so --batches 300,1030 --iters 2 --warmup 1 --min-iters 1 --rotate-mib 0 --quiet > $R/san-$tool.txt 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" $R/san-$tool.txt | tail -2
done
wait $pt; cat $R/rc.txt
for c in exact graph fast; do grep -E "bit-identical|%|Checks|rror" $R/test-$c.txt | tail -12; done
el
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ $(( $(date +%s)-t0 )) -lt 480 ]; then
  timeout 60 $NCU --clock-control none --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis -k regex:mid_ --launch-skip 6 --launch-count 2 \
    $H bench --plugin-dir .carry/bin/mid/libauxtrunk.so --batches 1024 --iters 4 --warmup 2 --min-iters 1 --quiet > $R/ncu-mid-1024.txt 2>&1
  grep -E "mid_|Duration|SM Busy|Issue Slots|FMA|Compute \(SM\)|Memory Throughput|No Eligible|Warp Cycles Per Issued" $R/ncu-mid-1024.txt | head -30
fi
el
tar czf $OUT/res.tgz -C $R .
