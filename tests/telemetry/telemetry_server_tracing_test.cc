// TelemetryServerTest, tracing: requests (unary and streamed) carry a W3C traceparent and the OTLP
// receiver written by others decodes the server's spans. Suite set-up: telemetry_server_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "server/telemetry/request_tracer.h"
#include "tests/fakes/wall_clock_jumps.h"
#include "tests/telemetry/otlp_test_receiver.h"
#include "tests/telemetry/telemetry_server_fixture.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using testing::kSpansPerRequest;
using testing::ParseMetrics;
using testing::ReceivedSpan;
using testing::ScrapeMetrics;
using testing::TelemetryServerTest;
using testing::WallClockJumps;

TEST_F(TelemetryServerTest, SpansJoinTheCallersTraceAndNestInsideTheServerSpan) {
  for (int i = 0; i < 4; ++i) {
    const std::string trace_id = ToHex(server::telemetry::NewTraceId());
    const std::string caller_span = ToHex(server::telemetry::NewSpanId());
    // Odd requests: the caller's trace id is random (W3C Level 2 flag 0x02), which the spans carry.
    const uint32_t trace_flags = i % 2 == 0 ? 0x01 : 0x03;
    WallClockJumps jumps;
    const int64_t before_send_unix_ns = absl::ToUnixNanos(absl::Now());
    auto result = Infer({{"traceparent", "00-" + trace_id + "-" + caller_span + (i % 2 == 0 ? "-01" : "-03")},
                         {"tracestate", "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"}});
    const int64_t after_receive_unix_ns = absl::ToUnixNanos(absl::Now());
    ASSERT_TRUE(result.ok()) << result.status();
    jumps.Stop();
    ASSERT_TRUE(result->timing.has_value());
    ASSERT_TRUE(WaitForTrace(trace_id, kSpansPerRequest)) << "spans of request " << i << " never arrived";
    const std::vector<ReceivedSpan> spans = SpansOfTrace(trace_id);
    ASSERT_EQ(spans.size(), kSpansPerRequest);
    const ReceivedSpan* root = nullptr;
    for (const ReceivedSpan& s : spans) {
      if (s.kind == 2) root = &s;
    }
    ASSERT_NE(root, nullptr);
    EXPECT_EQ(root->name, "ModelInfer mlp");
    EXPECT_EQ(root->parent_span_id, caller_span);
    EXPECT_EQ(root->trace_state, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    EXPECT_EQ(root->flags, 0x300u | trace_flags);  // OTLP: has-is-remote, is-remote (the caller)
    EXPECT_EQ(root->end_ns - root->start_ns, result->timing->server_total_ns);
    // On the wall clock the server span lies inside the client's call (same host, same clock), give
    // or take any jump of the wall clock near it: the server read it when the request was done.
    const int64_t jumped = jumps.Near(before_send_unix_ns, after_receive_unix_ns);
    EXPECT_GE(root->start_ns, before_send_unix_ns - jumped);
    EXPECT_LE(root->end_ns, after_receive_unix_ns + jumped);
    EXPECT_EQ(root->attributes.at("rpc.grpc.status_code"), "0");
    EXPECT_EQ(root->attributes.at("chronoserve.model.name"), "mlp");
    EXPECT_EQ(root->attributes.at("chronoserve.batch.size"), std::to_string(result->timing->batch_size));
    EXPECT_EQ(root->resource.at("service.name"), "chronoserve-test");
    std::set<std::string> names;
    for (const ReceivedSpan& s : spans) {
      if (&s == root) continue;
      names.insert(s.name);
      EXPECT_EQ(s.parent_span_id, root->span_id) << s.name;
      EXPECT_EQ(s.flags, 0x100u | trace_flags) << s.name;  // has-is-remote; the parent is local
      EXPECT_EQ(s.kind, 1) << s.name;
      EXPECT_GE(s.start_ns, root->start_ns) << s.name;
      EXPECT_LE(s.end_ns, root->end_ns) << s.name;
      EXPECT_LE(s.start_ns, s.end_ns) << s.name;
      EXPECT_EQ(s.attributes.at("chronoserve.batch.id"), root->attributes.at("chronoserve.batch.id"));
    }
    EXPECT_EQ(names, (std::set<std::string>{"admit", "queue", "input_stage", "h2d", "compute", "d2h", "output_stage",
                                            "handback"}));
    for (const ReceivedSpan& s : spans) {
      if (s.name == "compute") {
        EXPECT_EQ(s.attributes.at("chronoserve.duration_ns"), std::to_string(result->timing->compute_ns));
      }
      if (s.name == "queue") EXPECT_EQ(s.end_ns - s.start_ns, result->timing->queue_ns);
      if (s.name == "admit") EXPECT_EQ(s.end_ns - s.start_ns, result->timing->admit_ns);
      if (s.name == "handback") {
        EXPECT_EQ(s.end_ns - s.start_ns, result->timing->handback_ns);
        EXPECT_EQ(s.end_ns, root->end_ns) << "the answer's way back ends the server span";
      }
    }
  }
}

// Streamed requests are observed like unary ones: each joins the trace its own traceparent
// parameter names (one stream carries many traces), and the request counters include them.
TEST_F(TelemetryServerTest, StreamedRequestsAreTracedPerRequestAndCounted) {
  const int port = telemetry_->metrics_port();
  const std::string kSuccess = R"(chronoserve_requests_total{model="mlp",outcome="success",version="1"})";
  const std::map<std::string, double> before = ParseMetrics(ScrapeMetrics(port));
  const double base = before.count(kSuccess) ? before.at(kSuccess) : 0.0;
  auto stream = client::InferStream::Open(client_->stub());
  std::vector<std::pair<std::string, std::string>> traces;  // trace id, caller span id
  for (int i = 0; i < 3; ++i) {
    traces.emplace_back(ToHex(server::telemetry::NewTraceId()), ToHex(server::telemetry::NewSpanId()));
    client::InferOptions options;
    options.id = "streamed-" + std::to_string(i);
    client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, std::string(64 * sizeof(float), '\0')};
    for (int k = 0; k < 64; ++k) {
      const float v = 0.25f * static_cast<float>(k % 7 + 1);
      std::memcpy(input.data.data() + k * sizeof(float), &v, sizeof(float));
    }
    inference::ModelInferRequest request = InferenceClient::BuildRequest("mlp", {input}, options);
    (*request.mutable_parameters())["traceparent"].set_string_param(
        "00-" + traces.back().first + "-" + traces.back().second + "-01");
    ASSERT_TRUE(stream->Send(std::move(request)));
  }
  stream->CloseSend();
  for (int i = 0; i < 3; ++i) {
    auto answer = stream->Next(absl::Seconds(30));
    ASSERT_TRUE(answer.has_value());
    ASSERT_TRUE(client::InferStream::Decode(answer->message).ok());
  }
  for (const auto& [trace_id, caller_span] : traces) {
    ASSERT_TRUE(WaitForTrace(trace_id, kSpansPerRequest)) << "spans of a streamed request never arrived";
    const std::vector<ReceivedSpan> spans = SpansOfTrace(trace_id);
    EXPECT_EQ(spans.size(), kSpansPerRequest) << "each request its own trace";
    int roots = 0;
    for (const ReceivedSpan& s : spans) {
      if (s.kind != 2) continue;
      ++roots;
      EXPECT_EQ(s.name, "ModelStreamInfer mlp");
      EXPECT_EQ(s.parent_span_id, caller_span);
    }
    EXPECT_EQ(roots, 1);
  }
  // Sent together, the three may share a batch: each executed batch is counted once, through one
  // of its requests, so the batch sizes still add up to three items.
  const std::string kItems = R"(chronoserve_batch_size_sum{model="mlp",version="1"})";
  const std::string kBatches = R"(chronoserve_batches_total{model="mlp",version="1"})";
  const std::string kSizes = R"(chronoserve_batch_size_count{model="mlp",version="1"})";
  const std::string kCompute = R"(chronoserve_compute_duration_seconds_count{model="mlp",version="1"})";
  auto delta = [&before](const std::map<std::string, double>& now, const std::string& key) {
    const double was = before.count(key) ? before.at(key) : 0.0;
    return now.count(key) ? now.at(key) - was : -1.0;
  };
  std::map<std::string, double> after;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    after = ParseMetrics(ScrapeMetrics(port));
    if (delta(after, kSuccess) >= 3 && delta(after, kItems) >= 3) break;
  }
  ASSERT_EQ(after.count(kSuccess), 1u);
  EXPECT_EQ(after.at(kSuccess) - base, 3);
  EXPECT_EQ(delta(after, kItems), 3);
  EXPECT_GE(delta(after, kBatches), 1);
  EXPECT_EQ(delta(after, kSizes), delta(after, kBatches));
  EXPECT_EQ(delta(after, kCompute), delta(after, kBatches));
  // Each streamed request left the in-flight gauge when its response went out (or with the call).
  const auto end = stream->Finish(absl::Seconds(30));
  ASSERT_TRUE(end.has_value() && end->ok());
  double inflight = -1;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline && inflight != 0;) {
    after = ParseMetrics(ScrapeMetrics(port));
    inflight = after.count("chronoserve_inflight_requests") ? after.at("chronoserve_inflight_requests") : -1;
  }
  EXPECT_EQ(inflight, 0);
}

// A tracestate belongs to its traceparent: a streamed request that carries only a tracestate
// parameter joins the stream's trace with the stream's tracestate, not a mix of the two; one with
// its own traceparent and tracestate keeps both.
TEST_F(TelemetryServerTest, AStreamedRequestsTracestateGoesOnlyWithItsOwnTraceparent) {
  const std::string stream_trace = ToHex(server::telemetry::NewTraceId());
  const std::string stream_span = ToHex(server::telemetry::NewSpanId());
  auto stream = client::InferStream::Open(
      client_->stub(), {{"traceparent", "00-" + stream_trace + "-" + stream_span + "-01"}, {"tracestate", "stream=s1"}});
  const std::string own_trace = ToHex(server::telemetry::NewTraceId());
  const std::string own_span = ToHex(server::telemetry::NewSpanId());
  for (int i = 0; i < 2; ++i) {
    client::InferOptions options;
    options.id = "tracestate-" + std::to_string(i);
    client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64}, std::string(64 * sizeof(float), '\0')};
    for (int k = 0; k < 64; ++k) {
      const float v = 0.5f * static_cast<float>(k % 5 + 1 + i);
      std::memcpy(input.data.data() + k * sizeof(float), &v, sizeof(float));
    }
    inference::ModelInferRequest request = InferenceClient::BuildRequest("mlp", {input}, options);
    auto& params = *request.mutable_parameters();
    if (i == 0) {
      params["tracestate"].set_string_param("request=r0");  // no traceparent of its own
    } else {
      params["traceparent"].set_string_param("00-" + own_trace + "-" + own_span + "-01");
      params["tracestate"].set_string_param("request=r1");
    }
    ASSERT_TRUE(stream->Send(std::move(request)));
  }
  stream->CloseSend();
  for (int i = 0; i < 2; ++i) {
    auto answer = stream->Next(absl::Seconds(30));
    ASSERT_TRUE(answer.has_value());
    ASSERT_TRUE(client::InferStream::Decode(answer->message).ok());
  }
  const auto root_of = [](const std::string& trace_id) -> std::optional<ReceivedSpan> {
    for (const ReceivedSpan& s : SpansOfTrace(trace_id)) {
      if (s.kind == 2) return s;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(WaitForTrace(stream_trace, kSpansPerRequest)) << "the stream-traced request's spans never arrived";
  ASSERT_TRUE(WaitForTrace(own_trace, kSpansPerRequest)) << "the self-traced request's spans never arrived";
  const std::optional<ReceivedSpan> joined = root_of(stream_trace);
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ(joined->parent_span_id, stream_span);
  EXPECT_EQ(joined->trace_state, "stream=s1");
  const std::optional<ReceivedSpan> own = root_of(own_trace);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->parent_span_id, own_span);
  EXPECT_EQ(own->trace_state, "request=r1");
  const auto end = stream->Finish(absl::Seconds(30));
  ASSERT_TRUE(end.has_value() && end->ok());
}

TEST_F(TelemetryServerTest, UnsampledCallerGetsNoSpansAndInvalidTraceparentStartsATrace) {
  const std::string unsampled = ToHex(server::telemetry::NewTraceId());
  ASSERT_TRUE(Infer({{"traceparent", "00-" + unsampled + "-00f067aa0ba902b7-00"}}).ok());
  ASSERT_TRUE(Infer({{"traceparent", "00-ZZf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
                    "bad-traceparent").ok());
  // Spans leave in order: once the second request's spans are in, the first's would be too.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const ReceivedSpan* fresh = nullptr;
  std::vector<ReceivedSpan> all;
  while (fresh == nullptr) {
    all = receiver_->spans();
    for (const ReceivedSpan& s : all) {
      auto it = s.attributes.find("chronoserve.request.id");
      if (it != s.attributes.end() && it->second == "bad-traceparent") fresh = &s;
    }
    if (fresh == nullptr) {
      ASSERT_TRUE(receiver_->WaitForSpans(all.size() + 1, deadline - absl::Now())) << "no span arrived";
    }
  }
  EXPECT_EQ(fresh->parent_span_id, "");  // a new trace, rooted here
  EXPECT_EQ(fresh->trace_id.size(), 32u);
  EXPECT_NE(fresh->trace_id, "00000000000000000000000000000000");
  EXPECT_TRUE(SpansOfTrace(unsampled).empty()) << "the caller said not sampled";
}

// W3C Trace Context: a request with two traceparent headers is treated as having an invalid one, so
// it starts a trace of its own, and the tracestate that went with them is dropped.
TEST_F(TelemetryServerTest, TwoTraceparentHeadersStartANewTrace) {
  const std::string first = ToHex(server::telemetry::NewTraceId());
  const std::string second = ToHex(server::telemetry::NewTraceId());
  ASSERT_TRUE(Infer({{"traceparent", "00-" + first + "-00f067aa0ba902b7-01"},
                     {"traceparent", "00-" + second + "-00f067aa0ba902b8-01"},
                     {"tracestate", "congo=t61rcWkgMzE"}},
                    "two-traceparents")
                  .ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::optional<ReceivedSpan> root;
  while (!root.has_value()) {
    const std::vector<ReceivedSpan> all = receiver_->spans();
    for (const ReceivedSpan& s : all) {
      auto it = s.attributes.find("chronoserve.request.id");
      if (it != s.attributes.end() && it->second == "two-traceparents" && s.kind == 2) root = s;
    }
    if (!root.has_value()) {
      ASSERT_TRUE(receiver_->WaitForSpans(all.size() + 1, deadline - absl::Now())) << "no span arrived";
    }
  }
  EXPECT_EQ(root->parent_span_id, "");  // rooted here
  EXPECT_NE(root->trace_id, first);
  EXPECT_NE(root->trace_id, second);
  EXPECT_EQ(root->trace_id.size(), 32u);
  EXPECT_EQ(root->trace_state, "") << "the tracestate went with the headers";
  EXPECT_EQ(root->flags & 0x300u, 0x100u) << "has-is-remote, not remote: there is no caller";
}

// Triton's TraceSetting through real gRPC, its effect seen in the spans the receiver decodes:
// trace_level OFF for one model stops its traces, a trace_count records that many, clearing a
// model's settings gives it the server-wide ones back. A model's requests finish on its one worker
// in order and spans leave in order, so once a later request's spans are in, an earlier one's
// would be too.
class TraceSettingServerTest : public TelemetryServerTest {
 protected:
  void TearDown() override {  // the shared server's mlp back to the server-wide settings
    Setting("mlp", {{"trace_level", {}}, {"trace_count", {}}, {"trace_rate", {}}}).IgnoreError();
  }
  absl::StatusOr<inference::TraceSettingResponse> Setting(const std::string& model, const server::TraceSettingsMap& changes) {
    return testing::CallTraceSetting(*client_, model, changes);
  }
  static std::string Value(const absl::StatusOr<inference::TraceSettingResponse>& r, const std::string& key) {
    return testing::SettingValue(r, key);
  }
  // A sampled request to mlp in trace `trace_id`.
  void Send(const std::string& trace_id) {
    ASSERT_TRUE(Infer({{"traceparent", "00-" + trace_id + "-00f067aa0ba902b7-01"}}).ok());
  }
};

TEST_F(TraceSettingServerTest, AModelsTraceLevelAndCountShapeItsSpans) {
  auto metadata = client_->ServerMetadata();
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_THAT(metadata->extensions(), ::testing::Contains("trace"));
  const auto global = Setting("", {});
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_EQ(global->settings().size(), 6u);
  EXPECT_EQ(Value(global, "trace_level"), "TIMESTAMPS");
  EXPECT_EQ(Value(global, "trace_rate"), "1");
  EXPECT_EQ(Value(global, "trace_count"), "-1");
  EXPECT_EQ(Value(global, "trace_mode"), "opentelemetry");

  EXPECT_EQ(Value(Setting("mlp", {{"trace_level", {"OFF"}}}), "trace_level"), "OFF");
  EXPECT_EQ(Value(Setting("", {}), "trace_level"), "TIMESTAMPS") << "the server-wide level is untouched";
  const std::string off = ToHex(server::telemetry::NewTraceId());
  Send(off);
  EXPECT_EQ(Value(Setting("mlp", {{"trace_level", {}}, {"trace_count", {"1"}}}), "trace_count"), "1");
  const std::string counted = ToHex(server::telemetry::NewTraceId());
  const std::string past_count = ToHex(server::telemetry::NewTraceId());
  Send(counted);
  Send(past_count);
  EXPECT_EQ(Value(Setting("mlp", {}), "trace_count"), "0");
  EXPECT_EQ(Value(Setting("mlp", {{"trace_count", {}}}), "trace_count"), "-1") << "the server-wide count again";
  const std::string after = ToHex(server::telemetry::NewTraceId());
  Send(after);
  ASSERT_TRUE(WaitForTrace(after, kSpansPerRequest)) << "the last request's spans never arrived";
  ASSERT_TRUE(WaitForTrace(counted, kSpansPerRequest));
  EXPECT_TRUE(SpansOfTrace(off).empty()) << "trace_level OFF for mlp";
  EXPECT_TRUE(SpansOfTrace(past_count).empty()) << "past mlp's trace_count";

  const auto unknown = Setting("no_such_model", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("no trace settings for model 'no_such_model'"));
  const auto tensors = Setting("mlp", {{"trace_level", {"TENSORS"}}});
  EXPECT_EQ(tensors.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tensors.status().message()), ::testing::HasSubstr("TENSORS is not served"));
}

}  // namespace
}  // namespace chronoserve
