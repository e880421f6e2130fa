# Run after a CPU test binary links (chronoserve_test in tests/CMakeLists.txt): lists its tests
# and writes CTEST_FILE, a CTest test per GoogleTest suite ("Suite" or "Params/Suite"), each one
# process running that suite's tests in turn, instead of a process per test.
#
# Why: every test process pays the loading of LibTorch 1.13 (its operator registration), about
# 0.6-1 s of CPU on the 2-core CI machine before the first test runs, and a suite's fixture (a
# server, a model repository) once per test. At a process per test that was about half of the
# CPU suite's time. A suite's tests share their fixture by design (SetUpTestSuite) and each test
# still gets its own fixture object; the whole binary passes in one process too. A test that skips
# (GTEST_SKIP) no longer makes a CTest test "skipped": its entry passes, the "[  SKIPPED ]" line
# stays in the output, and a failure beside it still fails the entry.
#
# Inputs (-D): BINARY, CTEST_FILE, WORKING_DIR, LABELS (a list joined by ':'), ALONE (tests joined
# by ':' that run in a process of their own, RUN_SERIAL: see tests/client/CMakeLists.txt).
# Each entry's COST is its test count, so that CTest starts the big suites first, and its TIMEOUT
# 300 s plus 15 s a test (the slowest test takes about 15 s).
cmake_minimum_required(VERSION 3.18)

execute_process(COMMAND "${BINARY}" --gtest_list_tests
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests failed (${rc}): ${err}")
endif()

string(REPLACE ":" ";" alone "${ALONE}")
string(REPLACE ":" ";" labels "${LABELS}")
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")

set(suites "")
set(suite "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE " *#.*" "" line "${line}")  # "  # GetParam() = ..." / "  # TypeParam = ..."
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^ ")
    if(NOT line MATCHES "^[^ ]+\\.$")  # gtest_main's "Running main() from ..."
      set(suite "")
      continue()
    endif()
    string(REGEX REPLACE "\\.$" "" suite "${line}")
    list(APPEND suites "${suite}")
    set(count_${suite} 0)
    set(alone_${suite} "")
    continue()
  endif()
  if(suite STREQUAL "")
    continue()
  endif()
  string(STRIP "${line}" test)
  if("${suite}.${test}" IN_LIST alone)
    list(APPEND alone_${suite} "${suite}.${test}")
    list(REMOVE_ITEM alone "${suite}.${test}")
  else()
    math(EXPR count_${suite} "${count_${suite}} + 1")
  endif()
endforeach()

if(alone)
  message(FATAL_ERROR "${BINARY} has no test ${alone}, named to run alone")
endif()

set(out "")
macro(add_entry name filter count serial)
  math(EXPR timeout "300 + 15 * ${count}")
  string(APPEND out "add_test([==[${name}]==] \"${BINARY}\" [==[--gtest_filter=${filter}]==])\n"
                    "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY \"${WORKING_DIR}\""
                    " LABELS \"${labels}\" TIMEOUT ${timeout} COST ${count} RUN_SERIAL ${serial})\n")
endmacro()
foreach(suite IN LISTS suites)
  if(count_${suite} GREATER 0)
    set(filter "${suite}.*")
    if(alone_${suite})
      string(REPLACE ";" ":" excluded "${alone_${suite}}")
      set(filter "${filter}-${excluded}")
    endif()
    add_entry("${suite}" "${filter}" ${count_${suite}} FALSE)
  endif()
  foreach(test IN LISTS alone_${suite})
    add_entry("${test}" "${test}" 1 TRUE)
  endforeach()
endforeach()
file(WRITE "${CTEST_FILE}" "${out}")
