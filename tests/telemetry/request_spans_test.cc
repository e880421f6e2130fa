// Span layout of one request: names, parentage, host spans from stamps, GPU spans laid backwards
// from the observed completion, clamping inside the server span, attributes.
#include "server/telemetry/request_spans.h"

#include <gtest/gtest.h>

#include <map>

namespace chronoserve::server::telemetry {
namespace {

constexpr int64_t kOffset = 1'700'000'000'000'000'000;  // steady -> wall

const Attribute* Find(const SpanData& s, const std::string& key) {
  for (const Attribute& a : s.attributes) {
    if (key == a.key) return &a;
  }
  return nullptr;
}

class RequestSpansTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.name = "policy_net";
    spec_.version = 3;
    request_.id = "req-7";
    request_.batch_items = 2;
    request_.timeline.received_ns = 1000;
    request_.timeline.enqueued_ns = 1100;
    batch_.dequeued_ns = 1500;
    batch_.staged_ns = 1600;
    batch_.h2d_ns = 50;
    batch_.compute_ns = 300;
    batch_.launch_ns = 40;
    batch_.d2h_ns = 20;
    batch_.gpu_done_ns = 2000;
    batch_.batch_size = 5;
    batch_.worker = 1;
    batch_.gpu = 0;
    batch_.sm_clock_mhz = 1980;
    batch_.idle_before_us = 250;
    batch_.cold = true;
    batch_.device_timed = true;
    request_.timeline.SetBatch(batch_);
    request_.timeline.output_done_ns = 2100;
    ids_.trace_id = *HexTrace("4bf92f3577b34da6a3ce929d0e0e4736");
    ids_.parent_span_id = SpanId{1, 2, 3, 4, 5, 6, 7, 8};
    ids_.server_span_id = SpanId{9, 9, 9, 9, 9, 9, 9, 9};
    for (uint8_t i = 0; i < kMaxChildSpans; ++i) ids_.child_span_ids.push_back(SpanId{i, 1, 1, 1, 1, 1, 1, 1});
  }

  static std::optional<TraceId> HexTrace(const std::string& hex) {
    auto p = ParseTraceparent("00-" + hex + "-00f067aa0ba902b7-01");
    if (!p.ok()) return std::nullopt;
    return p->trace_id;
  }

  std::map<std::string, SpanData> Build(const absl::Status& status = absl::OkStatus()) {
    const RequestTiming& timing = request_.timeline.Finalize(2200);
    std::map<std::string, SpanData> by_name;
    for (SpanData& s : BuildRequestSpans(spec_, request_, timing, status, ids_, kOffset)) by_name[s.name] = s;
    return by_name;
  }

  ModelSpec spec_;
  InferRequest request_;
  BatchTiming batch_;
  RequestTraceIds ids_;
};

TEST_F(RequestSpansTest, ServerSpanIsTheCallersChild) {
  auto spans = Build();
  ASSERT_EQ(spans.size(), 9u);
  const SpanData& server = spans.at("ModelInfer policy_net");
  EXPECT_EQ(server.kind, SpanKind::kServer);
  EXPECT_EQ(server.trace_id, ids_.trace_id);
  EXPECT_EQ(server.parent_span_id, ids_.parent_span_id);
  EXPECT_EQ(server.span_id, ids_.server_span_id);
  EXPECT_EQ(server.start_unix_ns, 1000 + kOffset);
  EXPECT_EQ(server.end_unix_ns, 2200 + kOffset);
  EXPECT_EQ(std::get<std::string>(Find(server, "rpc.method")->value), "ModelInfer");
  EXPECT_EQ(std::get<std::string>(Find(server, "chronoserve.request.id")->value), "req-7");
  EXPECT_EQ(server.status, SpanStatus::kUnset);
}

// An id of any length is accepted; its span carries the first 256 bytes, cut where a character
// begins (a span of megabytes would lose its whole export batch at the collector).
TEST_F(RequestSpansTest, ALongRequestIdIsCutAtACharacterInItsSpan) {
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes
  request_.id = std::string(254, 'a') + euro + std::string(1 << 20, 'b');
  std::string carried = std::get<std::string>(Find(Build().at("ModelInfer policy_net"), "chronoserve.request.id")->value);
  EXPECT_EQ(carried, std::string(254, 'a')) << "the euro sign would pass byte 256: left out whole";
  request_.id = std::string(253, 'a') + euro + "tail";
  carried = std::get<std::string>(Find(Build().at("ModelInfer policy_net"), "chronoserve.request.id")->value);
  EXPECT_EQ(carried, std::string(253, 'a') + euro) << "ends exactly at 256";
  request_.id = std::string(256, 'c');
  carried = std::get<std::string>(Find(Build().at("ModelInfer policy_net"), "chronoserve.request.id")->value);
  EXPECT_EQ(carried, request_.id) << "256 bytes fit";
}

// So is a long error's text in the span's status (a TorchScript error carried by every request of
// its batch): its first 1024 bytes, cut where a character begins.
TEST_F(RequestSpansTest, ALongErrorMessageIsCutAtACharacterInItsSpan) {
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes
  const std::string message = std::string(1022, 'e') + euro + std::string(1 << 16, 'f');
  const SpanData server = Build(absl::InternalError(message)).at("ModelInfer policy_net");
  EXPECT_EQ(server.status, SpanStatus::kError);
  EXPECT_EQ(server.status_message, std::string(1022, 'e')) << "the euro sign would pass byte 1024: left out whole";
  const std::string fits(1024, 'g');
  EXPECT_EQ(Build(absl::InternalError(fits)).at("ModelInfer policy_net").status_message, fits);
}

TEST_F(RequestSpansTest, FlagsCarryTheTraceFlagsAndWhetherTheParentIsRemote) {
  for (const uint8_t trace_flags : {uint8_t{0x01}, uint8_t{0x03}}) {
    ids_.flags = trace_flags;
    ids_.parent_span_id = SpanId{1, 2, 3, 4, 5, 6, 7, 8};  // the caller's: remote
    auto spans = Build();
    EXPECT_EQ(spans.at("ModelInfer policy_net").flags, 0x300u | trace_flags);
    for (const auto& [name, s] : spans) {
      if (s.kind != SpanKind::kServer) EXPECT_EQ(s.flags, 0x100u | trace_flags) << name;  // parent is local
    }
  }
  // A trace we started: the server span has no parent, so none that is remote.
  ids_.flags = 0x01;
  ids_.parent_span_id = SpanId{};
  auto spans = Build();
  EXPECT_EQ(spans.at("ModelInfer policy_net").flags, 0x101u);
  EXPECT_EQ(spans.at("compute").flags, 0x101u);
}

TEST_F(RequestSpansTest, HostSpansComeFromTheStamps) {
  auto spans = Build();
  for (const char* name : {"admit", "queue", "input_stage", "h2d", "compute", "d2h", "output_stage", "handback"}) {
    ASSERT_EQ(spans.count(name), 1u) << name;
    EXPECT_EQ(spans[name].parent_span_id, ids_.server_span_id) << name;
    EXPECT_EQ(spans[name].kind, SpanKind::kInternal);
  }
  EXPECT_EQ(spans["admit"].start_unix_ns - kOffset, 1000);
  EXPECT_EQ(spans["admit"].end_unix_ns - kOffset, 1100);
  EXPECT_EQ(spans["queue"].start_unix_ns - kOffset, 1100);
  EXPECT_EQ(spans["queue"].end_unix_ns - kOffset, 1500);
  EXPECT_EQ(spans["input_stage"].start_unix_ns - kOffset, 1500);
  EXPECT_EQ(spans["input_stage"].end_unix_ns - kOffset, 1600);
  EXPECT_EQ(spans["output_stage"].start_unix_ns - kOffset, 2000);
  EXPECT_EQ(spans["output_stage"].end_unix_ns - kOffset, 2100);
  EXPECT_EQ(spans["handback"].start_unix_ns - kOffset, 2100);
  EXPECT_EQ(spans["handback"].end_unix_ns - kOffset, 2200) << "ends with the server span";
}

TEST_F(RequestSpansTest, GpuSpansAreLaidBackwardsFromTheObservedCompletion) {
  ASSERT_EQ(batch_.h2d_end_to_done_ns, 0);  // not pipelined: h2d ends where compute starts
  auto spans = Build();
  EXPECT_EQ(spans["d2h"].end_unix_ns - kOffset, 2000);
  EXPECT_EQ(spans["d2h"].start_unix_ns - kOffset, 1980);
  EXPECT_EQ(spans["compute"].end_unix_ns - kOffset, 1980);
  EXPECT_EQ(spans["compute"].start_unix_ns - kOffset, 1680);
  EXPECT_EQ(spans["h2d"].end_unix_ns - kOffset, 1680);
  EXPECT_EQ(spans["h2d"].start_unix_ns - kOffset, 1630);
  EXPECT_EQ(std::get<int64_t>(Find(spans["compute"], "chronoserve.duration_ns")->value), 300);
  EXPECT_EQ(std::get<int64_t>(Find(spans["compute"], "chronoserve.launch_ns")->value), 40);
  EXPECT_EQ(std::get<std::string>(Find(spans["h2d"], "chronoserve.clock")->value), "cuda_event");
}

TEST_F(RequestSpansTest, PipelinedH2dEndsWhereTheCopyStreamFinishedIt) {
  // Inputs copied on the copy stream while the batch before still ran: h2d ended 340 ns before
  // d2h's end, 20 ns before compute (which waited for the device) started.
  batch_.h2d_end_to_done_ns = 340;
  request_.timeline.SetBatch(batch_);
  auto spans = Build();
  EXPECT_EQ(spans["d2h"].end_unix_ns - kOffset, 2000);
  EXPECT_EQ(spans["d2h"].start_unix_ns - kOffset, 1980);
  EXPECT_EQ(spans["compute"].start_unix_ns - kOffset, 1680);
  EXPECT_EQ(spans["h2d"].end_unix_ns - kOffset, 2000 - 340);
  EXPECT_EQ(spans["h2d"].start_unix_ns - kOffset, 2000 - 340 - 50);
  EXPECT_EQ(spans["compute"].start_unix_ns - spans["h2d"].end_unix_ns, 20) << "the gap the copy stream gained";
  EXPECT_EQ(std::get<int64_t>(Find(spans["h2d"], "chronoserve.duration_ns")->value), 50);
}

TEST_F(RequestSpansTest, PipelinedH2dNeverOverlapsCompute) {
  // An event delta shorter than compute + d2h (rounding) cannot put h2d's end inside compute.
  batch_.h2d_end_to_done_ns = 250;
  request_.timeline.SetBatch(batch_);
  auto spans = Build();
  EXPECT_EQ(spans["h2d"].end_unix_ns - kOffset, 1680);
  EXPECT_EQ(spans["h2d"].start_unix_ns - kOffset, 1630);
}

TEST_F(RequestSpansTest, PipelinedH2dStaysInsideTheServerSpan) {
  batch_.h2d_end_to_done_ns = 5000;  // would reach before the request arrived
  request_.timeline.SetBatch(batch_);
  auto spans = Build();
  const SpanData& server = spans.at("ModelInfer policy_net");
  EXPECT_EQ(spans["h2d"].start_unix_ns, server.start_unix_ns);
  EXPECT_EQ(spans["h2d"].end_unix_ns, server.start_unix_ns);
  EXPECT_EQ(spans["compute"].start_unix_ns - kOffset, 1680);
}

TEST_F(RequestSpansTest, ChildrenStayInsideTheServerSpan) {
  // Event time that (by clock skew) reaches before the request arrived is clamped.
  batch_.compute_ns = 5000;
  request_.timeline.SetBatch(batch_);
  auto spans = Build();
  ASSERT_EQ(spans.size(), 9u) << "the server span and its eight children, each checked below";
  const SpanData& server = spans.at("ModelInfer policy_net");
  for (const auto& [name, span] : spans) {
    EXPECT_GE(span.start_unix_ns, server.start_unix_ns) << name;
    EXPECT_LE(span.end_unix_ns, server.end_unix_ns) << name;
    EXPECT_LE(span.start_unix_ns, span.end_unix_ns) << name;
  }
  // The measured length is still reported exactly.
  EXPECT_EQ(std::get<int64_t>(Find(spans["compute"], "chronoserve.duration_ns")->value), 5000);
}

TEST_F(RequestSpansTest, BatchAttributesOnEverySpan) {
  auto spans = Build();
  ASSERT_EQ(spans.size(), 9u) << "the server span and its eight children, each checked below";
  for (const auto& [name, span] : spans) {
    ASSERT_NE(Find(span, "chronoserve.batch.size"), nullptr) << name;
    EXPECT_EQ(std::get<int64_t>(Find(span, "chronoserve.batch.size")->value), 5) << name;
    EXPECT_EQ(std::get<std::string>(Find(span, "chronoserve.model.name")->value), "policy_net");
    EXPECT_EQ(std::get<int64_t>(Find(span, "chronoserve.model.version")->value), 3);
    EXPECT_EQ(std::get<int64_t>(Find(span, "chronoserve.worker")->value), 1);
    EXPECT_EQ(std::get<int64_t>(Find(span, "chronoserve.sm_clock_mhz")->value), 1980);
    EXPECT_EQ(std::get<int64_t>(Find(span, "chronoserve.idle_before_us")->value), 250);
    EXPECT_TRUE(std::get<bool>(Find(span, "chronoserve.cold")->value));
    EXPECT_EQ(std::get<std::string>(Find(span, "chronoserve.batch.id")->value), "w1-1500");
  }
}

TEST_F(RequestSpansTest, WithoutRequestTimingNoDeviceSpansAndNoUnmeasuredAttributes) {
  batch_.request_timing = false;
  batch_.h2d_ns = batch_.compute_ns = batch_.launch_ns = batch_.d2h_ns = 0;
  batch_.sm_clock_mhz = batch_.idle_before_us = 0;
  request_.timeline.SetBatch(batch_);
  auto spans = Build();
  EXPECT_EQ(spans.count("h2d") + spans.count("compute") + spans.count("d2h"), 0u);
  EXPECT_EQ(spans.count("queue"), 1u) << "host spans stay";
  EXPECT_EQ(spans.count("output_stage"), 1u);
  const SpanData& server = spans.at("ModelInfer policy_net");
  EXPECT_FALSE(std::get<bool>(Find(server, "chronoserve.request_timing")->value));
  EXPECT_EQ(Find(server, "chronoserve.sm_clock_mhz"), nullptr);
  EXPECT_EQ(Find(server, "chronoserve.idle_before_us"), nullptr);
  EXPECT_EQ(std::get<int64_t>(Find(server, "chronoserve.batch.size")->value), 5);
}

TEST_F(RequestSpansTest, FailedBeforeExecutionHasOnlyTheStagesItReached) {
  request_.timeline = Timeline();
  request_.timeline.received_ns = 1000;
  request_.timeline.enqueued_ns = 1100;
  auto spans = Build(absl::DeadlineExceededError("expired in queue"));
  ASSERT_EQ(spans.size(), 2u);  // the server span and admit; the queue span needs a dequeue stamp
  ASSERT_EQ(spans.count("admit"), 1u);
  const SpanData& server = spans.at("ModelInfer policy_net");
  EXPECT_EQ(server.status, SpanStatus::kError);
  EXPECT_EQ(server.status_message, "expired in queue");
  EXPECT_EQ(std::get<int64_t>(Find(server, "rpc.grpc.status_code")->value), 4);
  EXPECT_EQ(Find(server, "chronoserve.batch.size"), nullptr);
}

// A batch that failed after its device work was observed done (before its outputs were
// scattered) shows the stages it completed and no device spans, as the metrics count it.
TEST_F(RequestSpansTest, FailedAfterTheDeviceWorkHasNoDeviceSpans) {
  request_.timeline.output_done_ns = 0;
  auto spans = Build(absl::InternalError("reading the batch's events"));
  EXPECT_EQ(spans.count("queue"), 1u);
  EXPECT_EQ(spans.count("input_stage"), 1u);
  for (const char* name : {"h2d", "compute", "d2h", "output_stage", "handback"}) {
    EXPECT_EQ(spans.count(name), 0u) << name;
  }
  EXPECT_EQ(spans.at("ModelInfer policy_net").status, SpanStatus::kError);
}

TEST_F(RequestSpansTest, OnlyServerCausedCodesMakeTheServerSpanAnError) {
  // OpenTelemetry's gRPC conventions for SERVER spans.
  for (const absl::Status& status :
       {absl::UnknownError("u"), absl::DeadlineExceededError("d"), absl::UnimplementedError("m"),
        absl::InternalError("i"), absl::UnavailableError("a"), absl::DataLossError("l")}) {
    const SpanData server = Build(status).at("ModelInfer policy_net");
    EXPECT_EQ(server.status, SpanStatus::kError) << status;
    EXPECT_EQ(server.status_message, status.message()) << status;
    EXPECT_EQ(std::get<int64_t>(Find(server, "rpc.grpc.status_code")->value), static_cast<int64_t>(status.code()));
  }
  for (const absl::Status& status :
       {absl::InvalidArgumentError("shape"), absl::NotFoundError("model"), absl::ResourceExhaustedError("queue"),
        absl::CancelledError("caller"), absl::FailedPreconditionError("not ready"),
        absl::PermissionDeniedError("p"), absl::UnauthenticatedError("t"), absl::OutOfRangeError("r")}) {
    const SpanData server = Build(status).at("ModelInfer policy_net");
    EXPECT_EQ(server.status, SpanStatus::kUnset) << status;
    EXPECT_EQ(std::get<int64_t>(Find(server, "rpc.grpc.status_code")->value), static_cast<int64_t>(status.code()))
        << "the code is recorded even when the status stays unset";
  }
}

TEST_F(RequestSpansTest, EverySpanCarriesTheCallersTraceState) {
  ids_.trace_state = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
  auto spans = Build();
  ASSERT_EQ(spans.size(), 9u);
  for (const auto& [name, span] : spans) EXPECT_EQ(span.trace_state, ids_.trace_state) << name;
}

}  // namespace
}  // namespace chronoserve::server::telemetry
