// OtlpGrpcExporter + BatchSpanProcessor against a real OTLP receiver written by others (node,
// @grpc/grpc-js, @opentelemetry/otlp-transformer's codec): the wire format decodes, retries happen
// only on retryable codes, and a receiver that is down costs bounded, counted drops and no stall;
// the encoder's resource on its own.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>

#include "absl/time/clock.h"
#include "common/otlp/batch_span_processor.h"
#include "common/otlp/otlp_encoder.h"
#include "common/otlp/otlp_grpc_exporter.h"
#include "common/otlp/tracing_config.h"
#include "server/telemetry/request_tracer.h"
#include "tests/telemetry/otlp_test_receiver.h"

namespace chronoserve::server::telemetry {
namespace {

using otlp::BatchSpanProcessor;
using otlp::BatchSpanProcessorOptions;
using otlp::OtlpGrpcExporter;
using otlp::OtlpGrpcExporterOptions;
using otlp::SpanData;
using otlp::SpanKind;
using otlp::SpanProcessorStats;
using otlp::SpanStatus;

using chronoserve::testing::OtlpTestReceiver;

OtlpGrpcExporterOptions Options(const std::string& endpoint) {
  OtlpGrpcExporterOptions o;
  o.endpoint = endpoint;
  o.resource.service_name = "exporter-test";
  o.resource.service_version = "9.9";
  o.retry.initial_backoff = absl::Milliseconds(10);
  o.retry.max_backoff = absl::Milliseconds(50);
  return o;
}

// A TCP socket bound to a free port on 127.0.0.1, closed with the object. Listening, it is a
// collector that accepts the connection and never answers (the kernel completes the handshake for a
// socket nobody accepts on, and no HTTP/2 ever comes back); not listening, one that refuses it (the
// port stays bound, so no parallel test can take it). port() is 0 when the socket could not be had.
class LoopbackSocket {
 public:
  explicit LoopbackSocket(bool listening) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        (listening && listen(fd_, 16) != 0) || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~LoopbackSocket() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
};

SpanData TestSpan(const TraceId& trace, const char* name) {
  SpanData s;
  s.trace_id = trace;
  s.span_id = NewSpanId();
  s.name = name;
  s.kind = SpanKind::kServer;
  s.flags = kTraceFlagSampled;
  s.start_unix_ns = 1'700'000'000'123'456'789;
  s.end_unix_ns = 1'700'000'000'123'999'999;
  s.attributes = {{"an.int", int64_t{-42}}, {"a.bool", true}, {"a.string", std::string("ok")},
                  {"a.double", 0.5}};
  s.status = SpanStatus::kError;
  s.status_message = "boom";
  return s;
}

TEST(OtlpEncoderTest, ResourceKeysAreUniqueAndTheUsersValuesWin) {
  otlp::OtlpResource resource;
  resource.service_name = "svc";
  resource.service_version = "0.1.0";
  resource.attributes = {{"service.version", "2.0"}, {"telemetry.sdk.language", "c++"}, {"team", "ml"}};
  const auto request = otlp::EncodeExportRequest(resource, {TestSpan(NewTraceId(), "one")});
  ASSERT_EQ(request.resource_spans_size(), 1);
  std::map<std::string, std::string> got;
  for (const auto& kv : request.resource_spans(0).resource().attributes()) {
    EXPECT_TRUE(got.emplace(kv.key(), kv.value().string_value()).second) << "duplicate key " << kv.key();
  }
  const std::map<std::string, std::string> want = {{"service.name", "svc"},
                                                   {"service.version", "2.0"},
                                                   {"telemetry.sdk.name", "chronoserve"},
                                                   {"telemetry.sdk.language", "c++"},
                                                   {"team", "ml"}};
  EXPECT_EQ(got, want);
  // The instrumentation scope stays chronoserve's own version.
  EXPECT_EQ(request.resource_spans(0).scope_spans(0).scope().version(), "0.1.0");
}

TEST(OtlpExporterTest, ReceiverDecodesWhatWeSend) {
  auto receiver = OtlpTestReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto exporter = OtlpGrpcExporter::Create(Options((*receiver)->endpoint()));
  ASSERT_TRUE(exporter.ok());
  const TraceId trace = NewTraceId();
  std::vector<SpanData> spans = {TestSpan(trace, "one"), TestSpan(trace, "two")};
  spans[1].parent_span_id = spans[0].span_id;
  ASSERT_TRUE((*exporter)->Export(spans, absl::Now() + absl::Seconds(30)).ok());
  ASSERT_TRUE((*receiver)->WaitForSpans(2, absl::Seconds(30)));
  const auto got = (*receiver)->spans();
  EXPECT_EQ(got[0].trace_id, ToHex(trace));
  EXPECT_EQ(got[0].span_id, ToHex(spans[0].span_id));
  EXPECT_EQ(got[0].parent_span_id, "");
  EXPECT_EQ(got[1].parent_span_id, ToHex(spans[0].span_id));
  EXPECT_EQ(got[0].name, "one");
  EXPECT_EQ(got[0].kind, 2);  // SPAN_KIND_SERVER
  EXPECT_EQ(got[0].status, 2);  // STATUS_CODE_ERROR
  EXPECT_EQ(got[0].flags, 1u);
  EXPECT_EQ(got[0].start_ns, 1'700'000'000'123'456'789);
  EXPECT_EQ(got[0].end_ns, 1'700'000'000'123'999'999);
  EXPECT_EQ(got[0].attributes.at("an.int"), "-42");
  EXPECT_EQ(got[0].attributes.at("a.bool"), "true");
  EXPECT_EQ(got[0].attributes.at("a.string"), "ok");
  EXPECT_EQ(got[0].attributes.at("a.double"), "0.5");
  EXPECT_EQ(got[0].resource.at("service.name"), "exporter-test");
  EXPECT_EQ(got[0].resource.at("service.version"), "9.9");
  EXPECT_EQ(got[0].scope, "chronoserve");
}

TEST(OtlpExporterTest, RetriesRetryableCodes) {
  auto receiver = OtlpTestReceiver::Start(0, /*fail_first=*/2, /*fail_code=*/14);  // UNAVAILABLE
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto exporter = OtlpGrpcExporter::Create(Options((*receiver)->endpoint()));
  ASSERT_TRUE(exporter.ok());
  EXPECT_TRUE((*exporter)->Export({TestSpan(NewTraceId(), "x")}, absl::Now() + absl::Seconds(30)).ok());
  // The receiver reports each answered call on its own output, which may trail the answer.
  EXPECT_TRUE((*receiver)->WaitForExports(3, absl::Seconds(10)));
  EXPECT_EQ((*receiver)->export_calls(), 3u);
}

TEST(OtlpExporterTest, DoesNotRetryOtherCodes) {
  auto receiver = OtlpTestReceiver::Start(0, /*fail_first=*/5, /*fail_code=*/3);  // INVALID_ARGUMENT
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto exporter = OtlpGrpcExporter::Create(Options((*receiver)->endpoint()));
  ASSERT_TRUE(exporter.ok());
  const absl::Status s =
      (*exporter)->Export({TestSpan(NewTraceId(), "x")}, absl::Now() + absl::Seconds(30)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // Every call was answered before Export returned; the receiver's report of it may trail.
  EXPECT_TRUE((*receiver)->WaitForExports(1, absl::Seconds(10)));
  EXPECT_EQ((*receiver)->export_calls(), 1u);
}

TEST(OtlpExporterTest, PartialSuccessReportsTheRejectedSpans) {
  auto receiver = OtlpTestReceiver::Start(0, 0, 14, /*reject_spans=*/2);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto exporter = OtlpGrpcExporter::Create(Options((*receiver)->endpoint()));
  ASSERT_TRUE(exporter.ok());
  const TraceId trace = NewTraceId();
  const auto result = (*exporter)->Export({TestSpan(trace, "a"), TestSpan(trace, "b"), TestSpan(trace, "c")},
                                          absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rejected_spans, 2);
  EXPECT_EQ(result->error_message, "test receiver: rejecting on purpose");
  // A partial success is an answer: not retried.
  EXPECT_TRUE((*receiver)->WaitForExports(1, absl::Seconds(10)));
  EXPECT_EQ((*receiver)->export_calls(), 1u);
}

TEST(OtlpExporterTest, SpansTheCollectorRejectsAreNotCountedAsExported) {
  auto receiver = OtlpTestReceiver::Start(0, 0, 14, /*reject_spans=*/1);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  auto exporter = OtlpGrpcExporter::Create(Options((*receiver)->endpoint()));
  ASSERT_TRUE(exporter.ok());
  BatchSpanProcessorOptions options;
  options.max_export_batch_size = 4;
  options.schedule_delay = absl::Hours(1);
  BatchSpanProcessor processor(*std::move(exporter), options);
  processor.Start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(processor.OnEnd({TestSpan(NewTraceId(), "a"), TestSpan(NewTraceId(), "b")}));
  ASSERT_TRUE(processor.ForceFlush(absl::Now() + absl::Seconds(30)));
  processor.Shutdown(absl::Now() + absl::Seconds(10));
  const SpanProcessorStats s = processor.stats();
  EXPECT_EQ(s.export_calls, 2u);  // 4 spans, then 2: one rejected in each
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.exported, 6u - 2u);
  EXPECT_EQ(s.export_failed, 0u);
}

TEST(OtlpExporterTest, HeadersArriveAsRequestMetadata) {
  auto receiver = OtlpTestReceiver::Start();
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  // As ResolveTracingConfig makes them from OTEL_EXPORTER_OTLP_HEADERS.
  auto config = otlp::ResolveTracingConfig(
      (*receiver)->endpoint(), "", [](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "OTEL_EXPORTER_OTLP_HEADERS") return "API-Key=s3cret,x-tenant=lab%2C%20a";
        return std::nullopt;
      });
  ASSERT_TRUE(config.ok()) << config.status();
  OtlpGrpcExporterOptions options = Options((*receiver)->endpoint());
  options.headers = config->exporter.headers;
  auto exporter = OtlpGrpcExporter::Create(options);
  ASSERT_TRUE(exporter.ok());
  ASSERT_TRUE((*exporter)->Export({TestSpan(NewTraceId(), "x")}, absl::Now() + absl::Seconds(30)).ok());
  ASSERT_TRUE((*receiver)->WaitForExports(1, absl::Seconds(10)));
  const auto metadata = (*receiver)->export_metadata();
  ASSERT_EQ(metadata.size(), 1u);
  ASSERT_EQ(metadata[0].count("api-key"), 1u);
  ASSERT_EQ(metadata[0].count("x-tenant"), 1u);
  EXPECT_EQ(metadata[0].at("api-key"), "s3cret");
  EXPECT_EQ(metadata[0].at("x-tenant"), "lab, a");
}

TEST(OtlpExporterTest, TimeoutBoundsEachAttempt) {
  const LoopbackSocket silent(/*listening=*/true);  // accepts the connection, never answers
  ASSERT_GT(silent.port(), 0);
  OtlpGrpcExporterOptions options = Options(silent.endpoint());
  options.timeout = absl::Milliseconds(300);
  options.retry.max_attempts = 2;
  auto exporter = OtlpGrpcExporter::Create(options);
  ASSERT_TRUE(exporter.ok());
  const absl::Time start = absl::Now();
  const auto result = (*exporter)->Export({TestSpan(NewTraceId(), "x")}, start + absl::Seconds(30));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  // Two attempts of 300 ms and one backoff of at most 50 ms, far below the 30 s export deadline.
  EXPECT_GE(took, absl::Milliseconds(600));
  EXPECT_LT(took, absl::Seconds(10));
}

// OTEL_EXPORTER_OTLP_TIMEOUT=0 (no limit) gives an infinite per-attempt timeout: accepted, and the
// export's own deadline still ends an attempt on a collector that never answers.
TEST(OtlpExporterTest, NoPerAttemptTimeoutLeavesTheExportsDeadline) {
  const LoopbackSocket silent(/*listening=*/true);
  ASSERT_GT(silent.port(), 0);
  OtlpGrpcExporterOptions options = Options(silent.endpoint());
  options.timeout = absl::InfiniteDuration();
  auto exporter = OtlpGrpcExporter::Create(options);
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const absl::Time start = absl::Now();
  const auto result = (*exporter)->Export({TestSpan(NewTraceId(), "x")}, start + absl::Milliseconds(500));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(OtlpExporterTest, ReceiverDownCostsBoundedCountedDropsAndNoStall) {
  // A port nobody listens on, bound for the whole test: connections are refused.
  const LoopbackSocket refusing(/*listening=*/false);
  ASSERT_GT(refusing.port(), 0);
  auto exporter = OtlpGrpcExporter::Create(Options(refusing.endpoint()));
  ASSERT_TRUE(exporter.ok());
  BatchSpanProcessorOptions options;
  options.max_queue_size = 64;
  options.max_export_batch_size = 16;
  BatchSpanProcessor processor(*std::move(exporter), options);
  processor.Start();
  const absl::Time start = absl::Now();
  absl::Duration worst = absl::ZeroDuration();
  constexpr int kRequests = 5000;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<SpanData> spans = {TestSpan(NewTraceId(), "a"), TestSpan(NewTraceId(), "b")};
    const absl::Time t0 = absl::Now();
    processor.OnEnd(std::move(spans));
    worst = std::max(worst, absl::Now() - t0);
  }
  // The total bounds the waiting (5000 calls in 9 s); one call is only bounded loosely, below an
  // export attempt's 10 s timeout: on a loaded 2-core machine a single call can be descheduled for
  // far longer than the 50 ms this once required.
  EXPECT_LT(worst, absl::Seconds(8)) << "OnEnd waited on the exporter";
  EXPECT_LT(absl::Now() - start, absl::Seconds(9)) << "OnEnd waited on the exporter";
  processor.Shutdown(absl::Now() + absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << "shutdown ignored its deadline";
  const SpanProcessorStats s = processor.stats();
  EXPECT_EQ(s.exported, 0u);
  const uint64_t refused = 2u * kRequests - s.accepted;  // dropped by OnEnd: queue full
  EXPECT_GE(s.dropped, refused);
  EXPECT_GT(refused, 0u);
  // Every accepted span is accounted for: lost in a failed export or dropped at shutdown.
  EXPECT_EQ(s.accepted, s.export_failed + (s.dropped - refused));
}

}  // namespace
}  // namespace chronoserve::server::telemetry
