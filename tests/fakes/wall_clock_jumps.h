// WallClockJumps: how far the wall clock jumped against the steady clock while a test ran.
//
// Spans are placed in Unix time by each process from its steady-clock stamps and one reading of the
// wall clock (chronobench's at the send, chronoserve's when the request is done). Where the wall
// clock is stepped between two such readings, one process's spans move against the other's by the
// step. Some VMs step it often: the 2-core test VM stepped it 0.5 ms ahead about every 100 ms.
// A test that compares Unix times from two readings allows, around each comparison, the jumps
// that fell near it, and no more.
//
// A thread compares the two clocks every 200 µs from construction to Stop() (or destruction).
#ifndef CHRONOSERVE_TESTS_FAKES_WALL_CLOCK_JUMPS_H_
#define CHRONOSERVE_TESTS_FAKES_WALL_CLOCK_JUMPS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace chronoserve::testing {

class WallClockJumps {
 public:
  WallClockJumps() : thread_([this] { Watch(); }) {}
  ~WallClockJumps() { Stop(); }
  WallClockJumps(const WallClockJumps&) = delete;
  WallClockJumps& operator=(const WallClockJumps&) = delete;

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  // The sum of the jumps' sizes (ns) whose span of Unix time comes within `margin_ns` of
  // [from_unix_ns, to_unix_ns]: 0 where the wall clock kept pace with the steady clock there.
  int64_t Near(int64_t from_unix_ns, int64_t to_unix_ns, int64_t margin_ns = 2'000'000) const {
    absl::MutexLock lock(&mu_);
    int64_t sum = 0;
    for (const Jump& j : jumps_) {
      if (j.first_unix_ns <= to_unix_ns + margin_ns && j.last_unix_ns >= from_unix_ns - margin_ns) {
        sum += std::llabs(j.size_ns);
      }
    }
    return sum;
  }

 private:
  // The wall clock moved by `size_ns` against the steady clock between two readings, at these
  // Unix times (the first before the jump, the second after it).
  struct Jump {
    int64_t first_unix_ns;
    int64_t last_unix_ns;
    int64_t size_ns;
  };
  static constexpr int64_t kJumpNs = 50'000;  // far above an offset's error (WallMinusSteadyNs)

  void Watch() {
    bool have = false;
    int64_t last_offset = 0;
    int64_t last_unix = 0;
    while (!stop_.load()) {
      const int64_t offset = WallMinusSteadyNs(*SteadyClock::Get(), WallNowNs);
      const int64_t unix_ns = WallNowNs();
      if (have && std::llabs(offset - last_offset) > kJumpNs) {
        absl::MutexLock lock(&mu_);
        jumps_.push_back(Jump{last_unix, unix_ns, offset - last_offset});
      }
      have = true;
      last_offset = offset;
      last_unix = unix_ns;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  mutable absl::Mutex mu_;
  std::vector<Jump> jumps_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_FAKES_WALL_CLOCK_JUMPS_H_
