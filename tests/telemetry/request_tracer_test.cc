// RequestTracer with an injected steady clock (FakeClock) and a fixed wall clock: where its spans land
// on the wall clock. The steady -> wall offset is taken when the request is done, so the server span
// starts at received_ns + wall - steady, and every child sits at its own stamps (host spans) or its
// event deltas back from the observed completion (GPU spans), shifted by that same offset.
#include "server/telemetry/request_tracer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/otlp/batch_span_processor.h"
#include "tests/fakes/capturing_exporter.h"
#include "server/telemetry/request_spans.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::BatchSpanProcessorOptions;
using otlp::ExportResult;
using otlp::SpanData;
using otlp::SpanExporter;

using testing::CapturingExporter;

// The wall clock the tracer reads (RequestTracer takes a plain function pointer).
std::atomic<int64_t> g_wall_ns{0};
int64_t TestWallNs() { return g_wall_ns.load(); }

constexpr int64_t kWallAtDone = 1'763'000'000'123'456'789;  // Unix ns when the tracer runs

class RequestTracerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_wall_ns = kWallAtDone;
    auto exporter = std::make_unique<CapturingExporter>();
    exporter_ = exporter.get();
    BatchSpanProcessorOptions options;
    options.schedule_delay = absl::Hours(1);  // exports only when the test flushes
    processor_ = std::make_unique<otlp::BatchSpanProcessor>(std::move(exporter), options);
    processor_->Start();
    auto sampler = Sampler::Create("always_on", "");
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    control_ = std::make_unique<TraceControl>(*sampler, /*collector=*/true);
    tracer_ = std::make_unique<RequestTracer>(control_.get(), processor_.get(), &steady_, &TestWallNs);

    spec_.name = "mlp";
    spec_.version = 1;
    request_ = MakeRequest();
  }
  void TearDown() override { processor_->Shutdown(absl::Now() + absl::Seconds(10)); }

  // A request that ran alone in a device-timed batch; steady stamps in the FakeClock's range.
  static std::unique_ptr<InferRequest> MakeRequest() {
    auto request = std::make_unique<InferRequest>();
    request->id = "r1";
    request->traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    Timeline& t = request->timeline;
    t.received_ns = 7'000'010'000;
    t.enqueued_ns = 7'000'010'130;
    BatchTiming batch;
    batch.dequeued_ns = 7'000'010'570;
    batch.staged_ns = 7'000'010'690;
    batch.h2d_ns = 53;
    batch.compute_ns = 310;
    batch.launch_ns = 41;
    batch.d2h_ns = 27;
    batch.gpu_done_ns = 7'000'011'170;
    batch.batch_size = 1;
    batch.worker = 0;
    batch.gpu = 0;
    batch.device_timed = true;
    t.SetBatch(batch, true);
    t.output_done_ns = 7'000'011'290;
    return request;
  }

  // Runs the tracer at steady time `done_ns` and returns the spans it exported, by name.
  std::map<std::string, SpanData> TraceAt(int64_t done_ns) {
    steady_.AdvanceNs(done_ns - steady_.NowNs());
    const RequestTiming& timing = request_->timeline.Finalize(kRespondedNs);
    tracer_->OnRequestDone(spec_, request_.get(), timing, absl::OkStatus());
    EXPECT_TRUE(processor_->ForceFlush(absl::Now() + absl::Seconds(30))) << "spans never exported";
    std::map<std::string, SpanData> by_name;
    for (const SpanData& s : exporter_->spans()) by_name[s.name] = s;
    return by_name;
  }

  static constexpr int64_t kRespondedNs = 7'000'011'400;  // server_total ends here (steady)
  FakeClock steady_{7'000'000'000};
  CapturingExporter* exporter_ = nullptr;
  std::unique_ptr<otlp::BatchSpanProcessor> processor_;
  std::unique_ptr<TraceControl> control_;
  std::unique_ptr<RequestTracer> tracer_;
  ModelSpec spec_;
  std::unique_ptr<InferRequest> request_;
};

TEST_F(RequestTracerTest, SpansLandOnTheWallClockAtTheirSteadyStampsPlusTheOffsetAtCompletion) {
  constexpr int64_t kDoneNs = 7'000'011'450;  // the tracer runs 50 ns after the response went out
  const std::map<std::string, SpanData> spans = TraceAt(kDoneNs);
  ASSERT_EQ(spans.size(), 9u);
  const int64_t offset = kWallAtDone - kDoneNs;  // wall = steady + offset
  const Timeline& t = request_->timeline;
  const BatchTiming& b = t.batch();

  const SpanData& server = spans.at("ModelInfer mlp");
  EXPECT_EQ(server.start_unix_ns, t.received_ns + kWallAtDone - kDoneNs);
  EXPECT_EQ(server.start_unix_ns, kWallAtDone - 1450) << "received 1450 ns before the tracer ran";
  EXPECT_EQ(server.end_unix_ns, kRespondedNs + offset);
  EXPECT_EQ(server.end_unix_ns - server.start_unix_ns, 1400) << "server_total";
  EXPECT_EQ(ToHex(server.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");

  // Host spans: their own stamps, shifted.
  EXPECT_EQ(spans.at("admit").start_unix_ns, t.received_ns + offset);
  EXPECT_EQ(spans.at("admit").end_unix_ns, t.enqueued_ns + offset);
  EXPECT_EQ(spans.at("queue").start_unix_ns, t.enqueued_ns + offset);
  EXPECT_EQ(spans.at("queue").end_unix_ns, b.dequeued_ns + offset);
  EXPECT_EQ(spans.at("input_stage").start_unix_ns, b.dequeued_ns + offset);
  EXPECT_EQ(spans.at("input_stage").end_unix_ns, b.staged_ns + offset);
  EXPECT_EQ(spans.at("output_stage").start_unix_ns, b.gpu_done_ns + offset);
  EXPECT_EQ(spans.at("output_stage").end_unix_ns, t.output_done_ns + offset);
  EXPECT_EQ(spans.at("handback").start_unix_ns, t.output_done_ns + offset);
  EXPECT_EQ(spans.at("handback").end_unix_ns, server.end_unix_ns);
  // GPU spans: event deltas laid back from the observed completion.
  const int64_t done = b.gpu_done_ns + offset;
  EXPECT_EQ(spans.at("d2h").end_unix_ns, done);
  EXPECT_EQ(spans.at("d2h").start_unix_ns, done - b.d2h_ns);
  EXPECT_EQ(spans.at("compute").end_unix_ns, done - b.d2h_ns);
  EXPECT_EQ(spans.at("compute").start_unix_ns, done - b.d2h_ns - b.compute_ns);
  EXPECT_EQ(spans.at("h2d").end_unix_ns, done - b.d2h_ns - b.compute_ns);
  EXPECT_EQ(spans.at("h2d").start_unix_ns, done - b.d2h_ns - b.compute_ns - b.h2d_ns);
  // The same in absolute figures, so a sign slip in both the code and the lines above shows.
  EXPECT_EQ(spans.at("compute").start_unix_ns, kWallAtDone - 280 - 27 - 310);
  for (const auto& [name, s] : spans) {
    EXPECT_GE(s.start_unix_ns, server.start_unix_ns) << name;
    EXPECT_LE(s.end_unix_ns, server.end_unix_ns) << name;
  }
}

// The offset is read when the tracer runs: if both clocks advanced together meanwhile (the tracer ran
// late), the spans land where the request ran, not later.
TEST_F(RequestTracerTest, ATracerThatRunsLateStillPlacesTheRequestWhereItRan) {
  constexpr int64_t kLateNs = 250'000'000;
  g_wall_ns = kWallAtDone + kLateNs;
  const std::map<std::string, SpanData> spans = TraceAt(7'000'011'450 + kLateNs);
  ASSERT_EQ(spans.count("ModelInfer mlp"), 1u);
  ASSERT_EQ(spans.count("compute"), 1u);
  EXPECT_EQ(spans.at("ModelInfer mlp").start_unix_ns, kWallAtDone - 1450);
  EXPECT_EQ(spans.at("compute").start_unix_ns, kWallAtDone - 280 - 27 - 310);
}

// A wall clock stepped (NTP) between the request and the tracer moves the whole request with it:
// the spans keep their steady-clock lengths and order.
TEST_F(RequestTracerTest, AWallClockStepShiftsTheWholeRequestAndKeepsItsShape) {
  constexpr int64_t kStepNs = -3'000'000'000;
  g_wall_ns = kWallAtDone + kStepNs;
  const std::map<std::string, SpanData> spans = TraceAt(7'000'011'450);
  ASSERT_EQ(spans.size(), 9u);
  EXPECT_EQ(spans.at("ModelInfer mlp").start_unix_ns, kWallAtDone + kStepNs - 1450);
  EXPECT_EQ(spans.at("ModelInfer mlp").end_unix_ns - spans.at("ModelInfer mlp").start_unix_ns, 1400);
  EXPECT_EQ(spans.at("queue").end_unix_ns - spans.at("queue").start_unix_ns, 440);
  EXPECT_EQ(spans.at("d2h").end_unix_ns, kWallAtDone + kStepNs - 280);
}

// The trace settings are read once, when the request is received (DecideTrace): a request received
// under trace_count 1 keeps its trace when the count runs out before it finishes, and one received
// past the count stays untraced when the count is cleared before it finishes.
TEST_F(RequestTracerTest, ARequestIsTracedAsTheSettingsStoodWhenItWasReceived) {
  ASSERT_TRUE(control_->Update("mlp", {{"trace_count", {"1"}}}).ok());
  request_->trace = tracer_->DecideTrace(spec_, request_->traceparent);
  ASSERT_TRUE(request_->trace.has_value());
  EXPECT_TRUE(request_->trace->traced);
  EXPECT_EQ(ToHex(request_->trace->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736") << "the caller's trace";
  auto past = MakeRequest();
  past->traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  past->trace = tracer_->DecideTrace(spec_, past->traceparent);
  ASSERT_TRUE(past->trace.has_value());
  EXPECT_FALSE(past->trace->traced) << "the count was taken by the first";
  ASSERT_TRUE(control_->Update("mlp", {{"trace_level", {"OFF"}}, {"trace_count", {}}}).ok());

  const std::map<std::string, SpanData> spans = TraceAt(7'000'011'450);
  EXPECT_EQ(spans.size(), 9u) << "decided at receipt, before trace_level went OFF";
  const size_t exported = exporter_->spans().size();
  ASSERT_TRUE(control_->Update("mlp", {{"trace_level", {}}}).ok());
  const RequestTiming& timing = past->timeline.Finalize(kRespondedNs);
  tracer_->OnRequestDone(spec_, past.get(), timing, absl::OkStatus());
  EXPECT_TRUE(processor_->ForceFlush(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(exporter_->spans().size(), exported) << "not traced at receipt: clearing the count later changes nothing";
}

// A new trace's id is drawn at receipt and is the one its spans carry; a request no decision was
// taken for (RequestTracer used alone) is decided when it finishes.
TEST_F(RequestTracerTest, ANewTracesIdIsDrawnAtReceiptAndKept) {
  request_->traceparent.clear();
  request_->trace = tracer_->DecideTrace(spec_, "");
  ASSERT_TRUE(request_->trace.has_value());
  ASSERT_TRUE(request_->trace->traced);
  const std::map<std::string, SpanData> spans = TraceAt(7'000'011'450);
  ASSERT_EQ(spans.count("ModelInfer mlp"), 1u);
  EXPECT_EQ(spans.at("ModelInfer mlp").trace_id, request_->trace->trace_id);
  EXPECT_EQ(spans.at("ModelInfer mlp").parent_span_id, SpanId{}) << "a root";

  const size_t exported = exporter_->spans().size();
  auto undecided = MakeRequest();
  ASSERT_TRUE(control_->Update("mlp", {{"trace_level", {"OFF"}}}).ok());
  const RequestTiming& timing = undecided->timeline.Finalize(kRespondedNs);
  tracer_->OnRequestDone(spec_, undecided.get(), timing, absl::OkStatus());
  EXPECT_TRUE(processor_->ForceFlush(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(exporter_->spans().size(), exported) << "undecided: the settings at completion (OFF) apply";
}

}  // namespace
}  // namespace chronoserve::server::telemetry
