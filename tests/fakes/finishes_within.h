// FinishesWithin: a wait that must end (a Stop(), a join) run on a thread of its own, with a
// deadline that fails the test. A wait that hangs cannot be abandoned: its thread still uses the
// test's objects, and their destructors would wait the same way until CTest's timeout. So past the
// deadline the test fails naming what hung, and the binary aborts.
#ifndef CHRONOSERVE_TESTS_FAKES_FINISHES_WITHIN_H_
#define CHRONOSERVE_TESTS_FAKES_FINISHES_WITHIN_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace chronoserve::testing {

inline void FinishesWithin(const std::string& what, absl::Duration timeout, const std::function<void()>& wait) {
  absl::Notification returned;
  std::thread waiter([&] {
    wait();
    returned.Notify();
  });
  if (!returned.WaitForNotificationWithTimeout(timeout)) {
    ADD_FAILURE() << what << " did not return within " << timeout << "; aborting";
    std::abort();
  }
  waiter.join();
}

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_FINISHES_WITHIN_H_
