#include "common/histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace chronoserve {
namespace {

constexpr int64_t kSubBuckets = int64_t{1} << Histogram::kSubBucketBits;  // per octave
constexpr int64_t kLinearLimit = kSubBuckets * 2;  // values below this get one bucket each
constexpr int kLinearOctaveTop = Histogram::kSubBucketBits + 1;  // log2(kLinearLimit)

int FloorLog2(uint64_t v) { return 63 - __builtin_clzll(v); }

}  // namespace

Histogram::Histogram(int64_t max_value)
    : max_value_(std::max<int64_t>(max_value, kLinearLimit)),
      bucket_count_(BucketIndex(max_value_) + 1) {}

int Histogram::BucketIndex(int64_t value) {
  if (value < kLinearLimit) return static_cast<int>(std::max<int64_t>(value, 0));
  const int e = FloorLog2(static_cast<uint64_t>(value));
  const int64_t sub = (value >> (e - kSubBucketBits)) - kSubBuckets;
  return static_cast<int>(kLinearLimit + (e - kLinearOctaveTop) * kSubBuckets + sub);
}

std::pair<int64_t, int64_t> Histogram::BucketRange(int index) {
  if (index < kLinearLimit) return {index, index};
  const int64_t offset = index - kLinearLimit;
  const int e = static_cast<int>(offset / kSubBuckets) + kLinearOctaveTop;
  const int64_t sub = offset % kSubBuckets;
  const int64_t width = int64_t{1} << (e - kSubBucketBits);
  const int64_t low = (kSubBuckets + sub) * width;
  return {low, low + (width - 1)};  // the top bucket's high is INT64_MAX: low + width would overflow
}

void Histogram::Record(int64_t value, int64_t count) {
  if (count <= 0) return;
  if (value < 0) {
    negative_ += count;
    value = 0;
  }
  if (value > max_value_) {
    saturated_ += count;
    value = max_value_;
  }
  if (counts_.empty()) counts_.assign(bucket_count_, 0);
  counts_[BucketIndex(value)] += count;
  if (count_ == 0 || value < min_) min_ = value;
  if (count_ == 0 || value > max_) max_ = value;
  count_ += count;
  sum_ += static_cast<double>(value) * static_cast<double>(count);
}

absl::Status Histogram::Add(const Histogram& other) {
  if (other.max_value_ != max_value_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge histograms of ranges ", max_value_,
                                                   " and ", other.max_value_));
  }
  if (other.count_ == 0) return absl::OkStatus();
  if (counts_.empty()) counts_.assign(bucket_count_, 0);
  for (int i = 0; i < bucket_count_; ++i) counts_[i] += other.counts_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
  saturated_ += other.saturated_;
  negative_ += other.negative_;
  return absl::OkStatus();
}

void Histogram::Allocate() {
  if (counts_.empty()) counts_.assign(bucket_count_, 0);
}

void Histogram::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ = 0;
  min_ = max_ = saturated_ = negative_ = 0;
}

int64_t Histogram::BucketMidpoint(int index) const {
  const auto [low, high] = BucketRange(index);
  return std::clamp(low + (high - low) / 2, min_, max_);
}

int64_t Histogram::PercentileRank(double percentile, int64_t count) {
  if (count <= 0) return 0;
  if (!(percentile > 0)) return 1;  // NaN too
  if (percentile >= 100) return count;
  // In doubles, p / 100 * count carries p's binary rounding (99.9 is 99.90000000000000568...) into
  // the product, and past ~2e7 no fixed epsilon absorbs it: p99.9 of 2e7 gave rank 19,980,001.
  // Integer arithmetic on p in parts per billion is exact for percentiles of up to 7 decimals.
  constexpr int64_t kPartsPerHundred = 10'000'000;  // 1e9 parts per whole
  const auto parts = static_cast<unsigned __int128>(std::llround(percentile * kPartsPerHundred));
  const unsigned __int128 whole = static_cast<unsigned __int128>(kPartsPerHundred) * 100;
  const unsigned __int128 scaled = parts * static_cast<unsigned __int128>(count);
  const auto rank = static_cast<int64_t>((scaled + whole - 1) / whole);
  return std::clamp<int64_t>(rank, 1, count);
}

int64_t Histogram::ValueAtPercentile(double percentile) const {
  if (count_ == 0) return 0;
  const int64_t rank = PercentileRank(percentile, count_);
  int64_t seen = 0;
  for (int i = 0; i < bucket_count_; ++i) {
    seen += counts_[i];
    if (seen >= rank) return BucketMidpoint(i);
  }
  return max_;
}

std::vector<std::pair<int64_t, double>> Histogram::Cdf(int max_points) const {
  std::vector<std::pair<int64_t, double>> all;
  if (count_ == 0) return all;
  int64_t seen = 0;
  for (int i = 0; i < bucket_count_; ++i) {
    if (counts_[i] == 0) continue;
    seen += counts_[i];
    all.emplace_back(BucketMidpoint(i), static_cast<double>(seen) / static_cast<double>(count_));
  }
  if (max_points <= 0) return {};
  if (static_cast<int>(all.size()) <= max_points) return all;
  if (max_points == 1) return {all.back()};  // the whole distribution's end: the maximum, 1.0
  std::vector<std::pair<int64_t, double>> thinned;
  const double step = static_cast<double>(all.size() - 1) / (max_points - 1);
  for (int k = 0; k < max_points; ++k) {
    thinned.push_back(all[static_cast<size_t>(std::llround(k * step))]);
  }
  return thinned;
}

}  // namespace chronoserve
