// StartBarrier: proves that loads run at once. Its hook (ModelLoadOptions::load_started,
// ServerOptions::start_load_started: a model version's load) makes each load wait, as it starts,
// until `expected` loads have started, for 60 s at most; a load that waits that out is noted as one
// that started alone (loads made one after another would each be one).
#ifndef CHRONOSERVE_TESTS_SERVER_START_BARRIER_H_
#define CHRONOSERVE_TESTS_SERVER_START_BARRIER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace chronoserve::testing {

class StartBarrier {
 public:
  explicit StartBarrier(int expected) : expected_(expected) {}

  std::function<void(const std::string& model, int64_t version)> Hook() {
    return [this](const std::string& model, int64_t version) { Arrive(model + " version " + std::to_string(version)); };
  }
  int started() const {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  // The loads ("m version 1") that timed out waiting for the others to start.
  std::vector<std::string> alone() const {
    absl::MutexLock lock(&mu_);
    return alone_;
  }

 private:
  void Arrive(const std::string& load) {
    absl::MutexLock lock(&mu_);
    ++started_;
    auto all_started = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_ >= expected_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all_started), absl::Seconds(60))) alone_.push_back(load);
  }

  const int expected_;
  mutable absl::Mutex mu_;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> alone_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_START_BARRIER_H_
