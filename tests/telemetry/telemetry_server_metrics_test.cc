// TelemetryServerTest, metrics and serving: /metrics is scraped over HTTP and parsed as text
// (requests, batches, worker phases, keep-warm, GPU gauges), the serving warm-up leaves no trace in
// metrics or spans, and a taken metrics port does not stop inference. Suite set-up:
// telemetry_server_fixture.h.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/inference_client.h"
#include "common/clock.h"
#include "common/otlp/tracing_config.h"
#include "common/tcp_connect.h"
#include "server/grpc/serving_warmup.h"
#include "server/repository/model_config_loader.h"
#include "server/telemetry/request_tracer.h"
#include "server/telemetry/telemetry.h"
#include "tests/server/torch_reference.h"
#include "tests/telemetry/otlp_test_receiver.h"
#include "tests/telemetry/telemetry_server_fixture.h"

namespace chronoserve {
namespace {

using client::InferenceClient;
using server::telemetry::Telemetry;
using server::telemetry::TelemetryOptions;
using testing::kSpansPerRequest;
using testing::ParseMetrics;
using testing::ReceivedSpan;
using testing::ScrapeMetrics;
using testing::TelemetryServerTest;

TEST_F(TelemetryServerTest, MetricsCountEveryRequest) {
  const int port = telemetry_->metrics_port();
  const std::map<std::string, double> before = ParseMetrics(ScrapeMetrics(port));
  constexpr int kRequests = 10;
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(Infer({}).ok());
  // Metrics are recorded just after the response is sent, so the last one may trail the client, and
  // a scrape reads the families one after another while that request's counters move (its success
  // first, its batch's counters and histograms after): scrape until the last request is counted in
  // every series checked below (10 s at most; the checks then say which one is short).
  const std::string kSuccess = R"(chronoserve_requests_total{model="mlp",outcome="success",version="1"})";
  const std::vector<std::string> kPerBatch = {
      R"(chronoserve_batches_total{model="mlp",version="1"})",
      R"(chronoserve_compute_duration_seconds_count{model="mlp",version="1"})",
      R"(chronoserve_worker_batches_total{model="mlp",version="1",worker="0"})",
      R"(chronoserve_batches_inputs_in_place_total{model="mlp",version="1"})"};
  auto grown = [&](const std::map<std::string, double>& now, const std::string& key) {
    auto b = before.find(key);
    auto a = now.find(key);
    return (a == now.end() ? 0.0 : a->second) - (b == before.end() ? 0.0 : b->second);
  };
  auto settled = [&](const std::map<std::string, double>& now) {
    if (grown(now, kSuccess) < kRequests) return false;
    if (grown(now, R"(chronoserve_batch_size_sum{model="mlp",version="1"})") < kRequests) return false;
    for (const std::string& key : kPerBatch) {
      if (grown(now, key) != grown(now, kPerBatch[0])) return false;
    }
    return true;
  };
  std::string text;
  std::map<std::string, double> after;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    text = ScrapeMetrics(port);
    after = ParseMetrics(text);
    if (settled(after)) break;
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
  // The one worker ran every batch (its own counter, kept with request timing off too).
  EXPECT_EQ(delta(R"(chronoserve_worker_batches_total{model="mlp",version="1",worker="0"})"), batches);
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
  // The series exists from the load, at 0 (TELEMETRY.md), and stays there.
  const std::string kRequests = R"(chronoserve_requests_total{model="warm_mlp",outcome="success",version="1"})";
  ASSERT_EQ(after.count(kRequests), 1u) << text;
  EXPECT_EQ(after.at(kRequests), 0) << "keep-warm runs are no requests";
  const std::string kBatches = R"(chronoserve_batches_total{model="warm_mlp",version="1"})";
  ASSERT_EQ(after.count(kBatches), 1u) << text;
  EXPECT_EQ(after.at(kBatches), 0) << "nor batches of requests";
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
  // The worker's own count is of its work, as its phase times are: the warm-up's batches (at least
  // one: six requests, none merged with the client's, which came after them all) are in it.
  EXPECT_GE(delta(R"(chronoserve_worker_batches_total{model="mlp",version="1",worker="0"})"), 2);
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
  const client::Tensor input = testing::RandomMlpInput(rng_);
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

// /metrics on an IPv6 --host: tried there first; the wildcard and the loopback fall back to their
// IPv4 twins, since the CivetWeb behind /metrics may lack IPv6 (Debian 12's does).
TEST(MetricsListenAddressesTest, IPv6WildcardAndLoopbackFallBackToIPv4) {
  using server::telemetry::MetricsListenAddresses;
  EXPECT_THAT(MetricsListenAddresses("127.0.0.1", 9090), ::testing::ElementsAre("127.0.0.1:9090"));
  EXPECT_THAT(MetricsListenAddresses("::1", 0), ::testing::ElementsAre("[::1]:0", "127.0.0.1:0"));
  EXPECT_THAT(MetricsListenAddresses("::", 8002), ::testing::ElementsAre("[::]:8002", "0.0.0.0:8002"));
  EXPECT_THAT(MetricsListenAddresses("fe80::1", 8002), ::testing::ElementsAre("[fe80::1]:8002"));
}

// A Telemetry serving only /metrics, on `host` and a free port, started; null on failure.
std::unique_ptr<Telemetry> StartedMetricsOnly(const std::string& host) {
  TelemetryOptions options;
  options.metrics.host = host;
  options.metrics.port = 0;
  options.gpu.enabled = false;
  auto telemetry = Telemetry::Create(options);
  if (!telemetry.ok() || !(*telemetry)->Start().ok()) return nullptr;
  return *std::move(telemetry);
}

// With --host ::1 the endpoint is served (on [::1] or, without IPv6 in CivetWeb, on 127.0.0.1) and
// answers a scrape on whichever it took.
TEST(MetricsListenAddressesTest, AnIPv6LoopbackHostStillServesMetrics) {
  const std::unique_ptr<Telemetry> telemetry = StartedMetricsOnly("::1");
  ASSERT_NE(telemetry, nullptr);
  const int port = telemetry->metrics_port();
  ASSERT_GT(port, 0) << "no /metrics on [::1] or 127.0.0.1";
  const std::string text = ScrapeMetrics(port);  // 127.0.0.1
  const std::string text6 = text.empty() ? testing::ScrapeMetricsAt("::1", port) : text;
  EXPECT_NE(text6.find("# TYPE"), std::string::npos) << "a Prometheus text page";
  telemetry->Shutdown();
}

// Stopping /metrics does not wait out CivetWeb's poll step (up to 2 s, at every exit and after a
// start that failed): the shutdown wakes its listener, and the port is free after it.
TEST(MetricsEndpointTest, StopsWithoutWaitingOutCivetWebsPollStep) {
  // Up to three tries per host, judged by the fastest: a busy box may stall one shutdown, but the
  // 2 s step is taken every time.
  for (const char* host : {"127.0.0.1", "0.0.0.0"}) {
    absl::Duration fastest = absl::InfiniteDuration();
    for (int attempt = 0; attempt < 3 && fastest >= absl::Milliseconds(1500); ++attempt) {
      const std::unique_ptr<Telemetry> telemetry = StartedMetricsOnly(host);
      ASSERT_NE(telemetry, nullptr) << host;
      const int port = telemetry->metrics_port();
      ASSERT_GT(port, 0) << host;
      EXPECT_NE(ScrapeMetrics(port).find("# TYPE"), std::string::npos) << host;
      const absl::Time start = absl::Now();
      telemetry->Shutdown();
      fastest = std::min(fastest, absl::Now() - start);
      EXPECT_EQ(ScrapeMetrics(port), "") << host << ": stopped";
    }
    EXPECT_LT(fastest, absl::Milliseconds(1500)) << host << ": it took CivetWeb's 2 s step, three times";
  }
}

// At shutdown /metrics closes before the spans are flushed: with the collector down the flush
// takes until its deadline, and the metrics port used to stay bound all that time, so a server
// restarted on the same ports came up without /metrics for its whole life.
TEST(MetricsEndpointTest, ClosesBeforeTheSpanFlushWaitsForADeadCollector) {
  auto tracing = otlp::ResolveTracingConfig("127.0.0.1:1", "0.1.0", [](const char*) { return std::optional<std::string>(); });
  ASSERT_TRUE(tracing.ok()) << tracing.status();
  TelemetryOptions options;
  options.metrics.host = "127.0.0.1";
  options.metrics.port = 0;
  options.gpu.enabled = false;
  options.tracing = *tracing;
  auto telemetry = Telemetry::Create(options);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  ASSERT_TRUE((*telemetry)->Start().ok());
  const int port = (*telemetry)->metrics_port();
  ASSERT_GT(port, 0);
  server::ModelSpec spec;
  spec.name = "m";
  spec.version = 1;
  server::InferRequest request;  // one queued request's spans, which no collector will take
  const int64_t now = SteadyClock::Get()->NowNs();
  request.timeline.received_ns = now - 50'000;
  request.timeline.enqueued_ns = now - 40'000;
  (*telemetry)->OnRequestDone(spec, &request, request.timeline.Finalize(now), absl::InvalidArgumentError("bad input"));
  // Whether the port still accepts a connection: a plain connect, not a scrape (an HTTP request
  // that reaches a listener being stopped may wait for an answer that never comes).
  auto listening = [port] {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addrinfo info{};
    info.ai_family = AF_INET;
    info.ai_socktype = SOCK_STREAM;
    info.ai_addr = reinterpret_cast<sockaddr*>(&address);
    info.ai_addrlen = sizeof(address);
    return ConnectWithin(info, 200) == 0;
  };
  ASSERT_TRUE(listening());
  const absl::Time start = absl::Now();
  // The flush waits 8 s for the dead collector; the port closes in milliseconds, so a bound of 5 s
  // leaves a busy box room and still tells the two apart.
  auto shutdown = std::async(std::launch::async, [&] { (*telemetry)->Shutdown(absl::Now() + absl::Seconds(8)); });
  // Polled, not slept: a connect is refused at once once the port is closed.
  while (listening() && absl::Now() - start < absl::Seconds(7)) {
  }
  const absl::Duration closed_after = absl::Now() - start;
  EXPECT_FALSE(listening()) << "the metrics port is still open";
  EXPECT_LT(closed_after, absl::Seconds(5)) << "the metrics port waited for the span flush";
  if (shutdown.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "Shutdown did not return within 30 s; aborting (the future's destructor would wait for ever)";
    std::abort();
  }
}

}  // namespace
}  // namespace chronoserve
