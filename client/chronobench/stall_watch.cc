#include "client/chronobench/stall_watch.h"

namespace chronoserve::client::bench {

bool StallWatch::Stalled(int64_t now_ns, int64_t completed, int64_t in_flight) {
  if (completed > completed_ || in_flight <= 0) {
    completed_ = completed;
    since_ns_ = now_ns;
    return false;
  }
  return now_ns - since_ns_ >= limit_ns_;
}

}  // namespace chronoserve::client::bench
