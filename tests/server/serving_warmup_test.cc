// The server's serving warm-up (server/grpc/serving_warmup.h) on the real server, 127.0.0.1, real
// gRPC: it reaches every model before READY, its requests are counted in no statistics, and only
// the server's own token hides a request.
#include <gtest/gtest.h>

#include <filesystem>

#include "client/inference_client.h"
#include "server/grpc/serving_warmup.h"
#include "server/repository/model_config_loader.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;

class ServingWarmupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new testing::TempDir("cs_serving_warmup");
    examples::ModelOptions policy;
    policy.max_batch_size = 8;
    ASSERT_TRUE(examples::WritePolicyNet(repo_->path(), "policy_net", policy).ok());
    examples::ModelOptions plain;
    plain.max_batch_size = 0;
    plain.dynamic_batching = false;
    ASSERT_TRUE(examples::WriteScaleModel(repo_->path(), "scale_nobatch", DataType::kFp32, plain).ok());
  }
  static void TearDownTestSuite() { delete repo_; }

  static std::unique_ptr<server::Server> Start(int serving_warmup_requests) {
    server::ServerOptions options = testing::TestServerOptions(repo_->path());
    options.serving_warmup_requests = serving_warmup_requests;
    return testing::StartServer(options);
  }

  // The model's statistics as a client reads them (asserts they came back).
  static inference::ModelStatistics Stats(const server::Server& server, const std::string& model) {
    auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server.port()));
    auto stats = client->ModelStatistics(model);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok() || stats->model_stats_size() != 1) return {};
    return stats->model_stats(0);
  }

  static inline testing::TempDir* repo_ = nullptr;
};

TEST_F(ServingWarmupTest, ReachesEveryModelBeforeReadyAndIsCountedNowhere) {
  auto server = Start(3);
  ASSERT_NE(server, nullptr);
  const server::ServingWarmupReport& report = server->serving_warmup_report();
  // policy_net: 3 unary at batch 1, 3 at batch 8, a stream of 3; scale_nobatch: 3 unary, a stream of 3.
  EXPECT_EQ(report.sent, 9 + 6);
  EXPECT_EQ(report.failed, 0) << report.first_error;
  EXPECT_GT(report.elapsed_ns, 0);
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(client->ServerReady()), "true");
  EXPECT_EQ(testing::Answer(client->ModelReady("policy_net")), "true");
  for (const std::string model : {"policy_net", "scale_nobatch"}) {
    const inference::ModelStatistics s = Stats(*server, model);
    EXPECT_EQ(s.inference_count(), 0u) << model;
    EXPECT_EQ(s.execution_count(), 0u) << model;
    EXPECT_EQ(s.inference_stats().success().count(), 0u) << model;
    EXPECT_EQ(s.inference_stats().fail().count(), 0u) << model;
    EXPECT_EQ(s.batch_stats_size(), 0) << model;
    EXPECT_EQ(s.last_inference(), 0u) << model;
  }
}

// A model with a long batching window: the warm-up's batch-1 requests cannot fill a batch, and each
// used to wait the whole window, holding READY back 2 x 30 s here. They go at once now.
TEST(ServingWarmupWindowTest, ALongBatchingWindowDoesNotHoldReadyBack) {
  testing::TempDir repo("cs_serving_warmup_window");
  examples::ModelOptions slow_window;
  slow_window.max_batch_size = 8;
  slow_window.max_queue_delay_us = 30'000'000;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", slow_window).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.serving_warmup_requests = 2;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  const server::ServingWarmupReport& report = server->serving_warmup_report();
  EXPECT_EQ(report.sent, 6) << "2 unary at batch 1, 2 at batch 8, a stream of 2";
  EXPECT_EQ(report.failed, 0) << report.first_error;
  EXPECT_LT(report.elapsed_ns, int64_t{30'000'000'000}) << "a warm-up request waited out the 30 s window";
}

// A server that comes up with a model that failed to load still serves the others: their serving
// path is warmed as on a server whose every model loaded (it used to be skipped, so the good
// models' first requests were cold).
TEST(ServingWarmupFailedModelTest, WarmsTheModelsThatLoadedBesideOneThatFailed) {
  testing::TempDir repo("cs_serving_warmup_failed");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 4;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "broken", mlp).ok());
  ASSERT_TRUE(std::filesystem::remove(repo.path() + "/broken/1/model.pt"));
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.serving_warmup_requests = 2;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(client->ServerReady()), "false") << "not every model loaded";
  EXPECT_EQ(testing::Answer(client->ModelReady("mlp")), "true");
  const server::ServingWarmupReport& report = server->serving_warmup_report();
  EXPECT_EQ(report.sent, 6) << "mlp only: 2 unary at batch 1, 2 at batch 4, a stream of 2";
  EXPECT_EQ(report.failed, 0) << report.first_error;
}

// The warm-up keeps within each model's own queue limits, so a correct config does not fail it (a
// stream of 256 in flight overflowed max_queue_size 2, a batch larger than --max-queue-mib was
// refused, and messages queued behind each other passed a short queue timeout: a warning at every
// start).
TEST(ServingWarmupLimitsTest, KeepsWithinTheModelsQueueLimits) {
  testing::TempDir repo("cs_serving_warmup_limits");
  examples::ModelOptions small_queue;
  small_queue.max_batch_size = 4;
  small_queue.extra_config = "dynamic_batching { default_queue_policy { max_queue_size: 2 } }\n";
  small_queue.dynamic_batching = false;  // the extra block is the model's dynamic_batching
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "small_queue", small_queue).ok());
  examples::ModelOptions short_timeout = small_queue;
  short_timeout.extra_config = "dynamic_batching { default_queue_policy { default_timeout_microseconds: 50000 } }\n";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "short_timeout", short_timeout).ok());
  examples::ModelOptions big = small_queue;
  big.max_batch_size = 32;  // 32 x 64 FP32 = 8 KiB a request at the max batch
  big.extra_config = "";
  big.dynamic_batching = true;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "big_batches", big).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.serving_warmup_requests = 12;
  options.max_queue_bytes = 4096;  // big_batches' max batch never fits; the others' (1 KiB) do
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  const server::ServingWarmupReport& report = server->serving_warmup_report();
  EXPECT_EQ(report.failed, 0) << report.first_error;
  // small_queue and short_timeout: 12 + 12 unary and a stream of 12; big_batches: batch 1 only.
  EXPECT_EQ(report.sent, 2 * 36 + 24);
}

TEST_F(ServingWarmupTest, OffSendsNothing) {
  auto server = Start(0);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->serving_warmup_report().sent, 0);
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(testing::Answer(client->ServerReady()), "true");
}

TEST_F(ServingWarmupTest, OnlyTheServersTokenHidesARequest) {
  auto server = Start(0);
  ASSERT_NE(server, nullptr);
  auto spec = server::LoadModelDirectory(repo_->path() + "/policy_net");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string target = "127.0.0.1:" + std::to_string(server->port());

  // A forged mark is an ordinary request: 1 unary at batch 1, 1 at batch 8, a stream of 1 (batch 1).
  server::ServingWarmupReport forged = server::RunServingWarmup(target, {*spec}, "0123456789abcdef0123456789abcdef", 1,
                                                                absl::Seconds(60));
  EXPECT_EQ(forged.sent, 3);
  EXPECT_EQ(forged.failed, 0) << forged.first_error;
  const inference::ModelStatistics counted = Stats(*server, "policy_net");
  EXPECT_EQ(counted.inference_count(), 1u + 8u + 1u);
  EXPECT_EQ(counted.inference_stats().success().count(), 3u);
  EXPECT_GE(counted.execution_count(), 1u);

  // The server's token: answered, and nothing changes.
  server::ServingWarmupReport own = server::RunServingWarmup(target, {*spec}, server->serving_warmup_token(), 2,
                                                             absl::Seconds(60));
  EXPECT_EQ(own.sent, 6);
  EXPECT_EQ(own.failed, 0) << own.first_error;
  const inference::ModelStatistics after = Stats(*server, "policy_net");
  EXPECT_EQ(after.inference_count(), counted.inference_count());
  EXPECT_EQ(after.execution_count(), counted.execution_count());
  EXPECT_EQ(after.inference_stats().success().count(), counted.inference_stats().success().count());
  EXPECT_EQ(after.batch_stats_size(), counted.batch_stats_size());
}

TEST_F(ServingWarmupTest, FailuresAreReportedNotFatal) {
  auto server = Start(0);
  ASSERT_NE(server, nullptr);
  auto spec = server::LoadModelDirectory(repo_->path() + "/policy_net");
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->name = "no_such_model";
  server::ServingWarmupReport report = server::RunServingWarmup(
      "127.0.0.1:" + std::to_string(server->port()), {*spec}, server->serving_warmup_token(), 1, absl::Seconds(60));
  EXPECT_EQ(report.sent, 3);
  EXPECT_EQ(report.failed, 3);
  EXPECT_NE(report.first_error.find("model 'no_such_model'"), std::string::npos) << report.first_error;
}

}  // namespace
}  // namespace chronoserve
