// The profiler's throughput search and timing-mistake rows against fake instances: no allocator
// here can be made to fail at a chosen batch size, and this machine has no GPU, so FakeInstance
// stands in for a device that runs out of memory above a set size (with the message of a given
// allocator) and reports CUDA-event-style spans. The real backend's CPU runs are in profile_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

#include "tools/profile/model_profiler.h"
#include "tools/profile/profile_report.h"
#include "tools/profile/profile_runs.h"
#include "tools/profile/throughput_search.h"
#include "tools/profile/timing_mistakes.h"

namespace chronoserve {
namespace {
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fake instance: batches of up to `limit` items run (compute 1 µs per item); a larger one fails
// with `oom_message`, as the instance's Guarded() reports an allocator's error.
class FakeInstance final : public server::ModelInstance {
 public:
  FakeInstance(int64_t limit, std::string oom_message) : limit_(limit), oom_message_(std::move(oom_message)) {}
  absl::Status Execute(server::Batch& batch, server::BatchTiming* timing) override {
    int64_t items = 0;
    for (const auto& r : batch) items += r->batch_items;
    largest_ = std::max(largest_, items);
    if (items > limit_) return absl::InternalError(absl::StrCat("model 'fake' worker 0 on cuda:0: ", oom_message_));
    timing->batch_size = items;
    timing->compute_ns = items * 1000;
    timing->launch_ns = 500;
    timing->h2d_ns = 100;
    return absl::OkStatus();
  }
  int gpu() const override { return 0; }
  std::string device_name() const override { return "cuda:0"; }
  int64_t largest() const { return largest_; }

 private:
  const int64_t limit_;
  const std::string oom_message_;
  int64_t largest_ = 0;
};

server::ModelSpec FakeSpec(int max_batch_size) {
  server::ModelSpec spec;
  spec.name = "fake";
  spec.max_batch_size = max_batch_size;
  spec.inputs.push_back({"INPUT__0", DataType::kFp32, {4}});
  spec.outputs.push_back({"OUTPUT__0", DataType::kFp32, {4}});
  return spec;
}

profile::ThroughputSearch Search(FakeInstance& instance, int max_batch_size, int64_t search_max_batch) {
  std::mt19937_64 rng(1);
  profile::SearchOptions options;
  options.max_batch = search_max_batch;
  options.warmup_runs = 1;
  options.repetitions = 3;
  return profile::SearchThroughput(instance, FakeSpec(max_batch_size), {}, options, rng);
}

std::vector<int64_t> Sizes(const profile::ThroughputSearch& search) {
  std::vector<int64_t> sizes;
  for (const profile::ThroughputPoint& p : search.points) sizes.push_back(p.batch_size);
  return sizes;
}

TEST(ProfileSearchTest, SizesDoublePastMaxBatchSizeAndIncludeItAndTheLimit) {
  EXPECT_THAT(profile::SearchSizes(8, 64), ElementsAre(1, 2, 4, 8, 16, 32, 64));
  EXPECT_THAT(profile::SearchSizes(100, 300), ElementsAre(1, 2, 4, 8, 16, 32, 64, 100, 128, 256, 300));
  EXPECT_THAT(profile::SearchSizes(8, 4), ElementsAre(1, 2, 4));
  EXPECT_THAT(profile::SearchSizes(0, 4096), ElementsAre(1));
  // int64 all the way: no doubling wraps.
  const std::vector<int64_t> huge = profile::SearchSizes(8, int64_t{1} << 40);
  EXPECT_EQ(huge.back(), int64_t{1} << 40);
  EXPECT_EQ(huge.size(), 41u);
}

TEST(ProfileSearchTest, StopsAtACudaOutOfMemoryAndReportsTheMemoryLimit) {
  FakeInstance instance(64, "LibTorch error: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)");
  const profile::ThroughputSearch search = Search(instance, 8, 4096);
  EXPECT_THAT(Sizes(search), ElementsAre(1, 2, 4, 8, 16, 32, 64));
  EXPECT_EQ(instance.largest(), 128) << "nothing is tried after the failing size";
  std::ostringstream text;
  profile::ProfileReport report;
  report.throughput = search;
  profile::PrintReport(report, text);
  EXPECT_THAT(text.str(), HasSubstr("memory limit at batch size 128: model 'fake' worker 0 on cuda:0: LibTorch error: "
                                    "CUDA out of memory"));
  EXPECT_THAT(text.str(), HasSubstr("    64 "));
  EXPECT_EQ(search.memory_limit_batch_size, 128);
  EXPECT_EQ(search.stopped_by, "memory limit at batch size 128");
  EXPECT_THAT(search.stop_error, HasSubstr("CUDA out of memory"));
  for (const profile::ThroughputPoint& p : search.points) {
    EXPECT_EQ(p.above_max_batch_size, p.batch_size > 8) << p.batch_size;
    EXPECT_GT(p.items_per_s, 0);
  }
  EXPECT_THAT(Sizes(search), ::testing::Contains(search.best_batch_size));
}

TEST(ProfileSearchTest, StopsAtTheCpuAllocatorsFailureToo) {
  FakeInstance instance(16, "LibTorch error: DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                            "68719476736 bytes. Error code 12 (Cannot allocate memory)");
  const profile::ThroughputSearch search = Search(instance, 4, 4096);
  EXPECT_THAT(Sizes(search), ElementsAre(1, 2, 4, 8, 16));
  EXPECT_EQ(search.memory_limit_batch_size, 32);
  EXPECT_EQ(search.stopped_by, "memory limit at batch size 32");
  EXPECT_THAT(search.stop_error, HasSubstr("DefaultCPUAllocator"));
}

TEST(ProfileSearchTest, AnotherErrorIsNotCalledAMemoryLimit) {
  FakeInstance instance(2, "LibTorch error: shape mismatch");
  const profile::ThroughputSearch search = Search(instance, 8, 4096);
  EXPECT_THAT(Sizes(search), ElementsAre(1, 2));
  EXPECT_EQ(search.memory_limit_batch_size, 0);
  EXPECT_EQ(search.stopped_by, "error at batch size 4");
  EXPECT_THAT(search.stop_error, HasSubstr("shape mismatch"));
}

TEST(ProfileSearchTest, WithoutAFailureItStopsAtTheSearchLimit) {
  FakeInstance instance(1 << 20, "unused");
  const profile::ThroughputSearch search = Search(instance, 8, 48);
  EXPECT_THAT(Sizes(search), ElementsAre(1, 2, 4, 8, 16, 32, 48));
  EXPECT_EQ(search.memory_limit_batch_size, 0);
  EXPECT_EQ(search.stopped_by, "search limit (--search-max-batch 48)");
  EXPECT_EQ(search.stop_error, "");
}

TEST(ProfileSearchTest, RecognisesEveryAllocatorsOutOfMemory) {
  for (const char* message : {"CUDA out of memory. Tried to allocate 20.00 MiB",
                              "cudaHostAlloc failed: cudaErrorMemoryAllocation (out of memory)",
                              "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes",
                              "std::bad_alloc", "Error code 12 (Cannot allocate memory)"}) {
    EXPECT_TRUE(profile::IsOutOfMemory(absl::InternalError(message))) << message;
  }
  EXPECT_FALSE(profile::IsOutOfMemory(absl::InternalError("output 'y': batch dimension is 3, expected 4")));
}

profile::RunSample Sample(int64_t h2d_ns, int64_t compute_ns) {
  profile::RunSample s;
  s.timing.device_timed = true;
  s.timing.h2d_ns = h2d_ns;
  s.timing.compute_ns = compute_ns;
  s.timing.launch_ns = 10'000;
  s.wall_ns = compute_ns + h2d_ns + 5'000;
  return s;
}

TEST(ProfileMistakesTest, CopyRowIsPageableH2dPlusComputeBesideTheCorrectCompute) {
  profile::MistakeSamples samples;
  samples.first = Sample(1'000'000, 1'000'000);
  samples.measured = {Sample(20'000, 100'000), Sample(19'000, 101'000), Sample(21'000, 99'000)};
  samples.pageable = {Sample(60'000, 100'000), Sample(62'000, 100'000), Sample(61'000, 100'000)};
  std::mt19937_64 rng(1);
  const std::vector<profile::TimingMistake> rows = profile::BuildMistakes(samples, rng);
  ASSERT_EQ(rows.size(), 4u);
  const profile::TimingMistake& copy = rows[2];
  EXPECT_TRUE(copy.measured);
  EXPECT_DOUBLE_EQ(copy.mistaken_us, 161.0);
  EXPECT_DOUBLE_EQ(copy.correct_us, 100.0);
  EXPECT_DOUBLE_EQ(copy.ratio, 1.61);
  EXPECT_DOUBLE_EQ(copy.details_us.at("pageable_h2d_us"), 61.0);
  EXPECT_DOUBLE_EQ(copy.details_us.at("pinned_h2d_us"), 20.0);
  EXPECT_THAT(copy.what, HasSubstr("pageable"));
}

TEST(ProfileMistakesTest, CopyRowIsNotMeasuredWhenThePageableRunCouldNotBeMade) {
  profile::MistakeSamples samples;
  samples.first = Sample(1'000, 1'000);
  samples.measured = {Sample(20'000, 100'000)};
  samples.pageable_note = "not measured: the backend staged the inputs";
  std::mt19937_64 rng(1);
  const profile::TimingMistake copy = profile::BuildMistakes(samples, rng)[2];
  EXPECT_FALSE(copy.measured);
  EXPECT_EQ(copy.mistaken_us, 0);
  EXPECT_EQ(copy.ratio, 0);
  EXPECT_EQ(copy.note, "not measured: the backend staged the inputs");
}

}  // namespace
}  // namespace chronoserve
