// ModelStatistics' durations are the sums of the per-request timings the responses carried: the
// real server on 127.0.0.1, one request at a time (each alone in its batch), the timing.*
// response parameters summed and compared with the statistics' deltas.
//
// What the server records (server/core/model_stats.cc, server/scheduler/worker.cc EndBatch):
//   inference_stats, per request: success = server_total, queue = queue,
//     compute_input = input_stage + h2d, compute_infer = compute, compute_output = d2h + output_stage;
//   batch_stats[size], per executed batch: compute_input = (staged - dequeued) + h2d,
//     compute_infer = compute, compute_output = d2h + (last request's output_done - gpu_done).
// For a batch of one request, staged - dequeued is its input_stage and last output_done - gpu_done
// its output_stage, so both sets of figures equal the responses' sums exactly, to the nanosecond.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "client/inference_client.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using client::Tensor;

constexpr auto kRpcTimeout = std::chrono::seconds(30);

// The model's statistics, the call bounded by a deadline.
absl::StatusOr<inference::ModelStatistics> Statistics(InferenceClient& client, const std::string& model) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
  inference::ModelStatisticsRequest request;
  request.set_name(model);
  inference::ModelStatisticsResponse response;
  const grpc::Status status = client.stub()->ModelStatistics(&ctx, request, &response);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  if (response.model_stats_size() != 1) return absl::InternalError("expected the statistics of one model");
  return response.model_stats(0);
}

// The per-batch-size entry, or an empty one.
inference::InferBatchStatistics BatchStats(const inference::ModelStatistics& stats, uint64_t batch_size) {
  for (const auto& b : stats.batch_stats()) {
    if (b.batch_size() == batch_size) return b;
  }
  return {};
}

struct Sums {
  uint64_t server_total = 0, queue = 0, compute_input = 0, compute_infer = 0, compute_output = 0;
};


// One mlp item of 64 values in [-2, 2).
Tensor RandomMlpInput(std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(64);
  for (float& v : values) v = dist(rng);
  return Tensor{"INPUT__0", DataType::kFp32, {1, 64},
                std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float))};
}

// A server of one CPU mlp ("mlp", max_batch_size 8) in `repo`; null on failure.
std::unique_ptr<server::Server> StartCpuMlp(const testing::TempDir& repo, bool request_timing) {
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  mlp.instance_kind = "KIND_CPU";  // the same figures on any machine; the formulas do not depend on it
  if (!examples::WriteMlp(repo.path(), "mlp", mlp).ok()) return nullptr;
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.request_timing = request_timing;
  return testing::StartServer(options);
}

TEST(ModelStatisticsTimingTest, DurationsAreTheSumsOfTheResponsesTimings) {
  testing::TempDir repo("cs_stats_timing");
  auto server = StartCpuMlp(repo, /*request_timing=*/true);
  ASSERT_NE(server, nullptr);
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));

  auto before = Statistics(*client, "mlp");
  ASSERT_TRUE(before.ok()) << before.status();
  constexpr int kRequests = 12;
  std::mt19937 rng(20261125);
  Sums sums;
  for (int i = 0; i < kRequests; ++i) {
    const Tensor input = RandomMlpInput(rng);
    client::InferOptions options;
    options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kRpcTimeout);
    auto result = client->Infer("mlp", {input}, options);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->outputs.size(), 1u);
    EXPECT_EQ(testing::ReferenceMismatch(result->outputs[0].data,
                                         testing::TorchReference(repo.path() + "/mlp/1/model.pt", {input})[0]),
              "");
    ASSERT_TRUE(result->timing.has_value()) << "request timing is on by default";
    const RequestTiming& t = *result->timing;
    ASSERT_EQ(t.batch_size, 1) << "sent one at a time: each request alone in its batch";
    ASSERT_TRUE(t.IsConsistent());
    sums.server_total += t.server_total_ns;
    sums.queue += t.queue_ns;
    sums.compute_input += t.input_stage_ns + t.h2d_ns;
    sums.compute_infer += t.compute_ns;
    sums.compute_output += t.d2h_ns + t.output_stage_ns;
  }
  // Every figure is recorded before the response is sent (the batch's before its requests are
  // completed, the request's before its response is handed to gRPC): no waiting needed.
  auto after = Statistics(*client, "mlp");
  ASSERT_TRUE(after.ok()) << after.status();
  const auto& a = after->inference_stats();
  const auto& b = before->inference_stats();
  EXPECT_EQ(after->inference_count() - before->inference_count(), uint64_t{kRequests});
  EXPECT_EQ(after->execution_count() - before->execution_count(), uint64_t{kRequests});
  EXPECT_EQ(a.success().count() - b.success().count(), uint64_t{kRequests});
  EXPECT_EQ(a.fail().count() - b.fail().count(), 0u);
  EXPECT_EQ(a.success().ns() - b.success().ns(), sums.server_total);
  EXPECT_EQ(a.queue().count() - b.queue().count(), uint64_t{kRequests});
  EXPECT_EQ(a.queue().ns() - b.queue().ns(), sums.queue);
  EXPECT_EQ(a.compute_input().count() - b.compute_input().count(), uint64_t{kRequests});
  EXPECT_EQ(a.compute_input().ns() - b.compute_input().ns(), sums.compute_input);
  EXPECT_EQ(a.compute_infer().count() - b.compute_infer().count(), uint64_t{kRequests});
  EXPECT_EQ(a.compute_infer().ns() - b.compute_infer().ns(), sums.compute_infer);
  EXPECT_EQ(a.compute_output().count() - b.compute_output().count(), uint64_t{kRequests});
  EXPECT_EQ(a.compute_output().ns() - b.compute_output().ns(), sums.compute_output);
  // The forward did take time: the sums compared above are not all zero.
  EXPECT_GT(sums.compute_infer, 0u);
  EXPECT_GT(sums.server_total, sums.queue + sums.compute_input + sums.compute_infer);

  // Per executed batch of one: (staged - dequeued) + h2d, compute, d2h + (output_done - gpu_done).
  const inference::InferBatchStatistics batch_after = BatchStats(*after, 1);
  const inference::InferBatchStatistics batch_before = BatchStats(*before, 1);
  EXPECT_EQ(batch_after.compute_input().count() - batch_before.compute_input().count(), uint64_t{kRequests});
  EXPECT_EQ(batch_after.compute_input().ns() - batch_before.compute_input().ns(), sums.compute_input);
  EXPECT_EQ(batch_after.compute_infer().count() - batch_before.compute_infer().count(), uint64_t{kRequests});
  EXPECT_EQ(batch_after.compute_infer().ns() - batch_before.compute_infer().ns(), sums.compute_infer);
  EXPECT_EQ(batch_after.compute_output().count() - batch_before.compute_output().count(), uint64_t{kRequests});
  EXPECT_EQ(batch_after.compute_output().ns() - batch_before.compute_output().ns(), sums.compute_output);
}

// With --request-timing off the responses carry no timing, so nothing can be summed exactly: the
// statistics count every request and batch, keep the host-clock figures (success, queue) within what
// the client saw (each server_total lies inside its call's e2e), and leave every device-derived
// figure empty rather than partial.
TEST(ModelStatisticsTimingTest, WithRequestTimingOffOnlyHostFiguresAreRecorded) {
  testing::TempDir repo("cs_stats_untimed");
  auto server = StartCpuMlp(repo, /*request_timing=*/false);
  ASSERT_NE(server, nullptr);
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));

  auto before = Statistics(*client, "mlp");
  ASSERT_TRUE(before.ok()) << before.status();
  constexpr int kRequests = 8;
  std::mt19937 rng(20261126);
  uint64_t e2e_sum = 0;
  for (int i = 0; i < kRequests; ++i) {
    const Tensor input = RandomMlpInput(rng);
    client::InferOptions call;
    call.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kRpcTimeout);
    auto result = client->Infer("mlp", {input}, call);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_FALSE(result->timing.has_value()) << "--request-timing off: no timing parameters";
    ASSERT_GT(result->e2e_ns, 0);
    e2e_sum += static_cast<uint64_t>(result->e2e_ns);
  }
  auto after = Statistics(*client, "mlp");
  ASSERT_TRUE(after.ok()) << after.status();
  const auto& a = after->inference_stats();
  const auto& b = before->inference_stats();
  EXPECT_EQ(after->inference_count() - before->inference_count(), uint64_t{kRequests});
  EXPECT_EQ(after->execution_count() - before->execution_count(), uint64_t{kRequests});
  EXPECT_EQ(a.success().count() - b.success().count(), uint64_t{kRequests});
  EXPECT_EQ(a.queue().count() - b.queue().count(), uint64_t{kRequests});
  EXPECT_GT(a.success().ns() - b.success().ns(), 0u);
  EXPECT_LE(a.success().ns() - b.success().ns(), e2e_sum) << "each server_total lies inside its call";
  EXPECT_LE(a.queue().ns() - b.queue().ns(), a.success().ns() - b.success().ns());
  EXPECT_EQ(a.compute_input().count(), 0u);
  EXPECT_EQ(a.compute_infer().count(), 0u);
  EXPECT_EQ(a.compute_output().count(), 0u);
  EXPECT_EQ(after->batch_stats_size(), 0) << "no per-batch-size durations without the device spans";
}

}  // namespace
}  // namespace chronoserve
