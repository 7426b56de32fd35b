# check_install.cmake — `cmake --install` of the build tree into a scratch
# prefix, then a separate project that finds it with find_package(auxtrunk 1)
# and loads the installed CPU plugin. Arguments: -DBUILD=<build tree>
# -DSOURCE=<tests/unit/install_consumer> -DWORK=<scratch dir>.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
foreach(f include/auxtrunk.h include/auxtrunk_canon.h lib/auxtrunk/plugins/cpu/libauxtrunk.so
          lib/cmake/auxtrunk/auxtrunkConfig.cmake bin/auxtrunk-host)
  if(NOT EXISTS ${WORK}/prefix/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/consumer
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "find_package(auxtrunk) project failed to configure:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/consumer
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer failed to build:\n${out}")
endif()
execute_process(COMMAND ${WORK}/consumer/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer failed: ${err}")
endif()
message(STATUS "${out}")
