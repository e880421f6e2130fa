#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "server/scheduler/model_runtime.h"
#include "server/scheduler/warmup_sizes.h"
#include "tests/fakes/recording_instance.h"

namespace chronoserve::server {
namespace {

ModelSpec Spec(int max_batch_size) {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = max_batch_size;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {3, -1}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  WarmupSpec w;
  w.batch_size = 2;
  w.count = 3;
  w.input_dims["INPUT__0"] = {3, 9};
  spec.warmups.push_back(w);
  return spec;
}

TEST(WarmupTest, ReadyOnlyAfterEveryWorkerRanEveryBatchSize) {
  const ModelSpec spec = Spec(5);
  std::vector<testing::RecordingInstance*> fakes;
  std::vector<std::unique_ptr<ModelInstance>> instances;
  for (int i = 0; i < 2; ++i) {
    auto fake = std::make_unique<testing::RecordingInstance>(spec, nullptr);
    fakes.push_back(fake.get());
    instances.push_back(std::move(fake));
  }
  WarmupOptions options;
  options.runs_per_batch_size = 2;
  auto runtime = ModelRuntime::Create(spec, std::move(instances), options, SteadyClock::Get());
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_TRUE((*runtime)->ready());
  for (auto* fake : fakes) {
    const std::vector<int64_t> sizes = fake->sizes();
    // 3 configured model_warmup runs at batch 2, then 2 runs at each size 1..5.
    ASSERT_EQ(sizes.size(), 3u + 2u * 5u);
    EXPECT_EQ(std::multiset<int64_t>(sizes.begin(), sizes.begin() + 3), (std::multiset<int64_t>{2, 2, 2}));
    for (int64_t b = 1; b <= 5; ++b) {
      EXPECT_EQ(std::count(sizes.begin() + 3, sizes.end(), b), 2) << "batch size " << b;
    }
    // Every run, the per-batch-size ones too, has the sample's variable dim (9), not 1: a model
    // that cannot run with 1 there still loads.
    const std::vector<std::string> keys = fake->shape_keys();
    ASSERT_FALSE(keys.empty());
    EXPECT_THAT(keys, ::testing::Each(keys.front()));
    EXPECT_THAT(keys.front(), ::testing::HasSubstr("9"));
  }
  EXPECT_GT((*runtime)->warmup_ns(), 0) << "26 runs on a steady clock take time";
  (*runtime)->Stop();
  EXPECT_FALSE((*runtime)->ready());
}

// Raises `stop` during its `at`-th run, as a shutdown signal during the warm-up would; counts its
// runs in `runs`, which outlives it (a failed load destroys the instance).
class StopDuringRun final : public ModelInstance {
 public:
  StopDuringRun(const ModelSpec& spec, std::atomic<bool>* stop, int at, std::atomic<int>* runs)
      : recording_(spec, nullptr), stop_(stop), at_(at), runs_(runs) {}
  absl::Status Execute(Batch& batch, BatchTiming* timing) override {
    if (++*runs_ == at_) stop_->store(true);
    return recording_.Execute(batch, timing);
  }
  int gpu() const override { return -1; }
  std::string device_name() const override { return "fake"; }

 private:
  testing::RecordingInstance recording_;
  std::atomic<bool>* const stop_;
  const int at_;
  std::atomic<int>* const runs_;
};

// UNAVAILABLE, as a model skipped at shutdown: the registry answers NOT_FOUND only for a model that
// failed to load, and a stopped warm-up is no failure of the model.
TEST(WarmupTest, AStopRequestEndsTheWarmupBeforeItsNextRunAndLeavesTheModelUnavailable) {
  ModelSpec spec = Spec(5);
  spec.warmups[0].count = 2147483647;  // what a config may ask for
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0};
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::make_unique<StopDuringRun>(spec, &stop, 4, &runs));
  WarmupOptions options;
  options.stop = &stop;
  auto runtime = ModelRuntime::Create(spec, std::move(instances), options, SteadyClock::Get());
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kUnavailable) << runtime.status();
  EXPECT_THAT(std::string(runtime.status().message()), ::testing::HasSubstr("warm-up stopped: the server is shutting down"));
  EXPECT_EQ(runs.load(), 4) << "no run after the one during which the stop came";
}

TEST(WarmupTest, NonBatchingModelWarmsOnce) {
  ModelSpec spec = Spec(0);
  spec.warmups.clear();
  auto fake = std::make_unique<testing::RecordingInstance>(spec, nullptr);
  auto* raw = fake.get();
  std::vector<std::unique_ptr<ModelInstance>> instances;
  instances.push_back(std::move(fake));
  auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get());
  ASSERT_TRUE(runtime.ok());
  EXPECT_EQ(raw->sizes(), (std::vector<int64_t>{1, 1}));
}

// parameters { warmup_batch_sizes }: the sizes named (sorted, once each), "none" or "all"; the
// config's model_warmup samples run whatever it says.
TEST(WarmupTest, WarmupBatchSizesNamesTheSizesTheWarmupRuns) {
  struct Case {
    const char* value;
    std::vector<int64_t> sizes;  // after the 3 model_warmup runs at batch 2
  };
  const Case cases[] = {
      {"all", {1, 1, 2, 2, 3, 3, 4, 4, 5, 5}},
      {" 4, 1,4 ", {1, 1, 4, 4}},
      {"5", {5, 5}},
      {"None", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    ModelSpec spec = Spec(5);
    spec.parameters[kWarmupBatchSizesKey] = c.value;
    auto fake = std::make_unique<testing::RecordingInstance>(spec, nullptr);
    auto* raw = fake.get();
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::move(fake));
    auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get());
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    std::vector<int64_t> want = {2, 2, 2};
    want.insert(want.end(), c.sizes.begin(), c.sizes.end());
    EXPECT_EQ(raw->sizes(), want);
    EXPECT_TRUE((*runtime)->ready());
  }
}

// A worker that will replay CUDA graphs warms only what runs eagerly: its buckets (a batch up to
// the largest is padded to one) and every size above the largest; "all" and a list still rule.
TEST(WarmupTest, AGraphWorkerWarmsItsBucketsAndTheSizesAboveThemUnlessTheConfigSaysOtherwise) {
  struct Case {
    const char* value;  // nullptr: no parameter
    std::vector<int> buckets;
    std::vector<int64_t> sizes;
  };
  const Case cases[] = {
      {nullptr, {1, 2, 4}, {1, 1, 2, 2, 4, 4, 5, 5, 6, 6}},
      {nullptr, {6, 2}, {2, 2, 6, 6}},
      {nullptr, {}, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}},
      {"all", {1, 2, 4}, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}},
      {"3", {1, 2, 4}, {3, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.buckets) + (c.value != nullptr ? c.value : " (no parameter)"));
    ModelSpec spec = Spec(6);
    spec.warmups.clear();
    if (c.value != nullptr) spec.parameters[kWarmupBatchSizesKey] = c.value;
    auto fake = std::make_unique<testing::RecordingInstance>(spec, nullptr);
    fake->set_graph_buckets(c.buckets);
    auto* raw = fake.get();
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::move(fake));
    auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get());
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    EXPECT_EQ(raw->sizes(), c.sizes);
    std::vector<int> distinct;
    for (int64_t size : c.sizes) {
      if (distinct.empty() || distinct.back() != size) distinct.push_back(static_cast<int>(size));
    }
    EXPECT_EQ((*runtime)->workers()[0]->warmup_sizes(), distinct);
  }
}

TEST(WarmupTest, FormatBatchSizesShowsRunsOfThreeOrMoreAsRanges) {
  EXPECT_EQ(FormatBatchSizes({}), "");
  EXPECT_EQ(FormatBatchSizes({1}), "1");
  EXPECT_EQ(FormatBatchSizes({1, 2}), "1,2");
  EXPECT_EQ(FormatBatchSizes({1, 2, 3}), "1-3");
  EXPECT_EQ(FormatBatchSizes({1, 2, 4, 8, 16, 17, 18, 19, 128}), "1,2,4,8,16-19,128");
}

TEST(WarmupTest, ABadWarmupBatchSizesFailsTheLoadNamingTheModelKeyAndValue) {
  struct Case {
    int max_batch_size;
    const char* value;
    const char* why;
  };
  const Case cases[] = {
      {5, "1,6", "model 'm': parameter warmup_batch_sizes = \"1,6\": 6 exceeds max_batch_size 5"},
      {5, "1,,2", "'' is not a positive integer"},
      {5, "0", "'0' is not a positive integer (give sizes as \"1,8,32\", or \"all\" or \"none\")"},
      {5, "some", "'some' is not a positive integer"},
      {0, "2", "2: the model does not batch (max_batch_size 0), so 1 is its only size"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    ModelSpec spec = Spec(c.max_batch_size);
    spec.warmups.clear();
    spec.parameters[kWarmupBatchSizesKey] = c.value;
    std::vector<std::unique_ptr<ModelInstance>> instances;
    instances.push_back(std::make_unique<testing::RecordingInstance>(spec, nullptr));
    auto runtime = ModelRuntime::Create(spec, std::move(instances), WarmupOptions{}, SteadyClock::Get());
    ASSERT_FALSE(runtime.ok());
    EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(runtime.status().message()), ::testing::HasSubstr(c.why));
  }
  ModelSpec one = Spec(0);
  one.warmups.clear();
  one.parameters[kWarmupBatchSizesKey] = "1";
  auto sizes = WarmupBatchSizesFromSpec(one);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(*sizes, std::vector<int>{1});
}

}  // namespace
}  // namespace chronoserve::server
