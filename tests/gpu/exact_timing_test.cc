// Exact device timing on a real GPU. The policy net at batch 1 is launch-bound when eager: with the
// stream idle, CUDA events around its forward count the GPU waiting for the host to enqueue each
// kernel, so `compute` is about the launch time. With exact_device_timing the worker holds the
// stream until everything is enqueued, and `compute` is device time only. Same weights, same
// kernels: the outputs are identical; medians over 50 alternating requests keep it robust.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/exact_device_timing.h"
#include "server/backend/torch_backend.h"
#include "server/core/synthetic_request.h"
#include "server/repository/model_config_loader.h"
#include "tests/gpu/doubler_model.h"
#include "tests/gpu/load_on_gpu.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;

std::string ExactParam() {
  return std::string("parameters { key: \"") + server::kExactDeviceTimingKey +
         "\" value { string_value: \"true\" } }\n";
}

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

TEST(ExactTimingServerTest, ComputeIsDeviceTimeOnlyAndOutputsAreIdentical) {
  testing::TempDir repo("cs_gpu_exact");
  examples::ModelOptions o;
  o.max_batch_size = 8;  // same seed: same weights in both models
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_normal", o).ok());
  o.extra_config = ExactParam();
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_exact", o).ok());
  auto server = testing::StartServer(repo.path(), 2);
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  std::mt19937_64 rng(77);
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 4, 20, 20}, RandomTensorBytes(DataType::kFp32, 1600, rng)};

  constexpr int kWarmup = 20;
  constexpr int kRuns = 50;
  std::vector<int64_t> normal_compute, exact_compute, exact_launch;
  for (int i = 0; i < kWarmup + kRuns; ++i) {
    auto normal = c->Infer("policy_normal", {input});
    auto exact = c->Infer("policy_exact", {input});
    ASSERT_TRUE(normal.ok()) << normal.status();
    ASSERT_TRUE(exact.ok()) << exact.status();
    ASSERT_TRUE(normal->timing.has_value() && exact->timing.has_value());
    const RequestTiming& n = *normal->timing;
    const RequestTiming& e = *exact->timing;
    ASSERT_FALSE(n.exact_device_timing);
    // The first served runs may re-specialise in TorchScript (new kernels load) and run unheld.
    if (i >= kWarmup) ASSERT_TRUE(e.exact_device_timing) << "request " << i;
    ASSERT_TRUE(e.device_timed);
    ASSERT_TRUE(e.IsConsistent()) << "request " << i;
    ASSERT_LE(e.server_total_ns, exact->e2e_ns);
    ASSERT_GT(e.compute_ns, 0);
    ASSERT_EQ(normal->outputs.size(), exact->outputs.size());
    for (size_t k = 0; k < exact->outputs.size(); ++k) {
      ASSERT_EQ(normal->outputs[k].data, exact->outputs[k].data) << "output " << k << ", request " << i;
    }
    if (i < kWarmup) continue;
    normal_compute.push_back(n.compute_ns);
    exact_compute.push_back(e.compute_ns);
    exact_launch.push_back(e.launch_ns);
  }
  const int64_t normal_p50 = Median(normal_compute);
  const int64_t exact_p50 = Median(exact_compute);
  RecordProperty("normal_compute_p50_ns", std::to_string(normal_p50));
  RecordProperty("exact_compute_p50_ns", std::to_string(exact_p50));
  RecordProperty("exact_launch_p50_ns", std::to_string(Median(exact_launch)));
  std::printf("policy net bs1 eager: compute p50 %.1f us on an idle stream, %.1f us device only; launch p50 %.1f us\n",
              normal_p50 / 1e3, exact_p50 / 1e3, Median(exact_launch) / 1e3);
  EXPECT_LT(exact_p50, normal_p50) << "exact compute excludes the GPU waiting for the host's launches";
}

// In process: the first runs of a shape are not held (kernels load, TorchScript optimises), later
// ones are; a model without the parameter never holds.
TEST(ExactTimingInstanceTest, ShapesAreHeldAfterTheirFirstRuns) {
  testing::TempDir repo("cs_gpu_exact_instance");
  examples::ModelOptions o;
  o.max_batch_size = 4;
  o.extra_config = ExactParam();
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_exact", o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/policy_exact");
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  auto instance = testing::LoadOnGpu0(*spec, devices);
  ASSERT_NE(instance, nullptr);
  std::mt19937_64 rng(3);
  std::vector<std::string> outputs;
  for (int run = 0; run < server::HoldSchedule::kUnheldRuns + 3; ++run) {
    server::Batch batch;
    batch.push_back(server::MakeSyntheticRequest(*spec, 2, &outputs, rng));
    server::BatchTiming timing;
    ASSERT_TRUE(instance->Execute(batch, &timing).ok());
    EXPECT_EQ(timing.exact_device_timing, run >= server::HoldSchedule::kUnheldRuns) << "run " << run;
    EXPECT_GT(timing.compute_ns, 0);
  }
}

// Exact device timing with CUDA graphs, on batches padded to their bucket (3 rows in 4, 5 in 8):
// after a shape's first runs the stream is held for the replay too, the pad rows are zeroed inside
// the hold, and every output is exactly the CPU reference's (x * 2), held or not.
TEST(ExactTimingInstanceTest, PaddedGraphBatchesAreHeldAndExact) {
  testing::TempDir repo("cs_gpu_exact_graphs");
  const std::string dir = testing::WriteDoubler(repo, /*graphs=*/true, 16);
  auto spec = server::LoadModelDirectory(dir);
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->parameters[server::kExactDeviceTimingKey] = "true";
  server::DeviceActivityRegistry devices;
  auto instance = testing::LoadOnGpu0(*spec, devices);
  ASSERT_NE(instance, nullptr);
  ASSERT_EQ(instance->pipeline_depth(), 1) << "a held stream runs one batch at a time";
  std::mt19937_64 rng(5);
  for (int items = 1; items <= 16; ++items) {  // the eager warm-up a worker runs before capturing
    std::vector<std::string> outputs;
    server::Batch batch;
    batch.push_back(server::MakeSyntheticRequest(*spec, items, &outputs, rng));
    server::BatchTiming timing;
    ASSERT_TRUE(instance->Execute(batch, &timing).ok()) << "warm-up, " << items;
  }
  ASSERT_TRUE(instance->PrepareForServing().ok());
  for (int run = 0; run < server::HoldSchedule::kUnheldRuns + 3; ++run) {
    for (int items : {3, 5}) {
      std::vector<std::string> outputs;
      server::Batch batch;
      batch.push_back(server::MakeSyntheticRequest(*spec, items, &outputs, rng));
      server::BatchTiming timing;
      ASSERT_TRUE(instance->Execute(batch, &timing).ok()) << "run " << run << ", " << items << " rows";
      EXPECT_TRUE(timing.cuda_graph) << items << " rows have a bucket";
      EXPECT_EQ(timing.batch_size, items) << "the real rows, not the bucket's";
      EXPECT_EQ(timing.exact_device_timing, run >= server::HoldSchedule::kUnheldRuns)
          << "run " << run << ", " << items << " rows";
      EXPECT_GT(timing.compute_ns, 0);
      const server::InputTensor& in = batch[0]->inputs[0];
      const auto want = testing::TorchReference(
          dir + "/1/model.pt", {client::Tensor{"INPUT__0", DataType::kFp32, in.shape, std::string(in.data, in.byte_size)}});
      ASSERT_EQ(want.size(), 1u);
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_EQ(testing::ReferenceMismatch(outputs[0], want[0], 0.0f), "") << "run " << run << ", " << items << " rows";
    }
  }
}

}  // namespace
}  // namespace chronoserve
