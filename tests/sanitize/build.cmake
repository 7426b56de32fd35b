# build.cmake — configures and builds the sanitizer sub-build (cmake -P; the
# sanitize_build ctest). -DSOURCE=<repository> -DBUILD=<build folder>
# -DCLANG=<clang> -DGENERATOR=<cmake generator> -DJOBS=<n>.
cmake_minimum_required(VERSION 3.20)
if(NOT CLANG)
  message(FATAL_ERROR "clang not found: the sanitizer and fuzzing job needs clang and "
                      "compiler-rt (Debian: apt-get install clang libclang-rt-dev)")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BUILD} -G ${GENERATOR}
                        -DCMAKE_C_COMPILER=${CLANG} -DCMAKE_BUILD_TYPE=RelWithDebInfo
                        -DAUXTRUNK_ENABLE_CUDA=OFF -DAUXTRUNK_SANITIZE=ON -DAUXTRUNK_FUZZ=ON
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the sanitizer build in ${BUILD} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD} -j ${JOBS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the sanitizer build in ${BUILD} failed (${rc})")
endif()
