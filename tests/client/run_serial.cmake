# Read by CTest after client_tests' discovered tests (TEST_INCLUDE_FILES, see CMakeLists.txt): the
# tests that bound how late open-loop sends are (a median schedule lag under 300 µs) run alone. On
# the 2-core VM, LoadWorkerTest's median lag was 2 µs with two busy loops beside it (11 runs of
# 11), with four 2-5 µs in 17 runs of 20 and 94-744 µs in 3, with six 0.1-0.8 ms in 3 runs of 5.
# Another test's server and client beside it should leave the bound met; running alone (a few
# seconds) takes the doubt away.
foreach(_serial LoadWorkerTest.OpenLoopSendsOnTimeWithoutSpinning
                LoadWorkerTest.OpenLoopWithoutPollingKeepsItsRate
                ChronobenchE2eTest.OpenLoopPoissonKeepsItsRateAndTimesFromTheSchedule)
  list(FIND client_tests_TESTS "${_serial}" _found)
  if(NOT _found EQUAL -1)
    set_tests_properties("${_serial}" PROPERTIES RUN_SERIAL TRUE)
  endif()
endforeach()
