// Counters that many threads add to at once without sharing a cache line. Each thread adds to one
// of kStripes stripes (threads take stripes in turn, the first time they add); a reader sums the
// stripes. A relaxed add to a line that one thread mostly owns costs a few nanoseconds, where one
// shared line (or a mutex) makes every completing thread wait for the others under load.
// Sums read while threads add are each a moment's value, not one snapshot of all counters.
#ifndef CHRONOSERVE_COMMON_STRIPED_COUNTERS_H_
#define CHRONOSERVE_COMMON_STRIPED_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace chronoserve {

inline constexpr int kStripes = 16;
inline constexpr size_t kCacheLine = 64;

// The calling thread's stripe, in [0, kStripes).
int CurrentStripe();

// N unsigned 64-bit counters, striped.
template <size_t N>
class StripedCounters {
 public:
  StripedCounters() {
    for (Stripe& s : stripes_) {
      for (auto& v : s.values) v.store(0, std::memory_order_relaxed);
    }
  }
  StripedCounters(const StripedCounters&) = delete;
  StripedCounters& operator=(const StripedCounters&) = delete;

  void Add(size_t counter, uint64_t value) {
    stripes_[CurrentStripe()].values[counter].fetch_add(value, std::memory_order_relaxed);
  }
  uint64_t Sum(size_t counter) const {
    uint64_t sum = 0;
    for (const Stripe& s : stripes_) sum += s.values[counter].load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(kCacheLine) Stripe {
    std::array<std::atomic<uint64_t>, N> values;
  };
  std::array<Stripe, kStripes> stripes_;
};

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_STRIPED_COUNTERS_H_
