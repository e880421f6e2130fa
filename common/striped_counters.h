// Counters that many threads add to at once without sharing a cache line. Each thread adds to one
// of kStripes stripes (threads take stripes in turn, the first time they add); a reader sums the
// stripes. A relaxed add to a line that one thread mostly owns costs a few nanoseconds, where one
// shared line (or a mutex) makes every completing thread wait for the others under load.
// Sums read while threads add are each a moment's value, not one snapshot of all counters.
#ifndef CHRONOSERVE_COMMON_STRIPED_COUNTERS_H_
#define CHRONOSERVE_COMMON_STRIPED_COUNTERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace chronoserve {

inline constexpr int kStripes = 16;
inline constexpr size_t kCacheLine = 64;

// The calling thread's stripe, in [0, kStripes).
inline int CurrentStripe() {
  static std::atomic<unsigned> next{0};  // unsigned: wraps to 0 after 2^32 threads, never negative
  thread_local const int stripe = static_cast<int>(next.fetch_add(1, std::memory_order_relaxed) % kStripes);
  return stripe;
}

// `size` unsigned 64-bit counters, striped: each stripe holds all of them on cache lines of its own.
class StripedCounters {
 public:
  explicit StripedCounters(size_t size)
      : lines_per_stripe_((size + kPerLine - 1) / kPerLine), lines_(new Line[lines_per_stripe_ * kStripes]) {
    for (size_t l = 0; l < lines_per_stripe_ * kStripes; ++l) {
      for (auto& v : lines_[l].values) v.store(0, std::memory_order_relaxed);
    }
  }
  StripedCounters(const StripedCounters&) = delete;
  StripedCounters& operator=(const StripedCounters&) = delete;

  void Add(size_t counter, uint64_t value) {
    At(CurrentStripe(), counter).fetch_add(value, std::memory_order_relaxed);
  }
  uint64_t Sum(size_t counter) const {
    uint64_t sum = 0;
    for (int stripe = 0; stripe < kStripes; ++stripe) sum += At(stripe, counter).load(std::memory_order_relaxed);
    return sum;
  }

 private:
  static constexpr size_t kPerLine = kCacheLine / sizeof(std::atomic<uint64_t>);
  struct alignas(kCacheLine) Line {
    std::atomic<uint64_t> values[kPerLine];
  };
  std::atomic<uint64_t>& At(int stripe, size_t counter) const {
    return lines_[static_cast<size_t>(stripe) * lines_per_stripe_ + counter / kPerLine].values[counter % kPerLine];
  }

  const size_t lines_per_stripe_;
  const std::unique_ptr<Line[]> lines_;
};

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_STRIPED_COUNTERS_H_
