// The real server on 127.0.0.1 with telemetry: requests carry a W3C traceparent, an OTLP receiver
// written by others decodes the spans, and /metrics is scraped over HTTP and parsed as text.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "server/grpc/serving_warmup.h"
#include "server/repository/model_config_loader.h"
#include "server/server.h"
#include "server/telemetry/gpu_sampler.h"
#include "server/telemetry/request_tracer.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"
#include "tests/telemetry/otlp_test_receiver.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using server::telemetry::Telemetry;
using server::telemetry::TelemetryOptions;
using testing::OtlpTestReceiver;
using testing::ReceivedSpan;

// One GPU that reads 1980 MHz: the GPU gauges without a GPU.
class FakeGpu final : public server::telemetry::GpuSampler {
 public:
  int DeviceCount() const override { return 1; }
  std::string Description() const override { return "fake GPU"; }
  absl::StatusOr<server::telemetry::GpuSample> Sample(int) override {
    server::telemetry::GpuSample s;
    s.sm_clock_mhz = 1980;
    s.power_mw = 250000;
    s.memory_used_bytes = 1 << 30;
    return s;
  }
};

// GET http://127.0.0.1:port/metrics; the body, or "" on failure (10 s receive timeout).
std::string ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// Prometheus text format -> "name{k="v",...}" -> value (labels as the exposer wrote them).
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) continue;
    out[std::string(line.substr(0, space))] = value;
  }
  return out;
}

class TelemetryServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new testing::TempDir("cs_telemetry");
    examples::ModelOptions mlp;
    mlp.max_batch_size = 8;
    mlp.max_queue_delay_us = 1000;
    // The metrics test asserts what a CPU worker does (no pipelining, nothing launch-bound): KIND_CPU
    // keeps that true on a machine where a GPU is visible.
    mlp.instance_kind = "KIND_CPU";
    ASSERT_TRUE(examples::WriteMlp(repo_->path(), "mlp", mlp).ok());
    examples::ModelOptions warm = mlp;  // keep-warm every 5 ms while idle, for its metric
    warm.extra_config = "parameters { key: \"keep_warm_ms\" value { string_value: \"5\" } }\n";
    ASSERT_TRUE(examples::WriteMlp(repo_->path(), "warm_mlp", warm).ok());
    started_ = absl::Now();
    auto receiver = OtlpTestReceiver::Start();
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = receiver->release();

    TelemetryOptions options;
    options.tracing.enabled = true;
    options.tracing.exporter.endpoint = receiver_->endpoint();
    options.tracing.exporter.resource.service_name = "chronoserve-test";
    options.tracing.processor.schedule_delay = absl::Milliseconds(20);
    options.metrics.host = "127.0.0.1";
    options.metrics.port = 0;
    options.gpu.sampler_for_test = std::make_shared<FakeGpu>();
    auto telemetry = Telemetry::Create(options);
    ASSERT_TRUE(telemetry.ok()) << telemetry.status();
    telemetry_ = telemetry->release();
    server_ = StartServer(telemetry_).release();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(telemetry_->metrics_port(), 0);
  }
  static void TearDownTestSuite() {
    delete server_;  // flushes telemetry last
    delete telemetry_;
    delete receiver_;
    delete repo_;
  }

  static std::unique_ptr<server::Server> StartServer(Telemetry* telemetry) {
    server::ServerOptions options;
    options.model_repository = repo_->path();
    options.grpc_port = 0;
    options.exit_timeout_secs = 10;
    options.warmup.runs_per_batch_size = 1;
    options.telemetry = telemetry;
    auto server = server::Server::Create(options);
    if (!server.ok() || !(*server)->Start().ok()) return nullptr;
    return *std::move(server);
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = InferenceClient::Connect("127.0.0.1:" + std::to_string(server_->port()));
  }

  // One MLP request with random (never all-zero) input and the given metadata.
  absl::StatusOr<client::InferResult> Infer(std::map<std::string, std::string> metadata, const std::string& id = "") {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> values(64);
    for (float& v : values) v = dist(rng_);
    client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64},
                         std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float))};
    client::InferOptions options;
    options.id = id;
    options.metadata = std::move(metadata);
    options.timeout = std::chrono::milliseconds(30000);
    return client_->Infer("mlp", {input}, options);
  }

  static std::vector<ReceivedSpan> SpansOfTrace(const std::string& trace_id) {
    std::vector<ReceivedSpan> out;
    for (const ReceivedSpan& s : receiver_->spans()) {
      if (s.trace_id == trace_id) out.push_back(s);
    }
    return out;
  }

  // Waits (30 s at most) until trace `trace_id` has `n` spans.
  static bool WaitForTrace(const std::string& trace_id, size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (true) {
      // Count in one snapshot, then wait for anything newer than that snapshot.
      const std::vector<ReceivedSpan> all = receiver_->spans();
      size_t have = 0;
      for (const ReceivedSpan& s : all) have += s.trace_id == trace_id ? 1 : 0;
      if (have >= n) return true;
      if (!receiver_->WaitForSpans(all.size() + 1, deadline - absl::Now())) return false;
    }
  }

  static inline testing::TempDir* repo_ = nullptr;
  static inline OtlpTestReceiver* receiver_ = nullptr;
  static inline Telemetry* telemetry_ = nullptr;
  static inline server::Server* server_ = nullptr;
  static inline absl::Time started_;  // before the server started
  std::unique_ptr<InferenceClient> client_;
  std::mt19937 rng_{20261122};
};

constexpr size_t kSpansPerRequest = 7;  // server + queue, input_stage, h2d, compute, d2h, output_stage

TEST_F(TelemetryServerTest, SpansJoinTheCallersTraceAndNestInsideTheServerSpan) {
  for (int i = 0; i < 4; ++i) {
    const std::string trace_id = ToHex(server::telemetry::NewTraceId());
    const std::string caller_span = ToHex(server::telemetry::NewSpanId());
    // Odd requests: the caller's trace id is random (W3C Level 2 flag 0x02), which the spans carry.
    const uint32_t trace_flags = i % 2 == 0 ? 0x01 : 0x03;
    const int64_t before_send_unix_ns = absl::ToUnixNanos(absl::Now());
    auto result = Infer({{"traceparent", "00-" + trace_id + "-" + caller_span + (i % 2 == 0 ? "-01" : "-03")},
                         {"tracestate", "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"}});
    const int64_t after_receive_unix_ns = absl::ToUnixNanos(absl::Now());
    ASSERT_TRUE(result.ok()) << result.status();
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
    // On the wall clock the server span lies inside the client's call (same host, same clock).
    EXPECT_GE(root->start_ns, before_send_unix_ns);
    EXPECT_LE(root->end_ns, after_receive_unix_ns);
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
    EXPECT_EQ(names, (std::set<std::string>{"queue", "input_stage", "h2d", "compute", "d2h", "output_stage"}));
    for (const ReceivedSpan& s : spans) {
      if (s.name == "compute") {
        EXPECT_EQ(s.attributes.at("chronoserve.duration_ns"), std::to_string(result->timing->compute_ns));
      }
      if (s.name == "queue") EXPECT_EQ(s.end_ns - s.start_ns, result->timing->queue_ns);
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

TEST_F(TelemetryServerTest, MetricsCountEveryRequest) {
  const int port = telemetry_->metrics_port();
  const std::map<std::string, double> before = ParseMetrics(ScrapeMetrics(port));
  constexpr int kRequests = 10;
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(Infer({}).ok());
  // Metrics are recorded just after the response is sent, so the last one may trail the client:
  // scrape until the count is complete (10 s at most).
  const std::string kSuccess = R"(chronoserve_requests_total{model="mlp",outcome="success",version="1"})";
  const double base = before.count(kSuccess) ? before.at(kSuccess) : 0.0;
  std::string text;
  std::map<std::string, double> after;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    text = ScrapeMetrics(port);
    after = ParseMetrics(text);
    if (after.count(kSuccess) && after.at(kSuccess) - base >= kRequests) break;
  }
  auto delta = [&](const std::string& key) {
    auto b = before.find(key);
    auto a = after.find(key);
    EXPECT_NE(a, after.end()) << key << " missing from:\n" << text;
    return (a == after.end() ? 0.0 : a->second) - (b == before.end() ? 0.0 : b->second);
  };
  EXPECT_EQ(delta(R"(chronoserve_requests_total{model="mlp",outcome="success",version="1"})"), kRequests);
  EXPECT_EQ(delta(R"(chronoserve_request_duration_seconds_count{model="mlp",version="1"})"), kRequests);
  EXPECT_EQ(delta(R"(chronoserve_queue_duration_seconds_count{model="mlp",version="1"})"), kRequests);
  // One item per request: the executed batches hold exactly kRequests items.
  EXPECT_EQ(delta(R"(chronoserve_batch_size_sum{model="mlp",version="1"})"), kRequests);
  const double batches = delta(R"(chronoserve_batches_total{model="mlp",version="1"})");
  EXPECT_GE(batches, 1);
  EXPECT_LE(batches, kRequests);
  EXPECT_EQ(delta(R"(chronoserve_compute_duration_seconds_count{model="mlp",version="1"})"), batches);
  // One request at a time: each batch's input is that request's region of the input arena, used
  // where the receiving thread put it.
  EXPECT_EQ(delta(R"(chronoserve_batches_inputs_in_place_total{model="mlp",version="1"})"), batches);
  EXPECT_EQ(after.count(R"(chronoserve_queue_depth{model="mlp",version="1"})"), 1u);
  EXPECT_EQ(after.count("chronoserve_inflight_requests"), 1u);
  EXPECT_GT(after.at(R"(chronoserve_model_warmup_duration_seconds{model="mlp",version="1"})"), 0);
  EXPECT_EQ(after.at(R"(chronoserve_gpu_sm_clock_hertz{gpu="0"})"), 1980e6);
  EXPECT_EQ(after.at(R"(chronoserve_gpu_power_watts{gpu="0"})"), 250);
  EXPECT_EQ(after.count(R"(chronoserve_gpu_temperature_celsius{gpu="0"})"), 0u);  // unreadable: absent
  EXPECT_EQ(after.count("chronoserve_trace_spans_dropped_total"), 1u);

  // Worker time by phase: the mlp's CPU worker executes its batches whole (not pipelined), and the
  // phases of one worker never add up to more than the time since the server started.
  auto phase = [&](const std::string& model, const std::string& name) {
    const std::string key = absl::StrCat("chronoserve_worker_seconds_total{model=\"", model, "\",phase=\"", name,
                                         "\",version=\"1\",worker=\"0\"}");
    EXPECT_EQ(after.count(key), 1u) << key << " missing from:\n" << text;
    return after.count(key) ? after.at(key) : -1.0;
  };
  EXPECT_GT(delta(R"(chronoserve_worker_seconds_total{model="mlp",phase="execute",version="1",worker="0"})"), 0);
  EXPECT_GT(delta(R"(chronoserve_worker_seconds_total{model="mlp",phase="complete",version="1",worker="0"})"), 0);
  double total = 0;
  for (const char* name : {"wait", "take", "execute", "gather", "launch", "finish", "complete", "keep_warm"}) {
    const double seconds = phase("mlp", name);
    EXPECT_GE(seconds, 0) << name;
    total += seconds;
  }
  EXPECT_GT(phase("mlp", "wait"), 0);
  EXPECT_EQ(phase("mlp", "gather"), 0) << "a CPU worker does not pipeline";
  EXPECT_EQ(phase("mlp", "launch"), 0) << "a CPU worker does not pipeline";
  EXPECT_EQ(phase("mlp", "keep_warm"), 0) << "mlp has no keep_warm_ms";
  EXPECT_LE(total, absl::ToDoubleSeconds(absl::Now() - started_));
  // On the CPU nothing is device-timed, so no batch is launch-bound.
  EXPECT_EQ(after.at(R"(chronoserve_launch_bound_batches_total{model="mlp",version="1",worker="0"})"), 0);
  EXPECT_EQ(after.at(R"(chronoserve_worker_launch_bound{model="mlp",version="1",worker="0"})"), 0);
  EXPECT_EQ(after.at(R"(chronoserve_keep_warm_runs_total{model="mlp",version="1",worker="0"})"), 0);
}

// Keep-warm runs (warm_mlp: keep_warm_ms 5) are counted in their own metric and its worker's
// keep_warm time, and in no request metric.
TEST_F(TelemetryServerTest, KeepWarmRunsAreCounted) {
  const int port = telemetry_->metrics_port();
  const std::string kRuns = R"(chronoserve_keep_warm_runs_total{model="warm_mlp",version="1",worker="0"})";
  std::map<std::string, double> after;
  std::string text;
  // The worker has been idle since READY: runs arrive every 5 ms (30 s at most).
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    text = ScrapeMetrics(port);
    after = ParseMetrics(text);
    if (after.count(kRuns) && after.at(kRuns) >= 2) break;
  }
  ASSERT_EQ(after.count(kRuns), 1u) << text;
  EXPECT_GE(after.at(kRuns), 2);
  EXPECT_GT(after.at(R"(chronoserve_worker_seconds_total{model="warm_mlp",phase="keep_warm",version="1",worker="0"})"),
            0);
  EXPECT_EQ(after.count(R"(chronoserve_requests_total{model="warm_mlp",outcome="success",version="1"})"), 0u)
      << "keep-warm runs are no requests";
}

// The server's serving warm-up (its own token) leaves no metric and no span: after one client
// request that follows it, the counters moved by exactly that request and every span begun since
// the warm-up started is that request's.
TEST_F(TelemetryServerTest, ServingWarmupIsNeitherCountedNorTraced) {
  const int port = telemetry_->metrics_port();
  const std::map<std::string, double> before = ParseMetrics(ScrapeMetrics(port));
  // Earlier tests' spans may still arrive: only spans of requests begun from here on are looked at.
  const int64_t warmup_start_unix_ns = absl::ToUnixNanos(absl::Now());
  auto spec = server::LoadModelDirectory(repo_->path() + "/mlp");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const server::ServingWarmupReport warm = server::RunServingWarmup(
      "127.0.0.1:" + std::to_string(server_->port()), {*spec}, server_->serving_warmup_token(), 2, absl::Seconds(60));
  ASSERT_EQ(warm.sent, 6);  // 2 at batch 1, 2 at batch 8, a stream of 2
  ASSERT_EQ(warm.failed, 0) << warm.first_error;

  const std::string trace_id = ToHex(server::telemetry::NewTraceId());
  ASSERT_TRUE(Infer({{"traceparent", "00-" + trace_id + "-" + ToHex(server::telemetry::NewSpanId()) + "-01"}}).ok());
  // Spans leave in order: once this request's spans are in, the warm-up's would be too.
  ASSERT_TRUE(WaitForTrace(trace_id, kSpansPerRequest)) << "the request's spans never arrived";
  size_t checked = 0;
  for (const ReceivedSpan& span : receiver_->spans()) {
    if (span.start_ns < warmup_start_unix_ns) continue;
    ++checked;
    EXPECT_EQ(span.trace_id, trace_id) << "a span of another trace: " << span.name;
  }
  // The request's own spans begun after the warm-up started: without them the check above looked
  // at nothing (spans placed before their request, or none received).
  EXPECT_GE(checked, kSpansPerRequest);
  const std::string kSuccess = R"(chronoserve_requests_total{model="mlp",outcome="success",version="1"})";
  const double base = before.count(kSuccess) ? before.at(kSuccess) : 0.0;
  std::map<std::string, double> after;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    after = ParseMetrics(ScrapeMetrics(port));
    if (after.count(kSuccess) && after.at(kSuccess) - base >= 1) break;
  }
  auto delta = [&](const std::string& key) {
    return (after.count(key) ? after.at(key) : 0.0) - (before.count(key) ? before.at(key) : 0.0);
  };
  EXPECT_EQ(delta(kSuccess), 1);
  EXPECT_EQ(delta(R"(chronoserve_batches_total{model="mlp",version="1"})"), 1);
  EXPECT_EQ(delta(R"(chronoserve_batch_size_sum{model="mlp",version="1"})"), 1);
}

TEST_F(TelemetryServerTest, ServesInferenceWhenTheMetricsPortIsTaken) {
  TelemetryOptions options;
  options.metrics.host = "127.0.0.1";
  options.metrics.port = telemetry_->metrics_port();  // already bound by the suite's server
  options.gpu.enabled = false;
  auto telemetry = Telemetry::Create(options);
  ASSERT_TRUE(telemetry.ok());
  auto second = StartServer(telemetry->get());
  ASSERT_NE(second, nullptr);
  EXPECT_EQ((*telemetry)->metrics_port(), 0);  // logged error, no endpoint
  auto other = InferenceClient::Connect("127.0.0.1:" + std::to_string(second->port()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(64);
  for (float& v : values) v = dist(rng_);
  client::Tensor input{"INPUT__0", DataType::kFp32, {1, 64},
                       std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float))};
  client::InferOptions call;
  call.timeout = std::chrono::milliseconds(30000);
  auto result = other->Infer("mlp", {input}, call);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 1u);
  const auto want = testing::TorchReference(repo_->path() + "/mlp/1/model.pt", {input});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(testing::ReferenceMismatch(result->outputs[0].data, want[0]), "");
  second.reset();
}

}  // namespace
}  // namespace chronoserve
