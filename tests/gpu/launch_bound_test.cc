// The launch-bound flag on a real GPU, as the server and chronobench see it: the eager policy net
// at batch 1 spends about as long enqueueing its kernels as the GPU spends running them (its
// CUDA-event compute span is mostly the GPU waiting for them), so the worker counts its batches as
// launch-bound and chronobench's recorder, fed the same responses, warns and suggests CUDA graphs;
// the same net as a CUDA graph at batch 128 is launched in a few microseconds and is flagged by
// neither.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <random>
#include <string>

#include "client/chronobench/latency_recorder.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "server/backend/torch_backend.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

// `runs` requests of `rows` rows after `warmup` unrecorded ones, recorded as chronobench's workers
// record them; also returns the served worker's count of launch-bound batches.
client::bench::LatencyRecorder Serve(server::Server& server, const std::string& model, int64_t rows, int warmup,
                                     int runs, int64_t* worker_launch_bound) {
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server.port()));
  std::mt19937_64 rng(rows);
  const client::Tensor input{"INPUT__0", DataType::kFp32, {rows, 4, 20, 20},
                             RandomTensorBytes(DataType::kFp32, rows * 1600, rng)};
  client::bench::LatencyRecorder recorder;
  recorder.Allocate();
  for (int i = 0; i < warmup + runs; ++i) {
    auto r = c->Infer(model, {input});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || i < warmup) continue;
    EXPECT_TRUE(r->timing.has_value() && r->timing->device_timed) << model;
    client::bench::RequestRecord record;
    record.intended_ns = record.sent_ns = 0;
    record.done_ns = r->e2e_ns;
    record.timing = r->timing;
    recorder.Record(record);
  }
  auto runtime = server.registry().Find(model, "");
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  *worker_launch_bound = runtime.ok() ? (*runtime)->workers().front()->launch_bound_batches() : -1;
  return recorder;
}

// One line on the test's output: how many responses were launch-bound, and the p50 spans.
void Describe(const char* what, const client::bench::LatencyRecorder& r) {
  std::printf("%s: %lld of %lld responses launch-bound, launch p50 %.1f us, compute p50 %.1f us\n", what,
              static_cast<long long>(r.launch_bound()), static_cast<long long>(r.device_timed()),
              r.metric(client::bench::Metric::kLaunch).ValueAtPercentile(50) / 1e3,
              r.metric(client::bench::Metric::kCompute).ValueAtPercentile(50) / 1e3);
}

TEST(GpuLaunchBoundTest, EagerBatchOneIsFlaggedByServerAndChronobenchAndItsGraphAtBatch128IsNot) {
  testing::TempDir repo("cs_gpu_launch_bound");
  examples::ModelOptions o;
  o.max_batch_size = 128;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_eager", o).ok());
  o.extra_config = "optimization { cuda { graphs: true } }\n";
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_graph", o).ok());
  auto server = testing::StartServer(repo.path(), 2);
  ASSERT_NE(server, nullptr);

  int64_t eager_bound = 0;
  const auto eager = Serve(*server, "policy_eager", 1, 20, 40, &eager_bound);
  Describe("eager bs1", eager);
  EXPECT_EQ(eager.device_timed(), 40);
  EXPECT_GT(eager_bound, 0) << "the worker counts launch-bound batches";
  const std::optional<std::string> eager_warning = client::bench::LaunchBoundWarning(eager);
  ASSERT_TRUE(eager_warning.has_value()) << "chronobench flags the eager model";
  EXPECT_NE(eager_warning->find("graphs: true"), std::string::npos) << *eager_warning;

  int64_t graph_bound = 0;
  const auto graph = Serve(*server, "policy_graph", 128, 20, 40, &graph_bound);
  Describe("graph bs128", graph);
  EXPECT_EQ(graph.device_timed(), 40);
  const std::optional<std::string> graph_warning = client::bench::LaunchBoundWarning(graph);
  EXPECT_FALSE(graph_warning.has_value()) << *graph_warning;
  EXPECT_LT(graph.launch_bound(), 20) << "a graph replay at batch 128 is not launch-bound";
}

}  // namespace
}  // namespace chronoserve
