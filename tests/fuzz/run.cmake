# run.cmake — one bounded fuzzing run of a harness (cmake -P; the fuzz_*
# ctests). -DFUZZER=<harness> -DCORPUS=<seed corpus in the repository>
# -DWORK=<scratch corpus> -DARTIFACTS=<folder for crash inputs>
# -DSECONDS=<total time> -DMAX_LEN=<largest input>.
#
# New inputs go to WORK (never into the repository); the seeds are read from
# CORPUS. libFuzzer exits non-zero on a crash, a sanitizer report, a leak, an
# input running over -timeout or a broken invariant (abort), and writes the
# input to ARTIFACTS as crash-*, leak-*, timeout-* or oom-*.
cmake_minimum_required(VERSION 3.20)
file(MAKE_DIRECTORY ${WORK} ${ARTIFACTS})
get_filename_component(name ${FUZZER} NAME)
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -max_len=${MAX_LEN} -timeout=10
                        -rss_limit_mb=2048 -print_final_stats=1
                        -artifact_prefix=${ARTIFACTS}/${name}- ${WORK} ${CORPUS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${name}: finding (exit status ${rc}); the input is in ${ARTIFACTS}/ "
                      "(reproduce: ${FUZZER} <that file>)")
endif()
