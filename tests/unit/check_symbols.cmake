# check_symbols.cmake — the dynamic symbol table of a plugin exports only
# auxtrunk_plugin_entry (abi/auxtrunk.h: exactly one entry symbol).
#
#   cmake -DLIB=<libauxtrunk.so> -DNM=<nm> [-DEXPECT_EXTRA=a;b] [-DEXPECT_NO_ENTRY=ON]
#         -P check_symbols.cmake
#
# Reads `nm -D --defined-only`. The one symbol the toolchain adds is allowed:
# the version node of the linker version script (abi/plugin.map), which GNU
# ld and lld define as an absolute symbol (type A, value 0) named after the
# version the entry carries, e.g. AUXTRUNK_1 for auxtrunk_plugin_entry@@AUXTRUNK_1.
# It is not code or data; dlsym of it yields nothing usable. Anything else
# defined is an extra export and fails the check.
#
# EXPECT_EXTRA / EXPECT_NO_ENTRY turn the check around for the broken fixtures:
# it then passes only if it finds exactly those extras / no entry, which shows
# that it can fail.
if(NOT LIB OR NOT EXISTS "${LIB}")
  message(FATAL_ERROR "symbols: '${LIB}' does not exist (build first)")
endif()
if(NOT NM)
  message(FATAL_ERROR "symbols: no nm program was found at configure time")
endif()
execute_process(COMMAND "${NM}" -D --defined-only "${LIB}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "symbols: ${NM} failed on ${LIB}: ${err}")
endif()

string(REPLACE "\n" ";" lines "${out}")
set(entry_version "")
set(has_entry OFF)
set(defined "")
foreach(line IN LISTS lines)
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    continue()
  endif()
  string(REGEX REPLACE " +" ";" fields "${line}")
  list(LENGTH fields nf)
  math(EXPR last "${nf} - 1")
  math(EXPR type_at "${nf} - 2")
  list(GET fields ${last} full)
  list(GET fields ${type_at} type)
  string(REGEX REPLACE "@.*$" "" name "${full}")
  list(APPEND defined "${type}|${name}|${full}")
  if(name STREQUAL "auxtrunk_plugin_entry")
    set(has_entry ON)
    if(full MATCHES "@@?(.+)$")
      set(entry_version "${CMAKE_MATCH_1}")
    endif()
  endif()
endforeach()

set(extra "")
set(forced "")
foreach(item IN LISTS defined)
  string(REPLACE "|" ";" parts "${item}")
  list(GET parts 0 type)
  list(GET parts 1 name)
  if(name STREQUAL "auxtrunk_plugin_entry")
    continue()
  elseif(type STREQUAL "A" AND entry_version AND name STREQUAL entry_version)
    list(APPEND forced "${name}")
  else()
    list(APPEND extra "${name}")
  endif()
endforeach()
list(SORT extra)

message(STATUS "symbols: ${LIB}")
message(STATUS "  entry: ${has_entry} (version '${entry_version}')")
message(STATUS "  toolchain version node: '${forced}'")
message(STATUS "  extra exports: '${extra}'")

if(DEFINED EXPECT_EXTRA OR EXPECT_NO_ENTRY)
  set(want "${EXPECT_EXTRA}")
  list(SORT want)
  if(EXPECT_NO_ENTRY AND has_entry)
    message(FATAL_ERROR "symbols: the fixture's missing entry was not noticed")
  endif()
  if(DEFINED EXPECT_EXTRA AND NOT extra STREQUAL want)
    message(FATAL_ERROR "symbols: expected extras '${want}', found '${extra}'")
  endif()
  message(STATUS "symbols: the broken fixture is rejected for the expected reason")
  return()
endif()

if(NOT has_entry)
  message(FATAL_ERROR "symbols: ${LIB} does not export auxtrunk_plugin_entry")
endif()
if(extra)
  message(FATAL_ERROR "symbols: ${LIB} exports more than the entry: ${extra}")
endif()
message(STATUS "symbols: only auxtrunk_plugin_entry is exported")
