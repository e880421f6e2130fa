// Request-level parameters over real gRPC (ModelInferRequest.parameters, as tritonclient sends
// them): "timeout" (microseconds) is a deadline while queued, unary and streamed, answered
// DEADLINE_EXCEEDED and never executed; "priority" is accepted; sequence parameters asking for a
// sequence and parameters of the wrong type are INVALID_ARGUMENT naming the model and the
// parameter. Workers are held by a Gate (tests/server/gated_instance.h); every wait and call has a
// timeout that fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "server/grpc/infer_dispatcher.h"
#include "tests/server/gated_instance.h"
#include "tests/server/scheduling_harness.h"
#include "tests/server/test_repository.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using testing::ExpectGatedOutputs;
using testing::Gate;
using testing::GatedRequest;
using testing::GatedInput;
using testing::PendingInfer;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr uint64_t kLongBatchWindowUs = 60'000'000;  // partial batches wait; full ones go at once
constexpr int64_t kQueueTimeoutUs = 300'000;

// Every test runs with ModelInfer on gRPC's callback API (0) and on two ModelInferQueues threads.
class RequestParametersTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(harness_.ok());
    // Two workers: one can be parked on a full batch while the other holds a partial one for its
    // (long) batch window, so only a queued request's deadline can end its wait.
    runtime_ = testing::StartGatedModel(testing::GatedSpec("params", 4, kLongBatchWindowUs), 2, &gate_);
    ASSERT_NE(runtime_, nullptr);
    harness_.registry().Add(runtime_);
  }
  void TearDown() override { gate_.Release(); }  // never leave a worker parked

  inference::GRPCInferenceService::Stub* stub() { return harness_.client().stub(); }

  // A full batch that parks a worker; the caller releases the gate.
  std::unique_ptr<PendingInfer> HoldAWorker() {
    gate_.Arm();
    auto held = std::make_unique<PendingInfer>(stub(), "params", "held", GatedInput(4, 1));
    EXPECT_TRUE(gate_.WaitHeld(kWait)) << "the full batch reached a worker";
    return held;
  }

  // A unary call of `request` with a 30 s gRPC deadline.
  grpc::Status Call(const inference::ModelInferRequest& request, inference::ModelInferResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    return stub()->ModelInfer(&ctx, request, response);
  }

  Gate gate_;
  testing::ServiceHarness harness_{server::StreamOptions{}, GetParam()};
  std::shared_ptr<server::ModelRuntime> runtime_;
};

TEST_P(RequestParametersTest, TimeoutExpiringWhileQueuedIsDeadlineExceededAndNeverExecuted) {
  auto held = HoldAWorker();
  ASSERT_FALSE(HasFailure());
  // No gRPC deadline: only the request's own "timeout" parameter can end its wait.
  inference::ModelInferRequest request = GatedRequest("params", "T", GatedInput(1, 2));
  (*request.mutable_parameters())["timeout"].set_int64_param(kQueueTimeoutUs);
  PendingInfer timed(stub(), std::move(request));

  const auto server_answer = harness_.observer().WaitFor("T", kWait);
  ASSERT_TRUE(server_answer.has_value()) << "the server answered T";
  EXPECT_EQ(server_answer->code(), absl::StatusCode::kDeadlineExceeded) << *server_answer;
  EXPECT_THAT(std::string(server_answer->message()), HasSubstr("model 'params'"));
  EXPECT_THAT(std::string(server_answer->message()), HasSubstr("not executed"));
  const auto status = timed.Wait(kWait);
  ASSERT_TRUE(status.has_value()) << "the client got T's answer";
  EXPECT_EQ(status->error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status->error_message();
  EXPECT_FALSE(held->done()) << "T was answered while the held batch still ran";

  gate_.Release();
  const auto held_status = held->Wait(kWait);
  ASSERT_TRUE(held_status.has_value());
  EXPECT_TRUE(held_status->ok()) << held_status->error_message();
  EXPECT_FALSE(gate_.Executed("T")) << "a request whose timeout passed in the queue never reaches the backend";
  EXPECT_EQ(runtime_->stats().Snapshot().deadline_exceeded, 1u);
}

TEST_P(RequestParametersTest, StreamedTimeoutExpiringWhileQueuedIsAnErrorResponseAndTheStreamGoesOn) {
  auto held = HoldAWorker();
  ASSERT_FALSE(HasFailure());
  auto stream = client::InferStream::Open(stub());
  inference::ModelInferRequest request = GatedRequest("params", "S", GatedInput(1, 3));
  (*request.mutable_parameters())["timeout"].set_int64_param(kQueueTimeoutUs);
  ASSERT_TRUE(stream->Send(std::move(request)));

  std::optional<client::StreamAnswer> answer = stream->Next(kWait);
  ASSERT_TRUE(answer.has_value()) << "the stream answered S";
  auto decoded = client::InferStream::Decode(answer->message);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDeadlineExceeded) << decoded.status();
  EXPECT_EQ(answer->message.infer_response().id(), "S");
  EXPECT_FALSE(held->done());

  gate_.Release();
  const client::Tensor after_in = GatedInput(4, 4);  // a full batch: goes at once
  ASSERT_TRUE(stream->Send(GatedRequest("params", "after", after_in)));
  answer = stream->Next(kWait);
  ASSERT_TRUE(answer.has_value()) << "the stream still serves after the expired request";
  auto after = client::InferStream::Decode(answer->message);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->id, "after");
  stream->CloseSend();
  const auto finished = stream->Finish(kWait);
  ASSERT_TRUE(finished.has_value());
  EXPECT_TRUE(finished->ok()) << finished->error_message();
  EXPECT_FALSE(gate_.Executed("S"));
  const auto held_status = held->Wait(kWait);
  ASSERT_TRUE(held_status.has_value());
  EXPECT_TRUE(held_status->ok()) << held_status->error_message();
}

TEST_P(RequestParametersTest, PriorityAndALongTimeoutAreAcceptedAndTheRequestRuns) {
  const client::Tensor input = GatedInput(4, 5);  // a full batch: runs at once
  inference::ModelInferRequest request = GatedRequest("params", "P", input);
  (*request.mutable_parameters())["priority"].set_uint64_param(1);        // tritonclient's type
  (*request.mutable_parameters())["timeout"].set_int64_param(60'000'000);  // 60 s
  (*request.mutable_parameters())["sequence_id"].set_int64_param(0);      // "no sequence"
  (*request.mutable_parameters())["sequence_start"].set_bool_param(false);
  inference::ModelInferResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectGatedOutputs(response, input);
  EXPECT_TRUE(gate_.Executed("P"));
}

struct BadParameter {
  const char* name;
  const char* key;
  inference::InferParameter value;
  const char* expected;  // in the message
};

TEST_P(RequestParametersTest, WrongTypesAndSequenceParametersAreInvalidArgumentNamingModelAndParameter) {
  auto param = [](auto set) {
    inference::InferParameter p;
    set(p);
    return p;
  };
  const std::vector<BadParameter> cases = {
      {"timeout as string", "timeout", param([](auto& p) { p.set_string_param("100"); }), "expected a non-negative int64_param"},
      {"negative timeout", "timeout", param([](auto& p) { p.set_int64_param(-5); }), "is -5"},
      {"priority as double", "priority", param([](auto& p) { p.set_double_param(1.5); }), "is a double_param"},
      {"timeout without a value", "timeout", inference::InferParameter(), "'timeout' has no value; expected"},
      {"sequence end as string", "sequence_end", param([](auto& p) { p.set_string_param("yes"); }), "is a string_param; expected bool_param"},
      {"sequence id", "sequence_id", param([](auto& p) { p.set_int64_param(42); }), "not a sequence model"},
      {"string sequence id", "sequence_id", param([](auto& p) { p.set_string_param("seq-7"); }), "not a sequence model"},
      {"sequence start", "sequence_start", param([](auto& p) { p.set_bool_param(true); }), "not a sequence model"},
      {"sequence end as int", "sequence_end", param([](auto& p) { p.set_int64_param(1); }), "expected bool_param"},
  };
  for (const BadParameter& c : cases) {
    SCOPED_TRACE(c.name);
    inference::ModelInferRequest request = GatedRequest("params", c.name, GatedInput(4, 6));
    (*request.mutable_parameters())[c.key] = c.value;
    inference::ModelInferResponse response;
    const grpc::Status status = Call(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("model 'params'"));
    EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat("request parameter '", c.key, "'")));
    EXPECT_THAT(status.error_message(), HasSubstr(c.expected));
    EXPECT_FALSE(gate_.Executed(c.name));
  }
}

INSTANTIATE_TEST_SUITE_P(InferApis, RequestParametersTest, ::testing::Values(0, 2), testing::InferApiName);

TEST(DeadlineWithTimeoutTest, TheEarlierOfTheCallDeadlineAndTheTimeoutApplies) {
  EXPECT_EQ(server::DeadlineWithTimeout(0, 1'000, 0), 0) << "neither: none";
  EXPECT_EQ(server::DeadlineWithTimeout(0, 1'000, 5), 6'000) << "the timeout alone";
  EXPECT_EQ(server::DeadlineWithTimeout(9'000, 1'000, 0), 9'000) << "the call's alone";
  EXPECT_EQ(server::DeadlineWithTimeout(9'000, 1'000, 5), 6'000) << "the timeout is earlier";
  EXPECT_EQ(server::DeadlineWithTimeout(4'000, 1'000, 5), 4'000) << "the call's is earlier";
  EXPECT_EQ(server::DeadlineWithTimeout(0, 1'000, std::numeric_limits<int64_t>::max()), 0)
      << "a timeout beyond 100 years is none (and does not overflow)";
}

}  // namespace
}  // namespace chronoserve
