// Clock: the steady host clock in nanoseconds, injectable so tests can drive time by hand.
// SteadyClock is stateless and thread-safe; FakeClock is advanced by the test thread.
#ifndef CHRONOSERVE_COMMON_CLOCK_H_
#define CHRONOSERVE_COMMON_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace chronoserve {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds (std::chrono::steady_clock epoch for SteadyClock).
  virtual int64_t NowNs() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override { return Now(); }
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // The process-wide instance (stateless, so sharing it is safe).
  static const Clock* Get() {
    static const SteadyClock clock;
    return &clock;
  }
};

// Wall-clock nanoseconds since the Unix epoch (for traces and "last inference" stamps).
inline int64_t WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Unix time minus steady time, in ns: what turns a steady-clock stamp into Unix time. The wall
// clock is read between two steady readings, whose midpoint stands for the moment. A thread
// preempted between the readings would put the offset off by as long as it waited (hundreds of µs on
// a busy 2-core VM), so readings further apart than kCloseReadingsNs are taken again, up to three
// times in all, and the closest pair is kept.
inline constexpr int64_t kCloseReadingsNs = 5'000;

template <typename WallFn>
int64_t WallMinusSteadyNs(const Clock& steady, WallFn wall_now) {
  int64_t offset = 0;
  int64_t closest = -1;
  for (int tries = 0; tries < 3; ++tries) {
    const int64_t before = steady.NowNs();
    const int64_t wall = wall_now();
    const int64_t apart = steady.NowNs() - before;
    if (closest < 0 || apart < closest) {
      closest = apart;
      offset = wall - (before + apart / 2);
    }
    if (apart <= kCloseReadingsNs) break;
  }
  return offset;
}

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ns = 1'000'000'000) : now_ns_(start_ns) {}
  int64_t NowNs() const override { return now_ns_.load(); }
  void AdvanceNs(int64_t ns) { now_ns_.fetch_add(ns); }

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_CLOCK_H_
