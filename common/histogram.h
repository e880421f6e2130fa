// Histogram: a log-linear histogram of non-negative int64 values (HdrHistogram's idea, written
// here): values below 2^(kSubBucketBits+1) get one bucket each; above, every power-of-two octave is
// split into 2^kSubBucketBits equal buckets, so a bucket is at most 1/1024 of its lower bound wide
// and a reported value (the bucket midpoint) is within 0.05% of any value recorded in it.
// Memory is fixed by `max_value` (about 250 KB for the default 2^40) and allocated on the first
// Record(). Mergeable: Add() sums two histograms of the same range.
// Not thread-safe: each worker thread owns its histograms; they are merged after the workers stop.
//
//   Histogram h;
//   h.Record(latency_ns);
//   int64_t p99 = h.ValueAtPercentile(99.0);
#ifndef CHRONOSERVE_COMMON_HISTOGRAM_H_
#define CHRONOSERVE_COMMON_HISTOGRAM_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace chronoserve {

class Histogram {
 public:
  static constexpr int kSubBucketBits = 10;
  static constexpr int64_t kDefaultMaxValue = int64_t{1} << 40;  // ~18 minutes in ns

  // Values above `max_value` are recorded as `max_value` and counted in saturated().
  explicit Histogram(int64_t max_value = kDefaultMaxValue);

  // Records `count` occurrences of `value`; negative values are recorded as 0 and counted in
  // negative() (a caller's clock went backwards: callers report it, never hide it).
  void Record(int64_t value, int64_t count = 1);
  // Adds every count of `other`; INVALID_ARGUMENT if the ranges differ.
  absl::Status Add(const Histogram& other);
  void Reset();
  // Allocates the buckets now (otherwise the first Record() does), so a worker's first record
  // in a fresh window does not pay for it.
  void Allocate();

  int64_t count() const { return count_; }
  int64_t min() const { return count_ == 0 ? 0 : min_; }
  int64_t max() const { return count_ == 0 ? 0 : max_; }
  double mean() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }
  int64_t saturated() const { return saturated_; }
  int64_t negative() const { return negative_; }
  int64_t max_value() const { return max_value_; }

  // Nearest-rank percentile (the value at rank ceil(p/100 * count)), as the midpoint of its bucket
  // clamped to [min, max]; 0 when empty. `percentile` in [0, 100].
  int64_t ValueAtPercentile(double percentile) const;

  // The nearest rank ceil(percentile/100 * count), in 1..count, computed exactly for percentiles
  // given to 7 decimals (no floating-point error at any count); 0 when count is 0.
  static int64_t PercentileRank(double percentile, int64_t count);

  // (value, cumulative fraction) at each non-empty bucket, thinned to at most `max_points`
  // points; for CDF plots.
  std::vector<std::pair<int64_t, double>> Cdf(int max_points) const;

  // Bucket index of `value` and the inclusive value range of a bucket (exposed for tests).
  static int BucketIndex(int64_t value);
  static std::pair<int64_t, int64_t> BucketRange(int index);

 private:
  int64_t BucketMidpoint(int index) const;

  int64_t max_value_;
  int bucket_count_;
  std::vector<int64_t> counts_;  // empty until the first Record()
  int64_t count_ = 0;
  double sum_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  int64_t saturated_ = 0;
  int64_t negative_ = 0;
};

}  // namespace chronoserve

#endif  // CHRONOSERVE_COMMON_HISTOGRAM_H_
