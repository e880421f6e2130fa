// ModelStreamInfer over real gRPC on 127.0.0.1: many requests on one stream (outputs per request,
// ids matched, timing.* consistent, statistics), completion out of order across two models, an
// invalid request, an error message cut on a UTF-8 character and a full queue mid-stream (error
// responses, the stream goes on), the per-stream read bound and byte budget, and a client that cancels with
// requests queued (never executed, counted). Workers are held by a Gate
// (tests/server/gated_instance.h); every wait has a timeout that fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "server/grpc/grpc_status.h"
#include "tests/server/gated_instance.h"
#include "tests/server/scheduling_harness.h"
#include "tests/server/test_repository.h"

namespace chronoserve {
namespace {

using ::testing::HasSubstr;
using client::InferStream;
using client::StreamAnswer;
using testing::ExpectGatedOutputs;
using testing::Gate;
using testing::GatedRequest;
using testing::GatedInput;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr uint64_t kLongBatchWindowUs = 60'000'000;  // partial batches wait; full ones go at once
// How long a test gives the server to read a message it must not read (it reads one in microseconds).
constexpr absl::Duration kUnreadWindow = absl::Milliseconds(200);

// TIMING.md's invariants on one streamed response; `e2e_ns` is the client's send -> read.
void ExpectTimingConsistent(const client::InferResult& result, int64_t e2e_ns) {
  ASSERT_TRUE(result.timing.has_value()) << "every streamed response carries timing.*: " << result.id;
  const RequestTiming& t = *result.timing;
  for (int64_t span : {t.queue_ns, t.input_stage_ns, t.h2d_ns, t.compute_ns, t.d2h_ns, t.output_stage_ns}) {
    EXPECT_GE(span, 0) << result.id;
  }
  EXPECT_GT(t.server_total_ns, 0);
  EXPECT_LE(t.queue_ns + t.input_stage_ns + t.h2d_ns + t.compute_ns + t.d2h_ns + t.output_stage_ns, t.server_total_ns);
  EXPECT_GT(t.admit_ns, 0) << result.id;
  EXPECT_GE(t.handback_ns, 0) << result.id;
  EXPECT_GE(t.device_gap_ns(), 0) << "admit, the stages and handback fit in server_total: " << result.id;
  EXPECT_LE(t.server_total_ns, e2e_ns) << "server_total fits in the client's own e2e: " << result.id;
  EXPECT_GE(t.batch_size, 1);
}

// Every streamed response, an error's too, says it is its request's last: Triton's
// triton_final_response, which clients that read a stream until it is true wait for.
void ExpectFinal(const inference::ModelStreamInferResponse& message, const std::string& id) {
  const auto& params = message.infer_response().parameters();
  auto it = params.find("triton_final_response");
  ASSERT_NE(it, params.end()) << "no triton_final_response on " << id;
  EXPECT_EQ(it->second.parameter_choice_case(), inference::InferParameter::kBoolParam) << id;
  EXPECT_TRUE(it->second.bool_param()) << id;
}

// Every test runs with streams on gRPC's callback API (0) and on two ModelInferQueues threads (2: one queue).
class StreamInferTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { ASSERT_TRUE(harness_->ok()); }
  void TearDown() override {
    gate_.Release();  // never leave a worker parked
    other_gate_.Release();
  }

  std::shared_ptr<server::ModelRuntime> Serve(const server::ModelSpec& spec, int workers, Gate* gate) {
    auto runtime = testing::StartGatedModel(spec, workers, gate);
    if (runtime != nullptr) harness_->registry().Add(runtime);
    return runtime;
  }
  inference::GRPCInferenceService::Stub* stub() { return harness_->client().stub(); }
  // The next response, decoded; fails the test when none comes.
  absl::StatusOr<client::InferResult> NextResult(InferStream& stream, std::string* id = nullptr) {
    std::optional<StreamAnswer> answer = stream.Next(kWait);
    if (!answer.has_value()) return absl::DeadlineExceededError("no response on the stream");
    if (id != nullptr) *id = answer->message.infer_response().id();
    return InferStream::Decode(answer->message);
  }

  // A gated model `name` whose outputs have a variable dim, on a harness whose streams have a byte
  // budget of `budget`.
  std::shared_ptr<server::ModelRuntime> ServeVariable(const std::string& name, uint64_t budget,
                                                      uint32_t max_queue_size = 0) {
    server::StreamOptions options;
    options.max_unsent_bytes = budget;
    harness_ = std::make_unique<testing::ServiceHarness>(options, GetParam());
    if (!harness_->ok()) return nullptr;
    server::ModelSpec spec = testing::GatedSpec(name, 4, 0, max_queue_size);
    spec.inputs[0].dims = {-1};
    for (auto& output : spec.outputs) output.dims = {-1};
    return Serve(spec, 1, &gate_);
  }
  // A (input `a`) is held in the worker, then B (one item) is sent: B stays unread (`why`) until A
  // is let go; then both are answered with their outputs.
  void ExpectBUnreadWhileAIsHeld(server::ModelRuntime& runtime, InferStream& stream, const client::Tensor& a,
                                 const std::string& why) {
    const std::string& model = runtime.spec().name;
    const client::Tensor b = GatedInput(1, 'B');
    gate_.Arm();
    ASSERT_TRUE(stream.Send(GatedRequest(model, "A", a)));
    ASSERT_TRUE(gate_.WaitHeld(kWait));
    ASSERT_TRUE(stream.Send(GatedRequest(model, "B", b)));
    EXPECT_FALSE(runtime.queue().WaitForSize(1, kUnreadWindow)) << "B is not read: " << why;
    gate_.Release();
    std::map<std::string, const client::Tensor*> inputs = {{"A", &a}, {"B", &b}};
    for (int i = 0; i < 2; ++i) {
      std::string id;
      auto r = NextResult(stream, &id);
      ASSERT_TRUE(r.ok()) << id << ": " << r.status();
      ExpectGatedOutputs(*r, *inputs.at(id));
    }
  }

  // `runtime` serves a gated model (one worker, max_queue_size 2) on a stream whose bound stops
  // its reads at two one-item requests in flight: A is held in the worker, B queued, and C and D
  // stay unread (`why`) until A's and B's answers go out; then all four are answered, none refused
  // (a queue of 2 never saw C and D beside B).
  void ExpectReadsStopAfterTwoUntilAnswered(server::ModelRuntime& runtime, InferStream& stream, const std::string& why) {
    const std::string& model = runtime.spec().name;
    gate_.Arm();
    std::map<std::string, client::Tensor> inputs;
    for (const char* id : {"A", "B", "C", "D"}) inputs[id] = GatedInput(1, id[0]);
    ASSERT_TRUE(stream.Send(GatedRequest(model, "A", inputs["A"])));
    ASSERT_TRUE(gate_.WaitHeld(kWait));
    for (const char* id : {"B", "C", "D"}) ASSERT_TRUE(stream.Send(GatedRequest(model, id, inputs[id])));
    ASSERT_TRUE(runtime.queue().WaitForSize(1, kWait)) << "B was read and queued";
    // Absence: a stream that read C would have queued it well within the window.
    EXPECT_FALSE(runtime.queue().WaitForSize(2, kUnreadWindow)) << "C and D are not read while " << why;
    gate_.Release();
    for (int i = 0; i < 4; ++i) {
      std::string id;
      auto r = NextResult(stream, &id);
      ASSERT_TRUE(r.ok()) << id << ": " << r.status();
      ExpectGatedOutputs(*r, inputs[id]);
    }
    EXPECT_EQ(runtime.stats().Snapshot().rejected, 0u);
  }

  Gate gate_;
  Gate other_gate_;
  std::unique_ptr<testing::ServiceHarness> harness_ =
      std::make_unique<testing::ServiceHarness>(server::StreamOptions{}, GetParam());
};

TEST_P(StreamInferTest, ManyRequestsOnOneStreamAreAnsweredPerRequestWithTiming) {
  auto runtime = Serve(testing::GatedSpec("many", 8, 500), 2, &gate_);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  constexpr int kRequests = 200;
  std::map<std::string, client::Tensor> inputs;
  std::map<std::string, int64_t> sent_ns;
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = "r" + std::to_string(i);
    inputs[id] = GatedInput(1 + i % 3, 100 + i);
    sent_ns[id] = SteadyClock::Now();
    ASSERT_TRUE(stream->Send(GatedRequest("many", id, inputs[id])));
  }
  stream->CloseSend();
  std::set<std::string> seen;
  for (int i = 0; i < kRequests; ++i) {
    std::optional<StreamAnswer> answer = stream->Next(kWait);
    ASSERT_TRUE(answer.has_value()) << "response " << i << " of " << kRequests;
    auto result = InferStream::Decode(answer->message);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(inputs.count(result->id), 1u) << "unknown id '" << result->id << "'";
    EXPECT_TRUE(seen.insert(result->id).second) << "answered twice: " << result->id;
    EXPECT_EQ(answer->message.infer_response().model_name(), "many");
    ExpectFinal(answer->message, result->id);
    ExpectGatedOutputs(*result, inputs[result->id]);
    ExpectTimingConsistent(*result, answer->received_ns - sent_ns[result->id]);
  }
  const auto status = stream->Finish(kWait);
  ASSERT_TRUE(status.has_value()) << "the stream ends after the half-close once all are answered";
  EXPECT_TRUE(status->ok()) << status->error_message();
  const server::ModelStatsSnapshot s = runtime->stats().Snapshot();
  EXPECT_EQ(s.success.count, static_cast<uint64_t>(kRequests)) << "statistics count streamed requests";
  EXPECT_EQ(harness_->observer().WaitFor("r199", kWait).value_or(absl::UnknownError("none")), absl::OkStatus())
      << "the observer (metrics, traces) sees streamed requests";
}

TEST_P(StreamInferTest, ResponsesComeInCompletionOrderAcrossModels) {
  ASSERT_NE(Serve(testing::GatedSpec("slow", 4, 0), 1, &gate_), nullptr);
  ASSERT_NE(Serve(testing::GatedSpec("fast", 4, 0), 1, &other_gate_), nullptr);
  auto stream = InferStream::Open(stub());
  gate_.Arm();
  const client::Tensor slow_in = GatedInput(1, 7), fast_in = GatedInput(2, 8);
  ASSERT_TRUE(stream->Send(GatedRequest("slow", "S", slow_in)));
  ASSERT_TRUE(gate_.WaitHeld(kWait)) << "the slow request is executing";
  ASSERT_TRUE(stream->Send(GatedRequest("fast", "F", fast_in)));
  std::string id;
  auto first = NextResult(*stream, &id);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(id, "F") << "the later request finished first and was answered first";
  ExpectGatedOutputs(*first, fast_in);
  gate_.Release();
  auto second = NextResult(*stream, &id);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(id, "S");
  ExpectGatedOutputs(*second, slow_in);
}

TEST_P(StreamInferTest, InvalidRequestsGetErrorResponsesAndTheStreamGoesOn) {
  ASSERT_NE(Serve(testing::GatedSpec("valid", 4, 0), 1, &gate_), nullptr);
  auto stream = InferStream::Open(stub());
  const client::Tensor good = GatedInput(1, 21);
  client::Tensor bad_shape = GatedInput(1, 22);
  bad_shape.shape = {1, 2, 2};
  ASSERT_TRUE(stream->Send(GatedRequest("valid", "good-1", good)));
  ASSERT_TRUE(stream->Send(GatedRequest("valid", "bad-shape", bad_shape)));
  ASSERT_TRUE(stream->Send(GatedRequest("no_such_model", "bad-model", good)));
  ASSERT_TRUE(stream->Send(GatedRequest("valid", "good-2", good)));
  stream->CloseSend();
  std::map<std::string, absl::StatusOr<client::InferResult>> results;
  for (int i = 0; i < 4; ++i) {
    std::optional<StreamAnswer> answer = stream->Next(kWait);
    ASSERT_TRUE(answer.has_value()) << "response " << i << " of 4";
    const std::string id = answer->message.infer_response().id();
    ExpectFinal(answer->message, id);
    results.emplace(id, InferStream::Decode(answer->message));
  }
  ASSERT_TRUE(results.at("good-1").ok()) << results.at("good-1").status();
  ASSERT_TRUE(results.at("good-2").ok()) << results.at("good-2").status();
  ExpectGatedOutputs(*results.at("good-2"), good);
  const absl::Status shape = results.at("bad-shape").status();
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument) << shape;
  EXPECT_THAT(std::string(shape.message()), HasSubstr("model 'valid' input 'INPUT__0'"));
  EXPECT_THAT(std::string(shape.message()), HasSubstr("expected"));
  EXPECT_EQ(results.at("bad-model").status().code(), absl::StatusCode::kNotFound) << results.at("bad-model").status();
  const auto status = stream->Finish(kWait);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->ok()) << "errors are per request, not the stream's: " << status->error_message();
}

// A client's long non-ASCII tensor name is quoted cut at 200 bytes on a UTF-8 character boundary:
// half a character in error_message (a proto3 string) would fail the client's read and lose every
// later response; and what the model expects survives (a message over 1 KiB is cut on a character
// too: grpc_status_test.cc).
TEST_P(StreamInferTest, ALongNonAsciiNameIsQuotedCutOnACharacterAndTheStreamGoesOn) {
  ASSERT_NE(Serve(testing::GatedSpec("valid", 4, 0), 1, &gate_), nullptr);
  auto stream = InferStream::Open(stub());
  std::string accents;
  for (int i = 0; i < 600; ++i) accents += "\xC3\xA9";  // e-acute, 2 bytes
  // One of "x", "xx" before the accents puts the 1 KiB cut (or the 200-byte quote) mid-character.
  client::Tensor odd = GatedInput(1, 41), even = GatedInput(1, 42);
  odd.name = "x" + accents;
  even.name = "xx" + accents;
  const client::Tensor good = GatedInput(1, 43);
  ASSERT_TRUE(stream->Send(GatedRequest("valid", "input-odd", odd)));
  ASSERT_TRUE(stream->Send(GatedRequest("valid", "input-even", even)));
  ASSERT_TRUE(stream->Send(GatedRequest("valid", "good", good)));
  stream->CloseSend();
  std::map<std::string, absl::StatusOr<client::InferResult>> results;
  for (int i = 0; i < 3; ++i) {
    std::string id;
    auto r = NextResult(*stream, &id);
    if (!r.ok() && r.status().code() == absl::StatusCode::kDeadlineExceeded) FAIL() << r.status();
    results.emplace(id, std::move(r));
  }
  for (const char* id : {"input-odd", "input-even"}) {
    const absl::Status refused = results.at(id).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << id << ": " << refused;
    EXPECT_THAT(std::string(refused.message()), ::testing::StartsWith("model 'valid' input 'x"));
    EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("\xC3\xA9... ("));
    EXPECT_THAT(std::string(refused.message()), ::testing::EndsWith("(the model's inputs: INPUT__0)")) << id;
  }
  ASSERT_TRUE(results.at("good").ok()) << results.at("good").status();
  ExpectGatedOutputs(*results.at("good"), good);
  const auto status = stream->Finish(kWait);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->ok()) << status->error_message();
}

TEST_P(StreamInferTest, QueueFullIsAnErrorResponseOnTheStream) {
  auto runtime = Serve(testing::GatedSpec("full", 4, 0, /*max_queue_size=*/1), 1, &gate_);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  gate_.Arm();
  const client::Tensor a = GatedInput(1, 31), b = GatedInput(1, 32);
  ASSERT_TRUE(stream->Send(GatedRequest("full", "A", a)));
  ASSERT_TRUE(gate_.WaitHeld(kWait));
  ASSERT_TRUE(stream->Send(GatedRequest("full", "B", b)));
  ASSERT_TRUE(runtime->queue().WaitForSize(1, kWait)) << "B waits in the queue";
  ASSERT_TRUE(stream->Send(GatedRequest("full", "C", GatedInput(1, 33))));
  std::string id;
  auto refused = NextResult(*stream, &id);
  EXPECT_EQ(id, "C");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("queue is full"));
  gate_.Release();
  for (int i = 0; i < 2; ++i) {
    auto r = NextResult(*stream, &id);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(id == "A" || id == "B") << id;
    ExpectGatedOutputs(*r, id == "A" ? a : b);
  }
  EXPECT_EQ(runtime->stats().Snapshot().rejected, 1u);
}

TEST_P(StreamInferTest, AStreamStopsReadingAtItsInFlightBoundAndResumes) {
  server::StreamOptions options;
  options.max_in_flight = 2;
  harness_ = std::make_unique<testing::ServiceHarness>(options, GetParam());
  ASSERT_TRUE(harness_->ok());
  auto runtime = Serve(testing::GatedSpec("bounded", 4, 0, /*max_queue_size=*/2), 1, &gate_);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  ExpectReadsStopAfterTwoUntilAnswered(*runtime, *stream, "A and B are in flight");
}

// The byte budget counts a request in flight at the bytes its model's output shapes give it: two
// FP32 outputs of 4 per item, 32 bytes a one-item request; with a budget of 64 the stream reads A
// and B, then stops until their answers are written.
TEST_P(StreamInferTest, AStreamStopsReadingAtItsByteBudgetFromTheOutputShapes) {
  server::StreamOptions options;
  options.max_unsent_bytes = 64;
  harness_ = std::make_unique<testing::ServiceHarness>(options, GetParam());
  ASSERT_TRUE(harness_->ok());
  auto runtime = Serve(testing::GatedSpec("shaped", 4, 0, /*max_queue_size=*/2), 1, &gate_);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  ExpectReadsStopAfterTwoUntilAnswered(*runtime, *stream, "A's and B's 64 bytes are unsent");
}

// Outputs of variable shape: a request in flight counts as its model's largest answer on the stream
// so far. The first (32 bytes) teaches the stream; then A and B fill the budget of 64 and C waits
// unread.
TEST_P(StreamInferTest, WithVariableOutputShapesTheByteBudgetCountsTheLargestAnswerSoFar) {
  auto runtime = ServeVariable("variable", 64, /*max_queue_size=*/2);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  const client::Tensor first = GatedInput(1, 7);
  ASSERT_TRUE(stream->Send(GatedRequest("variable", "first", first)));
  auto answered = NextResult(*stream);
  ASSERT_TRUE(answered.ok()) << answered.status();
  ExpectGatedOutputs(*answered, first);
  ExpectReadsStopAfterTwoUntilAnswered(*runtime, *stream, "A and B count 32 bytes each");
}

// The largest answer is counted per item: after a one-item answer of 32 bytes, a two-item request
// in flight counts 64, the whole budget, so B stays unread while A runs (counted as one answer, A
// would have let B in).
TEST_P(StreamInferTest, WithVariableOutputShapesTheGuessScalesWithTheRequestsItems) {
  auto runtime = ServeVariable("per_item", 64);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  ASSERT_TRUE(stream->Send(GatedRequest("per_item", "first", GatedInput(1, 17))));
  auto answered = NextResult(*stream);
  ASSERT_TRUE(answered.ok()) << answered.status();
  ExpectBUnreadWhileAIsHeld(*runtime, *stream, GatedInput(2, 'A'), "A's two items count 64");
}

// An error answer (here a request whose timeout passed in the queue) carries no outputs, so it
// teaches the stream no size: the next request still counts as the whole budget. Taken as the
// model's answer size (its error text, about 100 bytes), it would have let a never-reading client
// have every later request read at that size.
TEST_P(StreamInferTest, AnErrorAnswerTeachesTheByteBudgetNoSize) {
  auto runtime = ServeVariable("errs_first", 1 << 20);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  inference::ModelInferRequest expiring = GatedRequest("errs_first", "expired", GatedInput(1, 5));
  (*expiring.mutable_parameters())["timeout"].set_int64_param(1);  // 1 us: gone before a worker takes it
  ASSERT_TRUE(stream->Send(std::move(expiring)));
  std::string id;
  auto expired = NextResult(*stream, &id);
  EXPECT_EQ(id, "expired");
  ASSERT_EQ(expired.status().code(), absl::StatusCode::kDeadlineExceeded) << expired.status();
  ExpectBUnreadWhileAIsHeld(*runtime, *stream, GatedInput(1, 'A'), "A's size is still unknown");
}

// Before any answer of a variable-output model on the stream, its request in flight counts as the
// whole budget: with A held, B stays unread (a never-reading client could otherwise have 1024
// requests of unknown size read at no cost).
TEST_P(StreamInferTest, AVariableOutputModelsFirstRequestOnAStreamCountsAsTheWholeBudget) {
  auto runtime = ServeVariable("unknown", 1 << 20);
  ASSERT_NE(runtime, nullptr);
  auto stream = InferStream::Open(stub());
  ExpectBUnreadWhileAIsHeld(*runtime, *stream, GatedInput(1, 'A'), "A's size is unknown");
}

// What a request's answer is expected to carry: each output returned in the message, batch items x
// fixed dims x type size, saturating; outputs into shared memory (or dropped) count nothing; an
// output with a variable dim is flagged and counts nothing itself.
TEST(EstimateAnswerTest, CountsTheOutputsSentInTheMessageFromTheirShapes) {
  server::ModelSpec spec = testing::GatedSpec("m", 8, 0);
  spec.outputs[1].dtype = DataType::kFp64;
  spec.outputs[1].dims = {2, 3};
  server::InferRequest request;
  request.batch_items = 5;
  std::string data0, data1;
  request.outputs.resize(2);
  request.outputs[0].index = 0;
  request.outputs[0].data = &data0;
  request.outputs[1].index = 1;
  request.outputs[1].data = &data1;
  server::AnswerEstimate estimate = server::EstimateAnswer(request, spec);
  EXPECT_EQ(estimate.fixed_bytes, 5u * 4 * 4 + 5 * 6 * 8);
  EXPECT_FALSE(estimate.variable);
  spec.outputs[0].dims = {-1};
  estimate = server::EstimateAnswer(request, spec);
  EXPECT_EQ(estimate.fixed_bytes, 5u * 6 * 8) << "the fixed output still counts";
  EXPECT_TRUE(estimate.variable);
  char region[16];
  request.outputs[0].data = nullptr;  // into a shared-memory region
  request.outputs[0].raw = region;
  request.outputs[0].raw_capacity = sizeof(region);
  estimate = server::EstimateAnswer(request, spec);
  EXPECT_EQ(estimate.fixed_bytes, 5u * 6 * 8);
  EXPECT_FALSE(estimate.variable) << "a variable output into shared memory is not in the message";
  spec.outputs[1].dims = {int64_t{1} << 40, int64_t{1} << 40};  // would wrap a 64-bit product
  estimate = server::EstimateAnswer(request, spec);
  EXPECT_EQ(estimate.fixed_bytes, server::kMostCountedAnswerBytes);
  spec.outputs[1].dims = {int64_t{1} << 62, 0};
  EXPECT_EQ(server::EstimateAnswer(request, spec).fixed_bytes, 0u) << "a zero dim: nothing, even after a saturated one";
}

TEST_P(StreamInferTest, CancellingTheStreamDropsItsQueuedRequestsUnexecuted) {
  // Worker X is held by a full batch from a unary call; worker Y keeps B and C queued for the long
  // batch window, so only the stream's cancellation can end their wait.
  auto runtime = Serve(testing::GatedSpec("cancel", 4, kLongBatchWindowUs), 2, &gate_);
  ASSERT_NE(runtime, nullptr);
  gate_.Arm();
  testing::PendingInfer a(stub(), "cancel", "A", GatedInput(4, 41));
  ASSERT_TRUE(gate_.WaitHeld(kWait));
  auto stream = InferStream::Open(stub());
  ASSERT_TRUE(stream->Send(GatedRequest("cancel", "B", GatedInput(1, 42))));
  ASSERT_TRUE(stream->Send(GatedRequest("cancel", "C", GatedInput(1, 43))));
  ASSERT_TRUE(runtime->queue().WaitForSize(2, kWait)) << "B and C accepted and queued";
  stream->Cancel();
  for (const char* id : {"B", "C"}) {
    const auto answer = harness_->observer().WaitFor(id, kWait);
    ASSERT_TRUE(answer.has_value()) << "the server answered " << id << " while the worker was still held";
    EXPECT_EQ(answer->code(), absl::StatusCode::kCancelled) << *answer;
  }
  const auto status = stream->Finish(kWait);
  ASSERT_TRUE(status.has_value()) << "the stream ended once its requests were answered";
  EXPECT_EQ(status->error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(a.done()) << "all of this happened while the full batch was still executing";
  gate_.Release();
  ASSERT_TRUE(a.Wait(kWait).has_value());
  EXPECT_FALSE(gate_.Executed("B")) << "a cancelled stream's queued requests never reach the backend";
  EXPECT_FALSE(gate_.Executed("C"));
  EXPECT_EQ(runtime->stats().Snapshot().cancelled, 2u);
}

INSTANTIATE_TEST_SUITE_P(InferApis, StreamInferTest, ::testing::Values(0, 2), testing::InferApiName);

}  // namespace
}  // namespace chronoserve
