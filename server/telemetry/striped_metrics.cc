#include "server/telemetry/striped_metrics.h"

#include <algorithm>
#include <limits>

namespace chronoserve::server::telemetry {

StripedHistogram::StripedHistogram(std::vector<int64_t> bounds, double units_per_exposed)
    : bounds_(std::move(bounds)),
      units_per_exposed_(units_per_exposed),
      counts_(bounds_.size() + 1),
      sums_(new SumLine[kStripes]) {
  for (int stripe = 0; stripe < kStripes; ++stripe) sums_[stripe].value.store(0.0, std::memory_order_relaxed);
}

void StripedHistogram::Observe(int64_t value) {
  // The first bound >= value: Prometheus buckets are `le`, upper bounds included.
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_.Add(bucket, 1);
  // A double, like prometheus-cpp's sum: it never wraps. The stripe is seldom shared, so the
  // exchange rarely retries.
  std::atomic<double>& sum = sums_[CurrentStripe()].value;
  double seen = sum.load(std::memory_order_relaxed);
  while (!sum.compare_exchange_weak(seen, seen + static_cast<double>(value), std::memory_order_relaxed)) {
  }
}

prometheus::ClientMetric::Histogram StripedHistogram::Snapshot() const {
  prometheus::ClientMetric::Histogram h;
  h.bucket.reserve(bounds_.size() + 1);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_.Sum(i);
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < bounds_.size() ? static_cast<double>(bounds_[i]) / units_per_exposed_
                                       : std::numeric_limits<double>::infinity();
    h.bucket.push_back(b);
  }
  h.sample_count = cumulative;
  double sum = 0;
  for (int stripe = 0; stripe < kStripes; ++stripe) sum += sums_[stripe].value.load(std::memory_order_relaxed);
  h.sample_sum = sum / units_per_exposed_;
  return h;
}

}  // namespace chronoserve::server::telemetry
