# check_install.cmake — `cmake --install` of the build tree into a scratch
# prefix, then the installed example (PREFIX/DOCDIR/example) built as a
# trainer builds it and run with the installed CPU plugin:
#   CONSUMER=find_package  its CMakeLists.txt, CMAKE_PREFIX_PATH=PREFIX; the
#                          plugins from the package's AUXTRUNK_PLUGIN_DIR
#   CONSUMER=pkg_config    its Makefile, PKG_CONFIG_PATH=PREFIX/LIBDIR/pkgconfig;
#                          the plugins from `pkg-config --variable=plugindir`
# Arguments: -DBUILD -DCONSUMER -DWORK, the install dirs (-DLIBDIR -DINCLUDEDIR
# -DDOCDIR -DBINDIR -DPLUGINDIR), -DVERSION, -DMAKE, -DPKG_CONFIG, and in a
# sanitizer build -DPRELOAD=<its shared runtime>, which the example (built
# without it, as a trainer builds it) needs to load the instrumented plugin.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

if(CONSUMER STREQUAL "pkg_config" AND (NOT MAKE OR NOT PKG_CONFIG))
  message("SKIP: the pkg-config consumer needs make and pkg-config (make: '${MAKE}', "
          "pkg-config: '${PKG_CONFIG}')")
  cmake_language(EXIT 77)
endif()

file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(f ${INCLUDEDIR}/auxtrunk.h ${INCLUDEDIR}/auxtrunk_canon.h ${INCLUDEDIR}/auxtrunk_loader.h
          ${INCLUDEDIR}/auxtrunk_version.h ${PLUGINDIR}/cpu/libauxtrunk.so
          ${LIBDIR}/cmake/auxtrunk/auxtrunkConfig.cmake ${LIBDIR}/pkgconfig/auxtrunk.pc
          ${BINDIR}/auxtrunk-host ${DOCDIR}/LICENSE ${DOCDIR}/example/example.c
          ${DOCDIR}/example/CMakeLists.txt ${DOCDIR}/example/Makefile)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

# The example as a trainer copies it: out of the prefix, into its own tree.
file(COPY ${prefix}/${DOCDIR}/example DESTINATION ${WORK})
set(src ${WORK}/example)
if(CONSUMER STREQUAL "find_package")
  run("configuring the example with find_package(auxtrunk)"
      ${CMAKE_COMMAND} -S ${src} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${prefix})
  if(NOT out MATCHES "auxtrunk ${VERSION} \\(ABI [0-9]+\\.[0-9]+\\): plugins in ([^\n]*)\n")
    message(FATAL_ERROR "the example's configure did not report the package:\n${out}")
  endif()
  set(plugins ${CMAKE_MATCH_1})
  run("building the example" ${CMAKE_COMMAND} --build ${WORK}/build)
  set(exe ${WORK}/build/auxtrunk-example)
else()
  set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
  run("pkg-config --modversion" ${PKG_CONFIG} --modversion auxtrunk)
  string(STRIP "${out}" got)
  if(NOT got STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config --modversion auxtrunk is '${got}', the project is ${VERSION}")
  endif()
  run("pkg-config --variable=plugindir" ${PKG_CONFIG} --variable=plugindir auxtrunk)
  string(STRIP "${out}" plugins)
  # The host-only build (CUDA_HOME empty whatever the environment says): the
  # test is about pkg-config, and must not depend on where a toolkit is.
  run("make" ${MAKE} -C ${src} CUDA_HOME=)
  message(STATUS "${out}")
  set(exe ${src}/auxtrunk-example)
endif()

get_filename_component(plugins "${plugins}" REALPATH)
get_filename_component(want "${prefix}/${PLUGINDIR}" REALPATH)
if(NOT plugins STREQUAL want)
  message(FATAL_ERROR "the ${CONSUMER} plugin directory is ${plugins}, installed at ${want}")
endif()
set(ENV{AUXTRUNK_PLUGIN_PATH} ${plugins})
if(PRELOAD)
  set(ENV{LD_PRELOAD} ${PRELOAD})
endif()
run("the installed example with the installed CPU plugin" ${exe} cpu)
if(NOT out MATCHES "cpu-ref .*target infer bit-identical")
  message(FATAL_ERROR "unexpected example output:\n${out}")
endif()
message(STATUS "${CONSUMER}: ${out}")
