// bench_inprocess_throughput --batch-mix: the mix a served point ran is parsed exactly and replayed
// in its proportions, spread over the run rather than in runs of one size.
#include "benchmarks/batch_mix.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chronoserve::bench {
namespace {

using ::testing::HasSubstr;

TEST(BatchMixTest, ParsesSizesAndBatchesAndAddsRepeats) {
  auto mix = ParseBatchMix("8:120,9:45,8:5", 128);
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ(*mix, (std::map<int64_t, int64_t>{{8, 125}, {9, 45}}));
}

TEST(BatchMixTest, RefusesWhatIsNotAMixNamingTheEntry) {
  for (const char* bad : {"", "8", "8:", ":3", "8:0", "0:3", "-2:3", "8:x", "129:1", "8:1,,9:1", "8:1:2",
                          "8:1000000000001", "8:600000000000,8:600000000000"}) {
    auto mix = ParseBatchMix(bad, 128);
    EXPECT_FALSE(mix.ok()) << "'" << bad << "' was taken";
    if (!mix.ok()) EXPECT_THAT(mix.status().message(), HasSubstr(bad)) << "the message names the flag";
  }
  EXPECT_TRUE(ParseBatchMix("500:1", 0).ok()) << "no max_batch_size to bound it";
}

TEST(BatchMixTest, ScheduleKeepsTheProportionsInEveryStretch) {
  const std::map<int64_t, int64_t> mix = {{1, 1}, {8, 6}, {16, 3}};  // 10 batches per cycle
  const std::vector<int64_t> sizes = MixSchedule(mix, 1000);
  ASSERT_EQ(sizes.size(), 1000u);
  // Interleaved within a cycle, not in runs of one size: never three of a size in a row.
  EXPECT_EQ(std::vector<int64_t>(sizes.begin(), sizes.begin() + 10),
            (std::vector<int64_t>{8, 16, 8, 1, 8, 16, 8, 8, 16, 8}));
  for (size_t i = 2; i < sizes.size(); ++i) {
    EXPECT_FALSE(sizes[i] == sizes[i - 1] && sizes[i] == sizes[i - 2]) << "a run of three at " << i;
  }
  for (const auto& [size, batches] : mix) {
    EXPECT_EQ(std::count(sizes.begin(), sizes.end(), size), batches * 100) << size;
    // Any 10 batches in a row hold each size within one of its share (spread, not in runs).
    for (size_t start = 0; start + 10 <= sizes.size(); start += 7) {
      const auto n = std::count(sizes.begin() + start, sizes.begin() + start + 10, size);
      EXPECT_LE(std::abs(n - batches), 1) << "size " << size << " at " << start;
    }
  }
  EXPECT_EQ(MixSchedule({{9, 4}}, 5), (std::vector<int64_t>(5, 9)));
  EXPECT_TRUE(MixSchedule({}, 5).empty());
  EXPECT_TRUE(MixSchedule(mix, 0).empty());
  EXPECT_TRUE(MixSchedule(mix, -3).empty());
}

}  // namespace
}  // namespace chronoserve::bench
