#include "common/striped_counters.h"

namespace chronoserve {

int CurrentStripe() {
  static std::atomic<int> next{0};
  thread_local const int stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripe;
}

}  // namespace chronoserve
