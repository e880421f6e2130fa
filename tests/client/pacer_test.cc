#include "client/chronobench/pacer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace chronoserve::client::bench {
namespace {

constexpr int64_t kStart = 5'000'000'000;

std::vector<int64_t> Schedule(Pacer& pacer, int n) {
  std::vector<int64_t> times;
  for (int i = 0; i < n; ++i) times.push_back(pacer.Next());
  return times;
}

TEST(PacerTest, ConstantIsEvenlySpacedWithoutDrift) {
  Pacer pacer(Distribution::kConstant, 3000.0, 0, 1, kStart, 1);  // 333333.33 ns period
  const auto t = Schedule(pacer, 30001);
  EXPECT_EQ(t.front(), kStart);
  for (size_t i = 1; i < t.size(); ++i) {
    const int64_t gap = t[i] - t[i - 1];
    ASSERT_TRUE(gap == 333333 || gap == 333334) << "gap " << gap << " at " << i;
  }
  EXPECT_EQ(t.back() - kStart, 10'000'000'000);  // exactly 10 s after 30000 periods: no drift
}

TEST(PacerTest, PeekDoesNotAdvance) {
  Pacer pacer(Distribution::kPoisson, 100.0, 0, 1, kStart, 9);
  const int64_t peeked = pacer.Peek();
  EXPECT_EQ(pacer.Peek(), peeked);
  EXPECT_EQ(pacer.Next(), peeked);
  EXPECT_GT(pacer.Peek(), peeked);
}

// SkipThrough counts the send times up to and including a moment and leaves the schedule after
// it, as sending each of them would: the times that follow are the same.
TEST(PacerTest, SkipThroughCountsTheTimesThatHadComeAndKeepsTheScheduleAfterThem) {
  for (Distribution d : {Distribution::kConstant, Distribution::kPoisson}) {
    Pacer sent(d, 3000.0, 1, 2, kStart, 17);
    Pacer skipped(d, 3000.0, 1, 2, kStart, 17);
    const auto t = Schedule(sent, 40);
    EXPECT_EQ(skipped.SkipThrough(t.front() - 1), 0) << "nothing had come yet";
    EXPECT_EQ(skipped.SkipThrough(t[24]), 25) << "t[0] .. t[24], the last one included";
    EXPECT_EQ(skipped.Peek(), t[25]);
    EXPECT_EQ(skipped.SkipThrough(t[25] - 1), 0);
    EXPECT_EQ(skipped.SkipThrough(t[39] + 1), 15);
    EXPECT_EQ(skipped.Next(), sent.Next()) << "the schedule after the skip is unchanged";
  }
}

// Far behind a high rate (1e9/s, 50 ms: 5e7 send times) the skip takes no step a time: exact for a
// constant schedule, a Poisson count of the right mean otherwise; either way the next time is after now.
TEST(PacerTest, SkipThroughFarBehindAHighRateIsQuickAndRight) {
  Pacer constant(Distribution::kConstant, 1e9, 0, 1, kStart, 1);
  EXPECT_EQ(constant.SkipThrough(kStart + 50'000'000), 50'000'001) << "t = 0, 1, ..., 50000000 ns";
  EXPECT_EQ(constant.Peek(), kStart + 50'000'001);
  Pacer split(Distribution::kConstant, 3000.0, 1, 2, kStart, 1);  // 666666.67 ns, phase 333333
  Pacer stepped(Distribution::kConstant, 3000.0, 1, 2, kStart, 1);
  const int64_t until = kStart + 1'000'000'000;
  int64_t steps = 0;
  while (stepped.Peek() <= until) {
    stepped.Next();
    ++steps;
  }
  EXPECT_EQ(split.SkipThrough(until), steps) << "the rounding of each time is the schedule's own";
  EXPECT_EQ(split.Peek(), stepped.Peek());
  Pacer poisson(Distribution::kPoisson, 1e9, 0, 1, kStart, 3);
  const int64_t skipped = poisson.SkipThrough(kStart + 50'000'000);
  EXPECT_NEAR(static_cast<double>(skipped), 5e7, 5e4) << "mean 5e7, standard deviation about 7e3";
  EXPECT_GT(poisson.Peek(), kStart + 50'000'000);
}

TEST(PacerTest, ConstantWorkersInterleaveToTheTotalRate) {
  const int kWorkers = 4;
  std::vector<int64_t> all;
  for (int w = 0; w < kWorkers; ++w) {
    Pacer pacer(Distribution::kConstant, 1000.0, w, kWorkers, kStart, 1);
    const auto t = Schedule(pacer, 250);
    all.insert(all.end(), t.begin(), t.end());
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i) ASSERT_EQ(all[i] - all[i - 1], 1'000'000) << i;
}

TEST(PacerTest, PoissonGapsAreExponentialWithTheRequestedMean) {
  const double rate = 2000.0;
  Pacer pacer(Distribution::kPoisson, rate, 0, 1, kStart, 42);
  const int n = 100'000;
  const auto t = Schedule(pacer, n + 1);
  std::vector<double> gaps;
  for (int i = 1; i <= n; ++i) {
    ASSERT_GE(t[i], t[i - 1]);
    gaps.push_back(static_cast<double>(t[i] - t[i - 1]));
  }
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= n;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= n;
  const double expected = 1e9 / rate;
  EXPECT_NEAR(mean, expected, expected * 0.02);
  EXPECT_NEAR(std::sqrt(var) / mean, 1.0, 0.03);  // exponential: coefficient of variation 1
  // Memorylessness check on the CDF: P(gap <= mean) = 1 - 1/e.
  const double below = std::count_if(gaps.begin(), gaps.end(), [&](double g) { return g <= expected; });
  EXPECT_NEAR(below / n, 1 - std::exp(-1.0), 0.01);
}

TEST(PacerTest, PoissonWorkersSumToTheTotalRate) {
  const int kWorkers = 3;
  const double rate = 900.0;
  int64_t count_in_10s = 0;
  for (int w = 0; w < kWorkers; ++w) {
    Pacer pacer(Distribution::kPoisson, rate, w, kWorkers, kStart, 5);
    while (pacer.Next() < kStart + 10'000'000'000) ++count_in_10s;
  }
  EXPECT_NEAR(static_cast<double>(count_in_10s), rate * 10, rate * 10 * 0.05);
}

TEST(PacerTest, SeedMakesPoissonReproducibleAndWorkersDiffer) {
  Pacer a(Distribution::kPoisson, 100.0, 0, 2, kStart, 7);
  Pacer b(Distribution::kPoisson, 100.0, 0, 2, kStart, 7);
  Pacer other_worker(Distribution::kPoisson, 100.0, 1, 2, kStart, 7);
  const auto ta = Schedule(a, 100), tb = Schedule(b, 100), tc = Schedule(other_worker, 100);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

}  // namespace
}  // namespace chronoserve::client::bench
