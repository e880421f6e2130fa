// Graceful shutdown with requests in flight: in process (Server::Shutdown while a worker is held
// inside Execute: health NOT_SERVING first, new requests UNAVAILABLE, every accepted request
// answered OK) and the real chronoserve binary (SIGTERM with requests queued: all answered OK,
// exit code 0; a second SIGTERM during a long drain: exit 143 at once). Synchronised with
// notifications, the health Watch stream and the server's log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/inference_client.h"
#include "tests/client/subprocess.h"
#include "tests/client/test_server.h"
#include "proto/health.grpc.pb.h"
#include "tests/server/gated_instance.h"
#include "tests/server/model_control_rpc.h"
#include "tests/server/scheduling_harness.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using testing::Gate;
using testing::GatedInput;
using testing::PendingInfer;

constexpr absl::Duration kWait = absl::Seconds(30);

HealthCheckResponse::ServingStatus Check(Health::Stub* health, const std::string& service) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status status = health->Check(&ctx, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// With ModelInfer on gRPC's callback API (0) and on three ModelInferQueues threads (3: two queues).
class InProcessShutdownTest : public ::testing::TestWithParam<int> {};

TEST_P(InProcessShutdownTest, InFlightRequestsFinishNewOnesAreRefusedAndHealthGoesNotServingFirst) {
  testing::TempDir repo("cs_shutdown");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 2;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.grpc_infer_threads = GetParam();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  testing::Gate gate;
  auto runtime = testing::StartGatedModel(testing::GatedSpec("gated", 4, 0), 1, &gate);
  ASSERT_NE(runtime, nullptr);
  server->registry().Add(runtime);

  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto health = Health::NewStub(channel);
  auto c = testing::ConnectTestClient(address);
  EXPECT_EQ(Check(health.get(), ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(health.get(), "inference.GRPCInferenceService"), HealthCheckResponse::SERVING);
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  HealthCheckRequest watch_request;
  auto watch = health->Watch(&watch_ctx, watch_request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);

  gate.Arm();
  const client::Tensor a_in = GatedInput(1, 31), b_in = GatedInput(2, 32), c_in = GatedInput(1, 33);
  PendingInfer a(c->stub(), "gated", "A", a_in);
  ASSERT_TRUE(gate.WaitHeld(kWait));
  PendingInfer b(c->stub(), "gated", "B", b_in);
  PendingInfer queued_c(c->stub(), "gated", "C", c_in);
  ASSERT_TRUE(runtime->queue().WaitForSize(2, kWait)) << "B and C accepted behind the held batch";

  // Releases the gate (were an ASSERT below to fail) before waiting for Shutdown, which waits for A.
  testing::BackgroundShutdown stopper(server, kWait, [&gate] { gate.Release(); });
  ASSERT_TRUE(watch->Read(&update)) << "the health watch saw the change";
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(a.done()) << "NOT_SERVING came before the in-flight request finished";
  watch_ctx.TryCancel();
  EXPECT_EQ(Check(health.get(), ""), HealthCheckResponse::NOT_SERVING) << "still answering while draining";
  EXPECT_EQ(Check(health.get(), "inference.GRPCInferenceService"), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(testing::WaitUntilDraining(*c, kWait));
  auto refused = c->Infer("gated", {GatedInput(1, 34)});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("shutting down"));
  EXPECT_FALSE(stopper.done()) << "shutdown waits for accepted requests";

  gate.Release();
  for (auto* call : {&a, &b, &queued_c}) {
    const auto status = call->Wait(kWait);
    ASSERT_TRUE(status.has_value()) << "an accepted request was lost";
    EXPECT_TRUE(status->ok()) << status->error_message();
  }
  ASSERT_TRUE(stopper.WaitDone(kWait)) << "Shutdown returned";
  EXPECT_EQ(runtime->stats().Snapshot().inference_count, 4u) << "A (1) + B (2) + C (1) items";
}

// --exit-timeout-secs 0 with a request queued behind a batch the worker is still running (a
// request merely waiting in a batching window now runs at once when the drain starts): the request
// is answered UNAVAILABLE and never runs, and Shutdown returns without losing track of the call
// (the async queues' threads are joined only after the answer's tag came back).
TEST_P(InProcessShutdownTest, ExitTimeoutEndsTheCallsStillQueuedAndShutdownReturns) {
  testing::TempDir repo("cs_shutdown_timeout");
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.exit_timeout_secs = 0;
  options.grpc_infer_threads = GetParam();
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  Gate gate;
  constexpr uint64_t kLongBatchWindowUs = 60'000'000;
  auto runtime = testing::StartGatedModel(testing::GatedSpec("gated", 4, kLongBatchWindowUs), 1, &gate);
  ASSERT_NE(runtime, nullptr);
  server->registry().Add(runtime);
  auto c = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  gate.Arm();
  PendingInfer running(c->stub(), "gated", "R", GatedInput(4, 40));  // a full batch: taken at once
  ASSERT_TRUE(gate.WaitHeld(kWait)) << "the full batch reached the worker";
  PendingInfer queued(c->stub(), "gated", "Q", GatedInput(1, 41));
  ASSERT_TRUE(runtime->queue().WaitForSize(1, kWait)) << "the request waits behind the running batch";

  testing::BackgroundShutdown stopper(server, kWait);
  const auto status = queued.Wait(kWait);
  ASSERT_TRUE(status.has_value()) << "the queued call was never ended";
  EXPECT_FALSE(status->ok());
  // UNAVAILABLE, which a client may retry: the answer gets its moment on the wire before gRPC resets
  // the calls left (it read CANCELLED, or INTERNAL in grpc-js, when the reset came first).
  EXPECT_EQ(status->error_code(), grpc::StatusCode::UNAVAILABLE) << status->error_message();
  EXPECT_THAT(status->error_message(), ::testing::HasSubstr("exit timeout passed while the request was queued"));
  gate.Release();  // the running batch ends; the worker stops
  ASSERT_TRUE(running.Wait(kWait).has_value()) << "the running call was ended";
  ASSERT_TRUE(stopper.WaitDone(kWait)) << "Shutdown returned";
  for (const auto& [id, worker] : gate.executed()) EXPECT_NE(id, "Q") << "the queued request never executed";
  EXPECT_EQ(gate.executed().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(InferApis, InProcessShutdownTest, ::testing::Values(0, 3), testing::InferApiName);

// On the asynchronous API health is chronoserve's own (server/grpc/health_service.h). The server of
// these tests serves mlp on `infer_threads` queue threads with a 120 s exit timeout, far beyond the
// tests' waits, so a Watch that held the shutdown up would fail them.
class HealthWatchShutdownTest : public ::testing::Test {
 protected:
  void Start(int infer_threads) {
    ASSERT_TRUE(examples::WriteMlp(repo_.path(), "mlp", examples::ModelOptions{}).ok());
    server::ServerOptions options = testing::TestServerOptions(repo_.path());
    options.grpc_infer_threads = infer_threads;
    options.exit_timeout_secs = 120;
    server_ = testing::StartServer(options);
    ASSERT_NE(server_, nullptr);
    health_ = Health::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  testing::TempDir repo_{"cs_shutdown_watch"};  // outlives the server
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<Health::Stub> health_;
};

// A Watch left open sees NOT_SERVING, then ends with UNAVAILABLE, and the shutdown returns.
TEST_F(HealthWatchShutdownTest, AnOpenWatchSeesNotServingThenEndsWithoutHoldingTheShutdown) {
  ASSERT_NO_FATAL_FAILURE(Start(2));
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  HealthCheckRequest request;
  request.set_service("inference.GRPCInferenceService");
  auto watch = health_->Watch(&watch_ctx, request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);

  testing::BackgroundShutdown stopper(server_, kWait);
  ASSERT_TRUE(watch->Read(&update)) << "the watch saw the change";
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&update)) << "then the stream ended";
  const grpc::Status end = watch->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE) << end.error_message();
  EXPECT_THAT(end.error_message(), ::testing::HasSubstr("shutting down"));
  EXPECT_TRUE(stopper.WaitDone(kWait)) << "Shutdown returned well before its 120 s deadline";
}

// Watch calls that clients cancel while their statuses are written, racing the server's own end of
// them at shutdown, on two queues of two threads each (a call's tags can come back on two threads
// at once): every call ends, and the shutdown returns well before its 120 s deadline (a call that
// never ended would hold it; one deleted twice or used after its deletion fails under ASan).
TEST_F(HealthWatchShutdownTest, WatchesCancelledWhileTheServerEndsThemAllEnd) {
  ASSERT_NO_FATAL_FAILURE(Start(4));
  constexpr int kWatches = 40;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>> watches;
  for (int i = 0; i < kWatches; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    HealthCheckRequest request;
    request.set_service(i % 2 == 0 ? "" : "inference.GRPCInferenceService");
    watches.push_back(health_->Watch(contexts.back().get(), request));
    HealthCheckResponse first;
    ASSERT_TRUE(watches.back()->Read(&first)) << "watch " << i;
    EXPECT_EQ(first.status(), HealthCheckResponse::SERVING);
  }
  // The first half cancelled at once; the rest are cancelled while the shutdown ends them.
  for (int i = 0; i < kWatches / 2; ++i) contexts[i]->TryCancel();
  testing::BackgroundShutdown stopper(server_, kWait);
  for (int i = kWatches / 2; i < kWatches; ++i) {
    if (i % 3 == 0) contexts[i]->TryCancel();
  }
  for (int i = 0; i < kWatches; ++i) {
    HealthCheckResponse update;
    while (watches[i]->Read(&update)) {
      EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING) << "watch " << i;
    }
    const grpc::Status end = watches[i]->Finish();
    EXPECT_THAT(end.error_code(), ::testing::AnyOf(grpc::StatusCode::CANCELLED, grpc::StatusCode::UNAVAILABLE))
        << "watch " << i << ": " << end.error_message();
  }
  EXPECT_TRUE(stopper.WaitDone(kWait)) << "Shutdown returned well before its 120 s deadline";
}

// The real binary, logging each request's queueing (--log-verbose 2), for the tests to wait on.
absl::StatusOr<testing::TestServer> StartBinary(const std::string& repo, std::vector<std::string> extra_flags = {}) {
  extra_flags.insert(extra_flags.begin(), {"--log-verbose", "2"});
  return testing::StartTestServer(repo, extra_flags, absl::Seconds(120));
}

// Requests wait in a long dynamic-batching window when SIGTERM arrives.
// A shutdown that finds an unload still draining its model (the worker busy with a batch) says
// NOT_SERVING and refuses new requests at once, not once the unload is done: it waited for the
// model controller first, and health said SERVING for as long as the batch ran.
TEST(ShutdownDuringModelControlTest, HealthGoesNotServingWhileAnUnloadStillDrains) {
  testing::TempDir repo("cs_shutdown_unload");
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kExplicit;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  Gate gate;
  auto runtime = testing::StartGatedModel(testing::GatedSpec("gated", 4, 0), 1, &gate);
  ASSERT_NE(runtime, nullptr);
  server->registry().Add(runtime);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto health = Health::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto c = testing::ConnectTestClient(address);

  gate.Arm();
  const client::Tensor a_in = GatedInput(1, 41);
  PendingInfer a(c->stub(), "gated", "A", a_in);
  ASSERT_TRUE(gate.WaitHeld(kWait));
  grpc::Status unloaded;
  std::thread unloader([&] { unloaded = testing::UnloadModel(c->stub(), "gated"); });
  // Out of the registry: the unload now waits for the held batch (its runtime's workers).
  const absl::Time deadline = absl::Now() + kWait;
  while (server->registry().Serves("gated") && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_FALSE(server->registry().Serves("gated")) << "the unload never began";

  testing::BackgroundShutdown stopper(server, kWait, [&gate] { gate.Release(); });
  HealthCheckResponse::ServingStatus status = HealthCheckResponse::SERVING;
  while (status == HealthCheckResponse::SERVING && !a.done() && absl::Now() < deadline) {
    status = Check(health.get(), "");
  }
  EXPECT_EQ(status, HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(a.done()) << "NOT_SERVING came while the unload still drained";
  auto refused = c->Infer("gated", {GatedInput(1, 42)});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("the server is shutting down"));

  gate.Release();
  const auto answered = a.Wait(kWait);
  ASSERT_TRUE(answered.has_value()) << "the drained request was lost";
  EXPECT_TRUE(answered->ok()) << answered->error_message();
  unloader.join();
  EXPECT_TRUE(unloaded.ok()) << unloaded.error_message();
  ASSERT_TRUE(stopper.WaitDone(kWait));
}

// The exit timeout bounds an unload still draining its model too: past it, the requests queued on
// the retired version are answered UNAVAILABLE, as a served model's are (before, the shutdown ran
// every one of them, however long that took), while the batch running finishes.
TEST(ShutdownDuringModelControlTest, TheExitTimeoutAnswersAnUnloadedVersionsQueue) {
  testing::TempDir repo("cs_shutdown_unload_timeout");
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kExplicit;
  options.exit_timeout_secs = 1;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  Gate gate;
  auto runtime = testing::StartGatedModel(testing::GatedSpec("gated", 1, 0), 1, &gate);
  ASSERT_NE(runtime, nullptr);
  server->registry().Add(runtime);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto c = testing::ConnectTestClient(address);

  gate.Arm();
  PendingInfer a(c->stub(), "gated", "A", GatedInput(1, 51));
  ASSERT_TRUE(gate.WaitHeld(kWait));
  PendingInfer b(c->stub(), "gated", "B", GatedInput(1, 52));
  ASSERT_TRUE(runtime->queue().WaitForSize(1, kWait)) << "B waits behind A";
  grpc::Status unloaded;
  std::thread unloader([&] { unloaded = testing::UnloadModel(c->stub(), "gated"); });
  const absl::Time began = absl::Now() + kWait;
  while (server->registry().Serves("gated") && absl::Now() < began) std::this_thread::yield();
  ASSERT_FALSE(server->registry().Serves("gated")) << "the unload never began";

  testing::BackgroundShutdown stopper(server, kWait, [&gate] { gate.Release(); });
  const auto b_answer = b.Wait(kWait);
  ASSERT_TRUE(b_answer.has_value()) << "B was not answered at the exit timeout";
  EXPECT_EQ(b_answer->error_code(), grpc::StatusCode::UNAVAILABLE) << b_answer->error_message();
  EXPECT_THAT(b_answer->error_message(), ::testing::HasSubstr("exit timeout passed while the request was queued"));
  EXPECT_FALSE(a.done()) << "B was answered while A still ran";
  EXPECT_FALSE(gate.Executed("B"));
  gate.Release();
  ASSERT_TRUE(a.Wait(kWait).has_value()) << "A was answered";
  unloader.join();
  ASSERT_TRUE(stopper.WaitDone(kWait));
}

// An unload retires a model's versions one after another; the exit timeout reaches the queue of a
// version whose retirement has not begun yet (held behind the first's running batch) as well.
TEST(ShutdownDuringModelControlTest, TheExitTimeoutAnswersTheQueuesOfEveryVersionAnUnloadRetires) {
  testing::TempDir repo("cs_shutdown_unload_versions");
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.model_control_mode = server::ModelControlMode::kExplicit;
  options.exit_timeout_secs = 1;
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  Gate gate1, gate2;
  server::ModelSpec spec2 = testing::GatedSpec("gated", 1, 0);
  spec2.version = 2;
  auto v1 = testing::StartGatedModel(testing::GatedSpec("gated", 1, 0), 1, &gate1);
  auto v2 = testing::StartGatedModel(spec2, 1, &gate2);
  ASSERT_NE(v1, nullptr);
  ASSERT_NE(v2, nullptr);
  server->registry().Add({v1, v2});
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto c = testing::ConnectTestClient(address);
  auto request = [](const std::string& id, int64_t version, uint64_t seed) {
    inference::ModelInferRequest r = testing::GatedRequest("gated", id, GatedInput(1, seed));
    r.set_model_version(std::to_string(version));
    return r;
  };

  gate1.Arm();
  gate2.Arm();
  PendingInfer a1(c->stub(), request("A1", 1, 61));
  PendingInfer a2(c->stub(), request("A2", 2, 62));
  ASSERT_TRUE(gate1.WaitHeld(kWait));
  ASSERT_TRUE(gate2.WaitHeld(kWait));
  PendingInfer b1(c->stub(), request("B1", 1, 63));
  PendingInfer b2(c->stub(), request("B2", 2, 64));
  ASSERT_TRUE(v1->queue().WaitForSize(1, kWait)) << "B1 waits behind A1";
  ASSERT_TRUE(v2->queue().WaitForSize(1, kWait)) << "B2 waits behind A2";
  grpc::Status unloaded;
  std::thread unloader([&] { unloaded = testing::UnloadModel(c->stub(), "gated"); });
  const absl::Time began = absl::Now() + kWait;
  while (server->registry().Serves("gated") && absl::Now() < began) std::this_thread::yield();
  ASSERT_FALSE(server->registry().Serves("gated")) << "the unload never began";

  testing::BackgroundShutdown stopper(server, kWait, [&] {
    gate1.Release();
    gate2.Release();
  });
  for (PendingInfer* b : {&b1, &b2}) {
    const auto answer = b->Wait(kWait);
    ASSERT_TRUE(answer.has_value()) << "a queued request was not answered at the exit timeout";
    EXPECT_EQ(answer->error_code(), grpc::StatusCode::UNAVAILABLE) << answer->error_message();
    EXPECT_THAT(answer->error_message(), ::testing::HasSubstr("exit timeout passed while the request was queued"));
  }
  EXPECT_FALSE(a1.done() || a2.done()) << "answered while both batches still ran";
  EXPECT_FALSE(gate1.Executed("B1") || gate2.Executed("B2"));
  gate1.Release();
  gate2.Release();
  ASSERT_TRUE(a1.Wait(kWait).has_value());
  ASSERT_TRUE(a2.Wait(kWait).has_value());
  unloader.join();
  ASSERT_TRUE(stopper.WaitDone(kWait));
}

TEST(ShutdownTest, BinaryAnswersEveryAcceptedRequestOnSigtermAndExitsZero) {
  testing::TempDir repo("cs_sigterm");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  // The three requests below wait here until after SIGTERM (checked), however slow the machine.
  // The drain runs them at once: a window longer than kWait and the 30 s exit timeout shows it
  // (before, they waited the window out, and past the exit timeout were answered UNAVAILABLE).
  mlp.max_queue_delay_us = 60'000'000;
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  // No serving warm-up: its requests would wait out the window before READY.
  auto binary = StartBinary(repo.path(), {"--serving-warmup-requests", "0"});
  ASSERT_TRUE(binary.ok()) << binary.status();
  auto& server = *binary->process;

  auto c = testing::ConnectTestClient(binary->url);
  std::vector<client::Tensor> inputs;
  std::vector<std::unique_ptr<PendingInfer>> calls;
  for (int i = 0; i < 3; ++i) {
    std::mt19937_64 rng(40 + i);
    inputs.push_back({"INPUT__0", DataType::kFp32, {1, 64}, RandomTensorBytes(DataType::kFp32, 64, rng)});
    const std::string id = "drain-" + std::to_string(i);
    calls.push_back(std::make_unique<PendingInfer>(c->stub(), "mlp", id, inputs.back()));
    ASSERT_TRUE(server.WaitForOutput("request '" + id + "' queued", kWait).ok()) << server.output();
  }
  for (const auto& call : calls) EXPECT_FALSE(call->done()) << "answered before the drain";
  // SIGHUP does nothing (README): the requests below are still answered and the exit is 0.
  server.Signal(SIGHUP);
  EXPECT_EQ(testing::Answer(c->ServerLive()), "true");
  server.Signal(SIGTERM);
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto status = calls[i]->Wait(kWait);
    ASSERT_TRUE(status.has_value()) << "an accepted request was lost: " << server.output();
    ASSERT_TRUE(status->ok()) << status->error_message();
    auto decoded = client::InferenceClient::DecodeResponse(calls[i]->response());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(testing::OutputsMismatch(repo.path() + "/mlp/1/model.pt", {inputs[i]}, decoded->outputs), "")
        << "request " << i;
  }
  const auto code = server.WaitForExit(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << server.output();
  EXPECT_THAT(server.output(), ::testing::HasSubstr("NOT_SERVING"));
}

// A signal while models load: the model warming up stops at its next run (its config asks for 2^31
// runs), the next one is not loaded, and the server exits 0 without ever reporting READY. One load
// thread, so that the next model waits for the first (with several, it would start beside it and
// its own warm-up would stop instead).
TEST(ShutdownTest, ASignalDuringLoadingStopsTheWarmupAndExitsZero) {
  testing::TempDir repo("cs_signal_loading");
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "a_forever", examples::ModelOptions{}).ok());
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "b_next", examples::ModelOptions{}).ok());
  std::ofstream(repo.path() + "/a_forever/config.pbtxt", std::ios::app)
      << "model_warmup { name: \"forever\" batch_size: 1 count: 2147483647 inputs { key: \"INPUT__0\" "
         "value { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } } }\n";
  auto process = testing::Subprocess::Start({CHRONOSERVE_BIN, "--model-repository", repo.path(), "--grpc-port", "0",
                                             "--allow-metrics", "false", "--gpu-monitor-interval-ms", "0",
                                             "--model-load-thread-count", "1"});
  ASSERT_TRUE(process.ok()) << process.status();
  auto& server = **process;
  ASSERT_TRUE(server.WaitForOutput("loading model 'a_forever'", absl::Seconds(120)).ok()) << server.output();
  server.Signal(SIGTERM);
  const auto code = server.WaitForExit(kWait);
  ASSERT_TRUE(code.ok()) << "the warm-up did not stop: " << code.status();
  EXPECT_EQ(*code, 0) << server.output();
  EXPECT_THAT(server.output(), ::testing::HasSubstr("model 'a_forever' not loaded: "));
  EXPECT_THAT(server.output(), ::testing::HasSubstr("warm-up stopped: the server is shutting down"));
  EXPECT_THAT(server.output(), ::testing::HasSubstr("model 'b_next' not loaded: the server is shutting down"));
  EXPECT_THAT(server.output(), ::testing::Not(::testing::HasSubstr("server READY")));
}

// An operator who signals twice wants out: the second SIGTERM during a drain that would take
// minutes (the request's model loops x[0, 0] times; the warm-up's random values in [-1, 1) make it
// loop 0 times) ends the process at once with 128 + 15, saying so.
TEST(ShutdownTest, ASecondSignalDuringTheDrainExitsAtOnce) {
  testing::TempDir repo("cs_second_signal");
  repo.WriteFile("slow/config.pbtxt",
                 "max_batch_size: 0\ninput { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2, 4 ] }\n"
                 "output { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 2, 4 ] }\n"
                 "instance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/slow/1");
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/slow/1/model.pt",
                                          "def forward(self, x):\n  y = x\n  for _ in range(int(x[0, 0])):\n"
                                          "    y = torch.tanh(y)\n  return y\n"));
  auto binary = StartBinary(repo.path(), {"--exit-timeout-secs", "600"});
  ASSERT_TRUE(binary.ok()) << binary.status();
  auto& server = *binary->process;

  auto c = testing::ConnectTestClient(binary->url);
  std::mt19937_64 rng(43);
  client::Tensor input{"INPUT__0", DataType::kFp32, {2, 4}, RandomTensorBytes(DataType::kFp32, 8, rng)};
  const float loops = 1e9f;
  std::memcpy(input.data.data(), &loops, sizeof loops);
  PendingInfer slow(c->stub(), "slow", "slow-0", input);
  ASSERT_TRUE(server.WaitForOutput("request 'slow-0' queued", kWait).ok()) << server.output();

  server.Signal(SIGTERM);
  ASSERT_TRUE(server.WaitForOutput("a second SIGTERM/SIGINT exits at once", kWait).ok()) << server.output();
  ASSERT_TRUE(server.WaitForOutput("NOT_SERVING", kWait).ok()) << server.output();
  EXPECT_FALSE(slow.done()) << "the drain waits for the looping request";
  server.Signal(SIGTERM);
  const auto code = server.WaitForExit(kWait);
  ASSERT_TRUE(code.ok()) << "the second signal did not end the drain: " << code.status();
  EXPECT_EQ(*code, 128 + SIGTERM) << server.output();
  EXPECT_THAT(server.output(), ::testing::HasSubstr("again: exiting now, without answering the requests in flight"));
  const auto status = slow.Wait(kWait);
  ASSERT_TRUE(status.has_value()) << "the call never ended";
  EXPECT_FALSE(status->ok());
}

}  // namespace
}  // namespace chronoserve
