// A start that a shutdown signal stopped (Server::StopLoading, what the first SIGTERM during loading
// calls) returns without the server ever looking ready: ServerReady, ModelReady and health stay
// false / NOT_SERVING until the caller's Shutdown. In process, real gRPC; every RPC has a deadline.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "client/inference_client.h"
#include "proto/inference.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

TEST(StoppedStartTest, AStartStoppedBySignalNeverReportsReady) {
  // One model, never loaded: the stop came first.
  testing::TempDir repo("cs_stopped_start");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", examples::ModelOptions{}).ok());
  auto server = server::Server::Create(testing::TestServerOptions(repo.path()));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE((*server)->StopLoading()) << "the signal arrived before or during loading";
  const absl::Status started = (*server)->Start();
  ASSERT_TRUE(started.ok()) << started;

  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::ServerReadyResponse ready;
  const grpc::Status status = stub->ServerReady(&ctx, inference::ServerReadyRequest(), &ready);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(ready.ready()) << "ServerReady answered true after a signal stopped the start";

  grpc::ClientContext live_ctx;
  live_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub->ServerLive(&live_ctx, inference::ServerLiveRequest(), &live).ok());
  EXPECT_TRUE(live.live()) << "the server is up, only not ready";

  grpc::ClientContext model_ctx;
  model_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::ModelReadyRequest model_request;
  model_request.set_name("mlp");
  inference::ModelReadyResponse model_ready;
  const grpc::Status model_status = stub->ModelReady(&model_ctx, model_request, &model_ready);
  EXPECT_FALSE(model_status.ok() && model_ready.ready()) << "ModelReady answered true for a model never loaded";

  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const char* service : {"", "inference.GRPCInferenceService"}) {
    grpc::ClientContext health_ctx;
    health_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status checked = health->Check(&health_ctx, request, &response);
    if (std::string(service).empty()) {  // the server as a whole: NOT_SERVING
      ASSERT_TRUE(checked.ok()) << checked.error_message();
      EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    } else {  // named only once READY: NOT_FOUND ("service name unknown") until then, never SERVING
      EXPECT_FALSE(checked.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING)
          << "'" << service << "' SERVING after a signal stopped the start";
    }
  }
  (*server)->Shutdown();
}

// ServerReady through real gRPC, with a deadline.
bool ServerReady(const std::string& address) {
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::ServerReadyResponse ready;
  const grpc::Status status = stub->ServerReady(&ctx, inference::ServerReadyRequest(), &ready);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return ready.ready();
}

// A stop after READY says so (false) and leaves the server ready until Shutdown; a stop racing the
// end of Start (sent the moment its models are loaded, so in the stretch between the last model and
// READY) either came first (true: never ready) or after (false: ready), never both.
TEST(StoppedStartTest, AStopRacingTheStartsEndIsEitherBeforeReadyOrAfter) {
  testing::TempDir repo("cs_stop_race");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", examples::ModelOptions{}).ok());
  {
    auto server = server::Server::Create(testing::TestServerOptions(repo.path()));
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->Start().ok());
    EXPECT_FALSE((*server)->StopLoading()) << "the server was READY before the stop";
    EXPECT_TRUE(ServerReady("127.0.0.1:" + std::to_string((*server)->port())));
    (*server)->Shutdown();
  }
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(round);
    auto server = server::Server::Create(testing::TestServerOptions(repo.path()));
    ASSERT_TRUE(server.ok()) << server.status();
    std::atomic<bool> start_returned{false};
    std::atomic<bool> before_ready{false};
    std::thread stopper([&] {
      // Bounded: Start returning (or 30 s) ends the spin too, and the stop then comes after.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while ((*server)->registry().Ready().empty() && !start_returned.load() &&
             std::chrono::steady_clock::now() < give_up) {
      }
      before_ready = (*server)->StopLoading();
    });
    const absl::Status started = (*server)->Start();
    start_returned = true;
    stopper.join();
    ASSERT_TRUE(started.ok()) << started;
    EXPECT_EQ(ServerReady("127.0.0.1:" + std::to_string((*server)->port())), !before_ready.load())
        << (before_ready ? "ready after a stop that came before READY" : "not ready, yet the stop came after");
    (*server)->Shutdown();
  }
}

}  // namespace
}  // namespace chronoserve
