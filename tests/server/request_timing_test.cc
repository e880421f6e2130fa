// --request-timing off, over real gRPC: the in-process server (ServerOptions::request_timing) and
// the real binary (the flag). Responses carry no timing.* parameter and no server-timing trailer,
// outputs are still right, and ModelStatistics still counts requests with their queue and total.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;

constexpr absl::Duration kWait = absl::Seconds(60);

Tensor PolicyInput(int64_t batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> shape = {batch, 4, 20, 20};
  return Tensor{"INPUT__0", DataType::kFp32, shape, RandomTensorBytes(DataType::kFp32, ElementCount(shape), rng)};
}

// One ModelInfer over the raw stub, so that every response parameter and trailer can be seen.
struct RawInfer {
  grpc::Status status;
  inference::ModelInferResponse response;
  std::multimap<std::string, std::string> trailers;  // copied: the context's views die with it
};

RawInfer Infer(InferenceClient& c, const std::string& model, const Tensor& input) {
  RawInfer out;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  const auto request = InferenceClient::BuildRequest(model, {input}, {});
  out.status = c.stub()->ModelInfer(&ctx, request, &out.response);
  for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
    out.trailers.emplace(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
  }
  return out;
}

void ExpectNoTiming(const RawInfer& r) {
  for (const auto& [key, value] : r.response.parameters()) {
    EXPECT_FALSE(absl::StartsWith(key, "timing.")) << "unexpected parameter " << key;
  }
  EXPECT_EQ(r.trailers.count(std::string(kServerTimingKey)), 0u) << "no server-timing trailer";
}

void ExpectMatchesReference(const RawInfer& r, const std::string& model_path, const Tensor& input) {
  const auto want = testing::TorchReference(model_path, {input});
  ASSERT_EQ(r.response.raw_output_contents_size(), static_cast<int>(want.size()));
  for (size_t k = 0; k < want.size(); ++k) {
    const std::string& got = r.response.raw_output_contents(static_cast<int>(k));
    ASSERT_EQ(got.size(), want[k].size() * sizeof(float));
    for (size_t i = 0; i < want[k].size(); ++i) {
      float v;
      std::memcpy(&v, got.data() + sizeof(float) * i, sizeof(float));
      ASSERT_NEAR(v, want[k][i], 1e-5) << "output " << k << " element " << i;
    }
  }
}

TEST(RequestTimingOffTest, NoTimingInResponsesOutputsRightStatisticsStillCount) {
  testing::TempDir repo("cs_timing_off");
  examples::ModelOptions policy;
  policy.max_batch_size = 8;
  policy.max_queue_delay_us = 2000;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy_net", policy).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.request_timing = false;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto c = testing::ConnectTestClient(address);
  const std::string model_path = repo.path() + "/policy_net/1/model.pt";

  auto metadata = c->ServerMetadata();
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_THAT(metadata->extensions(), ::testing::Not(::testing::Contains("server_timing")));

  constexpr int kSequential = 5;
  for (int i = 0; i < kSequential; ++i) {
    const Tensor input = PolicyInput(3, 100 + i);
    const RawInfer r = Infer(*c, "policy_net", input);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ExpectNoTiming(r);
    ExpectMatchesReference(r, model_path, input);
  }
  // Concurrent requests are batched as usual and still get their own rows and no timing.
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto own = testing::ConnectTestClient(address);
      for (int i = 0; i < kPerThread; ++i) {
        const Tensor input = PolicyInput(1, 1000 + 10 * t + i);
        const RawInfer r = Infer(*own, "policy_net", input);
        ASSERT_TRUE(r.status.ok()) << r.status.error_message();
        ExpectNoTiming(r);
        ExpectMatchesReference(r, model_path, input);
      }
    });
  }
  for (auto& th : threads) th.join();

  auto stats = c->ModelStatistics("policy_net");
  ASSERT_TRUE(stats.ok()) << stats.status();
  const auto& s = stats->model_stats(0);
  constexpr uint64_t kRequests = kSequential + kThreads * kPerThread;
  EXPECT_EQ(s.inference_stats().success().count(), kRequests);
  EXPECT_GT(s.inference_stats().success().ns(), 0u) << "server_total is host-timed: kept";
  EXPECT_EQ(s.inference_stats().queue().count(), kRequests);
  EXPECT_EQ(s.inference_count(), kSequential * 3u + kThreads * kPerThread);
  EXPECT_GE(s.execution_count(), 1u);
  EXPECT_LE(s.execution_count(), kRequests);
  EXPECT_EQ(s.inference_stats().compute_infer().count(), 0u) << "device spans not measured: not reported";
  EXPECT_EQ(s.batch_stats_size(), 0);
}

TEST(RequestTimingOffTest, OnIsTheDefaultAndAdvertised) {
  testing::TempDir repo("cs_timing_on");
  examples::ModelOptions mlp;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto metadata = c->ServerMetadata();
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_THAT(metadata->extensions(), ::testing::Contains("server_timing"));
  std::mt19937_64 rng(5);
  const Tensor input{"INPUT__0", DataType::kFp32, {2, 64}, RandomTensorBytes(DataType::kFp32, 128, rng)};
  const RawInfer r = Infer(*c, "mlp", input);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.response.parameters().contains("timing.compute_ns"));
  EXPECT_EQ(r.trailers.count(std::string(kServerTimingKey)), 1u);
}

// The real binary: `--request-timing off` is accepted and acted on, anything but on/off is refused.
TEST(RequestTimingOffTest, BinaryFlag) {
  testing::TempDir repo("cs_timing_flag");
  examples::ModelOptions mlp;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  auto refused = testing::RunProgram({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port", "0",
                                      "--warmup-runs", "1", "--allow-metrics", "false", "--gpu-monitor-interval-ms", "0",
                                      "--request-timing", "maybe"},
                                     kWait);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_NE(refused->first, 0);
  EXPECT_THAT(refused->second, ::testing::HasSubstr("--request-timing"));

  auto started = testing::StartTestServer(repo.path(), {"--request-timing", "off"}, kWait);
  ASSERT_TRUE(started.ok()) << started.status();
  auto& server = *started->process;
  EXPECT_THAT(server.output(), ::testing::HasSubstr("request timing off"));
  auto c = testing::ConnectTestClient(started->url);
  std::mt19937_64 rng(6);
  const Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)};
  const RawInfer r = Infer(*c, "mlp", input);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ExpectNoTiming(r);
  auto decoded = InferenceClient::DecodeResponse(r.response);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/mlp/1/model.pt", {input}, decoded->outputs), "");
  server.Signal(SIGTERM);
  const auto code = server.WaitForExit(kWait);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << server.output();
}

}  // namespace
}  // namespace chronoserve
