// Scheduling over real gRPC: deadlines and cancellation while queued (answered, counted, never
// executed) or while executing (counted as the caller saw it), queue-full backpressure, two workers serving at once, and refusals by a closed queue
// (counted for an unload, not while the server drains). Workers are held inside
// Execute() by a Gate (tests/server/gated_instance.h), so nothing here waits with a sleep: every
// wait is a notification or a condition with a timeout that fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/gated_instance.h"
#include "tests/server/scheduling_harness.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using testing::ExpectGatedOutputs;
using testing::Gate;
using testing::GatedInput;
using testing::PendingInfer;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr uint64_t kLongBatchWindowUs = 60'000'000;  // partial batches wait; full ones go at once

int WorkerOf(const inference::ModelInferResponse& response) {
  auto timing = client::InferenceClient::DecodeTiming(response);
  return timing.has_value() ? static_cast<int>(timing->worker) : -1;
}

// Every test runs with ModelInfer on gRPC's callback API (0) and on two ModelInferQueues threads (2: one queue),
// each on gRPC's full and on its minimal channel stack (--grpc-minimal-stack: no deadline filter).
class SchedulingTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override { ASSERT_TRUE(harness_.ok()); }
  void TearDown() override { gate_.Release(); }  // never leave a worker parked

  std::shared_ptr<server::ModelRuntime> Serve(const server::ModelSpec& spec, int workers) {
    auto runtime = testing::StartGatedModel(spec, workers, &gate_);
    if (runtime != nullptr) harness_.registry().Add(runtime);
    return runtime;
  }
  inference::GRPCInferenceService::Stub* stub() { return harness_.client().stub(); }

  Gate gate_;
  testing::ServiceHarness harness_{server::StreamOptions{}, std::get<0>(GetParam()), std::get<1>(GetParam())};
};

// ConnectTestClient (tests/server/test_client.h) gives every call on its channel a deadline: calls
// with none of their own, asynchronous or through InferenceClient, to a worker that never answers
// end DEADLINE_EXCEEDED instead of waiting for ever.
TEST_P(SchedulingTest, TestClientCallsCarryTheChannelsDeadline) {
  ASSERT_NE(Serve(testing::GatedSpec("held", 4, 0), 1), nullptr);
  auto c = testing::ConnectTestClient(harness_.address(), absl::Seconds(1));
  gate_.Arm();
  PendingInfer held(c->stub(), "held", "H", GatedInput(1, 5));
  const auto status = held.Wait(kWait);
  ASSERT_TRUE(status.has_value()) << "the call had no deadline";
  EXPECT_EQ(status->error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status->error_message();
  auto queued = c->Infer("held", {GatedInput(1, 6)});
  ASSERT_FALSE(queued.ok());
  EXPECT_EQ(queued.status().code(), absl::StatusCode::kDeadlineExceeded) << queued.status();
}

TEST_P(SchedulingTest, DeadlinePassingWhileQueuedIsAnsweredAndNeverExecuted) {
  // Worker X is held by a slow full batch; worker Y keeps B queued for its (long) batch window, so
  // only B's deadline can end its wait.
  auto runtime = Serve(testing::GatedSpec("deadline", 4, kLongBatchWindowUs), 2);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  const client::Tensor a_in = GatedInput(4, 1);
  PendingInfer a(stub(), "deadline", "A", a_in);
  ASSERT_TRUE(gate_.WaitHeld(kWait)) << "the full batch reached a worker";
  // 5 s, not less: a shorter deadline could pass on the way in on a loaded machine, before B is
  // queued; the 60 s window keeps B queued until its deadline however long that is.
  PendingInfer b(stub(), "deadline", "B", GatedInput(1, 2), absl::Seconds(5));

  const auto server_answer = harness_.observer().WaitFor("B", kWait);
  ASSERT_TRUE(server_answer.has_value()) << "the server answered B";
  EXPECT_EQ(server_answer->code(), absl::StatusCode::kDeadlineExceeded) << *server_answer;
  EXPECT_THAT(std::string(server_answer->message()), HasSubstr("model 'deadline'"));
  EXPECT_THAT(std::string(server_answer->message()), HasSubstr("not executed"));
  const auto b_status = b.Wait(kWait);
  ASSERT_TRUE(b_status.has_value());
  EXPECT_EQ(b_status->error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(a.done()) << "B was answered while the slow batch still ran";

  gate_.Release();
  const auto a_status = a.Wait(kWait);
  ASSERT_TRUE(a_status.has_value());
  ASSERT_TRUE(a_status->ok()) << a_status->error_message();
  ExpectGatedOutputs(a.response(), a_in);
  EXPECT_FALSE(gate_.Executed("B")) << "an expired request never reaches the backend";

  const server::ModelStatsSnapshot s = runtime->stats().Snapshot();
  EXPECT_EQ(s.deadline_exceeded, 1u);
  EXPECT_EQ(s.cancelled, 0u) << "gRPC's own deadline cancellation is not a client cancel";
  auto stats = harness_.client().ModelStatistics("deadline");
  ASSERT_TRUE(stats.ok()) << stats.status();
  const auto& m = stats->model_stats(0);
  EXPECT_EQ(m.execution_count(), 1u);
  EXPECT_EQ(m.inference_count(), 4u);
  EXPECT_EQ(m.inference_stats().fail().count(), 1u);
  EXPECT_EQ(m.inference_stats().success().count(), 1u);
}

TEST_P(SchedulingTest, ClientCancellationWhileQueuedIsNeverExecutedAndCounted) {
  auto runtime = Serve(testing::GatedSpec("cancel", 4, kLongBatchWindowUs), 2);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  const client::Tensor a_in = GatedInput(4, 3);
  PendingInfer a(stub(), "cancel", "A", a_in);
  ASSERT_TRUE(gate_.WaitHeld(kWait));
  PendingInfer b(stub(), "cancel", "B", GatedInput(1, 4));
  ASSERT_TRUE(runtime->queue().WaitForSize(1, kWait)) << "B was accepted and queued";
  b.Cancel();

  const auto server_answer = harness_.observer().WaitFor("B", kWait);
  ASSERT_TRUE(server_answer.has_value()) << "the queue dropped B when its client cancelled";
  EXPECT_EQ(server_answer->code(), absl::StatusCode::kCancelled) << *server_answer;
  const auto b_status = b.Wait(kWait);
  ASSERT_TRUE(b_status.has_value());
  EXPECT_EQ(b_status->error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(runtime->queue().size(), 0u);

  gate_.Release();
  const auto a_status = a.Wait(kWait);
  ASSERT_TRUE(a_status.has_value());
  ASSERT_TRUE(a_status->ok()) << a_status->error_message();
  ExpectGatedOutputs(a.response(), a_in);
  EXPECT_FALSE(gate_.Executed("B"));
  const server::ModelStatsSnapshot s = runtime->stats().Snapshot();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.deadline_exceeded, 0u);
  EXPECT_EQ(s.fail.count, 1u);
  EXPECT_EQ(s.execution_count, 1u);
}

// With every worker busy, a queued request whose time comes (its queue timeout; its client's
// cancellation) is answered then, by the queue's reaper, not when the batch ahead of it ends: a
// 30 ms timeout behind a 140 ms batch used to be answered at 140 ms.
TEST_P(SchedulingTest, ARequestWhoseTimeComesWhileEveryWorkerIsBusyIsAnsweredThen) {
  server::ModelSpec spec = testing::GatedSpec("busy", 4, 0);
  spec.dynamic_batching.queue_policy.default_timeout_microseconds = 200'000;  // REJECT
  auto runtime = Serve(spec, 1);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  const client::Tensor a_in = GatedInput(4, 41);
  PendingInfer a(stub(), "busy", "A", a_in);  // a full batch: taken at once, then held
  ASSERT_TRUE(gate_.WaitHeld(kWait)) << "the only worker is busy";
  PendingInfer b(stub(), "busy", "B", GatedInput(1, 42));
  const auto b_answer = harness_.observer().WaitFor("B", kWait);
  ASSERT_TRUE(b_answer.has_value()) << "B's queue timeout passed with the worker still busy";
  EXPECT_EQ(b_answer->code(), absl::StatusCode::kDeadlineExceeded) << *b_answer;
  EXPECT_THAT(std::string(b_answer->message()), HasSubstr("default_timeout_microseconds 200000"));
  EXPECT_FALSE(a.done()) << "B was answered while the batch ahead of it still ran";
  const auto b_status = b.Wait(kWait);
  ASSERT_TRUE(b_status.has_value());
  EXPECT_EQ(b_status->error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << b_status->error_message();

  PendingInfer c(stub(), "busy", "C", GatedInput(1, 43));
  ASSERT_TRUE(runtime->queue().WaitForSize(1, kWait)) << "C was accepted and queued";
  c.Cancel();
  const auto c_answer = harness_.observer().WaitFor("C", kWait);
  ASSERT_TRUE(c_answer.has_value()) << "C's cancellation was noticed with the worker still busy";
  EXPECT_EQ(c_answer->code(), absl::StatusCode::kCancelled) << *c_answer;
  EXPECT_FALSE(a.done());

  gate_.Release();
  const auto a_status = a.Wait(kWait);
  ASSERT_TRUE(a_status.has_value());
  ASSERT_TRUE(a_status->ok()) << a_status->error_message();
  ExpectGatedOutputs(a.response(), a_in);
  EXPECT_FALSE(gate_.Executed("B"));
  EXPECT_FALSE(gate_.Executed("C"));
  const server::ModelStatsSnapshot s = runtime->stats().Snapshot();
  EXPECT_EQ(s.deadline_exceeded, 1u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.execution_count, 1u);
}

// While the queue drains (closed at shutdown, its workers busy with what it holds), a queued
// request whose time comes is still answered then, not when the batch ahead ends.
TEST_P(SchedulingTest, ARequestWhoseTimeComesWhileAClosedQueueDrainsIsAnsweredThen) {
  server::ModelSpec spec = testing::GatedSpec("draining", 4, 0);
  spec.dynamic_batching.queue_policy.default_timeout_microseconds = 200'000;  // REJECT
  auto runtime = Serve(spec, 1);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  PendingInfer a(stub(), "draining", "A", GatedInput(4, 51));
  ASSERT_TRUE(gate_.WaitHeld(kWait)) << "the only worker is busy";
  PendingInfer b(stub(), "draining", "B", GatedInput(1, 52));
  ASSERT_TRUE(runtime->queue().WaitForSize(1, kWait)) << "B was accepted and queued";
  runtime->CloseQueue("the server is shutting down");  // the shutdown's drain: B would run after A, but its timeout comes first
  const auto b_answer = harness_.observer().WaitFor("B", kWait);
  ASSERT_TRUE(b_answer.has_value());
  EXPECT_EQ(b_answer->code(), absl::StatusCode::kDeadlineExceeded) << *b_answer;
  EXPECT_FALSE(a.done()) << "B was answered while the batch ahead of it still ran";
  gate_.Release();
  const auto a_status = a.Wait(kWait);
  ASSERT_TRUE(a_status.has_value());
  EXPECT_TRUE(a_status->ok()) << a_status->error_message();
  EXPECT_FALSE(gate_.Executed("B"));
}

// RepositoryIndex reads readiness as ModelReady does: a model is READY while the server serves,
// UNAVAILABLE ("the server is shutting down") once it drains, and `ready: true` then keeps none.
TEST_P(SchedulingTest, RepositoryIndexSaysUnavailableWhileTheServerDrains) {
  ASSERT_NE(Serve(testing::GatedSpec("indexed", 4, 0), 1), nullptr);
  const auto serving = testing::RepositoryIndex(stub());
  ASSERT_TRUE(serving.ok()) << serving.status();
  ASSERT_EQ(serving->models_size(), 1);
  EXPECT_EQ(serving->models(0).state(), "READY");
  harness_.dispatcher().SetDraining();
  const auto draining = testing::RepositoryIndex(stub());
  ASSERT_TRUE(draining.ok()) << draining.status();
  ASSERT_EQ(draining->models_size(), 1);
  EXPECT_EQ(draining->models(0).name(), "indexed");
  EXPECT_EQ(draining->models(0).state(), "UNAVAILABLE");
  EXPECT_EQ(draining->models(0).reason(), "the server is shutting down");
  const auto ready = testing::RepositoryIndex(stub(), /*ready=*/true);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->models_size(), 0);
}

// A call whose client cancels it, or whose deadline passes, while its batch runs gets no answer: it
// is counted (statistics, metrics, traces) as the status its caller got, not as a success, and its
// batch still counts as executed.
TEST_P(SchedulingTest, ACallThatEndsWhileItsBatchRunsIsCountedAsItsCallerSawIt) {
  auto runtime = Serve(testing::GatedSpec("gone", 4, 0), 1);
  ASSERT_NE(runtime, nullptr);
  struct Case {
    const char* id;
    std::optional<absl::Duration> deadline;  // none: the client cancels
    grpc::StatusCode client_code;
    absl::StatusCode server_code;
    const char* why;
  };
  for (const Case& c : {Case{"cancelled", std::nullopt, grpc::StatusCode::CANCELLED, absl::StatusCode::kCancelled,
                             "the client cancelled the request while it executed"},
                        // 3 s: the request must reach the gated batch before its deadline, on a busy box too.
                        Case{"late", absl::Seconds(3), grpc::StatusCode::DEADLINE_EXCEEDED,
                             absl::StatusCode::kDeadlineExceeded, "the request's deadline passed while it executed"}}) {
    SCOPED_TRACE(c.id);
    gate_.Arm();
    const client::Tensor in = GatedInput(1, 31);
    PendingInfer call(stub(), "gone", c.id, in, c.deadline);
    ASSERT_TRUE(gate_.WaitHeld(kWait)) << "the call's batch is executing";
    if (!c.deadline.has_value()) call.Cancel();
    const auto client_status = call.Wait(kWait);
    ASSERT_TRUE(client_status.has_value());
    EXPECT_EQ(client_status->error_code(), c.client_code) << client_status->error_message();
    ASSERT_TRUE(gate_.WaitHeldCancelled(kWait)) << "the server learnt that the call ended";
    gate_.Release();
    const auto server_answer = harness_.observer().WaitFor(c.id, kWait);
    ASSERT_TRUE(server_answer.has_value());
    EXPECT_EQ(server_answer->code(), c.server_code) << *server_answer;
    EXPECT_THAT(std::string(server_answer->message()), HasSubstr(std::string("model 'gone': ") + c.why));
    EXPECT_TRUE(gate_.Executed(c.id));
  }
  const server::ModelStatsSnapshot s = runtime->stats().Snapshot();
  EXPECT_EQ(s.success.count, 0u) << "no caller got an answer";
  EXPECT_EQ(s.fail.count, 2u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.deadline_exceeded, 1u);
  EXPECT_EQ(s.execution_count, 2u) << "both batches ran";
}

TEST_P(SchedulingTest, FullQueueAnswersResourceExhaustedAtOnceNamingModelAndLimit) {
  auto runtime = Serve(testing::GatedSpec("bounded", 4, 0, /*max_queue_size=*/2), 1);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  const client::Tensor a_in = GatedInput(1, 5), b_in = GatedInput(1, 6), c_in = GatedInput(1, 7);
  PendingInfer a(stub(), "bounded", "A", a_in);
  ASSERT_TRUE(gate_.WaitHeld(kWait));
  PendingInfer b(stub(), "bounded", "B", b_in);
  PendingInfer c(stub(), "bounded", "C", c_in);
  ASSERT_TRUE(runtime->queue().WaitForSize(2, kWait));
  // What the in-flight gauge reads: the accepted requests not yet answered.
  EXPECT_EQ(harness_.dispatcher().inflight(), 3);

  client::InferOptions options;
  options.id = "D";
  auto refused = harness_.client().Infer("bounded", {GatedInput(1, 8)}, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("model 'bounded'"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("max_queue_size 2"));
  EXPECT_FALSE(a.done()) << "refused at once, while the worker is still busy";
  EXPECT_EQ(harness_.dispatcher().inflight(), 3) << "a refused request is never in flight";

  gate_.Release();
  for (auto* call : {&a, &b, &c}) {
    const auto status = call->Wait(kWait);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->ok()) << status->error_message();
  }
  ExpectGatedOutputs(b.response(), b_in);
  ExpectGatedOutputs(c.response(), c_in);
  EXPECT_FALSE(gate_.Executed("D"));
  EXPECT_EQ(runtime->stats().Snapshot().rejected, 1u);
  ASSERT_TRUE(harness_.dispatcher().WaitForAnswered(absl::Now() + kWait));
  EXPECT_EQ(harness_.dispatcher().inflight(), 0);
}

TEST_P(SchedulingTest, TwoWorkersServeAtTheSameTime) {
  // Worker X is parked inside Execute; B must complete on the other worker meanwhile.
  auto runtime = Serve(testing::GatedSpec("pair", 4, 0), 2);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  const client::Tensor a_in = GatedInput(2, 9), b_in = GatedInput(3, 10);
  PendingInfer a(stub(), "pair", "A", a_in);
  ASSERT_TRUE(gate_.WaitHeld(kWait));
  const int held = gate_.held_worker();
  PendingInfer b(stub(), "pair", "B", b_in);
  const auto b_status = b.Wait(kWait);
  ASSERT_TRUE(b_status.has_value()) << "B completed while worker " << held << " was held";
  ASSERT_TRUE(b_status->ok()) << b_status->error_message();
  EXPECT_FALSE(a.done());
  EXPECT_EQ(WorkerOf(b.response()), 1 - held);
  ExpectGatedOutputs(b.response(), b_in);
  gate_.Release();
  const auto a_status = a.Wait(kWait);
  ASSERT_TRUE(a_status.has_value());
  ASSERT_TRUE(a_status->ok()) << a_status->error_message();
  EXPECT_EQ(WorkerOf(a.response()), held);
  ExpectGatedOutputs(a.response(), a_in);
}

// A request built just before the server began draining meets its model's queue closed: refused
// UNAVAILABLE like one Build refuses while draining, and like it neither counted nor seen by the
// observer (no error span from a clean shutdown). A queue closed for the model alone (an unload,
// the server still serving) counts its refusal.
TEST(DrainRefusalTest, AQueueClosedByTheDrainRefusesUncountedAndOneClosedByAnUnloadCounts) {
  testing::ServiceHarness harness;
  ASSERT_TRUE(harness.ok());
  Gate gate;
  auto runtime = testing::StartGatedModel(testing::GatedSpec("closing", 4, 0), 1, &gate);
  ASSERT_NE(runtime, nullptr);
  harness.registry().Add(runtime);
  server::InferDispatcher& dispatcher = harness.dispatcher();
  const inference::ModelInferRequest unload_request = testing::GatedRequest("closing", "U", GatedInput(1, 41));
  const inference::ModelInferRequest drain_request = testing::GatedRequest("closing", "D", GatedInput(2, 42));
  inference::ModelInferResponse unload_response, drain_response;
  server::CallInfo info;
  info.received_ns = SteadyClock::Get()->NowNs();
  auto unload_built = dispatcher.Build(unload_request, &unload_response, info);
  ASSERT_TRUE(unload_built.ok()) << unload_built.status();
  auto drain_built = dispatcher.Build(drain_request, &drain_response, info);
  ASSERT_TRUE(drain_built.ok()) << drain_built.status();
  bool responded = false;
  auto respond = [&responded](const absl::Status&, const RequestTiming&, bool) { responded = true; };

  runtime->CloseQueue("version 1 was unloaded");  // as an unload does, the server still serving
  const absl::Status unloaded = dispatcher.Enqueue(*std::move(unload_built), &unload_response, respond);
  EXPECT_EQ(unloaded.code(), absl::StatusCode::kUnavailable) << unloaded;
  EXPECT_EQ(std::string(unloaded.message()), "model 'closing': version 1 was unloaded; the request was not queued");
  EXPECT_EQ(runtime->stats().Snapshot().fail.count, 1u);
  ASSERT_TRUE(harness.observer().WaitFor("U", absl::ZeroDuration()).has_value())
      << "the observer saw the refusal before Enqueue returned";

  dispatcher.SetDraining();  // the server's drain began after the request was built
  const absl::Status drained = dispatcher.Enqueue(*std::move(drain_built), &drain_response, respond);
  EXPECT_EQ(drained.code(), absl::StatusCode::kUnavailable) << drained;
  EXPECT_EQ(std::string(drained.message()), "the server is shutting down") << "as Build answers while draining";
  EXPECT_EQ(runtime->stats().Snapshot().fail.count, 1u) << "a refusal while draining is counted nowhere";
  EXPECT_FALSE(harness.observer().WaitFor("D", absl::ZeroDuration()).has_value());
  EXPECT_FALSE(responded) << "a refused request is answered by its caller, never through respond";
  EXPECT_EQ(dispatcher.inflight(), 0);
  EXPECT_FALSE(gate.Executed("U"));
  EXPECT_FALSE(gate.Executed("D"));
}

INSTANTIATE_TEST_SUITE_P(InferApis, SchedulingTest, ::testing::Combine(::testing::Values(0, 2), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
                           const std::string api = testing::InferApiName({std::get<0>(info.param), info.index});
                           return std::get<1>(info.param) ? api + "MinimalStack" : api;
                         });

// --max-queue-mib reaches every model the server loads: a request whose inputs would take the
// bytes its model's queued requests hold past the limit is refused at once, naming the model and
// the limit; the bytes come back when the queued request leaves the queue.
TEST(QueueBytesTest, ServerLimitBoundsTheBytesQueuedForALoadedModel) {
  testing::TempDir repo("cs_queue_bytes");
  examples::ModelOptions o;
  o.max_batch_size = 8;
  // A partial batch waits 60 s: the first request stays queued until the shutdown's drain runs it.
  o.max_queue_delay_us = 60'000'000;
  ASSERT_TRUE(examples::WritePolicyNet(repo.path(), "policy", o).ok());
  server::ServerOptions options = testing::TestServerOptions(repo.path());
  options.max_queue_bytes = 10'000;  // one policy-net item is 4 x 20 x 20 floats = 6400 bytes
  auto server = testing::StartServer(options);
  ASSERT_NE(server, nullptr);
  auto model = server->registry().Find("policy", "");
  ASSERT_TRUE(model.ok()) << model.status();
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  std::mt19937_64 rng(9);
  const client::Tensor one{"INPUT__0", DataType::kFp32, {1, 4, 20, 20}, RandomTensorBytes(DataType::kFp32, 1600, rng)};
  PendingInfer queued(client->stub(), "policy", "A", one);
  ASSERT_TRUE((*model)->queue().WaitForSize(1, kWait)) << "the request waits for a fuller batch";
  EXPECT_EQ((*model)->queue().queued_bytes(), 6400u);

  auto refused = client->Infer("policy", {one});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("model 'policy'"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max-queue-mib"));
  EXPECT_FALSE(queued.done()) << "refused at once, while the first request still waits";

  server->Shutdown();  // the drain runs the queued partial batch at once
  const auto status = queued.Wait(kWait);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->ok()) << status->error_message();
  EXPECT_EQ((*model)->queue().queued_bytes(), 0u);
}

// The real LibTorch MLP with instance_group count 2 under concurrent load: both workers serve and
// every request gets its own rows, against a LibTorch reference computed in the test.
TEST(TwoWorkerModelTest, BothWorkersServeAndEveryResponseIsItsOwn) {
  testing::TempDir repo("cs_two_workers");
  examples::ModelOptions mlp;
  mlp.max_batch_size = 8;
  mlp.instance_count = 2;
  mlp.instance_kind = "KIND_CPU";
  ASSERT_TRUE(examples::WriteMlp(repo.path(), "mlp", mlp).ok());
  auto server = testing::StartServer(repo.path());
  ASSERT_NE(server, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  const std::string model_path = repo.path() + "/mlp/1/model.pt";
  constexpr int kThreads = 6, kPerThread = 25;
  absl::Mutex mu;
  std::set<int64_t> workers;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto c = testing::ConnectTestClient(address);
      for (int i = 0; i < kPerThread; ++i) {
        std::mt19937_64 rng(5000 + t * 100 + i);
        const int64_t items = 1 + (t + i) % 3;
        client::Tensor in{"INPUT__0", DataType::kFp32, {items, 64}, RandomTensorBytes(DataType::kFp32, items * 64, rng)};
        auto r = c->Infer("mlp", {in});
        const auto want = r.ok() ? testing::TorchReference(model_path, {in}) : std::vector<std::vector<float>>{};
        absl::MutexLock lock(&mu);
        if (!r.ok()) { errors.push_back(std::string(r.status().message())); break; }  // one deadline per thread at most
        workers.insert(r->timing->worker);
        const std::string mismatch = testing::ReferenceMismatch(r->outputs[0].data, want[0]);
        if (!mismatch.empty()) errors.push_back(mismatch);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(errors, ::testing::IsEmpty());
  EXPECT_EQ(workers, (std::set<int64_t>{0, 1})) << "both workers served";
  server->Shutdown();
}

// A load asked for while its model is not served marks it LOADING; the check and the mark are one
// step under the registry's lock, so a model that began to serve meanwhile is never marked (it
// showed LOADING beside serving, and a failed reload after left it so).
TEST(RegistryLoadingMarkTest, AServedModelIsNeverMarkedLoading) {
  server::ModelRegistry registry;
  testing::Gate gate;
  auto runtime = testing::StartGatedModel(testing::GatedSpec("served", 4, 0), 1, &gate);
  ASSERT_NE(runtime, nullptr);
  registry.Add(runtime);
  EXPECT_FALSE(registry.MarkLoadingUnlessServed("served", /*strict=*/false));
  EXPECT_TRUE(registry.Find("served", "").ok());
  for (const auto& entry : registry.Index()) {
    if (entry.name == "served") EXPECT_EQ(entry.state, server::ModelRegistry::IndexEntry::State::kReady);
  }
  EXPECT_TRUE(registry.MarkLoadingUnlessServed("other", /*strict=*/false));
  const auto other = registry.Find("other", "");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("model 'other' is loading"));
  registry.StopAll();
}

}  // namespace
}  // namespace chronoserve
