// The end of a test's own grpc::CompletionQueue: once it is shut down, takes what is left on it, but
// within a time limit. A plain Next() loop would wait for every event still pending, such as an alarm
// set an hour ahead that the code under test failed to cancel: a hang instead of a failure.
#ifndef CHRONOSERVE_TESTS_CLIENT_CQ_DRAIN_H_
#define CHRONOSERVE_TESTS_CLIENT_CQ_DRAIN_H_

#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace chronoserve::testing {

// Shuts `cq` down and takes its events until it reports the shutdown: their count. Fails the test
// and returns -1 when an event still pending held it past `timeout_ms`.
inline int ShutDownAndDrain(grpc::CompletionQueue& cq, int64_t timeout_ms = 10'000) {
  cq.Shutdown();
  const gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  int left = 0;
  void* tag = nullptr;
  bool ok = false;
  for (;;) {
    switch (cq.AsyncNext(&tag, &ok, deadline)) {
      case grpc::CompletionQueue::GOT_EVENT: ++left; break;
      case grpc::CompletionQueue::SHUTDOWN: return left;
      case grpc::CompletionQueue::TIMEOUT:
        ADD_FAILURE() << "the completion queue still held a pending event " << timeout_ms
                      << " ms after its shutdown (an alarm never cancelled?); " << left << " taken";
        return -1;
    }
  }
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_CLIENT_CQ_DRAIN_H_
