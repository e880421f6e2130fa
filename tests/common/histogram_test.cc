#include "common/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace chronoserve {
namespace {

// Nearest-rank percentile of sorted data: the reference the histogram must match to 0.1%.
int64_t ExactPercentile(const std::vector<int64_t>& sorted, double p) {
  const auto n = static_cast<int64_t>(sorted.size());
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(n) - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, n);
  return sorted[rank - 1];
}

void ExpectPercentilesMatch(const Histogram& h, std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  for (double p : {0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.99, 100.0}) {
    const double exact = static_cast<double>(ExactPercentile(values, p));
    const double got = static_cast<double>(h.ValueAtPercentile(p));
    EXPECT_LE(std::abs(got - exact), exact * 0.001) << "p" << p << " exact " << exact << " got " << got;
  }
}

TEST(HistogramTest, EmptyReportsZero) {
  Histogram h;
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.ValueAtPercentile(50), 0);
  EXPECT_EQ(h.mean(), 0);
  EXPECT_TRUE(h.Cdf(10).empty());
}

TEST(HistogramTest, BucketsCoverEveryValueWithinPrecision) {
  // Consecutive buckets tile the value line; each wider than one value is at most 1/1024 of its
  // lower bound wide (the first 2048 values have a bucket each).
  int64_t expected_low = 0;
  const int last = Histogram::BucketIndex(Histogram::kDefaultMaxValue);
  for (int i = 0; i <= last; ++i) {
    const auto [low, high] = Histogram::BucketRange(i);
    ASSERT_EQ(low, expected_low) << "bucket " << i;
    ASSERT_GE(high, low);
    if (high > low) ASSERT_LE(static_cast<double>(high - low + 1) / low, 1.0 / 1024 + 1e-12);
    ASSERT_EQ(Histogram::BucketIndex(low), i);
    ASSERT_EQ(Histogram::BucketIndex(high), i);
    expected_low = high + 1;
  }
}

TEST(HistogramTest, LogNormalLatenciesMatchExactPercentiles) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(200'000.0), 1.2);  // ~200 us median, long tail
  Histogram h;
  std::vector<int64_t> values;
  for (int i = 0; i < 200'000; ++i) {
    const auto v = static_cast<int64_t>(dist(rng));
    values.push_back(v);
    h.Record(v);
  }
  ExpectPercentilesMatch(h, values);
  double sum = 0;
  for (int64_t v : values) sum += static_cast<double>(v);
  EXPECT_NEAR(h.mean(), sum / values.size(), 1e-6 * h.mean());
  EXPECT_EQ(h.min(), *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end()));
}

TEST(HistogramTest, UniformWideRangeMatchesExactPercentiles) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> dist(0, int64_t{1} << 36);
  Histogram h;
  std::vector<int64_t> values;
  for (int i = 0; i < 50'000; ++i) {
    values.push_back(dist(rng));
    h.Record(values.back());
  }
  ExpectPercentilesMatch(h, values);
}

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (int64_t v = 1; v <= 100; ++v) h.Record(v);
  EXPECT_EQ(h.ValueAtPercentile(50), 50);
  EXPECT_EQ(h.ValueAtPercentile(99), 99);
  EXPECT_EQ(h.ValueAtPercentile(100), 100);
}

TEST(HistogramTest, MergedWorkersEqualOneHistogram) {
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> dist(1.0 / 50'000);
  Histogram all;
  std::vector<Histogram> workers(4);
  std::vector<int64_t> values;
  for (int i = 0; i < 40'000; ++i) {
    const auto v = static_cast<int64_t>(dist(rng));
    values.push_back(v);
    all.Record(v);
    workers[i % 4].Record(v);
  }
  Histogram merged;
  for (const auto& w : workers) ASSERT_TRUE(merged.Add(w).ok());
  EXPECT_EQ(merged.count(), all.count());
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    EXPECT_EQ(merged.ValueAtPercentile(p), all.ValueAtPercentile(p));
  }
  ExpectPercentilesMatch(merged, values);
}

TEST(HistogramTest, MergeRejectsDifferentRanges) {
  Histogram a(int64_t{1} << 30), b(int64_t{1} << 40);
  b.Record(5);
  EXPECT_FALSE(a.Add(b).ok());
}

TEST(HistogramTest, SaturatedAndNegativeValuesAreCountedNotHidden) {
  Histogram h(int64_t{1} << 20);
  h.Record(-5);
  h.Record(int64_t{1} << 30);
  EXPECT_EQ(h.negative(), 1);
  EXPECT_EQ(h.saturated(), 1);
  EXPECT_EQ(h.count(), 2);
  EXPECT_EQ(h.max(), int64_t{1} << 20);
}

// The top bucket of the widest range ends at INT64_MAX (its high was low + width - 1, past it).
TEST(HistogramTest, TheTopBucketOfTheWidestRangeEndsAtInt64Max) {
  Histogram h(std::numeric_limits<int64_t>::max());
  h.Record(std::numeric_limits<int64_t>::max());
  h.Record(1);
  EXPECT_EQ(h.saturated(), 0);
  EXPECT_GT(h.ValueAtPercentile(100), std::numeric_limits<int64_t>::max() / 2);
  EXPECT_EQ(h.ValueAtPercentile(50), 1);
}

// The rank is ceil(p/100 * n), exactly: in doubles p99.9 of 2e7 came out one too high.
TEST(HistogramTest, PercentileRankIsExactAtLargeCounts) {
  struct Row {
    double p;
    int64_t n;
    int64_t rank;
  };
  for (const Row& row : std::vector<Row>{{50, 10, 5},
                                         {50, 11, 6},
                                         {99, 100, 99},
                                         {99.9, 1000, 999},
                                         {99.9, 1001, 1000},
                                         {99.9, 20'000'000, 19'980'000},
                                         {99.99, 300'000'000, 299'970'000},
                                         {99.999, 1'000'000'007, 999'990'007},
                                         {0.1, 20'000'000, 20'000},
                                         {0, 7, 1},
                                         {100, 20'000'000, 20'000'000},
                                         {99.9, int64_t{1} << 62, 4'607'074'332'408'960'517}}) {
    EXPECT_EQ(Histogram::PercentileRank(row.p, row.n), row.rank) << "p" << row.p << " of " << row.n;
  }
  EXPECT_EQ(Histogram::PercentileRank(50, 0), 0);
  // The same through a histogram filled in bulk: 19,980,000 values of 3 and 20,000 of 1000.
  Histogram h;
  h.Record(3, 19'980'000);
  h.Record(1000, 20'000);
  ASSERT_EQ(h.count(), 20'000'000);
  EXPECT_EQ(h.ValueAtPercentile(99.9), 3);
  EXPECT_EQ(h.ValueAtPercentile(99.91), 1000);
}

TEST(HistogramTest, CdfIsMonotoneAndEndsAtOne) {
  Histogram h;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> dist(1000, 10'000'000);
  for (int i = 0; i < 10'000; ++i) h.Record(dist(rng));
  const auto cdf = h.Cdf(100);
  ASSERT_LE(cdf.size(), 100u);
  ASSERT_FALSE(cdf.empty());
  for (size_t i = 1; i < cdf.size(); ++i) {
    EXPECT_GE(cdf[i].first, cdf[i - 1].first);
    EXPECT_GE(cdf[i].second, cdf[i - 1].second);
  }
  EXPECT_DOUBLE_EQ(cdf.back().second, 1.0);
  // Thinned to one point: the last; to none: nothing. Never more than asked for.
  const auto one = h.Cdf(1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], cdf.back());
  EXPECT_TRUE(h.Cdf(0).empty());
  EXPECT_EQ(h.Cdf(2).size(), 2u);
}

}  // namespace
}  // namespace chronoserve
