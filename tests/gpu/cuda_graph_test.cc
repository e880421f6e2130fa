// CUDA graphs and keep-warm on a real GPU: graph replays give the eager model's outputs at bucket
// and padded batch sizes, uncaptured shapes run eager, spans stay consistent, a forward() that
// cannot be captured fails its load cleanly without harming the GPU for the next model, and an idle
// worker replays its model (graph or eager) on its own stream, counted and never in the statistics.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/cuda_graph_buckets.h"
#include "server/backend/torch_backend.h"
#include "server/core/synthetic_request.h"
#include "server/repository/model_config_loader.h"
#include "server/scheduler/model_runtime.h"
#include "tests/gpu/counting_instance.h"
#include "tests/gpu/load_on_gpu.h"
#include "tests/server/shared_server_test.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;

constexpr int kMaxBatch = 16;
constexpr int kRowFloats[] = {400, 1, 400};  // the policy net's three outputs, per row
constexpr char kGraphsOn[] = "optimization { cuda { graphs: true } }\n";

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

Tensor PolicyInput(int rows, int zero_rows_after, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t row = 4 * 20 * 20;
  std::string data = RandomTensorBytes(DataType::kFp32, rows * row, rng);
  data.append(static_cast<size_t>(zero_rows_after * row) * sizeof(float), '\0');
  return Tensor{"INPUT__0", DataType::kFp32, {rows + zero_rows_after, 4, 20, 20}, std::move(data)};
}

// Largest |a - b| over the first `rows` rows of every output.
double MaxRowError(const client::InferResult& a, const client::InferResult& b, int rows) {
  if (a.outputs.size() != 3 || b.outputs.size() != 3) return HUGE_VAL;
  double worst = 0;
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < rows * kRowFloats[k]; ++i) {
      float x, y;
      std::memcpy(&x, a.outputs[k].data.data() + 4 * i, 4);
      std::memcpy(&y, b.outputs[k].data.data() + 4 * i, 4);
      const double d = std::fabs(x - y);
      if (!(d <= worst)) worst = d;  // not std::max: it would drop a NaN
    }
  }
  return worst;
}

class CudaGraphServerTest : public testing::SharedServerTest<CudaGraphServerTest, 2> {
 public:
  static constexpr char kRepoName[] = "cs_gpu_graphs";
  static void WriteModels(const testing::TempDir& repo) {
    examples::ModelOptions o;
    o.max_batch_size = kMaxBatch;  // same seed everywhere: same weights
    o.extra_config = kGraphsOn;
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_graph", o).ok());
    o.extra_config = std::string(kGraphsOn) + Param("cuda_graph_batch_sizes", "1,4");
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_sparse", o).ok());
    o.extra_config = "";
    ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_eager", o).ok());
    o.extra_config = kGraphsOn;
    ASSERT_TRUE(examples::WriteAddSub(repo.path(), "addsub_graph", o).ok());
  }

 protected:
  client::InferResult Infer(const std::string& model, const Tensor& input) {
    auto r = client_->Infer(model, {input});
    EXPECT_TRUE(r.ok()) << model << ": " << r.status();
    return r.ok() ? *std::move(r) : client::InferResult{};
  }
};

TEST_F(CudaGraphServerTest, GraphReplayEqualsEagerAtBucketAndPaddedBatchSizes) {
  const std::vector<int> buckets = server::DefaultGraphBuckets(kMaxBatch);
  for (int batch : {1, 2, 3, 4, 5, 8, 13, 16}) {
    const int bucket = server::BucketFor(buckets, batch);
    const auto graph = Infer("policy_graph", PolicyInput(batch, 0, 100 + batch));
    ASSERT_TRUE(graph.timing.has_value());
    EXPECT_TRUE(graph.timing->cuda_graph) << "batch " << batch << " replays the bucket-" << bucket << " graph";
    EXPECT_EQ(graph.timing->batch_size, batch);
    // Same kernels on the same rows: the eager model run at the bucket size on zero-padded input.
    const auto padded = Infer("policy_eager", PolicyInput(batch, bucket - batch, 100 + batch));
    ASSERT_TRUE(padded.timing.has_value());
    EXPECT_FALSE(padded.timing->cuda_graph);
    EXPECT_LE(MaxRowError(graph, padded, batch), 1e-6) << "batch " << batch << " vs eager at " << bucket;
    // And the eager model at the request's own size (cuDNN may pick other kernels: TF32-sized tolerance).
    const auto eager = Infer("policy_eager", PolicyInput(batch, 0, 100 + batch));
    EXPECT_LT(MaxRowError(graph, eager, batch), 5e-3) << "batch " << batch;
  }
}

TEST_F(CudaGraphServerTest, UncapturedShapesFallBackToEager) {
  for (int batch : {1, 3, 4, 5, 16}) {
    const auto sparse = Infer("policy_sparse", PolicyInput(batch, 0, 200 + batch));
    ASSERT_TRUE(sparse.timing.has_value());
    EXPECT_EQ(sparse.timing->cuda_graph, batch <= 4) << "buckets 1,4: batch " << batch;
    const int rows = batch <= 4 ? server::BucketFor({1, 4}, batch) - batch : 0;
    const auto eager = Infer("policy_eager", PolicyInput(batch, rows, 200 + batch));
    EXPECT_LE(MaxRowError(sparse, eager, batch), 1e-6) << "batch " << batch;
  }
  // Variable dims: never captured, served eager and correct. Inputs whose sums and differences
  // differ at every element, so swapped inputs or rows show.
  std::vector<float> a = {1.5f, -2, 3.25f, 10, -7.5f, 0.125f, 42}, b = {0.5f, 6, -1, 100, 2.25f, -3, 11};
  auto bytes = [](const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); };
  const Tensor ta{"INPUT__0", DataType::kFp32, {1, 7}, bytes(a)};
  const Tensor tb{"INPUT__1", DataType::kFp32, {1, 7}, bytes(b)};
  auto r = client_->Infer("addsub_graph", {ta, tb});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->timing->cuda_graph);
  EXPECT_EQ(testing::AddSubMismatch(ta, tb, r->outputs), "") << "every element of a + b and a - b";
}

TEST_F(CudaGraphServerTest, GraphSpansAreEventTimedAndConsistent) {
  for (int batch : {1, 16}) {
    const Tensor input = PolicyInput(batch, 0, 300 + batch);
    for (int i = 0; i < 50; ++i) {
      auto r = client_->Infer("policy_graph", {input});
      ASSERT_TRUE(r.ok()) << r.status();
      const RequestTiming& t = *r->timing;
      ASSERT_TRUE(t.cuda_graph);
      ASSERT_TRUE(t.device_timed);
      ASSERT_GT(t.h2d_ns, 0);
      ASSERT_GT(t.compute_ns, 0);
      ASSERT_GT(t.launch_ns, 0) << "host time of replay()";
      ASSERT_GT(t.d2h_ns, 0);
      ASSERT_TRUE(t.IsConsistent());
      ASSERT_LE(t.server_total_ns, r->e2e_ns);
    }
  }
}

// One batch of `items` one-item requests with random inputs from `seed`, executed on `instance`.
struct ExecutedBatch {
  absl::Status status;
  server::BatchTiming timing;
  server::Batch batch;
  std::deque<std::vector<std::string>> outputs;  // per request, per output
};

std::unique_ptr<ExecutedBatch> ExecuteBatch(server::ModelInstance& instance, const server::ModelSpec& spec,
                                            int items, uint64_t seed) {
  auto run = std::make_unique<ExecutedBatch>();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < items; ++i) {
    run->outputs.emplace_back();
    run->batch.push_back(server::MakeSyntheticRequest(spec, 1, &run->outputs.back(), rng));
  }
  run->status = instance.Execute(run->batch, &run->timing);
  return run;
}

// What the CPU LibTorch reference makes of request `r`'s inputs; empty when its outputs match it
// within `tolerance` (0 = exactly).
std::string CpuReferenceMismatch(const std::string& model_path, const ExecutedBatch& run, size_t r, float tolerance) {
  std::vector<Tensor> inputs;
  for (const server::InputTensor& in : run.batch[r]->inputs) {
    inputs.push_back(
        Tensor{"INPUT__" + std::to_string(in.index), in.dtype, in.shape, std::string(in.data, in.byte_size)});
  }
  const auto want = testing::TorchReference(model_path, inputs);
  if (want.size() != run.outputs[r].size()) return "output count";
  for (size_t k = 0; k < want.size(); ++k) {
    const std::string mismatch = testing::ReferenceMismatch(run.outputs[r][k], want[k], tolerance);
    if (!mismatch.empty()) return "output " + std::to_string(k) + ": " + mismatch;
  }
  return {};
}

// .item() copies to the host and waits for it: legal eager, invalid under stream capture (the
// TorchScript interpreter rethrows that failure as std::runtime_error). With graphs on, preparing
// the worker fails with FAILED_PRECONDITION naming the model, the bucket and the remedy; the
// capture is ended (the stream no longer capturing, no CUDA error left on the thread); the same
// worker still serves eager; and a capturable model loaded afterwards on the GPU captures its
// graphs and answers as the CPU reference does.
TEST(CudaGraphCaptureFailureTest, AnUncapturableForwardFailsCleanlyAndTheGpuStaysUsable) {
  testing::TempDir repo("cs_gpu_uncapturable");
  repo.WriteFile("syncs/config.pbtxt",
                 std::string("max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 8 }\n"
                             "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\n"
                             "instance_group { kind: KIND_GPU }\n") +
                     kGraphsOn);
  std::filesystem::create_directories(repo.path() + "/syncs/1");
  // The value feeds the output. (A NaN test, `t = float(x.sum().item())` then `if t != t: return x`,
  // was optimised away by TorchScript with its .item(): that forward captured without error on 2.11.)
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/syncs/1/model.pt",
                                          "def forward(self, x):\n"
                                          "  return x * 2.0 + 0.0 * float(x.sum().item())\n"));
  auto syncs_spec = server::LoadModelDirectory(repo.path() + "/syncs");
  ASSERT_TRUE(syncs_spec.ok()) << syncs_spec.status();
  server::DeviceActivityRegistry devices;
  auto syncs = testing::LoadOnGpu0(*syncs_spec, devices);
  ASSERT_NE(syncs, nullptr);
  for (int items = 1; items <= 4; ++items) {
    ASSERT_TRUE(ExecuteBatch(*syncs, *syncs_spec, items, 10 + items)->status.ok()) << "eager warm-up, " << items;
  }
  const absl::Status prepared = syncs->PrepareForServing();
  ASSERT_EQ(prepared.code(), absl::StatusCode::kFailedPrecondition) << prepared;
  const std::string message(prepared.message());
  EXPECT_THAT(message,
              ::testing::HasSubstr("model 'syncs' worker 0 on cuda:0: CUDA graph capture at batch size 4 failed: "));
  EXPECT_THAT(message, ::testing::HasSubstr("TorchScript error: "));
  EXPECT_THAT(message, ::testing::HasSubstr("remove optimization { cuda { graphs: true } } to run it eager"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed capture's error stays with its status";
  ASSERT_NE(syncs->native_stream(), nullptr);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(static_cast<cudaStream_t>(const_cast<void*>(syncs->native_stream())), &capturing),
            cudaSuccess);
  EXPECT_EQ(capturing, cudaStreamCaptureStatusNone) << "the capture was ended on the worker's stream";
  // The same worker, its stream and LibTorch's allocator still serve (eager: no graph was kept).
  const std::string syncs_path = repo.path() + "/syncs/1/model.pt";
  auto eager = ExecuteBatch(*syncs, *syncs_spec, 3, 20);
  ASSERT_TRUE(eager->status.ok()) << eager->status;
  EXPECT_FALSE(eager->timing.cuda_graph);
  for (size_t r = 0; r < eager->batch.size(); ++r) EXPECT_EQ(CpuReferenceMismatch(syncs_path, *eager, r, 0), "");

  // Another model on the same GPU, loaded afterwards: captured, replayed, right.
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.extra_config = kGraphsOn;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  auto policy_spec = server::LoadModelDirectory(repo.path() + "/policy");
  ASSERT_TRUE(policy_spec.ok()) << policy_spec.status();
  auto policy = testing::LoadOnGpu0(*policy_spec, devices);
  ASSERT_NE(policy, nullptr);
  for (int items = 1; items <= 8; ++items) {
    ASSERT_TRUE(ExecuteBatch(*policy, *policy_spec, items, 30 + items)->status.ok()) << "warm-up, " << items;
  }
  ASSERT_TRUE(policy->PrepareForServing().ok());
  EXPECT_NE(policy->native_stream(), syncs->native_stream());
  for (int items : {3, 8}) {
    auto run = ExecuteBatch(*policy, *policy_spec, items, 40 + items);
    ASSERT_TRUE(run->status.ok()) << run->status;
    EXPECT_TRUE(run->timing.cuda_graph) << items << " items replay a graph";
    for (size_t r = 0; r < run->batch.size(); ++r) {
      // cuDNN may use TF32 on the GPU: the tolerance GpuServerTest uses.
      EXPECT_EQ(CpuReferenceMismatch(repo.path() + "/policy/1/model.pt", *run, r, 5e-3f), "")
          << items << " items, request " << r;
    }
  }
}

// PrepareForServing's answer for model `name` on GPU 0 with graphs on: max_batch_size 4, INPUT__0
// of 8 floats, `outputs` (the config's output lines), and forward() `body`.
absl::Status PrepareGraphModel(const std::string& name, const std::string& outputs, const std::string& body) {
  testing::TempDir repo("cs_gpu_" + name);
  repo.WriteFile(name + "/config.pbtxt",
                 "max_batch_size: 4\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: 8 }\n" + outputs +
                     "instance_group { kind: KIND_GPU }\n" + kGraphsOn);
  std::filesystem::create_directories(repo.path() + "/" + name + "/1");
  if (!testing::WriteScriptedModel(repo.path() + "/" + name + "/1/model.pt", "def forward(self, x):\n" + body)) {
    return absl::InternalError("the model could not be written");
  }
  auto spec = server::LoadModelDirectory(repo.path() + "/" + name);
  if (!spec.ok()) return spec.status();
  server::DeviceActivityRegistry devices;
  auto instance = testing::LoadOnGpu0(*spec, devices);
  if (instance == nullptr) return absl::InternalError("the model did not load on GPU 0");
  return instance->PrepareForServing();
}

// A forward whose output breaks the config (FP64 where it declares FP32) fails its capture naming
// the output, as an eager batch would: with warmup_batch_sizes "none" the captures are the only runs
// before READY, and they checked the rows alone, so such a model served and failed every request.
TEST(CudaGraphCaptureFailureTest, ACapturedOutputThatBreaksTheConfigFailsNamingIt) {
  const absl::Status prepared = PrepareGraphModel(
      "wrong", "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\n", "  return x.double() * 2.0\n");
  ASSERT_EQ(prepared.code(), absl::StatusCode::kFailedPrecondition) << prepared;
  EXPECT_THAT(std::string(prepared.message()),
              ::testing::HasSubstr("the graph captured at batch size 4: output 'OUTPUT__0': produced Double, "
                                   "config declares FP32"));
}

// A forward that returns fewer outputs than the config declares fails before its capture, in the
// eager run at the bucket's shape, naming the counts: not as a capture that failed, whose hint
// (.item()) would send its author the wrong way.
TEST(CudaGraphCaptureFailureTest, AForwardWithTooFewOutputsFailsBeforeTheCaptureNamingThem) {
  const absl::Status prepared =
      PrepareGraphModel("few",
                        "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: 8 }\n"
                        "output { name: \"OUTPUT__1\" data_type: TYPE_FP32 dims: 8 }\n",
                        "  return x * 2.0\n");
  ASSERT_FALSE(prepared.ok());
  const std::string message(prepared.message());
  EXPECT_THAT(message, ::testing::HasSubstr("eager run at batch size 4 before its CUDA graph capture: forward() "
                                            "returned 1 outputs, config declares 2"));
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr(".item()")));
}

// Traces place the h2d span by its own end event: a graph batch padded to its bucket zeroes its pad
// rows between h2d and compute, so h2d's end lies at least compute + d2h before the batch's last
// event (event deltas of 0.5 us resolution: 2 us of slack for the two rounded figures).
TEST(CudaGraphSpanTest, H2dEndIsMeasuredForPaddedAndExactBuckets) {
  testing::TempDir repo("cs_gpu_graph_h2d");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.extra_config = kGraphsOn;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/policy");
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  auto policy = testing::LoadOnGpu0(*spec, devices);
  ASSERT_NE(policy, nullptr);
  for (int items = 1; items <= 8; ++items) {
    ASSERT_TRUE(ExecuteBatch(*policy, *spec, items, 50 + items)->status.ok()) << "warm-up, " << items;
  }
  ASSERT_TRUE(policy->PrepareForServing().ok());
  for (int items : {3, 4}) {  // bucket 4: one pad row, then none
    auto run = ExecuteBatch(*policy, *spec, items, 60 + items);
    ASSERT_TRUE(run->status.ok()) << run->status;
    const server::BatchTiming& t = run->timing;
    ASSERT_TRUE(t.cuda_graph);
    EXPECT_GT(t.h2d_ns, 0);
    EXPECT_GT(t.h2d_end_to_done_ns, 0) << items << " items: measured whenever request timing is on";
    EXPECT_GE(t.h2d_end_to_done_ns + 2'000, t.compute_ns + t.d2h_ns) << items << " items";
    for (size_t r = 0; r < run->batch.size(); ++r) {
      EXPECT_EQ(CpuReferenceMismatch(repo.path() + "/policy/1/model.pt", *run, r, 5e-3f), "")
          << items << " items, request " << r;
    }
  }
}

class GpuKeepWarmTest : public ::testing::TestWithParam<bool> {};

TEST_P(GpuKeepWarmTest, IdleWorkerReplaysItsModelCountedNotInStatistics) {
  const bool graphs = GetParam();
  testing::TempDir repo("cs_gpu_keep_warm");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  o.extra_config = (graphs ? std::string(kGraphsOn) : std::string()) + Param("keep_warm_ms", "10");
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  auto spec = server::LoadModelDirectory(repo.path() + "/policy");
  ASSERT_TRUE(spec.ok()) << spec.status();
  server::DeviceActivityRegistry devices;
  FakeClock clock;  // the worker's schedule
  std::vector<testing::CountingInstance*> counters;
  auto runtime = testing::CountingRuntime(*spec, {0}, devices, &clock, &counters);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  testing::CountingInstance* counter = counters.front();
  for (int n = 1; n <= 3; ++n) {
    clock.AdvanceNs(10'000'000);
    (*runtime)->queue().Poke();
    ASSERT_EQ(counter->WaitForRuns(n), n);
  }
  (*runtime)->Stop();  // joins the worker: its counters are final
  EXPECT_TRUE(counter->last_error().ok()) << counter->last_error();
  EXPECT_EQ((*runtime)->workers().front()->keep_warm_runs(), 3);
  EXPECT_EQ((*runtime)->stats().Snapshot().execution_count, 0u) << "keep-warm is not an execution";
}

INSTANTIATE_TEST_SUITE_P(GraphAndEager, GpuKeepWarmTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Graph" : "Eager"; });

}  // namespace
}  // namespace chronoserve
