// A start that a shutdown signal stopped (Server::StopLoading, what the first SIGTERM during loading
// calls) returns without the server ever looking ready: ServerReady, ModelReady and health stay
// false / NOT_SERVING until the caller's Shutdown. In process, real gRPC; every RPC has a deadline.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "client/inference_client.h"
#include "proto/inference.grpc.pb.h"
#include "tests/server/test_repository.h"

namespace chronoserve {
namespace {

TEST(StoppedStartTest, AStartStoppedBySignalNeverReportsReady) {
  // An empty repository: every model it holds is ready (there are none), so only the stop can keep
  // the server from reporting ready.
  testing::TempDir repo("cs_stopped_start");
  auto server = server::Server::Create(testing::TestServerOptions(repo.path()));
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->StopLoading();  // the signal arrived before or during loading
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
  (*server)->Shutdown();
}

}  // namespace
}  // namespace chronoserve
