// Prometheus metrics for the request path that any number of threads update without a lock:
// StripedHistogram (integer observations: nanoseconds, items) and StripedCounter. An update is a
// relaxed atomic add in the calling thread's stripe (common/striped_counters.h), so threads rarely
// touch the same cache line. prometheus-cpp's Histogram takes a mutex per observation and its
// Counter compare-exchanges one shared double, while every request of a model updates the same
// few metrics from every completing thread at once. StripedFamily<T> is one metric name with its
// labelled children, collected by a prometheus::Collectable (ServerMetrics). A scrape reads the
// stripes one by one: a histogram's `_count` always equals its `+Inf` bucket, while `_sum` may
// include an observation whose bucket the scrape has not seen yet.
#ifndef CHRONOSERVE_SERVER_TELEMETRY_STRIPED_METRICS_H_
#define CHRONOSERVE_SERVER_TELEMETRY_STRIPED_METRICS_H_

#include <prometheus/client_metric.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/striped_counters.h"

namespace chronoserve::server::telemetry {

class StripedHistogram {
 public:
  static constexpr prometheus::MetricType kType = prometheus::MetricType::Histogram;

  // `bounds`: ascending bucket upper bounds, inclusive (Prometheus' `le`), in observation units;
  // `units_per_exposed` divides a unit into the exposed value (1e9: nanoseconds exposed as
  // seconds). A division, not a multiplication by 1e-9, so that a bound reads exactly as its decimal
  // literal would (25'000 ns is le="2.5e-05", as prometheus-cpp's own buckets printed it).
  StripedHistogram(std::vector<int64_t> bounds, double units_per_exposed);
  StripedHistogram(const StripedHistogram&) = delete;
  StripedHistogram& operator=(const StripedHistogram&) = delete;

  void Observe(int64_t value);
  // Cumulative buckets ending with +Inf, in exposed units.
  prometheus::ClientMetric::Histogram Snapshot() const;
  void Fill(prometheus::ClientMetric* metric) const { metric->histogram = Snapshot(); }

 private:
  struct alignas(kCacheLine) SumLine {
    std::atomic<double> value;
  };

  const std::vector<int64_t> bounds_;
  const double units_per_exposed_;
  StripedCounters counts_;           // per bucket, not cumulative; the last is +Inf
  std::unique_ptr<SumLine[]> sums_;  // per stripe, in observation units
};

class StripedCounter {
 public:
  static constexpr prometheus::MetricType kType = prometheus::MetricType::Counter;

  StripedCounter() : count_(1) {}
  void Increment() { count_.Add(0, 1); }
  uint64_t Value() const { return count_.Sum(0); }
  void Fill(prometheus::ClientMetric* metric) const { metric->counter.value = static_cast<double>(Value()); }

 private:
  StripedCounters count_;
};

// One metric name and its children by label set. Add() is for set-up (it locks); the children's
// own updates take no lock.
template <typename Metric>
class StripedFamily {
 public:
  StripedFamily(std::string name, std::string help, std::function<std::unique_ptr<Metric>()> make)
      : name_(std::move(name)), help_(std::move(help)), make_(std::move(make)) {}

  // The child with exactly these labels, made on first use; its address never changes.
  Metric& Add(const prometheus::Labels& labels) {
    absl::MutexLock lock(&mu_);
    for (auto& [have, child] : children_) {
      if (have == labels) return *child;
    }
    children_.emplace_back(labels, make_());
    return *children_.back().second;
  }

  prometheus::MetricFamily Collect() const {
    prometheus::MetricFamily family;
    family.name = name_;
    family.help = help_;
    family.type = Metric::kType;
    absl::MutexLock lock(&mu_);
    family.metric.reserve(children_.size());
    for (const auto& [labels, child] : children_) {
      prometheus::ClientMetric metric;
      for (const auto& [name, value] : labels) metric.label.push_back({name, value});
      child->Fill(&metric);
      family.metric.push_back(std::move(metric));
    }
    return family;
  }

 private:
  const std::string name_;
  const std::string help_;
  const std::function<std::unique_ptr<Metric>()> make_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<prometheus::Labels, std::unique_ptr<Metric>>> children_ ABSL_GUARDED_BY(mu_);
};

}  // namespace chronoserve::server::telemetry

#endif  // CHRONOSERVE_SERVER_TELEMETRY_STRIPED_METRICS_H_
