// The real server, real gRPC, with every RPC on completion-queue threads of its own or on the
// callback API (--grpc-infer-threads).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "client/inference_client.h"
#include "proto/health.grpc.pb.h"
#include "common/tensor_data.h"
#include "common/timing.h"
#include "tests/server/proc_threads.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {
using client::InferenceClient;
using client::Tensor;

// --grpc-infer-threads N: ModelInfer (with every other RPC) on N threads polling completion queues of their own (named
// cs-grpc-cqK, as top -H shows them), or on the callback API with 0; either way correct rows per request, the
// timing parameters and the server-timing trailer, under concurrent calls.
class InferThreadsTest : public ::testing::TestWithParam<int> {};

// grpc.health.v1 Check of `service` on `health`, with a deadline.
grpc::Status CheckHealth(grpc::health::v1::Health::Stub* health, const std::string& service,
                         grpc::health::v1::HealthCheckResponse* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  return health->Check(&ctx, request, response);
}

TEST_P(InferThreadsTest, ModelInferIsServedOnItsQueuesWithRowsTimingAndTrailer) {
  testing::TempDir repo("cs_infer_threads");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  mlp.max_queue_delay_us = 500;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_infer_threads = GetParam();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(testing::ThreadDirs("cs-grpc-cq" + std::to_string(k)).size(), k < GetParam() ? 1u : 0u)
        << "queue thread " << k;
  }
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  const std::string model_path = repo.path() + "/mlp/1/model.pt";
  constexpr int kThreads = 4, kPerThread = 12;
  absl::Mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto c = testing::ConnectTestClient(address);
      for (int i = 0; i < kPerThread; ++i) {
        std::mt19937_64 rng(7000 + t * 100 + i);
        const int64_t items = 1 + (t + i) % 3;
        const Tensor in{"INPUT__0", DataType::kFp32, {items, 64}, RandomTensorBytes(DataType::kFp32, items * 64, rng)};
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        inference::ModelInferResponse response;
        const grpc::Status status = c->stub()->ModelInfer(&ctx, InferenceClient::BuildRequest("mlp", {in}, {}), &response);
        auto decoded = InferenceClient::DecodeResponse(response);
        const auto want = testing::TorchReference(model_path, {in});
        absl::MutexLock lock(&mu);
        if (!status.ok() || !decoded.ok()) {
          errors.push_back(status.ok() ? std::string(decoded.status().message()) : status.error_message());
          continue;
        }
        if (!InferenceClient::DecodeTiming(response).has_value()) errors.push_back("no timing parameters");
        if (ctx.GetServerTrailingMetadata().count(std::string(kServerTimingKey)) != 1) errors.push_back("no trailer");
        const std::string mismatch = testing::ReferenceMismatch(decoded->outputs[0].data, want[0]);
        if (!mismatch.empty()) errors.push_back(mismatch);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  server->Shutdown();
  EXPECT_TRUE(testing::ThreadDirs("cs-grpc-cq0").empty()) << "the queue threads are joined at shutdown";
}

// With the asynchronous API every RPC is on the queues, so gRPC 1.51's callback queue never starts:
// none of its polling threads ("nexting_thread", cores / 2, at least 2) reads the server's
// connections. On the callback API (0) they are there, which shows the check can see them. Every
// other RPC answers on either API, health's Check and Watch included.
TEST_P(InferThreadsTest, EveryRpcIsAnsweredAndOnlyTheCallbackApiStartsGrpcsCallbackThreads) {
  testing::TempDir repo("cs_infer_threads_rpcs");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", examples::ModelOptions{}).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_infer_threads = GetParam();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto c = testing::ConnectTestClient(address);
  for (absl::StatusOr<bool> yes : {c->ServerLive(), c->ServerReady(), c->ModelReady("mlp")}) {
    ASSERT_TRUE(yes.ok()) << yes.status();
    EXPECT_TRUE(*yes);
  }
  EXPECT_EQ(testing::Answer(c->ModelReady("nope")), "false") << "as Triton: not ready, no error";
  auto server_metadata = c->ServerMetadata();
  ASSERT_TRUE(server_metadata.ok()) << server_metadata.status();
  EXPECT_EQ(server_metadata->name(), "chronoserve");
  auto metadata = c->ModelMetadata("mlp");
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->inputs(0).name(), "INPUT__0");
  EXPECT_EQ(c->ModelMetadata("nope").status().code(), absl::StatusCode::kNotFound);
  auto stats = c->ModelStatistics("mlp");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->model_stats(0).name(), "mlp");
  EXPECT_TRUE(c->SystemSharedMemoryStatus().ok());
  // The CUDA shared-memory RPCs are served on either API (a server without a GPU lists nothing).
  auto cuda_regions = c->CudaSharedMemoryStatus();
  ASSERT_TRUE(cuda_regions.ok()) << cuda_regions.status();
  EXPECT_TRUE(c->UnregisterCudaSharedMemory("none_registered").ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelConfigRequest request;
    request.set_name("mlp");
    inference::ModelConfigResponse response;
    const grpc::Status status = c->stub()->ModelConfig(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.config().name(), "mlp");
  }
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const auto check = [&](const std::string& service, grpc::health::v1::HealthCheckResponse* response) {
    return CheckHealth(health.get(), service, response);
  };
  grpc::health::v1::HealthCheckResponse answer;
  ASSERT_TRUE(check("", &answer).ok());
  EXPECT_EQ(answer.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  ASSERT_TRUE(check("inference.GRPCInferenceService", &answer).ok());
  EXPECT_EQ(answer.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(check("no.such.Service", &answer).error_code(), grpc::StatusCode::NOT_FOUND);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("no.such.Service");
    auto watch = health->Watch(&ctx, request);
    ASSERT_TRUE(watch->Read(&answer)) << "Watch sends the status at once";
    EXPECT_EQ(answer.status(), grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN);
    ctx.TryCancel();
  }
  EXPECT_EQ(testing::ThreadDirs("nexting_thread").empty(), GetParam() > 0)
      << "gRPC's callback polling threads: " << testing::ThreadDirs("nexting_thread").size();
  server->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(InferApis, InferThreadsTest, ::testing::Values(0, 1, 3), testing::InferApiName);

// gRPC's default health service is a process-wide switch that a server on the callback API turns on.
// A server on the asynchronous API turns gRPC's off for its own builder only, never the switch, so
// servers built side by side in one process each get the health service they expect.
TEST(InferThreadsHealthTest, AnAsyncServerLeavesTheProcessWideHealthSwitchAlone) {
  grpc::EnableDefaultHealthCheckService(true);  // as a callback-API server in this process does
  testing::TempDir repo("cs_infer_threads_health");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", examples::ModelOptions{}).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_infer_threads = 2;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr) << "gRPC's health service would clash with chronoserve's";
  EXPECT_TRUE(grpc::DefaultHealthCheckServiceEnabled());
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckResponse answer;
  const grpc::Status status = CheckHealth(health.get(), "", &answer);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answer.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(testing::ThreadDirs("nexting_thread").empty()) << "gRPC's callback health service started";
  server->Shutdown();
}

}  // namespace
}  // namespace chronoserve
